"""Generator functions under differentiation: lazy, one resumption at a time, with the
adjoint resuming in reverse order (runtime/generators.py); in forward mode, each item
taken with its tangent (`TangentGenerator`).  Gradients and tangents are checked
against central finite differences; side effects against the plain call's order."""
from __future__ import annotations

import itertools
import linecache
import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad.ir import function, lift, ops
import iterator_programs
from checks import check_grad, check_jvp, check_stateful, fd_directional

X = np.array([0.3, -1.2, 2.1, 0.8])


# ---- yield, consumed by for / next / sum / list ------------------------------------

def pairs(xs):
    for a, b in zip(xs, xs[1:]):
        yield a * b


def squares(xs, scale=2.0):
    t = 0.0
    for v in xs:
        t += v
        yield v * v * scale
    return t * 2.0


def by_loop(x):
    t = 0.0
    for v in pairs(x):
        t += math.sin(v)
    return t


def by_next(x):
    g = pairs(x)
    a = next(g)
    b = next(g)
    return a * b


def by_method(x):
    g = squares(x)
    return g.__next__() * next(g, 0.0)


def by_list(x):
    items = list(squares(x))
    return items[1] * items[3]


def by_unpacking(x):
    a, b, c, d = squares(x)
    return a * d - b * c


def by_keyword(x):
    return sum(squares(x, scale=x[0]))


def with_a_set(x):
    return statistics.pstdev(squares(x)) + sum(set(pairs(x)))


CONSUMED = [by_loop, by_next, by_method, by_list, by_unpacking, by_keyword,
            lambda x: sum(pairs(x)), lambda x: max(pairs(x)),
            lambda x: sorted(squares(x))[2], lambda x: math.fsum(pairs(x)),
            lambda x: sum(a * b for a, b in zip(pairs(x), squares(x))),
            lambda x: statistics.pstdev(squares(x)) + statistics.mean(v * v for v in pairs(x)),
            with_a_set,
            lambda x: sum(map(math.exp, pairs(x))) + sum(filter(None, pairs(x)))]


@pytest.mark.parametrize("f", CONSUMED, ids=lambda f: f.__name__)
def test_gradient_of_a_consumed_generator(f):
    check_grad(f, X)
    check_grad(lambda x: f(list(x)), X)  # a list of floats as well


@pytest.mark.parametrize("f", CONSUMED, ids=lambda f: f.__name__)
def test_tangent_of_a_consumed_generator(f):
    if f is with_a_set:  # (a set of values with tangents is refused in forward mode, by line)
        with pytest.raises(bytegrad.ForwardModeError, match=r"test_generators\.py:\d+: .*a set of differentiable"):
            bytegrad.jvp(f, (X,), (X,))
        return
    check_jvp(f, X)


def test_the_issue_example():
    def f(x):
        return sum(pairs(x))
    g, = bytegrad.gradient(f, X)
    assert np.allclose(g, [X[1], X[0] + X[2], X[1] + X[3], X[2]])
    g, = bytegrad.gradient(f, list(X))
    assert np.allclose(g, [X[1], X[0] + X[2], X[1] + X[3], X[2]])


# ---- lazy: infinite generators, partial consumption -----------------------------------

def forever(x):
    k = 0.0
    while True:
        k += 1.0
        yield x[0] * k


def counted(x):
    for i in itertools.count():
        yield x[i % len(x)] ** 2


def test_next_on_an_infinite_generator():
    check_grad(lambda x: next(g := forever(x)) * next(g) + next(g), X)
    check_grad(lambda x: next(g := counted(x)) + next(g) * next(g), X)


def test_a_generator_left_suspended_or_never_started():
    def half(x):
        g = squares(x)
        return next(g) + next(g)
    check_grad(half, X)
    g, = bytegrad.gradient(lambda x: x[0] * 2.0 + 0.0 * (squares(x) is None), X)
    assert np.allclose(g, [2.0, 0, 0, 0])


def test_items_run_when_consumed():
    log = []

    def noisy(xs):
        for v in xs:
            log.append(("make", float(v)))
            yield v * 2.0

    def f(x):
        t = 0.0
        for v in noisy(x):
            log.append(("use", float(v)))
            t += v * v
        return t
    f(X)
    plain = list(log)
    log.clear()
    check_grad(f, X)
    assert log[:len(plain)] == plain  # (finite differences call f again after)


# ---- yield from, return values, send --------------------------------------------------

