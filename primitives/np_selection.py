"""Rules for NumPy's selections among several values: ``np.select``, ``np.choose`` and
``np.piecewise``.

Each output element is one of the candidates, so its gradient goes to the candidate
chosen there and the conditions or indices get none (they are piecewise constant).
``np.piecewise`` runs as NumPy runs it (a later condition wins, a function one more than
the conditions is the "otherwise"), but calls each callable through `forward`, so the
callables are differentiated: each gets the gradient of the elements it set, and passes
it on to ``x``, to the extra ``*args`` and, for a closure, to what it captured (the
gradient of ``funclist``, a list like it).  A callable that changes objects in place makes
the pullback run even when the result gets no gradient, as ``map``'s does.
"""
from __future__ import annotations

from ._frozen import np

from ..runtime.algebra import accum, unwrap
from ..runtime.forward import forward
from ..runtime.mutation import Effect, runs_without_gradient
from ..runtime.rules import nograd, rule
from ._named import by_name
from ._util import unbroadcast as ub
from .np_elementwise import _thunk
from .np_shape import differentiable_input, grad_for


def _each(xs, gs):
    """The gradients ``gs`` of the items of the list, tuple or array ``xs``, in its form."""
    if isinstance(xs, np.ndarray):
        return ub(xs, np.stack(gs))
    return type(xs)(ub(x, g) for x, g in zip(xs, gs))


@rule(np.select, note="each choice gets the gradient where its condition is the first true one, "
      "default where none is; the conditions none")
@by_name("np.select")
def _select(condlist, choicelist, default=0):
    y = np.select(condlist, choicelist, default)

    def back(d):
        d = np.asarray(d)
        taken = np.zeros(d.shape, bool)
        parts = []
        for c in condlist:
            c = np.broadcast_to(c, d.shape)
            parts.append(np.where(c & ~taken, d, 0))
            taken |= c
        return {"choicelist": lambda: _each(choicelist, parts),
                "default": _thunk(default, lambda: ub(default, np.where(taken, 0, d)))}
    return y, back


@rule(np.choose, note="choice j gets the gradient where a == j (after mode='wrap'/'clip'); "
      "out= only by keyword")
@by_name("np.choose")
def _choose(a, choices, out=None, mode="raise"):
    if out is not None:
        raise TypeError("np.choose: an output array given positionally is not differentiable; "
                        "pass it as out=, or use the returned array")
    y = np.choose(a, choices, mode=mode)

    def back(d):
        d = np.asarray(d)
        k = np.broadcast_to(a, d.shape)
        n = len(choices)
        k = np.mod(k, n) if mode == "wrap" else np.clip(k, 0, n - 1) if mode == "clip" else k
        return {"choices": lambda: _each(choices, [np.where(k == j, d, 0) for j in range(n)])}
    return y, back


def _conditions(x, condlist, n):
    """np.piecewise's conditions as one boolean array, with the "otherwise" one appended
    if there is one function more than conditions (as NumPy makes them)."""
    if np.isscalar(condlist) or (not isinstance(condlist[0], (list, np.ndarray)) and x.ndim != 0):
        condlist = [condlist]
    conds = np.asarray(condlist, dtype=bool)
    if len(conds) == n - 1:
        conds = np.concatenate([conds, ~np.any(conds, axis=0, keepdims=True)], axis=0)
    elif len(conds) != n:
        raise ValueError(f"np.piecewise: with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected")
    return conds


@rule(np.piecewise, note="each callable is differentiated (its gradient, a closure's, goes to "
      "funclist; *args get theirs), a constant gets the gradient where it is the value; a later "
      "condition wins, as in NumPy; the conditions none; keywords for the callables carry none")
def _piecewise(x, condlist, funclist, *args, **kw):
    xa = np.asanyarray(x)
    conds = _conditions(xa, condlist, len(funclist))
    y = np.zeros_like(xa)
    pieces = []  # (condition, pullback or None, the value assigned)
    for cond, func in zip(conds, funclist):
        if not callable(func):
            y[cond] = func
            pieces.append((cond, None, func))
        elif np.any(cond):
            v, pb = forward(func, xa[cond], *args, **kw)
            y[cond] = v
            pieces.append((cond, pb, v))
        else:
            pieces.append((cond, None, None))
    effects = any(runs_without_gradient(pb) for _, pb, _ in pieces if pb is not None)
    if y.dtype.kind not in "fc" and not effects:
        return y, nograd(3 + len(args))

    def back(d):
        d = np.zeros(y.shape) if d is None or y.dtype.kind not in "fc" else np.asarray(d)
        later = np.zeros(d.shape, bool)
        gx, gf, gargs = None, [None] * len(pieces), [None] * len(args)
        for k in reversed(range(len(pieces))):
            cond, pb, v = pieces[k]
            own = np.where(cond & ~later, d, 0)
            later |= cond
            if pb is None:
                gf[k] = ub(v, own) if v is not None else None
                continue
            g = pb(ub(v, own[cond]))
            gf[k] = unwrap(g[0])
            if differentiable_input(x) and g[1] is not None:
                gx = np.zeros(xa.shape, xa.dtype) if gx is None else gx
                gx[cond] += unwrap(g[1])
            gargs = [accum(a, unwrap(b)) for a, b in zip(gargs, g[2:2 + len(args)])]
        return (None, None if gx is None else grad_for(x, gx), None,
                type(funclist)(gf) if isinstance(funclist, (list, tuple)) else None, *gargs)
    return y, (Effect(back) if effects else back)  # (a callable that changed something in place)
