"""Rules for ``np.cov``, ``np.corrcoef``, ``np.average``, and ``np.median``,
``np.percentile``, ``np.quantile`` with their nan* forms (at the end: every method of
NumPy is a combination ``(1 - g) s[j] + g s[j + 1]`` of two neighbouring order statistics,
``j`` and ``g`` depending on the count and q only, so the gradient goes back through
``np.argsort``'s permutation; the nan* forms count the non-NaN entries of each slice, and
NaNs get gradient 0).

``np.cov`` stacks its inputs into ``X``, one variable per row (``rowvar=False``
transposes, as NumPy does), centres each row on its (weighted) mean and returns
``C = Xc W Xc^H / F`` with ``W`` the diagonal of the weights ``w`` (``fweights``
times ``aweights``; ones without) and ``F`` the normalisation NumPy picks from
``ddof``, ``bias`` and the weights.  For the output gradient ``G``:
``dX = (G + G^H) Xc W / F`` (the centring needs no term of its own: ``Xc w = 0``),
split back into ``m`` and ``y``.  ``aweights`` get a gradient too, through ``W`` and
``F``: ``da_k = f_k Re(x_k^H G x_k) / F - Re<G, C> / F * dF/da_k`` (``x_k`` the
centred column ``k``; the means drop out for the same reason).  ``fweights`` are
integers and get none.  With no degrees of freedom left NumPy divides by 0, and the
gradient is as infinite as the value.

``np.corrcoef`` is ``R = C / (s s^T)`` with ``s = sqrt(Re diag C)``: ``dC = dR / (s
s^T)`` plus, on the diagonal, what moves ``s``.  The diagonal of ``R`` is 1 whatever
``C`` is, so its gradient is dropped; NumPy's clipping of ``R`` to ``[-1, 1]``, which
catches rounding only, is not differentiated.  The correlation of a single variable
(a scalar 1, or NaN) gets no gradient.
"""
from __future__ import annotations

from ._frozen import np

from ..runtime.rules import rule
from ._named import by_name
from ._util import active, unbroadcast as ub
from .np_elementwise import _thunk


def _covariance(m, y, rowvar, bias, ddof, fweights, aweights, dtype):
    """np.cov's value ``c`` and ``grads(G)``: the gradients of ``m``, ``y`` and
    ``aweights`` (`by_name` thunks) for the gradient ``G`` of ``c``."""
    c = np.cov(m, y, rowvar, bias, ddof, fweights, aweights, dtype=dtype)
    if c.size == 0:
        return c, lambda G: {}
    if dtype is None:
        dtype = np.result_type(*(np.asarray(v) for v in (m, y) if v is not None), np.float64)
    # one variable per row, as NumPy makes them (its rules for m and y differ: a 1-D m
    # is one variable, and so is a y that is one row once made 2-D)
    xm = np.array(m, ndmin=2, dtype=dtype)
    flip_m = not rowvar and np.ndim(m) != 1
    X = xm = xm.T if flip_m else xm
    if y is not None:
        xy = np.array(y, ndmin=2, dtype=dtype)
        flip_y = not rowvar and xy.shape[0] != 1
        X = np.concatenate((xm, xy.T if flip_y else xy))
    ddof = (0 if bias else 1) if ddof is None else ddof
    f = None if fweights is None else np.asarray(fweights, float)
    a = None if aweights is None else np.asarray(aweights, float)
    w = f if a is None else a if f is None else f * a
    if w is None:
        Xc = X - X.mean(axis=1, keepdims=True)
        Xw, F = Xc, X.shape[1] - ddof
    else:
        S = w.sum()
        Xc = X - (X @ w / S)[:, None]
        Xw = Xc * w
        F = S if ddof == 0 else S - ddof if a is None else S - ddof * np.sum(w * a) / S
    F = max(F, 0.0)  # as NumPy: then c is inf or NaN, and so is the gradient
    k = X.shape[0]

    def grads(G):
        G = np.asarray(G).reshape(k, k)
        memo = {}

        def dX():
            if "X" not in memo:
                with np.errstate(divide="ignore", invalid="ignore"):
                    memo["X"] = (G + np.conj(G.T)) @ Xw / F
            return memo["X"]

        def part(v, lo, hi, flip):
            g = dX()[lo:hi]
            return ub(v, (g.T if flip else g).reshape(np.shape(v)))

        def da():
            fk = 1.0 if f is None else f
            S, T = w.sum(), np.sum(w * a)
            with np.errstate(divide="ignore", invalid="ignore"):
                through_w = fk * np.real(np.sum(np.conj(Xc) * (G @ Xc), axis=0)) / F
                dF = -np.real(np.vdot(G, c.reshape(k, k))) / F
            dF_da = fk * (1 - ddof * (2 * a * S - T) / (S * S))
            return ub(aweights, through_w + dF * dF_da)
        km = xm.shape[0]
        out = {"m": _thunk(m, lambda: part(m, 0, km, flip_m))}
        if y is not None:
            out["y"] = _thunk(y, lambda: part(y, km, k, flip_y))
        if a is not None:
            out["aweights"] = _thunk(aweights, da)
        return out
    return c, grads


