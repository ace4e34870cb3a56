"""The code of each statement of a typed IR, going forward and backwards, for `fused`.

`Statements.forward` writes a statement as numba code (``v5 = v3 * v4``; an element
read ``v7 = v2[v6]``, its index tested in the forward sweep alone), `Statements.adjoint`
the lines that add its operands' adjoints (``d3 += d5 * v4``, written ``d3 = d5 * v4``
where ``d3`` is known to be zero, by `fused`), and `Statements.needs`
the values those lines read, which the block's plan recomputes or takes from a tape.
A loop over ``range(n)`` keeps the iteration protocol's values apart: ``ops.iterate``
writes nothing, its test is ``v6 < v4_1`` and its item the index itself:

    >>> from bytegrad.transforms.typed import infer, Array
    >>> from bytegrad.transforms.fused import source
    >>> def f(x):
    ...     return x[0] * x[1]
    >>> print(source(infer(f, (Array("float64", 1),), {}), (1,), {}))
    import math
    ...
            if blk == 0:
                if 0 >= v2.shape[0] or 0 < -v2.shape[0]:
                    raise IndexError('...:2: index out of range')
                v3 = v2[0]
                ...
                v5 = v3 * v4
                ret = v5
                ...
            if blk == 0:
                d3 = d5 * v4
                d4 = d5 * v3
                d5 = 0.0
                d2[1] += d4
                d4 = 0.0
                d2[0] += d3
                d3 = 0.0
                blk = -1
    ...
"""
from __future__ import annotations

import math
import operator

from ..ir import Var, ops
from .typed import F64, RANGE, Array, Tuple

_SYMBOL = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**",
           operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
           operator.eq: "==", operator.ne: "!="}
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
            operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
            operator.imod: operator.mod, operator.ipow: operator.pow}

def literal(x) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return "math.nan" if x != x else ("math.inf" if x > 0 else "-math.inf")
    return repr(x)



