"""The gradients handed to the caller are the caller's to change in place: no two of
them, and none of them and an argument or a seed, share memory; containers are new;
named tuples, dataclasses and scalar types keep their types (``api._distinct``)."""
from __future__ import annotations

import dataclasses
import sys
import typing

import numpy as np
import pytest

import bytegrad
from bytegrad.runtime.api import _distinct
from checks import DC, NT, arrays_in, shared_memory

X = np.array([1.0, 2.0, 3.0])
Y = np.array([0.5, -1.0, 2.0])
Z = np.array([2.0, 0.5, -1.0])


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


class TP(typing.NamedTuple):
    w: np.ndarray
    b: float


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: np.ndarray
    b: np.ndarray


@pytest.mark.regression
def test_named_tuple_and_dataclass_arguments():
    f = lambda p, x: np.sum(p[0] * x) + p[1] * np.sum(x)  # noqa: E731
    for p in (NT(X.copy(), 2.0), TP(X.copy(), 2.0)):
        gp, gx = bytegrad.gradient(f, p, Y)
        assert np.allclose(gp[0], Y) and np.isclose(gp[1], np.sum(Y)) and np.allclose(gx, X + 2)
    gp, gx = bytegrad.gradient(lambda p, x: np.sum(p.w * x) + p.b * np.sum(x), DC(X.copy(), 2.0), Y)
    assert np.allclose(gp["w"], Y) and np.isclose(gp["b"], np.sum(Y)) and np.allclose(gx, X + 2)


@pytest.mark.regression
@pytest.mark.parametrize("f, args", [
    (lambda p: np.sum(p.a + p.b), (NT(X.copy(), Y.copy()),)),
    (lambda p: np.sum(p.w + p.b), (Frozen(X.copy(), Y.copy()),)),
    (lambda m: np.sum(m.a + m.b), (Pair(X.copy(), Y.copy()),)),
    (lambda m: np.sum(m.a + m.b), (Pair(X, X),)),
    (lambda xs: np.sum(xs[0] + xs[1]), ([X, X],)),
    (lambda t: np.sum(t[0][0] + t[1][1]), (((X.copy(), 1.0), (2.0, Y.copy())),)),
    (lambda a, b: np.sum(a * 2 + b), (X, X)),
    (lambda a, b: np.sum(a + b), (X.astype(np.float32), Y.astype(np.float32))),
    (lambda a, b: np.sum(np.abs(a + b) ** 2), (X + 1j * Y, Y + 0j)),
], ids=["namedtuple", "frozen dataclass", "object", "object one array twice",
        "list one array twice", "tuple of tuples", "one array twice", "float32", "complex"])
def test_gradients_share_no_memory(f, args):
    gs = bytegrad.gradient(f, *args)
    assert not shared_memory(gs, args), shared_memory(gs, args)
    for (_, g), (_, a) in zip(arrays_in(gs), arrays_in(args)):
        assert g.flags.writeable


@pytest.mark.regression
def test_scalar_gradients_keep_their_types():
    g = bytegrad.gradient(lambda a, b: a * b, np.float32(2.0), np.float32(3.0))
    assert all(type(v) is np.float32 for v in g) and np.allclose(g, (3.0, 2.0))
    g = bytegrad.gradient(lambda a, b: a + b, 2.0, None if False else 3.0)
    assert g == (1.0, 1.0)
    g = bytegrad.gradient(lambda a, b: a * 2.0, 2.0, None)
    assert g == (2.0, None)


@pytest.mark.regression
def test_copied_view_gradient_keeps_dtype_and_shape():
    # the gradient is a transposed view of a read-only broadcast seed: copied, float32, (2, 3)
    _, back = bytegrad.pullback(lambda a: a.T, np.ones((2, 3), np.float32))
    dy = np.broadcast_to(np.float32(2.0), (3, 2))
    (g,) = back(dy)
    assert g.dtype == np.float32 and g.shape == (2, 3) and g.flags.writeable
    assert not np.shares_memory(g, dy) and np.all(g == 2.0)


@pytest.mark.regression
def test_pullback_called_twice_gives_separate_results():
    def f(a, b):
        c = a * 1.0
        c[0] = b[1]
        return np.tanh(c * b)
    _, back = bytegrad.pullback(f, X.copy(), Y.copy())
    g1 = back(np.ones(3))
    keep = [g.copy() for g in g1]
    g2 = back(2 * np.ones(3))
    assert all(np.array_equal(a, b) for a, b in zip(g1, keep))
    assert not any(np.shares_memory(a, b) for a, b in zip(g1, g2))
    assert all(np.allclose(2 * a, b) for a, b in zip(g1, g2))


