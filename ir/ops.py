"""The callables bytecode operations are normalised into.

Where the `operator` module or a builtin already names an operation
(`operator.add`, `operator.getitem`, `getattr`, `slice`, `iter`) the lifter uses
it; the operations below have no such name.  Each is an ordinary function, so a
statement ``%3 = ops.build_tuple(%1, %2)`` can be called, differentiated (by a
rule keyed on the function) and emitted back to its native instruction.
"""
from __future__ import annotations

import sys
import types
from itertools import islice

from .errors import Refusal


class _Undef:
    """The value of a local read before assignment on some path."""

    def __repr__(self):
        return "UNDEF"


UNDEF = _Undef()


class _Caught:
    """Where a catch edge passes the exception that was raised (see `Branch`)."""

    def __repr__(self):
        return "CAUGHT"


CAUGHT = _Caught()


# -- exceptions and context managers -------------------------------------------
def exc_match(exc, types):
    """``CHECK_EXC_MATCH``: whether ``except types`` catches ``exc`` (never one of
    bytegrad's `Refusal`s, which go on up)."""
    for t in types if isinstance(types, tuple) else (types,):
        if not (isinstance(t, type) and issubclass(t, BaseException)):
            raise TypeError("catching classes that do not inherit from BaseException is not allowed")
    if isinstance(exc, Refusal):
        raise exc
    return isinstance(exc, types)


def handling(exc):
    """A handler that takes every exception (a bare ``except:``, ``finally``) begins:
    ``exc`` unless it is one of bytegrad's `Refusal`s, which go on up."""
    if isinstance(exc, Refusal):
        raise exc
    return exc


def throw(exc, context=None):
    """``raise exc`` as a statement, so that a ``try`` around it catches it; inside a
    handler, with the exception it handles as the ``__context__``, as CPython sets it."""
    if context is not None:
        exc = exc() if isinstance(exc, type) else exc
        if exc.__context__ is None and exc is not context:
            exc.__context__ = context
    raise exc


def reraise(exc):
    """A bare ``raise``: ``exc`` is the exception being handled (None: there is none)."""
    if exc is None:
        raise RuntimeError("No active exception to reraise")
    raise exc


def with_exit(mgr):
    """``BEFORE_WITH``'s first half: ``mgr``'s bound ``__exit__``.  The type must have
    both methods, as CPython checks; the method is then read from ``mgr`` (an
    instance attribute named ``__exit__`` would shadow it, where CPython ignores it)."""
    kind = type(mgr)
    if not hasattr(kind, "__enter__") or not hasattr(kind, "__exit__"):
        raise TypeError(f"'{kind.__name__}' object does not support the context manager protocol")
    return mgr.__exit__


def with_enter(mgr):
    """``BEFORE_WITH``'s second half: what ``with mgr as v`` binds to ``v``."""
    return type(mgr).__enter__(mgr)


def with_except(exit_, exc):
    """``WITH_EXCEPT_START``: ``__exit__`` told of ``exc``; true when it suppresses it
    (never one of bytegrad's `Refusal`s, which ``__exit__`` still sees, to clean up)."""
    suppress = exit_(type(exc), exc, exc.__traceback__)
    return suppress and not isinstance(exc, Refusal)
_NONE = object()


def identity(x):
    """``%2 = identity(%1)``: a copy; emitted as a plain load and store."""
    return x


def pull(kind, pb, dy):
    """``%3 = pull(K, %1, %2)``: a pullback's call ``%1(%2)``.  Where ``%1`` is a ``K``
    (a transformed function's pullback: its adjoint and tape, as a partial), the emitted
    code calls ``%1.func(%1.args[0], %2)`` itself, a frame less per level of a recursion;
    any other pullback is called as the method ``__call__``.  A transformed function's
    pullback then runs in Python frames only: CPython 3.12 caps a recursion through
    C near 500 levels, whatever the recursion limit."""
    return pb(dy)


def build_tuple(*xs):
    return xs


