"""Rules for NumPy's one-dimensional signal functions: ``np.convolve``,
``np.correlate`` (modes ``full``, ``same``, ``valid``) and ``np.interp``.

Convolution and correlation are linear in each argument.  Every mode's output is
a window of the ``full`` output, so the pullback puts the output gradient into a
zero array of the full length at the window's start and applies the adjoint of the
full operation, itself a ``valid`` correlation or convolution: for
``y = convolve(a, v, "full")``, ``da = correlate(dy, v, "valid")`` and
``dv = correlate(dy, a, "valid")`` (``np.correlate`` conjugates its second
argument, which is the Zygote convention's adjoint).  ``correlate(a, v)`` is the
convolution of ``a`` with ``conj(v[::-1])``.

``np.interp(x, xp, fp)`` is piecewise linear.  Where ``xp[j] <= x < xp[j + 1]``
(the interval NumPy picks), with ``h = xp[j + 1] - xp[j]``, ``t = (x - xp[j]) / h``
and the slope ``s = (fp[j + 1] - fp[j]) / h``: ``dy/dfp[j] = 1 - t``,
``dy/dfp[j + 1] = t``, ``dy/dx = s``, ``dy/dxp[j] = -s (1 - t)``,
``dy/dxp[j + 1] = -s t``.  So at a knot ``x = xp[j]`` the derivatives are the
right-hand ones; at ``x = xp[-1]`` the value is ``fp[-1]`` and ``x``, ``xp`` get
none.  Outside ``[xp[0], xp[-1]]`` the value is ``left`` or ``right`` (which then get
the gradient) or ``fp[0]``/``fp[-1]``; a NaN ``x`` gives NaN and no gradient.  With
``period=``, NumPy reduces ``x`` and ``xp`` modulo the period, sorts ``xp`` and
adds one wrapped point at each end; the pullback goes back through those steps,
the period included (``d(x mod p)/dp = -floor(x / p)``).  ``xp`` must be increasing
(as NumPy requires, unchecked); complex ``fp`` is supported (``x`` and ``xp`` get
the real part of their gradient).
"""
from __future__ import annotations

import functools

from ._frozen import np

from ..runtime.rules import rule
from ._named import by_name
from ._util import unbroadcast as ub
from .np_elementwise import _thunk
from .np_indexing import accumulate


def _full_window(size, n, m, same):
    """Where an output of ``size`` elements starts in the full output for inputs of
    lengths ``n`` and ``m``, ``same`` being the start of mode ``same``.  Read from the
    size, so any spelling of the mode NumPy accepts is understood: the sizes of two
    modes agree only when the shorter input has one element, and then every mode
    starts at 0."""
    if size == n + m - 1:
        return 0
    if size == abs(n - m) + 1:
        return min(n, m) - 1
    return same


def _windowed(y, a, v, same, adjoints):
    """The pullback of ``y``, a window of the full convolution-like product of ``a``
    and ``v``, where mode ``same`` starts at ``same(len(a), len(v))``;
    ``adjoints(full, a1, v1)`` gives the gradients of the full product's arguments for
    its output gradient ``full``."""
    a1, v1 = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(v))
    n, m = len(a1), len(v1)
    start = _full_window(len(y), n, m, same(n, m))

    def back(dy):
        d = np.asarray(dy)
        full = np.zeros(n + m - 1, d.dtype)
        full[start:start + len(y)] = d
        parts = functools.cache(lambda: adjoints(full, a1, v1))
        return {"a": _thunk(a, lambda: ub(a, parts()[0])), "v": _thunk(v, lambda: ub(v, parts()[1]))}
    return back


def _convolution_adjoints(full, a, v):
    return np.correlate(full, v, "valid"), np.correlate(full, a, "valid")


def _correlation_adjoints(full, a, v):
    dv = np.correlate(full, a, "valid")[::-1]
    return np.convolve(full, v, "valid"), np.conj(dv) if dv.dtype.kind == "c" else dv


