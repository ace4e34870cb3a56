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
import itertools
import operator
import os
import re
import sys
import threading
import types
import weakref
from pathlib import Path

import numpy as np

from ..transforms.typed import (BOOL, F32, F64, I64, INT64, Const, NotCompilableError, ScalarFn, Tuple, infer,
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


_TAGS = itertools.count()  # (each key's prefix: ``next`` is atomic, as ``len`` then an insert is not)
# (NumPy's function without its __array_function__ dispatch, which has nothing to do for
# an ndarray, the checks' type: 0.13 µs a call against 0.32)
_EMPTY_LIKE = getattr(np.empty_like, "_implementation", np.empty_like)


def signature(args) -> tuple:
    """The types of a call's arguments, as the tier types them."""
    return tuple(map(of_value, args))


def _key(args) -> tuple:
    """What decides a call's `signature`, cheaper to compute (a key of the cache): each
    array's dtype (equal dtypes are one key, a byte order another) and ndim."""
    return tuple([(a.dtype, a.ndim) if type(a) is np.ndarray
                  else (int, INT64[0] <= a <= INT64[1]) if type(a) is int
                  else type(a) if type(a) in _SCALAR_TYPES else _kind(a) for a in args])


def _kind(a):
    """`of_value`, by type for a value the tier does not take (whose refusal it keys: not by
    the value, or each call of a function given a list would keep one)."""
    t = of_value(a)
    return type(a) if isinstance(t, Const) else t


class _Entry:
    """A compiled gradient for one signature: the numba function, the globals it read, the
    numbers of values the last call pushed on its tapes (the next allocates them at that
    size), and the Python functions around it (see `_callers`)."""

    def __init__(self, f, args, fused, typed, source, path, sig, wrt, tag=""):
        self.fused, self.typed, self.source, self.path, self.tag = fused, typed, source, path, tag
        seen = {}
        for g, name, value in typed.reads:
            seen[(id(g), name)] = (g, name, value, getattr(value, "__code__", None))
        # (a function returning an int or a bool is piecewise constant: its gradients are
        # None, which `Compiled.__call__` gives)
        self.returns_float = is_float(_return_type(typed))
        self.sizes = [0, 0]
        self.written = any(st.fn is operator.setitem for _, _, st in typed.ir.statements())
        self.valid, self.run, self._make = _callers(self, f, args, sig, wrt, seen.values())
        self._codes = weakref.WeakKeyDictionary()  # front → its code for this entry

    def __call__(self, args):
        """``(value, gradients in the order of wrt)``, None for an int or a bool."""
        return self.run(args)

    def code(self, front, form):
        """The code of ``front``, a function `Compiled.function` made for ``form``
        (``(single, value)``), for this entry (see `_front`)."""
        c = self._codes.get(front)
        if c is None:
            c = self._codes[front] = self._make(front.__globals__, *form)
        return c


def _callers(e, f, args, sig, wrt, reads):
    """``(valid, run, make)`` for entry ``e``, each one generated function (a call costs
    what its checks and steps cost, no loop, no dispatch):

    - ``valid(args)``: whether a call with ``args`` may take ``e``: the same types, the
      function's code and each global read unchanged (a global that names a function: its
      code too);
    - ``run(args)``: ``(value, gradients)``: new arrays for the array gradients, which
      ``e.fused`` zeroes and adds into, and the numbers it returns, laid out like the
      arguments in ``wrt`` (None for an int or a bool);
    - ``make(into, single, value)``: the code of a function that `Compiled.function`
      made, the checks of ``valid`` then the steps of ``run`` (see `_front`)."""
    from ..transforms.fused import layout
    n = len(args)
    env = {"_fused": e.fused, "_s": e.sizes, "_f": f, "_c": f.__code__, "_nd": np.ndarray,
           "_b": _BUILTINS, "_key": _key, "_z": _EMPTY_LIKE}
    terms = ["_f.__code__ is _c"]
    for k, a in enumerate(args):
        if type(a) is np.ndarray:
            env[f"_d{k}"] = a.dtype
            terms.append(f"type(a{k}) is _nd and (a{k}.dtype is _d{k} or a{k}.dtype == _d{k}) "
                         f"and a{k}.ndim == {a.ndim}")
        elif type(a) is tuple:
            env[f"_t{k}"] = _key(a)
            terms.append(f"type(a{k}) is tuple and _key(a{k}) == _t{k}")
        else:
            env[f"_t{k}"] = type(a)
            terms.append(f"type(a{k}) is _t{k}" + (f" and {INT64[0]} <= a{k} <= {INT64[1]}"
                                                   if type(a) is int else ""))
    for j, (g, name, was, code) in enumerate(reads):
        env[f"_g{j}"], env[f"_w{j}"] = g, was
        # (a builtin: not shadowed by a global, by ``in``, which costs less than a call of
        # ``get``, and still there)
        terms.append(f"_g{j}.get({name!r}) is _w{j}" if name in g else
                     f"{name!r} not in _g{j} and _b.get({name!r}) is _w{j}")
        if code is not None:  # (a function: its code and its defaults)
            env[f"_k{j}"], env[f"_q{j}"], env[f"_r{j}"] = code, was.__defaults__, was.__kwdefaults__
            terms.append(f"_w{j}.__code__ is _k{j} and _w{j}.__defaults__ is _q{j} and "
                         f"_w{j}.__kwdefaults__ is _r{j}")
    if e.written:  # (element writes: the tapes restore what they overwrote, arguments apart)
        env["_apart"] = _apart
        terms.append(f"_apart(({''.join(f'a{k}, ' for k in range(n))}))")
    unpack = [f"{''.join(f'a{k}, ' for k in range(n))}= args" if n else "pass"]
    lines, arrays, numbers, grads = [], [], [], {}  # (numbers: the locals of those fused returns)
    like = {}  # buffer → the argument it is like

    def grad_of(place, value, how, kind):
        if how == "array":
            # (a new array each call: a pool of those the callers dropped, which must test
            # that the array is as it was handed out, costs as much)
            arrays.append(f"b{len(arrays)}")
            like[arrays[-1]] = value
            lines.append(f"{arrays[-1]} = _z({place}, None, 'C')")
            return arrays[-1]
        if how == "float":
            numbers.append(f"r{len(numbers)}")
            return numbers[-1]
        if how is None:
            return "None"
        return "(" + "".join(grad_of(f"{place}[{k}]", value[k], h, i) + ", " for k, (h, i) in
                             enumerate(zip(how, kind.items))) + ")"
    for p, how in zip(dict.fromkeys(wrt), layout(sig, wrt)):
        grads[p] = grad_of(f"a{p - 1}", args[p - 1], how, sig[p - 1])
    gs = [grads[p] for p in wrt]
    # (the tapes' sizes by items and an unpacking: a starred argument costs 0.1 µs)
    call = (f"y, {''.join(x + ', ' for x in numbers)}_s[0], _s[1] = {{}}({''.join(f'a{k}, ' for k in range(n))}"
            f"1.0, _s[0], _s[1]{''.join(', ' + b for b in arrays)})")
    # (never None: a thread still running the code of this key's previous entry, past its
    # test of the flags, calls whatever the key's ``_ep`` now is, for arguments of its types)
    env["_ep"] = _entry_point(e.fused, args, like.values()) or e.fused
    behaved = [f"a{k}.flags.carray" for k, a in enumerate(args) if type(a) is np.ndarray]
    body = lines + [f"if {' and '.join(behaved) or 'True'}:", "    " + call.format("_ep"), "else:",
                    "    " + call.format("_fused")]
    check = [f"if len(args) != {n}:", "    return False", *unpack, f"if not ({' and '.join(terms)}):",
             "    return False"]
    env = {e.tag + k: v for k, v in env.items()}
    own = re.compile(r"('[^']*'|\"[^\"]*\")|(?<![\w.])(" + "|".join(re.escape(k[len(e.tag):]) for k in env) + r")(?!\w)")
    tagged = lambda line: own.sub(lambda m: m.group(1) or e.tag + m.group(2), line)  # noqa: E731
    check, body, unpack = ([tagged(x) for x in xs] for xs in (check, body, unpack))
    names = list(env)
    src = "\n".join([
        "def valid(args):", *("    " + x for x in check), "    return True",
        "def run(args):", *("    " + x for x in unpack + body),
        f"    return y, ({''.join(g + ', ' for g in gs)})"])
    exec(src, env)
    return env["valid"], env["run"], lambda into, single, value: _front(
        {k: env[k] for k in names}, into, check + body, gs, single, value)


def _apart(args) -> bool:
    """Whether the arrays among ``args`` (their items, for tuples: the tier takes one level)
    are writeable and no two share memory: what a function that writes elements needs."""
    arrays = [a for x in args for a in (x if type(x) is tuple else (x,)) if type(a) is np.ndarray]
    return all(a.flags.writeable for a in arrays) and \
        not any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])


