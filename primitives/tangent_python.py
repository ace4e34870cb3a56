"""Forward rules of Python's operators, ``math``/``cmath`` and builtins.

Each is ``frule(tangents, *args) -> (y, dy)``.  The arithmetic operators take
numbers and arrays (a tangent of a broadcast operand is fitted to the result's
shape), and lists and tuples (``+`` concatenates the items' tangents, ``*`` by an int
repeats them); on an object they call its Python ``__add__`` (and so on) in forward
mode, then its reflected method if that returned NotImplemented.  An in-place operator
(``a += b``) changes a number's or an array's value: the array's tangent is changed
with it, in the tangent shadow.

    >>> import math
    >>> from bytegrad.runtime.frules import FRULES
    >>> FRULES[math.sin]((1.0,), 0.0)
    (0.0, 1.0)
    >>> FRULES[operator.mul]((1.0, None), 3.0, 4.0)
    (12.0, 4.0)
"""
from __future__ import annotations

import builtins
import cmath as _cmath
import math as _math
import operator
import types

from ._frozen import math, np

from ..runtime.batching import batches
from ..runtime.frules import FRULES, derived, frule
from ..runtime.jvp import jvp_call
from ..runtime.rules import RULES
from ..runtime.tangents import current
from ._tangent import consume, fit, items, minus, none_if_zero, plus, regular, seq, times
from ._util import zero_cotangent
from .math import _UNARY
from .operators import _log

_SEQ = (list, tuple)
_SCALARS = frozenset({float, int, np.float64})
_NUMBERS = (int, float, complex, bool, np.ndarray, np.generic)


def _objects(a, b) -> bool:
    """Whether an operator on ``a`` and ``b`` goes to a Python method of an object."""
    return not (isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS))


def by_methods(name, rname, op):
    """The forward rule of binary operator ``op`` on objects: ``type(a).name(a, b)``
    (a Python method, differentiated), else ``type(b).rname(b, a)``."""
    def fr(ts, a, b):
        for x, y, dx, dy, n in ((a, b, ts[0], ts[1], name), (b, a, ts[1], ts[0], rname)):
            m = getattr(type(x), n, None)
            if type(m) is types.FunctionType:
                r = jvp_call(m, None, (dx, dy), x, y)
                if r[0] is not NotImplemented:
                    return r
        return op(a, b), None  # (C methods of objects: a str, a set; no tangent)
    return fr


def _arith(op, name, rname, numbers, sequences=None):
    """The forward rule of ``op``: ``numbers(ts, a, b, y)`` for numbers and arrays,
    ``sequences(ts, a, b, y)`` for lists and tuples, else the Python methods."""
    objects = by_methods(name, rname, op)

    @frule(op)
    def fr(ts, a, b):
        if type(a) in _SCALARS and type(b) in _SCALARS:  # (the usual case, first: no shape to fit)
            y = op(a, b)
            return y, numbers(ts, a, b, y)
        if _objects(a, b):
            if sequences is not None and (type(a) in _SEQ or type(b) in _SEQ):
                y = op(a, b)
                return y, sequences(ts, a, b, y)
            return objects(ts, a, b)
        y = op(a, b)
        return y, fit(numbers(ts, a, b, y), y)
    fr.dual = fr.batches = True  # (its scalar path is what transforms/tangent.py `_DUAL` writes out)
    return fr


def _mul(ts, a, b, y):
    da, db = ts
    return plus(None if da is None else da * b, None if db is None else a * db)


def _div(ts, a, b, y):
    da, db = ts
    if da is None and db is None:
        return None
    if regular(b, True):
        return minus(da, times(db, y)) / b
    ta = None if da is None else zero_cotangent(da, da / b)  # (each term: 0 for a zero tangent)
    return minus(ta, None if db is None else zero_cotangent(db, times(db, y) / b))


def _mod(ts, a, b, y):
    da, db = ts
    return minus(da, times(db, (a - y) / b))  # d/db = -floor(a / b)


def _pow(ts, a, b, y):
    da, db = ts
    out = None
    if da is not None:
        if type(b) is int:
            out = da * (b * a ** (b - 1) if b else 0.0)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                u = b * np.power(a, b - 1) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) \
                    else _scalar_pow_slope(a, b)
            if isinstance(u, np.ndarray):
                u = np.where(np.broadcast_to(b == 0, u.shape), 0, u)
            out = da * u if regular(u) else zero_cotangent(da, da * u)  # (0.0 ** 0.5)
    if db is not None:
        out = plus(out, db * y * _log(a))
    return out


def _scalar_pow_slope(a, b):
    if b == 0:
        return 0.0
    try:
        return b * a ** (b - 1)
    except ZeroDivisionError:
        return math.inf


