"""Small helpers shared by the rule families."""
from __future__ import annotations

import importlib.util
import operator
import types

from ._frozen import np

from ..runtime.algebra import is_differentiable
from ..runtime.batching import Batch, Unbatchable, _widened
from . import buffers
from .kernels import kernel

_FAST = frozenset({float, np.float64, int})  # reals whose gradients need no work


def conj(x):
    """Complex conjugate, a no-op for reals (the Zygote paper's ``x'``)."""
    t = type(x)
    if t in _FAST:
        return x
    if t is complex:
        return x.conjugate()
    if isinstance(x, np.ndarray):
        return np.conj(x) if x.dtype.kind == "c" else x
    c = getattr(x, "conjugate", None)
    return c() if c is not None else x


def active(x) -> bool:
    """Whether ``x`` can carry a gradient (`is_differentiable`, fast for the usual types)."""
    t = type(x)
    if t is np.ndarray or t is Like:
        return x.dtype.kind in "fc"
    if t is float or t is np.float64 or t is complex:
        return True
    if t is int or t is bool or x is None:
        return False
    return is_differentiable(x)


class Like(tuple):
    """What `unbroadcast` needs of an array operand (shape and dtype), so a pullback
    that only sums its gradient back need not keep the array itself alive: the pair
    ``(shape, dtype)``, a tuple so that making one runs no Python ``__init__`` (two
    per ``x + b``)."""

    __slots__ = ()
    shape = property(operator.itemgetter(0))
    dtype = property(operator.itemgetter(1))


def light(x):
    """``x``, or a `Like` of it when it is an array: for pullbacks of ``+`` and ``-``."""
    return Like((x.shape, x.dtype)) if type(x) is np.ndarray else x


def unbroadcast(x, g):
    """The gradient ``g`` of a broadcast result, summed back to the shape of ``x`` and
    given ``x``'s floating dtype (the real part where ``x`` is real); None where ``x``
    cannot carry a gradient (ints, bools, integer arrays).  A list or tuple ``x``
    (an array-like argument of a NumPy function) gets a list or tuple of the same
    nesting, with None for its ints."""
    t = type(x)
    if t is float or t is np.float64:
        tg = type(g)
        if tg is float or tg is np.float64:
            return g
        if tg is Batch:
            return summed(g, x)
        g = g.sum() if tg is np.ndarray else g  # (np.sum's dispatch costs as much again)
        return float(g.real) if isinstance(g, (complex, np.complexfloating)) or t is float \
            else np.float64(g)
    if t is int or t is bool or x is None:
        return None
    if (t is np.ndarray or t is Like) and type(g) is np.ndarray and g.dtype is x.dtype \
            and g.shape == x.shape:
        return g  # the usual case: nothing to do
    if t is Batch or type(g) is Batch:  # (after the usual cases: hessian's batched columns)
        return summed(g, x)
    if t is Like or isinstance(x, np.ndarray):
        kind = x.dtype.kind
        if kind not in "fc":
            return None
        if type(g) is not np.ndarray:
            g = np.asarray(g)
        if g.shape != x.shape:
            g = _sum_to(g, x.shape)
        if g.dtype != x.dtype:
            if kind == "f" and g.dtype.kind == "c":
                g = g.real
            g = g.astype(x.dtype, copy=False)
        return g
    if t is complex:
        return complex(np.sum(g)) if type(g) is np.ndarray else complex(g)
    if isinstance(x, np.generic):
        kind = x.dtype.kind
        if kind not in "fc":
            return None
        g = np.sum(g) if type(g) is np.ndarray else g
        return x.dtype.type(g.real if kind == "f" and np.iscomplexobj(g) else g)
    if t is list or t is tuple:
        if not is_differentiable(x):
            return None
        return _nested(x, unbroadcast(np.asarray(x), g))
    return g


def summed(g, x):
    """Gradient Batch ``g`` (one per seed: `hessian`'s batched columns,
    primitives/batches.py) of operand ``x`` of a broadcast, each seed's summed back to
    ``x``'s shape and dtype as `unbroadcast` sums one; None for ints; complex numbers
    are not batched."""
    t = type(x)
    if g is None or t is int or t is bool or t is np.ndarray and x.dtype.kind in "biu":
        return None
    if type(g) is not Batch or g.b.dtype.kind != "f":
        raise Unbatchable
    if t is Batch:
        shape, dtype = x.b.shape[1:], x.b.dtype
    elif t is float or isinstance(x, np.floating) or t is np.ndarray and x.dtype.kind == "f":
        shape, dtype = np.shape(x), np.result_type(x)
    else:
        raise Unbatchable
    b = np.moveaxis(_sum_to(np.moveaxis(g.b, 0, -1), shape + g.b.shape[:1]), -1, 0)  # (the seeds last)
    return Batch(b.astype(dtype, copy=False))


def zeroed(d, g):
    """Gradient Batch ``g`` with 0 where it is NaN and gradient Batch ``d`` is 0, each
    seed's as `zero_cotangent` makes one."""
    b = g.b
    nan = b != b
    if not nan.any():
        return g
    if type(d) is not Batch:
        raise Unbatchable
    return Batch(np.where(nan & (_widened(d, b.ndim - 1) == 0), 0.0, b))


def _nested(x, g):
    """The array ``g`` in the nested list/tuple structure of ``x``; None for its ints."""
    if type(x) is list or type(x) is tuple:
        return type(x)(_nested(xi, gi) for xi, gi in zip(x, g))
    if isinstance(x, np.ndarray):
        return unbroadcast(x, g)
    if not active(x):
        return None
    return unbroadcast(x, g.item() if isinstance(g, (np.ndarray, np.generic)) and np.ndim(g) == 0 else g)


