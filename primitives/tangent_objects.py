"""Forward rules of containers, objects, cells, iteration and changes in place.

A container's tangent is a container of its items' tangents (None when all are
zero), an object's a dict of its fields' tangents.  A write (``x[k] = v``,
``obj.a = v``, ``xs.append(v)``) changes the object's tangent in the tangent shadow
(`runtime.tangents`), which every later read of the object consults; a cell's
tangent is kept there too.  A change in place without a forward rule here raises
`NoForwardRuleError` naming it, when a nonzero tangent meets it.

    >>> from bytegrad.ir import ops
    >>> from bytegrad.runtime.frules import FRULES
    >>> FRULES[ops.build_tuple]((1.0, None), 2.0, 3)
    ((2.0, 3), (1.0, None))
    >>> FRULES[operator.getitem](((1.0, None), None), (2.0, 3), 0)
    (2.0, 1.0)
"""
from __future__ import annotations

import copy
import copyreg
import functools
import itertools
import operator
import sys
import types

from ._frozen import np

from ..ir import ops
from ..runtime.algebra import is_differentiable
from ..runtime.errors import carried, read_through_get, running_frame, user_location
from ..runtime.batching import batches
from ..runtime.frules import FRULES, frule
from ..runtime.generators import TangentGenerator
from ..runtime.jvp import jvp_call, jvp_call_kw
from ..runtime.nesting import make_function_frule_in_reverse
from ..runtime.rules import rule
from ..runtime.tangents import ForwardModeError, current, now
from ._tangent import consume, item_tangents, items, listed, none_if_zero, python_iterated, seq
from ._util import descriptor_method
from .containers import _BOUND, _VALUES, IndexIter, _class_attribute, called_until, _descriptor_of, _fed, delegated, \
    fed, is_data_descriptor, own_next, python_iterable, remaining, sized
from .copies import PYTHON_COPIES, default_state, copied_by_python, reduce_ex_as_python
from .mutation import array_writer

# -- building and reading -----------------------------------------------------------


def _keyword_tangents(fr):
    fr.keyword_tangents = True
    return fr


def _split(ts, n):
    """The positional tangents of a call with ``n`` positional arguments, and the dict of
    its keywords' tangents (`_keyword_tangents`)."""
    return ts[:n], (ts[n] if len(ts) > n else None) or {}



@frule(ops.build_tuple)
def _build_tuple(ts, *xs):
    return xs, none_if_zero(ts)


@frule(ops.build_list)
def _build_list(ts, *xs):
    return list(xs), none_if_zero(list(ts))


@frule(ops.list_to_tuple)
def _list_to_tuple(ts, xs):
    return tuple(xs), None if ts[0] is None else tuple(ts[0])


@frule(ops.build_dict)
def _build_dict(ts, *kv):
    d = ops.build_dict(*kv)
    return d, none_if_zero(dict(zip(kv[::2], ts[1::2]))) if any([t is not None for t in ts[1::2]]) else None


@frule(ops.identity)
def _identity(ts, x):
    return x, ts[0]


def _item(x, dx, k):
    """The tangent of ``x[k]`` read from ``dx``, the tangent of ``x``."""
    if dx is None:
        return None
    if isinstance(dx, dict):
        return dx.get(k)
    return dx[k]


def _read(y, dy):
    """The tangent ``dy`` of a value read out of an object, or the shadow's for ``y`` when
    ``y`` was changed in place after the object's tangent was made (a read is called
    directly, without `jvp_call`'s look at the shadow, where nothing here changes)."""
    sh = current()
    return sh.refresh(y, dy) if sh.entries else dy


@frule(operator.getitem)
def _getitem(ts, x, k):
    t = type(x)
    if t is np.ndarray:  # (the usual case, first)
        y, d = x[k], now(x, ts[0])
        return y, None if d is None else _read(y, d[k])
    m = getattr(t, "__getitem__", None)
    if type(m) is types.FunctionType:  # (also of a subclass of dict or list)
        return jvp_call(m, None, ts, x, k)
    if t is list or t is tuple or t is dict or isinstance(x, (tuple, dict, list)):
        try:
            y = x[k]
        except KeyError as e:  # (KeyError(k): its key's tangent, for a read of e.args)
            if ts[1] is not None and e.args and e.args[0] is k:
                current().raised[id(e)] = (e, user_location(), (k,), (ts[1],))
            raise
        return y, _read(y, _item(x, now(x, ts[0]), k))
    fr = FRULES.get(m)  # (a C type's own: NumPy's _array_converter)
    return fr(ts, x, k) if fr is not None else (x[k], None)


