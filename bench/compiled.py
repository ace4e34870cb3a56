"""``python -m bytegrad.bench.compiled``: the compiled tier's targets (issue 12).

Three workloads, each the same unmodified function for both: ``bytegrad.grad(f, jit=True)``
against ``numba.njit(f)``, timed in interleaved rounds in this process (``timer.compare``:
the garbage collector on, the median of per-round ratios and its quartiles, BLAS and numba
pinned to one thread).  The gradient's time is also shown without bytegrad's Python
wrapper (the compiled function called directly, its gradient arrays allocated once), which
is what the tier generates, and beside a gradient written by hand for numba (Rosenbrock
and the nested loop).

- first compile: a new process with an empty cache directory, numba imported first; the
  first gradient (type inference, code generation and numba's compile of it), each
  workload in a process of its own (so each pays numba's one-time setup).
- warm start: a new process with that cache warm; the time from after ``import bytegrad``
  to the first gradient (numba's import included: bytegrad imports numba lazily), the
  median of ``WARM_RUNS`` processes (one process's time varies by half on a busy machine),
  with their extremes.
- tape memory: the bytes of the tapes the steady gradient allocates per value it pushes.
- JAX: ``jax.jit(jax.grad(f))`` of the same function (the Python loop unrolls), compile
  (trace and XLA) apart from the steady time, in a process of its own, abandoned after
  ``--jax-limit`` seconds; ``--no-jax`` skips it.

Writes ``compiled.md`` and ``compiled.json`` into ``--out`` (default ``bench/results``)
and prints the table.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from .cases import matvec_loop as nested  # noqa: E402
from .cases import rosenbrock_iadd as rosenbrock  # noqa: E402  (the loop of issue 9's targets)
from .timer import compare  # noqa: E402

HERE = Path(__file__).resolve().parent
RATIO_MAX, COMPILE_MAX, WARM_MAX, TAPE_MAX = 3.0, 2.0, 0.3, 16.0
WARM_RUNS = 5


def ode(a, b, c):
    y = 1.0
    h = 0.01
    for _ in range(500):
        y = y + h * (-a * y + b * math.sin(c * y))
    return y


def rosenbrock_by_hand(x):
    """Rosenbrock's value and gradient as one would write them for numba."""
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    g = np.zeros_like(x)
    for i in range(len(x) - 2, -1, -1):
        t = x[i + 1] - x[i] ** 2
        g[i + 1] += 200.0 * t
        g[i] += -400.0 * t * x[i] - 2.0 * (1.0 - x[i])
    return s, g


def nested_by_hand(A, x):
    t = 0.0
    dA, dx = np.empty_like(A), np.zeros_like(x)
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            t += A[i, j] * x[j]
            dA[i, j] = x[j]
            dx[j] += A[i, j]
    return t, dA, dx


BY_HAND = {"rosenbrock n=1000": rosenbrock_by_hand, "nested 30x30": nested_by_hand}


def workloads():
    """name → (function, arguments, argnums)."""
    r = np.random.default_rng(0)
    return {"rosenbrock n=1000": (rosenbrock, (r.normal(size=1000),), 0),
            "nested 30x30": (nested, (r.normal(size=(30, 30)), r.normal(size=30)), (0, 1)),
            "ode 500 steps, 3 parameters": (ode, (0.5, 1.2, 0.7), (0, 1, 2))}


def steady(name, budget):
    """Ratios of the gradient (and of its compiled function alone) to the njit primal."""
    import numba

    import bytegrad
    from bytegrad.runtime.compiled import Compiled, _key
    f, args, argnums = workloads()[name]
    primal = numba.njit(f)
    g = bytegrad.grad(f, argnums, jit=True)
    primal(*args)
    g(*args)
    c = Compiled(f, (argnums,) if isinstance(argnums, int) else argnums, True, None)
    c(args, {})
    e = c.entries[_key(args)]
    buffers = [np.zeros_like(a) for a in args if isinstance(a, np.ndarray)]  # (allocated once)
    kernel = lambda: e.fused(*args, 1.0, *e.sizes, *buffers)  # noqa: E731
    fns = {"primal": lambda: primal(*args), "grad": lambda: g(*args), "kernel": kernel}
    ratios = [("grad", "primal"), ("kernel", "primal")]
    if name in BY_HAND:
        hand = numba.njit(BY_HAND[name])
        hand(*args)
        fns["hand"] = lambda: hand(*args)
        ratios.append(("hand", "primal"))
    m = compare(fns, ratios=ratios, budget=budget)
    pushed = sum(e.sizes)
    return {"primal_s": m["times"]["primal"]["median"], "grad_s": m["times"]["grad"]["median"],
            "ratio": m["ratios"]["grad/primal"], "kernel_ratio": m["ratios"]["kernel/primal"],
            "hand_ratio": m["ratios"].get("hand/primal"), "tape_values": pushed, "tape_bytes": 8 * pushed}


