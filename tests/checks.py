"""Shared checks: gradients and tangents against central finite differences."""
from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import types

import numpy as np
import pytest

import bytegrad


def fd_gradient(f, args, i, h=1e-6):
    """Central finite difference of scalar ``f`` in positional argument ``i``
    (a float, complex or float array); complex per the Zygote convention.  Each
    evaluation gets deep copies of the arguments: ``f`` may change them."""
    x = args[i]

    def at(xi):
        a = copy.deepcopy(list(args))
        a[i] = xi
        return f(*a)

    if isinstance(x, np.ndarray):
        g = np.zeros(x.shape, dtype=np.result_type(x.dtype, float))
        for idx in np.ndindex(*x.shape):
            e = np.zeros_like(x, dtype=g.dtype)
            e[idx] = h
            g[idx] = (at(x + e) - at(x - e)) / (2 * h)
            if np.iscomplexobj(x):
                g[idx] += 1j * (at(x + 1j * e) - at(x - 1j * e)) / (2 * h)
        return g
    d = (at(x + h) - at(x - h)) / (2 * h)
    if isinstance(x, complex):
        d += 1j * (at(x + 1j * h) - at(x - 1j * h)) / (2 * h)
    return d


def fd_hessian(f, x, h=1e-6, **kw):
    """The Hessian of ``f`` at the 1-d array ``x``: central differences of its gradient
    (``bytegrad.grad(f, **kw)``, first-order reverse mode), column by column."""
    g = bytegrad.grad(f, **kw)
    return np.stack([(np.asarray(g(x + h * e)) - np.asarray(g(x - h * e))) / (2 * h)
                     for e in np.eye(len(x))], axis=-1)


def check_grad(f, *args, rtol=1e-5, atol=1e-6, h=1e-6):
    """Assert that bytegrad's gradient of ``f`` matches finite differences in every
    float/complex/array argument, that ``f``'s value is unchanged, and that the
    arguments are left unmodified.  Returns the gradients."""
    before = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    y, grads = bytegrad.value_and_gradient(f, *args)
    assert np.allclose(y, f(*args), rtol=1e-12, atol=0, equal_nan=True)
    for a, b in zip(args, before):
        assert np.array_equal(a, b), "an argument was modified"
    for i, (a, g) in enumerate(zip(args, grads)):
        if isinstance(a, bool) or isinstance(a, int):
            assert g is None, f"argument {i} is an int but got gradient {g!r}"
            continue
        expected = fd_gradient(f, args, i, h)
        got = 0.0 if g is None else g
        assert np.allclose(got, expected, rtol=rtol, atol=atol), \
            f"argument {i}: bytegrad {got!r} vs finite differences {expected!r}"
    return grads


def arr(shape, dtype=np.float64, seed=0):
    """A random array (complex for complex dtypes), the same for the same seed."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def rnd(shape, seed, scale=1.0, dtype=np.float64):
    """A random normal array times ``scale`` (real dtypes), the same for the same seed."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def same_contents(a, b) -> bool:
    """Deep equality of what two calls leave in their arguments: arrays (dtype and
    values), lists, tuples, dicts (keys in order) and user objects (their fields)."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same_contents, a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(same_contents(a[k], b[k]) for k in a)
    if _is_object(a):
        return type(a) is type(b) and same_contents(vars(a), vars(b))
    return a == b


# -- finite differences inside nested structures, for functions that change their arguments

def _is_object(x):
    """A user object whose fields (``vars``) are its differentiable parts."""
    return hasattr(x, "__dict__") and not isinstance(
        x, (type, types.FunctionType, types.MethodType, types.ModuleType, functools.partial))


def _leaves(x, path=()):
    """The path of every float inside ``x``; an array element's last step is its index tuple."""
    if x is None or isinstance(x, (bool, int, np.integer, np.bool_, str)):
        return
    if isinstance(x, (float, np.floating)):
        yield path
    elif isinstance(x, np.ndarray):
        if x.dtype.kind == "f":
            for idx in np.ndindex(*x.shape):
                yield path + (idx,)
    elif isinstance(x, (list, tuple)):
        for k, v in enumerate(x):
            yield from _leaves(v, path + (k,))
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, path + (k,))
    elif _is_object(x):
        for k, v in vars(x).items():
            yield from _leaves(v, path + (k,))


