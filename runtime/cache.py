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
            try:
                out.append((name, attr, _WEAK, weakref.ref(v)))
            except TypeError:  # lists, dicts, builtins: held as they are
                out.append((name, attr, _SAME, v))
        return tuple(out)


_VALUES = frozenset({int, float, complex, bool, str, type(None)})
_SAME, _WEAK, _TYPE = range(3)


def still_decided(decided, globals_) -> bool:
    """Whether each global (or module attribute) in ``decided`` still names what it
    named (a number or string: one of the same type)."""
    for name, attr, check, held in decided:
        v = globals_.get(name, _MISSING)
        if attr is not None:
            for part in attr:
                v = getattr(v, part, _MISSING)
        if check is _TYPE:
            if type(v) is not held:
                return False
        elif (held() if check is _WEAK else held) is not v:
            return False
    return True


class Cache:
    """Transforms by ``(code identity, variant)``; ``make(code, reading)`` makes one, and
    the result must have ``code`` (a weak reference) and ``decided`` attributes."""

    def __init__(self, make):
        self.make, self.entries = make, {}

    def get(self, code, globals_, variant=None):
        key = id(code) if variant is None else (id(code), variant)
        for c in self.entries.get(key, ()):
            if c.code() is code and still_decided(c.decided, globals_):
                return c
        c = self.make(code, Reading(globals_), variant)
        c.code = weakref.ref(code, lambda _, key=key: self.entries.pop(key, None))
        self.entries[key] = [c, *self.entries.get(key, ())][:_VARIANTS]
        return c
