"""Rules for building, indexing, unpacking and iterating containers.

Reading one element (``x[i]``, or one step of a ``for`` loop) has a `OneHot`
gradient, which the gradient algebra accumulates into one buffer per slot, so a
loop over ``n`` elements costs O(n), not O(n²).
"""
from __future__ import annotations

import collections
import copy
import functools
import operator as op
import threading
import types

from ._frozen import np

from ..ir import ops
from ..runtime.algebra import Buffer, OneHot, accum, is_differentiable, unwrap
from ..runtime.errors import carried, read_through_get, user_frame, user_location
from ..runtime.forward import forward, run_plain
from ..runtime.generators import Generator, TangentGenerator
from ..runtime.mutation import Effect, watch_kind, wrapping
from ..runtime.shadow import current
from ..runtime.rules import effectful, is_effectful, nograd, nondifferentiable, rule, rule_for, sparse_gradients, \
    views
from ._util import holds, python_method, static_attribute
from .copies import PYTHON_COPIES, copied_by_python
from .np_indexing import getitem_pullback as _array_getitem_pullback


@rule(ops.identity)
def _identity(x):
    return x, lambda d: (None, d)


@rule(ops.build_tuple)
def _tuple(*xs):
    return xs, lambda d: (None,) + tuple(d)


@rule(ops.build_list)
def _list(*xs):
    return list(xs), lambda d: (None,) + tuple(d)


@rule(ops.list_to_tuple)
def _list_to_tuple(xs):
    return tuple(xs), lambda d: (None, list(d))


@rule(ops.build_dict)
def _dict(*kv):
    keys = kv[::2]
    return dict(zip(keys, kv[1::2])), lambda d: (None,) + tuple(
        x for k in keys for x in (None, d.get(k)))


def _scalar_index(x, k):
    if type(k) is int or isinstance(k, np.integer):
        return True
    return isinstance(x, np.ndarray) and type(k) is tuple and len(k) == x.ndim and \
        all(type(i) is int or isinstance(i, np.integer) for i in k)


@rule(op.getitem)
def _getitem(x, k):
    if isinstance(x, dict) and type(x) is not dict and type(x).__getitem__ is dict.__getitem__ \
            and k not in x:
        return missing(x, k)
    try:
        y = x[k]
    except KeyError as e:  # (KeyError(k): a read of its key takes no gradient back to k)
        if e.args and e.args[0] is k and is_differentiable(k):
            current().raised[id(e)] = (e, user_location(), None)  # (refused where a gradient reaches it)
        raise
    t = type(x)
    if t is not tuple and isinstance(x, tuple):  # a named tuple's gradient is a tuple
        t = tuple
    if type(k) is int and (t is np.ndarray or t is list or t is tuple):
        return y, lambda d: (None, OneHot(x, k, d), None)
    if t is dict:
        return y, lambda d: (None, {k: d}, None)
    if (t is tuple or t is list or t is np.ndarray) and _scalar_index(x, k):
        return y, lambda d: (None, OneHot(x, k, d), None)
    if t is tuple or t is list:
        def back(d):
            g = [None] * len(x)
            for i, di in zip(range(len(x))[k], d):
                g[i] = di
            return None, t(g), None
        return y, back
    if t is np.ndarray:
        return y, _array_getitem_pullback(x, k)
    getitem = getattr(t, "__getitem__", None)
    if type(getitem).__name__ == "function" or rule_for(getitem) is not None:  # (a C type's, with a rule)
        return forward(getitem, x, k)
    if getitem is dict.__getitem__:  # a dict subclass: OrderedDict, Counter
        return y, lambda d: (None, {k: d}, None)
    return run_plain(lambda x, k: y, (x, k), {}, name=getitem)


SETS = (set, frozenset)


def set_grad(items, gs):
    """The gradient of a set whose items (in iteration order) have the gradients ``gs``:
    a dict from item to gradient, as a dict's is from key to gradient; None if all are zero."""
    g = {x: gx for x, gx in zip(items, gs) if gx is not None}
    return g or None


def missing(d, k):
    """``d[k]`` for a key that the dict subclass ``d`` lacks: its Python ``__missing__``
    differentiated (``Counter``'s gives 0); a ``defaultdict`` stores ``default_factory()``
    there first, a change in place like ``d[k] = v``."""
    own = getattr(type(d), "__missing__", None)
    if type(own) is types.FunctionType:
        return forward(own, d, k)
    if not isinstance(d, collections.defaultdict) or d.default_factory is None:
        return dict.__getitem__(d, k), nograd(2)  # Python's KeyError
    check_changeable(d)
    sh = current()
    _, undo = forward(op.setitem, d, k, d.default_factory())

    def back(g):
        sh.add(d, {k: g})
        undo(None)
        return None, None, None
    return d[k], Effect(back)


