"""Clean-up passes that keep an IR's meaning and make it smaller.

`simplify` runs them all; the lifter calls it, and so do the AD passes.
"""
from __future__ import annotations

from .cfg import flow
from .ir import Var


def substitute(ir, env: dict):
    """Replace operands in place: with ``{%3: %2}``, ``f(%3)`` → ``f(%2)``."""
    if not env:
        return

    def look(x):
        while isinstance(x, Var) and x in env:
            x = env[x]
        return x

    for blk in ir.blocks:
        blk.stmts = [(v, st.map(look)) for v, st in blk.stmts]
        blk.branches = [br.map(look) for br in blk.branches]


def _incoming(ir, b):
    return [br for blk in ir.blocks for br in blk.branches if br.kind == "br" and br.target == b]


def delete_arg(ir, b, i):
    """Remove argument ``i`` of block ``b`` and what every branch passes for it.

    ``2: (%4, %5) … br 2 (%1, %2)`` → ``2: (%5) … br 2 (%2)``.
    """
    del ir.blocks[b].args[i]
    for br in _incoming(ir, b):
        del br.args[i]


def prune_unreachable(ir):
    """Drop blocks no path from the entry reaches; renumber branch targets."""
    keep = [b for b in range(len(ir.blocks)) if ir.cfg.reachable(b)]
    if len(keep) == len(ir.blocks):
        return
    new = {b: i for i, b in enumerate(keep)}
    ir.blocks = [ir.blocks[b] for b in keep]
    for blk in ir.blocks:
        for br in blk.branches:
            if br.kind == "br":
                br.target = new[br.target]
    ir._cfg = None


def trivial_args(ir):
    """A block argument that receives one value on every edge is that value.

    ``2: (%4) … br 2 (%1) … br 2 (%4)`` → uses of ``%4`` become ``%1``.
    """
    changed = True
    while changed:
        changed = False
        for b in range(1, len(ir.blocks)):
            blk = ir.blocks[b]
            for i in reversed(range(len(blk.args))):
                a = blk.args[i]
                seen = {id(br.args[i]): br.args[i] for br in _incoming(ir, b)} 
                seen.pop(id(a), None)
                if len(seen) == 1:
                    (value,) = seen.values()
                    delete_arg(ir, b, i)
                    substitute(ir, {a: value})
                    changed = True


def dead_args(ir):
    """Remove block arguments whose value no statement or branch condition uses."""
    live = set()
    for blk in ir.blocks:
        for _, st in blk.stmts:
            live.update(x for x in st.operands() if isinstance(x, Var))
        for br in blk.branches:
            if br.cond is not None and isinstance(br.cond, Var):
                live.add(br.cond)
            if br.kind != "br":
                live.update(x for x in br.args if isinstance(x, Var))
    flow(ir, live, backward=True)
    for b in range(1, len(ir.blocks)):
        for i in reversed(range(len(ir.blocks[b].args))):
            if ir.blocks[b].args[i] not in live:
                delete_arg(ir, b, i)


def merge_blocks(ir):
    """Fuse a block into its only predecessor when that one just jumps to it.

    ``1: … br 2 (%3)  2: (%4) … return %4`` → ``1: … return %3``.
    """
    changed = True
    while changed:
        changed = False
        preds = ir.cfg.preds
        for b, blk in enumerate(ir.blocks):
            if len(blk.branches) != 1 or blk.branches[0].kind != "br" or blk.branches[0].cond is not None:
                continue
            t = blk.branches[0].target
            if t == b or t == 0 or preds[t] != [b]:
                continue
            succ = ir.blocks[t]
            env = dict(zip(succ.args, blk.branches[0].args))
            blk.stmts += succ.stmts
            blk.branches = succ.branches
            succ.args, succ.stmts, succ.branches = [], [], [_self_loop(t)]
            ir._cfg = None
            substitute(ir, env)
            changed = True
            break
    prune_unreachable(ir)


def _self_loop(t):
    from .ir import Branch
    return Branch("br", t)


def renumber(ir):
    """Number variables 1, 2, … in the order they are defined."""
    n = 0
    for blk in ir.blocks:
        for v in blk.args + [v for v, _ in blk.stmts if isinstance(v, Var)]:
            n += 1
            v.id = n
    ir._nvars = n


def simplify(ir):
    prune_unreachable(ir)
    trivial_args(ir)
    dead_args(ir)
    merge_blocks(ir)
    renumber(ir)
    return ir
