"""Rules of the higher-order builtins (primitives/functional.py): map, filter, sorted,
functools.partial, and the consumers of the iterators they return.  Every gradient
is compared against central finite differences; functions take arrays (what the
finite differences perturb) and make lists or tuples of them where a test needs one."""
from __future__ import annotations

import functools
import itertools
import math
import operator
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad.runtime.generators import Generator
from bytegrad.primitives.functional import Partial
from checks import arr, check_grad, check_jvp, check_stateful, fd_gradient, fd_hessian

SETTINGS = settings(max_examples=30, deadline=None)

XS = np.array([0.3, -1.2, 2.1, 0.8])
YS = np.array([1.5, 0.4, -0.8])


def sq(x):
    return x * x


# ---- map --------------------------------------------------------------------

@pytest.mark.parametrize("consume", [
    lambda it: sum(it),
    lambda it: sum(v * k for k, v in enumerate(it)),
    lambda it: (lambda l: l[1] * 3.0 + l[0])(list(it)),
    lambda it: (lambda t: t[0] - t[-1] * 2.0)(tuple(it)),
    lambda it: max(it),
    lambda it: min(it),
    lambda it: next(it) * 5.0 + sum(it),
    lambda it: sum(a * b for a, b in zip(it, [1.0, 2.0, 3.0])),
    lambda it: sorted(it)[-1] * 2.0,
    lambda it: math.fsum(it),
], ids=["sum", "enumerate", "list", "tuple", "max", "min", "next-then-sum", "zip", "sorted", "fsum"])
def test_map_result_consumed(consume):
    check_grad(lambda xs: consume(map(math.sin, xs)), XS)
    check_grad(lambda xs: consume(map(sq, list(xs))), XS)
    check_grad(lambda xs: consume(map(lambda x: x * x - x, tuple(xs))), XS)


def test_map_in_a_for_loop():
    def f(xs):
        s = 0.0
        for v in map(math.exp, xs):
            s = s * 0.5 + v
        return s
    check_grad(f, XS)


def test_map_with_break_then_rest():
    def f(xs):
        it = map(sq, xs)
        for v in it:
            if v > 1.0:
                break
        return v + 10.0 * sum(it)
    check_grad(f, XS)


def test_map_several_iterables_stops_at_the_shortest():
    check_grad(lambda xs, ys: sum(map(lambda a, b: a * b + a, xs, ys)), XS, YS)
    check_grad(lambda xs, ys: sum(map(math.atan2, list(xs), tuple(ys))), XS, YS)
    check_grad(lambda xs, ys: sum(map(pow, xs, [2, 3, 1])) + ys[0], XS, YS)


def test_map_closure_gets_gradient():
    check_grad(lambda xs, w: sum(map(lambda x: x * w, xs)) * w, XS, 1.7)

    def f(xs, w):
        def g(x):
            return x * w - x * x
        return sum(map(g, xs))
    check_grad(f, XS, 0.9)


def test_map_of_methods_and_operators():
    import operator
    check_grad(lambda xs, ys: sum(map(operator.mul, xs, ys)), XS, YS)
    check_grad(lambda xs: sum(map(operator.neg, map(abs, xs))), XS)


def test_map_over_rows_of_an_array():
    A = arr((3, 4), seed=1)
    check_grad(lambda A: sum(map(np.sum, A)), A)
    check_grad(lambda A, w: sum(map(lambda row: float(row @ w), A)), A, arr(4, seed=2))


def test_map_of_map_and_of_a_generator_expression():
    check_grad(lambda xs: sum(map(math.cos, map(sq, xs))), XS)
    check_grad(lambda xs: sum(map(math.cos, (x * 2.0 for x in xs))), XS)
    check_grad(lambda xs: sum(x * 3.0 for x in map(math.tanh, xs)), XS)


def test_map_unpacked_and_splatted():
    def f(xs):
        a, b = zip(*map(lambda x: (x, x * x), xs))
        return sum(a) + 10.0 * sum(b)
    check_grad(f, XS)
    check_grad(lambda xs: math.hypot(*map(sq, xs)), XS)
    check_grad(lambda xs: [0.5, *map(math.sin, xs)][3] * 2.0, XS)

    def g(xs):
        p, *rest = map(math.sin, xs)
        return p * sum(rest)
    check_grad(g, XS)


