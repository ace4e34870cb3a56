"""Rules that put values on the tape, not closures: arithmetic on real scalars, ``math``
functions of floats, and reads of one element of an array; for real floating arrays that
need no watching (`ops.watch`), ``a ± b`` (their shapes and dtypes) and ``a ** n``.

Scalar loops are made of these, one closure and its cells per operation otherwise; array
code, a closure, its `Lazy` result and the rule's own layers.
Each rule here is a pair.  ``record(push, *args)`` runs in the forward code in place of
the call: for real scalars it pushes what the derivative needs (the operands, or a small
int saying which are floats) and returns the result; for anything else it calls the
operation's ordinary rule and pushes its pullback (through ``ops.watch``, as the register
pass would).  ``back(pop, d)`` runs in the adjoint: it pops what ``record`` pushed,
telling the two apart by the type of the last entry (a number, never a pullback), and
returns the gradients laid out as a pullback's: ``(d_callee, d_arg1, …)``.  A gradient
of an int operand is None, as everywhere.  With ``d`` None it still pops its entries.

    %5 = operator.mul(%2, %3)   →   forward:  %5 = taped.mul_record(%4, %2, %3)
                                    adjoint:  %9 = taped.mul_back(%1, @g5)

(``%4`` is the tape's ``append``, ``%1`` the adjoint's ``pop``.)
"""
from __future__ import annotations

from ._frozen import math
import operator as op
from functools import partial

from ._frozen import np

from ..ir.ops import Inline, InlineBack, watch
from ..runtime.algebra import Buffer, OneHot, accum
from ..runtime.mutation import runs_without_gradient
from ..runtime.rules import RULES, Lazy, taped
from ..runtime.watch import KEPT, WATCH
from ._util import Like, unbroadcast as ub, zero_cotangent
from .math import _UNARY
from .operators import _minus, int_power_grad, pow_back

_F64 = np.float64
_NONES = (None,) * 4


def _slow(w, push, f, *args):
    """The call through ``f``'s ordinary rule, its pullback on the tape, watched through
    ``w`` (`WATCH`, or `KEPT` for the record of a value the function only reads)."""
    y, pb = RULES[f].fn(*args)
    push(watch(w, pb, y, f, *args))
    return y


def _slow_back(pb, d):
    if d is None and not runs_without_gradient(pb):
        return _NONES
    return pb(d)


_FLOATS = frozenset({float, _F64})
_REAL = _FLOATS | {int}  # (not bool, complex, nor float32: they take the rule)


def _plain(w, a, b):
    """Whether ``a`` and ``b`` are real floating arrays whose result needs no watching
    (`ops.watch`: nothing mutated yet, and ``w`` lets arrays by: a `KEPT` value)."""
    return not w.all and a.dtype.kind == "f" == b.dtype.kind and _ARRAY not in w.kinds


_ARRAY = np.ndarray
_SHAPED, _BROADCAST = 4, 5  # on the tape after the arrays' `Like`s: one (both alike), or two


def _signed(f, sign, w):
    """``a + b`` (sign 1) or ``a - b`` (-1): the derivatives need only the kinds of
    numbers, or the shapes and dtypes of arrays."""
    minus = ub if sign > 0 else _minus

    def record(push, a, b):
        ta, tb = type(a), type(b)
        if ta not in _REAL or tb not in _REAL:
            if ta is _ARRAY is tb and _plain(w, a, b):
                y = a + b if sign > 0 else a - b
                if type(y) is _ARRAY:  # (not of two 0-d arrays)
                    push(Like((a.shape, a.dtype)))
                    if a.shape == b.shape and a.dtype is b.dtype:
                        push(_SHAPED)
                    else:
                        push(Like((b.shape, b.dtype)))
                        push(_BROADCAST)
                    return y
            return _slow(w, push, f, a, b)
        push((ta is not int) + 2 * (tb is not int))  # which are floats: 0-3
        return a + b if sign > 0 else a - b

    def given(k, pop, d):
        if type(k) is not int:
            return _slow_back(k, d)
        if k >= _SHAPED:
            lb = pop()
            la = pop() if k == _BROADCAST else lb
            if d is None:
                return _NONES
            return Lazy(None, partial(ub, la, d), partial(minus, lb, d))
        if d is None:
            return _NONES
        return None, d if k & 1 else None, (d if sign > 0 else -d) if k & 2 else None
    # (ints: a loop bound or a recursion's depth that an active call also takes)
    record.inline = Inline((float, float), f, [("const", 3)], also=[((int, int), [("const", 0)])])
    db = "d" if sign > 0 else (op.neg, "d")
    return record, _popping(given, [(("is", 3), (), ("d", db)), (("is", 0), (), (None, None))])


_MIXED = object()  # on the tape after operands one of which is an int: the back looks at their types


def _operands(f, grads, unrolled, w):
    """``a * b``-like: the derivatives need the operands; ``grads(a, b, d)`` gives
    ``(da, db)`` for floats; ``unrolled`` is the same as expressions over ``a``, ``b``
    (``k``) and ``d`` (see `InlineBack`)."""
    def record(push, a, b):
        ta, tb = type(a), type(b)
        if ta not in _REAL or tb not in _REAL:
            return _slow(w, push, f, a, b)
        y = f(a, b)  # (first: what raises, 1.0 / 0.0, leaves nothing on the tape)
        push(a)
        push(b)
        if ta is int or tb is int:
            push(_MIXED)
        return y

    def given(b, pop, d):
        if b is _MIXED:
            b = pop()
        elif type(b) not in _FLOATS:
            return _slow_back(b, d)
        a = pop()
        if d is None:
            return _NONES
        da, db = grads(a, b, d)
        return None, None if type(a) is int else da, None if type(b) is int else db
    record.inline = Inline((float, float), f, [0, 1])
    # (an array's element is a float64: both kinds of float take the written-out path)
    return record, _popping(given, unrolled and [(("type", t), ("a",), unrolled) for t in (float, _F64)])


