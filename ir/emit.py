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
import weakref

from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd
from bytecode.instr import InstrLocation

from . import ops
from .cfg import CFG
from .cpython import BINARY_OPS, COMPARE_OPS, UNARY_OPS, WRITER
from .ir import Global, Slot, Var

_CAUGHT = Slot("caught")  # where a handler stub keeps the exception

_BINARY = {f: i for i, f in enumerate(BINARY_OPS)}
_COMPARE = {f: i for i, f in enumerate(COMPARE_OPS)}
_UNARY = {f: name for name, f in UNARY_OPS.items()}
_TESTED = (ops.watch, ops.pull, ops.resolved)  # emitted as a test and two paths that load operands
_BUILD = {ops.build_tuple: "BUILD_TUPLE", ops.build_list: "BUILD_LIST",
          ops.build_set: "BUILD_SET", ops.build_string: "BUILD_STRING"}


# Fast paths written inline in a function with at most this many: each is some 40
# instructions where the call is 8, and a long function's statements mostly run once,
# while its emission time grows with its size (300 statements took twice as long)
_INLINE_LIMIT = 64


def _fast(st) -> bool:
    """Whether ``st`` calls a function with a fast path to write inline (`ops.Inline`)."""
    spec = getattr(st.fn, "inline", None)
    return not st.kw and type(spec) is ops.Inline and \
        len(st.args) == len(spec.guards) + (spec.pushes is not None)


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
        self.uses, self.user_block = {}, {}
        for b, blk in enumerate(ir.blocks):
            xs = [x for _, st in blk.stmts for x in st.operands()]
            xs += [x for br in blk.branches for x in br.operands()]
            for x in xs:
                if isinstance(x, Var):
                    self.uses[x] = self.uses.get(x, 0) + 1
                    self.user_block[x] = b
        fast = [st for _, _, st in ir.statements() if _fast(st)]
        self.fast_ok = len(fast) <= _INLINE_LIMIT
        self.twice = {x for _, _, st in ir.statements() if st.fn in _TESTED or self.fast_ok and _fast(st)
                      for x in st.operands() if isinstance(x, Var)}  # loaded on two paths
        self.alias = {}    # var → var holding the same object (a loop's iterator)
        self.inline = {}   # var → node to emit in place of loading it
        self.record = None
        self.skip = {}     # statements the FOR_ITER and unpack lowerings emit themselves
        self.unpacks = {}  # var of an ops.unpack → {item index: var}
        self.stubs = []    # (label, block) of each catching block's handler stub
        self.made = {}     # (name, arg, line) → its instruction (see `i`)
        self.find_unpacks()
        self.dies = {}     # var → the values that die where it is computed (`find_deaths`)
        self.stored = set()  # the block's values stored in locals so far

    def i(self, name, arg=_NOARG, line=None):
        # (an instruction once a function: the library checks each it makes, and a third
        # are repeats; never a constant, whose equal values may differ: 0.0 and -0.0)
        key = (name, arg, line) if name != "LOAD_CONST" and type(arg) in _PLAIN else None
        x = self.made.get(key) if key else None
        if x is None:
            loc = _LOCATIONS.get(line) or _LOCATIONS.setdefault(line, InstrLocation(line, None, None, None))
            x = Instr(name, location=loc) if arg is _NOARG else Instr(name, arg, location=loc)
            if key:
                self.made[key] = x
        self.out.append(x)

    def put(self, items, line):
        """Append what `WRITER` names: ``(name, arg)``, ``(name,)`` or a Label."""
        for x in items:
            self.out.append(x) if isinstance(x, Label) else self.i(*x, line=line)

    def load(self, x, line):
        x = self.alias.get(x, x)
        if self.record is not None and isinstance(x, Var):
            self.record.append(x)
        node = self.inline.pop(x, None) if isinstance(x, Var) else None
        if node is not None:
            self.node(node)
        elif isinstance(x, (Var, Slot)):
            self.i("LOAD_FAST", repr(x), line)
        elif isinstance(x, Global):
            self.i("LOAD_GLOBAL", (False, x.name), line)
        else:
            self.i("LOAD_CONST", x, line)

    def loads(self, xs, line):
        for x in xs:
            self.load(x, line)

    def code(self, v, st):
        """Emit ``st``, leaving its value on the stack; False if it has none."""
        line, fn, args = st.line, st.fn, st.args
        native = not st.kw and not isinstance(fn, (Var, Global)) and _hashable(fn)
        if native and fn is ops.identity:
            self.load(args[0], line)
        elif native and fn is ops.pull and len(args) == 3:
            self.pull(args, line)
        elif native and fn is ops.watch:
            self.watch(args, line)
        elif native and fn is ops.resolved and len(args) == 3:
            self.resolved(args, line)
        elif self.fast_ok and _fast(st):
            self.fast(fn, args, line)
        elif native and fn is ops.yield_ and len(args) == 1:
            self.load(args[0], line)
            self.put(WRITER.yield_value(), line)
        elif native and fn in _BINARY and len(args) == 2:
            self.loads(args, line)
            self.i("BINARY_OP", _BINARY[fn], line)
        elif native and fn in _COMPARE and len(args) == 2:
            self.loads(args, line)
            self.put(WRITER.compare(_COMPARE[fn]), line)
        elif native and fn in (operator.is_, operator.is_not) and len(args) == 2:
            self.loads(args, line)
            self.i("IS_OP", int(fn is operator.is_not), line)
        elif native and fn in (operator.contains, ops.not_contains) and len(args) == 2:
            self.loads(args[::-1], line)
            self.i("CONTAINS_OP", int(fn is ops.not_contains), line)
        elif native and fn in _UNARY and len(args) == 1:
            self.loads(args, line)
            self.put(WRITER.unary(_UNARY[fn]), line)
        elif native and fn is operator.getitem and len(args) == 2:
            self.loads(args, line)
            self.i("BINARY_SUBSCR", line=line)
        elif native and fn is operator.setitem and len(args) == 3:
            self.loads([args[2], args[0], args[1]], line)
            self.i("STORE_SUBSCR", line=line)
            return False
        elif native and fn is getattr and len(args) == 2 and type(args[1]) is str:
            self.load(args[0], line)
            self.put(WRITER.load_attr(args[1]), line)
        elif native and fn is setattr and len(args) == 3 and type(args[1]) is str:
            self.loads([args[2], args[0]], line)
            self.i("STORE_ATTR", args[1], line)
            return False
        elif native and fn in _BUILD:
            self.loads(args, line)
            self.i(_BUILD[fn], len(args), line)
        elif native and fn is slice and len(args) in (2, 3):
            self.loads(args, line)
            self.i("BUILD_SLICE", len(args), line)
        else:
            self.call(fn, args, st.kw, line)
        return True

    # -- expression trees: a value used once, later in its own block, is computed
    #    where it is used instead of going through a local (as CPython does) -----
    def load_order(self, v, st):
        if self.fast_ok and _fast(st):  # (its operands are loaded twice, so none is a pending node: no dry run)
            return list(st.args)
        out, self.out, self.record, inline, self.inline = self.out, [], [], self.inline, {}
        self.code(v, st)
        order = self.record
        self.out, self.record, self.inline = out, None, inline
        return order

    def deferrable(self, b, v, st):
        return isinstance(v, Var) and self.uses.get(v) == 1 and self.user_block.get(v) == b \
            and v not in self.twice \
            and st.fn not in (operator.setitem, setattr) if _hashable(st.fn) else False

    def take(self, order, pending):
        """The pending nodes ``order`` consumes: the tail of ``pending``, in order."""
        names = [n[0] for n in pending]
        used = [x for x in order if x in names]
        k = len(used)
        if k and len(set(used)) == k and used == names[len(names) - k:]:
            taken = pending[len(pending) - k:]
            del pending[len(pending) - k:]
            return {n[0]: n for n in taken}
        if used:
            self.flush(pending)
        return {}

    def process(self, b, v, st, pending):
        if v in self.unpacks:
            return self.unpack(v, st, pending)
        node = (v, st, self.take(self.load_order(v, st), pending))
        if self.deferrable(b, v, st):
            pending.append(node)
        else:
            self.flush(pending)
            self.node(node, store=True)

    def node(self, node, store=False):
        v, st, children = node
        saved, self.inline = self.inline, dict(children)
        value = self.code(v, st)
        self.inline = saved
        self.clear(v, st, st.line)
        if store:
            self.store(v, st.line) if value else self.none(v, st.line)

    # -- a local whose array is dead is cleared: the primal frees its temporaries as it
    #    goes, and an array kept to the end of the function would take fresh, cold memory
    #    for every one that follows it (it doubled the MLP's forward pass) -------------
    def find_deaths(self):
        """``{(var, id(statement)): [values last read there]}``: the values a block makes
        and reads only in its own statements, each at the statement that reads it last,
        of those whose end no code can see (``meta.clearable``: arrays and numbers; any
        value where it is None; none by default, as CPython keeps a local to the
        function's end, where a ``__del__``, a weak reference or a generator's
        ``finally`` may see it).  (A slot is assigned by many statements, and one
        statement may stand twice: such a place clears nothing.)"""
        clearable = self.ir.meta.clearable
        if clearable is not None and not clearable:
            return {}
        items = {w for reads in self.unpacks.values() for w in reads.values()}
        blocks, places = {}, {}
        kept = set(self.alias) | set(self.alias.values()) | (set(self.skip) - items)
        for b, blk in enumerate(self.ir.blocks):
            kept.update(x for br in blk.branches for x in br.operands())
            for v, st in blk.stmts:
                places[(v, id(st))] = places.get((v, id(st)), 0) + 1
                for x in st.operands():
                    if isinstance(x, Var):
                        blocks.setdefault(x, set()).add(b)
        dies = {}
        for b, blk in enumerate(self.ir.blocks):
            last = {}
            for v, st in blk.stmts:
                if v not in self.skip:
                    last.update((x, (v, id(st))) for x in st.operands() if isinstance(x, Var))
            for v, _ in blk.stmts:
                if v in last and v not in kept and blocks[v] == {b} and places[last[v]] == 1 \
                        and (clearable is None or v in clearable):
                    dies.setdefault(last[v], []).append(v)
        return dies

    def clear(self, v, st, line):
        """Store None in each local whose value dies in statement ``v = st``, just
        emitted (its value, if any, on the stack: an expression may go on around it)."""
        for x in self.dies.get((v, id(st)), ()):
            if x in self.stored:
                self.stored.discard(x)
                self.load(None, line)
                self.i("STORE_FAST", repr(x), line)

    def flush(self, pending):
        for n in pending:
            self.node(n, store=True)
        pending.clear()

    def branches(self, b, brs, pending):
        first = brs[0]
        if first.kind != "br" or (first.cond is not None and not self.passes(first)):
            order = [x for x in first.operands() if isinstance(x, Var)]
        elif first.cond is None:  # the values a jump passes on
            params = self.ir.blocks[first.target].args
            order = [a for p, a in zip(params, first.args)
                     if isinstance(a, Var) and p is not self.alias.get(a, a)]
        else:  # the condition is tested before the values are passed
            order = [first.cond] if isinstance(first.cond, Var) else []
        self.inline = self.take(order, pending) if order else {}
        self.flush(pending)
        if self.inverted(b, brs):
            return
        for k, br in enumerate(brs):
            self.branch(b, br, k == len(brs) - 1)
        self.inline = {}

    def inverted(self, b, brs):
        """``br X unless c; br Y`` with X next in the layout: jump to Y if ``c``."""
        if len(brs) != 2 or brs[0].cond is None or brs[1].cond is not None or brs[1].kind != "br" \
                or self.passes(brs[0]) or self.passes(brs[1]) \
                or self.pos[brs[0].target] != self.pos[b] + 1:
            return False
        self.load(brs[0].cond, brs[0].line)
        self.jump(b, brs[1].target, brs[1].line, True)
        self.inline = {}
        return True

    def passes(self, br):
        return any(p is not self.alias.get(a, a) for p, a in zip(self.ir.blocks[br.target].args, br.args))

    # -- for loops: ops.iterate lowered to FOR_ITER --------------------------
    def for_iter_pattern(self, b):
        """``%r = ops.iterate(%xs, %it); %c = is_not(%r, None); br E unless %c; br B``
        where block B (entered only from here) reads ``%r[0]`` and ``%r[1]``."""
        blk = self.ir.blocks[b]
        if len(blk.stmts) < 2 or len(blk.branches) != 2 or blk.catches():
            return None
        (r, it_st), (c, test) = blk.stmts[-2], blk.stmts[-1]
        out, body = blk.branches
        if it_st.fn is not ops.iterate or it_st.kw or test.fn is not operator.is_not \
                or test.args != (r, None) or out.cond is not c or body.cond is not None \
                or self.uses.get(c) != 1 or CFG.of(self.ir).preds[body.target] != [b]:
            return None
        reads = {st.args[1]: v for v, st in self.ir.blocks[body.target].stmts
                 if st.fn is operator.getitem and st.args[0] is r and st.args[1] in (0, 1)}
        if self.uses.get(r) != 1 + len(reads):
            return None
        if 1 in reads:  # the iterator after a step is the iterator itself
            self.alias[reads[1]] = it_st.args[1]
        self.skip.update((v, k) for k, v in reads.items())
        return it_st.args[1], reads.get(0), out, body

    def for_iter(self, b, it, value, out, body):
        """``LOAD it; FOR_ITER exit; STORE value; POP_TOP (the iterator)``, then the body.

        FOR_ITER jumps forward only: to the exit block itself when that follows
        and needs no arguments (and the interpreter needs no `WRITER.LOOP_EXIT`
        there), else to a stub after the jump into the body.
        """
        line = out.line
        direct = not self.passes(out) and self.pos[out.target] > self.pos[b] and not WRITER.LOOP_EXIT
        exit_ = self.labels[out.target] if direct else Label()
        self.load(it, line)
        self.i("FOR_ITER", exit_, line)
        if value is not None:
            self.i("STORE_FAST", repr(value), line)
        else:
            self.i("POP_TOP", line=line)
        self.i("POP_TOP", line=line)  # the iterator, which FOR_ITER left below the value
        self.branch(b, body, direct)
        if not direct:
            self.out.append(exit_)
            self.put(WRITER.LOOP_EXIT, line)
            self.assign(out.target, out.args, line)
            self.jump(b, out.target, line)

    def pull(self, args, line):
        """``ops.pull(K, pb, dy)``: ``pb.func(pb.args[0], dy)`` where ``type(pb) is K``,
        ``pb(dy)`` where it is a function (a rule's closure: the interpreter runs it without
        a C frame, as it does a method), else ``pb.__call__(dy)``."""
        kind, pb, dy = args
        slow, other, end = Label(), Label(), Label()
        self.call(type, [pb], {}, line)
        self.load(kind, line)
        self.i("IS_OP", 0, line)
        self.put(WRITER.jump_if(False, slow, forward=True), line)
        self.put(WRITER.before_callee(), line)
        self.load(pb, line)
        self.put(WRITER.load_attr("func") + WRITER.after_callee(), line)
        self.load(pb, line)
        self.put(WRITER.load_attr("args"), line)
        self.load(0, line)
        self.i("BINARY_SUBSCR", line=line)
        self.load(dy, line)
        self.put(WRITER.call(2), line)
        self.i("JUMP_FORWARD", end, line)
        self.out.append(slow)
        self.call(type, [pb], {}, line)
        self.load(types.FunctionType, line)
        self.i("IS_OP", 0, line)
        self.put(WRITER.jump_if(False, other, forward=True), line)
        self.call(pb, [dy], {}, line)
        self.i("JUMP_FORWARD", end, line)
        self.out.append(other)
        self.load(pb, line)
        self.put(WRITER.load_method("__call__"), line)
        self.load(dy, line)
        self.put(WRITER.call(1), line)
        self.out.append(end)

    def fast(self, fn, args, line):
        """``rec(push, a, …)`` (or ``f(a, …)``) with its fast paths inline (`ops.Inline`)."""
        spec = fn.inline
        push, xs = (args[0], args[1:]) if spec.pushes is not None else (None, args)
        var = lambda x: isinstance(x, (Var, Slot, Global))
        paths = [(g, p) for g, p in spec.paths()  # (not one a constant operand never takes)
                 if all(var(x) or type(x) is t for x, t in zip(xs, g))]
        end = Label()
        for guards, pushes in paths:
            slow = Label()
            for x, t in zip(xs, guards):
                if var(x):
                    self.call(type, [x], {}, line)
                    self.load(t, line)
                    self.i("IS_OP", 0, line)
                    self.put(WRITER.jump_if(False, slow, forward=True), line)
            if spec.op in _BINARY:
                self.loads(xs, line)
                self.i("BINARY_OP", _BINARY[spec.op], line)
            else:
                self.call(spec.op, xs, {}, line)
            for item in pushes or ():  # (y stays below each call)
                self.put(WRITER.before_callee(), line)
                self.load(push, line)
                self.put(WRITER.after_callee(), line)
                if item == "y":
                    self.i("COPY", 3, line)
                else:
                    self.load(item[1] if type(item) is tuple else xs[item], line)
                self.put(WRITER.call(1), line)
                self.i("POP_TOP", line=line)
            self.i("JUMP_FORWARD", end, line)
            self.out.append(slow)
        self.call(fn, args, {}, line)
        self.out.append(end)

    def resolved(self, args, line):
        """``ops.resolved(v, f, name)``: ``v`` where ``v is f``, without a call; else the
        call, which raises."""
        slow, end = Label(), Label()
        self.loads(args[:2], line)
        self.i("IS_OP", 0, line)
        self.put(WRITER.jump_if(False, slow, forward=True), line)
        self.load(args[0], line)
        self.i("JUMP_FORWARD", end, line)
        self.out.append(slow)
        self.call(ops.resolved, args, {}, line)
        self.out.append(end)

    def watch(self, args, line):
        """``ops.watch`` with its test inline; when it has work to do, the watcher is
        called directly: ``W.watcher(pb, y, (f, a, …))``."""
        w, args = args[0], args[1:]
        slow, end = Label(), Label()
        self.call(type, args[1:2], {}, line)
        self.load(w, line)
        self.put(WRITER.load_attr("kinds"), line)
        self.i("CONTAINS_OP", 0, line)
        self.put(WRITER.jump_if(True, slow, forward=True), line)
        self.load(w, line)
        self.put(WRITER.load_attr("all"), line)
        self.put(WRITER.jump_if(True, slow, forward=True), line)
        self.load(args[0], line)
        self.i("JUMP_FORWARD", end, line)
        self.out.append(slow)
        self.put(WRITER.before_callee(), line)
        self.load(w, line)
        self.put(WRITER.load_attr("watcher") + WRITER.after_callee(), line)
        self.loads(args, line)
        self.i("BUILD_TUPLE", len(args) - 2, line)  # the callee and its arguments
        self.put(WRITER.call(3), line)
        self.out.append(end)

    def call(self, fn, args, kw, line):
        self.put(WRITER.before_callee(), line)
        self.load(fn, line)
        self.put(WRITER.after_callee(), line)
        self.loads(args, line)
        self.loads(kw.values(), line)
        self.put(WRITER.call(len(args) + len(kw), tuple(kw)), line)

    def store(self, v, line):
        if v in self.used or isinstance(v, Slot):
            self.stored.add(v)
            self.i("STORE_FAST", repr(v), line)
        else:
            self.i("POP_TOP", line=line)

    def none(self, v, line):
        if v in self.used or isinstance(v, Slot):
            self.load(None, line)
            self.i("STORE_FAST", repr(v), line)

    def jump(self, b, t, line, cond=None):
        fwd = self.pos[t] > self.pos[b]
        if cond is None:
            self.i("JUMP_FORWARD" if fwd else "JUMP_BACKWARD", self.labels[t], line)
        else:
            self.put(WRITER.jump_if(cond, self.labels[t], fwd), line)

    def assign(self, t, args, line):
        params = self.ir.blocks[t].args
        pairs = [(p, a) for p, a in zip(params, args) if p is not self.alias.get(a, a)]
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
            if not (last and self.pos[br.target] == self.pos[b] + 1):
                self.jump(b, br.target, line)
        elif not self.passes(br):
            self.load(br.cond, line)
            self.jump(b, br.target, line, False)
        else:
            skip = Label()
            self.load(br.cond, line)
            self.put(WRITER.jump_if(True, skip, forward=True), line)
            self.assign(br.target, br.args, line)
            self.jump(b, br.target, line)
            self.out.append(skip)

    # -- ops.unpack whose items are all read in its block: UNPACK_SEQUENCE ------
    def find_unpacks(self):
        """``%t = ops.unpack(%s, n)`` read only by ``operator.getitem(%t, i)`` in its own
        block → ``LOAD %s; UNPACK_SEQUENCE n; STORE …`` (the instruction checks ``n``)."""
        for blk in self.ir.blocks:
            items = {}  # var → the statements reading an item of it at a constant int
            for w, s in blk.stmts:
                if s.fn is operator.getitem and len(s.args) == 2 and type(s.args[1]) is int \
                        and isinstance(s.args[0], Var):
                    items.setdefault(s.args[0], []).append((w, s.args[1]))
            for v, st in blk.stmts:
                if st.fn is not ops.unpack or st.kw or len(st.args) != 2 or type(st.args[1]) is not int:
                    continue
                reads = {w: i for w, i in items.get(v, ()) if 0 <= i < st.args[1]}
                if self.uses.get(v) == len(reads) and len(set(reads.values())) == len(reads):
                    self.unpacks[v] = {i: w for w, i in reads.items()}
                    self.skip.update(dict.fromkeys(reads, 0))

    def unpack(self, v, st, pending):
        seq, n = st.args
        self.inline = self.take([seq] if isinstance(seq, Var) else [], pending)
        self.flush(pending)
        self.load(seq, st.line)
        self.inline = {}
        self.i("UNPACK_SEQUENCE", n, st.line)
        items = self.unpacks[v]
        for i in range(n):
            if i in items:
                self.stored.add(items[i])
                self.i("STORE_FAST", repr(items[i]), st.line)
            else:
                self.i("POP_TOP", line=st.line)
        self.clear(v, st, st.line)

    # -- catch edges: an exception-table entry around the block, to a stub that
    #    passes the exception on as the edge says -------------------------------
    def try_begin(self, b):
        """Open the exception-table entry of block ``b``, if it catches."""
        if not self.ir.blocks[b].catches():
            return None
        stub = Label()
        self.stubs.append((stub, b))
        entry = TryBegin(stub, push_lasti=False, stack_depth=0)
        self.out.append(entry)
        return entry

    def handler_stub(self, stub, b):
        """``stub: STORE @caught; (assign the edge's arguments); JUMP handler``."""
        br = self.ir.blocks[b].branches[0]
        self.out.append(stub)
        self.i("STORE_FAST", repr(_CAUGHT), br.line)
        self.assign(br.target, [_CAUGHT if a is ops.CAUGHT else a for a in br.args], br.line)
        self.i("JUMP_BACKWARD", self.labels[br.target], br.line)

    def layout(self):
        """Block order: as in the IR, but a loop body right after its FOR_ITER."""
        loops = {b: self.for_iter_pattern(b) for b in range(len(self.ir.blocks))}
        order = [b for b in range(len(self.ir.blocks))]
        for b, loop in loops.items():
            if loop:
                order.remove(loop[3].target)
                order.insert(order.index(b) + 1, loop[3].target)
        self.pos = {b: i for i, b in enumerate(order)}
        return order, loops

    def run(self):
        ir = self.ir
        if ir.meta.generator:  # (the first value sent is dropped)
            self.put([("RETURN_GENERATOR",), ("POP_TOP",)], ir.meta.firstlineno)
        prologue = len(self.out)
        self.i("RESUME", 0, ir.meta.firstlineno)
        order, loops = self.layout()
        self.dies = self.find_deaths()
        for b in order:
            blk = ir.blocks[b]
            self.out.append(self.labels[b])
            loop = loops[b]
            stmts = blk.stmts[:-2] if loop else blk.stmts
            pending = []
            self.stored = set()
            entry = self.try_begin(b)
            for v, st in stmts:
                if v not in self.skip:
                    self.process(b, v, st, pending)
            if entry is not None:
                self.flush(pending)
                self.out.append(TryEnd(entry))
            if loop:
                self.flush(pending)
                self.for_iter(b, *loop)
            else:
                self.branches(b, [br for br in blk.branches if not br.catch], pending)
        for stub, b in self.stubs:
            self.handler_stub(stub, b)
        code = Bytecode(self.out)
        code.name = ir.meta.name
        code.filename = ir.meta.filename
        code.first_lineno = ir.meta.firstlineno
        code.argnames = [repr(a) for a in ir.blocks[0].args]
        code.argcount = len(code.argnames)
        code.flags = 0x1 | 0x2 | (0x20 if ir.meta.generator else 0)  # CO_OPTIMIZED | CO_NEWLOCALS | CO_GENERATOR
        # (the prologue's effect is 0 where the library counts RETURN_GENERATOR's as 0)
        depth = _max_depth(self.out[prologue:], {**dict.fromkeys(self.labels, 0),
                                      **{stub: 1 for stub, _ in self.stubs}})
        if depth is None:
            return code.to_code()
        # the library would rebuild a control-flow graph to find the depth: most of its time
        return code.to_code(stacksize=depth, compute_exception_stack_depths=False)


