"""Static activity analysis: which variables can carry a gradient.

Every argument of the entry block (the function itself and its parameters) is
active.  A statement is active when an active value flows into it and its
callee is not known to return something gradient-free (``len``, comparisons,
``range``…, decided by the ``nondiff`` predicate the caller supplies); its
result is then active.  A block argument is active when any edge passes it an
active value.  Statements that make or store into a mutable object
(``effectful``: ``ops.make_cell``, ``ops.cell_set``) are always active, and so
is that object: a closure may store a differentiable value into it later.  Inactive statements stay plain calls in the forward IR.
"""
from __future__ import annotations

from ..ir import Var


def activity(ir, nondiff, effectful=lambda f: False, wrt=None) -> set:
    """The set of active variables of ``ir``.

    ``wrt`` (indices into the entry block's arguments) limits the arguments that
    start active, for a caller that wants only some gradients.
    """
    args = ir.blocks[0].args
    active = set(args if wrt is None else (args[i] for i in wrt))
    changed = True
    while changed:
        changed = False
        for blk in ir.blocks:
            for v, st in blk.stmts:
                const = not isinstance(st.fn, Var)
                if v in active or (const and nondiff(st.fn)):
                    continue
                xs = [x for x in st.operands() if isinstance(x, Var)]
                if const and effectful(st.fn):  # the object may receive a gradient later
                    active.add(v)
                    active.update(xs)
                    changed = True
                elif any(x in active for x in xs):
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

