"""Rules for indexing NumPy arrays, take/take_along_axis/compress/extract, and sorting
(primitives/np_indexing.py and the ndarray branch of the getitem rule)."""
import operator

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import bytegrad
import bytegrad.primitives.np_indexing  # noqa: F401  (registers the rules)
from bytegrad.primitives import np_indexing
from bytegrad.runtime.algebra import OneHot
from bytegrad.runtime.rules import RULES
from bytegrad.testing import check_rule
from checks import arr

SETTINGS = settings(max_examples=15, deadline=None)
DTYPES = [np.float64, np.float32, np.complex128]
shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


def gradient_of_index(x, k, d):
    y, back = bytegrad.pullback(lambda x: x[k], x)
    return back(d)[0]


def reference(x, k, d):
    g = np.zeros(x.shape, x.dtype)
    np.add.at(g, k, d)
    return g


# ---- x[k] ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_basic_indices(dtype, shape, data):
    x = arr(shape, dtype)
    k = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    check_rule(lambda x: x[k], x)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_slices_with_steps_and_negatives(shape, data):
    x = arr(shape)
    k = tuple(data.draw(st.slices(n)) for n in shape)
    check_rule(lambda x: x[k], x)
    check_rule(lambda x: x[k[0]], x)


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_integer_array_indices_add_up(dtype, shape, data):
    x = arr(shape, dtype)
    k = data.draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(max_dims=2)))
    check_rule(lambda x: x[k], x)
    y = x[k]
    d = arr(y.shape, dtype, 1)
    assert np.allclose(gradient_of_index(x, k, d), reference(x, k, d))


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_boolean_masks(dtype, shape, data):
    x = arr(shape, dtype)
    m = data.draw(hnp.arrays(bool, shape))
    check_rule(lambda x: x[m], x)
    pos = x.real > 0
    check_rule(lambda x: x[pos], x)
    row = data.draw(hnp.arrays(bool, shape[:1]))
    check_rule(lambda x: x[row], x)
    check_rule(lambda x: x[row, ...], x)


def test_mixed_indices():
    x = arr((4, 5, 3))
    idx = np.array([0, 2, 2, -1])
    for k in [(idx, slice(1, 3)), (slice(None), idx), (idx, slice(None), [1, 1, 0, 2]),
              (Ellipsis, [0, 0, 2]), (idx[:, None], [1, 4]), (idx, None, 1),
              (np.array([True, False, True, True]), slice(None, None, -2)),
              (np.array([True, False, True, True]), [0, 0, 4]), ([[1, 1], [0, 3]], 2),
              (1, idx), (slice(None), slice(1, None), [2, 2]), [2, 2, 0], (np.int64(1), [0, 0])]:
        check_rule(lambda x: x[k], x)
        y = x[k]
        d = arr(y.shape, seed=2)
        assert np.allclose(gradient_of_index(x, k, d), reference(x, k, d)), k


