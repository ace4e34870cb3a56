"""Random scalar programs, written as source text, compiled to real functions and
differentiated by bytegrad; the gradient must match central finite differences.

A program takes two or three floats and has assignments of arithmetic
expressions, calls of a helper function, if/else on comparisons of data,
``for i in range(k)`` loops (with break/continue), while loops with a bounded
counter and a data-dependent condition, early returns, ``try``/``except``/``finally``
around code that raises on a data-dependent condition (directly or in a called
function), and ``with`` a context manager that suppresses the exception.  Each program is
compiled twice from one tree: once plainly (the function bytegrad sees) and once
with every data comparison instrumented, which records the branch decisions.
A point is used only when all decisions stay the same when any argument moves by
a small step (so finite differences do not straddle a kink) and every compared
difference is away from zero.

`test_random_programs_operators` uses operators only; `test_random_programs_math`
also calls ``math.sin``/``math.cos``/``math.tanh`` and needs the math rules.
"""
from __future__ import annotations

import itertools
import linecache
import math

import numpy as np
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import bytegrad

_counter = itertools.count()

# ---------------------------------------------------------------------------
# program trees; rendering an expression or condition is a function of `inst`
# (whether comparisons are instrumented)
# ---------------------------------------------------------------------------

_CMP_OPS = ["<", ">", "<=", ">="]


class Cmp:
    def __init__(self, lhs, op, rhs):
        self.lhs, self.op, self.rhs = lhs, op, rhs

    def render(self, inst):
        if inst:
            return f"_cmp({self.lhs}, {self.op!r}, {self.rhs})"
        return f"{self.lhs} {self.op} {self.rhs}"


class BoolOp:
    def __init__(self, op, a, b=None):
        self.op, self.a, self.b = op, a, b

    def render(self, inst):
        if self.op == "not":
            return f"not ({self.a.render(inst)})"
        return f"({self.a.render(inst)}) {self.op} ({self.b.render(inst)})"


def _const(draw):
    return repr(round(draw(st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)), 2))


@st.composite
def expressions(draw, names, loop_vars, use_math, depth=2, single=False):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.integers(0, 5))
        if kind == 0:
            return _const(draw)
        if kind == 1 and loop_vars:
            i = draw(st.sampled_from(loop_vars))
            return f"({i} * 0.25 + {draw(st.sampled_from(names))})"
        return draw(st.sampled_from(names))
    sub = lambda: draw(expressions(names, loop_vars, use_math, depth - 1, single))
    kinds = ["+", "-", "*", "*", "neg", "sq"]
    if not single:  # forms that use a subexpression twice
        kinds += ["square", "div"]
    if use_math:
        kinds += ["sin", "cos", "tanh"]
    kind = draw(st.sampled_from(kinds))
    if kind in ("+", "-", "*"):
        return f"({sub()} {kind} {sub()})"
    if kind == "neg":
        return f"(-{sub()})"
    if kind == "sq":
        return f"sq({sub()})"
    if kind == "square":
        e = sub()
        return f"({e} * {e})"
    if kind == "div":
        e = sub()
        return f"({sub()} / (1.5 + {e} * {e}))"
    return f"math.{kind}({sub()})"


@st.composite
def conditions(draw, names, loop_vars, use_math):
    kind = draw(st.integers(0, 9))
    cmp = lambda: Cmp(draw(expressions(names, loop_vars, use_math, 1)), draw(st.sampled_from(_CMP_OPS)),
                      draw(st.sampled_from(names)) if draw(st.booleans()) else _const(draw))
    if kind == 0:
        return BoolOp("and", cmp(), cmp())
    if kind == 1:
        return BoolOp("or", cmp(), cmp())
    if kind == 2:
        return BoolOp("not", cmp())
    return cmp()


