"""Rules for NumPy's numerical calculus and polynomials: ``np.gradient``, ``np.trapezoid``
(and ``np.trapz`` where NumPy still has it), ``np.polyval`` and ``np.polyfit``.

``np.gradient`` is linear in ``f``: along each axis it applies a banded matrix ``G``
(rows use at most the entries two before to two after theirs, at the edges with
``edge_order=2``).  Its transpose is read off ``np.gradient`` itself: applied to the five
combs ``arange(n) % 5 == c``, it gives in row ``i`` the one entry ``G[i, j]`` with
``j % 5 == c`` in the band, so the pullback costs five ``np.gradient`` calls of one
row and O(size) work, whatever the spacing.  A scalar spacing ``h`` divides the result,
so it gets ``-Re<d, y> / h``.  The Jacobian in coordinate arrays is banded the same way;
its band comes from five complex steps of the coordinates along the combs (exact, as
NumPy's formulas are rational in the coordinates).

``np.trapezoid`` sums ``(y[i] + y[i + 1]) / 2 * w[i]`` with the widths ``w = diff(x)``
(or ``dx``): ``y`` gets the average of its neighbouring widths, ``x`` the transpose of
``diff`` applied to the averages, ``dx`` their sum.

``np.polyval(p, x)``: ``p[k]`` gets ``sum(d conj(x)^(N - 1 - k))``, ``x`` gets ``d``
times the conjugate of the derivative polynomial at ``x``.  ``np.polyfit(x, y, deg)`` is
the least-squares solution ``c = A⁺ y`` of the Vandermonde matrix ``A``: for the
gradient ``g`` of ``c`` and ``z = (AᵀA)⁻¹ g``, ``y`` gets ``A z`` and ``A`` gets
``r zᵀ - A z cᵀ`` (``r = y - A c`` the residuals), which goes to ``x`` through
``∂A[i, j]/∂x[i]``; this needs ``A`` of full column rank (NumPy warns with a
``RankWarning`` otherwise).  With weights ``w``, ``A`` and ``y`` are the rows times ``w``
(as NumPy fits them), and ``w`` gets the gradient through both.
"""
from __future__ import annotations

import operator

from ._frozen import np

from ..runtime.rules import Lazy, rule
from ._named import by_name
from ._util import unbroadcast as ub
from .np_elementwise import _thunk

_BAND = 5  # np.gradient's output i depends on the inputs i - 2 … i + 2 only


def _combs(n):
    """The five combs ``arange(n) % 5 == c``, as rows."""
    return (np.arange(n) % _BAND == np.arange(_BAND)[:, None]).astype(float)


