"""The fused numba kernels of the elementwise pullbacks (``primitives/np_elementwise.py``)
against the NumPy expressions they replace.

``python -m bytegrad.bench.kernels_elementwise [--quick]`` prints, for each function
with a kernel and several array sizes (float64 and float32), the time of its whole
pullback ``back(dy)`` as bytegrad runs it

* ``numpy``: with the kernels off (the NumPy expression, temporaries reused in place);
* ``kernel``: with the kernel forced on at every size,

and their ratio.  bytegrad uses a kernel from `BIG` elements on (4 `BIG` where it saves
NumPy only one pass over memory: exp2 expm1 log2 log10 log1p sqrt square); below that
the call overhead, and the one-time import of numba, are not worth it.  It also prints the cost
of the first kernel call (import of numba, then the on-disk cache or a compile).
Threads are pinned to one (``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1``).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bytegrad.bench.timer import measure  # noqa: E402
from bytegrad.primitives import _util, np_elementwise as npe  # noqa: E402
from bytegrad.runtime.rules import RULES  # noqa: E402

# (name, rule called with x, domain of x)
CASES = [(f.__name__, (lambda f: lambda x: RULES[f](x))(f), lo, hi)
         for fs, _, _, fuse in npe.UNARY if fuse for f in fs[:1]
         for lo, hi in [{np.arcsin: (-0.9, 0.9), np.arccos: (-0.9, 0.9), np.arctanh: (-0.9, 0.9),
                         np.log1p: (-0.5, 3), np.log2: (0.1, 3), np.log10: (0.1, 3),
                         np.sqrt: (0.1, 3), np.reciprocal: (0.5, 3),
                         np.arccosh: (1.1, 3)}.get(f, (-2, 2))]]
CASES += [
    ("expit (formula)", lambda x: npe.unary_rule(np.tanh, npe.MUL, npe.SCIPY_UNARY[0][2],
                                                 npe.SCIPY_UNARY[0][3])(x), -2, 2),
    ("abs", lambda x: RULES[np.abs](x), -2, 2),
    ("maximum(x, 0)", lambda x: RULES[np.maximum](x, 0.0), -2, 2),
    ("clip(x, -1, 1)", lambda x: RULES[np.clip](x, -1.0, 1.0), -2, 2),
    ("where(x>0, x, 0)", lambda x: RULES[np.where](x > 0, x, 0.0), -2, 2),
]
SIZES = (10_000, 40_000, 100_000, 1_000_000)


def _grad(back, d):
    g = back(d)
    return g[1] if g[1] is not None else g[2]  # where(cond, x, 0): the gradient of x


def main(quick: bool = False):
    t0 = time.perf_counter()
    had_numba = "numba" in sys.modules
    x = np.linspace(-1, 1, _util.BIG)
    _grad(RULES[np.tanh](x)[1], x)
    print(f"first kernel call: {(time.perf_counter() - t0) * 1e3:.0f} ms "
          f"(numba {'already' if had_numba else 'newly'} imported)")
    sizes = SIZES[:3] if quick else SIZES
    budget = 0.3 if quick else 1.0
    rng = np.random.default_rng(0)
    print(f"bytegrad uses the kernels from {_util.BIG} elements on; times in microseconds "
          f"(median of at least 5 samples, garbage collector on), numpy / kernel")
    print(f"{'pullback':>16} {'dtype':>8} | " + " | ".join(f"{n:>22}" for n in sizes))
    big = _util.BIG
    try:
        for name, make, lo, hi in CASES:
            for dtype in (np.float64, np.float32):
                row = []
                for n in sizes:
                    x = rng.uniform(lo, hi, n).astype(dtype)
                    d = rng.standard_normal(n).astype(dtype)
                    back = make(x)[1]
                    times = []
                    for limit in (10 ** 12, 0):
                        _util.BIG = limit
                        _grad(back, d)  # compile or load from the cache
                        times.append(measure(lambda: _grad(back, d), min_time=0.02,
                                             budget=budget)["median"])
                    row.append(f"{times[0] * 1e6:8.1f} /{times[1] * 1e6:8.1f} "
                               f"{times[0] / times[1]:4.1f}x")
                print(f"{name:>16} {np.dtype(dtype).name:>8} | " + " | ".join(row), flush=True)
    finally:
        _util.BIG = big


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
