"""Generators under differentiation: each resumption runs forward when it is consumed,
and the adjoint resumes in reverse order.

Calling a generator function under `forward` makes a `Generator`: it runs the forward
code, itself a generator, which hands over its tape first (before any code of the
user's runs) and then yields the primal items one resumption at a time, pushing onto
that tape what the forward code of a function pushes.  Resumption ``j`` (``next`` or
``send``; the ``j``-th counting from 0) produces item ``j``, or the return value when
the generator returns.

The adjoint is a generator too: started from where the forward one stopped (its
``return``, or the ``yield`` it is suspended at), it runs back to the previous
``yield``, hands out the gradient of the value that resumption sent in, and waits for
the gradient of the item yielded there.  The pullback of resumption ``j`` (of ``next``,
``send``, a loop step, or a rule that consumed several items) calls `Generator.back`
with the gradient of what ``j`` produced: the adjoint runs back over that resumption and
returns the gradient of the value sent in.  Pullbacks run in the reverse order of the
calls, so the generator's reverse pass interleaves with its consumer's as its forward
pass did.  The pullback of the call that made the generator runs last and finishes the
adjoint, which returns the gradients of the arguments.

Every pullback that hands a gradient to a generator is an `Effect` (it runs with no
gradient too): a resumption the adjoint passes unclaimed had an item no rule took the
gradient of, which is refused rather than given a zero gradient.
"""
from __future__ import annotations

import types

from .algebra import is_differentiable
from .errors import user_location
from .mutation import Effect
from .tangents import current


class Generator:
    """A generator made by a differentiated call: the iterator the consumer sees."""

    __slots__ = ("fwd", "tape", "adjoint", "name", "resumes", "done", "failed", "adj",
                 "waiting", "grads", "loose", "nargs", "closed", "__weakref__")

    def __init__(self, fwd, adjoint, name, nargs):
        self.fwd, self.adjoint, self.name, self.nargs = fwd, adjoint, name, nargs
        self.tape = next(fwd)
        self.resumes = 0     # resumptions run (the last one returned when done)
        self.done = self.closed = False
        self.failed = None   # why its gradient cannot be had
        self.adj = None      # the adjoint, once started
        self.waiting = -1    # the resumption whose item's gradient the adjoint waits for
        self.grads = None    # the arguments' gradients, when the adjoint returned
        self.loose = {}      # resumption → where an unaware consumer took its item

    @property
    def i(self):
        """How many items it yielded (what an `IndexIter`'s ``i`` is to a sequence)."""
        return self.resumes - self.done

    def __repr__(self):
        return f"<differentiated generator {self.name}: {self.i} items>"

    # -- forward -----------------------------------------------------------------
    def resume(self, value=None):
        """``(item, True)``, or ``(return value, False)`` when it returns; StopIteration
        once it has returned, as a generator does."""
        if self.done or self.closed or self.failed:
            raise StopIteration
        if value is not None and self.resumes == 0:
            raise TypeError("can't send non-None value to a just-started generator")
        try:
            y = self.fwd.send(value)
        except StopIteration as e:
            r = e.value
            if type(r) is tuple and len(r) == 2 and r[1] is self.tape:
                self.resumes += 1
                self.done = True
                return r[0], False
            self._fail("it raised StopIteration")
            raise RuntimeError("generator raised StopIteration") from e
        except BaseException as e:
            self._fail(f"it raised {type(e).__name__}")
            raise
        self.resumes += 1
        return y, True

    def __iter__(self):
        return self

    def send(self, value):
        """The next item (for ``next``, and for a rule whose pullback hands its gradient
        back with `back`)."""
        y, more = self.resume(value)
        if not more:
            raise StopIteration(y)
        return y

    def __next__(self):
        """The item for a consumer that knows no generators (a rule that takes any
        iterable): its gradient cannot come back, which the reverse pass refuses."""
        j = self.resumes
        y = self.send(None)
        if is_differentiable(y):  # (where: for the first only, which the error names)
            self.loose[j] = None if self.loose else user_location()
        return y

    def throw(self, *exc):
        raise _no_throw(self.name, "while it is differentiated")

    def close(self):
        """Close it as a generator closes: a ``finally`` or ``except`` around the yield it
        is suspended at runs, which the reverse pass cannot take back (refused then); its
        adjoint starts at that yield, as a suspended one's."""
        n = len(self.tape)
        self.fwd.close()
        self.closed = True
        if len(self.tape) != n:
            self._fail("it ran code (a finally or an except) when it was closed")

    # -- reverse -----------------------------------------------------------------
    def back(self, j, d):
        """Run the adjoint back over resumption ``j`` given the gradient ``d`` of what it
        produced; the gradient of the value it sent in."""
        if self.failed:
            self._check()
        if self.loose:
            self.loose.pop(j, None)
        if self.adj is None:
            ds = self._start(d if self.done and j == self.resumes - 1 else None)
            if self.done and j == self.resumes - 1:
                return ds
        if j > self.waiting:
            raise NotImplementedError(
                f"a gradient reached item {j} of the generator {self.name} after its "
                f"reverse pass had gone past it (a consumer kept the item past an earlier one); "
                f"consume the generator into a list first")
        while self.waiting > j:
            self._step(None)
        return self._step(d)

    def back_items(self, at, gs):
        """`back` for the items at resumptions ``at`` with gradients ``gs``, last first
        (what a rule that consumed several items hands back)."""
        for j, g in sorted(zip(at, gs), key=lambda p: -p[0]):
            self.back(j, g)

    def finish(self):
        """Run the adjoint to its end: the gradients of the function and its arguments."""
        if self.resumes == 0:
            return (None,) * self.nargs
        self._check()
        if self.adj is None:
            self._start(None)
        while self.waiting >= 0:
            self._step(None)
        return self.grads

    def _fail(self, why):
        if not self.failed:
            file, line = user_location()
            self.failed = f"{file}:{line}: {why}"

    def _check(self):
        """Refuse the reverse pass of a generator whose forward code ended in a way the
        tape does not record (its frame is gone, or it ran code the consumer did not see)."""
        if self.failed:
            raise NotImplementedError(
                f"{self.failed}; the generator {self.name} cannot be differentiated past "
                f"that yet: let it run to its end (or stay suspended) in code whose gradient "
                f"you ask for")

    def _start(self, dret):
        """Start the adjoint where the forward code stopped; the gradient of the value
        the last resumption sent in (None where the generator is suspended)."""
        self.adj = self.adjoint(self.tape, dret, None if self.done else self.tape[-1])
        self.waiting = self.i
        return self._step(None)

    def _step(self, d):
        """Hand the adjoint the gradient of item ``waiting`` (None: to start it)."""
        j = self.waiting
        if self.loose and j in self.loose:
            where = self.loose[j] or next(w for w in self.loose.values() if w)
            raise NotImplementedError(
                f"{where[0]}:{where[1]}: an item of the generator {self.name} was consumed by a "
                f"call that cannot pass its gradient back; consume it with a loop, next(), or "
                f"list() first")
        try:
            ds = self.adj.send(d)
        except StopIteration as e:
            self.grads, self.waiting = e.value, -1
            return None
        self.waiting = j - 1
        return ds


