"""Rules for NumPy's reductions: sum prod mean var std max min amax amin ptp cumsum
cumprod diff and ``np.linalg.norm``, as functions and as ndarray (and NumPy scalar)
methods; and their nan* forms nansum nanprod nanmax nanmin nanmean nanvar nanstd
nancumsum nancumprod, which are the rules above on the input with the NaNs replaced
(or masked out with ``where=``), the NaNs' gradients set to 0.

Every rule takes NumPy's arguments (``axis`` as None, an int, a negative int or a
tuple; ``keepdims``; ``dtype``; ``ddof``/``correction``; ``where``; ``initial``) and
passes them to NumPy unchanged for the value.  The pullback spreads the output's
gradient back over the reduced axes by reshaping it to the ``keepdims`` shape and
broadcasting, with no Python loop over elements.  Gradients have the input's shape
and dtype (float32 stays float32, also with ``dtype=np.float64``); integer and
boolean inputs get None; a Python list or tuple input gets a gradient of the same
structure.  Complex inputs follow the Zygote convention, ``dy * conj(∂y/∂x)``.

Conventions where the derivative is not unique:

* max / min / amax / amin (and the max and min inside ptp and the inf-norms): the
  gradient is split equally among tied extrema (JAX's convention), so
  ``np.max([1., 3., 3.])`` gives ``[0, .5, .5]``; a NaN result routes its gradient
  to the NaNs; with ``initial=`` an initial value equal to the result counts as one
  of the tied candidates.
* std: zero gradient where the standard deviation is 0.
* norm: zero gradient where a vector norm is 0; sign(0) = 0 for the 1-norms; an order
  p < 1 at a zero entry, where the slopes are ±inf: nan, 0 where the cotangent is 0.
"""
from __future__ import annotations

import operator

from ._frozen import np

from ..runtime.algebra import Fill, is_differentiable
from ..runtime.rules import nograd, only_reads, rule, sparse_gradients
from . import buffers
from ._util import light, unbroadcast, zero_cotangent

_F64 = np.float64

_NV = np._NoValue
_NONES = [(None,) * n for n in range(12)]


# --- helpers -----------------------------------------------------------------

def _float(a):
    """``a`` as an array if it can carry a gradient (a float or complex array, or an
    array-like of floats), else None."""
    if type(a) is np.ndarray:
        return a if a.dtype.kind in "fc" else None
    if not is_differentiable(a):
        return None
    x = np.asarray(a)
    return x if x.dtype.kind in "fc" else None


def _like(a, g):
    """The gradient array ``g`` (of ``np.shape(a)``) in the form of ``a``."""
    if isinstance(a, np.ndarray):
        k = a.dtype.kind
        if k not in "fc":
            return None
        if type(g) is not np.ndarray:  # ufuncs of 0-d arrays give NumPy scalars
            g = np.asarray(g)
        if k == "f" and g.dtype.kind == "c":
            g = g.real
        return g if g.dtype == a.dtype else g.astype(a.dtype)
    t = type(a)
    if t is list or t is tuple:
        return t(_like(ai, gi) for ai, gi in zip(a, g))
    if t is float or isinstance(a, np.floating):
        v = np.real(g)
        return float(v) if t is float else a.dtype.type(v)
    if t is complex:
        return complex(g)
    if isinstance(a, np.complexfloating):
        return a.dtype.type(g)
    return None


def _arg(args, kw, i, name, default=None):
    return args[i] if len(args) > i else kw.get(name, default)


def _flag(v):
    return False if v is _NV else bool(v)


def _no_out(out, name):
    if out is not None:
        raise TypeError(f"np.{name}(..., out=...) writes into an array and cannot be "
                        f"differentiated; use the returned value instead of out=")


def _axes(axis, ndim):
    """The reduced axes, normalised and sorted."""
    if axis is None:
        return tuple(range(ndim))
    if ndim == 0:
        return ()
    if isinstance(axis, (tuple, list)):
        return tuple(sorted({operator.index(a) % ndim for a in axis}))
    return (operator.index(axis) % ndim,)


