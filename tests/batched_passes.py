"""Batched passes of `jacfwd` and `hessian` (runtime/batching.py): whether they were
taken or abandoned, and the same Jacobian a column at a time, to compare."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

from bytegrad.runtime import jax_api


@contextlib.contextmanager
def spied():
    """The outcomes of the batched passes meanwhile: True where one was abandoned."""
    seen = []
    real = jax_api._batched_columns

    def spy(*a):
        r = real(*a)
        seen.append(r is None)
        return r
    jax_api._batched_columns = spy
    try:
        yield seen
    finally:
        jax_api._batched_columns = real


@pytest.fixture
def passes():
    with spied() as seen:
        yield seen


def by_columns(jacobian, f, *args, argnums=0, **kw):
    """``jacobian(f, argnums)(*args, **kw)`` a column at a time, as without batches."""
    real = jax_api._batched_columns
    jax_api._batched_columns = lambda *a: None
    try:
        return jacobian(f, argnums)(*args, **kw)
    finally:
        jax_api._batched_columns = real


def same(a, b, rtol=1e-12):
    la, lb = list(jax_api._leaves(a)), list(jax_api._leaves(b))
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=1e-14 if rtol <= 1e-12 else 1e-12)


def retrying(attempts, finish):
    """``f(x)``, ``finish(float(x[0]), x)``, that calls ``float`` again on any error (at
    most 50 times, each failure put in ``attempts``): the ``float`` of a tangent raises in a
    batch."""
    def f(x):
        v = 0.0
        while len(attempts) < 50:
            try:
                v = float(x[0])
                break
            except:  # noqa: E722
                attempts.append(1)
        return finish(v, x)
    return f