class Gen:
    """Draws a program's statements; keeps the names in scope and the loop depth."""

    def __init__(self, draw, nargs, use_math, small=False):
        self.draw, self.use_math, self.small = draw, use_math, small
        self.names = [f"x{i}" for i in range(nargs)]
        self.nlocals = 0
        self.nloops = 0
        self.loop_vars = []

    def expr(self, depth=2):
        if self.small:
            depth = min(depth, 1)
        return self.draw(expressions(self.names, self.loop_vars, self.use_math, depth, self.small))

    def cond(self):
        return self.draw(conditions(self.names, self.loop_vars, self.use_math))

    def raising(self, ind, depth, in_loop):
        """Statements of which one may raise ValueError: a ``raise`` under a condition,
        or a call of ``check``, which raises for a large argument."""
        d, name = self.draw, self.draw(st.sampled_from(self.names))
        lines = self.block(ind, depth, in_loop=in_loop)
        if d(st.booleans()):
            lines += [(ind, ("if", self.cond())), (ind + 1, "raise ValueError('taken')")]
        else:
            lines += [(ind, f"{name} = check({self.expr(1)})")]
        return lines + self.block(ind, depth, in_loop=in_loop)

    def block(self, ind, depth, top=False, in_loop=False):
        """A list of ``(indent, text-or-condition-line)``: rendering is deferred."""
        lines = []
        n = self.draw(st.integers(1, 2 if self.small else 3 if depth else 4))
        for _ in range(n):
            lines += self.statement(ind, depth, top, in_loop)
        return lines

    def statement(self, ind, depth, top, in_loop, kind=None):
        d = self.draw
        choices = ["assign", "assign", "assign"]
        if depth < 2:
            choices += ["if", "for", "while", "try", "with"]
        if depth > 0:
            choices += ["return"]
        if in_loop:
            choices += ["break"]
        kind = kind or d(st.sampled_from(choices))
        if kind == "assign":
            if top and (self.nlocals < 3 and d(st.booleans())):
                name = f"v{self.nlocals}"
                self.nlocals += 1
                line = (ind, f"{name} = {self.expr()}")
                self.names.append(name)
                return [line]
            name = d(st.sampled_from(self.names))
            form = d(st.integers(0, 2))
            if form == 0:
                return [(ind, f"{name} = sq({self.expr()})")]
            if form == 1:
                return [(ind, f"{name} = {name} * 0.5 + {self.expr(1)}")]
            return [(ind, f"{name} = {self.expr()}")]
        if kind == "if":
            out = [(ind, ("if", self.cond()))]
            out += self.block(ind + 1, depth + 1, in_loop=in_loop)
            if d(st.booleans()):
                out.append((ind, "else:"))
                out += self.block(ind + 1, depth + 1, in_loop=in_loop)
            return out
        if kind == "for":
            i = f"i{self.nloops}"
            self.nloops += 1
            k = d(st.sampled_from([3, 2, 1]))
            out = [(ind, f"for {i} in range({k}):")]
            self.loop_vars.append(i)
            out += self.block(ind + 1, depth + 1, in_loop=True)
            self.loop_vars.pop()
            return out
        if kind == "while":
            n = f"n{self.nloops}"
            self.nloops += 1
            k = d(st.sampled_from([3, 4, 1, 2]))
            out = [(ind, f"{n} = 0"), (ind, ("while", f"{n} < {k} and ", self.cond()))]
            out += self.block(ind + 1, depth + 1, in_loop=False)
            out.append((ind + 1, f"{n} += 1"))
            return out
        if kind == "return":
            return [(ind, ("if", self.cond())), (ind + 1, f"return {self.expr()}")]
        if kind == "try":
            out = [(ind, "try:")] + self.raising(ind + 1, depth + 1, in_loop)
            out += [(ind, "except ValueError:")] + self.block(ind + 1, depth + 1, in_loop=in_loop)
            if d(st.booleans()):
                out += [(ind, "finally:")] + self.block(ind + 1, depth + 1, in_loop=in_loop)
            return out
        if kind == "with":
            k = self.nloops
            self.nloops += 1
            name = d(st.sampled_from(self.names))
            out = [(ind, f"with Scale({self.expr(1)}) as w{k}:"),
                   (ind + 1, f"{name} = {name} + w{k} * {self.expr(1)}")]
            return out + self.raising(ind + 1, depth + 1, in_loop)
        # break or continue in a for loop
        word = d(st.sampled_from(["break", "continue"]))
        return [(ind, ("if", self.cond())), (ind + 1, word)]


HEADER = """\
import math

def sq(u):
    return u / (1.0 + u * u)

def check(u):
    if {check}:
        raise ValueError("large")
    return u * 1.5

class Scale:
    def __init__(self, k):
        self.k = k

    def __enter__(self):
        return self.k * 0.5

    def __exit__(self, kind, exc, tb):
        return kind is ValueError

"""


def render(nargs, lines, ret, inst):
    out = [f"def prog({', '.join(f'x{i}' for i in range(nargs))}):"]
    for ind, item in lines:
        pad = "    " * (ind + 1)
        if isinstance(item, str):
            out.append(pad + item)
        elif item[0] == "if":
            out.append(f"{pad}if {item[1].render(inst)}:")
        else:
            out.append(f"{pad}while {item[1]}({item[2].render(inst)}):")
    out.append(f"    return {ret}")
    check = Cmp("u", ">", "1.0").render(inst)
    return HEADER.format(check=check) + "\n".join(out) + "\n"


