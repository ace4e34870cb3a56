"""``python -m bytegrad.bench``: gradient time / primal time for bytegrad and its peers,
and the targets of issue 9.

Timing is as users run their code (``bench/timer.py``): the garbage collector stays on,
the primal and the gradient are timed in interleaved rounds in one process, and a result
is the median over the rounds with its interquartile range, never the best sample.  Every
measuring process holds ``--ballast`` (default 10⁶) small live objects besides its own,
as a program with its data does (a full collection then has that much to traverse).

First the targets table (``bench/targets.py``, bytegrad alone, in a process of its own;
``--targets`` runs only it, ``--no-targets`` skips it, and so do ``--cases`` and
``--peers``).  Then each peer (bytegrad, autograd, torch, jax) runs in a subprocess of
its own (``bench/peer.py``), because importing one AD library can slow another
(importing torch makes autograd about 1.5x slower); every process is pinned to one
thread.  A subprocess times the plain primal (the NumPy/Python function) and the peer's
gradient for each case in ``bench/cases.py`` and prints its results as JSON; this
process collects them and writes ``bench/results/results.md`` (also printed),
``bench/results/results.png`` and ``bench/results/results.json`` (with the interpreter,
which this process also prints first).  The bytegrad subprocess also measures the emitted
code against the original (``bench/emit_speed.py``).  A peer that is not installed is
shown as "n/a".

jax without jit needs seconds per gradient of the loop cases and over a minute to warm up
each (every distinct ``x[i]`` is compiled), so by default it runs them at a smaller size
(the ratio is against the primal at that size); ``--jax-full`` runs the full size
(several minutes).  jax with jit runs the full size, its compiles skipped when they would
not fit in ``--budget`` (default 300 s, the time the whole run aims for).
``--peers bytegrad,torch`` runs a subset of the peers, ``--cases mlp,rk4`` a subset of the
cases (``--no-emit`` skips the emitted-code speed).  A jit compile that takes longer than
``--jit-limit`` seconds (default 45) is abandoned: the ``rk4`` loop, unrolled 50 times,
takes XLA minutes.  ``--malloc-keep`` tells glibc's malloc to keep freed memory
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``) in every peer's process: by
default the memory of a large block freed at the top of the heap goes back to the system
and the next one faults its pages in, which costs a gradient whose large results the
caller drops (``mlp``) a good part of its time, unless the library reuses such arrays
itself (bytegrad does: ``primitives/buffers.py``).

Cases with a target (the Rosenbrock loop within 20x of its primal, the MLP within 2.6x,
softmax cross-entropy within 6x) get a verdict under the table; ``trace_AB`` is also
compared with its hand-written gradients (timed in the same rounds) in a table of its
own.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from . import targets as tgt
from .cases import CASES, TARGET_CASES

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PEERS = ["bytegrad", "autograd", "torch", "jax"]
EMIT_TARGET = 1.1      # emitted code within 1.0-1.1x of the original
WRONG = 1e-6           # relative error above which a gradient is reported as wrong
MALLOC = {"keep": False}  # set by --malloc-keep
PEER_TIMEOUT = 120.0   # seconds per peer subprocess, except jax (see main)
TARGETS_TIMEOUT = 240.0  # seconds for bench/targets.py
# --malloc-keep: no mmap for blocks under 32 MiB, no trimming of the heap's top under 256 MiB.
MALLOC_KEEP = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}
THREADS = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                            "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                            "NUMEXPR_NUM_THREADS")}
# Columns of the ratio table: (title, peer, kind of record).
COLUMNS = [("bytegrad", "bytegrad", "cases"), ("autograd", "autograd", "cases"),
           ("torch (eager)", "torch", "cases"), ("jax (no jit)", "jax", "cases"),
           ("jax (jit)", "jax", "jit")]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_peer(peer: str, timeout: float, extra=()) -> dict:
    """Run one peer's subprocess; its records grouped by kind, and how it ended."""
    env = dict(os.environ, **THREADS, **(MALLOC_KEEP if MALLOC["keep"] else {}))
    cmd = [sys.executable, str(HERE / "peer.py"), peer, *extra]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=None, text=True,
                           timeout=timeout)
        out, status = p.stdout, (None if p.returncode == 0 else f"exit code {p.returncode}")
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        status = f"timed out after {timeout:.0f} s"
    res = {"peer": peer, "info": None, "cases": {}, "jit": {}, "emit": [], "status": status,
           "wall": time.perf_counter() - t0}
    for line in out.splitlines():
        if not line.startswith("BENCH "):
            if line.strip():
                log(f"  [{peer} stdout] {line}")
            continue
        rec = json.loads(line[len("BENCH "):])
        kind = rec.get("kind")
        if kind == "peer":
            res["info"] = rec
        elif kind in ("case", "jit"):
            res["cases" if kind == "case" else "jit"][rec["case"]] = rec
        elif kind == "emit":
            res["emit"].append(rec)
    if status:
        log(f"  [{peer}] {status}")
    return res


