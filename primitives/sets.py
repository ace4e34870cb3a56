"""Rules for sets and for the merge operators of dicts.

A set's gradient is a dict from each of its items to that item's gradient (as a dict's
is from key to gradient); None is zero.  Equal items collapse: a set holds the first of
equal items it is given (CPython's ``{a, b}``, ``set(xs)``, ``s | t`` keep the object
added first), so the gradient of an item goes back to the very object the set holds,
found by identity, and the items it dropped get none: ``{x, x}`` gives ``x`` the
gradient once, and ``sum({x, 2 * x})`` at ``x == 0`` gives ``x`` the whole gradient
(the set holds ``x``; ``2 * x`` was dropped).  Set displays and comprehensions
(``ops.build_set``, ``ops.set_add``, ``ops.set_update``), ``set``/``frozenset``,
``union``/``intersection``/``difference``/``symmetric_difference`` and ``| & - ^``,
``copy``, iteration, ``sum``/``min``/``max``/``sorted``/``list``... of a set are
differentiated.  Changing a set that holds differentiable items in place (``add``,
``discard``, ``|=``, …) is refused with the fix (build a new set).

``d | e`` on dicts keeps, for a key in both, the right operand's value, which gets the
gradient; ``d |= e`` changes ``d`` in place, as ``d.update(e)`` does (and is
differentiated as it is).  A class whose ``__or__`` is Python code (``Counter``) is
differentiated through it.
"""
from __future__ import annotations

import operator as op
import types

from ..ir import ops
from ..runtime.algebra import is_differentiable
from ..runtime.errors import user_location
from ..runtime.forward import forward
from ..runtime.mutation import Effect
from ..runtime.rules import RULES, changes_arguments, nograd, rule
from ..runtime.shadow import current
from .containers import SETS, merge_rule
from .functional import take_generators_whole
from .math import mirror
from .operators import _BUILTIN


def _held(y, sources):
    """For each item sequence in ``sources``, whether each of its items is the object the
    set ``y`` holds (the first place an object of ``y`` came from claims it)."""
    left = {id(e) for e in y}
    out = []
    for v in sources:
        mine = []
        for e in v:
            mine.append(id(e) in left)
            left.discard(id(e))
        out.append(mine)
    return out


def _item_grads(d, v, held):
    return [d.get(e) if h else None for e, h in zip(v, held)]


@rule(ops.build_set)
def _build_set(*xs):
    y = set(xs)
    held, = _held(y, (xs,))
    return y, lambda d: (None,) + tuple(_item_grads(d, xs, held))


def _materialized(a):
    """The items of an iterable argument, taken once (an iterator is consumed here; an
    array's items are made once, so that a set's items are those objects)."""
    return a if isinstance(a, (list, tuple, set, frozenset, dict)) else list(a)


def _set_op(f):
    """The rule of ``f``, which makes a new set of the items of its arguments."""
    def r(*args):
        vs = [_materialized(a) for a in args]
        y = f(*vs)
        held = _held(y, vs)
        return y, lambda d: (None,) + tuple(
            mirror(a, _item_grads(d, list(v), h)) for a, v, h in zip(args, vs, held))
    return r


for _f in (set, frozenset, set.union, set.intersection, set.difference, set.symmetric_difference,
           set.copy, frozenset.union, frozenset.intersection, frozenset.difference,
           frozenset.symmetric_difference, frozenset.copy):
    rule(_f)(_set_op(_f))
take_generators_whole(set, frozenset, set.union, set.intersection, set.difference,
                      set.symmetric_difference, frozenset.union, frozenset.intersection,
                      frozenset.difference, frozenset.symmetric_difference)


def _adds(s, items):
    """Which of ``items``, added in order to the set ``s``, it keeps (the first of equal ones)."""
    seen, new = set(), []
    for x in items:
        new.append(x not in s and x not in seen)
        seen.add(x)
    return new


