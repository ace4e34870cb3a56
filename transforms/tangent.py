"""The tangent (forward-mode) pass: run the primal and push tangents alongside it.

Every active statement ``%v = f(args…)`` becomes a call of its forward rule (a
constant callee that has one) or of ``jvp``, given a tuple of the arguments'
tangents; it returns ``(value, tangent)``.  Inactive statements stay plain and their
tangent is the constant None (zero).  A block argument that is active gets a tangent
argument after the primal ones, which every edge into the block passes, so loops and
branches need no tape.  The entry block's tangent arguments come after the primal
ones (the function itself first), and the function returns ``(value, tangent)``.

Arithmetic (``+ - * /``, ``**`` by a constant int, unary ``-``) and reads of an array's
element at an int are written out as dual numbers where guards find real scalars (an
array and an int for a read): a run of such statements gets the guards, the plain
operations on values and tangents, and, where a guard fails, the forward rules' calls
of the rest of the run (`_dual_region`).  Below, block 2 (where the branches join)
takes ``x`` and its tangent (``%8``, ``%9``): one edge passes the argument's (``%2``,
``%5``), the other those of ``math.sin(x)``; ``x * y`` is block 6 where ``x``, ``y``
and their tangents are real scalars, block 5 elsewhere:

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
      %10 = type(%8)                                 # line 4
      %11 = operator.contains(jvp.REALS, %10)        # line 4
      %12 = type(%9)                                 # line 4
      %13 = operator.contains(jvp.REALS, %12)        # line 4
      %14 = type(%3)                                 # line 4
      %15 = operator.contains(jvp.REALS, %14)        # line 4
      %16 = type(%6)                                 # line 4
      %17 = operator.contains(jvp.REALS, %16)        # line 4
      br 5 unless %11
      br 5 unless %13
      br 5 unless %15
      br 5 unless %17
      br 6
    3:
      %18 = getattr(math, 'sin')                     # line 3
      %19 = ops.resolved(%18, math.sin, 'math.sin')  # line 3
      %20 = ops.build_tuple(%5)                      # line 3
      %21 = special.frule[math.sin](%20, %2)         # line 3
      %22 = ops.unpack(%21, 2)                       # line 3
      %23 = operator.getitem(%22, 0)                 # line 3
      %24 = operator.getitem(%22, 1)                 # line 3
      br 2 (%23, %24)
    4: (%25, %26)
      %27 = ops.build_tuple(%25, %26)                # line 4
      return %27
    5:
      %28 = ops.build_tuple(%9, %6)                  # line 4
      %29 = tangent_python.frule[operator.mul](%28, %8, %3) # line 4
      %30 = ops.unpack(%29, 2)                       # line 4
      %31 = operator.getitem(%30, 0)                 # line 4
      %32 = operator.getitem(%30, 1)                 # line 4
      br 4 (%31, %32)
    6:
      %33 = operator.mul(%8, %3)                     # line 4
      %34 = operator.mul(%9, %3)                     # line 4
      %35 = operator.mul(%8, %6)                     # line 4
      %36 = operator.add(%34, %35)                   # line 4
      br 4 (%33, %36)
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

from ..ir import IR, Branch, Global, Meta, Stmt, Var, ops
from ..ir.cpython import BINARY_OPS
from ..ir.simplify import simplify
from .activity import activity
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
    out.meta.generator = m.generator
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
    changed_but_in_place = _may_share_changed(ir, _without_in_place(ir, hooks), hooks, in_place=False)

    def plain(b, v, st, env, tan):
        look = lambda x: env.get(x, x) if isinstance(x, Var) else x
        dot = lambda x: tan.get(x) if isinstance(x, Var) else None
        if st.fn is ops.yield_:  # the item and its tangent out, what is sent and its tangent in
            pair = out.push(b, Stmt(ops.build_tuple, (look(st.args[0]), dot(st.args[0])), None, st.line))
            sent = out.push(b, Stmt(ops.yield_, (pair,), None, st.line))
            env[v] = out.push(b, Stmt(operator.getitem, (sent, 0), None, st.line))
            tan[v] = out.push(b, Stmt(operator.getitem, (sent, 1), None, st.line))
            return
        if v not in active:
            env[v] = out.push(b, st.map(look))
            return
        pair = out.push(b, _jvp_call(out, b, st, look, dot, hooks, changed))
        t = out.push(b, Stmt(ops.unpack, (pair, 2), None, st.line))
        env[v] = out.push(b, Stmt(operator.getitem, (t, 0), None, st.line))
        tan[v] = out.push(b, Stmt(operator.getitem, (t, 1), None, st.line))

    for b, blk in enumerate(ir.blocks):
        cur = b
        for run, dual in _runs(blk, active, hooks, changed, changed_but_in_place):
            if dual:
                cur = _dual_region(out, cur, run, env, tan, active, hooks, plain, dual == "unchanged")
            else:
                plain(cur, *run[0], env, tan)
        for br in blk.branches:
            new = br.map(look)
            if br.kind == "br":
                params = ir.blocks[br.target].args
                new.args += [dot(a) for p, a in zip(params, br.args) if p in active]
            elif br.kind == "return":
                y = br.args[0]
                new.args = [out.push(cur, Stmt(ops.build_tuple, (look(y), dot(y)), None, br.line))]
            out.branch(cur, new)
    out.meta.take_names(m, env)
    out.meta.take_names(m, tan, "the tangent of {}".format)
    return out


# -- dual-number arithmetic written out ------------------------------------------------
#
# In scalar code most active statements are arithmetic on floats and reads of an array's
# elements, and a forward rule's call, tuple and unpacking cost more than the arithmetic;
# under reverse mode (a Hessian-vector product lifts tangent code) each of them is a
# rule call with a pullback.  So a run of them is written out as plain operations on
# values and tangents where guards find the operands real scalars (arrays and ints for a
# read), and as the forward rules' calls elsewhere: the same formulas as the rules'
# scalar paths, so both give the same numbers.

_RUN_MAX = 24  # statements of one run: each guard inside it has a slow tail of the rest


def _runs(blk, active, hooks, changed, changed_but_in_place):
    """``blk``'s statements as ``(run, True)``, a run of those written out as dual
    arithmetic (and inactive statements between them), or ``([statement], False)``.
    A run with an operand that only an in-place operator (``s += t``) may have changed
    is ``(run, "unchanged")``: written out where the level has changed nothing in place
    yet (`_dual_region`'s first guard), which ``s += t`` on numbers never does."""
    stmts = blk.stmts
    if blk.catches():  # (the lifter keeps one statement that may raise in such a block)
        for vs in stmts:
            yield [vs], False
        return
    i = 0
    while i < len(stmts):
        j, last, guard = i, None, False
        while j < len(stmts) and j - i < _RUN_MAX:
            v, st = stmts[j]
            if v in active:
                if _dual_spec(st, hooks, changed) is None:
                    if _dual_spec(st, hooks, changed_but_in_place) is None:
                        break
                    guard = True
                last = j
            elif last is None:
                break
            j += 1
        end = i + 1 if last is None else last + 1
        yield stmts[i:end], last is not None and ("unchanged" if guard else True)
        i = end


_IN_PLACE = frozenset(f for f in BINARY_OPS if f.__name__.startswith("i"))  # (iadd, isub, …)


def _without_in_place(ir, hooks):
    """The activity of ``ir`` had in-place operators changed nothing (for its hazards)."""
    return activity(ir, hooks.nondiff, hooks.effectful, None, hooks.changeable,
                    lambda f: f not in _IN_PLACE and hooks.changing(f), hooks.scalar_kind,
                    hooks.settled, hooks.python_code)


def _dual_spec(st, hooks, changed):
    """``(formula, operand kinds)`` of `_DUAL` for active statement ``st``, where it may
    be written out: the library's forward rule, operands that are variables or constants
    of the kinds, none that may share an object changed in place."""
    f = st.fn
    spec = _DUAL.get(f) if not isinstance(f, (Var, Global)) else None
    if spec is None or st.kw or not hooks.dual(f):
        return None
    args = st.args
    if any(isinstance(x, Global) or isinstance(x, Var) and changed(x) for x in args):
        return None
    kinds = spec[1]
    if len(args) != len(kinds):
        return None
    for x, k in zip(args, kinds):
        if isinstance(x, Var) and k != "int":
            continue
        if k == "array" or type(x) is not int and (k != "real" or type(x) is not float):
            return None
    return spec


def _dual_region(out, cur, run, env, tan, active, hooks, plain, unchanged=False):
    """Write ``run`` into block ``cur``: guards, then the dual arithmetic; a guard that
    fails goes to the forward rules' calls of the rest of the run.  A guard checks every
    operand the rest of the run needs that is known by then (so a run over values from
    before it has one, and one more after each read whose element the arithmetic takes);
    with ``unchanged``, a first one that the level has changed nothing in place yet (so
    every tangent is the one its variable was given).  Returns the block where the
    run's values (its arguments) join."""
    join = out.block()
    outs = [(v, v in active) for v, _ in run]
    known = {}  # value -> "real" / "array" / "int": what a guard or the arithmetic found
    fe, ft = dict(env), dict(tan)

    def exit_args(e, t):
        return [x for v, act in outs for x in ((e[v], t.get(v)) if act else (e[v],))]

    def guard(b, i, tests, line):
        """From block ``b``, to a slow tail (``run[i:]`` by the forward rules' calls)
        unless each test that ``tests(b)`` pushes holds; returns the block going on."""
        slow, se, stn = out.block(), dict(fe), dict(ft)
        for w, sst in run[i:]:
            plain(slow, w, sst, se, stn)
        out.branch(slow, Branch("br", join, exit_args(se, stn), line=line))
        for c in tests(b):
            out.branch(b, Branch("br", slow, (), c, line))
        nxt = out.block()
        out.branch(b, Branch("br", nxt, (), None, line))
        return nxt

    if unchanged:
        line = run[0][1].line
        cur = guard(cur, 0, lambda b: [out.push(b, Stmt(hooks.unchanged, (), None, line))], line)

    def needs(sts):
        """What the active statements ``sts`` need of operands already computed."""
        out = {}
        for v, st in sts:
            if v not in active:
                continue
            for x, k in zip(st.args, _DUAL[st.fn][1]):
                if isinstance(x, Var) and k != "int":
                    for y in (fe.get(x, x), ft.get(x)) if k != "index" else (fe.get(x, x),):
                        if isinstance(y, Var) and x in fe:
                            out.setdefault(y, "int" if k == "index" else k)
        return {y: k for y, k in out.items() if known.get(y) != k}

    b = cur
    for i, (v, st) in enumerate(run):
        look = lambda x: fe.get(x, x) if isinstance(x, Var) else x
        if v not in active:
            fe[v] = out.push(b, st.map(look))
            continue
        if needs([(v, st)]):
            def kinds_hold(b, i=i, line=st.line):
                for x, k in needs(run[i:]).items():
                    t = out.push(b, Stmt(type, (x,), None, line))
                    yield out.push(b, Stmt(operator.contains, (hooks.reals, t), None, line) if k == "real" else
                                   Stmt(operator.is_, (t, hooks.array if k == "array" else int), None, line))
                    known[x] = k
            b = guard(b, i, kinds_hold, st.line)
        formula, kinds = _DUAL[st.fn]
        op = lambda fn, *xs: out.push(b, Stmt(fn, xs, None, st.line))
        fe[v], ft[v] = formula(op, st.fn, *map(look, st.args),
                               *(ft.get(x) if isinstance(x, Var) else None for x in st.args))
        if kinds[0] != "array":  # (arithmetic on real scalars gives real scalars)
            known[fe[v]] = "real"
            if ft[v] is not None:
                known[ft[v]] = "real"
    out.branch(b, Branch("br", join, exit_args(fe, ft), line=run[-1][1].line))
    for v, act in outs:
        env[v] = out.argument(join)
        if act:
            tan[v] = out.argument(join)
    return join


def _sum(op, fn, a, b):
    """``a fn b`` of two tangents, either None (zero)."""
    if a is None:
        return b if b is None or fn is operator.add else op(operator.neg, b)
    return a if b is None else op(fn, a, b)


def _d_add(op, fn, a, b, da, db):
    return op(fn, a, b), _sum(op, operator.add, da, db)


def _d_sub(op, fn, a, b, da, db):
    return op(fn, a, b), _sum(op, operator.sub, da, db)


def _d_mul(op, fn, a, b, da, db):
    return op(fn, a, b), _sum(op, operator.add, None if da is None else op(operator.mul, da, b),
                              None if db is None else op(operator.mul, a, db))


def _d_div(op, fn, a, b, da, db):
    y = op(fn, a, b)
    n = _sum(op, operator.sub, da, None if db is None else op(operator.mul, db, y))
    return y, None if n is None else op(operator.truediv, n, b)


def _d_pow(op, fn, a, p, da, _):
    y = op(fn, a, p)
    if da is None:
        return y, None
    if not p:
        return y, op(operator.mul, da, 0.0)
    return y, op(operator.mul, da, op(operator.mul, p, a if p == 2 else op(operator.pow, a, p - 1)))


def _d_neg(op, fn, a, da):
    return op(fn, a), None if da is None else op(operator.neg, da)


def _d_item(op, fn, x, k, dx, _):
    return op(fn, x, k), None if dx is None else op(fn, dx, k)


# op -> (formula, operand kinds): "real" a real scalar, "int" a constant int, "array" an
# array (its tangent one too), "index" an int
_DUAL = {operator.neg: (_d_neg, ("real",)),
         operator.getitem: (_d_item, ("array", "index"))}
for _fs, _formula in (((operator.add, operator.iadd), _d_add), ((operator.sub, operator.isub), _d_sub),
                      ((operator.mul, operator.imul), _d_mul),
                      ((operator.truediv, operator.itruediv), _d_div)):
    for _f in _fs:
        _DUAL[_f] = (_formula, ("real", "real"))
for _f in (operator.pow, operator.ipow):
    _DUAL[_f] = (_d_pow, ("real", "int"))


def _may_share_changed(ir, active, hooks, in_place=True):
    """A test of whether a variable may share an object with one that may be changed in
    place (a view of it, what it was read from): `activity`'s hazards, and the operands of
    calls that may change them (code known at run time or a global that is not
    ``settled``, ``f(*args)``, callees the hooks call ``changing`` or ``effectful``), with
    every variable `activity`'s aliases put in their class.  Without ``in_place``, in-place
    operators' operands are not counted (`_runs`)."""
    hazard, aliases = set(getattr(active, "hazard", ())), getattr(active, "aliases", None)
    for _, _, st in ir.statements():
        if not in_place and st.fn in _IN_PLACE:
            continue
        if isinstance(st.fn, Var) or isinstance(st.fn, Global) and not hooks.settled(st.fn) or \
                st.fn is ops.apply or hooks.changing(st.fn) or hooks.effectful(st.fn):
            hazard.update(x for x in list(st.args) + list(st.kw.values()) if isinstance(x, (Var, Global)))
    if aliases is None:
        return hazard.__contains__
    classes = {aliases.find(h) for h in hazard if h not in aliases.numbers}
    return lambda x: x in hazard or x not in aliases.numbers and aliases.find(x) in classes


def _jvp_call(out, b, st, look, dot, hooks, changed) -> Stmt:
    """The call computing ``(value, tangent)`` of active statement ``st``: its forward
    rule called directly where no operand may share an object changed here; a global
    that may be changed in place then takes its tangent from the shadow (``now``: the
    caller, or a function called before, may have changed it)."""
    fn, args = look(st.fn), [look(a) for a in st.args]
    kw = {k: look(x) for k, x in st.kw.items()}
    direct = not isinstance(st.fn, (Var, Global)) and not kw and \
        not any(changed(x) for x in st.args if isinstance(x, (Var, Global)))
    r = hooks.frule_for(st.fn) if direct else None
    if r is not None:
        ds = [out.push(b, Stmt(hooks.now, (a, None), None, st.line))
              if isinstance(a, Global) and hooks.changeable(a) else dot(a) for a in st.args]
        dargs = out.push(b, Stmt(ops.build_tuple, ds, None, st.line))
        return Stmt(r, [dargs] + args, None, st.line)
    dargs = out.push(b, Stmt(ops.build_tuple, [dot(a) for a in st.args], None, st.line))
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


def transform_tangent(lifted, hooks, globals_=None, private=False) -> TangentStages:
    """The tangent IR of ``lifted``: the primal and activity of `reverse.prepare` (so the
    same statements are active in both modes; ``private``: as nested differentiation
    lifts it), then `tangent`."""
    primal, active, h = prepare(lifted, hooks, globals_, private=private)
    return TangentStages(lifted, primal, simplify(tangent(primal, active, h)))