_FIRST = """
import sys, time
import numba
from bytegrad.bench.compiled import workloads
t0 = time.perf_counter()
import bytegrad
t1 = time.perf_counter()
f, args, argnums = workloads()[{name!r}]
bytegrad.grad(f, argnums, jit=True)(*args)
print(time.perf_counter() - t1, t1 - t0)
"""
_WARM = _FIRST.replace("import numba\n", "")


def in_process(script, cache, timeout=600):
    env = dict(os.environ, BYTEGRAD_CACHE=cache)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=timeout, check=True).stdout.split()
    return float(out[0])


_JAX = """
import sys, time, math
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
from bytegrad.bench.compiled import workloads
f, args, argnums = workloads()[{name!r}]
g = jax.jit(jax.grad(f, argnums))
t = time.perf_counter()
try:
    jax.block_until_ready(g(*args))
except Exception as e:
    print("n/a", type(e).__name__)
    raise SystemExit
compile_s = time.perf_counter() - t
n, t = 0, time.perf_counter()
while time.perf_counter() - t < 1.0 or n < 5:
    jax.block_until_ready(g(*args))
    n += 1
print(compile_s, (time.perf_counter() - t) / n)
"""


def jax_row(name, limit):
    try:
        out = subprocess.run([sys.executable, "-c", _JAX.format(name=name)],
                             capture_output=True, text=True, timeout=limit).stdout.split()
    except subprocess.TimeoutExpired:
        return f"compile over {limit:.0f} s: abandoned"
    if not out:
        return "n/a (jax not importable)"
    if out[0] == "n/a":
        return f"n/a: the unmodified function fails under jax ({out[1]})"
    return f"{float(out[1]) * 1e6:.1f} µs steady, compile {float(out[0]):.1f} s"


def fmt_ratio(s):
    return f"{s['median']:.2f}× ({s['q1']:.2f}–{s['q3']:.2f})"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bytegrad.bench.compiled", description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=3.0, help="seconds of timing rounds per workload")
    ap.add_argument("--no-jax", action="store_true", help="skip jax.jit(jax.grad)")
    ap.add_argument("--jax-limit", type=float, default=180.0, help="seconds for one jax compile")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args(argv)
    rows, data = [], {}
    for name in workloads():
        s = steady(name, a.budget)
        with tempfile.TemporaryDirectory() as cache:
            first = in_process(_FIRST.format(name=name), cache)
            warms = sorted(in_process(_WARM.format(name=name), cache) for _ in range(WARM_RUNS))
        warm = statistics.median(warms)
        jx = "skipped" if a.no_jax else jax_row(name, a.jax_limit)
        per = s["tape_bytes"] / s["tape_values"] if s["tape_values"] else 0.0
        data[name] = dict(s, first_compile_s=first, warm_start_s=warm, warm_start_runs_s=warms, jax=jx)
        rows.append(f"| {name} | {s['primal_s'] * 1e6:.2f} µs | {s['grad_s'] * 1e6:.2f} µs | "
                    f"{fmt_ratio(s['ratio'])} {'met' if s['ratio']['median'] <= RATIO_MAX else 'NOT met'} | "
                    f"{fmt_ratio(s['kernel_ratio'])} | {fmt_ratio(s['hand_ratio']) if s['hand_ratio'] else '—'} | "
                    f"{first:.2f} s {'met' if first <= COMPILE_MAX else 'NOT met'} | "
                    f"{warm:.2f} s ({warms[0]:.2f}–{warms[-1]:.2f}) {'met' if warm <= WARM_MAX else 'NOT met'} | "
                    f"{s['tape_values']} values, {per:.0f} B each | {jx} |")
    table = "\n".join([
        "| workload | njit primal | bytegrad jit gradient | ratio (target ≤ 3×) | compiled function alone "
        "| hand-written numba gradient | first compile (≤ 2 s) | warm cache, new process (≤ 0.3 s) "
        "| tape (≤ 16 B a value) | jax.jit(grad) |",
        "|---|---|---|---|---|---|---|---|---|---|", *rows])
    print(table)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "compiled.md").write_text(table + "\n")
    (a.out / "compiled.json").write_text(json.dumps(data, indent=1, default=str) + "\n")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t:.0f} s)", file=sys.stderr)
