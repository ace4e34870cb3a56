"""Rules for the standard library beyond the builtins.

Several C functions are differentiated as the Python code below, which does what they do
(`functional.as_python`): ``functools.reduce``; ``itertools.chain``, ``chain.from_iterable``,
``accumulate``, ``islice``, ``pairwise``, ``count`` and ``repeat`` (generators, lazy as
Python's are);
``product`` (its rows made at the call); ``heapq.heappush``, ``heappop``, ``heappushpop``, ``heapreplace`` and ``heapify``
(CPython's algorithm, whose changes of the list are differentiated as any),
``nsmallest``/``nlargest`` (``sorted(xs, key=key)[:n]``, as documented), ``bisect.insort``
(the position gets no gradient).  A ``functools.singledispatch`` function's lookup of
the implementation by class runs plainly; the implementation is differentiated.  A ``defaultdict`` passed in (or made by a call run
plainly) is refused when changed in place: see `containers.check_changeable`.
``statistics.mean``, ``variance``, ``stdev``, ``pvariance``, ``pstdev``, ``geometric_mean``,
``harmonic_mean`` (and ``math.sumprod``) have closed-form rules (the value is the
library's, computed exactly); ``fmean``, ``median``, ``quantiles``, ``covariance`` and
``correlation`` run through the transform.  Dict subclasses (``OrderedDict``,
``defaultdict``, ``Counter``) read and write as dicts; ``types.SimpleNamespace`` is an
object whose gradient is a dict of its fields.  ``bisect``'s searches and ``index``/
``count`` of lists and tuples give positions and counts: no gradient.  ``collections.deque``
of differentiable values is refused (use a list).  Arithmetic dunders called as methods
(``x.__mul__(y)``, ``float.__add__(x, y)``, ``y.__rsub__(x)``) are their operators.
"""
from __future__ import annotations

import bisect
import collections
import functools
import heapq
import itertools
import operator as op
import statistics
import types

from ._frozen import math, np

from ..runtime.algebra import accum, is_differentiable
from ..runtime.errors import user_location
from ..runtime.forward import forward
from ..runtime.mutation import watch_kind
from ..runtime.rules import RULES, changes_arguments, nograd, nondifferentiable, rule, runs_plainly
from .containers import check_changeable, missing
from .functional import LAZY_NOTE, as_python, take_generators_whole
from .math import items, mirror
from .mutation import _dict_write

_END = object()


_EAGER = "evaluated eagerly: every row is made at the call (the pools are taken then, as Python does)"


# ---- functools, itertools: lazy where Python's are, as generators --------------------

@as_python(functools.reduce)
def _reduce(function, iterable, *initial):
    it = iter(iterable)
    value = initial[0] if initial else next(it, _END)
    if value is _END:
        raise TypeError("reduce() of empty iterable with no initial value")
    for x in it:
        value = function(value, x)
    return value


@as_python(itertools.chain, note=LAZY_NOTE)
def _chain(*iterables):
    for xs in iterables:
        yield from xs


@as_python(itertools.chain.from_iterable, note=LAZY_NOTE)
def _chain_from_iterable(iterables):
    for xs in iterables:
        yield from xs


@as_python(itertools.product, keywords=("repeat",), note=_EAGER)
def _product(*iterables, repeat=1):
    rows = [()]
    for pool in [tuple(p) for p in iterables] * repeat:
        rows = [r + (x,) for r in rows for x in pool]
    return iter(rows)


@as_python(itertools.accumulate, keywords=("initial",), note=LAZY_NOTE)
def _accumulate(iterable, func=None, *, initial=None):
    it = iter(iterable)
    total = next(it, _END) if initial is None else initial
    if total is not _END:
        yield total
        for x in it:
            total = total + x if func is None else func(total, x)
            yield total


def _islice_arguments(iterable, *args):
    """Python's errors for bad arguments of ``islice``, at the call, as Python checks them."""
    itertools.islice((), *args)


@as_python(itertools.islice, note=LAZY_NOTE, check=_islice_arguments)
def _islice(iterable, *args):
    s = slice(*args)
    start, step = s.start or 0, s.step or 1
    it, i = iter(iterable), 0
    while s.stop is None or i < s.stop:  # (no item past the stop is taken)
        x = next(it, _END)
        if x is _END:
            return
        if i >= start and (i - start) % step == 0:
            yield x
        i += 1


