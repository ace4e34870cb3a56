"""Rules of NumPy's elementwise functions and of the operators on arrays, checked with
`bytegrad.testing.check_rule` (value, dot-product test against finite differences,
repeatable pullback, untouched inputs, gradient shape and dtype)."""
import itertools
import operator
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import bytegrad
import bytegrad.primitives.np_elementwise as npe  # noqa: F401  (registers the rules)
from bytegrad.primitives import _util
import scipy.special as special  # (a dev dependency; after bytegrad, which registers its rules then)
import bytegrad.testing
from checks import arr, check_grad, check_stateful

SETTINGS = settings(max_examples=15, deadline=None)
DTYPES = st.sampled_from([np.float64, np.float32])
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


def check_rule(f, *args, **kw):
    """`bytegrad.testing.check_rule`, with an absolute tolerance for single precision,
    where a directional derivative that cancels to near zero is all rounding noise."""
    if any(np.asarray(a).dtype in (np.float32, np.complex64) for a in args
           if not isinstance(a, (list, tuple))):
        kw.setdefault("atol", 3e-4)
    return bytegrad.testing.check_rule(f, *args, **kw)


def rand(shape, lo, hi, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(0.1, 0.5, shape)
    return x.astype(dtype)


def grad_of(f, *args, d=None):
    """The pullback of ``f`` at ``args`` applied to ``d`` (ones by default)."""
    y, back = bytegrad.pullback(f, *args)
    return back(np.ones_like(y) if d is None else d)


# (function, low, high, also checked for complex numbers)
UNARY = [
    (np.exp, -3, 3, True), (np.exp2, -3, 3, True), (np.expm1, -3, 3, True),
    (np.log, 0.2, 5, True), (np.log2, 0.2, 5, True), (np.log10, 0.2, 5, True),
    (np.log1p, -0.7, 5, True), (np.sqrt, 0.2, 5, True), (np.cbrt, 0.2, 5, False),
    (np.cbrt, -5, -0.2, False), (np.square, -3, 3, True), (np.reciprocal, 0.3, 3, True),
    (np.sin, -3, 3, True), (np.cos, -3, 3, True), (np.tan, -1.2, 1.2, True),
    (np.arcsin, -0.9, 0.9, True), (np.arccos, -0.9, 0.9, True), (np.arctan, -3, 3, True),
    (np.sinh, -3, 3, True), (np.cosh, -3, 3, True), (np.tanh, -3, 3, True),
    (np.arcsinh, -3, 3, True), (np.arccosh, 1.2, 5, True), (np.arctanh, -0.9, 0.9, True),
    (np.deg2rad, -99, 99, False), (np.radians, -99, 99, False),
    (np.rad2deg, -3, 3, False), (np.degrees, -3, 3, False),
    (np.negative, -3, 3, True), (np.positive, -3, 3, True), (np.sinc, -2, 2, True),
    (np.abs, 0.1, 3, True), (np.abs, -3, -0.1, False), (np.absolute, 0.1, 3, False),
    (np.conjugate, -3, 3, True), (np.conj, -3, 3, True), (np.real, -3, 3, True),
    (np.angle, 0.1, 3, True), (np.angle, -3, -0.1, False),
]
ids = [f"{f.__name__}[{lo},{hi}]" for f, lo, hi, _ in UNARY]


@pytest.mark.parametrize("f, lo, hi, cx", UNARY, ids=ids)
@SETTINGS
@given(shape=SHAPES, dtype=DTYPES, seed=st.integers(0, 2 ** 16))
def test_unary(f, lo, hi, cx, shape, dtype, seed):
    check_rule(lambda x: f(x), rand(shape, lo, hi, dtype, seed))


@pytest.mark.parametrize("f, lo, hi, cx", [u for u in UNARY if u[3]],
                         ids=[i for i, u in zip(ids, UNARY) if u[3]])
def test_unary_complex(f, lo, hi, cx):
    lo, hi = max(lo, -0.8), min(hi, 0.8)  # away from the branch cuts (Im z is in [0.1, 0.5])
    if f is np.arccosh:
        lo, hi = 1.2, 3
    for dtype in (np.complex128, np.complex64):
        check_rule(lambda z: f(z), rand((2, 3), lo, hi, dtype))
    check_rule(lambda z: f(z), complex(0.5, 0.3))


def test_pullbacks_keep_only_what_their_derivative_needs():
    """tanh's pullback needs y alone and ``x ** 2``'s needs x alone: neither keeps the
    other array alive (a tape holds every pullback until the reverse pass)."""
    import gc
    import weakref
    from bytegrad.runtime.rules import rule_for
    x = np.linspace(-2.0, 2.0, 5)
    a = x * 1.0
    y, back = rule_for(np.tanh)(a)
    gone = weakref.ref(a)
    del a
    gc.collect()
    assert gone() is None
    np.testing.assert_allclose(back(np.ones(5))[1], 1 - np.tanh(x) ** 2, rtol=1e-14)
    y, back = rule_for(operator.pow)(x, 2)
    gone = weakref.ref(y)
    del y
    gc.collect()
    assert gone() is None
    np.testing.assert_allclose(back(np.ones(5))[1], 2 * x, rtol=1e-14)
    ga, gb = grad_of(lambda a, b: np.sum(a ** b), x + 3.0, np.full(5, 1.5))  # (y kept)
    np.testing.assert_allclose(gb, (x + 3.0) ** 1.5 * np.log(x + 3.0), rtol=1e-12)


def test_unary_scalars_and_lists():
    for f in (np.exp, np.tanh, np.sqrt, np.arctan, np.abs, np.sinc):
        check_rule(lambda x: f(x) * 2.0, 0.7)
        check_rule(lambda x: f(x), np.float64(0.7))
        check_rule(lambda x: f(x), np.float32(0.7))
        check_rule(lambda x: f(x), [0.5, 0.7])
        check_rule(lambda x: f(x), [[0.5], [0.75]])
    g = grad_of(lambda x: np.exp(x), np.float32(0.5))[0]
    assert type(g) is np.float32
    assert type(bytegrad.gradient(lambda x: np.sin(x) * 1.0, 0.5)[0]) in (float, np.float64)
    assert grad_of(lambda x: np.exp(x), [1, 2.0])[0] == [None, pytest.approx(np.exp(2.0))]


def test_integer_arguments_have_no_gradient():
    i = np.arange(1, 4)
    for f in (np.exp, np.sqrt, np.abs, np.sign, np.negative, np.square):
        assert grad_of(lambda x: f(x), i) == (None,)
    assert grad_of(lambda a, b: np.multiply(a, b), i, 2.0)[0] is None
    assert grad_of(lambda a, b: np.maximum(a, b), i, np.ones(3))[0] is None
    assert grad_of(lambda a, b: a * b, np.arange(3) > 0, np.ones(3))[0] is None
    assert grad_of(lambda x: np.exp(x), [1, 2]) == ([None, None],)  # ints get None; the list is mirrored


def test_special_points():
    assert grad_of(lambda x: np.sinc(x), np.array([0.0]))[0] == [0.0]
    assert grad_of(lambda x: np.abs(x), np.array([0.0, -2.0]))[0].tolist() == [0.0, -1.0]
    for f in (np.abs, abs):
        assert grad_of(lambda x: f(x), np.array([0j, 3 + 4j]))[0] == pytest.approx([0, 0.6 + 0.8j])
    assert grad_of(lambda x: np.angle(x), np.array([0j]))[0].tolist() == [0j]
    assert [g.tolist() for g in grad_of(lambda a, b: np.hypot(a, b), np.zeros(2), np.zeros(2))] == [[0, 0], [0, 0]]
    ga, gb = grad_of(lambda a, b: np.arctan2(a, b), np.array([0.0, 1.0]), np.zeros(2))
    assert ga.tolist() == [0, 0] and gb.tolist() == [0, -1]
    with np.errstate(divide="ignore"):
        assert grad_of(lambda x: np.sqrt(x), np.array([0.0]))[0] == [np.inf]


def test_sign_real_and_complex():
    assert grad_of(lambda x: np.sign(x) * x, np.array([-2.0, 3.0]))[0].tolist() == [-1, 1]
    assert grad_of(lambda x: np.sign(x), np.array([-2.0, 3.0])) == (None,)
    check_rule(lambda z: np.sign(z), rand((3,), 0.2, 1, np.complex128))
    assert grad_of(lambda z: np.sign(z), np.array([0j]))[0].tolist() == [0j]


def test_real_imag_conj_angle_and_methods():
    z = rand((2, 3), -1, 1, np.complex128)
    for f in (np.real, np.imag, np.conj, np.angle, lambda z: np.angle(z, True),
              lambda z: np.angle(z, deg=True), lambda z: z.conj(), lambda z: z.conjugate()):
        check_rule(lambda z: f(z), z)
    check_rule(lambda z: np.imag(z), 0.5 + 0.25j)
    x = rand((3,), -1, 1)
    check_rule(lambda x: x.conj() * 2.0 + x.conjugate(), x)
    assert grad_of(lambda x: np.imag(x), x) == (None,)
    assert grad_of(lambda x: np.angle(x), x) == (None,)


# (function, domain of the first argument, of the second)
BINARY = [
    (np.add, (-3, 3), (-3, 3)), (np.subtract, (-3, 3), (-3, 3)),
    (np.multiply, (-3, 3), (-3, 3)), (np.divide, (-3, 3), (0.5, 3)),
    (np.true_divide, (-3, 3), (-3, -0.5)), (np.power, (0.3, 3), (-2, 2)),
    (np.float_power, (0.3, 3), (-2, 2)), (np.arctan2, (-3, 3), (0.3, 3)),
    (np.hypot, (0.3, 3), (-3, -0.3)), (np.logaddexp, (-3, 3), (-3, 3)),
    (np.logaddexp2, (-3, 3), (-3, 3)), (np.copysign, (0.3, 3), (-3, 3)),
    (np.maximum, (-3, 3), (-3, 3)), (np.minimum, (-3, 3), (-3, 3)),
    (np.fmax, (-3, 3), (-3, 3)), (np.fmin, (-3, 3), (-3, 3)),
    (operator.add, (-3, 3), (-3, 3)), (operator.sub, (-3, 3), (-3, 3)),
    (operator.mul, (-3, 3), (-3, 3)), (operator.truediv, (-3, 3), (0.5, 3)),
    (operator.pow, (0.3, 3), (-2, 2)),
]


@pytest.mark.parametrize("f, da, db", BINARY, ids=[b[0].__name__ for b in BINARY])
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       dtype=DTYPES, seed=st.integers(0, 2 ** 16))
def test_binary_broadcasting(f, da, db, shapes, dtype, seed):
    sa, sb = shapes.input_shapes
    a, b = rand(sa, *da, dtype, seed), rand(sb, *db, dtype, seed + 1)
    check_rule(lambda a, b: f(a, b), a, b)


