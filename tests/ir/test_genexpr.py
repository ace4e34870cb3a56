"""Generator expressions: lifted as the generators they are (ir/cpython), lazy under
differentiation (runtime/generators.py), and differentiated through whatever consumes them.
Gradients are compared against central finite differences; functions take arrays
(what the finite differences perturb) and make lists of them where a test needs one."""
from __future__ import annotations

import inspect
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad.ir import Stmt, UnsupportedError, function, lift, ops, verify
from checks import arr, check_grad

XS = np.array([0.3, -1.2, 2.1, 0.8])
YS = np.array([1.5, 0.4, -0.8])


def genexpr_code(f, *args):
    """The code object of the generator expression that ``f(*args)`` returns."""
    return f(*args).gi_code


# ---- lifting --------------------------------------------------------------------

def test_genexpr_lifts_to_a_generator():
    code = genexpr_code(lambda xs: (x * x for x in xs if x > 0), [1.0])
    ir = lift(code)
    verify(ir)
    assert ir.meta.generator
    fns = [st.fn for _, _, st in ir.statements()]
    assert fns.count(ops.yield_) == 1 and ops.build_list not in fns
    (ret,) = [br for blk in ir.blocks for br in blk.branches if br.kind == "return"]
    assert ret.args == [None]


def nested(xs, ys):
    return (x * y for x in xs if x != 2 for y in ys)


def with_closure(xs, w):
    return ((i, x * w) for i, x in enumerate(xs))


def over_items(d):
    return (f"{k}={v}" for k, v in d.items() if v)


def of_genexprs(n):
    return (sum(j for j in range(i)) for i in range(n))


def empty(xs):
    return (x for x in xs if False)


def emitted(f):
    """``f`` lifted and emitted, and so is every generator expression it makes."""
    ir = lift(f)
    for blk in ir.blocks:
        blk.stmts = [(v, Stmt(_make_emitted, st.args, st.kw, st.line) if st.fn is ops.make_function
                      else st) for v, st in blk.stmts]
    verify(ir)
    return function(ir, f.__globals__)


def _make_emitted(code, closure=None, defaults=None, kwdefaults=None):
    fn = ops.function_in(globals(), code, closure, defaults, kwdefaults)
    g = function(lift(code), fn.__globals__)
    return lambda *args: g(fn, *args)