class Statements:
    """The statement-level code of `fused._Gen`, which holds what it reads: the types
    (``ty``), the iteration steps (``steps``), the defining statements (``made``), the
    active values and their adjoints (``d``)."""

    # -- operands --------------------------------------------------------------
    def e(self, x):
        if isinstance(x, Var):
            return f"v{x.id}"
        return literal(x)

    # -- statements: forward ------------------------------------------------------
    def forward(self, v, st):
        f, a = self.fn(st), st.args
        y = self.e(v)
        f = _INPLACE.get(f, f)
        if f in _SYMBOL:
            return [f"{y} = {self.e(a[0])} {_SYMBOL[f]} {self.e(a[1])}"]
        if f is operator.neg or f is operator.pos:
            return [f"{y} = {'-' if f is operator.neg else '+'}{self.e(a[0])}"]
        if f is operator.abs or f is abs:
            return [f"{y} = abs({self.e(a[0])})"]
        if f is operator.not_:
            return [f"{y} = not {self.e(a[0])}"]
        if f is operator.truth:
            return [f"{y} = bool({self.e(a[0])})"]
        if f in (float, int, bool):
            return [f"{y} = {f.__name__}({self.e(a[0])})"]
        if f is min or f is max:
            return [f"{y} = {f.__name__}({', '.join(map(self.e, a))})"]
        if f in self.funcs:
            return [f"{y} = {self.funcs[f].name}({', '.join(map(self.e, a))})"]
        if f is ops.identity or f is ops.bound:
            return [f"{y} = {self.e(a[0])}"]
        if f is operator.getitem:
            return self.getitem(v, a)
        if f is operator.setitem:
            return self.push("f", f"{self.e(a[0])}[{self.e(a[1])}]") + \
                [f"{self.e(a[0])}[{self.e(a[1])}] = {self.e(a[2])}"]
        if f is getattr:
            return [f"{y} = {self.e(a[0])}.{a[1]}"]
        if f is len:
            return [f"{y} = len({self.e(a[0])})"]
        if f is range:
            r = [0, a[0], 1] if len(a) == 1 else [a[0], a[1], 1] if len(a) == 2 else list(a)
            return [f"{y}_{k} = {self.e(x)}" for k, x in enumerate(r)]
        if f is iter:
            return [f"{y} = {self.part(a[0], 0)}" if self.ty[a[0]] == RANGE else f"{y} = 0"]
        if f is ops.iterate:  # (its uses read what it iterates and its state)
            return []
        if f is operator.is_not or f is operator.is_:
            over, state = self.steps[a[0]]
            s, o = self.e(state), self.e(over)
            step = self.part(over, 2) if self.ty[over] == RANGE else "1"
            test = f"{s} < len({o})" if self.ty[over] != RANGE else \
                f"({s} < {o}_1 if {step} > 0 else {s} > {o}_1)" if step[0] == "v" else \
                f"{s} {'<' if int(step) > 0 else '>'} {o}_1"
            return [f"{y} = {test if f is operator.is_not else 'not ' + test}"]
        if f is ops.build_tuple:
            return [f"{y} = ({''.join(self.e(x) + ', ' for x in a)})"]
        if f is ops.unpack:
            return [f"{y} = {self.e(a[0])}"]
        raise self.refuse(v, st.line, repr(st), "the compiled tier has no code for it")

    def part(self, r, k):
        """Component ``k`` (start, stop, step) of range ``r`` as code: a literal where the
        ``range`` call gives a constant (``range(n)`` starts at 0 and steps by 1)."""
        a = self.made[r].args
        full = [0, a[0], 1] if len(a) == 1 else [a[0], a[1], 1] if len(a) == 2 else list(a)
        return f"{self.e(r)}_{k}" if isinstance(full[k], Var) else literal(full[k])

    def bounds(self, v, st):
        """The forward sweep's test of an element access's index, raising IndexError as
        Python would (the reverse sweep accesses no other elements, so it tests none)."""
        f, a = self.fn(st), st.args
        el = self.element(st) if f is operator.getitem else (a[0], a[1]) if f is operator.setitem else None
        if el is None or a[0] in self.steps:  # (an iteration over an array stays in it)
            return []
        arr, idx = el
        n = self.ty[arr].ndim
        parts = [self.e(idx)] if n == 1 else [literal(i) for i in idx] if isinstance(idx, tuple) \
            else [f"{self.e(idx)}[{k}]" for k in range(n)]
        filename, line = self.t.where(v, st.line)
        msg = literal(f"{filename}:{line}: index out of range")
        return [line for k, i in enumerate(parts)
                for line in (f"if {i} >= {self.e(arr)}.shape[{k}] or {i} < -{self.e(arr)}.shape[{k}]:",
                             f"    raise IndexError({msg})")]

    def getitem(self, v, a):
        y, x = self.e(v), a[0]
        if x in self.steps:
            over, state = self.steps[x]
            if a[1] == 1:
                return [f"{y} = {self.e(state)} + {self.part(over, 2)}" if self.ty[over] == RANGE
                        else f"{y} = {self.e(state)} + 1"]
            return [f"{y} = {self.e(state)}" if self.ty[over] == RANGE
                    else f"{y} = {self.e(over)}[{self.e(state)}]"]
        return [f"{y} = {self.e(x)}[{self.e(a[1])}]"]

    def element(self, st):
        """``(array, index)`` of an element read, or None."""
        f, a = self.fn(st), st.args
        if f is not operator.getitem:
            return None
        if a[0] in self.steps:
            over, state = self.steps[a[0]]
            return (over, state) if a[1] == 0 and self.ty[over] != RANGE else None
        return (a[0], a[1]) if isinstance(self.ty[a[0]], Array) else None

    @staticmethod
    def push(kind, x):
        t, n = ("tf", "nf") if kind == "f" else ("ti", "ni")
        return [f"if {n} == {t}.shape[0]:", f"    {t} = _grow({t})", f"{t}[{n}] = {x}", f"{n} += 1"]

    @staticmethod
    def pop(kind, y):
        t, n = ("tf", "nf") if kind == "f" else ("ti", "ni")
        return [f"{n} -= 1", f"{y} = {t}[{n}]"]

    # -- statements: reverse -------------------------------------------------------
    def needs(self, v, st):
        """The values the adjoint of ``v = st`` reads (all of its operands' values that
        appear in a derivative)."""
        f, a = _INPLACE.get(self.fn(st), self.fn(st)), st.args
        if f is operator.setitem:
            return _vars(a[1:2]) if a[0] in self.active else []
        if v not in self.active:
            return []
        el = self.element(st)
        if el is not None:
            return _vars([el[1]])
        if f in (operator.mul, operator.truediv, operator.mod, min, max, abs, operator.abs):
            return _vars(a)
        if f is operator.pow:
            return _vars(a) + ([v] if a[1] in self.active else [])
        if f in self.funcs:
            return _vars(a) + [v]
        return []

    def recomputable(self, st):
        f = self.fn(st)
        if f in self.funcs or f is operator.setitem or f is ops.iterate or f is range:
            return False
        return not (self.written and self.element(st) is not None)

    def operands(self, st):
        """The values a statement's forward code reads (an iteration step's own)."""
        out = []
        for x in st.args:
            if x in self.steps:
                over, state = self.steps[x]
                out += [state] if self.ty[over] == RANGE and st.args[1] == 0 else [over, state]
            else:
                out.append(x)
        return _vars(out)

    def reverse(self, v, st):
        f, a = _INPLACE.get(self.fn(st), self.fn(st)), st.args
        if f is operator.setitem:
            if a[0] not in self.active:
                return self.pop("f", f"{self.e(a[0])}[{self.e(a[1])}]")
            dx, da = self.d(a[2]), self.d(a[0])
            el = f"{da}[{self.e(a[1])}]"
            return ([f"{dx} += {el}"] if dx else []) + [f"{el} = 0.0"] + \
                self.pop("f", f"{self.e(a[0])}[{self.e(a[1])}]")
        g = self.d(v)
        if g is None or isinstance(self.ty[v], (Array, Tuple)) and f is not ops.build_tuple:
            return []
        out = self.adjoint(v, st, f, a, g)
        return out + ([f"{g} = 0.0"] if isinstance(self.ty[v], type(F64)) else [])

    def adjoint(self, v, st, f, a, g):
        e = self.e
        el = self.element(st)
        if el is not None:
            return [f"{self.d(el[0])}[{e(el[1])}] += {g}"]
        if f is operator.getitem:  # an item of a tuple
            return self.add(a[0], g, a[1])
        if f is ops.build_tuple:
            return [line for k, x in enumerate(a) for line in self.add(x, self.d(v, k))] + \
                [f"{self.d(v, k)} = 0.0" for k in range(len(a)) if self.d(v, k)]
        if f in (operator.add, operator.pos, ops.identity, ops.bound, float):
            return [line for x in a[:2] for line in self.add(x, g)]
        if f is operator.sub:
            return self.add(a[0], g) + self.add(a[1], f"-{g}")
        if f is operator.neg:
            return self.add(a[0], f"-{g}")
        if f is operator.mul:
            return self.add(a[0], f"{g} * {e(a[1])}") + self.add(a[1], f"{g} * {e(a[0])}")
        if f is operator.truediv:
            return self.add(a[0], f"{g} / {e(a[1])}") + \
                self.add(a[1], f"-{g} * {e(a[0])} / ({e(a[1])} * {e(a[1])})")
        if f is operator.mod:
            return self.add(a[0], g) + self.add(a[1], f"-{g} * ({e(a[0])} // {e(a[1])})")
        if f is operator.pow:
            return self.power(v, a, g)
        if f is abs or f is operator.abs:
            x = e(a[0])
            return self.add(a[0], f"{g} * (1.0 if {x} > 0 else -1.0 if {x} < 0 else 0.0)")
        if f is min or f is max:
            return self.extremum(f, a, g)
        if f in self.funcs:
            fn = self.funcs[f]
            names = {"y": e(v)} | ({"x": e(a[0])} if len(a) == 1 else {f"x{k}": e(x) for k, x in enumerate(a)})
            return [line for x, dx in zip(a, fn.derivs) for line in self.add(x, f"{g} * ({dx.format(**names)})")]
        return []  # (floordiv, int, comparisons: no gradient)

    def add(self, x, term, k=None):
        dx = self.d(x, k)
        return [f"{dx} += {term}"] if dx else []

    def power(self, v, a, g):
        x, n = self.e(a[0]), a[1]
        if not isinstance(n, Var):
            term = None if n == 0 else g if n == 1 else f"{g} * {literal(float(n))} * {x}" if n == 2 \
                else f"{g} * {literal(float(n))} * {x} ** {literal(n - 1)}"
            return self.add(a[0], term) if term else []
        ne = self.e(n)
        out = self.add(a[0], f"({g} * {ne} * {x} ** ({ne} - 1) if {ne} != 0 else 0.0)")
        return out + self.add(n, f"({g} * {self.e(v)} * math.log(abs({x})) if {x} != 0 else 0.0)")

    def extremum(self, f, a, g):
        """Python's choice: the first of the arguments that no later one beats strictly."""
        better = ">" if f is max else "<"
        out = ["best = 0", f"top = {self.e(a[0])}"]
        for k, x in enumerate(a[1:], 1):
            out += [f"if {self.e(x)} {better} top:", f"    best = {k}", f"    top = {self.e(x)}"]
        for k, x in enumerate(a):
            if self.d(x):
                out += [f"if best == {k}:", f"    {self.d(x)} += {g}"]
        return out


def _vars(xs):
    return [x for x in xs if isinstance(x, Var)]
