"""Rules of `ops.set_item`: a write into a list or array no other name can see, which
the tangent code of nested differentiation passes on as a value (transforms/private.py).

The forward rule writes in place, the value and its tangent, and passes both on: the
tangent travels with the value instead of beside it in a shadow.  The reverse rule,
which a level lifting that forward rule runs, takes the write as a new value, so no
level sees a change in place: the container's gradient less the part written over,
and the written value's, that part (of a repeated index, the last write's).

    >>> import numpy as np
    >>> from bytegrad.ir import ops
    >>> from bytegrad.runtime.rules import RULES
    >>> y, back = RULES[ops.set_item].fn(np.zeros(3), 1, 2.0)
    >>> g = back(np.array([1.0, 2.0, 3.0]))
    >>> y, g[1], float(g[3])
    (array([0., 2., 0.]), array([1., 0., 3.]), 2.0)
"""
from __future__ import annotations

import operator

from ._frozen import np

from ..ir import ops
from ..runtime.frules import frule
from ..runtime.nesting import refuse_nested
from ..runtime.rules import rule
from ._util import unbroadcast
from .mutation import _overwritten
from .tangent_objects import _zeros_for_none


@rule(ops.set_item)
def _set_item(xs, k, v):
    if type(xs) is list:
        ys = list(xs)
        ys[k] = v  # (Python's errors)
        i = _position(xs, k)
        return ys, lambda d: (None,) * 4 if d is None else \
            (None, ops.set_item(list(d), i, None), None, d[i])
    _array(xs)
    ys = np.array(xs)
    ys[k] = v
    if xs.dtype.kind not in "fc":
        return ys, lambda d: (None,) * 4
    losers = _overwritten(k, xs.shape)

    def back(d):
        if d is None:
            return (None,) * 4
        g = d[k]
        if losers is not None:
            g = np.where(losers, 0.0, g)
        return None, ops.set_item(np.array(d), k, 0.0), None, unbroadcast(v, g)
    return ys, back


@frule(ops.set_item)
def _set_item_tangent(ts, xs, k, v):
    dxs, _, dv = ts
    if type(xs) is list:
        _position(xs, k)
        xs = ops.set_item(xs, k, v)
        if dxs is None and dv is None:
            return xs, None
        return xs, ops.set_item([None] * len(xs) if dxs is None else dxs, k, dv)
    _array(xs)
    xs = ops.set_item(xs, k, v)
    if dxs is None and dv is None or xs.dtype.kind not in "fc":
        return xs, None
    d = np.zeros(xs.shape, xs.dtype) if dxs is None else dxs
    return xs, ops.set_item(d, k, 0.0 if dv is None else _zeros_for_none(dv))


def _position(xs, k) -> int:
    """Where in list ``xs`` index ``k`` writes (a slice, which may change the length, is
    refused)."""
    if type(k) is slice:
        refuse_nested("a write into a slice of a list (xs[i:j] = ...)",
                      "write xs = xs[:i] + [...] + xs[j:], or differentiate it at first order")
    return operator.index(k) % len(xs)


def _array(xs):
    if type(xs) is not np.ndarray:
        refuse_nested(f"a write into a {type(xs).__name__}, a subclass of an array",
                      "np.asarray it first, or differentiate it at first order")