_getitem.dual = True  # (an array's element: ``x[k]``, ``dx[k]``; a fresh value is in no shadow)


@frule(ops.unpack)
def _unpack(ts, xs, n):
    if type(xs) is IndexIter or type(xs) is TangentGenerator:  # (a, b = map(...))
        v, d = consume(xs, ts[0])
        return ops.unpack(v, n), None if d is None else tuple(d)
    d = now(xs, ts[0])
    if type(xs) is not tuple and type(xs) is not list and python_iterable(xs):
        xs, d = consume(xs, d)
    y = ops.unpack(xs, n)
    if d is None or type(xs) not in (list, tuple, np.ndarray) and not isinstance(xs, tuple):
        return y, None
    return y, tuple([d[i] for i in range(n)])  # (a list: nested forward mode lifts this)


@frule(ops.unpack_ex)
def _unpack_ex(ts, xs, before, after):
    xs, d = listed(xs, ts[0])
    y = ops.unpack_ex(xs, before, after)
    if d is None:
        return y, None
    d = list(d)
    return y, tuple(d[:before]) + (d[before:len(d) - after],) + tuple(d[len(d) - after:])


# -- iteration: a sequence's iterator knows its position (as in the reverse rules) ---------


@frule(iter)
def _iter(ts, xs, *sentinel):
    d = now(xs, ts[0])
    if not sentinel and d is not None and type(xs) in (list, tuple, np.ndarray):
        return IndexIter(xs), d
    if type(xs) is IndexIter or type(xs) is TangentGenerator:  # (the iterator itself, its tangent too)
        return xs, ts[0]
    if not sentinel and python_iterable(xs):  # (its __iter__ or __getitem__: what it gives)
        method = getattr(type(xs), "__iter__", None)
        return jvp_call(method, None, (d,), xs) if method is not None else python_iterated(xs, d)
    if sentinel and callable(xs):  # (its calls, lazily)
        return jvp_call(called_until, None, ts, xs, *sentinel)
    return iter(xs, *sentinel), None


@frule(ops.send)
def _send(ts, it, value):
    """One step of ``yield from it``: the item and its tangent, or the value returned."""
    if type(it) is TangentGenerator:
        try:
            y = it.send(value, ts[1])
        except StopIteration as e:
            return (e.value, False), (it.returned, None)
        return (y, True), (it.tangents[-1], None)
    if ts[1] is not None:
        raise _unsupported("a value that carries a tangent sent into an iterator")
    d = current().refresh(it.xs, ts[0]) if type(it) is IndexIter else None
    i = getattr(it, "i", 0)
    y, more = ops.send(it, value)
    return (y, more), None if d is None or not more else (d[i], None)


@frule(TangentGenerator.__next__)
def _generator_next(ts, g):
    return _next(ts, g)


@frule(TangentGenerator.send)
def _generator_send(ts, g, value):
    return g.send(value, ts[1]), g.tangents[-1]


@frule(IndexIter)
def _index_iter(ts, xs, *feeds):  # (as ``iter``'s, for a level lifting `_iter`)
    return IndexIter(xs, *feeds), ts[0]


@frule(ops.iterate)
def _iterate(ts, xs, state):
    if type(state) is not IndexIter:  # (a sequence's, the usual case, below)
        if type(state) is TangentGenerator:
            r = ops.iterate(xs, state)
            return r, None if r is None else (state.tangents[-1], state)
        step = own_next(state)
        if step is None:
            return ops.iterate(xs, state), None
        try:  # (an iterator of yours: its __next__)
            y, dy = jvp_call(step, None, (ts[1],), state)
        except StopIteration:
            return None, None
        return (y, state), (dy, ts[1])
    i = state.i
    r = ops.iterate(xs, state)
    d = current().refresh(state.xs, ts[1])  # (the sequence may have been changed since iter)
    if r is None or d is None:
        return r, None
    return r, (d[i], d)


@frule(next, IndexIter.__next__)  # (its method too: iter(it.__next__, sentinel))
def _next(ts, it, *default):
    step = None if type(it) is IndexIter else own_next(it)
    if step is not None:  # (an iterator of yours)
        try:
            return jvp_call(step, None, (ts[0],), it)
        except StopIteration:
            if default:
                return default[0], ts[1]
            raise
    if type(it) is TangentGenerator:
        n = it.i
        y = next(it, *default)
        return y, it.tangents[-1] if it.i > n else ts[1]
    d = current().refresh(it.xs, ts[0]) if type(it) is IndexIter else None
    if d is not None and it.i < len(it.xs):
        i = it.i
        return next(it), d[i]
    y = next(it, *default)
    return y, ts[1] if default and y is default[0] else None


