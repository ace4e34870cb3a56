"""CPython 3.12: what changed from 3.11 (`py311`), for the decoder and the writer.

- Comprehensions are inlined (PEP 709): ``LOAD_FAST_AND_CLEAR`` saves the loop
  variable, and an exception-table entry restores it before re-raising.  In code
  without a ``try`` or ``with`` (no handler starts with ``PUSH_EXC_INFO``) that
  entry is cleanup the lifter leaves out, as it does a generator expression's
  (which turns ``StopIteration`` into ``RuntimeError``): an exception leaves the
  function anyway.  With one, every entry is kept, so that what a comprehension
  inside a ``try`` raises restores its variable on the way to the handler.
- ``FOR_ITER`` jumps past the ``END_FOR`` at its target when the iterator is done.
- ``RETURN_CONST``, ``BINARY_SLICE``/``STORE_SLICE``, ``CALL_INTRINSIC_1`` (which
  now does unary ``+`` and ``LIST_TO_TUPLE``), ``LOAD_SUPER_ATTR``, ``LOAD_ATTR``
  with the method flag, ``LOAD_FAST_CHECK``; no ``PRECALL``.
- Conditional jumps go forward only.
- A generator's code gets handlers from the compiler (``StopIteration`` to
  ``RuntimeError``; ``CLEANUP_THROW`` for ``throw`` at a ``yield from``), left out
  (`Decoder.generated`); ``SEND`` no longer pops its receiver, ``END_SEND`` does (it
  goes: the lifter's ``SEND`` is 3.11's); ``YIELD_VALUE``'s argument is the except
  depth, which ``close`` reads.
"""
from __future__ import annotations

import functools
import operator

from bytecode import Instr, Label, TryBegin, TryEnd
from bytecode.instr import Intrinsic1Op

from . import py311

_INTRINSIC_REFUSED = {Intrinsic1Op.INTRINSIC_IMPORT_STAR: "import *",
                      Intrinsic1Op.INTRINSIC_PRINT: "interactive expression",
                      Intrinsic1Op.INTRINSIC_ASYNC_GEN_WRAP: "async generator",
                      Intrinsic1Op.INTRINSIC_STOPITERATION_ERROR: "generator (yield)"}