@pytest.mark.parametrize("f", [np.remainder, np.mod, np.fmod, operator.mod])
@SETTINGS
@given(sb=st.sampled_from([(), (4,), (3, 1), (3, 4)]), dtype=DTYPES, seed=st.integers(0, 2 ** 16))
def test_remainders(f, sb, dtype, seed):
    rng = np.random.default_rng(seed)
    b = rng.choice([-1.5, 1.25, 2.5], sb)
    a = b * (rng.integers(-3, 4, (3, 4)) + rng.uniform(0.2, 0.8, (3, 4)))  # away from the jumps
    check_rule(lambda a, b: f(a, b), a.astype(dtype), b.astype(dtype))


def test_remainder_gradient_values():
    ga, gb = grad_of(lambda a, b: np.remainder(a, b), np.array([7.5, -7.5]), np.array([2.0, 2.0]))
    assert ga.tolist() == [1, 1] and gb.tolist() == [-3, 4]
    ga, gb = grad_of(lambda a, b: np.fmod(a, b), np.array([7.5, -7.5]), np.array([2.0, 2.0]))
    assert ga.tolist() == [1, 1] and gb.tolist() == [-3, 3]
    ga, gb = grad_of(lambda a, b: a % b, np.array([7.5, -7.5]), 2.0)
    assert ga.tolist() == [1, 1] and gb == 1.0


