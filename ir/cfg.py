"""Control-flow facts about an IR: incoming edges, reverse post-order, dominators.

`CFG.of(ir)` computes them once and caches them on the IR until its shape
changes (`IR.block`, `IR.branch`), so passes query them freely instead of
rescanning branches.  `incoming` is the one predecessor query every pass uses.
"""
from __future__ import annotations

from functools import cached_property

from .ir import Var


class CFG:
    def __init__(self, ir):
        n = len(ir.blocks)
        self.succs = [ir.blocks[b].successors() for b in range(n)]
        self.incoming = [[] for _ in range(n)]
        for p, blk in enumerate(ir.blocks):
            for br in blk.branches:
                if br.kind == "br":
                    self.incoming[br.target].append((p, br))
        self.preds = [list(dict.fromkeys(p for p, _ in edges)) for edges in self.incoming]
        self.order = self._rpo()
        self._reached = set(self.order)

    @staticmethod
    def of(ir) -> "CFG":
        """The CFG of ``ir``, computed once per shape of the IR."""
        if ir._cfg is None:
            ir._cfg = CFG(ir)
        return ir._cfg

    def _rpo(self):
        seen, post = {0}, []
        stack = [(0, iter(self.succs[0]))]
        while stack:
            b, it = stack[-1]
            for s in it:
                if s not in seen:
                    seen.add(s)
                    stack.append((s, iter(self.succs[s])))
                    break
            else:
                post.append(b)
                stack.pop()
        return post[::-1]

    @cached_property
    def idom(self) -> dict:
        """Immediate dominators: Cooper, Harvey & Kennedy's iterative algorithm over
        reverse post-order (only verification asks, so it is computed on demand)."""
        index = {b: i for i, b in enumerate(self.order)}
        idom = {0: 0}
        changed = True
        while changed:
            changed = False
            for b in self.order[1:]:
                ps = [p for p in self.preds[b] if p in idom]
                new = ps[0]
                for p in ps[1:]:
                    new = self._meet(p, new, idom, index)
                if idom.get(b) != new:
                    idom[b] = new
                    changed = True
        return idom

    @staticmethod
    def _meet(a, b, idom, index):
        while a != b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a

    def reachable(self, b) -> bool:
        return b in self._reached

    def dominates(self, a, b) -> bool:
        """Whether every path from the entry to block ``b`` passes through block ``a``."""
        idom = self.idom
        while True:
            if a == b:
                return True
            if b == 0:
                return False
            b = idom[b]


def incoming(ir, b) -> list:
    """The edges into block ``b`` as ``(predecessor, branch)``, in the order of the
    blocks and of their branches.

    The forward pass records an edge's position in this list where a block has
    more than one; the adjoint pops it to know which way to go back.
    """
    return CFG.of(ir).incoming[b]


def flow(ir, marked: set, backward=False, seed=lambda x: False) -> set:
    """Close ``marked`` over branch edges, in place.

    Forward: a block argument is marked when some edge passes it a marked value
    (or one ``seed`` accepts).  Backward: a variable is marked when some edge
    passes it to a marked block argument.  ``br 2 (%1)`` with ``2: (%4)``:
    forward ``{%1}`` → ``{%1, %4}``; backward ``{%4}`` → ``{%1, %4}``.
    """
    follow, todo = {}, list(marked)
    for blk in ir.blocks:
        for br in blk.branches:
            if br.kind != "br":
                continue
            for p, a in zip(ir.blocks[br.target].args, br.args):
                src, dst = (p, a) if backward else (a, p)
                if not isinstance(dst, Var):
                    continue
                if isinstance(src, Var):
                    follow.setdefault(src, []).append(dst)
                if dst not in marked and seed(src):
                    marked.add(dst)
                    todo.append(dst)
    while todo:
        for dst in follow.get(todo.pop(), ()):
            if dst not in marked:
                marked.add(dst)
                todo.append(dst)
    return marked
