"""One peer's measurements, in a process of its own.

    python bench/peer.py {bytegrad,autograd,torch,jax} [--jit-deadline SECONDS] [--full]
                         [--cases NAME,...] [--no-emit] [--ballast N] [--case-budget S]

It is run as a script (not ``-m bytegrad.bench.peer``) so that the only AD library the
process imports is the peer under test.  For every case it checks the peer's gradient
against the closed-form reference and times, in interleaved rounds (``timer.compare``:
garbage collector on, median and quartiles), the plain primal (the NumPy/Python
function), the gradient and the case's hand-written gradients (if it has any); the
ratios are those of samples of the same round.  With ``--ballast N`` the process holds N
more small live objects while it measures, as a program with its data does.  jax without
jit runs the loop cases at a smaller size (see ``Case.small_args``) unless ``--full`` is
given.  Each result is printed as one line
``BENCH {json}`` on stdout as soon as it is known; progress goes to stderr.
"""
from __future__ import annotations

import os

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
for _v in THREAD_VARS:
    os.environ[_v] = "1"
# jax: CPU only, float64 like the others, one thread.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["JAX_ENABLE_X64"] = "1"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

import numpy as np  # noqa: E402

import cases as _cases  # noqa: E402
from cases import max_rel_error  # noqa: E402
from timer import ballast, compare, live_objects, measure, once, page_faults  # noqa: E402

START = time.perf_counter()
PEER = "?"
CASE_BUDGET = 2.5  # seconds of interleaved timing rounds per case (--case-budget)
BALLAST = []       # --ballast: small live objects this process holds while it measures
KEEP = []          # the options a restarted jax process is given again


def report(rec: dict):
    rec.setdefault("peer", PEER)
    print("BENCH " + json.dumps(rec), flush=True)


def progress(msg: str):
    print(f"  [{PEER} {time.perf_counter() - START:6.1f}s] {msg}", file=sys.stderr, flush=True)


def _error(e: BaseException) -> dict:
    msg = str(e).strip()
    tb = traceback.extract_tb(e.__traceback__)
    where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
    return {"error": f"{type(e).__name__}: {msg.splitlines()[0] if msg else ''}",
            "detail": msg[:2000], "where": where}


CASES = _cases.CASES

# Each peer: setup() -> (version, gradient maker).  A gradient maker takes a case and its
# arguments and returns (call, to_numpy): ``call()`` computes the gradients in the case's
# wrt arguments (finished, for asynchronous libraries), ``to_numpy`` converts them.  The
# code a peer differentiates is ``case.peer_fn(lib)``: the case's own code with the
# peer's ``sin`` and NumPy (``lib.sin``, ``lib.np``).

# The NumPy rule modules, loaded if present (they may not be registered in
# bytegrad.primitives yet).
NUMPY_RULES = ("np_elementwise", "np_reductions", "np_linalg", "np_shape", "np_indexing",
               "np_signal", "np_statistics")


def _bytegrad():
    import importlib

    import bytegrad
    loaded = []
    for m in NUMPY_RULES:
        try:
            importlib.import_module("bytegrad.primitives." + m)
            loaded.append(m)
        except ImportError:
            pass
    progress(f"NumPy rule modules loaded: {', '.join(loaded) or 'none'}")

    def make(case, args):
        # Only the gradients in wrt are asked for, so bytegrad never computes the others
        # (X and Y in mlp).
        g = bytegrad.grad(case.fn, argnums=tuple(case.wrt))
        return (lambda: g(*args)), lambda gs: [np.asarray(x) for x in gs]
    return getattr(bytegrad, "__version__", None) or _dist_version("bytegrad"), make


def _autograd():
    import autograd
    import autograd.numpy as anp

    lib = types.SimpleNamespace(np=anp, sin=anp.sin)

    def make(case, args):
        f = case.peer_fn(lib)
        wrt = case.wrt
        g = autograd.grad(f, wrt[0] if len(wrt) == 1 else tuple(wrt))
        if len(wrt) == 1:
            return (lambda: (g(*args),)), lambda gs: [np.asarray(x) for x in gs]
        return (lambda: tuple(g(*args))), lambda gs: [np.asarray(x) for x in gs]
    return _dist_version("autograd"), make