def _quotient(a, b, d):
    """The gradients of ``a / b``; ``b`` is 0 only as a float64 (float / 0.0 raised)."""
    da, db = d / b, -d * (a / b) / b
    if b:
        return da, db
    return zero_cotangent(d, da), zero_cotangent(d, db)


def _power(f, w):
    """``a ** n`` for a float ``a``, or a real floating array, and an int ``n``; other
    powers take the rule."""
    def record(push, a, n):
        if type(n) is int:
            if type(a) in _FLOATS:
                y = a ** n  # (first: 0.0 ** -1 raises)
                push(a)
                push(n)
                return y
            if type(a) is _ARRAY and _plain(w, a, a):
                y = a ** n
                if type(y) is _ARRAY:
                    push(a)
                    push(n)
                    push(_ARRAY)
                    return y
        return _slow(w, push, f, a, n)

    def back(pop, d):
        n = pop()
        if n is _ARRAY:
            n = pop()
            a = pop()
            return _NONES if d is None else pow_back(a, n, None, d)
        if type(n) is not int:
            return _slow_back(n, d)
        a = pop()
        if d is None:
            return _NONES
        return None, d * n * a ** (n - 1) if n > 0 else int_power_grad(d, a, n), None
    record.inline = Inline((float, int), f, [0, 1])
    return record, back


def _unary(f, df, w):
    """``f(x)`` of ``math`` for a float ``x``: pushes ``x`` and ``y``."""
    def record(push, x):
        if type(x) in _FLOATS:
            y = f(x)
            push(x)
            push(y)
            return y
        return _slow(w, push, f, x)

    def back(pop, d):
        y = pop()
        if type(y) is not float:
            return _slow_back(y, d)
        x = pop()
        if d is None:
            return _NONES
        g = d * df(math, float(x), y)
        return None, g if g == g else zero_cotangent(d, g)  # (the check inline: a hot path)
    record.inline = Inline((float,), f, [0, "y"])
    return record, back


def _element(f, w):
    """``x[i]`` of an array ``x`` at an int ``i`` giving a scalar, while nothing has been
    changed in place (then a read may need routing to the shadow: the rule's work)."""
    def record(push, x, i):
        if type(x) is np.ndarray and type(i) is int and not WATCH.all:
            y = x[i]
            if type(y) is _F64:
                push(x)
                push(i)
                return y
        return _slow(w, push, f, x, i)

    def back(pop, d):
        i = pop()
        if type(i) is not int:
            return _slow_back(i, d)
        x = pop()
        if d is None:
            return _NONES
        return None, OneHot(x, i, d), None

    def into(pop, d, g):
        """``back``, added into ``x``'s slot ``g`` (an array buffer, in a loop)."""
        i = pop()
        if type(i) is not int:
            return accum(g, _slow_back(i, d)[1])
        x = pop()
        if d is None:
            return g
        if type(g) is Buffer and g.kind is np.ndarray:
            g.data[i] += d
            return g
        return accum(g, OneHot(x, i, d))
    return record, back, into


def _popping(given, cases=None):
    """``back(pop, d)``: ``given`` told the last entry, which it pops first; with
    ``cases``, the adjoint pass may write its fast paths out as IR (`InlineBack`)."""
    def back(pop, d):
        return given(pop(), pop, d)
    if cases:
        back.inline = InlineBack(cases, given)
    return back


def _register(f, make):
    """``f``'s taped rules from ``make(w)``, ``(record, back[, into])`` watched through ``w``,
    named for ``ir dump`` after ``f`` (``mul_record``, ``mul_kept``, ``sin_back``)."""
    record, back, *into = make(WATCH)
    into = into[0] if into else None
    kept = make(KEPT)[0]
    given = getattr(getattr(back, "inline", None), "given", None)
    for g, part in ((record, "record"), (kept, "kept"), (back, "back"), (into, "into"), (given, "given")):
        if g is not None:
            g.__name__ = g.__qualname__ = f"{f.__name__}_{part}"
    taped(f, record, back, into, kept)


for _f, _s in ((op.add, 1), (op.iadd, 1), (op.sub, -1), (op.isub, -1)):
    _register(_f, partial(_signed, _f, _s))
for _f in (op.mul, op.imul):
    _register(_f, partial(_operands, _f, lambda a, b, d: (d * b, a * d),
                          ((op.mul, "d", "k"), (op.mul, "a", "d"))))
for _f in (op.truediv, op.itruediv):
    _register(_f, partial(_operands, _f, _quotient, None))
for _f in (op.pow, op.ipow):
    _register(_f, partial(_power, _f))
_register(op.getitem, partial(_element, op.getitem))
for _name, _df in _UNARY:
    if hasattr(math, _name):
        _register(getattr(math, _name), partial(_unary, getattr(math, _name), _df))