def test_binary_scalars_lists_and_mixed_dtypes():
    x32 = rand((2, 3), -1, 1, np.float32)
    for f in (np.add, np.multiply, np.divide, np.maximum, np.logaddexp, np.hypot,
              operator.mul, operator.truediv, operator.sub, operator.add):
        check_rule(lambda a, b: f(a, b), x32, 1.5)
        check_rule(lambda a, b: f(a, b), 1.5, x32)
        check_rule(lambda a, b: f(a, b), x32, np.float32(1.5))
        check_rule(lambda a, b: f(a, b), x32, rand((3,), 1, 2))  # float32 with float64
        check_rule(lambda a, b: f(a, b), x32, [1.5, 2.0, 2.5])
        check_rule(lambda a, b: f(a, b), np.float64(0.5), 2.0)
    g = grad_of(lambda a, b: a * b, x32, np.float32(2))
    assert g[0].dtype == np.float32 and type(g[1]) is np.float32
    g = grad_of(lambda a, b: np.multiply(a, b), x32, rand((3,), 1, 2))
    assert g[0].dtype == np.float32 and g[1].dtype == np.float64
    ga, gb = grad_of(lambda a, b: np.add(a, b), [1.0, 2.0], [3.0])  # not concatenation
    assert ga == [1.0, 1.0] and gb == [2.0]
    ga, gb = grad_of(lambda a, b: a + b, [1.0, 2.0], np.ones(2))
    assert ga == [1.0, 1.0] and gb.tolist() == [1.0, 1.0]
    ga, gb = grad_of(lambda a, b: a * b, [1.0, 2.0], np.full(2, 3.0))
    assert ga == [3.0, 3.0] and gb.tolist() == [1.0, 2.0]


MIXED = {
    "float": 1.3, "int": 2, "float32": np.float32(1.7), "float64": np.float64(0.8),
    "complex64": np.complex64(0.5 + 0.6j), "complex": 0.7 + 0.4j,
    "array32": np.array([[1.2, 0.6, 1.9]], np.float32), "array64": np.array([[0.9], [1.4]]),
    "array128": np.array([0.6 + 0.3j, 1.1 - 0.5j, 0.8 + 0.2j]), "int array": np.array([1, 2, 3]),
    "list": [1.1, 0.7, 1.6]}


@pytest.mark.parametrize("f", [operator.add, operator.sub, operator.mul, operator.truediv,
                               operator.pow, np.add, np.multiply, np.divide, np.power])
def test_operand_kinds_mixed(f):
    """Every pair of operand kinds NumPy and Python combine, broadcasting included."""
    for a, b in itertools.product(MIXED.values(), repeat=2):
        if isinstance(a, list) and not isinstance(b, np.ndarray) or \
                isinstance(b, list) and not isinstance(a, np.ndarray):
            continue  # list arithmetic, not NumPy's
        try:
            with np.errstate(all="ignore"):
                y = f(a, b)
        except TypeError:
            continue
        if np.all(np.isfinite(y)):
            check_rule(lambda a, b: f(a, b), a, b)


def test_binary_complex():
    z, w = rand((2, 3), -1, 1, np.complex128), rand((3,), 0.5, 1, np.complex128, 1)
    for f in (np.add, np.subtract, np.multiply, np.divide, np.power, np.float_power,
              operator.add, operator.sub, operator.mul, operator.truediv, operator.pow):
        check_rule(lambda a, b: f(a, b), z, w)
        check_rule(lambda a, b: f(a, b), w, 2.0)
        check_rule(lambda a, b: f(a, b), rand((3,), 0.5, 1), 1.5 - 0.5j)
    check_rule(lambda a, b: a * b, z.astype(np.complex64), 1j)


def test_power_special_points():
    x = np.array([0.0, 2.0, -2.0])
    ga, gb = grad_of(lambda a, b: np.power(a, b), x, np.array([0.0, 3.0, 3.0]))
    assert ga.tolist() == [0, 12, 12]
    assert np.allclose(gb, [0, 8 * np.log(2), -8 * np.log(2)])
    ga, gb = grad_of(lambda a, b: a ** b, x, 2.0)
    assert ga.tolist() == [0, 4, -4] and gb == pytest.approx(8 * np.log(2))
    assert grad_of(lambda a: a ** 0, x)[0] is None
    assert grad_of(lambda a: np.power(a, 0.5), np.array([4.0]))[0] == [0.25]
    assert grad_of(lambda b: 2.0 ** b, np.array([3.0]))[0] == pytest.approx([8 * np.log(2)])
    check_rule(lambda a, b: np.power(a, b), rand((3,), 0.5, 2), [1.0, 2.0, 3.0])
    check_rule(lambda a: a ** 3, rand((3,), -2, 2, np.float32))
    check_rule(lambda a: np.float_power(a, 3), rand((3,), -2, 2, np.float32))


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
       dtype=DTYPES, seed=st.integers(0, 2 ** 16))
def test_where(shapes, dtype, seed):
    sc, sa, sb = shapes.input_shapes
    rng = np.random.default_rng(seed)
    cond = rng.random(sc) > 0.5
    a, b = rand(sa, -2, 2, dtype, seed), rand(sb, -2, 2, dtype, seed + 1)
    check_rule(lambda c, a, b: np.where(c, a, b), cond, a, b)
    check_rule(lambda a, b: np.where(a > 0, a, b * 2.0), a, b)
    check_rule(lambda a: np.where(a > 0, a, 0.0), a)


def test_where_values():
    ga, gb = grad_of(lambda a, b: np.where([True, False], a, b), np.ones(2), 5.0)
    assert ga.tolist() == [1, 0] and gb == 1.0
    assert grad_of(lambda x: np.where(x > 0)[0] * 1.0, np.array([1.0, -1.0])) == (None,)


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=2, max_side=3),
       dtype=DTYPES, seed=st.integers(0, 2 ** 16))
