"""Rules written against a function's parameter names.

NumPy functions take differentiable values by keyword as often as by position
(``np.nan_to_num(x, nan=v)``, ``np.interp(x, xp, fp, left=a)``), and the adjoint
reads a keyword argument's gradient from a trailing dict (`algebra.kwgrad`).  A
rule made with `by_name` names its gradients and leaves their layout to this module,
so a value passed either way gets its gradient.
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
    them as the call passed the arguments: positional ones in their slots, keyword ones
    in the trailing dict.  An unknown keyword raises TypeError naming it and ``label``.
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

            def laid_out(dy):
                thunks = back(dy)
                pos = [thunks.get(n) for n in given]
                if not kw:
                    return Lazy(None, *pos)
                named = {k: thunks[k] for k in kw if thunks.get(k) is not None}
                return Lazy(None, *pos, (lambda: {k: t() for k, t in named.items()}) if named else None)
            return y, wrapping(back, laid_out)
        r.__doc__ = body.__doc__
        return r
    return make
