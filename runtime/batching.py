"""Batched tangents: one forward pass pushes many directions (`jacfwd`'s columns).

A `Batch` holds the tangents of one value along ``k`` directions, stacked on a leading
axis: shape ``(k,)`` for a number, ``(k,) + a.shape`` for an array ``a``.  Where the
tangent shadow is batched (``TangentShadow.batch``), `jvp.jvp_call` calls each forward
rule through `call`:

* a rule marked `batches` is called with the Batches themselves.  Its code does
  elementwise arithmetic on tangents (``d * cos(x)``, ``da + db``) and reads their
  items (``d[i]``), which a Batch defines for the whole batch at once (NumPy broadcasts
  the leading axis; a Batch inserts the axes a broadcast adds to the value);
* a rule of a function that computes and changes nothing else (NumPy's, ``math``'s,
  ``operator``'s pure operators: `_pure`) is called once per direction
  (`per_direction`), so it never meets a Batch;
* any other rule that receives a Batch abandons the batch (`Abandon`), as do changes of
  arrays their rules do not follow (`_changes`), a write
  through a view of an array not written before, and a generator: the caller then
  computes the directions one at a time, as before.  A list's, dict's or object's
  change is followed (their rules are marked; the shadow keeps their tangents as
  containers of Batches), and so is a write into an array: the shadow keeps a Batch
  of its tangents, and a view's are the same view of each direction's (`view_of`).

`hessian` runs tangent code with Batches of tangents under reverse mode, seeded with a
Batch: each gradient is then a Batch of one per seed (primitives/batches.py, and
`unbroadcast` and `zero_cotangent` in primitives/_util.py).  There a rule not
marked `batches` abandons the pass (`forward_rule_tangents`).

Once a computation is abandoned, each rule takes the first direction's tangents and its
result is dropped: code of yours that catches the `Abandon` (a bare ``except:``) and
tries again comes to an end.

A Batch used in a way it does not define (its shape, ``np.sum`` of it, a comparison)
raises `Unbatchable`, and a marked rule is then called per direction too, or the batch
abandoned.  Both are BaseExceptions: no ``except Exception`` of yours catches them.

    >>> import numpy as np
    >>> d = Batch(np.array([1.0, 2.0]))        # a float's tangents along two directions
    >>> (np.cos(0.0) * d + 1.0).b
    array([2., 3.])
    >>> (Batch(np.eye(2)) * np.array([3.0, 4.0])).b   # an array's, along the basis
    array([[3., 0.],
           [0., 4.]])
"""
from __future__ import annotations

import operator
import threading

import numpy as np


class Unbatchable(BaseException):
    """A Batch was used in a way that is not the same for every direction."""

    raised = 0  # (how many were: one that code of yours caught still abandons a reverse pass)

    def __init__(self, *args):
        super().__init__(*args)
        Unbatchable.raised += 1


class Abandon(BaseException):
    """The computation cannot go on batched: compute the directions one at a time."""


class State:
    """A batched computation's: its number of directions ``k``, and whether it was
    abandoned (also where code of yours caught the `Abandon`, as a bare ``except:`` does)."""

    __slots__ = ("k", "abandoned", "start")

    def __init__(self, k):
        self.k, self.abandoned, self.start = k, False, Unbatchable.raised

    def zeros(self, a):
        """The Batch of zero tangents of array ``a``."""
        return Batch(np.zeros((self.k,) + a.shape, a.dtype))


class reverse_pass:
    """``with reverse_pass(k) as state:`` marks `hessian`'s batched reverse pass of ``k``
    directions as running (`REVERSE`), for the reverse rule of `jvp_call` (`forward_rule_
    tangents`); ``state.abandoned`` once any Unbatchable was raised meanwhile."""

    def __init__(self, k):
        self.state = State(k)

    def __enter__(self):
        self.before, REVERSE.state = reversing(), self.state
        return self.state

    def __exit__(self, *exc):
        REVERSE.state = self.before
        if Unbatchable.raised != self.state.start:
            self.state.abandoned = True


class _Reversing(threading.local):
    state = None  # (this thread's batched reverse pass, if one runs)


REVERSE = _Reversing()


def reversing():
    """The `State` of this thread's batched reverse pass, or None."""
    return REVERSE.state


