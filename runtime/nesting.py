"""Nested differentiation: gradients of gradients, in both modes, to any order.

Every stage is ordinary emitted code, so an outer level differentiates an inner one by
lifting what the inner one runs.  Two runtime functions carry it:

* `jvp_call`, which runs a function's tangent code, has a reverse rule and a forward
  rule that lift that tangent code (or the forward rule it calls) instead: reverse
  over forward, and forward over forward.  A forward level's shadow is its own
  (`tangents.current_in`), so perturbations of two levels never mix.
* `vjp_at(f, args, wrt, kw, dy)`, a reverse-mode computation of ``Jᵀ dy``, has rules
  that need one more forward level, never a lifted tape: its reverse rule, given the
  cotangent ``c`` of the gradients, differentiates ``<dy, J c>`` (`_directional`) in
  reverse over forward; its forward rule, given the tangents ``ḟ, ȧ, ḋy``, is the
  pullback of ``a ↦ jvp(f, a, ȧ)`` seeded with ``(ḋy, dy)``: the Hessian-vector
  product and the mixed term in one reverse-over-forward pass.

The API functions called inside a function being differentiated (`gradient`,
`grad(f)(x)`, `pullback`, `jvp`, …) run, lifted, as plain Python bodies written in
terms of these two (`_LIFTED`): ``y = f(*args)`` at the outer level, then the inner
gradient from `vjp_at`.  So ``f`` runs once more than at first order, and the first
order pays nothing: no pass or dispatch changed.

    >>> import bytegrad
    >>> bytegrad.grad(bytegrad.grad(lambda x: x ** 4))(2.0)   # 12 x²
    48.0
"""
from __future__ import annotations

import copy
import functools
import operator
import types

import numpy as np

from . import api, jax_api, shadow
from .algebra import unwrap
from .computing import computing
from .errors import full_name, user_location
from . import forward as fw
from .forward import forward
from .frules import derived, frule, frule_for
from ..ir import ops
from .jvp import compiled_tangent, jvp_call, jvp_call_kw
from .mutation import wrapping
from .rules import CALLS, Lazy, nondifferentiable, nograd, record_of, rule
from .tangents import TangentShadow, current, current_in, isolated_at

_COMPUTING = computing()


class NestingError(NotImplementedError):
    """A construct nested differentiation does not reach yet, named with the user's line."""


def _refuse(what):
    file, line = user_location()
    raise NestingError(f"{file}:{line}: nested differentiation (a gradient of a gradient, or a "
                       f"jvp of one) does not reach {what} yet; differentiate it at first order, "
                       f"or give it a rule")


# -- running a function's tangent code as an ordinary function ------------------------

def _plan(f, n, kw):
    """How `jvp_call(f, df, dargs, *args)` (``n`` arguments) runs, as a callable another
    level can lift: ``("frule", fr)``, ``fr(dargs, *args)``; ``("code", tf)``,
    ``tf(f, *args, df, *dargs)``; ``("self", g, obj)``, ``g`` called with ``obj`` first
    (a bound method, a callable object); ``("plain",)``, no tangent."""
    if kw:
        _refuse(f"a call with keyword arguments ({full_name(f)}); pass them by position")
    fr = frule_for(f)
    if fr is not None:
        return ("frule", fr)
    r = record_of(f)
    if r is not None and r.nondiff:
        return ("plain",)
    if r is not None and r.fn is not None:
        return ("frule", derived(f, r))
    t = type(f)
    if t is types.FunctionType:
        c = compiled_tangent(f)
        star = _star_call(c)
        if star is not None:
            _refuse(f"a call like g(x, *args) ({f.__code__.co_filename}:{star}) in code "
                    f"differentiated to second order; call g(*((x,) + args)) instead")
        return ("code", types.FunctionType(c.tangent_code, f.__globals__), _binding(f, n, c))
    if t is types.MethodType:
        return ("self", f.__func__, f.__self__)
    if (t is types.BuiltinMethodType or t is types.MethodWrapperType) and \
            not isinstance(f.__self__, (types.ModuleType, type)):
        unbound = fw._c_method(f)  # (``xs.append``: the rule of ``list.append``)
        if unbound is fw._COUNT:
            return ("plain",)
        if unbound is not None:
            return ("self", unbound, f.__self__)
    if t in CALLS:
        return ("self", CALLS[t], f)
    if not isinstance(f, type) and type(getattr(t, "__call__", None)) is types.FunctionType:
        return ("self", t.__call__, f)
    if isinstance(f, type) and issubclass(f, BaseException):
        return ("plain",)
    return ("opaque",)


