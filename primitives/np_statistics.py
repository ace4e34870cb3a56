"""Rules for ``np.cov`` and ``np.corrcoef``.

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
from ._util import unbroadcast as ub
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