def kshape(shape, axes):
    """``shape`` with the reduced ``axes`` kept as 1s.  (A list, not a generator: forward
    over forward lifts the forward rule of the norm, which calls this.)"""
    return tuple([1 if i in axes else n for i, n in enumerate(shape)])


def _mask(where, x):
    """``where`` broadcast to ``x``'s shape, or None for everywhere."""
    if where is _NV or where is True:
        return None
    return np.broadcast_to(np.asarray(where, dtype=bool), x.shape)


def _real_for(dy, x):
    """The output gradient as an array, real where ``x`` is real."""
    d = np.asarray(dy)
    return d.real if d.dtype.kind == "c" and x.dtype.kind != "c" else d


def _dy(dy, x, kshape):
    """The output gradient as an array in the keepdims shape (real for real ``x``)."""
    d = _real_for(dy, x)
    return d.reshape(kshape) if d.shape != kshape else d


def _spread_mean(like, size):
    """The pullback of ``np.mean`` over all of an array ``like`` (holding no array); the
    seed of a gradient, a float, is divided as one (a 0-d array's division costs a
    microsecond)."""
    return lambda dy: (None, Fill(dy / size if type(dy) is float else _real_for(dy, like) / size,
                                  like.shape, like.dtype, _spread))


def _spread(d, x):
    """A fresh array of ``x``'s shape and dtype holding ``d`` broadcast."""
    g = buffers.empty(x.shape, x.dtype)
    g[...] = d
    return g


def _sign(x):
    """d|x|/dx in the Zygote convention: sign for reals, x/|x| for complex; 0 at 0."""
    if x.dtype.kind != "c":
        return np.sign(x)
    a = np.abs(x)
    return np.divide(x, a, out=np.zeros_like(x), where=a != 0)


def _safe_div(num, den):
    """``num / den`` with 0 where ``den`` is 0."""
    num, den = np.asarray(num), np.asarray(den)
    out = np.zeros(np.broadcast_shapes(num.shape, den.shape), np.result_type(num, den))
    return np.divide(num, den, out=out, where=den != 0)


def _grads(ga, n, kw, extra=()):
    """``(None, ga, None, ...)`` for ``n`` further positional arguments; ``extra`` holds
    ``(position among them, name, gradient)`` for differentiable optional arguments,
    which go in their positional slot or, if keyword-only (``mean=``; `forward` binds the
    others to their positions), in a trailing dict."""
    if not extra:
        return (None, ga) + _NONES[n] if n < 12 else (None, ga) + (None,) * n
    out, kwd = [None, ga] + [None] * n, {}
    for pos, name, g in extra:
        if g is None:
            continue
        if name in kw:
            kwd[name] = g
        elif pos < n:
            out[2 + pos] = g
    if kwd:
        out.append(kwd)
    return tuple(out)


def _given(v):
    return v is not _NV and v is not None and is_differentiable(v)


def _scalar_grad(v, g):
    """The gradient ``g`` (summed over everything) for the scalar argument ``v``."""
    return unbroadcast(v, np.asarray(g)) if _given(v) else None


# --- sum, mean -----------------------------------------------------------------

_REALS = frozenset({float, np.float64, np.float32, np.float16})


def _filled(x, dy):
    """A fresh array of ``x``'s shape and dtype filled with the real scalar ``dy``."""
    g = np.empty(x.shape, x.dtype)
    g.fill(dy)
    return g


def _whole(a, args, kw) -> bool:
    """Whether a reduction reduces all of the plain array ``a``, with no options: then
    ``np.sum(a)`` is ``np.add.reduce(a, None)`` (what NumPy's wrapper calls, after
    a dispatch that costs as much as summing 100 numbers)."""
    return type(a) is np.ndarray and not args and not kw


