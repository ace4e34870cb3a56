"""Lists and arrays a function makes and changes, passed on as values in the tangent code
nested differentiation runs (transforms/private.py): which containers the pass takes, and
second derivatives of generated programs that change them, against finite differences of
the first-order gradient (which follows changes in place by its own shadow)."""
import collections
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import bytegrad
from bytegrad.ir import ops
from bytegrad.runtime import hessian as hessian_module

from batched_passes import by_columns, passes, same  # noqa: F401  (passes: a fixture)
from checks import fd_hessian


def _passed_on(f) -> bool:
    """Whether the nested tangent code of ``f`` passes a container's writes on."""
    primal = bytegrad.tangent_stages(f, nested=True).primal
    return any(s.fn is ops.set_item or s.fn is ops.appended for _, _, s in primal.statements())


def _user(a):
    return a


def _loop(x):
    y = np.zeros(3)
    for i in range(3):
        y[i] = x[i] ** 2
    return y.sum()


def _appended(x):
    out = []
    for v in x:
        out.append(v * v)
    return out[0] + out[-1]


def _view_consumed_before_the_write(x):
    y = np.ones(3)
    y[0] = x[0]
    y[1:] = y[:2] * x[1]  # (the view y[:2] is read before the write)
    return y @ y


def _given_to_a_function_after_the_last_write(x):
    y = np.zeros(2)
    y[0] = x[0] ** 2 * x[1]
    return np.sum(_user(y))


def _returned(x):
    y = np.zeros(2)
    y[1] = x[1]
    return y


def _transposed_after_the_last_write(x):
    a = np.zeros((3, 3))
    for i in range(3):
        a[i, :] = x * x[i]
    return (a.T @ x) @ x  # (x·x)²


def _iterated_after_the_last_write(x):
    xs = [x[0]]
    xs.append(x[1])
    s = 0.0
    for v in xs:
        s = s + v * v
    return s


def _view_read_after_a_write(x):
    y = np.zeros(2)
    view = y[:1]
    y[0] = x[0]
    return view.sum()


def _given_to_a_function_before_a_write(x):
    y = np.zeros(2)
    z = _user(y)  # (another name for it)
    y[0] = x[0]
    return z.sum()


def _stored_in_a_list(x):
    y = np.zeros(2)
    keep = [y]
    y[0] = x[0]
    return keep[0].sum()


def _transposed(x):
    y = np.zeros((2, 2))
    t = y.T  # (a view, by a method the pass does not take)
    y[0, 1] = x[0]
    return t[1, 0]


def _iterated_then_appended(x):
    xs = [x[0]]
    for v in xs:
        if len(xs) < 3:
            xs.append(v * 2.0)
    return sum(xs)


def _an_argument(x):
    x[0] = x[1]  # (not made here)
    return x.sum()


def _an_array_of_its_argument(x):
    y = np.array(x)  # (np.array may return its argument: not taken)
    y[0] = x[1]
    return y.sum()


@pytest.mark.parametrize("f", [_loop, _appended, _view_consumed_before_the_write,
                               _given_to_a_function_after_the_last_write, _returned,
                               _iterated_after_the_last_write, _transposed_after_the_last_write])
def test_containers_every_use_of_which_is_known_pass_their_writes_on(f):
    assert _passed_on(f)


@pytest.mark.parametrize("f", [_given_to_a_function_before_a_write, _stored_in_a_list, _transposed,
                               _iterated_then_appended, _an_argument, _an_array_of_its_argument])
def test_containers_another_name_may_see_keep_their_changes_in_place(f):
    assert not _passed_on(f)


def _element_kept_across_a_write(x):
    y = np.zeros(2)
    y[0] = x[0] * x[1]
    kept = [y[0]]  # (a number of a 1-d array: nothing changes it)
    y[0] = x[1] ** 3
    return kept[0] * y[0]


def test_a_read_used_after_the_next_write_is_checked_to_be_a_number_where_it_runs():
    for f in (_element_kept_across_a_write, _view_read_after_a_write):
        primal = bytegrad.tangent_stages(f, nested=True).primal
        assert _passed_on(f) and any(s.fn is ops.item_of for _, _, s in primal.statements())
    x = np.array([0.7, -1.2])
    assert bytegrad.hessian(_element_kept_across_a_write)(x) == \
        pytest.approx(fd_hessian(_element_kept_across_a_write, x), rel=1e-6, abs=1e-6)
    with pytest.raises(bytegrad.NestingError, match=r"test_private\.py:\d+: .*a part of an array read"):
        bytegrad.hessian(_view_read_after_a_write)(x)


