"""Rules for NumPy's products (dot, matmul, inner, outer, tensordot, einsum, trace,
kron, vdot, cross, vecdot, matvec, vecmat) and for ``np.linalg`` (solve, inv, det,
slogdet, cholesky, eigh, eigvalsh, eig, eigvals, svd, qr, lstsq, pinv, cond,
matrix_power, multi_dot).

Every product's pullback is `Lazy`, so the gradient of an operand nobody
differentiates (the data ``X`` in ``X @ W``) is never computed.  Complex numbers
follow the Zygote convention: for ``C = A @ B``, ``dA = dC @ B^H`` and
``dB = A^H @ dC`` (the adjoint of the linear map for the real inner product
``Re <x, y>``).  Stacked (batched) matrices are supported wherever NumPy supports
them, with gradients of broadcast operands summed back to their shape.

Factorisations of Hermitian matrices (``cholesky``, ``eigh``, ``eigvalsh``) treat
their input as Hermitian, as NumPy does (it reads one triangle only): the
gradient returned is the Hermitian one, i.e. the gradient of
``f((A + A^H) / 2)``.  It agrees with any chain of differentiation in which the
matrix is built symmetrically (``X @ X.T``, ``(B + B.T) / 2``, ...).  ``eig`` and
``eigvals`` of a general real or complex matrix need distinct eigenvalues.  An
eigenvector is defined up to a factor; NumPy returns what LAPACK's geev documents:
unit norm and the entry of largest modulus real (for a complex matrix positive; for
a real one its sign, like the sign of a real eigenvector, comes out of LAPACK's
arithmetic and may jump).  The gradient is the derivative of exactly that, so the
unit norm is part of it (a function of ``abs(v)`` sees it); as in JAX, the
functions to differentiate are those invariant to the phases (``abs(v)``,
``v[:, k] / v[j, k]``, ``v diag(w) inv(v)``), which get the same gradient in any
normalisation; for a complex matrix any function is smooth away from ties for the
largest entry, and gets its gradient.
Outputs that
are tuples (``slogdet``, ``eigh``, ``svd``, ``qr``, ``lstsq``) receive their
gradient as a tuple with None for components without gradient.
"""
from __future__ import annotations

import operator
from functools import partial

from ._frozen import np

from ..runtime.algebra import Eye, unwrap
from ..runtime.rules import Lazy, only_reads, rule, sparse_gradients, takes_structured
from . import buffers
from ._on_import import when_imported
from ._util import conj, unbroadcast as ub, zero_cotangent
from .np_reductions import _norm

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


# ---------------------------------------------------------------- helpers

def _float(x) -> bool:
    """Whether ``x`` (an array, scalar or nested list) can carry a gradient."""
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    t = type(x)
    if t is float or t is complex:
        return True
    if t is int or t is bool:
        return False
    return np.asarray(x).dtype.kind in "fc"


def _nest(x, g):
    """The gradient array ``g`` in the nested list/tuple structure of ``x``."""
    if isinstance(x, (list, tuple)):
        return type(x)(_nest(xi, gi) for xi, gi in zip(x, g))
    return ub(x, g)


def _fit(x, g):
    """Gradient ``g`` made to fit argument ``x``: summed over broadcast axes, cast
    to ``x``'s floating dtype (real part for a real ``x``), None for non-float ``x``,
    and nested like ``x`` if ``x`` is a list or tuple."""
    if isinstance(x, (list, tuple)):
        a = np.asarray(x)
        if a.dtype.kind not in "fc":
            return None
        return _nest(x, ub(a, g))
    return ub(x, g)


def _mH(x):
    """Conjugate transpose of the last two axes (no copy for real arrays)."""
    x = x.swapaxes(-1, -2)
    return x.conj() if x.dtype.kind == "c" else x


def _cj(x):
    """Conjugate of an array (itself if real)."""
    return x.conj() if x.dtype.kind == "c" else x


def _diag(x):
    """A writable view of the diagonal of the last two axes of ``x``."""
    return np.einsum("...ii->...i", x)


def _herm(g):
    """The Hermitian part ``(g + g^H) / 2``."""
    return (g + _mH(g)) * 0.5


def _pad(entries, nargs):
    """Pullback entries padded with None to ``nargs + 1`` (the callee and each
    positional argument)."""
    return entries + (None,) * (nargs + 1 - len(entries))


def _parts(d, y):
    """The components of the gradient ``d`` of the tuple output ``y`` (None entries
    kept): a tuple, or a dict by field name (from attribute reads of a named tuple)."""
    n = len(y)
    if d is None:
        return (None,) * n
    if isinstance(d, dict):
        return tuple(d.get(f) for f in y._fields)
    return tuple(d[i] for i in range(n))


# ---------------------------------------------------------------- matmul family

