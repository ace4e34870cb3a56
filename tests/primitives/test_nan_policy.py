"""The NaN policy: a zero cotangent times any partial is zero, also an infinite partial
at a boundary point (``sqrt``, ``log``, ``pow``, ``arcsin``, ``norm`` … at their edges);
a nonzero cotangent there keeps IEEE arithmetic's inf or NaN."""
import cmath
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import bytegrad
import bytegrad.primitives.np_elementwise  # noqa: F401  (registers the rules)
from bytegrad.primitives import _util
import scipy.special as special  # (after bytegrad, which registers its rules then)
from checks import check_grad

SETTINGS = settings(max_examples=25, deadline=None)
INF = math.inf


@pytest.fixture(autouse=True)
def _quiet():
    """The boundary points divide by zero: NumPy warns, as it does in the plain call."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        yield


def pairwise_distances(x):
    """The issue's example: the sum of |x_i - x_j| over i > j, through sqrt(d²),
    whose diagonal d = 0 is sqrt's boundary point, masked out by tril."""
    d = x[:, None] - x[None, :]
    return np.sum(np.tril(np.sqrt(d ** 2), -1))


def test_pairwise_distances_gradient_is_finite_and_right():
    x = np.array([0.3, 1.0, -2.0, 4.0, 2.5])
    g, = check_grad(pairwise_distances, x)
    np.testing.assert_array_equal(g, [-2.0, 0.0, -4.0, 4.0, 2.0])  # sum of sign(x_k - x_j)


@SETTINGS
@given(hnp.arrays(np.float64, st.integers(2, 7), unique=True,
                  elements=st.integers(-800, 800).map(lambda k: k / 8)))  # (d² not underflowing)
def test_pairwise_distances_closed_form(x):
    g, = bytegrad.gradient(pairwise_distances, x)
    np.testing.assert_allclose(g, np.sign(x[:, None] - x[None, :]).sum(axis=1), atol=1e-12)


# (name, function, boundary point or pole, interior range, derivative in closed form)
EDGES = [
    ("sqrt", np.sqrt, 0.0, (0.1, 10), lambda x: 0.5 / np.sqrt(x)),
    ("cbrt", np.cbrt, 0.0, (0.1, 10), lambda x: 1 / (3 * np.cbrt(x) ** 2)),
    ("log", np.log, 0.0, (0.1, 10), lambda x: 1 / x),
    ("log2", np.log2, 0.0, (0.1, 10), lambda x: 1 / (x * np.log(2))),
    ("log10", np.log10, 0.0, (0.1, 10), lambda x: 1 / (x * np.log(10))),
    ("log1p", np.log1p, -1.0, (-0.9, 5), lambda x: 1 / (1 + x)),
    ("arcsin(1)", np.arcsin, 1.0, (-0.9, 0.9), lambda x: 1 / np.sqrt(1 - x * x)),
    ("arcsin(-1)", np.arcsin, -1.0, (-0.9, 0.9), lambda x: 1 / np.sqrt(1 - x * x)),
    ("arccos", np.arccos, 1.0, (-0.9, 0.9), lambda x: -1 / np.sqrt(1 - x * x)),
    ("arccosh", np.arccosh, 1.0, (1.1, 5), lambda x: 1 / np.sqrt(x * x - 1)),
    ("arctanh", np.arctanh, 1.0, (-0.9, 0.9), lambda x: 1 / (1 - x * x)),
    ("reciprocal", np.reciprocal, 0.0, (0.1, 5), lambda x: -1 / (x * x)),
    ("x ** 0.5", lambda x: x ** 0.5, 0.0, (0.1, 10), lambda x: 0.5 / np.sqrt(x)),
    ("power", lambda x: np.power(x, 0.5), 0.0, (0.1, 10), lambda x: 0.5 / np.sqrt(x)),
    ("float_power", lambda x: np.float_power(x, 0.5), 0.0, (0.1, 10), lambda x: 0.5 / np.sqrt(x)),
    ("x ** -1.0", lambda x: x ** -1.0, 0.0, (0.1, 5), lambda x: -1 / (x * x)),
    ("1 / x", lambda x: 1.0 / x, 0.0, (0.1, 5), lambda x: -1 / (x * x)),
    ("divide", lambda x: np.divide(1.0, x), 0.0, (0.1, 5), lambda x: -1 / (x * x)),
    ("logit", special.logit, 0.0, (0.1, 0.9), lambda x: 1 / (x * (1 - x))),
    ("erfinv", special.erfinv, 1.0, (-0.9, 0.9),
     lambda x: np.sqrt(np.pi) / 2 * np.exp(special.erfinv(x) ** 2)),
    ("xlogy", lambda x: special.xlogy(2.0, x), 0.0, (0.1, 5), lambda x: 2 / x),
]