def _bump(x, path, h):
    """``x`` with ``h`` added to the float at ``path`` (in place where ``x`` is mutable;
    tuples, named tuples and frozen dataclasses included)."""
    if not path:
        return x + h
    k, rest = path[0], path[1:]
    if isinstance(x, np.ndarray):
        x[k] += h
        return x
    if isinstance(x, tuple):
        items = list(x)
        items[k] = _bump(x[k], rest, h)
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    if isinstance(x, (list, dict)):
        x[k] = _bump(x[k], rest, h)
        return x
    object.__setattr__(x, k, _bump(getattr(x, k), rest, h))
    return x


def _grad_at(g, path):
    """The entry of gradient ``g`` at ``path``; None and missing dict keys are zero."""
    for k in path:
        if g is None or (isinstance(g, dict) and k not in g):
            return 0.0
        g = g[k]
    return 0.0 if g is None else g


def _fd(phi, args, i, path, h, v=1.0):
    """Central difference of ``phi`` along ``v`` added at ``path`` inside argument ``i``
    (a float's path, or an array's with ``v`` an array), on deep copies."""
    def at(d):
        a = list(copy.deepcopy(args))
        a[i] = _bump(a[i], path, d * v)
        return phi(*a)
    return (at(h) - at(-h)) / (2 * h)


def check_direction(f, args, grads, path, n=2, h=1e-5, rtol=1e-5, atol=1e-7, seed=0):
    """``<gradient, v>`` against central finite differences of ``f`` along ``n`` random
    directions ``v`` of the float or array at ``path`` (an argument's index, then keys,
    list indices or attributes): for arguments too big to check entry by entry."""
    i, rest = path[0], tuple(path[1:])
    x = args[i]
    for k in rest:
        x = x[k] if isinstance(x, (dict, list, tuple)) else getattr(x, k)
    g = np.asarray(_grad_at(grads[i], rest), dtype=np.float64)
    for s in range(n):
        v = np.random.default_rng(1000 + 17 * s + seed).standard_normal(np.shape(x))
        if isinstance(x, np.ndarray):
            v = v.astype(x.dtype)
        expected = _fd(f, args, i, rest, h, v)
        got = float(np.sum(g * v))
        assert np.isclose(got, expected, rtol=rtol, atol=atol), (path, got, expected)


def _compare(grads, orig, phi, rtol, atol, h):
    assert len(grads) == len(orig)
    for i, a in enumerate(orig):
        if isinstance(a, (bool, int)):
            assert grads[i] is None, f"argument {i} is an int but got gradient {grads[i]!r}"
        if isinstance(a, (list, tuple)) and grads[i] is not None:  # a list for a list
            kind = list if isinstance(a, list) else tuple
            assert isinstance(grads[i], kind) and len(grads[i]) == len(a), \
                f"argument {i}: gradient {grads[i]!r} does not mirror {a!r}"
        if (isinstance(a, dict) or _is_object(a)) and grads[i] is not None:
            assert isinstance(grads[i], dict), f"argument {i}: gradient {grads[i]!r} is no dict"
        for p in _leaves(a):
            expected = _fd(phi, orig, i, p, h)
            got = _grad_at(grads[i], p)
            assert np.allclose(got, expected, rtol=rtol, atol=atol), \
                f"argument {i} at {p}: bytegrad {got!r} vs finite differences {expected!r}"


def check_stateful(f, *args, rtol=1e-5, atol=1e-6, h=1e-6):
    """``gradient(f, *args)`` against finite differences in every float inside every
    argument; the value equals a plain call's, and afterwards the arguments hold what a
    plain call on a deep copy leaves in them.  Returns the gradients."""
    orig = copy.deepcopy(args)
    plain = copy.deepcopy(args)
    y0 = f(*plain)
    y, grads = bytegrad.value_and_gradient(f, *args)
    assert np.allclose(y, y0, rtol=1e-12, atol=1e-12), (y, y0)
    for i, (a, b) in enumerate(zip(args, plain)):
        assert same_contents(a, b), f"argument {i} left as {a!r}; a plain call leaves {b!r}"
    _compare(grads, orig, f, rtol, atol, h)
    return grads


def _vdot(seed, y):
    """<seed, y> for nested outputs; None in the seed is zero."""
    if seed is None:
        return 0.0
    if isinstance(y, np.ndarray):
        return float(np.sum(seed * y))
    if isinstance(y, (list, tuple)):
        return sum(_vdot(s, v) for s, v in zip(seed, y))
    if isinstance(y, dict):
        return sum(_vdot(seed[k], y[k]) for k in seed)
    return float(seed * y)


