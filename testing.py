"""`check_rule`: the one checker every rule is tested with, public so users can
test their own rules the same way.

It checks, for ``f(*args, **kw)``:
  * the value bytegrad computes equals the plain call's (value, shape, dtype);
  * the pullback passes the dot-product test: for a random output direction ``u``
    and random input directions ``v``, ``<back(u)_i, v_i>`` equals the central finite
    difference of ``<u, f>`` along ``v_i`` (at several step sizes; one must agree);
  * calling the pullback twice gives the same gradients;
  * the arguments are unchanged afterwards;
  * each gradient has its argument's shape and (floating) dtype; integer and
    boolean arguments get None;
  * when ``f`` has a forward rule (`bytegrad.frule`): its value equals the plain
    call's, its tangent along random directions ``v`` (all arguments at once) matches
    the central finite difference of ``<u, f>``, and ``<u, J v>`` equals
    ``sum_i <back(u)_i, v_i>`` (the forward and reverse rules agree), with the
    arguments and the directions unchanged.
Complex numbers follow the Zygote convention: the gradient of a real function of
``z = x + iy`` is ``∂f/∂x + i ∂f/∂y``, so directional derivatives are ``Re <g, v>``.
"""
from __future__ import annotations

import copy

import numpy as np

from .runtime import tangents
from .runtime.api import pullback
from .runtime.frules import frule_for
from .runtime.jvp import jvp_call

STEPS = (1e-3, 1e-4, 1e-5, 1e-6)


def _is_float(x):
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    return isinstance(x, (float, complex, np.floating, np.complexfloating))


def _random_like(x, rng):
    """A random direction shaped like ``x`` (a structure of floats/arrays); None elsewhere."""
    if isinstance(x, (tuple, list)):  # named tuples' directions are plain tuples
        items = [_random_like(xi, rng) for xi in x]
        return items if isinstance(x, list) else tuple(items)
    if not _is_float(x):
        return None
    a = np.asarray(x)
    r = rng.standard_normal(a.shape)
    if a.dtype.kind == "c":
        r = r + 1j * rng.standard_normal(a.shape)
    if isinstance(x, np.ndarray):
        return r.astype(a.dtype)
    return type(x)(r) if not isinstance(x, np.generic) else a.dtype.type(r)


def _leaves(x):
    if isinstance(x, (tuple, list)):
        for xi in x:
            yield from _leaves(xi)
    else:
        yield x


def _inner(g, v):
    """``Re <g, v>`` over matching structures; None counts as zero."""
    if g is None or v is None:
        return 0.0
    if isinstance(v, (tuple, list)):
        return sum(_inner(gi, vi) for gi, vi in zip(g, v))
    return float(np.real(np.sum(np.conj(np.asarray(g)) * np.asarray(v))))


def _shift(x, v, h):
    if v is None:
        return x
    if isinstance(x, (tuple, list)):
        return type(x)(_shift(xi, vi, h) for xi, vi in zip(x, v))
    y = np.asarray(x) + h * np.asarray(v)
    if isinstance(x, np.ndarray):
        return y.astype(x.dtype)
    return type(x)(y) if not isinstance(x, np.generic) else x.dtype.type(y)


def _same(a, b, rtol):
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a2, b2 = np.asarray(a), np.asarray(b)
        return a2.shape == b2.shape and a2.dtype == b2.dtype and \
            np.allclose(a2, b2, rtol=rtol, atol=0, equal_nan=True)
    return np.allclose(a, b, rtol=rtol, atol=0, equal_nan=True)


def _check_shape(i, x, g):
    if isinstance(x, (tuple, list)):
        if g is not None:
            for xi, gi in zip(x, g):
                _check_shape(i, xi, gi)
        return
    if isinstance(x, np.ndarray) and x.dtype.kind not in "fc":
        assert g is None, f"argument {i}: an {x.dtype} array got gradient {g!r}"
        return
    if isinstance(x, (bool, int, np.integer, np.bool_)):
        assert g is None, f"argument {i}: an int got gradient {g!r}"
        return
    if g is not None and isinstance(x, np.ndarray):
        g = np.asarray(g)
        assert g.shape == x.shape, f"argument {i}: gradient shape {g.shape} != {x.shape}"
        assert g.dtype == x.dtype, f"argument {i}: gradient dtype {g.dtype} != {x.dtype}"