def _changed(entries) -> bool:
    """Whether new tangent-shadow ``entries`` record a change in place (not a module and
    its namespace, which a read of a module attribute enters)."""
    xs = [x for x, _ in entries]
    spaces = {id(vars(x)) for x in xs if isinstance(x, types.ModuleType)}
    return any(not isinstance(x, types.ModuleType) and id(x) not in spaces for x in xs)


_STARS: dict = {}


def _star_call(c):
    """The line of an active call like ``g(x, *args)`` in tangent code ``c`` (whose
    argument list the tangent code builds by extending a list in place, which reverse
    mode does not follow yet; ``g(*args)`` alone is fine), or None."""
    key = id(c)
    if key not in _STARS:
        _STARS[key] = next((st.line for _, _, st in c.stages.tangent.statements()
                            if st.fn is jvp_call and st.args and st.args[0] is ops.list_extend), None)
    return _STARS[key]


class _Binding:
    """A call of a Python function with ``n`` positional arguments bound to its
    parameters: the first ``k`` as they are, then defaults (constants), then a tuple for
    ``*args``, an empty dict for ``**kw``; `unbind` maps parameters' gradients back."""

    def __init__(self, f, n):
        code = f.__code__
        if code.co_kwonlyargcount:
            _refuse(f"{full_name(f)}, which has keyword-only parameters")
        self.k, self.n = min(n, code.co_argcount), n
        need = code.co_argcount - self.k
        dflt = f.__defaults__ or ()
        if need > len(dflt):
            raise TypeError(f"{full_name(f)} takes {code.co_argcount} positional arguments, got {n}")
        self.defaults = dflt[len(dflt) - need:] if need else ()
        self.varargs = bool(code.co_flags & 0x04)
        self.varkw = bool(code.co_flags & 0x08)
        if n > code.co_argcount and not self.varargs:
            raise TypeError(f"{full_name(f)} takes {code.co_argcount} positional arguments, got {n}")

    def bind(self, xs, zero=False):
        k = self.k
        out = tuple(xs[:k]) + ((None,) * len(self.defaults) if zero else self.defaults)
        if self.varargs:
            out += (tuple(xs[k:]),)
        if self.varkw:
            out += (None if zero else {},)
        return out

    def unbind(self, gs):
        k = self.k
        out = tuple(gs[:k])
        if self.varargs:
            rest = gs[k + len(self.defaults)]
            out += tuple(rest) if rest is not None else (None,) * (self.n - k)
        return out


def _binding(f, n, c):
    return None if c.arity == n else _Binding(f, n)


def _full(ts, n):
    return (None,) * n if ts is None else tuple(ts)


@rule(jvp_call)
def _jvp_call_rule(f, df, dargs, /, *args, **kw):
    """Reverse over forward: the pullback of the tangent code (or forward rule) run."""
    n = len(args)
    plan = _plan(f, n, kw)
    if plan[0] == "frule":
        y, pb = forward(plan[1], dargs, *args)  # (scalar arithmetic: `second_order_rules`)
        return y, wrapping(pb, lambda d: (None, None, None, *pb(d)[1:]))
    if plan[0] == "code":
        b = plan[2]
        sh = current()
        before = len(sh.entries)
        if b is None:
            y, pb = forward(plan[1], f, *args, df, *_full(dargs, n))
        else:
            y, pb = forward(plan[1], f, *b.bind(args), df, *b.bind(_full(dargs, n), True))
        if len(sh.entries) != before and _changed(list(sh.entries.values())[before:]):
            _refuse(f"a change in place (xs.append(v), a[i] = v, obj.x = v) in {full_name(f)}, "
                    f"differentiated to second order; build a new value instead")
        m = n if b is None else len(b.bind(args))

        def back(d):
            g = pb(d)
            ga, gd = g[2:2 + m], g[3 + m:]
            if b is not None:
                ga, gd = b.unbind(ga), b.unbind(gd)
            return (None, g[1], g[2 + m], tuple(gd), *ga)
        return y, wrapping(pb, back)
    if plan[0] == "self":
        y, pb = forward(jvp_call, plan[1], None, (df,) + _full(dargs, n), plan[2], *args)

        def back(d):
            g = pb(d)  # (_, d_g, d_dg, d_dargs, d_obj, *d_args)
            return (None, g[4], (g[3] or (None,) * (n + 1))[0], tuple((g[3] or (None,) * (n + 1))[1:]),
                    *g[5:])
        return y, wrapping(pb, back)
    return _opaque(plan, f, dargs, args), nograd(n + 3)


