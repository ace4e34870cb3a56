"""Forward rules: ``frule(tangents, *args) -> (y, dy)``, one per callable.

``tangents`` holds one tangent per positional argument (None is zero); ``dy`` is the
tangent of ``y`` (None when it is zero).  A callable with a reverse rule but no
forward rule gets one derived from the reverse rule (`derived`): the Jacobian is
built one pullback call per output element, which is sound for real floats and
slow, so it is the fallback, never the plan.
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import Refusal
from .algebra import unwrap
from .errors import full_name, user_location
from .generators import TangentGenerator
from .rules import DuplicateRuleError

FRULES: dict = {}  # callable → its forward rule, found by the callable's identity


def frule(*fs, override=False):
    """Register the decorated function as the forward rule of each callable in ``fs``::

        @bytegrad.frule(math.sin)
        def _(tangents, x):
            (dx,) = tangents
            return math.sin(x), None if dx is None else math.cos(x) * dx

    A callable keeps its first forward rule unless ``override=True``.  A rule with the
    attribute ``keyword_tangents = True`` is also given the tangents of the keyword
    arguments that stay keywords, as a dict after the positional ones.
    """
    if not fs:
        raise TypeError("bytegrad.frule needs the callable(s) to register for: "
                        "@bytegrad.frule(f), not @bytegrad.frule")
    if not override:
        for f in fs:
            if f in FRULES:
                raise DuplicateRuleError(f"{full_name(f)} already has the forward rule "
                                         f"{full_name(FRULES[f])}; pass override=True to replace it")

    def register(r):
        r.__qualname__ = f"frule[{full_name(fs[0])}]"  # (how ir dump shows it)
        for f in fs:
            FRULES[f] = r
        return r
    return register


def frule_for(f):
    """The forward rule of ``f``, or None (also for an unhashable callable)."""
    try:
        return FRULES.get(f)
    except TypeError:
        return None


class NoForwardRuleError(Refusal, TypeError):
    """A callable with no forward rule, none derivable, received a nonzero tangent."""

    def __init__(self, f, why):
        file, line = user_location()
        full = full_name(f)
        super().__init__(
            f"{file}:{line}: forward mode (jvp) cannot differentiate {full}: {why}. Add a "
            f"forward rule:\n"
            f"    @bytegrad.frule({full})\n"
            f"    def _(tangents, *args):\n"
            f"        y = {full}(*args)\n"
            f"        return y, <tangent of y from the tangents of the arguments>")
        self.callable = f


_DERIVED: dict = {}


def derived(f, r):
    """The forward rule of ``f`` derived from its reverse `Rule` ``r``: ``dy[k]`` is
    ``Σ_i <back(e_k)_i, dx_i>``, one pullback call per element of a real output (of each
    output, for a tuple of them: ``eigh``, ``svd``)."""
    d = _DERIVED.get(f)
    if d is None:
        d = _DERIVED[f] = _derive(f, r)
    return d


def _listed(x, t):
    """A generator in forward mode as the list of its items (a rule takes all of them) and
    their tangents; another argument as it is."""
    if type(x) is not TangentGenerator:
        return x, t
    at = x.i
    items = list(x)
    return items, x.tangents[at:]


def _derive(f, r):
    def fr(tangents, *args, **kw):
        if any(type(a) is TangentGenerator for a in args):
            args, tangents = map(tuple, zip(*map(_listed, args, tangents)))
        tangents = tuple(None if zero_tangent(t) else t for t in tangents)
        zero = all(t is None for t in tangents)
        if r.effectful or r.changes_args:  # (its rule would record the change for a reverse pass)
            if zero:
                return f(*args, **kw), None
            raise NoForwardRuleError(f, "it changes its arguments in place, so its reverse rule "
                                        "cannot be called again to build a forward one")
        kept = [(a, a.copy()) for a in args if type(a) is np.ndarray]
        y, back = r.fn(*args, **kw)
        if zero:
            return y, None
        if any(not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc") for a, b in kept):
            raise NoForwardRuleError(f, "it changed an argument in place, so its reverse rule "
                                        "cannot be called again to build a forward one")
        parts = tuple(y) if isinstance(y, tuple) else (y,)
        if not all(map(_real, parts)) or not all(_real(a) for a, t in zip(args, tangents) if t is not None):
            raise NoForwardRuleError(f, "its forward rule is derived from its reverse rule only "
                                        "for real floats and real arrays")
        made = [(p, p.copy()) for p in parts if type(p) is np.ndarray and p.flags.writeable]
        seeds = [np.zeros(np.shape(p), np.result_type(np.asarray(p).dtype, np.float64)) for p in parts]
        dys = [np.empty_like(s) for s in seeds]
        for j, (seed, dy) in enumerate(zip(seeds, dys)):
            for k in range(seed.size):
                seed.flat[k] = 1.0
                g = back(_seed(seeds, parts, y))
                # (read before the seed changes: a pullback may compute its gradients when read)
                dy.flat[k] = sum(inner(g[i + 1], t) for i, t in enumerate(tangents) if t is not None)
                seed.flat[k] = 0.0
        for p, value in made:  # (a pullback undoes the writes into what it made: they are done again)
            p[...] = value
        dys = [dy if isinstance(p, np.ndarray) else type(p)(dy[()]) if isinstance(p, float) else dy[()]
               for dy, p in zip(dys, parts)]
        if not isinstance(y, tuple):
            return y, dys[0]
        return y, type(y)(*dys) if hasattr(y, "_fields") else tuple(dys)
    fr.__qualname__ = f"derived frule of {full_name(f)}"
    return fr


def _seed(seeds, parts, y):
    """The output gradient of one seed: arrays for arrays, numbers for numbers, a tuple
    for a tuple."""
    out = [s if isinstance(p, np.ndarray) else s[()] for s, p in zip(seeds, parts)]
    return tuple(out) if isinstance(y, tuple) else out[0]


def zero_tangent(t) -> bool:
    """Whether tangent ``t`` is zero: None, or a tuple or list of zero tangents."""
    return t is None or isinstance(t, (tuple, list)) and all(map(zero_tangent, t))


def _real(x) -> bool:
    """Whether ``x`` is a real number or array (a list of them, for an argument)."""
    if isinstance(x, (bool, int, float, np.integer, np.floating)):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "biuf"
    if isinstance(x, list):
        return all(map(_real, x))
    return False


def inner(g, t) -> float:
    """``<g, t>`` for a gradient and a tangent of the same structure (None is zero)."""
    g = unwrap(g)
    if g is None or t is None:
        return 0.0
    if isinstance(t, dict):
        return sum(inner(g.get(k), v) for k, v in t.items())
    if isinstance(t, (list, tuple)) and not isinstance(g, np.ndarray):
        return sum(inner(a, b) for a, b in zip(g, t))
    t = np.asarray(t)
    p = np.asarray(g) * t
    if np.isnan(p).any():  # (the NaN policy: a zero tangent times an infinite slope is 0)
        p = np.where(t == 0, 0.0, p)
    return float(np.real(np.sum(p)))
