"""Forward rules of NumPy functions (primitives/tangent_numpy.py): each jvp against central
finite differences, and each jacfwd against jacrev, the reverse rules being the reference
where the derivative is a convention (ties, a symmetric matrix's gradient), also with the
arguments given by keyword."""
from __future__ import annotations

import numpy as np
import pytest

import bytegrad
from checks import fd_directional

x4 = np.array([0.5, -1.0, 2.0, 0.3])
v4 = np.array([1.0, 2.0, 3.0, 4.0])
x23 = np.array([[0.5, -1.0, 2.0], [0.3, 1.5, -0.7]])


def agrees(f, *args, fd=True):
    """jvp of ``f`` along a fixed direction against finite differences (``fd``), and jacfwd
    against jacrev in each argument."""
    rng = np.random.default_rng(0)
    vs = [rng.standard_normal(np.shape(a)) for a in args]
    y, dy = bytegrad.jvp(f, args, vs)
    np.testing.assert_allclose(y, f(*args), rtol=1e-12)
    if fd:
        np.testing.assert_allclose(dy, fd_directional(f, args, vs), rtol=1e-6, atol=1e-8)
    for i in range(len(args)):
        np.testing.assert_allclose(bytegrad.jacfwd(f, argnums=i)(*args),
                                   bytegrad.jacrev(f, argnums=i)(*args), rtol=1e-10, atol=1e-12)


# -- var, std ------------------------------------------------------------------------------

@pytest.mark.regression
def test_var_with_where_in_forward_mode():
    f = lambda x: np.var(x, where=x > 0)
    assert bytegrad.jvp(f, (x4,), (v4,))[1] == pytest.approx(0.15555555555555, rel=1e-9)
    agrees(f, x4)


@pytest.mark.regression
@pytest.mark.parametrize("f", [
    lambda x: np.std(x, where=x > 0),
    lambda x: np.var(a=x, axis=0, where=x > 0),
    lambda x: np.std(a=x, axis=0, where=x > 0),
    lambda x: x.var(where=x > 0),
    lambda x: np.sum(np.sin(np.var(x, axis=1, where=x > 0))),
    lambda x: np.sum(np.std(x.reshape(1, 2, 3), axis=(0, 2), where=x.reshape(1, 2, 3) > 0, keepdims=True)),
    lambda x: np.var(x, where=[[True, False, True], [True, True, False]], ddof=1),
], ids=["std", "var by keyword", "std by keyword", "method", "axis", "axes keepdims", "ddof"])
def test_var_and_std_with_where_in_forward_mode(f):
    agrees(f, x23)


@pytest.mark.regression
@pytest.mark.parametrize("f", [
    lambda x: np.var(x, correction=1),
    lambda x: np.std(x, axis=0, correction=1),
    lambda x: np.var(x, axis=1, mean=np.array([[0.2], [-0.1]])),
    lambda x: np.std(x, mean=0.4, where=x < 1.8),
], ids=["var correction", "std correction", "var mean", "std mean where"])
def test_var_and_std_with_correction_or_a_given_mean_in_forward_mode(f):
    agrees(f, x23)


# -- the nan* reductions ------------------------------------------------------------------

def nan_where_big(x):
    """x with NaNs where it is above 1, squared: the NaNs' tangents are NaN too."""
    return np.where(x > 1, np.nan, x) ** 2


@pytest.mark.regression
def test_nansum_skips_the_tangents_of_nans_in_forward_mode():
    f = lambda x: np.nansum(nan_where_big(x))
    assert bytegrad.jvp(f, (x4,), (v4,))[1] == pytest.approx(-0.6)
    agrees(f, x4)


@pytest.mark.regression
@pytest.mark.parametrize("nanf", [np.nansum, np.nanmean, np.nanprod, np.nanmax, np.nanmin, np.nanvar,
                                  np.nanstd, np.nancumsum, np.nancumprod, np.nanmedian])
@pytest.mark.parametrize("by_keyword", [False, True])
def test_nan_reductions_skip_the_tangents_of_nans_in_forward_mode(nanf, by_keyword):
    if by_keyword:
        f = lambda x: np.sum(np.sin(nanf(a=nan_where_big(x), axis=1)))
    else:
        f = lambda x: np.sum(np.sin(nanf(nan_where_big(x), 0)))
    agrees(f, x23)


