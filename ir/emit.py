"""Emit IR back to a real code object.

Every variable becomes a local named after it (``%3``); block arguments are
assigned on the branch that passes them.  Calls of operations CPython has an
instruction for go back to that instruction (``operator.add`` → ``BINARY_OP``,
``operator.getitem`` → ``BINARY_SUBSCR``, ``getattr(x, "a")`` → ``LOAD_ATTR``, …),
so emitted code runs at the speed of the original.  The emitted function takes
the entry block's arguments positionally.
"""
from __future__ import annotations

import operator
import types

from bytecode import Bytecode, Compare, Instr, Label

from . import ops
from .decode import BINARY_OPS, COMPARE_OPS, UNARY_OPS
from .ir import Global, Slot, Var

_BINARY = {f: i for i, f in enumerate(BINARY_OPS)}
_COMPARE = {f: Compare(i) for i, f in enumerate(COMPARE_OPS)}
_UNARY = {f: name for name, f in UNARY_OPS.items()}
_BUILD = {ops.build_tuple: "BUILD_TUPLE", ops.build_list: "BUILD_LIST",
          ops.build_set: "BUILD_SET", ops.build_string: "BUILD_STRING"}


_NOARG = object()


def _hashable(x):
    try:
        hash(x)
        return True
    except TypeError:
        return False