def matmul_thunks(a, b, d):
    """Thunks for the gradients of ``a @ b`` (NumPy matmul semantics) given ``d``."""
    if type(a) is np.ndarray and type(b) is np.ndarray and type(d) is np.ndarray and \
            a.ndim == 2 and b.ndim == 2 and a.dtype is b.dtype and d.dtype is a.dtype and \
            a.dtype.kind == "f":  # real matrices, the usual case: nothing to conjugate or sum back
        return partial(buffers.matmul, d, b.T), partial(buffers.matmul, a.T, d)
    a2, b2 = np.asarray(a), np.asarray(b)
    if type(d) is Eye:  # d(A @ B) = s I (from a trace): s B^H and s A^H, no product
        s = d.value
        return (lambda: _fit(a, s * _mH(b2)) if a2.dtype.kind in "fc" else None,
                lambda: _fit(b, s * _mH(a2)) if b2.dtype.kind in "fc" else None)
    d = unwrap(d)  # (the other structured and sparse forms: a Fill, a OneHot of (A @ B)[i])

    def ga():
        if a2.dtype.kind not in "fc":
            return None
        d2 = np.asarray(d)
        if b2.ndim == 1:
            if a2.ndim == 1:    # inner product
                g = d2 * _cj(b2)
            else:               # (..., m, k) @ (k,)
                g = d2[..., None] * _cj(b2)
        elif a2.ndim == 1:      # (k,) @ (..., k, n)
            g = _cj(b2) @ d2 if b2.ndim == 2 else (_cj(b2) @ d2[..., None])[..., 0]
        else:
            g = buffers.matmul(d2, _mH(b2))
        return _fit(a, g)

    def gb():
        if b2.dtype.kind not in "fc":
            return None
        d2 = np.asarray(d)
        if a2.ndim == 1:
            if b2.ndim == 1:
                g = _cj(a2) * d2
            else:               # (k,) @ (..., k, n)
                g = _cj(a2)[:, None] * d2[..., None, :]
        elif b2.ndim == 1:      # (..., m, k) @ (k,)
            g = _cj(a2).T @ d2 if a2.ndim == 2 else (_mH(a2) @ d2[..., None])[..., 0]
        else:
            g = buffers.matmul(_mH(a2), d2)
        return _fit(b, g)

    return ga, gb


@rule(np.matmul, np.linalg.matmul)
def _matmul(a, b, *rest, **kw):
    y = np.matmul(a, b, *rest, **kw)
    if "axes" in kw or "axis" in kw:
        def back(d):
            raise NotImplementedError("gradient of np.matmul with axes/axis")
        return y, back
    n = 2 + len(rest)

    def back(d):
        ga, gb = matmul_thunks(a, b, d)
        return Lazy(*_pad((None, ga, gb), n))
    return y, back


def _tensordot_thunks(a, b, axes_a, axes_b, d):
    """Thunks for the gradients of ``np.tensordot(a, b, (axes_a, axes_b))`` given
    ``d`` (axes already normalised to non-negative lists)."""
    a2, b2 = np.asarray(a), np.asarray(b)
    free_a = [i for i in range(a2.ndim) if i not in axes_a]
    free_b = [i for i in range(b2.ndim) if i not in axes_b]
    nfa = len(free_a)

    def ga():
        if a2.dtype.kind not in "fc":
            return None
        d2 = np.asarray(d)
        g = np.tensordot(d2, _cj(b2), axes=(list(range(nfa, d2.ndim)), free_b))
        order = free_a + [axes_a[axes_b.index(j)] for j in sorted(axes_b)]
        if order != sorted(order):
            g = g.transpose(np.argsort(order))
        return _fit(a, g)

    def gb():
        if b2.dtype.kind not in "fc":
            return None
        d2 = np.asarray(d)
        g = np.tensordot(_cj(a2), d2, axes=(free_a, list(range(nfa))))
        order = [axes_b[axes_a.index(i)] for i in sorted(axes_a)] + free_b
        if order != sorted(order):
            g = g.transpose(np.argsort(order))
        return _fit(b, g)

    return ga, gb


def _scalar_product_thunks(a, b, d):
    """Thunks for ``a * b`` where one operand is a scalar."""
    return (lambda: _fit(a, d * conj(b)) if _float(a) else None,
            lambda: _fit(b, conj(a) * d) if _float(b) else None)


def _norm_axes(axes, n):
    if isinstance(axes, (int, np.integer)):
        axes = [axes]
    return [int(i) % n if n else int(i) for i in axes]


@rule(np.dot, np.ndarray.dot)
def _dot(a, b, *rest, **kw):
    y = np.dot(a, b, *rest, **kw)
    n = 2 + len(rest)

    def back(d):
        na, nb = np.ndim(a), np.ndim(b)
        if na == 0 or nb == 0:
            ga, gb = _scalar_product_thunks(a, b, d)
        elif na <= 2 and nb <= 2:
            ga, gb = matmul_thunks(a, b, d)
        else:
            ga, gb = _tensordot_thunks(a, b, [na - 1], [max(nb - 2, 0)], d)
        return Lazy(*_pad((None, ga, gb), n))
    return y, back


@rule(np.inner)
def _inner(a, b, *rest):
    y = np.inner(a, b, *rest)

    def back(d):
        na, nb = np.ndim(a), np.ndim(b)
        if na == 0 or nb == 0:
            ga, gb = _scalar_product_thunks(a, b, d)
        else:
            ga, gb = _tensordot_thunks(a, b, [na - 1], [nb - 1], d)
        return Lazy(*_pad((None, ga, gb), 2 + len(rest)))
    return y, back


@rule(np.outer, np.linalg.outer)
def _outer(a, b, *rest, **kw):
    y = np.outer(a, b, *rest, **kw)

    def back(d):
        a2, b2 = np.asarray(a), np.asarray(b)

        def ga():
            if a2.dtype.kind not in "fc":
                return None
            return _fit(a, (d @ _cj(b2.ravel())).reshape(a2.shape))

        def gb():
            if b2.dtype.kind not in "fc":
                return None
            return _fit(b, (_cj(a2.ravel()) @ d).reshape(b2.shape))
        return Lazy(*_pad((None, ga, gb), 2 + len(rest)))
    return y, back


@rule(np.tensordot, np.linalg.tensordot)
def _tensordot(a, b, *rest, **kw):
    y = np.tensordot(a, b, *rest, **kw)
    axes = rest[0] if rest else kw.get("axes", 2)

    def back(d):
        na, nb = np.ndim(a), np.ndim(b)
        if isinstance(axes, (int, np.integer)):
            k = int(axes)
            ax_a, ax_b = list(range(na - k, na)), list(range(k))
        else:
            ax_a, ax_b = _norm_axes(axes[0], na), _norm_axes(axes[1], nb)
        ga, gb = _tensordot_thunks(a, b, ax_a, ax_b, d)
        return Lazy(*_pad((None, ga, gb), 2 + len(rest)))
    return y, back


