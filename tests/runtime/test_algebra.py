"""The gradient algebra: None is zero, sparse reads accumulate in one buffer."""
import numpy as np
import pytest

import bytegrad
from bytegrad.runtime import algebra
from bytegrad.runtime.algebra import Buffer, OneHot, accum, unwrap


def test_none_is_zero():
    assert accum(None, 2.0) == 2.0
    assert accum(3.0, None) == 3.0
    assert accum(None, None) is None


def test_structures_add_elementwise():
    assert accum((1.0, None), (2.0, 3.0)) == (3.0, 3.0)
    assert accum([1.0], [2.0]) == [3.0]
    assert accum({"a": 1.0}, {"a": 2.0, "b": 1.0}) == {"a": 3.0, "b": 1.0}


def test_one_hots_share_one_buffer():
    x = np.zeros(5)
    g = accum(OneHot(x, 1, 2.0), OneHot(x, 3, 1.0))
    assert type(g) is Buffer
    data = g.data
    for i in range(5):
        g = accum(g, OneHot(x, i, 1.0))
        assert g.data is data, "a one-hot must be added in place, not into a new array"
    np.testing.assert_array_equal(unwrap(g), [1.0, 3.0, 1.0, 2.0, 1.0])


def test_dense_plus_one_hot_does_not_modify_the_dense_gradient():
    dense = np.ones(3)
    g = accum(dense, OneHot(dense, 0, 5.0))
    np.testing.assert_array_equal(unwrap(g), [6.0, 1.0, 1.0])
    np.testing.assert_array_equal(dense, [1.0, 1.0, 1.0])


def test_one_hot_plus_dense_copies_the_dense_gradient():
    """A one-hot in the slot plus a dense gradient of its layout: the sum is a copy of
    the dense one with the element added (the dense one unchanged); of another layout
    (a float64 gradient of a float32 array), into zeros of the slot's own."""
    x = np.zeros(3)
    dense = np.array([1.0, 2.0, 4.0])
    g = accum(OneHot(x, 2, 0.5), dense)
    assert type(g) is Buffer and g.data is not dense
    np.testing.assert_array_equal(unwrap(g), [1.0, 2.0, 4.5])
    np.testing.assert_array_equal(dense, [1.0, 2.0, 4.0])
    g = accum(OneHot(x.astype(np.float32), 0, np.float32(0.5)), dense)
    assert unwrap(g).dtype == np.float32
    np.testing.assert_array_equal(unwrap(g), [1.5, 2.0, 4.0])
    x = np.array([0.3, -1.2, 2.0])  # the reverse pass meets x[2]'s one-hot first
    g = bytegrad.gradient(lambda x: np.sum(np.sin(x)) + x[2] * 3.0, x)[0]
    np.testing.assert_allclose(g, np.cos(x) + [0.0, 0.0, 3.0], rtol=1e-15)


def test_tuple_one_hots():
    t = (1.0, 2.0, 3.0)
    g = accum(OneHot(t, 2, 1.0), OneHot(t, 2, 0.5))
    assert unwrap(g) == (None, None, 1.5)


def test_float32_gradients_stay_float32():
    x = np.zeros(3, np.float32)
    g = accum(OneHot(x, 0, np.float32(1.0)), OneHot(x, 1, np.float32(1.0)))
    assert unwrap(g).dtype == np.float32


@pytest.mark.regression
def test_an_arrays_flags_and_dtype_carry_no_gradient():
    """What SciPy checks before it computes (``a.flags["C_CONTIGUOUS"]``, ``a.dtype``)
    is no differentiable value: reading it needs no rule (it raised NoRuleError)."""
    x = np.array([0.5, -1.0, 2.0])
    assert not algebra.is_differentiable(x.flags) and not algebra.is_differentiable(x.dtype)

    def f(x):
        if x.flags["C_CONTIGUOUS"] and x.flags.writeable and x.dtype.kind == "f":
            return np.sum(x ** 3)
        return 0.0
    assert np.allclose(bytegrad.grad(f)(x), 3 * x ** 2)
