"""The public functions: gradient, pullback, grad, value_and_grad, differentiable."""
from __future__ import annotations

import functools
import inspect
import numbers
import operator
import types
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from . import computing, mutation, shadow
from .algebra import unwrap
from .errors import NotScalarError, full_name
from .forward import Variant, call_function, compiled, forward
from .generators import Generator


_COMPUTING = computing.computing()
T = TypeVar("T")


def pullback(f: Callable[..., Any], /, *args: Any, wrt: Sequence[int] | None = None,
             **kw: Any) -> tuple[Any, Callable[[Any], tuple]]:
    """``(f(*args, **kw), back)``; ``back(dy)`` returns one gradient per positional argument.

    ``wrt`` (indices of positional arguments, negative ones from the end) names the
    gradients wanted; the others are None and, when ``f`` is a plain function, not
    computed at all.  The output's arrays are the caller's own (``back`` keeps those it
    computed with); an array of the arguments changed in place before ``back`` is called
    is refused (the gradient would be taken at another point).
    """
    y, back = pullback_at(f, args, wrt, kw)
    left = [(a, a.copy()) for a in _arrays_in(args, _DEPTH)  # (as the call left them, as each back does;
            if a.dtype.kind in "fciub"]  # numbers: an object's or a date's may not equal itself)

    def guarded(dy):
        if any(not np.array_equal(a, c, equal_nan=a.dtype.kind in "fc") for a, c in left):
            raise ValueError(f"an argument of {full_name(f)} was changed in place after its pullback "
                             f"was made, so the gradient would be taken at another point; call the "
                             f"pullback first, or change a copy (a = a.copy())")
        return back(dy)
    args_memory = {id(shadow.root(a)) for a in _arrays_in(args, _DEPTH)}
    return _handed(y, args_memory, _DEPTH), guarded


def pullback_at(f, args, wrt, kw):
    """`pullback` for callers that hand it neither the output nor the arguments."""
    with _COMPUTING:
        y, reverse = _pullback(f, args, wrt, kw)

    def back(dy):
        _check_seed(dy, y, "")
        with _COMPUTING:
            return reverse(dy)
    return y, back


def _handed(y, args_memory, depth):
    """``y`` with its arrays copied (in tuples, lists and dicts), but for views of the
    arguments (NumPy's ``x[1:]`` is one; a change of it, an argument's, is refused)."""
    if type(y) is np.ndarray:
        return y if id(shadow.root(y)) in args_memory else y.copy()
    if not depth:
        return y
    if type(y) is list or type(y) is tuple:
        return type(y)([_handed(v, args_memory, depth - 1) for v in y])
    if isinstance(y, tuple) and hasattr(y, "_fields"):
        return type(y)(*[_handed(v, args_memory, depth - 1) for v in y])
    if type(y) is dict:
        return {k: _handed(v, args_memory, depth - 1) for k, v in y.items()}
    return y


def _arrays_in(x, depth):
    """The arrays in ``x``, its tuples, lists and dicts."""
    if type(x) is np.ndarray:
        yield x
    elif depth and isinstance(x, (tuple, list)):
        for v in x:
            yield from _arrays_in(v, depth - 1)
    elif depth and isinstance(x, dict):
        for v in x.values():
            yield from _arrays_in(v, depth - 1)


def _check_seed(dy, y, at):
    """Raise where the seed ``dy`` does not fit the output ``y`` (a container of another
    kind or length, a key ``y`` lacks, an array of another shape, a complex value for a
    real one), naming the place ``at`` in the output; None is zero anywhere."""
    if dy is None:
        return
    if isinstance(y, (tuple, list)):
        if not isinstance(dy, (tuple, list)) or len(dy) != len(y):
            _bad_seed(dy, y, at, ValueError)
        for i, (d, v) in enumerate(zip(dy, y)):
            _check_seed(d, v, f"{at}[{i}]")
    elif isinstance(y, dict):
        _check_named(dy, y, y, at, "key", "[{!r}]")
    elif (fields := _fields_of(y)) is not None:  # an object of yours: a dict of its fields' seeds
        _check_named(dy, y, fields, at, "field", ".{}")
    elif type(dy) is type(y) and (type(y) is not np.ndarray or dy.shape == y.shape and
                                  (dy.dtype.kind != "c" or y.dtype.kind == "c")):
        return  # (the usual seed, of the output's own kind: checked without NumPy calls)
    elif isinstance(y, _VALUES) and not isinstance(y, (bool, np.bool_)):
        if not isinstance(dy, _VALUES) or np.shape(dy) != np.shape(y):
            _bad_seed(dy, y, at, ValueError)
        if np.iscomplexobj(dy) and not np.iscomplexobj(y):
            _bad_seed(dy, y, at, TypeError)