@pytest.mark.parametrize("f, args", [
    (nested, ([1, 2, 3], [10, 20])),
    (with_closure, ([1.5, 2.5], 2)),
    (over_items, ({"a": 1, "b": 0, "c": 3},)),
    (of_genexprs, (5,)),
    (empty, ([1, 2],)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_emitted_genexpr_gives_the_same_items(f, args):
    it = emitted(f)(f, *args)
    assert inspect.isgenerator(it)
    assert list(it) == list(f(*args))


def test_async_generator_expression_is_refused():
    ns = {}
    exec("async def f(xs):\n    return (x async for x in xs)\n", ns)
    (code,) = [c for c in ns["f"].__code__.co_consts if inspect.iscode(c)]
    with pytest.raises(UnsupportedError, match="async generator"):
        lift(code)


# ---- gradients through the consumers ----------------------------------------------

# (name, consumer, whether every item gets a gradient)
CONSUMERS = [
    ("sum", lambda xs: sum(x * x for x in xs), True),
    ("sum-start", lambda xs: sum((x * x for x in xs), 1.5), True),
    ("list", lambda xs: (lambda l: l[0] * l[-1])(list(math.sin(x) for x in xs)), False),
    ("tuple", lambda xs: tuple(x ** 3 for x in xs)[2], False),
    ("max", lambda xs: max(x * abs(x) for x in xs), False),
    ("min", lambda xs: min(math.cos(x) for x in xs), False),
    ("max-key", lambda xs: max((x for x in xs), key=abs), False),
    ("sorted", lambda xs: sorted(x * 2.0 for x in xs)[1], False),
    ("fsum-prod", lambda xs: math.fsum(x * x for x in xs) + math.prod(x + 2.0 for x in xs), True),
    ("next", lambda xs: next(x * 3.0 for x in xs), False),
    ("enumerate", lambda xs: sum((i + 1) * v for i, v in enumerate(x * x for x in xs)), True),
    ("zip", lambda xs: sum(a * b for a, b in zip((x * x for x in xs), (math.sin(x) for x in xs))), True),
    ("splat", lambda xs: math.hypot(*(x * 2.0 for x in xs)), True),
    ("list-display", lambda xs: [1.0, *(x * x for x in xs)][2], False),
    ("dict", lambda xs: dict((f"k{i}", x * x) for i, x in enumerate(xs))["k1"], False),
    ("map", lambda xs: sum(map(math.exp, (x * 0.5 for x in xs))), True),
]


@pytest.mark.parametrize("f, every_item", [c[1:] for c in CONSUMERS], ids=[c[0] for c in CONSUMERS])
def test_consumers(f, every_item):
    check_grad(lambda xs: f(list(xs)), XS)
    check_grad(lambda xs: f(tuple(xs)), XS)
    if every_item:  # over an array, the others meet a bug in the rule of ops.iterate
        check_grad(f, XS)  # (containers.py): an item with no gradient, later ones with one


def test_for_loop_over_a_genexpr():
    def f(xs):
        s = 0.0
        for v in (x * x for x in xs):
            s = s * 0.5 + v
        return s
    check_grad(f, XS)


def test_any_and_all_decide_a_branch():
    def f(xs):
        if any(x > 2.0 for x in xs) and not all(x > 0.0 for x in xs):
            return sum(x * x for x in xs)
        return xs[0]
    check_grad(f, XS)
    check_grad(f, XS * 0.5)


def test_unpacked_and_partly_consumed():
    def unpack(xs):
        a, b, *rest = (x * x for x in xs)
        return a * b + sum(rest) * 3.0
    check_grad(unpack, XS)

    def rest_after_next(xs):
        g = (math.sin(x) for x in xs)
        first = next(g)
        return first * 10.0 + sum(g) + 0.0 * sum(g)  # the second sum sees nothing left
    check_grad(rest_after_next, XS)

    def after_break(xs):
        g = (x * x for x in xs)
        for v in g:
            if v > 1.0:
                break
        return v * 2.0 + 10.0 * sum(g)
    check_grad(lambda xs: after_break(list(xs)), XS)  # (a list: see test_consumers)


def test_list_extended_by_a_genexpr():
    def extend(xs):
        out = [1.0]
        out.extend(math.sin(x) for x in xs)
        return out[1] * out[-1] + sum(out)

    def iadd(xs):
        out = [2.0]
        out += (x * x for x in xs)
        return out[2] * out[0] + out[-1]
    check_grad(extend, XS)
    check_grad(lambda xs: iadd(list(xs)), XS)  # (a list: see test_consumers)


def test_conditions_nested_loops_and_closures():
    # (lists: an array iterated with some items unused meets a bug in ops.iterate's rule)
    check_grad(lambda xs: sum(x for x in list(xs) if x > 0.5), XS)
    check_grad(lambda xs, ys: sum(x * y for x in list(xs) if x < 2.0 for y in list(ys) if y > 0.0), XS, YS)
    check_grad(lambda xs, w: sum(x * w for x in xs) * w, XS, 0.7)
    check_grad(lambda xs, ys: sum(sum(a * b for b in ys) ** 2 for a in xs), XS, YS)
    check_grad(lambda xs: sum(y * 2.0 for y in (x * x for x in xs)), XS)


def test_other_iterables():
    check_grad(lambda xs: sum(xs[i] * xs[i + 1] for i in range(len(xs) - 1)), XS)
    check_grad(lambda A: sum(float(row @ row) for row in A), arr((3, 2), seed=5))
    check_grad(lambda a, b: sum(v * v for k, v in {"a": a, "b": b}.items()), 0.3, -1.2)
    check_grad(lambda xs: sum(a * b for a, b in zip(xs, xs[1:])), XS)


def test_genexpr_passed_to_user_code():
    def weighted(it):
        s, w = 0.0, 1.0
        for v in it:
            s, w = s + w * v, w * 0.5
        return s

    def apply(f, it):
        return f(it)
    check_grad(lambda xs: weighted(x * x for x in xs), XS)
    check_grad(lambda xs: apply(sum, (math.tanh(x) for x in xs)), XS)


def test_genexpr_is_lazy_under_differentiation():
    """Items are computed when they are consumed, as in plain Python: side effects
    happen then, a variable the expression reads is read then, and an infinite one
    works."""
    def f(xs, log):
        g = (log.append(i) or x * x for i, x in enumerate(xs))
        log.append("made")
        return sum(g)
    plain, lifted = [], []
    assert f([1.0, 2.0], plain) == bytegrad.value_and_gradient(f, [1.0, 2.0], lifted)[0]
    assert plain == lifted == ["made", 0, 1]

    def rebinding(x):
        w = 1.0
        g = (w * v for v in [x, x])
        first = next(g)
        w = 3.0
        return first + next(g)  # x + 3x
    assert bytegrad.gradient(rebinding, 0.5) == (4.0,)
    check_grad(lambda x: next(g := (x * k for k in itertools.count(1))) + next(g) * next(g), 0.7)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=1, max_size=6),
       st.floats(-2, 2), st.integers(0, 3), st.integers(0, 3))
def test_polynomial_sums_match_finite_differences(values, c, k, consumer):
    def f(xs, c):
        terms = (c * x ** k + x for x in list(xs))
        if consumer == 0:
            return sum(terms)
        if consumer == 1:
            return sum(t * (i + 1) for i, t in enumerate(list(terms)))
        if consumer == 2:
            s = 0.0
            for t in terms:
                s = s * 0.5 + t
            return s
        return sum(a * b for a, b in zip(terms, (math.sin(x) for x in xs)))
    check_grad(f, np.array(values), c, rtol=1e-4, atol=1e-5)
