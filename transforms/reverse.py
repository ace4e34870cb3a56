"""The whole AD transform: a short composition of the passes.

    lifted ──unify_returns──resolve_modules──(private_changes)──▶ primal ──activity──▶ active set
                                 ├──register──▶ forward IR
                                 └──adjoint───▶ adjoint IR
"""
from __future__ import annotations

from dataclasses import dataclass

import builtins
import types

from ..ir import IR, Global
from ..ir.simplify import simplify
from .activity import activity
from .adjoint import adjoint
from .modules import resolve_modules
from .private import private_changes
from .kept import kept
from .register import register
from .returns import unify_returns


@dataclass
class Stages:
    lifted: IR
    primal: IR
    forward: IR
    adjoint: IR


def transform(lifted, hooks, globals_=None, wrt=None, numeric=()) -> Stages:
    """Forward and adjoint IR of ``lifted``.

    ``hooks`` supplies what the passes insert but do not define (they know no
    runtime): ``forward``, ``forward_soft``, ``rule_for``, ``watching`` and ``kept_watching``
    (the states ``ops.watch`` consults), ``accum``, ``unwrap``, ``kwgrad``,
    ``changeable`` (whether a global's value may be changed in place), ``changing`` (the
    callee may change its arguments in place), ``scalar_kind`` (whether the callee
    returns immutable numbers), ``taped`` (the callee's rules that put values on the tape),
    ``reads``, ``view`` and ``methods`` (what the callee does with its operands: `kept`), and
    the predicates
    ``nondiff`` (the callee's result carries no gradient), ``effectful`` (its
    pullback must always run) and ``sparse`` (its pullback may return a one-hot
    gradient for its first argument).  Globals are resolved in ``globals_`` to decide
    activity, so a call of a global ``len`` or ``range`` stays a plain call.
    ``wrt`` lists the entry arguments (0 is the function itself) whose gradients
    are wanted; by default all.  ``numeric`` lists the entry arguments that are arrays or
    numbers (the call's types: the cache keeps a transform per list), for `kept`.
    """
    primal, active, h = prepare(lifted, hooks, globals_, wrt)
    fwd = simplify(register(primal, active, h, kept(primal, h.reads, h.view, h.methods, numeric)))
    adj = adjoint(primal, active, h)
    return Stages(lifted, primal, fwd, adj)


def prepare(lifted, hooks, globals_=None, wrt=None, private=False):
    """``(primal, active, resolving hooks)``: what every AD pass starts from (see `transform`);
    ``private``: for the tangent code nested differentiation lifts (`private_changes`)."""
    primal = unify_returns(lifted)
    if hasattr(globals_, "attribute"):  # (the runtime's view of the globals, which records)
        primal = resolve_modules(primal, globals_.attribute)
    if private:
        primal = private_changes(primal, lambda x: resolve(x, globals_))
    h = _Resolving(hooks, globals_)
    active = activity(primal, h.nondiff, hooks.effectful, wrt, h.changeable, h.changing,
                      h.scalar_kind, h.settled, h.python_code)
    return primal, active, h


class _Resolving:
    """``hooks`` whose predicates about a callee (or a global's value) ask about what a
    `Global` names (the cache makes a new transform if the global is rebound)."""

    _ABOUT = ("nondiff", "changeable", "changing", "scalar_kind", "sparse", "reads", "view", "methods")

    def __init__(self, hooks, globals_):
        self.hooks, self.globals = hooks, globals_
        for name in self._ABOUT:
            setattr(self, name, lambda f, ask=getattr(hooks, name): ask(resolve(f, globals_)))

    def __getattr__(self, name):
        return getattr(self.hooks, name)

    def python_code(self, f) -> bool:
        """Whether global ``f`` names Python code, which may read other globals: a
        function, or a class of Python code (not a builtin such as ``ValueError``)."""
        v = resolve(f, self.globals)
        return isinstance(v, types.FunctionType) or \
            isinstance(v, type) and v.__module__ != "builtins" and not issubclass(v, BaseException)

    def settled(self, f) -> bool:
        """Whether ``f`` changes none of its arguments (``range``, ``len``: no gradient, or
        a number), unlike code that might (a user's function, or a rule that calls one)."""
        return self.nondiff(f) or self.scalar_kind(f) is not None


def resolve(x, globals_):
    """The value a `Global` names now (None if unbound); other operands as they are."""
    if not isinstance(x, Global):
        return x
    if globals_ is not None and x.name in globals_:
        return globals_[x.name]
    return getattr(builtins, x.name, None)