_VALUES = (np.ndarray, numbers.Number, np.generic)


def _check_named(dy, y, parts, at, word, place):
    """`_check_seed` of a dict seed for ``y``, whose ``parts`` (its items, or an object's
    fields) are named by ``word``s written after ``at`` as ``place`` shows."""
    if not isinstance(dy, dict):
        _bad_seed(dy, y, at, ValueError)
    for k, d in dy.items():
        if k not in parts:
            raise ValueError(f"the seed{at} has the {word} {k!r}, which the output{at} lacks "
                             f"(its {word}s: {list(parts)})")
        _check_seed(d, parts[k], at + place.format(k))


def _fields_of(y):
    """The fields of ``y``, an object of a class of Python code, by name; else None."""
    t = type(y)
    if not t.__flags__ & mutation._HEAP_TYPE or isinstance(y, (*_VALUES, str, bytes, BaseException, type,
                                                              types.FunctionType)):
        return None
    fields = dict(vars(y)) if hasattr(y, "__dict__") else {}
    fields.update((n, getattr(y, n)) for n in shadow.slot_names(t) if hasattr(y, n))
    return fields




def _bad_seed(dy, y, at, kind):
    raise kind(f"the seed given to the pullback does not fit the output: the seed{at} is "
               f"{_layout_of(dy)} where the output{at} is {_layout_of(y)}; give a seed of the "
               f"output's structure (None for a part with no gradient)")


def _layout_of(x):
    """What `_check_seed` compares of ``x``, in words."""
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    if isinstance(x, np.ndarray):
        return f"a {x.dtype} array of shape {x.shape}"
    if isinstance(x, dict):
        return f"a dict with keys {list(x)}"
    if _fields_of(x) is not None:
        return f"a {type(x).__name__} (its seed: a dict of its fields' seeds, by name)"
    return f"a {type(x).__name__}"


def _callable(f):
    if not callable(f):
        raise TypeError(f"bytegrad differentiates a function: {f!r} is not callable (the "
                        f"function comes first, then its arguments: gradient(f, x))")
    return f


def _pullback(f, args, wrt, kw):
    """`pullback`, run inside a computation; its ``reverse`` too."""
    if not callable(f):
        _callable(f)
    n = len(args)
    asked, first = None, False
    kinds, memory = _scan(args)
    if np.matrix in kinds:
        raise TypeError(f"{full_name(f)} was given an np.matrix, whose * is a matrix product: the "
                        f"rules, written for arrays, would give a wrong gradient; pass np.asarray(m)")
    if wrt is not None:
        wrt, entry, first = _entry(wrt, n)
        if len(wrt) < n and _aliased(memory, wrt):  # (all computed, those asked handed back)
            asked, wrt, first = wrt, None, False
    like, rest = _layout(args, wrt, first)
    if not _FLAT.issuperset(kinds):  # (containers: `_distinct` walks them)
        memory = None
    with shadow.fresh() as sh:
        if wrt is not None and type(f) is types.FunctionType and not kw and _plain(f.__code__, n):
            y, pb = call_function(f, args, kw, wrt=_variant(entry, kinds))
        else:
            y, pb = forward(f, *args, **kw)
    if sh.lost is not None:
        raise NotImplementedError(sh.lost)
    if sh.mutated:
        mutation.seal(sh)

    def reverse(dy):
        try:
            g = pb(dy)
        except BaseException:
            if sh.mutated:  # the arguments as the call left them, and no stale entries
                mutation.reapply(sh)
            raise
        if wrt is None:
            g = tuple(map(unwrap, g[1:1 + n]))
        elif first:  # (the first k: no search of wrt per argument)
            g = (*map(unwrap, g[1:1 + len(wrt)]), *(None,) * (n - len(wrt)))
        else:
            g = tuple([unwrap(x) if i in wrt else None for i, x in enumerate(g[1:1 + n])])
        if not sh.mutated:
            return _distinct(g, (dy, rest), like, memory)
        g = tuple(mutation.collect(sh, a, x) if wrt is None or i in wrt else None
                  for i, (a, x) in enumerate(zip(args, g)))  # what the shadow still holds
        g = _distinct(g, (dy, rest), like)  # laid out like the arguments as they were passed
        mutation.reapply(sh)
        return _distinct(g, (dy, args))  # apart from what the call left in them
    if asked is not None:
        return y, lambda dy: tuple([g if i in asked else None for i, g in enumerate(reverse(dy))])
    return y, reverse


