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
import inspect
import operator
import types

import numpy as np

from . import api, batching, jax_api, shadow
from .algebra import is_differentiable, unwrap
from .batching import Batch
from .binding import bind
from .computing import computing
from .errors import full_name, user_location
from . import forward as fw
from .forward import forward
from .frules import derived, frule, frule_for
from ..ir import ops
from .jvp import _PLANS, VARIANTS, compiled_tangent, constructor, jvp_call, jvp_call_kw
from .mutation import wrapping
from .rules import CALLS, Lazy, Rule, nondifferentiable, nograd, passes_keywords, record_of, rule
from .tangents import TangentShadow, current, current_in, isolated_at

_COMPUTING = computing()


class NestingError(NotImplementedError):
    """A construct nested differentiation does not reach yet, named with the user's line."""


def refuse_nested(what, fix="differentiate it at first order, or give it a rule"):
    file, line = user_location()
    raise NestingError(f"{file}:{line}: nested differentiation (a gradient of a gradient, or a "
                       f"jvp of one) does not reach {what} yet; {fix}")


# -- running a function's tangent code as an ordinary function ------------------------

def _plan(f, args, kw):
    """How `jvp_call(f, df, dargs, *args, **kw)` runs, as a callable another level can
    lift: ``("frule", fr, b)``, ``fr(dargs, *args)`` (``"derived"``: ``fr`` derived from
    the reverse rule, which a level cannot lift); ``("code", tf, b)``,
    ``tf(f, *args, df, *dargs)``; ``("self", g, obj)``, ``g`` called with ``obj`` first
    (a bound method, a callable object); ``("plain",)``, no tangent.  ``b`` (None: the
    call as it is) lays a call with keywords, or another number of arguments than the
    code's, out by position (`_Call`, `_Moved`)."""
    n = len(args)
    fr = frule_for(f)
    if fr is not None:
        return ("frule", fr, _Moved.of(f, fr, args, kw))
    r = record_of(f)
    if r is not None and r.nondiff:
        return ("plain",)
    if r is not None and r.fn is not None:
        return ("derived", derived(f, r), _Moved.of(f, None, args, kw))
    t = type(f)
    if t is types.FunctionType:
        c = compiled_tangent(f, _nested())
        if c.generator:  # (its tangent code is sent (value, tangent) pairs: no level lifts that)
            refuse_nested(f"the generator {full_name(f)} (a generator expression or function) in forward "
                    f"mode", "compute its items into a list first ([... for v in xs]), or "
                    "differentiate it at first order")
        return ("code", types.FunctionType(c.tangent_code, f.__globals__),
                None if c.arity == n and not kw else _Call(f, n, tuple(kw)))
    if t is types.MethodType:
        return ("self", f.__func__, f.__self__)
    if fw.c_bound(f, t):
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
    if isinstance(f, type) and _named_tuple(f):
        return ("self", f.__new__, f)  # (its __new__ alone makes it)
    made = isinstance(f, type) and constructor(f, n, kw, _nested())
    if made:
        return ("code", made, None)
    return ("opaque",)


def _nested():
    """The variant of tangent code a level lifts: batched in `hessian`'s batched pass."""
    return VARIANTS[True, batching.reversing() is not None]


def _named_tuple(cls) -> bool:
    """Whether ``cls`` is a class of ``collections.namedtuple``'s, whose call is its own
    ``__new__`` (which makes an instance of ``cls`` itself: no ``__init__`` runs)."""
    new = getattr(cls, "__new__", None)
    return issubclass(cls, tuple) and cls.__init__ is object.__init__ and \
        getattr(new, "__globals__", {}).get("_tuple_new") is tuple.__new__


class refusing_changes:
    """``with refusing_changes(sh, f):`` runs the block, then `refuse_changes` what it
    changed in tangent shadow ``sh``; also when it fails (what a change in place left
    behind may fail first: the change is named)."""

    def __init__(self, sh, f):
        self.sh, self.f = sh, f

    def __enter__(self):
        self.before, self.was = len(self.sh.entries), self.sh.located
        _locating(self.sh)

    def __exit__(self, *exc):
        try:
            refuse_changes(self.sh, self.f, self.before)
        finally:
            self.sh.located = self.was


def _locating(sh):
    """Have tangent shadow ``sh`` record where each of its entries is made, for a
    refusal to name the line of the change."""
    if sh.located is None:
        sh.located = {}