@st.composite
def programs(draw, use_math):
    nargs = draw(st.integers(2, 3))
    # small programs (a loop, few uses of each variable) two times in three
    g = Gen(draw, nargs, use_math, small=draw(st.integers(0, 2)) > 0)
    if g.small:
        # a statement or two, then a loop: each variable has few uses, so a
        # gradient that must be summed over iterations is easy to get wrong
        lines = g.block(0, 0, top=True) if draw(st.booleans()) else []
        lines += g.statement(0, 0, False, False, kind=draw(st.sampled_from(["for", "while"])))
        ret = draw(st.sampled_from(g.names)) if draw(st.booleans()) else g.expr(1)
    else:
        lines = g.block(0, 0, top=True)
        ret = g.expr()
    return render(nargs, lines, ret, False), render(nargs, lines, ret, True), nargs


def compile_program(src, tag):
    """A real function from ``src``, compiled with a file name known to linecache."""
    filename = f"<bytegrad-random-{tag}-{next(_counter)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {}
    exec(compile(src, filename, "exec"), ns)
    return ns["prog"], ns


def decisions(inst_ns, f, args):
    """The sequence of comparison outcomes and the smallest compared difference."""
    seen = []

    def _cmp(a, op, b):
        r = {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        seen.append((r, abs(a - b)))
        return r

    inst_ns["_cmp"] = _cmp
    y = f(*args)
    return [r for r, _ in seen], min((m for _, m in seen), default=math.inf), y


def fd(f, args, i, h):
    a, b = list(args), list(args)
    a[i] += h
    b[i] -= h
    return (f(*a) - f(*b)) / (2 * h)


def draw_program(data, use_math):
    """``(src, f, args, y, same)``: a program, a point away from its kinks where its value
    ``y`` is finite, and ``same(moved)``, whether a moved point takes the same branches."""
    src, inst_src, nargs = data.draw(programs(use_math))
    note(src)
    f, _ = compile_program(src, "plain")
    finst, inst_ns = compile_program(inst_src, "inst")
    args = [data.draw(st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False), label=f"x{i}")
            for i in range(nargs)]
    try:
        with np.errstate(all="ignore"):
            y = f(*args)
    except (OverflowError, ZeroDivisionError):
        assume(False)
    assume(math.isfinite(y) and abs(y) < 1e4)
    base, margin, y2 = decisions(inst_ns, finst, args)
    assert y2 == y
    assume(margin > 1e-3)
    return src, f, args, y, lambda moved: decisions(inst_ns, finst, moved)[0] == base


def check_program(data, use_math):
    src, f, args, y, same = draw_program(data, use_math)
    nargs = len(args)
    # stay away from kinks: same decisions at x ± step in every argument
    step = 1e-4
    for i in range(nargs):
        for s in (step, -step):
            moved = list(args)
            moved[i] += s
            assume(same(moved))

    value, grads = bytegrad.value_and_gradient(f, *args)
    assert value == y, f"bytegrad's primal value {value!r} differs from {y!r}"
    assert len(grads) == nargs
    for i, g in enumerate(grads):
        expected = fd(f, args, i, 1e-6)
        got = 0.0 if g is None else g
        assert isinstance(got, float), f"gradient {i} is a {type(got).__name__}"
        scale = max(1.0, abs(expected))
        assert abs(got - expected) <= 1e-4 * scale, \
            f"argument {i}: bytegrad {got!r} vs finite differences {expected!r}\n{src}"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_programs_operators(data):
    check_program(data, use_math=False)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_programs_math(data):  # needs math rules (math.sin, math.cos, math.tanh)
    check_program(data, use_math=True)


def test_generator_produces_valid_control_flow():
    """The generator's programs compile and cover loops, branches and returns."""
    seen = set()

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(programs(use_math=False))
    def collect(p):
        src, inst_src, nargs = p
        compile(src, "<x>", "exec")
        compile(inst_src, "<x>", "exec")
        for word in ("for ", "while ", "if ", "return ", "sq(", "try:", "finally:", "with ",
                     "raise ", "check("):
            if word in src.split("def prog", 1)[1]:
                seen.add(word)

    collect()
    assert seen >= {"for ", "while ", "if ", "sq(", "try:", "with ", "raise ", "check("}
