"""Rules for ``np.fft``: fft ifft rfft irfft, their 2-D and n-D forms (fft2 ifft2 fftn
ifftn rfft2 irfft2 rfftn irfftn) with ``n``/``s``, ``axis``/``axes`` and every ``norm``,
and fftshift ifftshift.

Every transform is linear, so its pullback is its adjoint for the real inner product
``Re <x, y>`` (the Zygote convention: the gradient of a real ``f`` of ``z = x + iy`` is
``∂f/∂x + i ∂f/∂y``).  An n-D transform is, as NumPy computes it, a sequence of 1-D
transforms of single axes, each of which first cuts or zero-pads its input to ``n``
along its axis; the pullback runs the adjoints of those steps in reverse order:

  * ``fft`` with norm ``N`` is a DFT matrix ``W`` (symmetric) times a scale, so its
    adjoint is ``conj(W)`` times the same scale: ``ifft`` with the dual norm
    (backward ↔ forward, ortho ↔ ortho); likewise ``ifft``'s adjoint is ``fft``.
  * ``rfft`` keeps the first ``n // 2 + 1`` outputs of the fft of a real input: its
    adjoint zero-pads ``dy`` to ``n`` (``ifft(dy, n)`` does) and takes the real part
    of the ``ifft``.
  * ``irfft`` reads ``x[0]``, and for even ``n`` ``x[n / 2]``, once (their imaginary
    parts are ignored) and every other ``x[j]`` twice, as itself and as the conjugate
    ``x[n - j]`` of the Hermitian spectrum: its adjoint is ``rfft(dy)`` with the dual
    norm, times 2 except at those one or two entries.
  * the adjoint of cutting to ``n`` is zero-padding back, that of zero-padding is
    cutting off.

A real input gets the real part of its gradient.  ``out=`` is a write the runtime
handles; an output array given positionally is refused (TypeError).  Invalid ``n``,
``s``, ``axes`` and ``norm`` fail in the call itself, as in NumPy.  ``fftshift`` is a roll, whose adjoint is ``ifftshift``
(and the other way round).
"""
from __future__ import annotations

from ._frozen import np

from ..runtime.rules import Lazy, nograd, rule
from ._util import active, unbroadcast as ub

fft = np.fft
_DUAL = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _hermitian_weights(n, axis, ndim):
    """How often ``irfft`` of length ``n`` reads each of its ``n // 2 + 1`` inputs, shaped
    to broadcast along ``axis`` of an array with ``ndim`` axes."""
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w.reshape((-1,) + (1,) * (ndim - 1 - axis))


