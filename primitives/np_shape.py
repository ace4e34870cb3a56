"""Rules for NumPy's shape functions, in function and method form.

Every rule returns exactly what NumPy returns (a view where NumPy gives a view);
its pullback maps the output's gradient back with the inverse rearrangement
(``reshape`` ↔ ``reshape``, ``transpose`` ↔ the inverse permutation, ``tile`` /
``repeat`` / ``broadcast_to`` ↔ sums over the copies, ``split`` ↔ pasting the
pieces' gradients into one buffer, ``pad`` ↔ the interior).  An argument given
as a (nested) list or a scalar gets its gradient in the same form; integer and
boolean arguments get None.

``pad`` supports the modes that copy elements: ``constant`` (``constant_values``
get no gradient), ``edge``, ``wrap``, ``reflect`` and ``symmetric`` with the
default ``reflect_type='even'``, and ``empty``; the statistic modes
(``maximum``, ``mean``, ``median``, ``minimum``, ``linear_ramp``) and
``reflect_type='odd'`` raise NotImplementedError for a differentiable array.
"""
from __future__ import annotations

from ._frozen import np

from ..runtime.rules import nograd, rule
from ._util import _sum_to

_FLOAT = frozenset("fc")


# ---------------------------------------------------------------- gradients in the input's form

def grad_for(x, g):
    """The gradient of ``x`` given ``g``, the gradient of ``np.asarray(x)``, in the
    form of ``x``: an array of ``x``'s dtype, a (nested) list, a scalar; None for ints."""
    if type(x) is np.ndarray:
        k = x.dtype.kind
        if k == "f":
            if g.dtype != x.dtype:
                g = (g.real if g.dtype.kind == "c" else g).astype(x.dtype, copy=False)
            return g
        if k == "c":
            return g if g.dtype == x.dtype else g.astype(x.dtype)
        return None
    return _mirror(x, np.asarray(g))


def _mirror(x, g):
    t = type(x)
    if t is list or t is tuple:
        if g.ndim == 1 and g.dtype.kind == "f" and not any(type(e) in _NESTED for e in x):
            return t([v if type(e) is float else _scalar(e, v) for e, v in zip(x, g.tolist())])
        return t([_mirror(e, g[i]) for i, e in enumerate(x)])
    if isinstance(x, np.ndarray):
        return grad_for(x, np.asarray(g))
    return _scalar(x, g)


_NESTED = frozenset({list, tuple, np.ndarray})


def _scalar(x, g):
    """The gradient ``g`` (a number or 0-d array) of the scalar ``x``, as ``x``'s kind."""
    t = type(x)
    if t is float:
        return float(np.real(g))
    if t is complex:
        return complex(g)
    if isinstance(x, np.ndarray):
        return grad_for(x, np.asarray(g))
    if isinstance(x, np.floating):
        return t(np.real(g))
    if isinstance(x, np.complexfloating):
        return t(g)
    return None  # ints, bools, strings, None


def differentiable_input(x) -> bool:
    """Whether the array-like ``x`` can carry a gradient (its array is float or complex)."""
    if type(x) is np.ndarray:
        return x.dtype.kind in _FLOAT
    return np.asarray(x).dtype.kind in _FLOAT if not isinstance(x, (int, bool)) else False


def _dtype_of(x):
    return x.dtype if type(x) is np.ndarray else np.asarray(x).dtype


def zeros_for(x, shape=None):
    """A zero gradient buffer for the array-like ``x``: its shape, float dtype."""
    dt = _dtype_of(x)
    return np.zeros(np.shape(x) if shape is None else shape, dt if dt.kind in _FLOAT else np.float64)


def _pb1(x, nargs, back):
    """The pullback of a rule whose first positional argument ``x`` alone gets a
    gradient, ``back(d)`` (of ``np.asarray(x)``); ``nargs`` positional arguments."""
    if not differentiable_input(x):
        return nograd(nargs)
    rest = (None,) * (nargs - 1)
    return lambda d: (None, grad_for(x, back(np.asarray(d)))) + rest


def _axis(a, n):
    return a + n if a < 0 else a


def _arg(args, kw, i, name, default):
    if len(args) > i:
        return args[i]
    return kw.get(name, default)


# ---------------------------------------------------------------- reshape, ravel, transpose

def _order(x, order):
    """``order`` with 'A' resolved to 'C' or 'F' as NumPy does for ``x``."""
    if order == "A" or order is None:
        a = x if type(x) is np.ndarray else np.asarray(x)
        return "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    return order


