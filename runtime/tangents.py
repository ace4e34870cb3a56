"""Identity-keyed tangents of objects changed in place, for one forward-mode computation.

A tangent travels with its SSA value, but a write (``a[i] = v``, ``xs.append(v)``,
``obj.w = v``, a cell rebound) changes an object that other values may share.  The
first write to an object puts a private copy of its tangent here, keyed by the
object's identity, and the write changes that copy as the primal is changed; a read
of the object (any argument or result of ``jvp``, while anything is here) takes its
tangent from here.  An array's entry is kept for the array that owns the memory and
laid out like it, so a view's tangent is the same view of it (``v = a[2:]; v[0] = x``
changes ``a``'s tangent).  Cells, and the tangents of default values of functions made
during the computation, are kept apart: they are read where they are used.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from ..ir.errors import Refusal
from .batching import Unbatchable, abandon, view_of
from .errors import user_location
from .shadow import _stack, region, root

_DEPTH = 100  # deeper parts of a container are handed on as they are


class TangentShadow:
    __slots__ = ("entries", "cells", "defaults", "raised", "batch", "nested", "located")

    def __init__(self, batch=None):
        self.batch = batch  # a `batching.State` where tangents are Batches: a change in place abandons them
        self.nested = False  # running the tangent code nesting runs (see `nesting._value_of`)
        self.located = None  # id → (file, line) of each entry's making, where a level refuses them
        self.entries = {}  # id → (object, its tangent)
        self.cells = {}  # id of a cell → (cell, the tangent of its contents)
        self.defaults = {}  # id of a function → (function, tangents of __defaults__, of __kwdefaults__)
        self.raised = {}  # id → (exception, (file, line), its arguments, their tangents): see `errors.carried`

    # -- reads ------------------------------------------------------------------------
    def refresh(self, x, dx, depth=_DEPTH):
        """The tangent of ``x`` now: its entry, a view of its root array's entry, or
        ``dx`` with the parts of containers refreshed."""
        e = self.entries.get(id(x))
        if e is not None:
            dx = e[1]
        t = type(x)
        if t is np.ndarray:
            return self._array(x, dx) if e is None and x.base is not None else dx
        if depth and (t is list or t is tuple or t is dict) and len(x):
            return self._container(x, dx, depth - 1)
        return dx

    def latest(self, x, dx):
        """The tangent of ``x`` itself now: its entry, a view of its root array's entry, or
        ``dx`` (its parts are not walked: each is looked at when it is read)."""
        e = self.entries.get(id(x))
        if e is not None:
            return e[1]
        return self._array(x, dx) if type(x) is np.ndarray and x.base is not None else dx

    def _array(self, x, dx):
        r = root(x)
        e = self.entries.get(id(r))
        if e is None or e[1] is None:
            return dx
        return self._region(e[1], r, x)

    def _region(self, d, r, x):
        """`shadow.region` of the tangents ``d`` of root ``r``, or its Batch's view."""
        if not self.batch or x is r:
            return region(d, r, x)
        try:
            return view_of(d, r, x)
        except Unbatchable:
            raise abandon(self.batch) from None

    def _container(self, x, dx, depth):
        if type(x) is dict:
            dd = dx if type(dx) is dict else {}
            new = {k: self.refresh(v, dd.get(k), depth) for k, v in x.items()}
            same = all([new[k] is dd.get(k) for k in new])  # (lists: nested forward mode lifts this)
        else:
            ds = dx if isinstance(dx, (list, tuple)) and len(dx) == len(x) else (None,) * len(x)
            new = [self.refresh(v, d, depth) for v, d in zip(x, ds)]
            same = all([a is b for a, b in zip(new, ds)])
        if same:
            return dx
        return new if type(x) is not tuple else tuple(new)

    # -- writes -----------------------------------------------------------------------
    def writable(self, x, dx, what):
        """The tangent of ``x`` for a write to change in place (its entry, made on the
        first write from ``dx``); None for an array that carries no tangent (integers).
        ``what`` names the write for an error."""
        e = self.entries.get(id(x))
        if type(x) is np.ndarray:
            return self._writable_array(x, dx, what)
        if e is not None:
            return e[1]
        if isinstance(x, list):
            d = list(dx) if dx is not None else [None] * len(x)
        else:  # a dict, or an object's fields
            d = dict(dx) if dx is not None else {}
        self._enter(x, d)
        return d

    def _enter(self, x, d):
        e = self.entries[id(x)] = (x, d)
        if self.located is not None:
            self.located.setdefault(id(x), user_location())
        return e

    def _writable_array(self, x, dx, what):
        if x.dtype.kind not in "fc":
            return None
        r = root(x)
        e = self.entries.get(id(r))
        if e is None and self.batch:
            if x is not r:  # (the tangents of the rest of its root are not known here)
                raise abandon(self.batch)
            d = self.batch.zeros(r)
            if dx is not None:
                d[...] = dx
            e = self._enter(r, d)
        if e is None:
            if not (r.flags.c_contiguous or r.flags.f_contiguous):
                raise _unsupported(what, "an array that does not own contiguous memory")
            d = np.zeros_like(r)
            if dx is not None and (x is r or x.size == r.size):
                region(d, r, x)[...] = dx
            elif dx is not None:
                d[...] = _root_tangent(r, x, dx, what)
            e = self._enter(r, d)
        return self._region(e[1], r, x)

    def set_tangent(self, x, dx):
        """``x`` was replaced wholesale in place (``a[...] = v`` of every element, a list
        cleared and refilled): its tangent is ``dx``."""
        self._enter(x, dx)


