"""Rules for thread pools, threads and queues: unmodified code that runs its work on
``concurrent.futures.ThreadPoolExecutor`` (``submit``, ``map``, ``as_completed``,
``wait``), ``threading.Thread(target=..., args=...)`` or ``queue.Queue`` is
differentiated (see `tasks` for how a task goes back).

The rules sit at these API entry points rather than letting the transform lift the
standard library's code: the pool's work queue, locks and worker loop carry no gradient,
and what must happen at them (run the task's forward transform in the worker, go back on
the same pool) is not what their code does.  ``Executor.map``, ``as_completed`` and
``wait`` are differentiated as the Python code below (`functional.as_python`), built on
``submit`` and ``result``.

A task runs in the caller's computation: its changes in place go to the caller's shadow
(`shadow.adopted`), as if it had run inline, so a thread may fill a list the caller reads.
A queue has an adjoint queue: each item ``put`` travels with a `_Message` whose gradient
the pullback of its ``get`` sends back, and the pullback of the ``put`` (in the sender's
reverse pass) waits for it.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import queue
import threading
import types

from ._frozen import np

from ..ir.errors import Refusal
from ..runtime import shadow
from ..runtime.errors import user_location
from ..runtime.forward import forward
from ..runtime.mutation import Effect
from ..runtime.rules import changes_arguments, nondifferentiable, rule
from .functional import as_python
from .tasks import Task, absorbed, operands, task_gradients

QUEUE_TIMEOUT = 600.0  # seconds a put's pullback waits for its get's gradient


class TaskFuture(cf.Future):
    """The future of a task submitted in differentiated code: a `concurrent.futures.Future`
    (``as_completed``, ``wait``, ``done()`` take it) that holds its `Task`."""

    def __init__(self, task):
        super().__init__()
        self.task = task


def relay(inner, outer):
    """``outer`` gets ``inner``'s value or exception once ``inner`` is done."""
    def done(f):
        e = f.exception()
        if e is None:
            outer.set_result(f.result())
        else:
            outer.set_exception(e)
    inner.add_done_callback(done)


def _share(fn, args, kw):
    """``(shadow, frozen)``: the caller's shadow, `shadow.Shared`, with the lists, dicts
    and objects the task can reach (its arguments, its function's closure, a partial's
    bound arguments) marked as changed, so that every read of them, in any thread, hands
    its gradient to the shadow instead of taking the entry back (a take made before
    another thread's change would go back out of order); ``frozen``, the ids of the
    arrays it can reach, which a task must not change in place."""
    sh, frozen = shadow.shared(), set()
    for x in _reachable(fn, args, kw):
        if isinstance(x, np.ndarray):
            frozen.add(id(shadow.root(x)))
        elif type(x) is list or type(x) is dict or hasattr(x, "__dict__") and not (
                callable(x) or isinstance(x, _NOT_SHARED)):
            sh.mark(x)
    return sh, frozenset(frozen)


_NOT_SHARED = (types.ModuleType, queue.Queue, threading.Thread, cf.Executor, cf.Future)


def _reachable(fn, args, kw):
    xs = [*args, *kw.values()]
    while isinstance(fn, functools.partial):
        xs += [*fn.args, *fn.keywords.values()]
        fn = fn.func
    xs += [getattr(fn, "__self__", None)]
    for c in getattr(fn, "__closure__", None) or ():
        try:
            xs.append(c.cell_contents)
        except ValueError:  # (an empty cell)
            pass
    return xs


def _in_computation(sh, frozen, fn, args, kw, task_backs):
    """``fn(*args, **kw)``'s forward transform, run by a worker for the computation of
    shadow ``sh``; its pullback goes into ``task_backs``."""
    with shadow.adopted(sh, frozen):
        y, back = forward(fn, *args, **kw)
    task_backs.append(back)
    return y


def _going_back(sh, backs, fn, args, kw):
    """What runs a thread task's pullback, on a worker, for the computation of ``sh``."""
    def run_back(dy):
        with shadow.adopted(sh), _alone(sh):
            return absorbed(sh, operands(fn, args, kw), task_gradients(backs[0](dy), args, kw))
    return run_back


# The reverse passes of tasks go in parallel, unless their computation changed objects
# in place: a task's pullbacks then move an object's gradient out of the shadow and back
# (a read of a changed list takes its entry; `absorbed` gives back what is not the
# task's own), which another task must not see half done, so they go one at a time.  A
# task waiting for its queue's gradient lets the others go meanwhile.
_one_at_a_time = threading.Lock()
_holder = threading.local()


