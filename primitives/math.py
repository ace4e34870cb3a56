"""Rules for Python's ``math`` and ``cmath`` modules.

Differentiable (``math``):
    sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh exp exp2 expm1
    log (with or without a base) log2 log10 log1p sqrt cbrt fabs degrees radians
    erf erfc gamma lgamma — from the table `_UNARY` of ``(name, derivative)`` pairs;
    pow atan2 hypot (any number of arguments) copysign (gradient to the magnitude
    only) fmod remainder (like ``%``: ``d/dx = 1``, ``d/dy = -n``) ldexp (gradient to
    ``x``) nextafter (to ``x``) frexp modf (to ``x``, through the float parts);
    dist prod fsum, whose sequence arguments get a gradient of the same kind
    (tuple, list or array; None for other iterables).
Differentiable (``cmath``, for complex and real arguments): exp log (with or without
    a base) log10 sqrt sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh
    phase polar rect.
Non-differentiable (run plainly): floor ceil trunc isnan isinf isfinite isclose
    factorial comb perm gcd lcm isqrt ulp, cmath.isnan isinf isfinite isclose.

Complex gradients follow the Zygote convention used by the operator rules: for
``z = x + iy`` the gradient is ``∂f/∂x + i ∂f/∂y``, so a holomorphic ``g`` pulls
back ``dy`` to ``dy * conj(g'(z))``.  Ints and bools get no gradient (None).
Derivatives that are infinite at a domain edge (``sqrt`` at 0, ``asin`` at ±1) are
``inf`` (``-inf`` for ``acos``) rather than an error; a zero cotangent there gives 0,
not ``0 * inf = nan`` (the NaN policy of the README).
``gamma' = gamma * digamma``, with `digamma` implemented below.
"""
from __future__ import annotations

from ._frozen import cmath
from ._frozen import math

from ._frozen import np

from ..runtime.rules import nograd, nondifferentiable, returns_scalars, rule
from ._util import conj, unbroadcast as ub, zero_cotangent
from .containers import SETS, IndexIter, set_grad

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRTPI = 2.0 / math.sqrt(math.pi)


def _int(x) -> bool:
    t = type(x)
    return t is int or t is bool


def _inv(v):
    """``1 / v``, and ``inf`` instead of ZeroDivisionError at 0."""
    try:
        return 1 / v
    except ZeroDivisionError:
        return math.inf


def digamma(x: float) -> float:
    """ψ(x) = d/dx ln Γ(x) for real ``x`` (nan at the poles 0, -1, -2, …): the
    reflection formula below 0, the recurrence ψ(x) = ψ(x+1) - 1/x up to x ≥ 10,
    then the asymptotic series through x⁻¹⁴ (error below 1e-16 relative)."""
    x = float(x)
    if x <= 0 and x == math.floor(x):
        return math.nan
    if x < 0:
        return digamma(1 - x) - math.pi / math.tan(math.pi * x)
    acc = 0.0
    while x < 10:
        acc -= 1 / x
        x += 1
    f = 1 / (x * x)
    series = f * (-1 / 12 + f * (1 / 120 + f * (-1 / 252 + f * (1 / 240 + f * (
        -1 / 132 + f * (691 / 32760 - f / 12))))))
    return acc + math.log(x) - 0.5 / x + series


# (name, derivative(m, x, y)) with m the module (math or cmath), x the argument
# converted to float (math) or left as a number (cmath), y the result.
_UNARY = [
    ("sin", lambda m, x, y: m.cos(x)),
    ("cos", lambda m, x, y: -m.sin(x)),
    ("tan", lambda m, x, y: 1 + y * y),
    ("asin", lambda m, x, y: _inv(m.sqrt(1 - x * x))),
    ("acos", lambda m, x, y: -_inv(m.sqrt(1 - x * x))),
    ("atan", lambda m, x, y: 1 / (1 + x * x)),
    ("sinh", lambda m, x, y: m.cosh(x)),
    ("cosh", lambda m, x, y: m.sinh(x)),
    ("tanh", lambda m, x, y: 1 - y * y),
    ("asinh", lambda m, x, y: 1 / m.sqrt(1 + x * x)),
    ("acosh", lambda m, x, y: _inv(m.sqrt(x - 1) * m.sqrt(x + 1))),
    ("atanh", lambda m, x, y: 1 / (1 - x * x)),
    ("exp", lambda m, x, y: y),
    ("exp2", lambda m, x, y: y * _LN2),
    ("expm1", lambda m, x, y: m.exp(x)),
    ("log2", lambda m, x, y: _inv(x * _LN2)),
    ("log10", lambda m, x, y: _inv(x * _LN10)),
    ("log1p", lambda m, x, y: 1 / (1 + x)),
    ("sqrt", lambda m, x, y: 0.5 * _inv(y)),
    ("cbrt", lambda m, x, y: _inv(3 * y * y)),
    ("fabs", lambda m, x, y: float((x > 0) - (x < 0))),
    ("degrees", lambda m, x, y: 180 / math.pi),
    ("radians", lambda m, x, y: math.pi / 180),
    ("erf", lambda m, x, y: _TWO_OVER_SQRTPI * m.exp(-x * x)),
    ("erfc", lambda m, x, y: -_TWO_OVER_SQRTPI * m.exp(-x * x)),
    ("gamma", lambda m, x, y: y * digamma(x)),
    ("lgamma", lambda m, x, y: digamma(x)),
]


