"""Rules for NumPy's elementwise functions (ufuncs and their relatives).

Differentiable, for arrays, NumPy scalars, Python numbers and array-like lists
(with broadcasting; a gradient has its argument's shape and floating dtype, so
float32 stays float32; integer and boolean arguments get None):
    exp exp2 expm1 log log2 log10 log1p sqrt cbrt square reciprocal sin cos tan
    arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh deg2rad radians
    rad2deg degrees negative positive sinc — from the table `UNARY`;
    abs/absolute (``sign(x)``, 0 at 0; ``x / |x|`` for complex, 0 at 0) sign (zero
    gradient for reals — its derivative is 0 except at 0; for complex ``z / |z|``
    the derivative of that) conj/conjugate real imag angle;
    add subtract multiply divide/true_divide mod/remainder fmod power float_power
    arctan2 hypot logaddexp logaddexp2 copysign (gradient to the magnitude only)
    — from the table `BINARY`; fabs; heaviside (x2 where x1 == 0) ldexp (x1) and
    the ufuncs with two outputs modf frexp divmod (the one output that is not piecewise
    constant or an integer: the fractional part, the mantissa, the remainder) — from
    the table `_PIECEWISE`; real_if_close (the gradient passes unchanged);
    maximum minimum fmax fmin where clip (and the methods ``x.clip``, ``x.conj``,
    ``x.conjugate``); nan_to_num (``x`` gets the gradient where it is finite, the
    replacement values ``nan=``, ``posinf=``, ``neginf=`` where they replaced;
    ``copy=False`` is a write into ``x``); with SciPy (registered when
    ``scipy.special`` is imported, so bytegrad itself does not import SciPy), of
    ``scipy.special``: expit logit log_expit erf erfc erfinv erfcinv gammaln
    digamma/psi gamma rgamma j0 j1 y0 y1 i0 i1; xlogy xlog1py beta betaln (both
    arguments); polygamma(n, x) yn(n, x) (x; the integer order has none); jv iv ive
    (x; the order v refused), betainc (x; a, b refused), gammainc gammaincc (x; a
    refused) — a refused gradient raises NotImplementedError naming the parameter
    when it is asked for: a float order that reaches the call as a variable is asked
    for, so make it a constant with ``bytegrad.stop_gradient``; logsumexp (with
    ``b=``, ``return_sign=``, complex input).  xlogy's and xlog1py's x-partial at
    ``x = 0`` where the log is infinite (``y = 0``, ``y = -1``) is taken as 0, as
    ``xlogy(0, y) = 0`` is; elsewhere at ``x = 0`` it is the true ``log y``.
Non-differentiable (run plainly, carry no gradient): floor ceil trunc rint fix
    round around ``x.round`` floor_divide (piecewise constant: the derivative is 0
    wherever it exists), isnan isinf isfinite isposinf isneginf signbit isreal
    iscomplex isclose, the comparisons greater greater_equal less less_equal equal
    not_equal, logical_and logical_or logical_xor logical_not; with SciPy,
    ``scipy.special.gammasgn`` (±1 between the poles of gamma).

Conventions:
  * Complex numbers follow the Zygote convention of the operator rules: a
    holomorphic ``f`` pulls ``dy`` back to ``dy * conj(f'(z))``; the functions of
    NumPy that reject complex input (cbrt, arctan2, hypot, logaddexp, …) still do.
  * maximum/minimum: on a tie the whole gradient goes to the FIRST argument; where
    an argument is NaN, the gradient goes to the argument NumPy propagated (the
    first NaN).  fmax/fmin: ties likewise go to the first argument; NaNs are
    ignored as NumPy ignores them (the gradient goes to the other argument; to the
    first if both are NaN).
  * clip(x, lo, hi): ``x`` gets the gradient where ``lo <= x <= hi`` (the bounds
    included) or ``x`` is NaN; a bound gets it where ``x`` is strictly beyond it
    (if ``lo > hi``, NumPy returns ``hi`` and so ``hi`` gets it).  Bounds passed by
    keyword (``a_min=``, ``min=``…) get no gradient; None bounds none.
  * where(cond, a, b): ``a`` gets the gradient where ``cond``, ``b`` elsewhere
    (summed back over broadcasting); ``cond`` none.  ``where(cond)`` (indices)
    carries no gradient.
  * power(a, b): ``d/da = b a^(b-1)``, 0 where ``b`` is 0; ``d/db = y log a``, 0
    where ``a`` is 0 and ``y log |a|`` for negative real ``a`` (as `math.pow`).
  * arctan2 at (0, 0), hypot at (0, 0), sinc's removable point and angle at 0
    have gradient 0; the other singular points give inf or nan as NumPy's
    arithmetic does (``log`` at 0: ``dy / 0``), except where ``dy`` is 0: there the
    gradient is 0 (the NaN policy of the README, `_util.zero_cotangent`).
  * mod/remainder: ``d/da = 1``, ``d/db = -floor(a / b)``; fmod: ``-trunc(a / b)``.
  * Ufunc options ``dtype=``, ``casting=``, ``order=``, ``subok=`` are passed on;
    ``out=`` (also positional) and ``where=`` are not differentiable yet: with a
    differentiable argument they raise TypeError (without one, the call runs plainly).

Large arrays (from `_util.BIG` = 10 000 elements on) use fused numba kernels in the
pullbacks (compiled on first use, so ``import bytegrad`` does not load numba): the
polynomial and rational derivatives of the table `UNARY` (tanh, tan, expit, arcsin,
arctan, reciprocal, …; from 4 `BIG` for the ones where NumPy needs only one pass
more), abs, the masks of maximum/minimum/fmax/fmin/clip against constant bounds, and
the selections of where/maximum/clip (``np.where(m, d, 0)`` mispredicts a branch per
element of a random mask).  One pass over memory and one allocation instead of
NumPy's temporaries; ``bench/kernels_elementwise.py`` measures each against the NumPy
expression it replaces.  Non-contiguous, mixed-dtype, float16 and complex arrays take
the NumPy path, which from 4096 elements on reuses its temporaries in place.
"""
from __future__ import annotations