def build_list(*xs):
    return list(xs)


def build_set(*xs):
    return set(xs)


def build_dict(*kv):
    return dict(zip(kv[::2], kv[1::2]))


def build_string(*parts):
    return "".join(parts)


_CONVERSIONS = (None, str, repr, ascii)


def format_value(x, conversion=0, spec=""):
    """``f"{x!r:>3}"`` → ``format_value(x, 2, ">3")``."""
    if conversion:
        x = _CONVERSIONS[conversion](x)
    return format(x, spec)


def iterate(xs, state):
    """One step of the iteration protocol: ``(value, state)``, or None at the end.

    ``state`` is the iterator ``iter(xs)`` returned; passing ``xs`` along lets a
    rule see which container the value comes from.
    """
    try:  # ``next``, not ``for``: like FOR_ITER, it needs no ``__iter__`` on the state
        return (next(state), state)
    except StopIteration:
        return None


def yield_(value):
    """``%s = ops.yield_(%v)``: ``yield %v`` in a generator's IR, whose value ``%s`` is
    what the consumer sends (None for ``next``).  The emitter writes the instruction; a
    call of this function is an error (it has no frame to suspend)."""
    raise RuntimeError("ops.yield_ stands for a yield: only emitted code can run it")


def send(it, value):
    """One step of ``yield from it`` (``SEND``): ``(item, True)`` when ``it`` yields,
    ``(return value, False)`` when it returns.  As the interpreter does, a None is sent
    by ``next`` (any iterator), anything else by ``it.send``."""
    try:
        return (next(it) if value is None else it.send(value)), True
    except StopIteration as e:
        return e.value, False


def unpack(seq, n):
    """``a, b = seq``: the items of ``seq`` as a tuple, which must have length ``n``."""
    if type(seq) is tuple or type(seq) is list:
        t = tuple(seq)
        more = len(t) > n
    else:  # like UNPACK_SEQUENCE, take at most n + 1 items from an iterator
        it = iter(seq)
        t = tuple(islice(it, n))
        more = len(t) == n and next(it, _NONE) is not _NONE
    if len(t) < n:
        raise ValueError(f"not enough values to unpack (expected {n}, got {len(t)})")
    if more:
        raise ValueError(f"too many values to unpack (expected {n})")
    return t


# -- match statements: CPython's semantics, as Python (match_class and match_keys read
#    the subject's attributes and items, so they are differentiated like any function)
_MATCH_SELF = 1 << 22  # Py_TPFLAGS_MATCH_SELF: bool, int, float, str, list, dict, … match themselves
_SEQUENCE, _MAPPING = 1 << 5, 1 << 6  # Py_TPFLAGS_SEQUENCE, Py_TPFLAGS_MAPPING


def match_sequence(subject):
    """``MATCH_SEQUENCE``: whether a sequence pattern may match ``subject``."""
    return bool(type(subject).__flags__ & _SEQUENCE)


def match_mapping(subject):
    """``MATCH_MAPPING``: whether a mapping pattern may match ``subject``."""
    return bool(type(subject).__flags__ & _MAPPING)


def _not_a_class():
    """The interpreter's own message for ``case C():`` where C is no class."""
    C = None
    try:
        match None:
            case C():
                pass
    except TypeError as e:
        return str(e)


_NOT_A_CLASS = _not_a_class()