def items_like(seq, d):
    """A gradient of the same kind as ``seq`` from the tuple of item gradients ``d``
    (a set's: its items in its order)."""
    if isinstance(seq, SETS):
        return set_grad(seq, d)
    if isinstance(seq, np.ndarray):
        rows = [np.zeros(seq.shape[1:], seq.dtype) if g is None else g for g in d]
        return np.stack(rows) if rows else np.zeros_like(seq)
    if isinstance(seq, list):
        return list(d)
    return tuple(d)


@rule(ops.unpack)
def _unpack(seq, n):
    return ops.unpack(seq, n), lambda d: (None, items_like(seq, d), None)


@rule(ops.unpack_ex)
def _unpack_ex(seq, before, after):
    y = ops.unpack_ex(seq, before, after)

    def back(d):
        d = list(d)
        mid = d[before] if d[before] is not None else [None] * len(y[before])
        return None, items_like(seq, d[:before] + list(mid) + d[before + 1:]), None, None
    return y, back


class IndexIter:
    """The iterator of a differentiable sequence, which knows the position it is at.

    ``zip`` and ``enumerate`` return one over the rows they take at the call; when they
    took them from other such iterators, ``feeds`` advances those as Python's would, a
    row at a time."""

    __slots__ = ("xs", "i", "feeds")

    def __init__(self, xs, feeds=None):
        self.xs, self.i, self.feeds = xs, 0, feeds

    @property
    def gradient_of(self):
        """Its gradient is expressed in its sequence's (a one-hot per item read), so
        when the sequence is changed in place, that gradient belongs to the shadow's."""
        return self.xs

    def __iter__(self):
        return self

    def __next__(self):
        i = self.i
        if self.feeds is not None:
            self.feeds.step(i, len(self.xs))
        if i >= len(self.xs):
            raise StopIteration
        self.i = i + 1
        return self.xs[i]


@rule(iter)
def _iter(xs, *sentinel):
    if not sentinel and type(xs) in (list, tuple, np.ndarray) and is_differentiable(xs):
        return IndexIter(xs), lambda d: (None, d)
    if not sentinel and type(xs) in SETS and is_differentiable(xs):
        items = tuple(xs)  # iterated as a tuple, in the set's order
        return IndexIter(items), lambda d: (None, set_grad(items, d))
    if not sentinel and python_iterable(xs):  # its __iter__ (or __getitem__) differentiated
        method = getattr(type(xs), "__iter__", None)
        y, pb = forward(method, xs) if method is not None else forward(_by_index, xs)
        return y, wrapping(pb, lambda d: (None, pb(d)[1]))
    if sentinel and callable(xs):  # (its calls differentiated, lazily)
        y, pb = forward(called_until, xs, *sentinel)
        return y, wrapping(pb, lambda d: pb(d)[:3])
    return iter(xs, *sentinel), nograd(1 + len(sentinel))


class Feeds:
    """The arguments of a ``zip`` or ``enumerate`` whose rows were taken at the call, some
    of them iterators (`IndexIter`): row ``i`` advances each of those past the item it
    holds, and the end takes one more item from the arguments before the first exhausted
    one, as Python's zip does (again at each call after it).  An iterator moved
    elsewhere in between would make the rows stale: refused."""

    __slots__ = ("args", "at")

    def __init__(self, args):
        self.args = args
        self.at = [x.i if type(x) is IndexIter else 0 for x in args]

    def step(self, i, n):
        if i < n:
            for j, x in enumerate(self.args):
                if type(x) is IndexIter:
                    if x.i != self.at[j]:
                        raise _moved()
                    next(x)
                self.at[j] += 1
            return
        for j, x in enumerate(self.args):
            if type(x) is IndexIter:
                if next(x, _END) is _END:
                    return
            elif self.at[j] >= len(x):  # (the only arguments besides iterators: sequences)
                return
            self.at[j] += 1


_END = object()


def _moved():
    file, line = user_location()
    return NotImplementedError(
        f"{file}:{line}: an iterator given to zip/enumerate was advanced by other code while "
        f"the zip/enumerate was being read; bytegrad takes their rows when zip/enumerate is "
        f"called: take the rows into a list first (list(zip(...))), or read one of the two")


@rule(IndexIter)
def _index_iter(xs, *feeds):
    # (as ``iter``'s: a forward rule makes one directly, and a level lifting it follows
    # the items' gradients, one-hots of ``xs``, back to ``xs``)
    return IndexIter(xs, *feeds), lambda d: (None, d) + (None,) * len(feeds)


nondifferentiable(Feeds)


def python_iterable(x) -> bool:
    """Whether ``x`` is an object of a class whose iteration is Python code: an
    ``__iter__``, or a ``__getitem__`` Python's iteration falls back on."""
    t = type(x)
    if t.__module__ == "builtins" or t is IndexIter or t is Generator or t is TangentGenerator or \
            not is_differentiable(x):
        return False
    method = getattr(t, "__iter__", None)
    if method is None:
        method = getattr(t, "__getitem__", None)
    return type(method) is types.FunctionType


