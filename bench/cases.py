"""The benchmark cases: plain Python/NumPy functions, their inputs, and reference gradients.

This module imports only NumPy and ``math``, so every peer's subprocess can load it
without pulling in another peer.  Each case is written once as ordinary Python; the
primal timing runs exactly that code on NumPy inputs, and bytegrad differentiates
exactly that code.  The other peers run the same loop with their own array type
(autograd's boxes, torch tensors, jax arrays); only a call to a math function (the
``sin`` in ``recursion``) has to be swapped for the peer's own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


def rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2
    return s


def nested_loop(A, x):
    n = A.shape[0]
    s = 0.0
    for i in range(n):
        t = 0.0
        for j in range(n):
            t = t + A[i, j] * x[j]
        s = s + t * t / (1.0 + t * t)
    return s


def recursion(x, n):
    return 1.0 if n == 0 else x * recursion(x, n - 1) + math.sin(x)


def recursion_with(sin):
    """``recursion`` calling the given ``sin`` (a peer's own), for the other peers."""
    def p(x, n):
        return 1.0 if n == 0 else x * p(x, n - 1) + sin(x)
    return p


# Reference gradients, computed in closed form with NumPy.

def _rosenbrock_grad(x):
    g = np.zeros_like(x)
    r = x[1:] - x[:-1] ** 2
    g[:-1] += -400.0 * x[:-1] * r - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * r
    return (g,)


def _nested_grad(A, x):
    t = A @ x
    dt = 2.0 * t / (1.0 + t * t) ** 2
    return np.outer(dt, x), A.T @ dt


def _recursion_grad(x, n):
    p, dp = 1.0, 0.0
    for _ in range(n):
        p, dp = x * p + math.sin(x), p + x * dp + math.cos(x)
    return (dp,)


@dataclass
class Case:
    name: str
    fn: Callable                  # the plain function: primal timing and bytegrad
    make_args: Callable           # () -> positional arguments (NumPy / Python numbers)
    wrt: tuple                    # indices of the arguments differentiated
    reference: Callable           # (*args) -> reference gradients, one per index in wrt
    description: str
    uses_sin: bool = False        # the peers need their own sin (see recursion_with)
    # A smaller instance for jax without jit, which takes seconds per call and minutes to
    # warm up on the full size (each distinct x[i] is compiled separately).
    small_args: Callable | None = None
    small_size: str = ""

    def peer_fn(self, sin=None):
        """The function a peer differentiates: the same code, with the peer's ``sin``."""
        return recursion_with(sin) if self.uses_sin else self.fn


def _rosenbrock_args(n=1000):
    rng = np.random.default_rng(0)
    return (rng.uniform(-1.5, 1.5, n),)


def _nested_args(n=30):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((n, n)) / math.sqrt(n), rng.standard_normal(n))


CASES = [
    Case("rosenbrock_loop", rosenbrock, _rosenbrock_args, (0,), _rosenbrock_grad,
         "Rosenbrock as a Python loop over x[i], float64 array, n = 1000; d/dx",
         small_args=lambda: _rosenbrock_args(100), small_size="n = 100"),
    Case("nested_loop", nested_loop, _nested_args, (0, 1), _nested_grad,
         "t_i = sum_j A[i, j] * x[j] by a double loop, s = sum_i t_i^2 / (1 + t_i^2); "
         "A 30x30, x 30; d/dA, d/dx",
         small_args=lambda: _nested_args(10), small_size="A 10x10"),
    Case("recursion", recursion, lambda: (0.7, 50), (0,), _recursion_grad,
         "p(x, n) = 1 if n == 0 else x * p(x, n - 1) + sin(x), n = 50; d/dx",
         uses_sin=True),
]

BY_NAME = {c.name: c for c in CASES}


def max_rel_error(got, ref) -> float:
    """Largest |got - ref| over all gradients, relative to max(1, |ref|)."""
    worst = 0.0
    for g, r in zip(got, ref):
        g = np.asarray(g, dtype=float)
        r = np.asarray(r, dtype=float)
        if g.shape != r.shape:
            return float("inf")
        scale = max(1.0, float(np.max(np.abs(r))) if r.size else 1.0)
        worst = max(worst, float(np.max(np.abs(g - r))) / scale if r.size else 0.0)
    return worst
