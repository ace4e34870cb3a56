"""The standard library (primitives/stdlib.py): every gradient against central finite
differences, every call that carries no gradient or is refused checked as such."""
from __future__ import annotations

import bisect
import collections
import functools
import heapq
import itertools
import operator
import statistics
import sys
import types

import numpy as np
import pytest

import bytegrad
from checks import check_grad, check_jvp, check_stateful, fd_gradient

XS = np.array([0.7, -1.3, 2.1, 0.4])


def L(xs):
    return [float(v) for v in xs]


BOTH_MODES = [
    lambda xs: functools.reduce(operator.mul, L(xs)),
    lambda xs: functools.reduce(lambda a, b: a * b + 1.0, L(xs), 0.5),
    lambda xs: functools.reduce(lambda a, b: a + b * b, (v for v in xs)),
    lambda xs: sum(itertools.chain(L(xs[:2]), (v * v for v in xs[2:]))),
    lambda xs: sum(itertools.chain.from_iterable([L(xs[:1]), L(xs[1:])])),
    lambda xs: sum(a * b for a, b in itertools.product(L(xs[:2]), L(xs[2:]))),
    lambda xs: sum(a * b for a, b in itertools.product(L(xs[:2]), repeat=2)),
    lambda xs: sum(itertools.accumulate(L(xs))) + sum(itertools.accumulate(L(xs), operator.mul)),
    lambda xs: sum(itertools.accumulate(L(xs[1:]), initial=xs[0] * 3)),
    lambda xs: sum(itertools.islice(L(xs), 1, None, 2)) + sum(itertools.islice(iter(L(xs)), 2)),
    lambda xs: sum(heapq.nsmallest(2, L(xs))) + sum(heapq.nlargest(2, L(xs), key=abs)),
    lambda xs: statistics.mean(L(xs)) + statistics.fmean(xs),
    lambda xs: statistics.variance(L(xs)) + statistics.stdev(L(xs), xbar=xs[0]),
    lambda xs: statistics.pvariance(L(xs), xs[1]) + statistics.pstdev(v for v in xs) + statistics.mean([1, xs[0]]),
    lambda xs: statistics.median(L(xs)) + sum(statistics.quantiles(L(xs), n=4))
    + statistics.fmean(L(xs), weights=[1.0, 2.0, 3.0, 4.0]),
    lambda xs: statistics.geometric_mean(L(xs * xs)) + statistics.harmonic_mean(L(xs * xs))
    + statistics.harmonic_mean(L(xs[:2] ** 2), weights=L(xs[2:] ** 2)),
    lambda xs: statistics.covariance(L(xs[:2]) + [1.0], L(xs[2:]) + [3.0])
    + statistics.correlation(L(xs[:3]), [1.0, 3.0, 2.0]),
    lambda xs: xs[0].__mul__(xs[1]) + float.__add__(float(xs[2]), 3.0) + xs[3].__rsub__(2.0),
]

# forward mode refuses these by line: dict.__new__, dict.fromkeys and complex.__mul__ have
# no forward rule (none derived for complex values or dicts)
REVERSE_ONLY = [
    lambda xs: collections.Counter({"a": xs[0], "b": xs[1]}).most_common(1)[0][1]
    + (lambda c: (c.update({"a": xs[2]}), c["a"])[1])(collections.Counter({"a": xs[3]})),
    lambda xs: dict.fromkeys(["a", "b"], xs[0])["a"] * dict.fromkeys("c", xs[1])["c"],
    lambda xs: xs.__mul__(xs).sum() + float(xs[0]).__truediv__(xs[1]) + float(xs[2]).__neg__()
    + float(xs[1]).__rpow__(2.0) + complex.__mul__(1j, complex(xs[3])).imag,
]


@pytest.mark.parametrize("f", BOTH_MODES + REVERSE_ONLY)
def test_differentiated(f):
    check_grad(f, XS)


@pytest.mark.parametrize("f", BOTH_MODES)
def test_differentiated_in_forward_mode(f):
    check_jvp(f, XS)


@pytest.mark.parametrize("f", REVERSE_ONLY)
def test_forward_mode_refuses_by_line(f):
    with pytest.raises(bytegrad.NoForwardRuleError, match=r"test_stdlib\.py:\d+: forward mode"):
        bytegrad.jvp(f, (XS,), (XS,))


