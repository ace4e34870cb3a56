"""Rules for Python's arithmetic operators (and their in-place forms).

They hold for any numbers (int, float, complex, Fraction, NumPy scalars and
arrays with broadcasting, lists mixed with arrays): gradients follow the Zygote
paper's convention for complex numbers, ``Δ * conj(∂y/∂x)``, have their operand's
shape and floating dtype (float32 stays float32), and are None for ints, bools and
integer arrays.  For arrays the pullbacks return `Lazy` results, so the gradient of
a constant operand (``x * 2.0``) is never computed.  ``a ** b``: ``d/da`` is 0 where
``b`` is 0, ``d/db = y log |a|`` (0 where ``a`` is 0).  At a pole or boundary point
(``a / 0``, ``0.0 ** 0.5``) a zero cotangent gives 0, a nonzero one inf or nan (the
NaN policy of the README).  ``abs``: ``sign(x)`` (0 at 0), ``x / |x|`` for complex (0
at 0).  ``a @ b`` follows NumPy's rules for 1-D operands and batch broadcasting.
Floor division (piecewise constant), comparisons, ``is``, ``in``, ``not`` and bitwise
operators carry no gradient.
"""
from __future__ import annotations

from ._frozen import math
import numbers
import operator as op
import types

from ._frozen import np

from ..runtime.algebra import Fill, accum, unwrap
from ..runtime.batching import Batch
from ..runtime.errors import refuse_objects
from ..runtime.forward import forward
from ..runtime.mutation import wrapping
from ..runtime.rules import Lazy, changes_arguments, nondifferentiable, only_reads, returns_scalars, \
    rule, takes_structured
from . import buffers
from ._util import Like, abs_grad, active, conj, light, unbroadcast as ub, zero_cotangent
from .mutation import in_place
from .np_linalg import matmul_thunks

# Scalar loops are dominated by these rules, so each has a fast path for real
# scalars (float or float64 with ints), where no conjugation or unbroadcasting
# is needed; ``fa``/``fb`` say which operands carry a gradient.
_FLOATS = frozenset({float, np.float64})
_INTS = frozenset({int, bool})
_SEQUENCES = frozenset({list, tuple})
_FUNCTION = types.FunctionType
# operands whose operators are C code: an object of another class may define them in Python
_BUILTIN = frozenset({float, int, bool, complex, np.float64, np.float32, np.ndarray, list, tuple})


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


def _repeats(n) -> bool:
    return isinstance(n, (int, np.integer))


def _grads(a, b, ga, gb):
    """The pullback result for thunks ``ga``, ``gb`` of the operands' gradients;
    the thunk of an operand that cannot carry a gradient is never called."""
    return Lazy(None, ga if active(a) else None, gb if active(b) else None)


def _sum_back(a, b, sign, y):
    """The pullback of ``y = a + b`` (``sign`` 1) or ``a - b`` (-1) on arrays, holding
    only the operands' shapes and dtypes, not the arrays."""
    if type(a) is np.ndarray and type(b) is np.ndarray:  # (`light` and `active` inline: the usual case)
        fa, fb = a.dtype.kind in "fc", b.dtype.kind in "fc"
        a, b = Like((a.shape, a.dtype)), Like((b.shape, b.dtype))
    else:
        a, b = light(a), light(b)
        fa, fb = active(a), active(b)
    if sign > 0 and fa and fb and type(a) is Like is type(b) and a == b == (y.shape, y.dtype):
        return lambda d: (None, *(ub(a, d),) * 2)  # no broadcasting, no casting: both get d
    return lambda d: Lazy(None, (lambda: ub(a, d)) if fa else None,
                          (lambda: ub(b, d) if sign > 0 else _minus(b, d)) if fb else None)


def made(y, a, b, symbol):
    """``y``, the result of ``a symbol b``, unless it is an array of objects made from a
    value with a gradient (`refuse_objects`)."""
    if type(y) is np.ndarray and y.dtype.kind == "O" and (active(a) or active(b)):
        refuse_objects(symbol)
    return y


def _minus(b, d):
    """``ub(b, -d)``, the gradient of ``b`` in ``a - b``: negated after it is summed back
    to ``b``'s shape (exactly the same numbers), so that ``x - m`` for a scalar ``m``
    negates one number rather than an array; a list or tuple ``b`` is negated before."""
    if type(b) is list or type(b) is tuple:
        return ub(b, -d)
    g = ub(b, d)
    if type(g) is np.ndarray and not g.ndim:  # (NumPy's -g of a 0-d array is a scalar)
        return np.negative(g, out=np.empty_like(g))
    return None if g is None else -g


