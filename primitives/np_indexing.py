"""Rules for indexing NumPy arrays: ``x[idx]`` (through the rule of
``operator.getitem``), ``np.take``, ``np.take_along_axis``, ``np.compress``,
``np.extract``, ``np.sort`` and ``np.partition``.

The gradient of ``x[idx]`` is ``d`` placed in a zero buffer of ``x``'s shape and
float dtype: assigned where the index cannot repeat an element (slices, ints,
``None``, ``...``, boolean masks), accumulated where it can (integer arrays, whose
repeated indices add up).  Small accumulations use ``np.add.at``; from
`SCATTER_MIN` elements on, the flat position of every selected element is
computed (``np.ravel_multi_index``, or per-axis coordinates for mixed indices)
and the numba kernel `kernels.scatter_add` adds them up (numba loads on its first
use); ``bench/kernels_indexing.py`` measures the two.

``np.sort``'s gradient goes back through the permutation ``np.argsort`` gives; the
result is ``take_along_axis(a, argsort(a))`` (ties may be ordered differently
from ``np.sort``'s, with equal values); ``np.partition``'s likewise through
``np.argpartition``'s.  ``x.sort()`` sorts in place: a write of
``np.sort``'s result, as for every in-place operation (primitives/mutation.py).
"""
from __future__ import annotations

from ._frozen import np

from ..runtime.algebra import OneHot
from ..runtime.mutation import rewrite
from ..runtime.rules import changes_arguments, nograd, rule
from .np_shape import _axis, _arg, differentiable_input, grad_for

SCATTER_MIN = 1 << 15  # accumulations of this many elements go through the numba kernel
_ADD_AT_MAX = 1 << 10  # up to this many, np.add.at on the index as given

_SIMPLE = frozenset({int, bool, slice, type(None), type(Ellipsis)})


def repeats(k) -> bool:
    """Whether index ``k`` may select an element more than once (it holds an
    integer array of more than one element)."""
    t = type(k)
    if t in _SIMPLE:
        return False
    if t is np.ndarray:
        return k.dtype.kind != "b" and k.size > 1
    for i in (k if t is tuple else (k,)):
        t = type(i)
        if t in _SIMPLE:
            continue
        if t is np.ndarray:
            if i.dtype.kind == "b" or i.size <= 1:
                continue
            return True
        if isinstance(i, (np.integer, np.bool_)):
            continue
        a = np.asarray(i)
        if a.dtype.kind != "b" and a.size > 1:
            return True
    return False


def _flat_index(shape, k):
    """The flat (C-order) position in an array of ``shape`` of each element of ``x[k]``."""
    ks = k if type(k) is tuple else (k,)
    if len(shape) == 1 and len(ks) == 1:
        i = np.asarray(ks[0])
        if i.dtype.kind in "iu":
            return np.where(i < 0, i + shape[0], i) if i.size and i.min() < 0 else i
    m = 0  # integer arrays in front, then only full slices: one ravel_multi_index
    while m < len(ks) and type(ks[m]) not in _SIMPLE and np.asarray(ks[m]).dtype.kind in "iu":
        m += 1
    if m and all(type(i) is slice and i == slice(None) or i is Ellipsis for i in ks[m:]) \
            and sum(i is Ellipsis for i in ks[m:]) <= 1:
        b = np.ravel_multi_index(tuple(np.asarray(i).astype(np.intp, copy=False) for i in ks[:m]),
                                 shape[:m], mode="wrap")
        rest = shape[m:]
        if not rest:
            return b
        r = int(np.prod(rest))
        return (b.reshape(b.shape + (1,)) * r + np.arange(r)).reshape(b.shape + rest)
    # in general: index each axis's (broadcast, zero-copy) coordinates the same way
    flat, stride = None, 1
    for ax in range(len(shape) - 1, -1, -1):
        n = shape[ax]
        c = np.arange(0, n * stride, stride).reshape((n,) + (1,) * (len(shape) - ax - 1))
        part = np.broadcast_to(c, shape)[k]
        flat = part if flat is None else flat + part
        stride *= n
    return flat


def accumulate(shape, dtype, k, d):
    """A zero array of ``shape`` and ``dtype`` with ``d`` added at index ``k``
    (repeated elements adding up)."""
    d = np.asarray(d)
    if dtype.kind == "f" and d.dtype.kind == "c":
        d = d.real
    g = np.zeros(shape, dtype)
    if not repeats(k):
        g[k] = d
        return g
    n = d.size
    if n <= _ADD_AT_MAX or n < SCATTER_MIN and len(shape) == 1:
        np.add.at(g, k, d)
        return g
    flat = _flat_index(shape, k)
    if d.shape != flat.shape:
        d = np.broadcast_to(d, flat.shape)
    flat, vals = flat.reshape(-1), d.astype(dtype, copy=False).reshape(-1)
    if n >= SCATTER_MIN:
        from .kernels import scatter_add
        scatter_add(g.reshape(-1), flat.astype(np.intp, copy=False), vals)
    else:
        np.add.at(g.reshape(-1), flat, vals)
    return g