def test_standard_deviation_of_equal_data_has_zero_gradient():
    for stdev in (statistics.stdev, statistics.pstdev):
        assert bytegrad.gradient(lambda xs: stdev(xs), [1.5, 1.5, 1.5]) == ([0.0, 0.0, 0.0],)
    assert bytegrad.gradient(lambda xs, c: statistics.pstdev(xs, c), [2.0, 2.0], 2.0) == ([0.0, 0.0], 0.0)


def test_pairwise():
    check_grad(lambda xs: sum(a * b for a, b in itertools.pairwise(L(xs))), XS)


def test_sumprod():
    import math
    if sys.version_info < (3, 12):  # new in 3.12: make test-all runs the rest on 3.12 and 3.13
        assert not hasattr(math, "sumprod")
        return
    check_grad(lambda xs: math.sumprod(L(xs[:2]), tuple(xs[2:])) + math.sumprod(xs, [1, 2, 3, 4]), XS)


def _heap(xs):
    h = []
    for v in xs:
        heapq.heappush(h, v * v)
    heapq.heapify(h)
    a = heapq.heappushpop(h, xs[0] * 0.5) + heapq.heappushpop(h, 9.0) * xs[1]
    b = heapq.heapreplace(h, xs[2] * 2.0)
    return heapq.heappop(h) * 3.0 + heapq.heappop(h) + h[0] + a * 5.0 + b * b


def _heapify_arg(h):
    heapq.heapify(h)
    return heapq.heappop(h) + 2 * h[0]


def _insort(h):
    bisect.insort(h, h[0] * 2)
    bisect.insort_left(h, h[1], key=abs)
    return h[0] + 2 * h[1] + 3 * h[-1]


def test_heapq_and_insort_change_lists():
    check_grad(_heap, XS)
    check_stateful(_heapify_arg, L(XS))
    check_stateful(_insort, sorted(L(XS), key=abs))


def _reduce_appending(x):
    def step(acc, v):
        acc.append(v * v)
        return acc
    return sum(functools.reduce(step, [x, 2 * x], [])) * x


@pytest.mark.regression
@pytest.mark.parametrize("f, x", [(_heap, XS), (lambda xs: _heapify_arg(L(xs)), XS),
                                  (lambda xs: _insort(sorted(L(xs), key=abs)), XS),
                                  (_reduce_appending, 0.7),
                                  (lambda xs: functools.reduce(lambda a, b: a * b + 1.0, L(xs), 0.5), XS)],
                         ids=["heapq", "heapify", "insort", "reduce changing its accumulator", "reduce"])
def test_forward_mode_runs_the_same_python(f, x):
    # (forward rules derived from the reverse ones: refused for changing their arguments,
    # and reduce with a step that appends crashed with IndexError)
    check_jvp(f, x)


def _collections(x, y):
    od = collections.OrderedDict(a=x, b=2 * y)
    od["c"] = od["a"] * y
    dd = collections.defaultdict(float)
    dd["a"] += x
    dd["b"] += dd["a"] * y
    dd["c"] *= y                            # a missing key: default_factory() stored first
    c = collections.Counter({"a": x}) + collections.Counter(b=y)
    cm = collections.ChainMap({"a": x}, {"b": y})
    cm["b"] = cm["b"] * x + cm["a"]
    ns = types.SimpleNamespace(a=x, b=2.0)
    ns.b = ns.a * y
    return od["c"] + od["b"] + dd["b"] + dd["c"] + c["a"] * c["b"] + c["z"] + cm["b"] + ns.b


def test_collections_read_and_write():
    check_grad(_collections, 0.7, -1.2)


def _defaultdict_argument(d):
    d["x"] += d["y"] * 2
    return d["x"] * d["missing"] + d["y"]


def _counter_argument(c):
    c["x"] += c["y"] * 2
    return c["x"] * c["y"] + c["missing"]


class Lower(dict):
    def __getitem__(self, k):
        return 2 * super().__getitem__(k.lower())


def test_a_dict_subclass_with_its_own_getitem():
    assert bytegrad.gradient(lambda d: d["A"], Lower(a=1.5)) == ({"a": 2.0},)


