"""The compiled tier: a function's whole gradient as one numba function.

`compiled_value_and_grad(f, argnums, jit)` types ``f`` for the types of a call's
arguments (`transforms.typed`), writes the fused forward and reverse sweeps as Python
source (`transforms.fused`) into a file named by a hash of that source, under the cache
directory (``$BYTEGRAD_CACHE``, else ``~/.cache/bytegrad``), and compiles it with
``numba.njit(cache=True)``: a new process finds numba's compiled code next to it.  The
source holds everything the gradient depends on (the code of ``f`` and of the functions
it calls, the values of the globals it reads), so a changed function or global makes a
new file, never a stale gradient; in one process, each call checks that the globals read
still name what they named.  ``jit=True`` raises `NotCompilableError` for a function the
tier cannot compile; ``jit="auto"`` takes the dynamic tier then.  numba is imported on
the first compiled call, never by ``import bytegrad``.
"""
from __future__ import annotations

import builtins
import hashlib
import importlib.util
import os
import sys
import threading
import types
from pathlib import Path

import numpy as np

from ..transforms.typed import (BOOL, F32, F64, I64, Array, NotCompilableError, ScalarFn, Tuple, infer,
                                is_float, of_value)

_BUILTINS = vars(builtins)
_FUNCS: dict = {}  # callable → ScalarFn (primitives.compiled_scalars fills it)
_SCALAR_TYPES = {float: F64, int: I64, bool: BOOL, np.float64: F64, np.float32: F32,
                 np.int64: I64, np.bool_: BOOL}


def scalar_function(f, spec: ScalarFn):
    """Let the compiled tier call scalar function ``f`` (``math.sin``), as ``spec`` says."""
    _FUNCS[f] = spec


def cache_dir() -> Path:
    base = os.environ.get("BYTEGRAD_CACHE") or \
        os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bytegrad")
    return Path(base) / "compiled"


def signature(args) -> tuple:
    """The types of a call's arguments, as the tier types them."""
    return tuple(_SCALAR_TYPES.get(type(a)) or of_value(a) for a in args)


def _key(args) -> tuple:
    """What decides a call's `signature`, cheaper to compute (a key of the cache)."""
    return tuple([(a.dtype.char, a.ndim) if type(a) is np.ndarray
                  else type(a) if type(a) in _SCALAR_TYPES else of_value(a) for a in args])


class _Entry:
    """A compiled gradient for one signature: the numba function, the globals it read,
    and the numbers of values the last call pushed on its tapes (the next allocates them
    at that size)."""

    def __init__(self, f, args, fused, typed, source, path, sig, wrt):
        self.fused, self.typed, self.source, self.path = fused, typed, source, path
        # (the gradients the dynamic tier gives as None: of ints and bools, and all of them
        # for a function returning an int or bool, piecewise constant)
        self.plain = all(is_float(sig[i - 1]) or isinstance(sig[i - 1], (Array, Tuple)) for i in wrt)
        seen = {}
        for g, name, value in typed.reads:
            seen[(id(g), name)] = (g, name, value, getattr(value, "__code__", None))
        self.valid = _validator(f, args, seen.values())
        self.returns_float = is_float(_return_type(typed))
        self.plain = self.plain and self.returns_float
        self.sizes = (0, 0)  # (the numbers of values the last call pushed on its tapes)

    def __call__(self, args):
        r = self.fused(*args, 1.0, *self.sizes)
        self.sizes = r[-2:]
        return r[0], r[1:-2]


def _validator(f, args, reads):
    """``valid(args)``: whether a call with ``args`` may take the entry made for this one:
    the same types, the function's code and each global read unchanged (a global that
    names a function: its code too), in one generated expression (cheaper than a loop)."""
    env = {"_f": f, "_c": f.__code__, "_nd": np.ndarray, "_b": _BUILTINS}
    terms = [f"len(args) == {len(args)}", "_f.__code__ is _c"]
    for k, a in enumerate(args):
        if type(a) is np.ndarray:
            env[f"_d{k}"] = a.dtype
            terms.append(f"type(args[{k}]) is _nd and args[{k}].dtype is _d{k} and args[{k}].ndim == {a.ndim}")
        elif type(a) is tuple:
            env[f"_t{k}"] = _key(a)
            terms.append(f"type(args[{k}]) is tuple and _key(args[{k}]) == _t{k}")
        else:
            env[f"_t{k}"] = type(a)
            terms.append(f"type(args[{k}]) is _t{k}")
    env["_key"] = _key
    for j, (g, name, was, code) in enumerate(reads):
        env[f"_g{j}"], env[f"_w{j}"] = g, was
        terms.append(f"_g{j}.get({name!r}, _b.get({name!r})) is _w{j}")
        if code is not None:
            env[f"_k{j}"] = code
            terms.append(f"_w{j}.__code__ is _k{j}")
    return eval(f"lambda args: {' and '.join(terms)}", env)


