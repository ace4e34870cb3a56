"""Rules of np.cov and np.corrcoef (primitives/np_statistics.py), checked with
`bytegrad.testing.check_rule` (value, dot-product test against finite differences,
repeatable pullback, untouched inputs, gradient shape and dtype)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
import bytegrad.primitives.np_statistics  # noqa: F401  (registers the rules)
from bytegrad.testing import check_rule
from checks import arr, check_grad

SETTINGS = settings(max_examples=25, deadline=None)
DTYPES = st.sampled_from([np.float64, np.float32, np.complex128])


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def grad_of(f, *args):
    y, back = bytegrad.pullback(f, *args)
    return back(np.ones_like(y))


@st.composite
def samples(draw):
    """``m`` (and sometimes ``y``) as np.cov reads them: k variables of n observations,
    one per row or (``rowvar=False``) per column; a single variable may be 1-D."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    dtype = draw(DTYPES)
    rowvar = draw(st.booleans())
    n = draw(st.integers(3, 6))

    def variables():
        k = draw(st.integers(1, 3))
        if k == 1 and draw(st.booleans()):
            return rand(rng, n, dtype)
        x = rand(rng, (k, n), dtype)
        return x if rowvar else x.T
    m = variables()
    y = variables() if draw(st.booleans()) else None
    return m, y, rowvar, n


@SETTINGS
@given(samples(), st.sampled_from([None, 0, 1, 2]), st.booleans())
def test_cov(case, ddof, bias):
    m, y, rowvar, n = case
    if y is None:
        check_rule(lambda m: np.cov(m, rowvar=rowvar, bias=bias, ddof=ddof), m)
        check_rule(lambda m: np.cov(m, None, rowvar, bias, ddof), m)
    else:
        check_rule(lambda m, y: np.cov(m, y, rowvar=rowvar, bias=bias, ddof=ddof), m, y)
        check_rule(lambda m, y: np.cov(m, y=y, rowvar=rowvar), m, y)


@SETTINGS
@given(samples())
def test_corrcoef(case):
    m, y, rowvar, n = case
    if y is None:
        check_rule(lambda m: np.corrcoef(m, rowvar=rowvar), m)
    else:
        check_rule(lambda m, y: np.corrcoef(m, y, rowvar), m, y)
        check_rule(lambda m, y: np.corrcoef(m, y=y, rowvar=rowvar)[0] * 2.0, m, y)


@SETTINGS
@given(st.integers(0, 2 ** 16), st.sampled_from([None, 0, 1, 2]), st.booleans(), st.booleans())
def test_cov_weights(seed, ddof, with_f, complex_):
    """aweights get a gradient, through the weighted means, the sum and the normalisation;
    fweights are integers and get none."""
    rng = np.random.default_rng(seed)
    m = rand(rng, (3, 6), np.complex128 if complex_ else np.float64)
    f = rng.integers(1, 4, 6) if with_f else None
    a = rng.uniform(0.5, 2.0, 6)
    check_rule(lambda m, a: np.cov(m, fweights=f, aweights=a, ddof=ddof), m, a)
    check_rule(lambda m, a: np.cov(m[0], m[1:].T, False, False, ddof, f, a), m, a)
    check_rule(lambda m: np.cov(m, ddof=ddof, fweights=f), m)
    g = grad_of(lambda m, f: np.cov(m, fweights=f), m.real, rng.integers(1, 4, 6))
    assert g[1] is None


def test_cov_of_one_variable_is_its_variance():
    x = np.array([1.0, 4.0, 2.0, 8.0])
    for ddof, bias in ((None, False), (None, True), (2, False)):
        got = bytegrad.gradient(lambda x: np.cov(x, bias=bias, ddof=ddof) * 1.0, x)[0]
        d = (0 if bias else 1) if ddof is None else ddof
        assert np.allclose(got, 2 * (x - x.mean()) / (len(x) - d))