@as_python(itertools.count, note=LAZY_NOTE)
def _count(start=0, step=1):
    while True:
        yield start
        start += step


@as_python(itertools.repeat, note=LAZY_NOTE)
def _repeat(obj, *times):
    if not times:
        while True:
            yield obj
    for _ in range(times[0]):
        yield obj


if hasattr(itertools, "pairwise"):
    @as_python(itertools.pairwise, note=LAZY_NOTE)
    def _pairwise(iterable):
        it = iter(iterable)
        a = next(it, _END)
        if a is _END:
            return
        for b in it:
            yield a, b
            a = b


# ---- functools.singledispatch: the lookup by class runs plainly --------------------

# (its cache of classes is a WeakKeyDictionary; the implementation it returns is then
# differentiated as any function)
runs_plainly(functools.singledispatch(len).dispatch.__code__)


# ---- heapq, bisect -----------------------------------------------------------

def _siftdown(heap, start, pos):
    new = heap[pos]
    while pos > start:
        parent = (pos - 1) >> 1
        if not new < heap[parent]:
            break
        heap[pos] = heap[parent]
        pos = parent
    heap[pos] = new


def _siftup(heap, pos):
    end, start, new = len(heap), pos, heap[pos]
    child = 2 * pos + 1
    while child < end:
        if child + 1 < end and not heap[child] < heap[child + 1]:
            child += 1
        heap[pos] = heap[child]
        pos = child
        child = 2 * pos + 1
    heap[pos] = new
    _siftdown(heap, start, pos)


def _a_list(f, heap):
    """Python's TypeError for a heap that is no list (run plainly: no recursion into the rules)."""
    if type(heap) is not list:
        f(heap)
        raise TypeError(f"{f.__name__}() argument 1 must be list")


nondifferentiable(_a_list)


@as_python(heapq.heappush)
def _heappush(heap, item):
    _a_list(heapq.heapify, heap)
    heap.append(item)
    _siftdown(heap, 0, len(heap) - 1)


@as_python(heapq.heappop)
def _heappop(heap):
    _a_list(heapq.heapify, heap)
    last = heap.pop()
    if not heap:
        return last
    item = heap[0]
    heap[0] = last
    _siftup(heap, 0)
    return item


@as_python(heapq.heappushpop)
def _heappushpop(heap, item):
    _a_list(heapq.heapify, heap)
    if heap and heap[0] < item:
        item, heap[0] = heap[0], item
        _siftup(heap, 0)
    return item


@as_python(heapq.heapreplace)
def _heapreplace(heap, item):
    _a_list(heapq.heapify, heap)
    top = heap[0]
    heap[0] = item
    _siftup(heap, 0)
    return top