def _as_read(k):
    """Index ``k`` as the read used it: its arrays and lists copied, for a pullback that
    reads it later, after the reverse pass has undone a write into them that came before
    the read (the gradient went where the index pointed before that write)."""
    if type(k) is tuple:
        return tuple([_as_read(i) for i in k]) if any(type(i) is np.ndarray or type(i) is list for i in k) else k
    if type(k) is np.ndarray:
        return k.copy() if k.flags.writeable else k
    return np.array(k) if type(k) is list else k


def getitem_pullback(x, k):
    """The pullback of ``x[k]`` for an array ``x`` (any index but a scalar one).

    Where ``k`` cannot repeat an element, the gradient is a `OneHot` (``d`` at ``k``),
    which the gradient algebra adds into one buffer per slot: a loop reading slices
    ``x[i:i + w]`` costs O(w) a step, not O(len(x))."""
    if x.dtype.kind not in "fc":
        return nograd(2)
    k = _as_read(k)
    if not repeats(k):
        if x.dtype.kind == "f":
            return lambda d: (None, OneHot(x, k, d.real if np.iscomplexobj(d) else d), None)
        return lambda d: (None, OneHot(x, k, d), None)
    shape, dtype = x.shape, x.dtype
    return lambda d: (None, accumulate(shape, dtype, k, d), None)


def getitem(x, k):
    """``x[k]`` and its pullback."""
    return x[k], getitem_pullback(x, k)


def _selection(a, k, nargs, flat=False):
    """The pullback of a rule selecting ``np.asarray(a)[k]`` (of ``ravel(a)`` if ``flat``)."""
    if not differentiable_input(a):
        return nograd(nargs)
    shape = np.shape(a)
    dtype = a.dtype if type(a) is np.ndarray else np.asarray(a).dtype
    gshape = (int(np.prod(shape)),) if flat else shape
    rest = (None,) * (nargs - 1)
    return lambda d: (None, grad_for(a, accumulate(gshape, dtype, k, d).reshape(shape))) + rest


def _take_index(shape, indices, axis, mode):
    n = int(np.prod(shape)) if axis is None else shape[_axis(axis, len(shape))]
    if mode == "wrap":
        indices = np.mod(indices, n)
    elif mode == "clip":
        indices = np.clip(indices, 0, n - 1)
    if axis is None:
        return (indices,)
    return (slice(None),) * _axis(axis, len(shape)) + (indices,)


def _no_out(name, out, a):
    if out is not None and differentiable_input(a):
        raise NotImplementedError(f"bytegrad: {name}(..., out=...) writes in place; "
                                  f"use the returned value instead")


def _take_rule(f):
    def r(a, indices, *args, **kw):
        axis = _arg(args, kw, 0, "axis", None)
        mode = _arg(args, kw, 2, "mode", "raise")
        _no_out("take", _arg(args, kw, 1, "out", None), a)
        y = f(a, indices, *args, **kw)
        k = _take_index(np.shape(a), indices, axis, mode)
        return y, _selection(a, k, 2 + len(args), flat=axis is None)
    return r


_NOTE_OUT = "out= refused for differentiable arrays"
rule(np.take, note=_NOTE_OUT)(_take_rule(np.take))
rule(np.ndarray.take, note=_NOTE_OUT)(_take_rule(np.ndarray.take))


def _along_axis_index(shape, indices, axis):
    nd = len(shape)
    out = []
    for dim in range(nd):
        if dim == axis:
            out.append(indices)
        else:
            out.append(np.arange(shape[dim]).reshape((1,) * dim + (-1,) + (1,) * (nd - dim - 1)))
    return tuple(out)


@rule(np.take_along_axis)
def _take_along_axis(arr, indices, *args, **kw):
    axis = _arg(args, kw, 0, "axis", -1)
    y = np.take_along_axis(arr, indices, *args, **kw)
    shape = np.shape(arr)
    if axis is None:
        return y, _selection(arr, (indices,), 2 + len(args), flat=True)
    k = _along_axis_index(shape, np.asarray(indices), _axis(axis, len(shape)))
    return y, _selection(arr, k, 2 + len(args))


def _compress_rule(f, cond_first):
    def r(*args, **kw):
        condition, a = (args[0], args[1]) if cond_first else (args[1], args[0])
        axis = _arg(args, kw, 2, "axis", None)
        _no_out("compress", _arg(args, kw, 3, "out", None), a)
        y = f(*args, **kw)
        c = np.asarray(condition, bool).reshape(-1)
        shape = np.shape(a)
        n = int(np.prod(shape)) if axis is None else shape[_axis(axis, len(shape))]
        if c.size < n:
            c = np.concatenate([c, np.zeros(n - c.size, bool)])
        c = c[:n]
        k = (c,) if axis is None else (slice(None),) * _axis(axis, len(shape)) + (c,)
        pb = _selection(a, k, 2, flat=axis is None)
        extra = (None,) * (len(args) - 2)
        if cond_first:
            return y, lambda d: (None, None, pb(d)[1]) + extra
        return y, lambda d: pb(d) + extra
    return r


