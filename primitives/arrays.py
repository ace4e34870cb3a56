"""The NumPy rules this issue needs: building an array from differentiable
scalars.  (The NumPy library proper is a later issue.)"""
from __future__ import annotations

import numpy as np

from ..runtime.api import stop_gradient
from ..runtime.rules import nondifferentiable, rule


def _like(x, d):
    """The gradient ``d`` (an array) in the nested list/tuple structure of ``x``."""
    if isinstance(x, (list, tuple)):
        return type(x)(_like(xi, di) for xi, di in zip(x, d))
    if isinstance(x, np.ndarray):
        return d
    return d.item() if isinstance(d, np.ndarray) and d.ndim == 0 else d


@rule(np.array, np.asarray)
def _array(x, *args, **kw):
    y = np.array(x, *args, **kw)
    if y.dtype.kind not in "fc":
        return y, lambda d: (None, None) + (None,) * len(args)
    return y, lambda d: (None, _like(x, np.asarray(d))) + (None,) * len(args)


nondifferentiable(stop_gradient, np.zeros, np.ones, np.empty, np.full, np.arange, np.linspace,
                  np.eye, np.zeros_like, np.ones_like, np.argmax, np.argmin, np.argsort,
                  np.isnan, np.isinf, np.isfinite)