def _entry_point(fused, args, like):
    """numba's compiled entry point of ``fused`` for arguments of the types of ``args``
    (scalars, and arrays that are C-contiguous, aligned and writeable: ``flags.carray``)
    and C-contiguous gradient buffers like the arrays ``like``, or None for other
    arguments.  Calling it skips the dispatcher's typing of every argument (0.17 µs for
    7), which a call may: its scalars' types, its arrays' dtypes and ndims are those the
    checks fix, each int within int64, and its arrays' flags are tested before it.  (The
    types are the signature's, not numba's of the values: numba types an int by its value.)"""
    if not all(type(a) in _SCALAR_TYPES or type(a) is np.ndarray and a.flags.carray for a in args):
        return None
    from numba import types as nt
    from numba.np.numpy_support import from_dtype
    scalar = {F64: nt.float64, F32: nt.float32, I64: nt.int64, BOOL: nt.boolean}
    array = lambda a: nt.Array(from_dtype(a.dtype), a.ndim, "C")  # noqa: E731
    return fused.compile(tuple([array(a) if type(a) is np.ndarray else scalar[_SCALAR_TYPES[type(a)]]
                                for a in args] + [nt.float64, nt.int64, nt.int64] + [array(a) for a in like]))


def _front(env, into, steps, gs, single, value):
    """The code of a function `Compiled.function` made (whose globals are ``into``) for an
    entry: for a call without keywords, ``steps`` (the entry's checks and its call), then
    the return, as ``single`` and ``value`` ask; for any other call (keywords, or one the
    checks do not let through), ``_slow(args, kw)``.  Calling the function runs this code
    alone: no Python call between the user's and numba's (a call costs 0.2 µs).  The
    names ``steps`` reads (``env``'s) go into ``into``; they carry the prefix of the
    entry's key (`Compiled.entry`), so an entry rebuilt for the same key (a global
    rebound) takes its predecessor's names (``into`` does not grow), and a thread still
    running another key's code reads that key's."""
    into.update(env)
    out = gs[0] if single else "(" + "".join(g + ", " for g in gs) + ")"
    src = "\n".join(["def front(*args, **kw):", "    if kw:", "        return _slow(args, kw)",
                     *("    " + x.replace("return False", "return _slow(args, kw)") for x in steps),
                     f"    return {f'y, {out}' if value else out}"])
    scratch: dict = {}  # (not ``into``: another thread may be making code for it)
    exec(src, scratch)
    return scratch["front"].__code__


