"""Clean-up passes that keep an IR's meaning and make it smaller.

`simplify` runs them all; the lifter calls it, and so do the AD passes.  Each
pass walks the IR a bounded number of times, whatever it removes: replacements
are collected and substituted in one sweep, and the CFG is computed once per
pass, so a long function simplifies in time linear in its length.
"""
from __future__ import annotations

import heapq

from . import ops
from .cfg import CFG, flow
from .ir import Branch, Var


def resolver(env: dict):
    """``look(x)``: what ``x`` stands for after the replacements ``env``, following
    chains (``{%4: %3, %3: %2}`` takes ``%4`` to ``%2``) and shortening them, so
    each is followed once."""
    def look(x):
        if not isinstance(x, Var) or x not in env:
            return x
        path = []
        while isinstance(x, Var) and x in env:
            path.append(x)
            x = env[x]
        for p in path:
            env[p] = x
        return x
    return look


def substitute(ir, env: dict):
    """Replace operands in place: with ``{%3: %2}``, ``f(%3)`` → ``f(%2)``."""
    if not env:
        return
    look = resolver(env)
    for blk in ir.blocks:
        blk.stmts = [(v, st.map(look)) for v, st in blk.stmts]
        for br in blk.branches:  # the same branches: `CFG.incoming` holds them
            br.args = [look(a) for a in br.args]
            br.cond = look(br.cond)


def keep_args(ir, b, keep):
    """Keep only the arguments of block ``b`` at positions ``keep``, and what every
    branch passes for them.  ``2: (%4, %5) … br 2 (%1, %2)`` with ``keep=[1]`` →
    ``2: (%5) … br 2 (%2)``."""
    blk = ir.blocks[b]
    blk.args = [blk.args[i] for i in keep]
    for _, br in CFG.of(ir).incoming[b]:
        br.args = [br.args[i] for i in keep]


def prune_unreachable(ir):
    """Drop blocks no path from the entry reaches; renumber branch targets."""
    cfg = CFG.of(ir)
    keep = [b for b in range(len(ir.blocks)) if cfg.reachable(b)]
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

    Arguments are examined in sweeps over the blocks in order, the arguments of
    each last first.  Removing one re-examines only the arguments it is passed
    to (later in this sweep, or in the next), which finds what sweeping all of
    them again until nothing changes would, in time linear in the IR.
    """
    incoming = CFG.of(ir).incoming
    env = {}
    look = resolver(env)
    passed_to = _passed_to(ir, incoming)
    sweep = [(b, -i) for b in range(1, len(ir.blocks)) for i in reversed(range(len(ir.blocks[b].args)))]
    gone = set()
    while sweep:
        heapq.heapify(sweep)
        later = set()
        while sweep:
            at = heapq.heappop(sweep)
            b, i = at[0], -at[1]
            if at in gone:
                continue
            value = _only_value(ir.blocks[b].args[i], [look(br.args[i]) for _, br in incoming[b]])
            if value is _NONE:
                continue
            a = ir.blocks[b].args[i]
            env[a] = value
            gone.add(at)
            users = passed_to.pop(a, [])
            if isinstance(value, Var):  # what reaches them through ``a`` now is ``value``
                passed_to.setdefault(value, []).extend(users)
            for u in users:
                if u > at:
                    heapq.heappush(sweep, u)
                else:
                    later.add(u)
        sweep = list(later - gone)
    _drop_args(ir, gone)
    substitute(ir, env)


def _drop_args(ir, gone):
    """Remove the block arguments at the ``(block, -position)``s ``gone``."""
    for b in range(1, len(ir.blocks)):
        n = len(ir.blocks[b].args)
        if any((b, -i) in gone for i in range(n)):
            keep_args(ir, b, [i for i in range(n) if (b, -i) not in gone])


_NONE = object()


def _only_value(a, values):
    """The one value other than ``a`` itself among ``values`` (by identity), else _NONE."""
    seen = {id(x): x for x in values}
    seen.pop(id(a), None)
    if len(seen) != 1 or ops.CAUGHT in seen.values():  # (each raise catches its own)
        return _NONE
    return next(iter(seen.values()))


def _passed_to(ir, incoming) -> dict:
    """Variable → the arguments it is passed to, as ``(block, -position)``."""
    out = {}
    for b in range(1, len(ir.blocks)):
        for _, br in incoming[b]:
            for i, x in enumerate(br.args):
                if isinstance(x, Var):
                    out.setdefault(x, []).append((b, -i))
    return out


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
        args = ir.blocks[b].args
        if not all(a in live for a in args):
            keep_args(ir, b, [i for i, a in enumerate(args) if a in live])


def merge_blocks(ir):
    """Fuse a block into its only predecessor when that one just jumps to it.

    ``1: … br 2 (%3)  2: (%4) … return %4`` → ``1: … return %3``.

    A fused block is left empty, jumping to itself, for `prune_unreachable`; a
    block that takes over its successor's branches becomes the predecessor of
    their targets.
    """
    preds = [set(ps) for ps in CFG.of(ir).preds]
    env = {}
    for b, blk in enumerate(ir.blocks):
        while len(blk.branches) == 1 and blk.branches[0].kind == "br" and blk.branches[0].cond is None:
            t = blk.branches[0].target
            if t == b or t == 0 or preds[t] != {b} or ir.blocks[t].catches():
                break  # (a block that catches keeps its one statement to itself)
            succ = ir.blocks[t]
            env.update(zip(succ.args, blk.branches[0].args))
            blk.stmts += succ.stmts
            blk.branches = succ.branches
            for s in succ.successors():
                preds[s].discard(t)
                preds[s].add(b)
            succ.args, succ.stmts, succ.branches = [], [], [Branch("br", t)]
            preds[t] = {t}
    ir._cfg = None
    substitute(ir, env)
    prune_unreachable(ir)


def renumber(ir):
    """Number variables 1, 2, … in the order they are defined."""
    n = 0
    for blk in ir.blocks:
        for v in blk.args + [v for v, _ in blk.stmts if isinstance(v, Var)]:
            n += 1
            v.id = n
    ir._nvars = n


def idle_catches(ir):
    """Drop the catch edge of a block with no statement left to raise.

    ``3: br 7 (%2, CAUGHT) on raise; br 4`` → ``3: br 4``.
    """
    for blk in ir.blocks:
        if blk.catches() and not blk.stmts:
            del blk.branches[0]
            ir._cfg = None


def simplify(ir):
    idle_catches(ir)
    prune_unreachable(ir)
    trivial_args(ir)
    dead_args(ir)
    merge_blocks(ir)
    renumber(ir)
    return ir
