"""Fused forward and reverse sweeps of a typed IR, as Python source for numba.

`source` writes one function that runs the primal's blocks as a state machine (the
forward sweep), then the blocks' adjoints in reverse (the reverse sweep), in the same
frame, so a value computed once (outside every loop) is still in its local when the
reverse sweep needs it.  In a block on a cycle the reverse sweep needs each pass's
values: it recomputes what it can (arithmetic, element reads of arrays never written)
from what it has, and the forward sweep pushes the rest at the end of the block onto a
float or an int tape (block arguments, results of ``math`` functions, elements of arrays
that are written), which the reverse sweep pops.  A counted loop (``for`` over a range or
an array) needs no tape for its index: going backwards it is the index after it minus
the step, and the loop's first pass is the one whose index is the start.  Where another
block has several incoming edges the forward sweep pushes the edge it took, and the
reverse sweep pops it to go back the same way.  An element write pushes the element it
overwrites, and the reverse sweep puts it back, so every array, the caller's too, ends as
it began.  Adjoints are typed locals (``d7``) and arrays (``d2`` for an array ``%2``),
zeroed where their value is defined, so a loop's passes do not mix; where one is known to be
zero, the first add to it is an assignment (`_first_writes`).

For ``s += x[i] ** 2`` in a loop, the loop (blocks 2 and 4 of the IR) runs in a ``while``
of its own each way (a structured loop: its body a chain of blocks and such loops); going backwards it reads ``x[i]`` again and adds ``2 x[i] d`` into
``d2[i]``, with nothing on a tape:

    >>> from bytegrad.transforms.typed import infer, Array
    >>> def f(x):
    ...     s = 0.0
    ...     for i in range(len(x)):
    ...         s += x[i] ** 2
    ...     return s
    >>> print(source(infer(f, (Array("float64", 1),), {}), (1,), {}))
    import math
    ...
    def fused(v2, seed, nf, ni, d2):
        ...
            elif blk == 1:
                while True:
                    v9 = v6 < v4_1
                    if not v9:
                        blk = 2
                        break
                    v10 = v6
                    v11 = v6 + 1
                    if v10 >= v2.shape[0] or v10 < -v2.shape[0]:
                        raise IndexError('...:4: index out of range')
                    v12 = v2[v10]
                    v13 = v12 ** 2
                    v14 = v7 + v13
                    v6, v7, = v11, v14,
        ...
        # the reverse sweep
        ...
            elif blk == 1:
                while v6 > 0:
                    v6 -= 1
                    m0 = d7
                    d7 = 0.0
                    d14 = m0
                    v10 = v6
                    v12 = v2[v10]
                    d7 = d14
                    d13 = d14
                    d14 = 0.0
                    d12 = d13 * 2.0 * v12
                    d13 = 0.0
                    d2[v10] += d12
                    d12 = 0.0
                m0 = d7
                d7 = 0.0
                blk = 0
                continue
        ...
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from ..ir import Var, ops
from ..ir.cfg import CFG
from .fused_statements import Statements
from .typed import (BOOL, F32, F64, I64, RANGE, UNDEF_T, Array, Const, Iter, NotCompilableError,
                    Tuple, is_float)

HELPERS = '''import math
import numpy as np
import numba


@numba.njit(cache=True)
def _grow(t):
    # (doubling: 16 B a value at most, past the first 64; 8 B when the caller passes the
    # size the tape needs)
    new = np.empty(2 * t.shape[0] + 64, t.dtype)
    for k in range(t.shape[0]):  # (a loop: numba compiles a slice's copy ten times slower)
        new[k] = t[k]
    return new
'''


def source(t, wrt, funcs) -> str:
    """The module source of ``fused(*args, seed, nf, ni, *buffers)`` for typed IR ``t``.
    ``buffers`` are the gradients of the array arguments at positions ``wrt`` (see
    `layout`), allocated by the caller, which ``fused`` zeroes and adds into; it returns
    ``(value, numbers, nf, ni)``: the gradients that are numbers, and the numbers of values
    the forward sweep pushed on the float and int tapes.  The ``nf`` and ``ni`` passed are
    the sizes the tapes start with (they grow when they fill up; the caller passes the last
    call's numbers, so a steady caller's tapes are allocated once, at their size).  Arrays
    come in from the caller because numba is slow to box an array it returns (0.4 µs each,
    measured: a sixth of a 30×30 loop's gradient)."""
    return HELPERS + "\n\n" + _Gen(t, wrt, funcs).function()


def layout(types, wrt) -> list:
    """How `fused` hands over the gradient of each distinct position of ``wrt`` (1 is the
    first argument) for arguments of ``types``: ``"array"`` (a buffer passed in),
    ``"float"`` (a number returned), None (none: an int or a bool), or for a tuple a tuple
    of these for its items."""
    def of(kind):
        if isinstance(kind, Array):
            return "array"
        if isinstance(kind, Tuple):
            return tuple(map(of, kind.items))
        return "float" if is_float(kind) else None
    return [of(types[i - 1]) for i in dict.fromkeys(wrt)]


class _Gen(Statements):
    """The generator of one function's source: the analyses, then the blocks' code."""

    def __init__(self, t, wrt, funcs):
        self.t, self.ir, self.ty, self.funcs = t, t.ir, t.types, funcs
        self.cfg = CFG.of(self.ir)
        self.blocks = [b for b in self.cfg.order]
        self.defblock = {}
        for b in self.blocks:
            for a in self.ir.blocks[b].args:
                self.defblock[a] = b
            for v, _ in self.ir.blocks[b].stmts:
                self.defblock[v] = b
        self.made = {v: st for b in self.blocks for v, st in self.ir.blocks[b].stmts}
        self.steps = {}  # the result of ops.iterate → (what it iterates, its state)
        for b in self.blocks:
            for v, st in self.ir.blocks[b].stmts:
                if self.fn(st) is ops.iterate:
                    self.steps[v] = st.args
        self.written = any(self.fn(st) is operator.setitem for _, _, st in self.ir.statements())
        self.cyclic = self._cyclic()
        self.entry = self.ir.blocks[0].args
        self.wrt = [self.entry[i] for i in dict.fromkeys(wrt)]
        self.active = self._activity()
        self.adjname = self._adjoint_names()
        self.loops = {}
        for b in self.blocks:
            loop = self._counted_loop(b)
            if loop is not None:
                self.loops[b] = loop
        self.dead_after, self.dead_in = self._block_locals()
        self.chains = {}  # a structured loop's header → its body, in order (see `_chain`)
        for h in sorted(self.loops, key=lambda h: len(self.loops[h].body)):  # (inner loops first)
            chain = self._chain(h)
            if chain is not None:
                self.chains[h] = chain

    # -- analyses --------------------------------------------------------------
    def fn(self, st):
        f = st.fn
        return self.ty[f].value if isinstance(f, Var) else f

    def refuse(self, v, line, construct, reason):
        filename, line = self.t.where(v, line)
        return NotCompilableError(construct, filename, line, reason)

    def _cyclic(self):
        """The blocks on a cycle: each may run more than once."""
        out = set()
        for b in self.blocks:
            seen, todo = set(), list(self.cfg.succs[b])
            while todo:
                c = todo.pop()
                if c == b:
                    out.add(b)
                    break
                if c not in seen:
                    seen.add(c)
                    todo.extend(self.cfg.succs[c])
        return out

    def _counted_loop(self, h):
        """The `_Loop` headed by block ``h`` when it is a ``for`` over a range or an array
        entered by one edge and continued by one (so its state, the index, is known going
        backwards: the start, or the index after it minus the step), else None."""
        blk, edges = self.ir.blocks[h], self.cfg.incoming[h]
        step = next(((v, st.args) for v, st in blk.stmts if self.fn(st) is ops.iterate), None)
        if step is None or len(edges) != 2 or step[1][1] not in blk.args:
            return None
        over, p = step[1]
        back = [k for k, (q, _) in enumerate(edges) if self.cfg.dominates(h, q)]
        if len(back) != 1:
            return None
        k = blk.args.index(p)
        into, again = edges[1 - back[0]][1].args[k], edges[back[0]][1].args[k]
        made = self.made
        if not (made.get(into) is not None and self.fn(made[into]) is iter and made[into].args[0] is over
                and made.get(again) is not None and self.fn(made[again]) is operator.getitem
                and made[again].args == (step[0], 1)):
            return None
        body, todo = {h}, [edges[back[0]][0]]
        while todo:
            q = todo.pop()
            if q not in body:
                body.add(q)
                todo.extend(self.cfg.preds[q])
        rng = self.ty[over] == RANGE
        return _Loop(p, over, body, 1 - back[0], back[0], edges[1 - back[0]][0] in self.cyclic,
                     self.part(over, 0) if rng else "0", self.part(over, 2) if rng else "1")

    def _chain(self, h):
        """The body of counted loop ``h`` as a chain of blocks run one after the other (each
        entered from the one before alone, going on by its only branch), among them the
        headers of structured loops within it, each left to the next block of the chain
        alone; None when the body is not such a chain.  A structured loop runs as a
        ``while`` of its own each way, with no dispatch between its blocks."""
        blk, loop = self.ir.blocks[h], self.loops[h]
        if len(blk.branches) != 2 or blk.branches[0].cond is None or blk.branches[1].cond is not None \
                or blk.branches[0].target in loop.body:
            return None
        chain, c, seen = [], blk.branches[1].target, {h}
        while c != h:
            if c in seen or c not in loop.body:
                return None
            seen.add(c)
            chain.append(c)
            if c in self.chains:  # (an inner structured loop: on to where it exits)
                seen |= self.loops[c].body
                c = self.ir.blocks[c].branches[0].target
                if len(self.cfg.incoming[c]) != 1:
                    return None
                continue
            brs = self.ir.blocks[c].branches
            if len(self.cfg.incoming[c]) != 1 or len(brs) != 1 or brs[0].kind != "br" or brs[0].cond is not None:
                return None
            c = brs[0].target
        return chain if seen == loop.body else None

    def _activity(self):
        """The values that carry a gradient: float content reached from an argument in
        ``wrt``, and arrays that an active number is stored into."""
        active = {x for x in self.wrt if _floaty(self.ty[x])}
        changed = True
        while changed:
            changed = False
            for b in self.blocks:
                blk = self.ir.blocks[b]
                for v, st in blk.stmts:
                    f = self.fn(st)
                    ops_ = self.operands(st)
                    if f is operator.setitem:
                        if st.args[2] in active and st.args[0] not in active:
                            active.add(st.args[0])
                            changed = True
                        continue
                    if v not in active and _floaty(self.ty.get(v)) and any(a in active for a in ops_):
                        active.add(v)
                        changed = True
                for br in blk.branches:
                    if br.kind == "br":
                        for p, a in zip(self.ir.blocks[br.target].args, br.args):
                            if a in active and p not in active and _floaty(self.ty.get(p)):
                                active.add(p)
                                changed = True
        return active

    def _block_locals(self):
        """``(after, within)``: for each block, the float adjoints known to be zero at the
        start of the reverse of an edge it took (``after``: of values it defines and alone
        uses, in statements or branches) and at the start of its statements' reverse
        (``within``: of those it uses in statements alone).  The reverse sweep reaches
        that point before any use of that pass's value and after every later pass zeroed
        its own, so a first ``+=`` there may be an ``=`` (`_first_writes`)."""
        home, in_branch = {}, set()
        for b in self.blocks:
            blk = self.ir.blocks[b]
            for x in list(blk.args) + [v for v, _ in blk.stmts]:
                home[x] = b
        away = set()  # (used outside the block that defines it)
        for b in self.blocks:
            blk = self.ir.blocks[b]
            for x in [x for _, st in blk.stmts for x in st.operands()]:
                if isinstance(x, Var) and home.get(x) != b:
                    away.add(x)
            for x in [x for br in blk.branches for x in br.operands()]:
                if isinstance(x, Var):
                    in_branch.add(x)
                    if home.get(x) != b:
                        away.add(x)
        after = {b: set() for b in self.blocks}
        within = {b: set() for b in self.blocks}
        for x, b in home.items():
            if x in self.active and x not in away and is_float(self.ty.get(x)) and self.adjname[x] == f"d{x.id}":
                after[b].add(f"d{x.id}")
                if x not in in_branch:
                    within[b].add(f"d{x.id}")
        return after, within

    def _adjoint_names(self):
        """The adjoint of each active value: an array's is its root's (``x`` and a
        block argument that is always ``x`` share one), a number's its own local."""
        names = {}
        for b in self.blocks:
            blk = self.ir.blocks[b]
            for a in blk.args:
                if isinstance(self.ty.get(a), (Array, Tuple)) and a in self.active:
                    if b == 0:
                        names[a] = f"d{a.id}"
                        continue
                    srcs = {x for _, br in self.cfg.incoming[b]
                            for p, x in zip(blk.args, br.args) if p is a} - {a}
                    if len(srcs) != 1:
                        raise self.refuse(a, None, "an array variable",
                                          "it is bound to different arrays on different paths")
                    names[a] = ("alias", srcs.pop())
                elif a in self.active:
                    names[a] = f"d{a.id}"
            for v, st in blk.stmts:
                if v not in self.active:
                    continue
                kind = self.ty[v]
                f = self.fn(st)
                if isinstance(kind, Tuple) and f in (ops.unpack, ops.identity) and isinstance(st.args[0], Var):
                    names[v] = ("alias", st.args[0])
                elif isinstance(kind, Array):
                    if f is operator.getitem:  # (an array item of a tuple)
                        names[v] = ("item", st.args[0], st.args[1])
                    else:
                        raise self.refuse(v, st.line, "an array made in the function",
                                          "the compiled tier differentiates arrays passed in")
                else:
                    names[v] = f"d{v.id}"
        return names

    def d(self, x, k=None):
        """The adjoint of ``x`` (item ``k`` of a tuple), or None where it has none."""
        if not isinstance(x, Var) or x not in self.active:
            return None
        n = self.adjname[x]
        while isinstance(n, tuple):
            n = self.adjname[n[1]] if n[0] == "alias" else self.d(n[1], n[2])
        if isinstance(self.ty[x], Tuple) and k is not None:
            return f"{n}_{k}" if _floaty(self.ty[x].items[k]) else None
        return n

    # -- blocks ----------------------------------------------------------------
    def plan(self, b):
        """``(stored, recomputed)`` for block ``b``: the values its adjoint needs that the
        forward sweep pushes at its end, and the statements its reverse runs again (from
        values it has: a counted loop's index, values made outside every loop)."""
        blk = self.ir.blocks[b]
        if b not in self.cyclic:  # (it runs once: its values are still in their locals)
            return [], []
        counted = {loop.index for loop in self.loops.values() if b in loop.body}
        todo = [x for v, st in blk.stmts for x in self.needs(v, st)]
        seen, stored, again = set(), [], []
        while todo:
            x = todo.pop()
            if x in seen or x in counted:
                continue
            seen.add(x)
            home = self.defblock.get(x, 0)
            if home != b and home not in self.cyclic:
                continue
            st = self.made.get(x)
            if st is not None and self.recomputable(st):
                again.append((x, st))
                todo.extend(self.operands(st))
            else:
                stored.append(x)
        for x in stored:
            if not (is_float(self.ty[x]) or self.ty[x] in (I64, BOOL) or isinstance(self.ty[x], Iter)
                    and not self.ty[x].step):
                raise self.refuse(x, None, f"a {self.ty[x]!r} value inside a loop",
                                  "the reverse sweep would need it from every pass")
        return sorted(stored, key=lambda x: x.id), sorted(again, key=lambda p: p[0].id)

    def store_kind(self, x):
        return "f" if is_float(self.ty[x]) else "i"

    def forward_block(self, b, plans):
        """Block ``b`` going forward, as a case of the dispatch (a structured loop's header:
        the whole loop, whose exit sets the next block and breaks out to the dispatch)."""
        if b in self.chains:
            return self.loop_forward(b, plans, None)
        out = self.block_code(b, plans)
        for br in self.ir.blocks[b].branches:
            if br.kind == "return":
                out += [f"ret = {self.e(br.args[0])}", "blk = -1", "continue"]
                break
            edge = self.edge_lines(b, br, [f"blk = {br.target}", "continue"])
            if br.cond is None:
                out += edge
                break
            out += [f"if not {self.e(br.cond)}:"] + ["    " + x for x in edge]
        return out

    def block_code(self, b, plans):
        """Block ``b``'s statements going forward, then the pushes of what its adjoint needs."""
        out = []
        for v, st in self.ir.blocks[b].stmts:
            out += self.bounds(v, st) + self.forward(v, st)
        for x in plans[b][0]:
            out += self.push(self.store_kind(x), self.e(x))
        return out

    def loop_forward(self, h, plans, nested):
        """Structured loop ``h`` going forward, as ``while True:``; its exit sets ``blk``
        and breaks out (``nested``: the enclosing loop's chain goes on after it)."""
        blk = self.ir.blocks[h]
        leave, enter = blk.branches
        out = self.block_code(h, plans)
        out += [f"if not {self.e(leave.cond)}:"] + ["    " + x for x in self.edge_lines(
            h, leave, ["break"] if nested else [f"blk = {leave.target}", "break"])]
        out += self.edge_lines(h, enter, [])
        for c in self.chains[h]:
            if c in self.chains:
                out += self.loop_forward(c, plans, True)
                continue
            out += self.block_code(c, plans) + self.edge_lines(c, self.ir.blocks[c].branches[0], [])
        return ["while True:"] + ["    " + x for x in out]

    def edge_lines(self, b, br, end):
        params = self.ir.blocks[br.target].args
        out = []
        pairs = [(p, a) for p, a in zip(params, br.args)
                 if p in self.ty and not isinstance(self.ty[p], Const)]
        if pairs:
            vals = [self.e(a) if a is not ops.UNDEF else _zero(self.ty[p]) for p, a in pairs]
            out.append(f"{', '.join(self.e(p) for p, _ in pairs)}, = {', '.join(vals)},")
        for x in self.leaving(b, br.target):
            out += self.push("i", x)
        edges = self.cfg.incoming[br.target]
        if len(edges) > 1 and br.target not in self.loops:
            k = next(i for i, (p, e) in enumerate(edges) if e is br)
            out += self.push("i", str(k))
        return out + end

    def leaving(self, b, target):
        """What an edge from ``b`` to ``target`` saves of the loops it leaves that may run
        again (inside another loop): their index and their range's start and step."""
        out = []
        for loop in self.loops.values():
            if loop.again and b in loop.body and target not in loop.body:
                out += [self.e(loop.index)] + [x for x in (loop.start, loop.step) if x[0] == "v"]
        return out

    def reverse_block(self, b, plans):
        """Block ``b`` going backwards, as a case of the dispatch (a structured loop's
        header: the whole loop backwards)."""
        if b in self.chains:
            return self.loop_reverse(b, plans, None)
        out = self.reverse_body(b, plans)
        edges = self.cfg.incoming[b]
        if b == 0:  # (the loop ends by its test: numba can fail to type a local assigned
            return out + ["blk = -1"]  # just before a break)
        if len(edges) == 1:
            return out + self.back(b, *edges[0])
        if b in self.loops:
            loop = self.loops[b]
            i = self.e(loop.index)
            out += [f"if {i} == {loop.start}:"] + ["    " + x for x in self.back(b, *edges[loop.entry])]
            return out + [f"{i} -= {loop.step}"] + self.back(b, *edges[loop.latch])
        out += ["ni -= 1", "edge = ti[ni]"]
        for k, (p, br) in enumerate(edges):
            out += [f"{'if' if k == 0 else 'elif'} edge == {k}:"] + ["    " + x for x in self.back(b, p, br)]
        return out + ["continue"]

    def loop_reverse(self, h, plans, nested):
        """Structured loop ``h`` backwards: the adjoint of the header's last pass (the one
        that left), then a ``while`` down the indices of the passes before it, each the
        chain's adjoints from the last block to the first and the header's, then out by
        the entry edge (``nested``: the enclosing loop's chain goes on after it).  The
        ``while`` tests the index against the start by ``>`` (``<`` for a negative step)
        where the step is a number: numba (LLVM) then knows the index is past the start
        and drops the wraparound test of the element reads it indexes, which made the
        30×30 loop's reverse sweep half its gradient's time (a ``for`` over a range did as
        well there, and cost the Rosenbrock loop a third more)."""
        loop, edges = self.loops[h], self.cfg.incoming[h]
        i, step = self.e(loop.index), loop.step
        body = [f"{i} -= {step}"] + self.back(h, *edges[loop.latch], None)
        for c in reversed(self.chains[h]):
            if c in self.chains:
                body += self.loop_reverse(c, plans, True)
                continue
            body += self.reverse_body(c, plans) + self.back(c, *self.cfg.incoming[c][0], None)
        body += self.reverse_body(h, plans)
        past = ">" if step.isdigit() else "<" if step[:1] == "-" and step[1:].isdigit() else "!="
        return self.reverse_body(h, plans) + [f"while {i} {past} {loop.start}:"] + ["    " + x for x in body] + \
            self.back(h, *edges[loop.entry], None if nested else "continue")

    def reverse_body(self, b, plans):
        stored, again = plans[b]
        out = _zero_mark(self.dead_in[b])
        for x in reversed(stored):
            out += self.pop(self.store_kind(x), self.e(x))
        for v, st in again:
            out += self.forward(v, st)
        for v, st in reversed(self.ir.blocks[b].stmts):
            out += self.reverse(v, st)
        return out

    def back(self, b, p, br, end="continue"):
        """Along edge ``br`` from block ``p`` backwards: block ``b``'s arguments' adjoints
        go to what the edge passed them; then to ``p`` by ``end`` (None: fall through)."""
        out, moves = _zero_mark(self.dead_after[p]), []
        for q, a in zip(self.ir.blocks[b].args, br.args):
            dq = self.d(q)
            if dq and not isinstance(self.ty[q], (Array, Tuple)):
                moves.append((a, dq))
        for k, (a, dq) in enumerate(moves):
            out += [f"m{k} = {dq}", f"{dq} = 0.0"]
        for k, (a, dq) in enumerate(moves):
            out += self.add(a, f"m{k}")
        for x in reversed(self.leaving(p, b)):
            out += self.pop("i", x)
        return out + ([] if end is None else [f"blk = {p}", end])

    # -- the function -----------------------------------------------------------
    def function(self) -> str:
        if self.cfg.incoming[0]:
            raise self.refuse(None, self.ir.meta.firstlineno, "a loop back to the function's start",
                              "the lifter never makes one")
        params = [self.e(a) for a in self.entry[1:]]
        body = []
        plans = {b: self.plan(b) for b in self.blocks}
        body += ["blk = 0", "ret = 0.0", "while blk >= 0:"]
        inside = {c for chain in self.chains.values() for c in chain}
        shown = [b for b in self.blocks if b not in inside]  # (a structured loop's blocks run in it)
        for k, b in enumerate(shown):
            body += [f"    {'if' if k == 0 else 'elif'} blk == {b}:"]
            body += ["        " + x for x in self.forward_block(b, plans)]
        body += ["pushed_f, pushed_i = nf, ni", "# the reverse sweep"]
        reverse = len(body)
        body += self.seed()
        ret = self.ir.blocks[[b for b in self.blocks
                              if any(br.kind == "return" for br in self.ir.blocks[b].branches)][0]]
        body += [f"blk = {self.ir.blocks.index(ret)}", "while blk >= 0:"]
        for k, b in enumerate(shown):
            body += [f"    {'if' if k == 0 else 'elif'} blk == {b}:"]
            body += ["        " + x for x in self.reverse_block(b, plans)]
        body[reverse:] = _first_writes(body[reverse:])
        buffers, numbers = self.gradients()
        body += [f"return ret, {''.join(x + ', ' for x in numbers)}pushed_f, pushed_i"]
        body = self.declarations(buffers) + body
        tapes = "\n".join(body)
        body = [x for x in body if not (x == "tf = np.empty(nf)" and "tf[" not in tapes or
                                        x == "ti = np.empty(ni, np.int64)" and "ti[" not in tapes)]
        return f"@numba.njit(cache=True)\ndef fused({', '.join(params + ['seed', 'nf', 'ni'] + buffers)}):\n" + \
            "\n".join("    " + x for x in body) + "\n"

    def seed(self):
        ret = [br.args[0] for b in self.blocks for br in self.ir.blocks[b].branches if br.kind == "return"][0]
        return self.add(ret, "seed")

    def gradients(self):
        """``(buffers, numbers)``: the adjoints of the arguments in ``wrt`` that the caller
        passes in (arrays) and those ``fused`` returns (numbers), as `layout` orders them."""
        buffers, numbers = [], []
        for x in self.wrt:
            kind = self.ty[x]
            items = [(self.d(x, k), i) for k, i in enumerate(kind.items)] if isinstance(kind, Tuple) \
                else [(self.d(x), kind)]
            buffers += [d for d, i in items if isinstance(i, Array)]
            numbers += [d for d, i in items if is_float(i)]
        return buffers, numbers

    def declarations(self, buffers):
        """Every local typed from the start (numba types a local once): numbers zero, the
        adjoints of arrays passed in zero arrays like them (the ``buffers`` passed for
        them zeroed), empty tapes."""
        out, seen = ["tf = np.empty(nf)", "ti = np.empty(ni, np.int64)", "nf = 0", "ni = 0", "best = 0",
                     "top = 0.0", "edge = 0"], set()
        out += [f"m{k} = 0.0" for k in range(max([len(self.ir.blocks[b].args) for b in self.blocks]))]
        out += [f"{b}[:] = 0.0" for b in buffers]  # (here: faster than NumPy's zeros in the caller)
        for x in self.entry[1:]:
            kind = self.ty[x]
            if isinstance(kind, Array) and x in self.active and f"d{x.id}" not in buffers:
                out.append(f"d{x.id} = np.zeros_like(v{x.id})")
            elif isinstance(kind, Tuple) and x in self.active:
                for k, item in enumerate(kind.items):
                    if isinstance(item, Array) and f"d{x.id}_{k}" not in buffers:
                        out.append(f"d{x.id}_{k} = np.zeros_like(v{x.id}[{k}])")
        for b in self.blocks:
            blk = self.ir.blocks[b]
            for x in blk.args + [v for v, _ in blk.stmts]:
                if b == 0 and x in blk.args or x in seen:
                    continue
                seen.add(x)
                out += self.declare(x)
        for x in sorted(self.active, key=lambda x: x.id):
            kind = self.ty.get(x)
            if is_float(kind) and x not in self.entry:
                out.append(f"{self.d(x)} = 0.0")
            elif is_float(kind):
                out.append(f"d{x.id} = 0.0")
            elif isinstance(kind, Tuple) and x not in self.entry:
                out += [f"{self.d(x, k)} = 0.0" for k, i in enumerate(kind.items) if is_float(i)]
            elif isinstance(kind, Tuple):
                out += [f"d{x.id}_{k} = 0.0" for k, i in enumerate(kind.items) if is_float(i)]
        return out

    def declare(self, x):
        kind, y = self.ty.get(x), self.e(x)
        if kind == RANGE:
            return [f"{y}_0 = 0", f"{y}_1 = 0", f"{y}_2 = 1"]
        if isinstance(kind, Iter):
            return [] if kind.step else [f"{y} = 0"]
        if kind in (F64, F32, I64, BOOL) or isinstance(kind, Tuple) and all(i in (F64, F32, I64, BOOL) for i in kind.items):
            return [f"{y} = {_zero(kind)}"]
        return []


@dataclass
class _Loop:
    """A counted loop: its index (the header's argument), what it iterates, its blocks, the
    positions of its entry and back edges among the header's, whether it may run again
    (it sits in another loop), and its start and step as code."""
    index: Var
    over: Var
    body: set
    entry: int
    latch: int
    again: bool
    start: str
    step: str


_MARK = "#zero "
_ADD = re.compile(r"(d\d+(?:_\d+)?) \+= (.+)")
_SET = re.compile(r"(\w+) = (.+)")
_WORD = re.compile(r"\w+")


def _zero_mark(names) -> list:
    """A line telling `_first_writes` that these adjoints are zero here."""
    return [_MARK + " ".join(sorted(names))] if names else []


def _first_writes(lines) -> list:
    """``lines`` with each ``d += e`` to an adjoint known to be zero written ``d = e``
    (within a run of lines at one indentation and no control line: known from a
    `_zero_mark`, or from ``d = 0.0`` before it), and the marks taken out.  An add of
    zero is a floating-point add all the same: a loop's chain of them, adjoint to
    adjoint, cost its reverse sweep a third of its time (the 30×30 loop).  (Only the
    sign of a zero may differ: ``0.0 + -0.0`` is ``0.0``.)

    >>> _first_writes(["#zero d3", "d3 += m0", "d3 += d4", "d4 = 0.0", "d4 += d3"])
    ['d3 = m0', 'd3 += d4', 'd4 = 0.0', 'd4 = d3']
    >>> _first_writes(["d4 = 0.0", "if c:", "    d4 += 1.0", "d4 += 2.0"])
    ['d4 = 0.0', 'if c:', '    d4 += 1.0', 'd4 += 2.0']
    """
    out, zero, indent = [], set(), None
    for line in lines:
        text = line.lstrip()
        if len(line) - len(text) != indent or text.endswith(":"):
            zero, indent = set(), len(line) - len(text)
        if text.startswith(_MARK):
            zero |= set(text[len(_MARK):].split())
            continue
        add, put = _ADD.fullmatch(text), _SET.fullmatch(text)
        if add and add[1] in zero:
            zero.discard(add[1])
            line = line[:len(line) - len(text)] + f"{add[1]} = {add[2]}"
        elif put:
            zero.discard(put[1])
            if put[2] == "0.0":
                zero.add(put[1])
        elif not add:
            zero -= set(_WORD.findall(text))
        out.append(line)
    return out


def _zero(kind) -> str:
    if isinstance(kind, Tuple):
        return "(" + "".join(_zero(i) + ", " for i in kind.items) + ")"
    return {BOOL: "False", I64: "0", UNDEF_T: "0"}.get(kind, "0.0")


def _floaty(kind) -> bool:
    """Whether a value of this type holds floats that may carry a gradient."""
    if isinstance(kind, Array):
        return True
    if isinstance(kind, Tuple):
        return any(map(_floaty, kind.items))
    return is_float(kind)