class _alone:
    def __init__(self, sh):
        self.held = bool(sh.mutated)

    def __enter__(self):
        if self.held:
            _one_at_a_time.acquire()
            _holder.held = True

    def __exit__(self, *exc):
        if self.held:
            _holder.held = False
            _one_at_a_time.release()


def _waiting(event, timeout):
    """``event.wait(timeout)``, letting other tasks' reverse passes go meanwhile."""
    held = getattr(_holder, "held", False)
    if held:
        _holder.held = False
        _one_at_a_time.release()
    try:
        return event.wait(timeout)
    finally:
        if held:
            _one_at_a_time.acquire()
            _holder.held = True



@rule(cf.ThreadPoolExecutor.submit)
def _submit(self, fn, /, *args, **kwargs):
    (sh, frozen), backs = _share(fn, args, kwargs), []
    task = Task(self, (_going_back(sh, backs, fn, args, kwargs),))
    fut = TaskFuture(task)
    relay(cf.ThreadPoolExecutor.submit(self, _in_computation, sh, frozen, fn, args, kwargs, backs), fut)
    return fut, Effect(lambda _: (None, None) + task.gradients())


changes_arguments(cf.ThreadPoolExecutor.submit)  # (the task may change what it is given)


@rule(cf.Future.result)
def _result(self, timeout=None):
    y = cf.Future.result(self, timeout)
    if type(self) is not TaskFuture:  # (a future made elsewhere)
        return y, Effect(lambda _: (None, None, None))
    task = self.task
    task.awaited()

    def back(dy):
        task.receive(dy)
        return None, None, None
    return y, Effect(back)


@as_python(cf.Executor.map, keywords=("timeout", "chunksize"))
@as_python(cf.ProcessPoolExecutor.map, keywords=("timeout", "chunksize"))
def executor_map(self, fn, *iterables, timeout=None, chunksize=1):
    """``Executor.map``: every task submitted at the call, each awaited when its item is
    taken (``timeout`` applies to each wait; ``chunksize`` is not used)."""
    fs = [self.submit(fn, *args) for args in zip(*iterables)]
    return _results(fs, timeout)


def _results(fs, timeout):
    for f in fs:
        yield f.result(timeout)


@as_python(cf.as_completed)
def _as_completed(fs, timeout=None):
    """``as_completed``: the futures as they finish."""
    fs = list(fs)
    for i in _finished(fs, timeout):
        yield fs[i]


@nondifferentiable
def _finished(fs, timeout):
    at = {id(f): i for i, f in enumerate(fs)}
    return (at[id(f)] for f in cf.as_completed(fs, timeout))


@as_python(cf.wait)
def _wait(fs, timeout=None, return_when=cf.ALL_COMPLETED):
    """``wait``: ``(done, not_done)``, sets of the futures."""
    fs = list(fs)
    done = _done(fs, timeout, return_when)
    return cf._base.DoneAndNotDoneFutures({f for f, d in zip(fs, done) if d},
                                          {f for f, d in zip(fs, done) if not d})


@nondifferentiable
def _done(fs, timeout, return_when):
    finished = cf.wait(fs, timeout, return_when).done
    return [f in finished for f in fs]


# ---- threading.Thread --------------------------------------------------------------

class _ThreadTask:
    """The work of a thread made in differentiated code: its target's forward transform
    runs in the thread; its pullback runs in a thread of its own, started where the
    primal joined the thread (the first join: its pullback runs last)."""

    __slots__ = ("sh", "frozen", "target", "args", "kwargs", "backs", "joins", "adjoint", "grads",
                 "refused")

    def __init__(self, target, args, kwargs):
        self.target, self.args, self.kwargs = target, args, kwargs or {}
        self.sh, self.frozen = _share(target, args, self.kwargs)
        self.backs, self.joins, self.adjoint, self.grads, self.refused = [], 0, None, [], None

    def run(self):
        try:
            _in_computation(self.sh, self.frozen, self.target, self.args, self.kwargs, self.backs)
        except Exception as e:
            if isinstance(e, (Refusal, NotImplementedError)):  # bytegrad's: raised again at join()
                self.refused = e
            raise

    def launch(self):
        if self.adjoint is None and self.backs:
            run_back = _going_back(self.sh, self.backs, self.target, self.args, self.kwargs)
            self.adjoint = threading.Thread(target=lambda: self.grads.append(run_back(None)),
                                            daemon=True)
            self.adjoint.start()

    def gradients(self):
        self.launch()
        if self.adjoint is None:  # the target never ran (or raised)
            return None, None, None
        self.adjoint.join()
        if not self.grads:
            raise RuntimeError("the reverse pass of a thread's target failed (its error was "
                               "printed by the thread)")
        g = self.grads[0]
        d_args = type(self.args)(g[1:1 + len(self.args)]) if any(
            x is not None for x in g[1:1 + len(self.args)]) else None
        return g[0], d_args, g[1 + len(self.args)] if self.kwargs else None