@rule(np.convolve, note="modes full, same, valid")
@by_name("np.convolve")
def _convolve(a, v, mode="full"):
    y = np.convolve(a, v, mode)
    return y, _windowed(y, a, v, lambda n, m: (min(n, m) - 1) // 2, _convolution_adjoints)


@rule(np.correlate, note="modes full, same, valid; the conjugate of v, as NumPy")
@by_name("np.correlate")
def _correlate(a, v, mode="valid"):
    y = np.correlate(a, v, mode)
    # NumPy centres mode same on the longer input; when v is the longer one it
    # correlates the other way round and reverses, which moves the window by one
    # for an even length
    return y, _windowed(y, a, v, lambda n, m: (m - 1) // 2 if n >= m else n // 2,
                        _correlation_adjoints)


def _linear_pieces(x, xp, fp, d, left, right):
    """The gradients ``(dx, dxp, dfp, dleft, dright)`` of ``np.interp(x, xp, fp, left,
    right)`` for output gradient ``d``; ``x`` and ``xp`` float64 arrays, ``fp`` a float64
    or complex128 array.  ``dx`` and ``dxp`` are real."""
    n = len(xp)
    xf = x.reshape(-1)
    df = np.broadcast_to(d, x.shape).reshape(-1)
    j = np.searchsorted(xp, xf, side="right") - 1  # xp[j] <= x < xp[j + 1], as NumPy finds it
    below = j < 0
    above = xf > xp[-1]
    end = xf == xp[-1]
    inner = (j >= 0) & (j < n - 1)  # NaN lands at n - 1 and in none of these
    ji, di = j[inner], df[inner]
    h = xp[ji + 1] - xp[ji]
    t = (xf[inner] - xp[ji]) / h
    g = np.real(np.conj((fp[ji + 1] - fp[ji]) / h) * di)  # dy/dx = the slope
    dx = np.zeros(x.shape)
    dx.reshape(-1)[inner] = g
    dxp = accumulate((n,), dx.dtype, np.concatenate((ji, ji + 1)), np.concatenate((-g * (1 - t), -g * t)))
    # fp[0] and fp[-1] also stand for left and right when those are not given
    ends = [below] * (left is None) + [above] * (right is None) + [end]
    idx = [ji, ji + 1] + [np.full(np.count_nonzero(m), 0 if m is below else n - 1) for m in ends]
    w = [(1 - t) * di, t * di] + [df[m] for m in ends]
    dfp = accumulate((n,), np.result_type(fp, df), np.concatenate(idx), np.concatenate(w))
    return dx, dxp, dfp, df[below].sum(), df[above].sum()


def _fold(e):
    """The gradient of a sorted array from that of it with one wrapped point added at each
    end (``e[0]`` belongs to its last element, ``e[-1]`` to its first)."""
    s = e[1:-1].copy()
    s[-1] += e[0]
    s[0] += e[-1]
    return s


def _periodic_pieces(x, xp, fp, d, period):
    """`_linear_pieces` through NumPy's reduction of ``np.interp(..., period=period)``:
    ``x`` and ``xp`` modulo the period, ``xp`` sorted and one point wrapped onto each
    end.  Returns ``(dx, dxp, dfp, dperiod)``."""
    p = abs(period)
    order = np.argsort(xp % p)  # the permutation NumPy's own call makes
    xs, fs = (xp % p)[order], fp[order]
    xe = np.concatenate((xs[-1:] - p, xs, xs[:1] + p))
    fe = np.concatenate((fs[-1:], fs, fs[:1]))
    dx, dxe, dfe, _, _ = _linear_pieces(x % p, xe, fe, d, None, None)
    dxs = _fold(dxe)
    dxp, dfp = np.empty_like(dxs), np.empty_like(dfe[1:-1])
    dxp[order], dfp[order] = dxs, _fold(dfe)
    # x mod p = x - p floor(x / p); the wrapped points are xs[-1] - p and xs[0] + p
    dp = dxe[-1] - dxe[0] - np.sum(dx * np.floor(x / p)) - np.sum(dxp * np.floor(xp / p))
    return dx, dxp, dfp, np.sign(period) * dp


@rule(np.interp, note="xp increasing; right-hand derivatives at the knots; x, xp, fp, "
      "left, right and period get gradients")
@by_name("np.interp")
def _interp(x, xp, fp, left=None, right=None, period=None):
    y = np.interp(x, xp, fp, left, right, period)

    def back(dy):
        @functools.cache
        def parts():
            xa, xpa = np.asarray(x, np.float64), np.asarray(xp, np.float64)
            fpa = np.asarray(fp)
            fpa = fpa.astype(np.result_type(fpa.dtype, np.float64), copy=False)
            d = np.asarray(dy)
            if period is None:
                return _linear_pieces(xa, xpa, fpa, d, left, right) + (None,)
            dx, dxp, dfp, dp = _periodic_pieces(xa, xpa, fpa, d, period)
            return dx, dxp, dfp, None, None, dp

        def part(v, i):
            return _thunk(v, lambda: ub(v, parts()[i].reshape(np.shape(v))))
        g = {name: part(v, i) for i, (name, v) in
             enumerate((("x", x), ("xp", xp), ("fp", fp), ("left", left), ("right", right)))}
        g["period"] = _thunk(period, lambda: ub(period, parts()[5]))
        return g
    return y, back