@rule(np.sum, np.ndarray.sum, np.generic.sum, like=np.sum)
def _sum(a, *args, **kw):
    whole = _whole(a, args, kw)
    y = np.add.reduce(a, None) if whole else np.sum(a, *args, **kw)
    n = len(args)
    if whole:  # the common case: everything summed
        if a.dtype.kind not in "fc":
            return y, nograd(1)
        return y, lambda dy: (None, _filled(a, dy) if type(dy) in _REALS
                              else _spread(_dy(dy, a, ()), a))
    x = _float(a)
    initial = _arg(args, kw, 4, "initial", _NV)
    if x is None and not _given(initial):
        return y, nograd(n + 1)
    _no_out(_arg(args, kw, 2, "out"), "sum")

    def back(dy):
        gi = _scalar_grad(initial, dy) if _given(initial) else None
        ga = None
        if x is not None:
            axes = _axes(_arg(args, kw, 0, "axis"), x.ndim)
            g = _spread(_dy(dy, x, kshape(x.shape, axes)), x)
            w = _mask(_arg(args, kw, 5, "where", True), x)
            if w is not None:
                g *= w
            ga = _like(a, g)
        return _grads(ga, n, kw, ((4, "initial", gi),)) if gi is not None else _grads(ga, n, kw)
    return y, back


@rule(np.mean, np.ndarray.mean, np.generic.mean, like=np.mean)
def _mean(a, *args, **kw):
    if not args and not kw and type(a) is np.ndarray and a.dtype.type is _F64 and a.size:
        # the common np.mean(x): NumPy's own sum and division, without its three Python
        # layers (a tenth of the MLP's overhead); each element gets dy / x.size
        size = a.size
        return np.add.reduce(a, None) / size, _spread_mean(light(a), size)
    y = np.mean(a, *args, **kw)
    x = _float(a)
    n = len(args)
    if x is None:
        return y, nograd(n + 1)
    if not args and not kw and x is a:
        return y, _spread_mean(light(x), x.size or 1)
    _no_out(_arg(args, kw, 2, "out"), "mean")

    def back(dy):
        axes = _axes(_arg(args, kw, 0, "axis"), x.ndim)
        d = _dy(dy, x, kshape(x.shape, axes))
        w = _mask(kw.get("where", True), x)
        if w is None:
            cnt = 1
            for i in axes:
                cnt *= x.shape[i]
            g = _spread(d / (cnt or 1), x)
        else:
            g = _spread(_safe_div(d, w.sum(axis=axes, keepdims=True)), x)
            g *= w
        return _grads(_like(a, g), n, kw)
    return y, back


sparse_gradients(np.mean, np.ndarray.mean, np.generic.mean)  # its argument's may be a Fill
only_reads(2, np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.var, np.std,
           np.ndarray.sum, np.ndarray.mean, np.ndarray.prod, np.ndarray.max, np.ndarray.min)  # (a, axis)


# --- var, std ------------------------------------------------------------------

def _moment(f, root):
    name = f.__name__

    def moment_rule(a, *args, **kw):
        y = f(a, *args, **kw)
        x = _float(a)
        n = len(args)
        mean = kw.get("mean", _NV)
        if x is None and not _given(mean):
            return y, nograd(n + 1)
        _no_out(_arg(args, kw, 2, "out"), name)
        xa = np.asarray(a)
        axes = _axes(_arg(args, kw, 0, "axis"), xa.ndim)
        ks = kshape(xa.shape, axes)
        dtype = _arg(args, kw, 1, "dtype")
        correction = kw.get("correction", _NV)
        ddof = correction if correction is not _NV else _arg(args, kw, 3, "ddof", 0)
        w = _mask(kw.get("where", True), xa)

        def back(dy):
            if w is None:
                cnt = 1
                for i in axes:
                    cnt *= xa.shape[i]
            else:
                cnt = w.sum(axis=axes, keepdims=True)
            if mean is _NV:
                m = np.mean(xa, axis=axes, dtype=dtype, keepdims=True,
                            where=True if w is None else w)
            else:
                m = np.asarray(mean)
            c = np.subtract(xa, m, dtype=dtype)  # x - mean, a fresh array
            d = _dy(dy, c, ks)
            with np.errstate(divide="ignore", invalid="ignore"):
                den = cnt - ddof
                if root:
                    s = _safe_div(d, den * np.reshape(y, ks))
                else:
                    s = 2 * d / den
            c *= s
            if w is not None:
                c *= w
            ga = _like(a, c) if x is not None else None
            if _given(mean):
                gm = unbroadcast(mean, -c.sum(axis=axes, keepdims=True))
                return _grads(ga, n, kw, ((99, "mean", gm),))
            return _grads(ga, n, kw)
        return y, back
    return moment_rule


