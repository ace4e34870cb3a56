"""Everything that depends on the CPython version lives here.

`decode(code)` turns a code object into a version-neutral instruction stream for
the lifter: ``Op(name, arg, line)`` items and `bytecode.Label`s.  Jump names lose
their direction (``POP_JUMP_BACKWARD_IF_FALSE`` → ``POP_JUMP_IF_FALSE``), CPython
3.11's call protocol is normalised (``LOAD_GLOBAL (True, f)`` → ``PUSH_NULL``,
``LOAD_GLOBAL f``; ``PRECALL`` dropped), and constructs the lifter cannot handle
raise `UnsupportedError` naming the construct and the source line.
Supporting 3.12 or 3.13 means teaching this module their opcodes.

A generator expression is decoded as an eager function (a generator function is
still refused): ``RETURN_GENERATOR`` and its ``POP_TOP`` become ``BUILD_LIST 0``,
an accumulator that stays at the bottom of the stack; each ``YIELD_VALUE`` becomes
``YIELD_TO_LIST`` (append to the accumulator; the yield's value is None); the final
``LOAD_CONST None; RETURN_VALUE`` returns ``iter(accumulator)``::

    (x * x for x in .0)   →   acc = []; for x in .0: acc.append(x * x); return iter(acc)

so every item is computed when the expression is created, not when it is consumed.
"""
from __future__ import annotations

import inspect
import operator
import sys
from typing import Any, NamedTuple

from bytecode import Bytecode, Label, Instr, TryBegin, TryEnd

from .errors import UnsupportedError

if sys.version_info[:2] != (3, 11):  # pragma: no cover
    raise ImportError("bytegrad's bytecode decoder supports CPython 3.11 only")


class Op(NamedTuple):
    name: str
    arg: Any
    line: int | None


# 3.11's BINARY_OP and COMPARE_OP argument numbering
BINARY_OPS = [operator.add, operator.and_, operator.floordiv, operator.lshift, operator.matmul,
              operator.mul, operator.mod, operator.or_, operator.pow, operator.rshift,
              operator.sub, operator.truediv, operator.xor,
              operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift, operator.imatmul,
              operator.imul, operator.imod, operator.ior, operator.ipow, operator.irshift,
              operator.isub, operator.itruediv, operator.ixor]
COMPARE_OPS = [operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]
UNARY_OPS = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos,
             "UNARY_NOT": operator.not_, "UNARY_INVERT": operator.invert}

_DROP = {"RESUME", "NOP", "PRECALL", "CACHE", "EXTENDED_ARG"}

_UNSUPPORTED = {
    "BEFORE_WITH": "with statement",
    "BEFORE_ASYNC_WITH": "async with statement",
    "PUSH_EXC_INFO": "try/except/finally",
    "RERAISE": "try/except/finally",
    "CHECK_EXC_MATCH": "try/except/finally",
    "CHECK_EG_MATCH": "except*",
    "YIELD_VALUE": "generator (yield)",
    "RETURN_GENERATOR": "generator (yield)",
    "SEND": "yield from / await",
    "GET_AWAITABLE": "await",
    "GET_AITER": "async for",
    "GET_ANEXT": "async for",
    "GET_YIELD_FROM_ITER": "yield from",
    "ASYNC_GEN_WRAP": "async generator",
    "MATCH_CLASS": "match statement",
    "MATCH_MAPPING": "match statement",
    "MATCH_SEQUENCE": "match statement",
    "MATCH_KEYS": "match statement",
    "GET_LEN": "match statement",
    "LOAD_BUILD_CLASS": "class definition",
    "SETUP_ANNOTATIONS": "annotations",
    "IMPORT_STAR": "import *",
    "PRINT_EXPR": "interactive expression",
    "LOAD_NAME": "module-level code",
    "STORE_NAME": "module-level code",
}

_FLAGS = {  # flag → construct, and the opcode whose line to report (else the def line)
    inspect.CO_GENERATOR: ("generator (yield)", "YIELD_VALUE"),
    inspect.CO_COROUTINE: ("async def", None),
    inspect.CO_ASYNC_GENERATOR: ("async generator", None),
    inspect.CO_ITERABLE_COROUTINE: ("coroutine", None),
}


