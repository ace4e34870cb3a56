"""A ProcessPoolExecutor's tasks go back in worker processes: the reverse pass
recomputes each task's forward pass on a worker with its pullback.  Gradients against
the serial computation and finite differences; a worker killed between the passes."""
from __future__ import annotations

import functools
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np
import pytest

import bytegrad
from checks import check_grad
from sharded import SHARDS, W, loss, serial, serial_weighted


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(2) as ex:
        yield ex


def pool_map(w, ex):
    return sum(ex.map(functools.partial(loss, w), SHARDS, timeout=60))


def pool_submit(w, ex):
    fs = [ex.submit(loss, w, s) for s in SHARDS]
    return sum(f.result(timeout=60) for f in fs)


def pool_as_completed(w, ex):
    fs = {ex.submit(loss, w, s): k for k, s in enumerate(SHARDS)}
    return sum((fs[f] + 1) * f.result() for f in as_completed(fs, timeout=60))


@pytest.mark.parametrize("f, ref", [(pool_map, serial), (pool_submit, serial),
                                    (pool_as_completed, serial_weighted)],
                         ids=lambda f: getattr(f, "__name__", ""))
def test_pattern_matches_serial_and_finite_differences(pool, f, ref):
    g = bytegrad.gradient(f, W, pool)[0]
    assert np.allclose(g, bytegrad.gradient(ref, W)[0], rtol=1e-12, atol=0)
    check_grad(lambda w: f(w, pool), W)


def test_pool_closed_by_with_goes_back_on_a_new_pool():
    def f(w):
        with ProcessPoolExecutor(2) as ex:
            return sum(ex.map(functools.partial(loss, w), SHARDS, timeout=60))
    g = check_grad(f, W)[0]
    assert np.allclose(g, bytegrad.gradient(serial, W)[0], rtol=1e-12, atol=0)


def test_worker_killed_between_the_passes_gives_the_gradient():
    with ProcessPoolExecutor(2) as ex:
        y, back = bytegrad.pullback(pool_submit, W, ex)
        os.kill(next(iter(ex._processes)), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not ex._broken and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ex._broken
        g, _ = back(1.0)
    assert np.isclose(y, serial(W), rtol=1e-12)
    assert np.allclose(g, bytegrad.gradient(serial, W)[0], rtol=1e-12, atol=0)


def noisy(w, x):
    return loss(w, x) + 1e-3 * np.random.default_rng().standard_normal()


def test_task_that_computes_another_value_when_recomputed_is_refused(pool):
    def f(w):
        return sum(pool.map(functools.partial(noisy, w), SHARDS, timeout=60))
    with pytest.raises(RuntimeError, match=r"test_processes.py:\d+: the task .*noisy gave another value when its forward pass was run again"):
        bytegrad.gradient(f, W)


def failing(w, x):
    if x[0] < -2:
        raise ValueError("shard rejected")
    return loss(w, x)


def test_task_that_raised_and_was_caught_gets_no_gradient(pool):
    def f(w):
        total = 0.0
        for fut in [pool.submit(failing, w, s) for s in SHARDS]:
            try:
                total = total + fut.result(timeout=60)
            except ValueError:
                pass
        return total
    kept = [s for s in SHARDS if s[0] >= -2]
    assert 0 < len(kept) < len(SHARDS)
    g = check_grad(f, W)[0]
    assert np.allclose(g, bytegrad.gradient(lambda w: sum(loss(w, s) for s in kept), W)[0], rtol=1e-12)


def _note(log, span):  # (given only strings: runs plainly)
    with open(os.path.join(log, f"{os.getpid()}-{time.time_ns()}"), "w") as f:
        f.write(span)


def sleepy(w, x, log):
    start = time.time()
    time.sleep(0.3)
    _note(log, f"{start} {time.time()}")
    return w * x


def test_reverse_tasks_run_in_parallel_on_the_workers(pool, tmp_path):
    """Two tasks' recomputations overlap in time, on two worker processes."""
    def f(w):
        return sum(pool.map(functools.partial(sleepy, w, log=str(tmp_path)), [1.0, 2.0], timeout=60))
    _, back = bytegrad.pullback(f, 1.5)
    forward_done = time.time()
    assert back(1.0) == (3.0,)
    spans = [(name.split("-")[0], *map(float, (tmp_path / name).read_text().split()))
             for name in os.listdir(tmp_path)]
    going_back = [s for s in spans if s[1] >= forward_done]
    assert len(going_back) == 2 and going_back[0][0] != going_back[1][0]
    (_, a0, a1), (_, b0, b1) = going_back
    assert max(a0, b0) < min(a1, b1)  # they ran at the same time


def unruly(w, x):
    import struct
    return struct.unpack("d", struct.pack("d", w[0] * x[0]))[0]


def test_error_in_a_task_going_back_reaches_the_caller_and_the_pool_survives(pool):
    def f(w):
        return sum(pool.map(functools.partial(unruly, w), SHARDS, timeout=60))
    with pytest.raises(Exception, match="struct.pack has no differentiation rule"):
        bytegrad.gradient(f, W)
    assert np.allclose(bytegrad.gradient(pool_map, W, pool)[0], bytegrad.gradient(serial, W)[0], rtol=1e-12)
