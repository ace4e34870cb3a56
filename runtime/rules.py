"""The rule registry: one rule format for every primitive.

A rule for ``f`` is called with ``f``'s arguments and returns ``(y, back)``:
``y`` is ``f(*args)`` and ``back(dy)`` returns a tuple of gradients — for ``f``
itself first, then one per positional argument (None where there is none), as in
Zygote.  ``dy`` is never None (the adjoint skips a pullback whose output has no
gradient) except for callables marked `effectful`.  Rules are found by the callable's identity.
"""
from __future__ import annotations

import types

from .errors import full_name


class Rule:
    """Everything known about one callable: its rule ``fn`` (None for a callable that is
    only marked), the marks the transforms and the runtime ask about, the conditions
    under which the rule holds (``note``, for docs/numpy.md), and how a call with
    keywords is bound: ``like`` is the callable whose signature gives the parameters
    (``np.sum`` for ``ndarray.sum``, whose extra parameters hide in ``**kwargs``),
    ``aliases`` maps a keyword to the parameter it stands for (``np.clip``'s ``max`` is
    ``a_max``), and ``keywords`` names the keyword-only parameters whose gradients the
    rule gives in its trailing dict; ``returns`` is what it returns, for the analysis of
    immutable numbers (`returns_scalars`); ``reads`` and ``view`` say what it does with its
    operands, for the analysis of values a function only reads (`only_reads`, `views`).
    Records are replaced, never changed, so a copy of `RULES` restores the registry."""

    __slots__ = ("fn", "nondiff", "effectful", "changes_args", "sparse", "structured", "note",
                 "like", "aliases", "keywords", "returns", "taped", "reads", "view", "methods", "passes",
                 "plan")

    def __init__(self, fn=None, nondiff=False, effectful=False, changes_args=False, sparse=False,
                 structured=False, note=None, like=None, aliases=None, keywords=(), returns=None,
                 taped=None, reads=0, view=False, methods=False, passes=False):
        self.fn, self.nondiff, self.effectful, self.changes_args = fn, nondiff, effectful, changes_args
        self.reads, self.view, self.methods = reads, view, methods  # (`only_reads`, `views`)
        self.passes = passes  # (`passes_keywords`)
        self.returns = returns  # what it returns, for the analysis of numbers: `returns_scalars`
        self.taped = taped  # (record, back, into, kept) putting values on the tape: `taped`
        self.sparse, self.structured, self.note, self.like = sparse, structured, note, like
        self.aliases, self.keywords = aliases or {}, frozenset(keywords)
        self.plan = None  # the binding of keywords to positions, made on first use

    def replaced(self, **changes):
        fields = {k: getattr(self, k) for k in self.__slots__ if k != "plan"}
        fields.update(changes)
        return Rule(**fields)

    def __call__(self, *args, **kw):
        """The rule itself, with the arguments as given (`forward` binds keywords first)."""
        return self.fn(*args, **kw)

    def __repr__(self):
        return f"<Rule {getattr(self.fn, '__qualname__', self.fn)}>"


RULES: dict = {}  # callable → its Rule, found by the callable's identity
CALLS: dict = {}  # a C type → a Python function calling its instances (differentiated instead)


class DuplicateRuleError(ValueError):
    """A second rule for a callable that has one, without ``override=True``."""


def _record(f, **fields):
    r = RULES.get(f)
    RULES[f] = Rule(**fields) if r is None else r.replaced(**fields)


def _mark(fs, field):
    for f in fs:
        _record(f, **{field: True})


def refuse_duplicates(fs):
    """Raise `DuplicateRuleError` if a callable in ``fs`` has a rule."""
    for f in fs:
        old = RULES.get(f)
        if old is not None and old.fn is not None:
            raise DuplicateRuleError(
                f"{full_name(f)} already has the rule {full_name(old.fn)}; "
                f"pass override=True to replace it")


