"""Operations that Python answers with a special method of the operand's class, on an
object of a class of yours: both modes differentiate your method (`primitives.special`)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import bytegrad
from checks import fd_gradient


class Box:
    """Each special method computes something other than the number's operation, so a
    rule that skips it gives a wrong slope, not by chance the right one."""

    def __init__(self, a):
        self.a = a

    def __pos__(self):
        return Box(self.a ** 2)

    def __neg__(self):
        return Box(-3.0 * self.a)

    def __abs__(self):
        return Box(2.0 * self.a)

    def __invert__(self):
        return Box(9.0 * self.a)

    def __float__(self):
        return 7.0 * self.a

    def __complex__(self):
        return complex(self.a, 2.0 * self.a)

    def __round__(self, n=None):
        return Box(6.0 * self.a)

    def __floor__(self):
        return Box(4.0 * self.a)

    def __ceil__(self):
        return Box(5.0 * self.a)

    def __trunc__(self):
        return Box(8.0 * self.a)

    def __floordiv__(self, other):
        return Box(3.0 * self.a / other)

    def __rfloordiv__(self, other):
        return Box(other * self.a ** 2)

    def __divmod__(self, other):
        return Box(self.a // other), Box(self.a % other + self.a)

    def __add__(self, other):
        return Box(self.a + 2.0 * other.a)

    def __radd__(self, other):
        return Box(self.a * 3.0 + other)

    def __reversed__(self):
        return iter([2.0 * self.a, self.a])

    def __array__(self, dtype=None, copy=None):
        return np.array([5.0 * self.a, self.a * self.a])


CASES = {
    "+x": lambda x: (+Box(x)).a,
    "-x": lambda x: (-Box(x)).a,
    "abs(x)": lambda x: abs(Box(x)).a,
    "~x": lambda x: (~Box(x)).a,
    "float(x)": lambda x: float(Box(x)),
    "complex(x)": lambda x: complex(Box(x)).imag,
    "round(x)": lambda x: round(Box(x)).a,
    "round(x, 2)": lambda x: round(Box(x), 2).a,
    "math.floor(x)": lambda x: math.floor(Box(x)).a,
    "math.ceil(x)": lambda x: math.ceil(Box(x)).a,
    "math.trunc(x)": lambda x: math.trunc(Box(x)).a,
    "math.sin(x)": lambda x: math.sin(Box(x)),
    "math.exp(x)": lambda x: math.exp(Box(x)),
    "x // 2": lambda x: (Box(x) // 2.0).a,
    "2 // x": lambda x: (2.0 // Box(x)).a,
    "divmod(x, 2)": lambda x: divmod(Box(x), 2.0)[1].a,
    "sum([x, y])": lambda x: sum([Box(x), Box(x * x)]).a,
    "sum((x, y), start)": lambda x: sum((Box(x), Box(x * x)), Box(0.5)).a,
    "sum([x, y], start=s)": lambda x: sum([Box(x), Box(x * x)], start=Box(0.5)).a,
    "sum(generator)": lambda x: sum(Box(x * k) for k in (1.0, 2.0)).a,
    "sum(generator, start)": lambda x: sum((Box(x * k) for k in (1.0, 2.0)), Box(0.5)).a,
    "sum(map(...))": lambda x: sum(map(Box, [x, x * x])).a,
    "sum(iter([x, y]), start=s)": lambda x: sum(iter([Box(x), Box(x * x)]), start=Box(0.5)).a,
    "reversed(x)": lambda x: list(reversed(Box(x)))[0],
    "np.asarray(x)": lambda x: np.sum(np.asarray(Box(x)) ** 2),
    "np.array(x)": lambda x: np.array(Box(x))[1],
}


@pytest.mark.regression
@pytest.mark.parametrize("f", CASES.values(), ids=CASES.keys())
def test_your_special_method_is_differentiated_in_both_modes(f):
    # (the rules of numbers ran: a gradient of None, a wrong one, or an error)
    x = 0.7
    slope = fd_gradient(f, (x,), 0)
    assert bytegrad.gradient(f, x)[0] == pytest.approx(slope, rel=1e-6)
    assert bytegrad.jvp(f, (x,), (1.0,))[1] == pytest.approx(slope, rel=1e-6)


@pytest.mark.parametrize("f, slope", [
    (lambda x: -x * 2.0, -2.0), (lambda x: abs(-x) * 3.0, 3.0), (lambda x: math.floor(x) + x, 1.0),
    (lambda x: x // 0.25 + x, 1.0), (lambda x: divmod(x, 0.25)[1], 1.0), (lambda x: float(x) * x, 2 * 0.7),
    (lambda x: sum([x, x * x], 1.0), 1 + 2 * 0.7), (lambda x: math.sin(x), math.cos(0.7)),
    (lambda x: sum(x * k for k in range(4)), 6.0), (lambda x: sum(map(float, [x, x]), start=x), 3.0),
])
def test_numbers_keep_their_rules(f, slope):
    assert bytegrad.value_and_gradient(f, 0.7)[0] == f(0.7)  # (3.12's sum of floats compensates: the same number)
    assert bytegrad.gradient(f, 0.7)[0] == pytest.approx(slope)
    assert bytegrad.jvp(f, (0.7,), (1.0,))[1] == pytest.approx(slope)


class _Left:
    def __init__(self, a):
        self.a = a

    def __floordiv__(self, other):
        return NotImplemented


class _Right(_Left):
    def __rfloordiv__(self, other):
        return _Right(other.a * self.a ** 2)


class _Other(_Left):
    pass


def test_a_method_that_returns_not_implemented_gives_way_to_the_reflected_one():
    def f(x):
        return (_Left(x) // _Right(2.0 * x)).a  # _Right.__rfloordiv__: 4 x³
    x = 0.7
    assert bytegrad.gradient(f, x)[0] == pytest.approx(12 * x * x)
    assert bytegrad.jvp(f, (x,), (1.0,))[1] == pytest.approx(12 * x * x)


def test_an_operation_python_refuses_is_refused():
    def f(x):
        return (_Left(x) // _Other(x)).a
    with pytest.raises(TypeError, match="//"):
        f(0.7)
    with pytest.raises(TypeError, match="//"):
        bytegrad.gradient(f, 0.7)


class _Nines(np.ndarray):
    def __array__(self, dtype=None, copy=None):
        return np.full(self.shape, 9.0)


class _Three(float):
    def __float__(self):
        return 3.0


@pytest.mark.regression
def test_a_subclass_of_ndarray_or_float_is_read_as_numpy_and_math_read_it():
    # (np.asarray never asks an ndarray subclass's __array__, math never a float
    # subclass's __float__: asking them gave another value, silently)
    a = np.array([1.0, 2.0]).view(_Nines)
    g = lambda x: float(np.asarray(x).sum() + (x * x).sum())  # noqa: E731
    assert bytegrad.jvp(g, (a,), (np.ones(2),)) == pytest.approx((8.0, 8.0))
    assert bytegrad.value_and_grad(lambda x: math.sin(x))(_Three(0.7))[0] == pytest.approx(math.sin(0.7))