AT_EDGES = pytest.mark.parametrize("f, edge, interior, df", [e[1:] for e in EDGES],
                                   ids=[e[0] for e in EDGES])


def points_and_cotangents(edge, lo, hi):
    """Arrays ``x`` of boundary and interior points, and cotangents ``d`` with zeros
    (-0.0 too) and nonzeros of both signs, of one shape."""
    return hnp.array_shapes(max_dims=2, max_side=5).flatmap(lambda shape: st.tuples(
        hnp.arrays(np.float64, shape, elements=st.one_of(st.just(edge), st.floats(lo, hi))),
        hnp.arrays(np.float64, shape, elements=st.sampled_from([0.0, -0.0, 1.5, -2.0]))))


@AT_EDGES
@SETTINGS
@given(data=st.data())
def test_zero_cotangent_gives_zero_and_others_ieee(f, edge, interior, df, data):
    x, d = data.draw(points_and_cotangents(edge, *interior))
    g, = bytegrad.pullback(f, x)[1](d)
    expected = np.where(d == 0, 0.0, d * df(x))  # ±inf at the boundary where d is not 0
    assert np.all(np.isinf(expected[(x == edge) & (d != 0)]))
    np.testing.assert_allclose(g, expected, rtol=1e-12)


@pytest.mark.regression
@AT_EDGES
@SETTINGS
@given(data=st.data())
def test_zero_tangent_gives_zero_in_forward_mode(f, edge, interior, df, data):
    """The policy's forward side: a zero tangent at a boundary point gave 0 * inf = NaN
    (``jvp(np.sqrt, (x,), (t,))`` with ``x = [0, 1]``, ``t = [0, 1]``)."""
    x, t = data.draw(points_and_cotangents(edge, *interior))
    _, dy = bytegrad.jvp(f, (x,), (t,))
    np.testing.assert_allclose(dy, np.where(t == 0, 0.0, t * df(x)), rtol=1e-12)


@AT_EDGES
def test_masked_boundary_point_gets_zero(f, edge, interior, df):
    x = np.array([edge, interior[0], interior[1]])
    keep = np.array([False, True, True])
    g, = check_grad(lambda x: np.sum(np.where(keep, f(x), 0.0)), x)
    np.testing.assert_allclose(g, [0.0, *df(x[1:])], rtol=1e-12)


@pytest.mark.parametrize("f", [np.sqrt, np.arcsin, np.reciprocal, np.log1p])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_kernels_follow_the_policy(f, dtype, monkeypatch):
    edge = {np.log1p: -1.0, np.arcsin: 1.0}.get(f, 0.0)
    x = np.random.default_rng(0).uniform(0.1, 0.9, (4, 3000)).astype(dtype)
    x[:, ::7] = edge
    d = np.random.default_rng(1).uniform(-1, 1, x.shape).astype(dtype)
    d[:, ::14] = 0
    monkeypatch.setattr(_util, "BIG", 100)
    fast, = bytegrad.pullback(f, x)[1](d)
    monkeypatch.setattr(_util, "BIG", 10 ** 9)
    slow, = bytegrad.pullback(f, x)[1](d)
    assert fast.dtype == dtype and np.all(fast[:, ::14] == 0) and np.all(np.isinf(fast[:, 7::14]))
    np.testing.assert_allclose(fast, slow, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_division_by_zero_both_operands():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.0, 4.0, 0.0])
    for div in (np.divide, lambda a, b: a / b):
        ga, gb = bytegrad.pullback(div, a, b)[1](np.array([0.0, 1.0, 1.0]))
        np.testing.assert_array_equal(ga, [0.0, 0.25, INF])
        np.testing.assert_array_equal(gb, [0.0, -0.125, -INF])


def test_complex_boundary_point():
    back = bytegrad.pullback(np.sqrt, np.array([0j, 4 + 0j]))[1]
    np.testing.assert_allclose(back(np.array([0j, 1 + 1j])), ([0, 0.25 + 0.25j],))
    assert bytegrad.pullback(cmath.sqrt, 0j)[1](0j) == (0j,)
    assert not cmath.isfinite(bytegrad.pullback(cmath.sqrt, 0j)[1](1 + 0j)[0])


