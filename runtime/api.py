"""The public functions: gradient, pullback, grad, value_and_grad, differentiable."""
from __future__ import annotations

import functools
import inspect
import numbers
import operator
import types

import numpy as np

from . import computing, mutation, shadow
from .algebra import unwrap
from .errors import NotScalarError
from .forward import call_function, compiled, forward


_COMPUTING = computing.computing()


def pullback(f, /, *args, wrt=None, **kw):
    """``(f(*args, **kw), back)``; ``back(dy)`` returns one gradient per positional argument.

    ``wrt`` (indices of positional arguments, negative ones from the end) names the
    gradients wanted; the others are None and, when ``f`` is a plain function, not
    computed at all.
    """
    n = len(args)
    if wrt is not None:
        wrt, entry = _entry(wrt, n)
    with _COMPUTING, shadow.fresh() as sh:
        if wrt is not None and type(f) is types.FunctionType and not kw and _plain(f.__code__, n):
            y, pb = call_function(f, args, kw, wrt=entry)
        else:
            y, pb = forward(f, *args, **kw)
    if sh.mutated:
        mutation.seal(sh)

    def back(dy):
        with _COMPUTING:
            try:
                g = pb(dy)
            except BaseException:
                if sh.mutated:  # the arguments as the call left them, and no stale entries
                    mutation.reapply(sh)
                raise
            g = tuple(map(unwrap, g[1:1 + n])) if wrt is None else \
                tuple(unwrap(x) if i in wrt else None for i, x in enumerate(g[1:1 + n]))
            if sh.mutated:  # the arguments' gradients left in the shadow; the arguments' final contents
                g = tuple(mutation.collect(sh, a, x) if wrt is None or i in wrt else None
                          for i, (a, x) in enumerate(zip(args, g)))
                mutation.reapply(sh)
            return _distinct(g, (args, dy))
    return y, back


_ENTRIES: dict = {}


def _entry(wrt, n):
    """``(wrt, entry)`` for a call with ``n`` positional arguments: ``wrt`` with negative
    indices counted from the end, and the active entry arguments of the transformed
    function (0 is the function itself)."""
    key = (wrt if type(wrt) is tuple else tuple(wrt), n)
    e = _ENTRIES.get(key)
    if e is None:
        bad = [i for i in key[0] if not -n <= operator.index(i) < n]
        if bad:
            raise IndexError(f"argument index {bad[0]} (argnums/wrt) is out of range for a "
                             f"call with {n} positional arguments")
        w = tuple(sorted({operator.index(i) % n for i in key[0]}))
        e = _ENTRIES[key] = (w, (0,) + tuple(i + 1 for i in w))
    return e


def _plain(code, n) -> bool:
    """Whether a call with ``n`` positional arguments binds them to the first ``n``
    parameters of ``code`` (not into ``*args``), so the transformed function's entry
    arguments 1…n are the call's."""
    return n <= code.co_argcount and not code.co_flags & inspect.CO_VARARGS


def _distinct(gs, avoid):
    """The gradients, each array or list or dict one the caller may change in place:
    writable, and apart from the other gradients and from what ``avoid`` holds (the
    arguments, the seed), views included.  The pullback of ``a + b`` hands one array to
    both sides, and a gradient may be a view of another or of an argument, or the seed."""
    seen = set()
    _separate(avoid, seen, _DEPTH)
    return _separate(gs, seen, _DEPTH)


_DEPTH = 100  # deeper parts are handed on as they are (a linked list must not recurse away)


def _separate(g, seen, depth):
    """``g`` with every array or container already in ``seen`` (or read-only) copied;
    adds the rest to ``seen``."""
    t = type(g)
    if t is np.ndarray:
        key = id(g.base if isinstance(g.base, np.ndarray) else g)  # views share their base
        if key in seen or not g.flags.writeable:
            return g.copy()
        seen.add(key)
        return g
    if depth == 0 or not (t is dict or t is list or isinstance(g, tuple)):
        return g
    if t is not tuple and not hasattr(g, "_fields"):  # a list or dict: it may be changed
        if id(g) in seen:
            g = t(g)
        seen.add(id(g))
    if t is dict:
        out = {k: _separate(v, seen, depth - 1) for k, v in g.items()}
        return g if all(out[k] is v for k, v in g.items()) else out
    out = None
    for i, v in enumerate(g):
        if type(v) in _LEAVES:  # (the usual case, without a call)
            continue
        w = _separate(v, seen, depth - 1)
        if w is not v:
            out = out or list(g)
            out[i] = w
    if out is None:
        return g
    return t(*out) if hasattr(g, "_fields") else t(out)


