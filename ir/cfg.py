"""Control-flow facts about an IR: predecessors, reverse post-order, dominators.

Computed once when first asked for and cached on the IR (`IR.cfg`), so passes
query them freely instead of rescanning branches.
"""
from __future__ import annotations


class CFG:
    def __init__(self, ir):
        n = len(ir.blocks)
        self.succs = [ir.blocks[b].successors() for b in range(n)]
        self.preds = [[] for _ in range(n)]
        for b, ss in enumerate(self.succs):
            for s in ss:
                if b not in self.preds[s]:
                    self.preds[s].append(b)
        self.order = self._rpo(n)
        self.idom = self._dominators()

    def _rpo(self, n):
        seen, post = set(), []
        stack = [(0, iter(self.succs[0]))]
        seen.add(0)
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

    def _dominators(self):
        """Cooper, Harvey & Kennedy's iterative algorithm over reverse post-order."""
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
        return b in self.idom

    def dominates(self, a, b) -> bool:
        """Whether every path from the entry to block ``b`` passes through block ``a``."""
        while True:
            if a == b:
                return True
            if b == 0:
                return False
            b = self.idom[b]


def flow(ir, marked: set, backward=False, seed=lambda x: False) -> set:
    """Close ``marked`` over branch edges, in place.

    Forward: a block argument is marked when some edge passes it a marked value
    (or one ``seed`` accepts).  Backward: a variable is marked when some edge
    passes it to a marked block argument.  ``br 2 (%1)`` with ``2: (%4)``:
    forward ``{%1}`` → ``{%1, %4}``; backward ``{%4}`` → ``{%1, %4}``.
    """
    from .ir import Var
    pairs = [(p, a) for blk in ir.blocks for br in blk.branches if br.kind == "br"
             for p, a in zip(ir.blocks[br.target].args, br.args)]
    changed = True
    while changed:
        changed = False
        for p, a in pairs:
            src, dst = (p, a) if backward else (a, p)
            if isinstance(dst, Var) and dst not in marked and (
                    (isinstance(src, Var) and src in marked) or seed(src)):
                marked.add(dst)
                changed = True
    return marked