def _return_type(typed):
    for blk in typed.ir.blocks:
        for br in blk.branches:
            if br.kind == "return":
                x = br.args[0]
                return typed.types.get(x) if hasattr(x, "id") else of_value(x)


def build(f, args, wrt) -> _Entry:
    """The compiled gradient of ``f`` for arguments of the types of ``args`` and entry
    positions ``wrt`` (1 is the first argument); `NotCompilableError` when it cannot be."""
    sig = signature(args)
    from ..transforms.fused import source
    typed = infer(f, sig, _FUNCS)
    src = source(typed, wrt, _FUNCS)
    import numba
    key = hashlib.sha256(f"{numba.__version__} {sys.version}\n{src}".encode()).hexdigest()[:24]
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"g{key}.py"
    if not path.exists():
        tmp = d / f".g{key}.{os.getpid()}.{threading.get_ident()}"
        tmp.write_text(f"# the compiled gradient of {f.__qualname__} ({f.__code__.co_filename}:"
                       f"{f.__code__.co_firstlineno}) for {sig}\n" + src)
        os.replace(tmp, path)
    name = f"bytegrad_compiled_{key}"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[name] = mod
    return _Entry(f, args, mod.fused, typed, src, path, sig, wrt)


class Compiled:
    """``value_and_grad`` of ``f`` in the positions ``wanted`` through the compiled tier
    (``jit=True``) or, when ``f`` is not eligible, the dynamic tier (``jit="auto"``)."""

    def __init__(self, f, wanted, jit, dynamic):
        self.f, self.wanted, self.jit, self.dynamic = f, wanted, jit, dynamic
        self.entries = {}  # `_key` of the arguments → _Entry, or the refusal
        self.last = None  # the entry the last call took, when it gives gradients as they are

    def entry(self, args):
        if not isinstance(self.f, types.FunctionType):
            return NotCompilableError(f"{self.f!r}", "<unknown>", None, "the compiled tier takes a "
                                      "Python function (not a method, a class or a callable object)")
        key = _key(args)
        e = self.entries.get(key)
        if e is None or e.__class__ is _Entry and not e.valid(args):
            n = len(args)
            bad = [i for i in self.wanted if not -n <= i < n]
            if bad:
                raise IndexError(f"argument index {bad[0]} (argnums) is out of range for a call "
                                 f"of {self.f.__qualname__} with {n} arguments")
            try:
                e = build(self.f, args, tuple(i % n + 1 for i in self.wanted))
            except NotCompilableError as err:
                e = err
            self.entries[key] = e
        if e.__class__ is _Entry and e.plain:
            self.last = e
        return e

    def __call__(self, args, kw):
        if kw:
            code = getattr(self.f, "__code__", None)
            e = NotCompilableError("keyword arguments", getattr(code, "co_filename", "<unknown>"),
                                   getattr(code, "co_firstlineno", None), "the compiled tier takes positional ones")
        else:
            e = self.entry(args)
        if isinstance(e, NotCompilableError):
            if self.jit == "auto":
                return self.dynamic(args, kw)
            raise e
        y, gs = e(args)
        if not e.returns_float:  # piecewise constant: no gradient
            return _as_returned(y, e), (None,) * len(self.wanted)
        return y, tuple(_as_given(g, args[i]) for g, i in zip(gs, self.wanted))

    def function(self, single, value=True):
        """The function `value_and_grad` (``value``) or `grad` returns: the common case (a
        gradient compiled for such arguments, the globals it read unchanged) in as few
        steps as Python allows, any other by `__call__`."""
        slow = self.__call__

        def vg(*args, **kw):
            e = self.last
            if e is not None and not kw and e.valid(args):
                r = e.fused(*args, 1.0, *e.sizes)
                e.sizes = r[-2:]
                gs = r[1] if single else r[1:-2]
                return (r[0], gs) if value else gs
            y, gs = slow(args, kw)
            gs = gs[0] if single else gs
            return (y, gs) if value else gs
        return vg


def _as_returned(y, e):
    return int(y) if _return_type(e.typed) == I64 else bool(y) if _return_type(e.typed) == BOOL else y


def _as_given(g, a):
    """A gradient the way the dynamic tier gives it: None for an int or bool."""
    if isinstance(a, (bool, int, np.integer, np.bool_)):
        return None
    if isinstance(a, tuple):
        return tuple(_as_given(gi, ai) for gi, ai in zip(g, a))
    return g


def explain(f, *args, argnums=0) -> str:
    """Which tier ``grad(f, argnums, jit="auto")(*args)`` takes, and why."""
    f = getattr(f, "__wrapped__", f)
    wanted = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    try:
        if not isinstance(f, types.FunctionType):
            raise Compiled(f, wanted, True, None).entry(args)
        build(f, args, tuple(i % len(args) + 1 for i in wanted))
    except NotCompilableError as e:
        return f"{f.__qualname__}: the dynamic tier, since {e}"
    sig = ", ".join(map(repr, signature(args)))
    return (f"{f.__qualname__}: the compiled tier (numba), for arguments ({sig}); every "
            f"statement has a compiled derivative")
