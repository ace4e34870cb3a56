"""Calls of rules with keyword arguments: keywords and positions are the same thing.

A rule is written against positions (``back(dy)`` gives one gradient per positional
argument), while the adjoint reads a keyword argument's gradient from a trailing dict
(`algebra.kwgrad`).  `call_with_keywords` moves each keyword that names a positional
parameter of the callable's signature into its position (the skipped positions get
the signature's defaults), calls the rule, and hands the moved arguments' gradients
back in the trailing dict, so a value gets the same gradient either way.  Keywords
that stay keywords (keyword-only parameters, ``**kwargs``) reach the rule as they
are; asking for the gradient of one the rule does not give is an error, never a
silent zero.
"""
from __future__ import annotations

import inspect

from ..ir.errors import Refusal
from .algebra import is_differentiable
from .errors import full_name
from .rules import Lazy

_EMPTY = inspect.Parameter.empty
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class KeywordGradientError(Refusal, TypeError):
    """The gradient of a keyword argument that the callable's rule does not give."""


def _plan(f, r):
    """``(positions, defaults)`` of ``f``'s positional parameters that a keyword may
    name (``r.like``'s signature if given), or () when there is no signature."""
    if r.plan is None:
        try:
            ps = [p for p in inspect.signature(r.like or f).parameters.values() if p.kind in _POSITIONAL]
        except (TypeError, ValueError):  # a C callable without a text signature
            r.plan = ()
        else:
            index = {p.name: i for i, p in enumerate(ps)
                     if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD}
            r.plan = (index, tuple(p.default for p in ps))
    return r.plan


def bind(f, r, args, kw):
    """``(args, kw, moved)``: the call with the keywords that name positions moved there,
    ``moved`` mapping each such keyword to its position; None when a skipped position
    has no default (the call is left as it is, to fail as it would)."""
    plan = _plan(f, r)
    if not plan:
        return args, kw, {}
    index, defaults = plan
    n, moved = len(args), {}
    for k in kw:
        i = index.get(k, index.get(r.aliases.get(k)))
        if i is not None and i >= n and i not in moved.values():
            moved[k] = i
    if not moved:
        return args, kw, moved
    at = {i: k for k, i in moved.items()}
    new = list(args)
    for i in range(n, max(at) + 1):
        if i in at:
            new.append(kw[at[i]])
        elif defaults[i] is _EMPTY:
            return None
        else:
            new.append(defaults[i])
    return tuple(new), {k: v for k, v in kw.items() if k not in moved}, moved


def call_with_keywords(f, r, args, kw):
    """``f(*args, **kw)`` through its `Rule` ``r``, with keywords bound to positions."""
    from .mutation import wrapping  # (mutation imports the registry)
    b = bind(f, r, args, kw)
    if b is None:
        return r.fn(*args, **kw)
    new, rest, moved = b
    y, pb = r.fn(*new, **rest)
    n, m = len(args), len(new)
    kept = {k: v for k, v in rest.items() if k not in r.keywords}

    def back(dy):
        g = pb(dy)
        memo = []

        def named():
            if not memo:
                given = g[m + 1] if rest and len(g) > m + 1 else None
                memo.append(_Keywords(f, kept, given, {k: g[1 + i] for k, i in moved.items()}))
            return memo[0]
        return Lazy(*((lambda i=i: g[i]) for i in range(n + 1)), named)
    return y, wrapping(pb, back)


class _Keywords(dict):
    """The gradients of a call's keyword arguments, as the adjoint reads them; reading
    that of a keyword the rule says nothing about raises `KeywordGradientError`."""

    def __init__(self, f, kept, given, moved):
        super().__init__(given or {})
        self.update((k, v) for k, v in moved.items() if v is not None)
        self.unknown = frozenset(k for k, v in kept.items() if k not in self and is_differentiable(v))
        self.f = f

    def get(self, name, default=None):
        if name in self.unknown:
            raise KeywordGradientError(_unknown_message(self.f, name))
        return super().get(name, default)


def _unknown_message(f, name):
    full, fname = full_name(f), getattr(f, "__qualname__", None) or getattr(f, "__name__", repr(f))
    return (f"{full}(..., {name}=...): the rule of {full} gives no gradient for the keyword "
            f"argument {name!r}, and a differentiable value was passed there. Pass a constant "
            f"(bytegrad.stop_gradient(value)) if it should get none, or register a rule with "
            f"bytegrad.rule({fname}, override=True) whose pullback returns the trailing dict "
            f"{{{name!r}: gradient}}")