def refuse_changes(sh, f, before=0):
    """Refuse what tangent code of ``f`` run under reverse mode changed in place (the new
    entries of tangent shadow ``sh`` past ``before``): reverse mode does not follow a
    tangent kept in the shadow."""
    x = _changed(sh, before)
    if x is not None:
        refuse_nested(f"a change in place (xs.append(v), a[i] = v, a += b, obj.x = v){_where(sh, x)} in "
                      f"{full_name(f)}, differentiated to second order", "build a new value instead "
                      "(xs = xs + [v], a = np.where(...)), or differentiate it at first order")


def _where(sh, x):
    """`` at file:line`` where tangent shadow ``sh`` recorded the change of ``x``, or ``""``."""
    where = None if x is None else (sh.located or {}).get(id(x))
    return f" at {where[0]}:{where[1]}" if where else ""


def _changed(sh, before):
    """The first object the entries of tangent shadow ``sh`` past ``before`` record a
    change in place of (not a module and its namespace, which a read of a module
    attribute enters), or None."""
    xs = [x for x, _ in list(sh.entries.values())[before:]] if len(sh.entries) != before else []
    spaces = {id(vars(x)) for x in xs if isinstance(x, types.ModuleType)}
    return next((x for x in xs if not isinstance(x, types.ModuleType) and id(x) not in spaces), None)


_LAYOUTS: dict = {}


class _Call:
    """A call of Python function ``f`` with ``n`` arguments and the keywords ``keys`` as
    its code's entry takes it: each parameter in code order (positional, keyword-only, a
    tuple for ``*args``, a dict for ``**kw``), defaults filled in as constants.  `bind`
    lays out values given as the call gives its arguments (``zero``: tangents, a default's
    None), `unbind` the parameters' gradients back as ``(positional, keywords)``."""

    rest: dict = {}  # (the keywords left: none)

    def __init__(self, f, n, keys):
        dflt, kwd = f.__defaults__ or (), f.__kwdefaults__ or {}
        key = (f.__code__, n, keys, len(dflt), tuple(kwd))
        self.f, self.n, self.layout = f, n, _LAYOUTS.get(key) or _LAYOUTS.setdefault(key, _layout(f, n, keys))

    def bind(self, xs, kws, zero=False):
        def one(s):
            return xs[s[1]] if s[0] == "arg" else kws.get(s[1])
        out = []
        for kind, x in self.layout:
            out.append(one(x) if kind == "one" else tuple(map(one, x)) if kind == "star" else
                       {k: one(s) for k, s in x} if kind == "dstar" else None if zero else
                       self.f.__defaults__[x] if kind == "default" else self.f.__kwdefaults__[x])
        return tuple(out)

    def unbind(self, gs, rest=None):  # (``rest``: as `_Moved`'s; no keyword is left here)
        ga, gk = [None] * self.n, {}

        def put(s, g):
            if s[0] == "arg":
                ga[s[1]] = g
            else:
                gk[s[1]] = g
        for (kind, x), g in zip(self.layout, gs):
            if kind == "one":
                put(x, g)
            elif kind == "star":
                for j, s in enumerate(x):
                    put(s, None if g is None else g[j])
            elif kind == "dstar":
                for k, s in x:
                    put(s, None if g is None else g.get(k))
        return tuple(ga), gk


def _layout(f, n, keys):
    """`_Call`'s layout: per parameter ``("one", source)``, ``("star", sources)``,
    ``("dstar", ((key, source), ...))``, ``("default", index)`` or ``("kwdefault",
    name)``, a source being ``("arg", i)`` or ``("kw", name)``; binding raises Python's
    TypeError for a call that does not fit."""
    P = inspect.Parameter
    sig = fw._code_signature(f)
    ba = fw._bind_as_python(sig, [("arg", i) for i in range(n)], {k: ("kw", k) for k in keys})
    first = f.__code__.co_argcount - len(f.__defaults__ or ())
    out = []
    for j, name in enumerate(fw._entry_names(f.__code__)):
        kind, v = sig.parameters[name].kind, ba.arguments.get(name)
        out.append(("star", tuple(v or ())) if kind is P.VAR_POSITIONAL else
                   ("dstar", tuple((v or {}).items())) if kind is P.VAR_KEYWORD else
                   ("one", v) if name in ba.arguments else
                   ("kwdefault", name) if kind is P.KEYWORD_ONLY else ("default", j - first))
    return tuple(out)


