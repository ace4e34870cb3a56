"""Functions of modules, resolved when the transform is made.

``np.sum(x)`` lifts to ``%3 = getattr(np, "sum"); %4 = %3(%2)``: a callee known only at
run time, which costs a dispatch per call and hides the callee from the analyses (its
rule, whether it returns numbers, whether its values can go on the tape).  Where the
global names a module whose attribute is a callable, the callee becomes that callable.
The transform's cache checks, at each call, that the global and the attribute still
name what they named, so rebinding either (a test double, a monkeypatch) makes a new
transform.
"""
from __future__ import annotations

import types

from ..ir import Global, Var


def resolve_modules(ir, attribute):
    """``ir`` with each ``%v = getattr(M, "name")`` of a global module ``M`` (or of a
    module reached from one: ``np.linalg.norm``) whose ``attribute(M, path)`` is a
    callable removed, and ``%v`` replaced by it::

        %3 = getattr(math, 'sin')         →     %4 = math.sin(%2)
        %4 = %3(%2)
    """
    known, paths = {}, {}  # var → the callable; var → (global, path) of a module
    for blk in ir.blocks:
        keep = []
        for v, st in blk.stmts:
            where = _attribute_of(st, paths)
            f = None if where is None else attribute(*where)
            if callable(f):
                known[v] = f
                continue
            if isinstance(f, types.ModuleType):
                paths[v] = where
            keep.append((v, st))
        blk.stmts[:] = keep
    if known:
        swap = lambda x: known.get(x, x) if isinstance(x, Var) else x
        for blk in ir.blocks:
            blk.stmts[:] = [(v, st.map(swap)) for v, st in blk.stmts]
            blk.branches[:] = [br.map(swap) for br in blk.branches]
        used = {x for blk in ir.blocks for x in _operands(blk)}
        for blk in ir.blocks:  # (a module read only on the way to a function: ``np.linalg``)
            blk.stmts[:] = [(v, st) for v, st in blk.stmts if v not in paths or v in used]
    return ir


def _operands(blk):
    for _, st in blk.stmts:
        yield from st.operands()
    for br in blk.branches:
        yield from br.operands()


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
