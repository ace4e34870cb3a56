"""Rules for modules too costly to import with bytegrad (SciPy: 0.3 s and more),
registered when the user's code first imports them."""
from __future__ import annotations

import importlib.util
import sys

_WAITING: dict = {}  # module name → the functions that register its rules


def when_imported(name, register):
    """Call ``register(module)`` once module ``name`` has run: now, if it has."""
    if name in sys.modules:
        register(sys.modules[name])
        return
    _WAITING.setdefault(name, []).append(register)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder:
    """A meta-path finder that finds nothing itself: it wraps the loader of a module
    that rules wait for, so that they are registered right after the module runs."""

    def find_spec(self, name, path=None, target=None):
        registers = _WAITING.pop(name, None)
        if registers is None:
            return None
        if not _WAITING and self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):  # this spec's own loader instance
            run(module)
            for register in registers:
                register(module)
        spec.loader.exec_module = exec_module
        return spec