def rule(*fs, note=None, override=False, like=None, aliases=None, keywords=()):
    """Register the decorated function as the rule of each callable in ``fs``::

        @rule(math.sin)
        def _(x):
            return math.sin(x), lambda dy: (None, dy * math.cos(x))

    ``note`` states conditions the rule needs (``"distinct eigenvalues"``); ``like``,
    ``aliases`` and ``keywords`` are as in `Rule`.  A callable that has a rule keeps it
    unless ``override=True`` (which keeps its marks and, unless given anew, its note).
    """
    if not override:
        refuse_duplicates(fs)

    def register(r):
        for f in fs:
            old = RULES.get(f)
            # (taped=None: a new rule replaces the values-on-the-tape rules of the old)
            _record(f, fn=r, note=note or (old.note if old is not None else None),
                    like=like, aliases=aliases, keywords=keywords, taped=None)
        return r
    return register


class Lazy:
    """A pullback result whose gradients are computed when read.

    The adjoint reads only the gradients of active arguments, so with
    ``Lazy(None, lambda: d @ B.T, lambda: A.T @ d)`` as the pullback of
    ``A @ B``, the gradient of data nobody differentiates is never computed.
    Entries are zero-argument callables, or None.
    """

    __slots__ = ("thunks",)

    def __init__(self, *thunks):
        self.thunks = thunks

    def __getitem__(self, i):
        t = self.thunks[i]
        if t is None:
            return None
        if type(i) is slice:
            return Lazy(*t)
        return t()

    def __len__(self):
        return len(self.thunks)

    def __iter__(self):
        return (self[i] for i in range(len(self.thunks)))


def called_as(t, call):
    """Instances ``obj`` of the C type ``t`` are differentiated as ``call(obj, *args)``
    (Python code doing what ``t.__call__`` does), e.g. ``functools.partial``."""
    CALLS[t] = call


def nondifferentiable(*fs):
    """Mark callables whose results never carry a gradient; they run plainly."""
    _mark(fs, "nondiff")
    return fs[0] if fs else None


PLAIN_CODES: set = set()  # code objects whose functions run plainly (`runs_plainly`)


def runs_plainly(*codes):
    """Mark code objects whose functions (closures a library makes, such as the lookup of
    each ``functools.singledispatch`` function) return nothing that carries a gradient:
    each such function is marked `nondifferentiable` when it is first called."""
    PLAIN_CODES.update(codes)


def effectful(*fs):
    """Mark callables whose pullbacks must run even when their result has no
    gradient, because they act through a side channel (a cell, a shadow); such
    pullbacks accept ``dy=None``."""
    _mark(fs, "effectful")


def changes_arguments(*fs):
    """Mark callables that may change their arguments in place (``operator.iadd`` on an
    array) without needing to run their pullbacks when nothing reaches them: what the
    arguments were read from becomes a hazard, so its later reads are active."""
    _mark(fs, "changes_args")


def sparse_gradients(*fs):
    """Mark callables whose pullbacks may return a sparse (`OneHot`) gradient for an
    argument; the adjoint densifies only those arguments' gradients."""
    _mark(fs, "sparse")


def takes_structured(*fs):
    """Mark callables whose pullbacks accept a structured gradient (`algebra.Eye`,
    `algebra.Fill`) as it is; every other pullback gets it made dense.  A marked pullback
    receives sparse ones (`OneHot`) as they are too, and makes dense what it does not use."""
    _mark(fs, "structured")


def returns_scalars(kind, *fs):
    """Declare what ``fs`` return, for the analysis that tells immutable numbers (which
    no change in place can reach) from objects: ``"scalar"``, always an int, float or
    bool (``len``, ``math.sin``); ``"arith"``, one when every operand is one
    (``operator.add``); ``"range"``, a range, whose iteration yields ints."""
    for f in fs:
        _record(f, returns=kind)


