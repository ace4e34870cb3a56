"""Rules for the differentiable builtins: ``min``, ``max``, ``sum``, ``float``,
``complex``, ``round`` and ``divmod``; ``int`` and ``bool`` carry no gradient.
(``abs`` and ``pow`` are with the operators.)

``min`` and ``max`` take either several arguments or one iterable, with optional
``key=`` and ``default=``: the whole gradient goes to the selected element (or to
``default``), never through ``key``.  On ties it goes to the first selected element,
the one Python returns: when ``a == b``, ``max(a, b)`` routes everything to ``a``.

``sum(xs, start)`` gives every item of ``xs`` the output's gradient, in a gradient
of the same kind as ``xs`` (tuple, list or array; O(n) for n items); a ``sum`` of
lists or tuples (concatenation) splits the gradient among them.  ``round`` has a
zero gradient of the argument's type; ``divmod(a, b)`` gives its quotient a zero
gradient and its remainder the gradient of ``a % b`` (d/da = 1, d/db = -(a // b)).
``float(x)`` passes the gradient through to a number or 0-d array ``x`` (none for a
string); ``complex(re, im)`` gives ``re`` the real part and ``im`` the imaginary
part of the gradient (the Zygote convention for complex numbers).
"""
from __future__ import annotations

import builtins
import numbers
import operator as op

from ._frozen import np

from ..runtime.rules import nograd, nondifferentiable, returns_scalars, rule
from ._util import unbroadcast as ub
from .math import items, mirror

_NONE = object()
_TEXT = (str, bytes, bytearray)


def _int(x) -> bool:
    t = type(x)
    return t is int or t is bool


def _item_grad(x, d):
    """The gradient ``d`` of the selected item ``x``: fitted to a number's or array's
    type; a tuple, list or object (``max(pairs, key=...)``) takes ``d`` as it is."""
    if isinstance(x, (numbers.Number, np.ndarray, np.generic)):
        return ub(x, d)
    return d


def _extremum(f, better):
    """The rule of ``min`` or ``max``: ``better(a, b)`` is the comparison by which
    Python replaces its current choice ``b`` with ``a``."""
    @rule(f, keywords=("key", "default"))  # (a key only chooses: it gets no gradient)
    def _(*args, key=None, default=_NONE):
        kw = {} if default is _NONE else {"default": default}
        if len(args) == 1:
            xs = args[0]
            v = items(xs)
        else:
            v = xs = args
            if not args or kw:  # let Python raise its own TypeError
                f(*args, key=key, **kw)
        best, bestk = -1, None
        for i, x in enumerate(v):
            k = x if key is None else key(x)
            if best < 0 or better(k, bestk):
                best, bestk = i, k
        if best < 0:
            y = f(v, key=key, **kw)  # the default, or Python's ValueError
            return y, lambda d: (None, None, {"default": _item_grad(kw["default"], d)})
        y = v[best]

        def back(d):
            g = _item_grad(y, d)
            if g is None:
                return (None,) * (len(args) + 1)
            if len(args) > 1:
                return (None,) * (best + 1) + (g,) + (None,) * (len(args) - best - 1)
            gs = [None] * len(v)
            gs[best] = g
            return None, mirror(xs, gs)
        return y, back


_extremum(builtins.max, op.gt)
_extremum(builtins.min, op.lt)


@rule(builtins.sum)
def _sum(xs, *args, **kw):
    start = args[0] if args else kw.get("start", 0)
    v = items(xs)
    y = builtins.sum(v, *args, **kw)

    def back(d):
        if isinstance(y, (list, tuple)):  # concatenation: each part gets its slice
            at, parts = len(start), []
            for x in v:
                parts.append(type(x)(d[at:at + len(x)]))
                at += len(x)
            gx, gstart = mirror(xs, parts), type(start)(d[:len(start)])
        else:
            if isinstance(xs, np.ndarray) and xs.ndim == 1 and np.ndim(d) == 0:
                gx = ub(xs, np.full(xs.shape, d))
            else:
                gx = mirror(xs, [None if _int(x) else ub(x, d) for x in v])
            gstart = None if _int(start) else ub(start, d)
        if args:
            return None, gx, gstart
        return (None, gx) + (({"start": gstart},) if kw else ())
    return y, back


@rule(float)
def _float(*args):
    y = float(*args)
    if not args or isinstance(args[0], _TEXT) or _int(args[0]):
        return y, nograd(len(args))
    x = args[0]
    return y, lambda d: (None, ub(x, d))


@rule(complex)
def _complex(*args, **kw):
    y = complex(*args, **kw)
    parts = dict(zip(("real", "imag"), args), **kw)
    if any(isinstance(p, _TEXT) for p in parts.values()):
        return y, nograd(len(args))

    def back(d):
        g = {name: None if _int(p) else ub(p, d if name == "real" else -1j * d)
             for name, p in parts.items()}
        pos = tuple(g[name] for name in ("real", "imag")[:len(args)])
        return (None,) + pos + (({name: g[name] for name in kw},) if kw else ())
    return y, back


@rule(round)
def _round(x, *ndigits, **kw):
    y = round(x, *ndigits, **kw)
    return y, lambda d: (None, ub(x, d * 0)) + (None,) * len(ndigits)


@rule(divmod)
def _divmod(a, b):
    y = q, _ = divmod(a, b)

    def back(d):
        dq, dr = d
        g = dr if dr is not None else None if dq is None else dq * 0
        if g is None:
            return None, None, None
        return None, ub(a, g), ub(b, -g * q)
    return y, back


nondifferentiable(int, bool)

returns_scalars("scalar", len, int, float, bool, complex, hash, id, ord, isinstance, issubclass,
                callable)
returns_scalars("range", range)