def test_map_of_non_differentiable_values():
    check_grad(lambda xs: len(list(map(str, xs))) * xs[0], XS)
    check_grad(lambda xs: float(sum(map(int, [3, 4]))) * xs[0], XS)
    check_grad(lambda xs: sum(map(lambda x: x > 0.5, xs)) * xs[1], XS)


def test_map_returns_an_iterator():
    seen = []

    def f(xs):
        it = map(sq, xs)
        seen.append(type(it))
        assert iter(it) is it
        return sum(it)
    check_grad(f, XS)
    assert seen[0] is Generator


def test_map_filter_zip_enumerate_are_lazy():
    """Each call of the function when its item is taken, as in Python: side effects in
    Python's order, and infinite iterables work."""
    def f(xs, log):
        def noisy(x):
            log.append(float(x))
            return x * x
        m = map(noisy, xs)
        log.append("made")
        first = next(m)
        log.append("first")
        return first + sum(filter(lambda v: v > 0.1, m))
    plain, lifted = [], []
    assert f(list(XS), plain) == bytegrad.value_and_gradient(f, list(XS), lifted)[0]
    assert lifted == plain and plain[:3] == ["made", float(XS[0]), "first"]
    check_grad(lambda xs: f(xs, []), XS)

    def infinite(x):
        m = map(lambda k: x * k, itertools.count(1))
        pairs = zip(m, enumerate(map(math.sin, itertools.repeat(x))))
        (a, (i, b)), (c, _) = next(pairs), next(pairs)
        return a * b + c + i
    check_grad(infinite, 0.7)
    check_grad(lambda x: sum(itertools.islice(map(lambda k: x ** k, itertools.count()), 1, 7, 2)), 0.7)
    check_grad(lambda x: sum(itertools.accumulate(itertools.chain([x], map(sq, [x, 2 * x])))), 0.7)


def test_map_without_iterables_raises_like_python():
    with pytest.raises(TypeError):
        bytegrad.gradient(lambda x: map(sq) and x, 1.0)


# ---- filter -------------------------------------------------------------------

def test_filter():
    check_grad(lambda xs: sum(filter(lambda x: x > 0.5, xs)), XS)
    check_grad(lambda xs: sum(v * v for v in filter(lambda x: x < 1.0, list(xs))), XS)
    check_grad(lambda xs: sum(filter(None, (xs[0], 0.0, xs[2]))), XS)
    check_grad(lambda xs: sorted(filter(lambda x: abs(x) > 0.5, xs))[0], XS)


def test_filter_predicate_closure_gets_no_gradient():
    check_grad(lambda xs, t: sum(filter(lambda x: x > t, xs)) + t, XS, 0.1)


def test_filter_in_a_for_loop_and_list():
    def f(xs):
        s = 0.0
        for v in filter(lambda x: x != xs[1], xs):
            s = s * 2.0 + v
        return s
    check_grad(f, XS)
    check_grad(lambda xs: list(filter(lambda x: x > 0.0, map(math.sin, xs)))[-1], XS)


# ---- sorted -------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{}, {"reverse": True}, {"key": abs}, {"key": abs, "reverse": True},
                                {"key": lambda v: (v - 0.5) ** 2}])
def test_sorted(kw):
    weights = [1.0, -2.0, 3.0, 0.5]
    check_grad(lambda xs: sum(w * v for w, v in zip(weights, sorted(xs, **kw))), XS)
    check_grad(lambda xs: sorted(list(xs), **kw)[0] * sorted(tuple(xs), **kw)[-1], XS)
    check_grad(lambda xs: sum(w * v for w, v in zip(weights, sorted((x * x for x in xs), **kw))), XS)


def test_sorted_key_closure_gets_no_gradient():
    check_grad(lambda xs, c: sorted(xs, key=lambda v: abs(v - c))[0] + c, XS, 0.6)


