"""Rules of `ops.set_item`, `ops.appended` and `ops.set_attr`: a write into a list, array
or object no other name can see, which the tangent code of nested differentiation passes
on as a value (transforms/private.py); and of `ops.item_of` and `ops.field_of`, a read
of such an array that must be a number, of such an object that must be a field.

The forward rule writes in place, the value and its tangent, and passes both on: the
tangent travels with the value instead of beside it in a shadow.  The reverse rule,
which a level lifting that forward rule runs, takes the write as a new value, so no
level sees a change in place: the container's gradient less the part written over,
and the written value's, that part (of a repeated index, the last write's).  A read's
pullback may hold the container and an index from its end (``xs[-1]``), which must
still name the item it read when it runs, after later writes: so no list grows under it.

    >>> import numpy as np
    >>> from bytegrad.ir import ops
    >>> from bytegrad.runtime.rules import RULES
    >>> y, back = RULES[ops.set_item].fn(np.zeros(3), 1, 2.0)
    >>> g = back(np.array([1.0, 2.0, 3.0]))
    >>> y, g[1], float(g[3])
    (array([0., 2., 0.]), array([1., 0., 3.]), 2.0)
"""
from __future__ import annotations

import inspect
import operator
import types

from ._frozen import np

from ..ir import ops
from ..runtime.batching import Batch, batches
from ..runtime.frules import FRULES, frule
from ..runtime.nesting import refuse_nested
from ..runtime.rules import RULES, nondifferentiable, rule
from ._util import unbroadcast
from .mutation import _overwritten
from .tangent_objects import _zeros_for_none, appending


@rule(ops.set_item)
def _set_item(xs, k, v):
    if type(xs) is list:
        ys = list(xs)
        ys[k] = v  # (Python's errors)
        i = _position(xs, k)
        return ys, lambda d: (None,) * 4 if d is None else \
            (None, ops.set_item(list(d), i, None), None, d[i])
    _array(xs)
    ys = _copy(xs)
    ys[k] = v
    a = xs.b if type(xs) is Batch else xs  # (a Batch: one array per direction, stacked first)
    if a.dtype.kind not in "fc":
        return ys, lambda d: (None,) * 4
    losers = _overwritten(k, a.shape[type(xs) is Batch:])

    def back(d):
        if d is None:
            return (None,) * 4
        g = d[k]
        if losers is not None:
            g = np.where(losers, 0.0, g)
        return None, ops.set_item(_copy(d), k, 0.0), None, unbroadcast(v, g)
    return ys, back


def _copy(a):
    """A copy of array or `Batch` ``a`` (the tangents of an array, or gradients of one
    per seed of `hessian`'s batched pass)."""
    return Batch(np.array(a.b)) if type(a) is Batch else np.array(a)


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
    d = _zeros(xs, dv) if dxs is None else dxs
    return xs, ops.set_item(d, k, 0.0 if dv is None else _zeros_for_none(dv))


def _zeros(xs, dv):
    """The zero tangent of array ``xs``: a Batch of them where ``dv`` is one."""
    if type(dv) is Batch:
        return Batch(np.zeros((len(dv.b),) + xs.shape, xs.dtype))
    return np.zeros(xs.shape, xs.dtype)


batches(_set_item_tangent)
nondifferentiable(_zeros)  # (a level lifting the forward rule runs it plainly)


@rule(ops.appended)
def _appended(xs, x):
    n = len(xs)
    ys = list(xs)
    ys.append(x)
    return ys, lambda d: (None,) * 3 if d is None else (None, list(d[:n]), d[n])


batches(frule(ops.appended)(appending(ops.appended)))


@rule(ops.item_of)
def _item_of(a, k):
    return _number(RULES[operator.getitem].fn(a, k))


@frule(ops.item_of)
def _item_of_tangent(ts, a, k):
    return _number(FRULES[operator.getitem](ts, a, k))


batches(_item_of_tangent)


def _number(out):
    if isinstance(out[0], np.ndarray):
        refuse_nested("a part of an array read where a later write of the array would change it "
                      "(an array, not a number)", "copy it (a[i].copy()), or differentiate it at "
                      "first order")
    return out


@rule(ops.set_attr)
def _set_attr(obj, name, v, setter=setattr):
    _plain(obj, name, setter)
    ys = object.__new__(type(obj))
    vars(ys).update(vars(obj))
    vars(ys)[name] = v
    return ys, lambda d: (None,) * 5 if d is None else \
        (None, {k: g for k, g in d.items() if k != name}, None, d.get(name), None)


@frule(ops.set_attr)
def _set_attr_tangent(ts, obj, name, v, setter=setattr):
    _plain(obj, name, setter)
    obj = ops.set_attr(obj, name, v, setter)
    if ts[0] is None and ts[2] is None:
        return obj, None
    return obj, {**(ts[0] or {}), name: ts[2]}  # (an object's tangent: its fields')


@rule(ops.field_of)
def _field_of(obj, name):
    _field(obj, name)
    return RULES[getattr].fn(obj, name)


@frule(ops.field_of)
def _field_of_tangent(ts, obj, name):
    _field(obj, name)
    return FRULES[getattr](ts, obj, name)


batches(_set_attr_tangent, _field_of_tangent)


def _plain(obj, name, setter):
    """Refuse a write that runs code of the class's (``__setattr__``, a property's setter)."""
    t = type(obj)
    if setter is setattr and t.__setattr__ is not object.__setattr__ \
            or type(getattr(obj, "__dict__", None)) is not dict \
            or hasattr(inspect.getattr_static(t, name, None), "__set__"):
        refuse_nested(f"{t.__name__}.{name} = ..., a write through __setattr__, a property or __slots__, "
                      f"in the class's call", "differentiate it at first order")


def _field(obj, name):
    """Refuse a read, followed by a write, of anything but a field (a method holds the
    object as it was), or through a ``__getattribute__`` of the class's (which sees it)."""
    if name not in vars(obj) or type(getattr(type(obj), "__getattribute__", None)) is types.FunctionType:
        refuse_nested(f"{type(obj).__name__}.{name}, not a field, read in the class's call before a "
                      "write of a field", "read it after the writes, or differentiate it at first order")


nondifferentiable(_plain, _field)  # (a level lifting the forward rules runs them plainly)


def _position(xs, k) -> int:
    """Where in list ``xs`` index ``k`` writes (a slice, which may change the length, is
    refused)."""
    if type(k) is slice:
        refuse_nested("a write into a slice of a list (xs[i:j] = ...)",
                      "write xs = xs[:i] + [...] + xs[j:], or differentiate it at first order")
    return operator.index(k) % len(xs)


def _array(xs):
    if type(xs) is not np.ndarray and type(xs) is not Batch:
        refuse_nested(f"a write into a {type(xs).__name__}, a subclass of an array",
                      "np.asarray it first, or differentiate it at first order")