def _band_transpose(J, d):
    """``Jᴴ d`` along the last axis for a banded Jacobian given by ``J[..., i, c]``: the
    one entry of row ``i`` in the column ``k ≡ c (mod 5)`` within ``i - 2 … i + 2``."""
    n = d.shape[-1]
    out = np.zeros(np.broadcast_shapes(J.shape[:-1], d.shape), np.result_type(J, d, float))
    for o in range(-(_BAND // 2), _BAND // 2 + 1):  # row i = column k + o
        i = np.arange(max(o, 0), min(n, n + o))
        out[..., i - o] += np.conj(J[..., i, (i - o) % _BAND]) * d[..., i]
    return out


def _gradient_of_f(n, h, edge_order, d):
    """The transpose of np.gradient along the last axis of length ``n`` with spacing ``h``
    (a scalar or the coordinates) applied to ``d``: np.gradient of the combs is its band."""
    return _band_transpose(np.gradient(_combs(n), h, axis=1, edge_order=edge_order).T, d)


def _gradient_of_x(f, x, edge_order, d):
    """The gradient of the coordinates ``x`` of np.gradient of ``f`` along its last axis,
    for the output gradient ``d``: the band of the Jacobian from a complex step of ``x``
    along each comb (exact: np.gradient is rational in ``x``), the real and imaginary parts
    of ``f`` apart, each made complex so that NumPy's result keeps the step."""
    eps = 1e-20 * max(1.0, float(np.max(np.abs(x))))
    parts = (f.real, f.imag) if np.iscomplexobj(f) else (f,)
    J = np.stack([sum(unit * np.gradient(p.astype(complex), x + 1j * eps * comb, axis=-1,
                                         edge_order=edge_order).imag / eps
                      for unit, p in zip((1, 1j), parts))
                  for comb in _combs(len(x))], axis=-1)
    g = _band_transpose(J, d)
    return np.real(g.reshape(-1, len(x)).sum(0))


@rule(np.gradient, note="w.r.t. f, scalar spacings and coordinate arrays; axis, edge_order 1 "
      "and 2")
def _gradient(f, *varargs, axis=None, edge_order=1):
    y = np.gradient(f, *varargs, axis=axis, edge_order=edge_order)
    fa = np.asarray(f)
    nd = fa.ndim
    if axis is None:
        axes = tuple(range(nd))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(operator.index(a) % nd for a in axis)
    else:
        axes = (operator.index(axis) % nd,)
    spacing = [1.0] * len(axes) if not varargs else \
        list(varargs) * len(axes) if len(varargs) == 1 and np.ndim(varargs[0]) == 0 else list(varargs)
    outs = y if isinstance(y, (tuple, list)) else (y,)

    def back(d):
        ds = d if isinstance(y, (tuple, list)) else (d,)

        def gf():
            g = np.zeros(fa.shape, np.result_type(fa, float))
            for ax, h, dk in zip(axes, spacing, ds):
                if dk is not None:
                    gk = _gradient_of_f(fa.shape[ax], h, edge_order, np.moveaxis(np.asarray(dk), ax, -1))
                    g += np.moveaxis(gk, -1, ax)
            return ub(f, g)

        def gh(k):
            mine = range(len(axes)) if len(varargs) == 1 else (k,)  # one spacing for every axis
            if np.ndim(varargs[k]) == 0:  # the result divides by it
                return ub(varargs[k], sum(-np.real(np.vdot(ds[i], outs[i])) / varargs[k]
                                          for i in mine if ds[i] is not None))
            ax = axes[k]
            return ub(varargs[k], sum(_gradient_of_x(np.moveaxis(fa, ax, -1), np.asarray(varargs[k]),
                                                     edge_order, np.moveaxis(np.asarray(ds[i]), ax, -1))
                                      for i in mine if ds[i] is not None))
        return Lazy(None, _thunk(f, gf), *(_thunk(h, lambda k=k: gh(k)) for k, h in enumerate(varargs)))
    return y, back


def _trapezoid_rule(f):
    def r(y, x=None, dx=1.0, axis=-1):
        out = f(y, x, dx, axis)
        ya = np.asarray(y)
        ax = operator.index(axis) % ya.ndim
        n = ya.shape[ax]
        lo = (slice(None),) * ax + (slice(0, n - 1),)
        hi = (slice(None),) * ax + (slice(1, n),)
        if x is None:
            w = dx
        else:
            xa = np.asarray(x)
            w = np.diff(xa, axis=ax if xa.ndim > 1 else 0)
            if xa.ndim == 1:
                w = w.reshape((-1,) + (1,) * (ya.ndim - 1 - ax))

        def back(d):
            dk = np.expand_dims(np.asarray(d), ax)

            def gy():
                share = np.broadcast_to(dk * np.conj(w) / 2, ya[lo].shape)
                g = np.zeros(ya.shape, np.result_type(share, float))
                g[lo] += share
                g[hi] += share
                return ub(y, g)

            def gw():  # the gradient of the widths
                return dk * np.conj((ya[lo] + ya[hi]) / 2)

            def gx():  # widths w[i] = x[i + 1] - x[i]: x[j] gets gw[j - 1] - gw[j]
                g, ax_x = gw(), ax
                if np.ndim(x) == 1:
                    g, ax_x = np.moveaxis(g, ax, 0).reshape(n - 1, -1).sum(-1), 0
                z = np.zeros_like(np.take(g, [0], axis=ax_x))
                return ub(x, np.concatenate([z, g], ax_x) - np.concatenate([g, z], ax_x))
            return Lazy(None, _thunk(y, gy), _thunk(x, gx),
                        None if x is not None else _thunk(dx, lambda: ub(dx, gw())), None)
        return out, back
    return r


for _f in (getattr(np, "trapezoid", None), getattr(np, "trapz", None)):
    if _f is not None:
        rule(_f, note="w.r.t. y, x (1-D or y's shape) and a scalar or array dx")(_trapezoid_rule(_f))


@rule(np.polyval, note="w.r.t. the coefficients p (1-D) and x")
def _polyval(p, x):
    y = np.polyval(p, x)
    pa, xa = np.asarray(p), np.asarray(x)

    def back(d):
        def gp():
            powers = xa[..., None] ** np.arange(len(pa) - 1, -1, -1)
            return ub(p, np.tensordot(np.asarray(d), np.conj(powers), np.ndim(d)))
        return Lazy(None, _thunk(p, gp),
                    _thunk(x, lambda: ub(x, d * np.conj(np.polyval(np.polyder(pa), xa)))))
    return y, back


@rule(np.polyfit, note="w.r.t. x, y (1-D or 2-D) and w, deg an int; the (weighted) Vandermonde "
      "matrix of full column rank; full=True and cov= refused (NotImplementedError)")
@by_name("np.polyfit")
def _polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    for given, name in ((full, "full=True"), (cov, "cov=")):
        if given:
            raise NotImplementedError(f"np.polyfit(..., {name}) is not differentiable yet; "
                                      f"fit without it or register a rule")
    c = np.polyfit(x, y, deg, rcond, w=w)
    xa = np.asarray(x, float)
    n = len(xa)
    ya = np.asarray(y).reshape(n, -1)
    wa = np.ones((n, 1)) if w is None else np.asarray(w, float).reshape(n, 1)
    order = np.arange(deg, -1, -1)
    A = xa[:, None] ** order
    Aw = A * wa  # the rows weighted, as NumPy weights them (and y)
    scale = np.sqrt((Aw * Aw).sum(axis=0))
    P = np.linalg.pinv(Aw / scale) / scale[:, None]  # Aw⁺, the columns scaled as NumPy scales them
    cc = np.asarray(c).reshape(len(order), -1)

    def back(g):
        g = np.asarray(g).reshape(cc.shape)
        memo = {}

        def weighted():  # the gradients of the weighted y and of Aw
            if not memo:
                z = P @ (P.T @ g)
                r = ya * wa - Aw @ cc
                memo["y"], memo["A"] = P.T @ g, r @ z.T - Aw @ (z @ cc.T)
            return memo["y"], memo["A"]

        def gx():
            dpow = order * xa[:, None] ** np.maximum(order - 1, 0)
            return ub(x, (weighted()[1] * wa * dpow).sum(axis=1))

        def gw():
            gyw, gAw = weighted()
            return ub(w, (gAw * A).sum(axis=1) + (gyw * ya).sum(axis=1))
        return {"x": _thunk(x, gx), "y": _thunk(y, lambda: ub(y, (weighted()[0] * wa).reshape(np.shape(y)))),
                "w": _thunk(w, gw)}
    return c, back