def test_sorted_pairs_and_ties_are_stable():
    def f(xs, ys):
        pairs = sorted(zip(xs, ys), key=lambda p: p[1])
        return sum(a * b * (i + 1) for i, (a, b) in enumerate(pairs))
    check_grad(f, XS, YS)
    xs = [2.0, 1.0, 2.0, 1.0]
    g = bytegrad.gradient(lambda xs: sorted(xs)[1] + 10.0 * sorted(xs, reverse=True)[0], xs)[0]
    order = sorted(range(4), key=xs.__getitem__)  # Python's own (stable) choice among ties
    order_rev = sorted(range(4), key=xs.__getitem__, reverse=True)
    want = [0.0] * 4
    want[order[1]] += 1.0
    want[order_rev[0]] += 10.0
    assert [0.0 if v is None else v for v in g] == want


def test_sorted_of_ints_carries_no_gradient():
    check_grad(lambda d0: sum(v * i for i, v in enumerate(sorted([3, 1, 2]))) * d0, 0.5)


# ---- min and max with key= ------------------------------------------------------

def test_min_max_key_over_iterators():
    check_grad(lambda xs: max(map(math.sin, xs), key=lambda v: -v), XS)
    check_grad(lambda xs: min((x * 2.0 for x in xs), key=abs), XS)
    check_grad(lambda xs, ys: max(zip(xs, ys), key=lambda p: p[1])[0], XS, YS)
    check_grad(lambda xs: max(filter(lambda x: x < 2.0, xs), default=0.0), XS)


def test_any_all_stay_non_differentiable():
    def f(xs):
        if any(map(lambda x: x > 2.0, xs)) and all(x > -5.0 for x in xs):
            return xs[0] * 3.0
        return xs[1]
    check_grad(f, XS)


# ---- functools.partial ------------------------------------------------------------

def scaled(a, x, c=1.0):
    return a * x * c + c


def test_partial_positional_and_keywords():
    check_grad(lambda a, x: partial(scaled, a)(x), 2.0, 3.0)
    check_grad(lambda a, x, c: partial(scaled, a, c=c)(x), 2.0, 3.0, 0.5)
    check_grad(lambda a, x, c: partial(scaled, x=x, a=a)(c=c), 2.0, 3.0, 0.5)
    check_grad(lambda a, x, c: partial(scaled, a * 1.0)(x, c=c), 2.0, 3.0, 0.5)


def test_partial_keyword_overridden_at_the_call():
    check_grad(lambda a, x, c1, c2: partial(scaled, a, c=c1)(x, c=c2), 2.0, 3.0, 0.5, 1.5)


def test_partial_nested_and_of_builtins():
    check_grad(lambda a, x, c: partial(partial(scaled, a), c=c)(x), 2.0, 3.0, 0.5)
    check_grad(lambda a, x: partial(math.pow, a)(x), 2.0, 1.3)
    check_grad(lambda A, w: partial(np.dot, w)(A) @ np.arange(3.0), arr((2, 3), seed=3), arr(2, seed=4))


def test_partial_of_closure_and_in_map():
    check_grad(lambda w, x: partial(lambda a, b: a * b * w, x)(x), 2.0, 3.0)
    check_grad(lambda a, xs: sum(map(partial(scaled, a), xs)), 0.7, XS)
    check_grad(lambda a, xs: sum(map(partial(scaled, c=a), xs, xs)), 0.7, XS)


def test_partial_passed_to_and_called_by_user_code():
    def apply_twice(f, x):
        return f(f(x))

    def splat(f, args):
        return f(*args)
    check_grad(lambda a, x: apply_twice(partial(scaled, a), x), 0.7, 1.3)
    check_grad(lambda a, x, y: splat(partial(scaled, a), (x, y)), 0.7, 1.3, 0.4)


def test_partial_fields_are_read():
    check_grad(lambda a, x: partial(scaled, a, x).args[1] * a + partial(scaled, c=x).keywords["c"], 0.7, 1.3)


def test_partial_of_a_plain_partial_is_flattened():
    plain = functools.partial(scaled, 2.0)
    check_grad(lambda x, c: partial(plain, x, c=c)(), 3.0, 0.5)
    check_grad(lambda x: partial(plain)(x) + partial(partial(plain, c=x), x)(), 3.0)


def test_partial_made_in_differentiated_code_is_a_partial():
    seen = []

    def f(a, x):
        p = partial(scaled, a)
        seen.append(p)
        return p(x)
    check_grad(f, 2.0, 3.0)
    p = seen[0]
    assert isinstance(p, functools.partial) and type(p) is Partial
    assert (p.func, p.args, p.keywords, p(4.0)) == (scaled, (2.0,), {}, scaled(2.0, 4.0))


