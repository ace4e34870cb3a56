"""Lift a function's bytecode into SSA IR.

The decoded instruction stream is cut into basic blocks; each block is
interpreted once on a symbolic stack.  Locals and stack slots that live across
blocks become block arguments (every block first takes one per local, then
`simplify` removes the trivial and the dead ones — Braun et al.'s construction,
done after the fact).  ``for`` loops become the `ops.iterate` protocol:

    >>> def f(xs):
    ...     s = 0.0
    ...     for x in xs:
    ...         s += x
    ...     return s
    >>> print(lift(f))
    1: (%1, %2)
      %3 = iter(%2)                                  # line 3
      br 2 (%3, 0.0)
    2: (%4, %5)
      %6 = ops.iterate(%2, %4)                       # line 3
      %7 = operator.is_not(%6, None)                 # line 3
      br 3 unless %7
      br 4
    3:
      return %5
    4:
      %8 = operator.getitem(%6, 0)                   # line 3
      %9 = operator.getitem(%6, 1)                   # line 3
      %10 = operator.iadd(%5, %8)                    # line 4
      br 2 (%9, %10)

A local that some path leaves unassigned is read through `ops.bound`, which
raises UnboundLocalError when the value that arrived is `ops.UNDEF`.
"""
from __future__ import annotations

import inspect
import operator
from types import FunctionType

from bytecode import Label

from . import ops
from .cfg import flow
from .cpython import decode
from .errors import UnsupportedError
from .ir import IR, Branch, Global, Meta, Stmt, Var
from .simplify import simplify, substitute


class _Null:
    def __repr__(self):
        return "NULL"


NULL = _Null()


class _Iter:
    """An iterator on the symbolic stack: the container and the iterator state."""

    __slots__ = ("xs", "it")

    def __init__(self, xs, it):
        self.xs, self.it = xs, it


_TERMINATORS = {"JUMP", "RETURN_VALUE", "RAISE_VARARGS", "RERAISE"}
_CANNOT_RAISE = {operator.is_, operator.is_not, ops.build_tuple, ops.identity}
EXC = "<exc_info>"  # the local holding the exception being handled (None: there is none)
_CONDITIONAL = {"POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_NONE",
                "POP_JUMP_IF_NOT_NONE", "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP", "FOR_ITER",
                "SEND"}

_BUILD = {"BUILD_TUPLE": ops.build_tuple, "BUILD_LIST": ops.build_list,
          "BUILD_SET": ops.build_set, "BUILD_STRING": ops.build_string}
_IN_PLACE = {"LIST_APPEND": ops.list_append, "SET_ADD": ops.set_add,
             "LIST_EXTEND": ops.list_extend, "SET_UPDATE": ops.set_update,
             "DICT_UPDATE": ops.dict_update, "DICT_MERGE": ops.dict_merge}


def meta_of(code) -> Meta:
    nargs = code.co_argcount + code.co_kwonlyargcount
    varargs = bool(code.co_flags & 0x04)
    varkw = bool(code.co_flags & 0x08)
    names = code.co_varnames[:nargs + varargs + varkw]
    return Meta(code.co_name, code.co_filename, code.co_firstlineno, names, varargs, varkw,
                code.co_freevars, bool(code.co_flags & inspect.CO_GENERATOR))


def _split(stream):
    """Basic blocks (lists of ``(op, handler)``, where ``handler`` is the ``TRY`` entry
    ``(label, depth, lasti)`` covering the op, or None) and the block each label starts."""
    bbs, labels, handler = [[]], {}, None
    for op in stream:
        if isinstance(op, Label):
            if bbs[-1]:
                bbs.append([])
            labels[op] = len(bbs) - 1
            continue
        if op.name == "TRY":
            handler = op.arg
            continue
        bbs[-1].append((op, handler))
        if op.name in _TERMINATORS or op.name in _CONDITIONAL:
            bbs.append([])
    if not bbs[-1]:
        bbs.pop()
    return bbs, labels


