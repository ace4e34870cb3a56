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
zeroed where their value is defined, so a loop's passes do not mix.

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
    def fused(v2, seed, nf, ni):
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
                while True:
                    if v6 == 0:
                        m0 = d7
                        d7 = 0.0
                        blk = 0
                        break
                    v6 -= 1
                    m0 = d7
                    d7 = 0.0
                    d14 += m0
                    v10 = v6
                    v12 = v2[v10]
                    d7 += d14
                    d13 += d14
                    d14 = 0.0
                    d12 += d13 * 2.0 * v12
                    d13 = 0.0
                    d2[v10] += d12
                    d12 = 0.0
        ...
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from ..ir import Var, ops
from ..ir.cfg import CFG
from .typed import (BOOL, F32, F64, I64, RANGE, UNDEF_T, Array, Const, Iter, NotCompilableError,
                    Tuple, is_float)

_SYMBOL = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**",
           operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
           operator.eq: "==", operator.ne: "!="}
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
            operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
            operator.imod: operator.mod, operator.ipow: operator.pow}

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
    """The module source of ``fused(*args, seed, nf, ni)`` for typed IR ``t``: it returns
    ``(value, gradients of the entry arguments at positions wrt, nf, ni)``, where ``nf`` and
    ``ni`` are the sizes the float and int tapes start with, and the numbers of values the
    forward sweep pushed on them (the tapes grow when they fill up; the caller passes the
    last call's numbers, so a steady caller's tapes are allocated once, at their size)."""
    return HELPERS + "\n\n" + _Gen(t, wrt, funcs).function()


def literal(x) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return "math.nan" if x != x else ("math.inf" if x > 0 else "-math.inf")
    return repr(x)