def called_until(f, sentinel):
    """``iter(f, sentinel)`` as Python code: ``f()`` until it returns ``sentinel`` (or
    raises StopIteration)."""
    while True:
        try:
            v = f()
        except StopIteration:
            return
        if v is sentinel or v == sentinel:
            return
        yield v


def as_dict(m):
    """A mapping as ``dict(m)`` and ``d.update(m)`` read it: ``m[k]`` for ``k in m.keys()``."""
    return {k: m[k] for k in m.keys()}


def own_next(it):
    """The ``__next__`` of iterator ``it`` if it is Python code of yours, else None."""
    t = type(it)
    m = getattr(t, "__next__", None)
    return m if type(m) is types.FunctionType and t is not IndexIter and t is not Generator and \
        t is not TangentGenerator else None


def by_next(it):
    """Iteration of ``it``, an iterator of yours, as Python code calling its ``__next__``."""
    step = type(it).__next__
    while True:
        try:
            v = step(it)
        except StopIteration:
            return
        yield v


def _by_index(xs):
    """Python's iteration through ``__getitem__``: items 0, 1, … until IndexError."""
    i = 0
    while True:
        try:
            v = xs[i]
        except IndexError:
            return
        yield v
        i += 1


@rule(ops.iterate)
def _iterate(xs, state):
    if type(state) is not IndexIter:
        if type(state) is Generator:
            return _generator_step(state)
        step = own_next(state)
        if step is not None:  # (an iterator of yours: its __next__ differentiated)
            try:
                y, pb = forward(step, state)
            except StopIteration:
                return None, nograd(2)

            def back(d):
                d_item, d_state = (None, None) if d is None else d
                return None, None, accum(d_state, pb(d_item)[1])
            return (y, state), wrapping(pb, back)
        return ops.iterate(xs, state), nograd(2)
    i = state.i
    if _TAKEN and id(state.xs) in _TAKEN:
        _check_taken(state.xs, i)
    r = ops.iterate(xs, state)
    if r is None:
        if _TAKEN:
            _TAKEN.pop(id(state.xs), None)  # the loop is over
        return r, nograd(2)
    like = state.xs
    return r, lambda d: (None, None, d[1] if d[0] is None else accum(d[1], OneHot(like, i, d[0])))


# -- zip, enumerate, items and values take their items when called.  A loop over
#    them must not see a container change ahead of it (Python's would see the new
#    items): each step checks its item against the container, and refuses clearly.
_TAKEN: dict = {}  # id of the items taken → (the items, sources, their sizes, a check of
#                   item i, the thread): shared by threads, whose items have distinct ids


def _taken(y, sources, same):
    """Register the items ``y`` taken from ``sources``; ``same(i)`` tells whether item
    ``i`` still matches them.  Only changeable sources count."""
    sources = [x for x in sources if isinstance(x, (list, dict, np.ndarray))]
    if sources:
        if len(_TAKEN) > 256:  # loops left by break: forget this thread's oldest
            me = threading.get_ident()
            old = next((k for k in list(_TAKEN) if _TAKEN.get(k, (0,) * 5)[4] == me), None)
            _TAKEN.pop(old, None)
        _TAKEN[id(y)] = (y, sources, [len(x) for x in sources], same, threading.get_ident())
    return y


def _check_taken(y, i):
    entry = _TAKEN.get(id(y))
    if entry is None or entry[0] is not y:
        return
    _, sources, sizes, same, _ = entry
    if [len(x) for x in sources] != sizes or i < len(y) and not same(i):
        del _TAKEN[id(y)]
        file, line = user_location()
        raise NotImplementedError(
            f"{file}:{line}: this loop changes the container it iterates over through "
            f"zip/enumerate/items/values, whose items bytegrad takes when the loop begins; "
            f"loop over indices (for i in range(len(xs))) instead")


def _same(u, v):
    return u is v or isinstance(u, (np.ndarray, np.generic)) and np.array_equal(u, v)


@rule(zip)
def _zip(*xs, strict=False):
    if not any(sized(x) or type(x) is IndexIter for x in xs):  # only iterators, which carry no gradient
        return zip(*xs, strict=strict), nograd(len(xs))  # here: as lazy as Python's (they may be endless)
    parts = [remaining(x) for x in xs]
    y = list(zip(*[seq[at:] if at else seq for seq, at in parts], strict=strict))  # (to the shortest)
    _taken(y, [seq for seq, _ in parts], lambda i: all(_same(seq[at + i], v) for (seq, at), v in zip(parts, y[i])
                                                       if isinstance(seq, (list, np.ndarray))))

    def back(d):
        cols = list(zip(*[(None,) * len(xs) if g is None else g for g in d])) or [()] * len(xs)
        return (None,) + tuple(_placed(seq, at, c) if sized(seq) else None for (seq, at), c in zip(parts, cols))
    return IndexIter(y, _fed(xs)), back  # (one-shot, as Python's: a second pass finds it exhausted)


def remaining(x):
    """``(sequence, position)``: what is left of a zip's or enumerate's argument ``x``, the
    sequence under an `IndexIter` from where it is, else ``x`` itself from 0."""
    return (x.xs, x.i) if type(x) is IndexIter else (x, 0)