@frule(zip)
def _zip(ts, *xss, strict=False):
    if all([d is None for d in ts]) and not any([sized(xs) for xs in xss]):
        return zip(*xss, strict=strict), None  # lazy as Python's: they may be endless
    if not all([sized(xs) for xs in xss]) and (strict or not fed(xss)):  # (an iterator: a row when it is asked for)
        return jvp_call(_zipped, None, ts, *xss, strict=strict)
    parts = [remaining(xs) for xs in xss]
    y = list(zip(*[seq[at:] if at else seq for seq, at in parts], strict=strict))  # (to the shortest)
    ds = [item_tangents(seq, d, at, len(y)) for (seq, at), d in zip(parts, ts)]
    if all([d is None for d in ds]):  # (one-shot, as Python's: a second pass finds it exhausted)
        return IndexIter(y, _fed(xss)), None
    return IndexIter(y, _fed(xss)), [tuple(row) for row in zip(*[d or [None] * len(y) for d in ds])]


@frule(remaining)
def _remaining(ts, x):  # (an iterator's tangent is its sequence's)
    return remaining(x), None if ts[0] is None else (ts[0], None)


def _zipped(*xss, strict=False):
    """``zip``, lazily, as Python code (forward mode runs it for iterators)."""
    its = [iter(xs) for xs in xss]
    while its:
        row = []
        for j, it in enumerate(its):
            try:
                row.append(next(it))
            except StopIteration:
                if strict:
                    _zip_strictly(its, j)
                return
        yield tuple(row)


def _zip_strictly(its, j):
    """Python's error for ``zip(..., strict=True)`` whose argument ``j`` ended first."""
    which = lambda k: f"argument{'s 1-' + str(k) if k > 1 else ' 1'}"  # noqa: E731
    if j:
        raise ValueError(f"zip() argument {j + 1} is shorter than {which(j)}")
    for k in range(1, len(its)):
        if next(its[k], _END) is not _END:
            raise ValueError(f"zip() argument {k + 1} is longer than {which(k)}")


_END = object()


@frule(enumerate)
def _enumerate(ts, xs, start=0):
    if type(xs) is IndexIter and fed((xs,)):
        seq, at = remaining(xs)
        v, d = seq[at:], item_tangents(seq, ts[0], at, len(seq) - at)
    elif not sized(xs):  # (an iterator: each item taken when it is asked for)
        return jvp_call(_enumerated, None, (ts[0], None), xs, start)
    else:
        v, d = consume(xs, ts[0])
    return IndexIter(list(enumerate(v, start)), _fed((xs,))), None if d is None else [(None, di) for di in d]


def _enumerated(xs, start=0):
    """``enumerate``, lazily, as Python code (forward mode runs it for iterators)."""
    for x in xs:
        yield start, x
        start += 1


@frule(reversed)
def _reversed(ts, xs):
    return IndexIter(list(reversed(xs))), None if ts[0] is None else seq(ts[0], xs)[::-1]


@frule(dict.items)
def _items(ts, d):  # (dict's own, not a subclass's override, which may call this one)
    y = list(dict.items(d))
    return y, None if ts[0] is None else [(None, ts[0].get(k)) for k, _ in y]


@frule(dict.values)
def _values(ts, d):
    y = list(dict.values(d))
    return y, None if ts[0] is None else [ts[0].get(k) for k in dict.keys(d)]


@frule(dict.get)
def _get(ts, d, k, default=None):
    if k in d:
        return d[k], _item(d, ts[0], k)
    return default, ts[2] if len(ts) > 2 else None


def _constructor(kind):
    @frule(kind)
    def fr(ts, *xs):
        if not xs:
            return kind(), None
        v, d = consume(xs[0], ts[0])
        return kind(v), None if d is None else kind(d)
    return fr


_constructor(list)
_constructor(tuple)


@frule(dict)
@_keyword_tangents
def _dict(ts, *args, **kw):
    (*dargs,), dkw = _split(ts, len(args))
    d = dargs[0] if dargs else None
    if args:
        a, d = listed(args[0], d)
        args = (a,) + args[1:]
    y = dict(*args, **kw)
    out = {}
    if d is not None and isinstance(args[0], dict):
        out.update(d)
    elif d is not None:  # pairs
        out.update((k, None if dv is None else dv[1]) for (k, _), dv in zip(args[0], seq(d, args[0])))
    out.update(dkw)
    return y, none_if_zero(out) if out else None