def _reshape_back(x, order):
    shape = np.shape(x)
    order = _order(x, order)
    return lambda d: d.reshape(shape, order=order)


@rule(np.reshape)
def _reshape(a, *args, **kw):
    y = np.reshape(a, *args, **kw)
    return y, _pb1(a, 1 + len(args), _reshape_back(a, _arg(args, kw, 1, "order", "C")))


@rule(np.ndarray.reshape)
def _reshape_method(x, *shape, order="C", **kw):
    y = x.reshape(*shape, order=order, **kw)
    return y, _pb1(x, 1 + len(shape), _reshape_back(x, order))


def _ravel_order(x, order):
    """``(order, perm)`` for undoing ``ravel(x, order)``: an index order, or for 'K'
    on an array that is neither C- nor F-contiguous, the permutation it reads in."""
    if order in ("C", "F"):
        return order, None
    a = x if type(x) is np.ndarray else np.asarray(x)
    if a.flags.c_contiguous:
        return "C", None
    if a.flags.f_contiguous:
        return "F", None
    if order == "A":
        return "C", None
    # 'K': lay out an index array exactly like ``a`` and ravel it the same way
    from numpy.lib.stride_tricks import as_strided
    item, idx = a.itemsize, np.intp(0).itemsize
    if any(s % item for s in a.strides):
        raise NotImplementedError("bytegrad: ravel(order='K') of a view whose strides are not "
                                  "multiples of its item size")
    steps = [s // item for s in a.strides]
    lo = sum(s * (n - 1) for s, n in zip(steps, a.shape) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(steps, a.shape) if s > 0)
    buf = np.empty(hi - lo + 1, np.intp)
    view = as_strided(buf[-lo:], a.shape, [s * idx for s in steps])
    view[...] = np.arange(a.size).reshape(a.shape)  # where memory overlaps, the last index wins
    return None, np.ravel(view, "K")


def _ravel_back(x, order):
    o, perm = _ravel_order(x, order)
    shape = np.shape(x)
    if perm is None:
        return lambda d: d.reshape(shape, order=o)
    overlaps = any(s == 0 and n > 1 for s, n in zip(x.strides, shape))

    def back(d):
        if overlaps:  # a broadcast view: outputs read shared elements, whose gradients add up
            g = np.zeros(d.shape, d.dtype)
            np.add.at(g, perm, d)
        else:
            g = np.empty(d.shape, d.dtype)
            g[perm] = d
        return g.reshape(shape)
    return back


@rule(np.ravel)
def _ravel(a, *args, **kw):
    y = np.ravel(a, *args, **kw)
    return y, _pb1(a, 1 + len(args), _ravel_back(a, _arg(args, kw, 0, "order", "C")))


@rule(np.ndarray.ravel)
def _ravel_method(x, *args, **kw):
    y = x.ravel(*args, **kw)
    return y, _pb1(x, 1 + len(args), _ravel_back(x, _arg(args, kw, 0, "order", "C")))


@rule(np.ndarray.flatten)
def _flatten(x, *args, **kw):
    y = x.flatten(*args, **kw)
    return y, _pb1(x, 1 + len(args), _ravel_back(x, _arg(args, kw, 0, "order", "C")))


def _inverse_axes(axes, n):
    if axes is None:
        return None
    inv = [0] * n
    for i, a in enumerate(axes):
        inv[_axis(int(a), n)] = i
    return inv


@rule(*dict.fromkeys((np.transpose, getattr(np, "permute_dims", np.transpose))))  # one in NumPy 2
def _transpose(a, *args, **kw):
    y = np.transpose(a, *args, **kw)
    inv = _inverse_axes(_arg(args, kw, 0, "axes", None), y.ndim)
    return y, _pb1(a, 1 + len(args), lambda d: d.transpose(inv))


@rule(np.ndarray.transpose)
def _transpose_method(x, *args):
    y = x.transpose(*args)
    axes = args[0] if len(args) == 1 else args
    if axes is not None and not np.iterable(axes):
        axes = (axes,)
    inv = _inverse_axes(axes if axes != () else None, y.ndim)
    return y, _pb1(x, 1 + len(args), lambda d: d.transpose(inv))


@rule(np.matrix_transpose)
def _matrix_transpose(x):
    return np.matrix_transpose(x), _pb1(x, 1, lambda d: np.swapaxes(d, -1, -2))


def _swapaxes_rule(f):
    def r(a, axis1, axis2):
        return f(a, axis1, axis2), _pb1(a, 3, lambda d: np.swapaxes(d, axis1, axis2))
    return r


rule(np.swapaxes)(_swapaxes_rule(np.swapaxes))
rule(np.ndarray.swapaxes)(_swapaxes_rule(np.ndarray.swapaxes))


@rule(np.moveaxis)
def _moveaxis(a, source, destination):
    return np.moveaxis(a, source, destination), _pb1(a, 3, lambda d: np.moveaxis(d, destination, source))


@rule(np.rollaxis)
def _rollaxis(a, axis, start=0):
    y = np.rollaxis(a, axis, start)
    n = y.ndim
    ax = _axis(axis, n)
    st = _axis(start, n)
    dest = st - 1 if ax < st else st  # where the axis ended up
    return y, _pb1(a, 3, lambda d: np.moveaxis(d, dest, ax))


def _same_size_rule(f):
    """The rule of ``f``, which only adds or removes axes of length 1."""
    def r(a, *args, **kw):
        y = f(a, *args, **kw)
        shape = np.shape(a)
        return y, _pb1(a, 1 + len(args), lambda d: d.reshape(shape))
    return r


for _f in (np.squeeze, np.ndarray.squeeze, np.expand_dims):
    rule(_f)(_same_size_rule(_f))


def _atleast(f):
    def r(*arys):
        y = f(*arys)
        shapes = [np.shape(a) for a in arys]
        if len(arys) == 1:
            return y, _pb1(arys[0], 1, lambda d: d.reshape(shapes[0]))

        def back(d):
            return (None,) + tuple(None if di is None or not differentiable_input(a) else
                                   grad_for(a, np.asarray(di).reshape(s))
                                   for a, di, s in zip(arys, d, shapes))
        return y, back
    return r


for _f in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
    rule(_f)(_atleast(_f))


# ---------------------------------------------------------------- broadcasting

@rule(np.broadcast_to)
def _broadcast_to(array, shape, **kw):
    y = np.broadcast_to(array, shape, **kw)
    s = np.shape(array)
    return y, _pb1(array, 2, lambda d: _sum_to(d, s))


@rule(np.broadcast_arrays)
def _broadcast_arrays(*args, **kw):
    y = np.broadcast_arrays(*args, **kw)
    shapes = [np.shape(a) for a in args]

    def back(d):
        return (None,) + tuple(None if di is None or not differentiable_input(a) else
                               grad_for(a, _sum_to(np.asarray(di), s))
                               for a, di, s in zip(args, d, shapes))
    return y, back


# ---------------------------------------------------------------- joining

def _joined(arrays, y, prepared, axis):
    """The pullback of joining ``arrays`` (shaped ``prepared`` once made to the
    joined rank) along ``axis`` of ``y`` (None: flattened)."""
    shapes = [np.shape(a) for a in arrays]
    active = [differentiable_input(a) for a in arrays]
    if not any(active):
        return nograd(1)
    if axis is None:
        sizes = [int(np.prod(s)) for s in shapes]
    else:
        axis = _axis(axis, y.ndim)
        sizes = [s[axis] for s in prepared]
    cuts = np.cumsum(sizes)[:-1]
    seq = type(arrays)

    def back(d):
        d = np.asarray(d)
        parts = np.split(d.reshape(-1) if axis is None else d, cuts, axis=0 if axis is None else axis)
        gs = [grad_for(a, p.reshape(s)) if act else None
              for a, p, s, act in zip(arrays, parts, shapes, active)]
        if seq is np.ndarray:
            return None, np.stack([np.zeros(s) if g is None else g for g, s in zip(gs, shapes)])
        return None, (gs if seq is list else tuple(gs))
    return back


def _no_out(name, kw, arrays):
    if kw.get("out") is not None and any(differentiable_input(a) for a in arrays):
        raise NotImplementedError(f"bytegrad: {name}(..., out=...) writes in place; "
                                  f"use the returned value instead")


@rule(np.concatenate, note="out= refused for differentiable arrays")
def _concatenate(arrays, axis=0, *args, **kw):
    _no_out("np.concatenate", dict(kw, out=args[0] if args else kw.get("out")), arrays)
    y = np.concatenate(arrays, axis, *args, **kw)
    back = _joined(arrays, y, [np.shape(a) for a in arrays], axis)
    return y, lambda d: back(d) + (None,) * (1 + len(args))


@rule(np.append)
def _append(arr, values, axis=None):
    y = np.append(arr, values, axis)
    back = _joined((arr, values), y, [np.shape(arr), np.shape(values)], axis)

    def pb(d):
        g = back(d)[1]
        return (None,) + (tuple(g) if g is not None else (None, None)) + (None,)
    return y, pb


@rule(np.stack, note="out= refused for differentiable arrays")
def _stack(arrays, axis=0, *args, **kw):
    _no_out("np.stack", dict(kw, out=args[0] if args else kw.get("out")), arrays)
    y = np.stack(arrays, axis, *args, **kw)
    ax = _axis(axis, y.ndim)
    active = [differentiable_input(a) for a in arrays]
    seq = type(arrays)

    def back(d):
        dm = np.moveaxis(np.asarray(d), ax, 0)
        gs = [grad_for(a, dm[i]) if act else None for i, (a, act) in enumerate(zip(arrays, active))]
        if seq is np.ndarray:
            return (None, np.stack(gs)) + (None,) * (1 + len(args))
        return (None, gs if seq is list else tuple(gs)) + (None,) * (1 + len(args))
    return y, back


def _stacker(f, prepare, axis_of):
    def r(tup, **kw):
        y = f(tup, **kw)
        prepared = [prepare(a) for a in tup]
        return y, _joined(tup, y, prepared, axis_of(prepared))
    return r


def _column(a):
    s = np.shape(a)
    return (int(np.prod(s)), 1) if len(s) < 2 else s


def _shape_1d(a):
    return np.shape(np.atleast_1d(a))


rule(np.hstack)(_stacker(np.hstack, _shape_1d, lambda p: 0 if len(p[0]) == 1 else 1))
rule(np.vstack)(_stacker(np.vstack, lambda a: np.shape(np.atleast_2d(a)), lambda p: 0))
rule(np.dstack)(_stacker(np.dstack, lambda a: np.shape(np.atleast_3d(a)), lambda p: 2))
rule(np.column_stack)(_stacker(np.column_stack, _column, lambda p: 1))


# ---------------------------------------------------------------- splitting

def _splitter(f, axis_of):
    def r(ary, indices_or_sections, *args, **kw):
        ys = f(ary, indices_or_sections, *args, **kw)
        if not differentiable_input(ary):
            return ys, nograd(2 + len(args))
        axis = _axis(axis_of(np.ndim(ary), args, kw), np.ndim(ary))
        pre = (slice(None),) * axis
        where, at = [], 0
        for y in ys:
            n = y.shape[axis]
            where.append(pre + (slice(at, at + n),))
            at += n

        def back(d):
            g = zeros_for(ary)
            for k, di in zip(where, d):
                if di is not None:
                    g[k] = di if g.dtype.kind == "c" or np.isrealobj(di) else np.real(di)
            return (None, grad_for(ary, g), None) + (None,) * len(args)
        return ys, back
    return r


_given_axis = lambda nd, args, kw: _arg(args, kw, 0, "axis", 0)  # noqa: E731
rule(np.split)(_splitter(np.split, _given_axis))
rule(np.array_split)(_splitter(np.array_split, _given_axis))
rule(np.hsplit)(_splitter(np.hsplit, lambda nd, args, kw: 1 if nd > 1 else 0))
rule(np.vsplit)(_splitter(np.vsplit, lambda nd, args, kw: 0))
rule(np.dsplit)(_splitter(np.dsplit, lambda nd, args, kw: 2))


# ---------------------------------------------------------------- repeating

@rule(np.tile)
def _tile(A, reps):
    y = np.tile(A, reps)
    shape = np.shape(A)
    r = tuple(reps) if np.iterable(reps) else (reps,)
    n = max(len(r), len(shape))
    s = (1,) * (n - len(shape)) + shape
    r = (1,) * (n - len(r)) + r
    inter = tuple(v for pair in zip(r, s) for v in pair)
    axes = tuple(range(0, 2 * n, 2))
    return y, _pb1(A, 2, lambda d: d.reshape(inter).sum(axis=axes).reshape(shape))


def _repeat_back(a, repeats, axis):
    shape = np.shape(a)
    flat = axis is None
    src = (int(np.prod(shape)),) if flat else shape
    ax = 0 if flat else _axis(axis, len(shape))
    n = src[ax]
    r = np.asarray(repeats)
    if r.size == 1:
        k = int(r.reshape(()))

        def back(d):
            g = d.reshape(src[:ax] + (n, k) + src[ax + 1:]).sum(axis=ax + 1)
            return g.reshape(shape)
        return back
    r = np.broadcast_to(r, (n,))
    keep = r > 0
    starts = (np.cumsum(r) - r)[keep]

    def back(d):
        g = np.zeros(src, d.dtype)
        if starts.size:
            idx = (slice(None),) * ax + (keep,)
            g[idx] = np.add.reduceat(d, starts, axis=ax)
        return g.reshape(shape)
    return back


@rule(np.repeat)
def _repeat(a, repeats, *args, **kw):
    y = np.repeat(a, repeats, *args, **kw)
    return y, _pb1(a, 2 + len(args), _repeat_back(a, repeats, _arg(args, kw, 0, "axis", None)))


@rule(np.ndarray.repeat)
def _repeat_method(x, repeats, *args, **kw):
    y = x.repeat(repeats, *args, **kw)
    return y, _pb1(x, 2 + len(args), _repeat_back(x, repeats, _arg(args, kw, 0, "axis", None)))


# ---------------------------------------------------------------- reordering

@rule(np.flip)
def _flip(m, *args, **kw):
    axis = _arg(args, kw, 0, "axis", None)
    return np.flip(m, *args, **kw), _pb1(m, 1 + len(args), lambda d: np.flip(d, axis))


@rule(np.fliplr)
def _fliplr(m):
    return np.fliplr(m), _pb1(m, 1, np.fliplr)


@rule(np.flipud)
def _flipud(m):
    return np.flipud(m), _pb1(m, 1, np.flipud)


@rule(np.roll)
def _roll(a, shift, *args, **kw):
    axis = _arg(args, kw, 0, "axis", None)
    back = np.negative(shift) if np.iterable(shift) else -shift
    return np.roll(a, shift, *args, **kw), _pb1(a, 2 + len(args), lambda d: np.roll(d, back, axis))


@rule(np.rot90)
def _rot90(m, k=1, axes=(0, 1)):
    return np.rot90(m, k, axes), _pb1(m, 3, lambda d: np.rot90(d, -k, axes))


# ---------------------------------------------------------------- padding

_COPYING = frozenset({"edge", "wrap", "reflect", "symmetric"})


@rule(np.pad, keywords=("constant_values",), note="modes constant, empty, edge, wrap, reflect and "
     "symmetric (reflect_type='even'); other modes raise")
def _pad(array, pad_width, *mode, **kw):
    y = np.pad(array, pad_width, *mode, **kw)
    if "constant_values" in kw and mode in ((), ("constant",)):
        return y, _pad_constant(array, pad_width, kw["constant_values"], 2 + len(mode))
    mode = mode[0] if mode else "constant"
    if not differentiable_input(array):
        return y, nograd(3)
    shape = np.shape(array)
    if mode in ("constant", "empty"):
        return y, _pb1(array, 3, lambda d: d[_inner(shape, pad_width)])
    if not isinstance(mode, str) or mode not in _COPYING or kw.get("reflect_type", "even") != "even":
        raise NotImplementedError(
            f"bytegrad: np.pad's gradient is implemented for the modes constant, empty, edge, "
            f"wrap, reflect and symmetric (reflect_type='even'), not mode={mode!r} {kw or ''}")
    size = int(np.prod(shape))
    source = np.pad(np.arange(size).reshape(shape), pad_width, mode, **kw).reshape(-1)

    def back(d):
        d = d.reshape(-1)
        if d.dtype.kind == "c":
            g = np.bincount(source, d.real, size) + 1j * np.bincount(source, d.imag, size)
        else:
            g = np.bincount(source, d, size)
        return g.reshape(shape)
    return y, _pb1(array, 3, back)


def _inner(shape, pad_width):
    """The slices of a padded array that hold the original one."""
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (len(shape), 2))
    return tuple(slice(int(lo), int(lo) + n) for (lo, _), n in zip(widths, shape))


def _pad_constant(array, pad_width, values, nargs):
    """The pullback of ``np.pad(array, pad_width, constant_values=values)``: the array gets
    the gradient of its copy, each value the sum over the region it filled (``nargs``
    positional arguments).  NumPy pads
    axis by axis, so a corner belongs to the last axis padded there; padding a grid of
    labels, one per (axis, side), finds each value's region."""
    shape = np.shape(array)
    labels = np.arange(2 * len(shape)).reshape(len(shape), 2) + 1
    region = np.pad(np.zeros(shape, np.intp), pad_width, constant_values=labels)
    inner = _inner(shape, pad_width)

    def back(d):
        d = np.asarray(d)
        ga = grad_for(array, d[inner]) if differentiable_input(array) else None
        gv = None
        if differentiable_input(values):
            sums = np.array([d[region == k].sum() for k in labels.ravel()]).reshape(labels.shape)
            gv = grad_for(values, _sum_to(sums, np.shape(values)))
        return (None, ga) + (None,) * (nargs - 1) + ({"constant_values": gv},)
    return back