def test_clip(shapes, dtype, seed):
    sx, sl, sh = shapes.input_shapes
    x, lo, hi = rand(sx, -3, 3, dtype, seed), rand(sl, -2, -0.5, dtype, seed + 1), \
        rand(sh, 0.5, 2, dtype, seed + 2)
    check_rule(lambda x, lo, hi: np.clip(x, lo, hi), x, lo, hi)
    check_rule(lambda x, lo, hi: x.clip(lo, hi), x, lo, hi)
    check_rule(lambda x: np.clip(x, -1.0, 1.0), x)
    check_rule(lambda x, hi: np.clip(x, None, hi), x, hi)
    check_rule(lambda x, lo: x.clip(lo), x, lo)
    check_rule(lambda x: np.clip(x, a_min=-1.0, a_max=1.0), x)
    check_rule(lambda x: x.clip(max=1.0), x)


def test_clip_bounds_and_nan():
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, np.nan])
    gx, glo, ghi = grad_of(lambda x, lo, hi: np.clip(x, lo, hi), x, -1.0, 1.0)
    assert gx.tolist() == [0, 1, 1, 1, 0, 1] and glo == 1.0 and ghi == 1.0
    gx, glo, ghi = grad_of(lambda x, lo, hi: np.clip(x, lo, hi), np.array([0.5]), 1.0, -1.0)
    assert gx.tolist() == [0] and glo == 0.0 and ghi == 1.0  # lo > hi: NumPy returns hi
    lo = np.array([-1.0, np.nan])
    gx, glo = grad_of(lambda x, lo: np.clip(x, lo, None), np.array([0.0, 0.0]), lo)
    assert gx.tolist() == [1, 0] and glo.tolist() == [0, 1]


def test_max_min_ties_and_nan():
    a = np.array([1.0, 2.0, 3.0, np.nan, 1.0, np.nan])
    b = np.array([1.0, 3.0, 2.0, 1.0, np.nan, np.nan])
    expected = {  # which argument gets the gradient
        np.maximum: ([1, 0, 1, 1, 0, 1]), np.minimum: ([1, 1, 0, 1, 0, 1]),
        np.fmax: ([1, 0, 1, 0, 1, 1]), np.fmin: ([1, 1, 0, 0, 1, 1])}
    for f, ea in expected.items():
        ga, gb = grad_of(lambda a, b: f(a, b), a, b)
        assert ga.tolist() == ea and gb.tolist() == [1 - e for e in ea], f


def test_out_and_where_keywords():
    x = rand((3,), 0.5, 1)
    out = np.empty(3)
    for call in (lambda x: np.exp(x, out), lambda x: np.exp(x, where=x > 0.7),
                 lambda x: x.clip(0, 1, out)):  # out given positionally; where=
        with pytest.raises(TypeError, match="out= .*not differentiable yet"):
            bytegrad.pullback(call, x)
    for call in (lambda x: np.exp(x, out=out) * x, lambda x: np.add(x, 1.0, out=out) ** 2,
                 lambda x: np.maximum(x, 0.5, out=(out,)) * x, lambda x: np.clip(x, 0, 1, out=out) * x):
        check_rule(call, x)  # an out= keyword is a write into the array: see tests/primitives/test_mutation.py
    check_rule(lambda x: np.exp(x, out=None) + np.sin(x, dtype=np.float32), x)

    def plain(x):
        np.exp(np.arange(3), out=out)  # no differentiable argument: runs plainly
        return np.exp(x) * out
    check_rule(plain, x)


@pytest.mark.filterwarnings("ignore:numpy.fix is deprecated:DeprecationWarning")  # (NumPy 2.5)
def test_nondifferentiable_functions():
    x = np.array([-1.7, -0.2, 0.4, 2.6])
    for f in (np.floor, np.ceil, np.trunc, np.rint, np.fix, np.round, np.around,
              lambda x: x.round(), lambda x: np.round(x, 1), lambda x: np.floor_divide(x, 0.7),
              lambda x: x // 0.7, lambda x: np.isnan(x), lambda x: np.greater(x, 0),
              lambda x: np.logical_and(x > 0, x < 2), lambda x: np.isclose(x, 0.4),
              lambda x: np.signbit(x), lambda x: np.equal(x, x)):
        assert grad_of(lambda x: f(x) * 1.0, x) == (None,)
        g = grad_of(lambda x: f(x) * x, x)[0]
        assert np.allclose(g, f(x))


def with_specials(shape, dtype, seed):
    """A random array with NaN, inf and -inf at random places (in either part of a
    complex number)."""
    rng = np.random.default_rng(seed)
    x = rand(shape, -2, 2, dtype, seed)
    specials = rng.choice([np.nan, np.inf, -np.inf, 0.0], shape, p=[0.2, 0.2, 0.2, 0.4])
    x += specials.astype(x.real.dtype)
    if x.dtype.kind == "c":
        x.imag += rng.permutation(specials.reshape(-1)).reshape(shape)
    return x


@SETTINGS
@given(shape=SHAPES, dtype=st.sampled_from([np.float64, np.float32, np.complex128]),
       seed=st.integers(0, 2 ** 16))
def test_nan_to_num(shape, dtype, seed):
    x = with_specials(shape, dtype, seed)
    # finite replacements: the default posinf (the largest float) swamps finite differences
    check_rule(lambda x, v, p, n: np.nan_to_num(x, nan=v, posinf=p, neginf=n), x, 0.5, 2.0, -3.0)
    check_rule(lambda x, v, p, n: np.nan_to_num(x, True, v, p, n), x, 0.5, 2.0, -3.0)
    check_rule(lambda x, v: np.nan_to_num(x + x, posinf=v, neginf=v) * v, x, 1.5)
    check_rule(lambda x: np.sum(np.nan_to_num(x) * np.isfinite(x)), x)