class _Moved:
    """A call with keywords of a callable with a forward rule ``fr``, those keywords that
    name positions moved there (`binding.bind`).  The keywords left (``rest``) stay
    keywords: constants, or values with tangents when ``fr`` takes the keywords' tangents
    in a trailing dict (``keyword_tangents``: a level's own `jvp_call_kw`).  `bind` and
    `unbind` as `_Call`'s."""

    @classmethod
    def of(cls, f, fr, args, kw):
        return cls(f, fr, args, kw) if kw else None

    def __init__(self, f, fr, args, kw):
        b = bind(f, record_of(f) or _PLANS.setdefault(f, Rule()), args, kw)
        if b is None:
            refuse_nested(f"this call of {full_name(f)} (a position it skips has no default)")
        new, self.rest, self.moved = b
        self.n, self.m, self.filled = len(args), len(new), new[len(args):]
        self.keyed = bool(self.rest) and getattr(fr, "keyword_tangents", False)
        stuck = [k for k, v in self.rest.items() if is_differentiable(v)]
        if stuck and not self.keyed:
            refuse_nested(f"the keyword argument {stuck[0]!r} of {full_name(f)}, which its rule takes as "
                    f"a keyword; pass it by position")

    def bind(self, xs, kws, zero=False):
        at = {i: k for k, i in self.moved.items()}
        out = tuple(xs) + tuple(kws.get(at[i]) if i in at else None if zero else x
                                for i, x in enumerate(self.filled, self.n))
        return out + ({k: kws.get(k) for k in self.rest},) if zero and self.keyed else out

    def unbind(self, gs, rest=None):
        """``rest``: the gradients of the keywords left (a dict); for tangents, the
        trailing dict of ``gs``."""
        rest = gs[self.m] if self.keyed and len(gs) > self.m else rest
        named = {k: gs[i] for k, i in self.moved.items()}
        if self.keyed and rest is not None:
            named.update((k, rest.get(k)) for k in self.rest)
        return tuple(gs[:self.n]), named


def _laid(b, xs, kws, zero=False):
    return tuple(xs) if b is None else b.bind(xs, kws, zero)


def _unlaid(b, gs, rest=None):
    return (tuple(gs), {}) if b is None else b.unbind(gs, rest)


def _full(ts, n):
    return (None,) * n if ts is None else tuple(ts)


@rule(jvp_call)
def _jvp_call_rule(f, df, dargs, /, *args, **kw):
    """Reverse over forward: the pullback of the tangent code (or forward rule) run."""
    fr = None if kw else frule_for(f)
    if fr is not None:  # (the common case, `_reverse_over_forward`'s first, without its layout: -25%)
        y, pb = forward(fr, batching.forward_rule_tangents(fr, dargs), *args)
        return y, wrapping(pb, lambda d: (None, None, None, *pb(d)[1:]))
    y, back = _reverse_over_forward(f, df, dargs, None, args, kw)
    return y, _laid_out(back, False, kw)


@rule(jvp_call_kw)
def _jvp_call_kw_rule(f, df, dargs, dkw, /, *args, **kw):
    y, back = _reverse_over_forward(f, df, dargs, dkw, args, kw)
    return y, _laid_out(back, True, kw)


passes_keywords(jvp_call, jvp_call_kw)


def _laid_out(back, keyed, kw):
    """A rule's pullback from `_reverse_over_forward`'s ``back``: the gradients of
    ``(f, df, dargs[, dkw], *args)``, then the keywords' in a dict."""
    def pb(d):
        gf, gdf, gd, gkd, ga, gka = back(d)
        return (None, gf, gdf, gd) + ((gkd or None,) if keyed else ()) + ga + ((gka,) if kw else ())
    return wrapping(back, pb)