def test_repeated_index_counts():
    x = np.zeros(5)
    g = gradient_of_index(x, [1, 1, 1, 4, -1], np.ones(5))
    assert np.array_equal(g, [0, 3, 0, 0, 2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["add.at", "flat", "scatter"])
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), data=st.data())
def test_accumulation_paths_agree_with_add_at(dtype, path, shape, data):
    """The three ways of adding up repeated indices against np.add.at."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(np_indexing, "_ADD_AT_MAX", 10**9 if path == "add.at" else -1)
        mp.setattr(np_indexing, "SCATTER_MIN", 0 if path == "scatter" else 10**9)
        _accumulation_case(dtype, shape, data)


def _accumulation_case(dtype, shape, data):
    x = arr(shape, dtype)
    n = len(shape)
    parts = []
    for ax in range(n):
        parts.append(data.draw(st.one_of(
            st.slices(shape[ax]), st.integers(-shape[ax], shape[ax] - 1),
            hnp.arrays(np.intp, data.draw(st.sampled_from([(3,), (2, 1), (1,)])),
                       elements=st.integers(-shape[ax], shape[ax] - 1)),
            st.just(None))))
    if not any(isinstance(p, np.ndarray) for p in parts):
        parts[0] = np.array([0, 0, -1])
    k = tuple(parts)
    try:
        y = x[k]
    except IndexError:  # incompatible broadcast of the integer arrays
        return
    d = arr(y.shape, dtype, 3)
    g = np_indexing.accumulate(x.shape, x.dtype, k, d)
    assert g.dtype == x.dtype and np.allclose(g, reference(x, k, d))


def test_large_index_uses_kernel_and_matches():
    x = arr((300, 4))
    rng = np.random.default_rng(0)
    idx = rng.integers(-300, 300, 20_000)
    d = arr((20_000, 4), seed=1)
    assert d.size >= np_indexing.SCATTER_MIN
    assert np.allclose(gradient_of_index(x, idx, d), reference(x, idx, d))
    v = arr(1000, np.float32)
    i = rng.integers(0, 1000, 40_000)
    dv = arr(40_000, np.float32, seed=2)
    g = gradient_of_index(v, i, dv)
    assert g.dtype == np.float32 and np.allclose(g, reference(v, i, dv), atol=1e-4)


def test_scalar_index_keeps_one_hot_fast_path():
    x = arr((4, 3))
    for k in (2, (1, 2), np.int64(1)):
        y, back = RULES[operator.getitem](x, k)
        assert type(back(np.ones_like(y))[1]) is OneHot

    def f(x):
        s = 0.0
        for i in range(len(x)):
            s = s + x[i] * x[i]
        return s

    v = arr(50)
    assert np.allclose(bytegrad.gradient(f, v)[0], 2 * v)


def test_integer_arrays_and_complex_gradients_of_real_arrays():
    i = np.arange(12).reshape(3, 4)
    for k in [(slice(None), [1, 1]), i > 3, (Ellipsis, 1)]:
        y, back = bytegrad.pullback(lambda x: x[k], i)
        assert back(np.ones(y.shape)) == (None,)
    x = arr((3, 4))  # (a complex gradient reaches the reads: their real part is x's)
    y, back = bytegrad.pullback(lambda x: x[[0, 0], 1:] * (1 + 2j), x)
    g, = back(np.ones(y.shape))
    assert g.dtype == np.float64 and g[0, 1] == 2.0
    y, back = bytegrad.pullback(lambda x: x[1:, ::2] * (1 + 2j), x)
    g, = back(np.ones(y.shape))
    assert g.dtype == np.float64 and g[1, 0] == 1.0


def test_index_result_is_numpys():
    x = arr((4, 5))
    y, _ = bytegrad.pullback(lambda x: x[1:3, ::-1], x)
    assert np.shares_memory(y, x) and np.array_equal(y, x[1:3, ::-1])
    y, _ = bytegrad.pullback(lambda x: x[[1, 1]], x)
    assert not np.shares_memory(y, x) and np.array_equal(y, x[[1, 1]])


# ---- take, take_along_axis, compress, extract ------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_take(dtype, shape, data):
    x = arr(shape, dtype)
    n = len(shape)
    ax = data.draw(st.one_of(st.none(), st.integers(-n, n - 1)))
    size = x.size if ax is None else shape[ax]
    idx = data.draw(hnp.arrays(np.intp, hnp.array_shapes(min_dims=0, max_dims=2),
                               elements=st.integers(-size, size - 1)))
    check_rule(lambda x: np.take(x, idx, axis=ax), x)
    check_rule(lambda x: x.take(idx, ax), x)
    wild = idx * 3 + 1
    check_rule(lambda x: np.take(x, wild, ax, mode="wrap"), x)
    check_rule(lambda x: x.take(wild, axis=ax, mode="clip"), x)
    check_rule(lambda x: np.take(x, 0, axis=ax), x)


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_take_along_axis(dtype, shape, data):
    x = arr(shape, dtype)
    n = len(shape)
    ax = data.draw(st.integers(-n, n - 1))
    ishape = list(shape)
    ishape[ax] = data.draw(st.integers(1, 5))
    if data.draw(st.booleans()):
        ishape[0 if ax % n else -1] = 1  # broadcast along another axis
    idx = data.draw(hnp.arrays(np.intp, tuple(ishape), elements=st.integers(-shape[ax], shape[ax] - 1)))
    check_rule(lambda x: np.take_along_axis(x, idx, axis=ax), x)
    perm = np.argsort(x.real, axis=ax)
    check_rule(lambda x: np.take_along_axis(x, perm, ax), x)
    flat = data.draw(hnp.arrays(np.intp, (4,), elements=st.integers(0, x.size - 1)))
    check_rule(lambda x: np.take_along_axis(x, flat, axis=None), x)


def test_compress_and_extract():
    x = arr((3, 4))
    check_rule(lambda x: np.compress([True, False, True], x, axis=0), x)
    check_rule(lambda x: np.compress([False, True], x, axis=1), x)
    check_rule(lambda x: np.compress([1, 0, 1, 1, 0], x), x)
    check_rule(lambda x: x.compress([True, True, False, True], axis=-1), x)
    check_rule(lambda x: np.extract(x > 0, x), x)
    check_rule(lambda x: np.extract(np.arange(12).reshape(3, 4) % 3, x), x)


# ---- sorting ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_sort(dtype, shape, data):
    x = arr(shape, dtype)  # values a unit apart: finite differences must not reorder them
    x = (x - x.real + np.random.default_rng(1).permutation(x.size).reshape(shape)).astype(dtype)
    n = len(shape)
    ax = data.draw(st.one_of(st.none(), st.integers(-n, n - 1)))
    kw = {"atol": 2e-2} if dtype is np.float32 else {}  # large values, in single precision
    check_rule(lambda x: np.sort(x, axis=ax), x, **kw)
    check_rule(lambda x: np.sort(x), x, **kw)
    check_rule(lambda x: np.sort(x, ax, kind="stable"), x, **kw)
    assert np.array_equal(bytegrad.pullback(lambda x: np.sort(x, axis=ax), x)[0], np.sort(x, axis=ax))


def test_sort_ties_nan_lists_and_ints():
    x = np.array([2.0, np.nan, 1.0, 2.0, -1.0])
    y, back = bytegrad.pullback(np.sort, x)
    assert np.array_equal(y, np.sort(x), equal_nan=True)
    g, = back(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert np.array_equal(g[[4, 2, 1]], [1.0, 2.0, 5.0]) and sorted(g[[0, 3]]) == [3.0, 4.0]
    assert bytegrad.pullback(lambda a, b: np.sort([a, b, 0.5]), 2.0, 1.0)[1](np.array([1.0, 2.0, 3.0])) \
        == (3.0, 2.0)
    y, back = bytegrad.pullback(np.sort, np.array([3, 1, 2]))
    assert back(np.ones(3)) == (None,)


def test_sort_in_place():
    def f(x):
        y = x * 2.0
        y.sort()
        return y

    check_rule(f, arr(4))

    def g(x):
        order = np.arange(4)[::-1].copy()
        order.sort()  # an integer array: fine
        return x[order]

    check_rule(g, arr(4))


def test_diagonals_triangles_and_scalar_item():
    A, v, B = arr((3, 4)), arr(3, seed=1), arr((2, 3, 3), seed=2)
    check_rule(lambda A: np.diag(A) ** 2, A)
    check_rule(lambda A: np.diag(A, 1) ** 2, A)
    check_rule(lambda v: np.diag(v, -1) * 2.0, v)
    check_rule(lambda A: np.tril(A, -1) * A, A)
    check_rule(lambda A: np.triu(A) * A, A)
    check_rule(lambda B: np.diagonal(B, 1, 1, 2) ** 2, B)
    check_rule(lambda B: B.diagonal(axis1=0, axis2=2) ** 2, B)
    check_rule(lambda v: np.sum(v ** 2).item() * v, v)


def test_partition_follows_the_permutation():
    x = arr((4, 6), seed=8)
    check_rule(lambda x: np.partition(x, 2), x)
    check_rule(lambda x: np.partition(x, (1, 3), axis=0), x)
    check_rule(lambda x: np.partition(x, 5, axis=None), x)
    check_rule(lambda x: np.partition(x, -1), x.astype(np.float32))

    def in_place(x):
        y = x * 2
        y.partition(3)
        return np.sum(y[:, :3] ** 2)
    check_rule(in_place, x)
    g, = bytegrad.gradient(lambda x: np.partition(x, 1)[1], np.array([3.0, 1.0, 2.0]))
    assert np.array_equal(g, [0, 0, 1])  # the second smallest


@pytest.mark.regression
@pytest.mark.parametrize("write", ["mask", "integers", "list"])
def test_an_index_is_taken_as_the_read_used_it(write):
    # (the pullback read the index when the gradient was laid out, after the reverse pass
    # had undone the writes that made it: the gradient went where it pointed before them)
    def f(x):
        if write == "mask":
            k = np.array([True, True, False, False])
            k[[0, 1]] = False
            k[[2, 3]] = True
        elif write == "integers":
            k = np.array([0, 1])
            k[:] = [2, 3]
        else:
            k = [0, 1]
            k[0], k[1] = 2, 3
        return np.sum(x[k] ** 3)
    x = np.array([0.3, 0.5, -0.2, 0.9])
    assert bytegrad.gradient(f, x)[0] == pytest.approx(np.array([0.0, 0.0, 3 * 0.04, 3 * 0.81]))
