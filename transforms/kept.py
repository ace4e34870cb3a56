"""Which values a function only reads: the part of the mutation analysis that spares
the register pass its bookkeeping where nothing can change a value in place.

A value made by a statement may be changed in place later, by this function or by
whoever it is handed to; its pullback must then take the gradient that the change
left in the shadow (`mutation.Owned`).  A value is *kept* when a call that only reads
its operands made it (`rules.only_reads`: ``x @ W``, ``np.tanh(x)``, ``np.sum(x, 0)``,
``len(x)``), every statement that uses it is such a call or makes a view of it that is
kept in turn (``x[1:]``, ``x.T``: `rules.views`), and it is neither returned (a rule
such as ``functools.reduce`` may give it to code that changes it), nor passed to another
block, nor called, nor given as ``out=``.  What a call may hand back is handed on where
its result is: an override (``__array_ufunc__``) or a user's operator method may return
an operand, and ``np.s_[x]`` and ``getattr(o, "a", x)`` return ``x``.  What code of yours
may be given is handed on too: an operand of an operator beside a value that may be an
object of yours (whose ``__radd__`` may keep it), a key of such a container.  Values are
known to be arrays or numbers where the call's types say so of the arguments
(`forward.Variant`: the API's transform for a call with arrays, which ``ir dump --arrays``
shows), and where a call that only reads such values made them (not of others: an
override may make an object of yours).  The register pass watches a kept value
through `KEPT`, whose test lets an ndarray by unless something has been mutated:

    >>> import bytegrad, numpy as np
    >>> def f(x):
    ...     h = np.tanh(x)
    ...     return np.sum(h * h)
    >>> print(bytegrad.stages(f).forward)
    1: (%1, %2)
      %3 = list()                                    # line 1
      %4 = getattr(%3, 'append')                     # line 1
      %5 = getattr(np, 'tanh')                       # line 2
      %6 = ops.resolved(%5, numpy.tanh, 'np.tanh')   # line 2
      %7 = np_elementwise.unary_rule.<locals>.r(%2)  # line 2
      %8 = ops.unpack(%7, 2)                         # line 2
      %9 = operator.getitem(%8, 0)                   # line 2
      %10 = operator.getitem(%8, 1)                  # line 2
      %11 = ops.watch(KEPT, %10, %9, numpy.tanh, %2) # line 2
      %12 = %4(%11)                                  # line 2
      %13 = getattr(np, 'sum')                       # line 3
      %14 = ops.resolved(%13, numpy.sum, 'np.sum')   # line 3
      %15 = taped.mul_kept(%4, %9, %9)               # line 3
      %16 = np_reductions._sum(%15)                  # line 3
      %17 = ops.unpack(%16, 2)                       # line 3
      %18 = operator.getitem(%17, 0)                 # line 3
      %19 = operator.getitem(%17, 1)                 # line 3
      %20 = ops.watch(WATCH, %19, %18, numpy.sum, %15) # line 3
      %21 = %4(%20)                                  # line 3
      %22 = ops.build_tuple(%18, %3)                 # line 3
      return %22

(``np.sum``'s result is returned: it stays watched.)
"""
from __future__ import annotations

from ..ir import Global, Var

_OUT = "out"  # the keyword through which a NumPy function writes into an array


def kept(ir, reads, view, methods, numeric_args=()) -> set:
    """The values of ``ir``'s statements that it only reads (see the module docstring).
    ``reads(f)`` is how many positional operands a call of ``f`` only reads; ``view(f)``,
    whether ``f(…)`` may share an operand's memory (``x[i]``; ``np.s_[x]`` and
    ``getattr(o, "a", x)`` hand back ``x``); ``methods(f)``, whether it may call a Python
    method of an operand's class with the others (``a + b``: ``type(b).__radd__(b, a)``,
    whose code may keep them).  ``numeric_args``: the entry arguments that are arrays or
    numbers (not of dtype object)."""
    if ir.meta.generator:  # (a yield hands values on)
        return Kept((), ())
    fresh, handed, returned = set(), set(), set()
    numeric = {ir.blocks[0].args[i] for i in numeric_args}
    views, reading, given = {}, {}, []  # given: (values, the operands beside them)
    for blk in ir.blocks:
        for v, st in blk.stmts:
            if _uses(v, st, reads, view, methods, handed, views, reading, numeric, given):
                fresh.add(v)
        for br in blk.branches:
            (returned if br.kind == "return" else handed).update(
                x for x in br.operands() if isinstance(x, Var))
    # what code of yours may be given (an operator's other operand, a container's key) is
    # handed on unless the values beside it are arrays and numbers NumPy made
    for xs, operands in given:
        for x in xs:
            if not all(o in numeric if isinstance(o, Var) else _plain(o) for o in operands if o is not x):
                handed.add(x)
    changed = True
    while changed:  # what a value handed on (or a view returned) shares is handed on
        changed = False
        for through, out in ((views, handed | returned), (reading, handed)):
            for w, shared in through.items():
                if w in out and not handed.issuperset(shared):
                    handed.update(shared)
                    changed = True
    return Kept(fresh - handed - returned, numeric)


class Kept(set):
    """What `kept` found: the values only read, and (``numeric``) those that are arrays
    and numbers, whose end no code can see."""

    def __init__(self, values, numeric):
        super().__init__(values)
        self.numeric = numeric


def _plain(c) -> bool:
    """Whether constant operand ``c`` is a number or a string (a `Global` may be anything)."""
    return not isinstance(c, Global) and isinstance(c, (int, float, complex, str, bytes, type(None)))


def _uses(v, st, reads, view, methods, handed, views, reading, numeric, given) -> bool:
    """Record what statement ``%v = st`` does with each value it uses (``numeric``: the
    values that are arrays and numbers: a call that only reads such values made them;
    ``given``: see `kept`); whether ``%v`` is new (a call that only reads its operands
    made it: one that shares an operand's memory only where an override or a method of
    yours hands that operand back)."""
    f = st.fn
    if isinstance(f, Var):
        handed.add(f)
        f = None
    n = 0 if f is None else reads(f)
    shares = f is not None and view(f)
    xs = {x for x in (*st.args, *(st.kw or {}).values()) if isinstance(x, Var)}
    if shares:
        views[v] = xs
        if st.args:  # (a key given to a container that may be yours, a global one too)
            given.append((xs - {st.args[0]}, st.args[:1]))
        if numeric.issuperset(xs) or len(st.args) == 2 and isinstance(st.args[0], Var) \
                and st.args[0] in numeric:
            numeric.add(v)  # (x[i], x.T of an array; getattr's default may be an object)
    elif n:
        reading[v] = xs
        if methods(f):  # (a + b: b's method is given a; a global b, or a constant, too)
            given.append((xs, st.args))
        if numeric.issuperset(xs):  # (an override may make an object of yours of others)
            numeric.add(v)
    for k, x in enumerate(st.args):
        if isinstance(x, Var) and not (k < n or shares):
            handed.add(x)
    for name, x in (st.kw or {}).items():
        if isinstance(x, Var) and (name == _OUT or not n or shares):
            handed.add(x)
    return 0 < len(st.args) <= n and not shares and _OUT not in (st.kw or ())
