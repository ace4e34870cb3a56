"""`forward(f, *args)`: run ``f`` and return its value and a pullback.

A callable with a rule answers from the rule.  A Python function (also a bound
method, closure, lambda or callable object) is lifted, transformed and emitted
once per code object, and then runs as compiled forward code that records a
tape; its `Pullback` runs the compiled adjoint over that tape.
"""
from __future__ import annotations

import functools
import inspect
import operator
import types
import weakref
from typing import NamedTuple

from ..ir import lift
from ..ir.emit import emit
from ..transforms.reverse import transform
from . import algebra, generators, mutation
from .binding import call_with_keywords
from .cache import Cache, still_decided
from .errors import NoRuleError, full_name, library_entry, user_location
from .rules import CALLS, PLAIN_CODES, RULES, is_changing, is_effectful, is_nondiff, is_sparse, is_structured, is_view, calls_methods, nograd, nondifferentiable, reads_of, rule_for, scalar_kind, taped_for
from .shadow import current
from .watch import KEPT, WATCH


class _Hooks:
    """What the transforms insert into generated code."""

    accum = staticmethod(algebra.accum)
    unwrap = staticmethod(algebra.unwrap)
    kwgrad = staticmethod(algebra.kwgrad)
    nondiff = staticmethod(is_nondiff)
    effectful = staticmethod(is_effectful)
    changing = staticmethod(is_changing)
    scalar_kind = staticmethod(scalar_kind)
    taped = staticmethod(taped_for)
    rule_for = staticmethod(rule_for)
    sparse = staticmethod(is_sparse)
    structured = staticmethod(is_structured)

    runs_without_gradient = staticmethod(mutation.runs_without_gradient)
    changeable = staticmethod(mutation.changeable)
    watching = WATCH
    kept_watching = KEPT
    reads = staticmethod(reads_of)
    view = staticmethod(is_view)
    methods = staticmethod(calls_methods)


class Pullback(functools.partial, mutation.Always):
    """The pullback of one call of a transformed function: ``Pullback(adjoint, tape)``,
    the adjoint with its tape bound.

    ``back(dy)`` returns ``(d_callee, d_arg1, …)``; it may be called many times.
    ``dy`` may be None: the callee may have stored into a cell whose gradient is
    waiting in the shadow.
    """

    __slots__ = ()

    def __call__(self, dy):
        # a Python method, which the adjoint calls as one (`ops.pull`): a recursion then
        # goes back in Python frames only (CPython 3.12 caps one through C near 500 levels)
        return self.func(self.args[0], dy)

    def __repr__(self):
        return f"<Pullback {self.func.__code__.co_name[len('adjoint_'):]}: {len(self.args[0])} entries>"


class Unbinding(Pullback):
    """``Unbinding(adjoint, tape, unbind)``: the `Pullback` of a call that bound keywords,
    defaults or ``*args``, whose gradients ``unbind`` maps back to the call's arguments."""

    __slots__ = ()

    def __call__(self, dy):
        tape, unbind = self.args
        return unbind(self.func(tape, dy))


class Variant(NamedTuple):
    """A transform for a call: the entry arguments that are active (``wrt``; None: all) and
    those that are arrays or numbers at this call (``numeric``: `transforms.kept` takes
    them for what they are, not for objects of yours)."""
    wrt: tuple | None
    numeric: tuple


class Compiled:
    """The transformed code of one code object, for the globals it was decided in."""

    def __init__(self, code, reading, variant=None):
        wrt, numeric = variant if type(variant) is Variant else (variant, ())
        self.stages = transform(lift(code), _Hooks, reading, wrt, numeric)
        self.still_decided = still_decided(reading.decided())
        self.forward_code = emit(self.stages.forward)
        self.adjoint = types.FunctionType(emit(self.stages.adjoint), {})
        m = self.stages.lifted.meta
        self.generator = m.generator
        # how many arguments given by position alone are the entry arguments as they are
        # (-1: none are, *args, **kw or keyword-only parameters need binding)
        self.binds = -1 if m.varargs or m.varkw or code.co_kwonlyargcount else code.co_argcount
        self.arity = -1 if m.generator else self.binds  # (`forward` calls `_call` where it is -1)


_CACHE = Cache(Compiled)


