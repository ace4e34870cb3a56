"""The public way to give a callable your own derivative: ``bytegrad.rule`` and
``bytegrad.defrule``.

A rule for ``f`` is called with ``f``'s arguments and returns ``(y, back)``:
``y`` is ``f(*args)`` and ``back(dy)`` returns a tuple with the gradient of ``f``
itself first (None unless ``f`` holds differentiable data, e.g. a closure), then
one gradient per positional argument (None where there is none)::

    import math, bytegrad

    def softplus(x):
        return math.log1p(math.exp(x))

    @bytegrad.rule(softplus)
    def _(x):
        return softplus(x), lambda dy: (None, dy / (1.0 + math.exp(-x)))

    bytegrad.defrule(softplus, my_rule)      # the same, without a decorator

A rule wins over everything else: it replaces the transform of a Python
function, gives a C function (a ufunc, a ``math`` function) a derivative, and
applies to a method (``bytegrad.rule(Base.method)`` covers ``obj.method(x)`` for
instances of subclasses that do not override it; ``self`` is then the first
argument) and to a callable object's ``__call__`` (``bytegrad.rule(Model.__call__)``).
Rules are looked up when a function is first transformed: register them before
the first gradient that uses them.  Check a rule with `bytegrad.testing.check_rule`.

Rules registered here are wrapped so that a pullback returning something other
than a tuple of the right length raises `RuleError` naming the rule and the
callee; the library's own rules (`runtime.rules.rule`) are not wrapped.
"""
from __future__ import annotations

import functools
import types

from . import rules
from .errors import full_name
from .rules import Lazy


class RuleError(TypeError):
    """A user rule returned something that is not ``(y, back)`` or whose pullback
    returned the wrong number of gradients."""


def rule(*fs, note=None, override=False):
    """Register the decorated function as the rule of each callable in ``fs``;
    returns the rule unchanged (so it can be called or tested directly)::

        @bytegrad.rule(np.sinc)
        def _(x):
            y = np.sinc(x)
            return y, lambda dy: (None, dy * dsinc(x))

    ``back(dy)`` returns ``(d_f, d_arg1, …, d_argN)``: N+1 entries for a call with N
    positional arguments (for ``Base.method`` called as ``obj.method(x)``, N counts
    ``self``).  A keyword argument that names a positional parameter of the callable's
    signature reaches the rule in its position (``f(x, scale=s)`` calls the rule with
    ``(x, s)``); keyword-only ones stay keywords, and ``back`` then adds one more entry,
    a dict of their gradients (a differentiable keyword missing from it is an error).  ``note`` states conditions the rule needs (``"x > 0"``).  A callable that
    already has a rule (one of bytegrad's, or yours) keeps it: registering another raises
    `DuplicateRuleError` unless ``override=True``.
    """
    if not fs:
        raise TypeError("bytegrad.rule needs the callable(s) to register for: "
                        "@bytegrad.rule(f), not @bytegrad.rule")
    for f in fs:
        _check_target(f)
    if not override:
        rules.refuse_duplicates(fs)

    def register(r):
        for f in fs:
            rules.rule(f, note=note, override=True)(_checked(r, f))
        return r
    return register


def defrule(f, r, note=None, override=False):
    """``defrule(f, r)`` registers ``r`` as the rule of ``f``, like
    ``@rule(f)`` on ``r``; for rules made by a function or a lambda::

        bytegrad.defrule(scipy.special.ndtr,
                         lambda x: (ndtr(x), lambda dy: (None, dy * normal_pdf(x))))
    """
    return rule(f, note=note, override=override)(r)


def _check_target(f):
    """Refuse what a rule could never be found for; cheap, at registration."""
    if not callable(f):
        raise TypeError(f"bytegrad.rule: {f!r} is not callable")
    try:
        hash(f)
    except TypeError:
        raise TypeError(f"bytegrad.rule: {f!r} is unhashable, and rules are found by identity") from None
    bound = isinstance(f, types.MethodType) or (
        isinstance(f, types.BuiltinMethodType) and f.__self__ is not None
        and not isinstance(f.__self__, types.ModuleType))
    if bound:  # obj.m is a new object on each access; calls are looked up by the function
        target = getattr(f, "__func__", None)
        fix = target.__qualname__ if target is not None else f"{type(f.__self__).__name__}.{f.__name__}"
        if isinstance(f.__self__, type):
            fix += ".__func__"
        raise TypeError(f"bytegrad.rule: {full_name(f)} is a bound method, made anew on each access, "
                        f"so a rule for it would never be found; register the function itself: "
                        f"bytegrad.rule({fix}), whose first argument is self")


def _checked(r, f):
    """``r`` with its result and its pullback's result checked (``f`` names the callee)."""
    @functools.wraps(r)
    def checked(*args, **kw):
        out = r(*args, **kw)
        if not (isinstance(out, tuple) and len(out) == 2 and callable(out[1])):
            raise RuleError(f"the rule {full_name(r)} of {full_name(f)} returned {_describe(out)}; a rule "
                            f"returns a pair (y, back) with back(dy) → (d_f, d_arg1, …)")
        y, back = out
        return y, _checked_back(back, r, f, len(args), bool(kw))
    return checked


def _checked_back(back, r, f, n, keywords):
    def checked_back(dy):
        g = back(dy)
        if not isinstance(g, (tuple, Lazy)) or len(g) not in (n + 1, n + 1 + keywords):
            raise RuleError(_back_message(r, f, n, g))
        return g
    return checked_back


def _back_message(r, f, n, g):
    ds = ", ".join(["None"] + [f"d{i}" for i in range(1, n + 1)]) + ("," if n == 0 else "")
    return (f"the pullback of the rule {full_name(r)} of {full_name(f)} returned {_describe(g)}, "
            f"but this call has {n} positional argument(s), so it must return a tuple of "
            f"{n + 1}: the gradient of {full_name(f)} itself (None for a plain function) and one "
            f"per argument, e.g. `lambda dy: ({ds})`")


def _describe(x):
    if isinstance(x, (tuple, Lazy)):
        return f"a tuple of {len(x)}"
    return f"a {type(x).__name__} ({x!r:.60})"
