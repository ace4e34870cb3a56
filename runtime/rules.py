"""The rule registry: one rule format for every primitive.

A rule for ``f`` is called with ``f``'s arguments and returns ``(y, back)``:
``y`` is ``f(*args)`` and ``back(dy)`` returns a tuple of gradients — for ``f``
itself first, then one per positional argument (None where there is none), as in
Zygote.  ``dy`` is never None (the adjoint skips a pullback whose output has no
gradient) except for callables marked `effectful`.  Rules are found by the callable's identity.
"""
from __future__ import annotations

RULES: dict = {}
NOTES: dict = {}  # callable → the conditions under which its rule holds (for docs/numpy.md)
NONDIFF: set = set()
EFFECTFUL: set = set()
SPARSE: set = set()
STRUCTURED: set = set()
CHANGING: set = set()
CALLS: dict = {}  # a C type → a Python function calling its instances (differentiated instead)
SCALARS: dict = {}  # callable → "scalar" | "arith" | "range" (see `scalar_kind`)


def rule(*fs, note=None):
    """Register the decorated function as the rule of each callable in ``fs``::

        @rule(math.sin)
        def _(x):
            return math.sin(x), lambda dy: (None, dy * math.cos(x))

    ``note`` states conditions the rule needs (``"distinct eigenvalues"``).
    """
    def register(r):
        for f in fs:
            RULES[f] = r
            if note:
                NOTES[f] = note
        return r
    return register


class Lazy:
    """A pullback result whose gradients are computed when read.

    The adjoint reads only the gradients of active arguments, so with
    ``Lazy(None, lambda: d @ B.T, lambda: A.T @ d)`` as the pullback of
    ``A @ B``, the gradient of data nobody differentiates is never computed.
    Entries are zero-argument callables, or None.
    """

    __slots__ = ("thunks",)

    def __init__(self, *thunks):
        self.thunks = thunks

    def __getitem__(self, i):
        t = self.thunks[i]
        if t is None:
            return None
        if type(i) is slice:
            return Lazy(*t)
        return t()

    def __len__(self):
        return len(self.thunks)

    def __iter__(self):
        return (self[i] for i in range(len(self.thunks)))


def called_as(t, call):
    """Instances ``obj`` of the C type ``t`` are differentiated as ``call(obj, *args)``
    (Python code doing what ``t.__call__`` does), e.g. ``functools.partial``."""
    CALLS[t] = call


def nondifferentiable(*fs):
    """Mark callables whose results never carry a gradient; they run plainly."""
    NONDIFF.update(fs)
    return fs[0] if fs else None


def effectful(*fs):
    """Mark callables whose pullbacks must run even when their result has no
    gradient, because they act through a side channel (a cell, a shadow); such
    pullbacks accept ``dy=None``."""
    EFFECTFUL.update(fs)


def changes_arguments(*fs):
    """Mark callables that may change their arguments in place (``operator.iadd`` on an
    array) without needing to run their pullbacks when nothing reaches them: what the
    arguments were read from becomes a hazard, so its later reads are active."""
    CHANGING.update(fs)


def is_changing(f) -> bool:
    return _member(f, CHANGING)


def sparse_gradients(*fs):
    """Mark callables whose pullbacks may return a sparse (`OneHot`) gradient for an
    argument; the adjoint densifies only those arguments' gradients."""
    SPARSE.update(fs)


def takes_structured(*fs):
    """Mark callables whose pullbacks accept a structured gradient (`algebra.Eye`)
    as it is; every other pullback gets it made dense."""
    STRUCTURED.update(fs)


def returns_scalars(kind, *fs):
    """Declare what ``fs`` return, for the analysis that tells immutable numbers (which
    no change in place can reach) from objects: ``"scalar"``, always an int, float or
    bool (``len``, ``math.sin``); ``"arith"``, one when every operand is one
    (``operator.add``); ``"range"``, a range, whose iteration yields ints."""
    for f in fs:
        SCALARS[f] = kind


def scalar_kind(f):
    try:
        return SCALARS.get(f)
    except TypeError:  # unhashable callable
        return None


def _member(f, s) -> bool:
    try:
        return f in s
    except TypeError:  # unhashable callable
        return False


def is_nondiff(f) -> bool:
    return _member(f, NONDIFF)


def is_effectful(f) -> bool:
    return _member(f, EFFECTFUL)


def is_sparse(f) -> bool:
    return _member(f, SPARSE)


def is_structured(f) -> bool:
    return _member(f, STRUCTURED)


_NOGRAD = {}


def nograd(n: int):
    """The pullback of a call with ``n`` arguments through which no gradient flows."""
    pb = _NOGRAD.get(n)
    if pb is None:
        zeros = (None,) * (n + 1)
        pb = _NOGRAD[n] = lambda dy: zeros
    return pb


def rule_for(f):
    """The rule of ``f``, or None."""
    try:
        return RULES.get(f)
    except TypeError:
        return None
