"""Rules of NumPy's reductions (primitives/np_reductions.py), checked with check_rule."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
import bytegrad.primitives.np_reductions  # noqa: F401  (registers the rules)
from bytegrad.runtime.algebra import Fill, unwrap
from bytegrad.runtime.rules import rule_for
from bytegrad.testing import check_rule
from checks import arr, check_grad

SETTINGS = settings(max_examples=15, deadline=None)
FLOATS = st.sampled_from([np.float64, np.float32])


@st.composite
def axes_of(draw, nd, tuples=True):
    """An axis argument for an ``nd``-dimensional array: None, an int (maybe negative)
    or a tuple of distinct axes, some written negatively."""
    options = [st.none()]
    if nd:
        options.append(st.integers(-nd, nd - 1))
    if tuples:
        options.append(st.lists(st.integers(0, max(nd - 1, 0)), unique=True, max_size=nd)
                       .map(lambda a: a if nd else []))
    axis = draw(st.one_of(*options))
    if isinstance(axis, list):
        axis = tuple(a - nd if draw(st.booleans()) else a for a in axis)
    return axis


@st.composite
def cases(draw, min_ndim=0, tuples=True, min_size=1):
    shape = tuple(draw(st.lists(st.integers(min_size, 3), min_size=min_ndim, max_size=3)))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    x = rng.standard_normal(shape).astype(draw(FLOATS))
    return x, draw(axes_of(len(shape), tuples)), draw(st.booleans())


def _count(x, axis):
    if axis is None:
        return x.size
    axis = axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([x.shape[a] for a in axis]))


# --- sum, mean, var, std ---------------------------------------------------------

@SETTINGS
@given(cases())
def test_sum_and_mean(case):
    x, axis, keepdims = case
    check_rule(lambda x: np.sum(x, axis=axis, keepdims=keepdims), x)
    g = bytegrad.gradient(lambda x: np.sum(np.sum(x, axis=axis, keepdims=keepdims)), x)[0]
    assert g.dtype == x.dtype and g.shape == x.shape and np.all(g == 1)
    check_rule(lambda x: x.sum(axis, keepdims=keepdims), x)
    check_rule(lambda x: np.mean(x, axis=axis, keepdims=keepdims) * 2.0, x)
    check_rule(lambda x: x.mean(axis=axis, keepdims=keepdims), x)


@SETTINGS
@given(cases(), st.integers(0, 2))
def test_var_and_std(case, ddof):
    x, axis, keepdims = case
    if _count(x, axis) <= ddof or _count(x, axis) < 2:
        return
    for f in (np.var, np.std):
        check_rule(lambda x: f(x, axis=axis, keepdims=keepdims, ddof=ddof), x)
    check_rule(lambda x: x.var(axis, ddof=ddof, keepdims=keepdims), x)
    check_rule(lambda x: x.std(axis=axis, ddof=ddof, keepdims=keepdims), x)


def test_var_std_correction_mean_where():
    x = np.random.default_rng(1).standard_normal((3, 4))
    check_rule(lambda x: np.var(x, axis=1, correction=1), x)
    check_rule(lambda x: np.std(x, axis=0, correction=1), x)
    where = np.array([[True, False, True, True]] * 3)
    check_rule(lambda x: np.var(x, axis=1, where=where), x)
    check_rule(lambda x: np.std(x, where=where), x)
    m = x.mean(axis=1, keepdims=True) + 0.3
    check_rule(lambda x, m: np.var(x, axis=1, mean=m), x, m)
    check_rule(lambda x, m: x.std(axis=1, mean=m), x, m)


def test_std_of_constant_is_zero_gradient():
    g, = bytegrad.gradient(lambda x: np.std(x), np.full(4, 2.0))
    assert np.array_equal(g, np.zeros(4))


def test_dtype_argument_keeps_input_dtype():
    x = np.random.default_rng(2).standard_normal((3, 2)).astype(np.float32)
    for f in (lambda x: np.sum(x, dtype=np.float64), lambda x: x.mean(0, np.float64).sum(),
              lambda x: np.var(x, dtype=np.float64), lambda x: np.prod(x, dtype=np.float64),
              lambda x: np.cumsum(x, dtype=np.float64).sum(),
              lambda x: x.cumprod(1, np.float64).sum()):
        g = check_rule(f, x)[0]
        assert g.dtype == np.float32
    i = np.arange(6).reshape(2, 3)
    assert bytegrad.gradient(lambda x: np.sum(x, dtype=np.float64), i) == (None,)
    assert bytegrad.gradient(lambda x: np.mean(x), i) == (None,)


def test_integer_and_bool_inputs_have_no_gradient():
    i = np.arange(6).reshape(2, 3)
    b = i > 2
    y = np.ones(3)
    fs = [np.sum, np.prod, np.mean, np.var, np.std, np.max, np.min, np.amax, np.amin, np.ptp,
          np.cumsum, np.cumprod, np.diff, np.linalg.norm]
    for f in fs:
        g = bytegrad.gradient(lambda i, y: np.sum(f(i)) * 1.0 + np.sum(y), i, y)
        assert g[0] is None and np.array_equal(g[1], y)
    assert bytegrad.gradient(lambda b, y: b.sum() * y.sum(), b, y)[0] is None


def test_float32_stays_float32():
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    for f in (np.sum, np.mean, np.var, np.std, np.max, np.min, np.ptp, np.prod, np.linalg.norm):
        g, = bytegrad.gradient(lambda x: f(x), x)
        assert g.dtype == np.float32, f
    for f in (np.cumsum, np.cumprod, np.diff):
        g, = bytegrad.gradient(lambda x: f(x).sum(), x)
        assert g.dtype == np.float32, f


def test_zero_dimensional_arrays_get_arrays():
    x = np.array(3.0)
    for f in (np.sum, np.max, np.min, np.prod, np.mean, np.std, np.linalg.norm):
        g, = bytegrad.gradient(lambda x: f(x), x)
        assert type(g) is np.ndarray and g.shape == () and g.dtype == x.dtype, f


def test_lists_and_python_floats():
    g = bytegrad.gradient(lambda a, b: np.sum([a, b * b, 2.0]), 1.5, 3.0)
    assert g == (1.0, 6.0) and type(g[0]) is float
    g = bytegrad.gradient(lambda a, b: np.prod([a, b, 2]), 1.5, 3.0)
    assert g == (6.0, 3.0)
    g = bytegrad.gradient(lambda a, b: np.max([a, b]) + np.mean((a, 4.0)), 1.5, 3.0)
    assert g == (0.5, 1.0)
    a = np.arange(3.0)
    g = bytegrad.gradient(lambda a: np.sum([a, 2 * a], axis=0).sum(), a)[0]
    assert np.array_equal(g, np.full(3, 3.0))
    check_rule(lambda x: np.sum(x) * np.mean(x) + np.max(x), 2.5)
    check_rule(lambda x: (x * x).sum() + (x * 2.0).max(), np.float64(1.5))  # NumPy scalar methods
    check_rule(lambda x: np.float32(2) * x.prod() + x.mean() + x.var(), np.float32(1.5))


def test_where_and_initial():
    x = np.random.default_rng(4).standard_normal((3, 4))
    w = np.random.default_rng(5).random((3, 4)) > 0.3
    w[:, 0] = True
    check_rule(lambda x: np.sum(x, axis=0, where=w), x)
    check_rule(lambda x: x.mean(1, where=w), x)
    check_rule(lambda x: np.prod(x, axis=1, where=w), x)
    check_rule(lambda x: np.max(x, axis=0, where=w, initial=-10.0), x)
    check_rule(lambda x: x.min(axis=1, where=w, initial=10.0), x)
    check_rule(lambda x, s: np.sum(x, axis=1, initial=s), x, 0.7)
    check_rule(lambda x, s: np.prod(x, axis=1, initial=s), x, 0.7)
    check_rule(lambda x, s: np.max(x, axis=1, initial=s), x, 0.7)  # initial wins some rows
    g = bytegrad.gradient(lambda x, s: np.max(x, initial=s), np.array([1.0, 2.0]), 2.0)
    assert np.array_equal(g[0], [0, 0.5]) and g[1] == 0.5


def test_out_keyword_writes_and_differentiates():
    x = np.random.default_rng(0).standard_normal((2, 3))
    out = np.empty(3)
    check_rule(lambda x: np.sum(x, axis=0, out=out) * x, x)
    _, back = bytegrad.pullback(lambda x: np.sum(x, axis=0, out=out) * x, x)
    back(np.ones((2, 3)))
    assert np.array_equal(out, x.sum(axis=0))  # holds what the plain call left in it


# --- max, min, ptp ---------------------------------------------------------------

EXTREMA = [np.max, np.min, np.amax, np.amin, np.ptp,
           lambda x, **k: x.max(**k), lambda x, **k: x.min(**k)]


@SETTINGS
@given(cases())
def test_extrema(case):
    x, axis, keepdims = case
    for f in EXTREMA:
        check_rule(lambda x: f(x, axis=axis, keepdims=keepdims), x)


def test_ties_split_equally():
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]])
    assert np.array_equal(bytegrad.gradient(lambda x: np.max(x[0]), x)[0][0], [0, .5, .5, 0])
    g = bytegrad.gradient(lambda x: (np.amax(x, axis=1) * [1.0, 2.0]).sum(), x)[0]
    assert np.array_equal(g, [[0, .5, .5, 0], [.5, .5, .5, .5]])
    g = bytegrad.gradient(lambda x: x.min(axis=-1, keepdims=True).sum(), x)[0]
    assert np.array_equal(g, [[1, 0, 0, 0], [.25, .25, .25, .25]])
    g = bytegrad.gradient(lambda x: np.amin(x, axis=(0, 1)), np.array([[2.0, 1.0], [1.0, 1.0]]))[0]
    assert np.array_equal(g, [[0, 1 / 3], [1 / 3, 1 / 3]])
    g = bytegrad.gradient(lambda x: np.ptp(x, axis=1).sum(), x)[0]
    assert np.array_equal(g, [[-1, .5, .5, 0], [0, 0, 0, 0]])


def test_nan_maximum_routes_gradient_to_nan():
    g = bytegrad.gradient(lambda x: np.max(x), np.array([1.0, np.nan, 3.0]))[0]
    assert np.array_equal(g, [0, 1, 0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mean_of_a_whole_array_keeps_no_array(dtype):
    import gc
    import weakref
    a = np.arange(6.0).reshape(2, 3).astype(dtype)
    y, back = rule_for(np.mean)(a)
    gone = weakref.ref(a)
    del a
    gc.collect()
    assert gone() is None
    g = back(1.5)[1]
    assert type(g) is Fill  # (made dense where a pullback does not take it as it is)
    g = unwrap(g)
    assert g.dtype == dtype and g.shape == (2, 3) and np.all(g == dtype(0.25))


def test_a_large_fill_is_made_dense_in_the_cache_of_large_arrays():
    """(np.mean(np.tanh(x)) of a 512 x 512 x took a thousand page faults per gradient when
    its Fill was made dense by np.full.)"""
    import weakref
    f = rule_for(np.mean)(np.ones((256, 256)))[1](1.0)[1]
    g = unwrap(f)
    held = weakref.ref(g)
    del g
    assert held() is not None  # (the cache holds it for the next large gradient)


def test_whole_array_reductions_give_numpys_value_and_type():
    """A reduction of a whole plain array is computed by the ufunc's reduce (NumPy's
    wrapper without its dispatch): the same value and type, small ints widened by sum."""
    for x in (np.arange(5, dtype=np.int32), np.array([True, False, True]),
              np.arange(4, dtype=np.uint8), np.linspace(-1, 2, 7, dtype=np.float32),
              np.array(2.5), np.ones((2, 3))):
        for f in (np.sum, np.max, np.min):
            y, _ = rule_for(f)(x)
            assert type(y) is type(f(x)) and y == f(x), (f, x.dtype)
    with pytest.raises(ValueError):
        rule_for(np.max)(np.array([]))


def test_whole_extremum_of_one_maximum_and_of_ties():
    """``np.max(x)`` of a real array takes a short way when one element is the maximum
    (any dtype, any seed); ties, a NaN or a 0-d array take the general one."""
    x = np.array([[0.5, -2.0, 3.5], [1.0, 3.0, -0.25]])
    for dtype in (np.float64, np.float32):
        for dy in (2.5, -0.75):
            xd = x.astype(dtype)
            _, back = bytegrad.pullback(lambda x: np.max(x) * 1.0, xd)
            g = back(dy)[0]
            assert g.dtype == dtype and g.tolist() == [[0, 0, dy], [0, 0, 0]]
            _, back = bytegrad.pullback(lambda x: np.min(x) * 1.0, xd[0])
            assert back(dy)[0].tolist() == [0, dy, 0]
    tied = np.array([3.5, 1.0, 3.5])
    assert bytegrad.gradient(lambda x: np.max(x), tied)[0].tolist() == [0.5, 0, 0.5]
    g = bytegrad.gradient(lambda x: np.max(x), np.array([np.nan, 1.0]))[0]
    assert g.tolist() == [1, 0]
    g = bytegrad.gradient(lambda x: np.max(x), np.array(2.0))[0]
    assert type(g) is np.ndarray and g.shape == () and g == 1.0


def _exp(x):
    return np.exp(x)


def _log(x):
    return np.log(x)


@bytegrad.rule(_exp)
def _exp_rule(x):
    y = np.exp(x)
    return y, lambda d: (None, d * y)


@bytegrad.rule(_log)
def _log_rule(x):
    return np.log(x), lambda d: (None, d / x)


# np.exp and np.log themselves once their rules are loaded, else stand-ins with rules
EXP, LOG = (np.exp, np.log) if rule_for(np.exp) and rule_for(np.log) else (_exp, _log)


def test_logsumexp_gives_softmax():
    def lse(x):
        m = x.max()
        return m + LOG(EXP(x - m).sum())

    def lse_rows(x):
        m = np.max(x, axis=-1, keepdims=True)
        return (m + LOG(np.sum(EXP(x - m), axis=-1, keepdims=True))).sum()

    rng = np.random.default_rng(6)
    for x in (rng.standard_normal(7), np.array([2.0, 0.5, 2.0, -1.0]), np.full(3, 4.0)):
        g, = bytegrad.gradient(lse, x)
        p = np.exp(x - x.max())
        p /= p.sum()
        assert np.allclose(g, p, rtol=1e-14, atol=1e-16)
    x = rng.standard_normal((3, 5))
    x[1, 2] = x[1, 4] = 3.0
    g, = bytegrad.gradient(lse_rows, x)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    assert np.allclose(g, p, rtol=1e-14, atol=1e-16)


# --- prod, cumsum, cumprod, diff -------------------------------------------------

def _with_zeros(x, data):
    if x.size:
        idx = data.draw(st.lists(st.integers(0, x.size - 1), max_size=3))
        x = x.copy()
        x.flat[idx] = 0
    return x


@SETTINGS
@given(cases(), st.data())
def test_prod(case, data):
    x, axis, keepdims = case
    x = _with_zeros(x, data)
    check_rule(lambda x: np.prod(x, axis=axis, keepdims=keepdims), x)
    check_rule(lambda x: x.prod(axis=axis, keepdims=keepdims), x)


def test_prod_with_zeros_is_exact():
    x = np.array([2.0, 0.0, 3.0, 0.5])
    assert np.array_equal(bytegrad.gradient(np.prod, x)[0], [0, 3, 0, 0])
    x = np.array([[2.0, 0.0, 3.0, 0.0], [1.0, 2.0, 3.0, 4.0]])
    g = bytegrad.gradient(lambda x: np.prod(x, axis=1).sum(), x)[0]
    assert np.array_equal(g, [[0, 0, 0, 0], [24, 12, 8, 6]])
    assert np.array_equal(bytegrad.gradient(np.prod, np.zeros(2))[0], [0, 0])
    g = bytegrad.gradient(lambda x: np.prod(x, axis=0).sum(), np.array([[0.0, 2.0], [5.0, 0.0]]))[0]
    assert np.array_equal(g, [[5, 0], [0, 2]])


@SETTINGS
@given(cases(tuples=False), st.data())
def test_cumsum_cumprod(case, data):
    x, axis, _ = case
    check_rule(lambda x: np.cumsum(x, axis=axis), x)
    check_rule(lambda x: x.cumsum(axis), x)
    x = _with_zeros(x, data)
    check_rule(lambda x: np.cumprod(x, axis=axis), x)
    check_rule(lambda x: x.cumprod(axis=axis), x)


def _cumprod_grad(x, dy):
    """The gradient of <dy, cumprod(x)> along the last axis from the definition."""
    g = np.zeros_like(x)
    for j in range(x.shape[-1]):
        for i in range(j, x.shape[-1]):
            g[..., j] += dy[..., i] * np.prod(np.delete(x[..., :i + 1], j, axis=-1), axis=-1)
    return g


def test_cumprod_with_zeros_is_exact():
    rng = np.random.default_rng(7)
    for zeros in ([], [1], [0], [4], [1, 3], [0, 1, 4]):
        x = rng.standard_normal((2, 5))
        x[0, zeros] = 0
        dy = rng.standard_normal((2, 5))
        _, back = bytegrad.pullback(lambda x: np.cumprod(x, axis=1), x)
        assert np.allclose(back(dy)[0], _cumprod_grad(x, dy), rtol=1e-13, atol=0)
    x = np.array([0.0, 0.0, 2.0])
    assert np.array_equal(bytegrad.gradient(lambda x: np.cumprod(x).sum(), x)[0], [1, 0, 0])


@SETTINGS
@given(cases(min_ndim=1, tuples=False), st.integers(0, 3), st.data())
def test_diff(case, n, data):
    x, _, _ = case
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    check_rule(lambda x: np.diff(x, n, axis), x)
    check_rule(lambda x: np.diff(x, n=n, axis=axis) * 1.5, x)
    shape = list(x.shape)
    shape[axis] = 2
    p = np.ones(shape, x.dtype)
    check_rule(lambda x, p, q: np.diff(x, n=n, axis=axis, prepend=p, append=q), x, p, 0.5)
    check_rule(lambda x, p, q: np.diff(x, n, axis, p, q), x, p, 0.5)


def test_diff_values():
    g = bytegrad.gradient(lambda a, b, c: np.diff([a, b, c], prepend=0.5).sum() * a, 1.0, 2.0, 4.0)
    assert g == (4.0 - 0.5, 0.0, 1.0)  # (c - 0.5) * a
    g = bytegrad.gradient(lambda x: (np.diff(x) * [1.0, 2.0, 3.0]).sum(), np.zeros(4))[0]
    assert np.array_equal(g, [-1, -1, -1, 3])
    g = bytegrad.gradient(lambda x: np.diff(x, 2).sum(), np.zeros(5))[0]
    assert np.array_equal(g, [1, -1, 0, -1, 1])


# --- norm ------------------------------------------------------------------------

VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 3, 1.5, -1, 0.5, 0]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@SETTINGS
@given(st.sampled_from(VECTOR_ORDS), cases(min_ndim=1, tuples=False))
def test_vector_norms(ord, case):
    x, axis, keepdims = case
    if axis is None and x.ndim > 1:
        if ord is not None:
            return
    x = x + np.sign(x) * 0.1  # away from 0 for the orders below 1
    check_rule(lambda x: np.linalg.norm(x, ord, axis, keepdims), x)
    check_rule(lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), x)


@SETTINGS
@given(st.sampled_from(MATRIX_ORDS), st.integers(2, 3), st.integers(2, 3), st.integers(0, 2),
       st.booleans(), FLOATS, st.integers(0, 2 ** 16), st.data())
def test_matrix_norms(ord, m, n, batch, keepdims, dtype, seed, data):
    x = np.random.default_rng(seed).standard_normal((m, n) + (2,) * batch).astype(dtype)
    if batch == 0 and data.draw(st.booleans()):
        axis = None
    else:
        axis = tuple(data.draw(st.permutations(range(x.ndim)))[:2])
        axis = tuple(a - x.ndim if data.draw(st.booleans()) else a for a in axis)
    check_rule(lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), x)


@pytest.mark.regression
@SETTINGS
@given(st.one_of(st.floats(-3.0, -0.5), st.floats(0.5, 4.0)), cases(min_ndim=1, tuples=False),
       st.booleans())
def test_a_float_order_of_a_vector_norm_gets_its_gradient(p, case, by_name):
    """``np.linalg.norm(x, p)`` is differentiable in a float ``p`` (it was a silent None)."""
    x, axis, keepdims = case
    if axis is None and x.ndim > 1:
        axis = -1
    x = x + np.sign(x) * 0.1
    if by_name:
        check_rule(lambda x, p: np.linalg.norm(x, ord=p, axis=axis, keepdims=keepdims), x, p)
    else:
        check_rule(lambda x, p: np.linalg.norm(x, p, axis, keepdims), x, p)


def test_norm_values():
    g = bytegrad.gradient(lambda x: np.linalg.norm(x), np.array([3.0, -4.0]))[0]
    assert np.allclose(g, [0.6, -0.8])
    assert np.array_equal(bytegrad.gradient(np.linalg.norm, np.zeros(3))[0], np.zeros(3))
    g = bytegrad.gradient(lambda x: np.linalg.norm(x, np.inf), np.array([1.0, -3.0, 3.0]))[0]
    assert np.array_equal(g, [0, -.5, .5])
    g = bytegrad.gradient(lambda x: np.linalg.norm(x, 1), np.array([1.0, 0.0, -2.0]))[0]
    assert np.array_equal(g, [1, 0, -1])
    a = np.diag([3.0, 2.0, 1.0])
    g = bytegrad.gradient(lambda a: np.linalg.norm(a, 2), a)[0]
    assert np.allclose(g, np.diag([1.0, 0, 0]))
    g = bytegrad.gradient(lambda a: np.linalg.norm(a, -2), a)[0]
    assert np.allclose(g, np.diag([0, 0, 1.0]))
    assert np.allclose(bytegrad.gradient(lambda a: np.linalg.norm(a, "nuc"), a)[0], np.eye(3))
    g = bytegrad.gradient(lambda a: np.linalg.norm(a, 1), np.array([[1.0, -2.0], [1.0, 0.0]]))[0]
    assert np.array_equal(g, [[.5, -.5], [.5, 0]])  # tied column sums share


# --- complex ---------------------------------------------------------------------

def test_complex():
    rng = np.random.default_rng(8)
    z = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    check_rule(lambda z: np.sum(z, axis=1), z)
    check_rule(lambda z: z.mean(axis=(0, 1), keepdims=True), z)
    check_rule(lambda z: np.var(z, axis=0, ddof=1), z)
    check_rule(lambda z: z.std(axis=-1), z)
    check_rule(lambda z: np.prod(z, axis=1), z)
    z0 = z.copy()
    z0[1, 2] = 0
    check_rule(lambda z: np.prod(z, axis=1), z0)
    check_rule(lambda z: np.cumsum(z, axis=0), z)
    check_rule(lambda z: np.cumprod(z, axis=1), z)
    check_rule(lambda z: np.cumprod(z, axis=1), z0)
    check_rule(lambda z: np.diff(z, 2, axis=1), z)
    for ord in (None, 1, 3, np.inf):
        check_rule(lambda z: np.linalg.norm(z, ord, axis=1), z)
    for ord in ("fro", "nuc", 2, -2, 1, np.inf):
        check_rule(lambda z: np.linalg.norm(z, ord), z)
    check_rule(lambda z: np.sum(z, axis=0), z.astype(np.complex64))
    check_rule(lambda z: np.max(z, axis=1) + z.min(), z)  # lexicographic order
    check_rule(lambda z: np.prod(z, axis=0), z.astype(np.complex64))


# ---------------------------------------------------------------------------
# np.mean of the whole array
def test_mean_of_a_whole_array_is_numpys_value_exactly():
    """The rule computes a float64 array's mean itself (NumPy's sum, then the division by
    the count), without np.mean's Python layers: the same number and type, to the bit."""
    rng = np.random.default_rng(7)
    for x in (rng.standard_normal(1), 1e8 * rng.standard_normal(10_001), np.array(2.5),
              rng.standard_normal((6, 7))[::2, 1:], rng.standard_normal((5, 9)).T,
              np.array([1e308, 1e308]), np.array([np.inf, -np.inf]), np.array([1.0, np.nan])):
        with np.errstate(over="ignore", invalid="ignore"):
            y, _ = rule_for(np.mean)(x)
            want = np.mean(x)
        assert type(y) is type(want) and (y == want or np.isnan(y) and np.isnan(want)), (x, y, want)


