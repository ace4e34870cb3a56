"""Batched tangents (runtime/batching.py): `jacfwd` pushes many columns in one forward
pass, the rules that allow it computing on the whole batch, the pure ones called once
per direction, and anything else (a change in place, a generator) abandoning the batch
for the columns one at a time.  Each Jacobian is checked against the one computed a
column at a time, and that against reverse mode or a closed form."""
from __future__ import annotations

import functools
import math
import os
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytegrad
from bytegrad.bench.cases import rosenbrock_iadd as rosenbrock
from bytegrad.bench.hvp import rosenbrock_hessian_times
from bytegrad.runtime import batching, jax_api
from bytegrad.runtime.batching import Batch, Unbatchable


import batched_passes
from batched_passes import passes, retrying, same, spied  # noqa: F401  (passes: a fixture)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "transforms"))
from test_random_programs import draw_program  # noqa: E402


by_columns = functools.partial(batched_passes.by_columns, bytegrad.jacfwd)


# -- the Batch itself ---------------------------------------------------------------------

def test_elementwise_arithmetic_broadcasts_each_direction_as_its_value():
    d = Batch(np.arange(6.0).reshape(2, 3))  # an array of shape (3,), along two directions
    a = np.array([[1.0], [2.0]])  # (2, 1): the value broadcasts to (2, 3)
    got = (d * a + 1.0).b
    assert got.shape == (2, 2, 3)
    for j in range(2):
        np.testing.assert_array_equal(got[j], d.b[j] * a + 1.0)
    s = Batch(np.array([2.0, 3.0]))  # a float's
    np.testing.assert_array_equal((np.cos(0.5) * s - s / 2.0).b, np.cos(0.5) * s.b - s.b / 2.0)
    np.testing.assert_array_equal((s * np.ones(3)).b, np.outer(s.b, np.ones(3)))


def test_items_and_transpose_are_each_directions():
    d = Batch(np.arange(24.0).reshape(2, 3, 4))
    for key in (1, (slice(None), 2), (..., 0), np.array([2, 0]), (np.array([True, False, True]),)):
        got = d[key].b
        for j in range(2):
            np.testing.assert_array_equal(got[j], d.b[j][key])
    for j in range(2):
        np.testing.assert_array_equal(d.T.b[j], d.b[j].T)


@pytest.mark.parametrize("use", [np.sum, len, bool, float, lambda d: d.shape, lambda d: d == 0,
                                 lambda d: np.asarray(d), lambda d: d @ d, lambda d: d ** 2,
                                 lambda d: np.add.reduce(d), lambda d: d.conjugate()])
def test_what_a_batch_does_not_define_raises_unbatchable(use):
    with pytest.raises(Unbatchable):
        use(Batch(np.ones((2, 3))))


# -- jacfwd, batched ---------------------------------------------------------------------

def rosenbrock_gradient(x):
    a, b = x[:-1], x[1:]
    return np.concatenate([-400.0 * a * (b - a ** 2) - 2.0 * (1 - a), [0.0]]) + \
        np.concatenate([[0.0], 200.0 * (b - a ** 2)])


def vectorised(x):
    return np.sin(x) * x[::-1] + np.cos(x[0]) * x ** 2 + np.sum(x) * np.dot(x, x)


def containers(p, scale):
    out = [math.sin(p["w"][0]) * scale, np.exp(p["w"]) * p["b"]]
    a, b = out
    return {"first": a, "rest": tuple([v * 2.0 for v in b]), "t": np.tanh(np.outer(p["w"], p["w"])).T}


def branchy(x, y):
    if x > y:
        x = math.sin(x) * y
    while x < 3.0:
        x = x * 1.5 + abs(y)
    return x * y


class V:
    def __init__(self, v):
        self.v = v

    def __mul__(self, o):
        return self.v * o


def calls_objects(x):
    return V(x[0]) * x[1] + x[2]


BATCHED = [
    (rosenbrock, (np.linspace(-1.0, 1.5, 30),)),
    (vectorised, (np.array([0.3, -1.2, 0.7, 2.0]),)),
    (containers, ({"w": np.array([0.4, -0.3]), "b": 1.5}, 2.0)),
    (branchy, (0.9, 0.4)),
    (branchy, (0.2, -0.4)),
]


