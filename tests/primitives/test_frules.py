"""Forward rules: each against central finite differences and against its reverse rule
(``check_rule`` checks both when a forward rule exists), the rule derived from a reverse
rule, registration, and the errors of a callable with no rule."""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytegrad
from bytegrad.runtime.frules import FRULES, frule_for
from bytegrad.testing import check_rule

rng = np.random.default_rng(7)
x3 = rng.standard_normal(3)
A = rng.standard_normal((3, 3)) + 3 * np.eye(3)
B = rng.standard_normal((3, 4))
SPD = A @ A.T + np.eye(3)

CASES = [
    (math.sin, 0.3), (math.exp, -0.4), (math.log, 2.5), (math.sqrt, 1.7), (math.atan2, 0.3, -1.2),
    (math.pow, 1.3, 2.2), (math.hypot, 0.3, 0.4), (operator.add, 0.5, 1.5), (operator.sub, x3, 2.0),
    (operator.mul, 0.3, 1.2), (operator.truediv, x3, 0.7), (operator.pow, 1.3, 2.5),
    (operator.pow, x3, 2), (operator.neg, x3), (operator.abs, -0.7), (operator.mod, 5.3, 1.7),
    (operator.matmul, A, B), (operator.mul, 1 + 2j, 0.5 - 1j), (abs, 3 - 4j),
    (np.exp, x3), (np.log, np.abs(x3) + 0.5), (np.tanh, x3), (np.sin, x3 + 1j * x3),
    (np.sqrt, np.abs(x3) + 0.1), (np.add, x3, A), (np.multiply, x3, A), (np.divide, A, x3 + 3),
    (np.power, np.abs(x3) + 0.1, 1.7), (np.arctan2, x3, x3 + 2), (np.hypot, x3, x3 + 1),
    (np.maximum, x3, 0.1), (np.minimum, A, x3), (np.clip, x3, -0.5, 0.5), (np.abs, x3 + 1j),
    (np.sum, A), (np.sum, A, 0), (np.mean, A, 1), (np.max, A), (np.max, A, 1), (np.min, A, 0),
    (np.prod, x3), (np.var, A), (np.std, x3), (np.cumsum, x3), (np.reshape, A, 9),
    (np.transpose, B), (np.concatenate, [x3, x3]), (np.stack, [x3, 2 * x3]), (np.flip, A),
    (np.matmul, A, B), (np.dot, x3, A), (np.outer, x3, x3), (np.kron, A, x3),
    (np.fft.fft, x3), (np.fft.rfft, x3), (np.linalg.solve, A, x3), (np.linalg.solve, A, B),
    (np.linalg.inv, A), (np.linalg.det, A), (np.linalg.slogdet, A),
    (np.linalg.norm, x3), (np.linalg.norm, B), (np.convolve, x3, x3[:2]), (np.correlate, x3, x3),
    (np.linalg.matmul, A, B), (np.linalg.multi_dot, [A, B, B.T]), (np.vecdot, x3, x3),
    (np.extract, x3 > 0, x3), (np.take_along_axis, B, np.argsort(B, 1), 1), (np.linalg.trace, A),
    (np.real_if_close, x3 + 0j), (np.float64, 1.5), (np.sort, B, 0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{getattr(c[0], '__name__', c[0])}")
def test_forward_rule_matches_finite_differences_and_reverse_rule(case):
    f, *args = case
    assert frule_for(f) is not None, f"{f} has no forward rule of its own"
    check_rule(f, *args)


def _jvp_fd(f, args, vs, h=1e-6):
    up = [a + h * v if a.dtype.kind == "f" else a for a, v in zip(map(np.asarray, args), vs)]
    down = [a - h * v if a.dtype.kind == "f" else a for a, v in zip(map(np.asarray, args), vs)]
    return (np.asarray(f(*up)) - np.asarray(f(*down))) / (2 * h)


_sym = rng.standard_normal((3, 3))


@pytest.mark.parametrize("f, args, vs", [
    (lambda c, a, b: np.where(c, a, b), (x3 > 0, x3, 2 * x3 + 1), (None, x3 + 1, x3 - 1)),
    (lambda a, b: np.einsum("ij,jk->ik", a, b), (A, B), (A.T, B + 1)),
    (np.linalg.cholesky, (SPD,), (_sym + _sym.T,)),  # (a symmetric direction)
    (np.linalg.eigvalsh, (SPD,), (_sym + _sym.T,)),  # (no forward rule: derived from the reverse one)
    # a tuple of outputs, derived per output: eigenvalues and the first eigenvector
    (lambda s: (lambda wu: np.sum(wu[0] ** 2) + np.sum(np.abs(wu[1][:, 0])))(np.linalg.eigh(s)),
     (SPD,), (_sym + _sym.T,)),
    (lambda a: np.full((2, 2), a), (1.5,), (2.0,)),  # (the shape, a tuple of ints: no tangent)
    (lambda a, w: np.average(a, weights=w), (x3, np.ones(3) + 1), (x3 + 1, x3 - 1)),
])
def test_forward_rules_of_structured_arguments(f, args, vs):
    y, dy = bytegrad.jvp(f, args, vs)
    zero = [np.zeros(np.shape(a)) if v is None else v for a, v in zip(args, vs)]
    np.testing.assert_allclose(dy, _jvp_fd(f, args, zero), rtol=1e-5, atol=1e-7)


def test_derived_forward_rule_is_the_fallback_and_agrees_with_the_reverse_rule():
    assert frule_for(np.linalg.eigvalsh) is None and frule_for(np.median) is None
    v = rng.standard_normal(3)
    for f in (np.median, np.cumprod, np.linalg.norm):
        y, dy = bytegrad.jvp(f, (x3,), (v,))
        np.testing.assert_allclose(dy, _jvp_fd(f, [x3], [v]), rtol=1e-5, atol=1e-8)


def test_derived_forward_rule_refuses_complex_values_by_name():
    assert frule_for(np.linalg.eigvals) is None
    a = np.array([[1.0, 2.0], [0.5, 3.0]]) + 0j
    with pytest.raises(bytegrad.NoForwardRuleError,
                       match=r"(?s)numpy.linalg.eigvals.*real floats.*@bytegrad.frule\(numpy.linalg.eigvals\)"):
        bytegrad.jvp(np.linalg.eigvals, (a,), (np.ones((2, 2)) + 0j,))


def test_a_c_function_without_any_rule_runs_plainly_without_tangent_and_is_refused_with_one():
    import zlib

    def f(x):
        return zlib.crc32(b"abc") * x

    y, dy = bytegrad.jvp(f, (2.0,), (1.0,))
    assert dy == zlib.crc32(b"abc")

    def g(x):
        return zlib.crc32(x)

    with pytest.raises(bytegrad.NoForwardRuleError) as e:
        bytegrad.jvp(g, (np.ones(2),), (np.ones(2),))
    msg = str(e.value)
    assert "zlib.crc32" in msg and "test_frules.py" in msg and "@bytegrad.frule(zlib.crc32)" in msg


def test_user_frule_wins_and_is_checked_by_check_rule():
    def softplus(x):
        return math.log1p(math.exp(x))

    calls = []

    @bytegrad.frule(softplus)
    def _(tangents, x):
        calls.append(x)
        (dx,) = tangents
        return softplus(x), None if dx is None else dx / (1.0 + math.exp(-x))

    @bytegrad.rule(softplus)
    def _(x):
        return softplus(x), lambda d: (None, d / (1.0 + math.exp(-x)))

    try:
        y, dy = bytegrad.jvp(lambda x: 2.0 * softplus(x), (0.3,), (1.0,))
        assert calls == [0.3]
        assert dy == pytest.approx(2.0 / (1.0 + math.exp(-0.3)))
        check_rule(softplus, 0.3)
    finally:
        del FRULES[softplus]
        from bytegrad.runtime.rules import RULES
        del RULES[softplus]


def test_check_rule_catches_a_wrong_forward_rule():
    def cube(x):
        return x ** 3

    @bytegrad.frule(cube)
    def _(tangents, x):
        return cube(x), 2 * x * x * tangents[0]  # wrong: 3 x²

    try:
        with pytest.raises(AssertionError, match="forward rule"):
            check_rule(cube, 0.7)
    finally:
        del FRULES[cube]


def test_a_second_forward_rule_needs_override():
    def h(x):
        return x

    bytegrad.frule(h)(lambda ts, x: (x, ts[0]))
    try:
        with pytest.raises(bytegrad.DuplicateRuleError, match="override=True"):
            bytegrad.frule(h)(lambda ts, x: (x, ts[0]))
        bytegrad.frule(h, override=True)(lambda ts, x: (x, None if ts[0] is None else 2 * ts[0]))
        assert bytegrad.jvp(h, (1.0,), (1.0,))[1] == 2.0
    finally:
        del FRULES[h]


@settings(max_examples=40)
@given(st.lists(st.floats(-3, 3), min_size=1, max_size=6), st.integers(0, 2**31 - 1))
def test_elementwise_forward_rules_on_random_inputs(xs, seed):
    x = np.array(xs)
    v = np.random.default_rng(seed).standard_normal(x.shape)
    for f in (np.sin, np.tanh, np.exp, np.arctan, np.cosh, np.square):
        _, dy = FRULES[f]((v,), x)
        np.testing.assert_allclose(dy, _jvp_fd(f, [x], [v]), rtol=1e-5, atol=1e-6)


@pytest.mark.regression
def test_a_derived_forward_rule_gives_the_value_its_reverse_rule_computed():
    # (the pullbacks the derived rule calls undid the writes into the array the function
    # made: np.delete's value was uninitialized memory)
    from bytegrad.primitives.arrays import array_function
    from bytegrad.runtime.frules import derived
    from bytegrad.runtime.rules import record_of
    x, v = np.array([0.3, 0.5, -0.2, 0.9]), np.array([1.0, 2.0, 3.0, 4.0])
    fr = derived(array_function, record_of(array_function))
    y, dy = fr((None, v, None), np.delete, x, 0)
    assert y.tolist() == [0.5, -0.2, 0.9] and dy.tolist() == [2.0, 3.0, 4.0]