@rule(remaining)
def _remaining(x):
    # (for a level lifting zip's rule: an iterator's gradient is its sequence's)
    return remaining(x), lambda d: (None, None if d is None else d[0])


def _placed(seq, at, ds):
    """The gradient of ``seq`` whose items from ``at`` on had the gradients ``ds`` (None for
    a dict or a string, whose items, keys and characters, carry none)."""
    if isinstance(seq, (dict, str)):
        return None
    return items_like(seq, (None,) * at + tuple(ds) + (None,) * (len(seq) - at - len(ds)))


def _fed(xs):
    """The `Feeds` of a zip's or enumerate's arguments ``xs`` when some are iterators."""
    return Feeds(xs) if any([type(x) is IndexIter for x in xs]) else None  # (lists: lifted, in nesting)


def fed(xss) -> bool:
    """Whether a zip or enumerate of ``xss`` takes its rows at the call (`Feeds`): each is a
    sequence or an iterator of a list, tuple or array (`IndexIter`), given once; else it
    takes them lazily, a row when it is taken."""
    its = [xs for xs in xss if type(xs) is IndexIter]
    return len(its) == len({id(it) for it in its}) and \
        all([type(it.xs) in (list, tuple, np.ndarray) for it in its]) and \
        all([type(xs) is IndexIter or sized(xs) for xs in xss])


def sized(x) -> bool:
    """Whether iterable ``x`` has a length (an iterator such as ``itertools.count()`` has
    none, and its items, made by C code from constants, no gradient)."""
    return hasattr(type(x), "__len__")


@rule(enumerate)
def _enumerate(xs, start=0):
    seq, at = remaining(xs)
    y = list(enumerate(seq[at:] if at else seq, start))
    _taken(y, (seq,), lambda i: type(seq) is dict or _same(seq[at + i], y[i][1]))  # (a dict's: its keys)
    return IndexIter(y, _fed((xs,))), lambda d: (
        None, _placed(seq, at, [None if g is None else g[1] for g in d]) if sized(seq) else None, None)


@rule(reversed)
def _reversed(xs):
    return IndexIter(list(reversed(xs))), lambda d: (None, items_like(xs, list(d)[::-1]))


@rule(dict.items)
def _items(d):  # (dict's own methods, not a subclass's overrides, which may call this one)
    keys = list(dict.keys(d))
    y = list(dict.items(d))
    _taken(y, (d,), lambda i: _same(dict.get(d, keys[i]), y[i][1]))
    return y, lambda g: (None, {k: None if gi is None else gi[1] for k, gi in zip(keys, g)})


def _copying(f):
    """The rule of copy function ``f``: a copy's gradient is its original's, item by item,
    including what a later change of the copy left for it in the shadow; a copy that runs
    Python code (`copied_by_python`) is differentiated as the copy module's Python code."""
    def r(x, *memo):
        if f in PYTHON_COPIES and copied_by_python(x, f is copy.deepcopy):
            y, pb = forward(PYTHON_COPIES[f], x, *memo)
            return y, wrapping(pb, lambda d: (None,) + tuple(pb(d)[1:]))
        y, sh = f(x, *memo), current()
        rest = (None,) * len(memo)
        return y, Effect(lambda d: (None, unwrap(accum(d, sh.take(y))) if sh.mutated else d) + rest)
    return r


for _f in (list.copy, dict.copy, copy.copy, copy.deepcopy):
    rule(_f)(_copying(_f))
sparse_gradients(list.copy, copy.copy, copy.deepcopy)


@rule(dict.get)
def _get(d, k, default=None):
    if k in d:
        return d[k], lambda g: (None, {k: g}, None, None)
    return default, lambda g: (None, None, None, g)


@rule(dict.values)
def _values(d):
    keys = list(dict.keys(d))
    y = list(dict.values(d))
    _taken(y, (d,), lambda i: _same(dict.get(d, keys[i]), y[i]))
    return y, lambda g: (None, dict(zip(keys, g)))


@rule(ops.list_append)
def _list_append(xs, x):
    n, sh = len(xs), current()

    def back(d):
        if id(xs) in sh.mutated:  # changed in place later (a 3.12 comprehension's list is the
            sh.add(xs, d)  # function's own local): the item's gradient is in the shadow
            buf = sh.entry(xs, lambda: Buffer([None] * len(xs), list)).data
            g, buf[n] = buf[n], None
            return None, None, g
        return (None, None, None) if d is None else (None, list(d[:n]), d[n])
    return ops.list_append(xs, x), Effect(back)


@rule(ops.list_extend)
def _list_extend(xs, ys):
    n = len(xs)
    return ops.list_extend(xs, ys), lambda d: (None, list(d[:n]), items_like(ys, d[n:]))