# -- reverse over forward of scalar arithmetic and element reads, without lifting their
# forward rules (the Hessian-vector product of a loop over x[i] spends its time there)

_NUMBERS = frozenset({float, int, np.float64})


def _times(a, b):
    return None if a is None or b is None else a * b


def _plus(a, b):
    return b if a is None else a if b is None else a + b


def _pair(d):
    return (None, None) if d is None else d


def _mul2(ts, a, b):
    if type(a) not in _NUMBERS or type(b) not in _NUMBERS:
        return None
    (da, db), y = ts, a * b

    def back(d):
        yb, tb = _pair(d)
        return ((_times(tb, b) if da is not None else None, _times(tb, a) if db is not None else None),
                _plus(_times(yb, b), _times(tb, db)), _plus(_times(yb, a), _times(tb, da)))
    return (y, _plus(_times(da, b), _times(a, db))), back


def _floats(x, *ds) -> bool:
    """Whether ``x`` is a float array and each of ``ds`` None or an array of its shape."""
    return type(x) is np.ndarray and x.dtype.kind == "f" and \
        all(d is None or type(d) is np.ndarray and d.shape == x.shape for d in ds)


def _linear2(sign):
    """``a + sign * b``: the tangent is linear, no second-order term."""
    op = operator.add if sign > 0 else operator.sub

    def rule(ts, a, b):
        if type(a) not in _NUMBERS or type(b) not in _NUMBERS:
            return _arrays2(op, sign, ts, a, b)
        da, db = ts

        def back(d):
            yb, tb = _pair(d)
            return ((tb if da is not None else None, _times(tb, sign) if db is not None else None),
                    yb, _times(yb, sign))
        return (a + sign * b, _plus(da, _times(db, sign))), back
    return rule


def _arrays2(op, sign, ts, a, b):
    """``a + b`` or ``a - b`` of float arrays: the operator's reverse rule for the value,
    the tangents' sum read off the cotangent of the tangent (gradients read lazily)."""
    da, db = ts
    if not (_floats(a, da) and _floats(b, db)):
        return None
    y, pb = forward(op, a, b)
    dy, pbt = None, None
    if da is not None and db is not None:
        dy, pbt = forward(op, da, db)
    elif da is not None or db is not None:
        dy = da if db is None else db if sign > 0 else -db
        if dy.shape != y.shape:
            return None  # (a broadcast tangent: the forward rule fits it to the value's shape)

    def back(d):
        yb, tb = _pair(d)
        p = None if yb is None else pb(yb)
        if pbt is not None:
            q = None if tb is None else pbt(tb)
            dts = lambda: (_at(q, 1), _at(q, 2))  # noqa: E731
        else:
            tb = unwrap(tb)
            dts = lambda: (tb if da is not None else None,  # noqa: E731
                           None if db is None or tb is None else tb if sign > 0 else -tb)
        return Lazy(dts, lambda: _at(p, 1), lambda: _at(p, 2))
    return (y, dy), back


def _pow2(ts, a, p):
    """``a ** p`` for a constant power ``p`` (an int, or a float with no tangent), of a
    number or a float array."""
    da, dp = ts
    if dp is not None or type(p) is not int or type(a) not in _NUMBERS and not _floats(a, da):
        return None
    y, d1 = a ** p, p * a ** (p - 1) if p != 0 else 0.0

    def back(d):
        yb, tb = _pair(d)
        if type(a) is np.ndarray:  # (a structured gradient: a Fill from a mean)
            yb, tb = unwrap(yb), unwrap(tb)
        d2 = p * (p - 1) * a ** (p - 2) if p not in (0, 1) else 0.0
        return ((_times(tb, d1) if da is not None else None, None),
                _plus(_times(yb, d1), _times(tb, _times(da, d2))), None)
    return (y, _times(da, d1)), back