def test_plain_partial_called_on_differentiable_values():
    """A plain functools.partial (made outside differentiated code, or inside with no
    differentiable value bound) is called as `call_partial`; its gradient is the
    dict of its fields."""
    p = functools.partial(scaled, 2.0)
    check_grad(lambda x: p(x), 3.0)
    check_grad(lambda x: partial(scaled, 2.0)(x), 3.0)
    g, = bytegrad.gradient(lambda q, x: q(x), p, 3.0)[:1]
    assert g["args"][0] == pytest.approx(fd_gradient(lambda a: scaled(a, 3.0), (2.0,), 0))


# ---- a property: pipelines of map/filter/sorted/generators and their consumers ----

_FUNCS = [math.sin, sq, lambda x: x * 0.5 - 1.0, math.atan]
_THRESHOLD = -0.5  # what the filter stage keeps: v > _THRESHOLD
_CONSUMERS = [
    sum,
    lambda it: sum(v * (i + 1.0) for i, v in enumerate(it)),
    lambda it: (lambda l: l[0] * 2.0 - l[-1] if l else 0.0)(list(it)),
    lambda it: sum(a * b for a, b in zip(it, it)),
    lambda it: max(it, default=0.0),
]


def _generator(g, it):
    return (g(v) + v for v in it)  # (in a function: ``g`` must not be rebound before use)


def _pipeline(stages, consumer):
    def f(xs):
        it = iter(list(xs))
        for kind, k in stages:
            g = _FUNCS[k]
            if kind == "map":
                it = map(g, it)
            elif kind == "filter":
                it = filter(lambda v: v > _THRESHOLD, it)
            elif kind == "sorted":
                it = iter(sorted(it, reverse=k % 2 == 1))
            else:
                it = _generator(g, it)
        return _CONSUMERS[consumer](it)
    return f


def _near_a_kink(values, stages):
    """Whether finite differences would straddle a kink: two values of some stage
    nearly tied (sort, max), or a value near the filter's threshold."""
    vs = list(values)
    for kind, k in stages + [("end", 0)]:
        if any(abs(a - b) < 1e-3 for i, a in enumerate(vs) for b in vs[i + 1:]):
            return True
        if any(abs(v - _THRESHOLD) < 1e-3 for v in vs):
            return True
        g = _FUNCS[k]
        vs = ([g(v) for v in vs] if kind == "map" else [v for v in vs if v > _THRESHOLD]
              if kind == "filter" else sorted(vs) if kind == "sorted" else [g(v) + v for v in vs])
    return False


@SETTINGS
@given(st.lists(st.floats(-3, 3), min_size=1, max_size=6, unique=True),
       st.lists(st.tuples(st.sampled_from(["map", "filter", "sorted", "genexpr"]),
                          st.integers(0, len(_FUNCS) - 1)), min_size=1, max_size=3),
       st.integers(0, len(_CONSUMERS) - 1))
def test_pipelines_match_finite_differences(values, stages, consumer):
    if _near_a_kink(values, stages):
        return
    check_grad(_pipeline(stages, consumer), np.array(values), rtol=1e-4, atol=1e-5)


def test_sorted_and_filter_with_c_keys():
    import operator

    def f(x, y):
        pairs = sorted([(x, y * y), (y, x * 3.0)], key=operator.itemgetter(1))
        kept = list(filter(operator.truth, [x - x, y * 2.0]))
        return pairs[0][0] * pairs[1][1] + sum(kept)
    check_grad(f, 0.7, 1.3)


# ---------------------------------------------------------------------------
# map, sorted, filter and partial of methods that change their object
# ---------------------------------------------------------------------------

class _Acc:
    def __init__(self):
        self.t = 0.0

    def add(self, v):
        self.t = self.t + v
        return self.t


def _partial_method(x):
    acc = _Acc()
    functools.partial(_Acc.add, acc)(x)
    return acc.t


@pytest.mark.regression
def test_partial_of_mutating_method():
    check_stateful(_partial_method, 2.0)


def _partial_bound_method(x):
    acc = _Acc()
    functools.partial(acc.add)(x)
    return acc.t


@pytest.mark.regression
def test_partial_of_bound_mutating_method():
    check_stateful(_partial_bound_method, 2.0)


