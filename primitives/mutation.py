"""Rules of the operations that change an object in place.

Each marks its object as mutated in the shadow, saves what it overwrites, and
returns an `Effect` pullback, which runs even without an output gradient: it
takes the gradient of what was written out of the object's shadow entry (where
every later read of the object put its gradient), hands it to the written
value, and restores the overwritten contents, so the pullbacks that run after
it see the values they saw going forward.  A rule whose result is the mutated
object itself (``a += b``) first adds the result's gradient to the entry.
"""
from __future__ import annotations

import operator as op
import types

from ._frozen import np

from ..runtime.algebra import Buffer, accum
from ..runtime.errors import where
from ..runtime.forward import forward, run_plain
from ..runtime.mutation import Effect, overwrite, rewrite, watch_kind
from ..runtime.rules import changes_arguments, effectful, nograd, rule
from ..runtime.shadow import current
from ._named import by_name
from ._util import descriptor_method, unbroadcast
from .containers import items_like

_MISSING = object()


def _list_entry(sh, xs):
    """The element gradients ``xs`` holds in the shadow, as a list to edit in place."""
    return sh.entry(xs, lambda: Buffer([None] * len(xs), list)).data


def _index(n, i):
    """``i`` as a position in a sequence of length ``n`` (for ``insert``: clamped)."""
    return min(max(i + n if i < 0 else i, 0), n)


# -- arrays --------------------------------------------------------------------

def _array_write(a, k, v):
    """``a[k] = v``."""
    sh = current()
    old = np.array(a[k])
    a[k] = v
    sh.mark(a)

    losers = _overwritten(k, a.shape)

    def back(_):
        g = sh.take_at(a, k)
        a[k] = old
        if g is not None and losers is not None:
            g[losers] = 0
        return None, None, None, None if g is None else unbroadcast(v, g)
    return None, Effect(back)


def _overwritten(k, shape):
    """For a write at integer arrays ``k`` with repeats, the positions whose value a
    later repeat overwrites (NumPy keeps the last); None when no position repeats."""
    parts = k if isinstance(k, tuple) else (k,)
    arrays = [np.asarray(i) for i in parts if isinstance(i, (list, np.ndarray))]
    if not arrays or any(a.dtype.kind not in "iu" for a in arrays):
        return None
    arrays = np.broadcast_arrays(*arrays)
    if len(arrays) == len(parts):  # one array per axis: -1 and n - 1 are the same place
        arrays = [a % n for a, n in zip(arrays, shape)]
    keys = np.ravel_multi_index([a.ravel() % (a.max() + 1) for a in arrays],
                                [a.max() + 1 for a in arrays])
    _, last = np.unique(keys[::-1], return_index=True)
    if len(last) == len(keys):
        return None
    if len(arrays) != len(parts) or arrays[0].ndim != 1:
        raise NotImplementedError("a write at repeated positions is differentiable only for "
                                  "one-dimensional integer index arrays; write the positions once")
    keep = np.zeros(len(keys), bool)
    keep[len(keys) - 1 - last] = True
    return ~keep


def in_place(r, symbol):
    """The rule of the in-place operator ``symbol=`` whose functional rule is ``r``:
    arrays and lists change in place; anything else gets ``r``'s result, as in Python."""
    def rule_(a, b):
        if isinstance(a, np.ndarray):
            return rewrite(a, r, b)
        if type(a) is list and symbol == "+":
            return _list_extend(a, b, returns=True)
        if type(a) is list:
            raise NotImplementedError(f"in-place `{symbol}=` on a list is not differentiable; "
                                      f"write `xs = xs {symbol} n`")
        own = getattr(type(a), name, None)
        if type(own) is types.FunctionType:  # a class's own in-place operator
            return forward(own, a, b)
        return r(a, b)
    name = {"+": "__iadd__", "-": "__isub__", "*": "__imul__", "/": "__itruediv__", "%": "__imod__",
            "**": "__ipow__", "@": "__imatmul__"}[symbol]
    return rule_


@rule(np.copyto)
def _copyto(dst, src, casting="same_kind", where=True):
    sh, undo = overwrite(dst, lambda: np.copyto(dst, src, casting=casting, where=where))
    mask = np.broadcast_to(where, dst.shape)

    def back(_):
        g = undo()
        if g is None:
            return None, None, None, None, None
        sh.add(dst, np.where(mask, 0, g))  # unwritten elements keep their gradient
        return None, None, unbroadcast(src, np.where(mask, g, 0)), None, None
    return None, Effect(back)