def _without(d, items, new):
    """The gradient ``d`` of a set without the entries of the items it gained."""
    d = dict(d)
    for x, n in zip(items, new):
        if n:
            d.pop(x, None)
    return d


@rule(ops.set_add)
def _set_add(s, x):
    new = _adds(s, (x,))
    ops.set_add(s, x)
    return s, lambda d: (None, _without(d, (x,), new), d.get(x) if new[0] else None)


@rule(ops.set_update)
def _set_update(s, ys):
    v = _materialized(ys)
    items = list(v)
    new = _adds(s, items)
    ops.set_update(s, v)
    return s, lambda d: (None, _without(d, items, new), mirror(ys, _item_grads(d, items, new)))


# -- operators: sets and dicts; anything else (ints, boolean arrays) carries no gradient

def _operator(f, dunder, base=None):
    """The rule of the binary operator ``f``: the set operation for two sets, a merge for
    ``|`` of dicts, a class's own Python ``dunder`` differentiated (``Counter.__or__``),
    ``base`` or no gradient otherwise."""
    sets = _set_op(f)

    def r(a, b):
        if base is not None and type(a) in _BUILTIN:  # (x - m on arrays: no set in sight)
            return base(a, b)
        own = getattr(type(a), dunder, None) if dunder else None
        if type(own) is types.FunctionType:
            y, pb = forward(own, a, b)
            return (f(a, b), nograd(2)) if y is NotImplemented else (y, pb)
        if isinstance(a, SETS) and isinstance(b, SETS):
            return sets(a, b)
        if f is op.or_ and isinstance(a, dict) and isinstance(b, dict):
            return _merge(a, b)
        if base is not None:
            return base(a, b)
        return f(a, b), nograd(2)
    return r


_merge = merge_rule(op.or_)
for _f, _dunder in ((op.or_, "__or__"), (op.and_, "__and__"), (op.xor, "__xor__")):
    rule(_f)(_operator(_f, _dunder))
rule(op.sub, override=True)(_operator(op.sub, None, RULES[op.sub].fn))


def _refuse(what):
    file, line = user_location()
    raise NotImplementedError(
        f"{file}:{line}: {what} changes a set of differentiable items in place, which is not "
        f"differentiated; build a new set (s = s | {{x}}, s = s - t)")


def _in_place(f, symbol, base=None):
    """The rule of ``symbol=``: ``d |= e`` is ``d.update(e)``; on a set of differentiable
    items it is refused; otherwise ``base`` (or no gradient)."""
    update = RULES[dict.update].fn

    def r(a, b):
        if isinstance(a, SETS) and (is_differentiable(a) or is_differentiable(b)):
            _refuse(f"`{symbol}=`")
        if f is op.ior and isinstance(a, dict) and type(getattr(type(a), "__ior__")) is not \
                types.FunctionType:
            sh, (_, back) = current(), update(a, b)

            def pb(dy):
                sh.add(a, dy)
                return back(None)
            return a, Effect(pb)
        if base is not None:
            return base(a, b)
        return f(a, b), nograd(2)
    return r


for _f, _symbol, _base in ((op.ior, "|", None), (op.iand, "&", None), (op.ixor, "^", None),
                           (op.isub, "-", RULES[op.isub].fn)):
    rule(_f, override=_base is not None, note=f"on a set of differentiable items, refused: "
         f"s = s {_symbol} t" + ("; on dicts, as d.update(e)" if _f is op.ior else ""))(
        _in_place(_f, _symbol, _base))
changes_arguments(op.ior, op.iand, op.ixor)


def _changing(f):
    def r(s, *args):
        if is_differentiable(s) or any(map(is_differentiable, args)):
            _refuse(f"set.{f.__name__}")
        return f(s, *args), nograd(1 + len(args))
    return r


for _f in (set.add, set.update, set.discard, set.remove, set.pop, set.clear,
           set.intersection_update, set.difference_update, set.symmetric_difference_update):
    rule(_f, note="refused on a set of differentiable items: build a new set")(_changing(_f))