# the 1-D transform → (its adjoint from (dy, n, axis, dual norm), its output length for n)
_STEPS = {
    fft.fft: (lambda d, n, axis, dual: fft.ifft(d, axis=axis, norm=dual), lambda n: n),
    fft.ifft: (lambda d, n, axis, dual: fft.fft(d, axis=axis, norm=dual), lambda n: n),
    fft.rfft: (lambda d, n, axis, dual: fft.ifft(d, n, axis, dual).real, lambda n: n // 2 + 1),
    fft.irfft: (lambda d, n, axis, dual: fft.rfft(d, axis=axis, norm=dual) *
                _hermitian_weights(n, axis, d.ndim), lambda n: n),
}


def _resized(g, axis, m):
    """``g`` cut or zero-padded to length ``m`` along ``axis``."""
    k = g.shape[axis]
    if k > m:
        return g[(slice(None),) * axis + (slice(0, m),)]
    if k < m:
        pad = [(0, 0)] * g.ndim
        pad[axis] = (0, m - k)
        return np.pad(g, pad)
    return g


def _adjoint(a, steps, norm):
    """For running the 1-D transforms ``steps`` (``(transform, n, axis)``, in the order
    NumPy runs them) on ``a``: a function of the output gradient giving the thunk of
    ``a``'s gradient."""
    shape = list(np.shape(a))
    sized = []
    for f, n, axis in steps:  # each step's input length along its axis
        sized.append((f, n, axis, shape[axis]))
        shape[axis] = _STEPS[f][1](n)
    dual = _DUAL[norm]

    def back(d):
        def ga():
            g = np.asarray(d)
            for f, n, axis, m in reversed(sized):
                g = _resized(_STEPS[f][0](g, n, axis, dual), axis, m)
            return ub(a, g)
        return ga
    return back


def _refuse_out(f, a, out):
    """A TypeError for an output array the rule would see (one given positionally: the
    runtime writes the result into one given as ``out=`` itself)."""
    if out is not None and active(a):
        raise TypeError(f"numpy.fft.{f.__name__}: an output array given positionally is not "
                        f"differentiable; pass it as out=, or use the returned array")


def _one_axis(f):
    """The rule of the 1-D transform ``f``."""
    def steps(a, n=None, axis=-1, norm=None, out=None):
        _refuse_out(f, a, out)
        nd = np.ndim(a)
        axis = axis % nd if nd else axis
        if n is None:
            m = np.shape(a)[axis]
            n = 2 * (m - 1) if f is fft.irfft else m
        return [(f, n, axis)], norm
    return _transform(f, steps)


def _axes(a, s, axes, inverse_real):
    """``(s, axes)`` as NumPy's n-D transforms read them (axes non-negative)."""
    shape, nd = np.shape(a), np.ndim(a)
    if axes is None:
        axes = range(nd) if s is None else range(-len(s), 0)
    axes = [ax % nd for ax in axes]
    if s is None:
        s = [shape[ax] for ax in axes]
        if inverse_real:
            s[-1] = 2 * (shape[axes[-1]] - 1)
    s = [shape[ax] if k == -1 else k for k, ax in zip(s, axes)]
    return s, axes


def _n_axes(f, one, default_axes):
    """The rule of the n-D transform ``f``, made of the 1-D ``one`` as NumPy makes it."""
    def steps(a, s=None, axes=default_axes, norm=None, out=None):
        _refuse_out(f, a, out)
        s, axes = _axes(a, s, axes, one is fft.irfft)
        idx = list(range(len(axes)))
        if one is fft.rfft:     # rfft of the last axis, then fft of the others, backwards
            order = [(fft.rfft, idx[-1])] + [(fft.fft, i) for i in reversed(idx[:-1])]
        elif one is fft.irfft:  # ifft of the others, then irfft of the last axis
            order = [(fft.ifft, i) for i in idx[:-1]] + [(fft.irfft, idx[-1])]
        else:                   # one transform along each axis, the last axis first
            order = [(one, i) for i in reversed(idx)]
        return [(g, s[i], axes[i]) for g, i in order], norm
    return _transform(f, steps)


def _transform(f, steps):
    def r(a, *rest, **kw):
        if not active(a):
            return f(a, *rest, **kw), nograd(1 + len(rest))
        plan = steps(a, *rest, **kw)  # (refuses an output array first)
        y = f(a, *rest, **kw)
        thunk = _adjoint(a, *plan)
        nones = (None,) * len(rest)
        return y, lambda d: Lazy(None, thunk(d), *nones)
    return r


def _note(one):
    return ("n/s, axis/axes, every norm; " +
            ("real input" if one is fft.rfft else "real or complex input") +
            "; out= only by keyword")


for _f in (fft.fft, fft.ifft, fft.rfft, fft.irfft):
    rule(_f, note=_note(_f))(_one_axis(_f))
for _f, _one, _default in ((fft.fftn, fft.fft, None), (fft.ifftn, fft.ifft, None),
                           (fft.rfftn, fft.rfft, None), (fft.irfftn, fft.irfft, None),
                           (fft.fft2, fft.fft, (-2, -1)), (fft.ifft2, fft.ifft, (-2, -1)),
                           (fft.rfft2, fft.rfft, (-2, -1)), (fft.irfft2, fft.irfft, (-2, -1))):
    rule(_f, note=_note(_one))(_n_axes(_f, _one, _default))


def _shift_rule(f, inverse):
    def r(x, *rest, **kw):
        axes = rest[0] if rest else kw.get("axes")
        return f(x, *rest, **kw), lambda d: Lazy(None, lambda: ub(x, inverse(np.asarray(d), axes)),
                                                   *(None,) * len(rest))
    return r


rule(fft.fftshift)(_shift_rule(fft.fftshift, fft.ifftshift))
rule(fft.ifftshift)(_shift_rule(fft.ifftshift, fft.fftshift))
