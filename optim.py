"""Optimisers over structured parameters: `SGD` (with momentum) and `Adam`.

Parameters are any tree (`bytegrad.tree`): a dict, list or tuple of arrays and numbers,
nested; their gradients, as ``grad`` returns them, mirror them, with None for a leaf
nothing reached (zero).  An optimiser is functional, as in optax: ``init(params)`` makes
its state, ``update(params, grads, state)`` returns the new parameters and state, and
nothing it is given is changed in place.  Leaves that carry no gradient (ints, strings)
pass through unchanged.

    >>> import numpy as np, bytegrad
    >>> from bytegrad import optim
    >>> def loss(p):
    ...     return np.sum((p["w"] - 3.0) ** 2) + (p["b"] + 1.0) ** 2
    >>> p = {"w": np.zeros(2), "b": 0.0, "steps": 0}
    >>> opt = optim.Adam(lr=0.1)
    >>> state = opt.init(p)
    >>> for _ in range(300):
    ...     p, state = opt.update(p, bytegrad.grad(loss)(p), state)
    >>> np.round(p["w"], 3), round(float(p["b"]), 3), p["steps"]
    (array([3., 3.]), -1.0, 0)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import tree


class SGD:
    """``p ← p − lr·g``; with ``momentum`` μ, ``v ← μ·v + g`` and ``p ← p − lr·v`` (PyTorch's
    form), or with ``nesterov``, ``p ← p − lr·(g + μ·v)``."""

    def __init__(self, lr: float, momentum: float = 0.0, nesterov: bool = False):
        if nesterov and not momentum:
            raise ValueError("nesterov=True needs a momentum > 0")
        self.lr, self.momentum, self.nesterov = lr, momentum, nesterov

    def init(self, params: Any) -> Any:
        """The velocity, zero (None for plain SGD, which keeps no state)."""
        return tree.zeros_like(params) if self.momentum else None

    def update(self, params: Any, grads: Any, state: Any) -> tuple[Any, Any]:
        lr, mu = self.lr, self.momentum
        if not mu:
            return tree.map(lambda p, g: p - lr * g, params, grads), None
        v = tree.map(lambda v, g: mu * v + g, state, grads)
        step = tree.map(lambda g, v: g + mu * v, grads, v) if self.nesterov else v
        return tree.map(lambda p, s: p - lr * s, params, step), v


class Adam:
    """Adam (Kingma and Ba): moments ``m ← b1·m + (1 − b1)·g``, ``v ← b2·v + (1 − b2)·|g|²``,
    ``p ← p − lr·m̂ / (√v̂ + eps)`` with the bias corrections ``m̂ = m / (1 − b1ᵗ)``,
    ``v̂ = v / (1 − b2ᵗ)`` at step ``t``."""

    def __init__(self, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps

    def init(self, params: Any) -> tuple[int, Any, Any]:
        """``(t, m, v)``: no steps taken, both moments zero."""
        return 0, tree.zeros_like(params), tree.zeros_like(params)

    def update(self, params: Any, grads: Any, state: tuple[int, Any, Any]) -> tuple[Any, Any]:
        b1, b2 = self.b1, self.b2
        t, m, v = state
        t += 1
        m = tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = tree.map(lambda v, g: b2 * v + (1 - b2) * np.abs(g) ** 2, v, grads)
        c2 = np.sqrt(1 - b2 ** t)
        a, eps = self.lr * c2 / (1 - b1 ** t), self.eps * c2  # (both corrections in one factor)
        return tree.map(lambda p, m, v: p - a * m / (np.sqrt(v) + eps), params, m, v), (t, m, v)