_ENTRIES: dict = {}


def _entry(wrt, n):
    """``(wrt, entry, first)`` for a call with ``n`` positional arguments: ``wrt`` with
    negative indices counted from the end, sorted, distinct; the active entry arguments
    of the transformed function (0 is the function itself); and whether ``wrt`` names the
    first ``len(wrt)`` arguments (JAX's ``argnums=(0, 1, …)``, laid out by slicing)."""
    key = (wrt if type(wrt) is tuple else tuple(wrt), n)
    e = _ENTRIES.get(key)
    if e is None:
        bad = [i for i in key[0] if not -n <= operator.index(i) < n]
        if bad:
            raise IndexError(f"argument index {bad[0]} (argnums/wrt) is out of range for a "
                             f"call with {n} positional arguments")
        w = tuple(sorted({operator.index(i) % n for i in key[0]}))
        e = _ENTRIES[key] = (w, (0,) + tuple(i + 1 for i in w), not w or w[-1] == len(w) - 1)
    return e


_VARIANTS: dict = {}


def _variant(entry, kinds) -> Variant:
    """The `Variant` for a call whose arguments are of ``kinds`` (`_scan`) and whose active
    entry arguments are ``entry``."""
    key = (entry, kinds)
    v = _VARIANTS.get(key)
    if v is None:
        if len(_VARIANTS) > 4096:  # (classes made at run time: no end to their tuples)
            _VARIANTS.clear()
        v = _VARIANTS[key] = Variant(entry, tuple([i for i, t in enumerate(kinds, 1) if t in _NUMERIC]))
    return v


def _scan(args):
    """``(kinds, memory)`` of the arguments: each one's type (`object` for an array of
    objects, whose items may be objects of yours), and what it shares memory by (an
    array's own; a view's base's; another value's identity; None for a number, which
    shares nothing)."""
    kinds, memory = [], []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            memory.append(_key(a))
            if a.dtype.hasobject:
                t = object
        else:
            memory.append(None if t in _LEAVES else id(a))
        kinds.append(t)
    return tuple(kinds), memory


def _aliased(memory, wrt) -> bool:
    """Whether an argument not in ``wrt`` is one in it, or a view of its memory (`_scan`):
    the transform where only ``wrt`` is active would take it for a constant, though a
    change through either changes both.  (Then every argument's gradient is computed, so
    one argument's does not depend on which others were asked for.)"""
    mine = {memory[i] for i in wrt}
    mine.discard(None)  # (numbers)
    return not mine.isdisjoint([m for i, m in enumerate(memory) if i not in wrt])


def _plain(code, n) -> bool:
    """Whether a call with ``n`` positional arguments binds them to the first ``n``
    parameters of ``code`` (not into ``*args``), so the transformed function's entry
    arguments 1…n are the call's."""
    return n <= code.co_argcount and not code.co_flags & inspect.CO_VARARGS


def _layout(args, wrt, first):
    """``(like, rest)``: what the gradients mirror (the arguments, _ABSENT for those not
    in ``wrt``, whose gradient stays None) and the arguments not mirrored; ``first``: as
    `_entry` gives it."""
    if wrt is None or len(wrt) == len(args):
        return args, ()
    k = len(wrt)
    if first:
        return args[:k] + (_ABSENT,) * (len(args) - k), args[k:]
    like = [_ABSENT] * len(args)
    for i in wrt:
        like[i] = args[i]
    return tuple(like), [a for i, a in enumerate(args) if i not in wrt]