def test_nan_to_num_values():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 2.0])
    gx, gv = grad_of(lambda x, v: np.nan_to_num(x, nan=v, posinf=2 * v, neginf=-v), x, 3.0)
    assert gx.tolist() == [1, 0, 0, 0, 1] and gv == 1 + 2 - 1
    gx, gn = grad_of(lambda x, n: np.nan_to_num(x, copy=True, neginf=n), x.astype(np.float32),
                     np.float32(1.0))
    assert gx.dtype == np.float32 and gx.tolist() == [1, 0, 0, 0, 1] and type(gn) is np.float32
    z = np.array([complex(np.nan, 1.0), complex(2.0, np.inf)])
    gz, gv = grad_of(lambda z, v: np.nan_to_num(z, nan=v, posinf=v), z, 1.0, d=np.array([1 + 2j, 3 + 4j]))
    assert gz.tolist() == [2j, 3] and gv == 1 + 4  # real parts' gradient to real, imaginary to imaginary
    assert grad_of(lambda x: np.nan_to_num(x), [1.0, np.nan]) == ([1.0, 0.0],)
    assert grad_of(lambda x: np.nan_to_num(x), np.inf)[0] == 0.0
    assert grad_of(lambda x: np.nan_to_num(x), 2.5)[0] == 1.0
    assert grad_of(lambda x, v: np.nan_to_num(x, nan=v), np.arange(3), 1.0) == (None, None)
    with pytest.raises(TypeError, match=r"np.nan_to_num\(\): .*unexpected keyword argument 'nam'"):
        grad_of(lambda x: np.nan_to_num(x, nam=1.0), x)


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)),
                                    ((4, 2, 3), (3,)), ((3,), (4, 3, 2)), ((4, 2, 3), (3, 2)),
                                    ((1, 2, 3), (4, 3, 2)), ((2, 3), (4, 3, 2))])
def test_matmul_operator(shapes):
    a, b = rand(shapes[0], -1, 1, seed=1), rand(shapes[1], -1, 1, seed=2)
    check_rule(lambda a, b: a @ b, a, b)
    check_rule(lambda a, b: a @ b, a.astype(np.float32), b.astype(np.float32))
    check_rule(lambda a, b: a @ b, a + 1j * a[..., ::-1], b)


def test_unary_operators():
    x = rand((2, 3), -2, 2, np.float32)
    for f in (operator.neg, operator.pos, abs, lambda x: x ** 2, lambda x: 2.0 ** x,
              lambda x: abs(x) ** 2.5, lambda x: 1.0 / x):
        check_rule(lambda x: f(x), x)
        check_rule(lambda x: f(x), np.float32(0.7))
    g = grad_of(lambda x: abs(x), np.float32(-0.7))[0]
    assert g == -1 and type(g) is np.float32
    check_rule(lambda z: abs(z) - z, rand((3,), -1, 1, np.complex64))


# -- Fused kernels: the same gradients as the NumPy expressions, large arrays only.

KERNELS = [(f, lo, hi) for fs, _, _, fuse in npe.UNARY if fuse for f in fs
           for _, lo, hi, _ in [next(u for u in UNARY if u[0] is f)]]