from ._frozen import math

import numpy

from ._frozen import np

from ..runtime.errors import where
from ..runtime.mutation import rewrite, wrapping
from ..runtime.rules import Lazy, changes_arguments, nograd, nondifferentiable, rule
from . import _util
from ._named import by_name
from ._on_import import when_imported
from ._util import abs_grad, active, conj, fused, kernel, unbroadcast as ub, zero_cotangent
from .operators import _grads, made, pow_grads

_NOGRAD1 = nograd(1)
_LN2, _LN10 = math.log(2.0), math.log(10.0)
_DEG = math.pi / 180


def _arr(x):
    """An array-like list or tuple as an array; other arguments unchanged."""
    return np.asarray(x) if type(x) is list or type(x) is tuple else x


def _call(f, args, rest, kw):
    """``f(*args, *rest, **kw)`` for a call with ufunc options: TypeError for an
    output array (``out=`` or positional) or ``where=`` if any argument is differentiable."""
    out = rest[0] if rest else kw.get("out")
    if not (out is None or (type(out) is tuple and all(o is None for o in out))) \
            or kw.get("where", True) is not True:
        if any(map(active, args)):
            name = getattr(f, "__name__", f)
            raise TypeError(f"{where()}: numpy.{name}: in-place out= (and where=) is not differentiable "
                            f"yet; use the returned array instead (y = numpy.{name}(...))")
    return f(*args, *rest, **kw)


# -- Fused pullback kernels (numba, compiled on first use).  ``u`` is x or y.

@kernel
def _k_mul(d, u, out, a, b, c):
    """``out = d * (a + b u + c u²)``."""
    for i in range(out.shape[0]):
        v = u[i]
        out[i] = d[i] * (a + v * (b + c * v))


@kernel(error_model="numpy")
def _k_div(d, u, out, a, b, c):
    """``out = d / (a + b u + c u²)``."""
    for i in range(out.shape[0]):
        v = u[i]
        out[i] = d[i] / (a + v * (b + c * v))


@kernel(error_model="numpy")
def _k_div_sqrt(d, u, out, a, c, s):
    """``out = d / (s sqrt(a + c u²))``."""
    for i in range(out.shape[0]):
        v = u[i]
        out[i] = d[i] / (s * numpy.sqrt(a + c * v * v))  # (numba knows the module, not np)


@kernel
def _k_select(d, m, out, inv):
    """``out = d`` where ``m != inv``, else 0 (branch-free, unlike ``np.where``)."""
    for i in range(out.shape[0]):
        out[i] = d[i] if m[i] != inv else 0


def select(m, d, inv=False):
    """``np.where(m, d, 0)``, or ``np.where(m, 0, d)`` with ``inv``: a kernel for large
    arrays, where ``np.where`` mispredicts a branch per element of a random mask."""
    if type(d) is np.ndarray and d.size >= _util.BIG and type(m) is np.ndarray and \
            m.shape == d.shape and m.dtype == np.bool_ and d.dtype.char in "fd" and \
            d.flags.c_contiguous and m.flags.c_contiguous and _util.have_numba():
        out = np.empty_like(d)
        _k_select(d.reshape(-1), m.reshape(-1), out.reshape(-1), inv)
        return out
    return np.where(m, 0, d) if inv else np.where(m, d, 0)


@kernel
def _k_between(d, x, out, lo, hi, keep_nan):
    """``out = d`` where ``lo <= x <= hi`` (or ``x`` is NaN and ``keep_nan``), else 0."""
    for i in range(out.shape[0]):
        v = x[i]
        if (lo <= v and v <= hi) or (keep_nan != 0 and v != v):
            out[i] = d[i]
        else:
            out[i] = 0


# -- Unary functions: one table, one rule maker.

MUL, DIV = "mul", "div"
_INPLACE = 4096  # from this size on, pullbacks reuse their temporaries (small ones: no gain)