@pytest.mark.regression
def test_pullback_containers_with_arrays_are_new():
    _, back = bytegrad.pullback(lambda p: p, {"a": X.copy()})
    seed = {"a": np.ones(3)}
    (g,) = back(seed)
    assert g is not seed and not np.shares_memory(g["a"], seed["a"])
    _, back = bytegrad.pullback(lambda p: p, NT(X.copy(), 1.0))
    (g,) = back(NT(np.ones(3), 2.0))
    assert type(g) is NT and g.b == 2.0


@pytest.mark.regression
def test_repeated_and_negative_argnums():
    g0, g1 = bytegrad.grad(lambda a, b: np.sum(a * b), (0, -2))(X, Y)
    assert np.allclose(g0, Y) and np.allclose(g1, Y) and not np.shares_memory(g0, g1)
    g0, g1 = bytegrad.grad(lambda a, b: np.sum(a * b), (0, 1))(X, Y)
    assert np.allclose(g0, Y) and np.allclose(g1, X)


@pytest.mark.regression
def test_separation_of_big_structures():
    """(Its cost is measured in bench/, not here.)  The caller's own containers are not
    handed back, and arrays that appear twice are separated."""
    big = [float(i) for i in range(100000)]
    w = np.ones(2)
    nest = [{"w": w, "b": [1.0, 2.0]} for _ in range(50)]
    (out,) = _distinct((big,), ((big,), 1.0))
    assert out == big and out is not big
    (sep,) = _distinct((nest,), ())
    arrays = [d["w"] for d in sep]
    assert all(np.array_equal(a, w) for a in arrays)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])
    (g,) = bytegrad.gradient(lambda xs: np.sum(np.array(xs) ** 2), big)
    assert g[3] == 6.0 and g[99999] == 199998.0


# Pinned bug: _separate recurses once per nesting level, so the gradient of a deeply nested
# argument (a linked list [value, next], 500 levels past the recursion limit) raises
# RecursionError in _separate; at 0880e1e the same gradient worked (the AD machinery
# itself walks it without recursion): 2 * value at each level.
@pytest.mark.regression
def test_deep_linked_list_gradient_is_separated_without_recursion():
    n = sys.getrecursionlimit() + 500
    node = None
    for i in range(n):
        node = [float(i), node]

    def f(node):
        acc = 0.0
        while node is not None:
            acc = acc + node[0] * node[0]
            node = node[1]
        return acc
    (g,) = bytegrad.gradient(f, node)
    assert g[0] == 2.0 * (n - 1) and g[1][0] == 2.0 * (n - 2)


# Pinned bug: a seed container holding no array is handed back as the gradient itself:
# pullback of a function passing a state dict (or the argument) through returns the
# caller's seed dict -- or, with back(xs), the caller's argument list -- so
# g["n"] *= 0.1 changes the caller's seed/argument ({'n': 0.1, ...} afterwards).
# With an array inside, the container is a new one.
@pytest.mark.regression
@pytest.mark.parametrize("case", ["state dict seed", "argument as seed"])
def test_pullback_never_returns_the_callers_own_container(case):
    if case == "state dict seed":
        st = {"n": 1.0, "h": 2.0}
        _, back = bytegrad.pullback(lambda s, x: (s, np.sum(x)), st, X.copy())
        seed = {"n": 1.0, "h": 0.0}
        g = back((seed, 1.0))[0]
        g["n"] *= 0.1
        assert seed == {"n": 1.0, "h": 0.0} and st == {"n": 1.0, "h": 2.0}
    else:
        xs = [1.0, 2.0]
        _, back = bytegrad.pullback(lambda p: p, xs)
        (g,) = back(xs)
        g[0] *= 0.1
        assert xs == [1.0, 2.0]


# Pinned bug: a gradient that a user's rule returns as a read-only broadcast view is
# handed to the caller read-only (g *= 0.1 raises "output array is read-only"), while
# its sibling, the same memory, is copied and writable: _distinct promises arrays the
# caller may change in place.
def _both(x, y):
    return np.sum(x) + np.sum(y)


@bytegrad.rule(_both)
def _both_rule(x, y):
    ones = np.broadcast_to(1.0, np.shape(x))
    return _both(x, y), lambda dy: (None, ones, ones)


