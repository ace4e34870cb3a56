"""Identity-keyed gradients of mutable objects, for one gradient computation.

Some gradients cannot travel with SSA values because the object they belong to
is changed in place: a closure cell that is rebound, an array written through an
alias, a list appended to.  Their gradients live here, keyed by the object's
identity (Mooncake's model): reads of a mutated object add to its entry, and
the rule that overwrote part of it takes that part out in the reverse pass.

An entry mirrors its object: a dense array for an array (kept for the array
that owns the memory, so a view's gradient is a view of it), a list of element
gradients for a list, a dict for a dict or an object's fields, a gradient for a
cell.
"""
from __future__ import annotations

import functools
import threading
import types
import weakref

import numpy as np

from .algebra import Buffer, OneHot, accum, unwrap
from .errors import user_location
from .watch import set_all


def root(a):
    """The array owning ``a``'s memory (``a`` itself unless it is a view)."""
    b = a.base
    return b if isinstance(b, np.ndarray) else a


def region(buf, r, a):
    """The part of ``buf`` (a gradient laid out like root ``r``) that view ``a`` covers."""
    if a is r:
        return buf
    offset = a.__array_interface__["data"][0] - r.__array_interface__["data"][0]
    # the real or imaginary part of a complex array is a float view: of the complex gradient too
    dtype = a.dtype if a.dtype.kind == "f" and buf.dtype.kind == "c" else buf.dtype
    return np.ndarray(a.shape, dtype, buffer=buf, offset=offset, strides=a.strides)


