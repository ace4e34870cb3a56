"""Small helpers shared by the rule families."""
from __future__ import annotations

import numpy as np

_REAL = (float, np.float64, np.float32)
_FAST = frozenset({float, np.float64, int})  # reals whose gradients need no work


def conj(x):
    """Complex conjugate, a no-op for reals (the Zygote paper's ``x'``)."""
    t = type(x)
    if t in _FAST:
        return x
    if t is complex:
        return x.conjugate()
    if isinstance(x, np.ndarray):
        return np.conj(x) if x.dtype.kind == "c" else x
    c = getattr(x, "conjugate", None)
    return c() if c is not None else x


def unbroadcast(x, g):
    """The gradient ``g`` of a broadcast result, summed back to the shape of ``x``;
    None where ``x`` cannot carry a gradient (ints, bools, integer arrays)."""
    t = type(x)
    if t is float or t is np.float64:
        if type(g) in _FAST:
            return g
    elif t is int or t is bool or x is None:
        return None
    if t in _REAL or t is complex:
        if isinstance(g, np.ndarray):
            g = g.sum()
            return g if t is complex else g.real
        return g if t is complex or type(g) is not complex else g.real
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "fc":
            return None
        g = np.asarray(g)
        if g.shape != x.shape:
            g = _sum_to(g, x.shape)
        if x.dtype.kind == "f" and g.dtype.kind == "c":
            g = g.real
        return g.astype(x.dtype, copy=False) if g.dtype != x.dtype else g
    if isinstance(x, (np.integer, np.bool_)):
        return None
    if isinstance(x, np.generic):
        return np.asarray(g).sum().astype(x.dtype) if isinstance(g, np.ndarray) else g
    return g


def _sum_to(g, shape):
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)
