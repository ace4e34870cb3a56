"""The gradient algebra: one zero (None), one sum (`accum`).

A gradient mirrors its primal: numbers for numbers, arrays for arrays, tuples,
lists and dicts for tuples, lists and dicts.  Two sparse forms keep reads of
one element at a time cheap (the quadratic trap of ``x[i]`` in a loop):
`OneHot` is the gradient of a single element, `Buffer` an accumulator owned by
one gradient slot that later one-hots are added into in place.  `unwrap` turns
both back into the dense form before a gradient leaves a slot, so pullbacks
only ever see dense gradients, except the structured forms `Eye` and `Fill`, which
reach as they are only the pullbacks marked to take them (`rules.takes_structured`).
"""
from __future__ import annotations

import operator
import types

import numpy as np

from ..ir.ops import Inline
from .batching import Batch, Unbatchable

_NUMBERS = {float, int, complex, np.float64, np.float32, np.complex128}


class OneHot:
    """The gradient of a container that is zero except for ``value`` at ``index``."""

    __slots__ = ("like", "index", "value")

    def __init__(self, like, index, value):
        self.like, self.index, self.value = like, index, value

    def dense(self):
        return _add_into(_zeros(self.like), self).dense()

    def __repr__(self):
        return f"OneHot({self.index!r}: {self.value!r})"


class Buffer:
    """A dense gradient that belongs to one slot, so it may be updated in place."""

    __slots__ = ("data", "kind")

    def __init__(self, data, kind):
        self.data, self.kind = data, kind

    def dense(self):
        return tuple(self.data) if self.kind is tuple else self.data


class Eye:
    """The gradient ``value * I`` of a matrix (what ``np.trace`` sends back), kept
    structured so that the pullback of ``A @ B`` can return ``value * B^H`` without a
    matrix product; `unwrap` makes it dense for every other consumer."""

    __slots__ = ("value", "shape", "dtype")

    def __init__(self, value, shape, dtype):
        self.value, self.shape, self.dtype = value, shape, dtype

    def dense(self):
        g = np.zeros(self.shape, np.result_type(self.dtype, np.asarray(self.value).dtype))
        np.fill_diagonal(g, self.value)
        return g


class Fill:
    """The gradient ``value`` at every element of an array (what ``np.mean`` of a whole
    array sends back), kept structured so that the pullback of ``x ** 2`` can return
    ``2 value x`` in one pass over ``x``; `unwrap` makes it dense for every other consumer,
    by the maker's ``spread(value, like)`` (an array of ``like``'s shape and dtype: the
    rules' cache of large arrays, which a fresh one of megabytes would page-fault past)."""

    __slots__ = ("value", "shape", "dtype", "spread")

    def __init__(self, value, shape, dtype, spread):
        self.value, self.shape, self.dtype, self.spread = value, shape, dtype, spread

    def dense(self):
        return self.spread(self.value, self)


_STRUCTURED = frozenset({Eye, Fill})


def _zeros(like):
    if type(like) is Batch:
        return Buffer(Batch(np.zeros_like(like.b)), np.ndarray)
    if isinstance(like, np.ndarray):
        return Buffer(np.zeros(like.shape, _grad_dtype(like.dtype)), np.ndarray)
    return Buffer([None] * len(like), tuple if isinstance(like, tuple) else list)


def _grad_dtype(dtype):
    return dtype if dtype.kind in "fc" else np.float64


def _add_into(buf: Buffer, g):
    """``buf += g`` in place for a one-hot, buffer or dense ``g``; returns ``buf``."""
    if type(g) is OneHot:
        if buf.kind is not np.ndarray:
            buf.data[g.index] = accum(buf.data[g.index], g.value)
        elif type(g.value) is Batch or type(buf.data) is Batch:
            _batched_into(buf, g)
        else:
            buf.data[g.index] += g.value
        return buf
    g = unwrap(g)
    if buf.kind is not np.ndarray:
        for i, x in enumerate(g):
            buf.data[i] = accum(buf.data[i], x)
    elif type(g) is Batch or type(buf.data) is Batch:
        _batched_into(buf, g)
    else:
        buf.data += g
    return buf