@pytest.mark.regression
def test_gradient_from_a_rules_broadcast_view_is_writable():
    gx, gy = bytegrad.gradient(lambda x, y: _both(x, y), X.copy(), Y.copy())
    assert gy.flags.writeable
    assert gx.flags.writeable, "gx is a read-only view"


@pytest.mark.regression
def test_top_level_gradients_are_distinct():
    gs = bytegrad.gradient(lambda a, b, c: np.sum(a + b + c), X, Y, Z)
    assert not shared_memory(gs)
    gs = bytegrad.gradient(lambda a, b: np.sum(a * 2 + b), X, X)
    assert gs[0] is not X and gs[1] is not X and not shared_memory(gs)


# Pinned bug: _distinct looks only at top-level arrays by identity: a gradient nested in a
# list/dict/tuple is the very array another argument's gradient is, and a gradient may
# be a view (reshape, transpose) of another one.  g *= 0.1 on one changes the other.
@pytest.mark.regression
@pytest.mark.parametrize("f, args", [
    (lambda d, b: np.sum(d["w"] + b), ({"w": X}, Y)),
    (lambda l, b: np.sum(l[0] + b), ([X], Y)),
    (lambda t, b: np.sum(t[0] + b), ((X,), Y)),
    (lambda a, b: np.sum((a.reshape(6) + b) ** 2), (np.arange(6.0).reshape(2, 3), np.ones(6))),
    (lambda a, b: np.sum((a.T + b) ** 2), (np.arange(6.0).reshape(2, 3), np.ones((3, 2)))),
    (lambda l: np.sum(l[0] + l[1]), ([X, Y],)),
    (lambda d: np.sum(d["a"] + d["b"]), ({"a": X, "b": Y},)),
], ids=["dict+b", "list+b", "tuple+b", "reshape+b", "T+b", "list items", "dict items"])
def test_returned_gradients_do_not_share_memory(f, args):
    gs = bytegrad.gradient(f, *args)
    assert not shared_memory(gs), shared_memory(gs)


# Pinned bug: grad with a repeated argnum returns one array twice.
@pytest.mark.regression
def test_repeated_argnums_give_separate_arrays():
    g0, g1 = bytegrad.grad(lambda a, b: np.sum(a * b), (0, 0))(X, Y)
    assert g0 is not g1 and not np.shares_memory(g0, g1)


# Pinned bug: pullback of a + b hands the caller's seed dy back as a's gradient, so
# g *= 0.1 changes dy (and what a later back(dy) returns).
@pytest.mark.regression
def test_pullback_gradient_is_not_the_seed():
    _, back = bytegrad.pullback(lambda a, b: a + b, X, Y)
    dy = np.array([1.0, 2.0, 3.0])
    ga, gb = back(dy)
    ga *= 0.1
    assert np.array_equal(dy, [1.0, 2.0, 3.0])


@pytest.mark.regression
@pytest.mark.parametrize("f, seed", [
    (lambda w: (w,), lambda s: (s,)), (lambda w: [w], lambda s: [s]),
    (lambda w: {"a": w}, lambda s: {"a": s}), (lambda w: (w, w), lambda s: (s, s * 2.0)),
    (lambda w: (w * 1.0, w), lambda s: (s * 2.0, s))], ids=["tuple", "list", "dict", "twice", "mixed"])
def test_a_gradient_is_not_the_seed_inside_a_container(f, seed):
    """An output holding the input as it is: its gradient is the seed's array, copied
    (it was handed back as it is, so g *= 10 changed the caller's seed)."""
    _, back = bytegrad.pullback(f, X.copy())
    s = np.array([1.0, 2.0, 3.0])
    dy = seed(s)
    g, = back(dy)
    g *= 10.0
    assert np.array_equal(s, [1.0, 2.0, 3.0])
    assert np.allclose(g, 10.0 * sum(np.asarray(v) for v in (dy.values() if isinstance(dy, dict) else dy)))


@pytest.mark.regression
def test_gradients_of_two_arguments_are_distinct_arrays():
    # Pinned bug: the pullback of a + b hands the same
    # array to both sides, and gradient() returns it for both arguments, so an in-place
    # optimiser step on one gradient (g *= lr) silently changes the other
    A, B = np.ones((3, 3)), np.full((3, 3), 2.0)
    ga, gb = bytegrad.gradient(lambda a, b: np.sum(np.sin(a + b)), A, B)
    expected = np.cos(A + B)
    ga *= 0.1
    assert np.allclose(gb, expected), "scaling a's gradient in place changed b's"
