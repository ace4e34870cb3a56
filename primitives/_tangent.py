"""The algebra of tangents the forward rules share: None is zero.

A tangent mirrors its value: a number for a float or complex, an array of the same
shape for an array, a tuple, list or dict of tangents for a container, a dict of the
fields' tangents for an object.
"""
from __future__ import annotations

from ._frozen import math, np

from ..runtime.batching import Batch, broadcast
from ..runtime.generators import TangentGenerator
from ..runtime.jvp import jvp_call
from ..runtime.tangents import current
from .containers import IndexIter, _by_index, as_dict, by_next, own_next, python_iterable


def plus(a, b):
    """``a + b`` of two tangents, None being zero."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def minus(a, b):
    if b is None:
        return a
    if a is None:
        return -b
    return a - b


def times(d, u):
    """``d * u``, None for a zero ``d``."""
    return None if d is None else d * u


def regular(u, divisor=False) -> bool:
    """Whether a tangent times slope ``u`` (divided by ``u``, for a ``divisor``) is finite
    wherever the tangent is: each of an array's slopes finite (no divisor 0).  Elsewhere a
    zero tangent must give 0, not NaN (the NaN policy, `zero_cotangent`, on the forward
    side); taking that path only there keeps the tangent code that a nested gradient
    differentiates the same at regular points, where hessian batches its columns."""
    if divisor:
        return not (np.any(u == 0) if type(u) is np.ndarray else u == 0)
    if type(u) is np.ndarray:
        return bool(np.isfinite(u).all())
    return abs(u) < math.inf


def fit(dy, y):
    """The tangent ``dy`` with ``y``'s shape (a tangent of a broadcast operand is
    smaller than the result) and a floating dtype; None stays None."""
    if dy is None or type(y) is not np.ndarray:
        return dy
    if type(dy) is Batch:
        return broadcast(dy, y.shape)
    if type(dy) is not np.ndarray or dy.shape != y.shape:
        return np.broadcast_to(dy, y.shape).copy()
    return dy


def items(d, n):
    """The item tangents of a sequence's tangent ``d`` with ``n`` items."""
    if d is None:
        return [None] * n
    return list(d)


def seq(d, x):
    """The tangent of sequence ``x`` as a list of its items' tangents."""
    return items(d, len(x))


def python_iterated(xs, d):
    """``(iterator, its tangent)`` for ``xs`` whose iteration is Python code of yours
    (`containers.python_iterable`): its ``__iter__`` run in forward mode, or its items read
    by ``__getitem__`` from 0 until IndexError."""
    method = getattr(type(xs), "__iter__", None)
    if method is not None:
        it, dit = jvp_call(method, None, (d,), xs)
        if own_next(it) is not None:  # (an iterator of yours: its __next__ run, lazily)
            return jvp_call(by_next, None, (dit,), it)
        return it, dit
    return jvp_call(_by_index, None, (d,), xs)  # (reverse mode's generator, lazily)


def consume(xs, d):
    """``(items, tangents)``: the items an iteration of ``xs`` yields (an iterator is
    consumed) and their tangents read from ``d``, the tangent of ``xs`` (None when all are
    zero; a dict's keys and a set's items have none)."""
    if python_iterable(xs):
        xs, d = python_iterated(xs, d)
    at = xs.i if type(xs) is IndexIter or type(xs) is TangentGenerator else 0
    v = list(xs)
    return v, item_tangents(xs, d, at, len(v))


def listed(xs, d):
    """``(xs, d)``, with an iterator (a generator's, a sequence's, an object of yours iterated
    by Python code) taken into the list of its items and their tangents: for a rule that
    takes all of them and reads them as a list's."""
    if hasattr(type(xs), "keys") and not isinstance(xs, dict):  # (a mapping of yours: its keys' items)
        return jvp_call(as_dict, None, (d,), xs)
    if type(xs) is TangentGenerator or type(xs) is IndexIter or python_iterable(xs):
        return consume(xs, d)
    return xs, d


def item_tangents(xs, d, at, n):
    """The tangents of the ``n`` items of ``xs`` taken from position ``at``, read from
    its tangent ``d`` (a dict's keys and a set's items have none)."""
    if type(xs) is TangentGenerator:  # (what the items taken left there)
        ds = xs.tangents[at:at + n]
        return None if all(d is None for d in ds) else ds
    if isinstance(xs, (dict, set, frozenset, str)):
        return None
    d = current().refresh(xs.xs if type(xs) is IndexIter else xs, d)
    if d is None:
        return None
    return [d[at + i] for i in range(n)]


def none_if_zero(ds):
    """A container tangent: None when every item's tangent (a dict's value) is zero."""
    # (a list, not a generator: nested forward mode lifts this)
    return None if all([d is None for d in (ds.values() if isinstance(ds, dict) else ds)]) else ds


def zeros_like(x):
    """A zero tangent of ``x`` materialised (None for what carries none)."""
    if isinstance(x, np.ndarray):
        return np.zeros(x.shape, x.dtype if x.dtype.kind in "fc" else float) if x.dtype.kind in "fc" else None
    if isinstance(x, (float, np.floating)):
        return type(x)(0.0)
    if isinstance(x, (complex, np.complexfloating)):
        return type(x)(0j)
    return None


def dense(d, x):
    """``d`` as an array or number (a zero tangent of ``x`` materialised)."""
    if d is None:
        z = zeros_like(x)
        return z if z is not None else np.zeros(np.shape(x))
    return d
