"""The cache of transformed code: by the code object's identity, checked against the
globals that decided activity.

A transform reads the caller's globals to decide which calls are active (a global
``floor`` is a plain call, a global ``sin`` is not).  Two modules may hold equal code
objects (code equality ignores the file and the globals), and a global may be
rebound after its function was transformed, so an entry is used only for code it
was made from (by identity) and where every global it read (and every attribute of a
module global: ``np.sum``) still names what it read.
Entries hold neither the code nor any globals dict alive.
"""
from __future__ import annotations

import sys
import types
import weakref

_MISSING = object()
_VARIANTS = 4  # transforms kept per code object (one per module that shares it, say)


class Reading:
    """A function's globals, as the transform sees them, recording each name it reads."""

    __slots__ = ("globals", "read")

    def __init__(self, globals_):
        self.globals, self.read = globals_, {}

    def __contains__(self, name):
        v = self.read[name, None] = self.globals.get(name, _MISSING)
        return v is not _MISSING

    def __getitem__(self, name):
        return self.globals[name]

    def attribute(self, name, path):
        """The attribute at ``path`` (names, ``("linalg", "norm")``) of the module global
        ``name``, through modules only (None if there is none)."""
        v = self.read[name, None] = self.globals.get(name, _MISSING)
        for part in path:
            if type(v) is not types.ModuleType:
                return None
            v = getattr(v, part, _MISSING)
        self.read[name, path] = v
        return None if v is _MISSING else v

    def decided(self):
        """``((name, attribute path or None, check, held), …)``: what was read, and how to
        tell it is unchanged: by identity (held weakly where it can be), or, for a number or
        string, by its type, which is all a transform decides from (a global learning rate
        may change at every call without a new transform)."""
        out = []
        for (name, attr), v in self.read.items():
            if type(v) in _VALUES:
                out.append((name, attr, _TYPE, type(v)))
                continue
            if _lasting(v):
                out.append((name, attr, _SAME, v))
                continue
            try:
                out.append((name, attr, _WEAK, weakref.ref(v)))
            except TypeError:  # lists, dicts, builtins: held as they are
                out.append((name, attr, _SAME, v))
        return tuple(out)


_VALUES = frozenset({int, float, complex, bool, str, type(None)})
_SAME, _WEAK, _TYPE = range(3)


def _lasting(v) -> bool:
    """Whether ``v`` lives as long as the process and holds no function's globals, so it
    can be held as it is (a weak reference costs a call at every check): an imported
    module, or a C function of one (``math.sin``)."""
    if type(v) is types.BuiltinFunctionType:
        v = v.__self__
    return type(v) is types.ModuleType and sys.modules.get(v.__name__) is v


def still_decided(decided):
    """A function of a globals dict: whether each global (or module attribute) in
    ``decided`` still names what it named (a number or string: one of the same type).

    It runs at every call of a transformed function, so it is one expression made for
    ``decided`` (``(n0 := g.get('np', M)) is h0 and getattr(n0, 'sum', M) is h1``),
    in the order read, which a loop over the entries took three times as long to check."""
    held = {"M": _MISSING}
    terms, bound = [], {}
    for i, (name, attr, check, h) in enumerate(decided):
        if name in bound:  # (read once: a module's attributes follow the module)
            v = bound[name]
        else:
            v = bound[name] = f"n{i}"
            v = f"({v} := g.get({name!r}, M))"
        for part in attr or ():
            v = f"getattr({v}, {part!r}, M)"
        held[f"h{i}"] = h
        terms.append(f"type({v}) is h{i}" if check is _TYPE else
                     f"{v} is h{i}()" if check is _WEAK else f"{v} is h{i}")
    args = "".join(f", {k}={k}" for k in held)  # (locals: faster to read than globals)
    exec(f"def still_decided(g{args}):\n    return {' and '.join(terms) or 'True'}\n", held)
    return held["still_decided"]


class Cache:
    """Transforms by ``(code identity, variant)``; ``make(code, reading)`` makes one, and
    the result must have ``code`` (a weak reference) and ``still_decided`` attributes.
    (`forward.forward` repeats the lookup of `get` inline for the plain variant.)"""

    def __init__(self, make):
        self.make, self.entries = make, {}

    def get(self, code, globals_, variant=None):
        key = id(code) if variant is None else (id(code), variant)
        for c in self.entries.get(key, ()):
            if c.code() is code and c.still_decided(globals_):
                return c
        c = self.make(code, Reading(globals_), variant)
        c.code = weakref.ref(code, lambda _, key=key: self.entries.pop(key, None))
        self.entries[key] = [c, *self.entries.get(key, ())][:_VARIANTS]
        return c
