"""Rules for the methods of NumPy's ufuncs: ``reduce``, ``accumulate``, ``reduceat`` and
``outer`` (``np.add.reduce(x)``, ``np.maximum.accumulate(x)``, ``np.multiply.outer(a, b)``).

``np.add.reduce(x)`` calls the method ``np.ufunc.reduce`` of the instance ``np.add``;
`forward` differentiates a method of a C type through the rule of the unbound method
with the instance first (as ``np.ufunc.at`` in mutation.py), so one rule per method
serves every ufunc and dispatches on it:

  * reduce: add, multiply, maximum, minimum are the rules of np.sum, np.prod, np.max and
    np.min (axis, keepdims, initial, where; ties of maximum/minimum split the gradient,
    as np.max's do); subtract (``x[0] - x[1] - …``) is np.sum's with the signs.
  * accumulate: add and multiply are np.cumsum's and np.cumprod's; subtract is
    np.cumsum's with the signs; maximum and minimum give each output's gradient to the
    element that is the running extremum there (on a tie the earlier one, as
    np.maximum gives ties to its first argument; after a NaN, the NaN).
  * reduceat: each segment through the reduce rule of the same ufunc.
  * outer: ``A[..., None, …] op B`` through the rule of the ufunc itself, so every
    ufunc with a rule has it (one without raises NoRuleError naming it, a
    non-differentiable one carries no gradient).

Other ufuncs raise NotImplementedError naming the method and the ones supported.
"""
from __future__ import annotations

from ._frozen import np

from ..runtime.forward import forward
from ..runtime.rules import RULES, Lazy, nograd, only_reads, rule
from ._util import active, unbroadcast as ub
from .np_reductions import _cumprod, _cumsum, _extremum, _prod, _sum

_NV = np._NoValue
_MAX, _MIN = _extremum(np.max, np.maximum.reduce), _extremum(np.min, np.minimum.reduce)


def _flip_after_first(g, axis):
    """``-g`` except at index 0 along ``axis`` (the sign pattern of subtract)."""
    g = -np.asarray(g)
    g[(slice(None),) * axis + (0,)] *= -1
    return g


def _one_axis(axis, a):
    """The one axis of a reduction that is not reorderable (None or a 1-tuple allowed)."""
    axis = 0 if axis is None else axis[0] if isinstance(axis, tuple) else axis
    return axis % max(np.ndim(a), 1)


def _subtract_reduce(a, axis=None, dtype=None, out=None, *args, **kw):
    """``a[0] - a[1] - …`` along ``axis`` (``initial - a[0] - …`` with ``initial``): np.sum's
    gradient with the signs."""
    y, back = _sum(a, axis, dtype, None, *args, **kw)
    ax = _one_axis(axis, a)
    initial = args[1] if len(args) > 1 else kw.get("initial", _NV)

    def signed(d):
        g = back(d)
        if g[1] is None:
            return g
        ga = -g[1] if initial is not _NV else _flip_after_first(g[1], ax)
        return g[:1] + (ga,) + tuple(g[2:])
    return y, signed


def _subtract_accumulate(a, axis, dtype):
    """``a[0], a[0] - a[1], …``: np.cumsum's gradient with the signs."""
    y, back = _cumsum(a, axis, dtype)
    ax = axis % max(np.ndim(a), 1)

    def signed(d):
        g = back(d)[1]
        return None, None if g is None else _flip_after_first(g, ax)
    return y, signed


def _accumulate_extremum(uf, a, axis, dtype):
    """The rule of ``uf.accumulate`` for uf maximum or minimum."""
    x = np.asarray(a)
    y = uf.accumulate(x, axis, dtype)
    ax = axis % max(x.ndim, 1)
    xm, ym = np.moveaxis(x, ax, -1), np.moveaxis(y, ax, -1)
    prev = np.concatenate([np.take(ym, [0], -1), ym[..., :-1]], -1)
    beats = np.greater if uf is np.maximum else np.less
    new = beats(xm, prev) | (np.isnan(xm) & ~np.isnan(prev))
    new[..., 0] = True
    src = np.maximum.accumulate(np.where(new, np.arange(xm.shape[-1]), 0), axis=-1)

    def back(d):
        dm = np.moveaxis(np.asarray(d), ax, -1)
        g = np.zeros(xm.shape, np.result_type(x.dtype, float))
        lead = np.indices(src.shape[:-1]) if src.ndim > 1 else ()
        np.add.at(g, (*(i[..., None] for i in lead), src), dm.real if x.dtype.kind == "f" else dm)
        return None, ub(a, np.moveaxis(g, -1, ax)), None, None
    return y, back


# ufunc → (the rule of its reduce with np.sum's parameters, whether it takes dtype)
_REDUCE = {np.add: (_sum, True), np.multiply: (_prod, True), np.maximum: (_MAX, False),
           np.minimum: (_MIN, False), np.subtract: (_subtract_reduce, True)}