@pytest.mark.parametrize("f, lo, hi", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_kernels_match_numpy(f, lo, hi, monkeypatch):
    for dtype in (np.float64, np.float32):
        x = rand((4, 3000), lo, hi, dtype)
        d = rand(x.shape, -1, 1, dtype, 1)
        monkeypatch.setattr(_util, "BIG", 100)
        fast = grad_of(lambda x: f(x), x, d=d)[0]
        monkeypatch.setattr(_util, "BIG", 10 ** 9)
        slow = grad_of(lambda x: f(x), x, d=d)[0]
        monkeypatch.undo()
        assert fast.dtype == dtype and slow.dtype == dtype
        np.testing.assert_allclose(fast, slow, rtol=1e-5 if dtype == np.float32 else 1e-12)
        strided = grad_of(lambda x: f(x), x[:, ::2], d=d[:, ::2])[0]  # the NumPy path
        np.testing.assert_allclose(strided, slow[:, ::2], rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_selection_and_abs_kernels_match_numpy(dtype, monkeypatch):
    x = rand((20000,), -3, 3, dtype)
    x[::7] = 0.5
    x[::11] = np.nan
    d = rand(x.shape, -1, 1, dtype, 1)
    cases = [lambda x: np.maximum(x, 0.5), lambda x: np.minimum(x, 0.5),
             lambda x: np.fmax(x, 0.5), lambda x: np.fmin(x, 0), lambda x: np.clip(x, -1, 0.5),
             lambda x: x.clip(None, 0.5), lambda x: np.abs(x), lambda x: abs(x),
             lambda x: np.maximum(x, x[::-1]), lambda x: np.fmin(x[::-1], x),
             lambda x: np.clip(x, x[::-1], 1.0), lambda x: np.where(x > 0, x, x * 2)]
    for f in cases:
        fast = grad_of(f, x, d=d)[0]
        monkeypatch.setattr(_util, "BIG", 10 ** 9)
        slow = grad_of(f, x, d=d)[0]
        monkeypatch.undo()
        assert fast.dtype == dtype
        np.testing.assert_array_equal(fast, slow)


def test_kernel_division_by_zero_is_inf_not_an_error():
    x = np.zeros(20000)
    with np.errstate(divide="ignore"):
        assert np.all(grad_of(lambda x: np.sqrt(x), x)[0] == np.inf)


def test_import_loads_neither_numba_nor_scipy():
    code = ("import sys, bytegrad, bytegrad.primitives.np_elementwise; "
            "assert 'numba' not in sys.modules and 'scipy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_scipy_special(monkeypatch):
    import scipy.special as special  # a dev dependency: the rules exist for it
    for f, lo, hi in ((special.expit, -4, 4), (special.logit, 0.1, 0.9),
                      (special.log_expit, -4, 4)):
        for dtype in (np.float64, np.float32):
            check_rule(lambda x: f(x), rand((2, 3), lo, hi, dtype))
        check_rule(lambda x: f(x), 0.3)
        x = rand((3, 4000), lo, hi)
        fast = grad_of(f, x)[0]
        monkeypatch.setattr(_util, "BIG", 10 ** 9)
        np.testing.assert_allclose(fast, grad_of(f, x)[0], rtol=1e-12)
        monkeypatch.undo()


def test_scipy_special_erf_gammaln_logsumexp():
    import scipy.special as special
    for f, lo, hi in ((special.erf, -2, 2), (special.erfc, -2, 2), (special.gammaln, 0.2, 6)):
        check_rule(lambda x: f(x), rand((2, 3), lo, hi, np.float64))
    x = rand((3, 4), -2, 2, np.float64)
    check_rule(lambda x: special.logsumexp(x), x)
    check_rule(lambda x: special.logsumexp(x, axis=1), x)
    check_rule(lambda x: special.logsumexp(x, axis=0, keepdims=True), x)
    g = bytegrad.gradient(lambda x: special.logsumexp(x), x)[0]
    np.testing.assert_allclose(g, np.exp(x) / np.exp(x).sum(), rtol=1e-13)  # softmax


@pytest.mark.parametrize("name, lo, hi", [
    ("digamma", 0.3, 5), ("gamma", 0.3, 4), ("gamma", -2.7, -2.2), ("rgamma", -3.5, 4),
    ("erfinv", -0.9, 0.9), ("erfcinv", 0.1, 1.9), ("j0", -6, 6), ("j1", -6, 6), ("y0", 0.3, 6),
    ("y1", 0.3, 6), ("i0", -3, 3), ("i1", -3, 3)])
def test_scipy_special_unary(name, lo, hi):
    f = getattr(special, name)
    check_rule(lambda x: f(x), rand((2, 3), lo, hi))
    check_rule(lambda x: f(x), rand(4, lo, hi, np.float32))
    check_rule(lambda x: f(x), float(rand((), lo, hi)))


@pytest.mark.parametrize("name, order, lo, hi", [
    ("polygamma", 0, 0.3, 4), ("polygamma", 2, 0.3, 4), ("jv", 2.5, 0.1, 6), ("jv", 0, -6, 6),
    ("yn", 0, 0.3, 6), ("yn", 3, 0.5, 6), ("iv", 1.5, 0.1, 3), ("iv", 2, -3, 3), ("ive", 0.5, 0.1, 3),
    ("ive", 3, -3, 3)])
def test_scipy_special_of_an_order(name, order, lo, hi):
    f = getattr(special, name)
    x = rand((2, 3), lo, hi)
    # a float order that reaches the call as a variable is differentiable, and its gradient is
    # refused (see the next tests) unless it is made a constant
    check_rule(lambda x: f(bytegrad.stop_gradient(order), x), x)
    orders = np.array([[order], [order + 1]])  # broadcast against x
    if name in ("polygamma", "yn"):  # integer orders: no gradient
        assert bytegrad.gradient(lambda n, x: np.sum(f(n, x)), orders, x)[0] is None
    check_rule(lambda x: f(bytegrad.stop_gradient(orders), x), x)


def test_scipy_special_holomorphic_bessel_of_complex_x():
    z = rand((2, 3), 0.5, 3, np.complex128)
    check_rule(lambda z: special.jv(1.5, z), z)
    check_rule(lambda z: special.iv(2, z), z)


def test_scipy_special_closed_forms():
    x = rand(5, 0.5, 4)
    for f, expected in ((lambda x: special.j0(x), -special.j1(x)),
                        (lambda x: special.i0(x), special.i1(x)),
                        (lambda x: special.y0(x), -special.y1(x)),
                        (lambda x: special.digamma(x), special.polygamma(1, x)),
                        (lambda x: special.gammaln(x), special.digamma(x)),
                        (lambda x: special.erfinv(special.erf(x)), np.ones(5))):
        np.testing.assert_allclose(grad_of(f, x)[0], expected, rtol=1e-10)
    # d/dx 1/gamma(x) at its zeros x = -n is (-1)^n n!
    poles = np.array([0.0, -1.0, -2.0, -3.0])
    np.testing.assert_allclose(grad_of(lambda x: special.rgamma(x), poles)[0], [1, -1, 2, -6])
    check_rule(lambda x: special.rgamma(x), poles)
    # P(a, x) + Q(a, x) = 1, and dP/dx is the gamma density
    np.testing.assert_allclose(grad_of(lambda x: special.gammainc(2.5, x) + special.gammaincc(2.5, x),
                                       x)[0], 0, atol=1e-15)
    np.testing.assert_allclose(grad_of(lambda x: special.gammainc(1.0, x), x)[0], np.exp(-x))
    # I_x(1, 1) = x, I_x(2, 1) = x^2
    u = x / 5
    np.testing.assert_allclose(grad_of(lambda u: special.betainc(1.0, 1.0, u), u)[0], 1)
    np.testing.assert_allclose(grad_of(lambda u: special.betainc(2.0, 1.0, u), u)[0], 2 * u)


def test_scipy_special_of_two_arguments():
    a, b = rand((2, 3), 0.3, 3), rand((3,), 0.3, 3, seed=1)
    for f in (special.xlogy, special.xlog1py, special.beta, special.betaln):
        check_rule(lambda a, b: f(a, b), a, b)
        check_rule(lambda a, b: f(a, b), 1.5, 0.7)
    check_rule(lambda a, b: special.xlogy(a, b), a - 1.5, b)
    check_rule(lambda a, b: special.xlog1py(a, b), a - 1.5, b - 0.9)
    check_rule(lambda a, b: special.xlogy(a, b), rand(3, 0.5, 2, np.complex128),
               rand(3, 0.5, 2, np.complex128, seed=2))
    check_rule(lambda a, b: special.beta(a, b), rand(3, -2.8, -2.2), rand(3, 0.2, 0.7))
    check_rule(lambda x: special.betainc(2.5, 0.7, x), rand((2, 3), 0.05, 0.95))
    check_rule(lambda x: special.gammainc(0.5, x), rand(4, 0.1, 4))
    check_rule(lambda x: special.gammaincc(3.0, x), rand(4, 0.1, 4))


def test_scipy_xlogy_at_zero_follows_the_xlogy_0_y_convention():
    for f, at in ((special.xlogy, 0.0), (special.xlog1py, -1.0)):
        # x = 0, y regular: the true partials (d/dx = log y, d/dy = 0), checked by differences
        assert bytegrad.gradient(lambda x, y: f(x, y), 0.0, at + 2.0) == (np.log(2.0), 0.0)
        check_rule(lambda x, y: f(x, y), np.array([0.0, 0.0, 1.5]), np.array([at + 2.0, at + 0.5, at + 3.0]))
        # x = 0 where log y is -inf: f(0, y) = 0 for every y, and the x-partial is taken 0 too
        assert bytegrad.gradient(lambda x, y: f(x, y), 0.0, at) == (0.0, 0.0)
        g = bytegrad.gradient(lambda p: np.sum(f(p, p + at)), np.array([0.0, 0.5]))[0]
        np.testing.assert_allclose(g, [0.0, np.log(0.5) + 1])  # d/dp (p log p) = log p + 1


def test_scipy_gammasgn_is_piecewise_constant():
    x = np.array([-3.7, -2.5, -1.2, -0.4, 0.3, 2.2, 9.0])
    assert bytegrad.gradient(lambda x: np.sum(special.gammasgn(x)), x) == (None,)
    g, = bytegrad.gradient(lambda x: np.sum(x * special.gammasgn(x)), x)
    np.testing.assert_array_equal(g, special.gammasgn(x))
    for h in (1e-3, 1e-6):  # the finite differences agree: away from the poles it is flat
        np.testing.assert_array_equal(special.gammasgn(x + h) - special.gammasgn(x - h), 0)


@pytest.mark.parametrize("name, refused, call", [
    ("betainc", "a", lambda a: special.betainc(a, 2.0, 0.25)),
    ("betainc", "b", lambda b: special.betainc(1.5, b, 0.25)),
    ("gammainc", "a", lambda a: special.gammainc(a, 0.25)),
    ("gammaincc", "a", lambda a: special.gammaincc(a, 0.25)),
    ("jv", "v", lambda v: special.jv(v, 0.25)), ("iv", "v", lambda v: special.iv(v, 0.25)),
    ("ive", "v", lambda v: special.ive(v, 0.25))])
def test_scipy_special_refuses_the_gradients_it_does_not_have(name, refused, call):
    with pytest.raises(NotImplementedError, match=f"{name}: the gradient with respect to {refused} is not"):
        bytegrad.gradient(call, 1.5)


def test_scipy_special_ive_refuses_complex_x():
    with pytest.raises(NotImplementedError, match=r"ive: .*complex"):
        bytegrad.gradient(lambda z: np.abs(special.ive(1.0, z)), 1.0 + 1.0j)


@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), (0, True), ((0, 2), False),
                                            (-1, True)])
