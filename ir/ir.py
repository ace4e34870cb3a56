"""The IR: blocks with arguments, statements that are all calls, branches.

Modelled on IRTools.jl.  A function's IR prints like this (``%1`` is the
function itself, ``%2`` its parameter):

    >>> from bytegrad.ir import lift
    >>> def f(x):
    ...     if x > 1:
    ...         return bar(x)
    ...     return x
    >>> print(lift(f))
    1: (%1, %2)
      %3 = operator.gt(%2, 1)                        # line 2
      br 2 unless %3
      br 3
    2:
      return %2
    3:
      %4 = bar(%2)                                   # line 3
      return %4

Operands are `Var`s, `Global`s (a name resolved at run time in the function's
globals, then builtins) or any other Python object, which is a constant.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


class Var:
    """An SSA variable, printed ``%n``; unique within one IR."""

    __slots__ = ("id",)

    def __init__(self, id: int):
        self.id = id

    def __repr__(self):
        return f"%{self.id}"


class Slot:
    """A mutable local, printed ``@name``: assigned any number of times.

    Only the adjoint pass makes slots (one gradient accumulator per primal
    variable); SSA rules do not apply to them.
    """

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"@{self.name}"


@dataclass(frozen=True)
class Global:
    """A name looked up at run time in the function's globals, then builtins."""

    name: str

    def __repr__(self):
        return self.name


class Stmt:
    """``f(args..., k=v...)``: a call, the only kind of statement."""

    __slots__ = ("fn", "args", "kw", "line")

    def __init__(self, fn, args=(), kw=None, line=None):
        self.fn = fn
        self.args = tuple(args)
        self.kw = dict(kw) if kw else {}
        self.line = line

    def operands(self):
        yield self.fn
        yield from self.args
        yield from self.kw.values()

    def map(self, f) -> "Stmt":
        """The same call with every operand replaced by ``f(operand)``."""
        return Stmt(f(self.fn), [f(a) for a in self.args],
                    {k: f(v) for k, v in self.kw.items()}, self.line)

    def __repr__(self):
        parts = [fmt(a) for a in self.args] + [f"{k}={fmt(v)}" for k, v in self.kw.items()]
        return f"{fmt(self.fn)}({', '.join(parts)})"


class Branch:
    """A block terminator.

    kind ``br``: go to block ``target`` passing ``args``; with ``cond`` set the
    branch is taken only when ``cond`` is false (IRTools' ``br 3 unless %c``) and
    control otherwise falls to the next branch of the block.
    kind ``return``: return ``args[0]``.  kind ``raise``: raise ``args[0]``.

    A ``br`` with ``catch`` set (``br 5 (%2, ops.CAUGHT) on raise``, the block's first
    branch) is the edge an exception takes: when a statement of the block raises,
    control goes to ``target`` with ``args``, where `ops.CAUGHT` stands for the
    exception.  Its arguments are values from before the block; a block with such an
    edge has one statement that may raise (the lifter splits a ``try`` body so).
    """

    __slots__ = ("kind", "target", "args", "cond", "line", "catch")

    def __init__(self, kind, target=None, args=(), cond=None, line=None, catch=False):
        self.kind, self.target, self.args, self.cond, self.line = kind, target, list(args), cond, line
        self.catch = catch

    def operands(self):
        yield from self.args
        if self.cond is not None:
            yield self.cond

    def map(self, f) -> "Branch":
        cond = None if self.cond is None else f(self.cond)
        return Branch(self.kind, self.target, [f(a) for a in self.args], cond, self.line, self.catch)

    def __repr__(self):
        if self.kind != "br":
            return f"{self.kind} {', '.join(fmt(a) for a in self.args)}".rstrip()
        s = f"br {self.target + 1}"
        if self.args:
            s += f" ({', '.join(fmt(a) for a in self.args)})"
        if self.cond is not None:
            s += f" unless {fmt(self.cond)}"
        return s + " on raise" * self.catch


@dataclass
class Block:
    args: list = field(default_factory=list)
    stmts: list = field(default_factory=list)  # [(Var, Stmt)]
    branches: list = field(default_factory=list)

    def successors(self):
        return [b.target for b in self.branches if b.kind == "br"]

    def catches(self) -> bool:
        """Whether an exception raised in this block goes to a handler."""
        return bool(self.branches) and self.branches[0].catch


