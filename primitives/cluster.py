"""Rules for Dask (``dask.distributed``), registered when it is imported: ``Client.submit``,
``Client.map``, ``Client.gather`` and ``Future.result``, and ``client.get_executor()``
used as a ``concurrent.futures`` executor (``submit``, ``map``, and the ``as_completed``
and ``wait`` of `threads` on its futures).

A task goes back as a process pool's does (`processes.remote_gradients`): its forward
pass runs plainly on a worker; the reverse pass sends the call and the cotangent to the
cluster as a new task, which recomputes the forward pass there with its pullback, so no
worker keeps anything between the passes and the scheduler may put the reverse task on
any worker (a worker lost meanwhile costs a recomputation, never a gradient).  The
client must still be open when the pullback is called: a closed one raises an error
saying so.
"""
from __future__ import annotations

from ..runtime.errors import user_location
from ..runtime.mutation import Effect
from ..runtime.rules import rule
from ..runtime.shadow import current
from ._on_import import when_imported
from .functional import as_python
from .processes import digest, remote_gradients, schedule_remote
from .tasks import REMAKE, Task, operands
from .threads import executor_map

# Client.submit's own keywords: they go to Dask, not to the task's function
_OPTIONS = ("key", "workers", "resources", "retries", "priority", "fifo_timeout",
            "allow_other_workers", "actor", "actors", "pure")


class OnClient:
    """Where a Client's task goes back: a new task of that client (``pure=False``: a
    reverse pass is never taken from Dask's cache)."""

    def __init__(self, client):
        self.client = client

    def submit(self, fn, *args):
        return self.client.submit(fn, *args, pure=False)

    @property
    def _shutdown(self):
        return self.client.status not in ("running", "connecting", "newly-created")


def _closed(pool):
    raise RuntimeError("the Dask client was closed before the pullback was called: the "
                       "reverse pass runs on the cluster, so keep the client open until then")


def _register(distributed):
    from distributed.cfexecutor import ClientExecutor
    Client, Future = distributed.Client, distributed.Future
    REMAKE[OnClient] = _closed
    REMAKE[ClientExecutor] = lambda ex: ex._client.get_executor(**ex._kwargs) \
        if not OnClient(ex._client)._shutdown else _closed(ex)

    @rule(Client.submit)
    def _submit(self, func, *args, **kwargs):
        opts = {k: kwargs.pop(k) for k in _OPTIONS if k in kwargs}
        fut = Client.submit(self, func, *args, **opts, **kwargs)
        task = Task(OnClient(self), None, current(), operands(func, args, kwargs))
        task.call = (remote_gradients, func, args, kwargs, None, user_location())
        fut._bytegrad_task = task
        return fut, Effect(lambda _: (None, None) + task.gradients())

    @rule(Future.result)
    def _result(self, timeout=None):
        y = Future.result(self, timeout)
        task = _awaited(self, y)

        def back(dy):
            if task is not None:
                task.receive(dy)
            return None, None, None
        return y, Effect(back)

    @rule(Client.gather)
    def _gather(self, futures, errors="raise", direct=None, asynchronous=None):
        y = Client.gather(self, futures, errors, direct, asynchronous)
        pairs = list(_pairs(futures, y, Future))
        tasks = [_awaited(f, v) for f, v in pairs]

        def back(dy):
            for task, (_, d) in zip(tasks, _pairs(futures, dy, Future)):
                if task is not None:
                    task.receive(d)
            return None, None, None, None, None, None
        return y, Effect(back)

    @rule(ClientExecutor.submit)
    def _executor_submit(self, fn, *args, **kwargs):
        return schedule_remote(self, lambda *a, **k: ClientExecutor.submit(self, *a, **k),
                               fn, args, kwargs)

    as_python(ClientExecutor.map, keywords=("timeout", "chunksize"))(executor_map)
    as_python(Client.map)(client_map)


def client_map(self, func, *iterables, **kwargs):
    """``Client.map``: a ``submit`` per item (``batch_size`` is not used)."""
    kwargs.pop("batch_size", None)
    return [self.submit(func, *args, **kwargs) for args in zip(*iterables)]


def _awaited(fut, y):
    """The task of Dask future ``fut`` whose value ``y`` was read (None for a future made
    elsewhere), with the digest its recomputation must match."""
    task = getattr(fut, "_bytegrad_task", None)
    if task is not None:
        c = task.call
        task.call = c[:4] + (digest(y),) + c[5:]
        task.awaited()
    return task


def _pairs(futures, values, kind):
    """``(future, value)`` for each future in the nested list, tuple or dict ``futures``
    and the same place in ``values`` (None where ``values`` is None: no gradient)."""
    if isinstance(futures, kind):
        yield futures, values
    elif isinstance(futures, (list, tuple)):
        for i, f in enumerate(futures):
            yield from _pairs(f, None if values is None else values[i], kind)
    elif isinstance(futures, dict):
        for k, f in futures.items():
            yield from _pairs(f, None if values is None else values.get(k), kind)


when_imported("distributed", _register)