def _distinct(gs, avoid, like=None, memory=None):
    """The gradients ``gs`` laid out like ``like`` (see _mirror; by default as they are),
    each array one the caller may change in place: writable, and apart from the other
    gradients, from the arrays in ``like`` and from what ``avoid`` holds (the seed), views
    included.  The pullback of ``a + b`` hands one array to both sides, and a gradient may
    be a view of another or of an argument, or the seed.  ``memory``: the memory of
    ``like`` and ``avoid[1]``, the arguments, when all are numbers and arrays (`_scan`)."""
    if _LEAVES.issuperset(map(type, gs)) and (like is None or _LEAVES.issuperset(map(type, like))):
        return gs  # numbers for numbers: the usual scalar case, without a walk
    if like is not None and len(avoid) == 2:
        out = _flat(gs, like, avoid, memory)
        if out is not None:
            return out
    st = _Walk()
    out = _mirror(gs, _ABSENT if like is None else like, st, _DEPTH)
    if not st.kept:  # no array handed on: nothing can be shared
        return out
    _hold(avoid, st.avoid, _DEPTH)
    if st.avoid.isdisjoint(st.kept):
        return out
    st.kept.clear()  # an array handed on that the caller holds, met late: walk again
    return _mirror(out, _ABSENT, st, _DEPTH)


def _flat(gs, like, avoid, memory):
    """`_distinct` where the gradients, the arguments and what to avoid (the seed, and
    the arguments not asked for) are numbers and arrays, no containers to walk (a seed in
    one is walked): the usual array case; else None.  ``memory``: the arguments' (`_scan`),
    or None."""
    held = set()
    for x in (avoid[0],) if memory is not None else (avoid[0], *like, *avoid[1]):
        if type(x) is np.ndarray:
            held.add(_key(x))
        elif type(x) not in _FLAT:
            return None
    if memory is not None:
        held.update(memory)
    if not _FLAT.issuperset(map(type, gs)):
        return None
    return tuple([_own(g, held, held) if type(g) is np.ndarray else g for g in gs])


_DEPTH = 100  # deeper parts are handed on as they are (a linked list must not recurse away)
class _Absent:
    """No input to mirror: a gradient keeps its own layout."""


_ABSENT = _Absent()


class _Walk:
    """What one walk over the gradients has met: the arrays the caller holds (arguments,
    seed), the gradients' arrays handed on, the input containers being walked."""
    __slots__ = ("avoid", "kept", "path")

    def __init__(self):
        self.avoid, self.kept, self.path = set(), set(), set()


def _mirror(g, a, st, depth):
    """``g``, the gradient of ``a``, laid out like ``a``: a dict with ``a``'s keys in its
    order, a list or tuple (a named tuple stays one) of its length, None for a leaf with no
    gradient; an object that got a gradient, a dict of all its fields (one that got none
    is None, like a leaf: its fields may reach anything).  Entries of ``g`` that ``a``
    lacks are kept.  Containers are new; an array is copied if read-only, held by the
    caller or already handed on."""
    if depth == 0:
        return g
    ta, tg = type(a), type(g)
    if ta is np.ndarray:
        st.avoid.add(_key(a))
    elif ta is dict or ta is list or isinstance(a, (tuple, dict)):  # (dict subclasses too)
        keyed = isinstance(a, dict)
        fits = g is None or (tg is dict if keyed else tg is list or isinstance(g, tuple))
        if fits and id(a) not in st.path:  # (a container inside itself is mirrored once)
            st.path.add(id(a))
            out = (_dict if keyed else _seq)(g, a, st, depth - 1)
            st.path.discard(id(a))
            return out
    elif tg is dict and isinstance(a, functools.partial):  # (its fields, as `Partial` gives them)
        return _dict(g, {"func": a.func, "args": a.args, "keywords": a.keywords}, st, depth - 1)
    elif tg is dict and a is not _ABSENT:
        fs = shadow.fields(a)
        if fs is not None:
            return _dict(g, fs, st, depth - 1)
    if tg is np.ndarray:
        return _own(g, st.kept, st.avoid)
    if tg is dict:
        return _dict(g, _ABSENT, st, depth - 1)
    if tg is list or isinstance(g, tuple):
        return _seq(g, _ABSENT, st, depth - 1)
    return g