def _partial_append(x):
    out = []
    functools.partial(out.append)(x)
    return out[0]


@pytest.mark.regression
def test_partial_of_list_append():
    check_stateful(_partial_append, 2.0)


def _sorted_key_side_effect(x):
    acc = _Acc()
    sorted([x, 2 * x], key=acc.add)
    return acc.t


@pytest.mark.regression
def test_sorted_key_side_effect():
    check_stateful(_sorted_key_side_effect, 2.0)


def _filter_pred_side_effect(x):
    acc = _Acc()
    list(filter(acc.add, [x, x]))
    return acc.t


@pytest.mark.regression
def test_filter_predicate_side_effect():
    check_stateful(_filter_pred_side_effect, 2.0)


class _Yielding:
    def __init__(self, x):
        self.x = x

    def __iter__(self):
        for v in self.x:
            yield v * 2.0


class _Listing(_Yielding):
    def __iter__(self):
        return iter([v * 2.0 for v in self.x])


class _Indexed:
    def __init__(self, x):
        self.x = x

    def __getitem__(self, i):
        return self.x[i] * 3.0


def _loop_over(obj):
    t = 0.0
    for v in obj:
        t = t + v * v
    return t


@pytest.mark.regression
@pytest.mark.parametrize("cls", [_Yielding, _Listing, _Indexed])
@pytest.mark.parametrize("consume", [sum, max, _loop_over, lambda o: list(o)[1] * 1.0,
                                     lambda o: sum(v * v for v in o)],
                         ids=["sum", "max", "for", "list", "genexpr"])
def test_an_object_iterated_through_its_python_iter_or_getitem(cls, consume):
    """``iter(obj)`` runs the class's ``__iter__`` (or ``__getitem__``) differentiated, and
    every consumer takes it so (the gradient was silently None)."""
    check_grad(lambda x: consume(cls(x)), np.array([0.3, -1.2, 0.5]))


# ---- zip and map with endless or length-less iterators; zip(strict=True) ----------

_ENDLESS = {
    "count": lambda x: sum(a * c for a, c in zip(x, itertools.count(1.5, 0.5))),
    "count-first": lambda x: sum(a * c for c, a in zip(itertools.count(), list(x))),
    "repeat": lambda x: sum([a * c for a, c in zip(x, itertools.repeat(2.0))]),
    "repeat-differentiable": lambda x: sum(a * c for a, c in zip(x, itertools.repeat(x[0] * x[1]))),
    "cycle": lambda x: sum(a * c for a, c in zip(x, itertools.cycle([1.0, 2.0]))),
    "map-argument": lambda x: sum(a * c for a, c in zip(x, map(float, "123"))),
    "map-repeat": lambda x: sum(map(operator.mul, x, itertools.repeat(2.0))),
    "map-count": lambda x: sum(map(operator.mul, x, itertools.count())),
    "only-iterators": lambda x: x[0] * sum(a * b for a, b in itertools.islice(
        zip(itertools.count(), itertools.repeat(3.0)), 4)),
}


@pytest.mark.regression
@pytest.mark.parametrize("f", list(_ENDLESS.values()), ids=list(_ENDLESS))
def test_zip_and_map_stop_at_the_shortest_of_endless_iterators(f):
    """Python's zip stops at its shortest argument, taking items lazily (an endless or
    length-less iterator raised TypeError: no len())."""
    check_grad(f, XS)


_ENDLESS_FORWARD = """
import itertools, operator, numpy as np, bytegrad as bg
x, v = np.array([0.3, -1.2, 2.1]), np.array([1.0, 2.0, -1.0])
fs = [lambda x: sum([a * c for a, c in zip(x, itertools.count())]),
      lambda x: sum([a * c for a, c in zip(list(x), itertools.repeat(2.0))]),
      lambda x: sum(map(operator.mul, x, itertools.count(1.0))),
      lambda x: x[0] * sum([a * b for a, b in itertools.islice(zip(itertools.count(), itertools.repeat(3.0)), 2)])]
print([float(bg.jvp(f, (x,), (v,))[1]) for f in fs])
"""