def _dsinc(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (np.cos(np.pi * x) - y) / x
    if type(u) is np.ndarray:
        u[x == 0] = 0
        return u
    return u if x != 0 else 0 * u


# (functions, MUL or DIV: multiply or divide dy by the conjugate of the derivative,
#  the derivative from (x, y) — a new array, or x or y themselves —,
#  the fused kernel for large real arrays: (from how many times BIG elements on,
#  operand "x" or "y", kernel, constants…)).  Where the kernel saves NumPy only one
#  pass over memory, its call overhead pays off from 4 BIG elements on.
UNARY = [
    ((np.exp,), MUL, lambda x, y: y, None),
    ((np.exp2,), MUL, lambda x, y: y * _LN2, (4, "y", _k_mul, 0, _LN2, 0)),
    ((np.expm1,), MUL, lambda x, y: y + 1, (4, "y", _k_mul, 1, 1, 0)),
    ((np.log,), DIV, lambda x, y: x, None),
    ((np.log2,), DIV, lambda x, y: x * _LN2, (4, "x", _k_div, 0, _LN2, 0)),
    ((np.log10,), DIV, lambda x, y: x * _LN10, (4, "x", _k_div, 0, _LN10, 0)),
    ((np.log1p,), DIV, lambda x, y: 1 + x, (4, "x", _k_div, 1, 1, 0)),
    ((np.sqrt,), DIV, lambda x, y: y + y, (4, "y", _k_div, 0, 2, 0)),
    ((np.cbrt,), DIV, lambda x, y: 3 * y * y, (1, "y", _k_div, 0, 0, 3)),
    ((np.square,), MUL, lambda x, y: x + x, (4, "x", _k_mul, 0, 2, 0)),
    ((np.reciprocal,), MUL, lambda x, y: -y * y, (1, "y", _k_mul, 0, 0, -1)),
    ((np.sin,), MUL, lambda x, y: np.cos(x), None),
    ((np.cos,), MUL, lambda x, y: -np.sin(x), None),
    ((np.tan,), MUL, lambda x, y: 1 + y * y, (1, "y", _k_mul, 1, 0, 1)),
    ((np.arcsin,), DIV, lambda x, y: np.sqrt(1 - x * x), (1, "x", _k_div_sqrt, 1, -1, 1)),
    ((np.arccos,), DIV, lambda x, y: -np.sqrt(1 - x * x), (1, "x", _k_div_sqrt, 1, -1, -1)),
    ((np.arctan,), DIV, lambda x, y: 1 + x * x, (1, "x", _k_div, 1, 0, 1)),
    ((np.sinh,), MUL, lambda x, y: np.cosh(x), None),
    ((np.cosh,), MUL, lambda x, y: np.sinh(x), None),
    ((np.tanh,), MUL, lambda x, y: 1 - y * y, (1, "y", _k_mul, 1, 0, -1)),
    ((np.arcsinh,), DIV, lambda x, y: np.sqrt(1 + x * x), (1, "x", _k_div_sqrt, 1, 1, 1)),
    ((np.arccosh,), DIV, lambda x, y: np.sqrt(x - 1) * np.sqrt(x + 1),
     (1, "x", _k_div_sqrt, -1, 1, 1)),
    ((np.arctanh,), DIV, lambda x, y: 1 - x * x, (1, "x", _k_div, 1, 0, -1)),
    ((np.deg2rad, np.radians), MUL, lambda x, y: _DEG, None),
    ((np.rad2deg, np.degrees), MUL, lambda x, y: 1 / _DEG, None),
    ((np.negative,), MUL, lambda x, y: -1, None),
    ((np.positive,), MUL, lambda x, y: 1, None),
    ((np.sinc,), MUL, _dsinc, None),
]


# Functions without singular points (poles, edges of the domain where the slope is
# infinite): a zero cotangent gives zero without `zero_cotangent`'s pass over the result.
# Their derivative is infinite only where it overflows, as exp's at 710, and there the
# value is infinite too.
_SMOOTH = frozenset({"sin", "cos", "tan", "exp", "exp2", "expm1", "sinh", "cosh", "tanh",
                     "arctan", "arcsinh", "deg2rad", "radians", "rad2deg", "degrees",
                     "negative", "positive", "sinc", "square", "expit", "log_expit", "erf",
                     "erfc", "j0", "j1", "i0", "i1"})


def unary_rule(f, mode, deriv, fuse):
    """The rule of the elementwise function ``f`` whose derivative is ``deriv(x, y)``."""
    divide = mode is DIV
    smooth = f.__name__ in _SMOOTH
    of_y = fuse is not None and fuse[1] == "y"  # (the kernel's operand): the derivative needs y alone

    def r(x, *rest, **kw):
        y = _call(f, (x,), rest, kw) if rest or kw else f(x)
        t = type(x)
        if t is np.ndarray:
            k = x.dtype.kind
            if k == "f":
                xa, cx = x, False
            elif k == "c":
                xa, cx = x, True
            else:
                return y, _NOGRAD1
            if of_y:  # the pullback need not keep x alive (tanh's input, say)
                x, xa = _util.light(x), None
        elif t is float or t is np.float64:
            xa, cx = x, False
        elif not active(x):
            return y, _NOGRAD1
        else:
            xa = _arr(x)
            cx = np.iscomplexobj(xa)

        def back(d):
            if type(d) is np.ndarray and d.size >= _INPLACE:
                g = _large(d, xa, y, cx, divide, deriv, fuse)
            else:
                u = deriv(xa, y)
                if cx:
                    u = np.conj(u)
                g = d / u if divide else d * u
            return None, ub(x, g if smooth else zero_cotangent(d, g))
        return y, back
    return r


def _large(d, x, y, cx, divide, deriv, fuse):
    """The gradient of a unary function for a large ``d``: from a fused kernel, or from
    NumPy reusing the derivative's array for the result."""
    if fuse is not None and not cx and d.size >= fuse[0] * _util.BIG:
        g = fused(fuse[2], d, y if fuse[1] == "y" else x, *fuse[3:])
        if g is not None:
            return g
    u = deriv(x, y)
    new = type(u) is np.ndarray and u is not x and u is not y
    if cx:
        u = np.conjugate(u, out=u) if new else np.conj(u)
    if new and u.shape == d.shape and u.dtype == d.dtype:
        return np.divide(d, u, out=u) if divide else np.multiply(d, u, out=u)
    return d / u if divide else d * u


for _fs, _mode, _deriv, _fuse in UNARY:
    for _f in _fs:
        rule(_f)(unary_rule(_f, _mode, _deriv, _fuse))


# -- Non-holomorphic unary functions.

def _abs_rule(f):
    def r(x, *rest, **kw):
        y = _call(f, (x,), rest, kw) if rest or kw else f(x)
        if not active(x):
            return y, _NOGRAD1
        xa = _arr(x)
        return y, lambda d: (None, ub(x, abs_grad(xa, y, d)))
    return r


rule(np.abs, note="gradient sign(x), 0 at 0; complex: x / |x|, 0 at 0")(_abs_rule(np.abs))
rule(np.fabs, note="gradient sign(x), 0 at 0 (real input)")(_abs_rule(np.fabs))


@rule(np.sign, note="zero gradient for real input; complex: the gradient of z / |z|")
def _sign(x, *rest, **kw):
    """Real: zero gradient.  Complex ``s = z / |z|``: ``dz = (d - conj(d) s²) / (2|z|)``."""
    y = _call(np.sign, (x,), rest, kw) if rest or kw else np.sign(x)
    xa = _arr(x)
    if not np.iscomplexobj(xa):
        return y, _NOGRAD1

    def back(d):
        r = np.abs(xa)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = (d - np.conj(d) * y * y) / (r + r)
        if type(g) is np.ndarray:
            g[np.broadcast_to(r == 0, g.shape)] = 0
        elif r == 0:
            g = 0 * g
        return None, ub(x, g)
    return y, back


def _conj_rule(f):
    def r(x, *rest, **kw):
        y = _call(f, (x,), rest, kw) if rest or kw else f(x)
        return y, lambda d: (None, ub(x, conj(d)))
    return r


for _f in (np.conjugate, np.ndarray.conj, np.ndarray.conjugate):
    rule(_f)(_conj_rule(_f))


@rule(np.real)
def _real(x):
    return np.real(x), lambda d: (None, ub(x, d))


@rule(np.imag)
def _imag(x):
    y = np.imag(x)
    if not np.iscomplexobj(_arr(x)):
        return y, _NOGRAD1
    return y, lambda d: (None, ub(x, 1j * d))


@rule(np.angle, note="complex input; 0 at z = 0 (real input: no gradient)")
def _angle(z, *rest, **kw):
    """``dz = d * i z / |z|²`` (0 at 0), times 180/π with ``deg=True``."""
    y = np.angle(z, *rest, **kw)
    za = _arr(z)
    nones = (None,) * len(rest)
    if not np.iscomplexobj(za):
        return y, lambda d: (None, None) + nones
    deg = rest[0] if rest else kw.get("deg", False)

    def back(d):
        r2 = za.real * za.real + za.imag * za.imag
        with np.errstate(divide="ignore", invalid="ignore"):
            u = 1j * za / r2
        if type(u) is np.ndarray:
            u[r2 == 0] = 0
        elif r2 == 0:
            u = 0j
        return (None, ub(z, d * (u / _DEG if deg else u))) + nones
    return y, back


# -- Binary functions: one table, one rule maker.

def _div_a(d, a, b, y):
    return zero_cotangent(d, d / np.conj(b))


def _div_b(d, a, b, y):
    return zero_cotangent(d, -d * np.conj(y / b))


def _mod_b(d, a, b, y):
    return -d * np.floor_divide(a, b)


def _fmod_b(d, a, b, y):
    return -d * np.rint((a - y) / b)


def _atan2(d, a, b, y, first):
    r2 = a * a + b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        g = d * (b if first else -a) / r2
    return _zero_where(g, r2 == 0)


def _hypot(d, a, b, y, first):
    with np.errstate(divide="ignore", invalid="ignore"):
        g = d * (a if first else b) / y
    return _zero_where(g, y == 0)


def _zero_where(g, m):
    if type(g) is np.ndarray:
        if np.any(m):
            g[np.broadcast_to(m, g.shape)] = 0
        return g
    return 0 * g if m else g


def _copysign_a(d, a, b, y):
    return d * np.where(np.signbit(a) == np.signbit(b), 1, -1)


# (functions, gradient of the first argument from (d, a, b, y), of the second; None:
#  no gradient).  The gradients are before unbroadcasting; lists arrive as arrays.
BINARY = [
    ((np.add,), lambda d, a, b, y: d, lambda d, a, b, y: d),
    ((np.subtract,), lambda d, a, b, y: d, lambda d, a, b, y: -d),
    ((np.multiply,), lambda d, a, b, y: d * np.conj(b), lambda d, a, b, y: np.conj(a) * d),
    ((np.divide,), _div_a, _div_b),
    ((np.remainder,), lambda d, a, b, y: d, _mod_b),
    ((np.fmod,), lambda d, a, b, y: d, _fmod_b),
    ((np.arctan2,), lambda d, a, b, y: _atan2(d, a, b, y, True),
     lambda d, a, b, y: _atan2(d, a, b, y, False)),
    ((np.hypot,), lambda d, a, b, y: _hypot(d, a, b, y, True),
     lambda d, a, b, y: _hypot(d, a, b, y, False)),
    ((np.logaddexp,), lambda d, a, b, y: d * np.exp(a - y), lambda d, a, b, y: d * np.exp(b - y)),
    ((np.logaddexp2,), lambda d, a, b, y: d * np.exp2(a - y),
     lambda d, a, b, y: d * np.exp2(b - y)),
    ((np.copysign,), _copysign_a, None),
]


def binary_rule(f, ga, gb):
    def r(a, b, *rest, **kw):
        y = made(_call(f, (a, b), rest, kw) if rest or kw else f(a, b), a, b, f"np.{f.__name__}")
        a2, b2 = _arr(a), _arr(b)
        return y, lambda d: _grads(a, b, lambda: ub(a, ga(d, a2, b2, y)),
                                   gb and (lambda: ub(b, gb(d, a2, b2, y))))
    return r


BINARY_NOTES = {
    np.remainder: "d/db = -floor(a / b)", np.fmod: "d/db = -trunc(a / b)",
    np.arctan2: "gradient 0 at (0, 0)", np.hypot: "gradient 0 at (0, 0)",
    np.copysign: "gradient to the magnitude only",
}
for _fs, _ga, _gb in BINARY:
    for _f in _fs:
        rule(_f, note=BINARY_NOTES.get(_f))(binary_rule(_f, _ga, _gb))


def _power_rule(f):
    def r(a, b, *rest, **kw):
        y = made(_call(f, (a, b), rest, kw) if rest or kw else f(a, b), a, b, f"np.{f.__name__}")
        return y, lambda d: pow_grads(a, b, y, d, f)
    return r


for _f in (np.power, np.float_power):
    rule(_f, note="d/db = y log|a| for negative real a, 0 where a = 0; d/da = 0 where b = 0")(
        _power_rule(_f))


# -- Selections: maximum minimum fmax fmin where clip.

def _bound(b, dtype):
    """``b`` as a bound for `_k_between` on arrays of ``dtype`` (a Python number or a
    scalar of that dtype, not NaN), or None."""
    if type(b) is float or type(b) is int or (isinstance(b, np.generic) and b.dtype == dtype):
        return None if b != b else b
    return None


# (function, the first argument gets the gradient where ``first(a, b)``,
#  kernel bounds for the first argument from a scalar second one, keep NaNs)
PICKS = [
    (np.maximum, lambda a, b: (a >= b) | np.isnan(a), lambda b: (b, np.inf), 1),
    (np.minimum, lambda a, b: (a <= b) | np.isnan(a), lambda b: (-np.inf, b), 1),
    (np.fmax, lambda a, b: (a >= b) | np.isnan(b), lambda b: (b, np.inf), 0),
    (np.fmin, lambda a, b: (a <= b) | np.isnan(b), lambda b: (-np.inf, b), 0),
]


def pick_rule(f, first, bounds, keep_nan):
    def r(a, b, *rest, **kw):
        y = _call(f, (a, b), rest, kw) if rest or kw else f(a, b)
        a2, b2 = _arr(a), _arr(b)

        def back(d):
            memo = []

            def mask():
                if not memo:
                    memo.append(first(a2, b2))
                return memo[0]

            def ga():
                if type(a2) is np.ndarray and type(d) is np.ndarray and d.size >= _util.BIG:
                    c = _bound(b2, a2.dtype)
                    g = None if c is None else fused(_k_between, d, a2, *bounds(c), keep_nan)
                    if g is not None:
                        return ub(a, g)
                return ub(a, select(mask(), d))
            return _grads(a, b, ga, lambda: ub(b, select(mask(), d, True)))
        return y, back
    return r


for _f, _first, _bounds, _keep in PICKS:
    rule(_f, note="ties: the gradient goes to the first argument; " + (
        "a NaN gets it (the first one if both are)" if _keep else
        "a NaN is skipped, as NumPy skips it"))(pick_rule(_f, _first, _bounds, _keep))


def _thunk(x, g):
    """``g`` if ``x`` can carry a gradient, else None (for `Lazy`)."""
    return g if x is not None and active(x) else None


@rule(np.where, note="a gets the gradient where cond, b elsewhere; where(cond) none")
def _where(cond, *ab, **kw):
    y = np.where(cond, *ab, **kw)
    if not ab:
        return y, _NOGRAD1
    a, b = ab
    c = _arr(cond)
    return y, lambda d: Lazy(None, None, _thunk(a, lambda: ub(a, select(c, d))),
                             _thunk(b, lambda: ub(b, select(c, d, True))))


def clip_rule(f):
    def r(a, *args, **kw):
        if len(args) > 2 or "out" in kw:
            _call(f, (a,), args[2:], {"out": kw["out"]} if "out" in kw else {})  # raises
        # bounds given by keyword (also as min=, max=) were bound to these positions, with
        # np._NoValue for one not given, which np.clip takes for None only if both are
        args = tuple(None if b is np._NoValue else b for b in args)
        y = f(a, *args, **kw)
        lo, hi = (*args, None, None)[:2]
        a2, lo2, hi2 = _arr(a), _arr(lo), _arr(hi)
        n = len(args)

        def back(d):
            memo = {}

            def mask_a():  # where clip returned a (or a NaN)
                m = memo.get("a")
                if m is None:
                    m = memo["a"] = (y == a2) | np.isnan(a2)
                return m

            def mask_hi():  # where it returned hi rather than a (lo gets the rest)
                m = memo.get("hi")
                if m is None:
                    m = memo["hi"] = ~mask_a() & ((y == hi2) | np.isnan(hi2))
                return m

            def ga():
                if type(a2) is np.ndarray and type(d) is np.ndarray and d.size >= _util.BIG:
                    b0 = -np.inf if lo2 is None else _bound(lo2, a2.dtype)
                    b1 = np.inf if hi2 is None else _bound(hi2, a2.dtype)
                    if b0 is not None and b1 is not None and b0 <= b1:
                        g = fused(_k_between, d, a2, b0, b1, 1)
                        if g is not None:
                            return ub(a, g)
                return ub(a, select(mask_a(), d))

            def glo():
                return ub(lo, select(mask_a() if hi2 is None else mask_a() | mask_hi(), d, True))

            def ghi():
                return ub(hi, select(mask_hi(), d))
            thunks = (_thunk(a, ga), _thunk(lo, glo), _thunk(hi, ghi))[:1 + n]
            return Lazy(None, *thunks, *(None,) * (n - 2))
        return y, back
    return r


for _f in (np.clip, np.ndarray.clip):
    rule(_f, aliases={"min": "a_min", "max": "a_max"}, note="x gets the gradient where "
         "lo <= x <= hi (or NaN), a bound where x is strictly beyond it")(clip_rule(_f))


# -- nan_to_num: the gradient passes where x is finite.

_REPLACED = ((np.isnan, "nan"), (np.isposinf, "posinf"), (np.isneginf, "neginf"))


def _replaced(x, nan, posinf, neginf):
    """The rule of ``np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)``, a copy:
    ``x`` gets the gradient where it is finite, each replacement value the sum of it
    where it replaced (the real and imaginary parts of complex ``x`` apart)."""
    y = np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)
    xa = _arr(x)
    if np.asarray(xa).dtype.kind not in "fc":  # nothing to replace: y is x
        return y, nograd(4)

    def back(d):
        d = np.asarray(d)
        if np.iscomplexobj(xa):  # NumPy replaces in the real and imaginary parts apart
            re, im = np.real(xa), np.imag(xa)

            def where(test):
                return select(test(re), d.real), select(test(im), d.imag)
        else:
            def where(test):
                return (select(test(xa), np.real(d)),)

        def replacement(test, v):
            return _thunk(v, lambda: ub(v, _joined(where(test), 1)))
        return Lazy(None, lambda: ub(x, _joined(where(np.isfinite), 1j)),
                    *(replacement(t, v) for (t, _), v in zip(_REPLACED, (nan, posinf, neginf))))
    return y, back