def outer(xs):
    r = yield from squares(xs)
    yield r * 3.0
    yield from [v * 0.5 for v in xs]


def delegating(x):
    return sum(outer(x))


def accumulator(x):
    total = 0.0
    while True:
        v = yield total * x[1]
        if v is None:
            return total
        total = total + v * x[0]


def sending(x):
    g = accumulator(x)
    next(g)
    a = g.send(x[2])
    b = g.send(a * x[3])  # (the value sent depends on an earlier item)
    return a + b * b


def test_yield_from_and_the_return_value():
    check_grad(delegating, X)
    check_jvp(delegating, X)
    check_grad(lambda x: delegating(list(x)), X)
    check_jvp(lambda x: delegating(list(x)), X)


def test_send():
    check_grad(sending, X)
    check_jvp(sending, X)


def test_a_generator_passed_to_a_function():
    def mean_of(it):
        s, n = 0.0, 0
        for v in it:
            s += v
            n += 1
        return s / n
    check_grad(lambda x: mean_of(squares(x)) * mean_of(pairs(x)), X)
    check_jvp(lambda x: mean_of(squares(x)) * mean_of(pairs(x)), X)


def test_generators_nested_and_closures():
    def make(x):
        def gen():
            for i in range(3):
                yield x[i] * x[i + 1]
        return gen()

    def chained(xs):
        for v in pairs(xs):
            yield math.exp(v)
    check_grad(lambda x: sum(make(x)), X)
    check_jvp(lambda x: sum(make(x)), X)
    check_grad(lambda x: sum(chained(x)), X)
    check_jvp(lambda x: sum(chained(x)), X)


def test_try_finally_around_yields():
    def guarded(xs):
        try:
            for v in xs:
                yield math.exp(v)
        finally:
            xs = None
    check_grad(lambda x: sum(guarded(x)), X)
    check_jvp(lambda x: sum(guarded(x)), X)
    check_grad(lambda x: next(guarded(x)) * 2.0, X)
    check_jvp(lambda x: next(guarded(x)) * 2.0, X)


def test_consumers_interleaved():
    """Items taken by several consumers in turn: each gradient reaches the resumption
    that made the item, in the reverse order of the resumptions."""
    xs = np.array([0.3, -1.2, 2.1, 0.8, 0.5, 1.1])

    def take2(g):
        yield next(g) * 2.0
        yield next(g) * 3.0

    def paired(x):
        g = squares(x)
        return sum(a * b for a, b in zip(g, g))

    def between(x):
        g = squares(x)
        h = take2(g)
        a = next(h)
        b = next(g)  # (read from g between two resumptions of h, which reads g too)
        return a * b + next(h) + sum(g)

    def in_pieces(x):
        g = squares(x)
        first = [next(g) for _ in range(2)]
        rest = list(itertools.islice(g, 2))
        return first[1] * first[0] + rest[0] * rest[1] + next(g)

    def several(x):
        gens = [squares(x[i:i + 2]) for i in range(0, 6, 2)]
        return sum(next(g) * next(g) for g in gens)
    for f in (paired, between, in_pieces, several):
        check_grad(f, xs)
        check_jvp(f, xs)


def test_checkpoint_of_a_generator_is_refused():
    with pytest.raises(NotImplementedError, match="cannot pass its gradient back"):
        bytegrad.gradient(lambda x: bytegrad.checkpoint(lambda g: sum(g), squares(x)), X)


def test_changes_in_place_between_resumptions():
    """The generator's reverse pass interleaves with its consumer's, so each read sees
    the value it read going forward, and writes get their gradients."""
    def reader(a):
        while True:
            yield a[0] * 2.0

    def f(x):
        a = np.array([x, 1.0])
        g = reader(a)
        u = next(g)
        a[0] = x * x
        return u * next(g)  # 2x * 2x²

    def appender(out, x):
        for k in range(3):
            out.append(x * k)
            yield len(out)

    def g(x):
        out = [x]
        for _ in appender(out, x):
            out[0] = out[0] * 2.0
        return sum(out)
    assert bytegrad.gradient(f, 1.5) == (12 * 1.5 ** 2,)
    check_grad(f, 1.5)
    check_jvp(f, 1.5)
    check_grad(g, 1.5)
    check_jvp(g, 1.5)


