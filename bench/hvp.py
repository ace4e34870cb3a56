"""``python -m bytegrad.bench.hvp``: issue 11's Hessian-vector product target, bytegrad alone.

``hvp`` (forward over reverse) against the reverse gradient of the same function, for
the Rosenbrock loop over ``x[i]`` (n = 1,000; written ``s = s + …`` and ``s += …``) and the MLP loss (256², batch 64, in
``W1``), with the Rosenbrock loop's ``jvp`` beside them (the tangent code ``hvp``
differentiates); ``hessian`` of the Rosenbrock loop at n = 100 against 100 ``hvp``
calls; and ``jacfwd`` of it, its columns batched, against 100 ``jvp`` calls.  Each ratio comes from interleaved rounds in this one process
(``timer.compare``: one sample of each function per round), with the garbage collector
on, BLAS on one thread and ``--ballast`` (default 10⁶) small live objects held, as
``bench/targets.py`` measures; it is the median over the rounds with its interquartile
range.  The whole measurement is repeated ``--repeat`` times (default 3): the machine
may be loaded by other jobs.

Before timing, each result is checked: the Rosenbrock ``hvp`` against its closed-form
Hessian, the MLP's against central differences of the gradient.

Writes ``hvp.md`` and ``hvp.json`` into ``--out`` (default ``bench/results``) and prints
the table.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
           "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from .cases import _rosenbrock_args, _rosenbrock_grad, rosenbrock, rosenbrock_iadd  # noqa: E402
from .cases_numpy import _mlp_args, mlp  # noqa: E402
from .timer import ballast, compare  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TARGET = 5.0        # hvp / gradient (issue 11)
HESSIAN_TARGET = 1.0  # hessian of a 100-input function / 100 hvps
JVP_TARGET = 1.5    # jvp / gradient


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rosenbrock_hessian_times(x, v):
    """The closed-form Hessian of `cases.rosenbrock` at ``x``, applied to ``v``."""
    a, b = x[:-1], x[1:]
    out = np.zeros_like(x)
    out[:-1] += (1200.0 * a * a - 400.0 * b + 2.0) * v[:-1] - 400.0 * a * v[1:]
    out[1:] += -400.0 * a * v[:-1] + 200.0 * v[1:]
    return out


def _check(name, got, want, tol):
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300)
    if not err <= tol:
        raise AssertionError(f"{name}: wrong Hessian-vector product (rel. error {err:.2g})")


def workloads():
    """``{name: {"gradient": …, "hvp": …}}`` (the Rosenbrock loop's with ``"jvp"``),
    each a call without arguments, checked once."""
    import bytegrad
    out = {}

    (x,) = _rosenbrock_args(1000)
    v = np.random.default_rng(10).standard_normal(x.shape)
    g = bytegrad.grad(rosenbrock)
    _check("rosenbrock", bytegrad.hvp(rosenbrock, (x,), (v,)), rosenbrock_hessian_times(x, v), 1e-12)
    out["Rosenbrock loop over `x[i]`, n = 1,000"] = {
        "gradient": lambda: g(x), "hvp": lambda: bytegrad.hvp(rosenbrock, (x,), (v,)),
        "jvp": lambda: bytegrad.jvp(rosenbrock, (x,), (v,))}
    gi = bytegrad.grad(rosenbrock_iadd)  # (the form the README writes: ``s += …``)
    _check("rosenbrock +=", bytegrad.hvp(rosenbrock_iadd, (x,), (v,)), rosenbrock_hessian_times(x, v), 1e-12)
    out["the same written `s += …`"] = {
        "gradient": lambda: gi(x), "hvp": lambda: bytegrad.hvp(rosenbrock_iadd, (x,), (v,)),
        "jvp": lambda: bytegrad.jvp(rosenbrock_iadd, (x,), (v,))}

    args = _mlp_args()
    V = np.random.default_rng(11).standard_normal(args[0].shape)
    tangents = (V,) + (None,) * (len(args) - 1)
    gm = bytegrad.grad(mlp)
    h = 1e-5
    fd = (gm(args[0] + h * V, *args[1:]) - gm(args[0] - h * V, *args[1:])) / (2 * h)
    _check("mlp", bytegrad.hvp(mlp, args, tangents), fd, 1e-6)
    out["MLP 256², batch 64, d/dW1"] = {"gradient": lambda: gm(*args),
                                        "hvp": lambda: bytegrad.hvp(mlp, args, tangents)}
    return out


def _against_columns(name, whole, column, want):
    """``(whole(x), a loop of column(x, e) over the basis)`` for the Rosenbrock loop at
    n = 100, ``whole(x)`` first checked against ``want(x)``."""
    x = _rosenbrock_args(100)[0]
    eye = np.eye(len(x))
    _check(name, whole(x), want(x), 1e-12)

    def columns():
        for e in eye:
            column(x, e)
    return (lambda: whole(x)), columns


def hessian_pair():
    """``(hessian of the Rosenbrock loop at n = 100, 100 hvps)``, checked."""
    import bytegrad
    return _against_columns("hessian", bytegrad.hessian(rosenbrock),
                            lambda x, e: bytegrad.hvp(rosenbrock, (x,), (e,)),
                            lambda x: np.stack([rosenbrock_hessian_times(x, e) for e in np.eye(len(x))]))


def jacfwd_pair():
    """``(jacfwd of the Rosenbrock loop at n = 100, 100 jvps)``, checked against the
    closed-form gradient: the batched columns (runtime/batching.py) against one jvp per
    column."""
    import bytegrad
    return _against_columns("jacfwd", bytegrad.jacfwd(rosenbrock),
                            lambda x, e: bytegrad.jvp(rosenbrock, (x,), (e,)),
                            lambda x: _rosenbrock_grad(x)[0])


# (name, what it is measured against, target or None, the table's label)
PAIRS = (("hessian", "100 hvps", HESSIAN_TARGET, "`hessian` of the Rosenbrock loop, n = 100 (batched)"),
         ("jacfwd", "100 jvps", None, "`jacfwd` of the Rosenbrock loop, n = 100 (batched)"))


def fmt_ratio(r):
    return f"{r['median']:.2f}× [{r['q1']:.2f}–{r['q3']:.2f}]"


def fmt_ms(t):
    return f"{t['median'] * 1e3:.2f} ms [{t['q1'] * 1e3:.2f}–{t['q3'] * 1e3:.2f}]"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=6.0, help="seconds per measurement")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ballast", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-hessian", action="store_true",
                    help="skip hessian against 100 hvps and jacfwd against 100 jvps")
    a = ap.parse_args(argv)
    keep = ballast(a.ballast)  # noqa: F841  (held while measuring)
    work = workloads()
    pairs = {} if a.no_hessian else {"hessian": hessian_pair(), "jacfwd": jacfwd_pair()}
    runs = []
    for rep in range(a.repeat):
        run = {}
        for name, fns in work.items():
            log(f"[{rep + 1}/{a.repeat}] {name}")
            run[name] = compare(fns, ratios=[(k, "gradient") for k in fns if k != "gradient"],
                                budget=a.budget)
        for name, against, _, _ in PAIRS:
            if name in pairs:
                log(f"[{rep + 1}/{a.repeat}] {name}, n = 100")
                run[name] = compare({name: pairs[name][0], against: pairs[name][1]},
                                    ratios=[(name, against)], budget=a.budget)
        runs.append(run)

    lines = ["# Hessian-vector products (issue 11)", "",
             f"Interleaved rounds in one process, garbage collector on, BLAS on one thread, "
             f"{a.ballast:,} objects of ballast; median [interquartile range] of each of "
             f"{a.repeat} repeats. Commit {_commit()}, Python {sys.version.split()[0]}.", "",
             "| workload | repeat | gradient | hvp | hvp / gradient | target | verdict |",
             "|---|---|---|---|---|---|---|"]
    for name in work:
        for i, run in enumerate(runs):
            m = run[name]
            r = m["ratios"]["hvp/gradient"]
            lines.append(f"| {name} | {i + 1} | {fmt_ms(m['times']['gradient'])} | "
                         f"{fmt_ms(m['times']['hvp'])} | {fmt_ratio(r)} | ≤ {TARGET:g}× | "
                         f"{'met' if r['median'] <= TARGET else 'NOT met'} |")
    jv = [(name, i, run[name]) for name in work for i, run in enumerate(runs)
          if "jvp/gradient" in run[name]["ratios"]]
    if jv:
        lines += ["", "| workload | repeat | jvp | jvp / gradient | target | verdict |",
                  "|---|---|---|---|---|---|"]
        for name, i, m in jv:
            r = m["ratios"]["jvp/gradient"]
            lines.append(f"| {name} | {i + 1} | {fmt_ms(m['times']['jvp'])} | {fmt_ratio(r)} | "
                         f"≤ {JVP_TARGET:g}× | {'met' if r['median'] <= JVP_TARGET else 'NOT met'} |")
    for name, against, target, label in PAIRS:
        if name not in pairs:
            continue
        lines += ["", f"| workload | repeat | {name} | {against} | {name} / {against} | target | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for i, run in enumerate(runs):
            m = run[name]
            r = m["ratios"][f"{name}/{against}"]
            verdict = "—" if target is None else "met" if r["median"] <= target else "NOT met"
            lines.append(f"| {label} | {i + 1} | {fmt_ms(m['times'][name])} | "
                         f"{fmt_ms(m['times'][against])} | {fmt_ratio(r)} | "
                         f"{'—' if target is None else f'≤ {target:g}×'} | {verdict} |")
    text = "\n".join(lines) + "\n"
    print(text)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "hvp.md").write_text(text)
    (a.out / "hvp.json").write_text(json.dumps(runs, indent=1))


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                              capture_output=True).stdout.strip() or "?"
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
