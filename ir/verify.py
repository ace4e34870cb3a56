"""Check an IR's invariants; raise `IRError` saying which one fails and where."""
from __future__ import annotations

from .cfg import CFG
from .ir import Slot, Var


class IRError(Exception):
    pass


def verify(ir):
    """Every variable defined once; every use dominated by its definition; branch
    arity equal to the target's arguments; every block ends in a terminator."""
    where = {}
    for b, blk in enumerate(ir.blocks):
        for i, v in enumerate(blk.args):
            _define(where, v, (b, -1))
        for i, (v, _) in enumerate(blk.stmts):
            if not isinstance(v, Slot):
                _define(where, v, (b, i))
    cfg = CFG.of(ir)
    for b, blk in enumerate(ir.blocks):
        if not cfg.reachable(b):
            continue
        for i, (v, st) in enumerate(blk.stmts):
            for x in st.operands():
                _check_use(ir, where, x, (b, i), f"{v!r} = {st!r}")
        for br in blk.branches:
            for x in br.operands():
                _check_use(ir, where, x, (b, len(blk.stmts)), repr(br))
            if br.kind == "br" and len(br.args) != len(ir.blocks[br.target].args):
                raise IRError(f"block {b + 1}: {br!r} passes {len(br.args)} values to a block "
                              f"with {len(ir.blocks[br.target].args)} arguments")
        last = blk.branches[-1] if blk.branches else None
        if last is None or (last.kind == "br" and last.cond is not None):
            raise IRError(f"block {b + 1} does not end in an unconditional branch, return or raise")
    return ir


def _define(where, v, pos):
    if v in where:
        raise IRError(f"{v!r} is defined twice")
    where[v] = pos


def _check_use(ir, where, x, pos, text):
    if not isinstance(x, Var):
        return
    if x not in where:
        raise IRError(f"block {pos[0] + 1}: {text} uses {x!r}, which is never defined")
    db, di = where[x]
    ub, ui = pos
    ok = (di < ui) if db == ub else CFG.of(ir).dominates(db, ub)
    if not ok:
        raise IRError(f"block {ub + 1}: {text} uses {x!r}, whose definition does not dominate it")