def test_yields_inside_with_and_try_and_a_caught_error():
    def gen_with(xs):
        with np.errstate(all="ignore"):
            for v in xs:
                yield v * 2.0

    def inner(xs):
        yield from (v * v for v in xs)
        return 1.5

    def outer(xs):
        try:
            r = yield from inner(xs)
        except ValueError:
            r = 0.0
        yield r * xs[0]

    def catching(xs):
        for v in xs:
            try:
                yield 1.0 / v if v > 0 else math.log(v)  # (log of a negative raises)
            except ValueError:
                yield -v
    for f in (gen_with, outer, catching):
        check_grad(lambda x: sum(f(x)), X)
        check_jvp(lambda x: sum(f(x)), X)


# ---- what is refused ---------------------------------------------------------------------

def raising(xs):
    yield xs[0]
    raise ValueError("boom")


def test_a_generator_that_raised_is_refused():
    def f(x):
        t = 0.0
        try:
            for v in raising(x):
                t += v
        except ValueError:
            pass
        return t
    with pytest.raises(NotImplementedError, match="raised ValueError.*raising"):
        bytegrad.gradient(f, X)


def test_close_runs_finally_and_is_then_refused():
    def guarded(xs):
        try:
            for v in xs:
                yield v
        finally:
            xs = None

    def closing(x):
        g = guarded(x)
        a = next(g)
        g.close()
        return a
    with pytest.raises(NotImplementedError, match="when it was closed"):
        bytegrad.gradient(closing, X)

    def plain_close(x):
        g = squares(x)
        a = next(g)
        g.close()
        return a + next(g, 0.0)  # (a closed generator has no more items)

    def closed_before_it_started(x):
        g = squares(x)
        g.close()
        return next(g, x[1] * 2.0)
    check_grad(plain_close, X)
    check_grad(closed_before_it_started, X)


def test_throw_is_refused():
    def f(x):
        g = squares(x)
        next(g)
        g.throw(ValueError)
    with pytest.raises(NotImplementedError, match=r"test_generators\.py:\d+: throw\(\) into the generator squares"):
        bytegrad.gradient(f, X)
    with pytest.raises(NotImplementedError, match=r"test_generators\.py:\d+: throw\(\) into the generator "
                                                  r"squares in forward mode"):
        bytegrad.jvp(f, (X,), (X,))


def test_the_gradient_of_a_generator_function_itself_names_the_fix():
    with pytest.raises(bytegrad.NotScalarError, match=r"returned a generator; .*sum\(squares"):
        bytegrad.gradient(squares, X)


def test_stop_iteration_inside_becomes_runtime_error():
    def stopper(xs):
        yield xs[0]
        next(iter([]))
    with pytest.raises(RuntimeError, match="generator raised StopIteration"):
        bytegrad.gradient(lambda x: sum(stopper(x)), X)


def opaque_total(items):
    return sum(items)


@bytegrad.rule(opaque_total)
def _opaque_total(items):  # a rule written for sequences: its pullback knows no generator
    v = list(items)
    return sum(v), lambda d: (None, [d] * len(v) if isinstance(items, list) else None)


def test_a_consumer_that_cannot_hand_gradients_back_is_refused():
    def f(x):
        return opaque_total(pairs(x))
    with pytest.raises(NotImplementedError, match=r"test_generators.py:\d+: an item of the generator "
                                                  r"pairs was consumed by a call that cannot pass"):
        bytegrad.gradient(f, X)


# ---- the IR ----------------------------------------------------------------------------

def test_lifted_and_emitted_generator_behaves_as_python():
    for gen, args in [(outer, ([1.0, 2.0],)), (squares, ([1.0, 3.0], 0.5))]:
        emitted = function(lift(gen), gen.__globals__)
        assert list(emitted(gen, *args)) == list(gen(*args))
    g = function(lift(accumulator), globals())(accumulator, [2.0, 3.0])
    p = accumulator([2.0, 3.0])
    assert [next(g), g.send(1.0), g.send(2.0)] == [next(p), p.send(1.0), p.send(2.0)]


def test_stages_show_yields():
    stages = bytegrad.stages(squares)
    for ir in (stages.lifted, stages.forward, stages.adjoint):
        assert ir.meta.generator
        assert any(st.fn is ops.yield_ for _, _, st in ir.statements())


# ---- random generator-shaped programs -----------------------------------------------------

_EXPRS = ["x * {c}", "math.sin(x) * s", "s * s + x", "x / (1.5 + s * s)", "math.exp(x * 0.3) - s"]
_counter = itertools.count()