@rule(np.ufunc.at, note="np.add.at and np.subtract.at")
def _ufunc_at(uf, a, idx, b=None):
    """``np.add.at(a, idx, b)``: unbuffered, so repeated indices add up; its pullback
    gathers the gradient of ``a`` at ``idx`` for ``b``, and ``a``'s old contents keep it."""
    if uf not in (np.add, np.subtract) or b is None:
        if a.dtype.kind in "fc":
            raise NotImplementedError(f"np.{uf.__name__}.at is not differentiable; only "
                                      f"np.add.at and np.subtract.at are")
        uf.at(a, idx, *(() if b is None else (b,)))
        return None, lambda d: (None,) * 5
    sh, undo = overwrite(a, lambda: uf.at(a, idx, b))

    def back(_):
        g = undo()
        if g is None:
            return (None,) * 5
        sh.add(a, g)
        db = g[idx] if uf is np.add else -g[idx]
        return None, None, None, None, unbroadcast(b, db)
    return None, Effect(back)


@rule(np.ndarray.fill)
def _fill(a, v):
    _, undo = overwrite(a, lambda: a.fill(v))

    def back(_):
        g = undo()
        return None, None, None if g is None else unbroadcast(v, g)
    return None, Effect(back)


def _flat_write(a, flat, v, name, write, spread=None):
    """``write()`` stores the items of ``v`` (flattened, repeated as needed) at the flat
    positions ``flat`` of array ``a``, as np.put, np.place and np.fill_diagonal do.  The
    pullback takes the gradient of the written positions out of the shadow for ``v``
    (of a repeated position, the last write's: NumPy keeps it), restores the old values,
    and returns ``{name: gradient}`` for `by_name`."""
    sh = current()
    at = a[None] if a.ndim == 0 else a  # a view with an axis to index
    k = np.unravel_index(flat, at.shape)
    old = at[k]
    write()
    sh.mark(a)
    losers = _overwritten(flat, (a.size,)) if flat.size > 1 else None

    def back(_):
        g = sh.take_at(at, k)
        at[k] = old
        if g is None:
            return {}
        if losers is not None:
            g[losers] = 0
        return {name: lambda: _cycled(v, g) if spread is None else spread(g)}
    return Effect(back)


