"""Rules for ``concurrent.futures.ProcessPoolExecutor``: a task that runs in another
process goes back in another process.

The choice (issue 13): the reverse pass **recomputes** the task's forward pass on a
worker, together with its pullback, when the cotangent arrives (`remote_gradients`),
rather than keeping each task's tape on the worker that made it.  The forward pass runs
the task plainly (at the primal's speed, no tape); the reverse pass pays one more
forward pass per task, with the tape.  In exchange the workers hold no state between
the passes: any worker, of the same pool or of a new one, can take a task's reverse
pass, so a worker lost between the passes (killed, restarted, a pool broken or closed)
costs a recomputation, never a gradient.  What crosses the wire going back is the task's
call (its function and arguments, as going forward), the cotangent, and the gradients;
never a tape.  The recomputed value is checked against the forward pass's (a digest of
its pickle): a task that does not compute the same value twice (it draws random
numbers, reads a clock or a file that changed) raises an error naming it rather than
giving the gradient of another computation.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import pickle

from ..runtime.api import pullback
from ..runtime.errors import full_name, user_location
from ..runtime.mutation import Effect
from ..runtime.rules import rule
from ..runtime.shadow import current
from .tasks import Task, operands
from .threads import TaskFuture, relay


def digest(y) -> bytes:
    """What tells two values of a task apart: a hash of their pickle."""
    return hashlib.blake2b(pickle.dumps(y, protocol=pickle.HIGHEST_PROTOCOL), digest_size=16).digest()


def _call(fn, args, kw):
    return fn(*args, **kw)


def remote_gradients(fn, args, kw, expected, where, dy):
    """Run by a worker: ``(d_fn, d_arg1, …[, d_kw])`` of ``fn(*args, **kw)`` for the
    cotangent ``dy``, recomputing its forward pass; it must give the value whose
    digest is ``expected`` (else an error naming the task and ``where`` it was sent).
    A task whose value got no gradient (None) needs no recomputation."""
    if dy is None:
        return (None,) * (1 + len(args) + bool(kw))
    try:
        y, back = pullback(_call, fn, args, kw)
    except Exception as e:
        raise _sendable(e) from None
    if digest(y) != expected:
        inner = fn
        while isinstance(inner, functools.partial):
            inner = inner.func
        raise RuntimeError(
            f"{where[0]}:{where[1]}: the task {full_name(inner)} gave another value when its forward pass was run again "
            f"for the reverse pass; a task run in another process is recomputed there, so it "
            f"must compute the same value from the same arguments (seed its random numbers, "
            f"pass what it reads as arguments)")
    d_fn, d_args, d_kw = back(dy)
    return (d_fn,) + tuple(d_args or (None,) * len(args)) + ((d_kw,) if kw else ())


def _sendable(e):
    """``e``, or, if it cannot travel back to the caller (an exception that does not
    pickle, such as bytegrad's errors, would break a process pool), a RuntimeError with
    its message."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


def schedule_remote(pool, submit, fn, args, kw):
    """``(future, pullback)`` of a task submitted by ``submit(fn, *args, **kw)`` (a pool's
    own submit), whose reverse pass is `remote_gradients` on ``pool``."""
    task = Task(pool, None, current(), operands(fn, args, kw))
    inner, where = submit(fn, *args, **kw), user_location()

    def ran(f):  # (before the caller can see the value: `relay` is added after)
        if f.exception() is None:
            task.call = (remote_gradients, fn, args, kw, digest(f.result()), where)
    inner.add_done_callback(ran)
    fut = TaskFuture(task)
    relay(inner, fut)
    return fut, Effect(lambda _: (None, None) + task.gradients())


@rule(cf.ProcessPoolExecutor.submit)
def _submit(self, fn, /, *args, **kwargs):
    return schedule_remote(self, lambda *a, **k: cf.ProcessPoolExecutor.submit(self, *a, **k),
                           fn, args, kwargs)
