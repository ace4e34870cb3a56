"""The methods of ufuncs, reduce accumulate reduceat outer (primitives/np_ufunc.py), checked
with `bytegrad.testing.check_rule` and closed forms."""
import numpy as np
import pytest

import bytegrad
from bytegrad.testing import check_rule
from checks import arr

X = arr((4, 5), seed=1)


@pytest.mark.parametrize("uf", [np.add, np.multiply, np.maximum, np.minimum, np.subtract])
def test_reduce_accumulate_reduceat(uf):
    check_rule(uf.reduce, X)
    check_rule(lambda x: uf.reduce(x, axis=1, keepdims=True), X)
    check_rule(lambda x: uf.reduce(x, 1, None, None, False, 0.5 if uf is not np.maximum else 9.0), X)
    check_rule(uf.accumulate, X)
    check_rule(lambda x: uf.accumulate(x, 1), X.astype(np.float32))
    check_rule(lambda x: uf.reduceat(x, [0, 2, 1, 4], axis=1), X)


def test_closed_forms_and_initial():
    check_rule(lambda x, i: np.add.reduce(x, axis=None, initial=i), X, 0.5)
    check_rule(lambda x, i: np.subtract.reduce(x, axis=(0,), initial=i), X, 0.5)
    check_rule(lambda x, i: np.maximum.reduce(x, axis=(0, 1), initial=i), X, 5.0)
    x = np.array([1.0, 3.0, 2.0, 3.0, np.nan, 5.0])
    g, = bytegrad.gradient(lambda x: np.sum(np.maximum.accumulate(x)), x)
    assert np.array_equal(g, [1, 3, 0, 0, 2, 0])  # the running maximum; a tie keeps the earlier
    g, = bytegrad.gradient(lambda x: np.sum(np.subtract.accumulate(x)), np.ones(3))
    assert np.array_equal(g, [3, -2, -1])
    g, = bytegrad.gradient(lambda x: np.sum(np.add.reduceat(x, [0, 2, 2])), np.ones(4))
    assert np.array_equal(g, [1, 1, 2, 1])  # [0:2], the one element 2, [2:]


@pytest.mark.parametrize("uf", [np.add, np.subtract, np.multiply, np.divide, np.arctan2,
                                np.power, np.hypot, np.maximum, np.fmin, np.logaddexp])
def test_outer_of_every_binary_ufunc_with_a_rule(uf):
    check_rule(uf.outer, np.abs(X[0]) + 0.5, X[1:3])
    check_rule(lambda a: uf.outer(a, 2.0), [0.5, 1.5])


def test_refusals():
    with pytest.raises(NotImplementedError, match="np.arctan2.reduce is not differentiable"):
        bytegrad.gradient(lambda x: np.arctan2.reduce(x), X[0])
    with pytest.raises(NotImplementedError, match="np.hypot.accumulate is not differentiable"):
        bytegrad.gradient(lambda x: np.sum(np.hypot.accumulate(x)), X[0])
    with pytest.raises(TypeError, match="np.add.reduce: an output array given positionally"):
        bytegrad.gradient(lambda x: np.add.reduce(x, 0, None, np.empty(())), X[0])
    assert bytegrad.gradient(lambda x: np.sum(np.greater.outer(x, x)) + x[0], X[0])[0][0] == 1