class _Gen:
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
        self.wrt = [self.entry[i] for i in wrt]
        self.active = self._activity()
        self.adjname = self._adjoint_names()
        self.loops = {}
        for b in self.blocks:
            loop = self._counted_loop(b)
            if loop is not None:
                self.loops[b] = loop
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

    # -- operands --------------------------------------------------------------
    def e(self, x):
        if isinstance(x, Var):
            return f"v{x.id}"
        return literal(x)

    # -- statements: forward ------------------------------------------------------
    def forward(self, v, st):
        f, a = self.fn(st), st.args
        y = self.e(v)
        f = _INPLACE.get(f, f)
        if f in _SYMBOL:
            return [f"{y} = {self.e(a[0])} {_SYMBOL[f]} {self.e(a[1])}"]
        if f is operator.neg or f is operator.pos:
            return [f"{y} = {'-' if f is operator.neg else '+'}{self.e(a[0])}"]
        if f is operator.abs or f is abs:
            return [f"{y} = abs({self.e(a[0])})"]
        if f is operator.not_:
            return [f"{y} = not {self.e(a[0])}"]
        if f is operator.truth:
            return [f"{y} = bool({self.e(a[0])})"]
        if f in (float, int, bool):
            return [f"{y} = {f.__name__}({self.e(a[0])})"]
        if f is min or f is max:
            return [f"{y} = {f.__name__}({', '.join(map(self.e, a))})"]
        if f in self.funcs:
            return [f"{y} = {self.funcs[f].name}({', '.join(map(self.e, a))})"]
        if f is ops.identity or f is ops.bound:
            return [f"{y} = {self.e(a[0])}"]
        if f is operator.getitem:
            return self.getitem(v, a)
        if f is operator.setitem:
            return self.push("f", f"{self.e(a[0])}[{self.e(a[1])}]") + \
                [f"{self.e(a[0])}[{self.e(a[1])}] = {self.e(a[2])}"]
        if f is getattr:
            return [f"{y} = {self.e(a[0])}.{a[1]}"]
        if f is len:
            return [f"{y} = len({self.e(a[0])})"]
        if f is range:
            r = [0, a[0], 1] if len(a) == 1 else [a[0], a[1], 1] if len(a) == 2 else list(a)
            return [f"{y}_{k} = {self.e(x)}" for k, x in enumerate(r)]
        if f is iter:
            return [f"{y} = {self.part(a[0], 0)}" if self.ty[a[0]] == RANGE else f"{y} = 0"]
        if f is ops.iterate:  # (its uses read what it iterates and its state)
            return []
        if f is operator.is_not or f is operator.is_:
            over, state = self.steps[a[0]]
            s, o = self.e(state), self.e(over)
            step = self.part(over, 2) if self.ty[over] == RANGE else "1"
            test = f"{s} < len({o})" if self.ty[over] != RANGE else \
                f"({s} < {o}_1 if {step} > 0 else {s} > {o}_1)" if step[0] == "v" else \
                f"{s} {'<' if int(step) > 0 else '>'} {o}_1"
            return [f"{y} = {test if f is operator.is_not else 'not ' + test}"]
        if f is ops.build_tuple:
            return [f"{y} = ({''.join(self.e(x) + ', ' for x in a)})"]
        if f is ops.unpack:
            return [f"{y} = {self.e(a[0])}"]
        raise self.refuse(v, st.line, repr(st), "the compiled tier has no code for it")

    def part(self, r, k):
        """Component ``k`` (start, stop, step) of range ``r`` as code: a literal where the
        ``range`` call gives a constant (``range(n)`` starts at 0 and steps by 1)."""
        a = self.made[r].args
        full = [0, a[0], 1] if len(a) == 1 else [a[0], a[1], 1] if len(a) == 2 else list(a)
        return f"{self.e(r)}_{k}" if isinstance(full[k], Var) else literal(full[k])

    def bounds(self, v, st):
        """The forward sweep's test of an element access's index, raising IndexError as
        Python would (the reverse sweep accesses no other elements, so it tests none)."""
        f, a = self.fn(st), st.args
        el = self.element(st) if f is operator.getitem else (a[0], a[1]) if f is operator.setitem else None
        if el is None or a[0] in self.steps:  # (an iteration over an array stays in it)
            return []
        arr, idx = el
        n = self.ty[arr].ndim
        parts = [self.e(idx)] if n == 1 else [literal(i) for i in idx] if isinstance(idx, tuple) \
            else [f"{self.e(idx)}[{k}]" for k in range(n)]
        filename, line = self.t.where(v, st.line)
        msg = literal(f"{filename}:{line}: index out of range")
        return [line for k, i in enumerate(parts)
                for line in (f"if {i} >= {self.e(arr)}.shape[{k}] or {i} < -{self.e(arr)}.shape[{k}]:",
                             f"    raise IndexError({msg})")]

    def getitem(self, v, a):
        y, x = self.e(v), a[0]
        if x in self.steps:
            over, state = self.steps[x]
            if a[1] == 1:
                return [f"{y} = {self.e(state)} + {self.part(over, 2)}" if self.ty[over] == RANGE
                        else f"{y} = {self.e(state)} + 1"]
            return [f"{y} = {self.e(state)}" if self.ty[over] == RANGE
                    else f"{y} = {self.e(over)}[{self.e(state)}]"]
        return [f"{y} = {self.e(x)}[{self.e(a[1])}]"]

    def element(self, st):
        """``(array, index)`` of an element read, or None."""
        f, a = self.fn(st), st.args
        if f is not operator.getitem:
            return None
        if a[0] in self.steps:
            over, state = self.steps[a[0]]
            return (over, state) if a[1] == 0 and self.ty[over] != RANGE else None
        return (a[0], a[1]) if isinstance(self.ty[a[0]], Array) else None

    @staticmethod
    def push(kind, x):
        t, n = ("tf", "nf") if kind == "f" else ("ti", "ni")
        return [f"if {n} == {t}.shape[0]:", f"    {t} = _grow({t})", f"{t}[{n}] = {x}", f"{n} += 1"]

    @staticmethod
    def pop(kind, y):
        t, n = ("tf", "nf") if kind == "f" else ("ti", "ni")
        return [f"{n} -= 1", f"{y} = {t}[{n}]"]

    # -- statements: reverse -------------------------------------------------------
    def needs(self, v, st):
        """The values the adjoint of ``v = st`` reads (all of its operands' values that
        appear in a derivative)."""
        f, a = _INPLACE.get(self.fn(st), self.fn(st)), st.args
        if f is operator.setitem:
            return _vars(a[1:2]) if a[0] in self.active else []
        if v not in self.active:
            return []
        el = self.element(st)
        if el is not None:
            return _vars([el[1]])
        if f in (operator.mul, operator.truediv, operator.mod, min, max, abs, operator.abs):
            return _vars(a)
        if f is operator.pow:
            return _vars(a) + ([v] if a[1] in self.active else [])
        if f in self.funcs:
            return _vars(a) + [v]
        return []

    def recomputable(self, st):
        f = self.fn(st)
        if f in self.funcs or f is operator.setitem or f is ops.iterate or f is range:
            return False
        return not (self.written and self.element(st) is not None)

    def operands(self, st):
        """The values a statement's forward code reads (an iteration step's own)."""
        out = []
        for x in st.args:
            if x in self.steps:
                over, state = self.steps[x]
                out += [state] if self.ty[over] == RANGE and st.args[1] == 0 else [over, state]
            else:
                out.append(x)
        return _vars(out)

    def reverse(self, v, st):
        f, a = _INPLACE.get(self.fn(st), self.fn(st)), st.args
        if f is operator.setitem:
            if a[0] not in self.active:
                return self.pop("f", f"{self.e(a[0])}[{self.e(a[1])}]")
            dx, da = self.d(a[2]), self.d(a[0])
            el = f"{da}[{self.e(a[1])}]"
            return ([f"{dx} += {el}"] if dx else []) + [f"{el} = 0.0"] + \
                self.pop("f", f"{self.e(a[0])}[{self.e(a[1])}]")
        g = self.d(v)
        if g is None or isinstance(self.ty[v], (Array, Tuple)) and f is not ops.build_tuple:
            return []
        out = self.adjoint(v, st, f, a, g)
        return out + ([f"{g} = 0.0"] if isinstance(self.ty[v], type(F64)) else [])

    def adjoint(self, v, st, f, a, g):
        e = self.e
        el = self.element(st)
        if el is not None:
            return [f"{self.d(el[0])}[{e(el[1])}] += {g}"]
        if f is operator.getitem:  # an item of a tuple
            return self.add(a[0], g, a[1])
        if f is ops.build_tuple:
            return [line for k, x in enumerate(a) for line in self.add(x, self.d(v, k))] + \
                [f"{self.d(v, k)} = 0.0" for k in range(len(a)) if self.d(v, k)]
        if f in (operator.add, operator.pos, ops.identity, ops.bound, float):
            return [line for x in a[:2] for line in self.add(x, g)]
        if f is operator.sub:
            return self.add(a[0], g) + self.add(a[1], f"-{g}")
        if f is operator.neg:
            return self.add(a[0], f"-{g}")
        if f is operator.mul:
            return self.add(a[0], f"{g} * {e(a[1])}") + self.add(a[1], f"{g} * {e(a[0])}")
        if f is operator.truediv:
            return self.add(a[0], f"{g} / {e(a[1])}") + \
                self.add(a[1], f"-{g} * {e(a[0])} / ({e(a[1])} * {e(a[1])})")
        if f is operator.mod:
            return self.add(a[0], g) + self.add(a[1], f"-{g} * ({e(a[0])} // {e(a[1])})")
        if f is operator.pow:
            return self.power(v, a, g)
        if f is abs or f is operator.abs:
            x = e(a[0])
            return self.add(a[0], f"{g} * (1.0 if {x} > 0 else -1.0 if {x} < 0 else 0.0)")
        if f is min or f is max:
            return self.extremum(f, a, g)
        if f in self.funcs:
            fn = self.funcs[f]
            names = {"y": e(v)} | ({"x": e(a[0])} if len(a) == 1 else {f"x{k}": e(x) for k, x in enumerate(a)})
            return [line for x, dx in zip(a, fn.derivs) for line in self.add(x, f"{g} * ({dx.format(**names)})")]
        return []  # (floordiv, int, comparisons: no gradient)

    def add(self, x, term, k=None):
        dx = self.d(x, k)
        return [f"{dx} += {term}"] if dx else []

    def power(self, v, a, g):
        x, n = self.e(a[0]), a[1]
        if not isinstance(n, Var):
            term = None if n == 0 else g if n == 1 else f"{g} * {literal(float(n))} * {x}" if n == 2 \
                else f"{g} * {literal(float(n))} * {x} ** {literal(n - 1)}"
            return self.add(a[0], term) if term else []
        ne = self.e(n)
        out = self.add(a[0], f"({g} * {ne} * {x} ** ({ne} - 1) if {ne} != 0 else 0.0)")
        return out + self.add(n, f"({g} * {self.e(v)} * math.log(abs({x})) if {x} != 0 else 0.0)")

    def extremum(self, f, a, g):
        """Python's choice: the first of the arguments that no later one beats strictly."""
        better = ">" if f is max else "<"
        out = ["best = 0", f"top = {self.e(a[0])}"]
        for k, x in enumerate(a[1:], 1):
            out += [f"if {self.e(x)} {better} top:", f"    best = {k}", f"    top = {self.e(x)}"]
        for k, x in enumerate(a):
            if self.d(x):
                out += [f"if best == {k}:", f"    {self.d(x)} += {g}"]
        return out

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
        """Structured loop ``h`` backwards, as ``while True:``: the header's adjoint, then,
        unless this was the first pass (its index is the start: out by the entry edge), the
        chain's adjoints from the last block to the first."""
        loop, edges = self.loops[h], self.cfg.incoming[h]
        i = self.e(loop.index)
        out = self.reverse_body(h, plans)
        first = self.back(h, *edges[loop.entry], None if nested else "break")
        out += [f"if {i} == {loop.start}:"] + ["    " + x for x in first + ["break"] * bool(nested)]
        out += [f"{i} -= {loop.step}"] + self.back(h, *edges[loop.latch], None)
        for c in reversed(self.chains[h]):
            if c in self.chains:
                out += self.loop_reverse(c, plans, True)
                continue
            out += self.reverse_body(c, plans) + self.back(c, *self.cfg.incoming[c][0], None)
        return ["while True:"] + ["    " + x for x in out]

    def reverse_body(self, b, plans):
        stored, again = plans[b]
        out = []
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
        out, moves = [], []
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
        body = self.declarations()
        plans = {b: self.plan(b) for b in self.blocks}
        body += ["blk = 0", "ret = 0.0", "while blk >= 0:"]
        inside = {c for chain in self.chains.values() for c in chain}
        shown = [b for b in self.blocks if b not in inside]  # (a structured loop's blocks run in it)
        for k, b in enumerate(shown):
            body += [f"    {'if' if k == 0 else 'elif'} blk == {b}:"]
            body += ["        " + x for x in self.forward_block(b, plans)]
        body += ["pushed_f, pushed_i = nf, ni", "# the reverse sweep"] + self.seed()
        ret = self.ir.blocks[[b for b in self.blocks
                              if any(br.kind == "return" for br in self.ir.blocks[b].branches)][0]]
        body += [f"blk = {self.ir.blocks.index(ret)}", "while blk >= 0:"]
        for k, b in enumerate(shown):
            body += [f"    {'if' if k == 0 else 'elif'} blk == {b}:"]
            body += ["        " + x for x in self.reverse_block(b, plans)]
        body += [f"return ret, {''.join(self.gradient(x) + ', ' for x in self.wrt)}pushed_f, pushed_i"]
        return f"@numba.njit(cache=True)\ndef fused({', '.join(params + ['seed', 'nf', 'ni'])}):\n" + \
            "\n".join("    " + x for x in body) + "\n"

    def seed(self):
        ret = [br.args[0] for b in self.blocks for br in self.ir.blocks[b].branches if br.kind == "return"][0]
        return self.add(ret, "seed")

    def gradient(self, x):
        kind = self.ty[x]
        if isinstance(kind, Tuple):
            return "(" + "".join((self.d(x, k) or _zero(i)) + ", " for k, i in enumerate(kind.items)
                                 if not isinstance(i, Array) or self.d(x, k)) + ")"
        return self.d(x) or "None"  # (no path from it to the result)

    def declarations(self):
        """Every local typed from the start (numba types a local once): numbers zero, the
        adjoints of arrays passed in zero arrays like them, empty tapes."""
        out, seen = ["tf = np.empty(nf)", "ti = np.empty(ni, np.int64)", "nf = 0", "ni = 0", "best = 0",
                     "top = 0.0", "edge = 0"], set()
        out += [f"m{k} = 0.0" for k in range(max([len(self.ir.blocks[b].args) for b in self.blocks]))]
        for x in self.entry[1:]:
            kind = self.ty[x]
            if isinstance(kind, Array) and x in self.active:
                out.append(f"d{x.id} = np.zeros_like(v{x.id})")
            elif isinstance(kind, Tuple) and x in self.active:
                for k, item in enumerate(kind.items):
                    if isinstance(item, Array):
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


def _vars(xs):
    return [x for x in xs if isinstance(x, Var)]
