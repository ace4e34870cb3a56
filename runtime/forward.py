"""`forward(f, *args)`: run ``f`` and return its value and a pullback.

A callable with a rule answers from the rule.  A Python function (also a bound
method, closure, lambda or callable object) is lifted, transformed and emitted
once per code object, and then runs as compiled forward code that records a
tape; its `Pullback` runs the compiled adjoint over that tape.
"""
from __future__ import annotations

import inspect
import sys
import types

from ..ir import lift
from ..ir.emit import emit
from ..transforms.reverse import transform
from . import algebra
from .errors import NoRuleError
from .rules import RULES, is_effectful, is_nondiff, is_sparse, nograd, rule_for


class _Hooks:
    """What the transforms insert into generated code."""

    accum = staticmethod(algebra.accum)
    unwrap = staticmethod(algebra.unwrap)
    kwgrad = staticmethod(algebra.kwgrad)
    nondiff = staticmethod(is_nondiff)
    effectful = staticmethod(is_effectful)
    rule_for = staticmethod(rule_for)
    sparse = staticmethod(is_sparse)


class Pullback:
    """The pullback of one call of a transformed function: its tape and its adjoint.

    ``back(dy)`` returns ``(d_callee, d_arg1, …)``; it may be called many times.
    """

    __slots__ = ("adjoint", "tape", "unbind")

    def __init__(self, adjoint, tape, unbind=None):
        self.adjoint, self.tape, self.unbind = adjoint, tape, unbind

    def __call__(self, dy):
        g = self.adjoint(reversed(self.tape).__next__, dy)
        return g if self.unbind is None else self.unbind(g)

    def __repr__(self):
        return f"<Pullback {self.adjoint.__code__.co_name[len('adjoint_'):]}: {len(self.tape)} entries>"


class Compiled:
    """The transformed code of one code object."""

    def __init__(self, code, globals_):
        self.code = code
        self.stages = transform(lift(code), _Hooks, globals_)
        self.forward_code = emit(self.stages.forward)
        self.adjoint = types.FunctionType(emit(self.stages.adjoint), {})
        m = self.stages.lifted.meta
        self.simple = not (m.varargs or m.varkw or code.co_kwonlyargcount)
        self.nargs = code.co_argcount
        self._forwards = {}

    def forward_for(self, globals_):
        fn = self._forwards.get(id(globals_))
        if fn is None:
            fn = self._forwards[id(globals_)] = types.FunctionType(self.forward_code, globals_)
            fn._keep = globals_
        return fn


_CACHE: dict = {}


def compiled(f) -> Compiled:
    """The transformed code of function ``f``, made on first use."""
    code = f.__code__
    c = _CACHE.get(code)
    if c is None:
        c = _CACHE[code] = Compiled(code, f.__globals__)
    return c


def _bind(f, c, args, kw):
    """Parameters in code order for a call with keywords, defaults or ``*args``;
    and a function mapping parameter gradients back to the call's arguments."""
    sig = inspect.signature(f)
    ba = sig.bind(*args, **kw)
    ba.apply_defaults()
    names = list(sig.parameters)
    params = [ba.arguments[n] for n in names]
    kinds = [sig.parameters[n].kind for n in names]
    npos = len(args)

    def unbind(g):
        flat, kwg = [g[0]], {}
        for name, kind, d, p in zip(names, kinds, g[1:], params):
            if kind is inspect.Parameter.VAR_POSITIONAL:
                flat += list(d) if d is not None else [None] * len(p)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                if d:
                    kwg.update(d)
            elif name in kw:
                kwg[name] = d
            else:
                flat.append(d)
        flat = flat[:npos + 1] + [None] * (npos + 1 - len(flat))
        return tuple(flat) + ((kwg,) if kw else ())
    return params, unbind


def call_function(f, args, kw):
    c = _CACHE.get(f.__code__) or compiled(f)
    if kw or not c.simple or len(args) != c.nargs:
        params, unbind = _bind(f, c, args, kw)
    else:
        params, unbind = args, None
    y, tape = c.forward_for(f.__globals__)(f, *params)
    return y, Pullback(c.adjoint, tape, unbind)


def _drop_callee(pb):
    """For ``obj.m(x)`` run as ``C.m(obj, x)``: the gradient of ``obj`` is the method's."""
    return lambda dy: pb(dy)[1:]


def forward(f, *args, **kw):
    """``(f(*args, **kw), pullback)``."""
    try:
        r = RULES.get(f)
    except TypeError:  # an unhashable callable has no rule
        r = None
    if r is not None:
        return r(*args, **kw)
    t = type(f)
    if t is types.FunctionType:
        return call_function(f, args, kw)
    if t is types.MethodType:
        y, pb = forward(f.__func__, f.__self__, *args, **kw)
        return y, _drop_callee(pb)
    if t is types.BuiltinMethodType and not isinstance(f.__self__, types.ModuleType):
        unbound = getattr(type(f.__self__), f.__name__, None)
        r = RULES.get(unbound) if unbound is not None else None
        if r is not None:
            y, pb = r(f.__self__, *args, **kw)
            return y, _drop_callee(pb)
    elif not isinstance(f, type) and hasattr(type(f), "__call__") and \
            type(type(f).__call__) is types.FunctionType:
        y, pb = forward(type(f).__call__, f, *args, **kw)
        return y, _drop_callee(pb)
    return _plain(f, args, kw)


def _plain(f, args, kw):
    """A callable with neither rule nor bytecode: fine while no gradient can reach it."""
    if is_nondiff(f) or not any(map(algebra.is_differentiable, args + tuple(kw.values()))):
        return f(*args, **kw), nograd(len(args))
    frame = sys._getframe(1)
    while frame.f_code.co_filename == __file__:
        frame = frame.f_back
    raise NoRuleError(f, frame.f_code.co_filename, frame.f_lineno)

_Hooks.forward = staticmethod(forward)
