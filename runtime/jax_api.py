"""The functions JAX users reach for: `jvp`, `vjp`, `jacfwd`, `jacrev`, `jacobian`
(`hessian` and `hvp` are in runtime/hessian.py).

Arguments and results may be pytrees: tuples, lists and dicts (nested) of numbers
and arrays.  A Jacobian has, for each leaf of the output, the input's structure, each
leaf of which is an array of shape ``out_leaf.shape + in_leaf.shape`` (JAX's layout):
``jacrev(f)(x)`` for ``x`` of shape (n,) and ``f(x)`` of shape (m,) is (m, n).
"""
from __future__ import annotations

import copy
import functools
import operator
import types
from typing import Any, Callable, Sequence

import numpy as np

from ..ir.ir import full_name
from . import batching, shadow, tangents as shadows
from .algebra import accum
from .api import _callable, pullback, pullback_at
from .computing import computing
from .jvp import VARIANTS, compiled_tangent, jvp_call

_COMPUTING = computing()


def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """``(f(*primals), J tangents)``: the value and the directional derivative of ``f``
    along ``tangents`` (one per positional argument, structured like it; None is zero),
    computed in one forward pass of ``f``'s tangent code.  The tangent of a float or
    array result is a number or array (zero where nothing reached it); of an integer,
    None."""
    _callable(f)
    # (a reverse rule a derived forward rule calls records into a shadow of its own)
    with _COMPUTING, shadow.fresh():
        return checked_jvp(f, primals, tangents)


def checked_jvp(f, primals, tangents):
    """`jvp` after its check of ``f``: what a nested `jvp` runs lifted by the outer
    level (see runtime/nesting.py).  The computation has a shadow of its own, also
    inside another one (`tangents.isolated_at`)."""
    primals, tangents = _pairs(primals, tangents)
    with shadows.isolated_at(0, shadows.TangentShadow()) as sh:
        y, dy = jvp_call(*((f, None, tangents) + primals))  # (see runtime/nesting.py)
        dy = sh.refresh(y, dy)
    return y, _dense(dy, y, _held(primals, tangents))


def _pairs(primals, tangents):
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp(f, primals, tangents) takes primals and tangents as tuples, one entry "
                        f"per positional argument of f: jvp(f, (x,), (dx,)), not jvp(f, "
                        f"{type(primals).__name__}, {type(tangents).__name__})")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp got {len(primals)} primals and {len(tangents)} tangents: give one "
                         f"tangent per primal (None for a zero tangent)")
    return tuple(primals), tuple([_checked(p, t, f"tangents[{i}]") for i, (p, t) in
                                  enumerate(zip(primals, tangents))])  # (a list: forward mode lifts it nested)


def _checked(p, t, where):
    """``t`` as the tangent of ``p`` (lists of numbers for an array become an array); an
    error naming ``where`` if it does not fit."""
    if t is None:
        return None
    if isinstance(p, np.ndarray):
        if p.dtype.kind not in "fc":
            return _no_tangent(t, where, p)
        t = np.asarray(t)
        if t.shape != p.shape:
            raise ValueError(f"{where} has shape {t.shape} but its primal has shape {p.shape}")
        return t if np.iscomplexobj(t) or p.dtype.kind == "c" else t.astype(p.dtype, copy=False)
    if isinstance(p, (bool, int, np.integer, np.bool_, str)):
        return _no_tangent(t, where, p)
    if isinstance(p, (float, complex, np.inexact)):
        if np.ndim(t) != 0:
            raise ValueError(f"{where} has shape {np.shape(t)} but its primal is a number")
        return t
    if isinstance(p, (tuple, list)):
        if not isinstance(t, (tuple, list)) or len(t) != len(p):
            raise ValueError(f"{where} must be a tuple or list of {len(p)} tangents, like its primal")
        items = [_checked(a, b, f"{where}[{i}]") for i, (a, b) in enumerate(zip(p, t))]
        return tuple(items) if isinstance(t, tuple) else items  # (a named tuple's fields in order)
    if isinstance(p, dict):
        if not isinstance(t, dict) or not t.keys() <= p.keys():
            raise ValueError(f"{where} must be a dict with keys among its primal's {list(p)}")
        return {k: _checked(p[k], v, f"{where}[{k!r}]") for k, v in t.items()}
    if isinstance(t, dict) and hasattr(p, "__dict__"):  # an object: the tangents of its fields
        return {k: _checked(getattr(p, k), v, f"{where}.{k}") for k, v in t.items()}
    raise TypeError(f"{where}: a tangent of a {type(p).__name__} must be None, or a dict of "
                    f"tangents of its fields")