def _reverse_over_forward(f, df, dargs, dkw, args, kw):
    """``jvp_call_kw(f, df, dargs, dkw, *args, **kw)`` run so this level can pull back
    through it: ``(y, back)``, ``back(d)`` the gradients of ``f``, ``df``, ``dargs``,
    ``dkw`` (a dict), ``args`` (a tuple) and ``kw`` (a dict)."""
    n = len(args)
    plan = _plan(f, args, kw)
    dargs, dkw = _full(dargs, n), dkw or {}
    if plan[0] == "self":
        y, back = _reverse_over_forward(plan[1], None, (df,) + dargs, dkw, (plan[2],) + args, kw)

        def by_self(d):
            _, _, gd, gkd, ga, gka = back(d)
            return ga[0], gd[0], gd[1:], gkd, ga[1:], gka
        return y, wrapping(back, by_self)
    if plan[0] in ("plain", "opaque"):
        return _opaque(plan, f, dargs, args, kw), lambda d: (None, None, (None,) * n, None, (None,) * n, {})
    b = plan[2]
    ins, dins = _laid(b, args, kw), _laid(b, dargs, dkw, True)
    m = len(ins)
    if plan[0] == "derived":
        _derived_untangented(f, dins)
    if plan[0] in ("frule", "derived"):
        dins = batching.forward_rule_tangents(plan[1], dins)
        y, pb = forward(plan[1], dins, *ins, **(b.rest if b else {}))  # (arithmetic: `second_order_rules`)

        def back(d):
            g = pb(d)  # (_, d_dins, *d_ins[, d_rest])
            rest = g[2 + m] if b is not None and b.keyed else None
            return (None, None) + _unlaid(b, g[1] or (None,) * len(dins)) + \
                _unlaid(b, [g[2 + i] for i in range(m)], rest)
        return y, wrapping(pb, back)
    with refusing_changes(current(), f):
        y, pb = forward(plan[1], f, *ins, df, *dins)

    def back(d):
        g = pb(d)  # (_, d_f, *d_ins, d_df, *d_dins)
        return (g[1], g[2 + m]) + _unlaid(b, [g[3 + m + i] for i in range(m)]) + \
            _unlaid(b, [g[2 + i] for i in range(m)])
    return y, wrapping(pb, back)


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
            dx is not None and type(dx) is not np.ndarray and type(dx) is not Batch:
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
            frule(fr)(lifted_frule(fr))


def lifted_frule(fr):
    """A forward rule for forward rule ``fr`` that has a reverse rule of its own (for
    reverse over forward): its tangent code, run, where forward over forward would
    otherwise derive one from that reverse rule."""
    def r(tts, *args, **kw):
        b = _Call(fr, len(args), tuple(kw))
        ts = b.bind(_full(tts[:len(args)], len(args)), tts[-1] if kw else {}, True)
        return _tangent_function(fr)(*((fr,) + b.bind(args, kw) + (None,) + ts))
    r.keyword_tangents = True
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
    return _forward_over_forward((f, df, dargs, None, args, kw),
                                 (ts[0], ts[1], ts[2], None, ts[3:3 + len(args)], ts[-1] if kw else None))


@frule(jvp_call_kw)
def _jvp_call_kw_frule(ts, f, df, dargs, dkw, /, *args, **kw):
    return _forward_over_forward((f, df, dargs, dkw, args, kw),
                                 (ts[0], ts[1], ts[2], ts[3], ts[4:4 + len(args)], ts[-1] if kw else None))


_jvp_call_frule.keyword_tangents = _jvp_call_kw_frule.keyword_tangents = True


def _forward_over_forward(call, tangents):
    """`jvp_call_kw` of ``call``, ``(f, df, dargs, dkw, args, kw)``, with ``tangents``
    of each, run by this level (each level's tangent code a function it calls)."""
    f, df, dargs, dkw, args, kw = call
    tf, tdf, tdargs, tdkw, targs, tkw = tangents
    n = len(args)
    plan = _plan(f, args, kw)
    dargs, tdargs, targs = _full(dargs, n), _full(tdargs, n), _full(targs, n)
    dkw, tdkw, tkw = dkw or {}, tdkw or {}, tkw or {}
    if plan[0] == "self":
        return _forward_over_forward((plan[1], None, (df,) + dargs, dkw, (plan[2],) + args, kw),
                                     (None, None, (tdf,) + tdargs, tdkw, (tf,) + targs, tkw))
    if plan[0] in ("plain", "opaque"):
        return _opaque(plan, f, dargs, args, kw), None
    b = plan[2]
    ins, dins = _laid(b, args, kw), _laid(b, dargs, dkw, True)
    tins, tdins = _laid(b, targs, tkw, True), _laid(b, tdargs, tdkw, True)
    if plan[0] == "derived":
        _derived_untangented(f, dins)
    if plan[0] in ("frule", "derived"):
        if b is None:
            return jvp_call(*((plan[1], None, (tdins,) + tins, dins) + ins))
        trest = {k: tkw.get(k) for k in b.rest}
        return jvp_call_kw(*((plan[1], None, (tdins,) + tins, trest, dins) + ins), **b.rest)
    sh = current_in(1)  # (the inner level's shadow: the one its tangent code changes)
    before = _changes_so_far(sh)
    out = jvp_call(*((plan[1], None, (tf,) + tins + (tdf,) + tdins, f) + ins + (df,) + dins))
    refuse_changes(sh, f, before)
    return out


