"""Forward rules of NumPy: elementwise functions, reductions, shape functions, products
and ``np.linalg``.

Most are one line of calculus: the elementwise functions reuse the derivative tables
of their reverse rules (`np_elementwise.UNARY`, `np_elementwise.BINARY`); a function
linear in one argument (``reshape``, ``sum``, ``fft``…) maps the tangent with itself;
one linear in a sequence of arrays (``concatenate``, ``stack``…) maps the sequence of
tangents; a product (``dot``, ``einsum``…) is the sum of the products with one factor
replaced by its tangent.  NumPy functions with a reverse rule and no forward rule
here get one derived from the reverse rule (`runtime.frules.derived`).

    >>> import numpy as np
    >>> from bytegrad.runtime.frules import FRULES
    >>> FRULES[np.sum]((np.ones((2, 3)), None), np.zeros((2, 3)), 1)
    (array([0., 0.]), array([3., 3.]))
"""
from __future__ import annotations

import functools
import types

from ._frozen import np

from ..runtime.frules import FRULES, derived, frule, zero_tangent
from ..runtime.jvp import jvp_call, jvp_call_kw
from ..runtime.nesting import lifted_frule, reduction_frule_in_reverse
from ..runtime.rules import record_of, rule
from ..runtime.tangents import current
from ._tangent import dense, fit, plus, regular
from ._util import zero_cotangent
from .arrays import _CONVERTER, _overridden, array_function
from .np_elementwise import _SMOOTH, BINARY, DIV, PICKS, UNARY, _arr, _call
from .np_linalg import _mH
from .np_reductions import _axes, kshape, norm_gradient, norm_kind
from .operators import _log

# -- NumPy functions in Python ----------------------------------------------------------

@frule(array_function)
def _array_function(ts, f, *args, **kw):
    """A NumPy function without a rule whose implementation is Python code (``np.delete``,
    ``np.insert``): that code in forward mode, as reverse mode differentiates it.  (The
    rule derived from the reverse one ran the reverse pass per element, which undid the
    implementation's writes into the array it returns: a value of uninitialized memory.)"""
    impl = getattr(f, "_implementation", None)
    if _overridden(args, kw) or not isinstance(impl, types.FunctionType):
        return derived(array_function, record_of(array_function))(ts, f, *args, **kw)
    if len(ts) > len(args) + 1:  # (the keyword arguments' tangents, last: `keyword_tangents`)
        return jvp_call_kw(impl, None, ts[1:-1], ts[-1], *args, **kw)
    return jvp_call(impl, None, ts[1:], *args, **kw)


_array_function.keyword_tangents = True


if _CONVERTER is not None:  # (how that code takes its arguments: a tuple of their tangents)
    @frule(_CONVERTER)
    def _converter(ts, *xs):
        y = _CONVERTER(*xs)
        if zero_tangent(ts):
            return y, None
        return y, tuple([None if t is None else FRULES[np.asarray]((t,), x)[1] for x, t in zip(xs, ts)])

    @frule(_CONVERTER.as_arrays)
    def _as_arrays(ts, c, **kw):
        return c.as_arrays(**kw), ts[0]

    @frule(_CONVERTER.__getitem__)
    def _converted(ts, c, i):
        return c[i], None if ts[0] is None else ts[0][i]

    @frule(_CONVERTER.wrap)
    def _wrap(ts, c, a, **kw):
        y = c.wrap(a, **kw)
        return y, None if ts[1] is None else np.reshape(ts[1], np.shape(y))


# -- elementwise ---------------------------------------------------------------------


def _unary(f, mode, deriv):
    smooth = f.__name__ in _SMOOTH  # (elsewhere the NaN policy: a zero tangent gives 0 at a pole)

    @frule(f)
    def fr(ts, x, *rest, **kw):
        y = _call(f, (x,), rest, kw) if rest or kw else f(x)
        d = ts[0]
        if d is None:
            return y, None
        u = deriv(_arr(x), y)
        g = d / u if mode is DIV else d * u
        return y, fit(g if smooth or regular(u, mode is DIV) else zero_cotangent(d, g), y)
    fr.batches = True
    return fr


for _fs, _mode, _deriv, _ in UNARY:
    for _f in _fs:
        _unary(_f, _mode, _deriv)


