"""Type inference on the lifted IR, for the compiled tier.

Given the types of a call's arguments (float64, float32, int64 and bool scalars,
float arrays of 1 to 3 dimensions, of any strides, tuples of these), `infer` gives every
SSA value of the primal IR a type, or refuses with the construct, the user's file and
line and the reason (`NotCompilableError`).  Globals are read once, when the function is
typed: a module or function becomes a constant callee, a number a literal (the caller
keys its cache by them).  Calls of other Python functions are inlined first (`inline`).
``range`` loops keep the iteration protocol of the IR; their values get the types
``range``, ``iter(range)`` and ``next(range)`` (what ``ops.iterate`` returns):

    >>> import numpy as np
    >>> def f(x):
    ...     s = 0.0
    ...     for i in range(len(x)):
    ...         s += x[i] * x[i]
    ...     return s
    >>> print(infer(f, (Array("float64", 1),), {}))
    1: (%1 : const(f), %2 : float64[:])
      %3 = len(%2) : int64                           # line 3
      %4 = range(%3) : range                         # line 3
      %5 = iter(%4) : iter(range)                    # line 3
      br 2 (%5, 0.0)
    2: (%6 : iter(range), %7 : float64)
      %8 = ops.iterate(%4, %6) : next(range)         # line 3
      %9 = operator.is_not(%8, None) : bool          # line 3
      br 3 unless %9
      br 4
    3:
      return %7
    4:
      %10 = operator.getitem(%8, 0) : int64          # line 3
      %11 = operator.getitem(%8, 1) : iter(range)    # line 3
      %12 = operator.getitem(%2, %10) : float64      # line 4
      %13 = operator.getitem(%2, %10) : float64      # line 4
      %14 = operator.mul(%12, %13) : float64         # line 4
      %15 = operator.iadd(%7, %14) : float64         # line 4
      br 2 (%11, %15)
"""
from __future__ import annotations

import builtins
import operator
import types
from dataclasses import dataclass, field

from ..ir import IR, Branch, Global, Stmt, Var, lift, ops
from ..ir.cfg import CFG
from ..ir.simplify import substitute
from .returns import unify_returns


class NotCompilableError(Exception):
    """A construct the compiled tier cannot compile, with where it is and why."""

    def __init__(self, construct, filename, line, reason):
        self.construct, self.filename, self.line, self.reason = construct, filename, line, reason
        super().__init__(f"{filename}:{line}: {construct} cannot be compiled: {reason} "
                         f"(jit='auto' takes the dynamic tier for such a function)")


# -- types ---------------------------------------------------------------------
class Type:
    pass


@dataclass(frozen=True)
class Scalar(Type):
    name: str  # float64, float32, int64, bool

    def __repr__(self):
        return self.name


@dataclass(frozen=True)
class Array(Type):
    dtype: str
    ndim: int

    def __repr__(self):
        return f"{self.dtype}[{', '.join([':'] * self.ndim)}]"


@dataclass(frozen=True)
class Tuple(Type):
    items: tuple

    def __repr__(self):
        return f"({', '.join(map(repr, self.items))}{',' * (len(self.items) == 1)})"


@dataclass(frozen=True, eq=False)
class Const(Type):
    """A value known when the function is typed: a module, a callee, None, a string."""
    value: object

    def __eq__(self, other):
        return type(other) is Const and other.value is self.value

    def __hash__(self):
        return id(self.value)

    def __repr__(self):
        v = self.value
        if hasattr(v, "dtype") and hasattr(v, "ndim"):  # (an array the tier does not take)
            return f"{type(v).__name__} of {v.dtype} in {v.ndim} dimensions"
        if type(v) is int:  # (one beyond int64: compiled code's ints wrap there)
            return f"the int {v}, beyond int64"
        return f"const({getattr(v, '__name__', None) or repr(v)})"


