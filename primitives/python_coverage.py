"""Generate docs/python.md from the rule registry: what of Python's builtins and standard
library is differentiated, run plainly, refused, or left to the transform.

    python -m bytegrad.primitives.python_coverage          # rewrite docs/python.md
"""
from __future__ import annotations

import bisect
import builtins
import cmath
import collections
import copy
import functools
import heapq
import itertools
import math
import operator
import os
import statistics
import sys
import types

from ..runtime.rules import record_of

_MODULES = (builtins, math, cmath, operator, functools, itertools, heapq, bisect, statistics,
            collections, copy)
_TYPES = (list, tuple, dict, set, frozenset, float, int, complex, str, collections.deque,
          collections.OrderedDict, collections.defaultdict, collections.Counter, types.SimpleNamespace)

_CONSTRUCTS = """\
| construct | status |
|---|---|
| set displays `{a, b}`, `{*xs}`, set comprehensions | differentiated: a set's gradient is a dict from each item to its gradient; of equal items the set holds the first it was given (as CPython does), which alone gets the gradient (`{x, x}` gives `x` its gradient once) |
| `s \\| t`, `s & t`, `s - t`, `s ^ t` on sets; iterating a set, `sum`/`min`/`max`/`sorted`/`list`/`tuple`/`zip`/`enumerate`/`map`/`filter`/`f(*s)` of one | differentiated: each item's gradient goes to the object the result holds, found by identity |
| `s.add(x)`, `s \\|= t`, `s -= t`, … on a set of differentiable items | refused (`NotImplementedError` naming your line): build a new set, `s = s \\| {x}` |
| `d \\| e` on dicts | differentiated: a key in both keeps the right operand's value, which gets its gradient |
| `d \\|= e` on dicts | differentiated as `d.update(e)`, a change in place |
| `x.__mul__(y)`, `float.__add__(x, y)`, `y.__rsub__(x)`, `x.__neg__()` on numbers and arrays | differentiated as their operators; `NotImplemented` (no gradient) where Python's is |
| generator expressions, generator functions (`yield`, `yield from`, `send`), `map`, `filter`, `zip`/`enumerate` of an iterator | differentiated lazily: each item is computed when it is taken, as in Python (the README says what is refused) |
| everything else | see the table "What is supported" in the README |
"""


def _status(f):
    r = record_of(f)
    if r is None:
        return None, None
    if r.fn is not None:
        note = r.note or ""
        return ("refused" if note.startswith("refused") else "rule"), note
    return ("plain" if r.nondiff else None), None


def _entries():
    """``{section: {name: note}}`` for every public callable of the modules and types."""
    out = {k: {} for k in ("rule", "plain", "refused", "python", "none")}
    seen = set()

    def add(name, f):
        if id(f) in seen or not callable(f) or isinstance(f, type) and issubclass(f, BaseException):
            return
        seen.add(id(f))
        kind, note = _status(f)
        if kind is None:
            kind = "python" if type(f) is types.FunctionType else "none"
        out[kind][name] = note or ""

    for m in _MODULES:
        prefix = "" if m is builtins else m.__name__ + "."
        for n in dir(m):
            f = getattr(m, n)
            home = (getattr(f, "__module__", None) or m.__name__).lstrip("_")
            if not n.startswith("_") and home == m.__name__:  # (not what it imported)
                add(prefix + n, f)
    for t in _TYPES:
        prefix = "" if t.__module__ == "builtins" else t.__module__ + "."
        for n, f in vars(t).items():
            if not n.startswith("_") or record_of(f) is not None:
                add(f"{prefix}{t.__name__}.{n}", getattr(t, n))
    add("itertools.chain.from_iterable", itertools.chain.from_iterable)
    return out


_TITLES = (("rule", "Differentiated by a rule"),
           ("plain", "Run plainly, no gradient"),
           ("refused", "Refused with an error naming your line"),
           ("python", "Python code, differentiated through the transform as your code is, "
                      "not each tested (generator functions among them lazily, as generators)"),
           ("none", "No rule: `NoRuleError` when a differentiable value reaches them (run "
                    "plainly otherwise)"))


def render() -> str:
    import bytegrad  # noqa: F401  (registers every rule)
    entries = _entries()
    lines = ["# Python coverage", "",
             "Generated from the rule registry by `python -m bytegrad.primitives.python_coverage` "
             f"on CPython {version()}",
             "(other versions have a few other names); a test keeps it in step with the code.", "",
             "## Constructs", "", _CONSTRUCTS]
    lines.append(f"## Builtins and the standard library ({', '.join(m.__name__ for m in _MODULES[1:])}; "
                 f"methods of {', '.join(t.__name__ for t in _TYPES)})")
    for kind, title in _TITLES:
        names = sorted(entries[kind], key=str.lower)
        lines += ["", f"### {title} ({len(names)})", ""]
        if any(entries[kind].values()):
            lines += ["| callable | conditions |", "|---|---|"]
            lines += [f"| `{n}` | {entries[kind][n]} |" for n in names]
        else:
            lines.append(", ".join(f"`{n}`" for n in names))
    return "\n".join(lines) + "\n"


def version() -> str:
    return "%d.%d" % sys.version_info[:2]


def path() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "python.md")


def main():
    with open(path(), "w") as f:
        f.write(render())
    print(f"wrote {path()}", file=sys.stderr)


if __name__ == "__main__":
    main()
