"""How pullbacks meet mutation: the runtime side of ``ops.watch``.

A mutating rule (``a[i] = v``, ``xs.append(x)``, ``obj.w = v``) marks its
object in the shadow.  From then on, ``ops.watch`` hands every pullback whose
operands hold a mutated object to `watcher`, which wraps it in `Routed`: the
gradients it returns for those objects go into the shadow, where the mutating
rule's pullback finds the gradient of what it wrote.  A value of a kind that may
be mutated later (array, list, dict, object) gets its pullback wrapped in
`Owned`, which takes the value's shadow entry back into the SSA gradient when
the reverse pass reaches the statement that produced it.
"""
from __future__ import annotations

import enum

import types
import weakref

import numpy as np

from .algebra import accum, is_differentiable, unwrap
from .errors import full_name, refuse_objects
from .shadow import current, fields
from .watch import KEPT, WATCH


class Always:
    """A pullback that must run even when its output got no gradient: it restores
    what a mutation overwrote, finds its gradient in the shadow, or stores into a cell."""

    __slots__ = ()


class Effect(Always):
    """``Effect(back)``: the pullback ``back`` of a mutating rule, which accepts None."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, dy):
        return self.fn(dy)


def wrapping(inner, back):
    """``back``, a pullback that calls ``inner``: made to run without a gradient when
    ``inner`` must."""
    return Effect(back) if isinstance(inner, Always) else back


class _Zeros:
    """The result of a pullback that had nothing to do: no gradient for anything."""

    def __getitem__(self, i):
        return None

    def __len__(self):
        return 0


ZEROS = _Zeros()


def runs_without_gradient(pb) -> bool:
    return isinstance(pb, Always)


class Routed(Always):
    """A pullback whose gradients for mutated operands go to the shadow: ``hits``
    are (position, operand) pairs; (name, operand) pairs of ``named`` are keyword
    arguments, whose gradients the pullback returns in a dict at position ``n``."""

    __slots__ = ("pb", "hits", "shadow", "named", "n")

    def __init__(self, pb, hits, shadow, named=(), n=0):
        self.pb, self.hits, self.shadow, self.named, self.n = pb, hits, shadow, named, n

    def __call__(self, dy):
        if dy is None and not isinstance(self.pb, Always):
            return ZEROS
        d = list(self.pb(dy))
        for k, x in self.hits:
            if k < len(d):
                d[k] = self.shadow.absorb(x, d[k])
        if self.named and len(d) > self.n and d[self.n] is not None:
            g = d[self.n] = dict(d[self.n])
            for k, x in self.named:
                g[k] = self.shadow.absorb(x, g.get(k))
        return tuple(d)


class Returned(Always):
    """The pullback of a call whose result holds mutated objects: their part of
    the result's gradient goes to the shadow before the callee's reverse pass."""

    __slots__ = ("pb", "y", "shadow")

    def __init__(self, pb, y, shadow):
        self.pb, self.y, self.shadow = pb, y, shadow

    def __call__(self, dy):
        return self.pb(self.shadow.absorb(self.y, dy))


class Owned(Always):
    """The pullback of a statement whose value ``y`` may be mutated later: the
    gradient it receives is its SSA gradient plus ``y``'s shadow entry."""

    __slots__ = ("pb", "y", "ref", "shadow")

    def __init__(self, pb, y, shadow):
        self.pb, self.shadow = pb, shadow
        # an array that owns its memory is held by a weak reference, not kept alive: if
        # it is gone it was never mutated (the shadow keeps those), and its id may now
        # belong to another array
        if type(y) is np.ndarray and y.base is None:
            self.y, self.ref = None, weakref.ref(y)
        else:
            self.y, self.ref = y, None

    def __call__(self, dy):
        sh = self.shadow
        if sh.mutated:
            if self.ref is None:
                extra = sh.take(self.y)
            else:
                y = self.ref()
                extra = None if y is None else sh.grads.pop(id(y), None)
            if extra is not None:
                dy = unwrap(accum(dy, unwrap(extra)))
        if dy is None and not isinstance(self.pb, Always):
            return ZEROS
        return self.pb(dy)


def watcher(pb, y, operands, kw=None):
    """``ops.watch``'s slow path: wrap ``pb`` as the mutations seen so far require.  An
    array of objects made from a value with a gradient is refused (`refuse_objects`)."""
    sh = current()
    kw = kw or {}
    if type(y) is np.ndarray and y.dtype.kind == "O" and _of_gradients(operands, kw):
        refuse_objects(full_name(operands[0]))
    if sh.mutated:
        hits = [(k, x) for k, x in enumerate(operands) if sh.holds_mutated(x)]
        named = [(k, x) for k, x in kw.items() if sh.holds_mutated(x)]
        if hits or named:
            pb = Routed(pb, hits, sh, named, len(operands))
        if sh.is_mutated(y):
            return pb
    if type(y) not in WATCH.kinds:
        return pb
    for x in (*operands, *kw.values()):  # an operand passed through (stop_gradient, hook) was made elsewhere
        if x is y:
            return pb
    return Owned(pb, y, sh)


def _of_gradients(operands, kw) -> bool:
    """Whether a call ``(f, a, …)`` with keywords ``kw`` was given a value with a gradient,
    ``f``'s own object too (``x.astype`` holds ``x``)."""
    f, *args = operands
    return any(map(is_differentiable, (getattr(f, "__self__", None), *args, *kw.values())))