def match_class(subject, cls, nargs, names):
    """``MATCH_CLASS nargs`` for ``case cls(p1, …, pn, k1=…, …)``: the values the
    sub-patterns match (``nargs`` positional through ``cls.__match_args__``, then the
    attributes ``names``), or None when ``subject`` is no ``cls`` or lacks one."""
    if not isinstance(cls, type):
        raise TypeError(_NOT_A_CLASS)
    if not isinstance(subject, cls):
        return None
    attrs = []
    if nargs:
        match_args = getattr(cls, "__match_args__", None)
        self_ = match_args is None and bool(cls.__flags__ & _MATCH_SELF)
        match_args = () if match_args is None else match_args
        if type(match_args) is not tuple:
            raise TypeError(f"{cls.__name__}.__match_args__ must be a tuple (got "
                            f"{type(match_args).__name__})")
        allowed = 1 if self_ else len(match_args)
        if allowed < nargs:
            raise TypeError(f"{cls.__name__}() accepts {allowed} positional sub-pattern"
                            f"{'' if allowed == 1 else 's'} ({nargs} given)")
        if self_:
            attrs.append(subject)
        else:
            for name in match_args[:nargs]:
                if type(name) is not str:
                    raise TypeError(f"__match_args__ elements must be strings (got "
                                    f"{type(name).__name__})")
            names = match_args[:nargs] + names
    if len(set(names)) < len(names):
        twice = next(n for i, n in enumerate(names) if n in names[:i])
        raise TypeError(f"{cls.__name__}() got multiple sub-patterns for attribute {twice!r}")
    for name in names:
        value = getattr(subject, name, _NONE)
        if value is _NONE:
            return None
        attrs.append(value)
    return tuple(attrs)


def match_keys(subject, keys):
    """``MATCH_KEYS`` for ``case {k1: …, k2: …}``: the values at ``keys``, or None when
    one is missing (looked up with ``get``, as CPython does)."""
    if len(set(keys)) < len(keys):
        twice = next(k for i, k in enumerate(keys) if k in keys[:i])
        raise ValueError(f"mapping pattern checks duplicate key ({twice!r})")
    values = []
    for k in keys:
        v = subject.get(k, _NONE)
        if v is _NONE:
            return None
        values.append(v)
    return tuple(values)


def unpack_ex(seq, before, after):
    """``a, *b, c = seq`` → ``(a, [b...], c)``."""
    t = tuple(seq)
    if len(t) < before + after:
        raise ValueError(f"not enough values to unpack (expected at least {before + after}, got {len(t)})")
    return t[:before] + (list(t[before:len(t) - after]),) + t[len(t) - after:]


def apply(f, args, kwargs=None):
    """``f(*args, **kwargs)``."""
    return f(*args, **kwargs) if kwargs else f(*args)


def list_append(xs, x):
    """``LIST_APPEND`` of a comprehension: append and pass the list on."""
    xs.append(x)
    return xs


def set_item(xs, k, v):
    """``xs[k] = v`` that passes ``xs`` on, as `list_append` does: a write into a list or
    array no other name can see (transforms/private.py), whose later readers read the
    result."""
    xs[k] = v
    return xs


def set_attr(obj, name, v, setter=setattr):
    """``obj.name = v`` (``setter``: or ``object.__setattr__``'s) that passes ``obj`` on, as
    `set_item` does: an object made in a class's call (transforms/private.py)."""
    setter(obj, name, v)
    return obj


def field_of(obj, name):
    """``obj.name`` of an object whose later writes pass it on (`set_attr`), read where
    something bound to it would be seen after one: its rules refuse anything but a field."""
    return getattr(obj, name)


def item_of(a, k):
    """``a[k]`` of an array whose later writes pass it on (`set_item`), read where a view
    of it would be seen after one: its rules refuse anything but a number."""
    return a[k]


def appended(xs, x):
    """``xs.append(x)`` that passes ``xs`` on, as `set_item` does."""
    xs.append(x)
    return xs


def list_extend(xs, ys):
    xs.extend(ys)
    return xs


def set_add(s, x):
    s.add(x)
    return s


def set_update(s, ys):
    s.update(ys)
    return s


def map_add(d, k, v):
    d[k] = v
    return d


def dict_update(d, m):
    d.update(m)
    return d


def dict_merge(d, m):
    """``f(**a, **b)``: like update, but a repeated key is an error."""
    for k in m:
        if k in d:
            raise TypeError(f"got multiple values for keyword argument '{k}'")
    d.update(m)
    return d


def list_to_tuple(xs):
    return tuple(xs)