# -- objects ------------------------------------------------------------------------


@frule(getattr)
def _getattr(ts, x, name, *default):
    if default:  # the default when the read raises AttributeError, as Python's (read once)
        try:
            return _getattr(ts[:2], x, name)
        except AttributeError:
            return default[0], ts[2]
    own = getattr(type(x), "__getattribute__", None)
    if type(own) is types.FunctionType:  # yours (a class's, for x an instance; a metaclass's)
        dx = now(x, ts[0])
        try:
            return jvp_call(own, None, (dx, None), x, name)
        except AttributeError:  # (then your __getattr__, as Python's lookup)
            fallback = getattr(type(x), "__getattr__", None)
            if type(fallback) is not types.FunctionType:
                raise
            return jvp_call(fallback, None, (dx, None), x, name)
    return _attribute_read(ts, x, name, getattr)


@frule(object.__getattribute__, type.__getattribute__)
def _object_getattribute(ts, x, name):
    """``object.__getattribute__(x, name)`` (``type.__getattribute__`` for a class): the
    read as `getattr` makes it, past a ``__getattribute__`` of yours (which calls it)."""
    return _attribute_read(ts, x, name, object.__getattribute__ if not isinstance(x, type)
                           else type.__getattribute__)


def _attribute_read(ts, x, name, read):
    """`getattr` without a default and past a ``__getattribute__`` of yours; ``read``
    reads the value itself (as reverse mode's `containers._attribute`)."""
    dx = now(x, ts[0])
    if isinstance(x, BaseException) and id(x) in current().raised:
        return _read_out_of_exception(x, name)
    prop = _class_attribute(x, name)
    if isinstance(prop, property):
        return jvp_call(prop.fget, None, (dx,), x.__self__ if type(x) is super else x)
    if isinstance(prop, functools.cached_property):
        fields = vars(x)
        if name not in fields:
            y, dy = jvp_call(prop.func, None, (dx,), x)
            fields.setdefault(name, y)
            if dy is not None:
                current().writable(x, dx, f"cached property {name!r}")[name] = dy
            return y, dy
    fields = read(x, "__dict__") if hasattr(x, "__dict__") else None
    desc, get = _descriptor_of(x, name, prop, fields if type(fields) is dict else None)
    obj = x.__self__ if type(x) is super else x
    if get is not None and is_data_descriptor(desc):  # (yours: what its __get__ reads)
        return jvp_call(get, None, (None, dx, None), desc, obj, type(obj))
    if read is getattr and delegated(x, name, fields if type(fields) is dict else None):
        return jvp_call(type(x).__getattr__, None, (dx, None), x, name)  # (getattr's: not object's)
    through = get is not None and name not in (fields if type(fields) is dict else ())  # (before __get__ stores it)
    y = read(x, name)  # (no default here: see above)
    if through and type(y) in _VALUES and (dx is not None or id(obj) in current().entries):
        raise read_through_get(name, desc, user_location())  # (as reverse mode: see `_attribute`)
    if name == "__dict__" and y is fields:  # its tangent is the object's, in the shadow
        sh = current()
        t = sh.writable(x, dx, f"'{type(x).__name__}.__dict__'")
        sh.set_tangent(fields, t)
        return y, t
    if dx is None:  # (what it holds may have been changed in place since: the shadow's)
        return y, _read(y, None)
    owner = getattr(y, "__self__", None)
    if owner is x or type(x) is super and owner is x.__self__:
        return y, dx  # a bound method: its tangent is its object's
    if name == "__self__" and isinstance(x, _BOUND):  # (and so the other way)
        return y, _read(y, dx)
    return y, _read(y, _attribute(x, dx, name))


def _read_out_of_exception(e, name):
    """``e.name`` of an exception made of values with a tangent: ``e.args``, the arguments
    it was made of, with theirs; another value that could carry one, refused (none goes
    through ``e``: a field your ``__init__`` stored)."""
    e0, made_at, args, dargs = current().raised[id(e)]
    y = getattr(e, name)
    if e0 is not e:
        return y, None
    if name == "args" and len(y) == len(args) and all(a is b for a, b in zip(y, args)):
        return y, tuple(dargs)
    if name == "value" and isinstance(e, StopIteration) and args and y is args[0]:
        return y, dargs[0]  # (what a generator returned)
    if _holds_values(y):
        raise carried(e, made_at, user_location())
    return y, None