@rule(ops.map_add)
def _map_add(m, k, v):
    had, sh = k in m, current()
    ops.map_add(m, k, v)

    def back(d):
        if id(m) in sh.mutated:  # changed in place later (a 3.12 comprehension's dict is the
            sh.add(m, d)  # function's own local): the value's gradient is in the shadow
            return None, None, None, sh.entry(m, dict).pop(k, None)
        if d is None:
            return None, None, None, None
        return None, {kk: g for kk, g in d.items() if kk != k or had}, None, d.get(k)
    return m, Effect(back)


@rule(ops.apply)
def _apply(f, args, kwargs=None):
    y, pb = forward(f, *args, **(kwargs or {}))

    def back(d):
        g = pb(d)
        n = len(args)
        dargs = items_like(args, g[1:1 + n])
        return (None, g[0], dargs) + ((g[1 + n] if len(g) > 1 + n else None,) if kwargs else (None,))
    # (``f(*args)`` of an effectful ``f``, ``ops.make_cell``: its pullback must run)
    return y, Effect(back) if is_effectful(f) else wrapping(pb, back)


@rule(getattr)
def _getattr(x, name, *default):
    if default:  # the default when the read raises AttributeError, as Python's (read once)
        try:
            y, pb = _getattr(x, name)
        except AttributeError:
            return default[0], lambda d: (None, None, None, d)
        return y, wrapping(pb, lambda d: pb(d) + (None,))
    if isinstance(x, BaseException) and id(x) in current().raised:
        return _read_out_of_exception(x, name)
    own = getattr(type(x), "__getattribute__", None)
    if type(own) is types.FunctionType:  # yours (a class's, for x an instance; a metaclass's)
        try:
            y, pb = forward(own, x, name)
        except AttributeError:  # (then your __getattr__, as Python's lookup)
            fallback = getattr(type(x), "__getattr__", None)
            if type(fallback) is not types.FunctionType:
                raise
            y, pb = forward(fallback, x, name)
        return y, wrapping(pb, lambda d: (None, pb(d)[1], None))
    return _attribute(x, name, getattr)


@rule(object.__getattribute__, type.__getattribute__)
def _object_getattribute(x, name):
    """``object.__getattribute__(x, name)`` (``type.__getattribute__`` for a class): the
    read as `getattr` makes it, past a ``__getattribute__`` of yours (which calls it)."""
    return _attribute(x, name, object.__getattribute__ if not isinstance(x, type) else type.__getattribute__)


def _attribute(x, name, read):
    """`getattr` without a default and past a ``__getattribute__`` of yours; ``read``
    reads the value itself."""
    prop = _class_attribute(x, name)
    if isinstance(prop, (property, functools.cached_property)):
        return _computed(x, name, prop)
    fields = getattr(x, "__dict__", None)
    fields = fields if type(fields) is dict else None
    desc, get = _descriptor_of(x, name, prop, fields)
    if get is not None and is_data_descriptor(desc):
        obj = x.__self__ if type(x) is super else x  # (a data descriptor of yours: what it reads)
        y, pb = forward(get, desc, obj, type(obj))
        return y, wrapping(pb, lambda d: (None, pb(d)[2], None))
    if read is getattr and delegated(x, name, fields):
        y, pb = forward(type(x).__getattr__, x, name)
        return y, wrapping(pb, lambda d: (None, pb(d)[1], None))
    through = get is not None and name not in (fields or ())  # (before __get__ may store it there)
    y = read(x, name)
    if through and type(y) in _VALUES:  # (one that binds, as a method: below)
        return y, _refusing(read_through_get(name, desc, user_location()))
    if name == "real" and isinstance(x, _NUMBERS):  # the gradient of a complex number is complex
        return y, lambda d: (None, np.asarray(d, x.dtype) if isinstance(x, np.ndarray)
                             else d + 0j if isinstance(x, complex) else d, None)
    if name == "imag" and isinstance(x, _NUMBERS):  # Im(x + iy) = y has gradient 0 + 1i
        return y, lambda d: (None, 1j * d if np.iscomplexobj(x) else None, None)
    owner = getattr(y, "__self__", None)
    if owner is x or type(x) is super and owner is x.__self__:
        # a bound method (also through super()): its gradient is its object's
        return y, lambda d: (None, d, None)
    if name == "__self__" and isinstance(x, _BOUND):  # (and so the other way)
        return y, lambda d: (None, d, None)
    if name == "base" and isinstance(x, np.ndarray) and is_differentiable(y):
        file, line = user_location()
        return y, _refusing(NotImplementedError(
            f"{file}:{line}: a gradient reaches `.base` of an array, the array it shares memory "
            f"with, whose gradient is not followed; use the array the view was made from"))
    if name == "__dict__" and y is fields:  # the fields' gradients are the object's
        current().own(fields, x)
        return y, lambda d: (None, d, None)
    if fields is not None and name not in fields and prop is not None and not isinstance(x, type) \
            and not hasattr(prop, "__get__"):
        return y, lambda d: (None, None, None)  # a class attribute: no field of x
    if isinstance(x, tuple) and name in getattr(x, "_fields", ()):
        return y, lambda d: (None, OneHot(x, x._fields.index(name), d), None)
    if isinstance(x, np.ndarray) and not is_differentiable(y):  # .shape, .ndim: no gradient (given
        return y, nograd(2)  # one by a call, ``a.reshape(*a.shape)``, it was stored as a field's)
    if name == "T":
        return y, lambda d: (None, d.T, None)
    if name == "mT":
        return y, lambda d: (None, np.swapaxes(d, -1, -2), None)
    return y, lambda d: (None, {name: d}, None)