def compiled(f, wrt=None) -> Compiled:
    """The transformed code of function ``f``, made on first use; with ``wrt``, a
    version where only those entry arguments (0 is ``f`` itself) are active."""
    return _CACHE.get(f.__code__, f.__globals__, wrt)


def _bind(f, args, kw):
    """Parameters in code order for a call with keywords, defaults or ``*args``;
    and a function mapping parameter gradients back to the call's arguments.

    Gradients of default values go to the function itself, as
    ``{"__defaults__": (...), "__kwdefaults__": {...}}``; the rule of
    ``ops.make_function`` passes them on to the values the defaults came from.
    """
    P = inspect.Parameter
    sig = _code_signature(f)
    ba = _bind_as_python(sig, args, kw)
    given = set(ba.arguments)
    ba.apply_defaults()
    ps = [sig.parameters[n] for n in _entry_names(f.__code__)]
    params = [ba.arguments[p.name] for p in ps]
    positional = [p.name for p in ps if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    with_default = positional[len(positional) - len(f.__defaults__ or ()):]
    npos = len(args)
    sh = current()

    def unbind(g):
        flat, kwg, dflt = [], {}, {}
        for p, d, value in zip(ps, g[1:], params):
            if p.kind is P.VAR_POSITIONAL:
                flat += list(d) if d is not None else [None] * len(value)
            elif p.kind is P.VAR_KEYWORD:  # made here: what the callee stored in it is ours
                kwg.update(algebra.accum(d, sh.take(value)) or {})
            elif p.name not in given:
                dflt[p.name] = d
            elif p.name in kw and p.kind is not P.POSITIONAL_ONLY:
                kwg[p.name] = d
            else:
                flat.append(d)
        callee = g[0]
        if any(d is not None for d in dflt.values()):
            callee = algebra.accum(callee, {
                "__defaults__": tuple(dflt.get(n) for n in with_default),
                "__kwdefaults__": {n: d for n, d in dflt.items() if n not in with_default}})
        flat = flat[:npos] + [None] * (npos - len(flat))
        return (callee, *flat) + ((kwg,) if kw else ())
    return params, unbind


def _bind_as_python(sig, args, kw):
    """``sig.bind(*args, **kw)``, also where a keyword names a positional-only parameter
    and ``**kw`` takes it (``def f(a, /, **kw)`` called ``f(x, a=y)``), as Python binds it
    and `inspect` (3.11) does not."""
    P = inspect.Parameter
    varkw = next((p.name for p in sig.parameters.values() if p.kind is P.VAR_KEYWORD), None)
    named = {k for k in kw if k in sig.parameters and sig.parameters[k].kind is P.POSITIONAL_ONLY}
    if varkw is None or not named:
        return sig.bind(*args, **kw)
    ba = sig.bind(*args, **{k: v for k, v in kw.items() if k not in named})
    rest = ba.arguments.get(varkw, {})
    ba.arguments[varkw] = {k: v for k, v in kw.items() if k in named or k in rest}
    return ba


def _code_signature(f):
    """The signature Python binds a call of ``f`` with: its code's, not a ``__wrapped__``
    function's (``functools.wraps``) nor a ``__signature__`` it claims."""
    plain = types.FunctionType(f.__code__, {}, None, f.__defaults__, f.__closure__)
    plain.__kwdefaults__ = f.__kwdefaults__
    return inspect.signature(plain)


def _entry_names(code):
    """The parameters in the order of the transformed function's entry arguments (the
    code's: positional, keyword-only, ``*args``, ``**kw``), not the signature's."""
    varargs, varkw = bool(code.co_flags & inspect.CO_VARARGS), bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount + varargs + varkw]


def call_function(f, args, kw, wrt=None):
    """``forward`` of Python function ``f``; with ``wrt``, of the version where only
    those entry arguments are active."""
    return _call(f, _CACHE.get(f.__code__, f.__globals__, wrt), args, kw)


def _call(f, c, args, kw):
    """``forward`` of Python function ``f`` through its transformed code ``c``."""
    if kw or len(args) != c.binds:
        params, unbind = _bind(f, args, kw)
    else:
        params, unbind = args, None
    if c.generator:
        return generators.start(f, c.forward_code, c.adjoint, params, unbind)
    # a function per call, so that no cache entry keeps a globals dict alive
    y, tape = types.FunctionType(c.forward_code, f.__globals__)(f, *params)
    pb = Pullback(c.adjoint, tape) if unbind is None else Unbinding(c.adjoint, tape, unbind)
    return _pulled(y, pb) if WATCH.all else (y, pb)


