"""``python -m bytegrad.bench.targets``: the targets of issue 9, bytegrad alone.

Every speed ratio is measured in this one process, which holds ``--ballast`` (default
10⁶) small live objects besides its own, with the garbage collector on; each comes from
interleaved rounds (``timer.compare``: one sample of each function per round) and is the
median over the rounds, with its interquartile range.  Two ratios of ratios (Rosenbrock
at n = 100,000 against n = 1,000) take the median of each, with a spread made of their
quartiles.  Tape memory is the ``tracemalloc`` peak of one gradient over what was traced
before it.  Transform times come from fresh processes (as the README's example runs):
the first gradient minus the median of the warm ones after it, once the library's own
one-time setup is done (a gradient of an unrelated function); the README example is also
timed without that warm-up.  The transform-time curve runs each size in a process of its
own, abandoned after ``--transform-limit`` seconds.

Writes ``targets.md`` and ``targets.json`` into ``--out`` (default ``bench/results``)
and prints the table; ``python -m bytegrad.bench --targets`` runs this alone, and
``python -m bytegrad.bench`` runs it with the peers (in a process of its own).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
           "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from .cases import BY_NAME, max_rel_error  # noqa: E402
from .timer import ballast, compare, live_objects, stats  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
EXAMPLE = HERE.parent / "examples" / "example.py"
WRONG = 1e-6
CURVE = (25, 100, 300)      # statements of the transform-time curve
CURVE_MAX = 1.0             # seconds at 300 statements
CURVE_GROWTH = 1.5          # near-linear: the time per statement grows at most this much
TRANSFORM_MAX = 0.150       # seconds for the README example


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def interpreter() -> dict:
    return {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "build": sys.version, "executable": sys.executable}


# ------------------------------------------------------------------------------- rows

def row(workload, measured, target, verdict, kind="ratio", note=""):
    """One line of the table: ``measured`` is a ``timer.stats`` record (or None),
    ``kind`` says how to print it (ratio, change, seconds, bytes)."""
    return {"workload": workload, "measured": measured, "kind": kind, "target": target,
            "verdict": verdict, "note": note}


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def ratio_of(a: dict, b: dict) -> dict:
    """``a / b`` of two stats records: the medians' ratio, and a spread from their
    quartiles (a's lower over b's upper, a's upper over b's lower)."""
    return {"median": a["median"] / b["median"], "q1": a["q1"] / b["q3"],
            "q3": a["q3"] / b["q1"], "min": a["min"] / b["max"], "max": a["max"] / b["min"],
            "samples": min(a["samples"], b["samples"]), "number": 1, "gc": a["gc"],
            "derived": True}


def checked(case, args):
    """bytegrad's gradient of ``case`` at ``args`` (a call), checked; raises if wrong."""
    import bytegrad
    g = bytegrad.grad(case.fn, argnums=tuple(case.wrt))

    def call():
        return g(*args)
    err = max_rel_error([np.asarray(v) for v in call()], case.reference(*args))
    if err > WRONG:
        raise AssertionError(f"{case.name}: wrong gradient (rel. error {err:.2g})")
    return call


# ------------------------------------------------------------------------ measurements

def rosenbrock(rows, raw, budget):
    iadd, assign = BY_NAME["rosenbrock_iadd"], BY_NAME["rosenbrock_loop"]
    (x,) = iadd.make_args()
    m = compare({"primal +=": lambda: iadd.fn(x), "gradient +=": checked(iadd, (x,)),
                 "primal = +": lambda: assign.fn(x), "gradient = +": checked(assign, (x,))},
                ratios=[("gradient +=", "primal +="), ("gradient = +", "primal = +"),
                        ("gradient +=", "gradient = +")], budget=budget)
    raw["rosenbrock_1000"] = m
    r = m["ratios"]["gradient +=/primal +="]
    rows.append(row("Rosenbrock loop over `x[i]`, `s += …`, n = 1,000: gradient / primal", r,
                    "≤ 12×", met(r["median"] <= 12)))
    q = m["ratios"]["gradient = +/primal = +"]
    rows.append(row("the same written `s = s + …`: gradient / primal", q, "—", "—",
                    note="for reference"))
    c = m["ratios"]["gradient +=/gradient = +"]
    rows.append(row("`s +=` form against `s = s +` form: gradient time", c, "within 5%",
                    met(abs(c["median"] - 1) <= 0.05), kind="change"))

    (xl,) = _rosenbrock_args(100_000)
    big = compare({"primal": lambda: iadd.fn(xl), "gradient": checked(iadd, (xl,))},
                  ratios=[("gradient", "primal")], budget=budget, min_rounds=3)
    raw["rosenbrock_100000"] = big
    rb = big["ratios"]["gradient/primal"]
    rows.append(row("Rosenbrock `s +=`, n = 100,000: gradient / primal", rb, "—", "—",
                    note="for the next line"))
    g = ratio_of(rb, r)
    rows.append(row("Rosenbrock ratio at n = 100,000 ÷ ratio at n = 1,000", g, "≤ 1.3×",
                    met(g["median"] <= 1.3)))


