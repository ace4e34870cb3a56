"""Functions of modules, resolved when the transform is made.

``np.sum(x)`` lifts to ``%3 = getattr(np, "sum"); %4 = %3(%2)``: a callee known only at
run time, which costs a dispatch per call and hides the callee from the analyses (its
rule, whether it returns numbers, whether its values can go on the tape).  Where the
global names a module whose attribute is a callable, the callee becomes that callable.
The transform's cache checks, at each call, that the global and the attribute still
name what they named, so rebinding either (a test double, a monkeypatch) makes a new
transform; and each read is checked where it runs (`ops.resolved`), so a rebinding
while the function runs raises instead of calling the old function.
"""
from __future__ import annotations

import types

from ..ir import Global, Stmt, Var, ops


def resolve_modules(ir, attribute):
    """``ir`` where each callable read from a global module ``M`` (or from a module reached
    from one: ``np.linalg.norm``) whose ``attribute(M, path)`` is known is the callee
    itself, and the read is checked when it runs (`ops.resolved`)::

        %3 = getattr(math, 'sin')         →     %3 = getattr(math, 'sin')
        %4 = %3(%2)                             %5 = ops.resolved(%3, math.sin, 'math.sin')
                                                %4 = math.sin(%2)
    """
    known, paths = {}, {}  # var → the callable; var → (global, path) of a module
    for blk in ir.blocks:
        out = []
        for v, st in blk.stmts:
            out.append((v, st))
            where = _attribute_of(st, paths)
            f = None if where is None else attribute(*where)
            if isinstance(f, types.ModuleType):
                paths[v] = where
            elif callable(f):
                known[v] = f
                name = ".".join((where[0],) + where[1])
                out.append((ir.var(), Stmt(ops.resolved, (v, f, name), {}, st.line)))
        blk.stmts[:] = out
    if known:  # the callee is the callable itself, everywhere but its check
        swap = lambda x: known.get(x, x) if isinstance(x, Var) else x
        for blk in ir.blocks:
            blk.stmts[:] = [(v, st if st.fn is ops.resolved else st.map(swap))
                            for v, st in blk.stmts]
            blk.branches[:] = [br.map(swap) for br in blk.branches]
    return ir


def _attribute_of(st, paths):
    """``(global, path)`` when ``st`` reads an attribute of a global (or of a module
    reached from one), else None."""
    if st.fn is not getattr or len(st.args) != 2 or st.kw or type(st.args[1]) is not str:
        return None
    m, name = st.args
    if isinstance(m, Global):
        return m.name, (name,)
    if isinstance(m, Var) and m in paths:
        g, path = paths[m]
        return g, path + (name,)
    return None