@dataclass(frozen=True)
class Iter(Type):
    """``iter(over)`` (the state of a loop) or, with ``step``, what ``ops.iterate`` gives:
    None at the end, else (item, state)."""
    over: Type
    step: bool = False

    def __repr__(self):
        over = "range" if self.over == RANGE else repr(self.over)
        return f"{'next' if self.step else 'iter'}({over})"


F64, F32, I64, BOOL = Scalar("float64"), Scalar("float32"), Scalar("int64"), Scalar("bool")
RANGE = Scalar("range")  # (start, stop, step), three ints in the compiled code
UNDEF_T = Scalar("undef")  # a local unassigned on some path; joins to any type
FLOATS = (F64, F32)
_RANK = {BOOL: 0, I64: 1, F32: 2, F64: 3}


def is_float(t) -> bool:
    return t in FLOATS


INT64 = (-(1 << 63), (1 << 63) - 1)  # the ints compiled code holds


def of_value(x) -> Type:
    """The type of an argument or constant (anything else is a `Const`)."""
    import numpy as np  # (only the compiled tier, which needs numba anyway, types values)
    if isinstance(x, (bool, np.bool_)):
        return BOOL
    if isinstance(x, np.signedinteger) or isinstance(x, int) and INT64[0] <= x <= INT64[1]:
        return I64  # (a larger int, or an unsigned one, is a constant: not a type the tier takes)
    if isinstance(x, (float, np.float64)):
        return F64
    if isinstance(x, np.float32):
        return F32
    if isinstance(x, np.ndarray) and x.dtype in (np.float64, np.float32) and 1 <= x.ndim <= 3:
        return Array(x.dtype.name, x.ndim)
    if type(x) is tuple:
        return Tuple(tuple(map(of_value, x)))
    if x is ops.UNDEF:
        return UNDEF_T
    return Const(x)


def parse(text: str) -> tuple:
    """Argument types written as they print: ``"float64[:, :], int64, (float64, float64)"``.

    >>> parse("float64[:], float32, (int64, bool)")
    (float64[:], float32, (int64, bool))
    """
    out, depth, start = [], 0, 0
    text = text.strip()
    for i, c in enumerate(text + ","):
        depth += (c in "([") - (c in ")]")
        if c == "," and depth == 0:
            part = text[start:i].strip()
            start = i + 1
            if not part:
                continue
            if part.startswith("("):
                out.append(Tuple(parse(part[1:-1])))
            elif "[" in part:
                out.append(Array(part[:part.index("[")].strip(), part.count(":")))
            elif part in ("float64", "float32", "int64", "bool", "float", "int"):
                out.append({"float": F64, "int": I64}.get(part) or Scalar(part))
            else:
                raise ValueError(f"{part!r} is not a type the compiled tier takes (float64, float32, "
                                 f"int64, bool, float64[:] … float64[:, :, :], or a tuple of them)")
    return tuple(out)


@dataclass(frozen=True)
class ScalarFn:
    """A scalar function the compiled tier calls: its name in the generated code and, per
    argument, its partial derivative as an expression of ``x`` (``x0, x1`` for two
    arguments) and ``y`` (the result); ``int_result`` for ``math.floor`` and the like."""
    name: str
    derivs: tuple
    int_result: bool = False


@dataclass
class Typed:
    """A primal IR whose values all have types (``types``), with the file each inlined
    value comes from (``files``) and the globals read (``reads``: (globals, name, value))."""
    ir: IR
    types: dict
    files: dict = field(default_factory=dict)
    reads: list = field(default_factory=list)

    def where(self, v, line):
        return self.files.get(v, self.ir.meta.filename), line

    def __repr__(self):
        ty = self.types
        out = []
        for b in range(len(self.ir.blocks)):
            blk = self.ir.blocks[b]
            head = f"{b + 1}:" if not blk.args else \
                f"{b + 1}: ({', '.join(f'{a!r} : {ty[a]!r}' for a in blk.args)})"
            out.append(head)
            for v, st in blk.stmts:
                text = f"  {v!r} = {st!r} : {ty.get(v)!r}"
                out.append(f"{text:<48} # line {st.line}" if st.line is not None else text)
            out.extend(f"  {br!r}" for br in blk.branches)
        return "\n".join(out)