def _number(m, x):
    """``x`` as a number the derivative formulas of module ``m`` accept."""
    t = type(x)
    if t is float or t is complex:
        return x
    return float(x) if m is math else complex(x)


def _unary(m, f, df):
    @rule(f)
    def _(x):
        y = f(x)
        if _int(x):
            return y, nograd(1)
        return y, lambda d: (None, ub(x, zero_cotangent(d, d * conj(df(m, _number(m, x), y)))))


for _m in (math, cmath):
    for _name, _df in _UNARY:
        if hasattr(_m, _name):
            _unary(_m, getattr(_m, _name), _df)


def _log_rule(m):
    @rule(m.log)
    def _(x, *base):
        y = m.log(x, *base)

        def back(d):
            if not base:
                return None, None if _int(x) else ub(x, d * conj(_inv(_number(m, x))))
            b = base[0]
            lb = m.log(b)
            dx = None if _int(x) else ub(x, d * conj(_inv(_number(m, x) * lb)))
            db = None if _int(b) else ub(b, -d * conj(y * _inv(_number(m, b) * lb)))
            return None, dx, db
        return y, back


_log_rule(math)
_log_rule(cmath)


@rule(math.pow)
def _pow(x, p):
    y = math.pow(x, p)

    def back(d):
        fx, fp = float(x), float(p)
        dx = dp = None
        if not _int(x):
            if fp == 0:
                dx = d * 0.0
            elif fx == 0 and fp < 1:
                dx = zero_cotangent(d, d * math.copysign(math.inf, fp))
            else:
                dx = d * fp * math.pow(fx, fp - 1)
            dx = ub(x, dx)
        if not _int(p):  # log|x| as for ``**`` (the real part of the complex log)
            dp = ub(p, d * (y * math.log(abs(fx)) if fx != 0 else 0.0))
        return None, dx, dp
    return y, back


@rule(math.atan2)
def _atan2(a, b):
    y = math.atan2(a, b)

    def back(d):
        fa, fb = float(a), float(b)
        r2 = fa * fa + fb * fb
        s = d / r2 if r2 else d * 0.0
        return None, None if _int(a) else ub(a, s * fb), None if _int(b) else ub(b, -s * fa)
    return y, back


@rule(math.hypot)
def _hypot(*xs):
    y = math.hypot(*xs)

    def back(d):
        s = d / y if y else d * 0.0
        return (None,) + tuple(None if _int(x) else ub(x, s * float(x)) for x in xs)
    return y, back


@rule(math.copysign)
def _copysign(x, s):
    y = math.copysign(x, s)
    if _int(x):
        return y, nograd(2)
    sign = math.copysign(1.0, float(x)) * math.copysign(1.0, float(s))
    return y, lambda d: (None, ub(x, d * sign), None)


def _remainder_rule(f):
    """``f(x, y) = x - n*y`` with an integer ``n``: like ``%``, d/dx = 1, d/dy = -n."""
    @rule(f)
    def _(a, b):
        r = f(a, b)

        def back(d):
            n = float(round((float(a) - r) / float(b)))
            return None, None if _int(a) else ub(a, d), None if _int(b) else ub(b, -d * n)
        return r, back


_remainder_rule(math.fmod)
_remainder_rule(math.remainder)


@rule(math.ldexp)
def _ldexp(x, i):
    y = math.ldexp(x, i)
    return y, lambda d: (None, None if _int(x) else ub(x, d * math.ldexp(1.0, i)), None)


@rule(math.nextafter)
def _nextafter(x, toward):
    y = math.nextafter(x, toward)
    return y, lambda d: (None, None if _int(x) else ub(x, d), None)


@rule(math.frexp)
def _frexp(x):
    m, e = y = math.frexp(x)
    if _int(x):
        return y, nograd(1)
    return y, lambda d: (None, None if d[0] is None else ub(x, d[0] * math.ldexp(1.0, -e)))


