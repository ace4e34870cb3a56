"""Speed of the emitted code: ``function(lift(f), f.__globals__)`` against ``f`` itself.

Lifting a function to the IR and emitting it again should give code as fast as the
original (target: emitted/original ≤ 1.0–1.1×).  Run standalone with
``python -m bytegrad.bench.emit_speed``; ``python -m bytegrad.bench`` runs it in the
bytegrad subprocess.
"""
from __future__ import annotations

try:
    from .cases import BY_NAME
    from .timer import compare
except ImportError:  # run as a script from bench/ (the peer subprocess)
    from cases import BY_NAME
    from timer import compare


def scalar_loop(n):
    s = 0.0
    for i in range(n):
        s = s * 0.999 + i * 0.5
    return s


def branchy(n):
    s = 0.0
    i = 0
    while i < n:
        if i % 3 == 0:
            s += i
        elif i % 3 == 1 and s > 0:
            s -= 0.5 * i
        else:
            s = s * 0.999
        i += 1
    return s


FUNCTIONS = [
    ("scalar_loop", "for over range(1000), float arithmetic", scalar_loop, lambda: (1000,)),
    ("rosenbrock_primal", "the rosenbrock_loop case, n = 1000", BY_NAME["rosenbrock_loop"].fn,
     BY_NAME["rosenbrock_loop"].make_args),
    ("nested_loop_primal", "the nested_loop case, 30x30", BY_NAME["nested_loop"].fn,
     BY_NAME["nested_loop"].make_args),
    ("branchy", "while loop with if/elif/else and `and`, 1000 iterations", branchy,
     lambda: (1000,)),
]


def run(report=print, budget=1.0):
    """Time each function and its emitted copy in interleaved rounds (``timer.compare``:
    median and quartiles, garbage collector on); ``report(dict)`` for each result."""
    from bytegrad.ir import function, lift

    for name, what, f, make_args in FUNCTIONS:
        args = make_args()
        rec = {"kind": "emit", "name": name, "description": what}
        try:
            g = function(lift(f), f.__globals__)
            same = g(f, *args) == f(*args)
            m = compare({"original": lambda: f(*args), "emitted": lambda: g(f, *args)},
                        ratios=[("emitted", "original")], budget=budget)
            rec.update(original=m["times"]["original"], emitted=m["times"]["emitted"],
                       ratio=m["ratios"]["emitted/original"], same_result=bool(same))
        except Exception as e:  # noqa: BLE001 — reported in the table
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        report(rec)


def main():
    rows = []
    run(rows.append)
    print("| function | original | emitted | emitted/original (median, IQR) |")
    print("|---|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['name']} | | | error: {r['error']} |")
        else:
            q = r["ratio"]
            print(f"| {r['name']} | {r['original']['median'] * 1e6:.1f} µs | "
                  f"{r['emitted']['median'] * 1e6:.1f} µs | {q['median']:.2f}× "
                  f"({q['q1']:.2f}–{q['q3']:.2f}, {q['samples']} rounds) |")


if __name__ == "__main__":
    main()
