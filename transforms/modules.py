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

from ..ir import Global, Var


def resolve_modules(ir, attribute):
    """``ir`` with each ``%v = getattr(M, "name")`` of a global module ``M`` whose
    ``attribute(M, "name")`` is a callable removed, and ``%v`` replaced by it::

        %3 = getattr(math, 'sin')         →     %4 = math.sin(%2)
        %4 = %3(%2)
    """
    known = {}
    for blk in ir.blocks:
        keep = []
        for v, st in blk.stmts:
            f = _function(st, attribute)
            if f is None:
                keep.append((v, st))
            else:
                known[v] = f
        blk.stmts[:] = keep
    if known:
        swap = lambda x: known.get(x, x) if isinstance(x, Var) else x
        for blk in ir.blocks:
            blk.stmts[:] = [(v, st.map(swap)) for v, st in blk.stmts]
            blk.branches[:] = [br.map(swap) for br in blk.branches]
    return ir


def _function(st, attribute):
    if st.fn is not getattr or len(st.args) != 2 or st.kw:
        return None
    m, name = st.args
    if not isinstance(m, Global) or type(name) is not str:
        return None
    f = attribute(m.name, name)
    return f if callable(f) else None