def changeable(x) -> bool:
    """Whether global value ``x`` may be changed in place by differentiated code: a
    list, dict, array or object, an instance of a class of Python code (a model whose
    fields the code sets, before any of its class was made under differentiation), or a
    class, whatever its metaclass (through a list or array it holds, or what the metaclass
    computes from it when the class's attribute is read)."""
    t = type(x)
    return t in WATCH.kinds or t is type and x.__module__ != "builtins" or \
        isinstance(x, type) and _hooked(t) or t.__flags__ & _HEAP_TYPE and not isinstance(x, _UNCHANGED)


def _hooked(meta) -> bool:
    """Whether metaclass ``meta`` computes what a read of its classes gives: a
    ``__getattribute__``, ``__getattr__`` or property of Python code, not an Enum's (whose
    members are constants)."""
    if issubclass(meta, enum.EnumType):
        return False
    return any(type(v) is types.FunctionType and k in ("__getattribute__", "__getattr__") or
               isinstance(v, property) for c in meta.__mro__[:-2] for k, v in vars(c).items())


_HEAP_TYPE = 1 << 9  # (Py_TPFLAGS_HEAPTYPE: a class made by a class statement, not by C)
_UNCHANGED = (type, types.FunctionType, types.ModuleType, BaseException)


def watch_kind(t):
    """Values of type ``t`` may be mutated: their pullbacks must take their entries."""
    WATCH.kinds.add(t)
    if t is not np.ndarray:  # (an ndarray a function only reads: `transforms.kept`)
        KEPT.kinds.add(t)


WATCH.watcher = KEPT.watcher = watcher
for _t in (np.ndarray, list, dict):
    watch_kind(_t)


# -- arrays written whole -------------------------------------------------------

def overwrite(a, change, old=None):
    """Run ``change()``, which writes into array ``a``; returns ``(shadow, undo)``, where
    ``undo()`` (for the pullback) puts back ``a``'s old contents and returns the gradient
    its new contents received, leaving none in the shadow."""
    sh = current()
    old = a.copy() if old is None else old
    change()
    sh.mark(a)

    def undo():
        g = sh.take_at(a, ...)
        a[...] = old
        return g
    return sh, undo


def array_update(a, y, pb, n, old=None):
    """``a[...] = y`` where ``y, pb`` came from a rule (``a += b``, ``np.add(x, b, out=a)``),
    whose pullback then gets the gradient of the written contents.  Returns ``(a, back)``;
    ``back`` returns ``pb``'s result, or ``n`` Nones when ``a`` got no gradient."""
    sh, undo = overwrite(a, lambda: np.copyto(a, y, casting="same_kind"), old)

    def back(dy):
        sh.add(a, dy)
        g = undo()
        return pb(g) if g is not None else (None,) * n
    return a, back


def rewrite(a, r, *args, **kw):
    """``a[...] = r(a, *args)`` through ``r``'s rule (``a += b``, ``a.sort()``): the
    gradient of ``a``'s old contents stays in the shadow; ``args`` get theirs."""
    old = a.copy()
    y, pb = r(old, *args, **kw)
    sh = current()
    a, back = array_update(a, y, pb, 2 + len(args), old)

    def grads(dy):
        d = back(dy)
        sh.add(a, d[1])
        return (None, None) + tuple(d[2:2 + len(args)])
    return a, Effect(grads)


def with_out(r, args, kw):
    """A NumPy call ``f(*args, out=a)`` through ``f``'s rule ``r``: computed apart,
    then written into ``a`` like ``a[...] = f(*args)``."""
    kw = dict(kw)
    out = kw.pop("out")
    a = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if not isinstance(a, np.ndarray):
        return r(*args, out=out, **kw)
    y, pb = r(*args, **kw)
    a, back = array_update(a, y, pb, 1 + len(args))
    return a, Effect(back)


# -- the top level: what the user's objects hold, and their gradients ----------

def seal(sh):
    """After the forward pass: remember what mutated objects hold now (the reverse
    pass restores their earlier contents)."""
    sh.final = [(o, _state(o)) for o in sh.mutated.values()]


def reapply(sh):
    """After a reverse pass: put back what the forward pass left in mutated objects."""
    for o, s in sh.final or ():
        _restore(o, s)
    sh.grads.clear()


def _state(o):
    if isinstance(o, np.ndarray):
        return o.copy()
    if isinstance(o, list):
        return list(o)
    if isinstance(o, dict):
        return dict(o)
    return fields(o)


def _restore(o, s):
    if isinstance(o, np.ndarray):
        o[...] = s
    elif isinstance(o, list):
        o[:] = s
    elif isinstance(o, dict):
        o.clear()
        o.update(s)
    elif s is not None:
        for name in set(fields(o)) - set(s):
            object.__delattr__(o, name)
        for name, v in s.items():
            object.__setattr__(o, name, v)


def collect(sh, x, g, seen=None):
    """``g`` plus what the shadow still holds for ``x`` and the objects inside it:
    the gradient of an argument the function mutated."""
    seen = set() if seen is None else seen
    if id(x) in seen:
        return g
    seen.add(id(x))
    if isinstance(x, np.ndarray):
        return accum(g, sh.take(x))
    t = type(x)
    if t is list or t is tuple:
        g = accum(unwrap(g), sh.take(x) if t is list else None)
        inner = [collect(sh, a, None, seen) for a in x]
        return accum(g, t(inner)) if any(d is not None for d in inner) else g
    named = x if t is dict else fields(x)
    if named is not None:
        g = accum(g, sh.take(x))
        inner = {k: collect(sh, a, None, seen) for k, a in named.items()}
        inner = {k: d for k, d in inner.items() if d is not None}
        return accum(g, inner) if inner else g
    return g