def forward_rule_tangents(fr, ts):
    """The tangents ``ts`` as forward rule ``fr`` is to take them in a batched reverse pass
    (`REVERSE`), where one runs: a rule not marked `batches` never takes a Batch (its code
    may test the tangent's type), and it abandons the pass; once the pass is abandoned,
    each rule takes the first direction's, its result dropped, so that code of yours that
    catches the Unbatchable and tries again comes to an end."""
    state = reversing()
    if state is None:
        return ts
    if state.abandoned or Unbatchable.raised != state.start:
        state.abandoned = True
        return part(ts, 0)
    if not getattr(fr, "batches", False) and size(ts):
        state.abandoned = True
        raise Unbatchable
    return ts


def abandon(state) -> Abandon:
    """The `Abandon` to raise, the computation of ``state`` marked abandoned."""
    state.abandoned = True
    return Abandon()


def _no(*_args, **_kw):
    raise Unbatchable


class Batch:
    """The tangents of one value along ``len(b)`` directions."""

    __slots__ = ("b",)

    def __init__(self, b):
        self.b = b

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        """An elementwise ufunc of Batches and values: each Batch given the axes it lacks
        between the batch axis and its own, so it broadcasts as its value does."""
        if method != "__call__" or ufunc.nout != 1 or ufunc.signature or "out" in kw or \
                not all(type(x) is Batch or type(x) is np.ndarray or isinstance(x, _SCALARS) for x in inputs):
            raise Unbatchable  # (an np.matrix, a list: broadcast otherwise)
        nd = max(x.b.ndim - 1 if type(x) is Batch else np.ndim(x) for x in inputs)
        ins = [_widened(x, nd) if type(x) is Batch else x for x in inputs]
        if _large(int(np.prod(np.broadcast_shapes(*[np.shape(a) for a in ins])))):
            raise Unbatchable
        return Batch(ufunc(*ins, **kw))

    def __getitem__(self, key):
        key = tuple(key) if isinstance(key, tuple) else (key,)  # (a named tuple too)
        if not _in_place_of_its_value(key):
            raise Unbatchable
        b = self.b[(slice(None),) + key]
        # (a number read out of an array is NumPy's copy: not a view of the batch, which a
        # later write of the array's items, followed in the shadow, would change)
        return Batch(b.copy() if b.ndim == 1 else b)

    def __setitem__(self, key, v):
        """Writes ``v`` (a Batch, or one value for every direction) into each direction's
        ``[key]``: the tangent of an array written in place (``a[i] = x``)."""
        key = tuple(key) if isinstance(key, tuple) else (key,)
        if not _in_place_of_its_value(key):
            raise Unbatchable
        at = (slice(None),) + key
        if type(v) is Batch:
            v = _fitted(v, self.b[at].ndim - 1)
        elif not (type(v) is np.ndarray or isinstance(v, _SCALARS)):
            raise Unbatchable  # (a list of tangents: `_zeros_for_none`'s)
        try:
            self.b[at] = v
        except ValueError:  # (shapes NumPy would not write either: the columns say so)
            raise Unbatchable from None

    def __neg__(self):
        return np.negative(self)

    def __pos__(self):
        return self

    @property
    def T(self):  # noqa: N802  (the value's transpose, each direction's)
        return Batch(self.b.transpose((0,) + tuple(range(self.b.ndim - 1, 0, -1))))

    # everything else is not defined for a batch: the rule runs per direction
    __array__ = __array_function__ = __len__ = __iter__ = __bool__ = __float__ = _no
    __complex__ = __int__ = __index__ = __contains__ = _no
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _no
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __floordiv__ = __rfloordiv__ = _no
    __mod__ = __rmod__ = __abs__ = __iadd__ = __isub__ = __imul__ = __itruediv__ = _no
    __hash__ = None

    def __getattr__(self, name):  # (shape, dtype, conjugate, real, …)
        raise Unbatchable

    def __repr__(self):
        return f"Batch({self.b!r})"


_SCALARS = (int, float, complex, np.generic)
_NUMBERS = (float, complex, np.inexact)
_LARGE = 1 << 26  # bytes of a batch's tangents (64 MiB): larger, the columns go one at a time


