"""Unmodified code that runs its work on a ThreadPoolExecutor (map, submit/result,
as_completed, wait), on threading.Thread(target=, args=) or through queue.Queue is
differentiated: each pattern against the serial computation and finite differences."""
from __future__ import annotations

import functools
import queue
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed, wait

import numpy as np
import pytest

import bytegrad
from checks import check_grad
from sharded import SHARDS, W, loss, serial, serial_weighted


def pool_map(w):
    with ThreadPoolExecutor(2) as ex:
        return sum(ex.map(functools.partial(loss, w), SHARDS))


def pool_submit(w):
    with ThreadPoolExecutor(2) as ex:
        fs = [ex.submit(loss, w, s) for s in SHARDS]
        return sum(f.result() for f in fs)


def pool_submit_keywords(w):
    with ThreadPoolExecutor(2) as ex:
        fs = [ex.submit(loss, x=s, w=w) for s in SHARDS]
        return sum(f.result() for f in fs)


def pool_as_completed(w):
    with ThreadPoolExecutor(2) as ex:
        fs = {ex.submit(loss, w, s): k for k, s in enumerate(SHARDS)}
        total = 0.0
        for f in as_completed(fs):
            total = total + (fs[f] + 1) * f.result()  # weights tell the tasks apart
        return total


def pool_wait(w):
    with ThreadPoolExecutor(2) as ex:
        fs = [ex.submit(loss, w, s) for s in SHARDS]
        done, not_done = wait(fs)
        assert not not_done
        return sum(f.result() for f in done)