class Decoder(py311.Decoder):
    UNSUPPORTED = {**py311.UNSUPPORTED, "LOAD_FROM_DICT_OR_DEREF": "class body",
                   "LOAD_FROM_DICT_OR_GLOBALS": "class body", "LOAD_LOCALS": "class body",
                   "CALL_INTRINSIC_2": "type parameters or except*",
                   "CLEANUP_THROW": "yield from / await"}

    @functools.cached_property
    def at(self):
        """Label → its position in ``self.items``."""
        return {x: i for i, x in enumerate(self.items) if isinstance(x, Label)}

    @functools.cached_property
    def handles(self):
        """Whether the code has a ``try`` or a ``with``: an entry whose handler starts
        with ``PUSH_EXC_INFO`` (the others are the compiler's cleanup)."""
        return any(isinstance(x, TryBegin) and self.first_name(self.at[x.target]) == "PUSH_EXC_INFO"
                   for x in self.items)

    @functools.cached_property
    def generated(self):
        """The handlers a generator's code gets from the compiler: turning a
        ``StopIteration`` raised inside it into ``RuntimeError`` (the runtime's wrapper of a
        differentiated generator does that), and passing what ``throw`` raises at a ``yield
        from`` on (which bytegrad refuses).  (Found before the items are decoded, which
        reuses ``at`` as the position in the stream.)"""
        out = set()
        for x in self.items:
            first = self.first(self.at[x.target]) if isinstance(x, TryBegin) else None
            if first is not None and (first.name == "CLEANUP_THROW" or first.name == "CALL_INTRINSIC_1"
                                      and first.arg == Intrinsic1Op.INTRINSIC_STOPITERATION_ERROR):
                out.add(x.target)
        return out

    def first(self, i):
        """The first instruction from ``self.items[i]`` on."""
        items = self.items
        return next((items[k] for k in range(i, len(items)) if isinstance(items[k], Instr)), None)

    def first_name(self, i):
        """The name of the first instruction from ``self.items[i]`` on."""
        first = self.first(i)
        return first and first.name

    def reached(self, items):
        """The items a jump, a fall-through or (where the code has a ``try`` or a
        ``with``) an exception reaches: without one, the compiler's cleanup handlers
        are left out."""
        at, seen, todo = self.at, set(), [0]
        while todo:
            i = todo.pop()
            while i < len(items) and i not in seen:
                seen.add(i)
                x = items[i]
                if isinstance(x, Instr) and x.has_jump() or isinstance(x, TryBegin) and self.handles \
                        and x.target not in self.generated:
                    todo.append(at[x.arg if isinstance(x, Instr) else x.target])
                if isinstance(x, Instr) and x.is_final():
                    break
                i += 1
        # (an entry's end often follows a jump: it marks where the range ends, reached or not)
        return [x for i, x in enumerate(items) if i in seen or isinstance(x, (TryBegin, TryEnd))]

    def exception_table(self, entry):
        if not self.handles:  # (else the entries are cleanup, which only an exception needs)
            return
        if isinstance(entry, TryBegin) and entry.target in self.generated:
            self.out.append(self.op("TRY", None))  # (entries do not nest: none covers its range)
        else:
            super().exception_table(entry)

    def instr(self, ins):
        if ins.name == "RETURN_CONST":
            return self.instr(Instr("LOAD_CONST", ins.arg, lineno=ins.lineno)) \
                + self.instr(Instr("RETURN_VALUE", lineno=ins.lineno))
        return super().instr(ins)

    def op_END_FOR(self, ins):
        return []

    def op_END_SEND(self, ins):  # (the lifter's SEND pops the receiver, as 3.11's did)
        return []

    def op_LOAD_ATTR(self, ins):
        method, name = ins.arg
        return [self.op("LOAD_METHOD" if method else "LOAD_ATTR", name)]

    def op_LOAD_SUPER_ATTR(self, ins):
        """``super, cls, self`` on the stack → ``super(cls, self).name``."""
        method, _, name = ins.arg
        under = [self.op("PUSH_NULL"), self.op("SWAP", 4), self.op("SWAP", 3), self.op("SWAP", 2)]
        return under + [self.op("CALL", 2), self.op("LOAD_METHOD" if method else "LOAD_ATTR", name)]

    def op_LOAD_FAST_CHECK(self, ins):
        return [self.op("LOAD_FAST", ins.arg)]

    def op_BINARY_SLICE(self, ins):
        return [self.op("BUILD_SLICE", 2), self.op("BINARY_SUBSCR")]

    def op_STORE_SLICE(self, ins):
        return [self.op("BUILD_SLICE", 2), self.op("STORE_SUBSCR")]

    def op_CALL_INTRINSIC_1(self, ins):
        if ins.arg == Intrinsic1Op.INTRINSIC_UNARY_POSITIVE:
            return [self.op("OPERATOR", (operator.pos, 1))]
        if ins.arg == Intrinsic1Op.INTRINSIC_LIST_TO_TUPLE:
            return [self.op("LIST_TO_TUPLE")]
        self.fail(_INTRINSIC_REFUSED.get(ins.arg, f"bytecode CALL_INTRINSIC_1 {ins.arg.name}"))


class Writer(py311.Writer):
    LOOP_EXIT = (("END_FOR",),)  # which FOR_ITER jumps past

    def load_attr(self, name):
        return [("LOAD_ATTR", (False, name))]

    def load_method(self, name):
        return [("LOAD_ATTR", (True, name))]

    def unary(self, name):
        if name == "UNARY_POSITIVE":
            return [("CALL_INTRINSIC_1", Intrinsic1Op.INTRINSIC_UNARY_POSITIVE)]
        return [(name,)]

    def call(self, n, kwnames=()):
        return ([("KW_NAMES", tuple(kwnames))] if kwnames else []) + [("CALL", n)]

    def yield_value(self):
        # (the except depth YIELD_VALUE names, above 1: ``close`` raises GeneratorExit there,
        # which is right inside a try and costs nothing elsewhere)
        return [("YIELD_VALUE", 2), ("RESUME", 1)]

    def jump_if(self, when, label, forward):
        if forward:
            return [(f"POP_JUMP_IF_{str(when).upper()}", label)]
        skip = Label()
        return [(f"POP_JUMP_IF_{str(not when).upper()}", skip), ("JUMP_BACKWARD", label), skip]