rule(np.var, np.ndarray.var, np.generic.var, like=np.var, keywords=("mean",))(_moment(np.var, False))
rule(np.std, np.ndarray.std, np.generic.std, like=np.std, keywords=("mean",), note="zero gradient where the standard "
     "deviation is 0")(_moment(np.std, True))


# --- max, min, ptp -------------------------------------------------------------

def _share(x, yk, axes, d, w, initial):
    """The gradient of an extremum ``yk`` (keepdims shape) of ``x`` with output gradient
    ``d``, split equally among the entries equal to it: ``(grad x, grad initial)``."""
    mask = x == yk
    nan = np.isnan(yk)
    has_nan = nan.any()
    if has_nan:
        mask |= np.isnan(x) & nan
    if w is not None:
        mask &= w
    ti = None
    if initial is not _NV:
        ti = np.asarray(initial) == yk
    if w is None and ti is None and not has_nan and np.count_nonzero(mask) == yk.size:
        share = d  # no ties: one maximum per slice
    else:
        cnt = mask.sum(axis=axes, keepdims=True)
        if ti is not None:
            cnt = cnt + ti
        share = d / cnt if cnt.size else d
    dtype = x.dtype if x.dtype.kind in "fc" else np.float64
    if share.dtype.kind == "c" and dtype.kind != "c":
        share = share.real
    g = np.multiply(mask, share, dtype=dtype)
    gi = None
    if ti is not None and _given(initial):
        gi = _scalar_grad(initial, np.where(ti, share, 0))
    return g, gi


def _extremum(f, reduce):
    name = f.__name__

    def extremum_rule(a, *args, **kw):
        whole = _whole(a, args, kw)
        y = reduce(a, None) if whole else f(a, *args, **kw)
        x = _float(a)
        n = len(args)
        initial = _arg(args, kw, 3, "initial", _NV)
        if x is None and not _given(initial):
            return y, nograd(n + 1)
        _no_out(_arg(args, kw, 1, "out"), name)
        real = whole and a.dtype.kind == "f" and a.ndim

        def back(dy):
            if real and type(dy) in _REALS:  # np.max(x) of a real array: one maximum?
                mask = a == y  # (a NaN result equals nothing: the general way below)
                if np.count_nonzero(mask) == 1:  # _share's result, without its steps
                    return None, np.multiply(mask, dy, dtype=a.dtype)
            xa = np.asarray(a)
            axes = _axes(_arg(args, kw, 0, "axis"), xa.ndim)
            ks = kshape(xa.shape, axes)
            yk = np.reshape(y, ks)
            w = _mask(_arg(args, kw, 4, "where", True), xa)
            g, gi = _share(xa, yk, axes, _dy(dy, yk, ks), w, initial)
            ga = _like(a, g) if x is not None else None
            return _grads(ga, n, kw, ((3, "initial", gi),))
        return y, back
    return extremum_rule


_TIES = "the gradient is split equally among tied extrema (a NaN result goes to the NaNs)"
rule(np.max, np.amax, np.ndarray.max, np.generic.max, like=np.max, note=_TIES)(
    _extremum(np.max, np.maximum.reduce))