_LEAVES = frozenset({float, int, bool, complex, type(None), np.float64, str})


def stop_gradient(x):
    """``x``, through which no gradient flows (a rule marks it non-differentiable)."""
    shadow.hand_on(x, "stop_gradient")
    return x


def _seed(y, f):
    if type(y) is float or type(y) is np.float64:
        return 1.0
    if isinstance(y, complex) or np.iscomplexobj(y):
        raise NotScalarError(_scalar_message(f, y, "is complex"))
    if isinstance(y, float):
        return 1.0
    if isinstance(y, np.ndarray) and y.size == 1 and y.dtype.kind == "f":
        return np.ones_like(y)
    if isinstance(y, np.floating):
        return y.dtype.type(1)
    if isinstance(y, numbers.Number):
        return type(y)(1)
    raise NotScalarError(_scalar_message(f, y, f"is a {type(y).__name__}"))


def _scalar_message(f, y, what):
    name = getattr(f, "__qualname__", repr(f))
    return (f"gradient needs a real scalar output, but {name} returned a value that {what}; "
            f"use bytegrad.pullback({name}, ...) and call its back with a gradient of the output")


def gradient(f, /, *args, **kw):
    """Gradients of the scalar ``f(*args, **kw)``, one per positional argument (None where
    there is none)."""
    return value_and_gradient(f, *args, **kw)[1]


def value_and_gradient(f, /, *args, wrt=None, **kw):
    with _COMPUTING:  # until the tape is gone, so the collector never sees it
        y, back = pullback(f, *args, wrt=wrt, **kw)
        if isinstance(y, (bool, int, np.integer, np.bool_)):  # piecewise constant: no gradient
            return y, (None,) * len(args)
        g = back(_seed(y, f))
        del back
    return y, g


def value_and_grad(f, argnums=0):
    """JAX's convention: a function returning ``(f(*args), gradient in argnums)``."""
    single = isinstance(argnums, (int, np.integer))
    wanted = (operator.index(argnums),) if single else tuple(map(operator.index, argnums))
    repeats = len(set(wanted)) < len(wanted) or min(wanted, default=0) < 0  # one may repeat

    @functools.wraps(f)
    def vg(*args, **kw):
        y, gs = value_and_gradient(f, *args, wrt=wanted, **kw)
        if single:
            return y, gs[wanted[0]]
        gs = tuple(gs[i] for i in wanted)
        return y, _distinct(gs, ()) if repeats else gs
    return vg


def grad(f, argnums=0):
    """JAX's convention: a function returning the gradient of ``f`` in ``argnums``."""
    vg = value_and_grad(f, argnums)
    return functools.wraps(f)(lambda *args, **kw: vg(*args, **kw)[1])


def stages(f):
    """The IR stages of ``f``: ``lifted``, ``forward`` and ``adjoint``."""
    return compiled(getattr(f, "__func__", f)).stages


class differentiable:
    """``@differentiable``: ``f`` runs as before and gains ``.grad``, ``.value_and_grad``,
    ``.pullback`` and ``.ir(stage)``."""

    def __init__(self, f):
        functools.update_wrapper(self, f)
        self.f = f

    def __call__(self, *args, **kw):
        return self.f(*args, **kw)

    def __get__(self, obj, objtype=None):
        return self if obj is None else differentiable(types.MethodType(self.f, obj))

    def grad(self, *args, **kw):
        gs = gradient(self.f, *args, **kw)
        return gs[0] if len(gs) == 1 else gs

    def value_and_grad(self, *args, **kw):
        y, gs = value_and_gradient(self.f, *args, **kw)
        return y, (gs[0] if len(gs) == 1 else gs)

    def pullback(self, *args, **kw):
        return pullback(self.f, *args, **kw)

    def ir(self, stage="lifted"):
        from ..ir import show
        return show(getattr(stages(self.f), stage))
