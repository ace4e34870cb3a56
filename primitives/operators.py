"""Rules for Python's arithmetic operators (and their in-place forms).

They hold for any numbers (int, float, complex, Fraction, NumPy scalars and
arrays with broadcasting): gradients follow the Zygote paper's convention for
complex numbers, ``Δ * conj(∂y/∂x)``.  Comparisons, ``is``, ``in``, ``not``
and bitwise operators carry no gradient.
"""
from __future__ import annotations

import math
import operator as op

import numpy as np

from ..runtime.algebra import accum
from ..runtime.rules import nondifferentiable, rule
from ._util import conj, unbroadcast as ub

# Scalar loops are dominated by these rules, so each has a fast path for real
# scalars (float or float64 with ints), where no conjugation or unbroadcasting
# is needed; ``fa``/``fb`` say which operands carry a gradient.
_FLOATS = frozenset({float, np.float64})
_INTS = frozenset({int, bool})
_SEQUENCES = frozenset({list, tuple})


def _sum_items(gs):
    total = None
    for g in gs:
        total = accum(total, g)
    return total


def _real(a, b):
    """``(fa, fb)`` if both operands are real scalars, else None."""
    ta, tb = type(a), type(b)
    if (ta in _FLOATS or ta in _INTS) and (tb in _FLOATS or tb in _INTS):
        return ta in _FLOATS, tb in _FLOATS
    return None


@rule(op.add, op.iadd)
def _add(a, b):
    r = _real(a, b)
    if r is not None:
        fa, fb = r
        return a + b, lambda d: (None, d if fa else None, d if fb else None)
    if type(a) in _SEQUENCES:  # concatenation: each side gets its slice
        n = len(a)
        return a + b, lambda d: (None, type(a)(d[:n]), type(b)(d[n:]))
    return a + b, lambda d: (None, ub(a, d), ub(b, d))


@rule(op.sub, op.isub)
def _sub(a, b):
    r = _real(a, b)
    if r is not None:
        fa, fb = r
        return a - b, lambda d: (None, d if fa else None, -d if fb else None)
    return a - b, lambda d: (None, ub(a, d), ub(b, -d))


@rule(op.mul, op.imul)
def _mul(a, b):
    r = _real(a, b)
    if r is not None:
        fa, fb = r
        return a * b, lambda d: (None, d * b if fa else None, a * d if fb else None)
    if type(a) in _SEQUENCES or type(b) in _SEQUENCES:  # repetition: the copies' gradients add
        seq, n = (a, b) if type(a) in _SEQUENCES else (b, a)
        k = len(seq)

        def back(d):
            g = type(seq)(_sum_items(d[i::k]) for i in range(k))
            return (None, g, None) if seq is a else (None, None, g)
        return seq * n, back
    return a * b, lambda d: (None, ub(a, d * conj(b)), ub(b, conj(a) * d))


@rule(op.truediv, op.itruediv)
def _div(a, b):
    y = a / b
    r = _real(a, b)
    if r is not None:
        fa, fb = r
        return y, lambda d: (None, d / b if fa else None, -d * y / b if fb else None)

    def back(d):
        da = d / conj(b)
        return None, ub(a, da), ub(b, -da * conj(y))
    return y, back


@rule(op.floordiv, op.ifloordiv)
def _floordiv(a, b):
    y = a // b
    return y, lambda d: (None, ub(a, d * 0), ub(b, d * 0))


@rule(op.mod, op.imod)
def _mod(a, b):
    y = a % b
    if isinstance(a, str):
        return y, lambda d: (None, None, None)
    return y, lambda d: (None, ub(a, d), ub(b, -d * (a // b)))


def _log(x):
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        return np.log(x)
    if isinstance(x, complex) or (isinstance(x, (int, float)) and x < 0):
        import cmath
        return cmath.log(x)
    return math.log(x)


@rule(op.pow, op.ipow, pow)
def _pow(a, b, *mod):
    if mod:
        return pow(a, b, *mod), lambda d: (None, None, None, None)
    y = a ** b
    if type(a) in _FLOATS and type(b) is int:
        return y, lambda d: (None, d * b * a ** (b - 1) if b else d * 0.0, None)

    def back(d):
        if type(b) in (int, float) and b == 0:
            da = ub(a, d * 0)
        else:
            da = ub(a, d * conj(b * a ** (b - 1)))
        db = None
        if ub(b, d) is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                db = ub(b, d * conj(y * _log(a)) if np.all(a != 0) else d * 0 * conj(y))
        return None, da, db
    return y, back


@rule(op.matmul, op.imatmul)
def _matmul(a, b):
    y = a @ b

    def back(d):
        a2, b2, d2 = np.asarray(a), np.asarray(b), np.asarray(d)
        if a2.ndim == 1 and b2.ndim == 1:
            return None, ub(a, d2 * conj(b2)), ub(b, conj(a2) * d2)
        if a2.ndim == 1:
            return None, ub(a, conj(b2) @ d2), ub(b, np.outer(conj(a2), d2))
        if b2.ndim == 1:
            return None, ub(a, np.outer(d2, conj(b2))), ub(b, np.swapaxes(conj(a2), -1, -2) @ d2)
        return (None, ub(a, d2 @ np.swapaxes(conj(b2), -1, -2)),
                ub(b, np.swapaxes(conj(a2), -1, -2) @ d2))
    return y, back


@rule(op.neg)
def _neg(a):
    return -a, lambda d: (None, ub(a, -d))


@rule(op.pos)
def _pos(a):
    return +a, lambda d: (None, ub(a, d))


@rule(op.abs, abs)
def _abs(a):
    y = abs(a)

    def back(d):
        if isinstance(a, complex) or (isinstance(a, np.ndarray) and a.dtype.kind == "c"):
            with np.errstate(invalid="ignore", divide="ignore"):
                return None, ub(a, d * a / y if np.all(y != 0) else d * 0 * a)
        return None, ub(a, d * np.sign(a) if isinstance(a, np.ndarray) else d * ((a > 0) - (a < 0)))
    return y, back


nondifferentiable(op.lt, op.le, op.eq, op.ne, op.gt, op.ge, op.is_, op.is_not, op.not_,
                  op.contains, op.truth, op.invert, op.and_, op.or_, op.xor, op.lshift,
                  op.rshift, op.iand, op.ior, op.ixor, op.ilshift, op.irshift)