def start(f, forward_code, adjoint, params, unbind=None):
    """``forward`` of a call of generator function ``f``: the `Generator` and the
    pullback of the call, which finishes its adjoint (and so runs after every
    pullback of its items)."""
    g = Generator(types.FunctionType(forward_code, f.__globals__)(f, *params), adjoint,
                  f.__qualname__, 1 + len(params))
    if unbind is None:
        return g, Effect(lambda dy: g.finish())
    return g, Effect(lambda dy: unbind(g.finish()))


def _no_throw(name, when):
    file, line = user_location()
    return NotImplementedError(
        f"{file}:{line}: throw() into the generator {name} {when} is not supported yet: raise "
        f"the exception in the consumer, or compute the generator's items into a list first")


class TangentGenerator:
    """A generator made by a call under forward mode: the iterator the consumer sees.

    Its tangent code is a generator yielding ``(item, tangent)`` pairs, sent
    ``(value, tangent)`` pairs (``next`` sends ``(None, None)``), and returning
    ``(value, tangent)``.  Taking an item hands on the item and keeps its tangent in
    ``tangents`` (None is zero), in the order taken, so a forward rule that consumed
    ``n`` items (``sum``, ``zip``, a loop step) reads theirs from where it started (``i``
    before); the tangent of what it returned is ``returned``.  Its own tangent, as a
    value, is itself: the consumer's rules find the items' tangents here.
    """

    __slots__ = ("pairs", "name", "tangents", "returned", "started", "__weakref__")

    def __init__(self, pairs, name):
        self.pairs, self.name, self.tangents, self.returned = pairs, name, [], None
        self.started = False

    @property
    def i(self):
        """How many items it yielded."""
        return len(self.tangents)

    def __repr__(self):
        return f"<generator {self.name} in forward mode: {self.i} items>"

    def __iter__(self):
        return self

    def __next__(self):
        return self.send(None)

    def send(self, value, tangent=None):
        """The next item, ``value`` (with its ``tangent``) sent in as ``send`` sends it."""
        if self.started:
            value = (value, tangent)
        elif value is not None:  # (the value sent first starts it: no yield takes it)
            raise TypeError("can't send non-None value to a just-started generator")
        self.started = True
        try:
            y, dy = self.pairs.send(value)
        except StopIteration as e:
            if e.value is None:  # (it ended before: returned, closed or raised)
                raise
            r, self.returned = e.value
            stop = StopIteration(r)  # (its value's tangent, for a read of e.value or e.args)
            current().raised[id(stop)] = (stop, user_location(), (r,), (self.returned,))
            raise stop from None
        self.tangents.append(dy)
        return y

    def throw(self, *exc):
        raise _no_throw(self.name, "in forward mode")

    def close(self):
        self.pairs.close()