def only_reads(n, *fs, methods=False):
    """Declare that a call of each of ``fs`` with at most ``n`` positional arguments, and
    keywords other than ``out``, only reads its operands when they are ndarrays: it changes
    none in place, and returns nothing that shares memory with one (a new array, a number),
    so no later change in place reaches an operand through the result; unless the call is
    an operand's override's, or, with ``methods``, an operand's Python method's (``a + b``
    calls ``type(b).__radd__(b, a)`` for a ``b`` of a class of yours)."""
    for f in fs:
        _record(f, reads=n, methods=methods)


def passes_keywords(*fs):
    """Mark callables that pass their keywords on to the callable they are given
    (``jvp_call(f, …, out=o)``): an ``out=`` there is ``f``'s, not theirs."""
    _mark(fs, "passes")


def views(*fs):
    """Declare that ``f(x, …)`` may return what shares memory with ``x`` (``x[i:j]``,
    ``x.T``), changing nothing in place: ``x`` is only read where the result is."""
    _mark(fs, "view")


def taped(f, record, back, into=None, kept=None):
    """Give ``f`` rules that put values on the tape, not closures (see
    ``primitives/taped.py``): ``record(push, *args)`` in the forward code and
    ``back(pop, d)`` in the adjoint, for calls of ``f`` with positional arguments.
    ``into(pop, d, g)``, for a callee whose gradient goes to its first argument only,
    returns that argument's gradient slot ``g`` with the gradient added.  ``kept`` is
    ``record`` for a result the function only reads (`transforms.kept`)."""
    _record(f, taped=(record, back, into, kept or record))


def record_of(f):
    """The `Rule` of ``f``, or None (also for an unhashable callable)."""
    try:
        return RULES.get(f)
    except TypeError:
        return None


def _reading(field, absent):
    """The predicate giving ``field`` of a callable's `Rule` (``absent`` without one)."""
    def read(f):
        r = record_of(f)
        return absent if r is None else getattr(r, field)
    read.__name__ = read.__qualname__ = f"{field}_of"
    return read


# What the transforms and the runtime ask about a callable (the `_Hooks` of forward.py).
is_nondiff = _reading("nondiff", False)
is_view = _reading("view", False)
calls_methods = _reading("methods", False)
is_effectful = _reading("effectful", False)


def is_changing(f) -> bool:
    """Whether ``f`` may change its arguments in place: marked so (`changes_arguments`), or
    without a record and run as Python code, which may: a function or class of Python (a
    module's, reached as ``mod.f``), a callable object, or a C type called as Python
    (`called_as`: a NumPy function's Python implementation, ``np.put_along_axis``).  A C
    function or type without a record (``print``, ``isinstance``) changes nothing."""
    r = record_of(f)
    if r is not None:
        return r.changes_args
    if type(f) in CALLS:
        return True
    return not (isinstance(f, _C_FUNCTIONS) or isinstance(f, type) and f.__module__ == "builtins")


_C_FUNCTIONS = (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodDescriptorType,
                types.WrapperDescriptorType, types.MethodWrapperType)


is_sparse = _reading("sparse", False)
is_structured = _reading("structured", False)
scalar_kind = _reading("returns", None)  # "scalar", "arith", "range" (`returns_scalars`)
taped_for = _reading("taped", None)  # (record, back, into, kept) (`taped`)
rule_for = _reading("fn", None)  # the rule function


def reads_of(f) -> int:
    """How many positional operands a call of ``f`` only reads (`only_reads`): every one
    for a callable that returns only numbers and changes nothing (``len``, ``math.sin``)."""
    r = record_of(f)
    if r is None:
        return 0
    return 1 << 30 if r.returns == "scalar" and not r.changes_args else r.reads


_NOGRAD = {}


def nograd(n: int):
    """The pullback of a call with ``n`` arguments through which no gradient flows."""
    pb = _NOGRAD.get(n)
    if pb is None:
        zeros = (None,) * (n + 1)
        pb = _NOGRAD[n] = lambda dy: zeros
    return pb