# ---------------------------------------------------------------------------

@pytest.mark.regression
def test_mean_whole_array_path():
    x = arr((3, 4), seed=1)
    check_grad(lambda x: np.mean(x) ** 2, x)
    check_grad(lambda x: x.mean() ** 2, x)
    check_grad(lambda x: np.abs(np.mean(x)) ** 2, arr((3, 4), complex, 2))
    assert bytegrad.gradient(lambda x: np.mean(x) ** 2, x.astype(np.float32))[0].dtype == np.float32
    assert bytegrad.gradient(lambda x: np.mean(x) ** 2, np.array(3.0))[0] == 6.0
    assert bytegrad.gradient(lambda x: np.mean(x) * 2, np.float64(3.0))[0] == 2.0
    assert bytegrad.gradient(lambda s: np.mean([s, 2 * s, 1.0]), 2.0)[0] == 1.0
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        assert bytegrad.gradient(lambda x: np.mean(x), np.zeros((0, 3)))[0].shape == (0, 3)
    big = arr((256, 256), seed=3)
    g = bytegrad.gradient(lambda x: np.mean(x) * 2 + np.mean(x * x) + np.sum(x), big)[0]
    assert np.allclose(g, 2 / big.size + 2 * big / big.size + 1)


def _centred_square(x, c):
    y = x - c
    return np.mean(y ** 2)