def _holds_values(y) -> bool:
    """Whether ``y`` is a number or an array, or a tuple or list holding one."""
    if type(y) in (tuple, list):
        return any(map(_holds_values, y))
    return type(y) in _VALUES


def _attribute(x, dx, name):
    """The tangent of ``x.name`` read from ``dx``, the tangent of ``x``."""
    if isinstance(dx, dict):
        return dx.get(name)
    if isinstance(x, tuple) and name in getattr(x, "_fields", ()):
        return dx[x._fields.index(name)]
    if name in ("real", "imag", "T", "mT"):
        return np.real(dx) if name == "real" else np.imag(dx) if name == "imag" else \
            dx.T if name == "T" else np.swapaxes(dx, -1, -2)
    return None  # (shape, dtype, size: no tangent)


@frule(setattr)
def _setattr(ts, obj, name, v):
    own = getattr(type(obj), "__setattr__", None)
    if type(own) is types.FunctionType:  # (your __setattr__: what it stores, in forward mode)
        return jvp_call(own, None, (ts[0], None, ts[2]), obj, name, v)
    return _store(ts, obj, name, v, setattr)


def _store(ts, obj, name, v, put):
    """``obj.name = v`` past a ``__setattr__`` of yours, ``put`` storing a plain field."""
    prop = _class_attribute(obj, name)
    if isinstance(prop, property) and prop.fset is not None:
        jvp_call(prop.fset, None, (ts[0], ts[2]), obj, v)
        return None, None
    desc, put_ = descriptor_method(obj, name, "__set__")
    if put_ is not None:  # (yours: what it stores)
        jvp_call(put_, None, (None, ts[0], ts[2]), desc, obj, v)
        return None, None
    write = array_writer(obj, name, v) if isinstance(obj, np.ndarray) else None
    if write is not None:  # (``z.imag = v``: a write of elements, through a view)
        jvp_call(write, None, (ts[0], ts[2]), obj, v)
        return None, None
    put(obj, name, v)
    if ts[0] is not None or ts[2] is not None or id(obj) in current().entries:
        current().writable(obj, ts[0], f"'{type(obj).__name__}.{name} = ...'")[name] = ts[2]
    return None, None


@frule(delattr)
def _delattr(ts, obj, name):
    desc, delete = descriptor_method(obj, name, "__delete__")
    if delete is not None:  # (yours: what it deletes)
        jvp_call(delete, None, (None, ts[0]), desc, obj)
        return None, None
    delattr(obj, name)
    if ts[0] is not None or id(obj) in current().entries:
        current().writable(obj, ts[0], f"'del {type(obj).__name__}.{name}'").pop(name, None)
    return None, None


@frule(tuple.__new__)
def _tuple_new(ts, cls, *xs):
    y = tuple.__new__(cls, *xs)
    if not xs or ts[1] is None:
        return y, None
    return y, tuple(items(ts[1], len(y)))


def _copying(f):
    """A copy's tangent is its original's: tangents may be shared, since the first write
    to either object gives it a tangent of its own (`TangentShadow.writable`); but where
    something has been changed in place, the original's may be its entry in the shadow,
    which the next write changes in place: the copy's is then copied as the value is."""
    @frule(f)
    def fr(ts, x, *memo):
        if f in PYTHON_COPIES and copied_by_python(x, f is copy.deepcopy):  # (as the reverse rule)
            return jvp_call(PYTHON_COPIES[f], None, ts, x, *memo)
        d = ts[0]
        if d is not None and current().entries:
            d = copy.deepcopy(d) if f is copy.deepcopy else copy.copy(d)
        return f(x, *memo), d
    return fr


for _f in (copy.copy, copy.deepcopy, list.copy, dict.copy):
    _copying(_f)


@frule(object.__reduce_ex__)
def _object_reduce_ex(ts, x, protocol):
    f, args = reduce_ex_as_python(x, protocol)
    return jvp_call(f, None, ts[:len(args)], *args)


@frule(object.__getstate__)
def _object_getstate(ts, x):
    return jvp_call(default_state, None, (ts[0], None), x, copyreg._slotnames(type(x)))


# -- writes into containers ----------------------------------------------------------