def _read_out_of_exception(e, name):
    """``e.name`` of an exception made of values with a gradient: the value, and a
    pullback that refuses a gradient that reaches it (none goes back through ``e``) or,
    for the StopIteration of a generator that returned (`_returned`), hands the gradient
    of its value (``e.value``, ``e.args[0]``) back to the generator."""
    y, (e0, made_at, back) = getattr(e, name), current().raised[id(e)]
    if e0 is not e or not is_differentiable(y):
        return y, nograd(2)
    if back is not None and name == "value":
        return y, lambda d: (None, back(d), None)
    if back is not None and name == "args" and len(y) == 1:
        return y, lambda d: (None, None if d is None else back(unwrap(d)[0]), None)
    return y, _refusing(carried(e, made_at, user_location()))


def _refusing(error):
    """A pullback that raises ``error`` (made where the value was read, to name its line)
    if a gradient reaches it: the value is one whose gradient is not followed."""
    def back(d):
        raise error
    return back


def _descriptor_of(x, name, prop, fields):
    """``(descriptor, its __get__)`` where ``x.name`` is read through a descriptor of yours
    (its ``__get__`` Python code), else ``(None, None)``.  ``prop`` is what the class gives
    for ``name`` (the descriptor itself, by the usual convention); a name in ``x``'s own
    fields is a field (a data descriptor of the same name there is not looked for)."""
    if isinstance(x, type):
        return None, None
    if prop is None and (fields is None or name not in fields):
        prop = static_attribute(type(x), name) if type(x) is not super else None
    get = python_method(prop, "__get__")
    return (prop, get) if get is not None else (None, None)


def delegated(x, name, fields) -> bool:
    """Whether Python's ``x.name`` calls your ``__getattr__`` (a metaclass's, for a class
    ``x``): ``name`` is none of ``x``'s ``fields`` (its ``__dict__``), nor held by its
    class or a base (for a class, by it, its bases, its metaclass)."""
    hook = getattr(type(x), "__getattr__", None)
    if type(hook) is not types.FunctionType:
        return False
    if isinstance(x, type):
        return not holds(x, name) and not holds(type(x), name)
    return fields is not None and name not in fields and not holds(type(x), name)


def is_data_descriptor(desc) -> bool:
    return hasattr(type(desc), "__set__") or hasattr(type(desc), "__delete__")


_VALUES = frozenset({float, complex, np.float64, np.ndarray})
_NUMBERS = (np.ndarray, np.number, complex, float, int)  # (a field of yours named real is a field)


_BOUND = (types.MethodType, types.BuiltinMethodType, types.MethodWrapperType)


def _class_attribute(x, name):
    """What ``name`` is on ``x``'s class (past ``__thisclass__`` for a ``super()`` object)."""
    if type(x) is not super:
        return getattr(type(x), name, None)
    if isinstance(x.__self__, type):
        return None
    mro = type(x.__self__).__mro__
    for c in mro[mro.index(x.__thisclass__) + 1:]:
        if name in vars(c):
            return vars(c)[name]
    return None


def _computed(x, name, prop):
    """A property (or cached property) read: its getter is differentiated, once."""
    obj = x.__self__ if type(x) is super else x
    y, pb = forward(prop.fget if isinstance(prop, property) else prop.func, obj)
    if isinstance(prop, functools.cached_property):
        vars(obj).setdefault(name, y)  # cached, as the plain read does
    return y, wrapping(pb, lambda d: (None, pb(d)[1], None))


nondifferentiable(len, range, isinstance, issubclass, type, id, hash, print, repr, str, format,
                  bool, callable, hasattr, slice, slice.indices, any, all,
                  ops.format_value, ops.build_string, ops.unbound_local, ops.raise_from, ops.read_global,
                  ops.import_name, ops.import_from, ops.not_contains, ops.delete_global,
                  ops.match_sequence, ops.match_mapping,
                  np.shape, np.ndim, np.size)

sparse_gradients(op.getitem, ops.iterate, next, getattr, ops.send)
views(op.getitem, getattr)  # (x[1:], x.T)


@rule(ops.store_global)
def _store_global(name, value):
    # the functions that read the global take it as a constant: its gradient would be lost
    g = user_frame().f_globals
    if g.get(name) is value:  # (``global a; a += x`` on an array: changed in place, not rebound)
        return value, nograd(2)
    if not is_differentiable(value):  # (a count, a flag: no gradient to lose)
        g[name] = value
        return value, nograd(2)
    file, line = user_location()
    raise NotImplementedError(
        f"{file}:{line}: storing a value that carries a gradient in the global {name!r} is "
        f"not differentiated (code that reads the global takes it as a constant); pass it "
        f"as an argument or return it, keep it in an object (a dict or a list), or store "
        f"bytegrad.stop_gradient(value) if it is only kept to look at")


