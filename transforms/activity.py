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

import operator

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
    hazard = _Hazards(ir, owner)  # may be mutated by an active call: its uses are active, its value is not
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
                    hazard.spread(xs)
                    changed = True
                elif any(x in active or x in hazard for x in xs):
                    active.add(v)
                    if isinstance(st.fn, (Var, Global)):  # it may store an active value into any operand
                        hazard.spread(xs)
                        hazard.spread(owner.get(st.fn, ()))
                    changed = True
            for br in blk.branches:
                if br.kind != "br":
                    continue
                for p, a in zip(ir.blocks[br.target].args, br.args):
                    if p not in active and isinstance(a, Var) and (a in active or a in hazard):
                        active.add(p)
                        changed = True
    return active


_PARTS = (operator.getitem, getattr)


class _Hazards(set):
    """Variables whose object may be changed in place.  A change through a part
    (``R[0][1] = x``, ``v = a[2:]; v[0] = x``, ``b.buf[0] = x``, ``a.reshape(4)[0] = x``)
    may change the whole, so what a hazard was read from (an item, an attribute, a
    method's object) is a hazard too, and so is what the edges into a block pass to
    a hazard block argument."""

    def __init__(self, ir, owner):
        super().__init__()
        self.sources = {}
        for _, v, st in ir.statements():  # what a part, a view or a method's result comes from
            xs = st.args[:1] if st.fn in _PARTS else owner.get(st.fn, ())
            self.sources[v] = [x for x in xs if isinstance(x, Var)]
        for blk in ir.blocks:
            for br in blk.branches:
                if br.kind == "br":
                    for p, a in zip(ir.blocks[br.target].args, br.args):
                        if isinstance(a, Var):
                            self.sources.setdefault(p, []).append(a)

    def spread(self, xs):
        todo = [x for x in xs if x not in self]
        while todo:
            x = todo.pop()
            if x not in self:
                self.add(x)
                todo.extend(y for y in self.sources.get(x, ()) if y not in self)
