"""The rule registry: one rule format for every primitive.

A rule for ``f`` is called with ``f``'s arguments and returns ``(y, back)``:
``y`` is ``f(*args)`` and ``back(dy)`` returns a tuple of gradients — for ``f``
itself first, then one per positional argument (None where there is none), as in
Zygote.  ``dy`` is never None (the adjoint skips a pullback whose output has no
gradient) except for callables marked `effectful`.  Rules are found by the callable's identity.
"""
from __future__ import annotations

RULES: dict = {}
NONDIFF: set = set()
EFFECTFUL: set = set()
SPARSE: set = set()


def rule(*fs):
    """Register the decorated function as the rule of each callable in ``fs``::

        @rule(math.sin)
        def _(x):
            return math.sin(x), lambda dy: (None, dy * math.cos(x))
    """
    def register(r):
        for f in fs:
            RULES[f] = r
        return r
    return register


def nondifferentiable(*fs):
    """Mark callables whose results never carry a gradient; they run plainly."""
    NONDIFF.update(fs)
    return fs[0] if fs else None


def effectful(*fs):
    """Mark callables whose pullbacks must run even when their result has no
    gradient, because they act through a side channel (a cell, a shadow); such
    pullbacks accept ``dy=None``."""
    EFFECTFUL.update(fs)


def sparse_gradients(*fs):
    """Mark callables whose pullbacks may return a sparse (`OneHot`) gradient for an
    argument; the adjoint densifies only those arguments' gradients."""
    SPARSE.update(fs)


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