@pytest.mark.regression
@pytest.mark.parametrize("f", [
    lambda x, q: np.sum(np.nanquantile(nan_where_big(x), q, axis=1)),
    lambda x, q: np.sum(np.nanpercentile(nan_where_big(x), 100 * q, axis=1)),
    lambda x, q: np.nanvar(nan_where_big(x), ddof=1, where=x < 0.4) + q,
    lambda x, q: np.nansum(nan_where_big(x), initial=q),
    lambda x, q: np.sum(np.nanmean(nan_where_big(x), axis=0, keepdims=True)) * q,
], ids=["nanquantile", "nanpercentile", "nanvar ddof where", "nansum initial", "nanmean keepdims"])
def test_nan_reductions_with_more_arguments_in_forward_mode(f):
    agrees(f, x23, 0.3)


@pytest.mark.regression
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (NumPy's, of the all-NaN slice)
@pytest.mark.parametrize("nanf", [np.nanmax, np.nanmean, np.nansum])
def test_nan_reductions_of_an_all_nan_slice_in_forward_mode(nanf):
    agrees(lambda x: np.nansum(nanf(np.where(x > 0.2, np.nan, x) ** 2, axis=0)), x23)  # (column 0: all NaN)


# -- np.linalg.cholesky -------------------------------------------------------------------

S = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])


@pytest.mark.regression
def test_cholesky_tangent_is_the_one_of_the_hermitian_part_in_forward_mode():
    f = lambda a: np.sum(np.sin(np.linalg.cholesky(a)))
    agrees(f, S, fd=False)  # (a nonsymmetric direction: the convention, not the derivative)
    v = np.triu(np.arange(1.0, 10).reshape(3, 3))
    sym = lambda a: f((a + a.T) / 2)
    assert bytegrad.jvp(f, (S,), (v,))[1] == pytest.approx(fd_directional(sym, (S,), (v,)), rel=1e-6)


def test_cholesky_in_forward_mode_along_a_symmetric_direction():
    f = lambda a: np.linalg.cholesky(a)
    v = np.array([[1.0, 0.3, -0.2], [0.3, 0.5, 0.1], [-0.2, 0.1, 2.0]])
    np.testing.assert_allclose(bytegrad.jvp(f, (S,), (v,))[1], fd_directional(f, (S,), (v,)),
                               rtol=1e-6, atol=1e-9)


@pytest.mark.regression
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("imag", [0.0, 1.0])
def test_cholesky_upper_factor_in_forward_mode(upper, imag):
    a = S + imag * 1j * np.array([[0.0, 0.3, -0.1], [-0.3, 0.0, 0.2], [0.1, -0.2, 0.0]])
    v = np.array([[1.0, 0.3, -0.2], [0.3, 0.5, 0.1], [-0.2, 0.1, 2.0]]) + imag * 0.4j * np.triu(np.ones((3, 3)), 1)
    f = lambda a: np.linalg.cholesky(a, upper=upper)
    herm = lambda a: f((a + a.conj().T) / 2)
    y, t = bytegrad.jvp(f, (a,), (v,))
    np.testing.assert_allclose(y, f(a))
    np.testing.assert_allclose(t, fd_directional(herm, (a,), (v,)), rtol=1e-6, atol=1e-9)


@pytest.mark.regression
def test_cholesky_of_a_complex_matrix_in_forward_mode():
    a = S + 1j * np.array([[0.0, 0.3, -0.1], [-0.3, 0.0, 0.2], [0.1, -0.2, 0.0]])
    v = np.array([[0.2, 1.0 + 0.5j, 0.0], [0.3j, -0.4, 1.0], [0.5, 0.0, 0.7]])
    f = lambda a: np.linalg.cholesky(a)
    herm = lambda a: f((a + a.conj().T) / 2)
    np.testing.assert_allclose(bytegrad.jvp(f, (a,), (v,))[1], fd_directional(herm, (a,), (v,)),
                               rtol=1e-6, atol=1e-9)


# -- np.einsum ----------------------------------------------------------------------------