@rule(math.modf)
def _modf(x):
    y = math.modf(x)
    if _int(x):
        return y, nograd(1)
    return y, lambda d: (None, None if d[0] is None else ub(x, d[0]))


# ---- functions of sequences ---------------------------------------------------

def mirror(xs, gs):
    """The gradient of the sequence ``xs`` from its items' gradients ``gs`` (None for
    zero): a list for a list, a tuple for a tuple, an array for an array; None when
    every item's gradient is zero or ``xs`` is another kind of iterable.  For an
    `IndexIter` the caller consumed to its end, the gradient of the sequence under it."""
    if all(g is None for g in gs):
        return None
    if type(xs) is IndexIter:
        n, start = len(xs.xs), xs.i - len(gs)
        return mirror(xs.xs, [None] * start + list(gs) + [None] * (n - start - len(gs)))
    if isinstance(xs, list):
        return gs
    if isinstance(xs, tuple):
        return tuple(gs)
    if isinstance(xs, SETS):  # gs in the set's order (`items`)
        return set_grad(xs, gs)
    if isinstance(xs, np.ndarray):
        if xs.dtype.kind not in "fc":
            return None
        zero = np.zeros(xs.shape[1:], xs.dtype)
        return ub(xs, np.array([zero if g is None else g for g in gs]))
    return None


def items(xs):
    """The items of the iterable ``xs`` as a sequence (a list for one-shot iterators)."""
    return xs if isinstance(xs, (list, tuple, np.ndarray)) else list(xs)


@rule(math.fsum)
def _fsum(xs):
    v = items(xs)
    y = math.fsum(v)
    return y, lambda d: (None, mirror(xs, [None if _int(x) else ub(x, d) for x in v]))


@rule(math.prod)
def _prod(xs, **kw):
    v = items(xs)
    start = kw.get("start", 1)
    y = math.prod(v, **kw)

    def back(d):
        n = len(v)
        before = [start] * (n + 1)  # start * v[0] * … * v[i-1]
        for i in range(n):
            before[i + 1] = before[i] * v[i]
        gs, after = [None] * n, 1  # after = v[i+1] * … * v[n-1]
        for i in range(n - 1, -1, -1):
            if not _int(v[i]):
                gs[i] = ub(v[i], d * conj(before[i] * after))
            after = v[i] * after
        g = (None, mirror(xs, gs))
        if "start" in kw:
            g += ({"start": None if _int(start) else ub(start, d * conj(after))},)
        return g
    return y, back


@rule(math.dist)
def _dist(p, q):
    vp, vq = items(p), items(q)
    y = math.dist(vp, vq)

    def back(d):
        s = d / y if y else d * 0.0
        gs = [s * (float(a) - float(b)) for a, b in zip(vp, vq)]
        return (None, mirror(p, [None if _int(a) else ub(a, g) for a, g in zip(vp, gs)]),
                mirror(q, [None if _int(b) else ub(b, -g) for b, g in zip(vq, gs)]))
    return y, back


# ---- cmath's polar coordinates ------------------------------------------------

@rule(cmath.phase)
def _phase(z):
    y = cmath.phase(z)
    if _int(z):
        return y, nograd(1)
    w = complex(z)  # d phase = d * i z / |z|² (zero at the origin)
    g = 1j * w / abs(w) ** 2 if w else 0j
    return y, lambda d: (None, ub(z, d * g))


@rule(cmath.polar)
def _polar(z):
    y = cmath.polar(z)
    if _int(z):
        return y, nograd(1)
    w = complex(z)
    r = abs(w)
    u = w / r if r else 0j

    def back(d):
        dr, dphi = d
        g = (0j if dr is None else dr * u) + (0j if dphi is None or not r else dphi * 1j * u / r)
        return None, ub(z, g)
    return y, back


@rule(cmath.rect)
def _rect(r, phi):
    y = cmath.rect(r, phi)
    e = cmath.exp(1j * float(phi))
    return y, lambda d: (None, None if _int(r) else ub(r, (d * e.conjugate()).real),
                         None if _int(phi) else ub(phi, (d * (1j * y).conjugate()).real))


nondifferentiable(math.floor, math.ceil, math.trunc, math.isnan, math.isinf, math.isfinite,
                  math.isclose, math.factorial, math.comb, math.perm, math.gcd, math.lcm,
                  math.isqrt, math.ulp, cmath.isnan, cmath.isinf, cmath.isfinite, cmath.isclose)


# (prod and sumprod multiply whatever they are given: arrays too)
returns_scalars("scalar", *(getattr(_m, n) for _m in (math, cmath) for n in dir(_m)
                            if callable(getattr(_m, n)) and not n.startswith("_")
                            and n not in ("prod", "sumprod")))
