"""np.fft rules, checked with `bytegrad.testing.check_rule` (finite differences along random
directions; for complex inputs along real and imaginary directions, the Zygote convention)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad.testing import check_rule
from checks import arr as rand

NORMS = [None, "backward", "ortho", "forward"]
F = np.fft


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("f", [F.fft, F.ifft])
@pytest.mark.parametrize("length, n", [(5, None), (6, None), (5, 8), (6, 3), (7, 7)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_fft_ifft(f, norm, length, n, dtype):
    check_rule(lambda x: f(x, n, norm=norm), rand(length, dtype))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("length, n", [(5, None), (6, None), (5, 8), (6, 9), (9, 4), (8, 5)])
def test_rfft_odd_even_padded_truncated(norm, length, n):
    check_rule(lambda x: F.rfft(x, n, norm=norm), rand(length))


@pytest.mark.parametrize("norm", NORMS)
# (input length, n): n even and odd, default (2 (m - 1)), and the input padded or cut
@pytest.mark.parametrize("length, n", [(4, None), (5, None), (4, 6), (4, 7), (5, 5), (6, 4),
                                       (6, 3), (3, 10)])
def test_irfft_hermitian_weights(norm, length, n):
    check_rule(lambda z: F.irfft(z, n, norm=norm), rand(length, np.complex128))
    check_rule(lambda x: F.irfft(x, n, norm=norm), rand(length))  # a real spectrum


def test_one_axis_of_a_stack():
    x = rand((3, 4, 5), np.complex128)
    for axis in (0, 1, -1):
        check_rule(lambda x: F.fft(x, axis=axis), x)
        check_rule(lambda x: F.ifft(x, 6, axis, "ortho"), x)
        check_rule(lambda x: F.irfft(x, 5, axis=axis), x)
        check_rule(lambda x: F.rfft(x, 3, axis=axis, norm="forward"), x.real)


@pytest.mark.parametrize("f", [F.fft2, F.ifft2, F.fftn, F.ifftn, F.rfft2, F.rfftn, F.irfft2,
                               F.irfftn])
@pytest.mark.parametrize("s, axes", [(None, None), ((4, 3), None), ((3, 5), (0, 2)),
                                     (None, (2, 0)), ((5,), (1,)), ((2, 3, 6), (1, 0, 2)),
                                     ((4, -1), (0, 1))])
def test_two_and_n_dimensional(f, s, axes):
    two = f.__name__.endswith("2")
    if axes is None and s is not None and not two:  # s without axes: deprecated in NumPy 2.0
        axes = tuple(range(-len(s), 0))
    real_input = f in (F.rfft2, F.rfftn)
    x = rand((3, 4, 5), np.float64 if real_input else np.complex128)
    for norm in ("ortho", "forward"):
        if two and axes is None:
            check_rule(lambda x: f(x, s, norm=norm), x)
        else:
            check_rule(lambda x: f(x, s, axes, norm), x)
    if not real_input:
        check_rule(lambda x: f(x, s) if two and axes is None else f(x, s, axes), x.real)


def test_rfft2_of_odd_and_even_sizes_and_every_norm():
    for shape in ((3, 4), (4, 5), (5, 5)):
        for norm in NORMS:
            check_rule(lambda x: F.rfft2(x, norm=norm), rand(shape))
            check_rule(lambda z: F.irfft2(z, norm=norm), rand(shape, np.complex128))
            check_rule(lambda z: F.irfftn(z, (shape[0], 2 * shape[1] - 1), (0, 1), norm),
                       rand(shape, np.complex128))


def test_single_precision_and_lists():
    check_rule(lambda x: F.fft(x), rand(6, np.float32))
    check_rule(lambda z: F.irfft2(z), rand((3, 4), np.complex64))
    g, = bytegrad.gradient(lambda x: np.sum(np.abs(F.fft([x, 2.0, 3.0])) ** 2), 1.5)
    assert np.isclose(g, 2 * 3 * 1.5)  # Parseval: sum |fft x|^2 = n sum x^2


@given(st.integers(1, 9), st.integers(1, 12), st.sampled_from(NORMS))
@settings(max_examples=25, deadline=None)
def test_parseval_closed_forms(m, n, norm):
    # |fft(x, n)|^2 sums to n |x[:n]|^2 (backward), |x[:n]|^2 (ortho), |x[:n]|^2 / n (forward)
    scale = {None: n, "backward": n, "ortho": 1, "forward": 1 / n}[norm]
    x = rand(m, np.complex128, seed=m)
    g, = bytegrad.gradient(lambda x: np.sum(np.abs(F.fft(x, n, norm=norm)) ** 2), x)
    expected = np.zeros(m, complex)
    expected[:n] = 2 * scale * x[:n]
    np.testing.assert_allclose(g, expected, atol=1e-12 * scale * m)
    # irfft(z, n)[t] = sum_j c_j Re(z_j e^{2 pi i j t / n}) / n: its sum over t is Re(z_0)
    # (backward norm), and it reads Im z_0 and, for even n, Im z_{n/2} not at all
    z = rand(m, np.complex128, seed=m + 1)
    g, = bytegrad.gradient(lambda z: np.sum(F.irfft(z, n)), z)
    expected = np.zeros(m, complex)
    expected[0] = 1
    np.testing.assert_allclose(g, expected, atol=1e-12)


def test_shifts():
    x = rand((4, 5), np.complex128)
    for f in (F.fftshift, F.ifftshift):
        check_rule(lambda x: f(x), x)
        check_rule(lambda x: f(x, axes=1), x)
        check_rule(lambda x: f(x, (0,)), x.real)
    w = np.arange(5.0)
    g, = bytegrad.gradient(lambda x: np.sum(w * F.fftshift(x)), np.zeros(5))
    np.testing.assert_array_equal(g, F.ifftshift(w))


def out_keyword(x):
    o = np.empty(4, complex)
    y = F.fft(x, out=o)
    return np.sum(np.abs(o) ** 2) + np.sum(y.real)


def test_out_by_keyword_is_a_write_and_positional_out_is_refused():
    x = rand(4)
    g, = bytegrad.gradient(out_keyword, x)
    np.testing.assert_allclose(g, 2 * 4 * x + np.array([1, 0, 0, 0]) * 4)  # Parseval; sum Re fft = 4 x0
    check_rule(out_keyword, x)
    with pytest.raises(TypeError, match=r"numpy.fft.rfft2: an output array given positionally"):
        bytegrad.gradient(lambda x: np.sum(np.abs(F.rfft2(x, None, (0, 1), None,
                                                          np.empty((4, 3), complex)))),
                          rand((4, 4)))


def test_bad_arguments_fail_as_in_numpy():
    x = rand(4)
    with pytest.raises(ValueError, match="Invalid norm"):
        bytegrad.gradient(lambda x: np.sum(np.abs(F.fft(x, norm="sideways"))), x)
    with pytest.raises(ValueError, match="Invalid number"):
        bytegrad.gradient(lambda x: np.sum(np.abs(F.fft(x, 0))), x)
    with pytest.raises(TypeError):
        bytegrad.gradient(lambda z: np.sum(np.abs(F.rfft(z))), x + 1j)