def infer(f, argtypes, funcs) -> Typed:
    """The typed primal IR of Python function ``f`` called with arguments of ``argtypes``;
    ``funcs`` maps the scalar functions the tier knows (``math.sin``…) to their `ScalarFn`."""
    if f.__code__.co_flags & 0x20 or f.__closure__ or f.__code__.co_flags & 0x0C:
        kind = "a generator" if f.__code__.co_flags & 0x20 else \
            "a closure" if f.__closure__ else "*args or **kwargs"
        raise NotCompilableError(kind, f.__code__.co_filename, f.__code__.co_firstlineno,
                                 "the compiled tier takes plain functions of positional arguments")
    code = f.__code__
    if len(argtypes) != code.co_argcount or code.co_kwonlyargcount:
        raise NotCompilableError(f"a call of {f.__qualname__} with {len(argtypes)} arguments",
                                 code.co_filename, code.co_firstlineno,
                                 f"the compiled tier takes all {code.co_argcount} parameters "
                                 f"positionally (no defaults, no keyword-only ones)")
    t = Typed(None, {})
    ir = _resolved(f, t, funcs)
    ir = inline(ir, t, funcs, (f.__code__,))
    t.ir = ir
    _Inference(t, funcs).run((Const(f),) + tuple(argtypes))
    return t


def _resolved(f, t, funcs) -> IR:
    """The single-return IR of ``f`` with every global read replaced by its value now."""
    ir = unify_returns(lift(f))
    g, attrs = f.__globals__, {}  # attrs: the values of a module's attributes read
    for blk in ir.blocks:
        kept = []
        for v, st in blk.stmts:
            if st.fn is ops.store_global or st.fn is ops.delete_global:
                raise _refuse(t, ir, v, st.line, "a global assignment", "it changes the program's state")
            st = st.map(lambda x: attrs.get(x, x) if isinstance(x, Var) else _global(x, g, t, ir, v, st.line))
            if st.fn is getattr and isinstance(st.args[0], types.ModuleType) and type(st.args[1]) is str:
                attrs[v] = _global(Global(st.args[1]), vars(st.args[0]), t, ir, v, st.line)
            else:
                kept.append((v, st))
        blk.stmts = kept
        blk.branches = [br.map(lambda x: _global(x, g, t, ir, None, br.line)) for br in blk.branches]
    substitute(ir, attrs)
    return ir


def _global(x, g, t, ir, v, line):
    if not isinstance(x, Global):
        return x
    value = g[x.name] if x.name in g else vars(builtins).get(x.name, ops.UNDEF)
    if value is ops.UNDEF:
        raise _refuse(t, ir, v, line, f"the global {x.name}", "it is not defined")
    t.reads.append((g, x.name, value))
    kind = of_value(value)
    if isinstance(kind, (Array, Tuple)) or kind == UNDEF_T:
        raise _refuse(t, ir, v, line, f"the global {x.name}",
                      f"a global {type(value).__name__} may change between calls; pass it as an argument")
    return value


def _refuse(t, ir, v, line, construct, reason):
    files = t.files if t is not None else {}
    return NotCompilableError(construct, files.get(v, ir.meta.filename), line, reason)


# -- inlining ------------------------------------------------------------------
def inline(ir, t, funcs, stack) -> IR:
    """``ir`` with each call of a Python function replaced by that function's blocks:
    ``%5 = g(%2)`` ends its block with ``br k (g, %2)`` into ``g``'s entry, whose return
    becomes ``br m (%y)`` to the rest of the block, which takes ``%5`` as its argument.
    Recursion is refused (its depth is known only at run time)."""
    b = 0
    while b < len(ir.blocks):
        blk = ir.blocks[b]
        for i, (v, st) in enumerate(blk.stmts):
            fn = st.fn
            if isinstance(fn, types.FunctionType) and fn not in funcs and fn.__module__ != ops.__name__:
                _splice(ir, b, i, _callee(ir, t, v, st, funcs, stack), t)
                break
        b += 1
    return ir