def _rosenbrock_args(n):
    from .cases import _rosenbrock_args as make
    return make(n)


def tape_memory(rows, raw):
    """The tracemalloc peak of one gradient, over what was traced before it, per
    iteration (n - 1 of them; the gradient array's own 8 bytes per element included)."""
    case = BY_NAME["rosenbrock_iadd"]
    out = {}
    for n, repeat in ((1_000, 3), (10_000, 1)):
        (x,) = _rosenbrock_args(n)
        call = checked(case, (x,))
        call()
        per = []
        for _ in range(repeat):
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                call()
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            per.append((peak - before) / (n - 1))
        s = out[n] = stats(per)
        rows.append(row(f"tape memory, Rosenbrock `s +=`, n = {n:,}: tracemalloc peak of one "
                        f"gradient ÷ iterations", s, "≤ 600 B per iteration",
                        met(s["median"] <= 600), kind="bytes"))
    raw["tape_memory"] = out


def peak_memory(rows, raw):
    """The tracemalloc peak of one MLP gradient against the primal's, each after a first
    call (the gradient arrays the library reuses from call to call are not counted)."""
    case = BY_NAME["mlp"]
    args = case.make_args()
    out = {}
    for name, call in (("primal", lambda: case.fn(*args)), ("gradient", checked(case, args))):
        call()
        tracemalloc.start()
        try:
            call()
            out[name] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    raw["peak_memory"] = out
    rows.append(row("peak memory, MLP 256², batch 64: tracemalloc peak of one gradient",
                    stats([out["gradient"]]), "—", "—", kind="bytes",
                    note=f"the primal's {out['primal']:,} B"))


def methods(rows, raw, budget):
    out = {}
    for what, counted, plain in (("vectorised with NumPy", "method_nfev", "method"),
                                 ("by a loop over `x[i]`", "method_loop_nfev", "method_loop")):
        a, b = BY_NAME[counted], BY_NAME[plain]
        (x,) = a.make_args()
        m = compare({"counted": checked(a, (x,)), "plain": checked(b, (x,))},
                    ratios=[("counted", "plain")], budget=budget)
        out[counted] = m
        c = m["ratios"]["counted/plain"]
        rows.append(row(f"method with `self.nfev += 1` against without, Rosenbrock {what}, "
                        f"n = 1,000: gradient time", c, "within 15%",
                        met(abs(c["median"] - 1) <= 0.15), kind="change",
                        note=f"gradient {m['times']['plain']['median'] * 1e6:.0f} µs without"))
    raw["methods"] = out


def plain_ratios(rows, raw, budget):
    for name, label in (("recursion_sin", "recursion `sin(f(x, n-1)) * 0.5 + x`, n = 50"),
                        ("mlp", "MLP 256², batch 64 (d/params)"),
                        ("softmax_xent", "softmax cross-entropy, 100 classes")):
        case = BY_NAME[name]
        args = case.make_args()
        m = compare({"primal": lambda: case.fn(*args), "gradient": checked(case, args)},
                    ratios=[("gradient", "primal")], budget=budget)
        raw[name] = m
        r = m["ratios"]["gradient/primal"]
        rows.append(row(f"{label}: gradient / primal", r, f"≤ {case.target:g}×",
                        met(r["median"] <= case.target)))


# ---------------------------------------------------------- transform times (children)

WARM_UP = '''
import math, bytegrad, numpy as np
def _warm(x, k):
    s = 0.0
    for i in range(len(x)):
        s += math.sin(x[i]) if x[i] > 0 else x[i] * k
    return s + np.sum(np.tanh(x))
bytegrad.gradient(_warm, np.array([0.5, -1.0]), 2.0)
'''


def child(kind: str, arg: str):
    """In a fresh process: print ``BENCH {json}`` records of transform times."""
    import bytegrad
    if kind == "example":
        if arg == "warm":
            exec(WARM_UP, {})
        import runpy
        mod = runpy.run_path(str(EXAMPLE), run_name="example")
        x = np.array([0.5, -1.0, 2.0, 0.25])

        def call():
            return bytegrad.value_and_gradient(mod["loss"], x, 1.0)
        t0 = time.perf_counter()
        call()
        first = time.perf_counter() - t0
        warm = compare({"g": call}, budget=0.3, min_time=0.005)["times"]["g"]["median"]
        print("BENCH " + json.dumps({"first": first, "warm": warm}), flush=True)
        return
    k = int(kind.split(":")[1])
    exec(WARM_UP, {})
    t_start = time.perf_counter()
    rep = 0
    while rep < 5 and (rep == 0 or time.perf_counter() - t_start < float(arg)):
        f = branchy(k, rep)
        g = bytegrad.grad(f)
        t0 = time.perf_counter()
        g(0.3)
        first = time.perf_counter() - t0
        warm = compare({"g": lambda: g(0.3)}, budget=0.2, min_time=0.005)["times"]["g"]["median"]
        print("BENCH " + json.dumps({"first": first, "warm": warm}), flush=True)
        rep += 1