@rule(np.vdot)
def _vdot(a, b):
    y = np.vdot(a, b)

    def back(d):
        a2, b2 = np.asarray(a), np.asarray(b)

        def ga():   # y = conj(a) . b is antiholomorphic in a
            if a2.dtype.kind not in "fc":
                return None
            return _fit(a, (conj(d) * b2).reshape(a2.shape))

        def gb():
            if b2.dtype.kind not in "fc":
                return None
            return _fit(b, (a2 * d).reshape(b2.shape))
        return Lazy(None, ga, gb)
    return y, back


@rule(np.kron)
def _kron(a, b):
    y = np.kron(a, b)

    def back(d):
        a2, b2 = np.asarray(a), np.asarray(b)
        nd = max(a2.ndim, b2.ndim)
        sa = (1,) * (nd - a2.ndim) + a2.shape
        sb = (1,) * (nd - b2.ndim) + b2.shape

        def pairs():
            return np.asarray(d).reshape([n for ab in zip(sa, sb) for n in ab])

        def ga():
            if a2.dtype.kind not in "fc":
                return None
            g = np.tensordot(pairs(), _cj(b2).reshape(sb),
                             axes=(list(range(1, 2 * nd, 2)), list(range(nd))))
            return _fit(a, g.reshape(a2.shape))

        def gb():
            if b2.dtype.kind not in "fc":
                return None
            g = np.tensordot(pairs(), _cj(a2).reshape(sa),
                             axes=(list(range(0, 2 * nd, 2)), list(range(nd))))
            return _fit(b, g.reshape(b2.shape))
        return Lazy(None, ga, gb)
    return y, back