def _callee(ir, t, v, st, funcs, stack):
    fn = st.fn
    if fn.__code__ in stack:
        raise _refuse(t, ir, v, st.line, f"the call of {fn.__qualname__}", "it is recursive")
    if st.kw or fn.__closure__ or fn.__code__.co_flags & 0x2C or fn.__kwdefaults__:
        raise _refuse(t, ir, v, st.line, f"the call of {fn.__qualname__}",
                      "only calls of plain functions with positional arguments are compiled")
    need = fn.__code__.co_argcount
    given = list(st.args)
    defaults = fn.__defaults__ or ()
    if not need - len(defaults) <= len(given) <= need:
        raise _refuse(t, ir, v, st.line, f"the call of {fn.__qualname__}", "its arguments do not match")
    given += defaults[len(defaults) - (need - len(given)):] if need > len(given) else []
    sub = _resolved(fn, t, funcs)
    sub = inline(sub, t, funcs, stack + (fn.__code__,))
    return sub, [fn] + given


def _splice(ir, b, i, callee, t):
    """Put ``callee``'s IR (and its entry arguments) in place of statement ``i`` of block ``b``."""
    sub, args = callee
    blk = ir.blocks[b]
    v, _ = blk.stmts[i]
    rest = ir.block()
    ir.blocks[rest].args = [v]
    ir.blocks[rest].stmts = blk.stmts[i + 1:]
    ir.blocks[rest].branches = blk.branches
    blk.stmts = blk.stmts[:i]
    env, base = {}, len(ir.blocks)
    fresh = lambda x: env.setdefault(x, ir.var()) if isinstance(x, Var) else x
    for sb in sub.blocks:
        nb = ir.block()
        new = ir.blocks[nb]
        new.args = [fresh(a) for a in sb.args]
        new.stmts = [(fresh(x), st.map(fresh)) for x, st in sb.stmts]
        for x, _ in sb.stmts:
            t.files[env[x]] = t.files.get(x, sub.meta.filename)
        for br in sb.branches:
            br = br.map(fresh)
            if br.kind == "br":
                br.target += base
            elif br.kind == "return":
                br = Branch("br", rest, br.args, line=br.line)
            new.branches.append(br)
    blk.branches = [Branch("br", base, args)]
    ir._cfg = None


# -- inference -----------------------------------------------------------------
_ARITH = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.mod, operator.pow, operator.iadd, operator.isub, operator.imul,
          operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow}
_COMPARE = {operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne}
_UNARY = {operator.neg, operator.pos, operator.abs, abs}
_CONVERT = {float: F64, int: I64, bool: BOOL}


def promote(a, b, op=None):
    """The type of ``a op b`` for scalars, as numba computes it: bools add as ints, an int
    meets float32 in float64, ``/`` of ints is a float64."""
    r = max(_RANK[a], _RANK[b], 1)
    t = [BOOL, I64, F32, F64][r]
    if t == F32 and I64 in (a, b):
        t = F64
    if op in (operator.truediv, operator.itruediv) and t == I64:
        t = F64
    return t