@dataclass
class Meta:
    """Where an IR came from: enough to emit it back and to point errors at source."""

    name: str = "f"
    filename: str = "<ir>"
    firstlineno: int = 1
    argnames: tuple = ()
    varargs: bool = False
    varkw: bool = False
    freevars: tuple = ()
    generator: bool = False  # its code yields: calling it makes a generator
    # the values whose end no code can see (arrays and numbers), whose locals the emitter
    # clears after their last read; None: any value (code of the library's own)
    clearable: frozenset | None = frozenset()
    # the source's names of values (a Var or the adjoint's Slot → a local's name), for pictures
    names: dict = field(default_factory=dict)

    def take_names(self, other: "Meta", env: dict, how=lambda n: n):
        """Name each value ``env`` maps a named value of ``other`` to (``how(name)``), as a
        pass makes a new IR from an old one."""
        self.names.update((env[v], how(n)) for v, n in other.names.items() if isinstance(env.get(v), Var))


class IR:
    """A function body: ``blocks[0]`` is the entry, its arguments the function's."""

    def __init__(self, meta: Meta | None = None):
        self.meta = meta or Meta()
        self.blocks: list[Block] = [Block()]
        self._nvars = 0
        self._cfg = None  # what `cfg.CFG.of` found; forgotten when the shape changes

    # -- construction ------------------------------------------------------
    def var(self) -> Var:
        self._nvars += 1
        return Var(self._nvars)

    def block(self) -> int:
        """Append an empty block; return its index."""
        self.blocks.append(Block())
        self._cfg = None
        return len(self.blocks) - 1

    def argument(self, b: int = 0) -> Var:
        """Add an argument to block ``b``.  ``1: (%1)`` → ``1: (%1, %2)``."""
        v = self.var()
        self.blocks[b].args.append(v)
        return v

    def push(self, b: int, stmt: Stmt, dest=None):
        """Append ``stmt`` to block ``b``.  ``1: …`` → ``1: … %n = f(…)``.

        ``dest`` may be a `Slot` to assign instead of a new variable.
        """
        v = self.var() if dest is None else dest
        self.blocks[b].stmts.append((v, stmt))
        return v

    def branch(self, b: int, br: Branch):
        self.blocks[b].branches.append(br)
        self._cfg = None

    # -- queries -----------------------------------------------------------
    def statements(self):
        for bi, blk in enumerate(self.blocks):
            for v, st in blk.stmts:
                yield bi, v, st

    def __repr__(self):
        return show(self)


def full_name(f) -> str:
    """``module.qualname`` of callable ``f``, as a user would write it (``operator.setitem``,
    not ``_operator.setitem``; ``__main__.Vec``; a builtin by its name alone)."""
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
    mod = getattr(f, "__module__", None)
    if mod and mod.startswith("_") and not mod.startswith("__"):  # a C module's Python name
        mod = mod[1:]
    return f"{mod}.{name}" if mod and mod != "builtins" else name


def fmt(x: Any) -> str:
    """How an operand prints: variables and globals by name, callables by qualified name
    (bytegrad's own by their module's last part: ``ops.identity``)."""
    if isinstance(x, (Var, Global, Slot)):
        return repr(x)
    name = getattr(x, "__qualname__", None) or getattr(x, "__name__", None)
    if not callable(x) or not name:
        return repr(x)
    mod = getattr(x, "__module__", None) or ""
    return f"{mod.split('.')[-1]}.{name}" if mod.startswith("bytegrad") else full_name(x)


def _args(vs):
    return f": ({', '.join(map(repr, vs))})" if vs else ":"


def block_lines(ir, b):
    blk = ir.blocks[b]
    yield f"{b + 1}{_args(blk.args)}"
    for v, st in blk.stmts:
        line = f"  {v!r} = {st!r}"
        if st.line is not None:
            line = f"{line:<48} # line {st.line}"
        yield line
    for br in blk.branches:
        yield f"  {br!r}"


def show(ir) -> str:
    """The IR as text, the form ``print(ir)`` shows:

    >>> from bytegrad.ir import lift
    >>> def f(x):
    ...     return x * x
    >>> print(show(lift(f)))
    1: (%1, %2)
      %3 = operator.mul(%2, %2)                      # line 2
      return %3
    """
    return "\n".join(line for b in range(len(ir.blocks)) for line in block_lines(ir, b))


def copy(ir: IR) -> IR:
    """A structurally independent copy with fresh variables (same numbers)."""
    new = IR(replace(ir.meta, names={}))
    new.blocks = []
    env = {}

    def v(x):
        if isinstance(x, Var):
            if x not in env:
                env[x] = Var(x.id)
            return env[x]
        return x

    for blk in ir.blocks:
        new.blocks.append(Block([v(a) for a in blk.args],
                                [(v(x), st.map(v)) for x, st in blk.stmts],
                                [br.map(v) for br in blk.branches]))
    new._nvars = ir._nvars
    new.meta.take_names(ir.meta, env)
    return new