def _torch():
    import torch
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass

    # The few NumPy functions the cases call, as torch functions.
    tnp = types.SimpleNamespace(tanh=torch.tanh, exp=torch.exp, log=torch.log, sin=torch.sin,
                                sum=torch.sum, mean=torch.mean, max=torch.max,
                                trace=torch.trace)
    lib = types.SimpleNamespace(np=tnp, sin=torch.sin)

    def make(case, args):
        f = case.peer_fn(lib)
        wrt = case.wrt
        # the arrays not differentiated are tensors too (made once: they need no grad)
        targs = [torch.from_numpy(a) if isinstance(a, np.ndarray) and i not in wrt else a
                 for i, a in enumerate(args)]

        def call():
            xs = list(targs)
            leaves = []
            for i in wrt:
                a = args[i]
                t = (torch.from_numpy(a) if isinstance(a, np.ndarray)
                     else torch.tensor(a, dtype=torch.float64))
                t.requires_grad_()
                xs[i] = t
                leaves.append(t)
            y = f(*xs)
            y.backward()
            return tuple(t.grad for t in leaves)
        return call, lambda gs: [g.detach().numpy() for g in gs]
    return torch.__version__, make


def _jax_setup():
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    return jax, jnp


def _jax():
    jax, jnp = _jax_setup()

    lib = types.SimpleNamespace(np=jnp, sin=jnp.sin)

    def make(case, args):
        f = case.peer_fn(lib)
        jargs = tuple(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
        g = jax.grad(f, argnums=tuple(case.wrt))
        return (lambda: jax.block_until_ready(g(*jargs))), lambda gs: [np.asarray(x) for x in gs]
    return jax.__version__, make


PEERS = {"bytegrad": _bytegrad, "autograd": _autograd, "torch": _torch, "jax": _jax}


def _dist_version(name):
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def hand_fns(case, args) -> tuple:
    """The case's hand-written gradients, checked against the reference: ``(functions to
    time, by name; errors, by name)`` (a wrong one is an error, not timed)."""
    fns, errors = {}, {}
    ref = case.reference(*args)
    for name, h in case.hand.items():
        r = h(*args)
        gs = r[1] if len(r) == 2 and isinstance(r[1], tuple) else r
        err = max_rel_error([np.asarray(g) for g in gs], ref)
        if err > 1e-8:
            errors[name] = {"error": f"wrong hand-written gradient (rel. error {err:.1e})"}
        else:
            fns[name] = (lambda h: lambda: h(*args))(h)
    return fns, errors


def time_case(rec, case, args, call):
    """Time the primal, the gradient ``call`` and the case's hand-written gradients (at
    the full size) in interleaved rounds (``timer.compare``); fill ``rec``."""
    fns = {"primal": lambda: case.fn(*args), "grad": call}
    hand, errors = hand_fns(case, args) if case.hand and "size" not in rec else ({}, {})
    fns.update({"hand:" + k: f for k, f in hand.items()})
    m = compare(fns, ratios=[("grad", "primal")] + [("grad", "hand:" + k) for k in hand],
                budget=CASE_BUDGET, min_rounds=3)
    rec["primal"], rec["grad"] = m["times"]["primal"], m["times"]["grad"]
    rec["ratio"] = m["ratios"]["grad/primal"]
    if case.hand and "size" not in rec:
        rec["hand"] = dict(errors)
        for k in hand:
            rec["hand"][k] = {"time": m["times"]["hand:" + k],
                              "ratio": m["ratios"][f"grad/hand:{k}"]}
    n = max(1, min(20, int(0.2 / max(rec["grad"]["median"], 1e-9))))
    rec["faults"] = [page_faults(fns["primal"], n), page_faults(call, n)]


def run_cases(make, small=False) -> dict:
    """Time every case (its smaller instance where it has one, if ``small``); returns each
    case's first-call gradient time (or None)."""
    first_calls = {}
    for case in CASES:
        rec = {"kind": "case", "case": case.name, "description": case.description}
        if small and case.small_args is not None:
            args = case.small_args()
            rec["size"] = case.small_size
        else:
            args = case.make_args()
        progress(f"{case.name}{' (' + rec['size'] + ')' if 'size' in rec else ''}: "
                 f"gradient ...")
        try:
            call, to_numpy = make(case, args)
            gs, rec["first"] = once(call)
            first_calls[case.name] = rec["first"]
            rec["rel_error"] = max_rel_error(to_numpy(gs), case.reference(*args))
            time_case(rec, case, args, call)
            r = rec["ratio"]
            progress(f"{case.name}: gradient {rec['grad']['median'] * 1e3:.3f} ms = "
                     f"{r['median']:.1f}x primal (IQR {r['q1']:.1f}-{r['q3']:.1f}x, "
                     f"{r['samples']} rounds; first call {rec['first']:.2f} s, "
                     f"rel. error {rec['rel_error']:.1e})")
        except Exception as e:  # noqa: BLE001 — the failure is a result
            rec.update(_error(e))
            progress(f"{case.name}: {rec['error']}")
            if "primal" not in rec:
                rec["primal"] = measure(lambda: case.fn(*args), budget=0.5)
        report(rec)
    return first_calls


def run_jax_jit(first_calls: dict, deadline: float, limit: float):
    """``jax.jit(jax.grad(f))`` on the full-size cases: compile time and compiled run time.
    A python loop is unrolled into the traced program, so compiling the loop cases takes
    tens of seconds; cases go cheapest first (by their eager first call; those marked
    ``jit_last`` last), and no compile is started later than ``deadline`` seconds after
    this process started.

    A compile (with the first call) that takes longer than ``limit`` seconds is
    abandoned: XLA cannot be interrupted, so this process replaces itself (``os.execv``,
    same stdout) with a fresh jax process that compiles the remaining cases only."""
    jax, jnp = _jax_setup()
    order = sorted(CASES, key=lambda c: (c.jit_last, first_calls.get(c.name) or float("inf")))
    for k, case in enumerate(order):
        rec = {"kind": "jit", "case": case.name}
        elapsed = time.perf_counter() - START
        if elapsed > deadline:
            rec["skipped"] = (f"time budget (the compile would start {elapsed:.0f} s into the "
                              f"jax process; deadline {deadline:.0f} s)")
            progress(f"jit {case.name}: skipped, {rec['skipped']}")
            report(rec)
            continue
        args = case.make_args()
        progress(f"jit {case.name}: compiling ...")
        try:
            f = case.peer_fn(types.SimpleNamespace(np=jnp, sin=jnp.sin))
            static = tuple(i for i, a in enumerate(args)
                           if i not in case.wrt and isinstance(a, int))
            jargs = tuple(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
            g = jax.jit(jax.grad(f, argnums=tuple(case.wrt)), static_argnums=static)
            call = lambda: jax.block_until_ready(g(*jargs))  # noqa: E731
            first = _with_limit(lambda: once(call), limit)
            if first is None:
                rec["skipped"] = (f"the compile did not finish in {limit:.0f} s (abandoned; "
                                  f"`--jit-limit` sets the limit)")
                progress(f"jit {case.name}: skipped, {rec['skipped']}")
                report(rec)
                _restart_jit(order[k + 1:], deadline, limit)
                return
            gs, rec["compile"] = first
            rec["rel_error"] = max_rel_error([np.asarray(x) for x in gs], case.reference(*args))
            time_case(rec, case, args, call)
            progress(f"jit {case.name}: compile {rec['compile']:.1f} s, run "
                     f"{rec['grad']['median'] * 1e3:.3f} ms = {rec['ratio']['median']:.1f}x "
                     f"primal")
        except Exception as e:  # noqa: BLE001
            rec.update(_error(e))
            progress(f"jit {case.name}: {rec['error']}")
        report(rec)


def _with_limit(fn, limit):
    """``fn()`` run in a thread; None if it has not finished after ``limit`` seconds (it
    then keeps running: the caller has to end the process)."""
    box = {}

    def work():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 — re-raised below
            box["error"] = e
    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(limit)
    if t.is_alive():
        return None
    if "error" in box:
        raise box["error"]
    return box["value"]


def _restart_jit(rest, deadline, limit):
    """Replace this process by a jax process compiling only ``rest`` (in that order)."""
    if not rest:
        report({"kind": "done", "elapsed": time.perf_counter() - START})
        sys.stdout.flush()
        os._exit(0)
    left = deadline - (time.perf_counter() - START)
    progress(f"restarting jax for the remaining jit cases: {', '.join(c.name for c in rest)}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "jax", "--jit-only",
                              "--cases", ",".join(c.name for c in rest),
                              "--jit-deadline", f"{max(left, 0.0):.1f}",
                              "--jit-limit", f"{limit:g}", *KEEP])


def main(argv=None):
    global PEER, CASE_BUDGET
    ap = argparse.ArgumentParser()
    ap.add_argument("peer", choices=sorted(PEERS))
    ap.add_argument("--jit-deadline", type=float, default=60.0,
                    help="jax only: no jit compile is started later than this many seconds "
                         "after the process started")
    ap.add_argument("--jit-limit", type=float, default=45.0,
                    help="jax only: a jit compile taking longer than this many seconds is "
                         "abandoned (the process restarts for the remaining cases)")
    ap.add_argument("--jit-only", action="store_true",
                    help="jax only: skip jax without jit (used by the restart after an "
                         "abandoned compile)")
    ap.add_argument("--full", action="store_true",
                    help="jax only: run jax without jit on the full-size cases too (minutes)")
    ap.add_argument("--cases", default="",
                    help="comma-separated case names to run (default: all)")
    ap.add_argument("--no-emit", action="store_true",
                    help="bytegrad only: skip the emitted-code speed")
    ap.add_argument("--ballast", type=int, default=0,
                    help="hold this many small live objects (empty lists) while measuring")
    ap.add_argument("--case-budget", type=float, default=CASE_BUDGET,
                    help="seconds of timing rounds per case")
    a = ap.parse_args(argv)
    PEER, CASE_BUDGET = a.peer, a.case_budget
    KEEP[:] = ["--ballast", str(a.ballast), "--case-budget", f"{a.case_budget:g}"]
    global CASES
    if a.cases:
        wanted = [c for c in a.cases.split(",") if c]
        unknown = set(wanted) - set(_cases.BY_NAME)
        if unknown:
            ap.error(f"unknown cases: {', '.join(sorted(unknown))}")
        CASES = [_cases.BY_NAME[c] for c in dict.fromkeys(wanted)]  # in the order given
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    try:
        version, make = PEERS[a.peer]()
    except Exception as e:  # noqa: BLE001 — not installed (or broken): "n/a"
        report({"kind": "peer", "available": False, **_error(e)})
        progress(f"not available: {type(e).__name__}: {e}")
        return
    import_time = time.perf_counter() - START
    BALLAST.append(ballast(a.ballast))
    report({"kind": "peer", "available": True, "version": version,
            "python": sys.version.split()[0], "numpy": np.__version__,
            "import_time": import_time, "ballast": a.ballast, "live_objects": live_objects()})
    jit_only = a.peer == "jax" and a.jit_only
    first_calls = {} if jit_only else run_cases(make, small=(a.peer == "jax" and not a.full))
    if a.peer == "jax":
        run_jax_jit(first_calls, a.jit_deadline, a.jit_limit)
    if a.peer == "bytegrad" and not a.no_emit:
        import emit_speed
        progress("emitted-code speed ...")
        emit_speed.run(report)
    report({"kind": "done", "elapsed": time.perf_counter() - START})


if __name__ == "__main__":
    main()
