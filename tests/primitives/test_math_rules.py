"""Rules of the math and cmath modules against central finite differences."""
import cmath
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
import bytegrad.primitives.math  # noqa: F401  (registers the rules)
from bytegrad.primitives.math import digamma
from checks import check_grad

SETTINGS = settings(max_examples=30, deadline=None)

# (function, low, high): an interval of the domain away from singular points
UNARY = [
    (math.sin, -10, 10), (math.cos, -10, 10), (math.tan, -1.4, 1.4),
    (math.asin, -0.95, 0.95), (math.acos, -0.95, 0.95), (math.atan, -10, 10),
    (math.sinh, -5, 5), (math.cosh, -5, 5), (math.tanh, -5, 5),
    (math.asinh, -10, 10), (math.acosh, 1.05, 20), (math.atanh, -0.95, 0.95),
    (math.exp, -10, 10), (math.exp2, -10, 10), (math.expm1, -10, 10),
    (math.log, 0.05, 100), (math.log2, 0.05, 100), (math.log10, 0.05, 100),
    (math.log1p, -0.95, 100), (math.sqrt, 0.01, 100),
    (math.cbrt, 0.01, 100), (math.cbrt, -100, -0.01),
    (math.fabs, 0.01, 10), (math.fabs, -10, -0.01),
    (math.degrees, -10, 10), (math.radians, -10, 10),
    (math.erf, -3, 3), (math.erfc, -3, 3),
    (math.gamma, 0.1, 6), (math.gamma, -2.9, -2.1),
    (math.lgamma, 0.1, 30), (math.lgamma, -2.9, -2.1),
]


@pytest.mark.parametrize("f, lo, hi", UNARY, ids=lambda v: getattr(v, "__name__", str(v)))
@SETTINGS
@given(data=st.data())
def test_unary(f, lo, hi, data):
    x = data.draw(st.floats(lo, hi))
    check_grad(lambda x: f(x) * x, x)


def test_user_style_lambdas():
    check_grad(lambda x: math.sin(x) * x, 0.7)
    check_grad(lambda x: math.exp(-x * x) * math.cos(3 * x), 0.4)
    check_grad(lambda x, y: math.sqrt(x * x + y * y) + math.log(x) * y, 1.3, -0.6)
    check_grad(lambda x: math.lgamma(x) - math.log(math.gamma(x)), 3.3)


def test_int_arguments_have_no_gradient():
    assert bytegrad.gradient(lambda x: math.sin(x), 2) == (None,)
    assert bytegrad.gradient(lambda x: math.sqrt(x) * 1.5, 4) == (None,)
    assert bytegrad.gradient(lambda x, y: math.pow(x, y), 2, 3.0)[0] is None
    assert bytegrad.gradient(lambda x, y: math.atan2(x, y), 2, 3.0)[0] is None
    assert bytegrad.gradient(lambda x, b: math.log(x, b), 8.0, 2)[1] is None
    assert bytegrad.gradient(lambda x, i: math.ldexp(x, i), 1.5, 3) == (8.0, None)
    check_grad(lambda x, n: math.hypot(x, n), 1.5, 2)


def test_infinite_derivative_at_domain_edges():
    assert bytegrad.gradient(math.sqrt, 0.0) == (math.inf,)
    assert bytegrad.gradient(math.asin, 1.0) == (math.inf,)
    assert bytegrad.gradient(math.acos, 1.0) == (-math.inf,)


@SETTINGS
@given(st.floats(-5, 5), st.floats(-5, 5).filter(lambda v: abs(v) > 0.1))
def test_atan2(y, x):
    if x < 0 and abs(y) < 1e-3:
        return  # the branch cut
    check_grad(lambda y, x: math.atan2(y, x) * y, y, x)


@SETTINGS
@given(st.floats(0.1, 5), st.floats(-3, 3))
def test_pow(x, p):
    check_grad(lambda x, p: math.pow(x, p) + x, x, p)


def test_pow_special_points():
    dx, dp = bytegrad.gradient(lambda x, p: math.pow(x, p), -1.5, 3.0)  # negative base
    assert math.isclose(dx, 3 * 1.5 ** 2) and math.isclose(dp, -1.5 ** 3 * math.log(1.5))
    assert bytegrad.gradient(lambda x: math.pow(x, 0.0), 0.0) == (0.0,)
    assert bytegrad.gradient(lambda x: math.pow(x, 2.0), 0.0) == (0.0,)
    assert bytegrad.gradient(lambda p: math.pow(0.0, p), 2.0) == (0.0,)


