"""Rules that put values on the tape (primitives/taped.py): arithmetic on real scalars,
``math`` functions of floats and element reads, each with its fallback to the ordinary
rule for every other operand, in any mix, checked against finite differences."""
import math
import operator as op

import numpy as np
import pytest
from hypothesis import given, strategies as st

import bytegrad
from bytegrad.primitives.math import _UNARY

from checks import arr, check_grad, check_stateful, fd_gradient

_BINARY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": lambda a, b: a / b}


def _inplace(symbol):
    def f(a, b):
        s = a.copy() if isinstance(a, np.ndarray) else a  # (changed in place below)
        if symbol == "+":
            s += b
        elif symbol == "-":
            s -= b
        elif symbol == "*":
            s *= b
        else:
            s /= b
        return s
    return f


_KINDS = {"float": lambda v: v, "int": lambda v: int(round(v)) or 1,
          "float64": np.float64, "array": lambda v: np.array([v, v + 0.5]),
          "complex": lambda v: complex(v, 0.25), "bool": lambda v: True}


@pytest.mark.parametrize("symbol", sorted(_BINARY))
@pytest.mark.parametrize("inplace", [False, True])
@given(ka=st.sampled_from(sorted(_KINDS)), kb=st.sampled_from(sorted(_KINDS)),
       a=st.floats(0.5, 3.0), b=st.floats(0.5, 3.0))
def test_binary_operators_on_every_kind_of_operand(symbol, inplace, ka, kb, a, b):
    f = _inplace(symbol) if inplace else _BINARY[symbol]
    x, y = _KINDS[ka](a), _KINDS[kb](b)

    def loss(x, y):
        r = f(x, y) * 1.5
        return np.sum(np.real(r * np.conj(r))) if isinstance(r, (complex, np.ndarray)) else r * r
    try:
        loss(x, y)
    except TypeError:  # (an array times a complex in place): a TypeError too
        with pytest.raises(TypeError):
            bytegrad.gradient(loss, x, y)
        return
    v, (gx, gy) = bytegrad.value_and_gradient(loss, x, y)
    assert v == pytest.approx(loss(x, y))
    for g, arg, i in ((gx, x, 0), (gy, y, 1)):
        if type(arg) in (int, bool):
            assert g is None
        elif type(arg) is complex:
            h = 1e-6
            re = (loss(*[arg + h if j == i else w for j, w in enumerate((x, y))])
                  - loss(*[arg - h if j == i else w for j, w in enumerate((x, y))])) / (2 * h)
            assert g.real == pytest.approx(re, rel=1e-5, abs=1e-6)
        else:
            np.testing.assert_allclose(g, fd_gradient(loss, [x, y], i), rtol=1e-5, atol=1e-6)


@given(a=st.floats(0.3, 2.0), n=st.integers(-3, 4))
def test_integer_powers_of_floats(a, n):
    f = lambda x: x ** n * 2.0
    assert bytegrad.grad(f)(a) == pytest.approx(fd_gradient(f, [a], 0), rel=1e-5, abs=1e-7)
    assert bytegrad.grad(f)(np.float64(a)) == pytest.approx(fd_gradient(f, [a], 0), rel=1e-5, abs=1e-7)


def test_other_powers_take_the_rule():
    check_grad(lambda x, y: x ** y, 1.7, 0.6)
    check_grad(lambda x: x ** 0.5 + 2.0 ** x, 1.3)
    check_grad(lambda x: np.sum(x ** 3), arr(3))


@pytest.mark.parametrize("name", [n for n, _ in _UNARY if hasattr(math, n)])
def test_math_functions_of_floats(name):
    f = getattr(math, name)
    x = {"acosh": 1.7, "log1p": 0.4, "atanh": 0.3}.get(name, 0.6)
    check_grad(lambda x: f(x) * x, x)
    check_grad(lambda x: f(x) * x, np.float64(x))
    assert bytegrad.grad(lambda k: f(k))(0 if name == "atanh" else 1) is None  # an int: no gradient


def test_element_reads_of_arrays_lists_and_tuples():
    def f(x, xs, t):
        s = 0.0
        for i in range(len(x)):
            s += x[i] * xs[i] + t[i % 2] * x[-1 - i]
        return s
    check_stateful(f, arr(4), [0.5, 1.5, -2.0, 3.0], (1.25, -0.75))
    check_grad(lambda x: np.sum(x[1] * x[0]), arr((3, 2)))  # rows are arrays: the rule
    check_grad(lambda x: x[2] * x[0], arr(3, dtype=np.float32), rtol=1e-3, atol=1e-3)