def _batched_into(buf, g):
    """``buf += g`` where ``g`` or ``buf`` holds a Batch of gradients, one per seed
    (`hessian`'s columns in one pass: primitives/batches.py): the buffer becomes one."""
    v = g.value if type(g) is OneHot else g
    if type(buf.data) is not Batch:
        if type(v) is not Batch:
            raise Unbatchable
        buf.data = Batch(np.repeat(buf.data[None], len(v.b), 0))
    if type(g) is OneHot:
        buf.data[g.index] = buf.data[g.index] + v
    else:
        buf.data = buf.data + v


def _own(g):
    """A fresh Buffer holding a copy of the dense or one-hot gradient ``g``."""
    if type(g) is OneHot:
        return _add_into(_zeros(g.like), g)
    if isinstance(g, np.ndarray):
        return Buffer(np.array(g, dtype=_grad_dtype(g.dtype)), np.ndarray)
    if type(g) is Batch:
        return Buffer(Batch(g.b.copy()), np.ndarray)
    return Buffer(list(g), tuple if isinstance(g, tuple) else list)


def _fits(g, like) -> bool:
    """Whether ``g`` is a dense array gradient laid out exactly as ``like``'s would be."""
    return type(g) is np.ndarray and type(like) is np.ndarray and g.shape == like.shape \
        and g.dtype == _grad_dtype(like.dtype)


def accum(a, b):
    """``a + b`` for gradients; None is zero.  May update ``a`` in place if it is a Buffer."""
    if a is None:
        return b
    if b is None:
        return a
    ta, tb = type(a), type(b)
    if ta in _NUMBERS and tb in _NUMBERS:
        return a + b
    if ta in _STRUCTURED or tb in _STRUCTURED:
        return accum(unwrap(a), unwrap(b))
    if ta is Buffer:
        return _add_into(a, b)
    if tb is Buffer:
        return _add_into(b, a)
    if ta is OneHot or tb is OneHot:
        if ta is OneHot and _fits(b, a.like):  # copy the dense side, not zeros and both
            a, b = b, a
        return _add_into(_own(a), b)
    if ta is tuple or ta is list:
        return ta(accum(x, y) for x, y in zip(a, b))
    if ta is dict:
        out = dict(a)
        for k, v in b.items():
            out[k] = accum(out.get(k), v)
        return out
    if ta is np.ndarray and a.ndim == 0:  # 0-d + 0-d would give a NumPy scalar
        return np.asarray(a + b)
    return a + b


accum.inline = Inline((float, float), operator.add)  # (scalar code's usual case, without a call)


def unwrap(g):
    """The dense form of a gradient held in a slot."""
    t = type(g)
    if t is OneHot or t is Buffer or t in _STRUCTURED:
        return g.dense()
    return g


def kwgrad(d, i, name):
    """The gradient of keyword argument ``name`` in a pullback's result ``d``."""
    if len(d) > i and d[i] is not None:
        return d[i].get(name)
    return None


# (an array's ``flags`` and ``dtype``: what SciPy checks before it computes)
_INERT = (np.integer, np.bool_, bytes, range, type, np.dtype, type(np.empty(0).flags))


def is_differentiable(x) -> bool:
    """Whether ``x`` can carry a gradient: floats, complex numbers, float arrays, and
    containers holding any of them.  Ints, bools and strings cannot."""
    t = type(x)
    if t is float or t is complex:
        return True
    if t is int or t is bool or t is str or x is None:
        return False
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    if isinstance(x, (np.floating, np.complexfloating)):
        return True
    if t is tuple or t is list:
        return any(is_differentiable(y) for y in x)
    if t is dict:
        return any(is_differentiable(y) for y in x.values())
    if isinstance(x, _INERT):
        return False
    # other numbers (Fraction, Decimal) and user objects, callable ones (layers, partials)
    # too, may carry gradients; C functions and modules do not
    if isinstance(x, types.ModuleType):
        return False
    return not callable(x) or hasattr(x, "__code__") or hasattr(x, "__dict__")
