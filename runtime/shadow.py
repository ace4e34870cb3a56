"""Identity-keyed gradients of mutable objects, for one gradient computation.

Some gradients cannot travel with SSA values because the object they belong to
is mutated in place: a closure cell that is read, rebound and read again.
Their gradients live here, keyed by the object's identity; the rule that
created or overwrote the object's content takes it out in the reverse pass.
"""
from __future__ import annotations

from .algebra import accum


class Shadow:
    __slots__ = ("grads", "keep")

    def __init__(self):
        self.grads, self.keep = {}, {}

    def add(self, obj, g):
        if g is not None:
            k = id(obj)
            self.keep[k] = obj  # the id stays valid while its gradient is held
            self.grads[k] = accum(self.grads.get(k), g)

    def take(self, obj):
        """The gradient accumulated for ``obj``, leaving zero behind."""
        return self.grads.pop(id(obj), None)


_stack = [Shadow()]


def current() -> Shadow:
    return _stack[-1]


class fresh:
    """``with fresh():`` — a new shadow for one top-level gradient computation."""

    def __enter__(self):
        _stack.append(Shadow())
        return _stack[-1]

    def __exit__(self, *exc):
        _stack.pop()