def _strip_direction(name: str) -> str:
    return name.replace("_FORWARD", "").replace("_BACKWARD", "").replace("_NO_INTERRUPT", "")


def is_genexpr(code) -> bool:
    """Whether ``code`` is a generator expression's (which `decode` makes eager)."""
    return code.co_name == "<genexpr>" and bool(code.co_flags & inspect.CO_GENERATOR)


# a generator expression's return (stack: accumulator, None) → return iter(accumulator)
_RETURN_ITER = [("POP_TOP", None), ("PUSH_NULL", None), ("SWAP", 2), ("LOAD_CONST", iter),
                ("SWAP", 2), ("CALL", 1), ("RETURN_VALUE", None)]


def decode(code) -> list:
    """The version-neutral instruction stream of ``code``."""
    genexpr = is_genexpr(code)
    for flag, (what, opname) in _FLAGS.items():
        if code.co_flags & flag and not (genexpr and flag == inspect.CO_GENERATOR):
            lines = [i.lineno for i in Bytecode.from_code(code)
                     if isinstance(i, Instr) and i.name == opname and i.lineno is not None]
            raise UnsupportedError(what, code.co_filename, min(lines, default=code.co_firstlineno),
                                   code.co_name)
    out = []
    line = code.co_firstlineno
    pop_sent = False  # the POP_TOP after RETURN_GENERATOR, which drops the first value sent
    for ins in Bytecode.from_code(code):
        if isinstance(ins, Label):
            out.append(ins)
            continue
        if isinstance(ins, (TryBegin, TryEnd)):
            raise UnsupportedError("try/except/finally", code.co_filename, line, code.co_name)
        if not isinstance(ins, Instr):
            continue
        line = ins.lineno if ins.lineno is not None else line
        name = ins.name
        if genexpr:
            if name == "RETURN_GENERATOR":
                out.append(Op("BUILD_LIST", 0, line))
                pop_sent = True
                continue
            if name == "POP_TOP" and pop_sent:
                pop_sent = False
                continue
            if name == "YIELD_VALUE":
                out.append(Op("YIELD_TO_LIST", None, line))
                continue
            if name == "RETURN_VALUE":
                out += [Op(n, a, line) for n, a in _RETURN_ITER]
                continue
        if name in _UNSUPPORTED:
            raise UnsupportedError(_UNSUPPORTED[name], code.co_filename, line, code.co_name)
        if name in _DROP:
            continue
        if name == "LOAD_GLOBAL":
            push_null, gname = ins.arg
            if push_null:
                out.append(Op("PUSH_NULL", None, line))
            out.append(Op("LOAD_GLOBAL", gname, line))
            continue
        if name == "KW_NAMES":
            arg = ins.arg if isinstance(ins.arg, tuple) else code.co_consts[ins.arg]
            out.append(Op(name, arg, line))
            continue
        if name == "UNPACK_EX":
            out.append(Op(name, (ins.arg & 0xFF, ins.arg >> 8), line))
            continue
        if name == "BINARY_OP":
            out.append(Op("OPERATOR", (BINARY_OPS[int(ins.arg)], 2), line))
            continue
        if name == "COMPARE_OP":
            out.append(Op("OPERATOR", (COMPARE_OPS[int(ins.arg)], 2), line))
            continue
        if name in UNARY_OPS:
            out.append(Op("OPERATOR", (UNARY_OPS[name], 1), line))
            continue
        if name == "FORMAT_VALUE":
            out.append(Op(name, (ins.arg & 0x3, bool(ins.arg & 0x4)), line))
            continue
        arg = ins.arg
        if hasattr(arg, "name") and name in ("LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE",
                                             "MAKE_CELL", "DELETE_DEREF", "LOAD_CLASSDEREF"):
            arg = arg.name  # bytecode's CellVar / FreeVar
        out.append(Op(_strip_direction(name), arg, line))
    return out