def _joined(parts, unit):
    """One gradient from that of the real part and, if there is one, the imaginary
    part (times ``unit``)."""
    return parts[0] if len(parts) == 1 else parts[0] + unit * parts[1]


def _names(d, names):
    """The gradients ``d[1], d[2], …`` as `by_name` thunks for ``names`` (None: skipped)."""
    return {n: (lambda i=i: d[i]) for i, n in enumerate(names, 1) if n is not None}


_NAN_TO_NUM = ("x",) + tuple(n for _, n in _REPLACED)


@rule(np.nan_to_num, note="x gets the gradient where it is finite, nan=/posinf=/neginf= "
      "where they replaced; copy=False writes into x")
@by_name("np.nan_to_num")
def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    if not copy and isinstance(x, np.ndarray):  # NumPy replaces in x itself
        if x.dtype.kind not in "fc":
            return np.nan_to_num(x, copy=False), lambda d: {}
        _, back = rewrite(x, _replaced, nan, posinf, neginf)
        # x's old contents keep their gradient in the shadow; the values get theirs
        return (x[()] if x.ndim == 0 else x), wrapping(
            back, lambda dy: _names(back(dy)[1:], _NAN_TO_NUM[1:]))
    y, back = _replaced(x, nan, posinf, neginf)
    return y, lambda dy: _names(back(dy), _NAN_TO_NUM)