# ---------------------------------------------------------------------------- formatting

def fmt_time(s) -> str:
    if s is None:
        return ""
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_ratio(r) -> str:
    return f"{r:.2f}×" if r < 10 else f"{r:.1f}×" if r < 100 else f"{r:,.0f}×"


def med(s):
    """The median of a ``timer.stats`` record (None stays None)."""
    return None if s is None else s["median"]


def _num(r) -> str:
    return f"{r:.2f}" if r < 10 else f"{r:.1f}" if r < 100 else f"{r:,.0f}"


def fmt_ratio_iqr(s) -> str:
    """A ratio's median and interquartile range: ``21.7× (19.9–23.2)``."""
    return f"{fmt_ratio(s['median'])} ({_num(s['q1'])}–{_num(s['q3'])})"


def fmt_time_iqr(s) -> str:
    """A time's median and interquartile range, in the median's unit."""
    if s is None:
        return ""
    m = s["median"]
    unit, k = ("µs", 1e6) if m < 1e-3 else ("ms", 1e3) if m < 1 else ("s", 1.0)
    d = 1 if unit == "µs" else 2
    return f"{m * k:.{d}f} {unit} ({s['q1'] * k:.{d}f}–{s['q3'] * k:.{d}f})"


class Notes:
    """Numbered footnotes for errors, wrong gradients and skips."""

    def __init__(self):
        self.items = []

    def ref(self, text: str) -> str:
        if text not in self.items:
            self.items.append(text)
        return f"[{self.items.index(text) + 1}]"


def available(res) -> bool:
    return bool(res and res["info"] and res["info"].get("available"))


def measured(results, case):
    """``(title, peer, kind, record)`` of each peer that ran ``case`` (not skipped)."""
    for title, peer, kind in COLUMNS:
        res = results.get(peer)
        if not available(res):
            continue
        rec = res[kind].get(case.name)
        if rec is not None and "skipped" not in rec:
            yield title, peer, kind, rec


def wrong(rec) -> bool:
    return rec.get("rel_error", 0.0) > WRONG


def error_note(rec) -> str:
    detail = (rec.get("detail") or rec["error"]).strip()
    first = detail.splitlines()[0] if detail else ""
    return f"`{rec['error'].split(':')[0]}`: {first}" + (
        f" (raised at {rec['where']})" if rec.get("where") else "")


def cell(res, rec, notes: Notes, who: str) -> str:
    """One cell of the ratio table: the ratio, or why there is none."""
    if res is None:
        return "not run"
    if not available(res):
        if res["info"] is None:  # the subprocess said nothing useful
            return "n/a " + notes.ref(f"{res['peer']}: {res['status'] or 'no output'}")
        return "n/a " + notes.ref(f"{res['peer']}: not available ({res['info'].get('error')})")
    if rec is None:
        return "— " + notes.ref(f"{who}: no result ({res['status'] or 'not measured'})")
    if "skipped" in rec:
        return "skipped " + notes.ref(f"{who}: skipped, {rec['skipped']}")
    if "error" in rec:
        return "**error** " + notes.ref(f"{who}: {error_note(rec)}")
    text = fmt_ratio_iqr(rec["ratio"])
    if rec.get("size"):
        text += " " + notes.ref(f"{who}: measured at {rec['size']} (the full size takes minutes "
                                f"without jit; `--jax-full` runs it), against the primal at "
                                f"that size")
    if wrong(rec):
        text += " **wrong gradient** " + notes.ref(
            f"{who}: the gradient differs from the closed form by {rec['rel_error']:.2g} "
            f"(max abs. difference / max(1, max |reference|))")
    return text


