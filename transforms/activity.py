"""Static activity analysis: which variables can carry a gradient.

Every argument of the entry block (the function itself and its parameters) is
active.  A statement is active when an active value flows into it and its
callee is not known to return something gradient-free (``len``, comparisons,
``range``…, decided by the ``nondiff`` predicate the caller supplies); its
result is then active.  A block argument is active when any edge passes it an
active value.  Inactive statements stay plain calls in the forward IR.
"""
from __future__ import annotations

from ..ir import Var


def activity(ir, nondiff) -> set:
    """The set of active variables of ``ir``."""
    active = set(ir.blocks[0].args)
    changed = True
    while changed:
        changed = False
        for blk in ir.blocks:
            for v, st in blk.stmts:
                if v in active or (not isinstance(st.fn, Var) and nondiff(st.fn)):
                    continue
                if any(x in active for x in st.operands() if isinstance(x, Var)):
                    active.add(v)
                    changed = True
            for br in blk.branches:
                if br.kind != "br":
                    continue
                for p, a in zip(ir.blocks[br.target].args, br.args):
                    if p not in active and isinstance(a, Var) and a in active:
                        active.add(p)
                        changed = True
    return active