changes_arguments(np.nan_to_num)  # (with copy=False)


nondifferentiable(
    np.floor, np.ceil, np.trunc, np.rint, np.fix, np.round, np.around, np.ndarray.round,
    np.floor_divide, np.isnan, np.isinf, np.isfinite, np.isposinf, np.isneginf, np.signbit,
    np.isreal, np.iscomplex, np.isclose, np.greater, np.greater_equal, np.less,
    np.less_equal, np.equal, np.not_equal, np.logical_and, np.logical_or, np.logical_xor,
    np.logical_not)


# -- scipy.special: registered when SciPy is imported (importing it costs 0.3 s).

SCIPY_UNARY = [
    ("expit", MUL, lambda x, y: y * (1 - y), (1, "y", _k_mul, 0, 1, -1)),
    ("logit", DIV, lambda x, y: x * (1 - x), (1, "x", _k_div, 0, 1, -1)),
    ("log_expit", MUL, lambda x, y: -np.expm1(y), None),  # 1 - expit(x) = 1 - e^y
]


def elementwise_rule(f, partials, output=None):
    """The rule of the elementwise function ``f`` of ``len(partials)`` arguments (with
    broadcasting; ufunc options after them as in `_call`).  ``partials[i]`` is the
    partial derivative in argument ``i`` as a function of all the arguments (lists as
    arrays) and the result, holomorphic where complex; None for an argument that has no
    derivative (an integer order); a string, the parameter's name, for a derivative not
    implemented: asking for that gradient raises NotImplementedError naming it.  For a
    ufunc with several outputs, ``output`` is the one output that carries a gradient
    (the others are piecewise constant or integers): the partials are its derivatives,
    and the result they get is the tuple of outputs."""
    k = len(partials)

    def r(*args, **kw):
        args, rest = args[:k], args[k:]
        y = _call(f, args, rest, kw) if rest or kw else f(*args)
        arrs = [_arr(x) for x in args]

        def grad(x, p, d):
            if p is None or not active(x):
                return None
            if type(p) is str:
                return lambda: _not_implemented(f, p)
            return lambda: ub(x, zero_cotangent(d, d * conj(p(*arrs, y))))

        def back(d):
            if output is not None:
                d = d[output]
                if d is None:
                    return nograd(len(args) + len(rest))(d)
            return Lazy(None, *(grad(x, p, d) for x, p in zip(args, partials)),
                        *(None,) * len(rest))
        return y, back
    return r