@rule(ops.bound)
def _bound(x, name):
    return ops.bound(x, name), lambda d: (None, d, None)


def merge_rule(merge):
    def r(m, other):
        before = set(m)
        y, sh = merge(m, other), current()

        def back(d):
            if y is m and sh.mutated:  # (changed in place later: what it holds is ours to split)
                d = unwrap(accum(d, sh.take(y)))
            d = d or {}
            return None, {k: g for k, g in d.items() if k in before and k not in other}, \
                {k: d.get(k) for k in other}
        # an update returns its operand, which `ops.watch` leaves to its maker: made
        # plainly (``{**m}``), it has none, so the update's pullback takes its gradient
        return y, Effect(back) if y is m else back
    return r


for _merge in (ops.dict_update, ops.dict_merge):
    rule(_merge)(merge_rule(_merge))
nondifferentiable(ops.cell_delete)


def _constructor(ctor):
    def r(*xs):
        y = ctor(*xs)
        if not xs or not is_differentiable(y):
            return y, nograd(len(xs))
        src = xs[0]
        if isinstance(src, dict):  # list(d) is its keys
            return y, nograd(1)
        return y, lambda d: (None, items_like(src, d) if isinstance(src, (list, tuple, np.ndarray, *SETS))
                             else None)
    return r


for _ctor in (list, tuple):
    rule(_ctor)(_constructor(_ctor))


def _mapping(make, lead=0):
    """The rule of the dict constructor ``make`` (``dict``, ``OrderedDict``, ``defaultdict``,
    whose ``lead`` first arguments, a default factory, carry no gradient)."""
    def r(*args, **kw):
        head, xs = args[:lead], args[lead:]
        src = xs[0] if xs else None
        if src is not None and not isinstance(src, dict) and hasattr(type(src), "keys"):
            m, pb_m = forward(as_dict, src)  # (a mapping of yours: read by its keys)
            y, back = r(*head, m, *xs[1:], **kw)

            def through(d):
                g = back(d)
                return g[:1 + lead] + (pb_m(g[1 + lead])[1],) + g[2 + lead:]
            return y, wrapping(pb_m, through)
        if src is not None and not isinstance(src, dict):
            src = [tuple(p) for p in src]  # pairs: a later pair of a key overwrites an earlier one
            last = {k: i for i, (k, _) in enumerate(src)}
        y = make(*head, *(() if src is None else (src,)), **kw)

        def back(d):
            d = d or {}
            if isinstance(src, dict):
                dsrc = {k: d.get(k) for k in src if k not in kw}
            elif src is not None:
                dsrc = [(None, d.get(k) if last[k] == i and k not in kw else None)
                        for i, (k, _) in enumerate(src)]
            return (None,) * (1 + lead) + ((dsrc,) if xs else ()) + \
                (({k: d.get(k) for k in kw},) if kw else ())
        return y, back
    return r


def _made(make, lead=0):
    """``_mapping(make)`` for a dict subclass without fields, whose objects are recorded
    as made in this gradient call (`check_changeable`)."""
    base = _mapping(make, lead)

    def r(*args, **kw):
        y, back = base(*args, **kw)
        sh = current()
        if getattr(_MADE, "shadow", None) is not sh:  # a new gradient call: forget the last's
            _MADE.shadow, _MADE.objects = sh, {}
        _MADE.objects[id(y)] = y
        return y, back
    return r


_MADE = threading.local()  # the defaultdicts made in this thread's gradient call


def check_changeable(d):
    """Refuse to change in place a dict subclass without fields (``defaultdict``) that
    was not made by a constructor call bytegrad saw: the gradient of an argument changed in
    place is collected from its fields, which it lacks."""
    if type(d) is dict or getattr(d, "__dict__", None) is not None or \
            getattr(_MADE, "shadow", None) is current() and id(d) in _MADE.objects:
        return
    file, line = user_location()
    name = type(d).__name__
    raise NotImplementedError(
        f"{file}:{line}: changing in place a {name} that was passed in (or made by a call "
        f"bytegrad ran plainly, such as a locally imported name) is not differentiated yet; "
        f"make it with collections.{name}(...) named at module level, or use a dict "
        f"(d[k] = d.get(k, 0.0) + v)")


rule(dict)(_mapping(dict))
rule(collections.OrderedDict)(_mapping(collections.OrderedDict))
rule(collections.defaultdict, note="changed in place only when made by a call of collections.defaultdict "
     "in the differentiated code; else refused")(_made(collections.defaultdict, lead=1))
effectful(collections.defaultdict)  # (always run, so that what it made is known)
watch_kind(collections.OrderedDict)
watch_kind(collections.defaultdict)


