"""Static activity analysis: which variables can carry a gradient.

Every argument of the entry block (the function itself and its parameters) is
active.  A statement is active when an active value flows into it and its
callee is not known to return something gradient-free (``len``, comparisons,
``range``…, decided by the ``nondiff`` predicate the caller supplies); its
result is then active.  A block argument is active when any edge passes it an
active value.  Statements that make or store into a mutable object
(``effectful``: ``ops.make_cell``, ``operator.setitem``) are always active.  Their
operands are *hazards*: they may be changed to hold an active value, so every
later use of them is active, though their own value needs no gradient (the
gradient of what a mutation stored travels through the runtime's shadow).  A call
of a callee known only at run time (a user function, a method) may store an
active argument into another one or into its own object (``xs.append(x)``): its
operands are hazards too.  Inactive statements stay plain calls in the forward IR.
"""
from __future__ import annotations

from ..ir import Global, Var


def activity(ir, nondiff, effectful=lambda f: False, wrt=None) -> set:
    """The set of active variables of ``ir``.

    ``wrt`` (indices into the entry block's arguments) limits the arguments that
    start active, for a caller that wants only some gradients.
    """
    args = ir.blocks[0].args
    active = set(args if wrt is None else (args[i] for i in wrt))
    owner = {v: (st.args[0],) for _, v, st in ir.statements()  # a method's object
             if st.fn is getattr and isinstance(st.args[0], Var)}
    hazard = set()  # may be mutated by an active call: its uses are active, its value is not
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
                    hazard.update(xs)
                    changed = True
                elif any(x in active or x in hazard for x in xs):
                    active.add(v)
                    if isinstance(st.fn, (Var, Global)):  # it may store an active value into any operand
                        hazard.update(xs)
                        hazard.update(owner.get(st.fn, ()))
                    changed = True
            for br in blk.branches:
                if br.kind != "br":
                    continue
                for p, a in zip(ir.blocks[br.target].args, br.args):
                    if p not in active and isinstance(a, Var) and (a in active or a in hazard):
                        active.add(p)
                        changed = True
    return active

