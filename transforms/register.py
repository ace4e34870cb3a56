"""The register (forward) pass: run the primal and record pullbacks on a tape.

Every active statement becomes a call of its rule (a constant callee that has
one) or of ``forward``, whose pullback is pushed on the tape (through
``ops.watch``, which lets the runtime wrap it when mutation is involved); one whose
rules put values on the tape (``x * 2.0`` on floats: ``primitives/taped.py``) becomes
``record(push, …)``, which pushes them itself.  A block with several incoming edges
takes the edge's number as an extra argument and pushes it too.  The function returns
``(value, tape)``:

    >>> import bytegrad, numpy as np
    >>> def f(x):
    ...     return np.dot(x, x) * 2.0
    >>> print(bytegrad.stages(f).primal)
    1: (%1, %2)
      %3 = getattr(np, 'dot')                        # line 2
      %6 = ops.resolved(%3, numpy.dot, 'np.dot')     # line 2
      %4 = numpy.dot(%2, %2)                         # line 2
      %5 = operator.mul(%4, 2.0)                     # line 2
      return %5
    >>> print(bytegrad.stages(f).forward)
    1: (%1, %2)
      %3 = list()                                    # line 1
      %4 = getattr(%3, 'append')                     # line 1
      %5 = getattr(np, 'dot')                        # line 2
      %6 = ops.resolved(%5, numpy.dot, 'np.dot')     # line 2
      %7 = np_linalg._dot(%2, %2)                    # line 2
      %8 = ops.unpack(%7, 2)                         # line 2
      %9 = operator.getitem(%8, 0)                   # line 2
      %10 = operator.getitem(%8, 1)                  # line 2
      %11 = ops.watch(KEPT, %10, %9, numpy.dot, %2, %2) # line 2
      %12 = %4(%11)                                  # line 2
      %13 = taped.mul_record(%4, %9, 2.0)            # line 2
      %14 = ops.build_tuple(%13, %3)                 # line 2
      return %14
"""
from __future__ import annotations

import operator

from ..ir import IR, Global, Meta, Stmt, Var, ops
from ..ir.cfg import incoming


def recorded(ir, b) -> bool:
    """Whether the forward pass records how it entered block ``b``."""
    return len(incoming(ir, b)) > 1


def yield_sites(ir) -> dict:
    """The ``yield`` statements of a generator's IR, numbered in order: ``{%v: k}``.
    The forward pass pushes ``k`` before it yields; the adjoint can start there."""
    return {v: k for k, (_, v, _) in enumerate(s for s in ir.statements() if s[2].fn is ops.yield_)}


def taped_call(st, taped):
    """``(record, back, into, kept)`` when statement ``st`` puts values on the tape (a
    constant callee with such rules, called with positional arguments), else None."""
    if isinstance(st.fn, (Var, Global)) or st.kw:
        return None
    return taped(st.fn)


def _partly(st, active, hooks):
    """``forward_with(wrt, f, a, …)`` for a call ``f(a, …)`` some of whose operands can
    carry no gradient (not active, nor an object that may be changed to hold one):
    ``wrt``, the positions of the others, picks the callee's transform where only
    those entry arguments are active (``f(x, n - 1)`` records nothing of ``n``)."""
    if st.kw:
        return None
    hazards = getattr(active, "hazards", ())
    wrt = (0,) + tuple(i for i, x in enumerate(st.args, 1)  # (the callee's own: as always)
                       if isinstance(x, Var) and (x in active or x in hazards)
                       or isinstance(x, Global) and (x in hazards or hooks.changeable(x)))
    if len(wrt) == len(st.args) + 1:
        return None
    return Stmt(hooks.forward_with, (wrt, st.fn) + st.args, None, st.line)