def git_commit() -> str:
    try:
        root = HERE.parent
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                             capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, text=True, capture_output=True).stdout.strip()
        return sha + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hand_table(results: dict, cases, notes: Notes) -> list:
    """The cases with hand-written gradients: each peer's gradient time against them,
    measured in the peer's own process."""
    out = []
    for case in cases:
        if not case.hand:
            continue
        names = list(case.hand)
        out += [f"## `{case.name}`: gradient time vs hand-written", "",
                "Each hand-written gradient is timed in the same process as the peer's "
                "gradient, in the same interleaved rounds; the ratio is the median (and "
                "interquartile range) over the rounds of the peer's gradient time over the "
                "hand-written one's. "
                + " ".join(f"*{chr(65 + i)}*: {n} (`{case.hand[n].__name__}` in "
                           f"`bench/cases_numpy.py`)." for i, n in enumerate(names)), "",
                "| peer | gradient | " + " | ".join(
                    f"*{chr(65 + i)}* | ÷ *{chr(65 + i)}*" for i in range(len(names))) + " |",
                "|---|---:|" + "---:|---:|" * len(names)]
        for title, peer, kind, rec in measured(results, case):
            if "error" in rec or "grad" not in rec:
                out.append(f"| {title} | **error** {cell(results[peer], rec, notes, f'{title}, {case.name}')} |"
                           + " |" * (2 * len(names)))
                continue
            row = [title, fmt_time_iqr(rec["grad"])]
            for n in names:
                h = (rec.get("hand") or {}).get(n) or {}
                if "time" in h:
                    row += [fmt_time_iqr(h["time"]), fmt_ratio_iqr(h["ratio"])]
                else:
                    row += [h.get("error", "—"), ""]
            if wrong(rec):
                row[1] += " **wrong gradient**"
            out.append("| " + " | ".join(row) + " |")
        out.append("")
        if case.hand_target:
            name, ratio = case.hand_target
            bg = results.get("bytegrad")
            rec = bg["cases"].get(case.name) if bg else None
            h = ((rec or {}).get("hand") or {}).get(name) or {}
            what = (f"Target (issue): the `{case.name}` gradient within {ratio:g}× of the "
                    f"hand-written one (*{chr(65 + names.index(name))}*, {name})")
            if rec and "grad" in rec and "time" in h and not wrong(rec):
                r = h["ratio"]
                out += [f"{what} — {'met' if r['median'] <= ratio else '**not met**'} "
                        f"({fmt_ratio_iqr(r)}).", ""]
            else:
                out += [f"{what} — no valid bytegrad measurement.", ""]
    return out


def interpreter() -> dict:
    """The interpreter this run (and every process it starts) runs on."""
    return {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "build": sys.version, "executable": sys.executable}


def run_targets(a) -> dict | None:
    """``bench/targets.py`` in a process of its own; its results, or None."""
    cmd = [sys.executable, "-m", "bytegrad.bench.targets", "--out", str(a.out),
           "--ballast", str(a.ballast)]
    env = dict(os.environ, **THREADS)
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, timeout=TARGETS_TIMEOUT)
        if p.returncode != 0:
            log(f"  [targets] exit code {p.returncode}")
            return None
        return json.loads((a.out / "targets.json").read_text())
    except (subprocess.TimeoutExpired, OSError, ValueError) as e:
        log(f"  [targets] {type(e).__name__}: {e}")
        return None


