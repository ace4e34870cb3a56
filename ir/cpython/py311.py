"""CPython 3.11: the instruction stream the lifter reads is 3.11's, normalised.

The decoder (`Decoder`) rewrites one instruction at a time; the writer (`Writer`)
names the instructions the emitter produces.  The later versions subclass both
and override only what changed.
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, NamedTuple

from bytecode import Bytecode, Compare, Instr, Label, TryBegin, TryEnd

from ..errors import UnsupportedError


class Op(NamedTuple):
    name: str
    arg: Any
    line: int | None


# BINARY_OP's and COMPARE_OP's argument numbering (the same on 3.11–3.13)
BINARY_OPS = [operator.add, operator.and_, operator.floordiv, operator.lshift, operator.matmul,
              operator.mul, operator.mod, operator.or_, operator.pow, operator.rshift,
              operator.sub, operator.truediv, operator.xor,
              operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift, operator.imatmul,
              operator.imul, operator.imod, operator.ior, operator.ipow, operator.irshift,
              operator.isub, operator.itruediv, operator.ixor]
COMPARE_OPS = [operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]
UNARY_OPS = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos,
             "UNARY_NOT": operator.not_, "UNARY_INVERT": operator.invert}

UNSUPPORTED = {
    "BEFORE_ASYNC_WITH": "async with statement",
    "CHECK_EG_MATCH": "except*",
    "GET_AWAITABLE": "await",
    "GET_AITER": "async for",
    "GET_ANEXT": "async for",
    "ASYNC_GEN_WRAP": "async generator",
    "LOAD_BUILD_CLASS": "class definition",
    "SETUP_ANNOTATIONS": "annotations",
    "IMPORT_STAR": "import *",
    "PRINT_EXPR": "interactive expression",
    "LOAD_NAME": "module-level code",
    "STORE_NAME": "module-level code",
}

_FLAGS = {  # flag → construct, and the opcode whose line to report (else the def line)
    inspect.CO_COROUTINE: ("async def", None),
    inspect.CO_ASYNC_GENERATOR: ("async generator", None),
    inspect.CO_ITERABLE_COROUTINE: ("coroutine", None),
}

_CELL_OPS = {"LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE", "MAKE_CELL", "DELETE_DEREF",
             "LOAD_CLASSDEREF"}

def _strip_direction(name: str) -> str:
    return name.replace("_FORWARD", "").replace("_BACKWARD", "").replace("_NO_INTERRUPT", "")


class Decoder:
    """Turns one code object into the lifter's instruction stream: `Op`s and `Label`s.

    ``op_NAME(ins)`` returns the ops that stand for instruction ``NAME`` (the empty
    list drops it); an instruction without a method passes through unchanged.
    """

    DROP = {"RESUME", "NOP", "PRECALL", "CACHE", "EXTENDED_ARG"}
    UNSUPPORTED = UNSUPPORTED

    def __init__(self, code):
        self.code = code
        self.line = code.co_firstlineno
        self.out: list = []
        self.pop_sent = False  # the POP_TOP after RETURN_GENERATOR drops the first value sent

    def fail(self, what, line=None):
        raise UnsupportedError(what, self.code.co_filename, line or self.line, self.code.co_name)

    def refuse_flags(self):
        for flag, (what, opname) in _FLAGS.items():
            if self.code.co_flags & flag:
                lines = [i.lineno for i in Bytecode.from_code(self.code)
                         if isinstance(i, Instr) and i.name == opname and i.lineno is not None]
                self.fail(what, min(lines, default=self.code.co_firstlineno))

    def run(self) -> list:
        self.refuse_flags()
        self.items = list(Bytecode.from_code(self.code, conserve_exception_block_stackdepth=True))
        self.stream = self.reached(self.items)
        for self.at, ins in enumerate(self.stream):
            if isinstance(ins, Label):
                self.out.append(ins)
            elif isinstance(ins, (TryBegin, TryEnd)):
                self.exception_table(ins)
            elif isinstance(ins, Instr):
                self.line = ins.lineno if ins.lineno is not None else self.line
                self.out += self.instr(ins)
        return self.out

    def reached(self, items):
        """The items that can run (on 3.11, all of them)."""
        return items

    def exception_table(self, entry):
        """``TRY (handler label, stack depth, lasti)`` where an entry begins, ``TRY None``
        where it ends: the lifter sends what raises in between to the handler."""
        begin = isinstance(entry, TryBegin)
        self.out.append(self.op("TRY", (entry.target, entry.stack_depth, entry.push_lasti) if begin
                                else None))

    def instr(self, ins) -> list:
        name = ins.name
        if name in self.UNSUPPORTED:
            self.fail(self.UNSUPPORTED[name])
        if name in self.DROP:
            return []
        method = getattr(self, "op_" + name, None)
        if method is not None:
            return method(ins)
        return [self.op(_strip_direction(name), ins.arg)]

    def next_name(self):
        """The name of the instruction after the current one."""
        k = self.at + 1
        while k < len(self.stream) and not isinstance(self.stream[k], Instr):
            k += 1
        return self.stream[k].name if k < len(self.stream) else None

    def op(self, name, arg=None):
        return Op(name, arg, self.line)

    # -- one method per instruction that changes -------------------------------
    def op_RETURN_GENERATOR(self, ins):
        """Nothing: the emitter makes the generator (from `Meta.generator`); the POP_TOP
        after it drops the value the first ``next`` sends."""
        self.pop_sent = True
        return []

    def op_POP_TOP(self, ins):
        if self.pop_sent:
            self.pop_sent = False
            return []
        return [self.op("POP_TOP")]

    def op_YIELD_VALUE(self, ins):
        return [self.op("YIELD_VALUE")]

    def op_LOAD_GLOBAL(self, ins):
        push_null, name = ins.arg
        return [self.op("PUSH_NULL")] * push_null + [self.op("LOAD_GLOBAL", name)]

    def op_KW_NAMES(self, ins):
        arg = ins.arg if isinstance(ins.arg, tuple) else self.code.co_consts[ins.arg]
        return [self.op("KW_NAMES", arg)]

    def op_UNPACK_EX(self, ins):
        return [self.op("UNPACK_EX", (ins.arg & 0xFF, ins.arg >> 8))]

    def op_BINARY_OP(self, ins):
        return [self.op("OPERATOR", (BINARY_OPS[int(ins.arg)], 2))]

    def op_COMPARE_OP(self, ins):
        return [self.op("OPERATOR", (COMPARE_OPS[int(ins.arg) & 0xF], 2))]

    def op_FORMAT_VALUE(self, ins):
        return [self.op("FORMAT_VALUE", (ins.arg & 0x3, bool(ins.arg & 0x4)))]

    def unary(self, ins):
        return [self.op("OPERATOR", (UNARY_OPS[ins.name], 1))]

    op_UNARY_NEGATIVE = op_UNARY_POSITIVE = op_UNARY_NOT = op_UNARY_INVERT = unary

    def cell(self, ins):
        arg = ins.arg.name if hasattr(ins.arg, "name") else ins.arg  # bytecode's CellVar/FreeVar
        return [self.op(ins.name, arg)]

    op_LOAD_DEREF = op_STORE_DEREF = op_LOAD_CLOSURE = op_MAKE_CELL = cell
    op_DELETE_DEREF = op_LOAD_CLASSDEREF = cell


class Writer:
    """The instructions the emitter writes: ``(name, arg)`` or ``(name,)``, and Labels."""

    LOOP_EXIT = ()  # what FOR_ITER's target must start with (3.11: nothing)

    def load_attr(self, name):
        return [("LOAD_ATTR", name)]

    def load_method(self, name):
        """``obj`` → what a call of ``obj.name`` takes: the method and ``obj``, or NULL
        and the attribute."""
        return [("LOAD_METHOD", name)]

    def compare(self, i):
        return [("COMPARE_OP", Compare(i))]

    def unary(self, name):
        return [(name,)]

    def before_callee(self):
        """What goes on the stack before a callee that is called without ``self``."""
        return [("PUSH_NULL",)]

    def after_callee(self):
        return []

    def call(self, n, kwnames=()):
        names = [("KW_NAMES", tuple(kwnames))] if kwnames else []
        return names + [("PRECALL", n), ("CALL", n)]

    def yield_value(self):
        """Yield the top of the stack; the value sent in replaces it."""
        return [("YIELD_VALUE",), ("RESUME", 1)]

    def jump_if(self, when: bool, label, forward: bool):
        """Pop the top of the stack; go to ``label`` if its truth is ``when``."""
        return [(f"POP_JUMP_{'FORWARD' if forward else 'BACKWARD'}_IF_{str(when).upper()}", label)]
