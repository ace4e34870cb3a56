"""`jvp_call(f, df, dargs, *args)`: run ``f`` and return its value and its tangent.

The forward-mode counterpart of `forward.forward`, dispatching the same way: a
callable with a forward rule answers from it; a Python function (also a bound
method, closure, callable object or class) is lifted, transformed into tangent code
and emitted once per code object; a callable with only a reverse rule gets a forward
rule derived from it; one with neither runs plainly while every tangent it is given
is zero.  While something has been changed in place, arguments' and results'
tangents are read from the tangent shadow (`tangents.TangentShadow`).
"""
from __future__ import annotations

import inspect
import types
from typing import NamedTuple

import numpy as np

from ..ir import lift
from ..ir.emit import emit
from ..transforms.private import as_constructor
from ..transforms.tangent import transform_tangent
from . import batching, forward as fw
from .binding import bind
from .cache import Cache, still_decided
from .errors import full_name, user_location
from .frules import NoForwardRuleError, derived, frule_for
from .generators import TangentGenerator
from .rules import CALLS, Rule, nondifferentiable, record_of
from .tangents import ForwardModeError, current, now


class TangentCompiled:
    """The tangent code of one code object, for the globals it was decided in."""

    def __init__(self, code, reading, variant=None):
        v = variant or Variant()
        lifted = lift(code)
        if v.constructor:
            lifted = as_constructor(lifted)
        self.generator = lifted.meta.generator  # (its tangent code yields (item, tangent) pairs)
        self.stages = transform_tangent(lifted, _BatchedHooks if v.batched else _Hooks, reading, v.nested)
        self.still_decided = still_decided(reading.decided())
        self.tangent_code = emit(self.stages.tangent)
        m = self.stages.lifted.meta
        self.arity = -1 if m.varargs or m.varkw or code.co_kwonlyargcount else code.co_argcount - v.constructor


class Variant(NamedTuple):
    """Which tangent code of a function: ``batched``, every call through `jvp_call`
    (runtime/batching.py); ``nested``, the code nested differentiation lifts, where a
    list, array or object made in it passes its changes on as values
    (transforms/private.py); ``constructor``, an ``__init__``'s code as its class's call."""

    batched: bool = False
    nested: bool = False
    constructor: bool = False


_CACHE = Cache(TangentCompiled)

# the variant of (nested, batched): the plain one None (the cache's key of the code alone)
VARIANTS = {(n, b): Variant(b, n) if n or b else None for n in (False, True) for b in (False, True)}
NESTED, NESTED_BATCHED = VARIANTS[True, False], VARIANTS[True, True]


def compiled_tangent(f, variant=None) -> TangentCompiled:
    """The tangent code of Python function ``f``, made on first use."""
    return _CACHE.get(f.__code__, f.__globals__, variant)


def constructor(cls, n, kw, variant):
    """The tangent code of the call ``cls(*args)`` of ``n`` arguments, in ``variant``
    (`NESTED`, `NESTED_BATCHED`), as a function: ``__init__``'s, where ``self`` is made
    and passed on from write to write (transforms/private.py), called ``tf(cls, *args,
    dcls, *dargs)``; None where ``cls`` is not a class of plain objects whose ``__init__``
    (no closure: ``super()``'s cell) takes exactly those arguments by position."""
    init = cls.__init__
    if kw or type(cls).__call__ is not type.__call__ or cls.__new__ is not object.__new__ \
            or type(init) is not types.FunctionType:
        return None
    code = init.__code__
    if code.co_freevars or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) \
            or code.co_kwonlyargcount or code.co_argcount != n + 1:
        return None
    c = _CACHE.get(code, init.__globals__, variant._replace(constructor=True))
    return types.FunctionType(c.tangent_code, init.__globals__)


def jvp_call(f, df, dargs, /, *args, **kw):
    """``(f(*args, **kw), its tangent)`` given the tangents ``df`` of ``f`` and
    ``dargs`` of the positional arguments (keywords' tangents are zero)."""
    return jvp_call_kw(f, df, dargs, None, *args, **kw)


