"""Give an IR a single return, so the adjoint has one place to start."""
from __future__ import annotations

from ..ir import Branch
from ..ir.ir import copy


def unify_returns(ir):
    """A copy of ``ir`` whose ``return``s all go to one return block.

    ``2: return %4  3: return %5`` → ``2: br 4 (%4)  3: br 4 (%5)  4: (%6) return %6``.
    """
    ir = copy(ir)
    sites = [(b, i) for b, blk in enumerate(ir.blocks) for i, br in enumerate(blk.branches)
             if br.kind == "return"]
    if len(sites) <= 1:
        return ir
    r = ir.block()
    y = ir.argument(r)
    for b, i in sites:
        old = ir.blocks[b].branches[i]
        ir.blocks[b].branches[i] = Branch("br", r, old.args, line=old.line)
    ir.branch(r, Branch("return", args=[y], line=ir.blocks[sites[-1][0]].branches[sites[-1][1]].line))
    return ir


def return_block(ir):
    """The block that returns, or None for a function that always raises."""
    bs = [b for b, blk in enumerate(ir.blocks) if any(br.kind == "return" for br in blk.branches)]
    return bs[0] if bs else None