@rule(threading.Thread)
def _thread(group=None, target=None, name=None, args=(), kwargs=None, *, daemon=None):
    t = threading.Thread(group, target, name, args, kwargs, daemon=daemon)
    t._bytegrad_task = task = _ThreadTask(target, args, kwargs)

    def back(_):
        d_target, d_args, d_kwargs = task.gradients()
        return None, None, d_target, None, d_args, d_kwargs
    return t, Effect(back)


@rule(threading.Thread.start)
def _start(self):
    task = getattr(self, "_bytegrad_task", None)
    if task is None:
        file, line = user_location()
        raise NotImplementedError(
            f"{file}:{line}: a thread made outside threading.Thread(target=..., args=...) in "
            f"the differentiated code ({type(self).__qualname__}) is not differentiated: "
            f"make it with threading.Thread(target=fn, args=(...)) inside the function")
    self._target, self._args, self._kwargs = task.run, (), {}
    self.start()
    return None, Effect(lambda _: (None, None))


@rule(threading.Thread.join)
def _join(self, timeout=None):
    task = getattr(self, "_bytegrad_task", None)
    self.join(timeout)
    if task is None:
        return None, Effect(lambda _: (None, None, None))
    if task.refused is not None:
        raise task.refused
    task.joins += 1

    def back(_):
        task.joins -= 1
        if task.joins == 0:
            task.launch()
        return None, None, None
    return None, Effect(back)


# ---- queue.Queue: an adjoint queue ---------------------------------------------------

class _Message:
    """An item on its way through a queue, and the way back of its gradient."""

    __slots__ = ("item", "taken", "dy", "arrived")

    def __init__(self, item):
        self.item, self.taken, self.dy, self.arrived = item, False, None, threading.Event()

    def __lt__(self, other):  # (a PriorityQueue compares its items)
        return self.item < other.item

    def gradient(self):
        if not self.taken:
            return None
        if not _waiting(self.arrived, QUEUE_TIMEOUT):
            raise RuntimeError(f"an item put on a queue got no gradient from the reverse pass "
                               f"of the get that took it within {QUEUE_TIMEOUT} s")
        return self.dy


@rule(queue.Queue.put)
def _put(self, item, block=True, timeout=None):
    m = _Message(item)
    queue.Queue.put(self, m, block, timeout)
    return None, Effect(lambda _: (None, None, m.gradient(), None, None))


@rule(queue.Queue.get)
def _get(self, block=True, timeout=None):
    m = queue.Queue.get(self, block, timeout)
    if type(m) is not _Message:  # put by code run plainly
        return m, Effect(lambda _: (None, None, None, None))
    m.taken = True

    def back(dy):
        m.dy = dy
        m.arrived.set()
        return None, None, None, None
    return m.item, Effect(back)


# ---- what carries no gradient: locks, events, the pools' own management -------------

_LOCKS = (type(threading.Lock()), type(threading.RLock()))
nondifferentiable(*(getattr(t, m) for t in _LOCKS
                    for m in ("acquire", "release", "__enter__", "__exit__", "locked")
                    if hasattr(t, m)))
nondifferentiable(*(getattr(c, m) for c, ms in (
    (threading.Condition, ("__enter__", "__exit__", "wait", "wait_for", "notify", "notify_all")),
    (threading.Semaphore, ("acquire", "release", "__enter__", "__exit__")),
    (threading.Event, ("set", "clear", "wait", "is_set")),
    (threading.Barrier, ("wait",)),
    (cf.ThreadPoolExecutor, ("shutdown",)),
    (cf.ProcessPoolExecutor, ("shutdown",)),
    (threading.Thread, ("is_alive", "__init__")),  # (a subclass's super().__init__())
) for m in ms))
