"""Generate docs/numpy.md from the rule registry: what NumPy (and scipy.special) is differentiated,
under which conditions, and what runs plainly without a gradient.

    python -m bytegrad.primitives.coverage          # rewrite docs/numpy.md
"""
from __future__ import annotations

import os
import sys

import numpy as np

from ..runtime.rules import RULES

_NAMESPACES = (("np", np), ("np.linalg", np.linalg), ("np.fft", np.fft), ("np.random", np.random))
try:  # SciPy is optional; importing scipy.special and scipy.linalg registers their rules
    import scipy.linalg
    import scipy.special
except ImportError:
    pass
else:
    _NAMESPACES += (("scipy.special", scipy.special), ("scipy.linalg", scipy.linalg))


def _public_names():
    names = {}
    for prefix, mod in _NAMESPACES:
        for n in dir(mod):
            if not n.startswith("_"):
                obj = getattr(mod, n)
                names.setdefault(id(obj), f"{prefix}.{n}")
    for n in dir(np.ndarray):
        if not n.startswith("_"):
            names.setdefault(id(getattr(np.ndarray, n)), f"ndarray.{n}")
    return names


def _numpy_entries(callables, names):
    out = {}
    for f in callables:
        name = names.get(id(f))
        if name is not None:
            out.setdefault(name, f)
    return out


def render() -> str:
    import bytegrad  # noqa: F401  (registers every rule)
    names = _public_names()
    rules = _numpy_entries((f for f, r in RULES.items() if r.fn is not None), names)
    plain = _numpy_entries((f for f, r in RULES.items() if r.nondiff), names)
    lines = ["# NumPy coverage", "",
             "Generated from the rule registry by `python -m bytegrad.primitives.coverage`;",
             "a test keeps it in step with the code.", "",
             f"## Differentiated ({len(rules)})", "",
             "| function | conditions |", "|---|---|"]
    for name in sorted(rules, key=str.lower):
        lines.append(f"| `{name}` | {RULES[rules[name]].note or ''} |")
    lines += ["", f"## Run plainly, no gradient ({len(plain)})", "",
              ", ".join(f"`{n}`" for n in sorted(plain, key=str.lower)), "",
              "Any other NumPy function whose implementation is Python code (`np.vander`, "
              "`np.block`, `np.linalg.vector_norm`, `np.put_along_axis`, ...) is differentiated "
              "through that code, as yours is; what that code does that cannot be (`np.meshgrid` "
              "assigns `a.shape`) is refused naming your line and the function. Any other that "
              "receives a differentiable array raises `bytegrad.NoRuleError` naming it, with your "
              "file and line; add a rule with `@bytegrad.rule`.", ""]
    return "\n".join(lines)


def path() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "numpy.md")


def main():
    os.makedirs(os.path.dirname(path()), exist_ok=True)
    with open(path(), "w") as f:
        f.write(render())
    print(f"wrote {path()}", file=sys.stderr)


if __name__ == "__main__":
    main()
