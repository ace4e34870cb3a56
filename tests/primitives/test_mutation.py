"""Rules of in-place operations: gradients against central finite differences, and
the arguments afterwards holding what the plain call leaves in them."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from checks import arr, same_contents


def _fd(f, args, i, h=1e-6):
    """Central differences of scalar ``f`` in float or array argument ``i``; every
    evaluation gets fresh copies, as ``f`` changes its arguments."""
    def at(delta):
        a = copy.deepcopy(args)
        a[i] = a[i] + delta
        return f(*a)
    x = args[i]
    if isinstance(x, float):
        return (at(h) - at(-h)) / (2 * h)
    g = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[idx] = h
        g[idx] = (at(e) - at(-e)) / (2 * h)
    return g


def check_mutating(f, *args, rtol=1e-6, atol=1e-7):
    """Gradient of ``f`` (which may change its arguments) in every float and float-array
    argument against finite differences; the arguments afterwards hold what the plain
    call leaves; a second reverse pass gives the same gradients."""
    args = list(args)
    plain = copy.deepcopy(args)
    y_plain = f(*plain)
    expected = [_fd(f, args, i) if isinstance(a, (float, np.ndarray)) else None
                for i, a in enumerate(args)]
    y, back = bytegrad.pullback(f, *args)
    assert np.allclose(y, y_plain, rtol=1e-12, atol=0)
    grads = back(1.0)
    assert all(same_contents(a, b) for a, b in zip(args, plain)), "the arguments differ from the plain call's"
    again = back(1.0)
    assert all(same_contents(a, b) for a, b in zip(args, plain)), "a second reverse pass changed the arguments"
    for i, (g, e) in enumerate(zip(grads, expected)):
        if e is not None:
            assert np.allclose(0.0 if g is None else g, e, rtol=rtol, atol=atol), \
                f"argument {i}: bytegrad {g!r} vs finite differences {e!r}"
            assert np.allclose(0.0 if again[i] is None else again[i], e, rtol=rtol, atol=atol)
    return grads


# -- arrays --------------------------------------------------------------------

def test_read_overwrite_read_gives_each_read_its_gradient():
    def f(a, x):
        first = a[1] * 3.0
        a[1] = x * x
        return first + a[1] * a[0] + a.sum()
    check_mutating(f, arr(3), 0.7)


@pytest.mark.parametrize("index", [1, slice(1, 3), (slice(None), 0), np.array([True, False, True]),
                                   [0, 2], Ellipsis])
def test_array_write_at_every_kind_of_index(index):
    def f(x, v):
        a = x * 1.5
        a[index] = np.sin(v) if np.ndim(a[index]) else v * 2.0
        return (a ** 2).sum()
    x = arr((3, 2)) if isinstance(index, tuple) else arr(3)
    shape = np.shape(x[index])
    check_mutating(f, x, arr(shape, seed=1) if shape else 0.4)


def test_scalar_broadcast_into_a_slice():
    def f(x, v):
        y = x.copy()
        y[1:] = v
        return (y * x).sum()
    check_mutating(f, arr(4), 0.3)


def test_writes_through_a_view_change_the_base():
    def f(x, s):
        v = x[2:]
        v[0] = v[0] * s
        v *= s
        return (x ** 2).sum() + v.sum()
    check_mutating(f, arr(5), 1.3)


def test_in_place_operators_on_an_array_argument():
    def f(a, b):
        a += b
        a *= b
        a -= 1.0
        a /= 2.0
        return (a * a).sum()
    check_mutating(f, arr(3), arr(3, seed=1))


def test_indexed_in_place_add_on_slices_and_fancy_indices():
    def f(a, v):
        a[1:3] += v
        a[[0, 3]] *= v[0]
        return (a ** 3).sum()
    check_mutating(f, arr(4), arr(2, seed=2))


def test_aliases_see_each_others_writes():
    def f(x, y):
        a = x * 1.0
        b = a
        rows = [a]
        b[0] = y
        rows[0][1] = y * y
        return a.sum() * a[0]
    check_mutating(f, arr(3), 0.6)


def test_copyto_fill_and_out_keyword():
    def f(x, y):
        a = np.ones(3)
        np.copyto(a, x * 2.0, where=x > 0)
        b = np.zeros(3)
        b.fill(y)
        c = np.empty(3)
        np.multiply(a, b, out=c)
        np.add(c, x, out=c)
        return (c * c).sum() + a[x <= 0].sum()
    check_mutating(f, np.array([0.5, -1.0, 2.0]), 0.7)


def test_integer_array_writes_run_and_are_restored():
    def f(x):
        idx = np.array([0, 0])
        y = x[idx]
        idx[1] = 2  # the pullback of x[idx] must see the index it used
        return (y * x[idx]).sum()
    check_mutating(f, arr(3))


# -- lists -----------------------------------------------------------------------

def test_list_methods():
    def f(x, y):
        xs = [x, y]
        xs.append(x * y)
        xs.extend([y * y, 2.0])
        xs.insert(1, x * 3.0)
        last = xs.pop()
        first = xs.pop(0)
        xs.remove(2.0) if 2.0 in xs else None
        xs.reverse()
        xs.sort()
        s = 0.0
        for i, v in enumerate(xs):
            s = s + (i + 1) * v
        return s * first + last
    check_mutating(f, 0.7, 1.3)


def test_list_slice_assignment_changing_length_and_del():
    def f(x, y):
        xs = [x, y, x * y, 1.0]
        xs[1:3] = [y * 2.0, x, y, x * x]
        del xs[0]
        xs[-1] = xs[-1] * y
        del xs[1:3]
        return xs[0] * xs[1] + xs[-1]
    check_mutating(f, 0.7, 1.3)


def test_list_argument_changed_in_place_and_in_place_concatenation():
    def f(xs, w):
        xs[0] = xs[0] * w
        xs += [w]
        xs.append(xs[1] * w)
        return xs[0] + xs[-1] + xs[-2] * xs[0]
    xs = [0.5, 2.0]
    before = list(xs)
    g = bytegrad.gradient(f, xs, 1.5)
    after = list(before)
    f(after, 1.5)
    assert xs == after
    assert g[0] == pytest.approx([1.5 + 1.5 * 1.5 * 2 * 0.5, 1.5])
    assert g[1] == pytest.approx(_fd(lambda w: f(list(before), w), [1.5], 0))


def test_list_clear_and_refill():
    def f(x):
        xs = [x, x * x]
        total = xs[0] + xs[1]
        xs.clear()
        xs.append(total * x)
        return xs[0] + total
    check_mutating(f, 0.8)


# -- dicts -----------------------------------------------------------------------

def test_dict_methods():
    def f(x, y):
        d = {"a": x}
        d["b"] = x * y
        d["a"] = d["a"] * y
        d.update({"c": y * y}, e=x)
        d.setdefault("a", 100.0)
        v = d.setdefault("f", x + y)
        p = d.pop("c")
        del d["e"]
        return d["a"] * d["b"] + v * p + sum(d.values())
    check_mutating(f, 0.7, 1.3)


def test_dict_argument_of_weights():
    def f(params, x):
        params["w"] = params["w"] * 2.0
        return np.sum(np.tanh(params["w"] * x + params["b"]))
    params = {"w": arr(3), "b": 0.5}
    g = bytegrad.gradient(f, copy.deepcopy(params), 0.3)
    fd_w = _fd(lambda w: f({"w": w, "b": 0.5}, 0.3), [params["w"]], 0)
    fd_b = _fd(lambda b: f({"w": params["w"].copy(), "b": b}, 0.3), [0.5], 0)
    assert set(g[0]) == {"w", "b"}
    np.testing.assert_allclose(g[0]["w"], fd_w, rtol=1e-6)
    assert g[0]["b"] == pytest.approx(fd_b, rel=1e-6)


# -- objects ---------------------------------------------------------------------

class Box:
    def __init__(self, v):
        self.v = v
        self.n = 0

    @property
    def double(self):
        return self.v * 2.0

    @double.setter
    def double(self, value):
        self.v = value / 2.0


class Logged:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)


def test_attribute_writes_on_an_object_passed_in():
    def f(box, x):
        box.v = box.v * x
        box.n = box.n + 1
        box.double = box.double * x
        return box.v * box.double
    box, x = Box(0.7), 1.3
    plain = copy.deepcopy(box)
    f(plain, x)
    g = bytegrad.gradient(f, box, x)
    assert same_contents(box, plain)
    fd_v = _fd(lambda v: f(Box(v), x), [0.7], 0)
    fd_x = _fd(lambda x: f(Box(0.7), x), [x], 0)
    assert g[0]["v"] == pytest.approx(fd_v, rel=1e-6)
    assert g[1] == pytest.approx(fd_x, rel=1e-6)


def test_custom_setattr_and_delattr():
    def f(x):
        o = Logged()
        o.a = x * x
        o.b = o.a * x
        del o.a
        return o.b * len(o.log)
    check_mutating(f, 0.9)


class Grid:
    def __init__(self, n):
        self.cells = [0.0] * n

    def __setitem__(self, i, v):
        self.cells[i] = v

    def __getitem__(self, i):
        return self.cells[i]


def test_user_setitem():
    def f(x):
        g = Grid(3)
        g[0] = x
        g[1] = g[0] * x
        g[0] = g[1] * g[0]
        return g[0] + g[1] + g[2]
    check_mutating(f, 1.1)


# -- refused, with a clear error -------------------------------------------------

def test_list_repetition_in_place_is_refused():
    def f(x):
        xs = [x]
        xs *= 3
        return xs[0]
    with pytest.raises(NotImplementedError, match=r"`\*=` on a list"):
        bytegrad.gradient(f, 1.0)


# -- properties ------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["read", "write", "add"]), st.integers(0, 3)),
                min_size=1, max_size=12))
def test_random_reads_and_writes_on_an_array(program):
    def f(x, w):
        a = x * 1.0
        s = 0.0
        for op, i in program:
            if op == "read":
                s = s + a[i] * w
            elif op == "write":
                a[i] = s + w * a[(i + 1) % 4]
            else:
                a[i] += w * s
        return s + (a * a).sum()
    check_mutating(f, arr(4), 0.6, rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["append", "pop", "set", "insert", "read"]), st.integers(0, 5)),
                min_size=1, max_size=12))
def test_random_list_programs(program):
    def f(x, w):
        xs = [x, w]
        s = 0.0
        for op, i in program:
            if op == "append":
                xs.append(s * w + x)
            elif op == "pop" and len(xs) > 1:
                s = s + xs.pop(i % len(xs)) * w
            elif op == "set":
                xs[i % len(xs)] = xs[(i + 1) % len(xs)] * w
            elif op == "insert":
                xs.insert(i, s + w)
            else:
                s = s + xs[i % len(xs)] * xs[0]
        return s + sum(xs)
    check_mutating(f, 0.7, 1.2, rtol=1e-5, atol=1e-6)


def test_repeated_indices_keep_the_last_write():
    def f(x, v):
        a = x * 1.0
        a[[0, 2, -3]] = v
        a[np.array([1, 1])] += v[:2]
        return (a ** 2).sum()
    check_mutating(f, arr(3), arr(3, seed=1))

    def g(x, v):
        a = np.zeros((2, 2))
        a[[0, 0], [1, 1]] = v
        return (a * x).sum()
    check_mutating(g, arr((2, 2)), arr(2, seed=3))


def test_in_place_sort_and_scatter_add():
    def f(x, b):
        a = x * 2.0
        a.sort()
        c = np.zeros(3)
        np.add.at(c, [0, 2, 0], b)
        np.subtract.at(a, [1, 1], b[0])
        return (a * np.arange(1.0, 5.0)).sum() + (c ** 2).sum() * a[0]
    check_mutating(f, np.array([0.3, -1.0, 2.0, 0.1]), arr(3, seed=4))


def test_other_ufunc_at_is_refused():
    def f(x):
        a = x * 1.0
        np.multiply.at(a, [0, 0], 2.0)
        return a.sum()
    with pytest.raises(NotImplementedError, match="np.multiply.at"):
        bytegrad.gradient(f, arr(3))