def _binary(f, ga, gb):
    """``ga(d, a, b, y)`` is the reverse rule's ``d * conj(∂y/∂a)``: for a tangent it
    gives ``conj(ga(conj(da), …))``, ``ga(da, …)`` for real values."""
    def part(g, d, a, b, y):
        if g is None or d is None:
            return None
        if np.iscomplexobj(d) or np.iscomplexobj(y):
            return np.conj(g(np.conj(d), a, b, y))
        return g(d, a, b, y)

    @frule(f)
    def fr(ts, a, b, *rest, **kw):
        y = _call(f, (a, b), rest, kw) if rest or kw else f(a, b)
        a2, b2 = _arr(a), _arr(b)
        return y, fit(plus(part(ga, _arr(ts[0]), a2, b2, y), part(gb, _arr(ts[1]), a2, b2, y)), y)
    return fr


for _fs, _ga, _gb in BINARY:
    for _f in _fs:
        _binary(_f, _ga, _gb)


def _power(f):
    @frule(f)
    def fr(ts, a, b, *rest, **kw):
        y = _call(f, (a, b), rest, kw) if rest or kw else f(a, b)
        a2, b2 = _arr(a), _arr(b)
        da, db = _arr(ts[0]), _arr(ts[1])
        out = None
        if da is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                u = np.where(b2 == 0, 0, b2 * f(a2, b2 - 1))
            out = da * u if regular(u) else zero_cotangent(da, da * u)  # (0.0 ** 0.5)
        if db is not None:
            out = plus(out, db * y * _log(np.asarray(a2)))
        return y, fit(out, y)
    return fr


_power(np.power)
_power(np.float_power)