@rule(np.cov, note="rowvar, bias, ddof, fweights and aweights (which get a gradient too)")
@by_name("np.cov")
def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
         dtype=None):
    return _covariance(m, y, rowvar, bias, ddof, fweights, aweights, dtype)


@rule(np.corrcoef, note="the unit diagonal gets no gradient; clipping to [-1, 1] (rounding) "
      "is not differentiated")
@by_name("np.corrcoef")
def _corrcoef(x, y=None, rowvar=True, *, dtype=None):
    r = np.corrcoef(x, y, rowvar, dtype=dtype)
    if np.ndim(r) == 0:  # one variable: c / c, 1 or NaN whatever x is
        return r, lambda dr: {}
    c, grads = _covariance(x, y, rowvar, False, None, None, None, dtype)
    s = np.sqrt(np.diagonal(c).real)

    def back(dr):
        ss = np.outer(s, s)
        dr = np.array(dr, dtype=np.result_type(dr, c))
        np.fill_diagonal(dr, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            G = dr / ss
            moved = np.real(np.conj(dr) * (c / ss))  # R's dependence on s, by entry
            ds = -(moved.sum(axis=1) + moved.sum(axis=0)) / s
            G[np.diag_indices_from(G)] += ds / (s + s)
        g = grads(G)
        return {"x": g.get("m"), "y": g.get("y")}
    return r, back


# --- median, percentile, quantile and their nan* forms --------------------------------

# The methods whose virtual index ``(n + 1 - alpha - beta) q + alpha - 1`` (clipped to
# [0, n - 1]) moves with q, as ``(alpha, beta)``; the others pick order statistics (or
# the midpoint of two) that stay fixed as q moves.
_ALPHA_BETA = {"linear": (1.0, 1.0), "interpolated_inverted_cdf": (0.0, 1.0), "hazen": (0.5, 0.5),
               "weibull": (0.0, 0.0), "median_unbiased": (1 / 3, 1 / 3),
               "normal_unbiased": (3 / 8, 3 / 8)}


def _order_statistics(x, q, axis, method, nan, weights=None):
    """Every method of np.quantile gives, per slice of ``n`` numbers (the non-NaN ones for
    the nan* forms), ``(1 - g) s[j] + g s[j + 1]`` of the sorted slice ``s``, where ``j`` and
    ``g`` depend on ``n``, ``q`` and the method only: the method applied to ``arange(n)``
    gives ``j + g`` (with ``weights``, those of the sorted slice, per slice).  Returns
    ``(spread, dq)``: the gradient of ``x`` for an output gradient ``d``, and that of ``q``
    (through the methods whose index moves with q)."""
    nd = x.ndim
    axes = tuple(range(nd)) if axis is None else \
        tuple(sorted(a % nd for a in (axis if isinstance(axis, (tuple, list)) else (axis,))))
    moved = np.moveaxis(x, axes, range(nd - len(axes), nd))
    rows = moved.reshape(-1, int(np.prod(moved.shape[nd - len(axes):], dtype=int)))
    perm = np.argsort(rows, axis=-1)  # NaNs last
    s = np.take_along_axis(rows, perm, -1)
    counts = (~np.isnan(rows)).sum(-1) if nan else np.full(len(rows), rows.shape[1])
    qf = np.asarray(q, dtype=float).reshape(-1, 1)
    pos = np.zeros((len(qf), len(rows)))
    slope = np.zeros(pos.shape)
    if weights is not None:  # (np.quantile takes them with inverted_cdf only)
        w = np.asarray(weights)
        if w.ndim == 1 and nd > 1:  # along the one axis
            w = w.reshape((-1,) + (1,) * (nd - 1 - axes[0]))
        ws = np.take_along_axis(np.moveaxis(np.broadcast_to(w, x.shape), axes, range(
            nd - len(axes), nd)).reshape(rows.shape), perm, -1)
        for r, n in enumerate(counts):
            if n:
                pos[:, r] = np.quantile(np.arange(n), qf[:, 0], method=method, weights=ws[r, :n])
    for n in np.unique(counts) if weights is None else ():
        at = counts == n
        if n:
            pos[:, at] = np.quantile(np.arange(n), qf[:, 0], method=method)[:, None]
        if method in _ALPHA_BETA and n > 1:
            alpha, beta = _ALPHA_BETA[method]
            k = n + 1 - alpha - beta
            raw = k * qf + alpha - 1
            slope[:, at] = np.where((raw > 0) & (raw < n - 1), k, 0.0)
    j = np.floor(pos).astype(np.intp)
    g = pos - j
    top = np.maximum(counts - 1, 0)
    j = np.minimum(j, top)
    j1 = np.minimum(j + 1, top)
    r = np.arange(len(rows))
    empty = counts == 0

    def spread(d):
        d = np.where(empty, 0.0, np.asarray(d, dtype=float).reshape(pos.shape))
        out = np.zeros(rows.shape, np.result_type(x.dtype, float))
        np.add.at(out, (r, perm[r, j]), (1 - g) * d)
        np.add.at(out, (r, perm[r, j1]), g * d)
        return np.moveaxis(out.reshape(moved.shape), range(nd - len(axes), nd), axes)

    def dq(d):
        d = np.asarray(d, dtype=float).reshape(pos.shape)
        with np.errstate(invalid="ignore"):
            step = np.where(empty | (slope == 0), 0.0, s[r, j1] - s[r, j])
        return (d * slope * step).sum(-1).reshape(np.shape(q))
    return spread, dq


def _refuse_out(name, a, out):
    if out is not None and active(a):
        raise TypeError(f"{name}: an output array given positionally is not "
                        f"differentiable; pass it as out=, or use the returned array")


def _kept(keepdims):
    return {} if keepdims is np._NoValue else {"keepdims": keepdims}


def _quantile_rule(f, scale, nan):
    """The rule of np.quantile (``scale`` 1) or np.percentile (100), or their nan* forms."""
    name = f"np.{f.__name__}"

    @by_name(name)
    def r(a, q, axis=None, out=None, overwrite_input=False, method="linear",
          keepdims=np._NoValue, *, weights=None):
        _refuse_out(name, a, out)
        y = f(a, q, axis, out, False, method, **_kept(keepdims), weights=weights)
        if not (active(a) or active(q)):
            return y, lambda d: {}
        spread, dq = _order_statistics(np.asarray(a), np.asarray(q) / scale, axis, method, nan,
                                       weights)
        return y, lambda d: {"a": _thunk(a, lambda: ub(a, spread(d))),
                             "q": _thunk(q, lambda: ub(q, dq(d) / scale))}
    return r


def _median_rule(f, nan):
    name = f"np.{f.__name__}"

    @by_name(name)
    def r(a, axis=None, out=None, overwrite_input=False, keepdims=np._NoValue):
        _refuse_out(name, a, out)
        y = f(a, axis, out, False, **_kept(keepdims))
        if not active(a):
            return y, lambda d: {}
        spread, _ = _order_statistics(np.asarray(a), 0.5, axis, "linear", nan)
        return y, lambda d: {"a": lambda: ub(a, spread(d))}
    return r


_QUANTILE = ("through the order statistics np.argsort finds (ties: one subgradient); every "
             "method; q gets a gradient through the methods that move with it; weights= "
             "(inverted_cdf) get none, as they only choose the order statistic; "
             "overwrite_input= is ignored (the input is left as it was)")
_NAN = "; NaNs are ignored and get gradient 0 (an all-NaN slice: no gradient)"
_ORDER_NOTE = "; a slice holding a NaN has the value NaN (NaNs sort last)"
for _q, _m, _scale, _nan in ((np.quantile, np.median, 1, False),
                             (np.percentile, None, 100, False),
                             (np.nanquantile, np.nanmedian, 1, True),
                             (np.nanpercentile, None, 100, True)):
    rule(_q, keywords=("weights",), note=_QUANTILE + (_NAN if _nan else _ORDER_NOTE))(
        _quantile_rule(_q, _scale, _nan))
    if _m is not None:
        rule(_m, note="the quantile at 0.5" + (_NAN if _nan else _ORDER_NOTE))(_median_rule(_m, _nan))


# --- average --------------------------------------------------------------------

@rule(np.average, note="w.r.t. a and weights (1-D along one axis, or a's shape); returned= "
      "(the sum of weights gets its gradient too); keepdims")
@by_name("np.average")
def _average(a, axis=None, weights=None, returned=False, *, keepdims=np._NoValue):
    y = np.average(a, axis, weights, returned, **_kept(keepdims))
    xa = np.asarray(a)
    nd = xa.ndim
    axes = tuple(range(nd)) if axis is None else \
        tuple(sorted(i % nd for i in (axis if isinstance(axis, (tuple, list)) else (axis,))))
    ks = tuple(1 if i in axes else k for i, k in enumerate(xa.shape))
    if weights is None:
        w = np.ones(1)
    else:
        w = np.asarray(weights)
        if w.ndim == 1 and nd > 1:  # along the one axis averaged
            w = w.reshape((-1,) + (1,) * (nd - 1 - axes[0]))
    total = np.broadcast_to(w, xa.shape).sum(axis=axes, keepdims=True)
    avg = np.reshape(y[0] if returned else y, ks)

    def back(d):
        da, ds = (d[0], d[1]) if returned else (d, None)
        da = np.zeros(ks) if da is None else np.reshape(da, ks)
        dw_extra = 0 if ds is None else np.reshape(ds, ks)  # d(sum of weights) / d w = 1
        return {"a": _thunk(a, lambda: ub(a, np.broadcast_to(da * np.conj(w) / np.conj(total),
                                                               xa.shape))),
                "weights": _thunk(weights, lambda: ub(weights, ub(
                    np.zeros(w.shape), da * np.conj((xa - avg) / total) + dw_extra
                ).reshape(np.shape(weights))))}
    return y, back
