"""NumPy, ``math`` and ``cmath`` as they were when bytegrad was imported.

Rules compute derivatives with these modules' functions (the rule of ``np.cos`` calls
``np.sin``).  Looked up in the module when a pullback runs, a rebinding such as
``np.sin = np.cos`` (a test double, a monkeypatch) would change the derivative of
``np.cos``.  The rules use these snapshots instead; the functions themselves are the
same objects, so rules are still registered for, and found by, the modules' callables.
"""
from __future__ import annotations

import cmath as _cmath
import math as _math
import types
import warnings

import numpy


def _snapshot(module, depth=1):
    with warnings.catch_warnings():  # reading a deprecated name (np.char.chararray) is no use of it
        warnings.simplefilter("ignore", DeprecationWarning)
        names = {n: getattr(module, n) for n in dir(module) if not n.startswith("__")}
    if depth:
        for n, v in names.items():
            if type(v) is types.ModuleType and v.__name__.startswith(module.__name__ + "."):
                names[n] = _snapshot(v, depth - 1)
    return types.SimpleNamespace(**names)


np = _snapshot(numpy)
math = _snapshot(_math)
cmath = _snapshot(_cmath)
