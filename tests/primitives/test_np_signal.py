"""Rules of np.convolve, np.correlate and np.interp (primitives/np_signal.py), checked with
`bytegrad.testing.check_rule` (value, dot-product test against finite differences,
repeatable pullback, untouched inputs, gradient shape and dtype)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
import bytegrad.primitives.np_signal  # noqa: F401  (registers the rules)
from bytegrad.testing import check_rule

SETTINGS = settings(max_examples=25, deadline=None)
DTYPES = st.sampled_from([np.float64, np.float32, np.complex128])
MODES = st.sampled_from(["full", "same", "valid"])


def rand(rng, n, dtype):
    x = rng.standard_normal(n)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(n)
    return x.astype(dtype)


def grad_of(f, *args, d=None):
    y, back = bytegrad.pullback(f, *args)
    return back(np.ones_like(y) if d is None else d)


# -- convolve, correlate ----------------------------------------------------------

@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_and_correlate_at_every_pair_of_lengths(mode):
    """Either input the longer one: NumPy swaps them, and for correlate's mode same that
    moves the window when the shorter length is even."""
    rng = np.random.default_rng(0)
    kinds = [np.float64, np.complex128, np.float32]
    for n in range(1, 7):
        for m in range(1, 7):
            dtype = kinds[(n + m) % 3]
            a, v = rand(rng, n, dtype), rand(rng, m, dtype)
            check_rule(lambda a, v: np.convolve(a, v, mode), a, v)
            check_rule(lambda a, v: np.correlate(a, v, mode=mode), a, v)


@SETTINGS
@given(n=st.integers(1, 9), m=st.integers(1, 9), mode=MODES, dtype=DTYPES, seed=st.integers(0, 2 ** 16))
def test_convolve_and_correlate(n, m, mode, dtype, seed):
    rng = np.random.default_rng(seed)
    a, v = rand(rng, n, dtype), rand(rng, m, dtype)
    for f in (np.convolve, np.correlate):
        check_rule(lambda a, v: f(a, v, mode), a, v)
    check_rule(lambda a: np.correlate(a, a, mode), a)
    check_rule(lambda a, v: np.convolve(a, v, mode) * np.correlate(v, a, mode)[::-1], a, v)


def test_convolution_gradient_values():
    a, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, 10.0])
    ga, gv = grad_of(lambda a, v: np.convolve(a, v), a, v)
    assert ga.tolist() == [11, 11, 11] and gv.tolist() == [6, 6]
    ga, gv = grad_of(lambda a, v: np.convolve(a, v, "valid"), a, v)  # y = [a0 v1 + a1 v0, a1 v1 + a2 v0]
    assert ga.tolist() == [10, 11, 1] and gv.tolist() == [5, 3]
    ga, gv = grad_of(lambda a, v: np.correlate(a, v), a, v)  # y = [a0 v0 + a1 v1, a1 v0 + a2 v1]
    assert ga.tolist() == [1, 11, 10] and gv.tolist() == [3, 5]
    # NumPy conjugates v: with v imaginary, Re(sum y) does not change with a, and changes
    # with the real parts of v as it did
    ga, gv = grad_of(lambda a, v: np.correlate(a, v), a, 1j * v)
    assert ga.tolist() == [0, 0, 0] and gv.tolist() == [3, 5]


def test_convolve_scalars_lists_ints_and_float32():
    check_rule(lambda a, v: np.convolve(a, v), [1.0, 2.0, 3.0], 2.0)
    check_rule(lambda a, v: np.correlate(a, v, "same"), [0.5], [1.0, -2.0])
    ga, gv = grad_of(lambda a, v: np.convolve(a, v), np.arange(3), np.ones(2, np.float32))
    assert ga is None and gv.dtype == np.float32 and gv.tolist() == [3, 3]
    assert grad_of(lambda a, v: np.convolve(a, v) * 1.0, np.arange(3), np.arange(2)) == (None, None)


def test_convolve_errors_name_the_argument():
    x = np.ones(3)
    with pytest.raises(ValueError, match="mode"):
        bytegrad.gradient(lambda x: np.convolve(x, x, "middle").sum(), x)
    with pytest.raises(TypeError, match=r"np.correlate\(\): .*unexpected keyword argument 'modes'"):
        bytegrad.gradient(lambda x: np.correlate(x, x, modes="full").sum(), x)


# -- interp -----------------------------------------------------------------------

@st.composite
def interp_cases(draw):
    """Knots ``xp`` (increasing by at least 0.5), values ``fp`` and points ``x`` inside
    intervals (at least a tenth of a step from their ends) or well outside, so that finite
    differences of single precision do not cross a knot."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    n = draw(st.integers(1, 6))
    xp = np.cumsum(rng.uniform(0.5, 2.0, n)) - 3.0
    fp = rand(rng, n, draw(DTYPES))
    k = draw(st.integers(1, 8))
    if n > 1:
        j = rng.integers(0, n - 1, k)
        x = xp[j] + rng.uniform(0.1, 0.9, k) * (xp[j + 1] - xp[j])
    else:
        x = np.zeros(0)
    outside = rng.uniform(0.5, 2.0, 2) * [-1, 1] + [xp[0], xp[-1]]
    x = rng.permutation(np.concatenate([x, outside[:draw(st.integers(0, 2))]]))
    return x.reshape(draw(st.sampled_from([(-1,), (1, -1)]))), xp, fp