def test_reads_after_a_change_in_place_go_through_the_rule():
    def f(x):
        a = x * 1.0
        a[0] = a[1] * 3.0
        return a[0] * a[2] + x[0]
    check_stateful(f, arr(3))


def test_results_without_a_gradient_still_pop_their_entries():
    def f(x, y):
        s = 0.0
        for i in range(len(x)):
            unused = x[i] * y  # recorded, never reaches the output
            also = math.sin(y) + unused ** 2
            s = s + x[i] * x[i]
        return s
    check_grad(f, arr(5), 0.7)


@given(st.lists(st.sampled_from(["float", "int", "array", "float64"]), min_size=1, max_size=6))
def test_taped_and_rule_paths_mixed_in_one_loop(kinds):
    vals = [_KINDS[k](1.0 + 0.25 * j) for j, k in enumerate(kinds)]

    def f(w, vals):
        s = 0.0
        for v in vals:
            s = s + np.sum(w * v - v / (w + 2.0)) ** 2
            s += math.exp(w) * w
        return s
    check_stateful(f, 0.3, vals)


# -- arrays: the shapes and dtypes of ``a ± b`` and the base of ``a ** n`` on the tape, for
#    values the function only reads (`transforms.kept`); the rule's pullback otherwise

_SHAPES = [((3, 2), (3, 2)), ((3, 2), (2,)), ((2,), (3, 2)), ((3, 1), (1, 2)), ((), (3,)),
           ((3,), ()), ((), ())]
_DTYPES = [np.float64, np.float32, np.dtype(">f8")]


def _summed(g, shape):
    """``g`` summed back to ``shape`` over the axes broadcasting added or stretched."""
    g = np.sum(g, axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    return np.sum(g, axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True).reshape(shape)


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("shapes", _SHAPES)
@given(da=st.sampled_from(_DTYPES), db=st.sampled_from(_DTYPES), seed=st.integers(0, 5))
def test_sums_and_differences_of_arrays(sign, shapes, da, db, seed):
    a, b = arr(shapes[0], da, seed), arr(shapes[1], db, seed + 1)

    def f(a, b):
        return np.sum(np.sin(a + b if sign > 0 else a - b))
    ga, gb = bytegrad.gradient(f, a, b)
    c = np.cos(a.astype(float) + sign * b.astype(float))
    tol = 1e-3 if np.float32 in (da, db) else 1e-12
    for g, x, s in ((ga, a, 1), (gb, b, sign)):
        assert np.shape(g) == x.shape and np.asarray(g).dtype.type is x.dtype.type
        np.testing.assert_allclose(g, s * _summed(c, x.shape), rtol=tol, atol=tol)


@pytest.mark.parametrize("shapes", _SHAPES[:3])
def test_the_gradient_asked_for_of_a_sum_of_arrays(shapes):
    a, b = arr(shapes[0]), arr(shapes[1], seed=1)
    c = np.cos(a - b)
    g = bytegrad.grad(lambda a, b: np.sum(np.sin(a - b)), argnums=1)(a, b)
    np.testing.assert_allclose(g, -_summed(c, b.shape), rtol=1e-12)
    both = bytegrad.grad(lambda a, b: np.sum(np.sin(a + b) * (a - b)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(both[0], _summed(np.cos(a + b) * (a - b) + np.sin(a + b), a.shape), rtol=1e-12)
    np.testing.assert_allclose(both[1], _summed(np.cos(a + b) * (a - b) - np.sin(a + b), b.shape), rtol=1e-12)


@pytest.mark.parametrize("n", [-2, 0, 1, 2, 3])
@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("reduce", [np.sum, np.mean])  # (np.mean's gradient: one number everywhere)
def test_integer_powers_of_arrays(n, dtype, reduce):
    x = (np.abs(arr((3, 2))) + 0.5).astype(dtype)
    g = bytegrad.grad(lambda x: reduce(x ** n))(x)
    if n == 0:  # (a constant: the zero gradient, None)
        assert g is None
        return
    assert g.dtype.type is x.dtype.type
    expect = n * x.astype(float) ** (n - 1) / (x.size if reduce is np.mean else 1)
    np.testing.assert_allclose(g, expect, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_array_arithmetic_after_a_change_in_place():
    def f(x, b):
        y = x * 1.0
        y[0] = 2.0 * y[1]  # (something mutated: every pullback is told)
        return np.sum((y + b) ** 2 - (x - b))
    check_stateful(f, arr(3), arr(3, seed=1))