def _no_tangent(t, where, p):
    if np.all(np.asarray(t) == 0):
        return None
    raise TypeError(f"{where}: its primal {type(p).__name__} is not differentiable (integers, "
                    f"booleans, strings); pass None as its tangent")


def _held(*trees):
    """The ids of the arrays (and their roots) the caller holds."""
    out = set()
    for leaf in _leaves(trees):
        if isinstance(leaf, np.ndarray):
            out.add(id(leaf))
            if isinstance(leaf.base, np.ndarray):
                out.add(id(leaf.base))
    return out


def _dense(dy, y, held):
    """The tangent ``dy`` of ``y`` with zero tangents of floats and arrays materialised and
    every array the caller's to change: not one of ``held``, writable."""
    if isinstance(y, (tuple, list)):
        ds = dy if isinstance(dy, (tuple, list)) else (None,) * len(y)
        out = [_dense(d, v, held) for d, v in zip(ds, y)]
        return out if type(y) is list else type(y)(*out) if hasattr(y, "_fields") else tuple(out)
    if isinstance(y, dict):
        dd = dy if isinstance(dy, dict) else {}
        return {k: _dense(dd.get(k), v, held) for k, v in y.items()}
    if dy is None:
        if isinstance(y, np.ndarray):
            return np.zeros(y.shape, y.dtype) if y.dtype.kind in "fc" else None
        return type(y)(0) if isinstance(y, (float, complex, np.inexact)) else None
    if isinstance(dy, np.ndarray):
        if isinstance(y, np.ndarray) and dy.shape != y.shape:
            dy = np.broadcast_to(dy, y.shape)
        base = dy.base if isinstance(dy.base, np.ndarray) else dy
        if id(dy) in held or id(base) in held or not dy.flags.writeable or dy.base is not None:
            return np.array(dy)
    return dy


# -- pytrees --------------------------------------------------------------------------

def _leaves(x):
    if isinstance(x, (tuple, list)):
        for v in x:
            yield from _leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    else:
        yield x


def _rebuild(like, leaves):
    """A tree shaped like ``like`` with ``leaves`` (an iterator) in its leaves' places."""
    if isinstance(like, (tuple, list)):
        out = [_rebuild(v, leaves) for v in like]
        return out if type(like) is list else type(like)(*out) if hasattr(like, "_fields") else tuple(out)
    if isinstance(like, dict):
        return {k: _rebuild(v, leaves) for k, v in like.items()}
    return next(leaves)


def _float_leaf(x, what):
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc" or isinstance(x, (float, complex, np.inexact)):
        return np.asarray(x)
    raise TypeError(f"{what} needs float inputs and outputs (numbers or float arrays, in tuples, "
                    f"lists or dicts), got a {type(x).__name__}")


def _argnums(argnums, n):
    single = isinstance(argnums, (int, np.integer))
    nums = (operator.index(argnums),) if single else tuple(map(operator.index, argnums))
    bad = [i for i in nums if not -n <= i < n]
    if bad:
        raise IndexError(f"argnums {bad[0]} is out of range for a call with {n} positional arguments")
    return single, tuple(i % n for i in nums)


def _jacobian(ins, outs):
    """Empty Jacobian blocks, one per output leaf and input leaf, laid out as JAX does."""
    return [[np.empty(o.shape + i.shape, np.result_type(o, i, float)) for i in ins] for o in outs]


def _inputs(args, argnums, what):
    """``(single, nums, x, leaves)``: the arguments differentiated, as one value or a
    tuple (its containers copied: the Jacobian is laid out as they were given, if the
    function changes them), and their leaves as arrays."""
    single, nums = _argnums(argnums, len(args))
    x = _skeleton(args[nums[0]] if single else tuple(args[i] for i in nums))
    return single, nums, x, [_float_leaf(v, what) for v in _leaves(x)]


def _copied(args):
    """A deep copy of ``args``, or None where one cannot be made (a lock, a module): then
    the call is taken to change nothing in them.  An object with no fields (a sentinel
    ``object()``) is itself in the copy: nothing in it can change, and `_same` tells it
    from another only by identity."""
    memo = {}
    _atoms(args, memo, 100)
    try:
        return copy.deepcopy(args, memo)
    except Exception:  # (copy raises what the object's reduction raises: TypeError, mostly)
        return None