def _large(elements) -> bool:
    """Whether a batch of ``elements`` numbers (complex, at most) is larger than `_LARGE`."""
    return 16 * elements > _LARGE


def _in_place_of_its_value(key) -> bool:
    """Whether indexing each direction by ``key`` (after the batch axis) leaves the batch
    axis first: only ints, slices, None, Ellipsis and index arrays, the advanced ones
    (arrays, and ints beside them) next to each other, as NumPy otherwise moves their axes
    to the front."""
    arrays = [i for i, k in enumerate(key) if type(k) is np.ndarray or type(k) is list]
    for k in key:
        if not (type(k) in (int, slice, np.ndarray, list) or k is None or k is Ellipsis
                or isinstance(k, np.integer)):
            return False
    if not arrays:
        return True
    advanced = [i for i, k in enumerate(key) if type(k) in (np.ndarray, list, int) or isinstance(k, np.integer)]
    return advanced == list(range(advanced[0], advanced[0] + len(advanced)))


def _arithmetic(ufunc):
    """``Batch.__op__`` and ``__rop__`` of ``ufunc``: a number, or a Batch of the same
    shape, without the general broadcast of `Batch.__array_ufunc__` (scalar code's case)."""
    def op(self, o):
        t = type(o)
        if t is float or t is int or t is np.float64:
            return Batch(ufunc(self.b, o))
        if t is Batch and o.b.shape == self.b.shape:
            return Batch(ufunc(self.b, o.b))
        return ufunc(self, o)

    def rop(self, o):
        t = type(o)
        if t is float or t is int or t is np.float64:
            return Batch(ufunc(o, self.b))
        return ufunc(o, self)
    return op, rop


for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide)):
    _op, _rop = _arithmetic(_ufunc)
    setattr(Batch, f"__{_name}__", _op)
    setattr(Batch, f"__r{_name}__", _rop)


def _widened(x, nd):
    b = x.b
    return b.reshape(b.shape[:1] + (1,) * (nd + 1 - b.ndim) + b.shape[1:])


def _fitted(v, nd):
    """Batch ``v``'s array, written into ``nd`` axes of each direction: `_widened`, or its
    leading axes of length 1 dropped, as NumPy drops them in a write."""
    b = v.b
    extra = b.ndim - 1 - nd
    if extra <= 0:
        return _widened(v, nd)
    if any(n != 1 for n in b.shape[1:1 + extra]):
        raise Unbatchable
    return b.reshape(b.shape[:1] + b.shape[1 + extra:])


def view_of(buf, r, a):
    """The Batch of the tangents of view ``a`` of array ``r``, whose tangents are the
    Batch ``buf`` (each direction laid out as ``r``, in C order): the same view of each
    direction's, so a write through either is seen by the other."""
    b = buf.b
    if a.dtype != b.dtype or not r.flags.c_contiguous or not b.flags.c_contiguous:
        raise Unbatchable  # (a float view of a complex array, an array in Fortran order)
    offset = a.__array_interface__["data"][0] - r.__array_interface__["data"][0]
    return Batch(np.ndarray(b.shape[:1] + a.shape, b.dtype, buffer=b, offset=offset,
                            strides=b.strides[:1] + a.strides))


def broadcast(d, shape):
    """Batch ``d`` with each direction's tangent broadcast to ``shape`` (a copy where it
    grows: a broadcast operand's tangent, fitted to the result)."""
    if d.b.shape[1:] == shape:
        return d
    w = _widened(d, len(shape))
    return Batch(np.broadcast_to(w, w.shape[:1] + tuple(shape)).copy())


# -- a rule's call on a batch ------------------------------------------------------------

def batches(*frs, arrays=False):
    """Mark forward rules whose code is right for a `Batch` of tangents as for one;
    ``arrays``: also where they write into an array (its tangents a Batch in the shadow)."""
    for fr in frs:
        fr.batches = "arrays" if arrays else True


def size(ts) -> int:
    """The number of directions of the Batches in ``ts`` (tuples, lists, dicts), or 0."""
    t = type(ts)
    if t is Batch:
        return len(ts.b)
    if t is tuple or t is list:
        for d in ts:
            k = size(d)
            if k:
                return k
    elif t is dict:
        return size(tuple(ts.values()))
    return 0