def test_corrcoef_of_a_variable_with_itself_is_constant():
    rng = np.random.default_rng(1)
    m = rng.standard_normal((3, 5))
    g = bytegrad.gradient(lambda m: np.trace(np.corrcoef(m)), m)[0]
    assert np.all(g == 0)  # the unit diagonal
    assert bytegrad.gradient(lambda x: np.corrcoef(x) * 1.0, m[0])[0] is None  # one variable: 1
    g = bytegrad.gradient(lambda x, y: np.corrcoef(x, y)[0, 1], m[0], 3.0 * m[0] + 1.0)
    assert np.allclose(g[0], 0, atol=1e-7) and np.allclose(g[1], 0, atol=1e-7)  # at its maximum


def test_dtypes_lists_and_ints():
    rng = np.random.default_rng(2)
    m32 = rng.standard_normal((2, 4)).astype(np.float32)
    g = grad_of(lambda m: np.cov(m), m32)[0]
    assert g.dtype == np.float32
    check_rule(lambda m: np.cov(m, dtype=np.float32), rng.standard_normal((2, 4)))
    check_rule(lambda m: np.corrcoef(m, dtype=np.float64), m32)
    check_rule(lambda m: np.cov(m), [[1.0, 2.5, 0.5], [0.25, 2.0, -1.0]])
    check_rule(lambda m, y: np.corrcoef(m, y), [1.0, 2.5, 0.5], [0.25, 2.0, -1.0])
    assert grad_of(lambda m: np.cov(m) * 1.0, np.arange(6).reshape(2, 3)) == (None,)
    assert grad_of(lambda m, y: np.cov(m, y), np.arange(3), rng.standard_normal(3))[0] is None


def test_errors_name_the_argument():
    m = np.ones((2, 3))
    with pytest.raises(TypeError, match=r"np.cov\(\): .*unexpected keyword argument 'weights'"):
        bytegrad.gradient(lambda m: np.cov(m, weights=np.ones(3)).sum(), m)
    with pytest.raises(TypeError, match=r"np.corrcoef\(\): .*unexpected keyword argument 'ddof'"):
        bytegrad.gradient(lambda m: np.corrcoef(m, ddof=1).sum(), m)
    with pytest.raises(TypeError, match="fweights must be integer"):
        bytegrad.gradient(lambda m: np.cov(m, fweights=[1.5, 1.0, 1.0]).sum(), m)


# ---------------------------------------------------------------------------
# cov and corrcoef: every spelling of the arguments, complex, float32, int
# ---------------------------------------------------------------------------

# -- np.cov / np.corrcoef

_CX, _CY = arr((3, 5), seed=1), arr((2, 5), seed=2)
_AW = np.array([0.5, 1.5, 0.7, 1.2, 2.0])
_FW = np.array([1, 2, 1, 3, 1])


def _wsum(shape, seed=7):
    w = arr(shape, seed=seed)
    return lambda c: np.sum(w * c)


@pytest.mark.regression
def test_cov_variants():
    w3, w5, w4 = _wsum((3, 3)), _wsum((5, 5)), _wsum((4, 4))
    check_grad(lambda X: w3(np.cov(X)), _CX)
    check_grad(lambda X: w5(np.cov(X, rowvar=False)), _CX)
    check_grad(lambda X, Y: w5(np.cov(X, Y)), _CX, _CY)
    check_grad(lambda X, y: w4(np.cov(X, y)), _CX, _CY[0])
    check_grad(lambda x, Y: w3(np.cov(x, Y, rowvar=False)), _CX[0], _CY.T)
    check_grad(lambda x, y: w4(np.cov(x, y, rowvar=False)), _CX.T, _CY[:1])
    check_grad(lambda X: w3(np.cov(X, bias=True)), _CX)
    check_grad(lambda X: w3(np.cov(X, ddof=3)), _CX)
    check_grad(lambda X: w3(np.cov(X, fweights=_FW)), _CX)
    check_grad(lambda X, aw: w3(np.cov(X, aweights=aw)), _CX, _AW)
    check_grad(lambda X, aw: w3(np.cov(X, fweights=_FW, aweights=aw)), _CX, _AW)
    check_grad(lambda X, aw: w3(np.cov(X, fweights=_FW, aweights=aw, ddof=0)), _CX, _AW)
    check_grad(lambda X, aw: w3(np.cov(X, None, True, False, 2, _FW, aw)), _CX, _AW)
    check_grad(lambda X, aw: w3(np.cov(m=X, aweights=aw)), _CX, _AW)
    check_grad(lambda x: np.cov(x) * 3, _CX[0])
    check_grad(lambda s: np.sum(np.cov([[s, 2.0, 3 * s], [1.0, s * s, 0.5]])), 0.7)
    check_grad(lambda X: np.sum((np.cov(X @ arr((5, 5), seed=4)) - np.eye(3)) ** 2), _CX)