def _cross_axes(axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        return axis, axis, axis
    return axisa, axisb, axisc


@rule(np.cross, np.linalg.cross)
def _cross(a, b, *rest, **kw):
    y = np.cross(a, b, *rest, **kw)
    axa, axb, axc = _cross_axes(*rest, **kw)

    def back(d):
        a2 = np.moveaxis(np.asarray(a), axa, -1)
        b2 = np.moveaxis(np.asarray(b), axb, -1)
        na, nb = a2.shape[-1], b2.shape[-1]

        def three(v):   # a 2-vector is (x, y, 0)
            if v.shape[-1] == 3:
                return v
            out = np.zeros(v.shape[:-1] + (3,), v.dtype)
            out[..., :2] = v
            return out

        def dy3():
            d2 = np.asarray(d)
            if na == 2 and nb == 2:     # the result is the z component
                out = np.zeros(d2.shape + (3,), d2.dtype)
                out[..., 2] = d2
                return out
            return np.moveaxis(d2, axc, -1)

        def ga():   # <g, da x b> = <conj(b) x g, da>
            if a2.dtype.kind not in "fc":
                return None
            g = np.cross(_cj(three(b2)), dy3())[..., :na]
            return _fit(a, np.moveaxis(ub(a2, g), -1, axa))

        def gb():   # <g, a x db> = <g x conj(a), db>
            if b2.dtype.kind not in "fc":
                return None
            g = np.cross(dy3(), _cj(three(a2)))[..., :nb]
            return _fit(b, np.moveaxis(ub(b2, g), -1, axb))
        return Lazy(*_pad((None, ga, gb), 2 + len(rest)))
    return y, back


@rule(np.vecdot, np.linalg.vecdot)
def _vecdot(a, b, **kw):
    y = np.vecdot(a, b, **kw)
    if set(kw) - {"axis", "dtype"}:
        def back(d):
            raise NotImplementedError(f"gradient of np.vecdot with {sorted(kw)}")
        return y, back
    ax = kw.get("axis", -1)

    def back(d):
        a2, b2 = np.asarray(a), np.asarray(b)
        de = np.expand_dims(np.asarray(d), -1)

        def ga():   # y = sum(conj(a) * b): antiholomorphic in a
            if a2.dtype.kind not in "fc":
                return None
            g = _cj(de) * np.moveaxis(b2, ax, -1)
            return _fit(a, np.moveaxis(ub(np.moveaxis(a2, ax, -1), g), -1, ax))

        def gb():
            if b2.dtype.kind not in "fc":
                return None
            g = np.moveaxis(a2, ax, -1) * de
            return _fit(b, np.moveaxis(ub(np.moveaxis(b2, ax, -1), g), -1, ax))
        return Lazy(None, ga, gb)
    return y, back


@rule(np.matvec)
def _matvec(a, x, **kw):
    y = np.matvec(a, x, **kw)
    if kw:
        def back(d):
            raise NotImplementedError(f"gradient of np.matvec with {sorted(kw)}")
        return y, back

    def back(d):    # y[..., i] = sum_j a[..., i, j] x[..., j]
        a2, x2, d = np.asarray(a), np.asarray(x), np.asarray(d)

        def ga():
            if a2.dtype.kind not in "fc":
                return None
            return _fit(a, d[..., :, None] * _cj(x2)[..., None, :])

        def gx():
            if x2.dtype.kind not in "fc":
                return None
            return _fit(x, np.matvec(_mH(a2), d))
        return Lazy(None, ga, gx)
    return y, back


@rule(np.vecmat)
def _vecmat(x, a, **kw):
    y = np.vecmat(x, a, **kw)
    if kw:
        def back(d):
            raise NotImplementedError(f"gradient of np.vecmat with {sorted(kw)}")
        return y, back

    def back(d):    # y[..., j] = sum_i conj(x[..., i]) a[..., i, j]
        x2, a2, d = np.asarray(x), np.asarray(a), np.asarray(d)

        def gx():   # antiholomorphic in x: g = conj(d @ a^H) = a @ conj(d)
            if x2.dtype.kind not in "fc":
                return None
            return _fit(x, np.matvec(a2, np.conj(d)))

        def ga():
            if a2.dtype.kind not in "fc":
                return None
            return _fit(a, x2[..., :, None] * d[..., None, :])
        return Lazy(None, gx, ga)
    return y, back


# ---------------------------------------------------------------- einsum

def _einsum_parse(args):
    """``(inputs, output, operands, positions)``: the subscripts of each operand and
    of the output as letters (ellipses expanded, implicit output made explicit),
    and the positions of the operands among the call's arguments."""
    if isinstance(args[0], str):
        subs = args[0].replace(" ", "")
        ops = args[1:]
        pos = list(range(1, len(args)))
        if "->" in subs:
            ins, out = subs.split("->")
        else:
            ins, out = subs, None
        ins = ins.split(",")
    else:   # interleaved: op0, sublist0, op1, sublist1, ..., [output sublist]
        n = len(args) // 2
        ops = args[0:2 * n:2]
        pos = list(range(0, 2 * n, 2))

        def letters(sub):
            return "".join("..." if s is Ellipsis else _LETTERS[int(s)] for s in sub)
        ins = [letters(s) for s in args[1:2 * n:2]]
        out = letters(args[-1]) if len(args) % 2 else None
    used = set("".join(ins) + (out or "")) - {"."}
    free = [c for c in _LETTERS if c not in used]
    ndims = [np.ndim(op) for op in ops]
    nell = max([nd - (len(s) - 3) for s, nd in zip(ins, ndims) if "..." in s], default=0)
    ell = "".join(free[:nell])
    expanded = []
    for s, nd in zip(ins, ndims):
        if "..." in s:
            e = nd - (len(s) - 3)
            s = s.replace("...", ell[nell - e:] if e > 0 else "")
        expanded.append(s)
    if out is None:
        count = {}
        for s in expanded:
            for c in s:
                count[c] = count.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in count.items() if k == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return expanded, out, ops, pos


def _einsum_grad(k, ins, out, ops, d, optimize):
    """The gradient of operand ``k`` of ``einsum(ins -> out, *ops)`` given ``d``: the
    einsum of the other operands (conjugated) with ``d``, over the distinct
    letters of operand ``k``; then broadcast along letters only operand ``k`` has,
    summed along its broadcast (size 1) axes, and scattered onto the diagonals of
    repeated letters."""
    x = ops[k]
    xa = np.asarray(x)
    if xa.dtype.kind not in "fc":
        return None
    s = ins[k]
    uniq = "".join(dict.fromkeys(s))
    others = [j for j in range(len(ops)) if j != k]
    avail = set(out).union(*(ins[j] for j in others))
    hs = "".join(c for c in uniq if c in avail)
    terms = [ins[j] for j in others] + [out]
    operands = [_cj(np.asarray(ops[j])) for j in others] + [np.asarray(d)]
    h = np.einsum(",".join(terms) + "->" + hs, *operands, optimize=optimize)
    h = np.asarray(h)
    size = {c: xa.shape[s.index(c)] for c in uniq}
    red = tuple(i for i, c in enumerate(hs) if size[c] == 1 and h.shape[i] != 1)
    if red:
        h = h.sum(axis=red, keepdims=True)
    if len(hs) < len(uniq):
        h = h.reshape([h.shape[hs.index(c)] if c in hs else 1 for c in uniq])
    if len(uniq) == len(s) and h.shape == xa.shape:
        g = h
    else:
        g = np.zeros(xa.shape, np.result_type(h.dtype, xa.dtype))
        view = g if len(uniq) == len(s) else np.einsum(s + "->" + uniq, g)
        view[...] = h
    return _fit(x, g)


@rule(np.einsum)
def _einsum(*args, **kw):
    y = np.einsum(*args, **kw)
    optimize = kw.get("optimize", False)

    def back(d):
        ins, out, ops, pos = _einsum_parse(args)
        thunks = [None] * (len(args) + 1)
        for k, p in enumerate(pos):
            thunks[p + 1] = (lambda k=k: _einsum_grad(k, ins, out, ops, d, optimize))
        return Lazy(*thunks)
    return y, back


# ---------------------------------------------------------------- trace

def _trace_args(offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return offset, axis1, axis2


def _trace_grad(a, d, offset, axis1, axis2):
    a2 = np.asarray(a)
    if a2.dtype.kind not in "fc":
        return None
    d2 = np.asarray(d)
    g = np.zeros(a2.shape, np.result_type(a2.dtype, d2.dtype))
    gv = np.moveaxis(g, (axis1, axis2), (-2, -1))
    n1, n2 = gv.shape[-2:]
    if offset >= 0:
        m = max(0, min(n1, n2 - offset))
        rows = np.arange(m)
        cols = rows + offset
    else:
        m = max(0, min(n1 + offset, n2))
        cols = np.arange(m)
        rows = cols - offset
    gv[..., rows, cols] = d2[..., None]
    return _fit(a, g)


@rule(np.trace, np.ndarray.trace)
def _trace(a, *args, **kw):
    y = np.trace(a, *args, **kw)
    if not args and not kw and type(a) is np.ndarray and a.ndim == 2 and a.dtype.kind == "f":
        return y, lambda d: Lazy(None, lambda: Eye(d, a.shape, a.dtype))  # dense where needed
    offset, axis1, axis2 = _trace_args(*args, **kw)
    n = 1 + len(args)
    return y, lambda d: Lazy(*_pad((None, lambda: _trace_grad(a, d, offset, axis1, axis2)), n))


sparse_gradients(np.trace, np.ndarray.trace)  # its argument's gradient may be an Eye
takes_structured(np.matmul, operator.matmul)
only_reads(2, np.dot, np.inner, np.outer, np.ndarray.dot)


@rule(np.linalg.trace)
def _linalg_trace(a, *, offset=0, dtype=None):
    y = np.linalg.trace(a, offset=offset, dtype=dtype)
    return y, lambda d: Lazy(None, lambda: _trace_grad(a, d, offset, -2, -1))


# ---------------------------------------------------------------- np.linalg

@rule(np.linalg.solve, note="a nonsingular")
def _solve(a, b):
    x = np.linalg.solve(a, b)

    def back(d):
        vec = np.ndim(b) == 1
        memo = []

        def db_full():      # a^H \ dx, as a stack of matrices
            if not memo:
                dx = np.asarray(d)
                memo.append(np.linalg.solve(_mH(np.asarray(a)), dx[..., None] if vec else dx))
            return memo[0]

        def ga():
            if not _float(a):
                return None
            xm = x[..., None] if vec else x
            return _fit(a, -(db_full() @ _mH(xm)))

        def gb():
            if not _float(b):
                return None
            g = db_full()
            return _fit(b, g[..., 0] if vec else g)
        return Lazy(None, ga, gb)
    return x, back


@rule(np.linalg.inv, note="a nonsingular")
def _inv(a):
    y = np.linalg.inv(a)

    def back(d):
        def ga():
            if not _float(a):
                return None
            yh = _mH(y)
            return _fit(a, -(yh @ d @ yh))
        return Lazy(None, ga)
    return y, back


@rule(np.linalg.det, note="a nonsingular")
def _det(a):
    y = np.linalg.det(a)

    def back(d):
        def ga():
            if not _float(a):
                return None
            c = np.asarray(d * np.conj(y))[..., None, None]
            return _fit(a, c * _mH(np.linalg.inv(a)))
        return Lazy(None, ga)
    return y, back


@rule(np.linalg.slogdet, note="a nonsingular; sign gets a gradient only for complex a")
def _slogdet(a):
    y = np.linalg.slogdet(a)

    def back(d):
        ds, dl = _parts(d, y)

        def ga():
            if not _float(a):
                return None
            sign = y[0]
            c = None if dl is None else np.asarray(dl)
            if ds is not None and np.iscomplexobj(sign):
                # sign = exp(i θ), θ = Im log det: dθ = Im tr(a⁻¹ da)
                c2 = 1j * np.imag(ds * np.conj(sign))
                c = c2 if c is None else c + c2
            if c is None:
                return None
            return _fit(a, np.asarray(c)[..., None, None] * _mH(np.linalg.inv(a)))
        return Lazy(None, ga)
    return y, back


@rule(np.linalg.cholesky, note="a Hermitian positive definite; the gradient is the Hermitian one "
                               "(that of f((a + a^H) / 2)), though NumPy reads one triangle of a")
def _cholesky(a, **kw):
    y = np.linalg.cholesky(a, **kw)
    upper = kw.get("upper", False)

    def back(d):
        def ga():
            if not _float(a):
                return None
            low = _mH(y) if upper else y
            dl = _mH(np.asarray(d)) if upper else np.asarray(d)
            linv = np.linalg.inv(low)
            phi = np.tril(_mH(low) @ dl)
            _diag(phi)[...] *= 0.5
            return _fit(a, _herm(_mH(linv) @ phi @ linv))
        return Lazy(None, ga)
    return y, back


def _eigh_grad(w, v, dw, dv):
    """The Hermitian gradient of ``a = v diag(w) v^H`` for gradients ``dw``, ``dv``."""
    vh = _mH(v)
    if dv is None:
        return _herm((v * np.asarray(dw)[..., None, :]) @ vh)
    k = vh @ dv
    k = (k - _mH(k)) * 0.5
    e = w[..., None, :] - w[..., :, None]       # e_ij = w_j - w_i
    _diag(e)[...] = np.inf
    inner = _over(k, e)
    if dw is not None:
        _diag(inner)[...] += dw
    return _herm(v @ inner @ vh)


@rule(np.linalg.eigh, note="a Hermitian with distinct eigenvalues (eigenvectors) and a function "
                           "of the eigenvectors invariant to their phases; the gradient is the "
                           "Hermitian one (that of f((a + a^H) / 2)), though NumPy reads one "
                           "triangle of a")
def _eigh(a, *rest, **kw):
    y = np.linalg.eigh(a, *rest, **kw)

    def back(d):
        dw, dv = _parts(d, y)

        def ga():
            if not _float(a) or (dw is None and dv is None):
                return None
            return _fit(a, _eigh_grad(y[0], y[1], dw, dv))
        return Lazy(*_pad((None, ga), 1 + len(rest)))
    return y, back


@rule(np.linalg.eigvalsh, note="a Hermitian; the gradient is the Hermitian one (that of "
                               "f((a + a^H) / 2)), though NumPy reads one triangle of a")
def _eigvalsh(a, *rest, **kw):
    y = np.linalg.eigvalsh(a, *rest, **kw)

    def back(d):
        def ga():
            if not _float(a):
                return None
            w, v = np.linalg.eigh(a, *rest, **kw)
            return _fit(a, _eigh_grad(w, v, d, None))
        return Lazy(*_pad((None, ga), 1 + len(rest)))
    return y, back


def _eig_grad(w, v, dw, dv):
    """The gradient of the eigendecomposition ``a v = v diag(w)`` of a general matrix for
    gradients ``dw``, ``dv`` (None where absent): ``v^-H h v^H``, where ``h`` has the
    diagonal ``dw`` and off it ``g'_ij / conj(w_j - w_i)``.  With ``dv = v c`` (``c``
    off its diagonal from ``v^-1 da v``), ``g' = g - v^H v diag(Re diag g) - i r^H
    diag(Im diag g / diag r)`` for ``g = v^H dv``: the diagonal of ``c`` is fixed by the
    normalisation LAPACK's geev documents and NumPy returns, each column of unit norm
    (the second term) with its entry of largest modulus real (the third; ``r_kj`` is
    that entry's row of ``v``)."""
    vh = _mH(v)
    if dv is None:
        h = np.zeros(v.shape, np.result_type(v.dtype, np.asarray(dw).dtype))
    else:
        g = vh @ np.asarray(dv)
        gd = _diag(g).copy()
        g -= vh @ (v * gd.real[..., None, :])
        if g.dtype.kind == "c":
            top = np.argmax(np.abs(v), axis=-2)[..., :, None]  # each column's largest entry
            r = np.take_along_axis(v, np.broadcast_to(top, v.shape), axis=-2)
            g -= 1j * _mH(r) * (gd.imag / _diag(r).real)[..., None, :]
        e = np.conj(w[..., None, :] - w[..., :, None])     # e_ij = conj(w_j - w_i)
        _diag(e)[...] = 1
        h = _over(g, e)
        _diag(h)[...] = 0
    if dw is not None:
        _diag(h)[...] += dw
    return np.linalg.solve(vh, h @ vh)


@rule(np.linalg.eig, note="distinct eigenvalues; eigenvectors as LAPACK's geev normalises them "
                          "(unit norm, the entry of largest modulus real): for real a only "
                          "functions invariant to their signs and phases are smooth")
def _eig(a):
    y = np.linalg.eig(a)

    def back(d):
        dw, dv = _parts(d, y)

        def ga():
            if not _float(a) or (dw is None and dv is None):
                return None
            return _fit(a, _eig_grad(y[0], y[1], dw, dv))
        return Lazy(None, ga)
    return y, back


@rule(np.linalg.eigvals, note="a diagonalisable (distinct eigenvalues)")
def _eigvals(a):
    y = np.linalg.eigvals(a)

    def back(d):
        def ga():
            if not _float(a):
                return None
            w, v = np.linalg.eig(a)
            return _fit(a, _eig_grad(w, v, d, None))
        return Lazy(None, ga)
    return y, back


def _svd_grad(u, s, vh, du, ds, dvh):
    """The gradient of ``a = u diag(s) vh`` (reduced SVD) for gradients ``du``,
    ``ds``, ``dvh`` (None where absent)."""
    m, n = u.shape[-2], vh.shape[-1]
    k = s.shape[-1]
    v = _mH(vh)
    dv = None if dvh is None else _mH(np.asarray(dvh))
    dtype = np.result_type(u.dtype, *(x for x in (du, ds, dvh) if x is not None))
    inner = np.zeros(s.shape[:-1] + (k, k), dtype)
    if ds is not None:
        _diag(inner)[...] += ds
    if du is not None or dv is not None:
        s2 = s * s
        e = s2[..., None, :] - s2[..., :, None]     # e_ij = s_j^2 - s_i^2
        _diag(e)[...] = np.inf
        if du is not None:
            udu = _mH(u) @ du
            inner += _over(udu - _mH(udu), e) * s[..., None, :]
            if udu.dtype.kind == "c":
                _diag(inner)[...] += 1j * _diag(udu).imag / s
        if dv is not None:
            vdv = _mH(v) @ dv
            inner += s[..., :, None] * _over(vdv - _mH(vdv), e)
    g = u @ inner @ vh
    if du is not None and m > k:
        g += ((du - u @ (_mH(u) @ du)) / s[..., None, :]) @ vh
    if dv is not None and n > k:
        dvh2 = _mH(dv)
        g += (u / s[..., None, :]) @ (dvh2 - (dvh2 @ v) @ vh)
    return g


def _over(k, e):
    """``k / e`` with 0 where ``k`` is 0: a repeated eigenvalue or singular value (``e``
    0) that the gradient does not reach gives no NaN (a zero cotangent times anything is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return zero_cotangent(k, k / e)


def _svd_args(full_matrices=True, compute_uv=True, hermitian=False):
    return full_matrices, compute_uv, hermitian


@rule(np.linalg.svd, note="distinct nonzero singular values (for singular vectors) and a function "
                          "of the singular vectors invariant to their phases; with "
                          "full_matrices=True the gradients of the columns of u and rows of vh "
                          "beyond min(m, n) are ignored (they are arbitrary bases)")
def _svd(a, *rest, **kw):
    y = np.linalg.svd(a, *rest, **kw)
    full, uv, herm = _svd_args(*rest, **kw)

    def back(d):
        def ga():
            if not _float(a):
                return None
            if not uv:
                u, s, vh = np.linalg.svd(a, full_matrices=False, hermitian=herm)
                return _fit(a, (u * np.asarray(d)[..., None, :]) @ vh)
            u, s, vh = y
            du, ds, dvh = _parts(d, y)
            if du is None and ds is None and dvh is None:
                return None
            k = s.shape[-1]
            if full:
                u, vh = u[..., :, :k], vh[..., :k, :]
                du = None if du is None else np.asarray(du)[..., :, :k]
                dvh = None if dvh is None else np.asarray(dvh)[..., :k, :]
            return _fit(a, _svd_grad(u, s, vh, du, ds, dvh))
        return Lazy(*_pad((None, ga), 1 + len(rest)))
    return y, back


def _copyltu(n):
    """``triu(n, 1) + triu(n, 1)^H + Re diag(n)``."""
    t = np.triu(n, 1)
    c = t + _mH(t)
    _diag(c)[...] += _diag(n).real
    return c


def _qr_square_grad(q, r, dq, dr):
    """The gradient of ``a = q r`` (q: m×n with orthonormal columns, r: n×n upper
    triangular, nonsingular) for gradients ``dq``, ``dr`` (None where absent)."""
    if dr is not None:
        nmat = dr @ _mH(r)
        if dq is not None:
            nmat = nmat - _mH(q) @ dq
    else:
        nmat = -(_mH(q) @ dq)
    y = q @ _copyltu(nmat)
    if dq is not None:
        y = y + dq
    return _mH(np.linalg.solve(r, _mH(y)))     # y r^{-H}


def _qr_grad(a, q, r, dq, dr):
    m, n = q.shape[-2], r.shape[-1]
    if m >= n:
        return _qr_square_grad(q, r, dq, dr)
    # wide: a = [x | z] with x = q u square and z = q w, w = q^H z
    a2 = np.asarray(a)
    u = r[..., :, :m]
    du = None if dr is None else dr[..., :, :m]
    dw = None if dr is None else dr[..., :, m:]
    dq_eff = dq
    if dw is not None:
        extra = a2[..., :, m:] @ _mH(dw)
        dq_eff = extra if dq is None else dq + extra
    gx = _qr_square_grad(q, u, dq_eff, du) if (dq_eff is not None or du is not None) else None
    gz = q @ dw if dw is not None else None
    shape = np.broadcast_shapes(q.shape[:-2], r.shape[:-2]) + (m, n)
    g = np.zeros(shape, np.result_type(q.dtype, *(x for x in (dq, dr) if x is not None)))
    if gx is not None:
        g[..., :, :m] = gx
    if gz is not None:
        g[..., :, m:] = gz
    return g


@rule(np.linalg.qr, note="a of full rank (for wide a: its leading square block nonsingular); "
                         "with mode='complete' the gradients of the columns of q beyond n are "
                         "ignored (they are an arbitrary basis)")
def _qr(a, *rest, **kw):
    y = np.linalg.qr(a, *rest, **kw)
    mode = rest[0] if rest else kw.get("mode", "reduced")

    def back(d):
        def ga():
            if not _float(a):
                return None
            if mode == "r":
                q, r = np.linalg.qr(a)
                dq, dr = None, np.asarray(d)
            elif mode in ("reduced", "complete"):
                q, r = y
                dq, dr = _parts(d, y)
                if dq is None and dr is None:
                    return None
                m, n = q.shape[-2], r.shape[-1]
                if mode == "complete" and m > n:
                    q, r = q[..., :, :n], r[..., :n, :]
                    dq = None if dq is None else np.asarray(dq)[..., :, :n]
                    dr = None if dr is None else np.asarray(dr)[..., :n, :]
            else:
                raise NotImplementedError(f"gradient of np.linalg.qr with mode={mode!r}")
            dq = None if dq is None else np.asarray(dq)
            dr = None if dr is None else np.asarray(dr)
            return _fit(a, _qr_grad(a, q, r, dq, dr))
        return Lazy(*_pad((None, ga), 1 + len(rest)))
    return y, back


def _pinv_grad(a, p, dp):
    """The gradient of ``p = pinv(a)`` (a of constant, here full, rank) for ``dp``."""
    ph = _mH(p)
    dph = _mH(dp)
    g = -(ph @ dp @ ph)
    t = dph @ (p @ ph)
    g += t - a @ (p @ t)        # (I - a p) dp^H p p^H
    t = (ph @ p) @ dph
    g += t - (t @ p) @ a        # p^H p dp^H (I - p a)
    return g


@rule(np.linalg.pinv, note="a of full rank")
def _pinv(a, *rest, **kw):
    y = np.linalg.pinv(a, *rest, **kw)

    def back(d):
        def ga():
            if not _float(a):
                return None
            return _fit(a, _pinv_grad(np.asarray(a), y, np.asarray(d)))
        return Lazy(*_pad((None, ga), 1 + len(rest)))
    return y, back


@rule(np.linalg.lstsq, note="a of full rank; gradients through the solution, the residuals "
                            "and the singular values (not the rank)")
def _lstsq(a, b, *rest, **kw):
    y = np.linalg.lstsq(a, b, *rest, **kw)

    def back(d):
        dx, dres, _, dsv = _parts(d, y)
        vec = np.ndim(b) == 1
        a2, b2 = np.asarray(a), np.asarray(b)
        x = y[0]
        xm, bm = (x[:, None], b2[:, None]) if vec else (x, b2)
        dxm = None if dx is None else (np.asarray(dx)[:, None] if vec else np.asarray(dx))
        memo = []

        def pinv():
            if not memo:
                memo.append(np.linalg.pinv(a2))
            return memo[0]

        def residual():
            return a2 @ xm - bm

        def ga():
            if not _float(a):
                return None
            g = None
            if dxm is not None:
                g = _pinv_grad(a2, pinv(), dxm @ _mH(bm))
            if dres is not None and y[1].size:
                t = 2 * (residual() * np.asarray(dres)) @ _mH(xm)
                g = t if g is None else g + t
            if dsv is not None:
                u, _, vh = np.linalg.svd(a2, full_matrices=False)
                t = (u * np.asarray(dsv)) @ vh
                g = t if g is None else g + t
            return None if g is None else _fit(a, g)

        def gb():
            if not _float(b):
                return None
            g = None
            if dxm is not None:
                g = _mH(pinv()) @ dxm
            if dres is not None and y[1].size:
                t = -2 * (residual() * np.asarray(dres))
                g = t if g is None else g + t
            if g is None:
                return None
            return _fit(b, g[:, 0] if vec else g)
        return Lazy(*_pad((None, ga, gb), 2 + len(rest)))
    return y, back


@rule(np.linalg.cond, note="p = None, 2, -2: distinct largest and smallest singular values; "
                           "'fro', 1, -1, inf, -inf: x nonsingular (1, inf: the gradient of the "
                           "norms, split among tied column or row sums)")
def _cond(x, *rest):
    """``norm(x, 2) / norm(x, -2)`` (``p`` None or 2; the inverse for -2), or
    ``norm(x, p) norm(inv(x), p)``, over the last two axes: through those rules."""
    y = np.linalg.cond(x, *rest)
    p = rest[0] if rest else None

    def back(d):
        def gx():
            if not _float(x):
                return None
            d2 = np.asarray(d)
            if p is None or (not isinstance(p, str) and abs(p) == 2):
                (big, bb), (small, bs) = _norm(x, 2, (-2, -1)), _norm(x, -2, (-2, -1))
                num, den, bnum, bden = (small, big, bs, bb) if p == -2 else (big, small, bb, bs)
                return _fit(x, bnum(d2 / den)[1] - bden(d2 * num / (den * den))[1])
            inverse, binv = _inv(x)
            (n1, b1), (n2, b2) = _norm(x, p, (-2, -1)), _norm(inverse, p, (-2, -1))
            return _fit(x, b1(d2 * n2)[1] + binv(b2(d2 * n1)[1])[1])
        return Lazy(None, gx, *(None,) * len(rest))
    return y, back


@rule(np.linalg.matrix_power, note="a nonsingular for negative powers")
def _matrix_power(a, n):
    y = np.linalg.matrix_power(a, n)

    def back(d):
        def ga():
            if not _float(a) or n == 0:
                return None
            a2 = np.asarray(a)
            base = np.linalg.inv(a2) if n < 0 else a2
            k = abs(n)
            powers = [None] * k             # (base^H)^i, i < k
            bh = _mH(base)
            powers[0] = np.broadcast_to(np.eye(a2.shape[-1], dtype=bh.dtype), bh.shape)
            for i in range(1, k):
                powers[i] = powers[i - 1] @ bh
            g = sum(powers[i] @ d @ powers[k - 1 - i] for i in range(k))
            if n < 0:                       # through base = inv(a)
                g = -(bh @ g @ bh)
            return _fit(a, g)
        return Lazy(None, ga, None)
    return y, back


@rule(np.linalg.multi_dot)
def _multi_dot(arrays, **kw):
    y = np.linalg.multi_dot(arrays, **kw)

    def back(d):
        def grads():
            mats = [np.asarray(x) for x in arrays]
            first, last = mats[0].ndim == 1, mats[-1].ndim == 1
            if first:
                mats[0] = mats[0][None, :]
            if last:
                mats[-1] = mats[-1][:, None]
            d2 = np.asarray(d)
            d2 = d2.reshape((mats[0].shape[0], mats[-1].shape[1]))
            n = len(mats)
            left = [None] * n               # A_0 ... A_{i-1}
            for i in range(1, n):
                left[i] = mats[0] if i == 1 else left[i - 1] @ mats[i - 1]
            right = [None] * n              # A_{i+1} ... A_{n-1}
            for i in range(n - 2, -1, -1):
                right[i] = mats[n - 1] if i == n - 2 else mats[i + 1] @ right[i + 1]
            out = []
            for i, x in enumerate(arrays):
                if not _float(x):
                    out.append(None)
                    continue
                g = d2 if left[i] is None else _mH(left[i]) @ d2
                if right[i] is not None:
                    g = g @ _mH(right[i])
                out.append(_fit(x, g.reshape(np.shape(x))))
            return type(arrays)(out) if isinstance(arrays, (list, tuple)) else out
        return Lazy(None, grads)
    return y, back


# -- scipy.linalg: registered when SciPy is imported -------------------------------------
def _register_scipy_linalg(linalg):
    expm, frechet = linalg.expm, linalg.expm_frechet

    @rule(expm, note="square matrices, stacks too; real or complex")
    def _expm(a):
        """The pullback of ``expm`` at ``A`` is its Fréchet derivative at ``Aᴴ``
        (Re⟨G, L(A, E)⟩ = Re⟨L(Aᴴ, G), E⟩), which SciPy computes."""
        y = expm(a)

        def back(d):
            def ga():
                if not _float(a):
                    return None
                at, dt = np.asarray(a), np.broadcast_to(d, np.shape(y))
                n = at.shape[-1]
                hs, ds = _mH(at).reshape(-1, n, n), dt.reshape(-1, n, n)
                g = np.stack([frechet(h, e, compute_expm=False) for h, e in zip(hs, ds)])
                return _fit(a, g.reshape(at.shape))
            return Lazy(None, ga)
        return y, back


    # the common solvers: NumPy's rules, SciPy's values; options that change the result
    # or the input are refused
    @rule(linalg.solve, note="a nonsingular, assume_a general; as np.linalg.solve")
    def _sp_solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
                  assume_a=None, transposed=False):
        _plain_options("solve", overwrite_a or overwrite_b or transposed or
                       assume_a not in (None, "gen", "general"))
        x = linalg.solve(a, b, check_finite=check_finite)
        return x, _padded(_solve(a, b)[1], 8)

    @rule(linalg.inv, note="a nonsingular; as np.linalg.inv")
    def _sp_inv(a, overwrite_a=False, check_finite=True):
        _plain_options("inv", overwrite_a)
        return linalg.inv(a, check_finite=check_finite), _padded(_inv(a)[1], 3)

    @rule(linalg.det, note="a nonsingular; as np.linalg.det")
    def _sp_det(a, overwrite_a=False, check_finite=True):
        _plain_options("det", overwrite_a)
        return linalg.det(a, check_finite=check_finite), _padded(_det(a)[1], 3)


def _plain_options(name, other):
    if other:
        raise NotImplementedError(
            f"scipy.linalg.{name} is differentiable with its defaults (assume_a general, "
            f"not transposed, no overwrite_*); call it so, or np.linalg.{name}")


def _padded(back, nargs):
    """``back`` (a pullback of NumPy's rule) for the SciPy function of ``nargs`` parameters."""
    return lambda d: Lazy(*_pad(tuple(back(d).thunks), nargs))


when_imported("scipy.linalg", _register_scipy_linalg)