rule(np.min, np.amin, np.ndarray.min, np.generic.min, like=np.min, note=_TIES)(
    _extremum(np.min, np.minimum.reduce))


@rule(np.ptp, note="max minus min, each split equally among its ties (so 0 where all tie)")
def _ptp(a, *args, **kw):
    y = np.ptp(a, *args, **kw)
    x = _float(a)
    n = len(args)
    if x is None:
        return y, nograd(n + 1)
    _no_out(_arg(args, kw, 1, "out"), "ptp")
    axes = _axes(_arg(args, kw, 0, "axis"), x.ndim)
    ks = kshape(x.shape, axes)

    def back(dy):
        d = _dy(dy, x, ks)
        gmax, _ = _share(x, x.max(axis=axes, keepdims=True), axes, d, None, _NV)
        gmin, _ = _share(x, x.min(axis=axes, keepdims=True), axes, d, None, _NV)
        gmax -= gmin
        return _grads(_like(a, gmax), n, kw)
    return y, back


# --- prod ----------------------------------------------------------------------

def _others(xt):
    """For ``xt`` of shape ``(..., K)``: the product of all other entries along the last
    axis at each position, from exclusive cumulative products (exact with zeros)."""
    k = xt.shape[-1]
    left = np.empty_like(xt)
    left[..., 0] = 1
    if k > 1:
        np.cumprod(xt[..., :-1], axis=-1, out=left[..., 1:])
        right = np.empty_like(xt)
        right[..., -1] = 1
        np.cumprod(xt[..., :0:-1], axis=-1, out=right[..., -2::-1])
        left *= right
    return left


@rule(np.prod, np.ndarray.prod, np.generic.prod, like=np.prod,
      note="exact with zeros: products of the other entries, no division")
def _prod(a, *args, **kw):
    y = np.prod(a, *args, **kw)
    x = _float(a)
    n = len(args)
    initial = _arg(args, kw, 4, "initial", _NV)
    if x is None and not _given(initial):
        return y, nograd(n + 1)
    _no_out(_arg(args, kw, 2, "out"), "prod")
    xa = np.asarray(a)
    axes = _axes(_arg(args, kw, 0, "axis"), xa.ndim)
    dtype = _arg(args, kw, 1, "dtype")
    w = _mask(_arg(args, kw, 5, "where", True), xa)
    nd, k = xa.ndim, len(axes)
    rest = tuple(s for i, s in enumerate(xa.shape) if i not in axes)

    def back(dy):
        gi = None
        if _given(initial):
            p = np.prod(xa, axis=axes, dtype=dtype, where=True if w is None else w)
            gi = _scalar_grad(initial, np.asarray(dy) * np.conj(p))
        ga = None
        if x is not None:
            if xa.size == 0:
                g = np.zeros(xa.shape, xa.dtype)
            else:
                xw = xa if w is None else np.where(w, xa, 1)
                if dtype is not None:
                    xw = xw.astype(dtype, copy=False)
                moved = axes != tuple(range(nd - k, nd))
                xt = np.moveaxis(xw, axes, range(nd - k, nd)) if moved else xw
                mshape = xt.shape
                o = _others(xt.reshape(rest + (-1,)))
                if o.dtype.kind == "c":
                    np.conj(o, out=o)
                d = _real_for(dy, o).reshape(rest + (1,))
                if initial is not _NV:
                    d = d * np.conj(initial)
                o *= d
                g = o.reshape(mshape)
                if moved:
                    g = np.moveaxis(g, range(nd - k, nd), axes)
                if w is not None:
                    g = g * w
            ga = _like(a, g)
        return _grads(ga, n, kw, ((4, "initial", gi),))
    return y, back


# --- cumsum, cumprod -----------------------------------------------------------

def _revcumsum(t, ax):
    return np.flip(np.cumsum(np.flip(t, ax), axis=ax), ax)