def check_rule(f, *args, kw=None, rtol=1e-5, atol=1e-7, seed=0, steps=STEPS):
    """Check bytegrad's derivative of ``f(*args, **kw)`` as described in the module
    docstring; raise AssertionError naming what failed.  Returns the gradients."""
    kw = kw or {}
    rng = np.random.default_rng(seed)
    before = copy.deepcopy(args)
    y = f(*args, **kw)
    if any(np.asarray(a).dtype in (np.float32, np.complex64)
           for a in _leaves((args, y)) if _is_float(a)):
        rtol, atol, steps = max(rtol, 3e-3), max(atol, 1e-3), (1e-2, 3e-3, 1e-3)  # single precision
    y2, back = pullback(f, *args, **kw)
    assert _same(y2, y, 1e-12), f"value {y2!r} differs from the plain call's {y!r}"
    u = _random_like(y, rng)
    grads = back(u)
    again = back(u)
    for i, (g, g2) in enumerate(zip(grads, again)):
        assert (g is None) == (g2 is None) and (g is None or _same(g, g2, 1e-12)), \
            f"argument {i}: a second call of the pullback gave {g2!r}, the first {g!r}"
    for i, (a, b) in enumerate(zip(args, before)):
        assert _same(a, b, 0) if _is_float(a) or isinstance(a, (np.ndarray, tuple, list)) else a == b, \
            f"argument {i} was modified"
    for i, (x, g) in enumerate(zip(args, grads)):
        _check_shape(i, x, g)
        v = _random_like(x, rng)
        if v is None or (isinstance(v, (tuple, list)) and all(e is None for e in v)):
            continue
        predicted = _inner(g, v)
        errors = []
        for h in steps:
            up = list(args)
            up[i] = _shift(x, v, h)
            down = list(args)
            down[i] = _shift(x, v, -h)
            fd = (_inner(u, f(*up, **kw)) - _inner(u, f(*down, **kw))) / (2 * h)
            if abs(fd - predicted) <= atol + rtol * max(abs(fd), abs(predicted)):
                break
            errors.append(f"h={h:g}: finite difference {fd!r}")
        else:
            raise AssertionError(f"argument {i}: pullback gives {predicted!r} along a random "
                                 f"direction, but " + "; ".join(errors))
    if frule_for(f) is not None:
        _check_frule(f, args, kw, y, u, grads, rng, rtol, atol, steps)
    return grads


def _check_frule(f, args, kw, y, u, grads, rng, rtol, atol, steps):
    """The forward rule of ``f`` against central differences and against the pullback's
    gradients ``grads`` for the output direction ``u`` (see the module docstring)."""
    vs = tuple(_random_like(x, rng) for x in args)
    kept = copy.deepcopy((args, vs))
    with tangents.fresh():
        y2, dy = jvp_call(f, None, vs, *args, **kw)
    assert _same(y2, y, 1e-12), f"forward rule: value {y2!r} differs from the plain call's {y!r}"
    assert all(_same(a, b, 0) for a, b in zip(_leaves((args, vs)), _leaves(kept)) if _is_float(a)), \
        "forward rule: it changed an argument or a tangent"
    if dy is not None and isinstance(y, np.ndarray):
        assert np.shape(dy) == y.shape, f"forward rule: tangent shape {np.shape(dy)} != {y.shape}"
    jv = _inner(u, dy)
    back = sum(_inner(g, v) for g, v in zip(grads, vs))
    assert abs(jv - back) <= atol + rtol * max(abs(jv), abs(back), 1.0), \
        f"forward rule gives <u, J v> = {jv!r}, the reverse rule <J^T u, v> = {back!r}"
    errors = []
    for h in steps:
        up = [_shift(x, v, h) for x, v in zip(args, vs)]
        down = [_shift(x, v, -h) for x, v in zip(args, vs)]
        fd = (_inner(u, f(*up, **kw)) - _inner(u, f(*down, **kw))) / (2 * h)
        if abs(fd - jv) <= atol + rtol * max(abs(fd), abs(jv)):
            return
        errors.append(f"h={h:g}: finite difference {fd!r}")
    raise AssertionError(f"forward rule gives {jv!r} along random directions, but " + "; ".join(errors))
