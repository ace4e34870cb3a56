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
operands are hazards too.  A call of a global given nothing active (``h(3)``), and a
read of a global object (``BOX["w"]``), are *reading*: they may meet, through a
global, a value that an earlier statement stored in place, so the runtime runs them
plainly only while nothing has been (`forward.forward_reading`).  Inactive statements
stay plain calls in the forward IR.
"""
from __future__ import annotations

import operator

from ..ir import Global, Var, ops


class Activity(set):
    """The active variables; ``soft`` holds those made active only by hazards: their
    callee, when it has no rule, may run plainly unless a mutated object reaches it."""

    def __init__(self, xs=()):
        super().__init__(xs)
        self.soft = set()
        self.hazards = set()  # (what `_Hazards` found: may be changed in place)
        # calls of code known only at run time given nothing that carries a gradient: the
        # code may still read one, through a global, from an object changed in place
        self.reading = set()
        # the variables whose object may be changed in place (see `_Hazards`), and the
        # classes of variables that may share objects (`_Aliases`)
        self.hazard, self.aliases = set(), None


def activity(ir, nondiff, effectful=lambda f: False, wrt=None, changeable=lambda g: False,
             changing=lambda f: False, scalar_kind=lambda f: None,
             settled=lambda f: False, python_code=lambda g: True) -> Activity:
    """The active variables of ``ir``.

    ``wrt`` (indices into the entry block's arguments) limits the arguments that
    start active, for a caller that wants only some gradients.  ``changeable(g)``
    says whether global ``g`` holds an object that may be changed in place (a list,
    an array; not a module or a function); ``changing(f)`` whether callee ``f`` may
    change its arguments in place (``operator.iadd``), like any callee known only at
    run time.  ``scalar_kind(f)`` says what ``f`` returns (see `scalars`): an immutable
    number is never a hazard, since nothing can change it in place.  ``python_code(g)``
    says whether global ``g`` names Python code (which may read other globals).  ``settled(g)``
    says whether global callee ``g`` names a callable that changes no argument
    (``range``, ``len``: no gradient, or a number), not code that might (a user's
    function, or a rule that calls one: ``sorted(xs, key=acc.add)``).
    """
    rebound = {st.args[0] for _, _, st in ir.statements() if st.fn is ops.store_global}
    if rebound:  # (``global L; L = [...]``: what it names when this runs may be changed)
        changeable = lambda g, was=changeable: g.name in rebound or was(g)
    made = {v for _, v, st in ir.statements() if st.fn is ops.make_function}  # code of ours
    code = lambda x: x in made if isinstance(x, Var) else isinstance(x, Global) and python_code(x)
    args = ir.blocks[0].args
    active = Activity(args if wrt is None else (args[i] for i in wrt))
    soft = active.soft
    owner = {v: (st.args[0],) for _, v, st in ir.statements()  # a method's object
             if st.fn is getattr and (isinstance(st.args[0], Var)
                                      or isinstance(st.args[0], Global) and changeable(st.args[0]))}
    hazard = active.hazard = _Hazards(ir, owner, changeable, scalars(ir, scalar_kind))  # may be changed by an active call: its uses are active
    strong = lambda x: x in active and x not in soft

    def reach(v, weak):
        """Make ``v`` active (soft unless ``weak`` is False); True if that changed anything."""
        if v not in active:
            active.add(v)
            if weak:
                soft.add(v)
            return True
        if not weak and v in soft:
            soft.discard(v)
            return True
        return False

    aliases = active.aliases = _Aliases(hazard)
    changed = True
    while changed:
        changed = False
        held = aliases.held(ir, active)
        for blk in ir.blocks:
            for v, st in blk.stmts:
                const = not isinstance(st.fn, Var)
                may_change = _may_change(st, changing, settled, code)
                touched = may_change and aliases.touches(
                    _containing(st, hazard.numbers) + list(owner.get(st.fn, ())), held)
                if touched and v not in active:
                    # it may change an object a pullback holds (``x[i]``, then ``i.fill(0)``):
                    # it must be recorded, so that the object is restored going back
                    changed |= reach(v, True)
                xs = [x for x in st.operands() if isinstance(x, Var) or isinstance(x, Global) and x in hazard]
                reading = not (strong(v) or const and (nondiff(st.fn) or effectful(st.fn))) and \
                    not any(x in active or x in hazard for x in xs) and \
                    ((st.fn in made if isinstance(st.fn, Var) else
                      isinstance(st.fn, Global) and python_code(st.fn)) and not touched
                     or any(isinstance(x, Global) and changeable(x) for x in st.args))
                if reading != (v in active.reading):
                    active.reading.symmetric_difference_update({v})
                    changed = True
                if reading:
                    changed |= reach(v, True)
                    continue
                if strong(v) or (const and nondiff(st.fn)):
                    continue
                stored = [x for x in _containing(st, hazard.numbers) if isinstance(x, Var)
                          or isinstance(x, Global) and changeable(x)]
                if const and (effectful(st.fn) or st.fn is ops.yield_):
                    # the object may receive a gradient later (what a yield sends in may have one)
                    changed |= reach(v, False)
                    hazard.spread(stored)
                    continue
                is_strong = any(map(strong, xs))
                if is_strong or any(x in active or x in hazard for x in xs):
                    changed |= reach(v, not is_strong)
                if v in active and may_change:  # it may store into an operand (or `out=`)
                    hazard.spread(stored)
                    hazard.spread(owner.get(st.fn, ()))
                    if isinstance(st.fn, Var):  # or into what it was made from (a partial's object)
                        hazard.spread(hazard.sources.get(st.fn, ()))
            for br in blk.branches:
                if br.kind != "br":
                    continue
                for p, a in zip(ir.blocks[br.target].args, br.args):
                    if isinstance(a, Var) and (a in active or a in hazard) and not strong(p):
                        changed |= reach(p, not strong(a))
                    elif a is ops.CAUGHT and not strong(p):
                        # what an active call raised may hold values with a gradient (the
                        # StopIteration of a generator that returned one); not a raise
                        # statement's, which raises what it is given
                        raising = [v for v, st in blk.stmts if v in active
                                   and st.fn is not ops.throw and st.fn is not ops.reraise]
                        if raising:
                            changed |= reach(p, not any(map(strong, raising)))
    active.hazards = hazard
    return active


def _may_change(st, changing, settled, code) -> bool:
    """Whether ``st`` may change an operand in place: a callee known only at run time, one
    that changes its arguments, an ``out=``, or a callee given Python code (``code(x)``:
    a function made here or a global naming one), which it may run on the other operands
    (``functools.reduce(f, xs, acc)``).  ``f(*args, **kw)`` (``ops.apply``) is asked about
    ``f``, and its keywords, unknown here, may hold ``out=``."""
    fn = st.fn
    if fn is ops.apply and st.args:
        fn = st.args[0]
        if len(st.args) > 2:
            return True
    return isinstance(fn, Var) or changing(fn) or "out" in st.kw or \
        isinstance(fn, Global) and not settled(fn) or \
        getattr(fn, "__module__", None) != ops.__name__ and not settled(fn) and \
        any(code(x) for x in (*st.args, *st.kw.values()))  # (the IR's own operations run no code)


class _Aliases:
    """Which values may share objects: those linked by `_Hazards.sources` (what each was
    computed from), in classes (union-find); immutable numbers share nothing."""

    def __init__(self, hazard):
        self.up, self.numbers = {}, hazard.numbers
        for v, xs in hazard.sources.items():
            for x in xs:
                if v not in self.numbers and x not in self.numbers:
                    a, b = self.find(v), self.find(x)
                    if a != b:
                        self.up[a] = b

    def find(self, x):
        while x in self.up:
            x = self.up[x]
        return x

    def held(self, ir, active) -> set:
        """The classes of the objects active statements read: their pullbacks may hold
        them until the reverse pass (not those of calls given nothing active, which hold
        what they read only where the runtime differentiates them)."""
        return {self.find(x) for _, v, st in ir.statements() if v in active and v not in active.reading
                for x in st.operands() if isinstance(x, (Var, Global)) and x not in self.numbers}

    def touches(self, xs, held) -> bool:
        return any(self.find(x) in held for x in xs
                   if isinstance(x, (Var, Global)) and x not in self.numbers)


class _Hazards(set):
    """Variables (and globals) whose object may be changed in place.  A change
    through a part (``R[0][1] = x``, ``for row in grid: row[0] = x``,
    ``np.reshape(a, 4)[0] = x``, ``b.buf[0] = x``) may change the whole, so what a
    hazard was computed from (the arguments of its statement, a method's object) is
    a hazard too, and so is what the edges into a block pass to a hazard block
    argument."""

    def __init__(self, ir, owner, changeable, numbers):
        super().__init__()
        self.sources, self.numbers = {}, numbers
        for _, v, st in ir.statements():  # the arguments and a method's object; not a callee
            xs = _containing(st, numbers) + list(owner.get(st.fn, ()))
            self.sources[v] = [x for x in xs if isinstance(x, Var)
                               or isinstance(x, Global) and changeable(x)]
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
            if x not in self and x not in self.numbers:
                self.add(x)
                todo.extend(y for y in self.sources.get(x, ()) if y not in self)


_KEYED = (operator.getitem, operator.setitem, operator.delitem)


def _containing(st, numbers):
    """The operands of ``st`` that its result or its change may share objects with.  A
    subscript's key is not one when it is a number: a change through ``R[i]`` changes
    ``R``, not ``i``, so a loop counter used as an index stays a plain int when what it
    indexes is written.  (An index array is: a pullback holds it, and must not see it
    changed later.)"""
    xs = list(st.args) + list(st.kw.values())
    if any(st.fn is f for f in _KEYED) and len(st.args) >= 2 and \
            (st.args[1] in numbers or not isinstance(st.args[1], (Var, Global))):
        del xs[1]
    return xs


_NUMBERS = (int, float, complex, bool)


def scalars(ir, kind) -> set:
    """The variables that always hold an immutable number (int, float, complex, bool).

    ``kind(f)`` is ``"scalar"`` when callee ``f`` always returns one (``len``,
    ``math.sin``), ``"arith"`` when it does given numbers (``operator.add``), ``"range"``
    when it returns a range.  A value read from iterating a range is an int, so are the
    items of a constant tuple of numbers, and a block argument is a number when every
    edge passes it one.  Computed as the greatest fixed
    point (a loop's accumulator ``s = 0.0; s += t`` depends on itself)."""
    made = {v: st for _, v, st in ir.statements()}
    ranges = {v for v, st in made.items() if not isinstance(st.fn, Var) and kind(st.fn) == "range"}
    tuples = {v for v, st in made.items()  # whose items are numbers: a step over a range, ...
              if st.fn is ops.iterate and st.args[0] in ranges
              or st.fn is ops.unpack and type(st.args[0]) is tuple  # ... ``a, b = 0.0, 0``
              and all(type(c) in _NUMBERS for c in st.args[0])}
    incoming, users = {}, {}
    for blk in ir.blocks:
        for br in blk.branches:
            if br.kind == "br":
                for p, a in zip(ir.blocks[br.target].args, br.args):
                    incoming.setdefault(p, []).append(a)
                    if isinstance(a, Var):
                        users.setdefault(a, []).append(p)
    for v, st in made.items():
        for x in st.operands():
            if isinstance(x, Var):
                users.setdefault(x, []).append(v)
    out = set(made) | set(incoming)
    number = lambda x: x in out if isinstance(x, Var) else type(x) in _NUMBERS

    def holds(v):
        st = made.get(v)
        if st is None:  # a block argument (the entry block's have no incoming edges)
            return v in incoming and all(map(number, incoming[v]))
        if isinstance(st.fn, Var):
            return False
        k = kind(st.fn)
        if k == "scalar":
            return True
        if k == "arith":
            return all(map(number, list(st.args) + list(st.kw.values())))
        return st.fn is operator.getitem and st.args[0] in tuples and type(st.args[1]) is int \
            and (st.args[1] == 0 or made[st.args[0]].fn is ops.unpack)
    todo = list(out)  # a variable that stops holding a number may stop its users
    while todo:
        v = todo.pop()
        if v in out and not holds(v):
            out.discard(v)
            todo.extend(users.get(v, ()))
    return out