@pytest.mark.regression
def test_zip_and_map_of_endless_iterators_in_forward_mode():
    """jvp took every item of an endless iterator (memory ran out): run apart, with a
    memory limit, so that a regression fails instead of taking the machine."""
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    out = subprocess.run([sys.executable, "-c", _ENDLESS_FORWARD], capture_output=True, text=True,
                         timeout=300, preexec_fn=limit)
    assert out.returncode == 0, out.stderr[-2000:]
    # closed forms with v = (1, 2, -1): Σ i vᵢ, 2 Σ vᵢ, Σ (i+1) vᵢ, and (0·3 + 1·3) v₀
    assert np.allclose(eval(out.stdout), [0 + 2 - 2, 2 * 2.0, 1 + 4 - 3, 3 * 1.0])


@pytest.mark.regression
def test_zip_strict():
    """zip(..., strict=True) as Python's: equal lengths zip, unequal ones raise ValueError
    (the rules took no ``strict``)."""
    check_grad(lambda x: sum(a * c for a, c in zip(x, x[::-1], strict=True)), XS)
    check_grad(lambda x: sum(a * c for a, c in zip(iter(x), x[::-1], strict=True)), XS)
    y, dy = bytegrad.jvp(lambda x: sum([a * c for a, c in zip(x, x[::-1], strict=True)]), (XS,), (YS[:1] + XS,))
    assert np.isclose(dy, 2 * np.dot(XS[::-1], YS[:1] + XS))
    for f in (lambda x: sum(a * c for a, c in zip(x, x[1:], strict=True)),
              lambda x: sum(a * c for a, c in zip(iter(x), x[1:], strict=True))):
        with pytest.raises(ValueError, match="zip\\(\\) argument 2 is shorter than argument 1"):
            bytegrad.grad(f)(XS)
    with pytest.raises(ValueError, match="zip\\(\\) argument 2 is longer than argument 1"):
        bytegrad.jvp(lambda x: sum([a for a, c in zip(x[1:], x, strict=True)]), (XS,), (XS,))


# ---- zip, enumerate and reversed are one-shot iterators, as Python's ----------------

def _zip_read_twice(x):
    z = zip(list(x), list(x[::-1]))
    a, b = list(z), list(z)  # (the second finds it exhausted)
    return sum([p * q for p, q in a]) + 10.0 * len(b)


def _enumerate_read_twice(x):
    e = enumerate(list(x))
    a = [v * i for i, v in e]
    return sum(a) + 10.0 * len([v for _, v in e])


def _reversed_read_twice(x):
    r = reversed(list(x))
    return sum([v * v for v in r]) + 10.0 * len(list(r))


def _enumerate_after_next(x):
    e = enumerate(list(x))
    _, first = next(e)
    s = first * 3.0
    for i, v in e:
        s += i * v * v
    return s


def _zip_after_next(x):
    z = zip(list(x), list(x[::-1]))
    a, b = next(z)
    return a * b + 2.0 * sum([p * q * q for p, q in z])


_ONE_SHOT = {
    "zip-twice": _zip_read_twice,
    "enumerate-twice": _enumerate_read_twice,
    "reversed-twice": _reversed_read_twice,
    "next-enumerate": lambda x: next(enumerate(list(x)))[1] * 2.0,
    "next-reversed": lambda x: next(reversed(list(x))) * 3.0,
    "next-zip": lambda x: (lambda p: p[0] * p[1])(next(zip(list(x), list(x[::-1])))),
    "enumerate-after-next": _enumerate_after_next,
    "zip-after-next": _zip_after_next,
}

_ONE_SHOT_COMPOSED = {
    "zip-of-zip": lambda x: sum([a * b * c for (a, b), c in zip(zip(list(x), x[::-1]), list(x))]),
    "enumerate-of-zip": lambda x: sum([i * a * b for i, (a, b) in enumerate(zip(list(x), tuple(x[::-1])))]),
    "zip-of-reversed": lambda x: sum([a * a * b for a, b in zip(list(x), reversed(list(x)))]),
    "dict-of-zip": lambda x: (lambda d: d["a"] * d["c"] + d["b"])(dict(zip("abc", list(x)))),
    "list-of-reversed": lambda x: (lambda r: r[0] * 2.0 - r[-1] * r[1])(list(reversed(list(x)))),
    "sorted-of-zip": lambda x: (lambda s: s[0][1] * 3.0 + s[-1][0])(sorted(zip(list(x), list(x[::-1])))),
    "max-of-enumerate": lambda x: (lambda p: p[1] * p[1] * (p[0] + 1))(max(enumerate(list(x)), key=lambda p: p[1])),
    "sum-of-zip": lambda x: sum(a * b for a, b in zip(list(x), x[::-1])),
    "unpack-zip": lambda x: (lambda r: r[0][0] * r[1][1])(tuple(zip(list(x), list(x[::-1])))),
}