def _program(steps, consumer):
    body = ["def gen(xs):", "    s = 0.5"]
    for kind, k, c in steps:
        e = _EXPRS[k].format(c=c)
        if kind == "yield":
            body += ["    for x in xs:", f"        yield {e}"]
        else:
            body += ["    for x in xs:", f"        s = {e}"]
    body += ["    yield s"]
    body += ["def f(x):", f"    {consumer}"]
    src = "\n".join(body) + "\n"
    name = f"<generator program {next(_counter)}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns = {"math": math}
    exec(compile(src, name, "exec"), ns)
    return ns["f"], src


_CONSUMERS = ["return sum(gen(x))",
              "g = gen(x)\n    return next(g) * next(g, 2.0)",
              "t = 0.0\n    for i, v in enumerate(gen(x)):\n        t += v * (i + 1)\n    return t",
              "return sum(v * v for v in gen(x))"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["yield", "assign"]), st.integers(0, len(_EXPRS) - 1),
                          st.sampled_from([0.5, 2.0, -1.5])), min_size=1, max_size=4),
       st.sampled_from(_CONSUMERS),
       st.lists(st.floats(-1.5, 1.5), min_size=2, max_size=3))
def test_random_generator_programs(steps, consumer, xs):
    f, src = _program(steps, consumer)
    check_grad(f, np.array(xs), rtol=1e-4, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["yield", "assign"]), st.integers(0, len(_EXPRS) - 1),
                          st.sampled_from([0.5, 2.0, -1.5])), min_size=1, max_size=4),
       st.sampled_from(_CONSUMERS),
       st.lists(st.floats(-1.5, 1.5), min_size=2, max_size=3), st.integers(0, 2 ** 32 - 1))
def test_random_generator_programs_forward_equals_reverse(steps, consumer, xs, seed):
    """``jvp`` along a random direction is ``<gradient, direction>`` (both modes are checked
    against finite differences above)."""
    f, src = _program(steps, consumer)
    x, v = np.array(xs), np.random.default_rng(seed).standard_normal(len(xs))
    y, dy = bytegrad.jvp(f, (x,), (v,))
    (g,) = bytegrad.gradient(f, x)
    assert np.allclose(dy, np.sum(g * v), rtol=1e-9, atol=1e-12, equal_nan=True), src


def _multiples(x, k):
    for i in range(k):
        yield x * i


@pytest.mark.regression
def test_a_generator_given_a_constant_argument():
    """``_multiples(x, 4)``: a call with an inactive argument takes the transform where it
    is inactive (`forward.forward_with`), which must still start a generator."""
    assert bytegrad.grad(lambda x: sum(_multiples(x, 4)))(1.5) == 6.0
    check_grad(lambda x: sum(_multiples(x, 4)) * x, 1.5)


def _changes_after_its_last_yield(x):
    a = x * 1.0
    yield a
    a *= 3.0


def _changes_an_argument_at_the_end(a, x):
    yield 0.0
    a *= x


@pytest.mark.regression
@pytest.mark.parametrize("f, args", [
    (lambda x: sum(np.sum(v ** 2) for v in _changes_after_its_last_yield(x)), (np.array([2.0, -1.0]),)),
    (lambda x: _first_then_exhaust(_changes_after_its_last_yield(x)), (np.array([2.0, -1.0]),)),
    (lambda a, x: sum(_changes_an_argument_at_the_end(a, x)) + np.sum(a * a),
     (np.array([1.0, 2.0, 3.0]), 1.5)),
], ids=["for", "next with a default", "an argument"])
def test_a_change_in_place_in_the_resumption_that_ends_a_generator_is_put_back_first(f, args):
    """The step that finds the generator returned reverses the resumption that ended it,
    so the pullbacks of earlier items see the values they saw (they saw the changed ones)."""
    check_stateful(f, *args)


def _first_then_exhaust(it):
    v = next(it)
    r = np.sum(v ** 2)
    next(it, None)
    return r


def _accumulator(start=0):
    total = float(start)
    while True:
        v = yield total
        total = total + v * v


def _send_all(g, x):
    next(g)
    out = 0.0
    for v in x:
        out = g.send(v)
    return out


@pytest.mark.regression
@pytest.mark.parametrize("make", [lambda: _accumulator(), lambda: _accumulator(2)],
                         ids=["no argument", "an int argument"])
