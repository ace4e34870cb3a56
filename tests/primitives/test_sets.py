"""Sets and the merge operators of dicts (primitives/sets.py): every gradient against
central finite differences, or a closed form where equal items collapse."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import bytegrad
from checks import check_grad, check_stateful

X = 1.3


@pytest.mark.parametrize("f", [
    lambda x: sum({x, 2 * x}),                                  # a display
    lambda x: sum({v * v for v in [x, 2 * x, 3.0]}),            # a comprehension
    lambda x: sum({*[x, 2 * x], *(3 * x,)}),                    # unpacking
    lambda x: sum(set(v * x for v in (1.0, 2.0))),              # set() of a generator
    lambda x: sum(set(np.array([x, 2 * x]))),                   # set() of an array
    lambda x: sum(frozenset([x, x * x])),
    lambda x: sum(sorted({x, -3 * x})[:1]),                     # sorted(set)
    lambda x: max({x, -x * x}) + min({x, 4.0}) + len({x, 1.0}),
    lambda x: sum(set.union({x}, [2 * x, x], (x * x,))),
    lambda x: sum({x, 2 * x} | {x * x}) + sum({x, 2 * x} - {2 * x}),
    lambda x: sum({x, 3.0} & {x}) + sum({x} ^ {2 * x, 3.0}),
    lambda x: sum({x}.intersection({x, 2.0})) + sum({x, 2 * x}.difference([x])),
    lambda x: sum({x}.symmetric_difference([x * x])) + sum({x * x}.copy()),
    lambda x: sum(v * v for v in {x, 4 * x}),                   # iteration
    lambda x: sum(list({x, 5.0})) + sum(tuple({x * x})) + sum(map(lambda v: v * 2, {x})),
])
def test_set_gradients(f):
    check_grad(f, X)


def test_equal_items_collapse_to_the_first():
    # {x, x}: one item, whose gradient x gets once
    assert bytegrad.gradient(lambda x: sum({x, x}), X) == (1.0,)
    # at 0, x and 2x are equal: the set holds x (the first), 2x was dropped
    assert bytegrad.gradient(lambda x: sum({x, 2 * x}), 0.0) == (1.0,)
    assert bytegrad.gradient(lambda x: sum({2 * x, x}), 0.0) == (2.0,)
    assert bytegrad.gradient(lambda x: sum({x} | {3 * x}), 0.0) == (1.0,)
    assert bytegrad.gradient(lambda x: sum({v for v in (3 * x, x)}), 0.0) == (3.0,)


def test_a_set_argument_gets_a_dict_from_item_to_gradient():
    s = {1.0, 2.0, 4}
    g, = bytegrad.gradient(lambda s: sum(v * v for v in s), s)
    assert g == {1.0: 2.0, 2.0: 4.0}


@pytest.mark.parametrize("f", [
    lambda d: ({"a": 3 * d["x"]} | {"b": 2.0})["a"],
    lambda d: ({"a": 3 * d["x"], "b": d["x"]} | {"b": d["y"] ** 2})["b"] * 2,
    lambda d: sum(({"a": d["x"]} | d).values()),
])
def test_dict_or(f):
    check_stateful(f, {"x": X, "y": 0.7})


def _ior(d):
    e = {"a": d["x"], "b": 2.0}
    e |= {"b": 3 * d["y"]}
    d |= {"x": e["a"] * e["b"]}            # an argument, changed in place
    return d["x"] + e["a"]


def test_dict_ior_changes_in_place():
    check_stateful(_ior, {"x": X, "y": 0.7})


def _unpacked_then_changed(x):
    m = {"a": x * 2.0, "b": 3.0}
    r = {**m}
    r["c"] = 1.0
    return r["a"] * 3.0


def _unpacked_twice_then_changed(x):
    base = {"a": x, "k": 2.0}
    r = {**base, **{"z": x * 4.0}}
    r["k"] = r["k"] * x
    return r["a"] * r["k"] + r["z"] + base["a"]


def _ior_then_changed(x):
    r = {"a": x * 2.0}
    r |= {"b": x * x}
    r["a"] = r["a"] * r["b"]
    return r["a"] * 3.0 + r["b"]


def _argument_ior_then_changed(d, x):
    d |= {"b": x * 3.0}
    d["a"] = d["a"] * x
    return d["a"] + d["b"]


@pytest.mark.regression
@pytest.mark.parametrize("f, args", [
    (_unpacked_then_changed, (1.5,)),
    (_unpacked_twice_then_changed, (1.5,)),
    (_ior_then_changed, (1.5,)),
    (_argument_ior_then_changed, ({"a": 2.0}, 1.5)),
], ids=["{**m} changed", "{**m, **n} changed", "|= changed", "argument |= changed"])
def test_a_dict_updated_in_place_and_then_changed_keeps_its_gradients(f, args):
    """``{**m}`` is an empty dict updated in place (``DICT_UPDATE``): its values' gradients,
    left in the shadow by a later change, reach ``m`` (they were silently None)."""
    check_stateful(f, *args)


def test_counter_or_is_its_own_python_code():
    # Counter.__or__ keeps the larger count, not the right operand's
    f = lambda x: (collections.Counter(a=x) | collections.Counter(a=2.0))["a"]  # noqa: E731
    assert bytegrad.gradient(f, 3.0) == (1.0,)
    assert bytegrad.gradient(f, 1.0) == (None,)


def test_bitwise_operators_carry_no_gradient():
    f = lambda x, n: x * ((n | 2) + (n & 1) + (n ^ 4))  # noqa: E731
    assert bytegrad.gradient(f, X, 5) == (9.0, None)


@pytest.mark.parametrize("body", ["s.add(2 * x)", "s.discard(x)", "s |= {2 * x}", "s -= {x}"])
def test_changing_a_set_in_place_is_refused(body):
    ns = {}
    exec(f"def f(x):\n    s = {{x, 3.0}}\n    {body}\n    return sum(s)", ns)
    with pytest.raises(NotImplementedError, match="build a new set"):
        bytegrad.gradient(ns["f"], X)


def test_a_set_of_strings_changes_plainly():
    def f(x):
        s = {"a"}
        s.add("b")
        s |= {"c"}
        return x * len(s)
    assert bytegrad.gradient(f, X) == (3.0,)


def test_consumers_of_a_set():
    check_grad(lambda x: sum(a * b for a, b in zip({x}, [2.0])) + sum(i * v for i, v in enumerate({x * x})), X)
    check_grad(lambda x: (lambda a, b=0.0: a * 3)(*{x}) + [*{x * x}][0], X)
    check_grad(lambda x: (lambda s: (s.pop(), s)[0])(list({2 * x})), X)