def test_log_with_base():
    check_grad(lambda x, b: math.log(x, b), 3.7, 2.5)
    check_grad(lambda x: math.log(x, 10.0) * x, 0.3)


@SETTINGS
@given(st.lists(st.floats(-10, 10), min_size=1, max_size=5))
def test_hypot(xs):
    if math.hypot(*xs) < 0.1:
        return
    check_grad(lambda *xs: math.hypot(*xs) * 2.0, *xs)


def test_hypot_fixed_arity_and_zero():
    check_grad(lambda x, y: math.hypot(x, y), 3.0, -4.0)
    check_grad(lambda x, y, z: math.hypot(x, 2.0 * y, z), 1.0, 2.0, 3.0)
    assert bytegrad.gradient(lambda x, y: math.hypot(x, y), 0.0, 0.0) == (0.0, 0.0)


def test_copysign_gradient_to_magnitude_only():
    for x, s in [(1.5, -2.0), (-1.5, -2.0), (-1.5, 3.0), (1.5, 3.0)]:
        g = check_grad(lambda x, s: math.copysign(x, s) * x, x, s)
        assert g[1] is None


@SETTINGS
@given(st.floats(-20, 20), st.sampled_from([0.7, 2.5, -1.3, 3.0]))
def test_fmod_and_remainder(x, y):
    for f in (math.fmod, math.remainder):
        n = (x - f(x, y)) / y
        if abs(n - round(n)) > 1e-9 or abs(x / y - round(x / y)) < 1e-4 or \
                abs(abs(x / y - math.floor(x / y)) - 0.5) < 1e-4:
            continue  # too close to a jump for finite differences
        check_grad(lambda x, y: f(x, y) * 1.0, x, y)


def test_fmod_gradient_values():
    assert bytegrad.gradient(lambda x, y: math.fmod(x, y), 7.5, 2.0) == (1.0, -3.0)
    assert bytegrad.gradient(lambda x, y: math.fmod(x, y), -7.5, 2.0) == (1.0, 3.0)
    assert bytegrad.gradient(lambda x, y: math.remainder(x, y), 7.5, 2.0) == (1.0, -4.0)


def test_ldexp_nextafter_frexp_modf():
    check_grad(lambda x: math.ldexp(x, 3) + math.ldexp(x, -2), 1.7)
    check_grad(lambda x: math.nextafter(x, 10.0) * x, 1.7)

    def frexp_mantissa(x):
        m, e = math.frexp(x)
        return m * e

    check_grad(frexp_mantissa, 13.7)
    check_grad(lambda x: math.modf(x)[0] * 3.0 + math.modf(x)[1], 2.3)


def test_dist():
    check_grad(lambda x, y: math.dist((x, 1.0), (2.0, y)), 0.5, -1.0)
    g = bytegrad.gradient(lambda p, q: math.dist(p, q), [1.0, 2.0, 3], (0.0, 0.5, 1.0))
    d = math.dist([1.0, 2.0, 3], (0.0, 0.5, 1.0))
    assert type(g[0]) is list and type(g[1]) is tuple
    assert np.allclose(g[0][:2], [1 / d, 1.5 / d]) and g[0][2] is None
    assert np.allclose(g[1], [-1 / d, -1.5 / d, -2 / d])
    p, q = np.array([1.0, 2.0]), np.array([-1.0, 0.5])
    check_grad(lambda p, q: math.dist(p, q), p, q)


def test_prod():
    check_grad(lambda x, y: math.prod([x, y, 2.0, x]), 1.5, -0.7)
    check_grad(lambda x, y: math.prod((x, 0.0, y)) + x, 1.5, -0.7)  # a zero factor
    check_grad(lambda x, y: math.prod([x, y, 2.0], start=x), 1.5, -0.7)
    check_grad(lambda x, s: math.prod([x, x, 3], start=s), 1.5, 2.5)
    g = bytegrad.gradient(lambda xs: math.prod(xs), (2.0, 3, 5.0))
    assert g == ((15.0, None, 6.0),)
    g = bytegrad.gradient(lambda xs: math.prod(xs), np.array([2.0, 3.0]))[0]
    assert g.tolist() == [3.0, 2.0]


def test_fsum_over_list_built_in_loop():
    def f(xs):
        ys = [v * i for i, v in enumerate(xs)]  # a comprehension: a loop of list appends
        return math.fsum(ys) + math.fsum((xs[0], 1.0))

    check_grad(f, np.linspace(-1.0, 1.0, 9))
    assert bytegrad.gradient(f, [0.5] * 50)[0] == [1.0] + [float(i) for i in range(1, 50)]
    g = bytegrad.gradient(lambda xs: math.fsum(xs), [1.0, 2, 3.0])
    assert g == ([1.0, None, 1.0],)