# (ufunc, partial derivatives (see `elementwise_rule`), the output they are of, note)
_PIECEWISE = [
    (np.heaviside, (None, lambda x1, x2, y: x1 == 0), None,
     "x2 gets the gradient where x1 == 0; x1 none (piecewise constant)"),
    (np.ldexp, (lambda x1, x2, y: np.exp2(x2), None), None, "x1 gets 2^x2; the integer x2 none"),
    (np.modf, (lambda x, y: 1.0,), 0, "the fractional part gets the gradient (1); the integral "
     "part none (piecewise constant)"),
    (np.frexp, (lambda x, y: np.exp2(-y[1].astype(float)),), 0,
     "the mantissa gets 2^-exponent; the integer exponent none"),
    (np.divmod, (lambda x1, x2, y: 1.0, lambda x1, x2, y: -y[0]), 1,
     "the remainder as np.remainder (d/dx1 = 1, d/dx2 = -floor(x1 / x2)); the quotient none "
     "(piecewise constant)"),
]
for _f, _partials, _output, _note in _PIECEWISE:
    rule(_f, note=_note)(elementwise_rule(_f, _partials, _output))


@rule(np.real_if_close, note="the gradient passes unchanged, whether the imaginary part was "
      "dropped or not")
def _real_if_close(a, tol=100):
    return np.real_if_close(a, tol), lambda d: (None, ub(a, d), None)