def register(ir, active, hooks, kept=frozenset()) -> IR:
    """The forward IR of the single-return primal ``ir``.

    ``hooks`` gives ``forward``, ``forward_soft``, ``forward_reading``, ``forward_in_try``,
    ``rule_for``, ``taped``, and ``watching`` and ``kept_watching`` (the runtime's states
    that ``ops.watch`` consults: the second for a value in ``kept``, one the function only
    reads, see `kept`).  A constant callee
    with a rule (``hooks.rule_for(f)`` is not None) is called through its rule
    directly, saving the dispatch in ``forward``; one with rules that put values on
    the tape (``hooks.taped(f)`` is ``(record, back, into, kept)``) becomes
    ``record(push, args…)`` (``kept(push, args…)`` for a value in ``kept``), which pushes them
    itself.  A statement active only through hazards (in
    ``active.soft``) goes through ``forward_soft``; a call of code known only at run
    time given no active value (in ``active.reading``), through ``forward_reading``.
    """
    forward, forward_soft = hooks.forward, hooks.forward_soft
    soft, reading = getattr(active, "soft", ()), getattr(active, "reading", ())
    m = ir.meta
    fwd = IR(Meta(f"forward_{m.name}", m.filename, m.firstlineno, generator=m.generator))
    env = {}
    for b in range(1, len(ir.blocks)):
        fwd.block()
    for b, blk in enumerate(ir.blocks):
        for a in blk.args:
            env[a] = fwd.argument(b)
    line = m.firstlineno
    tape = fwd.push(0, Stmt(list, (), None, line))
    push = fwd.push(0, Stmt(getattr, (tape, "append"), None, line))
    fwd.meta.names.update({tape: "the tape", push: "push: onto the tape"})
    if m.generator:  # a generator hands its tape over when it is made, before any code of its own
        fwd.push(0, Stmt(ops.yield_, (tape,), None, line))
    sites = yield_sites(ir)
    look = lambda x: env.get(x, x) if isinstance(x, Var) else x
    edge_no = {}
    for b in range(len(ir.blocks)):
        if recorded(ir, b):
            fwd.push(b, Stmt(push, (fwd.argument(b),), None, None))
            for k, (_, br) in enumerate(incoming(ir, b)):
                edge_no[id(br)] = k
    for b, blk in enumerate(ir.blocks):
        for v, primal in blk.stmts:
            st = primal.map(look)
            if v in sites:
                fwd.push(b, Stmt(push, (sites[v],), None, st.line))
                env[v] = fwd.push(b, st)
                continue
            if v not in active:
                env[v] = fwd.push(b, st)
                continue
            pair = None if v in reading else taped_call(st, hooks.taped)
            if pair is not None:
                env[v] = fwd.push(b, Stmt(pair[3 if v in kept else 0], (push,) + st.args, None, st.line))
                continue
            # a call with keywords goes through forward, which binds them to positions
            r = None if isinstance(st.fn, (Var, Global)) or st.kw or v in reading else hooks.rule_for(st.fn)
            via = hooks.forward_reading if v in reading else forward_soft if v in soft else forward
            if r is not None:
                call = Stmt(r, st.args, st.kw, st.line)
            elif blk.catches():  # (a callee that changes something and raises: refused)
                call = Stmt(hooks.forward_in_try, (via, st.fn) + st.args, st.kw, st.line)
            else:
                partly = _partly(primal, active, hooks) if via is forward else None
                call = partly.map(look) if partly else Stmt(via, (st.fn,) + st.args, st.kw, st.line)
            t = fwd.push(b, Stmt(ops.unpack, (fwd.push(b, call), 2), None, st.line))
            env[v] = fwd.push(b, Stmt(operator.getitem, (t, 0), None, st.line))
            pb = fwd.push(b, Stmt(operator.getitem, (t, 1), None, st.line))
            w = hooks.kept_watching if v in kept else hooks.watching
            pb = fwd.push(b, Stmt(ops.watch, (w, pb, env[v], st.fn) + st.args, st.kw, st.line))
            fwd.push(b, Stmt(push, (pb,), None, st.line))
        for br in blk.branches:
            new = br.map(look)
            if br.kind == "br" and id(br) in edge_no:
                new.args.append(edge_no[id(br)])
            if br.kind == "return":
                y = fwd.push(b, Stmt(ops.build_tuple, (new.args[0], tape), None, br.line))
                new.args = [y]
            fwd.branch(b, new)
    fwd.meta.take_names(m, env)
    fwd.meta.clearable = frozenset(env[v] for v in getattr(kept, "numeric", ()) if isinstance(env.get(v), Var))
    return fwd
