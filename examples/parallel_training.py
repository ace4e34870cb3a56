"""Data-parallel training on a Dask cluster: each step maps the loss of every shard of
the data on the cluster's workers and differentiates the sum, unmodified.  The reverse
pass runs on the workers too (each shard's forward pass is recomputed there with its
pullback); only the parameters, the cotangents and the gradients cross the wire.

    python examples/parallel_training.py                      # a LocalCluster of 2 processes
    python examples/parallel_training.py tcp://scheduler:8786 # a running cluster
"""
import functools
import sys

import numpy as np

import bytegrad


def shard_loss(params, X, y):
    """The logistic loss of one shard, a Python loop over its rows."""
    total = 0.0
    for i in range(len(y)):
        z = X[i] @ params["w"] + params["b"]
        total += np.logaddexp(0.0, -y[i] * z)
    return total / len(y)


def loss(params, shards, client):
    futures = client.map(functools.partial(shard_loss, params), *zip(*shards))
    return sum(client.gather(futures)) / len(shards)


def make_shards(n_shards, rows, dim, seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.standard_normal(dim)
    shards = []
    for _ in range(n_shards):
        X = rng.standard_normal((rows, dim))
        shards.append((X, np.sign(X @ truth + 0.1 * rng.standard_normal(rows))))
    return shards


def train(client, shards, steps, lr=1.0):
    params = {"w": np.zeros(shards[0][0].shape[1]), "b": 0.0}
    history = []
    for _ in range(steps):
        value, (g, _, _) = bytegrad.value_and_gradient(loss, params, shards, client)
        params = {"w": params["w"] - lr * g["w"], "b": params["b"] - lr * g["b"]}
        history.append(value)
    return params, history


def main(address=None, n_shards=8, rows=200, dim=5, steps=20):
    from distributed import Client, LocalCluster
    cluster = None if address else LocalCluster(n_workers=2, threads_per_worker=1)
    with Client(address or cluster) as client:
        params, history = train(client, make_shards(n_shards, rows, dim), steps)
    if cluster is not None:
        cluster.close()
    print(f"loss {history[0]:.4f} -> {history[-1]:.4f} after {steps} steps")
    return params, history


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