def _pulled(y, pb):
    """``(y, pb)``, once something was mutated (``WATCH.all``, which callers test): the
    result may hold it."""
    sh = current()
    if sh.holds_mutated(y):
        return y, mutation.Returned(pb, y, sh)
    return y, pb


def _drop_callee(pb):
    """For ``obj.m(x)`` run as ``C.m(obj, x)``: the gradient of ``obj`` is the method's."""
    return mutation.wrapping(pb, lambda dy: pb(dy)[1:])


def forward(f, /, *args, **kw):
    """``(f(*args, **kw), pullback)``."""
    try:
        r = RULES.get(f)
    except TypeError:  # an unhashable callable has no rule
        r = None
    if r is not None:
        if r.fn is not None:
            if not kw:
                return r.fn(*args)
            if kw.get("out") is not None and not r.passes:
                return mutation.with_out(lambda *a, **k: call_with_keywords(f, r, a, k), args, kw)
            return call_with_keywords(f, r, args, kw)
        if r.nondiff:
            return f(*args, **kw), nograd(len(args))
    t = type(f)
    if t is types.FunctionType:
        if (args and type(args[0]) in _INERT or not args and kw) and _runs_plainly(f, args, kw):
            return f(*args, **kw), nograd(len(args))  # (``factorial(5)``: never lifted)
        # the lookup inline: a frame less per level of a recursion took a sixth off its
        # gradient's time
        e = _RUNNING.get(id(f))
        if e is not None and e[0] is f.__code__ and e[1].still_decided(f.__globals__):
            c = e[1]
        else:
            c = _running(f)
            if c is None:  # (marked to run plainly)
                return forward(f, *args, **kw)
        if kw or len(args) != c.arity:  # keywords, defaults or *args to bind
            return _call(f, c, args, kw)
        # `_call`, inline for the plain call: one frame per level of recursion (and a
        # function per call, so that nothing here keeps the globals dict alive)
        y, tape = types.FunctionType(c.forward_code, f.__globals__)(f, *args)
        pb = Pullback(c.adjoint, tape)
        return _pulled(y, pb) if WATCH.all else (y, pb)
    if t is types.MethodType:
        y, pb = forward(f.__func__, f.__self__, *args, **kw)
        return y, _drop_callee(pb)
    if c_bound(f, t):
        # a method of a C type (``xs.append``, ``xs.__delitem__``, also reached through
        # super() from an override): the rule of the unbound C method
        unbound = _c_method(f)
        if unbound is _COUNT:
            return f(*args, **kw), nograd(len(args))
        y, pb = forward(unbound, f.__self__, *args, **kw) if unbound is not None \
            else run_plain(f, (f.__self__,) + args, kw, call=lambda s, *a, **k: f(*a, **k))
        return y, _drop_callee(pb)
    if (t is types.WrapperDescriptorType or t is types.MethodDescriptorType) and args and \
            type(args[0]) is f.__objclass__ and f.__name__ in _ITEM_METHODS:
        return forward(_ITEM_METHODS[f.__name__], *args, **kw)  # list.__getitem__(xs, k)
    if not isinstance(f, type) and type(getattr(type(f), "__call__", None)) is types.FunctionType:
        y, pb = forward(type(f).__call__, f, *args, **kw)
        return y, _drop_callee(pb)
    if t in CALLS:
        y, pb = forward(CALLS[t], f, *args, **kw)
        return y, _drop_callee(pb)
    if isinstance(f, type) and issubclass(f, BaseException):  # its arguments: a message, mostly
        e, sh = f(*args, **kw), current()
        if sh.inside and any(map(algebra.is_differentiable, (*args, *kw.values()))):
            sh.raised[id(e)] = (e, user_location(), None)  # (a read of it a gradient reaches is refused)
        return e, nograd(len(args))
    if isinstance(f, type) and _user_class(f):
        return construct(f, args, kw)
    return run_plain(f, args, kw)


# function id -> (its code, its `Compiled`, a weak reference to it), while it lives: a
# gradient's calls of a function skip the search of the cache
_RUNNING = {}


