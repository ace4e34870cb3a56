"""The data-parallel loss the tests of tasks share (threads, processes, Dask): a module
of its own, so that worker processes import its functions by name."""
import numpy as np

SHARDS = [np.linspace(-1.0, 1.0, 6) * (k + 1) for k in range(4)]
W = np.array([0.3, -0.2, 0.5])


def loss(w, x):
    s = 0.0
    for i in range(len(x)):
        s += np.tanh(w[i % 3] * x[i]) ** 2
    return s


def serial(w):
    return sum(loss(w, s) for s in SHARDS)


def serial_weighted(w):
    """The sum with shard k weighted k + 1 (so that the tasks are told apart)."""
    return sum((k + 1) * loss(w, s) for k, s in enumerate(SHARDS))
