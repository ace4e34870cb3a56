"""Dask: Client.submit/map/gather, Future.result, and client.get_executor() as a
concurrent.futures executor, on a LocalCluster of 2 worker processes on loopback.
Each task goes back as a task on the cluster (its forward pass recomputed there)."""
from __future__ import annotations

import functools
import pathlib
import sys
from concurrent.futures import as_completed

import numpy as np
import pytest

import bytegrad
from checks import check_grad
from sharded import SHARDS, W, loss, serial, serial_weighted

distributed = pytest.importorskip("distributed")  # the dask extra (installed by dev)

# The example's functions are pickled by reference: the worker processes, which start
# with this process's sys.path, import it as the test does.
EXAMPLES = str(pathlib.Path(bytegrad.__file__).parent / "examples")
if EXAMPLES not in sys.path:
    sys.path.append(EXAMPLES)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=":0")
    c = distributed.Client(cluster, timeout=60)
    yield c
    c.close()
    cluster.close()


def client_map_gather(w, c):
    return sum(c.gather(c.map(functools.partial(loss, w), SHARDS)))


def client_submit_result(w, c):
    fs = [c.submit(loss, w, s) for s in SHARDS]
    return sum(f.result(timeout=60) for f in fs)


def client_gather_dict(w, c):
    fs = {k: c.submit(loss, w, s, pure=False) for k, s in enumerate(SHARDS)}
    got = c.gather(fs)
    return sum((k + 1) * v for k, v in got.items())


def executor_map(w, c):
    return sum(c.get_executor().map(functools.partial(loss, w), SHARDS, timeout=60))


def executor_as_completed(w, c):
    ex = c.get_executor()
    fs = {ex.submit(loss, w, s): k for k, s in enumerate(SHARDS)}
    return sum((fs[f] + 1) * f.result() for f in as_completed(fs, timeout=60))


@pytest.mark.parametrize("f, ref", [
    (client_map_gather, serial), (client_submit_result, serial),
    (client_gather_dict, serial_weighted), (executor_map, serial),
    (executor_as_completed, serial_weighted)], ids=lambda f: getattr(f, "__name__", ""))
def test_pattern_matches_serial(client, f, ref):
    g = bytegrad.gradient(f, W, client)[0]
    assert np.allclose(g, bytegrad.gradient(ref, W)[0], rtol=1e-12, atol=0)


def test_client_map_matches_finite_differences(client):
    check_grad(lambda w: client_map_gather(w, client), W)


def test_closed_client_is_named_at_the_pullback(client):
    with distributed.Client(client.scheduler.address, timeout=60) as c:
        _, back = bytegrad.pullback(client_submit_result, W, c)
    with pytest.raises(RuntimeError, match="Dask client was closed before the pullback"):
        back(1.0)


def test_example_trains_data_parallel_on_the_cluster(client):
    import parallel_training as ex  # (examples/ is on the workers' path: see EXAMPLES)
    shards = ex.make_shards(4, 20, 3)
    params = {"w": np.array([0.2, -0.1, 0.3]), "b": 0.1}
    g = bytegrad.gradient(ex.loss, params, shards, client)[0]
    serial = lambda p: sum(ex.shard_loss(p, X, y) for X, y in shards) / len(shards)
    r = bytegrad.gradient(serial, params)[0]
    assert np.allclose(g["w"], r["w"], rtol=1e-12) and np.isclose(g["b"], r["b"], rtol=1e-12)
    check_grad(lambda w, b: ex.loss({"w": w, "b": b}, shards, client), params["w"], params["b"])
    _, history = ex.train(client, shards, steps=3)
    assert history[-1] < history[0]


def test_readme_cluster_block_runs():
    from checks import readme_blocks
    (_, cluster) = readme_blocks("Parallel and distributed")
    assert "LocalCluster" in cluster
    exec(compile(cluster, "README.md", "exec"), {})


def test_worker_killed_between_the_passes_gives_the_gradient(client):
    """(Last: the cluster's nanny restarts the worker meanwhile.)"""
    import os
    import signal
    y, back = bytegrad.pullback(client_submit_result, W, client)
    pid = next(iter(client.run(os.getpid).values()))
    os.kill(pid, signal.SIGKILL)
    g, _ = back(1.0)
    assert np.isclose(y, serial(W), rtol=1e-12)
    assert np.allclose(g, bytegrad.gradient(serial, W)[0], rtol=1e-12, atol=0)