@pytest.mark.parametrize("f, args", BATCHED, ids=lambda v: getattr(v, "__name__", ""))
def test_jacfwd_in_one_batched_pass_is_the_column_by_column_jacobian(f, args, passes):
    argnums = tuple(range(len(args)))
    got = bytegrad.jacfwd(f, argnums)(*args)
    assert passes == [False]  # (batched, not abandoned)
    same(got, by_columns(f, *args, argnums=argnums))
    same(got, bytegrad.jacrev(f, argnums)(*args))


def test_jacfwd_of_a_gradient_loop_against_the_closed_form_hessian_and_in_passes(passes, monkeypatch):
    x = np.linspace(-1.0, 1.5, 12)
    want = np.stack([rosenbrock_hessian_times(x, e) for e in np.eye(len(x))])  # (symmetric)
    np.testing.assert_allclose(bytegrad.jacfwd(rosenbrock_gradient)(x), want, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(jax_api, "_BATCHED_ELEMENTS", 60)  # five columns a pass: three passes
    same(bytegrad.jacfwd(rosenbrock_gradient)(x), by_columns(rosenbrock_gradient, x))
    assert passes == [False, False]


def test_a_rule_without_batches_runs_once_per_direction_and_its_value_once(passes):
    calls = []

    def f(x):
        calls.append(1)
        return np.linalg.solve(np.diag(x) + 2.0, x) * np.prod(x)  # (rules not marked)

    x = np.array([0.5, 1.5, -0.25])
    got = bytegrad.jacfwd(f)(x)
    assert passes == [False] and len(calls) == 1
    same(got, by_columns(f, x))
    same(got, bytegrad.jacrev(f)(x))


def appends(x):
    out = []
    for v in x:
        out.append(v * v)
    return np.array(out) * x[0]


def writes(x):
    y = np.zeros(3)
    y[0] = x[0] * x[1]
    y[1:] = x[1:] ** 2
    return y


class Box:
    pass


def fields(x):
    b = Box()
    b.v = x * 2.0
    return b.v * x


def generator(x):
    return sum(v * v for v in x) * x


def in_place(x):
    y = x.copy()
    y *= x[0]
    y += x * x[2]
    y[0] -= x[1]
    return y


def stencil(x):  # (a residual vector written an item at a time)
    r = np.zeros(len(x))
    for i in range(1, len(x) - 1):
        r[i] = x[i - 1] - 2.0 * x[i] + x[i + 1] + 0.1 * x[i] ** 3
    r[0] = x[0] - 1.0
    r[-1] = r[-2] * x[-1]
    return r


BATCHED += [(f, (np.array([0.5, -1.5, 2.0]),)) for f in (appends, fields, writes, in_place)]
BATCHED += [(stencil, (np.linspace(-1.0, 2.0, 7),))]


def through_a_view(x):
    y = np.zeros(4)
    v = y[1:]
    v[0] = x[0] * x[1]
    return y + x[2]


def view_of_a_written_array(x):
    y = np.zeros((2, 3))
    v = y[:, 1:]
    y[0] = x * x[2]
    v[1, 0] = x[0] * 2.0  # (through a view of a written array: y's tangents, seen through v's)
    v[:, 1] += x[:2]
    return np.concatenate([y.T.sum(axis=0), y[1:, ::-1].ravel(), v[0]])


def sorted_in_place(x):
    y = x * 2.0
    y.sort()
    return y


def generator_closed_form(x):
    return 2.0 * np.outer(x, x) + np.sum(x * x) * np.eye(len(x))


ABANDONED = [(through_a_view, None), (sorted_in_place, None), (generator, generator_closed_form)]
BATCHED += [(view_of_a_written_array, (np.array([0.5, -1.5, 2.0]),))]


@pytest.mark.parametrize("f, closed_form", ABANDONED, ids=lambda f: getattr(f, "__name__", ""))
def test_a_change_in_place_or_a_generator_abandons_the_batch_for_columns(f, closed_form, passes):
    x = np.array([0.5, -1.5, 2.0])
    got = bytegrad.jacfwd(f)(x)
    assert passes == [True]
    same(got, by_columns(f, x))
    same(got, closed_form(x) if closed_form else bytegrad.jacrev(f)(x))


LOG = []
TOTAL = np.zeros(1)


def logs(x):
    LOG.append(x[0])  # (a list's change is followed in the batch: f runs once)
    return x * x


def adds(x):
    TOTAL.put([0], TOTAL[0] + 1.0)  # (not followed in a batch: abandoned before the change)
    return x * x


def test_a_global_list_changed_by_one_batched_run_and_an_array_as_the_columns_change_it(passes):
    x = np.array([1.0, 2.0, 3.0])
    LOG.clear()
    np.testing.assert_allclose(bytegrad.jacfwd(logs)(x), np.diag(2 * x))
    assert LOG == [1.0] and passes == [False]
    TOTAL[0] = 0.0
    by_columns(adds, x)
    unbatched = TOTAL[0]
    TOTAL[0] = 0.0
    np.testing.assert_allclose(bytegrad.jacfwd(adds)(x), np.diag(2 * x))
    assert TOTAL[0] == unbatched == 3.0 and passes == [False, True]


@pytest.mark.regression
def test_an_abandon_caught_by_a_bare_except_of_yours_still_abandons_the_batch(passes):
    def f(x):
        out = np.zeros(2)
        try:
            out[:][1] = x[0] * x[1]  # (through a view: not followed in a batch)
        except:  # noqa: E722  (swallows BaseException: the Abandon too)
            pass
        return out[-1] + x[1]

    x = np.array([2.0, 3.0])
    got = bytegrad.jacfwd(f)(x)
    assert passes == [True]
    np.testing.assert_allclose(got, [3.0, 3.0])


def test_the_arguments_are_left_as_one_call_leaves_them():
    def f(x, acc):
        acc.append(1.0)
        return x * len(acc)

    x, acc = np.array([1.0, 2.0]), []
    np.testing.assert_allclose(bytegrad.jacfwd(f)(x, acc), np.eye(2))
    assert acc == [1.0]
    x2 = x.copy()
    bytegrad.jacfwd(vectorised)(x2)
    np.testing.assert_array_equal(x2, x)


def test_keywords_has_aux_and_objects_go_through_the_batch(passes):
    def f(x, scale=1.0):
        return calls_objects(x) * scale, {"aux": 1}

    x = np.array([0.5, 1.5, -0.25])
    (got, aux) = bytegrad.jacfwd(f, has_aux=True)(x, scale=3.0)
    assert aux == {"aux": 1} and passes == [False]
    np.testing.assert_allclose(got, 3.0 * np.array([x[1], x[0], 1.0]), rtol=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_programs_batched_are_the_column_by_column_jacobian(data):
    src, f, args, y, _ = draw_program(data, use_math=True)
    argnums = tuple(range(len(args)))
    with spied() as seen:
        got = bytegrad.jacfwd(f, argnums)(*args)
    assert seen == [False], src  # (these programs change nothing in place: always batched)
    same(got, by_columns(f, *args, argnums=argnums))


def test_an_error_of_yours_in_a_batch_is_yours_and_the_next_jvp_is_not_batched(passes):
    def f(x):
        if x[0] > 0:
            raise ValueError("a check of yours")
        return x * 2.0

    with pytest.raises(ValueError, match="a check of yours"):  # (not an Abandon, nor a column's)
        bytegrad.jacfwd(f)(np.array([1.0, 2.0]))
    assert passes == [] and not bytegrad.runtime.tangents.current().batch
    assert bytegrad.jvp(rosenbrock, (np.array([0.5, 1.0]),), (np.array([1.0, 0.0]),))[1] == \
        pytest.approx(-400.0 * 0.5 * (1.0 - 0.25) - 2.0 * 0.5)


def test_random_numbers_are_never_drawn_once_per_direction(passes):
    # (each draw of a sampler called per direction would be another number: the
    # directions' tangents would not be the value's)
    def f(x):
        return np.random.normal(0.0, x[0]) * x

    np.random.seed(3)
    got = bytegrad.jacfwd(f)(np.array([1.5, 2.0]))
    assert passes == [True]
    np.random.seed(3)
    np.testing.assert_allclose(got, by_columns(f, np.array([1.5, 2.0])), rtol=1e-12)


# -- found by review -------------------------------------------------------------------------

@pytest.mark.regression
def test_an_in_place_operator_on_a_dict_is_followed_not_run_once_per_direction(passes):
    def f(x):  # (d |= e ran per direction: each direction got the last one's tangent, 3 I)
        cfg = {"w": 1.0}
        cfg |= {"w": x[0] * 3.0}
        return x * cfg["w"]

    x = np.array([1.0, 2.0, 3.0])
    want = 3.0 * x[0] * np.eye(3)
    want[:, 0] += 3.0 * x
    np.testing.assert_allclose(bytegrad.jacfwd(f)(x), want, rtol=1e-12)
    assert passes == [False]


Index = __import__("collections").namedtuple("Index", "i j")


@pytest.mark.regression
@pytest.mark.parametrize("key", [([0, 0], slice(None), [0, 0]), (0, slice(None), [0, 1]),
                                 ([1, 0], Ellipsis, 0), Index(1, 0), (None, [1], slice(None), 0)],
                         ids=["separated", "int and array apart", "ellipsis between", "named tuple",
                              "newaxis first"])
def test_indices_numpy_moves_to_the_front_read_each_direction_rightly(key):
    # (the batch axis went behind the advanced indices' axes: wrong numbers, or a crash)
    X = np.arange(1.0, 13.0).reshape(2, 3, 2)

    def f(X):
        return X[key] * np.sum(X ** 2)

    got = bytegrad.jacfwd(f)(X)
    same(got, by_columns(f, X))
    same(got, bytegrad.jacrev(f)(X))


SENTINEL = object()


class Registry:
    pass


@pytest.mark.regression
def test_arguments_not_differentiated_keep_their_identity(passes):
    # (the batched pass ran at a deep copy of them: `mode is SENTINEL` false, a KeyError)
    key = Registry()
    scale = {key: 5.0}

    def f(x, mode, k):
        return x * x * scale[k] if mode is SENTINEL else x

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(bytegrad.jacfwd(f)(x, SENTINEL, key), np.diag(10.0 * x))
    np.testing.assert_allclose(by_columns(f, x, SENTINEL, key), np.diag(10.0 * x))  # (the columns too)
    assert passes == [False]


@pytest.mark.regression
def test_a_batch_larger_than_the_limit_goes_a_column_at_a_time(passes, monkeypatch):
    monkeypatch.setattr(batching, "_LARGE", 16 * 30)

    def f(x):
        return (np.outer(x, x) * x[0]).sum(axis=1)

    x = np.linspace(0.1, 1.0, 8)
    got = bytegrad.jacfwd(f)(x)
    assert passes == [True]
    same(got, bytegrad.jacrev(f)(x))


@pytest.mark.regression
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_a_matrix_subclass_is_never_stacked_as_a_batch():
    M = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    got = bytegrad.jacfwd(lambda m: m * m)(M)  # (a ValueError inside the library)
    h = 1e-6
    fd = [np.asarray((np.matrix(M + h * E) ** 2 - np.matrix(M - h * E) ** 2) / (2 * h))
          for E in np.eye(4).reshape(4, 2, 2)]
    np.testing.assert_allclose(np.asarray(got).reshape(2, 2, 4), np.stack(fd, -1), rtol=1e-6)


def test_what_changes_its_arguments_is_never_called_once_per_direction():
    from bytegrad.runtime.rules import record_of
    import operator
    for f in (operator.iadd, operator.ior, operator.setitem, np.ndarray.sort, np.ndarray.fill, np.put):
        assert not batching._pure(f, record_of(f)), f
    for f in (operator.add, np.sum, np.linalg.solve, np.ndarray.sum, np.sin):
        assert batching._pure(f, record_of(f)), f
    assert not batching._pure(np.random.normal, record_of(np.random.normal))


class Log:
    def __init__(self):
        self.steps = []


@pytest.mark.regression
def test_an_abandoned_batch_puts_back_what_it_changed_in_the_arguments(passes):
    # (its first changes stayed: the columns then ran at copies, and the arguments were
    # left as no call leaves them: a list appended to, an array not scaled)
    def f(x, log, scale):
        log.steps.append(x[0])
        log.steps[0] = 7.0
        scale *= 2.0
        scale.sort()  # (not followed in a batch: abandoned here)
        return x * scale

    x, log, scale = np.array([1.0, 2.0]), Log(), np.array([1.0, 3.0])
    log.steps.append(0.5)
    got = bytegrad.jacfwd(f)(x, log, scale)
    assert passes == [True]
    np.testing.assert_allclose(got, np.diag([2.0, 6.0]))
    assert log.steps == [7.0, 1.0] and scale.tolist() == [2.0, 6.0]  # (as one call leaves them)


@pytest.mark.regression
def test_a_number_read_out_of_a_written_array_keeps_its_tangent_when_the_array_is_written_again(passes):
    # (it was a view of the array's tangents in the shadow: the next write changed it)
    def f(x):
        r = np.zeros(2)
        r[0] = x[0]
        t = r[0]
        r[0] = x[1]
        prev, acc = 0.0, 0.0
        for i in range(3):
            r[1] = x[i] ** 2
            acc += prev * r[1]
            prev = r[1]
        return np.array([t + 2.0 * r[0], t, acc])

    x = np.array([0.5, -1.5, 2.0])
    got = bytegrad.jacfwd(f)(x)
    assert passes == [False]
    same(got, bytegrad.jacrev(f)(x))


@pytest.mark.regression
def test_a_write_drops_leading_axes_of_length_one_as_numpy_does(passes):
    def f(x):  # (a ValueError inside the library)
        A = np.zeros((2, 3))
        A[0] = x[None, :] * 2.0
        A[1] = x.reshape(1, 3) * x[0]
        return A.ravel()

    x = np.array([0.5, -1.5, 2.0])
    got = bytegrad.jacfwd(f)(x)
    assert passes == [False]
    same(got, bytegrad.jacrev(f)(x))


class Slotted:
    __slots__ = ("arr",)

    def __init__(self, arr):
        self.arr = arr


class Locked:
    def __init__(self):
        import threading
        self.lock, self.arr = threading.Lock(), [4.0]


@pytest.mark.regression
@pytest.mark.parametrize("holder", [lambda: Slotted([1.0, 2.0]), Locked], ids=["slots", "not copyable"])
def test_an_abandoned_batch_puts_back_fields_in_slots_and_in_arguments_it_cannot_copy(holder, passes):
    # (a slot's list, or an argument deepcopy cannot copy, was left as a part of a call left it)
    def f(x, h):
        h.arr[0] += 1.0
        y = x * 2.0
        y.sort()  # (abandons the batch)
        return y

    x = np.array([1.0, 2.0])
    h, once, columns = holder(), holder(), holder()
    f(x, once)
    by_columns(f, x, columns)
    bytegrad.jacfwd(f)(x, h)
    assert passes == [True]
    # (as one call leaves them; what cannot be copied, as the columns leave it: each column
    # is computed at it, taken to be unchanged)
    assert h.arr == (columns.arr if holder is Locked else once.arr)


@pytest.mark.regression
def test_arguments_sharing_memory_are_taken_a_column_at_a_time(passes):
    # (a write into one gave the other the first's tangents through the view: its own seed lost)
    def f(x, y):
        x[0] = 3.0 * x[1]
        return y * 1.0

    def shared():
        u = np.array([1.0, 2.0, 3.0, 4.0])
        return u, u[1:]

    got = bytegrad.jacfwd(f, argnums=(0, 1))(*shared())
    assert passes == [True]
    same(got, by_columns(f, *shared(), argnums=(0, 1)))


@pytest.mark.regression
def test_code_of_yours_that_retries_on_any_error_ends(passes):
    attempts = []
    f = retrying(attempts, lambda v, x: np.array([v ** 3 * x[1], x[0]]))
    x = np.array([0.5, 2.0])
    np.testing.assert_allclose(bytegrad.jacfwd(f)(x), [[3 * 0.5 ** 2 * 2.0, 0.5 ** 3], [1.0, 0.0]], rtol=1e-12)
    assert passes == [True] and len(attempts) <= 1


@pytest.mark.regression
def test_a_batched_reverse_pass_is_its_own_threads():
    seen = []  # (shared, another thread's pass ending cleared it: a rule of yours then took a Batch)
    with batching.reverse_pass(2):
        t = threading.Thread(target=lambda: seen.append(batching.reversing()))
        t.start()
        t.join()
        assert batching.reversing() is not None
    assert seen == [None] and batching.reversing() is None