@rule(super)
def _super(*args):
    """``super(cls, obj)``: a view of ``obj``, whose gradient is ``obj``'s."""
    return super(*args), lambda d: (None,) * len(args) + (d,)


@rule(tuple.__new__)
def _tuple_new(cls, *items):
    """``tuple.__new__(cls, iterable)``, as a named tuple's ``__new__`` calls it."""
    y = tuple.__new__(cls, *items)
    return y, lambda d: (None, None) + ((items_like(items[0], unwrap(d)),) if items else ())


@rule(next, IndexIter.__next__)  # (its method too: iter(it.__next__, sentinel))
def _next(it, *default):
    if type(it) is not IndexIter:
        if type(it) is Generator:
            return generator_next(it, *default)
        step = own_next(it)
        if step is not None:  # (yours: differentiated)
            try:
                y, pb = forward(step, it)
            except StopIteration:
                if default:
                    return default[0], lambda d: (None, None, d)
                raise
            return y, wrapping(pb, lambda d: pb(d) + (None,) * len(default))
        return next(it, *default), nograd(1 + len(default))
    i = it.i
    r = ops.iterate(it.xs, it)
    if r is None:
        if default:
            return default[0], lambda d: (None, None, d)
        raise StopIteration
    like = it.xs
    return r[0], lambda d: (None, OneHot(like, i, d)) + (None,) * len(default)


def _generator_step(g):
    """`ops.iterate` of a differentiated generator: the step's pullback hands the item's
    gradient back to it."""
    j = g.resumes
    try:
        y = g.send(None)
    except StopIteration:
        return None, _ended(g, j, 2)
    return (y, g), Effect(lambda d: (None, None, g.back(j, d and d[0]) and None))


def _ended(g, j, n):
    """The pullback of a step that found ``g`` returned: where this step's resumption ended
    it, its reverse (which puts back what that resumption changed in place) runs here,
    before the pullbacks of the items taken earlier."""
    if g.done and g.resumes == j + 1:
        return Effect(lambda d: (g.back(j, None) and None,) + (None,) * n)
    return nograd(n)


@rule(Generator.__next__)
def generator_next(g, *default):
    """``next(g)`` of a differentiated generator: the item, whose gradient its pullback
    hands back to ``g``."""
    j = g.resumes
    try:
        y = g.send(None)
    except StopIteration as e:
        if default:
            ended = _ended(g, j, 2)
            return default[0], wrapping(ended, lambda d: ended(None)[:2] + (d,))
        _returned(g, j, e, None)
        raise
    return y, Effect(lambda d: (None, g.back(j, d) and None) + (None,) * len(default))


@rule(Generator.send)
def _generator_send(g, value):
    j = g.resumes
    try:
        y = g.send(value)
    except StopIteration as e:
        _returned(g, j, e, value)
        raise
    return y, Effect(lambda d: (None, None, g.back(j, d)))


def _returned(g, j, e, sent):
    """``e``, the StopIteration raised because resumption ``j`` of ``g`` returned, carries
    the return value: a gradient that reaches it, read out of ``e``, goes back to ``g``.
    A gradient ``g``'s adjoint then has for ``sent``, the value that resumption sent in,
    is refused: the ``send`` raised, so no pullback of it takes that gradient."""
    if not g.done or g.resumes != j + 1 or not is_differentiable(e.value):
        return
    file, line = user_location()

    def back(d):
        if g.back(j, d) is not None and is_differentiable(sent):
            raise NotImplementedError(
                f"{file}:{line}: a gradient reaches the value sent into the generator {g.name} by "
                f"the send() that made it return, through the return value read out of the "
                f"StopIteration; it is not followed: yield that value instead of returning it")
        return None
    current().raised[id(e)] = (e, (file, line), back)


nondifferentiable(Generator.close, Generator.throw)  # (run as they are: see their docstrings)
# a raise statement (no derivative goes through an exception; one made of values with a
# gradient was kept when it was made): also where its exception, or the one being handled
# that it takes as its __context__, was raised by an active call
nondifferentiable(ops.throw, ops.reraise)


@rule(ops.send)
def _send(it, value):
    """One step of ``yield from it``: from a differentiated generator (the gradient of
    the item, or of its return value, goes back to it), or over a sequence."""
    if type(it) is Generator:
        j = it.resumes
        try:
            r = it.resume(value)
        except StopIteration:
            return (None, False), nograd(2)
        return r, Effect(lambda d: (None, None, it.back(j, d and d[0])))
    i = getattr(it, "i", None)
    r = ops.send(it, value)
    if type(it) is not IndexIter or not r[1]:
        return r, nograd(2)
    like = it.xs
    return r, lambda d: (None, None if d[0] is None else OneHot(like, i, d[0]), None)


@rule(float.conjugate, complex.conjugate, int.conjugate)
def _conjugate(x):
    return x.conjugate(), lambda d: (None, d.conjugate() if isinstance(x, complex) else d)


nondifferentiable(*(getattr(str, m) for m in dir(str) if not m.startswith("_")))