def _dict(g, a, st, depth):
    gd = g or {}
    if a is _ABSENT:
        return {k: _mirror(v, _ABSENT, st, depth) for k, v in gd.items()}
    out = {k: _mirror(gd.get(k), v, st, depth) for k, v in a.items()}
    if not gd.keys() <= out.keys():
        out.update({k: _mirror(v, _ABSENT, st, depth) for k, v in gd.items() if k not in out})
    return out


def _seq(g, a, st, depth):
    like, gs = (g, g) if a is _ABSENT else (a, g or ())
    n, m = len(gs), len(like)
    if _LEAVES.issuperset(map(type, gs)) and (a is _ABSENT or _LEAVES.issuperset(map(type, like))):
        out = list(gs) + [None] * (m - n)  # (numbers only: no call per item)
    else:
        out = [_mirror(gs[i] if i < n else None, _ABSENT if a is _ABSENT else v, st, depth)
               for i, v in enumerate(like)]
        if n > m:
            out += [_mirror(x, _ABSENT, st, depth) for x in gs[m:]]
    t = type(like)
    if t is list:
        return out
    return tuple(out) if t is tuple else t(*out) if hasattr(like, "_fields") else t(out)


def _own(g, kept, avoid):
    """``g``, or a copy of it if it is read-only or its memory is in ``kept`` (handed on
    already) or ``avoid`` (the caller's); ``g`` kept."""
    key = id(g) if g.base is None else _key(g)
    if key in kept or key in avoid or not g.flags.writeable:
        return g.copy()
    kept.add(key)
    return g


def _key(x):
    b = x.base
    return id(b) if isinstance(b, np.ndarray) else id(x)  # views share their base


def _hold(x, keys, depth, met=None):
    """Adds the arrays inside ``x`` (tuples, lists, dicts) to ``keys``, entering each
    container once (one holding itself, or shared, must not multiply the walk)."""
    t = type(x)
    if t is np.ndarray:
        keys.add(_key(x))
    elif depth and (t is dict or t is list or isinstance(x, tuple)):
        met = set() if met is None else met
        if id(x) not in met:
            met.add(id(x))
            for v in x.values() if t is dict else x:
                if type(v) not in _LEAVES:
                    _hold(v, keys, depth - 1, met)


_LEAVES = frozenset({float, int, bool, complex, type(None), np.float64, str})
_NUMERIC = frozenset({np.ndarray, float, int, bool, complex, np.float64})  # (`Variant.numeric`)
_FLAT = _LEAVES | {np.ndarray, _Absent}


def stop_gradient(x: T) -> T:
    """``x``, through which no gradient flows (a rule marks it non-differentiable)."""
    shadow.hand_on(x, "stop_gradient")
    return x


def _seed(y, f):
    if type(y) is float or type(y) is np.float64:
        return 1.0
    if isinstance(y, complex) or np.iscomplexobj(y):
        raise NotScalarError(_scalar_message(f, y, "is complex"))
    if isinstance(y, float):
        return 1.0
    if isinstance(y, np.ndarray) and y.size == 1 and y.dtype.kind == "f":
        return np.ones_like(y)
    if isinstance(y, np.floating):
        return y.dtype.type(1)
    if isinstance(y, numbers.Number):
        return type(y)(1)
    raise NotScalarError(_scalar_message(f, y, f"is a {type(y).__name__}"))


def _scalar_message(f, y, what):
    name = getattr(f, "__qualname__", repr(f))
    if type(y) is Generator:  # (its items are made when taken: inside the computation)
        return (f"gradient needs a real scalar output, but {name} returned a generator; "
                f"differentiate a function that consumes it: lambda *a: sum({name}(*a))")
    return (f"gradient needs a real scalar output, but {name} returned a value that {what}; "
            f"use bytegrad.pullback({name}, ...) and call its back with a gradient of the output")


def gradient(f: Callable[..., Any], /, *args: Any, **kw: Any) -> tuple:
    """Gradients of the scalar ``f(*args, **kw)``, one per positional argument (None where
    there is none).  Every keyword is ``f``'s, ``wrt`` too."""
    return _value_and_gradient(f, args, None, kw)[1]