_SUM = np.add.reduce


def _sum_to(g, shape):
    if g.ndim < len(shape):  # a gradient that is constant along the missing axes
        return np.broadcast_to(g, shape).copy()
    extra = g.ndim - len(shape)
    if extra:  # (an int axis: a tuple costs NumPy as much again for a bias's gradient)
        # (ndarray.sum's own call, without its Python layer: np.add.reduce)
        g = _SUM(g, 0 if extra == 1 else tuple(range(extra)))
    if 1 in shape:
        axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
        if axes:
            g = _SUM(g, axes, keepdims=True)
    return g if g.shape == shape else g.reshape(shape)


def zero_cotangent(d, g):
    """``g``, the product of the cotangent ``d`` and a partial derivative (``d * u`` or
    ``d / v``, before summing back), with 0 where ``d`` is 0 and IEEE arithmetic made
    NaN: a zero cotangent times any partial is zero, also an infinite one at a boundary
    point (``sqrt`` at 0), so that a value masked out downstream (``np.where``,
    ``np.tril``, a slice) sends no NaN back.  Where ``d`` is not 0, ``g`` is left as IEEE
    arithmetic made it (inf or NaN).  Changes an array ``g`` in place."""
    if type(g) is not np.ndarray:
        if type(g) is Batch:
            return zeroed(d, g)
        return g if g == g or d != 0 else type(g)(0)
    if g.dtype.kind in "fc" and g.size:
        # (one pass: NaN propagates through minimum, on one thread, unlike BLAS's dot;
        # ravel gives a view, products being contiguous)
        m = np.minimum.reduce(g.ravel(order="K"))
        if m != m:
            np.copyto(g, 0, where=np.isnan(g) & (d == 0))
    return g


BIG = 10_000  # arrays from this size on go to the fused kernels (see bench/kernels_elementwise.py)
_numba = None


def have_numba() -> bool:
    """Whether numba can be imported (found without importing it)."""
    global _numba
    if _numba is None:
        _numba = importlib.util.find_spec("numba") is not None
    return _numba


def fused(kern, d, u, *consts):
    """``kern(d, u, out, *consts)`` into a new array ``out`` when ``d`` and ``u`` are
    large C-contiguous float32 or float64 arrays of one shape and dtype (the constants
    are given that dtype, so float32 stays float32); None otherwise, and then the
    caller computes the same with NumPy."""
    if type(d) is not np.ndarray or d.size < BIG or type(u) is not np.ndarray:
        return None
    dt = d.dtype
    if dt != u.dtype or dt.char not in "fd" or d.shape != u.shape or \
            not (d.flags.c_contiguous and u.flags.c_contiguous):
        return None
    if not have_numba():
        return None
    out = buffers.empty(d.shape, dt)
    t = float if dt.char == "d" else dt.type  # numba reads a float faster than a float64
    kern(d.reshape(-1), u.reshape(-1), out.reshape(-1), *map(t, consts))
    return out


@kernel
def _k_sign(d, x, out):
    """``out = d * sign(x)``."""
    for i in range(out.shape[0]):
        v = x[i]
        if v > 0:
            out[i] = d[i]
        elif v < 0:
            out[i] = -d[i]
        elif v == 0:
            out[i] = 0
        else:  # nan
            out[i] = v


def abs_grad(x, y, d):
    """The gradient of ``y = abs(x)`` for output gradient ``d``: ``d * sign(x)`` for
    reals (0 at 0), ``d * x / |x|`` for complex numbers (0 at 0)."""
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        if x.dtype.kind == "c":
            with np.errstate(invalid="ignore", divide="ignore"):
                u = x / y
            if isinstance(u, np.ndarray):
                u[y == 0] = 0
            elif y == 0:
                u = 0 * u
            return d * u
        s = fused(_k_sign, d, x)
        if s is not None:
            return s
        s = np.sign(x)
        if type(s) is np.ndarray and type(d) is np.ndarray and s.shape == d.shape \
                and s.dtype == d.dtype:
            return np.multiply(s, d, out=s)
        return d * s
    if type(x) is complex:
        return d * (x / y) if y else d * 0j
    return d * ((x > 0) - (x < 0))


def static_attribute(t, name):
    """What class ``t`` (or a base) holds under ``name``, not called: a descriptor itself."""
    return next((k.__dict__[name] for k in t.__mro__ if name in k.__dict__), None)


def holds(t, name) -> bool:
    """Whether class ``t`` or a base holds ``name`` (even as None)."""
    return any(name in k.__dict__ for k in t.__mro__)


def descriptor_method(obj, name, method):
    """``(descriptor, its method)`` where ``obj.name`` is stored (``"__set__"``) or deleted
    (``"__delete__"``) through a descriptor of yours (that method Python code), else
    ``(None, None)``.  A name among ``obj``'s own fields is taken for a field (a data
    descriptor of the same name is not looked for: a search of the classes per write)."""
    fields = getattr(obj, "__dict__", None)
    if type(fields) is dict and name in fields:
        return None, None
    desc = static_attribute(type(obj), name)
    m = python_method(desc, method)
    return (desc, m) if m is not None else (None, None)


def python_method(d, method):
    """Descriptor ``d``'s ``method`` (``"__get__"``, ``"__set__"``) if it is Python code of
    yours, else None."""
    f = getattr(type(d), method, None)
    return f if type(f) is types.FunctionType else None