def test_nondifferentiable_functions():
    assert bytegrad.gradient(lambda x: math.floor(x) * x, 2.5) == (2.0,)
    assert bytegrad.gradient(lambda x: math.ceil(x) * x + math.trunc(x), 2.5) == (3.0,)
    assert bytegrad.gradient(lambda x: x if math.isfinite(x) and not math.isnan(x) else 0.0,
                             2.5) == (1.0,)
    assert bytegrad.gradient(lambda x: x * math.factorial(3) + math.isqrt(9), 2.5) == (6.0,)


def test_digamma():
    gamma_euler = 0.5772156649015329
    assert math.isclose(digamma(1.0), -gamma_euler, rel_tol=1e-14)
    assert math.isclose(digamma(0.5), -gamma_euler - 2 * math.log(2), rel_tol=1e-14)
    assert math.isclose(digamma(10.0), sum(1 / k for k in range(1, 10)) - gamma_euler,
                        rel_tol=1e-14)
    assert math.isnan(digamma(-2.0))
    for x in (1e-3, 0.3, 2.7, 9.99, 10.0, 55.5, 1e6, -0.5, -3.7):
        h = 1e-6 * max(1.0, abs(x)) if x > 0.01 else 1e-8
        fd = (math.lgamma(x + h) - math.lgamma(x - h)) / (2 * h)
        assert math.isclose(digamma(x), fd, rel_tol=1e-6, abs_tol=1e-6), x


# ---- cmath --------------------------------------------------------------------

# (function, real interval, imaginary interval) away from branch cuts and poles
COMPLEX = [
    (cmath.exp, (-2, 2), (-3, 3)), (cmath.log, (0.1, 3), (-2, 2)),
    (cmath.log10, (0.1, 3), (-2, 2)), (cmath.sqrt, (0.1, 3), (-2, 2)),
    (cmath.sin, (-2, 2), (-2, 2)), (cmath.cos, (-2, 2), (-2, 2)),
    (cmath.tan, (-1.2, 1.2), (-1, 1)), (cmath.sinh, (-2, 2), (-2, 2)),
    (cmath.cosh, (-2, 2), (-2, 2)), (cmath.tanh, (-1, 1), (-1.2, 1.2)),
    (cmath.asin, (-0.8, 0.8), (-1, 1)), (cmath.acos, (-0.8, 0.8), (-1, 1)),
    (cmath.atan, (-1, 1), (-0.8, 0.8)), (cmath.asinh, (-1, 1), (-0.8, 0.8)),
    (cmath.acosh, (1.2, 3), (-1, 1)), (cmath.atanh, (-0.8, 0.8), (-1, 1)),
]
C = 0.5 - 0.25j


@pytest.mark.parametrize("f, re, im", COMPLEX, ids=lambda v: getattr(v, "__name__", str(v)))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_cmath_holomorphic(f, re, im, data):
    z = complex(data.draw(st.floats(*re)), data.draw(st.floats(*im)))
    check_grad(lambda z: abs(f(z) * z + C), z)
    x = data.draw(st.floats(max(re[0], 0.1), re[1]))  # a real argument: a real gradient
    g = check_grad(lambda x: abs(f(x) + C), x)
    assert type(g[0]) is float


def test_cmath_user_style():
    check_grad(lambda z: abs(cmath.exp(z) * cmath.sin(z)) ** 2, 0.3 + 0.4j)
    check_grad(lambda z, w: abs(cmath.sqrt(z * w) - 1.0), 1.2 - 0.5j, 0.7 + 0.3j)
    check_grad(lambda z, b: abs(cmath.log(z, b)), 1.5 + 0.5j, 2.0 + 0.1j)
    check_grad(lambda z, x: abs(cmath.tanh(z) * x), 0.2 - 0.4j, 1.5)
    assert bytegrad.gradient(lambda z: abs(cmath.exp(z)), 1) == (None,)


def test_cmath_polar_coordinates():
    check_grad(lambda z: cmath.phase(z) * 2.0, 1.3 - 0.4j)
    check_grad(lambda z: cmath.phase(z * z), -0.3 + 0.9j)

    def polar_sum(z):
        r, phi = cmath.polar(z)
        return r * phi

    check_grad(polar_sum, 1.1 + 0.7j)
    check_grad(lambda z: cmath.polar(z)[0], 1.1 + 0.7j)
    check_grad(lambda r, phi: abs(cmath.rect(r, phi) + C), 1.5, 0.6)
