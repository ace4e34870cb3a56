"""``python -m bytegrad.bench.parallel``: the targets of issue 13, data-parallel gradients.

The loss is a sum over 8 shards, each a Python loop (`shard_loss`) of at least 50 ms
plain; its gradient is taken with the shards mapped on a pool of 1 worker process and on
one of 2, for a ``ProcessPoolExecutor`` and for a Dask ``LocalCluster`` (2 processes of
one thread each, on loopback).  Both pools of a kind stay open while they are timed in
interleaved rounds in this one process (``timer.compare``, the collector on), so each
ratio (1 worker ÷ 2 workers) is the median over rounds with its interquartile range.
The gradients are checked against the serial computation's (``bytegrad.gradient`` of the
same sum in this process): the largest relative difference must stay under 1e-12.

Writes ``parallel.md`` and ``parallel.json`` into ``--out`` (default ``bench/results``)
with the load average before and after, and prints the table.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import bytegrad  # noqa: E402

from .timer import compare  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SHARDS = 8
SPEEDUP = 1.5   # the target: 2 workers at least this much faster than 1
AGREE = 1e-12   # relative difference from the serial gradient


def shard_loss(w, x):
    """One shard's loss: a Python loop over its points."""
    s = 0.0
    for i in range(len(x)):
        r = w[0] * x[i] + w[1] - w[2] * x[i] * x[i]
        s += r * r
    return s / len(x)


def shards(n, k=SHARDS):
    rng = np.random.default_rng(13)
    return [rng.standard_normal(n) for _ in range(k)]


def loss(w, data, pool):
    return sum(pool.map(functools.partial(shard_loss, w), data))


def serial(w, data):
    return sum(shard_loss(w, x) for x in data)


def rel_error(g, ref):
    return float(np.max(np.abs(g - ref)) / np.max(np.abs(ref)))


def points_for(ms):
    """How many points make one shard's plain loop take ``ms`` milliseconds here."""
    x = shards(20000, 1)[0]
    w = np.array([0.5, -0.2, 0.1])
    t = time.perf_counter()
    shard_loss(w, x)
    per = (time.perf_counter() - t) / len(x)
    return max(1000, int(ms / 1000 / per))


def measure(kind, pools, w, data, budget):
    """The two pools' gradient times, their ratio, and each gradient's error."""
    ref = bytegrad.gradient(serial, w, data)[0]
    fns = {k: (lambda p=p: bytegrad.gradient(loss, w, data, p)[0]) for k, p in pools.items()}
    errors = {k: rel_error(f(), ref) for k, f in fns.items()}
    m = compare(fns, ratios=[("1 worker", "2 workers")], budget=budget, min_time=0.0,
                min_rounds=3, max_rounds=50)
    return {"kind": kind, "times": m["times"], "ratio": m["ratios"]["1 worker/2 workers"],
            "rel_error": errors}


def process_pools(w, data, budget):
    with ProcessPoolExecutor(1) as one, ProcessPoolExecutor(2) as two:
        return measure("ProcessPoolExecutor", {"1 worker": one, "2 workers": two}, w, data, budget)


def dask_clusters(w, data, budget):
    from distributed import Client, LocalCluster
    opts = dict(threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0")
    with LocalCluster(n_workers=1, **opts) as c1, LocalCluster(n_workers=2, **opts) as c2, \
            Client(c1) as one, Client(c2) as two:
        pools = {"1 worker": one.get_executor(), "2 workers": two.get_executor()}
        return measure("Dask LocalCluster", pools, w, data, budget)


def markdown(data):
    lines = [f"Data-parallel gradient, {SHARDS} shards of a Python loop ({data['points']} points, "
             f"{data['shard_ms']:.0f} ms plain each), CPython {data['python']}, load average "
             f"{data['load_before']} before, {data['load_after']} after; time per gradient, "
             f"median (interquartile range) over {data['rounds']} interleaved rounds:", "",
             "| pool | 1 worker | 2 workers | speedup | target | max rel. error vs serial | verdict |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in data["results"]:
        t1, t2, s = r["times"]["1 worker"], r["times"]["2 workers"], r["ratio"]
        err = max(r["rel_error"].values())
        ok = s["median"] >= SPEEDUP and err <= AGREE
        lines.append(f"| {r['kind']} | {t1['median']:.2f} s | {t2['median']:.2f} s | "
                     f"{s['median']:.2f}× ({s['q1']:.2f}–{s['q3']:.2f}) | ≥ {SPEEDUP}× | "
                     f"{err:.1e} | {'met' if ok else '**not met**'} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bytegrad.bench.parallel",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--shard-ms", type=float, default=60.0,
                    help="milliseconds of one shard's plain loop (the target asks >= 50)")
    ap.add_argument("--budget", type=float, default=40.0, help="seconds of rounds per pool kind")
    ap.add_argument("--no-dask", action="store_true", help="only the ProcessPoolExecutor")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    n = points_for(a.shard_ms)
    data, w = shards(n), np.array([0.5, -0.2, 0.1])
    t = time.perf_counter()
    shard_loss(w, data[0])
    out = {"python": sys.version.split()[0], "points": n,
           "shard_ms": 1000 * (time.perf_counter() - t), "load_before": os.getloadavg(),
           "results": [process_pools(w, data, a.budget)]}
    if not a.no_dask:
        out["results"].append(dask_clusters(w, data, a.budget))
    out["load_after"] = os.getloadavg()
    out["rounds"] = min(r["ratio"]["samples"] for r in out["results"])
    out["load_before"] = " ".join(f"{x:.2f}" for x in out["load_before"])
    out["load_after"] = " ".join(f"{x:.2f}" for x in out["load_after"])
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "parallel.json").write_text(json.dumps(out, indent=1))
    table = markdown(out)
    (a.out / "parallel.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