@pytest.mark.regression
@pytest.mark.parametrize("f", list(_ONE_SHOT.values()), ids=list(_ONE_SHOT))
def test_zip_enumerate_reversed_are_one_shot_iterators(f):
    """zip, enumerate and reversed returned lists: read twice, the second pass found the
    items again (a wrong value), and ``next`` of one raised TypeError ('list' object is
    not an iterator).  Values as Python's; gradients (reverse and forward mode) against
    finite differences."""
    check_grad(f, XS)
    assert np.allclose(bytegrad.grad(f)(XS), fd_gradient(f, [XS], 0))
    check_jvp(f, XS)


@pytest.mark.parametrize("f", list(_ONE_SHOT_COMPOSED.values()), ids=list(_ONE_SHOT_COMPOSED))
def test_consumers_of_zip_enumerate_reversed(f):
    """What takes the iterators zip, enumerate and reversed return: zip and enumerate
    again, dict, list, tuple, sorted, max, sum."""
    check_grad(f, XS)
    check_jvp(f, XS)


def _advancing_an_argument(short):
    """zip(it, short) takes one more item of ``it`` at the end (Python's zip asks its
    arguments in turn until one is exhausted); zip(short, it) does not."""
    def f(x):
        it = iter(list(x))
        z = zip(it, short) if short[0] > 0 else zip(short, it)
        return sum([p * q for p, q in z]) + 3.0 * next(it)
    return f


def _zip_of_a_started_zip(x):
    z = zip(list(x), list(x[::-1]))
    a, b = next(z)
    s = sum([p * q * r for (p, q), r in zip(z, [2.0])])
    return a * b + s + 10.0 * len(list(z))  # (one row: the outer zip took one it did not give)


def _enumerate_of_a_started_reversed(x):
    r = reversed(list(x))
    first = next(r)
    return first * 5.0 + sum([i * v for i, v in enumerate(r, 1)])


@pytest.mark.regression
@pytest.mark.parametrize("f", [_zip_of_a_started_zip, _enumerate_of_a_started_reversed],
                         ids=["zip-of-a-started-zip", "enumerate-of-a-started-reversed"])
def test_zip_and_enumerate_of_started_iterators(f):
    """A zip or reversed read partly, then given to zip or enumerate: the rest of its
    items, and where it is left, as Python's."""
    check_grad(f, XS)
    check_jvp(f, XS)


@pytest.mark.parametrize("f", [_advancing_an_argument([1.0, 2.0]), _advancing_an_argument([-1.0, 2.0])],
                         ids=["zip-takes-one-more", "zip-takes-no-more"])
def test_iterators_given_to_zip_and_enumerate_advance_as_pythons(f):
    """zip and enumerate of such an iterator take its items a row at a time: it is where
    Python's would leave it, for whatever reads it next."""
    check_grad(f, XS)
    check_jvp(f, XS)


def test_hessian_through_zip_enumerate_and_reversed():
    """Nested differentiation follows the iterators zip, enumerate and reversed return
    (where a lazy generator would be refused)."""
    def f(x):
        pairs = enumerate(zip(list(x), reversed(list(x))))
        return sum([(i + 1) * a * a * b for i, (a, b) in pairs])
    x = XS[:3]
    want = fd_hessian(f, x)
    assert np.allclose(bytegrad.hessian(f)(x), want, atol=1e-5)
    assert np.allclose(bytegrad.jacfwd(bytegrad.grad(f))(x), want, atol=1e-5)
    assert np.allclose(bytegrad.jacrev(bytegrad.grad(f))(x), want, atol=1e-5)


def _over_a_dict(x):
    d = {"a": x[0], "b": x[1] * x[2]}
    s = 0.0
    for i, k in enumerate(d):
        s += (i + 1) * d[k]
    for k, v in zip(d, d.values()):
        s += v * v
    return s