def markdown(results: dict, elapsed: float, cases=CASES, targets=None, ballast=0,
             ran_targets=False) -> str:
    notes = Notes()
    out = ["# bytegrad benchmarks", ""]
    versions = ", ".join(
        f"{p} {results[p]['info'].get('version')}" if available(results.get(p)) else f"{p} n/a"
        for p in PEERS if p in results)
    it = interpreter()
    live = [f"{r['info']['peer']} {r['info']['live_objects']:,}" for r in results.values()
            if available(r) and "live_objects" in r["info"]]
    out += [f"{datetime.date.today().isoformat()} · {it['implementation']} {it['python']} "
            f"(`{it['executable']}`) · {cpu_name()} · 1 thread "
            f"(`OMP/OPENBLAS/MKL_NUM_THREADS=1`, `torch.set_num_threads(1)`) · "
            + ("glibc malloc keeps freed memory (`--malloc-keep`: "
               + ", ".join(f"`{k}={v}`" for k, v in MALLOC_KEEP.items()) + ") · "
               if MALLOC["keep"] else "default glibc malloc · ")
            + f"bytegrad at "
            f"{git_commit()} · {versions} · each peer in its own process, garbage collector "
            f"on, holding {ballast:,} small live objects on purpose besides its own (objects "
            f"tracked: {', '.join(live) or 'n/a'}) · whole run {elapsed:.0f} s", ""]
    if targets:
        out.append(tgt.markdown(targets))
    elif ran_targets:
        out += ["## Targets (issue 9)", "", "**The targets did not run to the end** "
                "(`python -m bytegrad.bench.targets` shows why).", ""]

    out += ["## Gradient time / primal time", "",
            "Lower is better. The primal is the plain Python/NumPy function, timed in the same "
            "process as the gradient, in interleaved rounds (one sample of each per round, "
            "a sample being enough calls in a row to take 20 ms; `bench/timer.py`), with the "
            "garbage collector on; each cell is the median over the rounds of the gradient "
            "sample ÷ the primal sample of the same round, with the interquartile range in "
            "parentheses (the rounds are counted in the absolute times). Each gradient is "
            "checked against a closed form (for `rk4`, a hand-written discrete adjoint).", ""]
    out.append("| case | " + " | ".join(c[0] for c in COLUMNS) + " |")
    out.append("|---|" + "---:|" * len(COLUMNS))
    for case in cases:
        row = [f"`{case.name}`"]
        for title, peer, kind in COLUMNS:
            res = results.get(peer)
            rec = res[kind].get(case.name) if res else None
            row.append(cell(res, rec, notes, f"{title}, {case.name}"))
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    for case in cases:
        out.append(f"* `{case.name}`: {case.description}.")
    out.append("")

    bg = results.get("bytegrad")
    for case in cases:
        if case.target is None:
            continue
        rec = bg["cases"].get(case.name) if bg else None
        what = f"Target (issue): the `{case.name}` gradient within {case.target:g}× of its primal"
        if rec and "ratio" in rec and not wrong(rec):
            verdict = "met" if rec["ratio"]["median"] <= case.target else "**not met**"
            out.append(f"* {what} — {verdict} ({fmt_ratio_iqr(rec['ratio'])}).")
        else:
            out.append(f"* {what} — no valid bytegrad measurement.")
    out.append("")
    out += hand_table(results, cases, notes)

    out += ["## Absolute times", "",
            "Medians, with the interquartile range in parentheses; rounds × calls per sample "
            "(primal, gradient).", "",
            "| case | peer | primal | gradient | gradient / primal | rounds | first call | "
            "max rel. error | page faults / call (primal, gradient) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for case in cases:
        for title, peer, kind, rec in measured(results, case):
            first = rec.get("compile", rec.get("first"))
            first_text = fmt_time(first) + (" (compile)" if "compile" in rec else "")
            if "error" in rec:
                out.append(f"| `{case.name}` | {title} | {fmt_time_iqr(rec.get('primal'))} | "
                           f"{rec['error'].split(':')[0]} | | | | | |")
                continue
            err = rec.get("rel_error")
            label = f"{title} at {rec['size']}" if rec.get("size") else title
            faults = rec.get("faults") or [None, None]
            faults = ", ".join("?" if f is None else f"{f:.0f}" for f in faults)
            p, g = rec["primal"], rec["grad"]
            rounds = f"{g['samples']} × ({p['number']}, {g['number']})"
            out.append(f"| `{case.name}` | {label} | {fmt_time_iqr(p)} | "
                       f"{fmt_time_iqr(g)} | {fmt_ratio_iqr(rec['ratio'])} | {rounds} | "
                       f"{first_text} | {'' if err is None else f'{err:.1e}'} | {faults} |")
    out.append("")

    out += ["## Emitted code speed", "",
            "`function(lift(f), f.__globals__)` (lifted to the IR and emitted back to bytecode) "
            f"against `f` itself, in interleaved rounds (median, interquartile range); "
            f"target ≤ {EMIT_TARGET:.1f}×.", "",
            "| function | what | original | emitted | emitted / original |",
            "|---|---|---:|---:|---:|"]
    if not available(bg) or not bg["emit"]:
        out.append("| not run | | | | |" if available(bg) else "| n/a | | | | |")
    for r in (bg["emit"] if bg else []):
        if "error" in r:
            out.append(f"| `{r['name']}` | {r['description']} | | | **error** "
                       f"{notes.ref('emit ' + r['name'] + ': ' + error_note(r))} |")
            continue
        ratio = fmt_ratio_iqr(r["ratio"])
        if r["ratio"]["median"] > EMIT_TARGET:
            ratio = f"**{ratio}**"
        if not r.get("same_result", True):
            ratio += " " + notes.ref(f"emit {r['name']}: the emitted code returned a different result")
        out.append(f"| `{r['name']}` | {r['description']} | {fmt_time_iqr(r['original'])} | "
                   f"{fmt_time_iqr(r['emitted'])} | {ratio} |")
    out.append("")

    if notes.items:
        out += ["## Notes", ""]
        out += [f"{i}. {t}" for i, t in enumerate(notes.items, 1)]
        out.append("")
    return "\n".join(out)


def plot(results: dict, path: Path, cases=CASES):
    """A grouped bar chart of gradient/primal ratios, log scale."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no chart")
        return False
    fig, ax = plt.subplots(figsize=(max(10, 1.6 * len(cases)), 5.5))
    width = 0.8 / len(COLUMNS)
    colors = ["#d62728", "#1f77b4", "#ff7f0e", "#2ca02c", "#98df8a"]
    ymax, ymin, small = max([c.target for c in cases if c.target] or [1.0]), 1.0, False
    for k, ((title, peer, kind), color) in enumerate(zip(COLUMNS, colors)):
        res = results.get(peer)
        for i, case in enumerate(cases):
            x = i + (k - (len(COLUMNS) - 1) / 2) * width
            rec = res[kind].get(case.name) if res else None
            if rec is not None and "ratio" in rec:
                bad = wrong(rec)
                r = rec["ratio"]
                ax.bar(x, r["median"], width, color=color, hatch="xx" if bad else None,
                       edgecolor="black" if bad else color,
                       label=title if i == 0 else None)
                ax.errorbar(x, r["median"], yerr=[[r["median"] - r["q1"]], [r["q3"] - r["median"]]],
                            fmt="none", ecolor="black", elinewidth=0.8, capsize=1.5)
                label = (fmt_ratio(r["median"]) + ("†" if rec.get("size") else "")
                         + (" wrong" if bad else ""))
                ax.text(x, r["q3"] * 1.08, label, ha="center", va="bottom", fontsize=7,
                        rotation=90)
                ymax, ymin = max(ymax, r["q3"]), min(ymin, r["q1"] / 2)
                small = small or bool(rec.get("size"))
            else:
                why = ("n/a" if not available(res) else "skipped" if rec and "skipped" in rec
                       else "error" if rec and "error" in rec else "—")
                ax.bar(x, 0, width, color=color, label=title if i == 0 else None)
                ax.text(x, 1.15, why, ha="center", va="bottom", fontsize=7, rotation=90,
                        color="gray")
    for i, case in enumerate(cases):  # each case's target, over its group of bars
        if case.target:
            ax.hlines(case.target, i - 0.45, i + 0.45, color="black", linestyle="--",
                      linewidth=1)
            ax.text(i + 0.45, case.target * 1.05, f"target {case.target:g}×", ha="right",
                    va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylim(ymin, ymax * 12)
    if small:
        fig.text(0.01, 0.01, "† measured at a smaller size (see results.md)", fontsize=7,
                 color="gray")
    ax.set_xticks(range(len(cases)), [c.name for c in cases])
    ax.set_ylabel("gradient time / primal time (median, IQR)")
    ax.set_title("Gradient cost relative to the plain Python primal (1 thread, garbage collector "
                 "on, lower is better)")
    ax.legend(fontsize=8, loc="upper left", ncols=len(COLUMNS))
    ax.grid(axis="y", which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bytegrad.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"comma-separated subset of {','.join(PEERS)}")
    ap.add_argument("--budget", type=float, default=300.0,
                    help="seconds the whole run aims for (jax's jit compiles are skipped "
                         "when they would not fit)")
    ap.add_argument("--jax-full", action="store_true",
                    help="run jax without jit at the full size too (several minutes)")
    ap.add_argument("--jit-limit", type=float, default=45.0,
                    help="seconds after which one jax jit compile is abandoned")
    ap.add_argument("--cases", default="",
                    help=f"comma-separated subset of {','.join(c.name for c in CASES)} "
                         f"(or of the targets' {','.join(c.name for c in TARGET_CASES)})")
    ap.add_argument("--targets", action="store_true",
                    help="run only the targets table (bench/targets.py, about a minute)")
    ap.add_argument("--no-targets", action="store_true",
                    help="skip the targets table (skipped too with --cases or --peers)")
    ap.add_argument("--ballast", type=int, default=1_000_000,
                    help="small live objects each measuring process holds besides its own "
                         "(0: none)")
    ap.add_argument("--case-budget", type=float, default=2.5,
                    help="seconds of interleaved timing rounds per case and peer")
    ap.add_argument("--no-emit", action="store_true", help="skip the emitted-code speed")
    ap.add_argument("--malloc-keep", action="store_true",
                    help="glibc malloc keeps freed memory in every peer (no page faults on "
                         "fresh large temporaries)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    a = ap.parse_args(argv)
    peers = [p for p in a.peers.split(",") if p]
    unknown = set(peers) - set(PEERS)
    if unknown:
        ap.error(f"unknown peers: {', '.join(sorted(unknown))}")
    names = [c for c in a.cases.split(",") if c]
    unknown = set(names) - {c.name for c in CASES + TARGET_CASES}
    if unknown:
        ap.error(f"unknown cases: {', '.join(sorted(unknown))}")
    cases = [c for c in CASES + TARGET_CASES if c.name in names] if names else CASES
    common = (["--cases", ",".join(c.name for c in cases)] if names else []) + (
        ["--no-emit"] if a.no_emit else []) + ["--ballast", str(a.ballast),
                                               "--case-budget", f"{a.case_budget:g}"]
    os.environ.update(THREADS)
    MALLOC["keep"] = a.malloc_keep
    it = interpreter()
    log(f"bench on {it['implementation']} {it['python']} ({it['executable']}): "
        f"{it['build']}")

    start = time.perf_counter()
    if a.targets:
        log("targets ...")
        data = run_targets(a)
        if data is None:
            sys.exit("the targets did not run to the end")
        print(tgt.markdown(data))
        log(f"wrote {a.out / 'targets.md'}, {a.out / 'targets.json'}")
        return
    a.out.mkdir(parents=True, exist_ok=True)
    targets = None
    ran_targets = not (a.no_targets or bool(names) or set(peers) != set(PEERS))
    if ran_targets:
        log("targets ...")
        targets = run_targets(a)
        log(f"targets: {time.perf_counter() - start:.1f} s")
    results = {}
    for peer in PEERS:
        if peer not in peers:
            continue
        log(f"{peer} ...")
        if peer == "jax":
            # jax runs last and gets what is left of the budget for its jit compiles; the
            # longest that finishes (the Rosenbrock loop, unrolled 1000 times) takes about
            # 30 s; one taking longer than --jit-limit is abandoned.
            left = a.budget - (time.perf_counter() - start)
            extra = ["--jit-deadline", f"{max(left - 30.0, 0.0):.0f}",
                     "--jit-limit", f"{a.jit_limit:g}", *common]
            if a.jax_full:
                extra.append("--full")
            results[peer] = run_peer(peer, timeout=max(left, 60.0) + a.jit_limit
                                     + (600.0 if a.jax_full else 60.0), extra=extra)
        else:
            results[peer] = run_peer(peer, timeout=PEER_TIMEOUT, extra=common)
        log(f"{peer}: {results[peer]['wall']:.1f} s")
    elapsed = time.perf_counter() - start

    text = markdown(results, elapsed, cases, targets, a.ballast, ran_targets)
    (a.out / "results.md").write_text(text)
    meta = {**interpreter(), "date": datetime.date.today().isoformat(), "commit": git_commit(),
            "cpu": cpu_name(), "elapsed": elapsed, "ballast": a.ballast,
            "case_budget": a.case_budget, "malloc_keep": a.malloc_keep}
    (a.out / "results.json").write_text(json.dumps(
        {"meta": meta, "peers": results, "targets": targets}, indent=1))
    made = plot(results, a.out / "results.png", cases)
    print(text)
    log(f"wrote {a.out / 'results.md'}, {a.out / 'results.json'}"
        + (f", {a.out / 'results.png'}" if made else ""))


if __name__ == "__main__":
    main()