def _cum_setup(a, args, kw, name):
    x = _float(a)
    if x is None:
        return None
    _no_out(_arg(args, kw, 2, "out"), name)
    axis = _arg(args, kw, 0, "axis")
    if axis is None:
        return x, x.reshape(-1), 0
    return x, x, operator.index(axis) % max(x.ndim, 1)


@rule(np.cumsum, np.ndarray.cumsum, np.generic.cumsum)
def _cumsum(a, *args, **kw):
    y = np.cumsum(a, *args, **kw)
    n = len(args)
    s = _cum_setup(a, args, kw, "cumsum")
    if s is None:
        return y, nograd(n + 1)
    x, _, ax = s

    def back(dy):
        d = _real_for(dy, x)
        g = _revcumsum(d, ax) if d.ndim else d
        return _grads(_like(a, g.reshape(x.shape)), n, kw)
    return y, back


@rule(np.cumprod, np.ndarray.cumprod, np.generic.cumprod,
      note="exact at zeros (the first zero along the axis gets the gradient of the "
           "products after it, later entries none); elsewhere the gradient divides by the "
           "non-zero entries, so it loses accuracy only if partial products under/overflow")
def _cumprod(a, *args, **kw):
    y = np.cumprod(a, *args, **kw)
    n = len(args)
    s = _cum_setup(a, args, kw, "cumprod")
    if s is None:
        return y, nograd(n + 1)
    x, xf, ax = s

    def back(dy):
        d = _real_for(dy, x)
        if xf.ndim == 0 or xf.size == 0:
            return _grads(_like(a, np.array(d, dtype=x.dtype).reshape(x.shape)), n, kw)
        xt = np.moveaxis(xf, ax, -1)
        yt = np.moveaxis(np.asarray(y), ax, -1)
        dt = np.moveaxis(d, ax, -1)
        cx = np.conj(xt)
        rc = _revcumsum(dt * np.conj(yt), -1)
        zero = xt == 0
        if not zero.any():
            g = np.divide(rc, cx, out=rc)
        else:
            nz = np.cumsum(zero, axis=-1)
            before = nz == 0
            first = zero & (nz == 1)
            g = np.zeros(rc.shape, rc.dtype)
            np.divide(rc, cx, out=g, where=before)
            # the first zero: the partial products with it replaced by 1
            p = np.cumprod(np.where(first, 1, xt), axis=-1)
            rc1 = _revcumsum(dt * np.conj(p), -1)
            g[first] = rc1[first]
        g = np.moveaxis(g, -1, ax).reshape(x.shape)
        return _grads(_like(a, g), n, kw)
    return y, back


# --- diff ----------------------------------------------------------------------

@rule(np.diff)
def _diff(a, *args, **kw):
    y = np.diff(a, *args, **kw)
    n = len(args)
    order = _arg(args, kw, 0, "n", 1)
    pre = _arg(args, kw, 2, "prepend", _NV)
    app = _arg(args, kw, 3, "append", _NV)
    x = _float(a)
    if x is None and not _given(pre) and not _given(app):
        return y, nograd(n + 1)
    xa = np.asarray(a)
    ax = operator.index(_arg(args, kw, 1, "axis", -1)) % max(xa.ndim, 1)

    def split(g, v, start, length):
        """The part of ``g`` that came from ``v`` (summed if ``v`` was a broadcast scalar)."""
        part = g[(slice(None),) * ax + (slice(start, start + length),)]
        return unbroadcast(v, part) if np.ndim(v) == 0 else _like(v, part)

    def back(dy):
        d = np.asarray(dy)
        if order == 0:
            return _grads(_like(a, d) if x is not None else None, n, kw)
        # the transpose of the n-th difference: (-1)^n times the n-th difference of dy
        # padded with n zeros on both sides
        npre = 0 if pre is _NV else (1 if np.ndim(pre) == 0 else np.shape(pre)[ax])
        napp = 0 if app is _NV else (1 if np.ndim(app) == 0 else np.shape(app)[ax])
        length = npre + xa.shape[ax] + napp
        if length < order:  # the result is empty
            g = np.zeros(d.shape[:ax] + (length,) + d.shape[ax + 1:], d.dtype)
        else:
            z = np.zeros(d.shape[:ax] + (order,) + d.shape[ax + 1:], d.dtype)
            g = np.diff(d, order, axis=ax, prepend=z, append=z)
            if order % 2:
                np.negative(g, out=g)
        ga = None
        if x is not None:
            ga = _like(a, g[(slice(None),) * ax + (slice(npre, g.shape[ax] - napp),)]
                       if npre or napp else g)
        gp = split(g, pre, 0, npre) if _given(pre) else None
        gq = split(g, app, g.shape[ax] - napp, napp) if _given(app) else None
        return _grads(ga, n, kw, ((2, "prepend", gp), (3, "append", gq)))
    return y, back