class Shadow:
    __slots__ = ("grads", "keep", "mutated", "final", "scanned", "owners", "passed", "inside",
                 "writes", "lost", "raised")

    def __init__(self, inside=False):
        self.inside = inside  # belongs to a gradient computation (`fresh`)
        self.writes = 0  # changes in place so far (`forward_in_try` compares them)
        self.lost = None  # why this computation's gradient cannot be had (`forward_in_try`)
        self.grads, self.keep, self.mutated, self.final, self.scanned = {}, {}, {}, None, {}
        self.owners = {}  # id of an object's __dict__ → the object: one entry for both
        self.passed = {}  # id → (object, name): passed through stop_gradient or hook
        # id → (exception, (file, line), None): made of values with a gradient (`errors.carried`);
        # or, a generator's StopIteration, a function giving the gradient of its value back to it
        self.raised = {}

    def own(self, fields, obj):
        """``fields`` is ``obj.__dict__``: a change of either is a change of ``obj``."""
        self.owners[id(fields)] = obj

    def _who(self, o):
        return self.owners.get(id(o), o) if type(o) is dict else o

    def hand_on(self, outer):
        """Gradients left here by a computation run inside another (a `checkpoint`'s
        re-run, an inner gradient's reverse pass) belong to objects made before it (cells
        its code reads): their creators' pullbacks look in ``outer``."""
        for k, g in self.grads.items():
            outer.add(self.keep[k], g)

    # -- gradients -----------------------------------------------------------
    def add(self, obj, g):
        """Add gradient ``g`` to ``obj``'s entry."""
        if g is None:
            return
        if isinstance(obj, np.ndarray):
            return self._add_array(obj, g)
        obj = self._who(obj)
        k = id(obj)
        self.keep[k] = obj  # the id stays valid while its gradient is held
        if type(obj) is list:
            buf = self.grads.get(k)
            if buf is None:
                buf = self.grads[k] = Buffer([None] * len(obj), list)
            accum(buf, g)
        else:  # a dict entry is changed in place later: never the caller's own dict
            old = self.grads.get(k)
            self.grads[k] = dict(g) if old is None and type(g) is dict else accum(old, g)

    def _add_array(self, a, g):
        if a.dtype.kind not in "fc":
            return
        r = root(a)
        buf = self.grads.get(id(r))
        if buf is None:
            if not (r.flags.c_contiguous or r.flags.f_contiguous):
                raise NotImplementedError("mutation of an array whose memory is not contiguous")
            self.keep[id(r)] = r
            buf = self.grads[id(r)] = np.zeros_like(r)
        part = region(buf, r, a)
        if type(g) is OneHot:
            part[g.index] += g.value
        else:
            part += unwrap(g)

    def take(self, obj):
        """The gradient accumulated for ``obj``, leaving zero behind."""
        if isinstance(obj, np.ndarray):
            return self.take_at(obj, ...)
        return unwrap(self.grads.pop(id(self._who(obj)), None))

    def take_at(self, a, index):
        """The gradient of ``a[index]`` (an array), leaving zero there."""
        r = root(a)
        buf = self.grads.get(id(r))
        if buf is None:
            return None
        part = region(buf, r, a)
        g = np.array(part[index])
        part[index] = 0
        return g

    def entry(self, obj, make):
        """``obj``'s entry (a list buffer or a dict), made by ``make()`` if absent."""
        obj = self._who(obj)
        k = id(obj)
        e = self.grads.get(k)
        if e is None:
            self.keep[k] = obj
            e = self.grads[k] = make()
        return e

    # -- mutated objects -----------------------------------------------------
    def mark(self, obj):
        """Record that ``obj`` (or, for a view, the array it views) is being mutated."""
        o = root(obj) if isinstance(obj, np.ndarray) else self._who(obj)
        self.writes += 1
        if self.passed and id(o) in self.passed:
            ref, name = self.passed[id(o)]
            if ref() is o:  # (not another object that got the id of a dead one)
                _refuse_change(name)
        if id(o) not in self.mutated:
            if not self.mutated and self.inside:
                _mutating(+1)
            self.mutated[id(o)] = o

    def pass_through(self, x, name, depth=100):
        """Record that ``x`` (and the lists, dicts, arrays and objects it holds) went
        through ``name`` (stop_gradient, hook), which hands on the object itself: a later
        change in place would send the gradients of its old contents past ``name``."""
        if isinstance(x, np.ndarray):
            self.passed[id(root(x))] = (weakref.ref(root(x)), name)
            return
        if depth == 0 or x is None or type(x) in (int, float, bool, complex, str):
            return
        if type(x) is list or type(x) is dict:  # (not to be referred to weakly)
            self.passed[id(x)] = (lambda x=x: x, name)
        elif not isinstance(x, tuple) and (hasattr(x, "__dict__") or hasattr(type(x), "__slots__")):
            try:
                self.passed[id(x)] = (weakref.ref(x), name)
            except TypeError:
                self.passed[id(x)] = (lambda x=x: x, name)
        for v in _parts(x):
            self.pass_through(v, name, depth - 1)

    def is_mutated(self, x) -> bool:
        if id(x) in self.mutated or type(x) is dict and id(self._who(x)) in self.mutated:
            return True
        return isinstance(x, np.ndarray) and id(root(x)) in self.mutated

    def holds_mutated(self, x) -> bool:
        """Whether ``x`` is, or (through tuples, lists and dicts) holds, a mutated object."""
        if self.is_mutated(x):
            return True
        t = type(x)
        if t is not tuple and t is not list and t is not dict:
            return _gradient_of(x) is not None and self.is_mutated(x.gradient_of)
        # a container changes only through a write, which marks it: its answer holds
        # until it grows or something else is marked
        k = (id(x), len(x), len(self.mutated))
        known = self.scanned.get(id(x))
        if known is not None and known[0] == k:
            return known[2]
        found = any(map(self.holds_mutated, x.values() if t is dict else x))
        self.scanned[id(x)] = (k, x, found)  # x is kept, so its id is not reused meanwhile
        return found

    def _split(self, x, g):
        """Of ``x``'s gradient ``g``, move the parts of items or fields that are mutated
        objects themselves to their own entries; return the rest."""
        if type(x) is list or type(x) is tuple:
            if type(g) is OneHot:
                rest = self.absorb(x[g.index], g.value)
                return None if rest is None else OneHot(g.like, g.index, rest)
            if self.holds_mutated(list(x)):
                return [self.absorb(a, d) for a, d in zip(x, unwrap(g))]
            return g
        if type(g) is not dict:
            return g
        named = x if type(x) is dict else getattr(x, "__dict__", None)
        if type(named) is not dict:
            return g
        return {k: self.absorb(named[k], d) if k in named else d for k, d in g.items()}

    def absorb(self, x, g):
        """Move the parts of gradient ``g`` of ``x`` that belong to mutated objects
        into their entries; return the rest."""
        if g is None:
            return None
        if self.is_mutated(x):
            self.add(x, self._split(x, g))
            return None
        if _gradient_of(x) is not None and self.is_mutated(x.gradient_of):
            self.add(x.gradient_of, g)
            return None
        t = type(x)
        if (t is tuple or t is list) and self.holds_mutated(x):
            return t(self.absorb(a, d) for a, d in zip(x, unwrap(g)))
        if t is dict and isinstance(g, dict) and self.holds_mutated(x):
            return {k: self.absorb(x[k], d) if k in x else d for k, d in g.items()}
        return g


def _parts(x):
    """What ``x`` holds: a container's items, an object's fields."""
    if type(x) is dict:
        return x.values()
    if type(x) is list or isinstance(x, tuple):
        return x
    named = fields(x)
    return named.values() if named else ()


def fields(o):
    """An object's fields by name: its ``__dict__`` and the ``__slots__`` it has set;
    None for what has neither (a number, a function)."""
    names = slot_names(type(o))
    own = getattr(o, "__dict__", None)
    if own is None and not names or isinstance(o, _NOT_OBJECTS):
        return None
    out = dict(own or {})
    for n in names:
        if hasattr(o, n):
            out[n] = getattr(o, n)
    return out


