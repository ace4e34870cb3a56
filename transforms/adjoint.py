"""The adjoint pass: run the recorded pullbacks backwards, accumulating gradients.

The adjoint of ``f`` takes ``(tape, dy)`` and pops the tape's entries, last first, with
``pop = reversed(tape).__next__`` (so that a pullback can be the adjoint with its tape
bound, calling it without a frame of its own).  Each active primal variable ``%v`` owns a
gradient slot ``@gv``: every use adds into it, and its defining statement's pullback
consumes it and resets it to None, so loops need no SSA gradients.  Blocks are visited
backwards; where the forward pass recorded which edge it took, the adjoint pops that
number to pick the way back.  A statement whose values are on the tape is one call,
``back(pop, @gv)``, which pops them and tests for a gradient itself; or, where its rule
describes its fast paths (`ops.InlineBack`, arithmetic on floats) and the function is not
long, those written out: pop the last entry, test it, compute the gradients inline, and
call the rule's ``given`` elsewhere.  For the ``f`` of the register pass
(``np.dot(x, x) * 2.0``, its product taped, the pullback of ``np.dot`` on the tape) the
adjoint is:

    >>> import bytegrad, numpy as np
    >>> def f(x):
    ...     return np.dot(x, x) * 2.0
    >>> print(bytegrad.stages(f).adjoint)
    1: (%1, %2)
      %3 = reversed(%1)
      %4 = getattr(%3, '__next__')
      @g1 = ops.identity(None)
      @g2 = ops.identity(None)
      @g4 = ops.identity(None)
      @g5 = ops.identity(None)
      @g5 = ops.identity(%2)
      %5 = %4()                                      # line 2
      %6 = operator.is_not(@g5, None)                # line 2
      %7 = type(%5)                                  # line 2
      %8 = operator.is_(%7, float)                   # line 2
      br 5 unless %8
      br 2 unless %6
      br 4
    2:
      %9 = taped.mul_given(%5, %4, @g5)              # line 2
      @g5 = ops.identity(None)                       # line 2
      %10 = operator.getitem(%9, 1)                  # line 2
      @g4 = ops.identity(%10)                        # line 2
      br 3
    3:
      %11 = %4()                                     # line 2
      %12 = operator.is_not(@g4, None)               # line 2
      br 9 unless %12
      br 8
    4:
      %13 = %4()                                     # line 2
      %14 = operator.mul(@g5, %5)                    # line 2
      @g4 = ops.identity(%14)                        # line 2
      @g5 = ops.identity(None)                       # line 2
      br 3
    5:
      %15 = type(%5)                                 # line 2
      %16 = operator.is_(%15, numpy.float64)         # line 2
      br 2 unless %16
      br 2 unless %6
      br 6
    6:
      %17 = %4()                                     # line 2
      %18 = operator.mul(@g5, %5)                    # line 2
      @g4 = ops.identity(%18)                        # line 2
      @g5 = ops.identity(None)                       # line 2
      br 3
    7:
      %19 = ops.build_tuple(@g1, @g2)
      return %19
    8:
      %20 = ops.pull(forward.Pullback, %11, @g4)     # line 2
      @g4 = ops.identity(None)                       # line 2
      %21 = operator.getitem(%20, 1)                 # line 2
      @g2 = ops.identity(%21)                        # line 2
      %22 = operator.getitem(%20, 2)                 # line 2
      @g2 = algebra.accum(@g2, %22)                  # line 2
      br 7
    9:
      %23 = mutation.runs_without_gradient(%11)      # line 2
      br 7 unless %23
      br 8

A generator's adjoint is a generator too, which takes a third argument: the number of
the ``yield`` the forward generator is suspended at (None when it returned).  It starts
there, or at the return; each ``yield`` backwards hands out the gradient of the value
sent in and takes in the gradient of the item yielded (runtime/generators.py drives
it, one resumption of the forward generator at a time):

    >>> def g(x):
    ...     yield x * 2.0
    ...     yield x
    >>> print(bytegrad.stages(g).adjoint)
    1: (%1, %2, %3)
      %4 = reversed(%1)
      %5 = getattr(%4, '__next__')
      @g1 = ops.identity(None)
      @g2 = ops.identity(None)
      @g3 = ops.identity(None)
      @g4 = ops.identity(None)
      @g5 = ops.identity(None)
      %6 = operator.eq(%3, 0)
      br 4 unless %6
      br 2
    2:
      %7 = %5()                                      # line 2
      %8 = ops.yield_(@g4)                           # line 2
      @g4 = ops.identity(None)                       # line 2
      @g3 = ops.identity(%8)                         # line 2
      %9 = %5()                                      # line 2
      %10 = operator.is_not(@g3, None)               # line 2
      %11 = type(%9)                                 # line 2
      %12 = operator.is_(%11, float)                 # line 2
      br 9 unless %12
      br 6 unless %10
      br 8
    3:
      %13 = %5()                                     # line 3
      %14 = ops.yield_(@g5)                          # line 3
      @g5 = ops.identity(None)                       # line 3
      @g2 = ops.identity(%14)                        # line 3
      br 2
    4:
      %15 = operator.eq(%3, 1)
      br 5 unless %15
      br 3
    5:
      br 3
    6:
      %16 = taped.mul_given(%9, %5, @g3)             # line 2
      @g3 = ops.identity(None)                       # line 2
      %17 = operator.getitem(%16, 1)                 # line 2
      @g2 = algebra.accum(@g2, %17)                  # line 2
      br 7
    7:
      %18 = ops.build_tuple(@g1, @g2)
      return %18
    8:
      %19 = %5()                                     # line 2
      %20 = operator.mul(@g3, %9)                    # line 2
      @g2 = algebra.accum(@g2, %20)                  # line 2
      @g3 = ops.identity(None)                       # line 2
      br 7
    9:
      %21 = type(%9)                                 # line 2
      %22 = operator.is_(%21, numpy.float64)         # line 2
      br 6 unless %22
      br 6 unless %10
      br 10
    10:
      %23 = %5()                                     # line 2
      %24 = operator.mul(@g3, %9)                    # line 2
      @g2 = algebra.accum(@g2, %24)                  # line 2
      @g3 = ops.identity(None)                       # line 2
      br 7
"""
from __future__ import annotations