def branchy(k: int, salt: int = 0):
    """A straight-line function of ``k`` statements, each an ``if``/``else`` on the
    running value, made with ``exec`` (a fresh code object for each ``salt``)."""
    lines = ["def f(x):", f"    s = x + {salt}.0"]
    for i in range(k):
        lines += [f"    if s > {(i % 5) * 0.2 - 0.4:.1f}:",
                  "        s = math.sin(s) * 0.5 + x",
                  "    else:",
                  f"        s = s * 0.75 - {i % 3 + 1}.0 * x"]
    lines.append("    return s")
    g = {"math": math}
    exec("\n".join(lines), g)
    return g["f"]


def run_child(kind, arg, timeout):
    """The records a child printed, and None or why it ended early."""
    cmd = [sys.executable, "-m", "bytegrad.bench.targets", "--child", kind, arg]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout)
        out, why = p.stdout, (None if p.returncode == 0 else f"exit code {p.returncode}")
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"abandoned after {timeout:g} s"
    recs = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("BENCH ")]
    return recs, why


def transform_example(rows, raw, processes):
    out = {}
    for mode, label in (("warm", "after the library's one-time setup"),
                        ("cold", "the first gradient of the process (with the library's "
                                 "one-time setup)")):
        recs = []
        for _ in range(processes):
            r, why = run_child("example", mode, 60)
            if why:
                log(f"  example ({mode}): {why}")
            recs += r
        out[mode] = recs
        if not recs:
            rows.append(row(f"transform time of the README example ({label})", None,
                            "≤ 150 ms", "no measurement", kind="seconds"))
            continue
        s = stats([r["first"] - r["warm"] for r in recs])
        rows.append(row(f"transform time of the README example (`examples/example.py`), "
                        f"{label}: first gradient − warm gradient, fresh processes", s,
                        "≤ 150 ms", met(s["median"] <= TRANSFORM_MAX), kind="seconds"))
    raw["transform_example"] = out


def transform_curve(rows, raw, limit, per_size):
    out, med, abandoned = {}, {}, set()
    for k in CURVE:
        recs, why = run_child(f"curve:{k}", f"{per_size:g}", limit)
        out[k] = {"records": recs, "ended": why}
        if why:
            log(f"  curve {k}: {why}")
            abandoned |= {k} if "abandoned" in why else set()
        label = (f"transform time, straight-line function of {k} statements with a "
                 f"branch each (fresh process)")
        last = k == CURVE[-1]
        target = f"≤ {CURVE_MAX:g} s" if last else "—"
        if recs:
            s = stats([r["first"] - r["warm"] for r in recs])
            med[k] = s["median"]
            rows.append(row(label, s, target, met(s["median"] <= CURVE_MAX) if last else "—",
                            kind="seconds"))
        else:
            # abandoned: more than the limit, which is over the target
            verdict = ("NOT met" if last and k in abandoned and limit > CURVE_MAX
                       else "no measurement")
            rows.append(row(label, None, target, verdict, kind="seconds",
                            note=f"more than {limit:g} s ({why})" if k in abandoned
                            else f"no result ({why})"))
    # growth of the time per statement from the smallest size to each larger one; an
    # abandoned size gives a lower bound (the limit)
    lo, hi = CURVE[0], CURVE[-1]
    label = f"transform time per statement, against {lo} statements"
    target = f"near-linear: ≤ {CURVE_GROWTH:g}× at {hi}"
    growth, parts = [], []
    for k in CURVE[1:]:
        if lo not in med:
            break
        if k in med:
            g = med[k] / k / (med[lo] / lo)
            parts.append(f"{g:.1f}× at {k}")
        elif k in abandoned:
            g = limit / k / (med[lo] / lo)
            parts.append(f"more than {g:.1f}× at {k}")
        else:
            continue
        growth.append((k, g, k in med))
    if any(g > CURVE_GROWTH for _, g, _ in growth):
        verdict = "NOT met"
    elif growth and growth[-1][0] == hi and growth[-1][2]:
        verdict = "met"
    else:
        verdict = "no measurement"
    rows.append(row(label, None, target, verdict, note="; ".join(parts) or "—"))
    raw["transform_curve"] = out