@frule(operator.setitem)
def _setitem(ts, x, k, v):
    t = type(x)
    if t is not np.ndarray and t is not list and t is not dict:
        m = getattr(t, "__setitem__", None)
        if type(m) is types.FunctionType:
            return jvp_call(m, None, ts, x, k, v)
        x[k] = v
        if ts[2] is not None:
            raise _unsupported(f"'{t.__name__}[...] = value'")
        return None, None
    if t is list and type(k) is slice:  # (``xs[i:j] = iterator``: its items, as a list)
        v, dv = listed(v, ts[2])
        ts = ts[:2] + (dv,)
    dv, sh = ts[2], current()
    if dv is None and ts[0] is None and id(x) not in sh.entries and not (t is np.ndarray and sh.entries):
        x[k] = v
        return None, None
    d = sh.writable(x, ts[0], f"'{t.__name__}[...] = value'")  # (before the list may grow)
    x[k] = v
    if d is None:  # (an integer array)
        return None, None
    if t is np.ndarray:
        d[k] = _zeros_for_none(dv)
    elif t is list and type(k) is slice:
        d[k] = seq(dv, v)
    else:
        d[k] = dv
    return None, None


def _zeros_for_none(dv):
    """The tangent of values written into an array: a list or tuple of them (``a[:2] =
    (x, 5.0)``) with 0 for the items that have none (NumPy would write None as NaN)."""
    if type(dv) is list or type(dv) is tuple:
        return [_zeros_for_none(d) for d in dv]
    return 0.0 if dv is None else dv


@frule(operator.delitem)
def _delitem(ts, x, k):
    del x[k]
    sh = current()
    if ts[0] is not None or id(x) in sh.entries:
        d = sh.writable(x, ts[0], f"'del {type(x).__name__}[...]'")
        if isinstance(d, dict):
            d.pop(k, None)
        else:
            del d[k]
    return None, None


def _list_method(m, change):
    """The forward rule of list method ``m``: ``change(tangents, xs, d, *args)`` does to
    ``d``, the list's tangent, what ``m`` did to the list; it returns the result's tangent."""
    @frule(m)
    def fr(ts, xs, *args):
        if m is list.extend:  # (what it takes, as a list: an iterator's items from where it is)
            ys, dys = listed(args[0], ts[1])
            args, ts = (ys,), (ts[0], dys)
        sh = current()
        if all([t is None for t in ts]) and id(xs) not in sh.entries:  # (a list: nested jvp lifts this)
            return m(xs, *args), None
        if not isinstance(xs, list):
            raise _unsupported(f"'{type(xs).__name__}.{m.__name__}'")
        before = list(xs) if m is list.remove else None
        d = sh.writable(xs, ts[0], f"'list.{m.__name__}'")  # (as the list is before the change)
        y = m(xs, *args)
        return y, change(ts, xs, d, *args, before=before)
    fr.batches = True
    return fr


_list_method(list.append, lambda ts, xs, d, x, before: d.append(ts[1]))
_list_method(list.extend, lambda ts, xs, d, ys, before: d.extend(seq(ts[1], xs[len(d):])))
_list_method(list.insert, lambda ts, xs, d, i, x, before: d.insert(i, ts[2]))
_list_method(list.pop, lambda ts, xs, d, *i, before: d.pop(*i))
_list_method(list.reverse, lambda ts, xs, d, before: d.reverse())
_list_method(list.remove, lambda ts, xs, d, x, before: d.pop(before.index(x)))


def appending(append):
    """The forward rule of ``append(xs, x)``, an append that returns the list: the list
    of a comprehension, or of ``g(*t, x)``'s arguments (`ops.list_append`), or one that
    nesting passes on (`ops.appended`), fresh and its tangent too; both change in place,
    through the op's result (see `_map_add`)."""
    def fr(ts, xs, x):
        xs = append(xs, x)
        d = ts[0]
        if d is None and ts[1] is None:
            return xs, None
        return xs, append([None] * (len(xs) - 1) if d is None else d, ts[1])
    return fr


_comprehension_append = frule(ops.list_append)(appending(ops.list_append))


@frule(ops.list_extend)
def _comprehension_extend(ts, xs, ys):
    n = len(xs)
    v, dv = consume(ys, ts[1])
    xs = ops.list_extend(xs, v)  # (its result: reverse mode follows it through that, lifting this)
    if ts[0] is None and dv is None:
        return xs, None
    d = ts[0] if ts[0] is not None else [None] * n
    d.extend(dv or [None] * len(v))
    return xs, d


@frule(ops.map_add)
def _map_add(ts, m, k, v):
    m = ops.map_add(m, k, v)  # (its result, as for list_extend: reverse mode follows that)
    if ts[0] is None and ts[2] is None:
        return m, None
    return m, ops.map_add(ts[0] if ts[0] is not None else {}, k, ts[2])