import operator

from ..ir import IR, Branch, Global, Meta, Slot, Stmt, Var, ops
from ..ir.cfg import CFG, flow, incoming
from ..ir.simplify import simplify
from .register import recorded, taped_call, yield_sites
from .returns import return_block


_UNROLL_LIMIT = 64  # taped statements whose backs are written out as IR (`ops.InlineBack`)


class _Adjoint:
    def __init__(self, ir, active, hooks):
        self.ir, self.active = ir, active
        self.accum, self.unwrap, self.kwgrad = hooks.accum, hooks.unwrap, hooks.kwgrad
        self.pullback = hooks.pullback
        self.effectful, self.taped = hooks.effectful, hooks.taped
        self.runs_without_gradient = hooks.runs_without_gradient
        self.structured = hooks.structured
        self.sparse = may_be_sparse(ir, hooks.sparse)
        self.uses = use_counts(ir)
        # (a long function keeps one call per taped statement: its code, and the time
        # to transform it, stay linear in its length)
        self.unroll = sum(taped_call(st, hooks.taped) is not None for _, _, st in ir.statements()) <= _UNROLL_LIMIT
        self.home = {v: b for b, blk in enumerate(ir.blocks)
                     for v in blk.args + [v for v, _ in blk.stmts]}
        m = ir.meta
        self.adj = IR(Meta(f"adjoint_{m.name}", m.filename, m.firstlineno, generator=m.generator,
                           clearable=None))  # (no local of the user's: the tape's and gradients)
        self.tape = self.adj.argument(0)
        self.dy = self.adj.argument(0)
        self.sites = yield_sites(ir)
        if m.generator:  # the yield it stopped at, or None when it returned
            self.stop = self.adj.argument(0)
        # in the order of definition, not of the variables' addresses: the same code every run
        self.slots = {v: Slot(f"g{v.id}") for v in sorted(active, key=lambda v: v.id)}
        self.adj.meta.names.update((s, m.names[v]) for v, s in self.slots.items() if v in m.names)
        self.start = {}

    def slot(self, x):
        return self.slots.get(x) if isinstance(x, Var) else None

    def emit(self, fn, *args, dest=None, line=None, **kw):
        return self.adj.push(self.cur, Stmt(fn, args, kw, line), dest)

    def add_into(self, x, g, line, block):
        """``@gx = accum(@gx, g)``; a plain copy where ``x`` has a single use, in
        ``block`` where it is defined: then its slot is empty when the use is
        reached backwards (in a loop the definition resets it each time round)."""
        s = self.slot(x)
        if s is None:
            return
        if self.uses.get(x, 0) == 1 and self.home.get(x) == block:
            self.emit(ops.identity, g, dest=s, line=line)
        else:
            self.emit(self.accum, s, g, dest=s, line=line)

    def statement(self, b, v, st):
        """``pb = pop(); if @gv is not None: d = pb(@gv); @gv = None; @gx += d[i]…``, or
        for a statement whose values are on the tape, ``d = back(pop, @gv); @gv = None;
        @gx += d[i]…`` (``back`` pops them and tests for a gradient itself), or where
        only the first operand takes a gradient, ``@gx = into(pop, @gv, @gx)``."""
        line, gv = st.line, self.slots[v]
        if v in self.sites:
            return self.resumed(b, v, st)
        taped = taped_call(st, self.taped)
        if taped is not None:
            _, back, into, _ = taped
            u = self.dense(v, st, gv, line)
            if into is not None and self.slot(st.args[0]) is not None and \
                    not any(self.slot(x) is not None for x in st.args[1:]):
                s = self.slot(st.args[0])  # (an element read adds into its array's slot)
                self.emit(into, self.pop, u, s, dest=s, line=line)
                self.emit(ops.identity, None, dest=gv, line=line)
                return
            spec = getattr(back, "inline", None)
            if self.unroll and type(spec) is ops.InlineBack:
                return self.unrolled(b, st, spec, u, gv, line)
            d = self.emit(back, self.pop, u, line=line)
            self.emit(ops.identity, None, dest=gv, line=line)
            self.gradients(b, st, d, line)
            return
        pb = self.emit(self.pop, line=line)
        after, call = self.adj.block(), self.adj.block()
        const = not isinstance(st.fn, (Var, Global))
        if not (const and self.effectful(st.fn)):
            # without a gradient, a pullback may still have work: a transformed
            # function's stores into cells, a mutation's restore (the runtime says)
            has = self.emit(operator.is_not, gv, None, line=line)
            ask = self.adj.block()
            self.adj.branch(self.cur, Branch("br", ask, cond=has))
            self.adj.branch(self.cur, Branch("br", call))
            self.cur = ask
            needs = self.emit(self.runs_without_gradient, pb, line=line)
            self.adj.branch(self.cur, Branch("br", after, cond=needs))
        self.adj.branch(self.cur, Branch("br", call))
        self.cur = call
        d = self.emit(ops.pull, self.pullback, pb, self.dense(v, st, gv, line), line=line)
        self.emit(ops.identity, None, dest=gv, line=line)
        self.gradients(b, st, d, line)
        self.adj.branch(self.cur, Branch("br", after))
        self.cur = after

    def unrolled(self, b, st, spec, u, gv, line):
        """``back(pop, @gv)`` written out (`ops.InlineBack`): pop the last entry ``k``;
        the first case whose test ``k`` passes adds its expressions into the operands'
        slots (a case that gives some needs a gradient); elsewhere ``given(k, pop, @gv)``."""
        k = self.emit(self.pop, line=line)
        has = self.emit(operator.is_not, u, None, line=line)
        slow, after = self.adj.block(), self.adj.block()
        for n, ((how, what), pops, grads) in enumerate(spec.cases, 1):
            ok = self.emit(operator.is_, self.emit(type, k, line=line) if how == "type" else k, what, line=line)
            fast = self.adj.block()
            rest = slow if n == len(spec.cases) else self.adj.block()
            self.adj.branch(self.cur, Branch("br", rest, cond=ok))
            if any(e is not None for e in grads):
                self.adj.branch(self.cur, Branch("br", slow, cond=has))
            self.adj.branch(self.cur, Branch("br", fast))
            self.cur = fast
            names = {"d": u, "k": k}
            names.update((name, self.emit(self.pop, line=line)) for name in pops)
            for x, e in zip(st.args, grads):
                if e is not None and self.slot(x) is not None:
                    self.add_into(x, self.expression(e, names, line), line, b)
            self.emit(ops.identity, None, dest=gv, line=line)
            self.adj.branch(self.cur, Branch("br", after))
            self.cur = rest
        self.cur = slow
        d = self.emit(spec.given, k, self.pop, u, line=line)
        self.emit(ops.identity, None, dest=gv, line=line)
        self.gradients(b, st, d, line)
        self.adj.branch(self.cur, Branch("br", after))
        self.cur = after

    def expression(self, e, names, line):
        if type(e) is tuple:
            return self.emit(e[0], *(self.expression(x, names, line) for x in e[1:]), line=line)
        return names[e] if type(e) is str else e

    def resumed(self, b, v, st):
        """``%s = yield %v`` backwards, in a block of its own (where the adjoint of a
        generator suspended there starts): hand the gradient of what was sent out, and
        take the gradient of what was yielded in, ``d = yield @gs; @gv += d``."""
        line, gs = st.line, self.slots[v]
        self.adj.branch(self.cur, Branch("br", self.resume[v]))
        self.cur = self.resume[v]
        self.emit(self.pop, line=line)  # (the yield's number)
        d = self.emit(ops.yield_, gs, line=line)
        self.emit(ops.identity, None, dest=gs, line=line)
        self.add_into(st.args[0], d, line, b)

    def dense(self, v, st, gv, line):
        """The gradient in slot ``gv`` as ``st``'s pullback takes it."""
        const = not isinstance(st.fn, (Var, Global))
        if v in self.sparse and not (const and self.structured(st.fn)):
            return self.emit(self.unwrap, gv, line=line)
        return gv

    def gradients(self, b, st, d, line):
        """Add the pullback result ``d`` into the slots of ``st``'s operands."""
        for i, x in enumerate((st.fn,) + st.args):
            if self.slot(x) is not None:
                self.add_into(x, self.emit(operator.getitem, d, i, line=line), line, b)
        for k, x in st.kw.items():
            if self.slot(x) is not None:
                self.add_into(x, self.emit(self.kwgrad, d, len(st.args) + 1, k, line=line), line, b)

    def transfer(self, b, p, br):
        """Move the gradients of block ``b``'s arguments to what edge ``br`` passed."""
        pairs = [(self.slots[p], a) for p, a in zip(self.ir.blocks[b].args, br.args) if p in self.slots]
        held = [self.emit(ops.identity, s) for s, _ in pairs]
        for s, _ in pairs:
            self.emit(ops.identity, None, dest=s)
        for (_, a), g in zip(pairs, held):
            self.add_into(a, g, br.line, p)

    def back_to(self, p, br):
        """Where the reverse pass goes back into block ``p`` along edge ``br``: to the
        start of its reversal, or past its statement where an exception left it."""
        return self.after[p] if br.catch else self.start[p]

    def block(self, b):
        self.cur = self.start[b]
        for v, st in reversed(self.ir.blocks[b].stmts):
            if v in self.active:
                self.statement(b, v, st)
        if b in self.after:
            self.adj.branch(self.cur, Branch("br", self.after[b]))
            self.cur = self.after[b]
        if b == 0:
            grads = [None if a not in self.slots else self.slots[a] if a not in self.sparse
                     else self.emit(self.unwrap, self.slots[a]) for a in self.ir.blocks[0].args]
            self.adj.branch(self.cur, Branch("return", args=[self.emit(ops.build_tuple, *grads)]))
            return
        edges = incoming(self.ir, b)
        if not recorded(self.ir, b):
            (p, br), = edges
            self.transfer(b, p, br)
            self.adj.branch(self.cur, Branch("br", self.back_to(p, br)))
            return
        e = self.emit(self.pop)
        for k, (p, br) in enumerate(edges):
            if k < len(edges) - 1:
                take, rest = self.adj.block(), self.adj.block()
                c = self.emit(operator.eq, e, k)
                self.adj.branch(self.cur, Branch("br", rest, cond=c))
                self.adj.branch(self.cur, Branch("br", take))
                self.cur = take
            self.transfer(b, p, br)
            self.adj.branch(self.cur, Branch("br", self.back_to(p, br)))
            if k < len(edges) - 1:
                self.cur = rest

    def run(self):
        ir = self.ir
        self.cur = 0
        self.pop = self.emit(getattr, self.emit(reversed, self.tape), "__next__")
        self.adj.meta.names[self.pop] = "pop: the tape's next entry, last first"
        for s in self.slots.values():
            self.emit(ops.identity, None, dest=s)
        r = return_block(ir)
        for b in range(len(ir.blocks)):
            self.start[b] = self.adj.block()
        self.after = {b: self.adj.block() for b in range(len(ir.blocks)) if ir.blocks[b].catches()}
        self.resume = {v: self.adj.block() for v in self.sites}
        for v, k in self.sites.items():  # a suspended generator's adjoint starts at its yield
            rest = self.adj.block()
            self.adj.branch(self.cur, Branch("br", rest, cond=self.emit(operator.eq, self.stop, k)))
            self.adj.branch(self.cur, Branch("br", self.resume[v]))
            self.cur = rest
        if r is not None:
            (y,) = [br.args[0] for br in ir.blocks[r].branches if br.kind == "return"]
            if self.slot(y) is not None:
                self.emit(ops.identity, self.dy, dest=self.slots[y])
            self.adj.branch(self.cur, Branch("br", self.start[r]))
        else:
            self.adj.branch(self.cur, Branch("br", self.start[0]))
        for b in range(len(ir.blocks)):
            self.block(b)
        return self.adj


