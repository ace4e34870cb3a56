"""The tangent (forward-mode) pass: run the primal and push tangents alongside it.

Every active statement ``%v = f(args…)`` becomes a call of its forward rule (a
constant callee that has one) or of ``jvp``, given a tuple of the arguments'
tangents; it returns ``(value, tangent)``.  Inactive statements stay plain and their
tangent is the constant None (zero).  A block argument that is active gets a tangent
argument after the primal ones, which every edge into the block passes, so loops and
branches need no tape.  The entry block's tangent arguments come after the primal
ones (the function itself first), and the function returns ``(value, tangent)``.
Below, block 2 (where the branches join) takes ``x`` and its tangent (``%8``, ``%9``):
one edge passes the argument's (``%2``, ``%5``), the other those of ``math.sin(x)``:

    >>> import bytegrad, math
    >>> def f(x, y):
    ...     if x > y:
    ...         x = math.sin(x)
    ...     return x * y
    >>> print(bytegrad.tangent_stages(f).primal)
    1: (%1, %2, %3)
      %4 = operator.gt(%2, %3)                       # line 2
      br 2 (%2) unless %4
      br 3
    2: (%5)
      %6 = operator.mul(%5, %3)                      # line 4
      return %6
    3:
      %7 = getattr(math, 'sin')                      # line 3
      %9 = ops.resolved(%7, math.sin, 'math.sin')    # line 3
      %8 = math.sin(%2)                              # line 3
      br 2 (%8)
    >>> print(bytegrad.tangent_stages(f).tangent)
    1: (%1, %2, %3, %4, %5, %6)
      %7 = operator.gt(%2, %3)                       # line 2
      br 2 (%2, %5) unless %7
      br 3
    2: (%8, %9)
      %10 = ops.build_tuple(%9, %6)                  # line 4
      %11 = tangent_python.frule[operator.mul](%10, %8, %3) # line 4
      %12 = ops.unpack(%11, 2)                       # line 4
      %13 = operator.getitem(%12, 0)                 # line 4
      %14 = operator.getitem(%12, 1)                 # line 4
      %15 = ops.build_tuple(%13, %14)                # line 4
      return %15
    3:
      %16 = getattr(math, 'sin')                     # line 3
      %17 = ops.resolved(%16, math.sin, 'math.sin')  # line 3
      %18 = ops.build_tuple(%5)                      # line 3
      %19 = tangent_python.frule[math.sin](%18, %2)  # line 3
      %20 = ops.unpack(%19, 2)                       # line 3
      %21 = operator.getitem(%20, 0)                 # line 3
      %22 = operator.getitem(%20, 1)                 # line 3
      br 2 (%21, %22)
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
    forward rule of a constant callee, called directly, ``frule(dargs, *args)``, when no
    operand may share an object changed in place, whose tangent ``jvp`` reads from the
    runtime's shadow: `_may_share_changed`).
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
    changed = _may_share_changed(ir, active, hooks)
    for b, blk in enumerate(ir.blocks):
        for v, st in blk.stmts:
            if v not in active:
                env[v] = out.push(b, st.map(look))
                continue
            pair = out.push(b, _jvp_call(out, b, st, look, dot, hooks, changed))
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


def _may_share_changed(ir, active, hooks):
    """A test of whether a variable may share an object with one that may be changed in
    place (a view of it, what it was read from): `activity`'s hazards, and the operands of
    calls that may change them (code known at run time or a global that is not
    ``settled``, ``f(*args)``, callees the hooks call ``changing`` or ``effectful``), with
    every variable `activity`'s aliases put in their class."""
    hazard, aliases = set(getattr(active, "hazard", ())), getattr(active, "aliases", None)
    for _, _, st in ir.statements():
        if isinstance(st.fn, Var) or isinstance(st.fn, Global) and not hooks.settled(st.fn) or \
                st.fn is ops.apply or hooks.changing(st.fn) or hooks.effectful(st.fn):
            hazard.update(x for x in list(st.args) + list(st.kw.values()) if isinstance(x, (Var, Global)))
    if aliases is None:
        return hazard.__contains__
    classes = {aliases.find(h) for h in hazard if h not in aliases.numbers}
    return lambda x: x in hazard or x not in aliases.numbers and aliases.find(x) in classes


def _jvp_call(out, b, st, look, dot, hooks, changed) -> Stmt:
    """The call computing ``(value, tangent)`` of active statement ``st``."""
    dargs = out.push(b, Stmt(ops.build_tuple, [dot(a) for a in st.args], None, st.line))
    fn, args = look(st.fn), [look(a) for a in st.args]
    kw = {k: look(x) for k, x in st.kw.items()}
    direct = not isinstance(st.fn, (Var, Global)) and not kw and \
        not any(changed(x) for x in st.args if isinstance(x, (Var, Global)))
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
