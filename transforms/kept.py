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
an operand, and ``np.s_[x]`` and ``getattr(o, "a", x)`` return ``x``; a view given to an
operator along with what may be an object of yours (an argument, what your code returned)
is handed on: the object's method may keep it.  The register pass watches a kept value
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

(``np.sum``'s result is returned: it is watched for its caller.)  A user's operator method
given a kept array is watched at run time (`operators._user_method`).
"""
from __future__ import annotations

from ..ir import Var

_OUT = "out"  # the keyword through which a NumPy function writes into an array


def kept(ir, reads, view, methods) -> set:
    """The values of ``ir``'s statements that it only reads (see the module docstring).
    ``reads(f)`` is how many positional operands a call of ``f`` only reads; ``view(f)``,
    whether ``f(…)`` may share an operand's memory (``x[i]``; ``np.s_[x]`` and
    ``getattr(o, "a", x)`` hand back ``x``); ``methods(f)``, whether it may call a Python
    method of an operand's class with the others (``a + b``: ``type(b).__radd__(b, a)``,
    whose code may keep them, or return one)."""
    if ir.meta.generator:  # (a yield hands values on)
        return set()
    fresh, handed, returned, numeric, to_methods = set(), set(), set(), set(), []
    views, reading = {}, {}  # a view's or a read's value → the values it may share
    for blk in ir.blocks:
        for v, st in blk.stmts:
            if _uses(v, st, reads, view, methods, handed, views, reading, numeric, to_methods):
                fresh.add(v)
        for br in blk.branches:
            (returned if br.kind == "return" else handed).update(
                x for x in br.operands() if isinstance(x, Var))
    # a view given to an operator with another operand that may be an object of yours: its
    # method may keep the view, and takes only the view's part of what a later change leaves
    # (`operators._user_method`)
    for xs in to_methods:
        for x in xs.intersection(views):
            if not numeric.issuperset(xs - {x}):
                handed.add(x)
    changed = True
    while changed:  # what a value handed on (or a view returned) shares is handed on
        changed = False
        for through, out in ((views, handed | returned), (reading, handed)):
            for w, shared in through.items():
                if w in out and not handed.issuperset(shared):
                    handed.update(shared)
                    changed = True
    return fresh - handed - returned


def _uses(v, st, reads, view, methods, handed, views, reading, numeric, to_methods) -> bool:
    """Record what statement ``%v = st`` does with each value it uses (``numeric``: the
    values that are arrays and numbers, unless an override made them); whether ``%v`` is
    new (a call that only reads its operands made it: one that shares an operand's memory
    only where a user's method, or a NumPy override, hands that operand back)."""
    f = st.fn
    if isinstance(f, Var):
        handed.add(f)
        f = None
    n = 0 if f is None else reads(f)
    shares = f is not None and view(f)
    xs = {x for x in (*st.args, *(st.kw or {}).values()) if isinstance(x, Var)}
    if shares:
        views[v] = xs
    elif n:
        reading[v] = xs
    if n or shares:
        calls = not shares and methods(f)
        if calls:
            to_methods.append(xs)
        # (np.tanh(x) is; x[i] and x.T are where x is: an index or a name makes no object,
        # getattr's default may be one)
        if not (shares or calls) or numeric.issuperset(xs) or shares and len(st.args) == 2 \
                and st.args[0] in numeric:
            numeric.add(v)
    for k, x in enumerate(st.args):
        if isinstance(x, Var) and not (k < n or shares):
            handed.add(x)
    for name, x in (st.kw or {}).items():
        if isinstance(x, Var) and (name == _OUT or not n or shares):
            handed.add(x)
    return 0 < len(st.args) <= n and not shares and _OUT not in (st.kw or ())