def _merging(merge):
    """``{**a, **b}`` and ``f(**a, **b)``: the dict built is fresh, its tangent too."""
    @frule(merge)
    def fr(ts, d, m):
        d = merge(d, m)  # (its result: see `_map_add`)
        if ts[0] is None and ts[1] is None:
            return d, None
        return d, ops.dict_update(ts[0] if ts[0] is not None else {}, ts[1] or {})
    fr.batches = True
    return fr


_merging(ops.dict_update)
_merging(ops.dict_merge)


@frule(dict.update)
@_keyword_tangents
def _update(ts, d, *other, **kw):
    (dd, *dother), dkw = _split(ts, 1 + len(other))
    if other:
        o, do = listed(other[0], dother[0])
        other, dother = (o,), [do]
    sh = current()
    if dd is None and all([t is None for t in dother]) and not any(dkw.values()) and id(d) not in sh.entries:
        d.update(*other, **kw)
        return None, None
    new = dict(*other, **kw)
    t = sh.writable(d, dd, "'dict.update'")
    d.update(new)
    src = dict(_dict((dother[0],), other[0])[1] or {}) if other and dother[0] is not None else {}
    src.update(dkw)
    for k in new:
        t[k] = src.get(k)
    return None, None


@frule(ops.apply)
def _apply(ts, f, args, kwargs=None):
    """``f(*args, **kwargs)``: the call with the tangents of the items."""
    if type(args) is not tuple:  # (f(*map(...)))
        args, d = consume(args, ts[1])
        args, ts = tuple(args), (ts[0], d) + tuple(ts[2:])
    dargs = tuple(seq(ts[1], args)) if ts[1] is not None else (None,) * len(args)
    dkw = ts[2] if len(ts) > 2 and ts[2] is not None else None
    return jvp_call_kw(f, ts[0], dargs, dkw, *args, **(kwargs or {}))


@frule(functools.partial)
@_keyword_tangents
def _partial(ts, f, *args, **kw):
    (df, *dargs), dkw = _split(ts, 1 + len(args))
    y = functools.partial(f, *args, **kw)
    if type(f) is functools.partial and y.func is f.func:  # (flattened: f's parts come first)
        inner = df if isinstance(df, dict) else {}
        df = inner.get("func")
        dargs = list(inner.get("args") or (None,) * len(f.args)) + dargs
        dkw = {**(inner.get("keywords") or {}), **dkw}
    return y, none_if_zero({"func": df, "args": none_if_zero(tuple(dargs)), "keywords": none_if_zero(dkw)}) \
        if df is not None or any([d is not None for d in dargs]) or any(dkw.values()) else None


@frule(dict.pop)
def _dict_pop(ts, d, k, *default):
    sh = current()
    if k not in d or ts[0] is None and id(d) not in sh.entries:
        return d.pop(k, *default), (ts[2] if k not in d and default else None)
    y = d.pop(k)
    return y, sh.writable(d, ts[0], "'dict.pop'").pop(k, None)


@frule(dict.setdefault)
def _setdefault(ts, d, k, default=None):
    if k in d:
        return d[k], _item(d, ts[0], k)
    dv = ts[2] if len(ts) > 2 else None
    _setitem((ts[0], None, dv), d, k, default)
    return default, dv


# -- cells and functions -------------------------------------------------------------


@frule(ops.make_cell)
def _make_cell(ts, *value):
    cell = ops.make_cell(*value)
    if value and ts[0] is not None:
        current().cells[id(cell)] = (cell, ts[0])
    return cell, None


@frule(ops.cell_get)
def _cell_get(ts, cell, name="?", *own):
    y = ops.cell_get(cell, name, *own)
    e = current().cells.get(id(cell))
    return y, _read(y, e[1] if e is not None and e[0] is cell else None)


@frule(ops.cell_set)
def _cell_set(ts, cell, value):
    ops.cell_set(cell, value)
    cells = current().cells
    if ts[1] is not None:
        cells[id(cell)] = (cell, ts[1])
    else:
        cells.pop(id(cell), None)
    return None, None


@frule(ops.closure_cell)
def _closure_cell(ts, fn, i):
    # a cell's contents keep their tangent in the shadow (`_cell_get`), not in the
    # function's: a tangent the function carries (its fields') does not reach the cell
    return ops.closure_cell(fn, i), None


@frule(ops.make_function)
def _make_function(ts, code, closure=None, defaults=None, kwdefaults=None):
    fn = ops.function_in(running_frame().f_globals, code, closure, defaults, kwdefaults)
    dd, dk = (ts + (None,) * 4)[2:4]
    if dd is not None or dk is not None:
        current().defaults[id(fn)] = (fn, dd, dk)
    return fn, None