def _atoms(x, memo, depth):
    """Puts into deepcopy's ``memo`` the objects inside ``x`` (its tuples, lists and dicts)
    that have no fields, as themselves."""
    if isinstance(x, (tuple, list)) and depth:
        for v in x:
            _atoms(v, memo, depth - 1)
    elif isinstance(x, dict) and depth:
        for v in x.values():
            _atoms(v, memo, depth - 1)
    elif type(x) is object:
        memo[id(x)] = x


def _restorer(x, met, depth=100):
    """A function putting back into ``x``'s arrays, lists, dicts and objects' fields
    (nested, down to ``depth``) what they hold now, in place."""
    if id(x) in met or not depth:
        return lambda: None
    met.add(id(x))
    if type(x) is np.ndarray:
        if not x.flags.writeable or x.dtype.hasobject:
            return lambda: None
        saved = x.copy()
        return lambda: np.copyto(x, saved)
    if type(x) is list or type(x) is dict:
        items = x.copy()
        inner = [_restorer(v, met, depth - 1) for v in (items.values() if type(x) is dict else items)]
    elif isinstance(x, tuple):
        items, inner = None, [_restorer(v, met, depth - 1) for v in x]
    elif isinstance(x, (type, types.ModuleType, types.FunctionType)):
        return lambda: None
    else:
        return _fields_restorer(x, met, depth)

    def restore():
        if items is not None:
            x.clear()
            x.update(items) if type(x) is dict else x.extend(items)
        for r in inner:
            r()
    return restore


_UNSET = object()


def _fields_restorer(x, met, depth):
    """`_restorer` of an object's fields: those in its ``__dict__`` and its slots."""
    fields = getattr(x, "__dict__", None)
    slots = shadow.slot_names(type(x))
    if type(fields) is not dict and not slots:
        return lambda: None
    items = fields.copy() if type(fields) is dict else None
    held = {n: getattr(x, n, _UNSET) for n in slots}
    inner = [_restorer(v, met, depth - 1) for v in [*(items or {}).values(), *held.values()]]

    def restore():
        if items is not None:
            fields.clear()
            fields.update(items)
        for n, v in held.items():  # (past a __setattr__ of yours: the value as it was)
            if v is _UNSET:
                if hasattr(x, n):
                    object.__delattr__(x, n)
            else:
                object.__setattr__(x, n, v)
        for r in inner:
            r()
    return restore


def _skeleton(x):
    """``x`` with its tuples, lists and dicts copied (a named tuple stays one), not its leaves."""
    if isinstance(x, (tuple, list)):
        out = [_skeleton(v) for v in x]
        return out if type(x) is list else type(x)(*out) if hasattr(x, "_fields") else tuple(out)
    if isinstance(x, dict):
        return {k: _skeleton(v) for k, v in x.items()}
    return x