@as_python(heapq.heapify)
def _heapify(heap):
    _a_list(heapq.heapify, heap)
    for i in reversed(range(len(heap) // 2)):
        _siftup(heap, i)


@as_python(heapq.nsmallest, keywords=("key",),
            note="as sorted(xs, key=key)[:n]; key gets no gradient")
def _nsmallest(n, iterable, key=None):
    return sorted(iterable, key=key)[:n]


@as_python(heapq.nlargest, keywords=("key",),
            note="as sorted(xs, key=key, reverse=True)[:n]; key gets no gradient")
def _nlargest(n, iterable, key=None):
    return sorted(iterable, key=key, reverse=True)[:n]


@as_python(bisect.insort_right, keywords=("key",))
def _insort_right(a, x, lo=0, hi=None, *, key=None):
    a.insert(bisect.bisect_right(a, x if key is None else key(x), lo, hi, key=key), x)


@as_python(bisect.insort_left, keywords=("key",))
def _insort_left(a, x, lo=0, hi=None, *, key=None):
    a.insert(bisect.bisect_left(a, x if key is None else key(x), lo, hi, key=key), x)


changes_arguments(heapq.heappush, heapq.heappop, heapq.heappushpop, heapq.heapreplace, heapq.heapify,
                  bisect.insort_right, bisect.insort_left)
nondifferentiable(bisect.bisect_left, bisect.bisect_right, list.index, list.count, tuple.index,
                  tuple.count, dict.keys, set.isdisjoint, set.issubset, set.issuperset,
                  frozenset.isdisjoint, frozenset.issubset, frozenset.issuperset, float.is_integer,
                  float.hex, float.as_integer_ratio, op.index, op.indexOf, op.countOf, ord, chr,
                  bin, oct, hex, ascii)


# ---- statistics --------------------------------------------------------------

@rule(statistics.mean, note="closed form; the value is the library's")
def _mean(data):
    v = list(items(data))
    y = statistics.mean(v)
    return y, lambda d: (None, mirror(data, [None if _int(x) else d / len(v) for x in v]))


def _int(x):
    return type(x) is int or type(x) is bool


def _spread(f, ddof, root):
    """The rule of ``f``, the variance (``root``: the standard deviation) of data about
    their mean or a given centre, over ``n - ddof``: d var / d x_i = 2 (x_i - c) / (n - ddof),
    the given centre's gradient is minus their sum (with the mean, that sum is 0).  Where
    the standard deviation is 0 (sqrt's boundary point) its gradient is 0, as np.std's."""
    def r(data, centre=None):
        v = list(items(data))
        y = f(v, centre)
        c = statistics.mean(v) if centre is None else centre

        def back(d):
            scale = (d / (2 * y) if y else 0.0 * d) if root else d
            gs = [None if _int(x) else 2 * scale * (x - c) / (len(v) - ddof) for x in v]
            dc = None if centre is None or _int(centre) else -math.fsum(g for g in gs if g is not None)
            return None, mirror(data, gs), dc
        return y, back
    return r


for _f, _ddof, _root in ((statistics.variance, 1, False), (statistics.stdev, 1, True),
                         (statistics.pvariance, 0, False), (statistics.pstdev, 0, True)):
    rule(_f, note="closed form; the value is the library's")(_spread(_f, _ddof, _root))


if hasattr(math, "sumprod"):  # (3.12: statistics.fmean with weights calls it)
    @rule(math.sumprod)
    def _sumprod(p, q):
        vp, vq = list(items(p)), list(items(q))
        y = math.sumprod(vp, vq)

        def grad(a, mine, other, d):
            return mirror(a, [None if _int(u) else d * v for u, v in zip(mine, other)])
        return y, lambda d: (None, grad(p, vp, vq, d), grad(q, vq, vp, d))
    take_generators_whole(math.sumprod)  # (statistics.covariance passes it two)


@rule(statistics.geometric_mean, note="closed form; positive data")
def _geometric_mean(data):
    v = list(items(data))
    y = statistics.geometric_mean(v)
    return y, lambda d: (None, mirror(data, [None if _int(x) else d * y / (len(v) * x) for x in v]))


@rule(statistics.harmonic_mean, note="closed form; positive data (at a 0 the value 0 gets no gradient)")
def _harmonic_mean(data, weights=None):
    """H = W / S with W = sum(w), S = sum(w / x): dH/dx_i = W w_i / (S x_i)^2,
    dH/dw_i = 1 / S - W / (S^2 x_i)."""
    v = list(items(data))
    w = [1] * len(v) if weights is None else list(items(weights))
    y = statistics.harmonic_mean(v, None if weights is None else w)

    def back(d):
        if y == 0:
            return None, None, None
        total = math.fsum(w)
        s = total / y
        dx = [None if _int(x) else d * total * wi / (s * x) ** 2 for x, wi in zip(v, w)]
        dw = None if weights is None else mirror(
            weights, [None if _int(wi) else d * (1 / s - total / (s * s * x)) for x, wi in zip(v, w)])
        return None, mirror(data, dx), dw
    return y, back


take_generators_whole(statistics.mean, statistics.variance, statistics.stdev, statistics.pvariance,
                      statistics.pstdev, statistics.geometric_mean, statistics.harmonic_mean)


# ---- collections, types --------------------------------------------------------

@rule(dict.__new__)
def _dict_new(cls, *args, **kw):
    """An empty dict of class ``cls``, whose ``__init__`` (``Counter``'s) then fills it."""
    return dict.__new__(cls), lambda d: (None,) * (2 + len(args)) + (
        ({k: None for k in kw},) if kw else ())


rule(dict.__init__)(RULES[dict.update].fn)  # (dict.__init__(d, ...) is d.update(...))


def _setitem_of_subclasses(base):
    """``d[k] = v`` on a dict subclass whose ``__setitem__`` is C (``OrderedDict``,
    ``defaultdict``, ``Counter``) is a dict's; anything else goes on to ``base``."""
    def r(obj, k, v):
        own = getattr(type(obj), "__setitem__", None)
        if isinstance(obj, dict) and type(own) is not types.FunctionType:
            check_changeable(obj)
            return _dict_write(obj, k, v)
        return base(obj, k, v)
    return r


rule(op.setitem, override=True)(_setitem_of_subclasses(RULES[op.setitem].fn))


def _checked(base):
    """``base``, the rule of a dict method that changes the dict, after `check_changeable`."""
    def r(d, *args, **kw):
        check_changeable(d)
        return base(d, *args, **kw)
    return r


for _f in (dict.update, dict.setdefault, dict.pop, dict.popitem, dict.clear):
    rule(_f, override=True)(_checked(RULES[_f].fn))


@rule(dict.__getitem__)
def _dict_getitem(d, k):
    """``dict.__getitem__(d, k)``, as ``super().__getitem__(k)`` in a dict subclass calls it."""
    if k not in d:
        return missing(d, k)
    return dict.__getitem__(d, k), lambda g: (None, {k: g}, None)


@rule(dict.fromkeys)
def _fromkeys(keys, value=None):
    keys = list(keys)
    y = dict.fromkeys(keys, value)

    def back(d):
        total = None
        for k in y:
            total = accum(total, d.get(k))
        return None, None, total
    return y, back


@rule(types.SimpleNamespace)
def _namespace(*mapping, **kw):
    y = types.SimpleNamespace(*mapping, **kw)

    def back(d):
        d = d or {}
        src = ({k: d.get(k) for k in mapping[0] if k not in kw} if isinstance(mapping[0], dict)
               else None,) if mapping else ()
        return (None,) + src + (({k: d.get(k) for k in kw},) if kw else ())
    return y, back


watch_kind(types.SimpleNamespace)
watch_kind(collections.Counter)


def _refused(f):
    def r(*args, **kw):
        if any(map(is_differentiable, args + tuple(kw.values()))):
            file, line = user_location()
            raise NotImplementedError(
                f"{file}:{line}: collections.deque of differentiable values is not differentiated; "
                f"use a list (append, pop, insert(0, x), pop(0))")
        return f(*args, **kw), nograd(len(args))
    return r


for _f in (collections.deque, collections.deque.append, collections.deque.appendleft,
           collections.deque.extend, collections.deque.extendleft, collections.deque.insert):
    rule(_f, note="refused for differentiable values: use a list")(_refused(_f))


# ---- arithmetic dunders called as methods: their operators ---------------------

def _dunder(f, operator, reflected):
    base = RULES[operator].fn

    def r(a, b):
        if f(a, b) is NotImplemented:
            return NotImplemented, nograd(2)
        if not reflected:
            return base(a, b)
        y, back = base(b, a)
        return y, lambda d: (lambda g: (None, g[2], g[1]))(back(d))
    return r


for _name, _op in (("add", op.add), ("sub", op.sub), ("mul", op.mul), ("truediv", op.truediv),
                   ("floordiv", op.floordiv), ("mod", op.mod), ("pow", op.pow),
                   ("matmul", op.matmul)):
    for _t in (float, int, complex, np.ndarray, np.float64):
        for _reflected in (False, True):
            _f = getattr(_t, f"__{'r' if _reflected else ''}{_name}__", None)
            if _f is not None and _f not in RULES:
                rule(_f)(_dunder(_f, _op, _reflected))
for _name, _op in (("neg", op.neg), ("pos", op.pos), ("abs", op.abs)):
    for _t in (float, int, complex, np.ndarray, np.float64):
        rule(getattr(_t, f"__{_name}__"))(RULES[_op].fn)

