"""Python's arithmetic operators on objects whose class defines them in Python: the
method is differentiated, picked as Python picks it (``a.__mul__(b)``, then
``b.__rmul__(a)`` where that gives NotImplemented, a subclass's reflected method first),
in both orders of the operands and in the in-place form; a numeric type with Python
methods (``Fraction``) stays a number."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import bytegrad
from checks import check_grad, fd_gradient


class Curve:
    """Each operator a different nonlinear function of the other operand."""

    def __init__(self, k):
        self.k = k

    def __mul__(self, v):
        return self.k * v * v
    __rmul__ = __mul__

    def __add__(self, v):
        return math.sin(self.k * v)

    def __radd__(self, v):
        return math.cos(self.k * v)

    def __sub__(self, v):
        return self.k - v ** 3

    def __rsub__(self, v):
        return v ** 3 - self.k

    def __truediv__(self, v):
        return self.k / (1 + v * v)

    def __rtruediv__(self, v):
        return v / (1 + self.k * v)

    def __pow__(self, v):
        return self.k ** v

    def __rpow__(self, v):
        return v ** self.k

    def __matmul__(self, v):
        return self.k * v[0] * v[1]

    def __mod__(self, v):
        return NotImplemented

    def __rmod__(self, v):
        return v * v * self.k


class Steeper(Curve):
    def __rmul__(self, v):  # (a subclass's reflected method goes before the left operand's)
        return self.k * v ** 3


C, S = Curve(1.5), Steeper(0.7)
_PROGRAMS = {
    "c * a": lambda a: C * a, "a * c": lambda a: a * C, "c + a": lambda a: C + a,
    "a + c": lambda a: a + C, "c - a": lambda a: C - a, "a - c": lambda a: a - C,
    "c / a": lambda a: C / a, "a / c": lambda a: a / C, "c ** a": lambda a: C ** a,
    "a ** c": lambda a: a ** C, "a % c (NotImplemented first)": lambda a: a % C,
    "c @ [a, a²]": lambda a: C @ np.array([a, a * a]),
    "c * steeper * a": lambda a: C * S * a,
}


@pytest.mark.regression
@pytest.mark.parametrize("name", list(_PROGRAMS))
def test_an_objects_python_operator_is_differentiated(name):
    check_grad(_PROGRAMS[name], 0.4)


@pytest.mark.regression
def test_the_object_may_be_an_argument():
    # d/da of C * a is 2 k a: the rule of * once treated the object as a number (k)
    assert bytegrad.grad(lambda a, c: c * a)(0.4, C) == pytest.approx(2 * 1.5 * 0.4)


class _Vec:
    def __init__(self, x):
        self.x = x

    def __mul__(self, k):
        return _Vec(self.x * k)

    def __add__(self, o):
        return _Vec(self.x + o.x)


def test_objects_holding_arrays_and_in_place_forms():
    def vec(a, w):
        v = (_Vec(w) * a + _Vec(w * w)) * a
        v *= a  # (no __imul__: __mul__, as Python does)
        return np.sum(v.x ** 2)
    check_grad(vec, 0.4, np.array([1.0, -2.0]))


def test_a_number_type_with_python_methods_stays_a_number():
    check_grad(lambda a: a * Fraction(1, 3) + a * a, 0.4)


def test_operands_no_method_accepts_raise_pythons_error():
    with pytest.raises(TypeError, match="unsupported operand"):
        bytegrad.grad(lambda a: Curve(1.0) % a)(0.4)


class _Offset:
    """A number-like class without ``__array_ufunc__ = None``: NumPy applies ``+`` to each
    element of an array, calling ``__radd__`` with numbers, as plain code."""

    def __init__(self, c):
        self.c = c

    def __radd__(self, other):
        return other + self.c


@pytest.mark.regression
def test_an_array_and_an_object_numpy_adds_elementwise_is_refused():
    # (the gradient was None: NumPy ran __radd__ on each element, undifferentiated)
    def f(x):
        return np.sum(np.tanh(x) + _Offset(2.0)) * 1.0
    with pytest.raises(NotImplementedError, match=r"an array \+ a _Offset: NumPy calls "
                                                  r"_Offset.__radd__ on each element.*"
                                                  r"__array_ufunc__ = None"):
        bytegrad.gradient(f, np.array([0.3, -0.7]))
    with pytest.raises(NotImplementedError, match=r"an array \* a Fraction: NumPy calls "
                                                  r"Fraction.__rmul__ on each element.*convert"):
        bytegrad.gradient(lambda x: np.sum(np.tanh(x) * Fraction(1, 3)), np.array([0.3, -0.7]))


@pytest.mark.regression
@pytest.mark.parametrize("f", [lambda x, o: np.sum((o + x) * x), lambda x, o: np.sum(x - o),
                               lambda x, o: np.sum(o * x), lambda x, o: np.sum(x / o),
                               lambda x, o: np.sum(o[:, None] @ x[None, :]),
                               lambda x, o: np.sum(np.multiply(o, x)), lambda x, o: np.sum(np.power(x, o))])
def test_an_array_of_objects_made_from_a_value_with_a_gradient_is_refused(f):
    """No rule follows a gradient through an array of dtype object: x's gradient was None,
    silently.  Refused where the array is made, naming the line and the fix."""
    x, o = np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.5, 2.5], dtype=object)
    with pytest.raises(NotImplementedError, match=r"test_operators\.py:\d+: .*dtype=object.*astype\(float\)"):
        bytegrad.gradient(f, x, o)
    floats = o.astype(float)
    assert bytegrad.gradient(f, x, floats)[0] == pytest.approx(fd_gradient(f, (x, floats), 0))


_O = np.array([1.0, 2.0], dtype=object)


@pytest.mark.regression
@pytest.mark.parametrize("make", [lambda x: x.astype(object), lambda x: np.where(x > 0, _O, x),
                                  lambda x: np.concatenate([_O, x]), lambda x: np.stack([_O, x]),
                                  lambda x: np.full(2, x[0], dtype=object),
                                  lambda x: np.array([x[0], x[1]], dtype=object),
                                  lambda x: np.array([x[0], "label"], dtype=object)[:1].astype(float)],
                         ids=["astype", "where", "concatenate", "stack", "full", "array", "array-of-mixed"])
def test_an_array_of_objects_made_by_any_call_from_a_value_with_a_gradient_is_refused(make):
    """Not only operators: any call making an array of objects from a value with a gradient
    lost it (None, silently, where the gradient is not zero)."""
    f = lambda x: float(np.sum(make(x)))  # noqa: E731
    x = np.array([3.0, -4.0])
    assert np.any(fd_gradient(f, (x,), 0) != 0)  # (a gradient None would be wrong)
    with pytest.raises(NotImplementedError, match=r"test_operators\.py:\d+: .*made an array of objects.*astype\(float\)"):
        bytegrad.gradient(f, x)
    no_gradient_in_it = lambda x: float(np.sum(np.concatenate([_O, _O]))) + x[0]  # noqa: E731
    assert bytegrad.gradient(no_gradient_in_it, x)[0].tolist() == [1.0, 0.0]
