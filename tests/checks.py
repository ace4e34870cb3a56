"""Shared checks: gradients against central finite differences."""
from __future__ import annotations

import functools
import types

import numpy as np

import bytegrad


def fd_gradient(f, args, i, h=1e-6):
    """Central finite difference of scalar ``f`` in positional argument ``i``
    (a float, complex or float array); complex per the Zygote convention."""
    x = args[i]

    def at(xi):
        a = list(args)
        a[i] = xi
        return f(*a)

    if isinstance(x, np.ndarray):
        g = np.zeros(x.shape, dtype=np.result_type(x.dtype, float))
        for idx in np.ndindex(*x.shape):
            e = np.zeros_like(x, dtype=g.dtype)
            e[idx] = h
            g[idx] = (at(x + e) - at(x - e)) / (2 * h)
            if np.iscomplexobj(x):
                g[idx] += 1j * (at(x + 1j * e) - at(x - 1j * e)) / (2 * h)
        return g
    d = (at(x + h) - at(x - h)) / (2 * h)
    if isinstance(x, complex):
        d += 1j * (at(x + 1j * h) - at(x - 1j * h)) / (2 * h)
    return d


def check_grad(f, *args, rtol=1e-5, atol=1e-6, h=1e-6):
    """Assert that bytegrad's gradient of ``f`` matches finite differences in every
    float/complex/array argument, that ``f``'s value is unchanged, and that the
    arguments are left unmodified.  Returns the gradients."""
    before = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    y, grads = bytegrad.value_and_gradient(f, *args)
    assert np.allclose(y, f(*args), rtol=1e-12, atol=0, equal_nan=True)
    for a, b in zip(args, before):
        assert np.array_equal(a, b), "an argument was modified"
    for i, (a, g) in enumerate(zip(args, grads)):
        if isinstance(a, bool) or isinstance(a, int):
            assert g is None, f"argument {i} is an int but got gradient {g!r}"
            continue
        expected = fd_gradient(f, args, i, h)
        got = 0.0 if g is None else g
        assert np.allclose(got, expected, rtol=rtol, atol=atol), \
            f"argument {i}: bytegrad {got!r} vs finite differences {expected!r}"
    return grads


def arr(shape, dtype=np.float64, seed=0):
    """A random array (complex for complex dtypes), the same for the same seed."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def same_contents(a, b) -> bool:
    """Deep equality of what two calls leave in their arguments: arrays (dtype and
    values), lists, tuples, dicts (keys in order) and user objects (their fields)."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same_contents, a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(same_contents(a[k], b[k]) for k in a)
    if hasattr(a, "__dict__") and not isinstance(a, (type, types.FunctionType, types.MethodType,
                                                     types.ModuleType, functools.partial)):
        return type(a) is type(b) and same_contents(vars(a), vars(b))
    return a == b