def _running(f):
    """The `Compiled` of Python function ``f``, recorded in `_RUNNING`; None for one
    whose code `runs_plainly`, now marked `nondifferentiable`."""
    key, code = id(f), f.__code__
    if code in PLAIN_CODES:
        nondifferentiable(f)
        return None
    c = _CACHE.get(code, f.__globals__)
    old = _RUNNING.get(key)
    ref = old[2] if old is not None and old[2]() is f else \
        weakref.ref(f, lambda _, key=key: _RUNNING.pop(key, None))
    _RUNNING[key] = (code, c, ref)
    return c


def c_bound(f, t) -> bool:
    """Whether ``f`` (of type ``t``) is a C method bound to an object (``xs.append``),
    or a slot of a metaclass bound to a class (``super().__getattribute__(name)`` in a
    metaclass's ``__getattribute__``); not a module's function nor a class method."""
    if t is not types.BuiltinMethodType and t is not types.MethodWrapperType:
        return False
    s = f.__self__
    return not isinstance(s, (types.ModuleType, type)) or t is types.MethodWrapperType and isinstance(s, type)


def _c_method(f):
    """The unbound C method that the bound C method ``f`` calls: not a Python override
    of the same name in a subclass (``super().__len__()`` in ``__len__``).  An item or
    length method of a built-in type itself is the operation (``x[k]``, ``len(x)``)."""
    name, obj = f.__name__, f.__self__
    owner = getattr(f, "__objclass__", None)  # (method-wrappers know it)
    if owner is None:
        owner = next((c for c in type(obj).__mro__ if name in c.__dict__
                      and type(c.__dict__[name]) is not types.FunctionType), None)
    if owner is None:
        return None
    unbound = owner.__dict__.get(name) or getattr(owner, name, None)
    if name in _ITEM_METHODS and type(obj) is owner and rule_for(unbound) is None:
        return _ITEM_METHODS[name]
    if name in ("__len__", "__contains__") and rule_for(unbound) is None:
        return _COUNT  # of a subclass: a count or a test, with no gradient
    return unbound


_COUNT = object()


# ``x.__getitem__(k)`` is ``x[k]`` for every type (no NotImplemented to fall back
# from, unlike ``x.__add__(y)``): such calls go to the operation's rule.
_ITEM_METHODS = {"__getitem__": operator.getitem, "__setitem__": operator.setitem,
                 "__delitem__": operator.delitem, "__contains__": operator.contains,
                 "__len__": len}


def _user_class(cls) -> bool:
    """Whether calling ``cls`` runs Python ``__new__`` / ``__init__`` code we can transform."""
    return type(cls).__call__ is type.__call__ and not issubclass(cls, BaseException) and (
        type(cls.__init__) is types.FunctionType or type(cls.__new__) is types.FunctionType)


def construct(cls, args, kw):
    """``cls(*args)``: ``__new__`` then ``__init__``, both differentiated.  The object's
    gradient (a dict of its fields) goes to the shadow, where the stores of
    ``__init__`` take their values' gradients out."""
    sh = current()
    if cls.__new__ is object.__new__:
        obj, pb_new = object.__new__(cls), None
    else:
        obj, pb_new = forward(cls.__new__, cls, *args, **kw)
    pb_init = None
    if isinstance(obj, cls) and type(obj).__init__ is not object.__init__:
        _, pb_init = forward(type(obj).__init__, obj, *args, **kw)
    if not issubclass(cls, tuple):  # instances of other classes may change
        mutation.watch_kind(cls)
    n = len(args) + (1 if kw else 0)

    def back(dy):
        sh.add(obj, dy)
        d = pb_init(None) if pb_init is not None else (None,) * (n + 2)
        d0 = sh.take(obj)  # the gradient of the object __new__ made
        d_new = pb_new(d0) if pb_new is not None and d0 is not None else (None,) * (n + 2)
        return (None,) + tuple(algebra.accum(a, b) for a, b in zip(d[2:2 + n], d_new[2:2 + n]))
    return obj, mutation.Effect(back)


def forward_soft(f, /, *args, **kw):
    """``forward`` for a call made active only because an operand may have been
    changed in place: a callable with no rule runs plainly unless an operand holds
    a changed object (then it would have needed one)."""
    try:
        return forward(f, *args, **kw)
    except NoRuleError as e:
        sh = current()
        if e.callable is not f or any(map(sh.holds_mutated, args + tuple(kw.values()))):
            raise
    return f(*args, **kw), nograd(len(args))