@pytest.mark.regression
def test_enumerate_and_zip_of_a_dict():
    """zip(d, ...) of a dict raised AttributeError (its keys got a tuple of gradients);
    the loop over enumerate(d) checks its keys without looking them up by position."""
    check_grad(_over_a_dict, XS)
    check_jvp(_over_a_dict, XS)


def test_an_iterator_moved_while_a_zip_reads_it_is_refused():
    """zip takes its rows at the call: an argument advanced by other code before the zip
    is read through would leave them stale (Python's zip would read on from where it is)."""
    def f(x):
        it = iter(list(x))
        z = zip(it, list(x))
        next(z)
        next(it)
        return sum([p * q for p, q in z])
    with pytest.raises(NotImplementedError, match="advanced by other code while the zip"):
        bytegrad.gradient(f, XS)


class _Summing:
    """Iterable, and added with ``+``: ``+=`` must add it, not iterate it."""

    def __init__(self, x):
        self.x = x

    def __add__(self, other):
        return type(self)(self.x + other.x)

    def __iter__(self):
        return iter([self.x])


class _AddingInPlace(_Summing):
    def __iadd__(self, other):
        self.x = self.x * other.x
        return self


def _plus_equals(cls):
    def f(a):
        c = cls(a)
        c += cls(2.0 * a)
        return c.x * a
    return f


def _list_plus_equals_object(a):
    xs = [a]
    xs += _Summing(3.0 * a)  # (a list's += does iterate it)
    return xs[0] * xs[1]


@pytest.mark.regression
@pytest.mark.parametrize("f", [_plus_equals(_Summing), _plus_equals(_AddingInPlace), _list_plus_equals_object],
                         ids=["__add__", "__iadd__", "list"])
def test_plus_equals_on_an_iterable_object_adds_it(f):
    """``c += d`` on objects of a class with ``__iter__`` gave both as iterators
    (TypeError: unsupported operand ... 'IndexIter'); only ``list += it`` iterates."""
    check_grad(f, 1.5)
    if f is not _list_plus_equals_object:  # (forward mode's list += takes lists only)
        y, dy = bytegrad.jvp(f, (1.5,), (1.0,))
        assert np.isclose(dy, fd_gradient(f, [1.5], 0))


@pytest.mark.regression
@pytest.mark.parametrize("f", [
    lambda x: sum([a * c for a, c in zip(x, itertools.repeat(x[0] * x[1]))]),
    lambda x: sum(list(itertools.repeat(x[0] * x[1], 3))),
    lambda x: sum([a * c for a, c in zip(itertools.repeat(x[2], 2), x)]),
], ids=["endless", "times", "first"])
def test_repeat_of_a_differentiable_value_in_forward_mode(f):
    """Each item of ``repeat(v)`` carries v's tangent (NoForwardRuleError: no forward rule)."""
    v = np.array([1.0, 2.0, -1.0, 0.5])
    _, dy = bytegrad.jvp(f, (XS,), (v,))
    assert np.isclose(dy, np.dot(fd_gradient(f, [XS], 0), v))
    check_grad(f, XS)


@pytest.mark.regression
def test_a_strict_zip_of_an_iterator_that_raises_never_gives_a_wrong_value():
    """zip(it, short, strict=True) takes items of ``it`` before it raises: the rows taken at
    the call left ``it`` unmoved, and ``next(it)`` read x[0] (1.5) where Python reads x[3]."""
    x, y = np.array([0.5, -1.0, 2.0, 3.0, 4.0]), np.array([1.5, 2.0])

    def f(x, y):
        it = iter(x)
        try:
            list(zip(it, y, strict=True))
        except ValueError:
            pass
        return next(it) * 3.0
    with pytest.raises(NotImplementedError, match="ValueError"):
        bytegrad.gradient(f, x, y)
    assert bytegrad.jvp(f, (x, y), (np.ones(5), np.zeros(2))) == (f(x, y), 3.0) == (9.0, 3.0)
    g = lambda x, y: sum(a * b for a, b in zip(iter(x[:2]), y, strict=True))  # noqa: E731
    v, (gx, gy) = bytegrad.value_and_gradient(g, x, y)
    assert v == g(x, y) and gx.tolist() == [1.5, 2.0, 0.0, 0.0, 0.0] and gy.tolist() == [0.5, -1.0]