def _cat(ts, a, b, y):
    return none_if_zero(type(y)(seq(ts[0], a) + seq(ts[1], b))) if type(y) in _SEQ else None


def _repeat(ts, a, b, y):
    if type(y) not in _SEQ:
        return None
    xs, dxs = (a, ts[0]) if type(a) in _SEQ else (b, ts[1])
    return None if dxs is None else type(y)(seq(dxs, xs) * (len(y) // max(len(xs), 1)))


_BINARY = [
    (operator.add, "__add__", "__radd__", lambda ts, a, b, y: plus(*ts), _cat),
    (operator.sub, "__sub__", "__rsub__", lambda ts, a, b, y: minus(*ts), None),
    (operator.mul, "__mul__", "__rmul__", _mul, _repeat),
    (operator.truediv, "__truediv__", "__rtruediv__", _div, None),
    (operator.mod, "__mod__", "__rmod__", _mod, None),
    (operator.pow, "__pow__", "__rpow__", _pow, None),
    (operator.matmul, "__matmul__", "__rmatmul__",
     lambda ts, a, b, y: plus(None if ts[0] is None else ts[0] @ b, None if ts[1] is None else a @ ts[1]),
     None),
]
for _op, _name, _rname, _numbers, _seqs in _BINARY:
    _arith(_op, _name, _rname, _numbers, _seqs)

_IN_PLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
             operator.itruediv: operator.truediv, operator.imod: operator.mod,
             operator.ipow: operator.pow, operator.imatmul: operator.matmul}


def _in_place(iop, op):
    """``a op= b``: computed as ``a op b`` first (the tangent needs ``a`` as it was), then
    done in place; an array's or a list's new tangent goes into the tangent shadow."""
    out_of_place = FRULES[op]

    @frule(iop)
    def fr(ts, a, b):
        ta = type(a)
        if ta is not np.ndarray and ta is not list:
            m = getattr(ta, iop.__name__.replace("i", "__i", 1) + "__", None)
            if type(m) is types.FunctionType:
                return jvp_call(m, None, ts, a, b)
            return out_of_place(ts, a, b)
        if ta is list and iop is operator.iadd:  # (xs += any iterable: xs.extend)
            jvp_call(list.extend, None, ts, a, b)
            return a, current().refresh(a, None)
        _, dy = out_of_place(ts, a, b)
        sh = current()
        t = sh.writable(a, ts[0], f"'{_SYMBOL[op]}=' on a {ta.__name__}")  # (first: it may refuse)
        y = iop(a, b)
        if ta is list:
            t[:] = items(dy, len(a))
        elif t is not None:
            t[...] = 0.0 if dy is None else dy
        return y, sh.refresh(a, None)
    fr.dual = True  # (a number's: the operator's)
    batches(fr, arrays=True)
    return fr


@frule(operator.ior)
def _ior(ts, a, b):
    """``d |= e`` on a dict is ``d.update(e)``; other operands as the reverse rule says
    (a set of differentiable items, refused; ints, no tangent)."""
    if isinstance(a, dict) and type(getattr(type(a), "__ior__")) is not types.FunctionType:
        jvp_call(dict.update, None, ts, a, b)
        return a, current().refresh(a, None)
    return derived(operator.ior, RULES[operator.ior])(ts, a, b)


batches(_ior)


_SYMBOL = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.mod: "%", operator.pow: "**", operator.matmul: "@"}
for _iop, _op in _IN_PLACE.items():
    _in_place(_iop, _op)


@frule(operator.neg)
def _neg(ts, a):
    return -a, None if ts[0] is None else -ts[0]


_neg.dual = True
batches(_neg)


@frule(operator.pos)
def _pos(ts, a):
    return +a, ts[0]


@frule(operator.abs, builtins.abs)
def _abs(ts, a):
    y = abs(a)
    d = ts[0]
    if d is None:
        return y, None
    if isinstance(a, complex) or np.iscomplexobj(a):
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.real(np.conj(a) * d) / y
        return y, np.where(y == 0, 0.0, u) if isinstance(u, np.ndarray) else (0.0 if y == 0 else float(u))
    if isinstance(a, (np.ndarray, np.generic)):
        return y, fit(np.sign(a) * d, y)
    return y, d * ((a > 0) - (a < 0))


batches(_pos, _abs)


@frule(builtins.pow)
def _builtin_pow(ts, a, b, *mod):
    if mod:
        return pow(a, b, *mod), None
    return FRULES[operator.pow](ts, a, b)


batches(_builtin_pow)


# -- math and cmath -------------------------------------------------------------------
def _math_unary(m, f, df):
    @frule(f)
    def fr(ts, x):
        y = f(x)
        d = ts[0]
        if d is None:
            return y, None
        u = df(m, x if type(x) in (float, complex) else (float(x) if m is math else complex(x)), y)
        return y, d * u if regular(u) else zero_cotangent(d, d * u)
    fr.batches = True