@frule(np.abs, np.fabs)
def _abs(ts, x, *rest, **kw):
    y = _call(np.abs, (x,), rest, kw) if rest or kw else np.abs(x)
    d = _arr(ts[0])
    if d is None:
        return y, None
    if np.iscomplexobj(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return y, fit(np.where(y == 0, 0.0, np.real(np.conj(x) * d) / y), y)
    return y, fit(np.sign(x) * d, y)


@frule(np.sign)
def _sign(ts, x, *rest, **kw):
    if np.iscomplexobj(x) and ts[0] is not None:
        raise NotImplementedError("forward mode: the tangent of np.sign of a complex array is not "
                                  "implemented; use x / np.abs(x)")
    return (_call(np.sign, (x,), rest, kw) if rest or kw else np.sign(x)), None


def _pick(f, first):
    @frule(f)
    def fr(ts, a, b, *rest, **kw):
        y = _call(f, (a, b), rest, kw) if rest or kw else f(a, b)
        if ts[0] is None and ts[1] is None:
            return y, None
        m = first(_arr(a), _arr(b))
        return y, fit(np.where(m, dense(_arr(ts[0]), a), dense(_arr(ts[1]), b)), y)
    return fr


for _f, _first, _, _ in PICKS:
    _pick(_f, _first)


@frule(np.where)
def _where(ts, cond, *ab):
    y = np.where(cond, *ab)
    if not ab or ts[1] is None and ts[2] is None:
        return y, None
    a, b = ab
    return y, fit(np.where(cond, dense(_arr(ts[1]), a), dense(_arr(ts[2]), b)), y)


@frule(np.clip, np.ndarray.clip)
def _clip(ts, x, lo=None, hi=None, *rest, **kw):
    y = np.clip(x, lo, hi, *rest, **kw)
    ts = tuple(ts) + (None,) * (3 - len(ts))
    out = None
    inside = np.ones(np.shape(y), bool)
    for bound, d, beyond in ((hi, ts[2], np.greater), (lo, ts[1], np.less)):
        if bound is not None:
            past = beyond(x, bound) & inside
            inside &= ~past
            if d is not None:
                out = plus(out, np.where(past, d, 0.0))
    if ts[0] is not None:
        out = plus(out, np.where(inside, ts[0], 0.0))
    return y, fit(out, y)


def _conj(f):
    @frule(f)
    def fr(ts, x, *rest, **kw):
        return f(x, *rest, **kw), None if ts[0] is None else np.conj(ts[0])
    return fr


for _f in (np.conjugate, np.ndarray.conj, np.ndarray.conjugate, np.generic.conj, np.generic.conjugate):
    _conj(_f)


# -- linear in one argument: the tangent is the function of the tangent ----------------------

def _or_derived(f, at, fr):
    """``fr``, a rule linear in the arguments at positions ``at`` alone, for calls where no
    other tangent is nonzero; the rule derived from the reverse one for the others
    (``np.atleast_1d(x, y)``, a differentiable ``constant_values``)."""
    def r(ts, *args, **kw):
        if any([not zero_tangent(t) for i, t in enumerate(ts) if i not in at]):  # (a list: forward over forward lifts this; generators it does not)
            return derived(f, record_of(f))(ts, *args, **kw)
        return fr(ts, *args, **kw)
    return r


def linear(f, at=0):
    """Register the forward rule of ``f``, linear in argument ``at``: ``f(…, dx, …)``."""
    @frule(f)
    @functools.partial(_or_derived, f, (at,))
    def fr(ts, *args, **kw):
        y = f(*args, **kw)
        d = ts[at] if at < len(ts) else None
        if d is None:
            return y, None
        args = list(args)
        args[at] = dense(d, args[at]) if not isinstance(d, (list, tuple)) else _stacked(d, args[at])
        return y, fit(f(*args, **kw), y) if f is not np.broadcast_to else f(*args, **kw)
    return fr


def _stacked(ds, xs):
    """The tangent of an array-like list as an array."""
    return np.asarray([dense(d, x) if not isinstance(d, (list, tuple)) else _stacked(d, x)
                       for d, x in zip(ds, xs)])


_fft = np.fft
_LINEAR = [
    np.reshape, np.ndarray.reshape, np.ravel, np.ndarray.ravel, np.ndarray.flatten,
    np.transpose, np.ndarray.transpose, np.swapaxes, np.ndarray.swapaxes, np.moveaxis,
    np.rollaxis, np.squeeze, np.ndarray.squeeze, np.expand_dims, np.broadcast_to, np.tile, np.repeat, np.ndarray.repeat, np.flip, np.fliplr,
    np.flipud, np.roll, np.rot90, np.diagonal, np.ndarray.diagonal, np.diag, np.trace,
    np.ndarray.trace, np.triu, np.tril, np.real, np.imag, np.sum, np.ndarray.sum, np.mean,
    np.ndarray.mean, np.cumsum, np.ndarray.cumsum, np.diff, np.copy, np.ndarray.copy,
    np.array, np.asarray, np.ascontiguousarray, np.asfortranarray,
    np.take, np.ndarray.take, np.fft.fftshift, np.fft.ifftshift,
    np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.linalg.trace,
    np.take_along_axis, *((np.matrix_transpose,) if hasattr(np, "matrix_transpose") else ()),
    np.float64, np.float32, np.complex128, np.complex64,
    _fft.fft, _fft.ifft, _fft.rfft, _fft.irfft, _fft.fftn, _fft.ifftn, _fft.rfftn, _fft.irfftn,
    _fft.fft2, _fft.ifft2, _fft.rfft2, _fft.irfft2, _fft.hfft, _fft.ihfft,
]
for _f in _LINEAR:
    linear(_f)
for _f in (np.compress, np.extract):  # (the condition first)
    linear(_f, at=1)


def with_constants(f, fr, given):
    """Register ``fr`` as the forward rule of ``f`` for calls where ``given(args, kw)`` is
    false; otherwise (an ``initial=``, a ``prepend=``: constants the rule does not
    follow) the rule derived from the reverse one."""
    @frule(f, override=True)
    def r(ts, *args, **kw):
        if given(args, kw):
            return derived(f, record_of(f))(ts, *args, **kw)
        return fr(ts, *args, **kw)
    return r


_REDUCE_EXTRA = lambda n: lambda args, kw: len(args) > n or "initial" in kw or "where" in kw
for _f in (np.sum, np.ndarray.sum, np.mean, np.ndarray.mean, np.generic.sum, np.generic.mean):
    _r = with_constants(_f, linear(_f) if _f not in FRULES else FRULES[_f], _REDUCE_EXTRA(5))
    rule(_r)(reduction_frule_in_reverse(_f, _r, _REDUCE_EXTRA(5)))  # (reverse over forward)
    frule(_r)(lifted_frule(_r))  # (forward over forward)

with_constants(np.diff, FRULES[np.diff], lambda args, kw: len(args) > 3 or "prepend" in kw or "append" in kw)


@frule(np.real_if_close)
def _real_if_close(ts, x, tol=100):
    y = np.real_if_close(x, tol)
    return y, None if ts[0] is None else np.real(ts[0]) if not np.iscomplexobj(y) else ts[0]


@frule(np.ndarray.astype, *((np.astype,) if hasattr(np, "astype") else ()))
def _astype(ts, x, dtype, *rest, **kw):
    y = np.asarray(x).astype(dtype, *rest, **kw)
    keep = ts[0] is not None and np.dtype(dtype).kind in "fc"
    return y, ts[0].astype(dtype) if keep and isinstance(ts[0], np.ndarray) else (
        np.dtype(dtype).type(ts[0]) if keep else None)


def each_linear(f):
    """Register the forward rule of ``f``, linear in each of its positional arguments, all
    arrays (``np.atleast_1d(x, y)``, ``np.broadcast_arrays``): ``f(dx, dy, …)``."""
    @frule(f)
    def fr(ts, *args, **kw):
        y = f(*args, **kw)
        if all([t is None for t in ts]):
            return y, None
        return y, f(*[dense(t, a) for t, a in zip(ts, args)], **kw)
    return fr


for _f in (np.atleast_1d, np.atleast_2d, np.atleast_3d, np.broadcast_arrays):
    each_linear(_f)


def sequence_linear(f):
    """Register the forward rule of ``f``, linear in its first argument, a sequence of
    arrays (``concatenate``, ``stack``): ``f(tangents of the arrays, …)``."""
    @frule(f)
    @functools.partial(_or_derived, f, (0,))
    def fr(ts, xs, *rest, **kw):
        y = f(xs, *rest, **kw)
        d = ts[0]
        if d is None or all([di is None for di in d]):
            return y, None
        return y, f([dense(di, x) for di, x in zip(d, xs)], *rest, **kw)
    return fr


for _f in (np.concatenate, np.stack, np.hstack, np.vstack, np.dstack, np.column_stack):
    sequence_linear(_f)


# -- products: one factor at a time ---------------------------------------------------------

def bilinear(f):
    """Register the forward rule of ``f``, linear in each of its first two arguments."""
    @frule(f)
    @functools.partial(_or_derived, f, (0, 1))
    def fr(ts, a, b, *rest, **kw):
        y = f(a, b, *rest, **kw)
        da, db = ts[0], ts[1]
        return y, plus(None if da is None else f(da, b, *rest, **kw),
                       None if db is None else f(a, db, *rest, **kw))
    return fr


for _f in (np.matmul, np.dot, np.ndarray.dot, np.inner, np.outer, np.tensordot, np.vdot,
           np.kron, np.cross, np.linalg.matmul, np.linalg.outer, np.linalg.tensordot,
           np.linalg.cross, np.convolve, np.correlate,
           *(getattr(np, n) for n in ("vecdot", "matvec", "vecmat") if hasattr(np, n)),
           *((np.linalg.vecdot,) if hasattr(np.linalg, "vecdot") else ())):
    bilinear(_f)


@frule(np.linalg.multi_dot)
def _multi_dot(ts, arrays, *rest, **kw):
    y = np.linalg.multi_dot(arrays, *rest, **kw)
    out = None
    for i, d in enumerate(ts[0] or ()):
        if d is not None:
            out = plus(out, np.linalg.multi_dot(list(arrays[:i]) + [d] + list(arrays[i + 1:])))
    return y, out


@frule(np.linalg.norm)
def _norm(ts, x, ord=None, axis=None, keepdims=False):
    axes, kind = norm_kind(ord, axis, np.ndim(x))
    if kind != "l2" and ts[1] is not None:  # (a float order's tangent: the reverse rule's)
        return derived(np.linalg.norm, record_of(np.linalg.norm))(ts, x, ord, axis, keepdims)
    y = np.linalg.norm(x, ord, axis, keepdims)
    if ts[0] is None:
        return y, None
    if kind != "l2":  # ⟨the reverse rule's gradient (at d = 1), the tangent⟩, as code nesting lifts
        xa = np.asarray(x)
        ks = kshape(xa.shape, axes)
        g = norm_gradient(xa, ord, axes, kind, np.reshape(y, ks), np.ones(ks))
        if g is None:  # (the "0-norm" counts: piecewise constant)
            return y, 0.0 * y
        return y, np.sum(np.real(np.conj(g) * ts[0]), axis=axes, keepdims=keepdims)
    s = np.sum(np.real(np.conj(x) * ts[0]), axis=axes, keepdims=keepdims)
    if np.ndim(y) == 0:
        return y, (0.0 * y if y == 0 else s / np.reshape(y, ()) + 0.0 * y)
    return y, np.where(y == 0, 0.0, s / np.where(y == 0, 1.0, y))  # (zero where the norm is)


@frule(np.einsum)
def _einsum(ts, *args, **kw):
    """Each operand with a tangent, wherever it is: after the subscripts, or first and then
    every other argument in the sublist form ``np.einsum(x, [0, 1], y, [1, 2], [0, 2])``
    (the subscripts and sublists have no tangent)."""
    y = np.einsum(*args, **kw)
    out = None
    for i, d in enumerate(ts):
        if not zero_tangent(d):
            ops = list(args)
            ops[i] = d
            out = plus(out, np.einsum(*ops, **kw))
    return y, out


# -- reductions that are not linear -----------------------------------------------------------

def _extremum(f):
    """The forward rule of ``f``, a max or a min: the mean of the tangents of the tied
    extrema (of the NaNs, for a NaN result), as the reverse rule splits the gradient
    equally among them; so jacfwd is jacrev."""
    def fr(ts, x, axis=None, out=None, keepdims=False, *rest, **kw):
        y = f(x, axis, out, keepdims, *rest, **kw)
        d = ts[0]
        if d is None:
            return y, None
        x = np.asarray(x)
        yk = f(x, axis, keepdims=True)
        tied = (x == yk) | np.isnan(x) & np.isnan(yk)
        dy = np.sum(np.where(tied, dense(d, x), 0), axis, keepdims=keepdims)
        return y, dy / np.sum(tied, axis, keepdims=keepdims)
    return fr


for _f in (np.max, np.amax, np.ndarray.max, np.min, np.amin, np.ndarray.min):
    with_constants(_f, _extremum(_f), _REDUCE_EXTRA(4))


@frule(np.var, np.ndarray.var)
def _var(ts, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    """``where=`` (the elements counted), ``correction=`` (``ddof``) and a constant
    ``mean=`` (the center: a mean given is no mean of the tangent) as NumPy reads them."""
    y = np.var(x, axis, dtype, out, ddof, keepdims, **kw)
    if ts[0] is None:
        return y, None
    x, d = np.asarray(x), dense(ts[0], x)
    w = np.broadcast_to(kw.get("where", True), x.shape)
    n = np.sum(w, axis, keepdims=keepdims)
    if "mean" in kw:
        c, dc = x - kw["mean"], d
    else:
        c = x - np.mean(x, axis, keepdims=True, where=w)
        dc = d - np.mean(d, axis, keepdims=True, where=w)
    s = np.sum(np.real(np.conj(c) * dc), axis, keepdims=keepdims, where=w)
    return y, 2 * s / (n - kw.get("correction", ddof))


@frule(np.std, np.ndarray.std)
def _std(ts, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    v, dv = _var(ts, x, axis, dtype, out, ddof, keepdims, **kw)
    y = np.sqrt(v)
    if dv is None:
        return y, None
    with np.errstate(divide="ignore", invalid="ignore"):
        return y, np.where(y == 0, 0.0, dv / (2 * y))


def _prod(ts, x, axis=None, dtype=None, out=None, keepdims=False, *rest, **kw):
    y = np.prod(x, axis, dtype, out, keepdims, *rest, **kw)
    d = ts[0]
    if d is None:
        return y, None
    x = np.asarray(x)
    if np.any(x == 0):  # each element's cofactor without dividing by it
        axes = _axes(axis, x.ndim)
        kept = tuple([n for i, n in enumerate(x.shape) if i not in axes])
        moved = np.moveaxis(x, axes, range(-len(axes), 0)).reshape(kept + (-1,))  # (reduced: one last axis)
        dm = np.moveaxis(dense(d, x), axes, range(-len(axes), 0)).reshape(kept + (-1,))
        others = np.where(np.eye(moved.shape[-1], dtype=bool), 1, moved[..., None, :])  # (row i: x_i as 1)
        cof = np.prod(others, -1)
        dy = np.sum(cof * dm, -1)
        return y, np.reshape(dy, kshape(x.shape, axes)) if keepdims else dy
    return y, np.sum(d * (np.prod(x, axis, keepdims=True) / x), axis, keepdims=keepdims)


for _f in (np.prod, np.ndarray.prod):
    with_constants(_f, _prod, _REDUCE_EXTRA(5))


# -- the nan* reductions: NaNs ignored ------------------------------------------------------

def _ignoring_nan(nanf, base, fill, where):
    """Register the forward rule of ``nanf``: ``base`` (a forward rule with the same
    positional parameters: of the reduction ``nanf`` is once its NaNs are replaced by
    ``fill`` and, if ``where``, masked out with ``where=``) on that input, the NaNs'
    tangents zero, as in the reverse rule: NumPy skips a NaN, and so its tangent, which
    may be NaN too (``d(x ** 2)`` where x is NaN).  The value is ``nanf``'s own."""
    @frule(nanf)
    def fr(ts, x, *args, **kw):
        y = nanf(x, *args, **kw)
        if zero_tangent(ts):
            return y, None
        nan = np.isnan(x)
        if where:
            kw = {**kw, "where": ~nan & np.asarray(kw.get("where", True))}
        ts = (None if ts[0] is None else np.where(nan, 0, ts[0]),) + tuple(ts[1:])
        return y, base(ts, np.where(nan, fill, x), *args, **kw)[1]
    return fr


def _mean_of_tangent(ts, x, *args, **kw):
    """The tangent of np.mean, linear: the mean of the tangent, with the same where=.  (Given
    where=, np.mean's own rule derives it from the reverse rule, a pullback per element.)"""
    return None, np.mean(ts[0], *args, **kw)


for _nanf, _base, _fill, _where in (
        (np.nansum, FRULES[np.sum], 0, False), (np.nanprod, FRULES[np.prod], 1, False),
        (np.nanmax, FRULES[np.max], -np.inf, False), (np.nanmin, FRULES[np.min], np.inf, False),
        (np.nanmean, _mean_of_tangent, 0, True), (np.nanvar, _var, 0, True), (np.nanstd, _std, 0, True),
        (np.nancumsum, FRULES[np.cumsum], 0, False),
        (np.nancumprod, derived(np.cumprod, record_of(np.cumprod)), 1, False),
        *((_f, derived(_f, record_of(_f)), np.nan, False)  # (their own, on the NaNs kept)
          for _f in (np.nanmedian, np.nanquantile, np.nanpercentile))):
    _ignoring_nan(_nanf, _base, _fill, _where)


# -- linear algebra -------------------------------------------------------------------------

@frule(np.linalg.solve)
def _solve(ts, a, b):
    y = np.linalg.solve(a, b)
    da, db = ts
    if da is None and db is None:
        return y, None
    vector = np.ndim(b) == 1 or np.ndim(b) == np.ndim(a) - 1 and np.shape(b) == np.shape(a)[:-1]
    rhs = db if db is not None else 0
    if da is not None:
        rhs = rhs - (np.matmul(da, y[..., None])[..., 0] if vector else np.matmul(da, y))
    return y, np.linalg.solve(a, rhs)


@frule(np.linalg.inv)
def _inv(ts, a):
    y = np.linalg.inv(a)
    return y, None if ts[0] is None else -(y @ ts[0] @ y)


@frule(np.linalg.det)
def _det(ts, a):
    y = np.linalg.det(a)
    if ts[0] is None:
        return y, None
    return y, y * np.trace(np.linalg.solve(a, ts[0]), axis1=-2, axis2=-1)


@frule(np.linalg.slogdet)
def _slogdet(ts, a):
    y = np.linalg.slogdet(a)
    if ts[0] is None:
        return y, None
    t = np.trace(np.linalg.solve(a, ts[0]), axis1=-2, axis2=-1)
    if np.iscomplexobj(a):
        return y, (y[0] * 1j * np.imag(t), np.real(t))
    return y, (None, t)


@frule(np.linalg.cholesky)
def _cholesky(ts, a, *rest, **kw):
    y = np.linalg.cholesky(a, *rest, **kw)
    if ts[0] is None:
        return y, None
    low = _mH(y) if kw.get("upper", False) else y  # (upper=True gives L^H: its tangent is dL^H)
    inv_l = np.linalg.inv(low)
    da = (ts[0] + _mH(ts[0])) / 2  # (the Hermitian part: f((a + a^H) / 2))
    m = inv_l @ da @ _mH(inv_l)
    phi = np.tril(m, -1) + 0.5 * m * np.eye(m.shape[-1])
    dl = low @ phi
    return y, _mH(dl) if low is not y else dl


@frule(np.nan_to_num)
def _nan_to_num(ts, x, copy=True, nan=0.0, posinf=None, neginf=None):
    finite = np.isfinite(x)
    replaced = [(test(x), i) for test, i in ((np.isnan, 2), (np.isposinf, 3), (np.isneginf, 4))]
    y = np.nan_to_num(x, copy, nan, posinf, neginf)  # (copy=False: x changes here)
    d = None if ts[0] is None else np.where(finite, ts[0], 0.0)
    for where, i in replaced:
        if i < len(ts) and ts[i] is not None:
            d = plus(d, np.where(where, ts[i], 0.0))
    if copy or type(x) is not np.ndarray:
        return y, fit(d, y) if d is not None else None
    t = current().writable(x, ts[0], "numpy.nan_to_num(copy=False)")
    if t is not None:
        t[...] = 0.0 if d is None else d
    return y, t


# -- changes in place: the same change made to the tangent -----------------------------------

def same_write(f, target, values):
    """Register the forward rule of ``f``, which writes into argument ``target`` values
    linear in the arguments at ``values``: after the write, the same write into the
    target's tangent (in the tangent shadow), with the values' tangents (zero if None)."""
    @frule(f)
    def fr(ts, *args, **kw):
        a = args[target]
        sh = current()
        if all([t is None for t in ts]) and id(a) not in sh.entries and not sh.entries:
            return f(*args, **kw), None
        t = sh.writable(a, ts[target], f"{f.__qualname__}")
        y = f(*args, **kw)
        if t is not None:
            targs = list(args)
            targs[target] = t
            for i in values:
                if i < len(args):
                    targs[i] = dense(_arr(ts[i]), args[i]) if ts[i] is not None else np.zeros(np.shape(args[i]))
            f(*targs, **kw)
        return y, None
    return fr


same_write(np.copyto, 0, (1,))
same_write(np.ndarray.fill, 0, (1,))
same_write(np.put, 0, (2,))
same_write(np.ndarray.put, 0, (2,))
same_write(np.place, 0, (2,))
same_write(np.fill_diagonal, 0, (1,))


@frule(np.ufunc.at)
def _ufunc_at(ts, uf, a, idx, b=None):
    if uf not in (np.add, np.subtract) or b is None:
        if a.dtype.kind in "fc" and any([t is not None for t in ts]):
            raise NotImplementedError(f"forward mode: np.{uf.__name__}.at is not differentiable; only "
                                      f"np.add.at and np.subtract.at are")
        return uf.at(a, idx, *(() if b is None else (b,))), None
    sh = current()
    t = sh.writable(a, ts[1], f"numpy.{uf.__name__}.at")
    uf.at(a, idx, b)
    if t is not None and ts[3] is not None:
        uf.at(t, idx, ts[3])
    return None, None


def _sort_along(x, d, axis):
    """``d`` permuted as a stable sort of ``x`` along ``axis`` permutes ``x``."""
    return np.take_along_axis(d, np.argsort(x, axis=axis, kind="stable"), axis)


@frule(np.sort)
def _np_sort(ts, x, axis=-1, kind=None, order=None, **kw):
    y = np.sort(x, axis, kind, order, **kw)
    if ts[0] is None:
        return y, None
    if axis is None:
        return y, dense(ts[0], x).reshape(-1)[np.argsort(np.asarray(x).reshape(-1), kind="stable")]
    return y, _sort_along(np.asarray(x), dense(ts[0], x), axis)


@frule(np.ndarray.sort)
def _ndarray_sort(ts, x, axis=-1, kind=None, order=None):
    sh = current()
    if ts[0] is None and id(x) not in sh.entries and not sh.entries:
        return x.sort(axis, kind, order), None
    t = sh.writable(x, ts[0], "ndarray.sort")
    if t is not None:
        t[...] = _sort_along(x, t.copy(), axis)
    x.sort(axis, "stable", order)
    return None, None