def _getitem2(ts, x, k):
    """``x[k]``, an element of a float array: the reverse rules of the read, twice."""
    dx, _ = ts
    if type(x) is not np.ndarray or x.dtype.kind != "f" or type(k) is not int or \
            dx is not None and type(dx) is not np.ndarray:
        return None
    y, pb = forward(operator.getitem, x, k)
    dy, pbt = (None, None) if dx is None else forward(operator.getitem, dx, k)

    def back(d):
        yb, tb = _pair(d)
        return ((None if tb is None or pbt is None else unwrap(pbt(tb)[1]), None),
                None if yb is None else unwrap(pb(yb)[1]), None)
    return (y, dy), back


def _at(p, i):
    return None if p is None else unwrap(p[i])


def reduction_frule_in_reverse(f, fr, refused):
    """The reverse rule of ``fr``, the forward rule of a reduction ``f`` linear in its
    first argument (``np.sum``, ``np.mean``): ``f``'s own reverse rule for the value and
    for the tangent, gradients read lazily, where a float array alone has a tangent and
    ``refused(args, kw)`` is false (no ``initial=``); ``fr`` lifted elsewhere."""
    def r(ts, *args, **kw):
        ts = _full(ts, len(args))
        if not args or refused(args, kw) or not _floats(args[0], ts[0]) or \
                any(t is not None for t in ts[1:]):
            return fw.call_function(fr, (ts,) + args, kw)
        y, pb = forward(f, *args, **kw)
        dy, pbt = (None, None) if ts[0] is None else forward(f, ts[0], *args[1:], **kw)
        rest = (None,) * (len(args) - 1)

        def back(d):
            yb, tb = _pair(d)
            p = None if yb is None else pb(yb)
            q = None if tb is None or pbt is None else pbt(tb)
            return Lazy(None, lambda: (_at(q, 1),) + rest, lambda: _at(p, 1), *rest)
        return (y, dy), back
    return r


def _matmul2(ts, a, b):
    """``a @ b`` of float matrices: the reverse rules of the product taken for the value
    and for each term of the tangent, ``da @ b + a @ db``; the gradients are read only
    where the adjoint wants them (`Lazy`), as at first order: of the MLP's loss, the
    products of data nobody differentiates are never computed."""
    da, db = ts
    if not all(type(x) is np.ndarray and x.ndim == 2 and x.dtype.kind == "f" for x in (a, b)) or \
            any(d is not None and (type(d) is not np.ndarray or d.shape != x.shape)
                for d, x in ((da, a), (db, b))):
        return None
    y, pb = forward(operator.matmul, a, b)
    y1, pb1 = (None, None) if da is None else forward(operator.matmul, da, b)
    y2, pb2 = (None, None) if db is None else forward(operator.matmul, a, db)

    def back(d):
        yb, tb = _pair(d)
        p = None if yb is None else pb(yb)
        p1 = None if tb is None or pb1 is None else pb1(tb)
        p2 = None if tb is None or pb2 is None else pb2(tb)
        return Lazy(lambda: (_at(p1, 1), _at(p2, 2)), lambda: _plus(_at(p, 1), _at(p2, 1)),
                    lambda: _plus(_at(p, 2), _at(p1, 2)))
    return (y, _plus(y1, y2)), back


_SECOND = {operator.mul: _mul2, operator.add: _linear2(1), operator.sub: _linear2(-1),
           operator.pow: _pow2, operator.getitem: _getitem2, operator.matmul: _matmul2}


def second_order_rules():
    """Give the forward rules of ``_SECOND``'s operators reverse rules (tangent code calls
    them directly): ``(y, dy)`` and its pullback for numbers, float-array elements and
    float matrices, the forward rule lifted as any function otherwise."""
    for op, second in _SECOND.items():
        fr = frule_for(op)
        if fr is not None:
            rule(fr)(_reversed_frule(fr, second))
            frule(fr)(_lifted_frule(fr))  # (forward over forward lifts it, as before)


def _lifted_frule(fr):
    def r(tts, ts, a, b):
        return _tangent_function(fr)(*((fr, ts, a, b, None) + _full(tts, 3)))
    return r


def _tangent_function(f):
    """``f``'s tangent code as a function (made plainly at every level)."""
    return types.FunctionType(compiled_tangent(f).tangent_code, f.__globals__)


def _reversed_frule(fr, second):
    def r(ts, a, b):
        out = second(_full(ts, 2), a, b)
        if out is None:
            return fw.call_function(fr, (ts, a, b), {})
        y, back = out
        return y, lambda d: (lambda g: Lazy(None, *g.thunks) if type(g) is Lazy else (None, *g))(back(d))
    return r