_NOT_OBJECTS = (type, types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                types.ModuleType, functools.partial)


def slot_names(cls) -> list:
    """The names of the slots of ``cls`` and its bases (not ``__dict__``, ``__weakref__``)."""
    return [n for t in cls.__mro__ for n in _slots(t) if n not in ("__dict__", "__weakref__")]


def _slots(t):
    s = t.__dict__.get("__slots__", ())
    return (s,) if isinstance(s, str) else s


def hand_on(x, name):
    """What ``stop_gradient(x)`` and ``hook(fn, x)``, which hand on the object itself, do
    inside a gradient computation: refuse an object already changed in place (its gradient
    travels through the shadow, past them), and watch it for later changes."""
    stack = _stack()
    if len(stack) > 1:
        sh = stack[-1]
        if sh.holds_mutated(x):
            _refuse(f"{name} of an object that was changed in place is not supported "
                    f"(gradients of changed objects bypass it)", name)
        sh.pass_through(x, name)


def _refuse_change(name):
    _refuse(f"this changes in place an object that went through {name}, which hands on "
            f"the object itself: the gradient of its old contents would bypass {name}", name)


def _refuse(what, name):
    file, line = user_location()
    raise NotImplementedError(f"{file}:{line}: {what}; apply {name} to a copy (x.copy()), "
                              f"or change a copy")


def _gradient_of(x):
    """The object whose structure ``x``'s gradient has (an iterator's sequence), if not its own."""
    return getattr(type(x), "gradient_of", None)


# Each thread has its own stack of shadows (the bottom one belongs to no computation).
# ``WATCH.all`` (and ``KEPT.all``), read inline by the emitted code, is one flag for all
# threads: set while any shadow holds a mutated object, so a thread may take the watcher's
# slow path for another's mutations, which then finds its own shadow clean.
_local = threading.local()
_lock = threading.Lock()
_count = [0]  # shadows holding a mutated object, in all threads


def _stack() -> list:
    try:
        return _local.stack
    except AttributeError:
        _local.stack = [Shadow()]
        return _local.stack


def current() -> Shadow:
    try:
        return _local.stack[-1]
    except AttributeError:
        return _stack()[-1]


def _mutating(k):
    with _lock:
        _count[0] += k
        set_all(_count[0] > 0)


class fresh:
    """``with fresh():`` — a new shadow for one top-level gradient computation."""

    def __enter__(self):
        sh = Shadow(inside=True)
        try:
            _local.stack.append(sh)
        except AttributeError:  # (this thread's first)
            _stack().append(sh)
        return sh

    def __exit__(self, *exc):
        sh = _local.stack.pop()
        if sh.mutated and sh.inside:
            _mutating(-1)


class Shared(Shadow):
    """The shadow of a computation that tasks in other threads work in too (`adopted`):
    its operations hold one lock, so that two threads adding to one entry, or making
    it, or marking the first object changed, do not lose an update."""

    __slots__ = ()


_shared = threading.RLock()


def _locked(method):
    @functools.wraps(method)
    def locked(self, *args):
        with _shared:
            return method(self, *args)
    return locked


for _name in ("own", "add", "take", "take_at", "entry", "pass_through", "absorb", "holds_mutated"):
    setattr(Shared, _name, _locked(getattr(Shadow, _name)))


def _mark_shared(self, obj):
    frozen = getattr(_local, "frozen", ())
    if frozen and isinstance(obj, np.ndarray) and id(root(obj)) in frozen:
        file, line = user_location()
        raise NotImplementedError(
            f"{file}:{line}: a task running in another thread changes in place an array that "
            f"its caller or other tasks can read, and bytegrad cannot order such changes across "
            f"threads for the reverse pass; return the value (future.result(), a queue), or "
            f"store it into a list")
    with _shared:
        return Shadow.mark(self, obj)


Shared.mark = _mark_shared


def shared() -> Shadow:
    """This thread's shadow, made `Shared` (its class changes: the computation's own code
    holds it) before a task of the computation starts in another thread."""
    sh = current()
    if type(sh) is Shadow:
        sh.__class__ = Shared
    return sh


class adopted:
    """``with adopted(sh):`` — this thread works inside the computation whose shadow is
    ``sh`` (`shared`), for a task it runs for that computation: its changes in place, and
    the reads of them, go to that computation's shadow, as the same code run inline would."""

    def __init__(self, sh, frozen=frozenset()):
        self.sh, self.frozen = sh, frozen  # ids of arrays the task must not change

    def __enter__(self):
        _stack().append(self.sh)
        _local.frozen = self.frozen
        return self.sh

    def __exit__(self, *exc):
        _stack().pop()
        _local.frozen = ()