def _signed(f, sign, symbol, concatenates):
    """The rule of ``a + b`` (``sign`` 1) or ``a - b`` (-1); ``concatenates``: whether two
    lists or tuples are joined, each side getting its slice of the gradient."""
    @rule(f)
    def r(a, b):
        if type(a) is not np.ndarray or type(b) is not np.ndarray:  # (two arrays: the usual case)
            if (type(a) not in _BUILTIN or type(b) not in _BUILTIN) and (m := _by_method(f, a, b)):
                return m
            real = _real(a, b)
            if real is not None:
                fa, fb = real
                return f(a, b), lambda d: (None, d if fa else None, (d if sign > 0 else -d) if fb else None)
            if concatenates and type(a) in _SEQUENCES and type(b) is type(a):
                n = len(a)
                return a + b, lambda d: (None, type(a)(d[:n]), type(b)(d[n:]))
        y = made(f(a, b), a, b, symbol)
        return y, _sum_back(a, b, sign, y)
    return r


_add, _sub = _signed(op.add, 1, "+", True), _signed(op.sub, -1, "-", False)


@rule(op.mul)
def _mul(a, b):
    if (type(a) not in _BUILTIN or type(b) not in _BUILTIN) and (m := _by_method(op.mul, a, b)):
        return m
    r = _real(a, b)
    if r is not None:
        fa, fb = r
        return a * b, lambda d: (None, d * b if fa else None, a * d if fb else None)
    if (type(a) in _SEQUENCES and _repeats(b)) or (type(b) in _SEQUENCES and _repeats(a)):
        # repetition: the copies' gradients add
        seq, n = (a, b) if type(a) in _SEQUENCES else (b, a)
        k = len(seq)

        def back(d):
            g = type(seq)(_sum_items(d[i::k]) for i in range(k))
            return (None, g, None) if seq is a else (None, None, g)
        return seq * n, back
    y = made(a * b, a, b, "*")
    return y, lambda d: _grads(a, b, lambda: ub(a, d * conj(b)), lambda: ub(b, conj(a) * d))


@rule(op.truediv)
def _div(a, b):
    if (type(a) not in _BUILTIN or type(b) not in _BUILTIN) and (m := _by_method(op.truediv, a, b)):
        return m
    y = made(a / b, a, b, "/")
    r = _real(a, b)
    if r is not None and b:  # (b is 0 only as a float64 here: float / 0.0 raised)
        fa, fb = r
        return y, lambda d: (None, d / b if fa else None, -d * y / b if fb else None)

    # a divisor that is a number other than 0 has no pole: the check would find nothing
    policy = _as_is if (type(b) in _FLOATS or type(b) in _INTS) and b else zero_cotangent

    def back(d):
        da = policy(d, d / conj(b))
        return _grads(a, b, lambda: ub(a, da), lambda: ub(b, policy(d, -da * conj(y))))
    return y, back


def _as_is(d, g):
    return g


nondifferentiable(op.floordiv, op.ifloordiv)  # piecewise constant: no gradient