for _m, _real in ((_math, math), (_cmath, None)):
    for _name, _df in _UNARY:
        if hasattr(_m, _name):
            _math_unary(_real or _m, getattr(_m, _name), _df)


def _log_frule(log):
    @frule(log)
    def fr(ts, x, *base):
        y = log(x, *base)
        d = ts[0]
        out = None if d is None else d / (x * (log(base[0]) if base else 1.0))
        if base and ts[1] is not None:
            out = plus(out, -ts[1] * y / (base[0] * log(base[0])))
        return y, out
    batches(fr)
    return fr


_log_frule(_math.log)
_log_frule(_cmath.log)


@frule(_math.pow)
def _math_pow(ts, a, b):
    return _math.pow(a, b), _pow(ts, float(a), float(b), _math.pow(a, b))


@frule(_math.atan2)
def _atan2(ts, a, b):
    y = _math.atan2(a, b)
    r2 = a * a + b * b
    if r2 == 0:
        return y, None
    return y, plus(times(ts[0], b / r2), times(ts[1], -a / r2))


@frule(_math.hypot)
def _hypot(ts, *xs):
    y = _math.hypot(*xs)
    return y, None if y == 0 else _sum_tangents([times(d, x / y) for d, x in zip(ts, xs)])


batches(_math_pow, _atan2, _hypot)


def _sum_tangents(ds):
    out = None
    for d in ds:
        out = plus(out, d)
    return out


@frule(float)
def _float(ts, *args):
    y = float(*args)
    return y, None if not args or ts[0] is None or isinstance(args[0], (str, bytes)) else float(ts[0])


@frule(complex)
def _complex(ts, *args):
    y = complex(*args)
    if any([isinstance(a, (str, bytes)) for a in args]):  # (a list: forward over forward lifts it)
        return y, None
    return y, plus(None if not ts or ts[0] is None else complex(ts[0]),
                   None if len(ts) < 2 or ts[1] is None else 1j * ts[1])


def _summing(total):
    @frule(total)
    def fr(ts, xs, *start):
        v, dv = consume(xs, ts[0])
        return _sum(total(v, *start), ts, v, dv, start)
    batches(fr)  # (it adds tangents)
    return fr


def _sum(y, ts, v, dv, start):
    """The tangent of ``y``, the sum of the items ``v`` (tangents ``dv``) and ``start``."""
    if type(y) in _SEQ:
        ds = seq(ts[1], start[0]) if start else []
        for x, d in zip(v, dv or [None] * len(v)):
            ds += seq(d, x)
        return y, none_if_zero(type(y)(ds))
    out = ts[1] if start else None
    for d in dv or ():
        out = plus(out, d)
    return y, fit(out, y)


_summing(builtins.sum)
_summing(_math.fsum)


def _extremum(f, better):
    @frule(f)
    def fr(ts, *args, key=None, **kw):
        ts, dkw = (ts[:-1], ts[-1]) if len(ts) > len(args) else (ts, {})
        v, ds = consume(args[0], ts[0]) if len(args) == 1 else (list(args), ts)
        best, bestk = -1, None
        for i, x in enumerate(v):
            k = x if key is None else key(x)
            if best < 0 or better(k, bestk):
                best, bestk = i, k
        if best < 0:  # the default, or Python's ValueError
            return f(v, key=key, **kw), dkw.get("default")
        return v[best], None if ds is None else ds[best]
    fr.keyword_tangents = True  # (the default's)
    batches(fr)  # (it picks a tangent)
    return fr


_extremum(builtins.max, operator.gt)
_extremum(builtins.min, operator.lt)


@frule(divmod)
def _divmod(ts, a, b):
    q, r = divmod(a, b)
    return (q, r), none_if_zero((None, minus(ts[0], times(ts[1], q))))


@frule(float.conjugate, complex.conjugate)
def _conjugate(ts, x):
    return x.conjugate(), None if ts[0] is None else np.conj(ts[0]) if isinstance(ts[0], np.ndarray) \
        else ts[0].conjugate()


if hasattr(_math, "sumprod"):  # (3.12; statistics.covariance and fmean with weights call it)
    @frule(_math.sumprod)
    def _sumprod(ts, p, q):
        """Σ p_i q_i: Σ (dp_i q_i + p_i dq_i), the items taken as lists (iterators too)."""
        (p, dp), (q, dq) = consume(p, ts[0]), consume(q, ts[1])
        y = _math.sumprod(p, q)
        terms = [t for a, da, b, db in zip(p, dp or [None] * len(p), q, dq or [None] * len(q))
                 for t in (times(da, b), times(db, a)) if t is not None]
        return y, sum(terms[1:], terms[0]) if terms else None