def threads_filling_a_list(w):
    out = [None] * len(SHARDS)

    def work(i, w, x):
        out[i] = loss(w, x)
    ts = [threading.Thread(target=work, args=(i, w, s)) for i, s in enumerate(SHARDS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(out)


def threads_through_queues(w):
    """Inputs go out on one queue, results come back on another: each put's gradient
    travels back to where it was sent."""
    jobs, results = queue.Queue(), queue.Queue()

    def work(w):
        while True:
            item = jobs.get()
            if item is None:
                return
            k, x = item
            results.put((k, loss(w, x * w[2])))
    ts = [threading.Thread(target=work, args=(w,)) for _ in range(2)]
    for t in ts:
        t.start()
    for k, s in enumerate(SHARDS):
        jobs.put((k, s))
    got = [None] * len(SHARDS)
    for _ in SHARDS:
        k, v = results.get()
        got[k] = v
    for t in ts:
        jobs.put(None)
    for t in ts:
        t.join()
    return sum((k + 1) * v for k, v in enumerate(got))


def serial_queues(w):
    return sum((k + 1) * loss(w, s * w[2]) for k, s in enumerate(SHARDS))


@pytest.mark.parametrize("f, ref", [
    (pool_map, serial), (pool_submit, serial), (pool_submit_keywords, serial),
    (pool_as_completed, serial_weighted), (pool_wait, serial),
    (threads_filling_a_list, serial), (threads_through_queues, serial_queues)],
    ids=lambda f: getattr(f, "__name__", ""))
def test_pattern_matches_serial_and_finite_differences(f, ref):
    (g,) = check_grad(f, W)
    (r,) = bytegrad.gradient(ref, W)
    assert np.allclose(g, r, rtol=1e-12, atol=0)


def test_pool_passed_in_takes_the_reverse_tasks():
    seen = set()

    def noted(w, x):
        return bytegrad.hook(lambda d: seen.add(threading.current_thread().name) or d, loss(w, x))

    def f(w, ex):
        return sum(ex.map(functools.partial(noted, w), SHARDS))
    with ThreadPoolExecutor(2, thread_name_prefix="users-pool") as ex:
        g, _ = bytegrad.gradient(f, W, ex)
    assert np.allclose(g, bytegrad.gradient(serial, W)[0], rtol=1e-12)
    assert seen and all(n.startswith("users-pool") for n in seen)


def test_reverse_tasks_run_in_parallel_where_the_forward_did():
    """Two tasks' pullbacks meet at a barrier: they can only pass it running at once."""
    barrier = threading.Barrier(2, timeout=10)

    def meet(d):
        barrier.wait()
        return d

    def task(w, x):
        return bytegrad.hook(meet, loss(w, x))

    def f(w):
        with ThreadPoolExecutor(2) as ex:
            a, b = ex.submit(task, w, SHARDS[0]), ex.submit(task, w, SHARDS[1])
            return a.result() + b.result()
    g, = bytegrad.gradient(f, W)
    r, = bytegrad.gradient(lambda w: loss(w, SHARDS[0]) + loss(w, SHARDS[1]), W)
    assert np.allclose(g, r, rtol=1e-12)


def test_tasks_reading_one_array_location_accumulate_without_races():
    """64 tasks read w[0] (the paper's race): the sum of their gradients is exact."""
    def one(w, k):
        return w[0] * w[0] * k

    def f(w):
        with ThreadPoolExecutor(4) as ex:
            return sum(ex.map(functools.partial(one, w), range(64)))
    g, = bytegrad.gradient(f, np.array([1.5, 2.0]))
    assert g[0] == 2 * 1.5 * sum(range(64)) and g[1] == 0.0


def test_thread_pool_gradients_are_the_same_over_100_runs():
    ref = bytegrad.gradient(pool_map, W)[0]
    for _ in range(100):
        assert np.array_equal(bytegrad.gradient(pool_map, W)[0], ref)


def test_lock_passed_in_carries_no_gradient():
    lock = threading.Lock()
    out = []

    def work(w, x):
        with lock:
            out.append(loss(w, x))

    def f(w, lock):
        ts = [threading.Thread(target=work, args=(w, s)) for s in SHARDS]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        with lock:
            return sum(out)
    g, d_lock = bytegrad.gradient(f, W, lock)
    assert d_lock is None
    assert np.allclose(g, bytegrad.gradient(serial, W)[0], rtol=1e-12)


def test_thread_subclass_without_target_is_refused_by_name():
    class Worker(threading.Thread):
        def __init__(self, w):
            super().__init__()
            self.w, self.y = w, None

        def run(self):
            self.y = loss(self.w, SHARDS[0])

    def f(w):
        t = Worker(w)
        t.start()
        t.join()
        return t.y
    with pytest.raises(NotImplementedError, match=r"test_threads_tasks.py:\d+.*Worker.*target="):
        bytegrad.gradient(f, W)


def test_task_error_reaches_the_caller():
    def bad(w, x):
        raise ValueError("bad shard")

    def f(w):
        with ThreadPoolExecutor(2) as ex:
            return sum(ex.map(functools.partial(bad, w), SHARDS))
    with pytest.raises(ValueError, match="bad shard"):
        bytegrad.gradient(f, W)


def test_tasks_filling_a_list_under_fine_thread_switching():
    """Threads switching every microsecond interleave the tasks' reads and writes of the
    shared list: the gradient is the serial one every time."""
    import sys
    ref = bytegrad.gradient(serial, W)[0]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        gs = [bytegrad.gradient(threads_filling_a_list, W)[0] for _ in range(60)]
    finally:
        sys.setswitchinterval(old)
    assert all(np.allclose(g, ref, rtol=1e-12) for g in gs)


def test_task_changing_its_own_arrays_in_place():
    def task(w, x):
        a = np.zeros(3)
        a[0] = loss(w, x)
        a[1:] = w[1:] * a[0]
        return np.sum(a)

    def f(w):
        with ThreadPoolExecutor(2) as ex:
            return sum(ex.map(functools.partial(task, w), SHARDS))
    g = check_grad(f, W)[0]
    assert np.allclose(g, bytegrad.gradient(lambda w: sum(task(w, s) for s in SHARDS), W)[0], rtol=1e-12)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_task_changing_a_shared_array_in_place_is_refused_by_line():
    def f(w):
        out = np.zeros(len(SHARDS))

        def work(i):
            out[i] = loss(w, SHARDS[i])
        ts = [threading.Thread(target=work, args=(i,)) for i in range(len(SHARDS))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return np.sum(out)
    with pytest.raises(NotImplementedError, match=r"test_threads_tasks.py:\d+: a task running in another thread changes in place an array"):
        bytegrad.gradient(f, W)
    for t in threading.enumerate():  # (the threads not joined when the first one's error rose)
        if t.name.endswith("(work)"):
            t.join()


def test_readme_threads_block_runs():
    from checks import readme_blocks
    (threads, _) = readme_blocks("Parallel and distributed")
    assert "ThreadPoolExecutor" in threads
    exec(compile(threads, "README.md", "exec"), {})