def test_dict_subclass_arguments():
    # x' = x + 2y; x' * y: d/dx = y, d/dy = 2y + x'; as passed: no "missing" key
    for d in (collections.Counter(x=0.3, y=2.0), collections.OrderedDict(x=0.3, y=2.0, missing=0.0)):
        g, = bytegrad.gradient(_counter_argument, d)
        assert g["x"] == 2.0 and g["y"] == pytest.approx(8.3) and list(d) == list(g)
    # a defaultdict: read only, differentiated; changed in place, refused (it has no fields,
    # from which the gradient of an argument changed in place is collected)
    dd = collections.defaultdict(float, x=0.3, y=2.0)
    assert bytegrad.gradient(lambda d: d["x"] * d["y"], dd) == ({"x": 2.0, "y": 0.3},)
    for f in (_defaultdict_argument, lambda d: d.update(x=d["y"]) or d["x"], lambda d: d.pop("x") * d["y"]):
        with pytest.raises(NotImplementedError, match="passed in"):
            bytegrad.gradient(f, dd)


@pytest.mark.parametrize("f, slope", [
    (lambda x: x * bisect.bisect([1.0, 2.0, 3.0], x) + x * bisect.bisect_left([x, 2.0], 1.0), 1.0),
    (lambda x: x * [x, 2 * x, x].index(2 * x) + x * [x, 2 * x, x].count(x) + x * (x, 1.0).index(1.0), 4.0),
])
def test_positions_and_counts_carry_no_gradient(f, slope):
    assert bytegrad.gradient(f, 1.5) == (slope,)


def test_errors_are_pythons():
    with pytest.raises(TypeError, match="reduce"):
        bytegrad.gradient(lambda x: functools.reduce(operator.add, []) + x, 1.0)
    with pytest.raises(ValueError, match="islice"):
        bytegrad.gradient(lambda x: sum(itertools.islice([x], -1)), 1.0)
    with pytest.raises(TypeError, match="must be list"):
        bytegrad.gradient(lambda x: heapq.heappush((x,), 1.0), 1.0)


@pytest.mark.parametrize("f", [
    lambda x: collections.deque([x, 2.0])[0],
    lambda x: (lambda d: (d.append(x), d[-1])[1])(collections.deque()),
])
def test_deque_is_refused(f):
    with pytest.raises(NotImplementedError, match="use a list"):
        bytegrad.gradient(f, 1.5)


def test_a_deque_of_constants_runs_plainly():
    assert bytegrad.gradient(lambda x: x * len(collections.deque([1, 2]) + collections.deque([3])), 1.5) == (3.0,)


def test_tests_and_conversions_carry_no_gradient():
    def f(d, x):
        s = {x, 2.0}
        n = len(d.keys()) + s.issubset({x, 2.0, 3.0}) + float(x).is_integer() + len(hex(7))
        return n * x + operator.countOf([x, x], x) * d["a"]
    assert bytegrad.gradient(f, {"a": 1.0}, 1.5) == ({"a": 2.0}, 5.0)


@functools.singledispatch
def _energy(x, scale=1.0):
    return scale * x * x


@_energy.register
def _(x: np.ndarray, scale=1.0):
    return scale * np.sum(np.sin(x) * x)


@_energy.register(list)
def _(xs, scale=1.0):
    return sum([_energy(x, scale) for x in xs])


@pytest.mark.regression
@pytest.mark.parametrize("f, x", [
    (lambda x: _energy(x), 1.3),
    (lambda x: _energy(x, scale=x), 1.3),
    (lambda x: _energy(x, 2.0), np.array([0.4, -1.1, 2.0])),
    (lambda x: _energy([x[0], x[1] * x[2]], scale=3.0), np.array([0.4, -1.1, 2.0])),
], ids=["float", "keyword", "array", "list-recursing"])
def test_singledispatch_function(f, x):
    """The lookup by class runs plainly and the implementation is differentiated (the
    lookup's WeakKeyDictionary raised NoRuleError naming weakref.ReferenceType)."""
    check_grad(f, x)
    v = np.ones_like(x) * 0.7
    _, dy = bytegrad.jvp(f, (x,), (v,))
    assert np.isclose(dy, np.sum(fd_gradient(f, [x], 0) * v))
