"""The tangent (forward-mode) pass: run the primal and push tangents alongside it.

Every active statement ``%v = f(args…)`` becomes a call of its forward rule (a
constant callee that has one) or of ``jvp``, given a tuple of the arguments'
tangents; it returns ``(value, tangent)``.  Inactive statements stay plain and their
tangent is the constant None (zero).  A block argument that is active gets a tangent
argument after the primal ones, which every edge into the block passes, so loops and
branches need no tape.  The entry block's tangent arguments come after the primal
ones (the function itself first), and the function returns ``(value, tangent)``:

    >>> import bytegrad, math
    >>> def f(x):
    ...     return math.sin(x) * 2.0
    >>> print(bytegrad.tangent_stages(f).tangent)
    1: (%1, %2, %3, %4)
      %5 = getattr(math, 'sin')                      # line 2
      %6 = ops.resolved(%5, math.sin, 'math.sin')    # line 2
      %7 = ops.build_tuple(%4)                       # line 2
      %8 = tangent_python.sin(%7, %2)                # line 2
      %9 = ops.unpack(%8, 2)                         # line 2
      %10 = operator.getitem(%9, 0)                  # line 2
      %11 = operator.getitem(%9, 1)                  # line 2
      %12 = ops.build_tuple(%11, None)               # line 2
      %13 = tangent_python.mul(%12, %10, 2.0)        # line 2
      %14 = ops.unpack(%13, 2)                       # line 2
      %15 = operator.getitem(%14, 0)                 # line 2
      %16 = operator.getitem(%14, 1)                 # line 2
      %17 = ops.build_tuple(%15, %16)                # line 2
      return %17
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

from ..ir import IR, Global, Meta, Stmt, Var, ops
from ..ir.simplify import simplify
from .reverse import prepare


def tangent(ir, active, hooks) -> IR:
    """The tangent IR of the single-return primal ``ir``.

    ``hooks`` gives ``jvp`` (``jvp(f, df, dargs, *args, **kw)``), ``jvp_kw`` (the same
    with a dict of the keywords' tangents after ``dargs``) and ``frule_for(f)`` (the
    forward rule of a constant callee, called directly: ``frule(dargs, *args)``).
    """
    m = ir.meta
    out = IR(Meta(f"tangent_{m.name}", m.filename, m.firstlineno))
    for _ in range(1, len(ir.blocks)):
        out.block()
    env, tan = {}, {}
    for b, blk in enumerate(ir.blocks):
        for a in blk.args:
            env[a] = out.argument(b)
        for a in blk.args:  # (every entry argument has a tangent: the caller passes them all)
            if b == 0 or a in active:
                tan[a] = out.argument(b)
    look = lambda x: env.get(x, x) if isinstance(x, Var) else x
    dot = lambda x: tan.get(x) if isinstance(x, Var) else None
    for b, blk in enumerate(ir.blocks):
        for v, st in blk.stmts:
            if v not in active:
                env[v] = out.push(b, st.map(look))
                continue
            pair = out.push(b, _jvp_call(out, b, st, look, dot, hooks, active.hazard))
            t = out.push(b, Stmt(ops.unpack, (pair, 2), None, st.line))
            env[v] = out.push(b, Stmt(operator.getitem, (t, 0), None, st.line))
            tan[v] = out.push(b, Stmt(operator.getitem, (t, 1), None, st.line))
        for br in blk.branches:
            new = br.map(look)
            if br.kind == "br":
                params = ir.blocks[br.target].args
                new.args += [dot(a) for p, a in zip(params, br.args) if p in active]
            elif br.kind == "return":
                y = br.args[0]
                new.args = [out.push(b, Stmt(ops.build_tuple, (look(y), dot(y)), None, br.line))]
            out.branch(b, new)
    return out


def _jvp_call(out, b, st, look, dot, hooks, hazard) -> Stmt:
    """The call computing ``(value, tangent)`` of active statement ``st``."""
    dargs = out.push(b, Stmt(ops.build_tuple, [dot(a) for a in st.args], None, st.line))
    fn, args = look(st.fn), [look(a) for a in st.args]
    kw = {k: look(x) for k, x in st.kw.items()}
    # an operand that may have been changed in place has its tangent in the runtime's
    # shadow, which ``jvp`` reads: only a call given none goes to its rule directly
    direct = not isinstance(st.fn, (Var, Global)) and not kw and not any(x in hazard for x in st.args)
    r = hooks.frule_for(st.fn) if direct else None
    if r is not None:
        return Stmt(r, [dargs] + args, None, st.line)
    dkw = [x for k, v in st.kw.items() for x in (k, dot(v))]
    if any(dot(v) is not None for v in st.kw.values()):
        dk = out.push(b, Stmt(ops.build_dict, dkw, None, st.line))
        return Stmt(hooks.jvp_kw, [fn, dot(st.fn), dargs, dk] + args, kw, st.line)
    return Stmt(hooks.jvp, [fn, dot(st.fn), dargs] + args, kw, st.line)


@dataclass
class TangentStages:
    lifted: IR
    primal: IR
    tangent: IR


def transform_tangent(lifted, hooks, globals_=None) -> TangentStages:
    """The tangent IR of ``lifted``: the primal and activity of `reverse.prepare` (so the
    same statements are active in both modes), then `tangent`."""
    primal, active, h = prepare(lifted, hooks, globals_)
    return TangentStages(lifted, primal, simplify(tangent(primal, active, h)))