rule(np.compress, note=_NOTE_OUT)(_compress_rule(np.compress, True))
rule(np.ndarray.compress, note=_NOTE_OUT)(_compress_rule(np.ndarray.compress, False))


@rule(np.extract)
def _extract(condition, arr):
    y = np.extract(condition, arr)
    c = np.ravel(np.asarray(condition) != 0)
    pb = _selection(arr, (c,), 2, flat=True)
    return y, lambda d: (None, None, pb(d)[1])


# ---------------------------------------------------------------- sorting

@rule(np.sort, note="through np.argsort's permutation; tied elements get one output's gradient each")
def _sort(a, *args, **kw):
    axis = _arg(args, kw, 0, "axis", -1)
    kind = _arg(args, kw, 1, "kind", None)
    if _arg(args, kw, 2, "order", None) is not None or not differentiable_input(a):
        return np.sort(a, *args, **kw), nograd(1 + len(args))
    x = a if type(a) is np.ndarray else np.asarray(a)
    perm = np.argsort(x, axis=axis, kind=kind, stable=kw.get("stable"))
    rest = (None,) * len(args)
    if axis is None:
        y = x.reshape(-1)[perm]

        def back(d):
            g = np.zeros(x.size, x.dtype)
            g[perm] = np.real(d) if x.dtype.kind == "f" else d
            return (None, grad_for(a, g.reshape(x.shape))) + rest
        return y, back
    ax = _axis(axis, x.ndim)
    if x.ndim == 1:
        y = x[perm]

        def back(d):
            g = np.zeros(x.shape, x.dtype)
            g[perm] = np.real(d) if x.dtype.kind == "f" else d
            return (None, grad_for(a, g)) + rest
        return y, back
    y = np.take_along_axis(x, perm, ax)

    def back(d):
        g = np.zeros(x.shape, x.dtype)
        np.put_along_axis(g, perm, np.real(d) if x.dtype.kind == "f" else d, ax)
        return (None, grad_for(a, g)) + rest
    return y, back


@rule(np.partition, note="through np.argpartition's permutation (the elements on each side of "
      "the kth may be in another order than np.partition's)")
def _partition(a, kth, *args, **kw):
    if _arg(args, kw, 2, "order", None) is not None or not differentiable_input(a):
        return np.partition(a, kth, *args, **kw), nograd(2 + len(args))
    x = a if type(a) is np.ndarray else np.asarray(a)
    axis = _arg(args, kw, 0, "axis", -1)
    kind = _arg(args, kw, 1, "kind", "introselect")
    if axis is None:
        x, axis = x.reshape(-1), 0
    perm = np.argpartition(x, kth, axis=axis, kind=kind)
    rest = (None,) * (1 + len(args))

    def back(d):
        g = np.zeros(x.shape, x.dtype)
        np.put_along_axis(g, perm, np.real(d) if x.dtype.kind == "f" else d, axis)
        return (None, grad_for(a, g.reshape(np.shape(a)))) + rest
    return np.take_along_axis(x, perm, axis), back


def _in_place(f, copying):
    """The rule of the in-place ``x.f(...)``: a write of ``copying``'s result."""
    def r(x, *args, **kw):
        if x.dtype.kind not in "fc":
            f(x, *args, **kw)
            return None, nograd(1 + len(args))
        _, back = rewrite(x, copying, *args, **kw)
        return None, back
    return r


rule(np.ndarray.sort, note="in place: a write of np.sort's result")(_in_place(np.ndarray.sort, _sort))
rule(np.ndarray.partition, note="in place: a write of np.partition's result")(
    _in_place(np.ndarray.partition, _partition))
changes_arguments(np.ndarray.sort, np.ndarray.partition)


# ---------------------------------------------------------------- diagonals and triangles

@rule(np.diagonal, np.ndarray.diagonal)
def _diagonal(a, offset=0, axis1=0, axis2=1):
    y = np.diagonal(a, offset, axis1, axis2)
    if not differentiable_input(a):
        return y, nograd(4)
    x = np.asarray(a)

    def back(d):
        g = np.zeros(x.shape, np.result_type(x.dtype, np.asarray(d).dtype))
        i = np.arange(y.shape[-1])
        np.moveaxis(g, (axis1, axis2), (-2, -1))[..., i + max(-offset, 0), i + max(offset, 0)] = d
        return None, grad_for(a, g), None, None, None
    return y, back


@rule(np.diag)
def _diag(v, k=0):
    y = np.diag(v, k)
    if not differentiable_input(v):
        return y, nograd(2)
    if np.ndim(v) == 2:  # the k-th diagonal of a matrix
        y, back = _diagonal(v, k)
        return y, lambda d: back(d)[:3]
    return y, lambda d: (None, grad_for(v, np.diagonal(np.asarray(d), k).copy()), None)


def _triangle(part):
    """The rule of ``np.tril``/``np.triu``: the gradient keeps the same triangle."""
    def r(m, k=0):
        return part(m, k), lambda d: (None, grad_for(m, part(np.asarray(d), k)), None)
    return r


for _f in (np.tril, np.triu):
    rule(_f)(_triangle(_f))
