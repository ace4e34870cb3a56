"""``match`` statements: class, sequence, mapping, literal, capture, or- and guard
patterns, lifted on every supported CPython (``ops.match_*``) and differentiated
through the values the patterns bind."""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad.ir import function, lift, ops
from checks import check_grad, fd_gradient


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Polar:
    __match_args__ = ("r", "theta")

    def __init__(self, r, theta):
        self.r, self.theta = r, theta


class Pair(NamedTuple):
    a: float
    b: float


def shape_area(s, k):
    match s:
        case Point(x=0.0, y=y):
            return y * k
        case Point(x, y) if x > 0:
            return x * y * k
        case Point(x, y):
            return -x * y + k
        case Polar(r, theta=t):
            return 0.5 * r * r * t * k
        case Pair(a, b) | [a, b]:
            return a * b * k
        case [first, *rest]:
            return first * k + len(rest)
        case {"w": w, "b": b, **others}:
            return (w * k + b) * (1 + len(others))
        case float(v) | int(v):
            return v * v * k
        case str() as name:
            return len(name) * k
        case _:
            return -k


SUBJECTS = [Point(0.0, 3.0), Point(2.0, 3.0), Point(-2.0, 1.5), Polar(2.0, 0.3), Pair(1.5, -2.0),
            [1.5, -2.0], [3.0], [0.5, 1.0, 2.0], {"w": 2.0, "b": 0.5}, {"w": 2.0, "b": 0.5, "c": 1},
            2.5, 3, "abc", {"q": 1.0}, (1.0, 2.0, 3.0), None]


@pytest.mark.parametrize("s", SUBJECTS, ids=repr)
def test_lifted_match_takes_the_arm_the_plain_call_takes(s):
    g = function(lift(shape_area), shape_area.__globals__)
    assert g(shape_area, s, 2.0) == shape_area(s, 2.0)


def _as(kind, u, v):
    """A subject of ``kind`` made of the floats ``u`` and ``v``."""
    return {"point": lambda: Point(u, v), "polar": lambda: Polar(u, v), "pair": lambda: Pair(u, v),
            "list": lambda: [u, v], "short": lambda: [u], "long": lambda: [u, v, u * v],
            "dict": lambda: {"w": u, "b": v}, "float": lambda: u}[kind]()


@pytest.mark.parametrize("kind", ["point", "polar", "pair", "list", "short", "long", "dict", "float"])
@settings(max_examples=15, deadline=None)
@given(u=st.floats(-3, 3).filter(lambda t: abs(t) > 1e-3), v=st.floats(-3, 3), k=st.floats(-2, 2))
def test_gradients_through_the_values_patterns_bind(kind, u, v, k):
    check_grad(lambda u, v, k: shape_area(_as(kind, u, v), k), u, v, k)


def test_an_argument_matched_gets_its_gradient_in_its_own_structure():
    assert bytegrad.gradient(shape_area, Point(2.0, 3.0), 2.0) == ({"x": 6.0, "y": 4.0}, 6.0)
    assert bytegrad.gradient(shape_area, Point(0.0, 3.0), 2.0) == ({"x": None, "y": 2.0}, 3.0)
    assert bytegrad.gradient(shape_area, {"w": 2.0, "b": 0.5}, 3.0) == ({"w": 3.0, "b": 1.0}, 2.0)
    assert bytegrad.gradient(shape_area, [1.5, -2.0], 2.0) == ([-4.0, 3.0], -3.0)
    g = bytegrad.gradient(shape_area, np.float64(1.5), 2.0)
    assert g == (6.0, 2.25)  # (np.float64 is a float: float(v) matches it itself)


def nested(x, y):
    match {"p": Point(x, y), "qs": [x, (y, x)]}:
        case {"p": Point(x=a), "qs": [b, (c, d)]} if a < 10:
            return a * b * c + d
    return 0.0


def test_nested_patterns():
    check_grad(nested, 1.3, -0.7)


def test_a_tuple_made_to_be_matched():
    def f(x):
        match (x, 1.5):
            case (a, b):
                return a * b
        return x
    assert check_grad(f, 2.0) == (1.5,)


def test_match_over_arrays_and_their_rows():
    def f(A, w):
        total = 0.0
        for row in A:
            match list(row):
                case [a, b] if a > b:
                    total += a * w
                case [a, b]:
                    total += np.sin(b) * w
        return total
    A = np.array([[1.0, 0.5], [0.2, 0.9], [2.0, -1.0]])
    check_grad(f, A, 0.7)


def _matcher(pattern):
    scope = {}
    exec(f"def m(subject, C):\n    match subject:\n        case {pattern}:\n            return 1\n",
         scope)
    return scope["m"]


@pytest.mark.parametrize("subject, cls, pattern, message", [
    (Point(1, 2), Point, "C(a, b, c)", r"Point\(\) accepts 2 positional sub-patterns \(3 given\)"),
    (3, int, "C(a, b)", r"int\(\) accepts 1 positional sub-pattern \(2 given\)"),
    (Point(1, 2), Point, "C(a, x=b)", r"Point\(\) got multiple sub-patterns for attribute 'x'"),
    (Point(1, 2), 3, "C()", "called match pattern must be a (type|class)"),  # (3.11: type)
])
def test_class_pattern_errors_are_cpythons(subject, cls, pattern, message):
    m = _matcher(pattern)
    for call in (m, lambda s, c: function(lift(m), m.__globals__)(m, s, c)):
        with pytest.raises(TypeError, match=message):
            call(subject, cls)


def test_a_mapping_pattern_reads_with_get_and_no_key_twice():
    class Defaulting(dict):
        def __missing__(self, k):
            return 0.0
    d = Defaulting(w=2.0)
    assert ops.match_keys(d, ("w",)) == (2.0,)
    assert ops.match_keys(d, ("w", "b")) is None and "b" not in d  # get, not []
    with pytest.raises(ValueError, match=r"mapping pattern checks duplicate key \('w'\)"):
        ops.match_keys(d, ("w", "w"))


@pytest.mark.parametrize("test", [ops.match_sequence, ops.match_mapping])
def test_the_structural_tests_carry_no_gradient(test):
    """Registered as non-differentiable: whatever the subject, the result is a bool."""
    from bytegrad.runtime.rules import is_nondiff
    assert is_nondiff(test)
    for x in (1.5, np.array([1.0, 2.0]), [1.0, 2.0], {"a": 1.0}, Point(1.0, 2.0)):
        assert type(test(x)) is bool
    assert fd_gradient(lambda x: float(test(x)), [1.5], 0) == 0.0


def _rest_of_a_mapping(x):
    match {"a": x * 2.0, "b": 3.0, "c": x}:
        case {"b": b, **rest}:
            rest["c"] = rest["c"] * b
            return rest["a"] * b + rest["c"]


@pytest.mark.regression
def test_the_values_of_a_mapping_patterns_rest_get_their_gradients():
    check_grad(_rest_of_a_mapping, 1.5)
    assert bytegrad.grad(_rest_of_a_mapping)(1.5) == pytest.approx(9.0)