def _changes_so_far(sh):
    return len(sh.entries)


nondifferentiable(_changes_so_far, refuse_changes)  # (a level lifting the rule runs them plainly)


def _derived_untangented(f, dins):
    """Refuse a forward rule derived from ``f``'s reverse rule (a pullback per output
    element, seeded in place) where a tangent reaches it: a level cannot lift that."""
    if any([d is not None for d in dins]):
        refuse_nested(f"{full_name(f)}, whose forward rule is derived from its reverse rule; register "
                f"one with @bytegrad.frule({getattr(f, '__name__', 'f')})")


def _opaque(plan, f, dargs, args, kw):
    """`jvp_call` of a callable no level can lift: run where no tangent reaches it (or
    none can: ``plan`` is plain)."""
    if plan[0] == "plain" or all(d is None for d in _full(dargs, len(args))):
        return jvp_call(*((f, None, dargs) + args), **kw)
    if isinstance(f, type):
        refuse_nested(f"the call of the class {full_name(f)} (of a __new__ of its own, or an __init__ "
                      "given keywords, *args or defaults, or with a closure, as super() makes)",
                      "make the object outside, or differentiate it at first order")
    refuse_nested(f"{full_name(f)} (no forward rule, no Python code)")


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
        refuse_nested(f"{what} that carry a gradient; pass them by position")


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

def _kept(args):
    """What an inner gradient's ``f`` may change, before it runs: a copy of its arguments,
    and the changes in place the outer forward level has followed so far."""
    sh = current()
    _locating(sh)
    return jax_api._copied(args), _changes_so_far(sh)


def _unchanged(f, args, kept):
    """Refuse an inner gradient's ``f`` that changed its arguments, or anything the outer
    forward level follows (a global array, a list it built), in place: the inner
    computation runs ``f`` again (`vjp_at`), which would see what it changed."""
    copied, before = kept
    sh = current()
    if copied is not None and not jax_api._same(args, copied):
        refuse_nested(f"a change in place of its arguments{_where(sh, _changed(sh, before))} by "
                      f"{full_name(f)}, differentiated to second order", "change a copy of them (a = "
                      "a.copy(), xs = list(xs)), or differentiate it at first order")
    refuse_changes(sh, f, before)


nondifferentiable(_kept, _unchanged)  # (a level lifting the API functions runs them plainly)


def _value_of(f, args, kw):
    """``f(*args, **kw)``: an inner gradient's function run at the outer level for its
    value.  Reverse mode lifts it as it is; forward mode runs the tangent code nesting
    runs (`jvp.NESTED`), in which a list or array ``f`` makes and changes passes its
    tangent on with it, where the outer level's shadow would keep it (refused after)."""
    return f(*args, **kw)


@frule(_value_of)
def _value_of_tangent(ts, f, args, kw):
    sh = current()
    was, sh.nested = sh.nested, True
    try:
        return jvp_call_kw(*((f, ts[0], _full(ts[1], len(args)), ts[2]) + tuple(args)), **kw)
    finally:
        sh.nested = was


def _value_and_gradient(f, args, wrt, kw):
    kept = _kept(args)
    y = _value_of(f, args, kw)
    _unchanged(f, args, kept)
    if isinstance(y, (bool, int, np.integer, np.bool_)):
        return y, (None,) * len(args)
    return y, vjp_at(f, args, wrt, kw, api._seed(y, f))


def _with_aux(f, args, wrt, kw):
    kept = _kept(args)
    y = _value_of(f, args, kw)
    _unchanged(f, args, kept)
    out, _ = jax_api._aux_pair(y, f)
    if isinstance(out, (bool, int, np.integer, np.bool_)):
        return y, (None,) * len(args)
    return y, vjp_at(f, args, wrt, kw, type(y)((api._seed(out, f), None)))


def _pullback(f, /, *args, wrt=None, **kw):
    # (a partial, not a closure: code made in lifted code takes the user's globals)
    return _value_of(f, args, kw), functools.partial(vjp_at, f, args, wrt, kw)


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

nondifferentiable(_plan, _seeded, _Call, _tangent_function, jax_api._held, isolated_at.__enter__, isolated_at.__exit__, TangentShadow,
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
        refuse_nested("a function made with default values that carry a tangent")
    fn, pb = forward(ops.make_function, code, closure, defaults, kwdefaults)
    return (fn, None), wrapping(pb, lambda d: (None, None, *pb(None if d is None else d[0])[1:]))