@frule(jvp_call)
def _jvp_call_frule(ts, f, df, dargs, /, *args, **kw):
    """Forward over forward: the tangent code (or forward rule) run, lifted by this level."""
    n = len(args)
    plan = _plan(f, n, kw)
    tf, tdf, tdargs, targs = ts[0], ts[1], ts[2], ts[3:]
    if plan[0] == "frule":
        return jvp_call(*((plan[1], None, (tdargs,) + targs, dargs) + args))
    if plan[0] == "code":
        b = plan[2]
        if b is None:
            return jvp_call(*((plan[1], None, (tf,) + targs + (tdf,) + _full(tdargs, n), f) + args
                              + (df,) + _full(dargs, n)))
        ins = (f,) + b.bind(args) + (df,) + b.bind(_full(dargs, n), True)
        tins = (tf,) + b.bind(_full(targs, n), True) + (tdf,) + b.bind(_full(tdargs, n), True)
        return jvp_call(*((plan[1], None, tins) + ins))
    if plan[0] == "self":
        return jvp_call(*((jvp_call, None, (None, None, (tdf,) + _full(tdargs, n), tf) + targs,
                           plan[1], None, (df,) + _full(dargs, n), plan[2]) + args))
    return _opaque(plan, f, dargs, args), None


# (Calls written ``g(*(head + args))`` in what a level may lift: the tangent code of
# ``g(a, *args)`` builds a list and extends it, which reverse mode does not follow into
# the list's tangent yet.)
def _opaque(plan, f, dargs, args):
    """`jvp_call` of a callable no level can lift: run where no tangent reaches it (or
    none can: ``plan`` is plain)."""
    if plan[0] == "plain" or all(d is None for d in _full(dargs, len(args))):
        return jvp_call(*((f, None, dargs) + args))
    _refuse(f"{full_name(f)} (no forward rule, no Python code)")


@rule(jvp_call_kw)
def _jvp_call_kw_rule(f, df, dargs, dkw, /, *args, **kw):
    if kw:
        _plan(f, len(args), kw)  # (refuses)
    y, pb = forward(jvp_call, f, df, dargs, *args)
    return y, wrapping(pb, lambda d: (lambda g: (*g[:4], None, *g[4:]))(pb(d)))


@frule(jvp_call_kw)
def _jvp_call_kw_frule(ts, f, df, dargs, dkw, /, *args, **kw):
    if kw:
        _plan(f, len(args), kw)
    return jvp_call(*((jvp_call, None, ts[:3] + ts[4:], f, df, dargs) + args))


# -- the inner reverse computation, and its rules ---------------------------------------

def vjp_at(f, args, wrt, kw, dy):
    """The gradients of ``f(*args, **kw)`` in the positions ``wrt`` (None: all) for the
    output gradient ``dy``, as `pullback`'s ``back(dy)`` returns them."""
    with _COMPUTING:
        _, back = api._pullback(f, args, wrt, kw)
        return back(dy)


def _directional(f, t, /, *args):
    """``J t``: the tangent of ``f(*args)`` along ``t``, a computation of its own."""
    with isolated_at(0, TangentShadow()):
        return jvp_call(*((f, None, t) + args))[1]


class _Along:
    """``a ↦ (f(*a), its tangent along ḟ, ȧ)``, with the tangents that the shadow ``sh``
    of the level that made it holds (what ``f``'s closures and the objects it reads
    carry there): a copy, which this computation may change."""

    def __init__(self, f, df, da, sh):
        self.f, self.df, self.da = f, df, da
        self.cells, self.defaults = dict(sh.cells), dict(sh.defaults)
        self.entries = {k: (x, copy.deepcopy(t)) for k, (x, t) in sh.entries.items()}

    def __call__(self, *args):
        with isolated_at(0, _seeded(self)):
            return jvp_call(*((self.f, self.df, self.da) + args))


def _seeded(along):
    """A new shadow holding what ``along`` copied (made plainly: a change of a shadow in
    lifted code would count as a change in place, which makes reverse mode watch every
    call)."""
    sh = TangentShadow()
    sh.cells.update(along.cells)
    sh.defaults.update(along.defaults)
    sh.entries.update({k: (x, copy.deepcopy(t)) for k, (x, t) in along.entries.items()})
    return sh