class _Lifter:
    def __init__(self, code):
        self.code = code
        self.ir = IR(meta_of(code))
        stream = decode(code)
        self.bbs, self.labels = _split(stream)
        # a cell lives in its variable's slot, as in CPython (so an inlined
        # comprehension's save and restore of the slot covers a cell too)
        self.names = list(dict.fromkeys(code.co_varnames + code.co_cellvars + code.co_freevars))
        if any(not isinstance(op, Label) and op.name == "TRY" for op in stream):
            self.names.append(EXC)
        self.handler = None   # the TRY entry covering the op being lifted
        self.shape = {}       # bb → shapes of its entry stack
        self.irb = {}         # bb → IR block
        self.for_body = set() # bbs that start right after a FOR_ITER
        self.joined = set()   # block arguments standing for locals, which may be UNDEF
        self.work = []

    # -- edges ---------------------------------------------------------------
    def _target(self, bb, stack):
        if bb not in self.irb:
            self.irb[bb] = self.ir.block()
            self.shape[bb] = ["null" if s is NULL else "iter" if isinstance(s, _Iter) else "val"
                              for s in stack]
            self.work.append(bb)
        return self.irb[bb]

    def _edge(self, bb, stack, env, cond=None, line=None, catch=False):
        target = self._target(bb, stack)
        flat = []
        for s, kind in zip(stack, self.shape[bb]):
            # a comprehension enters its loop with the bare iterator, comes back with an _Iter
            if kind == "iter":
                flat += [s.xs, s.it] if isinstance(s, _Iter) else [s, s]
            elif s is not NULL:
                flat.append(s.it if isinstance(s, _Iter) else s)
        args = flat + [env.get(n, ops.UNDEF) for n in self.names]
        self.ir.branch(self.cur, Branch("br", target, args, cond, line, catch))

    def _entry_state(self, bb):
        b = self.irb[bb]
        stack = []
        for kind in self.shape[bb]:
            if kind == "null":
                stack.append(NULL)
            elif kind == "iter":
                stack.append(_Iter(self.ir.argument(b), self.ir.argument(b)))
            else:
                stack.append(self.ir.argument(b))
        env = {n: self.ir.argument(b) for n in self.names}
        for n, v in env.items():
            self._named(v, n)
        self.joined.update(env.values())
        return stack, env

    def _named(self, v, name):
        if isinstance(v, Var) and not name.startswith((".", "$")):  # (not a comprehension's own)
            self.ir.meta.names.setdefault(v, name)

    # -- driver --------------------------------------------------------------
    def run(self) -> IR:
        ir, m = self.ir, self.ir.meta
        self.self_ = ir.argument(0)
        env = {n: ir.argument(0) for n in m.argnames}
        for n, v in env.items():
            self._named(v, n)
        if EXC in self.names:
            env[EXC] = None
        self.cur = 0
        self._edge(0, [], env)
        while self.work:
            bb = self.work.pop()
            self.cur = self.irb[bb]
            stack, env = self._entry_state(bb)
            if bb in self.for_body:
                self.line = self.bbs[bb][0][0].line if self.bbs[bb] else None
                self._start_body(stack)
            self._block(bb, stack, env)
        self._drop_bound_checks()
        return simplify(ir)

    def _drop_bound_checks(self):
        """Keep an ``ops.bound`` check only where some path may bring UNDEF to it.

        ``br 2 (1)`` … ``2: (%4)`` / ``%5 = ops.bound(%4, 'y')`` / ``return %5``
        → ``2: (%4)`` / ``return %4`` when no branch passes UNDEF on to ``%4``.
        """
        ir = self.ir
        maybe = flow(ir, set(), seed=lambda x: x is ops.UNDEF)
        env = {}
        for blk in ir.blocks:
            keep = []
            for v, st in blk.stmts:
                if st.fn is ops.bound and st.args[0] not in maybe:
                    env[v] = st.args[0]
                else:
                    keep.append((v, st))
            blk.stmts = keep
        substitute(ir, env)

    def _start_body(self, stack):
        r = stack.pop()
        value = self.emit(operator.getitem, r, 0)
        stack[-1] = _Iter(stack[-1].xs, self.emit(operator.getitem, r, 1))
        stack.append(value)

    def emit(self, fn, /, *args, **kw):
        """``fn(*args, **kw)`` at the current line; ``kw`` are the call's own keywords (a
        user's ``line=`` or ``fn=`` among them)."""
        args = [a.it if isinstance(a, _Iter) else a for a in args]
        st = Stmt(fn, args, kw, self.line)
        if self.handler is None or fn in _CANNOT_RAISE:
            return self.ir.push(self.cur, st)
        return self._guarded(st)

    def _guarded(self, st):
        """``st`` inside a ``try``: alone in a block whose catch edge takes the stack
        down to the handler's depth (with a placeholder for ``lasti``), the exception,
        and the locals as they were before ``st``."""
        label, depth, lasti = self.handler
        own = self.ir.block()
        self.ir.branch(self.cur, Branch("br", own))
        self.cur = own
        exc = self.before[:depth] + [None] * lasti + [ops.CAUGHT]
        self._edge(self.labels[label], exc, self.env, line=self.line, catch=True)
        v = self.ir.push(own, st)
        self.cur = self.ir.block()
        self.ir.branch(own, Branch("br", self.cur))
        return v

    def fail(self, what):
        raise UnsupportedError(what, self.code.co_filename, self.line, self.code.co_name)

    def _block(self, bb, stack, env):
        self.kwnames = ()
        self.env = env
        ops_ = self.bbs[bb]
        for op, self.handler in ops_:
            self.line, self.op_name = op.line, op.name
            if self.handler is not None:  # what an exception unwinds to: the stack before op
                self.before = list(stack)
            handler = getattr(self, "op_" + op.name, None)
            if handler is None:
                self.fail(f"bytecode {op.name}")
            if handler(op.arg, stack, env, bb) == "end":
                return
        self.handler = None
        self._edge(bb + 1, stack, env, line=self.line if ops_ else None)

    # -- values --------------------------------------------------------------
    def op_PUSH_NULL(self, arg, stack, env, bb):
        stack.append(NULL)

    def op_LOAD_CONST(self, arg, stack, env, bb):
        stack.append(arg)

    def _local(self, env, name):
        """The value of local ``name``, checked unless it is surely assigned."""
        v = env.get(name, ops.UNDEF)
        if v is ops.UNDEF:
            return self.emit(ops.unbound_local, name)
        if isinstance(v, Var) and v in self.joined:
            v = env[name] = self.emit(ops.bound, v, name)
        return v

    def op_LOAD_FAST(self, arg, stack, env, bb):
        stack.append(self._local(env, arg))

    def op_LOAD_FAST_AND_CLEAR(self, arg, stack, env, bb):
        """Save a local an inlined comprehension reuses (unbound: UNDEF), and unbind it."""
        stack.append(env.get(arg, ops.UNDEF))
        env[arg] = ops.UNDEF

    def op_STORE_FAST(self, arg, stack, env, bb):
        env[arg] = stack.pop()
        self._named(env[arg], arg)

    def op_DELETE_FAST(self, arg, stack, env, bb):
        self._local(env, arg)
        env[arg] = ops.UNDEF

    def op_LOAD_GLOBAL(self, arg, stack, env, bb):
        stack.append(Global(arg))

    def op_STORE_GLOBAL(self, arg, stack, env, bb):
        self.emit(ops.store_global, arg, stack.pop())

    def op_DELETE_GLOBAL(self, arg, stack, env, bb):
        self.emit(ops.delete_global, arg)

    def op_LOAD_ATTR(self, arg, stack, env, bb):
        stack.append(self.emit(getattr, stack.pop(), arg))

    def op_LOAD_METHOD(self, arg, stack, env, bb):
        obj = stack.pop()
        stack += [NULL, self.emit(getattr, obj, arg)]

    def op_STORE_ATTR(self, arg, stack, env, bb):
        obj, value = stack.pop(), stack.pop()
        self.emit(setattr, obj, arg, value)

    def op_DELETE_ATTR(self, arg, stack, env, bb):
        self.emit(delattr, stack.pop(), arg)

    def op_OPERATOR(self, arg, stack, env, bb):
        fn, n = arg
        args = stack[-n:]
        del stack[-n:]
        stack.append(self.emit(fn, *args))

    def op_IS_OP(self, arg, stack, env, bb):
        b, a = stack.pop(), stack.pop()
        stack.append(self.emit(operator.is_not if arg else operator.is_, a, b))

    def op_CONTAINS_OP(self, arg, stack, env, bb):
        container, item = stack.pop(), stack.pop()
        stack.append(self.emit(ops.not_contains if arg else operator.contains, container, item))

    def op_BINARY_SUBSCR(self, arg, stack, env, bb):
        k, x = stack.pop(), stack.pop()
        stack.append(self.emit(operator.getitem, x, k))

    def op_STORE_SUBSCR(self, arg, stack, env, bb):
        k, c, v = stack.pop(), stack.pop(), stack.pop()
        self.emit(operator.setitem, c, k, v)

    def op_DELETE_SUBSCR(self, arg, stack, env, bb):
        k, c = stack.pop(), stack.pop()
        self.emit(operator.delitem, c, k)

    def _popn(self, stack, n):
        xs = stack[len(stack) - n:]
        del stack[len(stack) - n:]
        return xs

    def op_BUILD_TUPLE(self, arg, stack, env, bb):
        stack.append(self.emit(_BUILD[self.op_name], *self._popn(stack, arg)))

    def op_BUILD_MAP(self, arg, stack, env, bb):
        stack.append(self.emit(ops.build_dict, *self._popn(stack, 2 * arg)))

    def op_BUILD_CONST_KEY_MAP(self, arg, stack, env, bb):
        keys = stack.pop()
        values = self._popn(stack, arg)
        kv = [x for pair in zip(keys, values) for x in pair]
        stack.append(self.emit(ops.build_dict, *kv))

    def op_BUILD_SLICE(self, arg, stack, env, bb):
        stack.append(self.emit(slice, *self._popn(stack, arg)))

    def op_LIST_TO_TUPLE(self, arg, stack, env, bb):
        stack.append(self.emit(ops.list_to_tuple, stack.pop()))

    def op_LIST_APPEND(self, arg, stack, env, bb):
        v = stack.pop()
        stack[-arg] = self.emit(_IN_PLACE[self.op_name], stack[-arg], v)

    # -- generators: ``yield`` is a statement, ``yield from`` a loop of `ops.send` ----------
    def op_YIELD_VALUE(self, arg, stack, env, bb):
        stack.append(self.emit(ops.yield_, stack.pop()))

    def op_GET_YIELD_FROM_ITER(self, arg, stack, env, bb):
        stack.append(self.emit(iter, stack.pop()))

    def op_SEND(self, arg, stack, env, bb):
        """``SEND`` (3.11's): the receiver's next item goes on the stack above it, for the
        ``YIELD_VALUE`` that follows; its return value replaces it, at the jump's target."""
        v = stack.pop()
        r = self.emit(ops.send, stack[-1], v)
        y, more = self.emit(operator.getitem, r, 0), self.emit(operator.getitem, r, 1)
        return self._cond(more, self.labels[arg], bb + 1, stack[:-1] + [y], stack + [y], env)

    def op_MAP_ADD(self, arg, stack, env, bb):
        v, k = stack.pop(), stack.pop()
        stack[-arg] = self.emit(ops.map_add, stack[-arg], k, v)

    def op_UNPACK_SEQUENCE(self, arg, stack, env, bb):
        t = self.emit(ops.unpack, stack.pop(), arg)
        stack += [self.emit(operator.getitem, t, i) for i in range(arg)][::-1]

    def op_UNPACK_EX(self, arg, stack, env, bb):
        before, after = arg
        t = self.emit(ops.unpack_ex, stack.pop(), before, after)
        stack += [self.emit(operator.getitem, t, i) for i in range(before + 1 + after)][::-1]

    # -- match statements: the subject stays on the stack under each test ----------
    def op_MATCH_CLASS(self, arg, stack, env, bb):
        names, cls, subject = stack.pop(), stack.pop(), stack.pop()
        stack.append(self.emit(ops.match_class, subject, cls, arg, names))

    def op_MATCH_SEQUENCE(self, arg, stack, env, bb):
        stack.append(self.emit(ops.match_sequence, stack[-1]))

    def op_MATCH_MAPPING(self, arg, stack, env, bb):
        stack.append(self.emit(ops.match_mapping, stack[-1]))

    def op_GET_LEN(self, arg, stack, env, bb):
        stack.append(self.emit(len, stack[-1]))

    def op_MATCH_KEYS(self, arg, stack, env, bb):
        stack.append(self.emit(ops.match_keys, stack[-2], stack[-1]))

    def op_POP_TOP(self, arg, stack, env, bb):
        x = stack.pop()
        if isinstance(x, Global):  # (its NameError is kept)
            self.emit(ops.read_global, x)

    def op_COPY(self, arg, stack, env, bb):
        stack.append(stack[-arg])

    def op_SWAP(self, arg, stack, env, bb):
        stack[-1], stack[-arg] = stack[-arg], stack[-1]

    def op_FORMAT_VALUE(self, arg, stack, env, bb):
        conv, has_spec = arg
        spec = stack.pop() if has_spec else ""
        stack.append(self.emit(ops.format_value, stack.pop(), conv, spec))

    def op_LOAD_ASSERTION_ERROR(self, arg, stack, env, bb):
        stack.append(AssertionError)

    def op_IMPORT_NAME(self, arg, stack, env, bb):
        fromlist, level = stack.pop(), stack.pop()
        stack.append(self.emit(ops.import_name, arg, fromlist, level))

    def op_IMPORT_FROM(self, arg, stack, env, bb):
        stack.append(self.emit(ops.import_from, stack[-1], arg))

    # -- calls and functions -------------------------------------------------
    def op_KW_NAMES(self, arg, stack, env, bb):
        self.kwnames = arg

    def op_CALL(self, arg, stack, env, bb):
        args = self._popn(stack, arg)
        fn, below = stack.pop(), stack.pop()
        if below is not NULL:
            fn, args = below, [fn] + args
        nk = len(self.kwnames)
        pos, kw = args[:len(args) - nk], dict(zip(self.kwnames, args[len(args) - nk:]))
        self.kwnames = ()
        if isinstance(fn, Global) and fn.name == "super" and not args:
            pos = self._super_args(env)
        stack.append(self.emit(fn, *pos, **kw))

    def _super_args(self, env):
        """Zero-argument ``super()`` reads the ``__class__`` cell and the first local,
        which the emitted code has not: ``super()`` → ``super(%5, %2)`` with
        ``%5 = ops.cell_get(%4, '__class__')``."""
        code = self.code
        if "__class__" not in code.co_freevars or not code.co_argcount:
            return []  # fails at run time as it would have
        first = code.co_varnames[0]
        obj = (self.emit(ops.cell_get, env[first], first) if first in code.co_cellvars
               else self._local(env, first))
        return [self.emit(ops.cell_get, env["__class__"], "__class__"), obj]

    def op_CALL_FUNCTION_EX(self, arg, stack, env, bb):
        kw = stack.pop() if arg & 1 else None
        args, fn = stack.pop(), stack.pop()
        if stack and stack[-1] is NULL:
            stack.pop()
        stack.append(self.emit(ops.apply, fn, args, kw))

    def op_MAKE_FUNCTION(self, arg, stack, env, bb):
        code = stack.pop()
        closure = stack.pop() if arg & 8 else None
        if arg & 4:
            stack.pop()  # annotations do not change what the function computes
        kwdefaults = stack.pop() if arg & 2 else None
        defaults = stack.pop() if arg & 1 else None
        stack.append(self.emit(ops.make_function, code, closure, defaults, kwdefaults))

    def op_MAKE_CELL(self, arg, stack, env, bb):
        v = env.get(arg, ops.UNDEF)
        env[arg] = self.emit(ops.make_cell) if v is ops.UNDEF else self.emit(ops.make_cell, v)

    def op_COPY_FREE_VARS(self, arg, stack, env, bb):
        for i, name in enumerate(self.code.co_freevars):
            env[name] = self.emit(ops.closure_cell, self.self_, i)

    def op_LOAD_CLOSURE(self, arg, stack, env, bb):
        stack.append(env[arg])

    def op_LOAD_DEREF(self, arg, stack, env, bb):
        own = (True,) if arg in self.code.co_cellvars else ()
        stack.append(self.emit(ops.cell_get, env[arg], arg, *own))

    def op_STORE_DEREF(self, arg, stack, env, bb):
        self.emit(ops.cell_set, env[arg], stack.pop())

    def op_DELETE_DEREF(self, arg, stack, env, bb):
        self.emit(ops.cell_delete, env[arg], arg, arg in self.code.co_cellvars)

    # -- control flow --------------------------------------------------------
    def op_JUMP(self, arg, stack, env, bb):
        self._edge(self.labels[arg], stack, env, line=self.line)
        return "end"

    def _cond(self, cond, when_false, when_true, stack_false, stack_true, env):
        """Go to ``when_false`` if ``cond`` is false, else to ``when_true``.  Inside a
        ``try`` the truth test is a statement of its own, which may raise (``if a``
        for an array ``a``)."""
        if self.handler is not None and not isinstance(cond, bool):
            cond = self.emit(operator.truth, cond)
        self._edge(when_false, stack_false, env, cond, self.line)
        self._edge(when_true, stack_true, env, line=self.line)
        return "end"

    def op_POP_JUMP_IF_FALSE(self, arg, stack, env, bb):
        c = stack.pop()
        return self._cond(c, self.labels[arg], bb + 1, stack, stack, env)

    def op_POP_JUMP_IF_TRUE(self, arg, stack, env, bb):
        c = stack.pop()
        return self._cond(c, bb + 1, self.labels[arg], stack, stack, env)

    def op_POP_JUMP_IF_NONE(self, arg, stack, env, bb):
        c = self.emit(operator.is_not, stack.pop(), None)
        return self._cond(c, self.labels[arg], bb + 1, stack, stack, env)

    def op_POP_JUMP_IF_NOT_NONE(self, arg, stack, env, bb):
        c = self.emit(operator.is_, stack.pop(), None)
        return self._cond(c, self.labels[arg], bb + 1, stack, stack, env)

    def op_JUMP_IF_FALSE_OR_POP(self, arg, stack, env, bb):
        return self._cond(stack[-1], self.labels[arg], bb + 1, stack, stack[:-1], env)

    def op_JUMP_IF_TRUE_OR_POP(self, arg, stack, env, bb):
        return self._cond(stack[-1], bb + 1, self.labels[arg], stack[:-1], stack, env)

    def op_GET_ITER(self, arg, stack, env, bb):
        xs = stack.pop()
        stack.append(_Iter(xs, self.emit(iter, xs)))

    def op_FOR_ITER(self, arg, stack, env, bb):
        if not isinstance(stack[-1], _Iter):  # a comprehension's argument is the iterator
            stack[-1] = _Iter(stack[-1], stack[-1])
        slot = stack[-1]
        r = self.emit(ops.iterate, slot.xs, slot.it)
        c = self.emit(operator.is_not, r, None)
        self._edge(self.labels[arg], stack[:-1], env, c, self.line)
        self._edge(bb + 1, stack + [r], env, line=self.line)
        self.for_body.add(bb + 1)
        return "end"

    def op_RETURN_VALUE(self, arg, stack, env, bb):
        self.ir.branch(self.cur, Branch("return", args=[stack.pop()], line=self.line))
        return "end"

    def op_RAISE_VARARGS(self, arg, stack, env, bb):
        if arg == 0:  # the exception being handled, which this function caught
            return self._raise(self.emit(ops.reraise, env.get(EXC)))
        exc = stack.pop() if arg == 1 else self.emit(ops.raise_from, *reversed([stack.pop(), stack.pop()]))
        return self._raise(exc)

    def _raise(self, exc):
        """Raise ``exc``: inside a ``try``, as a statement its handler catches; inside a
        handler, with the exception being handled as its ``__context__`` (the emitted code
        does not set the interpreter's own)."""
        handled = self.env.get(EXC)
        if handled is not None:
            self.emit(ops.throw, exc, handled)
        elif self.handler is not None:
            self.emit(ops.throw, exc)
        self.ir.branch(self.cur, Branch("raise", args=[exc], line=self.line))
        self.handler = None
        return "end"

    # -- exceptions and context managers ------------------------------------------
    def op_PUSH_EXC_INFO(self, arg, stack, env, bb):
        exc = stack.pop()
        if not any(op.name in ("CHECK_EXC_MATCH", "WITH_EXCEPT_START") for op, _ in self.bbs[bb]):
            exc = self.emit(ops.handling, exc)  # (a handler for every exception)
        stack += [env.get(EXC), exc]
        env[EXC] = exc

    def op_POP_EXCEPT(self, arg, stack, env, bb):
        env[EXC] = stack.pop()

    def op_CHECK_EXC_MATCH(self, arg, stack, env, bb):
        types = stack.pop()
        stack.append(self.emit(ops.exc_match, stack[-1], types))

    def op_RERAISE(self, arg, stack, env, bb):
        return self._raise(stack[-1])

    def op_BEFORE_WITH(self, arg, stack, env, bb):
        mgr = stack.pop()
        exit_ = self.emit(ops.with_exit, mgr)
        stack += [exit_, self.emit(ops.with_enter, mgr)]

    def op_WITH_EXCEPT_START(self, arg, stack, env, bb):
        stack.append(self.emit(ops.with_except, stack[-4], stack[-1]))


# opcodes that share a handler with a sibling
for _name in ("BUILD_LIST", "BUILD_SET", "BUILD_STRING"):
    setattr(_Lifter, f"op_{_name}", _Lifter.op_BUILD_TUPLE)
for _name in ("SET_ADD", "LIST_EXTEND", "SET_UPDATE", "DICT_UPDATE", "DICT_MERGE"):
    setattr(_Lifter, f"op_{_name}", _Lifter.op_LIST_APPEND)


def code_of(f):
    """The code object of a function, method, or callable object's ``__call__``."""
    if hasattr(f, "__code__"):
        return f.__code__
    if hasattr(f, "__func__"):
        return f.__func__.__code__
    raise TypeError(f"{f!r} has no Python bytecode to lift")


def lift(f) -> IR:
    """The IR of ``f`` (a function or a code object).

    The entry block's arguments are the function itself, then its parameters:

    >>> def f(x):
    ...     return x * x
    >>> print(lift(f))
    1: (%1, %2)
      %3 = operator.mul(%2, %2)                      # line 2
      return %3
    """
    code = f if hasattr(f, "co_code") else code_of(f)
    return _Lifter(code).run()