def _root_tangent(r, x, dx, what):
    """The tangent of all of root ``r``, from the tangent ``dx`` of its part ``x``: the
    array ``dx`` is a view of, when that is laid out like ``r`` and ``dx`` is the same view."""
    dr = root(dx) if type(dx) is np.ndarray else None
    if dr is not None and dr.shape == r.shape and dr.strides == r.strides and dx.strides == x.strides \
            and _offset(dx, dr) == _offset(x, r):
        return dr
    raise _unsupported(what, "a view (slice, reshape, transpose) of an array whose tangent is not "
                             "known here; write into the array itself, or into a copy")


def _offset(a, r):
    return a.__array_interface__["data"][0] - r.__array_interface__["data"][0]


class ForwardModeError(Refusal, NotImplementedError):
    """A change in place that forward mode does not follow (yet), with the user's line."""


def _unsupported(what, why):
    file, line = user_location()
    return ForwardModeError(f"{file}:{line}: forward mode (jvp) cannot follow {what} into {why}")


_LOCAL = threading.local()
_NONE = TangentShadow()  # outside any computation: empty, and never written


def now(x, dx):
    """The tangent of ``x`` as the shadow holds it, if anything has been changed in place:
    for a read whose operand's tangent ``dx`` was taken before a change (another name for
    the object, a global, an argument changed by the caller), by `TangentShadow.latest`."""
    sh = getattr(_LOCAL, "shadow", _NONE)
    return sh.latest(x, dx) if sh.entries else dx


def current() -> TangentShadow:
    """The shadow of the forward-mode computation whose code runs as it is (not lifted
    by an outer forward mode: see `current_in`)."""
    return getattr(_LOCAL, "shadow", _NONE)


def current_in(depth: int) -> TangentShadow:
    """The shadow of the computation ``depth`` levels inside the one `current` gives.

    In nested forward mode, an outer level runs the inner level's code lifted: the
    outer's forward rules run as they are and read `current`, while the inner's code
    runs as the outer's primal, and its reads must see the inner level's shadow.  So
    the forward rule of ``current()`` is ``current_in(1)``, and those of
    ``current_in(k)`` and ``isolated_at(k, …)`` add one to ``k`` (runtime/nesting.py):
    each level's code reads its own shadow, however deep the nesting.
    """
    if depth == 0:
        return current()
    deeper = getattr(_LOCAL, "deeper", ())
    return deeper[depth - 1] if depth <= len(deeper) else _NONE


def lifted_levels() -> int:
    """How many forward-mode levels run lifted by an outer one (`current_in`)."""
    return len(getattr(_LOCAL, "deeper", ()))


def levels() -> int:
    """`utilities.nestlevel`: the gradient computations whose forward pass is running,
    and the forward-mode levels an outer one lifts."""
    return len(_stack()) - 1 + lifted_levels()  # (the bottom shadow: no computation)


class isolated_at:
    """``with isolated_at(depth, sh):`` a new forward-mode computation at ``depth``
    (see `current_in`) whose shadow is ``sh``; the levels inside it are its own."""

    __slots__ = ("depth", "sh", "saved")

    def __init__(self, depth, sh):
        self.depth, self.sh = depth, sh

    def __enter__(self):
        self.saved = getattr(_LOCAL, "shadow", None), getattr(_LOCAL, "deeper", ())
        if self.depth == 0:
            _LOCAL.shadow, _LOCAL.deeper = self.sh, ()
        else:
            _LOCAL.deeper = self.saved[1][:self.depth - 1] + (self.sh,)
        return self.sh

    def __exit__(self, *exc):
        shadow, _LOCAL.deeper = self.saved
        if shadow is None:
            del _LOCAL.shadow
        else:
            _LOCAL.shadow = shadow


@contextlib.contextmanager
def fresh():
    """A new shadow for one forward-mode computation (nested ones share the outer one)."""
    outer = getattr(_LOCAL, "shadow", None)
    if outer is not None:
        yield outer
        return
    _LOCAL.shadow = sh = TangentShadow()
    try:
        yield sh
    finally:
        del _LOCAL.shadow