def test_scipy_logsumexp_with_b_and_return_sign(axis, keepdims):
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    kw = dict(axis=axis, keepdims=keepdims)
    check_rule(lambda a, b: special.logsumexp(a, b=b, return_sign=True, **kw), a, b)
    check_rule(lambda a, b: special.logsumexp(a, b=np.abs(b), **kw), a, b)
    check_rule(lambda a, b: special.logsumexp(a, b=b[0], return_sign=True, **kw), a, b)  # broadcast
    z, c = a + 1j * b, b - 0.5j * a
    check_rule(lambda z, c: special.logsumexp(z, b=c, **kw), z, c)
    check_rule(lambda z, c: special.logsumexp(z, b=c, return_sign=True, **kw), z, c)
    check_rule(lambda z: special.logsumexp(z, **kw), z)


def test_scipy_logsumexp_closed_forms():
    a, b = np.array([0.5, -1.0, 2.0]), np.array([1.0, -2.0, 0.5])
    s = np.sum(b * np.exp(a))
    ga, gb = bytegrad.gradient(lambda a, b: special.logsumexp(a, b=b, return_sign=True)[0], a, b)
    np.testing.assert_allclose(ga, b * np.exp(a) / s)  # d log|s| = ds / s
    np.testing.assert_allclose(gb, np.exp(a) / s)
    # the sign of a real sum is piecewise constant: it carries no gradient
    g, = bytegrad.gradient(lambda a: special.logsumexp(a, b=b, return_sign=True)[1], a)
    assert g is None or np.all(g == 0)
    # without return_sign a negative sum is NaN, and so is its gradient
    with np.errstate(invalid="ignore"):
        g, = bytegrad.gradient(lambda a: special.logsumexp(a, b=-np.abs(b)), a)
    assert np.all(np.isnan(g))


# ---------------------------------------------------------------------------
# nan_to_num
# ---------------------------------------------------------------------------

# -- np.nan_to_num

_NX = np.array([1.0, np.nan, np.inf, -np.inf, 2.0, np.nan])
_NW = np.arange(1, 7.0)


@pytest.mark.regression
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_to_num_values_positional_and_keyword():
    for f in (lambda x, n, p, m: np.sum(_NW * np.nan_to_num(x, nan=n, posinf=p, neginf=m)),
              lambda x, n, p, m: np.sum(_NW * np.nan_to_num(x, True, n, p, m)),
              lambda x, n, p, m: np.sum(_NW * np.nan_to_num(x=x, nan=n, posinf=p, neginf=m))):
        g = bytegrad.gradient(f, _NX, 0.5, 9.0, -9.0)
        assert np.array_equal(g[0], [1, 0, 0, 0, 5, 0]) and g[1:] == (8.0, 3.0, 4.0)
    g = bytegrad.gradient(lambda x: np.sum(_NW * np.nan_to_num(x)), _NX)
    assert np.array_equal(g[0], [1, 0, 0, 0, 5, 0])
    assert bytegrad.gradient(lambda s, n: np.nan_to_num(s, nan=n) * 3, float("nan"), 0.5) == (0.0, 3.0)
    assert bytegrad.gradient(lambda s, n: np.nan_to_num(s, nan=n) * 3, 2.0, 0.5) == (3.0, 0.0)
    assert bytegrad.gradient(lambda s, n: np.sum(np.nan_to_num([s, np.nan], nan=n)), 2.0, 0.5) == (1.0, 1.0)
    g = bytegrad.gradient(lambda s, n: np.sum(np.nan_to_num(s, nan=n)), _NX.astype(np.float32), 0.5)
    assert g[0].dtype == np.float32 and g[1] == 2.0
    assert bytegrad.gradient(lambda s, n: np.sum(np.nan_to_num(s, nan=n)), np.arange(3), 0.5) == (None, None)