def part(ts, j):
    """The tangents ``ts`` along direction ``j``: each Batch's ``j``-th item."""
    t = type(ts)
    if t is Batch:
        return ts.b[j]
    if t is tuple or t is list:
        return t([part(d, j) for d in ts])
    if t is dict:
        return {k: part(d, j) for k, d in ts.items()}
    return ts


def stacked(ds):
    """One tangent from the tangents ``ds`` along each direction: a Batch where they
    differ, the tangent itself where all are one object (None: zero in every direction)."""
    first = ds[0]
    if all(d is first for d in ds):
        return first
    t = type(first)
    if t is tuple or t is list:
        if not all(type(d) is t and len(d) == len(first) for d in ds):
            raise Abandon
        return t([stacked([d[i] for d in ds]) for i in range(len(first))])
    if t is dict:
        if not all(type(d) is dict and d.keys() == first.keys() for d in ds):
            raise Abandon
        return {k: stacked([d[k] for d in ds]) for k in first}
    like = next((d for d in ds if d is not None), None)
    if not (type(like) is np.ndarray or isinstance(like, _NUMBERS)) or _large(len(ds) * np.size(like)):
        raise Abandon  # (an iterator, an object, an np.matrix: not a tangent to stack; `call` marks it)
    zero = np.zeros_like(like)
    return Batch(np.stack([zero if d is None else d for d in ds]))


def per_direction(fr, ts, args, kw, k):
    """``fr(ts, *args, **kw)`` once per direction, its value the first call's."""
    outs = [fr(part(ts, j), *args, **kw) for j in range(k)]
    return outs[0][0], stacked([dy for _, dy in outs])


_MODULES = frozenset({"math", "cmath", "_operator", "operator"})
# (changes of their arguments their rules' records do not declare)
_CHANGING = frozenset({operator.setitem, operator.delitem, setattr, delattr, object.__setattr__,
                       object.__delattr__, np.put, np.fill_diagonal, np.copyto, np.place, np.putmask})


def _changes(f, fr, record, args) -> bool:
    """Whether ``f`` may change an array in a way its rule ``fr`` does not follow in a
    batch, which abandons it before the change is made (the rules of writes of items and
    of in-place operators follow it: `batches` ``arrays``); a list's, a dict's or an
    object's change is followed (their tangents are containers of Batches), and
    ``s += t`` on numbers changes nothing."""
    if f not in _CHANGING and (record is None or not record.changes_args):
        return False
    return not args or isinstance(args[0], np.ndarray) and getattr(fr, "batches", None) != "arrays"


def _pure(f, record) -> bool:
    """Whether ``f`` computes its result and changes nothing (given no iterator): a
    function, ufunc or array method of NumPy's (not its random numbers'), or of ``math``,
    ``cmath`` or ``operator``, whose rule does not say it has effects or changes its
    arguments."""
    if f in _CHANGING or record is not None and (record.effectful or record.changes_args):
        return False  # (once per direction, it would change the value k times)
    if isinstance(f, np.ufunc):
        return True
    module = getattr(f, "__module__", None) or getattr(getattr(f, "__objclass__", None), "__module__", "")
    return module in _MODULES or module.split(".")[0] == "numpy" and not module.startswith("numpy.random") \
        and f is not np.fromiter


def _iterator(x) -> bool:
    return hasattr(type(x), "__next__")


def call(state, f, fr, record, ts, args, kw=None):
    """``fr(ts, *args, **kw)`` in the batched computation of ``state``, as the module's
    docstring says; a change in place abandons the batch before it is made."""
    kw = kw or {}
    if state.abandoned:  # (its result dropped: code of yours that catches the Abandon and tries again ends)
        return fr(part(ts, 0), *args, **kw)
    if _changes(f, fr, record, args):
        raise abandon(state)
    k = size(ts)
    if not k:
        return fr(ts, *args, **kw)
    if getattr(fr, "batches", False):
        try:
            return fr(ts, *args, **kw)
        except Unbatchable:
            pass
    if not _pure(f, record) or any(map(_iterator, args)) or any(map(_iterator, kw.values())):
        raise abandon(state)
    try:
        return per_direction(fr, ts, args, kw, k)
    except Abandon:
        raise abandon(state) from None