@pytest.mark.regression
def test_cov_complex_float32_int():
    Xc = arr((3, 5), complex, 5)
    w3 = arr((3, 3), seed=3)
    check_grad(lambda X: np.sum(np.abs(w3 * np.cov(X)) ** 2), Xc)
    check_grad(lambda X, aw: np.sum(np.abs(w3 * np.cov(X, aweights=aw)) ** 2), Xc, _AW)
    assert bytegrad.gradient(lambda x: np.sum(np.cov(x)), _CX.astype(np.float32))[0].dtype == np.float32
    g = bytegrad.gradient(lambda x, y: np.sum(np.cov(x, y)), np.arange(4), _CY[0, :4])
    assert g[0] is None and g[1].shape == (4,)


@pytest.mark.regression
def test_corrcoef_variants():
    check_grad(lambda X: np.sum(arr((3, 3), seed=3) * np.corrcoef(X)), _CX)
    check_grad(lambda X, Y: np.sum(arr((5, 5), seed=7) * np.corrcoef(X, Y)), _CX, _CY)
    check_grad(lambda X: np.sum(arr((5, 5), seed=4) * np.corrcoef(X, rowvar=False)), _CX)
    check_grad(lambda x, y: np.corrcoef(x, y)[0, 1], _CX[0], _CX[1])
    check_grad(lambda x, y: np.corrcoef(x=x, y=y)[0, 1], _CX[0], _CX[1])
    check_grad(lambda X: np.sum(np.triu(np.corrcoef(X), 1) ** 2), _CX)
    Xc = arr((3, 5), complex, 5)
    check_grad(lambda X: np.sum(np.abs(arr((3, 3), seed=3) * np.corrcoef(X)) ** 2), Xc)
    assert bytegrad.gradient(lambda x: np.corrcoef(x) * 2.0, _CX[0]) == (None,)


_XP = np.array([0.0, 0.5, 1.3, 2.0, 3.1])
_FP = np.array([1.0, -0.5, 2.0, 0.3, 1.1])


@pytest.mark.regression
def test_by_name_refuses_unknown_keywords_clearly():
    with pytest.raises(TypeError, match=r"np\.interp\(\).*lft"):
        bytegrad.gradient(lambda x: np.interp(x, _XP, _FP, lft=1.0), 0.3)
    with pytest.raises(TypeError, match=r"np\.cov\(\).*weights"):
        bytegrad.gradient(lambda X: np.sum(np.cov(X, weights=_AW)), _CX)


# -- median, percentile, quantile and their nan* forms ------------------------------

METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation",
           "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
           "normal_unbiased", "lower", "higher", "midpoint", "nearest"]
_Q = np.array([0.13, 0.43, 0.77])  # away from the kinks and jumps of n = 3 and 5


@pytest.mark.parametrize("method", METHODS)
def test_quantile_every_method_in_the_data_and_in_q(method):
    x = arr((3, 5), seed=2)
    check_rule(lambda x, q: np.quantile(x, q, axis=1, method=method), x, _Q)
    check_rule(lambda x, q: np.percentile(x, q, axis=0, method=method, keepdims=True), x, _Q * 100)