@pytest.mark.regression
def test_nan_to_num_complex():
    nan, inf = np.nan, np.inf
    w = np.array([1 + 1j, 2 - 0.5j, 0.3 + 2j])
    x = np.array([1 + 2j, complex(3, nan), complex(nan, -1)])

    def f(x, n):
        return np.sum(np.abs(w * np.nan_to_num(x, nan=n)) ** 2)
    g = bytegrad.gradient(f, x, 0.5)
    h = 1e-6

    def fd(i, unit):
        e = np.zeros(3, complex)
        e[i] = unit * h
        return (f(x + e, 0.5) - f(x - e, 0.5)) / (2 * h)
    assert np.allclose(g[0], [fd(0, 1) + 1j * fd(0, 1j), fd(1, 1), 1j * fd(2, 1j)], atol=1e-6)
    assert np.isclose(g[1], (f(x, 0.5 + h) - f(x, 0.5 - h)) / (2 * h))
    xc = np.array([1 + 1j, complex(nan, 2), complex(3, inf), complex(-inf, nan), complex(2, -inf)])
    wc = np.array([1, 2 - 1j, 3j, 4, 0.5 + 1j])
    check_grad(lambda n, p, m: np.sum(np.abs(wc * np.nan_to_num(xc, nan=n, posinf=p, neginf=m)) ** 2),
               0.5, 2.0, -3.0)


@pytest.mark.regression
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_to_num_copy_false():
    def temp(x, n):
        y = x * 2
        np.nan_to_num(y, copy=False, nan=n)
        return np.sum(_NW * y)
    g = bytegrad.gradient(temp, _NX, 0.5)
    assert np.array_equal(g[0], [2, 0, 0, 0, 10, 0]) and g[1] == 8.0

    def returned(x, n):
        y = x * 2
        z = np.nan_to_num(y, copy=False, nan=n)
        return np.sum(_NW * z) + np.sum(y[[0, 4]])
    g = bytegrad.gradient(returned, _NX, 0.5)
    assert np.array_equal(g[0], [4, 0, 0, 0, 12, 0]) and g[1] == 8.0

    def view(x, n):
        y = x * 2
        np.nan_to_num(y[1:4], copy=False, nan=n, posinf=n * 2)
        return np.sum(_NW * np.nan_to_num(y, posinf=0, neginf=0))
    g = bytegrad.gradient(view, _NX, 0.5)
    assert np.array_equal(g[0], [2, 0, 0, 0, 10, 0]) and g[1] == _NW[1] + 2 * _NW[2]

    x = _NX.copy()
    g = bytegrad.gradient(lambda x, n: np.sum(np.nan_to_num(x, copy=False, nan=n) * _NW), x, 0.5)
    assert np.array_equal(g[0], [1, 0, 0, 0, 5, 0]) and g[1] == 8.0
    assert np.array_equal(x, np.nan_to_num(_NX, nan=0.5))  # as a plain call leaves it
    assert bytegrad.gradient(lambda s, n: np.nan_to_num(s, copy=False, nan=n) * 3,
                             np.array(np.nan), 0.5)[1] == 3.0

    def mutated(x, n):
        a = x.copy()
        a[1] = np.nan
        b = np.nan_to_num(a, nan=n)
        a[0] = b[2] * 2
        return np.sum(np.nan_to_num(a) * b)
    check_stateful(mutated, arr(3, seed=1), 0.3)


# -- fabs, heaviside, ldexp, modf, frexp, divmod, real_if_close -------------------------

def test_fabs_heaviside_ldexp():
    x = arr(5, seed=3)
    check_rule = bytegrad.testing.check_rule
    check_rule(np.fabs, x)
    check_rule(np.heaviside, x, arr(5, seed=4))  # x1 away from 0: no gradient, as FD shows
    x1 = np.array([0.0, 1.5, 0.0, -2.0])
    g, = bytegrad.gradient(lambda x2: np.sum(np.heaviside(x1, x2) * [1.0, 2.0, 3.0, 4.0]),
                           np.full(4, 0.5))
    assert np.array_equal(g, [1.0, 0.0, 3.0, 0.0])
    assert check_rule(np.ldexp, x, np.array([1, -2, 0, 3, 2]))[1] is None
    check_rule(lambda x: np.ldexp(x, 3), x.astype(np.float32))


def test_two_output_ufuncs():
    x, y = arr(6, seed=5) * 3, arr(6, seed=6) + 4
    check_rule = bytegrad.testing.check_rule
    check_rule(np.modf, x)  # the integral part: FD away from the integers shows no gradient
    check_rule(lambda x: np.frexp(x)[0], x)
    check_rule(np.divmod, x, y)
    g, = bytegrad.gradient(lambda x: np.sum(np.frexp(x)[0]), np.array([3.0, 0.25]))
    assert np.array_equal(g, [0.25, 2.0])  # 2^-e: 3 = 0.75 * 2^2, 0.25 = 0.5 * 2^-1
    g = bytegrad.gradient(lambda a, b: np.sum(np.divmod(a, b)[1]), 7.5, 2.0)
    assert g == (1.0, -3.0)
    assert bytegrad.gradient(lambda a: np.sum(np.divmod(a, 2.0)[0]), x)[0] is None


def test_real_if_close():
    z = arr(4, np.complex128, seed=7)
    check_rule = bytegrad.testing.check_rule
    check_rule(np.real_if_close, z)
    check_rule(np.real_if_close, z.real + 0j)
    check_rule(lambda x: np.real_if_close(x, tol=1000), z.real)