def raise_from(exc, cause):
    """``raise exc from cause``: the exception to raise.

    ``raise E from C`` → ``%3 = ops.raise_from(E, C)`` / ``raise %3``; classes are
    instantiated, and anything not an exception fails as ``raise`` would.
    """
    if isinstance(exc, type) and issubclass(exc, BaseException):
        exc = exc()
    if not isinstance(exc, BaseException):
        return exc  # ``raise %3`` fails with "exceptions must derive from BaseException"
    if isinstance(cause, type) and issubclass(cause, BaseException):
        cause = cause()
    elif cause is not None and not isinstance(cause, BaseException):
        raise TypeError("exception causes must derive from BaseException")
    exc.__cause__ = cause
    return exc


def make_function(code, closure=None, defaults=None, kwdefaults=None):
    """``MAKE_FUNCTION``: a function of ``code`` in the caller's globals."""
    return function_in(sys._getframe(1).f_globals, code, closure, defaults, kwdefaults)


def function_in(g, code, closure=None, defaults=None, kwdefaults=None):
    fn = types.FunctionType(code, g, code.co_name, defaults, closure)
    fn.__qualname__ = code.co_qualname
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    return fn


def make_cell(value=UNDEF):
    return types.CellType() if value is UNDEF else types.CellType(value)


def cell_get(cell, name="?", own=False):
    """``LOAD_DEREF``; ``own`` is True for the function's own cells, whose reads
    before assignment raise UnboundLocalError rather than NameError."""
    try:
        return cell.cell_contents
    except ValueError:
        _unbound_cell(name, own)


def cell_set(cell, value):
    cell.cell_contents = value


def cell_delete(cell, name="?", local=True):
    """``del y`` of a variable living in a cell: ``ops.cell_delete(%3, 'y', True)``;
    ``local`` is False when the cell is a free variable (``nonlocal y``)."""
    try:
        del cell.cell_contents
    except ValueError:
        _unbound_cell(name, local)


def _unbound_cell(name, own):
    """CPython's error for an empty cell: its own variable, or a free one."""
    if own:
        unbound_local(name)
    raise NameError(f"cannot access free variable '{name}' where it is not associated "
                    f"with a value in enclosing scope") from None


def closure_cell(fn, i):
    """Cell ``i`` of a function's closure (``COPY_FREE_VARS``)."""
    return fn.__closure__[i]


def store_global(name, value):
    sys._getframe(1).f_globals[name] = value


def delete_global(name):
    del sys._getframe(1).f_globals[name]


def read_global(x):
    """``%2 = ops.read_global(g)``: a global read whose value goes unused (``g`` alone on a
    line), kept as a statement: the emitted code loads ``g``, and so raises NameError where
    Python would (a ``try`` may be testing for it).  Python's ``LOAD_GLOBAL g; POP_TOP``.
    Its value is None: nothing uses it."""


def import_name(name, fromlist, level):
    f = sys._getframe(1)
    return __import__(name, f.f_globals, None, fromlist, level)


def import_from(module, name):
    try:
        return getattr(module, name)
    except AttributeError:
        raise ImportError(f"cannot import name '{name}' from '{module.__name__}'") from None


def not_contains(container, item):
    return item not in container


def unbound_local(name):
    raise UnboundLocalError(f"local variable '{name}' referenced before assignment")


def bound(x, name):
    """A read of a local that some path leaves unassigned: ``x``, unless it is UNDEF.

    ``if c: y = 1`` / ``return y`` → ``3: (%4)`` / ``%5 = ops.bound(%4, 'y')`` /
    ``return %5``, where block 3 receives ``br 3 (1)`` and ``br 3 (UNDEF)``.
    """
    if x is UNDEF:
        unbound_local(name)
    return x


