"""Scheduled calls and their adjoints: what the rules of threads, queues, executors and
Dask share (the Zygote paper's §4).

A `Task` is one call ``fn(*args, **kw)`` scheduled on a pool.  Its forward pass ran as a
task of that pool; its reverse pass runs as a task of the same pool, launched when the
reverse pass of the caller reaches the point where the primal *first* awaited the task
(the pullback of the first ``result()``: it runs last), so tasks the primal ran in
parallel go back in parallel.  The caller's reverse pass takes the task's gradients at
the call that scheduled it (``submit``), in program order, so gradients that several
tasks send to one array are summed in the caller's thread, one after another, in the
same order every run: no two threads ever add into one gradient.

Every pullback here is an `Effect` (it runs even when its output got no gradient): a
future's value, a queue's item and a thread's work reach the task by a side channel, the
`Task` record, not by the gradient of the future or thread object, so a future may pass
through any container or function on its way to ``result()``.

The pool a task goes back on is its own while that is open; a pool the user's ``with``
closed (or one broken by a lost worker process) is replaced by a pool of the same kind
and size, made for the reverse pass and shut down when its last task is done (`acquire`).
"""
from __future__ import annotations

import threading
from concurrent.futures import BrokenExecutor as BrokenPoolError

from ..runtime.algebra import accum, unwrap


class Task:
    """One scheduled call.  ``pool.submit(*call, dy)`` (on ``pool``'s replacement if the
    pool is gone) computes ``(d_fn, d_arg1, …[, d_kw])`` (`task_gradients`); ``awaits``
    counts the awaits the forward pass made, each of whose pullbacks hands in its
    gradient with `receive`; ``sh`` (if given) takes the parts of the gradients that
    belong to objects changed in place (`absorbed`)."""

    __slots__ = ("pool", "call", "sh", "operands", "lock", "awaits", "dy", "adjoint", "spare")

    def __init__(self, pool, call, sh=None, operands=()):
        self.pool, self.call, self.sh, self.operands = pool, call, sh, operands
        self.lock = threading.Lock()
        self.awaits, self.dy, self.adjoint, self.spare = 0, None, None, None

    def awaited(self):
        with self.lock:
            self.awaits += 1

    def receive(self, dy):
        """The gradient of one await's value; the last one launches the adjoint task."""
        with self.lock:
            self.dy = accum(self.dy, unwrap(dy))
            self.awaits -= 1
            if self.awaits == 0:
                self._launch()

    def _launch(self):
        if self.adjoint is None:
            self.spare, pool = acquire(self.pool)
            self.adjoint = pool.submit(*self.call, self.dy)

    def gradients(self):
        """``(d_fn, d_arg1, …[, d_kw])`` once the adjoint task is done (launched now if
        no await's pullback did: the value was never used, or never awaited).  A task
        in another process that raised (its caller caught it) has none."""
        if self.call is None:
            return (None,) * len(self.operands)
        with self.lock:
            self._launch()
        try:
            return absorbed(self.sh, self.operands, self._result())
        finally:
            release(self.spare)
            self.spare = None

    def _result(self):
        try:
            return self.adjoint.result()
        except BrokenPoolError as e:  # a worker lost between the passes: go back elsewhere
            if self.spare is not None:
                raise  # (its replacement broke too)
            with self.lock:
                self.pool, self.adjoint = _Gone(self.pool, e), None
                self._launch()
            return self.adjoint.result()

class _Gone:
    """A pool found broken while going back: its replacement is made for the reverse pass."""

    def __init__(self, pool, error):
        self.pool, self.error = pool, error


def absorbed(sh, operands, grads):
    """The gradients ``grads`` of ``operands``, less the parts that belong to objects
    changed in place, which go to their entries in the shadow ``sh``: what `Routed` does
    for a pullback whose operands were changed after the call (by a task, after the
    forward pass decided how to push the call's pullback)."""
    if sh is None or not sh.mutated:
        return grads
    return tuple(sh.absorb(x, g) for x, g in zip(operands, grads))


def task_gradients(grads, args, kw):
    """``(d_fn, d_args…, d_kw)`` as a rule of ``submit(fn, *args, **kw)`` returns them:
    ``grads`` is a pullback's ``(d_fn, d_arg1, …[, d_kw])``."""
    g = tuple(unwrap(x) for x in grads[1:1 + len(args)])
    d_kw = grads[1 + len(args)] if kw and len(grads) > 1 + len(args) else None
    return (unwrap(grads[0]),) + g + ((d_kw,) if kw else ())


# ---- the pool a task goes back on ---------------------------------------------------

_lock = threading.Lock()
_spares: dict = {}  # id(pool) → [replacement, tasks on it not yet done]


def open_pool(pool) -> bool:
    """Whether ``pool`` still takes tasks (not shut down, not broken)."""
    if type(pool) is _Gone:
        return False
    shut = getattr(pool, "_shutdown", False) or getattr(pool, "_shutdown_thread", False)
    return not shut and not getattr(pool, "_broken", False)


def acquire(pool):
    """``(spare, executor)``: ``pool`` if open (spare None), else its replacement."""
    if open_pool(pool):
        return None, pool
    with _lock:
        key = id(pool)
        s = _spares.get(key)
        if s is None or not open_pool(s[0]):
            s = _spares[key] = [_remake(pool.pool if type(pool) is _Gone else pool), 0, key]
        s[1] += 1
        return s, s[0]


def release(spare):
    """One task done on ``spare``; the last shuts it down."""
    if spare is None:
        return
    with _lock:
        spare[1] -= 1
        if spare[1] == 0:
            if _spares.get(spare[2]) is spare:
                del _spares[spare[2]]
            spare[0].shutdown(wait=False)


REMAKE: dict = {}  # a kind of pool → how to make another like one (Dask's executors)


def _remake(pool):
    """A pool like ``pool`` (its kind, size, initializer), for a reverse pass."""
    remake = REMAKE.get(type(pool))
    if remake is not None:
        return remake(pool)
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
    init = dict(initializer=getattr(pool, "_initializer", None), initargs=getattr(pool, "_initargs", ()))
    if isinstance(pool, ProcessPoolExecutor):
        return ProcessPoolExecutor(pool._max_workers, mp_context=pool._mp_context, **init)
    if isinstance(pool, ThreadPoolExecutor):
        return ThreadPoolExecutor(pool._max_workers, **init)
    raise RuntimeError(f"bytegrad cannot go back on {pool!r}: it was shut down before the "
                       f"reverse pass and bytegrad does not know how to make another; keep it "
                       f"open until the pullback is called")



def operands(fn, args, kw):
    """What `task_gradients` gives gradients of, in its order."""
    return (fn,) + tuple(args) + ((kw,) if kw else ())
