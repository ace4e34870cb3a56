"""CPython 3.13: what changed from 3.12 (`py312`), for the decoder and the writer.

- A call's stack is ``callee, self-or-NULL, args`` (3.11/3.12: ``NULL-or-callee,
  callee-or-self, args``).  The decoder puts a pushed NULL back under the callee
  (``PUSH_NULL`` → ``PUSH_NULL; SWAP 2``; ``LOAD_GLOBAL (True, f)`` → ``PUSH_NULL;
  LOAD_GLOBAL f``), so the lifter sees the 3.11 order; the writer pushes the NULL
  after the callee.
- ``CALL_KW`` takes the keyword names from the stack, where ``KW_NAMES`` used to.
- ``LOAD_FAST_LOAD_FAST``, ``STORE_FAST_LOAD_FAST`` and ``STORE_FAST_STORE_FAST``
  are two instructions in one; ``LOAD_FAST`` of a cell loads the cell itself
  (``LOAD_CLOSURE`` is gone), as the lifter's slots hold a variable's cell.
- ``MAKE_FUNCTION`` makes a bare function and ``SET_FUNCTION_ATTRIBUTE`` adds each
  of its defaults, annotations and closure; the decoder folds them back into one
  ``MAKE_FUNCTION`` with 3.11's flags (the values sit on the stack in 3.11's order).
- ``TO_BOOL`` comes before every test: conditional jumps and ``UNARY_NOT`` take
  exact bools (the writer adds it; the lifter's tests convert by themselves, and
  a ``TO_BOOL`` that feeds no test, as in ``not not x``, is ``bool(x)``).
  ``COMPARE_OP`` has a bit that converts its result to bool.
- ``FORMAT_VALUE`` is ``CONVERT_VALUE``, then ``FORMAT_SIMPLE`` or ``FORMAT_WITH_SPEC``.
- ``FOR_ITER`` jumps past ``END_FOR; POP_TOP`` when the iterator is done.
- The ``RESUME`` after a ``YIELD_VALUE`` carries the except depth ``close`` reads.
"""
from __future__ import annotations

from bytecode import Instr

from . import py312

_CONVERSIONS = {1: str, 2: repr, 3: ascii}
_TESTS = {"POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", "UNARY_NOT"}


class Decoder(py312.Decoder):
    ended_loop = False  # after END_FOR, whose POP_TOP FOR_ITER skips as well

    def instr(self, ins):
        if ins.name == "POP_TOP" and self.ended_loop:
            self.ended_loop = False
            return []
        self.ended_loop = ins.name == "END_FOR"
        return super().instr(ins)

    def op_MAKE_FUNCTION(self, ins):
        return [self.op("MAKE_FUNCTION", 0)]

    def op_SET_FUNCTION_ATTRIBUTE(self, ins):
        made = self.out.pop()  # the MAKE_FUNCTION, which the compiler puts right before
        if made.name != "MAKE_FUNCTION":
            self.fail("bytecode SET_FUNCTION_ATTRIBUTE away from its MAKE_FUNCTION")
        return [self.op("MAKE_FUNCTION", made.arg | int(ins.arg))]

    def op_TO_BOOL(self, ins):
        """Nothing before a test, which takes the truth of its operand by itself;
        elsewhere (``not not x``), ``bool(x)``."""
        if self.next_name() in _TESTS:
            return []
        return [self.op("OPERATOR", (bool, 1))]

    def op_PUSH_NULL(self, ins):
        return [self.op("PUSH_NULL"), self.op("SWAP", 2)]

    def op_LOAD_FAST(self, ins):  # of a cell: the cell, which is what the slot holds
        return [self.op("LOAD_FAST", getattr(ins.arg, "name", ins.arg))]

    def pair(first, second):
        def decode(self, ins):
            a, b = ins.arg
            return self.instr(Instr(first, a, lineno=ins.lineno)) \
                + self.instr(Instr(second, b, lineno=ins.lineno))
        decode.__doc__ = f"``{first} a; {second} b``."
        return decode

    op_LOAD_FAST_LOAD_FAST = pair("LOAD_FAST", "LOAD_FAST")
    op_STORE_FAST_LOAD_FAST = pair("STORE_FAST", "LOAD_FAST")
    op_STORE_FAST_STORE_FAST = pair("STORE_FAST", "STORE_FAST")
    del pair

    def op_CALL_KW(self, ins):
        names = self.out.pop()  # the LOAD_CONST of the names, which the compiler puts last
        if names.name != "LOAD_CONST" or type(names.arg) is not tuple:
            self.fail("bytecode CALL_KW without its keyword names")
        return [self.op("KW_NAMES", names.arg), self.op("CALL", ins.arg)]

    def op_CONVERT_VALUE(self, ins):
        return [self.op("OPERATOR", (_CONVERSIONS[int(ins.arg)], 1))]

    def op_FORMAT_SIMPLE(self, ins):
        return [self.op("FORMAT_VALUE", (0, False))]

    def op_FORMAT_WITH_SPEC(self, ins):
        return [self.op("FORMAT_VALUE", (0, True))]


class Writer(py312.Writer):
    LOOP_EXIT = (("END_FOR",), ("POP_TOP",))  # which FOR_ITER jumps past

    def unary(self, name):
        return ([("TO_BOOL",)] if name == "UNARY_NOT" else []) + super().unary(name)

    def before_callee(self):
        return []

    def after_callee(self):
        return [("PUSH_NULL",)]

    def call(self, n, kwnames=()):
        if kwnames:
            return [("LOAD_CONST", tuple(kwnames)), ("CALL_KW", n)]
        return [("CALL", n)]

    def yield_value(self):
        # (RESUME 1 without the flag of an except depth of 1: ``close`` raises GeneratorExit)
        return [("YIELD_VALUE", 0), ("RESUME", 1)]

    def jump_if(self, when, label, forward):
        return [("TO_BOOL",)] + super().jump_if(when, label, forward)
