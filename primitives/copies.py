"""Copies that run Python code of a class: its ``__copy__``/``__deepcopy__``, a reducer
of ``copyreg``, or pickle's hooks (``__reduce__``, ``__getstate__``, ``__setstate__``,
``__getnewargs__``) that copying by reduction calls.

The rules of ``copy.copy`` and ``copy.deepcopy`` (`containers`) hand a copy's gradient
to its original as it is; a copy that calls such code (`copied_by_python`) is
differentiated instead as the copy module's own Python code (`PYTHON_COPIES`), and
``object.__reduce_ex__`` and ``object.__getstate__``, which it calls, as Python too, so
that what the hooks make of the values is differentiated.
"""
from __future__ import annotations

import copy
import copyreg
import types

from ._frozen import np

from ..runtime.forward import forward
from ..runtime.mutation import wrapping
from ..runtime.rules import rule


def _without_rule(f):
    """Python function ``f`` as a function without its rule, whose code is differentiated."""
    g = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    g.__kwdefaults__ = f.__kwdefaults__
    return g


# copy.copy and copy.deepcopy as the copy module's Python code, for a copy that calls
# Python code of yours: what that code makes of the values is differentiated
PYTHON_COPIES = {f: _without_rule(f) for f in (copy.copy, copy.deepcopy)}
_REDUCING = ("__reduce_ex__", "__reduce__", "__getnewargs_ex__", "__getnewargs__", "__getstate__",
             "__setstate__")


def _python(f) -> bool:
    return isinstance(f, (types.FunctionType, types.MethodType))


def _copies_by_python(cls, deep) -> bool:
    """Whether copying an instance of ``cls`` itself calls Python code: its ``__copy__``
    (``__deepcopy__``), a reducer of ``copyreg.dispatch_table``, or one of pickle's hooks
    (``__reduce__``, ``__getstate__``, ``__setstate__``, …) that copying by reduction calls."""
    if cls in (copy._deepcopy_dispatch if deep else copy._copy_dispatch) or issubclass(cls, type):
        return False
    own = getattr(cls, "__deepcopy__" if deep else "__copy__", None)
    if own is not None:
        return _python(own)
    if cls in copyreg.dispatch_table:
        return _python(copyreg.dispatch_table[cls])
    return any(_python(getattr(cls, name, None)) for name in _REDUCING)


def copied_by_python(x, deep) -> bool:
    """Whether ``copy.copy(x)`` (``deep``: ``copy.deepcopy(x)``, which copies what ``x``
    holds too) calls Python code of a class (`_copies_by_python`), which the rules of the
    copy functions would run undifferentiated."""
    if not deep:
        return _copies_by_python(type(x), False)
    seen, todo = set(), [x]
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        cls = type(o)
        if _copies_by_python(cls, True):
            return True
        if cls is np.ndarray or isinstance(o, type) or cls in copy._deepcopy_dispatch and \
                cls not in (list, tuple, dict, types.MethodType):
            continue  # (copied by C code, or not copied: a number, a function, a class)
        if isinstance(o, (list, tuple, set, frozenset)):
            todo.extend(o)
        elif isinstance(o, dict):
            todo.extend(o.keys())
            todo.extend(o.values())
        elif cls is types.MethodType:
            todo.append(o.__self__)
        fields = getattr(o, "__dict__", None)
        if type(fields) is dict:
            todo.extend(fields.values())
        todo.extend(getattr(o, n) for n in copyreg._slotnames(cls) if hasattr(o, n))
    return False


def default_state(x, slotnames):
    """``object.__getstate__(x)`` as Python (its ``__dict__`` itself, None if that is empty,
    and the values of its slots, ``slotnames``), so that what it reads out of ``x`` is
    differentiated."""
    fields = getattr(x, "__dict__", None)
    state = fields if fields else None
    slots = {}
    for name in slotnames:
        if name != "__dict__" and name != "__weakref__" and hasattr(x, name):
            slots[name] = getattr(x, name)
    if slots:
        return state, slots
    return state


def _reduce_newobj(x):
    """``object.__reduce_ex__(x, protocol)`` for a protocol of 2 or more, as Python: the
    ``__getnewargs_ex__``/``__getnewargs__`` and ``__getstate__`` it calls (Python code of
    yours, or `default_state`) are differentiated."""
    cls = type(x)
    args, kwargs = (), None
    if hasattr(cls, "__getnewargs_ex__"):
        args, kwargs = x.__getnewargs_ex__()
    elif hasattr(cls, "__getnewargs__"):
        args = x.__getnewargs__()
    state = x.__getstate__()
    listitems = iter(x) if isinstance(x, list) else None
    dictitems = iter(x.items()) if isinstance(x, dict) else None
    if kwargs:
        return copyreg.__newobj_ex__, (cls, tuple(args), kwargs), state, listitems, dictitems
    return copyreg.__newobj__, (cls, *args), state, listitems, dictitems


def reduce_ex_as_python(x, protocol):
    """What ``object.__reduce_ex__(x, protocol)`` calls, as a Python function and its
    arguments: a ``__reduce__`` of ``x``'s class that is Python code, else the reduction
    for the protocol."""
    own = getattr(type(x), "__reduce__", None)
    if own is not object.__reduce__:
        return own, (x,)
    if protocol < 2:
        return copyreg._reduce_ex, (x, protocol)
    return _reduce_newobj, (x,)


@rule(object.__reduce_ex__)
def _object_reduce_ex(x, protocol):
    f, args = reduce_ex_as_python(x, protocol)
    y, pb = forward(f, *args)
    return y, wrapping(pb, lambda d: (None, pb(d)[1], None))


@rule(object.__getstate__)
def _object_getstate(x):
    y, pb = forward(default_state, x, copyreg._slotnames(type(x)))
    return y, wrapping(pb, lambda d: (None, pb(d)[1]))