class _Inference:
    def __init__(self, t, funcs):
        self.t, self.funcs, self.ty = t, funcs, t.types
        self.reached = {0}

    def refuse(self, v, line, construct, reason):
        return _refuse(self.t, self.t.ir, v, line, construct, reason)

    def type(self, x):
        if isinstance(x, Var):
            return self.ty.get(x, UNDEF_T)
        return of_value(x)

    def run(self, argtypes):
        ir = self.t.ir
        for blk in ir.blocks:
            for br in blk.branches:
                if br.kind not in ("br", "return") or br.catch:
                    line = br.line if br.line is not None else next((st.line for _, st in blk.stmts), None)
                    raise self.refuse(None, line, "try/except" if br.catch else f"a {br.kind}",
                                      "exceptions are not compiled")
        entry = ir.blocks[0]
        for a, at in zip(entry.args, argtypes):
            self.ty[a] = at
        changed = True
        while changed:
            changed = False
            for b in CFG.of(ir).order:  # (a join after the blocks that jump to it)
                blk = ir.blocks[b]
                if b not in self.reached:
                    continue
                for v, st in blk.stmts:
                    self.ty[v] = self.statement(v, st)
                for br in blk.branches:
                    changed |= self.branch(b, br)
        for b in sorted(self.reached):  # (blocks never reached stay untyped: codegen drops them)
            for br in ir.blocks[b].branches:
                if br.kind == "return" and not is_float(self.type(br.args[0])) and \
                        self.type(br.args[0]) not in (I64, BOOL):
                    raise self.refuse(None, br.line, "the return value",
                                      f"a gradient needs a number returned, not {self.type(br.args[0])!r}")

    def branch(self, b, br) -> bool:
        if br.kind != "br":
            return False
        if br.cond is not None and self.type(br.cond) not in (BOOL, I64):
            raise self.refuse(None, br.line, "the condition", f"it is a {self.type(br.cond)!r}, not a bool")
        changed = br.target not in self.reached
        self.reached.add(br.target)
        for p, a in zip(self.t.ir.blocks[br.target].args, br.args):
            old, new = self.ty.get(p), self.type(a)
            j = new if old is None else self.join(old, new, p, br.line)
            if j != old:
                self.ty[p] = j
                changed = True
        return changed

    def join(self, a, b, v, line):
        if a == b or b == UNDEF_T:
            return a
        if a == UNDEF_T:
            return b
        if a in _RANK and b in _RANK:
            return promote(a, b)
        raise self.refuse(v, line, "a variable", f"it holds a {a!r} on one path and a {b!r} on another")

    def statement(self, v, st):
        fn = self.type(st.fn)
        if not isinstance(fn, Const):
            raise self.refuse(v, st.line, f"the call of {st.fn!r}", "its callee is not known when compiling")
        if st.kw:
            raise self.refuse(v, st.line, f"keywords in {st!r}", "keyword arguments are not compiled")
        args = [self.type(a) for a in st.args]
        try:
            r = self.call(fn.value, args, st)
        except _No as e:
            raise self.refuse(v, st.line, _construct(st), str(e)) from None
        return r

    def call(self, f, args, st):
        if f in (operator.pow, operator.ipow) and len(args) == 2 and args[0] in (BOOL, I64) \
                and args[1] in (BOOL, I64):
            if not (type(st.args[1]) is int and st.args[1] >= 0):
                raise _No("an int to a power that may be a negative int (Python's is then a float: "
                          "2 ** -1 is 0.5; numba's an int, 0); make the base or the power a float")
            return I64
        if f in _ARITH:
            return self.scalars(args, lambda a, b: promote(a, b, f))
        if f in _COMPARE:
            return self.scalars(args, lambda a, b: BOOL)
        if f in _UNARY:
            self.scalars(args, lambda a: a)
            return I64 if args[0] == BOOL else args[0]
        if f is operator.not_ or f is operator.truth:
            self.scalars(args, lambda a: a)
            return BOOL
        if f in _CONVERT:
            self.scalars(args, lambda a: a)
            return _CONVERT[f]
        if f in (min, max):
            if len(args) < 2:
                raise _No("min and max of one iterable are not compiled; give them the numbers")
            r = args[0]
            for a in args[1:]:
                r = self.scalars([r, a], promote)
            return r
        if f in self.funcs:
            self.scalars(args, lambda *a: a)
            single = all(a == F32 for a in args) and getattr(f, "__module__", None) != "math"
            return I64 if self.funcs[f].int_result else F32 if single else F64
        if f is ops.identity or f is ops.bound and args[0] != UNDEF_T:
            return args[0]
        if f is ops.bound:
            raise _No("a variable read where some path leaves it unassigned")
        if f is operator.getitem:
            return self.getitem(*args, st)
        if f is operator.setitem:
            a, i, x = args
            if self.element(a, i) is None or x not in _RANK:
                raise _No(f"only a number is stored into an element of an array, not into {a!r} at {i!r}")
            return Const(None)
        if f is getattr:
            return self.attribute(*args, st)
        if f is len and len(args) == 1 and isinstance(args[0], (Array, Tuple)):
            return I64
        if f is range and 1 <= len(args) <= 3 and all(a in (I64, BOOL) for a in args):
            return RANGE
        if f is iter and len(args) == 1 and (args[0] == RANGE or isinstance(args[0], Array)):
            return Iter(args[0])
        if f is ops.iterate and isinstance(args[1], Iter) and not args[1].step:
            return Iter(args[0], True)
        if f is operator.is_not or f is operator.is_:
            if isinstance(args[0], Iter) and args[0].step and args[1] == Const(None):
                return BOOL
            raise _No("only the end of a loop is tested with 'is'")
        if f is ops.build_tuple:
            return Tuple(tuple(args))
        if f is slice:
            raise _No("a slice of an array is an array; the compiled tier reads single elements, "
                      "one int per dimension")
        if f is ops.unpack and isinstance(args[0], Tuple) and len(args[0].items) == st.args[1]:
            return args[0]
        raise _No("it has no compiled derivative (the eligible calls: arithmetic, comparisons, "
                  "math functions, element reads and writes of arrays, len, range, min, max, "
                  "abs, float, int and calls of such Python functions)")

    @staticmethod
    def scalars(args, result):
        if not all(a in _RANK for a in args):
            raise _No(f"it is given {', '.join(map(repr, args))}; compiled code computes with "
                      f"numbers (elements of arrays), not whole arrays or objects")
        return result(*args)

    @staticmethod
    def element(a, i):
        """The item type of ``a[i]`` for an array ``a`` and an index of one int per dimension."""
        if not isinstance(a, Array):
            return None
        idx = i.items if isinstance(i, Tuple) else (i,)
        if len(idx) == a.ndim and all(x in (I64, BOOL) for x in idx):
            return Scalar(a.dtype)
        return None

    def getitem(self, a, i, st):
        item = self.element(a, i)
        if item is not None:
            return item
        k = st.args[1]
        if isinstance(a, Tuple) and type(k) is int and -len(a.items) <= k < len(a.items):
            return a.items[k]
        if isinstance(a, Iter) and a.step and k in (0, 1):
            return (I64 if a.over == RANGE else Scalar(a.over.dtype)) if k == 0 else Iter(a.over)
        if isinstance(a, Array):
            raise _No(f"indexing a {a!r} by {i!r} makes an array (a slice or a row); "
                      f"the compiled tier reads single elements, one int per dimension")
        raise _No(f"it indexes a {a!r} by {i!r}")

    def attribute(self, a, name, st):
        name = st.args[1]
        if isinstance(a, Const) and isinstance(a.value, types.ModuleType):
            return Const(getattr(a.value, name))
        if isinstance(a, Array) and name == "shape":
            return Tuple((I64,) * a.ndim)
        if isinstance(a, Array) and name in ("size", "ndim"):
            return I64
        raise _No(f"the attribute {name!r} of a {a!r} is not compiled")


class _No(Exception):
    """Why a call cannot be typed (the caller adds where)."""


def _construct(st) -> str:
    from ..ir.ir import fmt
    return f"{fmt(st.fn)}(...)"


__all__ = ["infer", "parse", "NotCompilableError", "Typed", "Scalar", "Array", "Tuple", "Const", "Iter",
           "ScalarFn", "F64", "F32", "I64", "BOOL", "RANGE", "of_value", "is_float"]
