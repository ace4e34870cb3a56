"""Rules of NumPy's shape functions, and of building and converting arrays
(primitives/np_shape.py, primitives/arrays.py)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import bytegrad
import bytegrad.primitives.np_shape  # noqa: F401  (registers the rules)
import bytegrad.primitives.np_indexing  # noqa: F401
from bytegrad.testing import check_rule
from checks import arr

SETTINGS = settings(max_examples=15, deadline=None)
DTYPES = [np.float64, np.float32, np.complex128]
shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


def grads(f, *args, d=None):
    y, back = bytegrad.pullback(f, *args)
    return y, back(np.ones_like(y) if d is None else d)


# ---- reshape, ravel, transpose ---------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_reshape(dtype, shape, data):
    x = arr(shape, dtype)
    size = x.size
    k = data.draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
    order = data.draw(st.sampled_from("CFA"))
    check_rule(lambda x: np.reshape(x, (k, -1), order=order), x)
    check_rule(lambda x: x.reshape(-1, k, order=order), x)
    check_rule(lambda x: x.reshape((size // k, k)), x)
    check_rule(lambda x: np.asfortranarray(x).reshape(size, order="A"), x)


def test_reshape_returns_numpys_view():
    x = arr((3, 4))
    y, back = bytegrad.pullback(lambda x: x.reshape(4, 3), x)
    assert np.shares_memory(y, x) and y.shape == (4, 3)
    y, _ = bytegrad.pullback(lambda x: x.T.reshape(12), x)  # NumPy copies here
    assert not np.shares_memory(y, x) and np.array_equal(y, x.T.reshape(12))


@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
@SETTINGS
@given(shape=shapes, data=st.data())
def test_ravel_and_flatten(order, shape, data):
    base = arr(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    flips = tuple(slice(None, None, data.draw(st.sampled_from([1, -1, 2]))) for _ in shape)
    view = lambda x: np.transpose(x, perm)[flips]  # noqa: E731  (a strided view)
    check_rule(lambda x: np.ravel(view(x), order), base)
    check_rule(lambda x: view(x).ravel(order), base)
    check_rule(lambda x: view(x).flatten(order=order), base)


def test_ravel_in_memory_order_of_broadcast_views():
    a = arr((4,))
    check_rule(lambda a: np.ravel(np.broadcast_to(a, (3, 4)), order="K"), a)
    check_rule(lambda a: np.broadcast_to(a[:, None], (4, 3)).T[::-1].ravel("K"), a)
    check_rule(lambda a: np.broadcast_to(a[:, None], (4, 3)).flatten("K"), a)


def test_ravel_list_and_int():
    assert grads(lambda x: np.ravel([[x, 2.0], [x, 1]]), 1.5)[1] == (2.0,)
    assert grads(lambda x: np.ravel(x), np.arange(4))[1] == (None,)


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_transpose(dtype, shape, data):
    x = arr(shape, dtype)
    axes = data.draw(st.permutations(range(len(shape))))
    neg = [a - len(shape) for a in axes]
    check_rule(lambda x: np.transpose(x, axes), x)
    check_rule(lambda x: np.transpose(x, neg), x)
    check_rule(lambda x: np.transpose(x), x)
    check_rule(lambda x: x.transpose(*axes), x)
    check_rule(lambda x: x.transpose(axes), x)
    check_rule(lambda x: x.transpose(), x)
    check_rule(lambda x: x.T, x)
    check_rule(lambda x: np.permute_dims(x, axes), x)


def test_T_attribute_any_rank():
    for shape in [(3,), (2, 3), (2, 3, 4), (1, 2, 3, 2)]:
        x = arr(shape)
        y, (g,) = grads(lambda x: x.T * 2.0, x)
        assert y.shape == shape[::-1] and g.shape == shape and np.all(g == 2.0)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=2, max_dims=4, max_side=4), data=st.data())
def test_swapaxes_moveaxis_rollaxis(shape, data):
    x = arr(shape)
    n = len(shape)
    a, b = data.draw(st.integers(-n, n - 1)), data.draw(st.integers(-n, n - 1))
    check_rule(lambda x: np.swapaxes(x, a, b), x)
    check_rule(lambda x: x.swapaxes(a, b), x)
    check_rule(lambda x: np.moveaxis(x, a, b), x)
    check_rule(lambda x: np.moveaxis(x, [0, 1], [-1, -2]), x)
    start = data.draw(st.integers(-n, n))
    check_rule(lambda x: np.rollaxis(x, a, start), x)
    check_rule(lambda x: np.matrix_transpose(x), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_squeeze_expand_dims_atleast(dtype):
    x = arr((3, 1, 2, 1), dtype)
    check_rule(lambda x: np.squeeze(x), x)
    check_rule(lambda x: np.squeeze(x, axis=1), x)
    check_rule(lambda x: x.squeeze(), x)
    check_rule(lambda x: x.squeeze(-1), x)
    check_rule(lambda x: np.expand_dims(x, (0, -1)), x)
    check_rule(lambda x: np.expand_dims(x, 2), x)
    v = arr((3,), dtype)
    for f in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
        check_rule(lambda x: f(x), v)
        check_rule(lambda x, y: f(x, y), v, arr((2, 2), dtype))
    check_rule(lambda x: np.atleast_2d(x), 1.5)
    assert grads(lambda x, y: np.atleast_1d(x, y)[1] * 3.0, 1.5, 2.5)[1] == (None, 3.0)


# ---- broadcasting ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3))
def test_broadcast(dtype, shapes):
    (sa, sb), out = shapes.input_shapes, shapes.result_shape
    a, b = arr(sa, dtype, 1), arr(sb, dtype, 2)
    check_rule(lambda a: np.broadcast_to(a, out), a)
    check_rule(lambda a, b: np.broadcast_arrays(a, b), a, b)


def test_broadcast_to_scalar_and_list():
    assert grads(lambda x: np.broadcast_to(x, (2, 3)), 1.5)[1] == (6.0,)
    assert grads(lambda x: np.broadcast_to([x, 1.0], (3, 2)), 1.5)[1] == (3.0,)


# ---- joining ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_concatenate_and_stack(dtype, shape, data):
    n = len(shape)
    ax = data.draw(st.integers(-n, n - 1))
    other = list(shape)
    other[ax] = data.draw(st.integers(1, 3))
    a, b = arr(shape, dtype, 1), arr(tuple(other), dtype, 2)
    check_rule(lambda a, b: np.concatenate([a, b, a], axis=ax), a, b)
    check_rule(lambda a, b: np.concatenate((a, b), ax), a, b)
    check_rule(lambda a, b: np.concatenate([a, b], axis=None), a, b)
    sax = data.draw(st.integers(-n - 1, n))
    check_rule(lambda a, b: np.stack([a, b, a], axis=sax), a, arr(shape, dtype, 3))
    check_rule(lambda a, b: np.stack((a, b)), a, arr(shape, dtype, 3))
    check_rule(lambda a, b: np.append(a, b, axis=ax), a, b)
    check_rule(lambda a, b: np.append(a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hstack_vstack_column_stack_dstack(dtype):
    v, w, m = arr((3,), dtype, 1), arr((3,), dtype, 2), arr((3, 2), dtype, 3)
    for f in (np.hstack, np.vstack, np.column_stack, np.dstack):
        check_rule(lambda a, b: f([a, b]), v, w)
        check_rule(lambda a, b: f((a, b, a)), v, w)
    check_rule(lambda a, b: np.hstack([a, b]), m, arr((3, 4), dtype))
    check_rule(lambda a, b: np.vstack([a, b]), m, arr((1, 2), dtype))
    check_rule(lambda a, b: np.vstack([a, b]), m, arr((2,), dtype))
    check_rule(lambda a, b: np.column_stack([a, b]), v, m)
    check_rule(lambda a, b: np.dstack([a, b]), m, m)
    check_rule(lambda a, b: np.hstack([a, b]), 1.5, v)


def test_joining_mixed_and_integer_inputs():
    x = arr((2,))
    y, (gx, gs) = grads(lambda x, s: np.concatenate([x, [s, 1.0], np.arange(2)]), x, 0.5)
    assert np.array_equal(gx, [1.0, 1.0]) and gs == 1.0
    y, back = bytegrad.pullback(lambda x: np.stack([x, np.arange(2)]), x)
    assert np.array_equal(back(np.ones((2, 2)))[0], [1.0, 1.0])
    assert grads(lambda i: np.concatenate([i, i]), np.arange(3))[1] == (None,)


# ---- splitting -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_split(dtype, shape, data):
    x = arr(shape, dtype)
    n = len(shape)
    ax = data.draw(st.integers(-n, n - 1))
    sections = data.draw(st.integers(1, 4))
    check_rule(lambda x: np.array_split(x, sections, axis=ax), x)
    cuts = sorted(data.draw(st.lists(st.integers(0, shape[ax] + 1), max_size=3)))
    check_rule(lambda x: np.split(x, cuts, axis=ax), x)
    check_rule(lambda x: np.array_split(x, cuts, ax), x)
    if shape[ax] % sections == 0:
        check_rule(lambda x: np.split(x, sections, ax), x)


def test_split_variants():
    x = arr((4, 6, 2))
    check_rule(lambda x: np.hsplit(x, 3), x)
    check_rule(lambda x: np.vsplit(x, [1]), x)
    check_rule(lambda x: np.dsplit(x, 2), x)
    check_rule(lambda x: np.hsplit(x, 2), arr((4,)))


def test_split_gradients_arrive_with_none_entries():
    x = arr((6, 2))
    ys, back = bytegrad.pullback(lambda x: np.split(x, 3), x)
    assert type(ys) is list and len(ys) == 3 and all(np.shares_memory(y, x) for y in ys)
    g, = back([None, np.full((2, 2), 2.0), None])
    assert np.array_equal(g, np.r_[np.zeros((2, 2)), np.full((2, 2), 2.0), np.zeros((2, 2))])

    def f(x):
        a, b, c = np.array_split(x, 3)
        return b * 3.0

    y, back = bytegrad.pullback(f, x)
    g, = back(np.ones_like(y))
    assert np.array_equal(g, np.r_[np.zeros((2, 2)), 3 * np.ones((2, 2)), np.zeros((2, 2))])
    assert grads(lambda v: np.split(np.array([v, 2.0, v, 1.0]), 2)[1] * 2.0, 1.5)[1] == (2.0,)


# ---- repeating, reordering, padding ----------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
       reps=st.one_of(st.integers(1, 3), st.lists(st.integers(1, 3), min_size=1, max_size=4)))
def test_tile(dtype, shape, reps):
    check_rule(lambda x: np.tile(x, reps), arr(shape, dtype))


def test_tile_scalar():
    assert grads(lambda x: np.tile(x, (2, 3)), 1.5)[1] == (6.0,)


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_repeat(dtype, shape, data):
    x = arr(shape, dtype)
    n = len(shape)
    ax = data.draw(st.one_of(st.none(), st.integers(-n, n - 1)))
    length = x.size if ax is None else shape[ax]
    r = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=length,
                                                        max_size=length)))
    check_rule(lambda x: np.repeat(x, r, axis=ax), x)
    check_rule(lambda x: x.repeat(r, ax), x)
    if not isinstance(r, list):
        check_rule(lambda x: np.repeat(x, r), x)


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=shapes, data=st.data())
def test_flip_roll_rot90(dtype, shape, data):
    x = arr(shape, dtype)
    n = len(shape)
    axes = data.draw(st.one_of(st.none(), st.integers(-n, n - 1),
                               st.lists(st.integers(0, n - 1), unique=True).map(tuple)))
    check_rule(lambda x: np.flip(x, axes), x)
    check_rule(lambda x: np.flip(x), x)
    shift = data.draw(st.integers(-5, 5))
    check_rule(lambda x: np.roll(x, shift), x)
    check_rule(lambda x: np.roll(x, shift, axis=-1), x)
    check_rule(lambda x: np.roll(x, (shift, 1), axis=(0, -1)), x)
    if n >= 2:
        check_rule(lambda x: np.fliplr(x), x)
        check_rule(lambda x: np.rot90(x, shift), x)
        check_rule(lambda x: np.rot90(x, 1, (1, 0)), x)
    check_rule(lambda x: np.flipud(x), x)


@pytest.mark.parametrize("mode", ["constant", "edge", "wrap", "reflect", "symmetric", "empty"])
@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4), data=st.data())
def test_pad(mode, dtype, shape, data):
    x = arr(shape, dtype)
    width = data.draw(st.one_of(
        st.integers(0, 3), st.tuples(st.integers(0, 3), st.integers(0, 3)),
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=len(shape),
                 max_size=len(shape)).map(tuple)))
    if mode == "empty":  # the padding holds garbage: compare the interior only
        y, back = bytegrad.pullback(lambda x: np.pad(x, width, mode), x)
        d = arr(y.shape, dtype, 5)
        g, = back(d)
        inner = np.pad(np.ones(shape, bool), width)
        assert np.array_equal(g, d[inner].reshape(shape))
        return
    check_rule(lambda x: np.pad(x, width, mode=mode), x)


def test_pad_constant_values_and_unsupported_modes():
    x = arr((3, 2))
    check_rule(lambda x: np.pad(x, 1, constant_values=2.5), x)
    check_rule(lambda x: np.pad(x, ((0, 1), (2, 0)), "constant", constant_values=(1, 2)), x)
    with pytest.raises(NotImplementedError, match="mean"):
        bytegrad.pullback(lambda x: np.pad(x, 1, mode="mean"), x)
    with pytest.raises(NotImplementedError, match="odd"):
        bytegrad.pullback(lambda x: np.pad(x, 1, mode="reflect", reflect_type="odd"), x)
    y, back = bytegrad.pullback(lambda x: np.pad(x, 1, mode="mean"), np.arange(4))
    assert back(np.ones(6)) == (None,)


def test_shape_rules_on_integer_arrays_give_none():
    i = np.arange(12).reshape(3, 4)
    for f in (lambda x: np.reshape(x, -1), lambda x: x.T.ravel(), lambda x: np.flip(x),
              lambda x: np.tile(x, 2), lambda x: np.pad(x, 1), lambda x: np.split(x, 2, 1)):
        y, back = bytegrad.pullback(f, i)
        assert back(y) == (None,)


# ---- building and converting arrays ----------------------------------------------

def test_array_of_nested_and_mixed_lists():
    v = arr((3,))
    check_rule(lambda x, y: np.array([[x, y], [1, x]]), 0.5, 1.5)
    check_rule(lambda x, y: np.array([x, y, x]), v, arr((3,), seed=1))
    check_rule(lambda x, y: np.array([x, [y, 2.0, 3]]), v, 1.5)
    check_rule(lambda x, y: np.asarray((x, [y, y]), dtype=np.complex128), v[:2], 1.5)
    check_rule(lambda x, y: np.array([[x], [y]]), np.float32(0.5), np.float64(2.0))
    check_rule(lambda x: np.array(x, ndmin=3), v)
    check_rule(lambda x: np.asarray(x), 0.5)
    check_rule(lambda x: np.asanyarray([x, x]), 0.5)
    check_rule(lambda x: np.ascontiguousarray(x.T), arr((2, 3)))
    check_rule(lambda x: np.asfortranarray(x), arr((2, 3), np.complex128))
    y, (gx, gy) = grads(lambda x, y: np.array([[x, 1, y], [x, 2, True]]), 0.5, np.array(2.0))
    assert type(gx) is float and gx == 2.0
    assert isinstance(gy, np.ndarray) and gy.shape == () and gy == 1.0
    y, (g,) = grads(lambda xs: np.array(xs), [[0.5, 1], (2.0, 3)])
    assert g == [[1.0, None], (1.0, None)]
    assert grads(lambda x: np.array([x, x], dtype=int), 1.5)[1] == (None,)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("dtype", DTYPES)
def test_array_cast_back_to_input_dtype(dtype):
    x = arr((2, 3), dtype)
    check_rule(lambda x: np.array(x), x)
    check_rule(lambda x: np.asarray(x, np.complex128), x)
    y, (g,) = grads(lambda x: np.array(x, dtype=np.float32), x.real.astype(dtype))
    assert g.dtype == dtype


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("dtype", DTYPES)
def test_copy_and_astype(dtype):
    x = arr((2, 3), dtype)
    check_rule(lambda x: x.copy(), x)
    check_rule(lambda x: np.copy(x), x)
    check_rule(lambda x: x.copy(order="F"), x)
    check_rule(lambda x: x.astype(np.complex128), x)
    check_rule(lambda x: np.astype(x, np.complex64), x, rtol=3e-3)
    check_rule(lambda x: x.astype(np.float64).real if dtype is np.complex128 else x.astype(float), x)
    g = grads(lambda x: x.astype(np.float32), x.real.astype(dtype))[1][0]
    assert g.dtype == dtype
    y, back = bytegrad.pullback(lambda x: x.astype(int), x.real)
    assert y.dtype.kind == "i" and back(np.ones(y.shape)) == (None,)
    assert grads(lambda i: i.astype(float), np.arange(3))[1] == (None,)


def test_numpy_scalar_types():
    check_rule(lambda x: np.float64(x) * x, 0.3)
    check_rule(lambda x: np.float64(x), np.array(0.3))
    check_rule(lambda x: np.float64(x), arr((3,)))
    check_rule(lambda x: np.float32(x), np.array(0.3), rtol=3e-3, steps=(1e-2, 3e-3))
    check_rule(lambda x: np.complex128(x), 0.5)
    g, = bytegrad.gradient(lambda x: np.float32(x) * 2.0, np.float64(0.5))
    assert type(g) is np.float64 and g == 2.0
    g, = bytegrad.gradient(lambda x: np.float64(x), np.array(0.5, np.float32))
    assert g.dtype == np.float32 and g.shape == ()
    assert bytegrad.gradient(lambda i: np.float64(i), 3) == (None,)
    assert bytegrad.gradient(lambda x: float(np.int64(x)), 3.5) == (None,)


def test_builtin_float_of_arrays_and_numpy_scalars():
    g, = bytegrad.gradient(lambda x: float(x) * 2.0, np.array(0.5))
    assert g.shape == () and g == 2.0
    assert bytegrad.gradient(lambda x: float(x) * 2.0, np.float64(0.5)) == (2.0,)
    x = arr((2, 3))
    g, = bytegrad.gradient(lambda x: float(x[1, 0]) * float(x[1, 2]), x)
    assert g[1, 2] == x[1, 0] and g[1, 0] == x[1, 2] and np.count_nonzero(g) == 2


def test_item_and_tolist():
    x = arr((2, 3))
    check_rule(lambda x: x.item(), x[:1, 1:2])
    check_rule(lambda x: x.item(4) * 2.0, x)
    check_rule(lambda x: x.item(-1), x)
    check_rule(lambda x: x.item((1, 2)) * x.item(1, 0), x)
    check_rule(lambda x: x.tolist(), x)
    check_rule(lambda x: x.tolist(), np.array(1.5))
    check_rule(lambda x: x.item(), arr((1,), np.complex128))

    def f(x):
        rows = x.tolist()
        return rows[1][2] * 3.0

    assert np.array_equal(bytegrad.gradient(f, x)[0], [[0, 0, 0], [0, 0, 3.0]])
    assert bytegrad.gradient(lambda i: float(i.item()), np.arange(1)) == (None,)


def test_attribute_reads_carry_no_gradient():
    def f(x):
        n = x.shape[0] * x.ndim + x.size + x.itemsize + x.nbytes
        z = np.zeros(x.shape, x.dtype) + x
        return (z * n).T[0, 0] + len(x) + np.size(x) + np.ndim(x) + np.shape(x)[1]

    g, = bytegrad.gradient(f, arr((2, 3)))
    assert g[0, 0] == 2 * 2 + 6 + 8 + 48 and np.count_nonzero(g) == 1


def test_full_linspace_arange():
    check_rule(lambda x: np.full((2, 3), x), 0.5)
    check_rule(lambda x: np.full((2, 3), x, np.complex128), 0.5)
    check_rule(lambda x: np.full((4, 3), x), arr((3,)))
    check_rule(lambda x, v: np.full_like(x, v), arr((2, 3)), 2.0)
    assert bytegrad.gradient(lambda x: np.full_like(x, 2.0)[0, 0], arr((2, 3))) == (None,)
    check_rule(lambda a, b: np.linspace(a, b, 7), 0.5, 2.0)
    check_rule(lambda a, b: np.linspace(a, b, 1), 0.5, 2.0)
    check_rule(lambda a, b: np.linspace(a, b, 7, endpoint=False, retstep=True), 0.5, 2.0)
    check_rule(lambda a, b: np.linspace(a, b, 5, retstep=True), 0.5, 2.0)
    check_rule(lambda a, b: np.linspace(a, b, 4, axis=1), arr((3,)), arr((2, 3), seed=1))
    check_rule(lambda a, b: np.linspace(a, b, 4, axis=-1), arr((3,)), 1.0)
    check_rule(lambda a, s: np.arange(a, 5.0, s), 0.5, 0.7)
    check_rule(lambda a: np.arange(a, 5.0), 0.5)
    assert bytegrad.gradient(lambda a: np.arange(a)[-1], 5.5) == (None,)


def test_nondifferentiable_functions_run_plainly():
    def f(x):
        i = np.argmax(x) + np.argmin(x) + np.argsort(x)[0] + np.searchsorted(np.sort(x), 0.0)
        z = np.zeros(3) + np.ones(3) + np.empty(3) * 0 + np.zeros_like(x) + np.ones_like(x)
        z = z + np.eye(3)[0] + np.identity(3)[1] + np.arange(3) + np.empty_like(x) * 0
        n = np.count_nonzero(x > 0) + len(np.nonzero(x)[0]) + len(np.unique(x))
        ok = np.isclose(x, x).all() and np.allclose(x, x) and np.array_equal(x, x)
        return x * z * (i + n + ok + np.isnan(x).sum())

    x = np.array([0.5, -1.0, 2.0])
    y, back = bytegrad.pullback(f, x)
    assert np.allclose(back(np.ones(3))[0], np.array([3.0, 4.0, 4.0]) * 14)


@pytest.mark.parametrize("ask", [
    lambda x: np.dtype(x.dtype), lambda x: np.promote_types(x.dtype, np.float32),
    lambda x: np.issubdtype(x.dtype, np.floating), lambda x: np.finfo(x.dtype).eps,
    lambda x: np.iinfo(np.int32).max, lambda x: np.common_type(x),
    lambda x: np.result_type(x, 1.0),
], ids=["dtype", "promote_types", "issubdtype", "finfo", "iinfo", "common_type", "result_type"])
def test_what_a_dtype_is_made_from_and_asked_carries_no_gradient(ask):
    """Registered as non-differentiable: the answer is a dtype, a type, a bool or a
    limit, the same for every value of ``x`` (as SciPy's distributions use them)."""
    x = np.array([0.5, -1.0, 2.0])
    assert all(ask(x) == ask(x + d) for d in (1e-3, -0.7, 5.0))
    g = bytegrad.gradient(lambda x: np.sum(np.asarray(x, dtype=np.promote_types(x.dtype, np.float64))
                                           * (1.0 + 0.0 * float(ask(x) is None))), x)
    assert np.array_equal(g[0], np.ones(3))


SAMPLERS = [  # (function of a generator and the parameters, parameters)
    (lambda r, a, b: r.normal(a, b, 5), (0.3, 2.0)),
    (lambda r, a, b: r.normal(a, b, (4, 3)), (arr((3,)), arr((4, 1), seed=1) ** 2 + 0.5)),
    (lambda r, a, b: r.uniform(a, b, 5), (0.5, 2.0)),
    (lambda r, a, b: r.laplace(a, b, 5), (0.5, 2.0)),
    (lambda r, a, b: r.logistic(a, b, 5), (0.5, 2.0)),
    (lambda r, a, b: r.gumbel(a, b, 5), (0.5, 2.0)),
    (lambda r, s: r.exponential(s, 5), (2.0,)),
    (lambda r, s: r.rayleigh(s, 5), (2.0,)),
    (lambda r, s: r.gamma(2.5, s, 5), (2.0,)),
    (lambda r, m, s: r.lognormal(m, s, 5), (0.3, 0.5)),
    (lambda r, m: r.multivariate_normal(m, np.eye(2), 3), (arr((2,)),)),
]


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("f, params", SAMPLERS)
def test_random_pathwise_gradients(legacy, f, params):
    make = (lambda: np.random.RandomState(7)) if legacy else (lambda: np.random.default_rng(7))
    check_rule(lambda *p: f(make(), *p), *params)


def test_random_module_functions_and_keywords():
    def f(a, b):
        np.random.seed(3)
        return np.random.normal(a, b, 4) + np.random.rand(4) + np.random.randn(4)

    check_rule(f, 0.5, 2.0)

    def g(a, b):
        r = np.random.default_rng(3)
        return r.normal(loc=a, scale=b, size=4) + r.standard_normal(4) + r.random(4)

    z = np.random.default_rng(3).normal(size=4)
    y, back = bytegrad.pullback(g, 0.5, 2.0)
    assert np.allclose(back(np.ones(4)), (4.0, z.sum()))


def test_random_without_pathwise_gradient_refuses():
    y, back = bytegrad.pullback(lambda k: np.random.default_rng(1).gamma(k, 1.0, 3), 2.0)
    with pytest.raises(NotImplementedError, match="'shape' parameter of the sampler gamma"):
        back(np.ones(3))
    y, back = bytegrad.pullback(lambda x: np.random.default_rng(1).choice(x, 2), arr((4,)))
    with pytest.raises(NotImplementedError, match="sampler choice"):
        back(np.ones(2))
    with pytest.raises(NotImplementedError, match="in place"):
        bytegrad.pullback(lambda x: np.random.default_rng(1).shuffle(x), arr((4,)))
    # parameters that are not differentiated run plainly, integer samplers too
    x = arr((4,))
    gam = np.random.default_rng(1).gamma(2.0, 1.0, 4)
    y, back = bytegrad.pullback(lambda x: x * np.random.default_rng(1).gamma(2.0, 1.0, 4)
                                + np.random.default_rng(2).integers(0, 5) + x[0], x)
    assert np.allclose(back(np.ones(4))[0], gam + np.array([4.0, 0, 0, 0]))


@pytest.mark.parametrize("f", [np.unique, np.unique_values, lambda x: np.unique_all(x).values,
                               lambda x: np.unique(x, return_index=True, return_counts=True)[0],
                               lambda x: np.unique_counts(x)[0], lambda x: np.unique_inverse(x)[0]],
                         ids=["unique", "unique_values", "unique_all", "unique_flags", "unique_counts",
                              "unique_inverse"])
def test_unique_values_take_the_gradient_of_the_items_they_are(f):
    x = np.array([[0.3, 1.2, 0.7], [-0.5, 2.0, 1.1]])  # distinct: unique is a sort
    check_rule(f, x)
    dup = np.array([0.3, 1.2, 0.3, -0.5])  # equal items share (as np.max's ties do)
    g = bytegrad.gradient(lambda x: np.sum(f(x) ** 2), dup)[0]
    assert np.allclose(g, [0.3, 2.4, 0.3, -1.0])
    assert np.allclose(g[0] + g[2], (np.sum(f(dup + 1e-6 * np.array([1, 0, 1, 0])) ** 2)
                                     - np.sum(f(dup - 1e-6 * np.array([1, 0, 1, 0])) ** 2)) / 2e-6)


def test_unique_rows_are_refused():
    with pytest.raises(NotImplementedError, match=r"np.unique\(..., axis=...\)"):
        bytegrad.gradient(lambda x: np.sum(np.unique(x, axis=0)), np.ones((2, 2)))


def test_bincount_weights():
    idx = np.array([0, 2, 2, 4])
    check_rule(lambda w: np.bincount(idx, w), np.array([0.5, 1.0, 2.0, -1.0]))
    check_rule(lambda w: np.bincount(idx, weights=w, minlength=7), np.array([0.5, 1.0, 2.0, -1.0]))
    assert bytegrad.gradient(lambda w: np.sum(np.bincount(idx) * w), 2.0) == (4.0,)  # (4 items)
