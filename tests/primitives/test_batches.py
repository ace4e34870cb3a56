"""Reverse rules of a Batch's operations (primitives/batches.py), and the gradient
algebra and summing back given Batches of gradients, one per seed: each seed's gradient
is the one the plain rule gives for its direction's values."""
from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bytegrad.primitives._util import unbroadcast, zero_cotangent
from bytegrad.runtime.algebra import OneHot, accum, unwrap
from bytegrad.runtime.batching import Batch, Unbatchable
from bytegrad.runtime.forward import forward

K = 3


def direction(v, j):
    return v.b[j] if type(v) is Batch else v


def per_seed(f, args, d):
    """``f``'s plain pullback for each seed ``j``: its direction's values, its gradient."""
    out = []
    for j in range(K):
        y, back = forward(f, *[direction(a, j) for a in args])
        out.append(back(d.b[j]))
    return out


def operand(kind, rng):
    if kind == "float":
        return float(rng.standard_normal())
    if kind == "int":
        return 3
    if kind == "array":
        return rng.standard_normal((2, 1))  # (broadcast against the batch's (2, 4))
    if kind == "batch of floats":
        return Batch(rng.standard_normal(K))
    return Batch(rng.standard_normal((K, 2, 4)))


KINDS = ["float", "int", "array", "batch of floats", "batch of arrays"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([operator.add, operator.sub, operator.mul, operator.truediv]),
       st.sampled_from(KINDS), st.sampled_from(KINDS), st.integers(0, 2 ** 32 - 1))
def test_arithmetic_gives_each_seed_the_plain_rules_gradient_of_its_direction(op, ka, kb, seed):
    rng = np.random.default_rng(seed)
    a, b = operand(ka, rng), operand(kb, rng)
    if Batch not in (type(a), type(b)):
        b = Batch(rng.standard_normal(K))
    if op is operator.truediv and type(b) is int:
        b = 2
    y, back = forward(op, a, b)
    d = Batch(rng.standard_normal(y.b.shape))
    got = back(d)
    want = per_seed(op, (a, b), d)
    for i, x in ((1, a), (2, b)):
        if type(x) is int:
            assert got[i] is None
            continue
        assert type(got[i]) is Batch and got[i].b.shape == (K,) + np.shape(direction(x, 0))
        for j in range(K):
            np.testing.assert_allclose(got[i].b[j], unwrap(want[j][i]), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("key", [1, (slice(None), 2), (0, slice(1, 3)), np.array([2, 2, 0]),
                                 (Ellipsis, np.array([True, False, True, True]))])
def test_an_item_read_gives_each_direction_its_gradient_repeats_added(key):
    rng = np.random.default_rng(0)
    s = Batch(rng.standard_normal((K, 3, 4)))
    y, back = forward(operator.getitem, s, key)
    d = Batch(rng.standard_normal(y.b.shape))
    g = back(d)[1]
    for j in range(K):
        want = np.zeros((3, 4))
        np.add.at(want, key, d.b[j])
        np.testing.assert_allclose(g.b[j], want, rtol=1e-12)


def test_negation_and_plus_pass_each_seeds_gradient():
    s, d = Batch(np.arange(3.0)), Batch(np.array([1.0, -2.0, 4.0]))
    y, back = forward(operator.neg, s)
    np.testing.assert_array_equal(y.b, -s.b)
    np.testing.assert_array_equal(back(d)[1].b, -d.b)
    y, back = forward(operator.pos, s)
    np.testing.assert_array_equal(back(d)[1].b, d.b)


def test_summing_back_a_broadcast_is_each_seeds():
    g = Batch(np.arange(24.0).reshape(K, 2, 4))
    x = np.ones((2, 1))
    got = unbroadcast(x, g)
    for j in range(K):
        np.testing.assert_array_equal(got.b[j], unbroadcast(x, g.b[j]))
    assert unbroadcast(2.0, g).b.tolist() == [g.b[j].sum() for j in range(K)]
    assert unbroadcast(np.arange(3), g) is None  # (ints: no gradient)
    with pytest.raises(Unbatchable):  # (complex numbers are not batched: the columns take them)
        unbroadcast(1j, g)


def test_a_zero_gradient_times_an_infinite_partial_is_zero_in_each_seed():
    d = Batch(np.array([0.0, 2.0, 0.0]))
    g = Batch(np.array([np.nan, np.nan, 5.0]))
    got = zero_cotangent(d, g)
    want = [zero_cotangent(float(d.b[j]), float(g.b[j])) for j in range(K)]
    np.testing.assert_array_equal(np.isnan(got.b), np.isnan(want))
    np.testing.assert_array_equal(np.nan_to_num(got.b), np.nan_to_num(want))


def test_gradients_of_array_elements_accumulate_into_a_batch_buffer():
    x = np.zeros(4)
    a = OneHot(x, 1, Batch(np.array([1.0, 2.0, 3.0])))
    b = OneHot(x, 3, Batch(np.array([-1.0, 0.5, 0.0])))
    got = unwrap(accum(accum(accum(a, b), a), Batch(np.ones((K, 4)))))
    for j in range(K):
        want = np.ones(4)
        want[1] += 2 * a.value.b[j]
        want[3] += b.value.b[j]
        np.testing.assert_array_equal(got.b[j], want)
