"""Rules written against a function's parameter names.

NumPy functions take differentiable values by keyword as often as by position
(``np.nan_to_num(x, nan=v)``, ``np.interp(x, xp, fp, left=a)``); `forward`
binds such keywords to their positions before it calls a rule (`runtime.binding`).  A
rule made with `by_name` is written against the parameter names and names its
gradients; this module lays them out by position.
"""
from __future__ import annotations

import inspect

from ..runtime.mutation import wrapping
from ..runtime.rules import Lazy

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def by_name(label):
    """Make a rule from ``body``, a Python function with the signature of the function
    ``label`` names (``"np.interp"``).  ``body(*args, **kw)`` returns ``(y, back)``, where
    ``back(dy)`` returns a dict from parameter names to zero-argument callables giving
    their gradients (as `Lazy`'s entries; a missing name has none).  The rule returns
    them in their positional slots.  An unknown keyword raises TypeError naming it and ``label``.
    An `Effect` pullback stays one (it runs without an output gradient)."""
    def make(body):
        sig = inspect.signature(body)
        names = [p.name for p in sig.parameters.values() if p.kind in _POSITIONAL]

        def r(*args, **kw):
            try:
                y, back = body(*args, **kw)
            except TypeError:
                try:
                    sig.bind(*args, **kw)
                except TypeError as bad:  # the call itself is wrong: say which function
                    raise TypeError(f"{label}(): {bad}") from None
                raise
            given = names[:len(args)]
            return y, wrapping(back, lambda dy: Lazy(None, *map(back(dy).get, given)))
        r.__doc__, r.__signature__ = body.__doc__, sig
        return r
    return make
