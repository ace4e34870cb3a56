"""Operations that Python answers with a special method of the operand's class.

``+x`` calls ``type(x).__pos__(x)``, ``math.floor(x)`` its ``__floor__``, ``float(x)``
its ``__float__`` (and so does ``math.sin(x)``), ``a // b`` its ``__floordiv__`` or
``b``'s ``__rfloordiv__``, ``sum(xs)`` the items' ``__add__`` and ``__radd__``.  On an
object of a class of yours whose method is Python code, the rules of both modes
differentiate that method as Python calls it.  Numbers and arrays keep the rules of
`operators`, `math` and `builtins`, which know nothing of such methods: they missed what
the method computes (a gradient of None, or a wrong one), or failed on the object.
"""
from __future__ import annotations

import builtins
import operator as op
import types

from ._frozen import math, np

from ..runtime.forward import forward
from ..runtime.frules import derived, frule, frule_for
from ..runtime.jvp import jvp_call
from ..runtime.rules import RULES, nograd
from .math import _UNARY
from .operators import _BUILTIN, _DUNDERS, _by_method
from .tangent_python import by_methods

_METHOD = {op.pos: "__pos__", op.neg: "__neg__", op.abs: "__abs__", builtins.abs: "__abs__",
           op.invert: "__invert__", math.floor: "__floor__", math.ceil: "__ceil__",
           math.trunc: "__trunc__", builtins.round: "__round__", float: "__float__",
           complex: "__complex__", builtins.reversed: "__reversed__"}


def yours(x, name):
    """``type(x)``'s method ``name`` if it is Python code, else None."""
    return _method(type(x), name)


def _method(t, name):
    m = getattr(t, name, None)
    return m if type(m) is types.FunctionType else None


def _asking(f, first, name):
    """Make ``first(*args)``, a Python function or None, answer ``f(*args)`` in both
    modes; else ``f``'s rules as they were (a callable marked as having no gradient gets
    rules that say so, now that an object of yours may have one)."""
    old = RULES[f]
    fn = old.fn or (lambda *args: (f(*args), nograd(len(args))))
    fr = frule_for(f) or (derived(f, old) if old.fn else lambda ts, *args: (f(*args), None))

    def r(*args, **kw):
        m = first(*args)
        return forward(m, *args, **kw) if m is not None else fn(*args, **kw)

    def tangent(ts, *args, **kw):
        m = first(*args)
        return jvp_call(m, None, ts, *args, **kw) if m is not None else fr(ts, *args, **kw)
    r.__name__ = tangent.__name__ = f"asking_{f.__name__}"
    note = old.note if old.fn else f"no gradient for numbers; your class's {name} is differentiated"
    RULES[f] = old.replaced(fn=r, nondiff=False, note=note)  # (its marks, its records on the tape kept)
    for k in ("dual", "batches", "keyword_tangents"):  # (what the numbers' rule can do)
        if hasattr(fr, k):
            setattr(tangent, k, getattr(fr, k))
    frule(f, override=True)(tangent)


for _f, _name in _METHOD.items():
    _asking(_f, lambda x, *rest, name=_name: yours(x, name), _name)


def _converted(f, name, convert, kind):
    """``f(x, …)`` for an object of yours with a Python method ``name``: of ``convert(x)``,
    as ``f`` takes it (``math.sin`` a ``float``, ``np.asarray`` what ``__array__`` gives);
    not for an instance of ``kind``, whose value they read without asking (a float
    subclass's, an ndarray subclass's)."""
    def through(x, *rest, **kw):
        return f(convert(x), *rest, **kw)
    return lambda x, *rest: through if not isinstance(x, kind) and yours(x, name) else None


for _name, *_ in _UNARY:
    _asking(getattr(math, _name), _converted(getattr(math, _name), "__float__", float, float), "__float__")
for _f in (np.asarray, np.array, np.asanyarray):
    _asking(_f, _converted(_f, "__array__", lambda x: type(x).__array__(x), np.ndarray), "__array__")


def _objects_of_yours(a, b, name, rname) -> bool:
    return (type(a) not in _BUILTIN or type(b) not in _BUILTIN) and \
        (yours(a, name) is not None or yours(b, rname) is not None)


def _binary(f):
    """``a op b`` by ``type(a).name`` or ``type(b).rname`` (`operators._DUNDERS`), where
    either is yours: the operators of `operators` and `tangent_python` that had no rule for
    an object."""
    name, rname, _ = _DUNDERS[f]
    old = RULES[f]
    fn = old.fn or (lambda a, b: (f(a, b), nograd(2)))
    fr = frule_for(f) or (lambda ts, a, b: (f(a, b), None))
    objects = by_methods(name, rname, f)

    def r(a, b):
        return _by_method(f, a, b) if _objects_of_yours(a, b, name, rname) else fn(a, b)

    def tangent(ts, a, b):
        return objects(ts, a, b) if _objects_of_yours(a, b, name, rname) else fr(ts, a, b)
    r.__name__ = tangent.__name__ = f"asking_{f.__name__}"
    note = old.note if old.fn else f"no gradient for numbers; your class's {name} is differentiated"
    RULES[f] = old.replaced(fn=r, nondiff=False, note=note)
    frule(f, override=True)(tangent)


_binary(op.floordiv)
_binary(divmod)


def _added(xs, start=0):
    """``sum(xs, start)`` as Python adds: ``start + x``, item by item, by their methods."""
    total = start
    for x in xs:
        total = total + x
    return total


def _listed(xs, *args, **kw):
    """``sum`` of an iterator, its items taken first, so that `_adding_yours` sees them."""
    return sum(list(xs), *args, **kw)


def _adding_yours(xs, *start):
    """`_added` where an item, or the start, adds by a method of yours; `_listed` for an
    iterator (a generator, a map), whose items cannot be looked at without taking them."""
    if type(xs) is not list and type(xs) is not tuple:
        if isinstance(xs, np.ndarray) or not hasattr(type(xs), "__iter__"):
            return None
        if iter(xs) is xs:
            return _listed
    kinds = set(map(type, xs)).union(map(type, start)) - _BUILTIN  # (in C: sums of numbers pay little)
    return _added if any(_method(k, "__add__") or _method(k, "__radd__") for k in kinds) else None


_asking(builtins.sum, _adding_yours, "__add__")
