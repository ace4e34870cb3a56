"""The numba kernel `scatter_add` against ``np.add.at``, the two ways the gradient
of ``x[idx]`` adds up repeated indices (``primitives/np_indexing.py``).

``python -m bytegrad.bench.kernels_indexing`` prints, for 1-D gathers
``x[idx]`` and row gathers ``X[idx]`` of several sizes, the time of

* ``add.at``: ``np.add.at(g, idx, d)`` on the index as given;
* ``add.at flat``: ``np.add.at`` on the flat positions (``np.ravel_multi_index`` for
  rows), the 1-D fast path NumPy has for it;
* ``scatter``: `kernels.scatter_add` on the flat positions (their computation included);
* ``gradient``: the whole pullback of ``x[idx]`` as bytegrad runs it,

and the one-time cost of the kernel's first call (import of numba, then the on-disk
cache or a compile), which is why small accumulations stay with ``np.add.at``
(`np_indexing.SCATTER_MIN`).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from bytegrad.bench.timer import measure
from bytegrad.primitives import np_indexing
from bytegrad.primitives.kernels import scatter_add


def _flat(idx, shape):
    return np_indexing._flat_index(shape, idx).reshape(-1)


def main(quick: bool = False):
    t0 = time.perf_counter()
    had_numba = "numba" in sys.modules
    scatter_add(np.zeros(2), np.zeros(1, np.intp), np.ones(1))
    first = time.perf_counter() - t0
    print(f"scatter_add first call: {first * 1e3:.0f} ms "
          f"(numba {'already' if had_numba else 'newly'} imported)")
    rng = np.random.default_rng(0)
    cases = [((1_000,), 100), ((1_000,), 1_000), ((10_000,), 10_000), ((100_000,), 100_000),
             ((1_000_000,), 1_000_000), ((1_000, 10), 1_000), ((1_000, 100), 1_000),
             ((100, 1_000), 1_000), ((10_000, 3), 10_000)]
    if quick:
        cases = cases[:3]
    budget = 0.5 if quick else 2.0
    print(f"{'x shape':>14} {'len(idx)':>9} {'elements':>9} | {'add.at':>10} "
          f"{'add.at flat':>12} {'scatter':>10} {'gradient':>10}  (microseconds, medians)")
    for shape, m in cases:
        idx = rng.integers(0, shape[0], m)
        d = rng.standard_normal((m,) + shape[1:])
        g = np.zeros(shape)
        gf = g.reshape(-1)
        dv = d.reshape(-1)
        times = [
            measure(lambda: np.add.at(g, idx, d), budget=budget)["median"],
            measure(lambda: np.add.at(gf, _flat(idx, shape), dv), budget=budget)["median"],
            measure(lambda: scatter_add(gf, _flat(idx, shape), dv), budget=budget)["median"],
            measure(lambda: np_indexing.accumulate(shape, g.dtype, idx, d), budget=budget)["median"],
        ]
        print(f"{str(shape):>14} {m:>9} {d.size:>9} | " + " ".join(
            f"{t * 1e6:>{w}.1f}" for t, w in zip(times, (10, 12, 10, 10))))
    print(f"bytegrad uses np.add.at up to {np_indexing._ADD_AT_MAX} elements, np.add.at on flat "
          f"positions below {np_indexing.SCATTER_MIN}, scatter_add from there on")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