def test_median_and_quantile_closed_forms():
    x = np.array([3.0, 1.0, 2.0, 5.0])
    assert np.array_equal(bytegrad.gradient(np.median, x)[0], [0.5, 0, 0.5, 0])
    g = bytegrad.gradient(lambda x, q: np.quantile(x, q), x, 0.5)
    assert np.array_equal(g[0], [0.5, 0, 0.5, 0]) and g[1] == 3 * (3 - 2)  # (n - 1) (s[2] - s[1])
    x = arr((2, 3, 4), seed=3)
    for kw in ({}, {"axis": 1}, {"axis": (0, 2), "keepdims": True}, {"axis": -1}):
        check_rule(np.median, x, kw=kw)
    check_rule(np.median, x.astype(np.float32), kw={"axis": 0})


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_nan_quantiles_skip_nans():
    x = arr((3, 5), seed=4)
    x[0, 1] = np.nan
    x[2, 2:] = np.nan
    check_rule(lambda x: np.nanmedian(x, axis=1), x)
    g, = bytegrad.gradient(lambda x: np.sum(np.nanmedian(x, axis=1)), x)
    assert np.all(g[np.isnan(x)] == 0) and np.allclose(g.sum(axis=1), 1)
    check_rule(lambda x, q: np.nanquantile(x, q, axis=1, method="weibull"), x, _Q)
    check_rule(np.nanpercentile, x, 33.0)
    check_rule(np.nanmedian, x)
    x[1] = np.nan  # an all-NaN slice: NaN, and no gradient
    g, = bytegrad.gradient(lambda x: np.nansum(np.nanmedian(x, axis=1)), x)
    assert np.array_equal(g[1], np.zeros(5)) and np.allclose(g.sum(axis=1), [1, 0, 1])


def test_quantile_weights_choose_an_order_statistic():
    x, w = arr((3, 5), seed=5), np.linspace(0.5, 2.0, 5)
    # the weights (and q) only choose which element: finite differences show no gradient
    check_rule(lambda x, w, q: np.quantile(x, q, axis=1, weights=w, method="inverted_cdf"), x, w, _Q)
    check_rule(lambda x, w: np.percentile(x, 43.0, axis=0, weights=w, method="inverted_cdf"),
               x, w[:3].copy())
    check_rule(lambda x, w: np.quantile(x, _Q, weights=w, method="inverted_cdf"), x, x ** 2 + 0.5)
    x[0, 1] = np.nan
    check_rule(lambda x, w: np.nanquantile(x, _Q, 1, weights=w, method="inverted_cdf"), x,
               np.broadcast_to(w, x.shape).copy())  # (NumPy 2.4 fails on 1-D weights here)
    g = bytegrad.gradient(lambda x, w: np.quantile(x, 0.5, weights=w, method="inverted_cdf"),
                          np.array([3.0, 1.0, 2.0]), np.array([1.0, 1.0, 5.0]))
    assert np.array_equal(g[0], [0, 0, 1]) and g[1] is None  # 2.0 holds most of the weight


def test_quantile_refusals():
    x = arr(4, seed=5)
    with pytest.raises(TypeError, match="np.median: an output array given positionally"):
        bytegrad.gradient(lambda x: np.median(x, None, np.empty(())), x)


def test_average():
    x, w, W = arr((5, 6), seed=6), np.linspace(0.5, 2, 6), arr((5, 6), seed=7) ** 2 + 0.5
    check_rule(np.average, x)
    check_rule(lambda a, w: np.average(a, 1, w), x, w)
    check_rule(lambda a, w: np.average(a, 0, w, True), x, w[:5].copy())
    check_rule(lambda a, w: np.average(a, None, w, returned=True), x, W)
    check_rule(lambda a, w: np.average(a, (0, 1), w, keepdims=True), x, W.astype(np.float32))
    g = bytegrad.gradient(lambda a, w: np.average(a, weights=w), np.array([1.0, 3.0]),
                          np.array([1.0, 3.0]))
    assert np.array_equal(g[0], [0.25, 0.75]) and np.array_equal(g[1], [-0.375, 0.125])