@rule(op.mod)
def _mod(a, b):
    if (type(a) not in _BUILTIN or type(b) not in _BUILTIN) and (m := _by_method(op.mod, a, b)):
        return m
    y = a % b
    if isinstance(a, str):
        return y, lambda d: (None, None, None)
    r = _real(a, b)
    if r is not None:
        fa, fb = r
        return y, lambda d: (None, d if fa else None, -d * (a // b) if fb else None)
    return y, lambda d: _grads(a, b, lambda: ub(a, d), lambda: ub(b, -d * (a // b)))


def _log(x):
    """``log x`` for the gradient in the exponent: ``log |x|`` for negative reals (so
    ``(-2.0) ** 3.0`` has ``d/db = y log 2``, as in `math.pow`), 0 where ``x`` is 0."""
    if isinstance(x, (np.ndarray, np.generic)):
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = np.log(x if x.dtype.kind == "c" else np.abs(x))
        if isinstance(lg, np.ndarray):
            lg[x == 0] = 0
            return lg
        return lg if x != 0 else 0 * lg
    if x == 0:
        return 0.0
    if isinstance(x, complex):
        import cmath
        return cmath.log(x)
    return math.log(abs(x))


def _arr(x):
    """An array-like list or tuple as an array; other operands unchanged."""
    return np.asarray(x) if type(x) in _SEQUENCES else x


def pow_grads(a, b, y, d, power=None):
    """Thunks for the gradients of ``y = a ** b`` (or ``power(a, b)``) for output gradient
    ``d``: ``d * conj(b a^(b-1))`` (0 where ``b`` is 0) and ``d * conj(y log a)`` (0
    where ``a`` is 0; ``log |a|`` for negative real ``a``, as in `math.pow`)."""
    a2, b2 = _arr(a), _arr(b)
    pw = power or op.pow

    def da():
        if type(b2) is not np.ndarray:
            if b2 == 0:
                return None
            if b2 == 1:
                return ub(a, d * 1)
            if b2 == 2:
                if type(a2) is np.ndarray and a2.dtype.kind == "f" and type(d) is np.ndarray \
                        and d.shape == a2.shape:
                    g = np.multiply(a2, 2.0, out=buffers.empty(a2.shape, a2.dtype))
                    g *= d  # (one array, from the cache of large ones, scaled in place)
                    return ub(a, g)
                return ub(a, d * conj(a2 + a2))
            try:
                u = b2 * pw(a2, b2 - 1)
            except ZeroDivisionError:  # 0.0 ** -0.5 raises where NumPy and math.pow give inf
                u = b2 * math.inf
            return ub(a, zero_cotangent(d, d * conj(u)))
        with np.errstate(divide="ignore", invalid="ignore"):
            u = b2 * pw(a2, b2 - 1)
        if isinstance(u, np.ndarray):
            u[np.broadcast_to(b2 == 0, u.shape)] = 0
        return ub(a, zero_cotangent(d, d * conj(u)))
    return _grads(a, b, da, lambda: ub(b, zero_cotangent(d, d * conj(y * _log(a2)))))


def int_power_grad(d, a, n):
    """``d n a^(n-1)`` for a real scalar ``a`` and an int ``n <= 0`` (callers compute it
    themselves for ``n > 0``, the common case): 0 for ``n = 0``; for ``n < 0`` under the
    NaN policy (`zero_cotangent`) at the pole ``a = 0``, reached by a float64 ``a``."""
    return zero_cotangent(d, d * n * a ** (n - 1)) if n else d * 0.0


@rule(op.pow, pow)
def _pow(a, b, *mod):
    if not mod and (type(a) not in _BUILTIN or type(b) not in _BUILTIN) and \
            (m := _by_method(op.pow, a, b)):
        return m
    if mod:
        return pow(a, b, *mod), lambda d: (None, None, None, None)
    y = a ** b
    if type(a) in _FLOATS and type(b) is int:
        return y, lambda d: (None, d * b * a ** (b - 1) if b > 0 else int_power_grad(d, a, b),
                             None)
    y_b = y if active(b) else None  # (only the exponent's gradient needs y: not kept for x ** 2)
    return y, lambda d: pow_back(a, b, y_b, d)


def pow_back(a, b, y, d):
    """The pullback result of ``y = a ** b`` (``y`` None unless ``b`` may carry a
    gradient); structured and sparse gradients ``d`` reach it (`takes_structured` below)."""
    return _fill_back(a, b, y, d) if type(d) is Fill else pow_grads(a, b, y, unwrap(d))


def _fill_back(a, b, y, d):
    """The pullback of ``a ** b`` for a gradient that is one number everywhere (a `Fill`,
    from ``np.mean``): for ``b = 2`` and a real float array ``a``, ``2 a d`` in one pass
    over ``a``; otherwise that of the dense gradient."""
    if type(b) is int and b == 2 and type(a) is np.ndarray and a.dtype.kind == "f" \
            and a.shape == d.shape:
        return None, np.multiply(a, 2.0 * d.value, out=buffers.empty(a.shape, a.dtype)), None
    return pow_grads(a, b, y, d.dense())


@rule(op.matmul)
def _matmul(a, b):
    if (type(a) not in _BUILTIN or type(b) not in _BUILTIN) and (m := _by_method(op.matmul, a, b)):
        return m
    def back(d):
        ga, gb = matmul_thunks(a, b, d)
        return _grads(a, b, ga, gb)
    return made(a @ b, a, b, "@"), back


@rule(op.neg)
def _neg(a):
    return -a, lambda d: (None, ub(a, -d))


@rule(op.pos)
def _pos(a):
    return +a, lambda d: (None, ub(a, d))


@rule(op.abs, abs)
def _abs(a):
    y = abs(a)
    return y, lambda d: (None, ub(a, abs_grad(a, y, d)))


def _by_method(f, a, b):
    """``a op b`` by the operands' methods, as Python calls them: ``type(a).name(a, b)``,
    then ``type(b).rname(b, a)`` if that gave NotImplemented (``b``'s first where its class
    is a subclass of ``a``'s that overrides it); a Python method differentiated, a C one
    run plainly (a number's, given an object: NotImplemented; None if it gives a value,
    an array's broadcast over an object: the rule's)."""
    name, rname, _ = _DUNDERS[f]
    ta, tb = type(a), type(b)
    if not (type(getattr(ta, name, None)) is _FUNCTION or type(getattr(tb, rname, None)) is _FUNCTION) \
            or isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return None
    calls = [(getattr(ta, name, None), a, b, False)]
    if tb is not ta:
        rm = getattr(tb, rname, None)
        calls.append((rm, b, a, True))
        if issubclass(tb, ta) and rm is not getattr(ta, rname, None) or tb is Batch:
            calls.reverse()  # (an array's method hands a Batch to Batch.__array_ufunc__)
    for m, x, y, swapped in calls:
        if m is None:
            continue
        if type(m) is not _FUNCTION:
            v = m(x, y)
            if v is NotImplemented:
                continue
            if type(v) is np.ndarray and v.dtype.kind == "O":
                _refuse_elementwise(f, calls)
            return None
        v, pb = forward(m, x, y)
        if v is not NotImplemented:
            return v, wrapping(pb, (lambda d: (None, *pb(d)[2:0:-1])) if swapped else
                               (lambda d: (None, *pb(d)[1:3])))
    # (Python's error, without calling the methods again: a second call would repeat their effects)
    raise TypeError(f"unsupported operand type(s) for {_DUNDERS[f][2]}: '{ta.__name__}' and '{tb.__name__}'")


takes_structured(op.pow)  # (the Fill of np.mean: x ** 2 takes it in one pass)
nondifferentiable(op.lt, op.le, op.eq, op.ne, op.gt, op.ge, op.is_, op.is_not, op.not_,
                  op.contains, op.truth, op.invert, op.lshift, op.rshift, op.ilshift,
                  op.irshift)  # (| & ^ and their in-place forms: sets.py)


def _refuse_elementwise(f, calls):
    """Refuse an array and an object whose operator method NumPy called on each element
    (as Python code run plainly, whose derivative bytegrad never sees)."""
    m, obj = next((m, x) for m, x, _, _ in calls if type(m) is _FUNCTION)
    cls = type(obj).__name__
    raise NotImplementedError(
        f"an array {_DUNDERS[f][2]} a {cls}: NumPy calls {cls}.{m.__name__} on each element, "
        f"as code bytegrad does not differentiate; convert the {cls} to a float or an array "
        f"first, or, in a class of yours, set __array_ufunc__ = None, so that Python calls "
        f"{m.__name__} with the whole array")


_DUNDERS = {f: (f"__{n}__", f"__r{n}__", symbol) for f, n, symbol in (
    (op.add, "add", "+"), (op.sub, "sub", "-"), (op.mul, "mul", "*"), (op.truediv, "truediv", "/"),
    (op.mod, "mod", "%"), (op.pow, "pow", "** or pow()"), (op.matmul, "matmul", "@"),
    (op.floordiv, "floordiv", "//"), (divmod, "divmod", "divmod()"))}  # (the last two: `special`)

for _f, _r, _symbol in ((op.iadd, _add, "+"), (op.isub, _sub, "-"), (op.imul, _mul, "*"),
                        (op.itruediv, _div, "/"), (op.imod, _mod, "%"), (op.ipow, _pow, "**"),
                        (op.imatmul, _matmul, "@")):
    rule(_f)(in_place(_r, _symbol))
    changes_arguments(_f)

returns_scalars("arith", op.add, op.sub, op.mul, op.truediv, op.floordiv, op.mod, op.pow, op.neg,
                op.pos, op.abs, abs, op.iadd, op.isub, op.imul, op.itruediv, op.ifloordiv,
                op.imod, op.ipow, op.lt, op.le, op.eq, op.ne, op.gt, op.ge, op.not_, op.truth)
returns_scalars("scalar", op.is_, op.is_not, op.contains, op.index)
only_reads(2, op.add, op.sub, op.mul, op.truediv, op.floordiv, op.mod, op.pow, pow, op.matmul,
           op.lt, op.le, op.eq, op.ne, op.gt, op.ge, methods=True)
only_reads(1, op.neg, op.pos, op.abs, abs, op.not_, op.truth, methods=True)