SECOND = {
    "hessian": lambda f, x: bytegrad.hessian(f)(x),
    "grad of grad": lambda f, x: np.stack([bytegrad.grad(lambda z: bytegrad.grad(f)(z)[i])(x)
                                           for i in range(len(x))]),
    "jvp of grad": lambda f, x: np.stack([bytegrad.jvp(bytegrad.grad(f), (x,), (e,))[1]
                                          for e in np.eye(len(x))], axis=1),
    "jacfwd of grad": lambda f, x: bytegrad.jacfwd(bytegrad.grad(f))(x),
    "jvp of a pullback": lambda f, x: np.stack([
        bytegrad.jvp(lambda z: bytegrad.pullback(f, z)[1](1.0)[0], (x,), (e,))[1] for e in np.eye(len(x))], axis=1),
}


@pytest.mark.parametrize("f", [_loop, _appended, _view_consumed_before_the_write,
                               _given_to_a_function_after_the_last_write,
                               _iterated_after_the_last_write, _transposed_after_the_last_write])
@pytest.mark.parametrize("second", SECOND)
def test_second_derivatives_of_containers_passed_on_match_finite_differences(f, second):
    x = np.array([0.7, -1.2, 0.4])
    assert SECOND[second](f, x) == pytest.approx(fd_hessian(f, x), rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("f", [_given_to_a_function_before_a_write, _stored_in_a_list, _transposed])
def test_a_container_another_name_may_see_is_refused_at_second_order_by_line(f):
    with pytest.raises(bytegrad.NestingError, match=r"test_private\.py:\d+: .*change in place"):
        bytegrad.hessian(f)(np.array([0.7, -1.2, 0.4]))


_STORE = {}


def _changes_its_argument(x):
    s = x[0] * 2.0
    x[0] = x[1] * x[2]  # (the change: a line below the def)
    return x[0] * s


def _changes_a_global(x):
    _STORE["a"] = x[0] * x[1]  # (the change)
    return _STORE["a"] * x[2]


@pytest.mark.parametrize("f, below", [(_changes_its_argument, 2), (_changes_a_global, 1)])
@pytest.mark.parametrize("second", ["hessian", "jvp of grad"])
def test_a_refused_change_in_place_is_named_by_its_own_line(f, below, second):
    line = f.__code__.co_firstlineno + below
    with pytest.raises(bytegrad.NestingError, match=rf"change in place .* at .*test_private\.py:{line} (in|by) "):
        SECOND[second](f, np.array([1.0, 2.0, 3.0]))


def test_third_derivatives_through_an_array_a_function_fills():
    def f(x):
        y = np.zeros(3)
        y[0] = x ** 2
        y[1] = y[0] * x  # x³
        y[2] = math.sin(y[1])
        return y[0] * y[1] + y[2]  # x⁵ + sin x³
    x = 0.6
    d3 = 60 * x * x - 27 * x ** 6 * math.cos(x ** 3) - 54 * x ** 3 * math.sin(x ** 3) + 6 * math.cos(x ** 3)
    assert bytegrad.grad(bytegrad.grad(bytegrad.grad(f)))(x) == pytest.approx(d3)
    assert bytegrad.jvp(bytegrad.grad(bytegrad.grad(f)), (x,), (1.0,))[1] == pytest.approx(d3)
    assert bytegrad.grad(lambda v: bytegrad.jvp(bytegrad.grad(f), (v,), (1.0,))[1])(x) == pytest.approx(d3)


@pytest.mark.regression
def test_third_derivatives_through_a_list_a_function_fills():
    # (a forward rule's lifted binding of its arguments reached the layout's code, which a
    # third level tried to differentiate: an error naming no function)
    def f(x):
        xs = [x, x * x]
        xs.append(xs[1] * x)  # x³
        xs[0] = xs[-1] * x  # x⁴
        return xs[0] + math.sin(xs[2])
    x = 0.6
    d3 = 24 * x - 27 * x ** 6 * math.cos(x ** 3) - 54 * x ** 3 * math.sin(x ** 3) + 6 * math.cos(x ** 3)
    assert bytegrad.grad(bytegrad.grad(bytegrad.grad(f)))(x) == pytest.approx(d3)
    assert bytegrad.jvp(bytegrad.grad(bytegrad.grad(f)), (x,), (1.0,))[1] == pytest.approx(d3)


def test_a_write_the_rules_do_not_follow_is_refused_by_line():
    def into_a_slice(x):
        xs = [x, x, x]
        xs[0:2] = [x * x]
        return xs[0] * xs[1]

    with pytest.raises(bytegrad.NestingError, match=r"test_private\.py:\d+: .*slice of a list"):
        bytegrad.grad(bytegrad.grad(into_a_slice))(0.5)
    assert bytegrad.grad(into_a_slice)(0.5) == pytest.approx(3 * 0.5 ** 2)  # (first order follows it)


@pytest.mark.regression
@pytest.mark.parametrize("second", SECOND)
def test_reads_from_the_end_of_a_list_keep_their_item_when_it_grows(second):
    # (a read's pullback held the list and -1, resolved after the appends: zeros, silently)
    def recurrence(x):
        xs = [x[0]]
        for i in range(3):
            xs.append(xs[-1] * x[i])
        return xs[-1]  # x0² x1 x2

    def sliced(x):
        xs = [x[0], x[1]]
        tail = xs[-1:]
        xs[0] = x[1] * x[2]
        xs.append(xs[-1] * xs[0])
        return tail[0] ** 2 + xs[2]

    x = np.array([1.1, 2.3, 0.7])
    for f in (recurrence, sliced):
        assert SECOND[second](f, x) == pytest.approx(fd_hessian(f, x), rel=1e-6, abs=1e-6)


def test_repeated_positions_keep_the_last_write_at_second_order():
    def f(x):
        y = np.zeros(2)
        y[[0, 0, 1]] = x ** 2  # (y[0] is x[1]², the last write there)
        return np.sum(y ** 2)
    x = np.array([0.5, 1.5, -0.7])
    assert bytegrad.hessian(f)(x) == pytest.approx(np.diag([0.0, 12 * 1.5 ** 2, 12 * 0.7 ** 2]))


def _filled_then_summed(x):
    r = np.zeros(len(x))
    for i in range(1, len(x)):
        r[i] = x[i] - x[i - 1] ** 2
    r[0] += x[0] * x[-1]
    s = 0.0
    for i in range(len(r)):
        s = s + r[i] ** 2
    return s


def test_hessians_of_arrays_filled_in_place_take_their_columns_in_one_batched_pass(passes):
    x = np.linspace(-1.0, 1.2, hessian_module.FEWEST + 2)
    H = bytegrad.hessian(_filled_then_summed)(x)
    assert passes == [False]  # (taken, not abandoned)
    same(H, by_columns(bytegrad.hessian, _filled_then_summed, x))
    assert H == pytest.approx(fd_hessian(_filled_then_summed, x), rel=1e-6, abs=1e-6)


# -- objects a class's call makes ----------------------------------------------------------

class _Particle:
    def __init__(self, q, p):
        self.q = q
        self.p = p * self.q  # (a field read before the next write)
        self.q = self.q ** 2

    def energy(self):
        return self.q * self.p ** 2


@dataclasses.dataclass
class _Pair:
    a: float
    b: float


_Point = collections.namedtuple("_Point", "x y")


class _EarlyReturn:
    def __init__(self, a, b):
        self.a = a
        if a > 0:
            self.b = b * a
            return
        self.b = b


def _objects(x):
    s = _Particle(x[0], x[1]).energy()  # x0⁴ x1²
    pair = _Pair(x[1], x[2])
    pt = _Point(x[0], pair.a * pair.b)
    e = _EarlyReturn(x[2], x[0])
    return s + pt.x * pt.y ** 2 + e.a * e.b ** 2


@pytest.mark.parametrize("second", SECOND)
def test_objects_a_class_call_makes_differentiate_to_second_order(second):
    for x in (np.array([0.7, -1.2, 0.4]), np.array([0.7, -1.2, -0.4])):  # (each return of __init__)
        assert SECOND[second](_objects, x) == pytest.approx(fd_hessian(_objects, x), rel=1e-6, abs=1e-6)


def test_hessians_of_objects_made_in_a_loop_take_their_columns_in_one_batched_pass(passes):
    def f(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + _Particle(x[i], x[i + 1]).energy()
        return s
    x = np.linspace(-1.0, 1.3, hessian_module.FEWEST + 2)
    H = bytegrad.hessian(f)(x)
    assert passes == [False]
    same(H, by_columns(bytegrad.hessian, f, x))
    assert H == pytest.approx(fd_hessian(f, x), rel=1e-6, abs=1e-6)


class _Doubling:
    def __init__(self, a):
        self.a = a

    def __setattr__(self, name, v):
        object.__setattr__(self, name, 2 * v)


class _Property:
    def __init__(self, a):
        self.a = a

    a = property(lambda self: self._a, lambda self, v: setattr(self, "_a", 3 * v))


class _MethodBetweenWrites:
    def __init__(self, a):
        self.a = a
        self.b = self.square()  # (the method holds the object as it was)
        self.a = 2 * a

    def square(self):
        return self.a ** 2


class _Derived(_Pair):
    def __init__(self, a, b):
        super().__init__(a, b)


class _MadeElsewhere:
    def __new__(cls, a):
        return object.__new__(_MadeElsewhereSub)  # (whose __init__ the call then runs)


class _MadeElsewhereSub(_MadeElsewhere):
    def __init__(self, a):
        self.y = a * a


def _changed_after_its_call(x):
    p = _Pair(x[0], x[1])
    p.a = p.a * p.b  # (the object is not the function's to pass on)
    return p.a * x[0]


@pytest.mark.parametrize("f", [lambda x: _Doubling(x[0]).a * x[1], lambda x: _Property(x[0]).a * x[1],
                               lambda x: _MethodBetweenWrites(x[0]).b * x[1],
                               lambda x: _Derived(x[0], x[1]).a * x[1], _changed_after_its_call,
                               lambda x: _MadeElsewhere(x[0]).y * x[1]],
                         ids=["__setattr__", "property", "method between writes", "super()", "changed after",
                              "__new__ of its own"])
def test_objects_whose_writes_run_code_of_theirs_are_refused_at_second_order_by_line(f):
    x = np.array([0.7, -1.2])
    fd = [(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(2)]
    assert bytegrad.grad(f)(x) == pytest.approx(fd, rel=1e-6)  # (first order follows them)
    with pytest.raises(bytegrad.NestingError, match=r"test_private\.py:\d+: "):
        bytegrad.hessian(f)(x)


# -- generated programs ---------------------------------------------------------------------

EXPRESSIONS = ["x[{k}]", "a[{m}]", "np.sin(x[{k}]) * a[{m}]", "x[{k}] * x[{j}]", "a.sum() * x[{k}]",
               "xs[-1] * x[{k}]", "math.exp(0.3 * x[{k}])", "1.5"]
STATEMENTS = ["a[{m}] = {e}", "a[{m}] += {e}", "xs.append({e})", "a[{m}:] = a[:{r}] * {e}",
              "xs[{m} % len(xs)] = {e}",
              "for i in range(2):\n        a[{m}] = a[{m}] * {e} + x[i]",
              "if x[{k}] > 0:\n        a[{m}] = {e}\n    else:\n        xs.append({e} * 2.0)"]


def _source(steps):
    lines = ["def f(x):", "    a = np.zeros(3)", "    xs = [x[0]]"]
    for s, e, k, j, m in steps:
        expr = EXPRESSIONS[e].format(k=k, j=j, m=m)
        lines.append("    " + STATEMENTS[s].format(m=m, r=3 - m, e=expr, k=k))
    lines.append("    s = np.sum(a * a)")
    lines.append("    for v in xs:")
    lines.append("        s = s + v * v")
    lines.append("    return s")
    return "\n".join(lines)


steps_strategy = st.lists(st.tuples(st.integers(0, len(STATEMENTS) - 1), st.integers(0, len(EXPRESSIONS) - 1),
                                    st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)),
                          min_size=1, max_size=6)


@settings(max_examples=25, deadline=None)
@given(steps=steps_strategy, x=st.lists(st.floats(-1.5, 1.5), min_size=3, max_size=3))
def test_generated_programs_that_fill_lists_and_arrays_have_hessians_that_match_finite_differences(steps, x):
    assume(all(abs(v) > 1e-3 for v in x))  # (finite differences across a branch's edge)
    src = _source(steps)
    ns = {"np": np, "math": math}
    exec(compile(src, f"<generated {len(src)}>", "exec"), ns)
    f = ns["f"]
    x = np.array(x)
    assert _passed_on(f), src
    assume(bytegrad.grad(f)(x) is not None)  # (a program whose writes leave no x in it: no Hessian)
    H = bytegrad.hessian(f)(x)
    assert H == pytest.approx(fd_hessian(f, x), rel=1e-5, abs=1e-5), src
    with pytest.MonkeyPatch.context() as m:  # (three columns in a batched pass, where one is taken)
        m.setattr(hessian_module, "FEWEST", 1)
        same(bytegrad.hessian(f)(x), H, rtol=1e-10)
    y, dy = bytegrad.jvp(bytegrad.grad(f), (x,), (np.ones(3),))
    assert y == pytest.approx(bytegrad.grad(f)(x)) and dy == pytest.approx(fd_hessian(f, x).sum(1), rel=1e-5, abs=1e-5), src