# ------------------------------------------------------------------------------ output

def _n(v, kind):
    if kind == "ratio":
        return f"{v:.2f}" if v < 10 else f"{v:.1f}"
    if kind == "change":
        return f"{(v - 1) * 100:+.1f}%"
    if kind == "seconds":
        return f"{v * 1e3:.0f} ms" if v < 1 else f"{v:.2f} s"
    return f"{v:,.0f} B"


def fmt_measured(r) -> str:
    s, kind = r["measured"], r["kind"]
    if s is None:
        return r["note"] or "—"
    head = _n(s["median"], kind) + ("×" if kind == "ratio" else "")
    if s["samples"] == 1:
        spread = "1 sample"
    elif s.get("derived"):
        spread = f"from the quartiles {_n(s['q1'], kind)}–{_n(s['q3'], kind)}"
    elif s["samples"] >= 5:
        spread = f"IQR {_n(s['q1'], kind)}–{_n(s['q3'], kind)}, {s['samples']} samples"
    else:
        spread = f"min–max {_n(s['min'], kind)}–{_n(s['max'], kind)}, {s['samples']} samples"
    text = f"{head} ({spread})"
    if r["note"]:
        text += f"; {r['note']}"
    return text


def markdown(data) -> str:
    meta = data["meta"]
    out = ["## Targets (issue 9)", "",
           f"bytegrad alone, on {meta['implementation']} {meta['python']}, in one process "
           f"holding {meta['live_objects']:,} objects tracked by the garbage collector "
           f"({meta['ballast']:,} of them small lists held on purpose), the garbage collector on "
           f"(`bench/targets.py`). Speed ratios: median over interleaved rounds in that process, "
           f"with the interquartile range (IQR) of the rounds; transform times: fresh "
           f"processes. Run in {meta['elapsed']:.0f} s.", "",
           "| workload | measured (median, spread) | target | verdict |",
           "|---|---|---|---|"]
    for r in data["rows"]:
        v = r["verdict"]
        v = "**NOT met**" if v == "NOT met" else v
        out.append(f"| {r['workload']} | {fmt_measured(r)} | {r['target']} | {v} |")
    out.append("")
    return "\n".join(out)


def run(a) -> dict:
    start = time.perf_counter()
    keep = ballast(a.ballast)
    import bytegrad  # noqa: F401
    meta = {**interpreter(), "ballast": a.ballast, "live_objects": live_objects()}
    log(f"targets: {meta['implementation']} {meta['python']} ({sys.executable}), "
        f"{meta['live_objects']:,} live objects")
    rows, raw = [], {}
    steps = [("Rosenbrock", lambda: rosenbrock(rows, raw, a.budget)),
             ("tape memory", lambda: tape_memory(rows, raw)),
             ("peak memory", lambda: peak_memory(rows, raw)),
             ("methods", lambda: methods(rows, raw, a.budget)),
             ("recursion, MLP, softmax", lambda: plain_ratios(rows, raw, a.budget)),
             ("transform time of the example", lambda: transform_example(rows, raw, 3)),
             ("transform-time curve", lambda: transform_curve(rows, raw, a.transform_limit,
                                                              2.0))]
    for name, step in steps:
        log(f"targets: {name} ... ({time.perf_counter() - start:.0f} s)")
        n = len(rows)
        try:
            step()
        except Exception as e:  # noqa: BLE001 — a failure is a result
            rows.append(row(f"{name}: **error** `{type(e).__name__}: {str(e)[:200]}`", None,
                            "", "error"))
        for r in rows[n:]:
            log(f"  {r['workload']}: {fmt_measured(r)} — {r['target']} — {r['verdict']}")
    del keep
    meta["elapsed"] = time.perf_counter() - start
    return {"meta": meta, "rows": rows, "raw": raw}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bytegrad.bench.targets",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    ap.add_argument("--ballast", type=int, default=1_000_000,
                    help="small live objects this process holds while it measures")
    ap.add_argument("--budget", type=float, default=2.5,
                    help="seconds of interleaved rounds per measurement")
    ap.add_argument("--transform-limit", type=float, default=10.0,
                    help="seconds after which one size of the transform-time curve is "
                         "abandoned (the 300-statement function takes about a minute)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(*a.child)
        return
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    data = run(a)
    a.out.mkdir(parents=True, exist_ok=True)
    text = markdown(data)
    (a.out / "targets.md").write_text(text)
    (a.out / "targets.json").write_text(json.dumps(data, indent=1))
    print(text)
    log(f"wrote {a.out / 'targets.md'}, {a.out / 'targets.json'}")


if __name__ == "__main__":
    main()
