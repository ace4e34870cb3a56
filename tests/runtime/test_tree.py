"""``bytegrad.tree``: ``map``, ``leaves``, ``zeros_like`` over the structures gradients
mirror, None as zero; and the package's typing marker and ``bytegrad.testing``."""
from __future__ import annotations

import collections
import os

import numpy as np
import pytest

import bytegrad
from bytegrad import tree

Point = collections.namedtuple("Point", "x y")


class Layer:
    def __init__(self, w, b, name):
        self.w, self.b, self.name = w, b, name


def loss(p):
    return np.sum(p["layer"].w ** 2) + p["pt"].x * p["scale"] + sum(p["extra"])


def params():
    return {"layer": Layer(np.array([1.0, -2.0]), 0.5, "l1"), "pt": Point(2.0, 3.0),
            "scale": 4.0, "extra": [1.0, 2.0], "steps": 7}


def test_map_over_parameters_and_their_gradient_takes_none_as_zero():
    p = params()
    g = bytegrad.grad(loss)(p)
    new = tree.map(lambda a, b: a - 0.1 * b, p, g)
    assert list(new) == list(p)
    assert type(new["pt"]) is Point and new["pt"] == Point(2.0 - 0.4, 3.0)  # y: None, zero
    assert isinstance(new["layer"], dict) and np.allclose(new["layer"]["w"], [0.8, -1.6])
    assert new["layer"]["b"] == 0.5 and new["layer"]["name"] == "l1"  # (no gradient reached them)
    assert new["scale"] == 4.0 - 0.1 * 2.0 and new["extra"] == [0.9, 1.9] and new["steps"] == 7


def test_leaves_in_order_without_zeros():
    g = bytegrad.grad(loss)(params())
    got = tree.leaves(g)
    expected = [np.array([2.0, -4.0]), 4.0, 2.0, 1.0, 1.0]  # layer.w, pt.x, scale, extra
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert np.allclose(a, b)
    assert tree.leaves({"a": None, "b": (None, [None])}) == []


def test_zeros_like_mirrors_structure_and_gives_none_where_no_gradient_can_be():
    z = tree.zeros_like(params())
    assert list(z) == list(params())
    assert isinstance(z["layer"], dict) and np.array_equal(z["layer"]["w"], [0.0, 0.0])
    assert z["layer"]["b"] == 0.0 and z["layer"]["name"] is None
    assert type(z["pt"]) is Point and z["pt"] == Point(0.0, 0.0)
    assert z["extra"] == [0.0, 0.0] and z["steps"] is None
    c = tree.zeros_like(np.array([1j, 2.0]))
    assert c.dtype.kind == "c" and not c.any()


def test_testing_is_an_attribute_and_the_package_is_typed():
    assert callable(bytegrad.testing.check_rule)
    assert os.path.exists(os.path.join(os.path.dirname(bytegrad.__file__), "py.typed"))
