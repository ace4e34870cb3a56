"""Structured values as gradients mirror them: `map`, `leaves`, `zeros_like`.

A tree is a number, an array, or a container of trees: a dict (its keys in its
order), a list, a tuple (a named tuple stays its type), or an object, whose part is the
dict of its fields, as its gradient is.  ``None`` is the zero gradient: a leaf nothing
reached.

    >>> import numpy as np
    >>> from bytegrad import tree
    >>> params = {"W": np.ones(2), "b": 0.5, "steps": 3}
    >>> grads = {"W": np.array([0.1, 0.2]), "b": None, "steps": None}
    >>> tree.map(lambda p, g: p - 0.5 * g, params, grads)
    {'W': array([0.95, 0.9 ]), 'b': 0.5, 'steps': 3}
    >>> tree.leaves(grads)
    [array([0.1, 0.2])]
    >>> tree.zeros_like(params)
    {'W': array([0., 0.]), 'b': 0.0, 'steps': None}
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

_DEPTH = 100


def _parts(x):
    """``(kind, parts)``: the children of container ``x`` by key ("dict", an object's
    fields too) or position ("seq"); None for a leaf."""
    if isinstance(x, dict):
        return "dict", x
    if isinstance(x, (list, tuple)):
        return "seq", x
    fields = getattr(x, "__dict__", None)
    if type(fields) is dict and not isinstance(x, (type, np.ndarray)) and not callable(x):
        return "dict", fields
    return None


def _rebuilt(x, kind, items):
    if kind == "dict":
        return items
    if type(x) is list:
        return list(items)
    return type(x)(*items) if hasattr(x, "_fields") else tuple(items)


def leaves(t: Any) -> list:
    """The leaves of ``t`` in order (dicts in their keys' order, objects' fields in
    theirs), leaving out None (zero)."""
    out: list = []
    _leaves(t, out, _DEPTH)
    return out


def _leaves(t, out, depth):
    if t is None:
        return
    p = _parts(t) if depth else None
    if p is None:
        out.append(t)
    else:
        for v in (p[1].values() if p[0] == "dict" else p[1]):
            _leaves(v, out, depth - 1)


def map(f: Callable, t: Any, *rest: Any) -> Any:  # noqa: A001  (the name users expect)
    """``t`` with ``f(leaf, *others)`` at each leaf, ``others`` the leaves at the same
    place in ``rest``; a None (zero) in ``rest`` reaches ``f`` as zeros shaped like the
    leaf (a leaf with no zero, an int or a string, is kept as it is), and a None leaf of
    ``t`` stays None.  Containers are mirrored: dicts keep their
    keys and order, tuples stay tuples, an object becomes the dict of its fields."""
    return _map(f, t, rest, _DEPTH)


def _map(f, t, rest, depth):
    if t is None:
        return None
    p = _parts(t) if depth else None
    if p is None:
        if any(r is None for r in rest):
            z = _zero(t)
            if z is None:  # (an int, a string: no gradient reaches it, and it has no zero)
                return t
            return f(t, *[z if r is None else r for r in rest])
        return f(t, *rest)
    kind, parts = p
    if kind == "dict":
        subs = [r if isinstance(r, dict) else _fields(r) for r in rest]
        return {k: _map(f, v, [s.get(k) for s in subs], depth - 1) for k, v in parts.items()}
    subs = [r if isinstance(r, (list, tuple)) else (None,) * len(parts) for r in rest]
    return _rebuilt(t, kind, [_map(f, v, [s[i] for s in subs], depth - 1) for i, v in enumerate(parts)])


def _fields(r):
    p = _parts(r) if r is not None else None
    return p[1] if p is not None and p[0] == "dict" else {}


def zeros_like(t: Any) -> Any:
    """A zero gradient laid out like ``t``, materialised: zeros for float numbers and
    float arrays (complex stays complex), None for what carries no gradient (ints,
    bools, strings, None); containers mirrored as in `map`."""
    return _map(_zero, t, (), _DEPTH)


def _zero(x):
    if isinstance(x, np.ndarray):
        return np.zeros_like(x) if x.dtype.kind in "fc" else None
    if isinstance(x, (bool, np.bool_, builtins.int, np.integer, str, bytes)):
        return None
    if isinstance(x, (float, complex, np.inexact)):
        return type(x)(0)
    return None