def _max_depth(out, starts):
    """How deep the stack gets, in one pass over the code as laid out: the labels
    ``starts`` begin blocks, with the stack depth they map to; any other label is
    first reached by a forward jump inside a statement.  None where the code breaks
    that rule."""
    at, depth, top, falls = dict(starts), 0, 0, True
    for x in out:
        if isinstance(x, (TryBegin, TryEnd)):
            continue
        if isinstance(x, Label):
            if x in at and falls and at[x] != depth or x not in at and not falls:
                return None
            depth, falls = at.setdefault(x, depth), True
            continue
        if not falls:
            return None
        if x.has_jump():
            d = depth + x.stack_effect(jump=True)
            if at.setdefault(x.arg, d) != d:
                return None
            top = max(top, d)
        depth += x.stack_effect(jump=False) if not x.is_final() else 0
        falls = not x.is_final()
        top = max(top, depth)
    return top


_LOCATIONS: dict = {}  # line → its InstrLocation (immutable: one serves every instruction)
_PLAIN = {str, int, Label, type(_NOARG)}  # (an arg of these types: equal is the same)
EMITTED = weakref.WeakSet()  # what `emit` made: the runtime tells their frames from its own


def emit(ir) -> types.CodeType:
    """A code object computing what ``ir`` computes; its parameters are block 1's arguments."""
    code = _Emitter(ir).run()
    EMITTED.add(code)
    return code


def function(ir, globals_: dict, name: str | None = None) -> types.FunctionType:
    """``emit`` wrapped into a function that resolves globals in ``globals_``."""
    fn = types.FunctionType(emit(ir), globals_, name or ir.meta.name)
    return fn