def _same(a, b) -> bool:
    """Whether ``a`` holds what ``b`` holds (arrays, numbers, containers and objects' fields,
    compared by value; anything else by identity, or as unknown: False)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is np.ndarray:
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (int, float, complex, str, bytes, np.generic)) or a is None:
        return a == b or a != a and b != b
    fields, slots = getattr(a, "__dict__", None), shadow.slot_names(type(a))
    if type(fields) is not dict and not slots:
        return False
    return (type(fields) is not dict or _same(fields, vars(b))) and \
        all(_same(getattr(a, n, _UNSET), getattr(b, n, _UNSET)) for n in slots)


def jacfwd(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
           has_aux: bool = False) -> Callable[..., Any]:
    """JAX's ``jacfwd``: the Jacobian of ``f`` in ``argnums`` by forward mode, one `jvp`
    per element of the inputs."""
    _callable(f)

    @functools.wraps(f)
    def jac(*args, **kw):  # (keyword arguments pass through, as JAX's: no derivative in them)
        g = functools.partial(f, **kw) if kw else f
        return forward_jacobian(lambda a, ts: jvp(g, a, ts), lambda: g(*args), args, argnums,
                                has_aux, "jacfwd", lambda a, ts: _batched_jvp(g, a, ts))
    return jac


def _batched_jvp(f, primals, tangents):
    """`jvp` of ``f`` along the directions of the `batching.Batch`es in ``tangents``:
    ``(y, dy)``, ``dy`` holding Batches; raises `batching.Abandon` where the directions
    must be taken one at a time."""
    state = batching.State(batching.size(tangents))
    with _COMPUTING, shadow.fresh(), shadows.isolated_at(0, shadows.TangentShadow(state)) as sh:
        try:
            y, dy = jvp_call(f, None, tuple(tangents), *primals)
            dy = sh.refresh(y, dy)
        except batching.Unbatchable:
            raise batching.abandon(state) from None
    if state.abandoned:  # (also where code of yours caught the Abandon)
        raise batching.Abandon
    return y, dy


def forward_jacobian(column, value, args, argnums, has_aux, what, batched=None, fewest=1):
    """`jacfwd`'s Jacobian in ``argnums`` from ``column(args, ts)``, ``(y, J ts)`` for the
    tangents ``ts`` of the arguments (one per element of the inputs), and ``value()``,
    the output, where no column gave it (y None); ``value`` None: the output is laid
    out as the inputs are (a gradient's).  A function that changes its arguments in
    place leaves them as one call leaves them; each other column is computed at a copy
    of them as they were given.  ``batched(args, ts)``, where given, computes many
    columns in one pass (`_batched_columns`), or abandons them to ``column``; where there
    are ``fewest`` columns at least."""
    single, nums, x, ins = _inputs(args, argnums, what)
    y = aux = None
    given = _copied(args)
    done = None
    if batched is not None and not shadows.levels() and sum(leaf.size for leaf in ins) >= fewest:
        restore = _restorer(args, set())
        done = _batched_columns(batched, args, given, x, ins, single, nums, has_aux)
        if done is None:
            restore()  # (a batch abandoned after it changed them: as they were given, for the columns)
    y, cols = done or (None, [])
    at = args if given is None or _same(args, given) else copy.deepcopy(given)
    for j, leaf in enumerate(ins if done is None else ()):
        for k in range(leaf.size):
            e = iter(_basis(ins, j, k))
            y, dy = column(at, _seeds(len(args), nums, _rebuild(x, e), single))
            cols.append(list(_leaves(dy[0] if has_aux else dy)))
            if at is args and given is not None and not _same(args, given):
                at = None  # (changed by the call: the next columns at copies)
            if at is not args:
                at = copy.deepcopy(given)
    if y is None:  # (no input elements: one call for the output's layout)
        y = x if value is None else value()
    if has_aux:
        y, aux = y
    outs = [_float_leaf(v, what) for v in _leaves(y)]
    J = _jacobian(ins, outs)
    at = 0
    for j, leaf in enumerate(ins):
        for k in range(leaf.size):
            for o, d in enumerate(cols[at]):
                J[o][j].reshape(outs[o].shape + (leaf.size,))[..., k] = d  # (not -1: an empty output)
            at += 1
    out = _assemble(J, y, x, single)
    return (out, aux) if has_aux else out


_BATCHED_ELEMENTS = 1 << 20  # a batched pass's directions × input elements: 8 MiB of tangents
_BATCHED_COLUMNS = 128  # and at most this many directions: each value's tangents take k times its memory


def _batched_columns(batched, args, given, x, ins, single, nums, has_aux):
    """``(y, columns)`` of the Jacobian from batched passes of ``batched``, as many columns
    at a time as `_BATCHED_ELEMENTS` and `_BATCHED_COLUMNS` allow: the first pass at the
    arguments themselves, as the first column is computed, the others at copies of them
    as they were given if it changed them; None where a batch was abandoned
    (`runtime/batching.py`)."""
    roots = [id(shadow.root(a)) for a in _leaves(args) if type(a) is np.ndarray]
    if len(set(roots)) < len(roots):  # (arguments sharing memory: the columns' copies part them)
        return None
    total = sum(leaf.size for leaf in ins)
    chunk = max(1, min(_BATCHED_COLUMNS, _BATCHED_ELEMENTS // max(total, 1)))
    y, cols, at = None, [], args
    for start in range(0, total, chunk):
        k = min(chunk, total - start)
        try:
            y, dy = batched(at, _seeds(len(args), nums, _rebuild(x, iter(_batch_basis(ins, start, k))), single))
        except batching.Abandon:
            return None
        held = _held(at)
        for j in range(k):
            d = _dense(batching.part(dy, j), y, held)
            cols.append(list(_leaves(d[0] if has_aux else d)))
        if at is args and given is not None and not _same(args, given):
            at = None
        if at is not args:
            at = copy.deepcopy(given)
    return (y, cols) if cols else None


def _seeds(n, nums, tx, single):
    """The tangents of ``n`` arguments: ``tx`` (of the arguments ``nums``, one or a tuple)
    laid out by position, those of an argument named twice in ``nums`` added."""
    ts = [None] * n
    for j, i in enumerate(nums):
        ts[i] = accum(ts[i], tx if single else tx[j])
    return ts


def _batch_basis(ins, start, k):
    """For each input leaf, the Batch of its tangents along columns ``start`` to
    ``start + k`` of the identity (None where they are all zero)."""
    at = 0
    for leaf in ins:
        lo, hi = max(start, at), min(start + k, at + leaf.size)
        if lo >= hi:
            yield None
        else:
            b = np.zeros((k, leaf.size), leaf.dtype)
            b[np.arange(lo, hi) - start, np.arange(lo, hi) - at] = 1
            yield batching.Batch(b.reshape((k,) + leaf.shape))
        at += leaf.size


def _basis(ins, j, k):
    """Tangent leaves: zero (None) except element ``k`` of leaf ``j``, which is one."""
    for n, leaf in enumerate(ins):
        if n != j:
            yield None
            continue
        e = np.zeros(leaf.shape, leaf.dtype)
        e.reshape(-1)[k] = 1
        yield e if leaf.ndim else e[()]


def _assemble(J, y, x, single):
    """The Jacobian blocks ``J[out leaf][in leaf]`` as a tree: the output's structure, each
    leaf holding the input's structure."""
    rows = iter(J)
    return _rebuild(y, (_rebuild(x, iter(block[()] if block.ndim == 0 else block for block in row))
                        for row in rows))


def jacrev(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
           has_aux: bool = False) -> Callable[..., Any]:
    """JAX's ``jacrev``: the Jacobian of ``f`` in ``argnums`` by reverse mode, one forward
    pass and one pullback per element of the output."""
    _callable(f)

    @functools.wraps(f)
    def jac(*args, **kw):  # (keyword arguments pass through, as JAX's: no derivative in them)
        single, nums, x, ins = _inputs(args, argnums, "jacrev")
        y, back = pullback_at(f, args, nums, kw)
        y0, aux = y, None  # (with has_aux, the pair whose first part gets the seed)
        if has_aux:
            y, aux = _aux_pair(y, f)
        outs = [_float_leaf(v, "jacrev") for v in _leaves(y)]
        J = _jacobian(ins, outs)
        for o, leaf in enumerate(outs):
            for k in range(leaf.size):
                seed = _rebuild(y, iter(_basis(outs, o, k)))
                g = back(type(y0)((seed, None)) if has_aux else seed)
                gx = g[nums[0]] if single else tuple(g[i] for i in nums)
                for j, d in enumerate(_grad_leaves(gx, x)):
                    J[o][j].reshape((-1,) + ins[j].shape)[k] = 0 if d is None else np.conj(d)
        out = _assemble(J, y, x, single)
        return (out, aux) if has_aux else out
    return jac


def _grad_leaves(g, like):
    """The leaves of gradient ``g`` in the places of ``like``'s leaves (None for zero)."""
    if isinstance(like, (tuple, list)):
        gs = g if isinstance(g, (tuple, list)) else (None,) * len(like)
        for a, b in zip(gs, like):
            yield from _grad_leaves(a, b)
    elif isinstance(like, dict):
        gd = g if isinstance(g, dict) else {}
        for k, v in like.items():
            yield from _grad_leaves(gd.get(k), v)
    else:
        yield g


jacobian = jacrev


def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple:
    """JAX's ``vjp``: ``(f(*primals), vjp_fn)``, where ``vjp_fn(ct)`` returns a tuple of
    cotangents, one per primal (None where none reached it); with ``has_aux``, ``f``
    returns ``(out, aux)`` and vjp returns ``(out, vjp_fn, aux)``."""
    y, back = pullback(f, *primals)
    if not has_aux:
        return y, back
    out, aux = _aux_pair(y, f)
    return out, (lambda ct: back(type(y)((ct, None)))), aux


def _aux_pair(y, f):
    if not (isinstance(y, (tuple, list)) and len(y) == 2):
        raise TypeError(f"has_aux=True: {full_name(f)} must return a pair (output, aux), but "
                        f"returned a {type(y).__name__}")
    return y[0], y[1]


def tangent_stages(f, batched=False, nested=False):
    """The IR stages of ``f``'s forward mode: ``lifted``, ``primal`` and ``tangent``
    (``batched``: the tangent code `jacfwd` runs on batches of tangents, every call
    through ``jvp_call``: runtime/batching.py; ``nested``: the tangent code nested
    differentiation runs, where a list or array ``f`` makes passes its changes on:
    transforms/private.py)."""
    return compiled_tangent(getattr(f, "__func__", f), VARIANTS[nested, batched]).stages