def jvp_call_kw(f, df, dargs, dkw, /, *args, **kw):
    """`jvp_call` with ``dkw``, the keywords' tangents (a dict, or None: all zero)."""
    sh = current()
    if sh.entries:
        dargs = tuple(map(sh.refresh, args, dargs))
        if kw:  # (a keyword's tangent is known statically only if it was nonzero there)
            dkw = {k: sh.refresh(v, (dkw or {}).get(k)) for k, v in kw.items()}
    fr = frule_for(f)
    if fr is not None and not kw:
        y, dy = fr(dargs, *args) if not sh.batch else batching.call(sh.batch, f, fr, record_of(f), dargs, args)
    elif type(f) is types.FunctionType and fr is None and record_of(f) is None:
        # a Python function, inline: one frame less per level of a recursion
        c = _CACHE.get(f.__code__, f.__globals__, VARIANTS[sh.nested, sh.batch is not None])
        if kw or len(args) != c.arity:
            params, dparams = _bind(f, args, kw, dargs, dkw or {})
        else:
            params, dparams = args, dargs
        y = types.FunctionType(c.tangent_code, f.__globals__)(f, *params, df, *dparams)
        if c.generator:
            if sh.batch:  # (its items' tangents are taken one at a time)
                raise batching.abandon(sh.batch)
            y = dy = TangentGenerator(y, f.__qualname__)
        else:
            y, dy = y
    else:
        y, dy = _dispatch(f, df, dargs, dkw or {}, args, kw)
    if sh.entries:
        dy = sh.refresh(y, dy)
    return y, dy


def _dispatch(f, df, dargs, dkw, args, kw):
    if kw.get("out") is not None and not getattr(record_of(f), "passes", False):
        return _with_out(f, df, dargs, dkw, args, kw)
    fr = frule_for(f)
    if fr is not None:
        return _with_keywords(f, fr, dargs, dkw, args, kw)
    r = record_of(f)
    if r is not None and r.nondiff:
        return f(*args, **kw), None
    if r is not None and r.fn is not None:
        return _with_keywords(f, derived(f, r), dargs, dkw, args, kw)
    t = type(f)
    if t is types.MethodType:
        dself = current().refresh(f.__self__, df)
        return jvp_call_kw(f.__func__, None, (dself,) + dargs, dkw, f.__self__, *args, **kw)
    if fw.c_bound(f, t):
        unbound = fw._c_method(f)
        if unbound is fw._COUNT:
            return f(*args, **kw), None
        if unbound is not None:
            dself = current().refresh(f.__self__, df)
            return jvp_call_kw(unbound, None, (dself,) + dargs, dkw, f.__self__, *args, **kw)
    if (t is types.WrapperDescriptorType or t is types.MethodDescriptorType) and args and \
            type(args[0]) is f.__objclass__ and f.__name__ in fw._ITEM_METHODS:
        return jvp_call_kw(fw._ITEM_METHODS[f.__name__], None, dargs, dkw, *args, **kw)
    if not isinstance(f, type) and type(getattr(type(f), "__call__", None)) is types.FunctionType:
        return jvp_call_kw(type(f).__call__, None, (df,) + dargs, dkw, f, *args, **kw)
    if t in CALLS:
        return jvp_call_kw(CALLS[t], None, (df,) + dargs, dkw, f, *args, **kw)
    if isinstance(f, type) and issubclass(f, BaseException):  # its arguments: a message, mostly
        e = f(*args, **kw)
        if any(d is not None for d in (*dargs, *dkw.values())):
            current().raised[id(e)] = (e, user_location(), args, dargs)  # (see tangent_objects)
        return e, None
    if isinstance(f, type) and fw._user_class(f):
        sh = current()
        made = sh.nested and constructor(f, len(args), kw, VARIANTS[True, sh.batch is not None])
        return made(f, *args, df, *dargs) if made else _construct(f, dargs, dkw, args, kw)
    if all(d is None for d in dargs) and not any(d is not None for d in dkw.values()):
        return f(*args, **kw), None
    raise NoForwardRuleError(f, "it has no forward rule, no reverse rule and no Python bytecode")


def _with_out(f, df, dargs, dkw, args, kw):
    """``f(*args, out=o)``: the result computed apart, then written into ``o`` (an array,
    or a tuple of one), whose tangent in the shadow takes the result's."""
    out = kw["out"]
    o = out[0] if type(out) is tuple and len(out) == 1 else out
    if type(o) is not np.ndarray:
        raise NoForwardRuleError(f, "out= is followed for one output array only")
    sh = current()
    rest = {k: v for k, v in kw.items() if k != "out"}
    y, dy = _dispatch(f, df, dargs, {k: v for k, v in dkw.items() if k != "out"}, args, rest)
    t = sh.writable(o, sh.refresh(o, dkw.get("out")), f"{full_name(f)}(..., out=...)")
    o[...] = y
    if t is not None:
        t[...] = 0.0 if dy is None else dy
    return out, sh.refresh(o, None) if out is o else (sh.refresh(o, None),)


_PLANS: dict = {}  # callables with a forward rule and no `Rule` record: how keywords bind