# --- norm ----------------------------------------------------------------------

@rule(np.linalg.norm, note="ord=2/-2 need a distinct largest/smallest singular value "
      "(and -2 a non-zero one), 'nuc' full rank (else a subgradient); the inf-, 1-norms "
      "split the gradient among ties; zero gradient where the norm is 0; vector orders "
      "p < 1 need non-zero entries")
def _norm(a, *args, **kw):
    y = np.linalg.norm(a, *args, **kw)
    x = _float(a)
    n = len(args)
    if x is None:
        return y, nograd(n + 1)
    order = _arg(args, kw, 0, "ord")
    axes, kind = norm_kind(order, _arg(args, kw, 1, "axis"), x.ndim)
    ks = kshape(x.shape, axes)

    def back(dy):
        yk = np.reshape(y, ks)
        d = _dy(dy, yk, ks)
        g = x * _safe_div(d, yk) if kind == "l2" else norm_gradient(x, order, axes, kind, yk, d)
        gp = _order_grad(x, float(order), axes, yk, d) if by_order else None
        return _grads(None if g is None else _like(a, np.asarray(g)), n, kw, ((0, "ord", gp),))
    # a float order of a vector norm is a differentiable exponent (an int, inf or a name is not)
    by_order = type(order) in (float, np.float64) and 0 < abs(order) < np.inf and \
        len(axes) == 1 and kind != "mat"
    return y, back


def norm_kind(order, axis, nd):
    """``(axes, kind)`` of ``np.linalg.norm(x, order, axis)`` for an ``x`` of ``nd``
    dimensions: the axes it reduces, and ``"l2"`` (Euclidean or Frobenius), ``"vec"``
    (another vector norm) or ``"mat"`` (another matrix norm).  (Lists, not generators:
    forward over forward lifts the forward rule that calls this.)"""
    if axis is None:
        axes = tuple(range(nd))
        if order is None or (order in ("f", "fro") and nd == 2) or (order == 2 and nd == 1):
            return axes, "l2"
    else:
        axes = tuple([operator.index(i) % nd for i in axis]) if isinstance(axis, tuple) else \
            (operator.index(axis) % nd,)
    if len(axes) == 1:
        return axes, "l2" if order is None or order == 2 else "vec"
    return axes, "l2" if order in (None, "fro", "f") else "mat"


def norm_gradient(x, order, axes, kind, yk, d):
    """The gradient of a ``"vec"`` or ``"mat"`` norm (`norm_kind`) ``yk`` of ``x`` (in the
    keepdims shape) for the output gradient ``d``; None for the "0-norm", which counts."""
    if kind == "vec":
        return _vector_norm_grad(x, order, axes, yk, d)
    return _matrix_norm_grad(x, order, axes, yk, d)


def _order_grad(x, p, axes, yk, d):
    """The gradient of the order ``p`` of ``y = (Σ |x|^p)^(1/p)``:
    ``Σ d · y (Σ |x|^p ln|x| / (p Σ|x|^p) − ln(Σ|x|^p) / p²)``, zero where ``y`` is 0."""
    ax = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        axp = ax ** p
        s = np.sum(axp, axis=axes, keepdims=True)
        t = np.sum(np.where(ax > 0, axp * np.log(np.where(ax > 0, ax, 1.0)), 0.0), axis=axes, keepdims=True)
        dp = np.where(yk != 0, yk * (t / (p * s) - np.log(s) / (p * p)), 0.0)
    return float(np.sum(np.real(d) * dp))