def check_pullback(f, seed, *args, rtol=1e-5, atol=1e-6, h=1e-6):
    """``pullback(f, *args)[1](seed)`` against finite differences of <seed, f(args)>;
    the output equals a plain call's and the arguments end as a plain call leaves them,
    also after ``back`` runs a second time."""
    orig = copy.deepcopy(args)
    plain = copy.deepcopy(args)
    y0 = f(*plain)
    y, back = bytegrad.pullback(f, *args)
    assert same_contents(y, y0)
    g = back(seed)
    for a, b in zip(args, plain):
        assert same_contents(a, b), f"argument left as {a!r}; a plain call leaves {b!r}"
    _compare(g, orig, lambda *a: _vdot(seed, f(*a)), rtol, atol, h)
    g2 = back(seed)
    for a, b in zip(args, plain):
        assert same_contents(a, b)
    for i, a in enumerate(orig):
        for p in _leaves(a):
            assert np.allclose(_grad_at(g2[i], p), _grad_at(g[i], p), rtol=1e-12, atol=0)
    return g


def arrays_in(g, path=()):
    """``(path, array)`` for every array inside ``g`` (tuples, lists, dicts)."""
    if isinstance(g, np.ndarray):
        yield path, g
    elif isinstance(g, dict):
        for k, v in g.items():
            yield from arrays_in(v, path + (k,))
    elif isinstance(g, (list, tuple)):
        for k, v in enumerate(g):
            yield from arrays_in(v, path + (k,))


def shared_memory(gs, args=()):
    """Pairs of paths of the arrays in gradients ``gs`` that share memory with each other
    (or, as ``(path, "arg")``, with an array in ``args``): a caller changing one in place
    would change the other."""
    arrs = list(arrays_in(tuple(gs)))
    out = [(p, q) for i, (p, a) in enumerate(arrs) for q, b in arrs[i + 1:]
           if np.shares_memory(a, b)]
    return out + [(p, "arg") for p, a in arrs for _, b in arrays_in(tuple(args))
                  if np.shares_memory(a, b)]


def in_threads(work, n, rounds, switch=1e-5):
    """``rounds`` times, ``work(k, barrier)`` in ``n`` threads started together, with
    Python switching threads every ``switch`` seconds (so they interleave finely)."""
    import sys
    import threading
    old = sys.getswitchinterval()
    sys.setswitchinterval(switch)
    try:
        for _ in range(rounds):
            bar = threading.Barrier(n)
            ts = [threading.Thread(target=work, args=(k, bar)) for k in range(n)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
    finally:
        sys.setswitchinterval(old)


# Small structured argument types shared by several test files.
NT = collections.namedtuple("NT", "a b")


@dataclasses.dataclass
class DC:
    w: np.ndarray
    b: float = 0.0


def readme_blocks(section):
    """The Python code blocks of the README's section titled ``section``."""
    import pathlib
    import re
    readme = (pathlib.Path(bytegrad.__file__).parent / "README.md").read_text()
    start = readme.index(f"\n## {section}\n")
    end = readme.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", readme[start:end if end > 0 else None], re.S)


def fd_directional(f, args, vs, h=1e-6):
    """``(f(args + h v) - f(args - h v)) / 2h`` (arguments copied: ``f`` may change them)."""
    def at(s):
        return f(*[copy.deepcopy(a) if v is None else a + s * h * v for a, v in zip(args, vs)])
    return (np.asarray(at(1)) - np.asarray(at(-1))) / (2 * h)


def check_jvp(f, *args, rtol=1e-5, atol=1e-7, seed=0):
    """``jvp(f)`` along random directions against finite differences, and against the
    reverse-mode gradient for a scalar ``f``; the arguments stay as the plain call
    leaves them."""
    rng = np.random.default_rng(seed)
    vs = [None if isinstance(a, int) else rng.standard_normal(np.shape(a)) if isinstance(a, np.ndarray)
          else float(rng.standard_normal()) for a in args]
    plain = copy.deepcopy(args)
    y0 = f(*plain)
    mine = copy.deepcopy(args)
    y, dy = bytegrad.jvp(f, mine, vs)
    np.testing.assert_allclose(y, y0, rtol=1e-12)
    for a, b in zip(mine, plain):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(dy, fd_directional(f, args, vs), rtol=rtol, atol=atol)
    if np.ndim(y) == 0 and isinstance(y, (float, np.floating)):
        g = bytegrad.gradient(f, *copy.deepcopy(args))
        back = sum(float(np.sum(gi * vi)) for gi, vi in zip(g, vs) if gi is not None and vi is not None)
        assert dy == pytest.approx(back, rel=1e-9, abs=1e-12)
    return dy