def forward_with(wrt, f, /, *args):
    """``forward`` of a call whose operands at positions other than ``wrt`` (0 is the
    callee) carry no gradient: a Python function goes through its transform where only
    those entry arguments are active, when they are its entry arguments as given."""
    if type(f) is not types.FunctionType or f in RULES:
        return forward(f, *args)
    code = f.__code__
    for c in _CACHE.entries.get((id(code), wrt), ()):
        if c.code() is code and c.still_decided(f.__globals__):
            break
    else:
        if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or \
                code.co_kwonlyargcount or code.co_argcount != len(args):
            return forward(f, *args)  # (to bind: the transform of every argument)
        c = _CACHE.get(code, f.__globals__, wrt)
    if c.arity != len(args):  # (a generator; or defaults to bind, which may carry gradients)
        return forward(f, *args)
    y, tape = types.FunctionType(c.forward_code, f.__globals__)(f, *args)
    pb = Pullback(c.adjoint, tape)
    return _pulled(y, pb) if WATCH.all else (y, pb)


def forward_reading(f, /, *args, **kw):
    """``forward`` for a call of code known only at run time that is given nothing
    carrying a gradient: it runs plainly unless something has been changed in place to
    hold such a value (``WATCH.all``), which the code may read through a global
    (``BOX["w"] = 2 * x``, then ``h(3)`` reads ``BOX["w"]``), or unless it makes a
    generator, which may later be sent one (``g = acc()``, then ``g.send(x)``)."""
    if WATCH.all or type(f) is types.FunctionType and f.__code__.co_flags & _MAKES_GENERATOR:
        return forward(f, *args, **kw)
    return f(*args, **kw), nograd(len(args))


_INERT = frozenset({int, bool, str, bytes, type(None)})
_MAKES_GENERATOR = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


def _runs_plainly(f, args, kw) -> bool:
    """Whether Python function ``f`` can meet no value that carries a gradient: its
    arguments, defaults and closure hold only ints, strings and the like, nothing
    has been changed in place to hold one (which it could read through a global), and
    it makes no generator (which may later be sent one)."""
    if WATCH.all or f.__code__.co_flags & _MAKES_GENERATOR:
        return False
    values = [*args, *kw.values(), *(f.__defaults__ or ()), *(f.__kwdefaults__ or {}).values()]
    for cell in f.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # empty
            pass
    return all(type(v) in _INERT for v in values)


def forward_in_try(via, f, /, *args, **kw):
    """``via(f, …)`` (`forward` or `forward_soft`) for a call inside a ``try``.  A
    transformed callee that changed an object in place and then raised loses, with its
    frame, the tape that would reverse the change.  The exception goes on as in the plain
    call (a handler may catch it); the computation records why its gradient cannot be
    had, and asking for it raises that (`Shadow.lost`) rather than a wrong gradient."""
    sh = current()
    before = sh.writes
    try:
        return via(f, *args, **kw)
    except BaseException as e:
        if sh.writes != before and sh.lost is None:
            file, line = user_location()
            sh.lost = (f"{file}:{line}: {full_name(f)} changed an object in place and then raised "
                       f"{type(e).__name__}, which a try caught: bytegrad reverses such a change "
                       f"only when the call returns, so it cannot differentiate past it yet; make "
                       f"the change after what may raise, or catch the exception inside "
                       f"{full_name(f)}")
        raise


def run_plain(f, args, kw, call=None, name=None):
    """Call ``call or f`` with no gradient, which is right while no differentiable
    value reaches it; otherwise raise NoRuleError naming ``name or f`` and the
    user's line (the innermost frame outside bytegrad's runtime and rules)."""
    if not any(map(algebra.is_differentiable, args + tuple(kw.values()))) or not callable(f):
        return (call or f)(*args, **kw), nograd(len(args))  # (not callable: Python's TypeError)
    raise NoRuleError(name or f, *user_location(), via=library_entry())


_Hooks.forward = staticmethod(forward)
_Hooks.forward_soft = staticmethod(forward_soft)
_Hooks.forward_reading = staticmethod(forward_reading)
_Hooks.forward_with = staticmethod(forward_with)
_Hooks.forward_in_try = staticmethod(forward_in_try)
_Hooks.pullback = Pullback