# (name, function, boundary point, its derivative there): Python's scalar rules, and
# NumPy's on float64 scalars
SCALAR_EDGES = [
    ("math.sqrt", math.sqrt, 0.0, INF), ("math.cbrt", math.cbrt, 0.0, INF),
    ("math.asin(1)", math.asin, 1.0, INF), ("math.asin(-1)", math.asin, -1.0, INF),
    ("math.acos", math.acos, 1.0, -INF), ("math.acosh", math.acosh, 1.0, INF),
    ("math.pow", lambda x: math.pow(x, 0.5), 0.0, INF), ("x ** 0.5", lambda x: x ** 0.5, 0.0, INF),
    ("np.sqrt", np.sqrt, np.float64(0.0), INF), ("1 / x", lambda x: 1.0 / x, np.float64(0.0), -INF),
    ("x ** -1", lambda x: x ** -1, np.float64(0.0), -INF),
]


@pytest.mark.parametrize("f, edge, slope", [e[1:] for e in SCALAR_EDGES],
                         ids=[e[0] for e in SCALAR_EDGES])
def test_scalar_boundary_points(f, edge, slope):
    assert bytegrad.gradient(lambda x: 0.0 * f(x), edge) == (0.0,)
    assert bytegrad.gradient(f, edge) == (slope,)


def test_zero_weight_in_a_scalar_loop():
    def weighted_roots(x, w):
        s = 0.0
        for i in range(len(x)):
            s += w[i] * math.sqrt(x[i])
        return s
    gx, gw = bytegrad.gradient(weighted_roots, np.array([0.0, 4.0, 9.0]), np.array([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(gx, [0.0, 0.25, 1 / 3])
    np.testing.assert_allclose(gw, [0.0, 2.0, 3.0])


def test_norm_of_order_below_one_at_a_zero_entry():
    x = np.array([0.0, 4.0])
    assert bytegrad.gradient(lambda x: 0.0 * np.linalg.norm(x, 0.5), x)[0].tolist() == [0.0, 0.0]
    g, = bytegrad.gradient(lambda x: np.linalg.norm(x, 0.5), x)
    assert np.isnan(g[0]) and g[1] == pytest.approx(1.0)  # |x|^0.5 has slopes ±inf at 0


@pytest.mark.parametrize("ord", [None, 1, 2, 3, 0.5, np.inf])
def test_norm_at_zero_has_zero_gradient(ord):
    assert bytegrad.gradient(lambda x: np.linalg.norm(x, ord), np.zeros(3))[0].tolist() == [0.0] * 3


def _sum_of_eigenvalues(a):
    w, v = np.linalg.eigh(a)
    return np.sum(w) + 0.0 * np.sum(v[:, -1] ** 2)


def _sum_of_eig(a):
    w, v = np.linalg.eig(a)
    return np.sum(w.real) + 0.0 * np.sum(v.real[:, -1])


def _nuclear(a):
    u, s, vh = np.linalg.svd(a)
    return np.sum(s) + 0.0 * np.sum(u[:, -1])


@pytest.mark.regression
@pytest.mark.parametrize("f, a", [
    (_sum_of_eigenvalues, np.diag([1.0, 1.0, 2.0])), (_sum_of_eig, np.diag([2.0, 2.0, 1.0])),
    (_nuclear, np.diag([2.0, 2.0, 1.0]))], ids=["eigh", "eig", "svd"])
def test_a_repeated_eigenvalue_the_gradient_does_not_reach(f, a):
    """A zero cotangent of the eigenvectors (singular vectors) where eigenvalues repeat:
    the trace's (nuclear norm's) closed-form gradient, the identity, not NaN (0 / 0)."""
    assert np.array_equal(bytegrad.grad(f)(a), np.eye(3))
    _, back = bytegrad.pullback(np.linalg.eigh, np.diag([1.0, 1.0, 2.0]))
    assert np.array_equal(back((np.ones(3), np.zeros((3, 3))))[0], np.eye(3))
    jac = bytegrad.jacrev(lambda a: np.linalg.eigh(a)[0])(np.diag([1.0, 1.0, 2.0]))
    assert np.isfinite(jac).all() and np.allclose(np.trace(jac, axis1=1, axis2=2), 1.0)