def _return_type(typed):
    for blk in typed.ir.blocks:
        for br in blk.branches:
            if br.kind == "return":
                x = br.args[0]
                return typed.types.get(x) if hasattr(x, "id") else of_value(x)


def _typed_source(f, args, wrt):
    """``(signature, typed IR, fused source)`` of ``f``'s gradient for arguments of the
    types of ``args`` and entry positions ``wrt`` (1 is the first argument);
    `NotCompilableError` when it cannot be compiled."""
    sig = signature(args)
    for k, t in enumerate(sig):  # (a value it would take as a constant: numba cannot type it)
        items = t.items if isinstance(t, Tuple) else (t,)
        if any(isinstance(i, (Const, Tuple)) for i in items):
            raise NotCompilableError(f"argument {k + 1} of {f.__qualname__} ({t!r})", f.__code__.co_filename,
                                     f.__code__.co_firstlineno, "the tier takes floats, ints, bools, "
                                     "float arrays of 1-3 dimensions and tuples of these, one level deep")
    from ..transforms.fused import source
    typed = infer(f, sig, _FUNCS)
    return sig, typed, source(typed, wrt, _FUNCS)


def build(f, args, wrt, tag="") -> _Entry:
    """The compiled gradient of ``f`` for arguments of the types of ``args`` and entry
    positions ``wrt`` (1 is the first argument); `NotCompilableError` when it cannot be."""
    sig, typed, src = _typed_source(f, args, wrt)
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
        _loads_lightly(mod.fused)
        sys.modules[name] = mod
    return _Entry(f, args, mod.fused, typed, src, path, sig, wrt, tag)


