"""The benchmark cases: plain Python/NumPy functions, their inputs, and reference gradients.

This module (and ``cases_numpy``, the NumPy cases) imports only NumPy and ``math``, so
every peer's subprocess can load it without pulling in another peer.  Each case is
written once as ordinary Python; the primal timing runs exactly that code on NumPy
inputs, and bytegrad differentiates exactly that code.  The other peers run the same
code with their own array type (autograd's boxes, torch tensors, jax arrays): a math
function (the ``sin`` in ``recursion``) is swapped for the peer's own, and the NumPy
cases run with their global ``np`` rebound to the peer's NumPy (``Case.peer_fn`` in
``case.py``).
"""
from __future__ import annotations

import math

import numpy as np

try:
    from .case import Case, max_rel_error  # noqa: F401  (max_rel_error: for the peers)
    from .cases_numpy import NUMPY_CASES
except ImportError:  # run as a script from bench/ (the peer subprocess)
    from case import Case, max_rel_error  # noqa: F401
    from cases_numpy import NUMPY_CASES


def rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2
    return s


def rosenbrock_iadd(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2
    return s


def matvec_loop(A, x):
    """``sum(A @ x)`` by a double loop with ``t +=``: the compiled tier's nested loop."""
    t = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            t += A[i, j] * x[j]
    return t


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


def recursion_sin(x, n):
    return x if n == 0 else math.sin(recursion_sin(x, n - 1)) * 0.5 + x


def _recursion_sin_with(sin):
    """``recursion_sin`` calling the given ``sin`` (a peer's own)."""
    def f(x, n):
        return x if n == 0 else sin(f(x, n - 1)) * 0.5 + x
    return f


class Rosenbrock:
    """A SciPy-benchmark-style objective (as in ``benchmarks/go_benchmark_functions``):
    ``fun`` counts its calls in ``self.nfev`` and evaluates Rosenbrock with NumPy."""

    def __init__(self):
        self.nfev = 0

    def fun(self, x):
        self.nfev += 1
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


class RosenbrockUncounted(Rosenbrock):
    """``Rosenbrock`` without the count."""

    def fun(self, x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


class RosenbrockLoop(Rosenbrock):
    """``Rosenbrock`` evaluated by a loop over ``x[i]``."""

    def fun(self, x):
        self.nfev += 1
        s = 0.0
        for i in range(len(x) - 1):
            s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2
        return s


class RosenbrockLoopUncounted(Rosenbrock):
    """``RosenbrockLoop`` without the count."""

    def fun(self, x):
        s = 0.0
        for i in range(len(x) - 1):
            s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2
        return s


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


def _recursion_sin_grad(x, n):
    p, dp = x, 1.0
    for _ in range(n):
        p, dp = math.sin(p) * 0.5 + x, math.cos(p) * 0.5 * dp + 1.0
    return (dp,)


def _rosenbrock_args(n=1000):
    rng = np.random.default_rng(0)
    return (rng.uniform(-1.5, 1.5, n),)


def _nested_args(n=30):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((n, n)) / math.sqrt(n), rng.standard_normal(n))


CASES = [
    Case("rosenbrock_loop", rosenbrock, _rosenbrock_args, (0,), _rosenbrock_grad,
         "Rosenbrock as a Python loop over x[i], float64 array, n = 1000; d/dx", target=20.0,
         small_args=lambda: _rosenbrock_args(100), small_size="n = 100"),
    Case("nested_loop", nested_loop, _nested_args, (0, 1), _nested_grad,
         "t_i = sum_j A[i, j] * x[j] by a double loop, s = sum_i t_i^2 / (1 + t_i^2); "
         "A 30x30, x 30; d/dA, d/dx",
         small_args=lambda: _nested_args(10), small_size="A 10x10"),
    Case("recursion", recursion, lambda: (0.7, 50), (0,), _recursion_grad,
         "p(x, n) = 1 if n == 0 else x * p(x, n - 1) + sin(x), n = 50; d/dx",
         peer_variant=lambda lib: recursion_with(lib.sin)),
]
CASES += NUMPY_CASES  # bench/cases_numpy.py

# The workloads of the targets table (bench/targets.py) that the table above does not
# have: bytegrad alone runs them there (any peer can, with --cases).
TARGET_CASES = [
    Case("rosenbrock_iadd", rosenbrock_iadd, _rosenbrock_args, (0,), _rosenbrock_grad,
         "rosenbrock_loop written with s += ..., n = 1000; d/dx", target=12.0,
         small_args=lambda: _rosenbrock_args(100), small_size="n = 100"),
    Case("recursion_sin", recursion_sin, lambda: (0.7, 50), (0,), _recursion_sin_grad,
         "f(x, n) = x if n == 0 else sin(f(x, n - 1)) * 0.5 + x, n = 50; d/dx", target=50.0,
         peer_variant=lambda lib: _recursion_sin_with(lib.sin)),
    Case("method_nfev", Rosenbrock().fun, _rosenbrock_args, (0,), _rosenbrock_grad,
         "a method counting self.nfev += 1, Rosenbrock vectorised with NumPy, n = 1000; d/dx"),
    Case("method", RosenbrockUncounted().fun, _rosenbrock_args, (0,), _rosenbrock_grad,
         "method_nfev without the count"),
    Case("method_loop_nfev", RosenbrockLoop().fun, _rosenbrock_args, (0,), _rosenbrock_grad,
         "a method counting self.nfev += 1, Rosenbrock by a loop over x[i], n = 1000; d/dx"),
    Case("method_loop", RosenbrockLoopUncounted().fun, _rosenbrock_args, (0,),
         _rosenbrock_grad, "method_loop_nfev without the count"),
]
BY_NAME = {c.name: c for c in CASES + TARGET_CASES}