def test_a_generator_made_from_nothing_differentiable_is_sent_a_gradient(make):
    """A generator made with no differentiable argument (which would run plainly) is
    still differentiated: values sent in later carry gradients (it raised NoRuleError)."""
    x = np.array([1.0, 2.0, 3.0])
    assert bytegrad.grad(lambda x: _send_all(make(), x))(x) == pytest.approx(2 * x)
    check_grad(lambda x: _send_all(make(), x) * x[0], x)


@pytest.mark.parametrize("nested", [lambda f, x: bytegrad.hvp(f, (x,), (x,)),
                                    lambda f, x: bytegrad.grad(lambda x: bytegrad.grad(f)(x)[0])(x),
                                    lambda f, x: bytegrad.jvp(lambda x: bytegrad.jvp(f, (x,), (x,))[1], (x,), (x,))],
                         ids=["hvp", "grad of grad", "jvp of jvp"])
def test_a_generator_differentiated_to_second_order_is_refused_by_line(nested):
    with pytest.raises(bytegrad.NestingError, match=r"test_generators\.py:\d+: .*the generator .*<genexpr>"):
        nested(lambda x: sum(v * v * v for v in x), X)


# ---- a generator's return value, read out of its StopIteration ---------------------

def _returns_square(x):
    yield x
    return x * x


def _delegating(x):
    r = yield from _returns_square(x)
    return r * 3.0


def _value_by_next(make, read):
    """``x ↦`` the first item times the return value, ``read`` out of the StopIteration the
    second ``next`` of the generator ``make(x)`` raises."""
    def f(x):
        it = make(x)
        a = next(it)
        try:
            next(it)
        except StopIteration as e:
            v = read(e)
        return a * v
    return f


def _value_when_exhausted(x):
    t, it = 0.0, _returns_square(x)
    while True:
        try:
            t += next(it)
        except StopIteration as e:
            return t + e.value


def _value_by_send(x):
    it = _returns_square(x)
    next(it)
    try:
        it.send(None)
    except StopIteration as e:
        return e.value


@pytest.mark.regression
@pytest.mark.parametrize("f", [
    _value_by_next(_returns_square, lambda e: e.value),
    _value_by_next(_returns_square, lambda e: e.args[0]),
    _value_by_next(_delegating, lambda e: e.value),
    _value_when_exhausted,
    _value_by_send,
], ids=["e.value", "e.args[0]", "after yield from", "read when exhausted", "send(None)"])
def test_a_generators_return_value_read_out_of_its_stop_iteration(f):
    # (no gradient went back through the return value: x³ gave x² for 3 x², silently)
    check_grad(f, 1.3)
    check_jvp(f, 1.3)


def _sending_into_the_return(x):
    def g():
        v = yield 1.0
        return v * v
    it = g()
    next(it)
    try:
        it.send(x)
    except StopIteration as e:
        return e.value


@pytest.mark.regression
def test_a_gradient_through_a_value_sent_into_the_resumption_that_returned_is_refused_by_line():
    # (the send raised, so nothing takes the gradient of what it sent: 0.0 for 2 x, silently)
    with pytest.raises(NotImplementedError, match=r"test_generators\.py:\d+: a gradient reaches the value sent"):
        bytegrad.grad(_sending_into_the_return)(1.3)


@pytest.mark.regression
@pytest.mark.parametrize("f", iterator_programs.PROGRAMS, ids=lambda f: f.__name__)
def test_generators_and_iterators_taken_in_every_way(f):
    # (forward mode: a generator taken from after it ended crashed; rules reading a
    # generator's tangent as a list crashed; enumerate/map/zip took all the items at once,
    # so a loop changing what the generator read got a wrong value and tangent, and an
    # endless one hung; an iterator class of yours ran plainly: tangent 0 and gradient
    # None, silently; iter(f, sentinel) gave a zero tangent)
    if f in (iterator_programs.slice_assign, iterator_programs.dict_update):
        # (reverse mode takes the items of a generator written into a slice or a dict whole,
        # and cannot hand their gradients back: refused by line)
        assert bytegrad.jvp(f, (1.3,), (1.0,))[1] == pytest.approx(fd_directional(f, [1.3], [1.0]), rel=1e-6)
        with pytest.raises(NotImplementedError, match=r"iterator_programs\.py:\d+: "):
            bytegrad.grad(f)(1.3)
        return
    check_jvp(f, 1.3)
    check_grad(f, 1.3)