def value_and_gradient(f: Callable[..., Any], /, *args: Any, wrt: Sequence[int] | None = None,
                       **kw: Any) -> tuple[Any, tuple]:
    return _value_and_gradient(f, args, wrt, kw)


def _value_and_gradient(f, args, wrt, kw):
    """`value_and_gradient`, its keywords all ``f``'s (a parameter named ``wrt`` too)."""
    with _COMPUTING:  # until the tape is gone, so the collector never sees it
        y, reverse = _pullback(f, args, wrt, kw)
        if isinstance(y, (bool, int, np.integer, np.bool_)):  # piecewise constant: no gradient
            return y, _no_gradients(args, wrt)
        g = reverse(_seed(y, f))
        del reverse
    return y, g


def _no_gradients(args, wrt):
    """The gradients of a piecewise constant function: None for each argument, laid out
    like the arguments asked for (all, for ``wrt`` None)."""
    w, first = (None, False) if wrt is None else _entry(wrt, len(args))[::2]
    return _distinct((None,) * len(args), (), _layout(args, w, first)[0])


def value_and_grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, jit: bool | str = False) -> Callable[..., tuple[Any, Any]]:
    """JAX's convention: a function returning ``(f(*args), gradient in argnums)``.  With
    ``has_aux``, ``f`` returns ``(out, aux)``: the gradient is ``out``'s, ``aux`` passes
    through without one, and the function returns ``((out, aux), gradient)``.  ``jit=True``
    computes the gradient with the compiled tier (`runtime.compiled`), or raises
    `NotCompilableError`; ``jit="auto"`` takes the compiled tier where it can."""
    return _differentiated(f, argnums, has_aux, jit, value=True)


def _differentiated(f, argnums, has_aux, jit, value):
    """`value_and_grad` (``value``) or `grad` of ``f``."""
    _callable(f)
    _check_jit(jit, has_aux)
    single, wanted, repeats = _argnums(argnums)
    if single:
        pick = operator.itemgetter(wanted[0])
    elif len(wanted) > 1:
        pick = operator.itemgetter(*wanted)  # (a tuple of them)
    else:
        pick = lambda gs: tuple([gs[i] for i in wanted])  # noqa: E731
    run = _with_aux if has_aux else _value_and_gradient
    if jit:
        return _compiled_vg(f, wanted, jit, single, repeats, run, value)

    @functools.wraps(f)
    def differentiated(*args, **kw):
        y, gs = run(f, args, wanted, kw)
        g = _distinct(pick(gs), ()) if repeats and not single else pick(gs)
        if value:
            return y, g
        return (g, y[1]) if has_aux else g  # (y: the pair (out, aux))
    return differentiated


def _argnums(argnums):
    """``(single, wanted, repeats)``: whether ``argnums`` is one index, the indices, and
    whether one may repeat (a negative index may name the same argument as another)."""
    single = isinstance(argnums, (int, np.integer))
    wanted = (operator.index(argnums),) if single else tuple(map(operator.index, argnums))
    return single, wanted, len(set(wanted)) < len(wanted) or min(wanted, default=0) < 0


def _check_jit(jit, has_aux):
    if jit not in (False, True, "auto"):
        raise ValueError(f"jit={jit!r}: give True, False or 'auto'")
    if jit and has_aux:
        raise TypeError("has_aux=True is not compiled: give jit=False, or return the number alone")


def _compiled_vg(f, wanted, jit, single, repeats, run, value=True):
    """`value_and_grad` (or, without ``value``, `grad`) through the compiled tier
    (`runtime.compiled`), which falls back on ``run``, the dynamic tier, for
    ``jit="auto"``."""
    from .compiled import Compiled

    def dynamic(args, kw):
        y, gs = run(f, args, wanted, kw)
        return y, tuple([gs[i] for i in wanted])
    vg = Compiled(f, wanted, jit, dynamic).function(single, value)
    if repeats and not single:  # (one array given twice gets two gradients, not one)
        return functools.wraps(f)(lambda *a, **k: (lambda y, g: (y, _distinct(g, ())))(*vg(*a, **k))
                                  if value else _distinct(vg(*a, **k), ()))
    return functools.wraps(f)(vg)


def grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False, jit: bool | str = False) -> Callable[..., Any]:
    """JAX's convention: a function returning the gradient of ``f`` in ``argnums``; with
    ``has_aux`` (``f`` returns ``(out, aux)``), ``(gradient, aux)``; ``jit`` as in
    `value_and_grad`."""
    return _differentiated(f, argnums, has_aux, jit, value=False)


def _with_aux(f, args, wrt, kw):
    """`_value_and_gradient` of ``f`` returning ``(out, aux)``: the seed reaches ``out``
    alone."""
    with _COMPUTING:
        y, reverse = _pullback(f, args, wrt, kw)
        if not (isinstance(y, (tuple, list)) and len(y) == 2):
            raise TypeError(f"has_aux=True: {getattr(f, '__qualname__', f)!s} must return a pair "
                            f"(output, aux), but returned a {type(y).__name__}")
        out = y[0]
        if isinstance(out, (bool, int, np.integer, np.bool_)):  # piecewise constant: no gradient
            return y, _no_gradients(args, wrt)
        g = reverse(type(y)((_seed(out, f), None)))
        del reverse
    return y, g


def stages(f: Callable[..., Any], arrays: bool = False):
    """The IR stages of ``f``: ``lifted``, ``primal``, ``forward`` and ``adjoint`` (of a
    ``@differentiable`` function, of the function it wraps); with ``arrays``, of the
    transform a call whose positional arguments are arrays or numbers gets
    (`transforms.kept` may then take more values for only read)."""
    if isinstance(f, differentiable):
        f = f.f
    f = getattr(f, "__func__", f)
    if not arrays:
        return compiled(f).stages
    return compiled(f, Variant(None, tuple(range(1, f.__code__.co_argcount + 1)))).stages


_NO_FUNCTION = object()


class differentiable:
    """``@differentiable``: ``f`` runs as before and gains ``.grad``, ``.value_and_grad``
    (as `grad` and `value_and_grad`: argument 0 by default, or ``argnums``),
    ``.pullback`` and ``.ir(stage)``.  ``@differentiable(jit=True)`` (or ``"auto"``) computes
    ``.grad`` and ``.value_and_grad`` with the compiled tier (see `value_and_grad`)."""

    def __new__(cls, f=_NO_FUNCTION, *, jit=False):
        if f is _NO_FUNCTION:  # (``@differentiable(jit=True)``: the decorator, given no function yet)
            return functools.partial(cls, jit=jit)
        return super().__new__(cls)

    def __init__(self, f, *, jit=False):
        functools.update_wrapper(self, _callable(f))
        self.f, self.jit, self._compiled = f, jit, {}

    def __call__(self, *args, **kw):
        return self.f(*args, **kw)

    def __get__(self, obj, objtype=None):
        return self if obj is None else differentiable(types.MethodType(self.f, obj), jit=self.jit)

    def grad(self, *args, argnums: int | Sequence[int] = 0, **kw):
        """``grad(f, argnums, jit=…)(*args, **kw)``."""
        return self._made(argnums, False)(*args, **kw)

    def value_and_grad(self, *args, argnums: int | Sequence[int] = 0, **kw):
        """``value_and_grad(f, argnums, jit=…)(*args, **kw)``."""
        return self._made(argnums, True)(*args, **kw)

    def _made(self, argnums, value):
        """`grad` (or `value_and_grad`) of ``f`` for ``argnums``, made once."""
        key = (argnums if isinstance(argnums, (int, np.integer)) else tuple(argnums), value)
        if key not in self._compiled:
            self._compiled[key] = (value_and_grad if value else grad)(self.f, argnums, jit=self.jit)
        return self._compiled[key]

    def pullback(self, *args, **kw):
        return pullback(self.f, *args, **kw)

    def ir(self, stage: str = "lifted") -> str:
        """The IR of one stage (``lifted``, ``primal``, ``forward``, ``adjoint``), or of
        every stage with ``"all"``."""
        from ..ir import show
        st = stages(self.f)
        if stage == "all":
            return "\n\n".join(f"# {name}\n{show(getattr(st, name))}" for name in STAGES)
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}: one of {', '.join(STAGES)} or 'all'")
        return show(getattr(st, stage))


STAGES = ("lifted", "primal", "forward", "adjoint")