def _vector_norm_grad(x, p, axes, yk, d):
    if p == np.inf or p == -np.inf:
        g, _ = _share(np.abs(x), yk, axes, d, None, _NV)
        return g * _sign(x)
    if p == 0:
        return None
    if p == 1:
        return _sign(x) * d
    ax = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = np.where(yk != 0, d * yk ** (1 - p), 0)
        return zero_cotangent(scale, _sign(x) * ax ** (p - 1) * scale)  # (p < 1: x = 0 is a pole)


def _matrix_norm_grad(x, p, axes, yk, d):
    r, c = axes
    if p in (1, -1, np.inf, -np.inf):
        if p == np.inf or p == -np.inf:
            r, c = c, r  # row sums instead of column sums
        s = np.abs(x).sum(axis=r, keepdims=True)
        share, _ = _share(s, yk, (c,), d, None, _NV)
        return _sign(x) * share
    xm = np.moveaxis(x, (r, c), (-2, -1))
    u, _, vh = np.linalg.svd(xm, full_matrices=False)
    dm = np.moveaxis(d, (r, c), (-2, -1))
    if p == "nuc":
        gm = (u @ vh) * dm
    else:
        i = 0 if p == 2 else u.shape[-1] - 1
        gm = u[..., :, i:i + 1] * (vh[..., i:i + 1, :] * dm)
    return np.moveaxis(gm, (-2, -1), (r, c))


# --- the nan* reductions: NaNs ignored ------------------------------------------

def _ignoring_nan(nanf, base, fill, where):
    """The rule of ``nanf``, which is ``base`` (a rule above, with the same positional
    parameters) ignoring NaNs: ``base``'s pullback on the input with its NaNs replaced by
    ``fill`` (and, if ``where``, masked out with ``where=``), the NaNs' gradients zeroed.
    The value is ``nanf``'s own."""
    def r(a, *args, **kw):
        y = nanf(a, *args, **kw)
        x = _float(a)
        if x is None:
            return y, base(a, *args, **kw)[1]
        nan = np.isnan(x)
        if where:
            kw = {**kw, "where": ~nan & _mask_or_all(kw.get("where", True), x)}
        back = base(np.where(nan, fill, x), *args, **kw)[1]

        def masked(dy):
            g = back(dy)
            ga = g[1]
            return g[:1] + (None if ga is None else _like(a, np.where(nan, 0, ga)),) + tuple(g[2:])
        return y, masked
    return r


def _mask_or_all(where, x):
    m = _mask(where, x)
    return True if m is None else m


_NAN_NOTE = "NaNs are ignored and get gradient 0"
for _nanf, _base, _fill, _where, _note in (
        (np.nansum, _sum, 0, False, ""), (np.nanprod, _prod, 1, False, ""),
        (np.nanmax, _extremum(np.max, np.maximum.reduce), -np.inf, False, "; " + _TIES),
        (np.nanmin, _extremum(np.min, np.minimum.reduce), np.inf, False, "; " + _TIES),
        (np.nanmean, _mean, 0, True, ""),
        (np.nanvar, _moment(np.var, False), 0, True, ""),
        (np.nanstd, _moment(np.std, True), 0, True, "; zero gradient where the standard "
         "deviation is 0"),
        (np.nancumsum, _cumsum, 0, False, ""), (np.nancumprod, _cumprod, 1, False, "")):
    rule(_nanf, keywords=("mean",) if _nanf in (np.nanvar, np.nanstd) else (),
         note=_NAN_NOTE + _note)(_ignoring_nan(_nanf, _base, _fill, _where))