@SETTINGS
@given(interp_cases())
def test_interp(case):
    x, xp, fp = case
    check_rule(lambda x, xp, fp: np.interp(x, xp, fp), x, xp, fp)
    check_rule(lambda x, xp, fp, lo, hi: np.interp(x, xp, fp, lo, hi), x, xp, fp, 0.25, -1.5)
    check_rule(lambda x, xp, fp, hi: np.interp(x, xp, fp, right=hi), x, xp, fp, 2.0)
    check_rule(lambda x, xp, fp: np.interp(x=x, xp=xp, fp=fp, left=0.0), x, xp, fp)


@st.composite
def periodic_cases(draw):
    """Like `interp_cases` for ``period=p``: the knots, reduced modulo p, are at least a
    tenth of p apart (the wrapped ones too); ``x`` and ``xp`` lie in several periods."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    p = draw(st.sampled_from([1.0, 2.5, 7.0]))
    n = draw(st.integers(1, 5))
    cuts = np.sort(rng.choice(np.arange(10) / 10, n, replace=False)) + 0.05
    xp = (cuts + rng.integers(-2, 3, n)) * p
    gaps = np.diff(np.concatenate([cuts, cuts[:1] + 1]))  # the last interval wraps around
    j = rng.integers(0, n, 6)
    x = (cuts[j] + rng.uniform(0.02, 0.08, 6) * gaps[j] / 0.1 + rng.integers(-2, 3, 6)) * p
    fp = rand(rng, n, draw(DTYPES))
    return x, rng.permutation(xp), fp, p * draw(st.sampled_from([1, -1]))


@SETTINGS
@given(periodic_cases())
def test_interp_periodic(case):
    x, xp, fp, p = case
    y = np.interp(x, xp, fp, period=p)
    assert np.all(np.isfinite(y))
    check_rule(lambda x, xp, fp, p: np.interp(x, xp, fp, period=p), x, xp, fp, p)
    check_rule(lambda x, xp, fp, p: np.interp(x, xp, fp, None, None, p), x, xp, fp, p)


def test_interp_gradient_values():
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 3.0])
    x = np.array([0.5, 2.0, -1.0, 4.0])
    gx, gxp, gfp = grad_of(lambda x, xp, fp: np.interp(x, xp, fp), x, xp, fp)
    assert gx.tolist() == [2, 0.5, 0, 0]
    assert gfp.tolist() == [0.5 + 1, 0.5 + 0.5, 0.5 + 1]  # x = -1 and 4 take fp[0] and fp[-1]
    assert gxp.tolist() == [-2 * 0.5, -2 * 0.5 - 0.5 * 0.5, -0.5 * 0.5]
    # at a knot the right-hand derivatives; at xp[-1] the value is fp[-1], and x, xp get none
    gx, gxp, gfp = grad_of(lambda x, xp, fp: np.interp(x, xp, fp), np.array([1.0, 3.0]), xp, fp)
    assert gx.tolist() == [0.5, 0] and gxp.tolist() == [0, -0.5, 0] and gfp.tolist() == [0, 1, 1]
    # left and right, given, take the gradient outside
    gx, gxp, gfp, gl, gr = grad_of(lambda x, xp, fp, l, r: np.interp(x, xp, fp, l, r), x, xp, fp, 9.0, 9.0)
    assert gfp.tolist() == [0.5, 1.0, 0.5] and gl == 1 and gr == 1
    # a NaN point: NaN out, no gradient
    y, back = bytegrad.pullback(lambda x, fp: np.interp(x, xp, fp), np.array([np.nan, 0.5]), fp)
    assert np.isnan(y[0])
    gx, gfp = back(np.ones(2))
    assert gx.tolist() == [0, 2] and gfp.tolist() == [0.5, 0.5, 0]


def test_interp_scalars_lists_ints_complex_and_float32():
    xp, fp = [0.0, 1.0, 2.0], np.array([1.0, -1.0, 0.5], np.float32)
    check_rule(lambda x, xp, fp: np.interp(x, xp, fp), 0.3, xp, fp)
    gx, gxp, gfp = grad_of(lambda x, xp, fp: np.interp(x, xp, fp), np.float32(0.3), xp, fp)
    assert type(gx) is np.float32 and type(gxp) is list and gfp.dtype == np.float32
    gx, gxp, gfp = grad_of(lambda x, xp, fp: np.interp(x, xp, fp), [0.5, 1.5], np.arange(3), fp)
    assert gxp is None and gx == [-2.0, 1.5]
    assert grad_of(lambda x: np.interp(x, xp, fp), 1)[0] is None
    fc = np.array([1.0, 2j, 0.5])
    check_rule(lambda x, xp, fp, lo: np.interp(x, xp, fp, left=lo), np.array([-1.0, 0.3, 1.7]), xp, fc, 2j)
    gx, = grad_of(lambda x: np.interp(x, xp, fc), np.array([0.5]), d=np.array([1j]))
    assert gx.dtype == np.float64 and gx.tolist() == [2.0]  # Re(conj(slope) dy), slope = 2j - 1


def test_interp_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"np.interp\(\): .*unexpected keyword argument 'extrapolate'"):
        bytegrad.gradient(lambda fp: np.interp(0.5, [0.0, 1.0], fp, extrapolate=True), np.ones(2))
    with pytest.raises(ValueError, match="period"):
        bytegrad.gradient(lambda fp: np.interp(0.5, [0.0, 1.0], fp, period=0.0), np.ones(2))