def _not_implemented(f, name):
    raise NotImplementedError(
        f"scipy.special.{f.__name__}: the gradient with respect to {name} is not implemented; "
        f"pass {name} as a constant (bytegrad.stop_gradient({name})) or register a rule with "
        f"bytegrad.rule(scipy.special.{f.__name__}, override=True)")


def _zero_where_x_is(x, ratio):
    """``ratio()``, 0 where ``x == 0`` (the derivative of ``x * g(y)`` in y at ``x = 0``,
    whatever ``g'`` is there)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, ratio())


def _real_only(f, partial):
    """``partial``, refusing complex arguments (``f`` is not holomorphic there)."""
    def p(*args):
        if any(np.iscomplexobj(a) for a in args):
            raise NotImplementedError(f"scipy.special.{f.__name__}: the gradient for complex "
                                      f"arguments is not implemented (it is not holomorphic)")
        return partial(*args)
    return p


def _register_scipy(sp):
    """Register the rules of ``scipy.special`` (the module ``sp``)."""
    half_sqrt_pi = np.sqrt(np.pi) / 2

    def bessel(f, sign):
        """The derivative in x of the cylinder function ``f(v, x)``, from the recurrence
        ``f'_v = (f_{v-1} + sign f_{v+1}) / 2`` (sign -1 for J and Y, +1 for I)."""
        return lambda v, x: (f(v - 1, x) + sign * f(v + 1, x)) / 2

    def rgamma(x, y):  # -y digamma(x); at x = -n, where 1/gamma is 0: (-1)^n n!
        with np.errstate(invalid="ignore"):
            g = -y * sp.digamma(x)
        if np.iscomplexobj(x):
            return g
        return np.where((x <= 0) & (x == np.floor(x)), (1 - 2 * (x % 2)) * sp.gamma(1 - x), g)

    jv, yv, iv = bessel(sp.jv, -1), bessel(sp.yv, -1), bessel(sp.iv, 1)
    # (name, MUL or DIV, derivative from (x, y), fused kernel, note)
    unary = [(name, mode, deriv, fuse, None) for name, mode, deriv, fuse in SCIPY_UNARY] + [
        ("erf", MUL, lambda x, y: (2 / np.sqrt(np.pi)) * np.exp(-x * x), None, None),
        ("erfc", MUL, lambda x, y: (-2 / np.sqrt(np.pi)) * np.exp(-x * x), None, None),
        ("erfinv", MUL, lambda x, y: half_sqrt_pi * np.exp(y * y), None, "inf at -1 and 1"),
        ("erfcinv", MUL, lambda x, y: -half_sqrt_pi * np.exp(y * y), None, "inf at 0 and 2"),
        ("gammaln", MUL, lambda x, y: sp.digamma(x), None, None),
        ("digamma", MUL, lambda x, y: sp.polygamma(1, x), None, "also psi"),
        ("gamma", MUL, lambda x, y: y * sp.digamma(x), None, None),
        ("rgamma", MUL, rgamma, None, "(-1)^n n! at x = -n, where 1/gamma is 0"),
        ("j0", MUL, lambda x, y: jv(0, x), None, None),
        ("j1", MUL, lambda x, y: jv(1, x), None, None),
        ("y0", MUL, lambda x, y: yv(0, x), None, None),
        ("y1", MUL, lambda x, y: yv(1, x), None, None),
        ("i0", MUL, lambda x, y: iv(0, x), None, None),
        ("i1", MUL, lambda x, y: iv(1, x), None, None),
    ]
    for name, mode, deriv, fuse, note in unary:
        f = getattr(sp, name, None)
        if f is not None:
            rule(f, note=note)(unary_rule(f, mode, deriv, fuse))

    def upper_density(a, x, y):  # d gammainc(a, x) / dx
        return np.exp(sp.xlogy(a - 1, x) - x - sp.gammaln(a))

    def ive(v, x, y):  # ive = iv e^{-|x|}
        return bessel(sp.ive, 1)(v, x) - np.sign(x) * y
    # (name, partial derivatives (see `elementwise_rule`), note)
    table = [
        ("xlogy", (lambda x, y, z: sp.xlogy((x != 0) | (y != 0), y),
                   lambda x, y, z: _zero_where_x_is(x, lambda: np.divide(x, y))),
         "d/dx = log y except at x = y = 0, where it is 0 (as xlogy(0, y) = 0); d/dy = x / y, "
         "0 where x = 0"),
        ("xlog1py", (lambda x, y, z: sp.xlogy((x != 0) | (y != -1), 1 + y),
                     lambda x, y, z: _zero_where_x_is(x, lambda: np.divide(x, 1 + y))),
         "d/dx = log1p(y) except at x = 0, y = -1, where it is 0 (as xlog1py(0, y) = 0); "
         "d/dy = x / (1 + y), 0 where x = 0"),
        ("polygamma", (None, lambda n, x, y: sp.polygamma(n + 1, x)), "w.r.t. x; n an integer"),
        ("beta", (lambda a, b, y: y * (sp.digamma(a) - sp.digamma(a + b)),
                  lambda a, b, y: y * (sp.digamma(b) - sp.digamma(a + b))), None),
        ("betaln", (lambda a, b, y: sp.digamma(a) - sp.digamma(a + b),
                    lambda a, b, y: sp.digamma(b) - sp.digamma(a + b)), None),
        ("betainc", ("a", "b", lambda a, b, x, y: np.exp(sp.xlogy(a - 1, x) + sp.xlog1py(b - 1, -x)
                                                         - sp.betaln(a, b))),
         "w.r.t. x (a and b: NotImplementedError)"),
        ("gammainc", ("a", upper_density), "w.r.t. x (a: NotImplementedError)"),
        ("gammaincc", ("a", lambda a, x, y: -upper_density(a, x, y)),
         "w.r.t. x (a: NotImplementedError)"),
        ("jv", ("v", lambda v, x, y: jv(v, x)), "jv = jn: w.r.t. x (v: NotImplementedError)"),
        ("yn", (None, lambda n, x, y: yv(n, x)), "w.r.t. x; n an integer"),
        ("iv", ("v", lambda v, x, y: iv(v, x)), "w.r.t. x (v: NotImplementedError)"),
        ("ive", ("v", _real_only(sp.ive, ive)), "w.r.t. real x (v, complex x: NotImplementedError)"),
    ]
    for name, partials, note in table:
        f = getattr(sp, name)
        rule(f, note=note)(elementwise_rule(f, partials))
    nondifferentiable(sp.gammasgn)  # piecewise constant: ±1 between the poles of gamma
    rule(sp.logsumexp, note="b= (also negative), return_sign=, complex a and b")(
        by_name("scipy.special.logsumexp")(_logsumexp_rule(sp.logsumexp)))