xe = np.array([[1.0, 2.0], [3.0, 4.0]])
ye = np.array([[0.5, -1.0], [2.0, 1.5]])


@pytest.mark.regression
def test_einsum_sublist_form_in_forward_mode():
    f = lambda x, y: np.sum(np.einsum(x, [0, 1], y, [1, 2], [0, 2]))
    assert bytegrad.jvp(f, (xe, ye), (np.ones((2, 2)), np.zeros((2, 2))))[1] == pytest.approx(6.0)
    agrees(f, xe, ye)


@pytest.mark.regression
@pytest.mark.parametrize("f", [
    lambda x, y: np.einsum(x, [0, 1], [1]) * np.sum(y),
    lambda x, y: np.einsum(x, [0, 1], y, [1, 2]),
    lambda x, y: np.einsum(x, [0, 1], x, [0, 1], y, [1, 0], []),
], ids=["one operand", "implicit output", "three operands"])
def test_einsum_sublist_forms_in_forward_mode(f):
    agrees(f, xe, ye)


@pytest.mark.parametrize("f", [
    lambda x, y: np.einsum("ij,jk->ik", x, y),
    lambda x, y: np.einsum("ij,jk", x, y, optimize=True),
    lambda x, y: np.einsum("ii", x) * y,
], ids=["explicit", "implicit optimize", "trace"])
def test_einsum_subscripts_in_forward_mode(f):
    agrees(f, xe, ye)


# -- max, min: ties -----------------------------------------------------------------------

@pytest.mark.regression
def test_max_splits_the_tangent_among_ties_in_forward_mode():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_array_equal(bytegrad.jacfwd(np.max)(x), [0, 0.5, 0.5, 0])
    np.testing.assert_array_equal(bytegrad.jacfwd(np.min)(-x), [0, 0.5, 0.5, 0])


@pytest.mark.regression
@pytest.mark.parametrize("f", [
    np.max, np.min, np.amax, np.amin, lambda x: x.max(), lambda x: x.min(axis=0),
    lambda x: np.max(x, axis=1), lambda x: np.min(a=x, axis=0, keepdims=True),
    lambda x: np.amax(x, axis=(0, 1)), lambda x: np.max(x, keepdims=True),
], ids=["max", "min", "amax", "amin", "method max", "method min axis", "max axis",
        "min by keyword", "amax axes", "max keepdims"])
def test_max_and_min_with_ties_in_forward_mode(f):
    x = np.array([[3.0, -2.0, 3.0], [-2.0, -2.0, 3.0]])  # (maxima and minima tied along each axis)
    agrees(f, x, fd=False)


def test_max_over_several_axes_in_forward_mode():
    agrees(lambda x: np.max(x.reshape(1, 2, 3), axis=(0, 2)), x23)


# -- prod ---------------------------------------------------------------------------------

xz = np.array([[0.5, 0.0, 2.0], [0.3, 1.5, -0.7]])


@pytest.mark.regression
@pytest.mark.parametrize("f", [
    lambda x: np.prod(x, axis=(0, 1)),
    lambda x: np.prod(x.reshape(1, 2, 3), axis=(0, 2), keepdims=True),
    lambda x: np.prod(a=x, axis=(1, -2)),
], ids=["all axes", "axes keepdims", "negative by keyword"])
def test_prod_with_a_zero_over_several_axes_in_forward_mode(f):
    agrees(f, xz)


@pytest.mark.parametrize("f", [
    lambda x: np.prod(a=x, axis=-1), lambda x: np.prod(x, keepdims=True), lambda x: x.prod(0),
], ids=["one axis by keyword", "keepdims", "method"])
def test_prod_with_a_zero_in_forward_mode(f):
    agrees(f, xz)


@pytest.mark.regression
def test_prod_with_a_zero_in_forward_over_forward_mode():
    f = lambda x: np.prod(x ** 2)
    hv = bytegrad.jvp(lambda x: bytegrad.jvp(f, (x,), (x23,))[1], (xz,), (x23,))[1]
    ref = np.dot(bytegrad.grad(lambda x: np.sum(bytegrad.grad(f)(x) * x23))(xz).ravel(), x23.ravel())
    assert hv == pytest.approx(ref)