def _no_keywords(kw, what="keyword arguments"):
    if kw and any(map(_carries, kw.values())):
        _refuse(f"{what} that carry a gradient; pass them by position")


def _carries(x):
    from .algebra import is_differentiable
    return is_differentiable(x)


def _cotangents(dg, n):
    if dg is None:
        return (None,) * n
    return tuple(unwrap(d) for d in dg)


@rule(vjp_at)
def _vjp_at_rule(f, args, wrt, kw, dy):
    g = vjp_at(f, args, wrt, kw, dy)
    n = len(args)

    outer = shadow.current()

    def back(dg):
        _no_keywords(kw)
        t = _cotangents(dg, n)
        with _COMPUTING, shadow.fresh() as sh:
            ydot, pb = forward(_directional, f, t, *args)
            gs = pb(dy)
        sh.hand_on(outer)  # (what the cells ``f`` reads received)
        return (None, gs[1], tuple(gs[3:]), None, None, ydot)
    return g, back


@frule(vjp_at)
def _vjp_at_frule(ts, f, args, wrt, kw, dy):
    g = vjp_at(f, args, wrt, kw, dy)
    df, dargs, ddy = ts[0], ts[1], ts[4]
    _no_keywords(kw)
    along = _Along(f, df, _full(dargs, len(args)), current_in(0))
    return g, vjp_at(along, args, wrt, kw, (ddy, dy))


# -- the API functions, as the outer level runs them -----------------------------------

def _value_and_gradient(f, args, wrt, kw):
    y = f(*args, **kw)
    if isinstance(y, (bool, int, np.integer, np.bool_)):
        return y, (None,) * len(args)
    return y, vjp_at(f, args, wrt, kw, api._seed(y, f))


def _with_aux(f, args, wrt, kw):
    y = f(*args, **kw)
    out, _ = jax_api._aux_pair(y, f)
    if isinstance(out, (bool, int, np.integer, np.bool_)):
        return y, (None,) * len(args)
    return y, vjp_at(f, args, wrt, kw, type(y)((api._seed(out, f), None)))


def _pullback(f, /, *args, wrt=None, **kw):
    # (a partial, not a closure: code made in lifted code takes the user's globals)
    return f(*args, **kw), functools.partial(vjp_at, f, args, wrt, kw)


_LIFTED = {api._value_and_gradient: _value_and_gradient, api._with_aux: _with_aux,
           api.pullback: _pullback, jax_api.jvp: jax_api.checked_jvp}


def _lifted(body):
    def fn(*args, **kw):
        y, pb = forward(body, *args, **kw)
        return y, wrapping(pb, lambda d: (None, *pb(d)[1:]))

    def fr(ts, *args, **kw):
        return jvp_call(body, None, ts, *args, **kw)
    return fn, fr


for _api, _body in _LIFTED.items():
    _fn, _fr = _lifted(_body)
    rule(_api, override=True)(_fn)
    frule(_api, override=True)(_fr)

nondifferentiable(_plan, _seeded, _tangent_function, jax_api._held, isolated_at.__enter__, isolated_at.__exit__, TangentShadow,
                  np.errstate.__enter__, np.errstate.__exit__)  # (forward rules use errstate)


# -- the levels' shadows: code an outer level lifts reads the shadow one level in -------

@frule(current)
def _current_deeper(ts):
    return current_in(1), None


@frule(current_in)
def _current_in_deeper(ts, depth):
    return current_in(depth + 1), None


@frule(isolated_at)
def _isolated_deeper(ts, depth, sh):
    return isolated_at(depth + 1, sh), None


def _same_level(f):
    return lambda *args: (f(*args), nograd(len(args)))  # (reverse mode adds no forward level)


for _f in (current, current_in, isolated_at):
    rule(_f)(_same_level(_f))


# -- forward rules that reverse mode runs as rules of their own when it lifts tangent code

def make_function_frule_in_reverse(ts, code, closure=None, defaults=None, kwdefaults=None):
    """The reverse rule of the forward rule of ``ops.make_function``: the function made
    as reverse mode makes it (its cells' gradients travel in the shadow), no tangent
    (tangents of defaults made at an inner level are refused)."""
    if any(t is not None for t in ts[2:]):
        _refuse("a function made with default values that carry a tangent")
    fn, pb = forward(ops.make_function, code, closure, defaults, kwdefaults)
    return (fn, None), wrapping(pb, lambda d: (None, None, *pb(None if d is None else d[0])[1:]))
