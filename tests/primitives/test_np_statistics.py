"""Rules of np.cov and np.corrcoef (primitives/np_statistics.py), checked with
`bytegrad.testing.check_rule` (value, dot-product test against finite differences,
repeatable pullback, untouched inputs, gradient shape and dtype)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
import bytegrad.primitives.np_statistics  # noqa: F401  (registers the rules)
from bytegrad.testing import check_rule

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