def _with_keywords(f, fr, dargs, dkw, args, kw):
    """``fr(dargs, *args)`` for a call with keywords: those that name positional
    parameters move there with their tangents; a nonzero tangent of one that stays a
    keyword is refused."""
    if not kw:
        return _called(f, fr, dargs, args, {})
    r = record_of(f) or _PLANS.setdefault(f, Rule())
    b = bind(f, r, args, kw)
    new, rest, moved = (args, kw, {}) if b is None else b
    ds = list(dargs) + [None] * (len(new) - len(args))
    for k, i in moved.items():
        ds[i] = dkw.get(k)
    if getattr(fr, "keyword_tangents", False):
        return _called(f, fr, tuple(ds) + ({k: dkw.get(k) for k in rest},), new, rest)
    stuck = [k for k in rest if dkw.get(k) is not None]
    if stuck:
        raise NoForwardRuleError(f, f"its forward rule takes no tangent for the keyword argument "
                                    f"{stuck[0]!r}; pass it by position")
    return _called(f, fr, tuple(ds), new, rest)


def _called(f, fr, ts, args, kw):
    """``fr(ts, *args, **kw)``, through `batching.call` where the tangents are batched."""
    state = current().batch
    if state:
        return batching.call(state, f, fr, record_of(f), ts, args, kw)
    return fr(ts, *args, **kw)


def _bind(f, args, kw, dargs, dkw):
    """Parameters in code order for a call with keywords, defaults or ``*args``, and
    their tangents (a default's: what the function was made with, else zero)."""
    P = inspect.Parameter
    sig = fw._code_signature(f)
    ba = fw._bind_as_python(sig, args, kw)
    ba.apply_defaults()
    bt = fw._bind_as_python(sig, dargs, {k: dkw.get(k) for k in kw}).arguments
    own = _default_tangents(f, sig)
    names = fw._entry_names(f.__code__)
    params = [ba.arguments[n] for n in names]
    empty = {P.VAR_POSITIONAL: (), P.VAR_KEYWORD: {}}
    dparams = [bt[n] if n in bt else empty.get(sig.parameters[n].kind, own.get(n)) for n in names]
    return params, dparams


def _default_tangents(f, sig) -> dict:
    """The tangents of ``f``'s default values by parameter name, when ``f`` was made
    during this computation from values that carry them."""
    e = current().defaults.get(id(f))
    if e is None or e[0] is not f:
        return {}
    P = inspect.Parameter
    positional = [p.name for p in sig.parameters.values() if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    with_default = positional[len(positional) - len(f.__defaults__ or ()):]
    out = dict(zip(with_default, e[1] or ()))
    out.update(e[2] or {})
    return out


def _construct(cls, dargs, dkw, args, kw):
    """``cls(*args)``: ``__new__`` then ``__init__``, both in forward mode; the object's
    tangent (a dict of its fields) is what ``__init__`` stored into the shadow."""
    if cls.__new__ is object.__new__:
        obj, dobj = object.__new__(cls), None
    else:
        obj, dobj = jvp_call_kw(cls.__new__, None, (None,) + dargs, dkw, cls, *args, **kw)
    if isinstance(obj, cls) and type(obj).__init__ is not object.__init__:
        jvp_call_kw(type(obj).__init__, None, (dobj,) + dargs, dkw, obj, *args, **kw)
    return obj, current().refresh(obj, dobj)


class _Reals(frozenset):
    """The types of real scalars whose arithmetic the tangent pass writes out (`_Hooks.dual`);
    named in ``ir dump`` (a set's own order of printing varies from run to run)."""

    def __repr__(self):
        return "jvp.REALS"


REALS = _Reals({float, int, np.float64})


def unchanged() -> bool:
    """Whether this forward level has changed nothing in place yet (its shadow is empty):
    then every variable's tangent is the one it was given (tangent code's guard of dual
    arithmetic where an in-place operator, ``s += t``, might have changed an object)."""
    return not current().entries


nondifferentiable(unchanged)


class _Hooks(fw._Hooks):
    """What the tangent pass inserts (the activity predicates are the reverse pass's)."""

    jvp = staticmethod(jvp_call)
    jvp_kw = staticmethod(jvp_call_kw)
    frule_for = staticmethod(frule_for)
    unchanged = staticmethod(unchanged)
    now = staticmethod(now)
    reals = REALS
    array = np.ndarray

    @staticmethod
    def dual(f) -> bool:
        """Whether the tangent pass may write ``f``'s forward rule out as dual arithmetic
        on real scalars (and reads of array elements): the library's own rule says so
        with ``dual = True``; one registered over it is called."""
        return getattr(frule_for(f), "dual", False)


class _BatchedHooks(_Hooks):
    """Tangent code for batched tangents: every call goes through `jvp_call`, which hands
    the forward rule the batch (`batching.call`); no arithmetic is written out."""

    frule_for = staticmethod(lambda f: None)
    dual = staticmethod(lambda f: False)