def _loads_lightly(fused):
    """Let numba load ``fused`` from its disk cache without first loading every
    implementation it has for compiling (``refresh``: 0.2 s of a new process's 0.4 s to
    the first gradient, most of it imports, SciPy's among them), which running compiled code
    does not need; it needs the runtime (NRT) alone.  A compile, ours or the user's, still
    refreshes (numba's compiler does, before it types anything).  Where numba's cache
    differs from what this expects, its own path is kept."""
    cache = getattr(fused, "_cache", None)
    needs = ("load_overload", "_load_overload", "_guard_against_spurious_io_errors")
    if not all(hasattr(cache, a) for a in needs):
        return
    from numba.core.runtime import rtsys

    def load_overload(sig, target_context):
        rtsys.initialize(target_context)
        with cache._guard_against_spurious_io_errors():
            return cache._load_overload(sig, target_context)
    cache.load_overload = load_overload


class Compiled:
    """``value_and_grad`` of ``f`` in the positions ``wanted`` through the compiled tier
    (``jit=True``) or, when ``f`` is not eligible, the dynamic tier (``jit="auto"``)."""

    def __init__(self, f, wanted, jit, dynamic):
        self.f, self.wanted, self.jit, self.dynamic = f, wanted, jit, dynamic
        self.entries = {}  # `_key` of the arguments → _Entry, or the refusal
        self.tags = {}  # `_key` → the prefix of its entries' names in the fronts' globals
        self.fronts = weakref.WeakKeyDictionary()  # a function `function` made → its form

    def entry(self, args):
        if not isinstance(self.f, types.FunctionType):
            return NotCompilableError(f"{self.f!r}", "<unknown>", None, "the compiled tier takes a "
                                      "Python function (not a method, a class or a callable object)")
        key = _key(args)
        e = self.entries.get(key)
        # (before `valid`, whose checks include this: a refused call must not rebuild)
        if e.__class__ is _Entry and e.written and not _apart(args):
            return self._unapart()
        if e is None or e.__class__ is _Entry and not e.valid(args):
            n = len(args)
            bad = [i for i in self.wanted if not -n <= i < n]
            if bad:
                raise IndexError(f"argument index {bad[0]} (argnums) is out of range for a call "
                                 f"of {self.f.__qualname__} with {n} arguments")
            try:
                e = build(self.f, args, tuple(i % n + 1 for i in self.wanted),
                          self.tags.setdefault(key, f"_{next(_TAGS)}"))
            except NotCompilableError as err:
                e = err
            self.entries[key] = e
            if e.__class__ is _Entry and e.written and not _apart(args):
                return self._unapart()
        if e.__class__ is _Entry and e.returns_float:
            for front, form in list(self.fronts.items()):
                front.__code__ = e.code(front, form)
        return e

    def _unapart(self):
        code = self.f.__code__
        return NotCompilableError("read-only arrays or arrays that share memory", code.co_filename,
                                  code.co_firstlineno, "the function writes elements of arrays, and the "
                                  "tier's tape restores what it overwrote as if no argument were another's view")

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
        return y, gs

    def function(self, single, value=True):
        """The function `value_and_grad` (``value``) or `grad` returns.  Until a call, it
        calls `__call__`; from then on, its code is that of the entry the last call took
        (`_front`): the common case (arguments of the types of the last call's, the globals
        it read unchanged) runs that code alone, any other `__call__`."""
        def slow(args, kw):
            y, gs = self(args, kw)
            gs = gs[0] if single else gs
            return (y, gs) if value else gs
        env = {"_slow": slow}
        exec("def vg(*args, **kw):\n    return _slow(args, kw)", env)
        self.fronts[env["vg"]] = (single, value)
        return env["vg"]


def _as_returned(y, e):
    return int(y) if _return_type(e.typed) == I64 else bool(y) if _return_type(e.typed) == BOOL else y


def explain(f, *args, argnums=0) -> str:
    """Which tier ``grad(f, argnums, jit="auto")(*args)`` takes, and why."""
    f = getattr(f, "__wrapped__", f)
    wanted = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    try:
        if not isinstance(f, types.FunctionType):
            raise Compiled(f, wanted, True, None).entry(args)
        _typed_source(f, args, tuple(i % len(args) + 1 for i in wanted))
    except NotCompilableError as e:
        return f"{f.__qualname__}: the dynamic tier, since {e}"
    sig = ", ".join(map(repr, signature(args)))
    return (f"{f.__qualname__}: the compiled tier (numba), for arguments ({sig}); every "
            f"statement has a compiled derivative")