_ACCUMULATE = {np.add: _cumsum, np.multiply: _cumprod, np.subtract: _subtract_accumulate}


def _unsupported(uf, method, table, *values):
    if any(map(active, values)):
        names = ", ".join(sorted(u.__name__ for u in table))
        raise NotImplementedError(f"np.{uf.__name__}.{method} is not differentiable; the "
                                  f"differentiable ones are those of {names}")


def _no_out(uf, method, out, a):
    if out is not None and active(a):
        raise TypeError(f"np.{uf.__name__}.{method}: an output array given positionally is not "
                        f"differentiable; pass it as out=, or use the returned array")


def _reduced(uf, a, args, kw):
    """The pullback of ``uf.reduce(a, *args, **kw)`` (``args`` from axis on) from the table's
    rule: ``back(d)`` gives the gradients of ``a`` and ``args``, then any keyword's dict."""
    base, takes_dtype = _REDUCE[uf]
    args = list(args) or [0]
    if len(args) > 2:
        args[2] = None  # out (refused above when it matters)
    if takes_dtype:
        pb = base(a, *args, **kw)[1]
        return lambda d: tuple(pb(d))[1:]
    pb = base(a, *args[:1], *args[2:], **kw)[1]  # np.max has no dtype

    def back(d):
        g = tuple(pb(d))
        return g[1:3] + (None,) + g[3:]
    return back


@rule(np.ufunc.reduce, keywords=("initial",), note="add multiply maximum minimum subtract: as "
      "np.sum, np.prod, np.max, np.min (ties split) and the signed sum")
def _reduce(uf, array, *args, **kw):
    _no_out(uf, "reduce", args[2] if len(args) > 2 else None, array)
    y = uf.reduce(array, *args, **kw)
    if uf not in _REDUCE:
        _unsupported(uf, "reduce", _REDUCE, array, kw.get("initial"), *args[3:])
        return y, nograd(2 + len(args))
    back = _reduced(uf, array, args, kw)
    n = 1 + len(args)

    def pb(d):
        g = back(d)
        return (None, None) + g[:n] + tuple(e for e in g[n:] if type(e) is dict)
    return y, pb


@rule(np.ufunc.accumulate, note="add multiply subtract: as np.cumsum, np.cumprod; maximum "
      "minimum: to the running extremum (ties: the earlier element)")
def _accumulate(uf, array, axis=0, dtype=None, out=None):
    _no_out(uf, "accumulate", out, array)
    if uf in (np.maximum, np.minimum):
        y, back = _accumulate_extremum(uf, array, axis, dtype)
    elif uf in _ACCUMULATE:
        y = uf.accumulate(array, axis, dtype)
        back = _ACCUMULATE[uf](array, axis, dtype)[1]
    else:
        _unsupported(uf, "accumulate", (*_ACCUMULATE, np.maximum, np.minimum), array)
        return uf.accumulate(array, axis, dtype), nograd(5)
    return y, lambda d: (None, None, back(d)[1], None, None, None)


@rule(np.ufunc.reduceat, note="each segment as the ufunc's reduce")
def _reduceat(uf, array, indices, axis=0, dtype=None, out=None):
    _no_out(uf, "reduceat", out, array)
    y = uf.reduceat(array, indices, axis, dtype)
    if uf not in _REDUCE:
        _unsupported(uf, "reduceat", _REDUCE, array)
        return y, nograd(6)
    x = np.asarray(array)
    ax = axis % max(x.ndim, 1)
    idx = np.asarray(indices)
    n = x.shape[ax]
    starts = idx.tolist()
    # segment i: [idx[i], idx[i + 1]) if that is not empty, else the one element idx[i]
    stops = [b if a < b else a + 1 for a, b in zip(starts, starts[1:])] + [n]
    pieces = [_reduced(uf, np.take(x, range(a, b), ax), (ax, dtype), {})
              for a, b in zip(starts, stops)]

    def back(d):
        d = np.asarray(d)
        g = np.zeros(x.shape, np.result_type(x.dtype, float))
        at = (slice(None),) * ax
        for i, (a, b, pb) in enumerate(zip(starts, stops, pieces)):
            g[at + (slice(a, b),)] += pb(np.take(d, i, ax))[0]
        return None, None, ub(array, g), None, None, None, None
    return y, back


@rule(np.ufunc.outer, note="through the rule of the ufunc itself")
def _outer(uf, A, B, **kw):
    a = np.asarray(A)
    y, pb = forward(uf, a.reshape(a.shape + (1,) * np.ndim(B)), B, **kw)

    def back(d):
        g = pb(d)
        return Lazy(None, None, lambda: None if g[1] is None else ub(A, np.reshape(g[1], a.shape)),
                    lambda: g[2])
    return y, back


def ufuncs_read():
    """Declare every ufunc with a rule `only_reads` its inputs: called without ``out``
    it makes a new array.  Run once every rule is registered."""
    for f in [f for f in RULES if type(f) is np.ufunc and RULES[f].fn is not None]:
        only_reads(f.nin, f)