rule(_make_function)(make_function_frule_in_reverse)  # (reverse over forward: runtime/nesting.py)


def _unsupported(what, fix="; do the change on a list, dict or array, or give the method a "
                            "forward rule (bytegrad.frule)"):
    file, line = user_location()
    return ForwardModeError(f"{file}:{line}: forward mode (jvp) does not follow {what} with a "
                            f"nonzero tangent yet{fix}")


# -- more changes in place, and the higher-order builtins ---------------------------------


@frule(dict.clear, list.clear)
def _clear(ts, x):
    sh = current()
    if ts[0] is not None or id(x) in sh.entries:
        sh.writable(x, ts[0], f"'{type(x).__name__}.clear'").clear()
    x.clear()
    return None, None


@frule(dict.popitem)
def _popitem(ts, d):
    sh = current()
    if ts[0] is None and id(d) not in sh.entries:
        return d.popitem(), None
    t = sh.writable(d, ts[0], "'dict.popitem'")
    k, v = d.popitem()
    return (k, v), none_if_zero((None, t.pop(k, None)))


def _order(xs, key, reverse, ds=None):
    """The positions of ``xs`` in sorted order; ``key`` runs in forward mode (what it
    stores into objects carries tangents; the keys themselves order, with none)."""
    keys = xs if key is None else [jvp_call(key, None, (d,), x)[0] for x, d in zip(xs, ds or [None] * len(xs))]
    return sorted(range(len(xs)), key=keys.__getitem__, reverse=reverse)


@frule(list.sort)
def _sort(ts, xs, *, key=None, reverse=False):
    sh = current()
    if ts[0] is None and id(xs) not in sh.entries:
        return xs.sort(key=key, reverse=reverse), None
    t = sh.writable(xs, ts[0], "'list.sort'")
    order = _order(list(xs), key, reverse)
    xs[:] = [xs[i] for i in order]  # (the order sort makes: stable, as Python's)
    t[:] = [t[i] for i in order]
    return None, None


@frule(sorted)
def _sorted(ts, xs, *, key=None, reverse=False):
    v, d = consume(xs, ts[0])
    order = _order(v, key, reverse, d)
    return [v[i] for i in order], None if d is None else [d[i] for i in order]


class _Repeated:
    """The sequence ``itertools.repeat(value, times)`` yields (endless without ``times``),
    under an `IndexIter`, so that its items' tangents are read as any sequence's."""

    __slots__ = ("value", "n")

    def __init__(self, value, n):
        self.value, self.n = value, n

    def __len__(self):
        return sys.maxsize if self.n is None else max(self.n, 0)

    def __getitem__(self, i):
        return self.value


@frule(itertools.repeat, override=True)  # (over as_python's, written for forward mode)
def _repeat(ts, obj, *times):
    if ts[0] is None:
        return itertools.repeat(obj, *times), None
    n = times[0] if times else None
    return IndexIter(_Repeated(obj, n)), _Repeated(ts[0], n)


@frule(super)
def _super(ts, *args):
    return super(*args), ts[1] if len(ts) > 1 else None  # (an attribute read through it is self's)


@frule(object.__setattr__)
def _object_setattr(ts, obj, name, v):
    return _store(ts, obj, name, v, object.__setattr__)


def _set_maker(make):
    @frule(make)
    def fr(ts, *xs):
        if any([t is not None for t in ts]):
            raise _unsupported(f"a set of differentiable values ({make.__name__})", "; use a list or tuple")
        return make(*xs), None
    return fr


for _make in (ops.build_set, set, frozenset):
    _set_maker(_make)


@frule(ops.set_add)
def _set_add(ts, s, x):
    """A set comprehension's item: refused with a tangent, as a set display's."""
    if ts[1] is not None:
        raise _unsupported("a set of differentiable values (a set comprehension)", "; use a list or tuple")
    return ops.set_add(s, x), None


# (what they do with a tangent is right for a batch of them: runtime/batching.py)
batches(_build_tuple, _build_list, _list_to_tuple, _build_dict, _identity, _getitem, _unpack, _iter,
        _index_iter, _iterate, _next, _reversed, _items, _values, _get, _getattr, _object_getattribute, FRULES[list], FRULES[tuple],
        _setattr, _delattr, _delitem, _comprehension_append, _comprehension_extend, _map_add,
        _update, _apply, _partial, _dict_pop, _setdefault, _make_cell, _cell_get, _cell_set, _closure_cell,
        _make_function)
batches(_setitem, arrays=True)