def _cycled(v, g):
    """The gradient of ``v`` whose flattened items, repeated, received ``g``."""
    n = np.size(v)
    if n == 0:
        return None
    whole = np.zeros(max(-(-g.size // n), 1) * n, g.dtype)
    whole[:g.size] = g
    return unbroadcast(v, whole.reshape(-1, n).sum(axis=0).reshape(np.shape(v)))


def _needs_array(a, name):
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: the array to change must be a numpy.ndarray, not {type(a).__name__}")


_PUT_MODES = {"raise": "raise", "wrap": "wrap", "clip": "clip", 2: "raise", 1: "wrap", 0: "clip"}


def _put_positions(n, ind, mode):
    """The flat positions np.put writes in an array of ``n`` elements, in the order of
    ``ind``: negative ones count from the end (mode 'raise'), or wrap, or are clipped."""
    try:
        how = _PUT_MODES.get(mode)
    except TypeError:  # an unhashable mode
        how = None
    if how is None:
        raise ValueError(f"np.put: mode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    flat = np.asarray(ind).astype(np.intp).reshape(-1)
    if not flat.size:
        return flat
    if n == 0:
        raise IndexError("np.put: cannot write into an empty array")
    if how == "clip":
        return np.clip(flat, 0, n - 1)
    if how == "raise":
        bad = flat[(flat < -n) | (flat >= n)]
        if bad.size:
            raise IndexError(f"index {bad[0]} is out of bounds for axis 0 with size {n}")
    return flat % n


_PUT = "modes raise, wrap, clip; v repeated as needed; at a repeated index the last write wins, as in NumPy"


def _put_into(a, ind, v, mode, name):
    _needs_array(a, "np.put")
    flat = _put_positions(a.size, ind, mode)
    return None, _flat_write(a, flat, v, name, lambda: np.put(a, ind, v, mode=mode))


@rule(np.put, note=_PUT)
@by_name("np.put")
def _put(a, ind, v, mode="raise"):
    return _put_into(a, ind, v, mode, "v")


@by_name("ndarray.put")
def _ndarray_put(self, indices, values, mode="raise"):  # the method's own parameter names
    return _put_into(self, indices, values, mode, "values")


# NumPy takes a.put(indices=, values=) though the method's signature says they are
# positional-only: keywords are bound to the rule's own parameters
rule(np.ndarray.put, note=_PUT, like=_ndarray_put)(_ndarray_put)


def _masked(a, mask, name):
    """The flat positions of array ``a`` where ``mask`` (of ``a``'s size) holds."""
    _needs_array(a, name)
    mask_ = np.asarray(mask, dtype=bool)
    if mask_.size != a.size:
        raise ValueError(f"{name}: mask and data must be the same size")
    return np.flatnonzero(mask_)


@rule(np.place, note="vals repeated as needed, as in NumPy")
@by_name("np.place")
def _place(arr, mask, vals):
    return None, _flat_write(arr, _masked(arr, mask, "np.place"), vals, "vals",
                             lambda: np.place(arr, mask, vals))


@rule(np.putmask, note="values repeated as needed, as in NumPy: a.flat[n] = values.flat[n % values.size]")
@by_name("np.putmask")
def _putmask(a, mask, values):
    flat = _masked(a, mask, "np.putmask")

    def spread(g):  # position n of a took item n % size of values
        n = np.size(values)
        if n == 0:
            return None
        d = np.zeros(n, g.dtype)
        np.add.at(d, flat % n, g.ravel())
        return unbroadcast(values, d.reshape(np.shape(values)))
    return None, _flat_write(a, flat, values, "values", lambda: np.putmask(a, mask, values), spread)


def _diagonal_positions(a, wrap):
    """The flat positions np.fill_diagonal writes (NumPy's own computation)."""
    if a.ndim < 2:
        raise ValueError("np.fill_diagonal: array must be at least 2-d")
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = a.size if wrap else min(a.shape[1] * a.shape[1], a.size)
    else:
        if len(set(a.shape)) != 1:
            raise ValueError("np.fill_diagonal: all dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
        end = a.size
    return np.arange(0, end, step)


@rule(np.fill_diagonal, note="val repeated as needed; wrap=False and wrap=True")
@by_name("np.fill_diagonal")
def _fill_diagonal(a, val, wrap=False):
    _needs_array(a, "np.fill_diagonal")
    return None, _flat_write(a, _diagonal_positions(a, wrap), val, "val",
                             lambda: np.fill_diagonal(a, val, wrap))


# -- lists ---------------------------------------------------------------------

def _list_write(xs, k, v):
    """``xs[k] = v`` for an index or a slice."""
    sh = current()
    if not isinstance(k, slice):
        i = k + len(xs) if k < 0 else k
        old = xs[i]
        xs[i] = v
        sh.mark(xs)

        def back(_):
            buf = _list_entry(sh, xs)
            g, buf[i] = buf[i], None
            xs[i] = old
            return None, None, None, g
        return None, Effect(back)
    old, new = xs[k], list(v)
    start, stop, step = k.indices(len(xs))
    xs[k] = new
    sh.mark(xs)
    span = slice(start, start + len(new)) if step == 1 else k

    def back(_):
        buf = _list_entry(sh, xs)
        g = buf[span]
        buf[span] = [None] * len(old)
        xs[span] = old
        return None, None, None, _like(v, g)
    return None, Effect(back)


def _like(v, g):
    """The gradient of the iterable ``v`` from its items' gradients ``g``: containers'
    form of it, or None for any other iterable (an iterator consumed here)."""
    if all(d is None for d in g) or not isinstance(v, (list, tuple, np.ndarray)):
        return None
    return items_like(v, g)


@rule(list.append)
def _append(xs, x):
    sh = current()
    xs.append(x)
    sh.mark(xs)

    def back(_):
        g = _list_entry(sh, xs).pop()
        xs.pop()
        return None, None, g
    return None, Effect(back)


def _list_extend(xs, ys, returns=False):
    sh = current()
    n, new = len(xs), list(ys)
    xs.extend(new)
    sh.mark(xs)

    def back(dy):
        sh.add(xs, dy)
        buf = _list_entry(sh, xs)
        g = buf[n:]
        del buf[n:], xs[n:]
        return None, None, _like(ys, g)
    return (xs if returns else None), Effect(back)


rule(list.extend)(_list_extend)


@rule(list.insert)
def _insert(xs, i, x):
    sh = current()
    at = _index(len(xs), i)
    xs.insert(at, x)
    sh.mark(xs)

    def back(_):
        g = _list_entry(sh, xs).pop(at)
        del xs[at]
        return None, None, None, g
    return None, Effect(back)


def _remove_at(xs, at):
    """Remove item ``at``; the pullback puts its gradient (the result's) back in place."""
    sh = current()
    y = xs.pop(at)
    sh.mark(xs)

    def back(dy):
        _list_entry(sh, xs).insert(at, dy)
        xs.insert(at, y)
        return None, None, None
    return y, Effect(back)


@rule(list.pop)
def _pop(xs, i=-1):
    at = i + len(xs) if i < 0 else i
    if not 0 <= at < len(xs):
        raise IndexError("pop from empty list" if not xs else "pop index out of range")
    return _remove_at(xs, at)


@rule(list.remove)
def _remove(xs, x):
    _, back = _remove_at(xs, xs.index(x))
    return None, Effect(lambda dy: back(None))


def _reorder(xs, order):
    """Put ``xs`` in the order ``order`` (a permutation of its positions)."""
    sh = current()
    old = list(xs)
    xs[:] = [old[p] for p in order]
    sh.mark(xs)

    def back(_):
        buf = _list_entry(sh, xs)
        moved = list(buf)
        for j, p in enumerate(order):
            buf[p] = moved[j]
        xs[:] = old
        return (None,) * 4
    return None, Effect(back)


@rule(list.reverse)
def _reverse(xs):
    return _reorder(xs, range(len(xs) - 1, -1, -1))


@rule(list.sort, keywords=("key",))  # (a key only orders: it gets no gradient)
def _sort(xs, *, key=None, reverse=False):
    k = (lambda i: xs[i]) if key is None else (lambda i: key(xs[i]))
    return _reorder(xs, sorted(range(len(xs)), key=k, reverse=reverse))


def _replace_all(obj, snapshot, refill):
    """A change of ``obj`` whose reverse is ``refill(obj, snapshot)``; the gradient of
    what the change removed is zero, as nothing can read it afterwards."""
    sh = current()
    sh.mark(obj)

    def back(_):
        sh.take(obj)
        refill(obj, snapshot)
        return (None,) * 4
    return Effect(back)


@rule(list.clear)
def _list_clear(xs):
    back = _replace_all(xs, list(xs), lambda o, s: o.extend(s))
    xs.clear()
    return None, back


# -- dicts -----------------------------------------------------------------------

def _refill(d, items):
    d.clear()
    d.update(items)


def _dict_write(d, k, v):
    sh = current()
    old = d.get(k, _MISSING)
    d[k] = v
    sh.mark(d)

    def back(_):
        g = sh.entry(d, dict).pop(k, None)
        if old is _MISSING:
            del d[k]  # it was added last: the order is as it was
        else:
            d[k] = old
        return None, None, None, g
    return None, Effect(back)


@rule(dict.update)
def _update(d, *other, **kw):
    sh = current()
    items, new = dict(d), dict(*other, **kw)
    d.update(new)
    sh.mark(d)

    def back(_):
        e = sh.entry(d, dict)
        g = {k: e.pop(k, None) for k in new}
        _refill(d, items)
        src = other[0] if other else None
        dother = (_update_source_gradient(src, g),) if other else ()
        return (None, None) + dother + (({k: g[k] for k in kw},) if kw else ())
    return None, Effect(back)


def _update_source_gradient(src, g):
    """The gradient of what ``d.update(src)`` read, given ``g``, its keys' gradients: a
    dict's by key; a list or tuple of pairs', each ``(None, gradient)`` where its pair
    was the last for its key (the value kept)."""
    if isinstance(src, dict):
        return {k: g[k] for k in src}
    if isinstance(src, (list, tuple)):
        last = {k: i for i, (k, _) in enumerate(src)}
        return type(src)((None, g[k] if last[k] == i else None) for i, (k, _) in enumerate(src))
    if any(v is not None for v in g.values()):
        raise NotImplementedError(f"{where()}: dict.update of a {type(src).__name__}: its values' gradients "
                                  f"cannot be handed back; pass a dict or a list of pairs")
    return None


@rule(dict.setdefault)
def _setdefault(d, k, default=None):
    if k in d:  # a read
        return d[k], lambda dy: (None, {k: dy}, None, None)
    sh = current()
    d[k] = default
    sh.mark(d)

    def back(dy):
        g = accum(sh.entry(d, dict).pop(k, None), dy)
        del d[k]
        return None, None, None, g
    return default, Effect(back)


@rule(dict.pop)
def _dict_pop(d, k, *default):
    if k not in d:
        if not default:
            raise KeyError(k)
        return default[0], lambda dy: (None, None, None, dy)
    sh = current()
    items = dict(d)
    y = d.pop(k)
    sh.mark(d)

    def back(dy):
        e = sh.entry(d, dict)
        e[k] = accum(e.get(k), dy)
        _refill(d, items)
        return (None,) * (3 + len(default))
    return y, Effect(back)


@rule(dict.popitem)
def _popitem(d):
    """``d.popitem()``: the value's gradient goes to ``d``'s entry at its key, as for ``pop``."""
    sh = current()
    items = dict(d)
    k, v = d.popitem()
    sh.mark(d)

    def back(dy):
        e = sh.entry(d, dict)
        e[k] = accum(e.get(k), None if dy is None else dy[1])
        _refill(d, items)
        return None, None
    return (k, v), Effect(back)


@rule(dict.clear)
def _dict_clear(d):
    back = _replace_all(d, dict(d), _refill)
    d.clear()
    return None, back


# -- the generic operations ------------------------------------------------------

@rule(op.setitem)
def _setitem(obj, k, v):
    if isinstance(obj, np.ndarray):
        return _array_write(obj, k, v)
    t = type(obj)
    if t is list:
        return _list_write(obj, k, v)
    if t is dict:
        return _dict_write(obj, k, v)
    f = getattr(t, "__setitem__", None)
    if type(f) is types.FunctionType:
        return forward(f, obj, k, v)
    return run_plain(op.setitem, (obj, k, v), {})


@rule(op.delitem)
def _delitem(obj, k):
    t = type(obj)
    if t is list:
        return None, _list_delete(obj, k)
    if t is dict:
        sh = current()
        items = dict(obj)
        del obj[k]
        sh.mark(obj)
        return None, Effect(lambda _: (_refill(obj, items), (None,) * 3)[1])
    f = getattr(t, "__delitem__", None)
    if type(f) is types.FunctionType:
        return forward(f, obj, k)
    return run_plain(op.delitem, (obj, k), {})


def _list_delete(xs, k):
    """``del xs[k]``: the survivors keep their gradients, moved back to their places."""
    sh = current()
    old = list(xs)
    gone = set(range(len(xs))[k]) if isinstance(k, slice) else {k + len(xs) if k < 0 else k}
    del xs[k]
    sh.mark(xs)

    def back(_):
        buf = _list_entry(sh, xs)
        kept = iter(list(buf))
        buf[:] = [None if p in gone else next(kept) for p in range(len(old))]
        xs[:] = old
        return None, None, None
    return Effect(back)


def _fields(obj):
    return getattr(obj, "__dict__", None)


@rule(object.__setattr__)
def _store_attr(obj, name, v):
    """``obj.name = v``, bypassing a class's own ``__setattr__`` (as frozen dataclasses do):
    through a property's setter or a descriptor's ``__set__`` of yours, differentiated."""
    prop = getattr(type(obj), name, None)
    if isinstance(prop, property) and prop.fset is not None:
        y, pb = forward(prop.fset, obj, v)
        return y, Effect(lambda dy: (None, (d := pb(dy))[1], None, d[2]))
    desc, put = descriptor_method(obj, name, "__set__")
    if put is not None:  # (what it stores)
        y, pb = forward(put, desc, obj, v)
        return y, Effect(lambda dy: (None, (d := pb(dy))[2], None, d[3]))
    return _store_field(obj, name, v)


def _store_field(obj, name, v):
    sh = current()
    fields = _fields(obj)
    old = fields.get(name, _MISSING) if fields is not None else getattr(obj, name, _MISSING)
    object.__setattr__(obj, name, v)
    if type(v) in _INERT and (type(old) in _INERT or old is _MISSING):
        # a counter (``self.nfev += 1``): no gradient reaches either value, and pullbacks
        # hold the ints they read, so nothing needs the old one back
        return None, nograd(3)
    sh.mark(obj)
    watch_kind(type(obj))

    def back(_):
        e = sh.grads.get(id(obj))
        g = e.pop(name, None) if isinstance(e, dict) else None
        if old is _MISSING:
            object.__delattr__(obj, name)
        else:
            object.__setattr__(obj, name, old)
        return None, None, None, g
    return None, Effect(back)


_INERT = frozenset({int, bool, str, type(None)})


@rule(setattr)
def _setattr(obj, name, v):
    t = type(obj)
    if isinstance(obj, type):  # a class attribute: configuration, not a differentiable field
        return run_plain(setattr, (obj, name, v), {})
    custom = t.__setattr__
    if type(custom) is types.FunctionType:  # (yours, before any property: it decides)
        return forward(custom, obj, name, v)
    if isinstance(obj, np.ndarray):
        return _array_attribute(obj, name, v)
    return _store_attr(obj, name, v)


def _array_attribute(a, name, v):
    """``a.real = v``, ``a.imag = v``, ``a.flat = v``: writes of ``a``'s elements, run as
    the writes through views they are."""
    write = array_writer(a, name, v)
    if write is None:
        return run_plain(setattr, (a, name, v), {})  # (NumPy's own error)
    _, pb = forward(write, a, v)
    return None, Effect(lambda dy: (None, (d := pb(dy))[1], None, d[2]))


def array_writer(a, name, v):
    """The Python function ``write(a, v)`` that does ``a.<name> = v`` for array ``a`` as a
    write of its elements, or None where NumPy refuses the store; a store that is not
    differentiable (``a.shape = s``) is refused."""
    if name in ("shape", "strides", "dtype", "data"):
        raise NotImplementedError(
            f"{where()}: assigning an array's .{name} changes it in place in a way that is not "
            f"differentiable; make a new array instead (a = a.reshape(...), a.view(...))")
    if name == "flat" and np.size(v) not in (1, a.size):
        raise NotImplementedError(
            f"{where()}: a.flat = v with v of another size than a repeats v, which is not differentiable; "
            "give v as many elements as a")
    return None if name == "imag" and a.dtype.kind != "c" else _ARRAY_WRITES.get(name)


def _write_real(a, v):
    a.real[...] = v


def _write_imag(a, v):
    a.imag[...] = v


def _write_flat(a, v):
    a[...] = v if np.size(v) == 1 else np.reshape(v, a.shape)


_ARRAY_WRITES = {"real": _write_real, "imag": _write_imag, "flat": _write_flat}


@rule(delattr)
def _delattr(obj, name):
    desc, delete = descriptor_method(obj, name, "__delete__")
    if delete is not None:  # (what it deletes)
        y, pb = forward(delete, desc, obj)
        return y, Effect(lambda dy: (None, pb(dy)[2], None))
    sh = current()
    old = getattr(obj, name)
    order = list(getattr(obj, "__dict__", ()))
    delattr(obj, name)
    sh.mark(obj)

    def back(_):
        e = sh.grads.get(id(obj))
        if isinstance(e, dict):
            e.pop(name, None)
        setattr(obj, name, old)
        _in_order(obj, order)
        return None, None, None
    return None, Effect(back)


def _in_order(obj, order):
    """Put the fields of ``obj`` back in ``order``, as they were before a field was deleted
    (set again, it would come last: its gradient too, which mirrors the fields)."""
    d = getattr(obj, "__dict__", None)
    if type(d) is dict and list(d) != order:
        now = dict(d)
        d.clear()
        d.update({k: now[k] for k in order if k in now})
        d.update(now)


effectful(op.setitem, op.delitem, setattr, delattr, object.__setattr__, np.copyto, np.ufunc.at,
          np.put, np.place, np.putmask, np.fill_diagonal)
# (called unbound, ``list.append(xs, x)``: a method call is code known only at run time)
changes_arguments(np.ndarray.fill, np.ndarray.put, list.append, list.extend, list.insert, list.pop,
                  list.remove, list.reverse, list.sort, list.clear, dict.__init__, dict.update,
                  dict.setdefault, dict.pop, dict.popitem, dict.clear)