class _Emitter:
    def __init__(self, ir):
        self.ir = ir
        self.out = []
        self.labels = [Label() for _ in ir.blocks]
        self.used = {x for _, _, st in ir.statements() for x in st.operands() if isinstance(x, Var)}
        self.used |= {x for blk in ir.blocks for br in blk.branches for x in br.operands()
                      if isinstance(x, Var)}

    def i(self, name, arg=_NOARG, line=None):
        self.out.append(Instr(name, lineno=line) if arg is _NOARG else Instr(name, arg, lineno=line))

    def load(self, x, line):
        if isinstance(x, (Var, Slot)):
            self.i("LOAD_FAST", repr(x), line)
        elif isinstance(x, Global):
            self.i("LOAD_GLOBAL", (False, x.name), line)
        else:
            self.i("LOAD_CONST", x, line)

    def loads(self, xs, line):
        for x in xs:
            self.load(x, line)

    def stmt(self, v, st):
        line, fn, args = st.line, st.fn, st.args
        native = not st.kw and not isinstance(fn, (Var, Global)) and _hashable(fn)
        if native and fn is ops.identity:
            self.load(args[0], line)
        elif native and fn in _BINARY and len(args) == 2:
            self.loads(args, line)
            self.i("BINARY_OP", _BINARY[fn], line)
        elif native and fn in _COMPARE and len(args) == 2:
            self.loads(args, line)
            self.i("COMPARE_OP", _COMPARE[fn], line)
        elif native and fn in (operator.is_, operator.is_not) and len(args) == 2:
            self.loads(args, line)
            self.i("IS_OP", int(fn is operator.is_not), line)
        elif native and fn in (operator.contains, ops.not_contains) and len(args) == 2:
            self.loads(args[::-1], line)
            self.i("CONTAINS_OP", int(fn is ops.not_contains), line)
        elif native and fn in _UNARY and len(args) == 1:
            self.loads(args, line)
            self.i(_UNARY[fn], line=line)
        elif native and fn is operator.getitem and len(args) == 2:
            self.loads(args, line)
            self.i("BINARY_SUBSCR", line=line)
        elif native and fn is operator.setitem and len(args) == 3:
            self.loads([args[2], args[0], args[1]], line)
            self.i("STORE_SUBSCR", line=line)
            return self.none(v, line)
        elif native and fn is getattr and len(args) == 2 and type(args[1]) is str:
            self.load(args[0], line)
            self.i("LOAD_ATTR", args[1], line)
        elif native and fn is setattr and len(args) == 3 and type(args[1]) is str:
            self.loads([args[2], args[0]], line)
            self.i("STORE_ATTR", args[1], line)
            return self.none(v, line)
        elif native and fn in _BUILD:
            self.loads(args, line)
            self.i(_BUILD[fn], len(args), line)
        elif native and fn is slice and len(args) in (2, 3):
            self.loads(args, line)
            self.i("BUILD_SLICE", len(args), line)
        else:
            self.call(fn, args, st.kw, line)
        self.store(v, line)

    def call(self, fn, args, kw, line):
        self.i("PUSH_NULL", line=line)
        self.load(fn, line)
        self.loads(args, line)
        self.loads(kw.values(), line)
        if kw:
            self.i("KW_NAMES", tuple(kw), line)
        n = len(args) + len(kw)
        self.i("PRECALL", n, line)
        self.i("CALL", n, line)

    def store(self, v, line):
        if v in self.used or isinstance(v, Slot):
            self.i("STORE_FAST", repr(v), line)
        else:
            self.i("POP_TOP", line=line)

    def none(self, v, line):
        if v in self.used or isinstance(v, Slot):
            self.load(None, line)
            self.i("STORE_FAST", repr(v), line)

    def jump(self, b, t, line, cond=None):
        fwd = t > b
        if cond is None:
            self.i("JUMP_FORWARD" if fwd else "JUMP_BACKWARD", self.labels[t], line)
        else:
            self.i(f"POP_JUMP_{'FORWARD' if fwd else 'BACKWARD'}_IF_{cond}", self.labels[t], line)

    def assign(self, t, args, line):
        params = self.ir.blocks[t].args
        pairs = [(p, a) for p, a in zip(params, args) if p is not a]
        self.loads([a for _, a in pairs], line)
        for p, _ in reversed(pairs):
            self.i("STORE_FAST", repr(p), line)

    def branch(self, b, br, last):
        line = br.line
        if br.kind == "return":
            self.load(br.args[0], line)
            self.i("RETURN_VALUE", line=line)
        elif br.kind == "raise":
            self.load(br.args[0], line)
            self.i("RAISE_VARARGS", 1, line)
        elif br.cond is None:
            self.assign(br.target, br.args, line)
            if not (last and br.target == b + 1):
                self.jump(b, br.target, line)
        elif not any(p is not a for p, a in zip(self.ir.blocks[br.target].args, br.args)):
            self.load(br.cond, line)
            self.jump(b, br.target, line, "FALSE")
        else:
            skip = Label()
            self.load(br.cond, line)
            self.i("POP_JUMP_FORWARD_IF_TRUE", skip, line)
            self.assign(br.target, br.args, line)
            self.jump(b, br.target, line)
            self.out.append(skip)

    def run(self):
        ir = self.ir
        self.i("RESUME", 0, ir.meta.firstlineno)
        for b, blk in enumerate(ir.blocks):
            self.out.append(self.labels[b])
            for v, st in blk.stmts:
                self.stmt(v, st)
            for k, br in enumerate(blk.branches):
                self.branch(b, br, k == len(blk.branches) - 1)
        code = Bytecode(self.out)
        code.name = ir.meta.name
        code.filename = ir.meta.filename
        code.first_lineno = ir.meta.firstlineno
        code.argnames = [repr(a) for a in ir.blocks[0].args]
        code.argcount = len(code.argnames)
        code.flags = 0x1 | 0x2  # CO_OPTIMIZED | CO_NEWLOCALS
        return code.to_code()


def emit(ir) -> types.CodeType:
    """A code object computing what ``ir`` computes; its parameters are block 1's arguments."""
    return _Emitter(ir).run()


def function(ir, globals_: dict, name: str | None = None) -> types.FunctionType:
    """``emit`` wrapped into a function that resolves globals in ``globals_``."""
    fn = types.FunctionType(emit(ir), globals_, name or ir.meta.name)
    return fn