def use_counts(ir) -> dict:
    """How many times each variable is used (as an operand or a branch argument)."""
    n = {}
    for blk in ir.blocks:
        xs = [x for _, st in blk.stmts for x in st.operands()]
        xs += [x for br in blk.branches for x in br.operands()]
        for x in xs:
            if isinstance(x, Var):
                n[x] = n.get(x, 0) + 1
    return n


def may_be_sparse(ir, sparse) -> set:
    """Variables whose gradient slot may hold a sparse gradient: the arguments of
    callees marked ``sparse`` (a global callee is asked about what it names) or not known
    until run time, and what edges pass
    to block arguments that may."""
    out = {x for _, _, st in ir.statements()
           if isinstance(st.fn, Var) or sparse(st.fn)  # a dynamic callee may be getitem
           for x in st.args if isinstance(x, Var)}
    return flow(ir, out, backward=True)


def first_into_empty(adj, accum) -> IR:
    """``@s = accum(@s, g)`` where ``@s`` is None on every path to it becomes
    ``@s = ops.identity(g)`` (``accum(None, g)`` is ``g``): a call less for the first
    gradient a slot receives, at every call of the adjoint.  Which slots are empty at
    each block's start is a forward dataflow over the adjoint's edges (sets of slots
    as bits of an int, so that a long function's thousands of blocks cost little):
    all are after the entry's initialisations, and a slot stays empty until a
    statement assigns it anything but None."""
    cfg = CFG.of(adj)
    bit = {}
    for _, v, _ in adj.statements():
        if isinstance(v, Slot) and v not in bit:
            bit[v] = 1 << len(bit)
    # per block: the slots it leaves empty (last assigned None) and those it assigns
    gen, touched = [0] * len(adj.blocks), [0] * len(adj.blocks)
    for b in cfg.order:
        for v, st in adj.blocks[b].stmts:
            if v in bit:
                touched[b] |= bit[v]
                gen[b] = gen[b] | bit[v] if _clears(st) else gen[b] & ~bit[v]
    start = [(1 << len(bit)) - 1] * len(adj.blocks)  # (the greatest sets, shrunk to a fixpoint)
    start[0] = 0
    changed = True
    while changed:
        changed = False
        for b in cfg.order:
            end = start[b] & ~touched[b] | gen[b]
            for t in cfg.succs[b]:
                if start[t] & ~end:
                    start[t] &= end
                    changed = True
    for b in cfg.order:
        empty, stmts = start[b], adj.blocks[b].stmts
        for i, (v, st) in enumerate(stmts):
            if v not in bit:
                continue
            if st.fn is accum and st.args[0] is v and empty & bit[v]:
                stmts[i] = (v, Stmt(ops.identity, st.args[1:], None, st.line))
            empty = empty | bit[v] if _clears(stmts[i][1]) else empty & ~bit[v]
    return adj


def _clears(st) -> bool:
    """Whether statement ``st`` assigns None: ``@s = ops.identity(None)``."""
    return st.fn is ops.identity and st.args == (None,)


def adjoint(ir, active, hooks) -> IR:
    """The adjoint IR of the (single-return) primal ``ir``; see the module docstring.

    ``hooks`` gives ``accum``, ``unwrap``, ``kwgrad``, ``pullback`` (the type of a
    transformed function's pullbacks, which `ops.pull` calls without a frame), and the
    predicates ``effectful``, ``sparse``, ``structured`` (its pullback takes a
    structured gradient as it is) and ``runs_without_gradient`` (for a
    pullback found at run time: whether it must run even when its output has no
    gradient, because it stores into a cell or restores what a mutation overwrote).
    """
    return simplify(first_into_empty(_Adjoint(ir, active, hooks).run(), hooks.accum))