def _squared_then_changed(x):
    y = x ** 2
    y += x  # (in place: the Fill of np.mean reaches a pullback through the shadow)
    return np.mean(y)


def test_mean_of_a_square_takes_its_fill():
    """``np.mean(a ** 2)`` hands ``a ** 2``'s pullback a `Fill`, which it takes as
    ``2 a d`` in one pass for a real float ``a``; every other power, dtype or consumer
    gets it dense."""
    x, c = arr((4, 5), seed=4), arr((5,), seed=5)
    check_grad(lambda x: np.mean(x ** 2), x)
    check_grad(_centred_square, x, c)  # (broadcast in the operand, summed back for c)
    check_grad(lambda x: np.mean(x ** 3) + x.mean() ** 2, x)  # (other powers: dense)
    check_grad(lambda x, p: np.mean(x ** p), np.abs(x) + 0.5, 2.0)  # (a float exponent's gradient)
    check_grad(lambda x: np.mean(x ** 2) + np.mean(np.tanh(x)) + np.mean(x), x)
    check_grad(_squared_then_changed, x)
    check_grad(lambda z: np.abs(np.mean(z ** 2)) ** 2, arr((3, 2), complex, 6))
    g = bytegrad.gradient(lambda x: np.mean(x ** 2), x.astype(np.float32))[0]
    assert g.dtype == np.float32 and np.allclose(g, 2 * x / x.size, rtol=1e-6)
    assert g.flags.writeable
    assert bytegrad.gradient(lambda x: np.mean(x ** 2), np.arange(6).reshape(2, 3))[0] is None
    assert np.array_equal(bytegrad.gradient(lambda x: (x ** 2)[1, 2], x)[0],
                          np.where(np.arange(x.size).reshape(x.shape) == 7, 2 * x, 0))


