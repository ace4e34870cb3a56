"""The algebra of tangents the forward rules share: None is zero.

A tangent mirrors its value: a number for a float or complex, an array of the same
shape for an array, a tuple, list or dict of tangents for a container, a dict of the
fields' tangents for an object.
"""
from __future__ import annotations

from ._frozen import np

from ..runtime.tangents import current
from .containers import IndexIter


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


def fit(dy, y):
    """The tangent ``dy`` with ``y``'s shape (a tangent of a broadcast operand is
    smaller than the result) and a floating dtype; None stays None."""
    if dy is None or type(y) is not np.ndarray:
        return dy
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


def consume(xs, d):
    """``(items, tangents)``: the items an iteration of ``xs`` yields (an iterator is
    consumed) and their tangents read from ``d``, the tangent of ``xs`` (None when all are
    zero; a dict's keys and a set's items have none)."""
    at = xs.i if type(xs) is IndexIter else 0
    v = list(xs)
    return v, _taken(xs, d, at, len(v))


def consume_rows(xss, ts, strict=False):
    """``(rows, tangents)``: the rows of ``zip(*xss, strict=strict)``, taken as Python's
    zip takes them (up to the shortest: an endless iterator is fine), and for each of
    ``xss`` the tangents of the items it gave (None when all are zero)."""
    at = [xs.i if type(xs) is IndexIter else 0 for xs in xss]
    rows = list(zip(*xss, strict=strict))
    return rows, [_taken(xs, d, i, len(rows)) for xs, d, i in zip(xss, ts, at)]


def _taken(xs, d, at, n):
    """The tangents of the ``n`` items of ``xs`` taken from position ``at``, read from
    its tangent ``d`` (a dict's keys and a set's items have none)."""
    if d is None or isinstance(xs, (dict, set, frozenset, str)):
        return None
    d = current().refresh(xs.xs if type(xs) is IndexIter else xs, d)
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
