"""Everything that depends on the CPython version lives in this package.

`decode(code)` turns a code object into the lifter's instruction stream: `Op(name,
arg, line)` items and `bytecode.Label`s, in 3.11's terms whatever the interpreter.
Jumps lose their direction (``POP_JUMP_BACKWARD_IF_FALSE`` → ``POP_JUMP_IF_FALSE``),
operators become ``OPERATOR (fn, n)``, the call protocol is 3.11's
(``LOAD_GLOBAL (True, f)`` → ``PUSH_NULL; LOAD_GLOBAL f``; no ``PRECALL``), and the
constructs the lifter cannot handle raise `UnsupportedError` naming the construct
and the source line.  `WRITER` names the instructions the emitter writes.

Each version is a module, ``py311``, ``py312``, ``py313``; each subclasses the one
before and overrides only what its interpreter changed (the module docstrings
list it).

A generator (a generator function's code, or a generator expression's) is lifted as
it is: ``RETURN_GENERATOR`` and its ``POP_TOP`` go (the emitter puts them back, from
`Meta.generator`), ``YIELD_VALUE`` is ``yield`` in 3.11's terms, ``SEND`` (``yield
from``) 3.11's, which pops its receiver when that returns (3.12's ``END_SEND`` goes);
the handlers the compiler adds to a generator's code (3.12: ``StopIteration`` to
``RuntimeError``, ``throw`` at a ``yield from``) are left out.
"""
from __future__ import annotations

import sys

SUPPORTED = ((3, 11), (3, 12), (3, 13))

if sys.version_info[:2] not in SUPPORTED:  # pragma: no cover
    raise ImportError(f"bytegrad supports CPython {', '.join('%d.%d' % v for v in SUPPORTED)}; "
                      f"this is {'%d.%d.%d' % tuple(sys.version_info[:3])}. Install bytegrad in an environment "
                      f"made with one of those.")

from .py311 import BINARY_OPS, COMPARE_OPS, UNARY_OPS, Op  # noqa: E402

if sys.version_info[:2] == (3, 11):
    from .py311 import Decoder, Writer
elif sys.version_info[:2] == (3, 12):
    from .py312 import Decoder, Writer
else:
    from .py313 import Decoder, Writer

WRITER = Writer()


def decode(code) -> list:
    """The lifter's instruction stream for ``code`` on the running interpreter."""
    return Decoder(code).run()


__all__ = ["BINARY_OPS", "COMPARE_OPS", "UNARY_OPS", "Op", "SUPPORTED", "WRITER", "decode"]