# -- the nan* reductions --------------------------------------------------------

_WITH_NAN = arr((3, 4), seed=11)
_WITH_NAN[0, 1] = _WITH_NAN[2, 3] = _WITH_NAN[1, 2] = np.nan


@pytest.mark.parametrize("f", [np.nansum, np.nanprod, np.nanmax, np.nanmin, np.nanmean, np.nanvar,
                               np.nanstd, np.nancumsum, np.nancumprod])
def test_nan_reductions_ignore_nans(f):
    cumulative = f in (np.nancumsum, np.nancumprod)
    for kw in ({}, {"axis": 0}, {"axis": -1} if cumulative else {"axis": 1, "keepdims": True}):
        g = check_rule(f, _WITH_NAN, kw=kw)[0]
        assert np.all(g[np.isnan(_WITH_NAN)] == 0)
    check_rule(f, _WITH_NAN.astype(np.float32), kw={"axis": 1})


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_nan_reductions_closed_forms_and_keywords():
    x = np.array([1.0, np.nan, 3.0, 2.0])
    assert np.array_equal(bytegrad.gradient(np.nanmean, x)[0], [1 / 3, 0, 1 / 3, 1 / 3])
    assert np.array_equal(bytegrad.gradient(np.nanprod, x)[0], [6, 0, 2, 3])
    assert np.array_equal(bytegrad.gradient(np.nanmax, x)[0], [0, 0, 1, 0])
    check_rule(lambda x: np.nanvar(x, axis=1, ddof=1), _WITH_NAN)
    check_rule(lambda x, m: np.nanvar(x, mean=m), x, 0.5)
    check_rule(lambda x, i: np.nansum(x, initial=i), x, 0.5)
    assert bytegrad.gradient(lambda x: np.nansum(x, where=[True, True, False, True]), x)[0][2] == 0
    assert bytegrad.gradient(lambda x: np.nanmax(x), np.array([np.nan, np.nan]))[0] is not None
