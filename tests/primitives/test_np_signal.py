"""Rules of np.convolve, np.correlate and np.interp (primitives/np_signal.py), checked with
`bytegrad.testing.check_rule` (value, dot-product test against finite differences,
repeatable pullback, untouched inputs, gradient shape and dtype)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
import bytegrad.primitives.np_signal  # noqa: F401  (registers the rules)
from bytegrad.testing import check_rule
from checks import arr, check_grad, check_stateful, fd_gradient

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


# ---------------------------------------------------------------------------
# convolve, correlate and interp: keywords, complex, float32, loops, checkpoint, mutation
# ---------------------------------------------------------------------------

# -- np.convolve / np.correlate

@pytest.mark.regression
@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", [(1, 1), (1, 4), (4, 1), (2, 5), (5, 2), (3, 3), (6, 4), (4, 6)])
def test_convolve_correlate_real_and_complex(fn, mode, n, m):
    for ca, cv in ((False, False), (True, True), (False, True)):
        a = arr(n, complex if ca else float, n)
        v = arr(m, complex if cv else float, 10 + m)
        wt = arr(len(fn(a, v, mode)), complex, 99)
        check_grad(lambda a, v: np.sum(np.abs(wt * fn(a, v, mode) + 0.3) ** 2), a, v)


@pytest.mark.regression
def test_convolve_keywords_scalars_lists_float32_int():
    a, v = arr(7, seed=1), arr(4, seed=2)
    check_grad(lambda a, v: np.sum(np.convolve(v=a, a=v, mode="same") ** 2), a, v)
    check_grad(lambda a, v: np.sum(np.correlate(a, v=v, mode="full") ** 2), a, v)
    check_grad(lambda s, v: np.sum(np.convolve(s, v) ** 2), 2.0, v)
    check_grad(lambda s: np.sum(np.convolve([s, 2 * s, 1.0], [1.0, s]) ** 2), 0.7)
    g = bytegrad.gradient(lambda a, v: np.sum(np.convolve(a, v) ** 2),
                          a.astype(np.float32), v.astype(np.float32))
    assert g[0].dtype == g[1].dtype == np.float32
    gi = bytegrad.gradient(lambda a, v: np.sum(np.convolve(a, v) ** 2), np.arange(4), v)
    assert gi[0] is None and np.allclose(gi[1], fd_gradient(
        lambda a, v: np.sum(np.convolve(a, v) ** 2), (np.arange(4), v), 1))


@pytest.mark.regression
def test_convolve_signal_model_in_a_loop_and_checkpoint():
    def model(w, x):
        h = x
        for _ in range(3):
            h = np.tanh(np.convolve(h, w, "same"))
        return np.sum((h - 0.1) ** 2)
    check_grad(model, arr(3, seed=3), arr(7, seed=4))

    def ckpt(w, x):
        return np.sum(bytegrad.checkpoint(lambda w, x: np.convolve(x, w, "same"), w, x) ** 2)
    check_grad(ckpt, arr(3, seed=1), arr(8, seed=2))

    def into_own_input(w, x):
        h = x.copy()
        for _ in range(3):
            h[1:-1] = np.convolve(h, w, "valid")
        return np.sum(h ** 2)
    check_stateful(into_own_input, arr(3, seed=1) * 0.5, arr(8, seed=2))


# -- np.interp

_XP = np.array([0.0, 0.5, 1.3, 2.0, 3.1])
_FP = np.array([1.0, -0.5, 2.0, 0.3, 1.1])
_XI = np.array([-0.5, 0.1, 0.7, 1.9, 2.5, 3.5, 0.45])
_WI = np.arange(1, 8.0)


@pytest.mark.regression
def test_interp_all_arguments():
    check_grad(lambda x, xp, fp: np.sum(_WI * np.interp(x, xp, fp)), _XI, _XP, _FP)
    check_grad(lambda x, xp, fp, l, r: np.sum(_WI * np.interp(x, xp, fp, l, r)), _XI, _XP, _FP, -2.0, 4.0)
    check_grad(lambda x, xp, fp, l, r: np.sum(_WI * np.interp(x, xp, fp, left=l, right=r)),
               _XI, _XP, _FP, -2.0, 4.0)
    check_grad(lambda x, xp, fp, l: np.sum(_WI * np.interp(fp=fp, xp=xp, x=x, left=l)), _XI, _XP, _FP, 0.3)
    check_grad(lambda x, xp, fp: np.interp(x, xp, fp) ** 2, 0.7, _XP, _FP)
    check_grad(lambda x, xp, fp: np.sum(np.arange(6.0).reshape(2, 3) * np.interp(x, xp, fp)),
               _XI[:6].reshape(2, 3), _XP, _FP)
    check_grad(lambda x, xp, fp: np.sum(_WI * np.interp(x, xp, fp)), _XI, _XP[:1] + 0.3, _FP[:1])
    check_grad(lambda s: np.interp(s, [0.0, 1.0, 2.0], [s, 2 * s, 0.5]), 0.7)


@pytest.mark.regression
def test_interp_complex_fp_and_period():
    fpc = _FP + 1j * _FP[::-1]
    check_grad(lambda x, xp, fp: np.sum(np.abs(_WI * np.interp(x, xp, fp)) ** 2), _XI, _XP, fpc)
    check_grad(lambda x, xp, fp, l: np.sum(np.abs(_WI * np.interp(x, xp, fp, left=l)) ** 2),
               _XI, _XP, fpc, 1 + 2j)
    for p in (3.7, -3.7):
        check_grad(lambda x, xp, fp, p: np.sum(_WI * np.interp(x, xp, fp, period=p)), _XI * 1.7, _XP, _FP, p)
    check_grad(lambda x, xp, fp, p: np.sum(_WI * np.interp(x, xp, fp, None, None, p)),
               _XI * 1.7, np.array([3.0, 0.2, 7.1, 1.5]), _FP[:4], 3.7)


@pytest.mark.regression
def test_interp_float32_int_empty():
    g = bytegrad.gradient(lambda x, xp, fp: np.sum(np.interp(x, xp, fp)),
                          _XI.astype(np.float32), _XP.astype(np.float32), _FP.astype(np.float32))
    assert all(x.dtype == np.float32 for x in g)
    xi = np.array([0, 1, 3])
    g = bytegrad.gradient(lambda x, xp, fp: np.sum(np.interp(x, xp, fp)), xi, _XP, _FP)
    assert g[0] is None
    assert np.allclose(g[2], fd_gradient(lambda fp: np.sum(np.interp(xi, _XP, fp)), (_FP,), 0))
    g = bytegrad.gradient(lambda x, xp, fp: np.sum(np.interp(x, xp, fp)), np.zeros(0), _XP, _FP)
    assert g[0].shape == (0,) and not g[1].any() and not g[2].any()


@pytest.mark.regression
def test_interp_in_loops_and_with_fp_mutated():
    def loop(fp, x):
        s = 0.0
        for _ in range(4):
            x = np.interp(x, _XP, fp) * 0.9 + 0.2
            s = s + np.sum(x ** 2)
        return s
    check_grad(loop, _FP, _XI)

    def scalars(p, a, b, c):
        tot = 0.0
        for xi in (a, b, c):
            tot += np.interp(xi, _XP, p) ** 2
        return tot
    check_grad(scalars, _FP, 0.1, 0.9, 5.0)

    def mutated(fp, x):
        f = fp.copy()
        tot = 0.0
        for i in range(4):
            y = np.interp(x, _XP, f)
            f[i] = f[i + 1] * 0.5 + np.sum(y) * 0.1
            tot = tot + np.sum(y ** 2)
        return tot
    check_stateful(mutated, _FP.copy(), np.array([0.2, 0.9, 1.7, 2.8]))

    def augmented(fp, x, l):
        f = fp * 1.0
        out = 0.0
        for _ in range(3):
            out = out + np.sum(np.interp(x, _XP, fp=f, left=l) ** 2)
            f += 0.1 * f[::-1]
        return out
    check_stateful(augmented, _FP.copy(), np.array([-1.0, 0.9, 1.7, 2.8]), 0.4)