def _logsumexp_rule(logsumexp):
    """``y = log |s|``, ``s = sum(b e^a)`` (``log s`` for complex input without
    ``return_sign``): with ``sign = s / |s|`` and ``w = e^{a - y}``, the derivative of
    ``log s`` is ``b e^a / s = b w conj(sign)``, so ``a`` gets ``conj(b w) sign c`` and
    ``b`` ``conj(w) sign c`` for the cotangent ``c`` of ``log s``: ``dy``, plus
    ``i Im(dsign conj(sign))`` from the phase of a complex sign (a real sign is
    piecewise constant); NaN where a real ``s`` is negative without ``return_sign``
    (the value is NaN there)."""
    def r(a, axis=None, b=None, keepdims=False, return_sign=False):
        y = logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)

        def back(d):
            a_, b_ = np.asarray(a), (1.0 if b is None else np.asarray(b))
            yk, sk = logsumexp(a_, axis=axis, b=b_, keepdims=True, return_sign=True)
            dy, ds = (d[0], d[1]) if return_sign else (d, None)

            def kept(g):  # a gradient of the result, with the reduced axes kept
                g = np.asarray(0.0 if g is None else g)
                return g if keepdims or axis is None else np.expand_dims(g, axis)
            c = kept(dy)
            if np.iscomplexobj(sk):
                if ds is not None:
                    c = c + 1j * np.imag(kept(ds) * np.conj(sk))
            elif not return_sign:
                sk = np.where(sk < 0, np.nan, sk)
            with np.errstate(over="ignore", invalid="ignore"):
                w = conj(np.exp(a_ - yk)) * sk * c
            return {"a": _thunk(a, lambda: ub(a, conj(b_) * w)), "b": _thunk(b, lambda: ub(b, w))}
        return y, back
    return r


when_imported("scipy.special", _register_scipy)