def resolved(value, expected, name):
    """``%5 = ops.resolved(%4, numpy.exp, 'np.exp')``: ``%4`` (what ``np.exp`` names now),
    which must be ``expected``, what it named when the function was transformed and
    what the transform called in its place.  The program rebinding it while it runs
    (``np.exp = np.sin`` inside the function, or in a function it calls) raises."""
    if value is not expected:
        raise RuntimeError(
            f"{name} was rebound while the function being differentiated ran (it named "
            f"{getattr(expected, '__qualname__', expected)} when bytegrad transformed the "
            f"function, and bytegrad decides what to differentiate then); rebind it before "
            f"calling bytegrad, or call the function through a local variable")
    return value


class Inline:
    """A taped rule's fast path, which the emitter writes in place of the call
    ``%y = rec(push, a, …)``: where each operand's type is exactly ``guards[i]``,
    ``y = op(a, …)`` (an operator with an instruction of its own, or any callable),
    then ``push(item)`` for each of ``pushes``: an operand's index, ``"y"`` (the
    result), or ``("const", k)``; elsewhere the call.  The same values reach the tape
    either way, without the call's frame.  A function that pushes nothing (``pushes``
    None) takes no ``push`` operand: ``accum(a, b)`` is ``a + b`` for two floats.
    ``also`` holds more ``(guards, pushes)`` paths, tried in turn::

        %9 = taped.mul_record(%4, %2, %3)   →   if type(%2) is float and type(%3) is float:
                                                    %9 = %2 * %3; %4(%2); %4(%3)
                                                else: %9 = taped.mul_record(%4, %2, %3)
    """

    __slots__ = ("guards", "op", "pushes", "also")

    def __init__(self, guards, op, pushes=None, also=()):
        self.guards, self.op = tuple(guards), op
        self.pushes = None if pushes is None else tuple(pushes)
        self.also = tuple((tuple(g), tuple(p)) for g, p in also)

    def paths(self):
        return ((self.guards, self.pushes),) + self.also


class InlineBack:
    """A taped rule's reverse fast paths, which the adjoint pass writes out as IR in
    place of ``%d = back(%pop, @gv)``.  It pops the last entry ``k``; for the first of
    ``cases`` ``(test, pops, grads)`` whose ``test`` ``k`` passes (``("is", c)``: ``k``
    is the constant ``c``; ``("type", t)``: its type is exactly ``t``), given a
    gradient ``d`` that is not None, it pops the entries named in ``pops`` and gives
    each operand the gradient in ``grads``: None (none), a name (``"d"``, ``"k"`` or a
    popped one), ``(f, e, …)`` (a call), or a constant.  Elsewhere the rule's
    ``given(k, pop, d)``, its back told what was popped::

        %9 = taped.mul_back(%1, @g5)   →   %10 = %1()
                                            %11 = operator.is_not(@g5, None)
                                            %12 = type(%10)
                                            %13 = operator.is_(%12, float)
                                            br 4 unless %13
                                            br 4 unless %11
                                            br 3
                                        3:  %14 = %1()
                                            %15 = operator.mul(@g5, %10)   (into @g2)
                                            %16 = operator.mul(%14, @g5)   (into @g3)
                                            br 5
                                        4:  %17 = taped.mul_given(%10, %1, @g5) …
                                            br 5
    """

    __slots__ = ("cases", "given")

    def __init__(self, cases, given):
        self.cases, self.given = tuple(cases), given


def watch(w, pb, y, /, *operands, **kw):
    """``%p2 = ops.watch(W, %p, %y, f, %a, …, k=%b)``: the pullback ``%p`` of ``%y = f(%a, …, k=%b)``,
    or ``W.watcher``'s wrapper of it when the type of ``%y`` is in ``W.kinds`` (it may be
    mutated later) or ``W.all`` is set (an operand may have been).  ``W`` is the
    runtime's state, a constant here: the IR knows none.  The emitter inlines the
    test, so the common case costs no call.  The register pass puts it after each
    active call (its module docstring shows the forward IR).
    """
    if type(y) in w.kinds or w.all:
        return w.watcher(pb, y, operands, kw)
    return pb
