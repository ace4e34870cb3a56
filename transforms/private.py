"""Changes in place of a list, array or object no other name can see, passed on as values.

Nested differentiation runs a function's tangent code under reverse mode.  A tangent
that the forward level keeps beside a changed object (its shadow) is out of the
reverse level's reach; a tangent that travels with its value from statement to
statement is not.  So in the tangent code nesting runs, a list or array the function
makes (``[]``, ``np.zeros(n)``) whose every use the pass knows becomes a chain of
values: each write (``a[k] = v``, ``xs.append(v)``) is an operation that returns the
container (`ops.set_item`, `ops.appended`), and each later use reads that result,
through block arguments where control flow joins.  Run plainly, the container still
changes in place; the rules of those operations (primitives/private.py) take each write
as a new value, and the tangent as one more chain.

The uses the pass knows: writes; reads (``a[k]``, ``a.shape``, ``a.sum()``); calls that
keep no reference to their arguments (arithmetic, ``len``, ``np.dot``, ``math``'s
functions, ufuncs without ``out``); and, where no write can follow, any use at all.
What a read of an array returns may be a view, which a later write would change, so it
is used before the next write, and by such calls alone (or by an in-place operator:
``a[i] += v`` changes a number, or else a view in place, which nesting refuses); a read
used any other way (``xs.append(a[i])``) becomes `ops.item_of`, which refuses a view
where it runs, and takes a number, which nothing can change.  A container used any other way
is left as it is: its changes stay in place, which nested differentiation refuses by
line.  Below, block 2 (the loop's test) takes the array's latest value (``%9``); block 4
writes it (``%18``) and passes that on:

    >>> import numpy as np
    >>> from bytegrad.ir import lift
    >>> from bytegrad.transforms.modules import resolve_modules
    >>> def f(x):
    ...     y = np.zeros(3)
    ...     for i in range(3):
    ...         y[i] = x[i] ** 2
    ...     return y.sum()
    >>> ir = resolve_modules(lift(f), lambda g, path: getattr(np, *path))
    >>> print(private_changes(ir, lambda g: {"range": range}.get(getattr(g, "name", None), g)))
    1: (%1, %2)
      %3 = getattr(np, 'zeros')                      # line 2
      %4 = ops.resolved(%3, numpy.zeros, 'np.zeros') # line 2
      %5 = numpy.zeros(3)                            # line 2
      %6 = range(3)                                  # line 3
      %7 = iter(%6)                                  # line 3
      br 2 (%7, %5)
    2: (%8, %9)
      %10 = ops.iterate(%6, %8)                      # line 3
      %11 = operator.is_not(%10, None)               # line 3
      br 3 unless %11
      br 4
    3:
      %12 = getattr(%9, 'sum')                       # line 5
      %13 = %12()                                    # line 5
      return %13
    4:
      %14 = operator.getitem(%10, 0)                 # line 3
      %15 = operator.getitem(%10, 1)                 # line 3
      %16 = operator.getitem(%2, %14)                # line 4
      %17 = operator.pow(%16, 2)                     # line 4
      %18 = ops.set_item(%9, %14, %17)               # line 4
      br 2 (%15, %18)
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from ..ir import Stmt, Var, ops
from ..ir.cfg import CFG
from ..ir.simplify import simplify, substitute, trivial_args

_ARRAYS = (np.zeros, np.ones, np.empty, np.zeros_like, np.ones_like, np.empty_like)

# callables whose result holds no reference to an argument (nor to its memory)
_FRESH = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.neg, operator.pos, operator.abs, operator.matmul, operator.lt,
    operator.le, operator.gt, operator.ge, operator.eq, operator.ne, operator.not_,
    operator.truth, operator.contains, operator.index,
    builtins.len, builtins.sum, builtins.float, builtins.int, builtins.abs, builtins.bool,
    builtins.round, builtins.isinstance,
    np.sum, np.mean, np.prod, np.dot, np.inner, np.outer, np.vdot, np.max, np.min, np.amax,
    np.amin, np.std, np.var, np.cumsum, np.cumprod, np.trace, np.linalg.norm, np.linalg.det,
    np.linalg.inv, np.linalg.solve, np.concatenate, np.stack, np.hstack, np.vstack, np.copy,
    np.allclose, np.isclose, np.all, np.any, np.argmax, np.argmin, np.sort, np.where})
_METHODS = frozenset({"sum", "mean", "prod", "max", "min", "std", "var", "dot", "copy", "all",
                      "any", "argmax", "argmin", "item", "tolist", "cumsum", "cumprod", "trace",
                      "count", "index"})  # (methods whose result holds no reference to the object)
_VALUES = frozenset({"shape", "size", "ndim", "dtype"})
# (of an element read, ``a[i] += v``: of a view, a change in place, which nesting refuses)
_IN_PLACE = frozenset({operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ipow,
                       operator.imatmul, operator.ifloordiv, operator.imod})


def private_changes(ir, resolve):
    """``ir`` where each list or array made in it that no other name can see passes its
    writes on as values (see the module's docstring); ``resolve(g)`` is what a `Global`
    names."""
    if ir.meta.generator:  # (its tangent code is refused at nesting anyway)
        return ir
    trivial_args(ir)  # (the join of an __init__'s returns takes the object alone: no other name)
    made = [(b, v, kind) for b, v, st in ir.statements() if (kind := _made(resolve(st.fn), st))]
    threaded = [_thread(ir, b, v, kind, resolve) for b, v, kind in made]
    return simplify(ir) if any(threaded) else ir


def _made(f, st):
    """``"list"``, ``"array"`` or ``"object"`` for a statement that makes a new container
    (an object: in a class's call, `as_constructor`)."""
    if f is ops.build_list:
        return "list"
    if f is object.__new__ and len(st.args) == 1 and not st.kw:
        return "object"
    if any(f is a for a in _ARRAYS) and not st.kw.keys() - {"dtype", "order"}:
        return "array"
    return None


def _keeps_none(f, st) -> bool:
    """Whether call ``st`` of ``f`` returns something that holds no reference to its
    arguments, and changes none."""
    if "out" in st.kw:
        return False
    if isinstance(f, np.ufunc):
        return len(st.args) <= f.nin
    if getattr(f, "__self__", None) is math:
        return True
    try:
        return f in _FRESH
    except TypeError:  # (unhashable)
        return False


def _users(ir):
    """Each variable's uses: ``(block, index, statement)``, index None for a branch."""
    users = {}
    for b, blk in enumerate(ir.blocks):
        for i, (_, st) in enumerate(blk.stmts):
            for o in set(x for x in st.operands() if isinstance(x, Var)):
                users.setdefault(o, []).append((b, i, st))
        for br in blk.branches:
            for o in set(x for x in br.operands() if isinstance(x, Var)):
                users.setdefault(o, []).append((b, None, br))
    return users


class _Uses:
    """How container ``v`` (made in block ``d``) is used: its writes, and the uses that
    no write may follow, or that the next write may not follow."""

    def __init__(self, ir, v, kind, resolve):
        self.ir, self.v, self.kind, self.resolve = ir, v, kind, resolve
        self.users = _users(ir)
        self.writes = {}  # (block, index) → "set", "append" or "attr"
        self.reached = {}  # block → the blocks reachable from it
        self.dropped = set()  # (block, index) of ``xs.append``'s getattr
        self.last = []  # (block, index): no write may follow
        self.before = []  # (block, index, value): used before the next write alone
        self.items = []  # (block, index, value): an array's read that must be a number
        self.checked = set()  # (block, index) of those read any other way: `ops.item_of`
        self.fields = []  # (block, index): an object's field read (`ops.field_of` if a write follows)

    def known(self) -> bool:
        for b, i, x in self.users.get(self.v, ()):
            if i is None:
                if x.kind == "br" and _has(x.args, self.v):  # (another name for it)
                    return False
            elif not self._statement(b, i, x):
                return False
        self.checked = {(b, i) for b, i, r in self.items if not self._before_next(b, i, r)} | \
            {(b, i) for b, i in self.fields if self._follows(b, i)}
        return all(not self._follows(b, i) for b, i in self.last) and \
            all(self._before_next(b, i, r) for b, i, r in self.before)

    def _statement(self, b, i, st) -> bool:
        v, f = self.v, self.resolve(st.fn)
        if st.fn is v or _has(st.kw.values(), v):
            return False
        if self.kind == "object":
            return self._object(b, i, st, f)
        rest = st.args[1:]
        if f is operator.setitem and st.args[0] is v and not _has(rest, v):
            self.writes[b, i] = "set"
            return True
        r = self.ir.blocks[b].stmts[i][0]
        if f is getattr and st.args[0] is v and len(st.args) == 2 and type(st.args[1]) is str:
            name = st.args[1]
            if name in _VALUES:
                return True
            if name == "append" and self.kind == "list":
                return self._appends(b, i, r)
            if name in _METHODS:
                self.before.append((b, i, r))
            else:  # (``a.T``, ``a.reshape``, ``xs.extend``: a view, a method that may change it)
                self.last.append((b, i))
            return True
        if f is operator.getitem and st.args[0] is v and not _has(rest, v):
            if self.kind == "array":  # (a view, maybe)
                self.items.append((b, i, r))
            return True
        if not _keeps_none(f, st):
            self.last.append((b, i))
        return True

    def _object(self, b, i, st, f) -> bool:
        """``self.name = x`` (or ``object.__setattr__(self, "name", x)``) a write,
        ``self.name`` a read (`ops.field_of` where a write
        follows: it may bind ``self``), anything else a use no write may follow (a method's
        call hands ``self`` on)."""
        v, args = self.v, st.args
        named = len(args) >= 2 and args[0] is v and type(args[1]) is str
        if (f is setattr or f is object.__setattr__) and named and len(args) == 3 and args[2] is not v:
            self.writes[b, i] = "attr"
        elif f is getattr and named and len(args) == 2:
            self.fields.append((b, i))
        else:
            self.last.append((b, i))
        return True

    def _appends(self, b, i, m) -> bool:
        """``m = xs.append``, called alone: each call a write."""
        calls = self.users.get(m, ())
        if not all(j is not None and st.fn is m and len(st.args) == 1 and not st.kw
                   and st.args[0] is not self.v for _, j, st in calls):
            return False
        self.dropped.add((b, i))
        self.writes.update(((c, j), "append") for c, j, _ in calls)
        return True

    def _follows(self, b, i) -> bool:
        """Whether a write may run after statement ``i`` of block ``b``."""
        after = self._reach(b)
        return any(c == b and (j > i or b in after) or c != b and c in after for c, j in self.writes)

    def _reach(self, b):
        if b not in self.reached:
            succs, seen, todo = CFG.of(self.ir).succs, set(), list(CFG.of(self.ir).succs[b])
            while todo:
                c = todo.pop()
                if c not in seen:
                    seen.add(c)
                    todo += succs[c]
            self.reached[b] = seen
        return self.reached[b]

    def _before_next(self, b, i, r) -> bool:
        """Whether ``r`` (read from the array at statement ``i`` of block ``b``) is used
        only before the array's next write, by calls that keep no reference to it (or
        where no write follows at all)."""
        if not self._follows(b, i):
            return True
        nxt = min((j for c, j in self.writes if c == b and j > i), default=len(self.ir.blocks[b].stmts))
        for c, j, st in self.users.get(r, ()):
            if c != b or j is None or not i < j <= nxt or _has(st.kw.values(), r):
                return False
            if st.fn is r or self.writes.get((b, j)) == "set":  # (a method called; a write's value)
                continue
            f = self.resolve(st.fn)
            if (f is operator.getitem or f in _IN_PLACE) and st.args[0] is r:  # (maybe r itself)
                if not self._before_next(b, j, self.ir.blocks[b].stmts[j][0]):
                    return False
            elif not _keeps_none(f, st) and not (f in _IN_PLACE and st.args[0] is not r):
                return False
        return True


def _has(xs, v) -> bool:
    return any(x is v for x in xs)


def _thread(ir, d, v, kind, resolve) -> bool:
    """Pass container ``v`` (made in block ``d``) on from write to write, if every use of
    it is known; whether it did."""
    cfg = CFG.of(ir)
    dom = [b for b in cfg.order if cfg.dominates(d, b)]
    if any(ir.blocks[b].catches() for b in dom):
        return False
    uses = _Uses(ir, v, kind, resolve)
    if not uses.known() or not uses.writes:
        return False
    arg = {b: ir.argument(b) for b in dom if b != d}
    name = ir.meta.names.get(v)
    gone = {}
    for b in dom:
        blk, cur, out = ir.blocks[b], arg.get(b), []
        for j, (x, st) in enumerate(blk.stmts):
            if (b, j) in uses.dropped:
                continue
            st = st.map(lambda o: cur if o is v and cur is not None else o)
            w = uses.writes.get((b, j))
            if (b, j) in uses.checked:
                st = Stmt(ops.field_of if kind == "object" else ops.item_of, st.args, {}, st.line)
            if w is not None:
                gone[x] = None  # (what the write returned)
                x = ir.var()
                st = Stmt(ops.appended, (cur, st.args[0]), {}, st.line) if w == "append" else \
                    Stmt(ops.set_item, st.args, {}, st.line) if w == "set" else \
                    Stmt(ops.set_attr, st.args + (resolve(st.fn),), {}, st.line)
            out.append((x, st))
            if x is v or w is not None:
                cur = x
                if name is not None:
                    ir.meta.names[x] = name
        blk.stmts = out
        for br in blk.branches:
            br.args = [cur if a is v else a for a in br.args]
            br.cond = cur if br.cond is v else br.cond
            if br.kind == "br" and br.target in arg:
                br.args.append(cur)
    ir._cfg = None
    substitute(ir, gone)
    return True


def as_constructor(ir):
    """The IR of an ``__init__`` as its class's call: ``self`` made first, by
    ``object.__new__`` of the function's own argument (the class, where the call passes
    it), and returned:

    >>> from bytegrad.ir import lift
    >>> class P:
    ...     def __init__(self, a):
    ...         self.a = a
    >>> print(lift(P.__init__))
    1: (%1, %2, %3)
      %4 = setattr(%2, 'a', %3)                      # line 3
      return None
    >>> print(as_constructor(lift(P.__init__)))
    1: (%1, %3)
      %2 = object.__new__(%1)                        # line 2
      %4 = setattr(%2, 'a', %3)                      # line 3
      return %2
    """
    entry = ir.blocks[0]
    fn, obj = entry.args[0], entry.args.pop(1)
    entry.stmts.insert(0, (obj, Stmt(object.__new__, (fn,), {}, ir.meta.firstlineno)))
    for blk in ir.blocks:
        for br in blk.branches:
            if br.kind == "return":
                br.args = [obj]
    ir.meta.argnames = ir.meta.argnames[1:]
    return ir
