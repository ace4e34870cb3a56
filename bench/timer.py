"""Timing as users run their code: the garbage collector stays on, and a result is the
median and the spread of many samples, never the best one alone.

``measure(fn)`` times one function; ``compare({"a": fa, "b": fb}, ratios=[("b", "a")])``
times several in interleaved rounds (one sample of each per round, in a rotating order),
so that a ratio is the median of ratios of samples taken side by side, in one process,
under the same load.  A sample is ``number`` calls in a row (``number`` chosen so that
one sample takes at least ``min_time`` seconds); rounds go on until ``budget`` seconds
have passed, with at least ``min_rounds`` and at most ``max_rounds`` of them.

A statistics record (``stats``) is ``{"median", "q1", "q3", "min", "max", "samples",
"number", "gc"}``: seconds per call (or a ratio), the quartiles of the samples, how many
samples, how many calls each, and whether the garbage collector was on.
"""
from __future__ import annotations

import gc
import statistics
import time

MIN_TIME = 0.02     # seconds per sample, at least
BUDGET = 2.0        # seconds for all rounds of one measurement
MIN_ROUNDS = 5
MAX_ROUNDS = 200


def stats(values, number: int = 1) -> dict:
    """Median, quartiles, extremes and count of ``values``."""
    v = sorted(values)
    if len(v) >= 2:
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
    else:
        q1 = q3 = v[0]
    return {"median": statistics.median(v), "q1": q1, "q3": q3, "min": v[0], "max": v[-1],
            "samples": len(v), "number": number, "gc": gc.isenabled()}


def calls_per_sample(fn, min_time: float = MIN_TIME) -> int:
    """The first of 1, 2, 5, 10, 20, 50, … calls in a row that take ``min_time``
    seconds (the calls made to find it count as warm-up)."""
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - t0 >= min_time:
            return number
        number = number * 5 // 2 if str(number)[0] == "2" else number * 2


def _sample(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def compare(fns: dict, ratios=(), budget: float = BUDGET, min_time: float = MIN_TIME,
            min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> dict:
    """Time each function of ``fns`` (name -> callable without arguments) in interleaved
    rounds.  Returns ``{"times": {name: stats}, "ratios": {"a/b": stats}}``: seconds per
    call of each, and for each ``(a, b)`` in ``ratios`` the ratio of a's sample to b's
    sample of the same round.  The garbage collector is left as it is (on, unless the
    caller turned it off: ``stats`` records which)."""
    names = list(fns)
    numbers = {k: calls_per_sample(fns[k], min_time) for k in names}
    samples = {k: [] for k in names}
    t0 = time.perf_counter()
    rounds = 0
    while rounds < max_rounds and (rounds < min_rounds or time.perf_counter() - t0 < budget):
        shift = rounds % len(names)
        for k in names[shift:] + names[:shift]:
            samples[k].append(_sample(fns[k], numbers[k]))
        rounds += 1
    out = {"times": {k: stats(samples[k], numbers[k]) for k in names}, "ratios": {}}
    for a, b in ratios:
        out["ratios"][f"{a}/{b}"] = stats([x / y for x, y in zip(samples[a], samples[b])])
    return out


def measure(fn, budget: float = BUDGET, min_time: float = MIN_TIME,
            min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS) -> dict:
    """``stats`` of the time per call of ``fn()``, garbage collector on."""
    return compare({"f": fn}, budget=budget, min_time=min_time, min_rounds=min_rounds,
                   max_rounds=max_rounds)["times"]["f"]


def once(fn) -> tuple:
    """``(fn(), seconds)`` for a single call (garbage collector as it is: on)."""
    t0 = time.perf_counter()
    y = fn()
    return y, time.perf_counter() - t0


def ballast(n: int) -> list:
    """``n`` small live objects tracked by the garbage collector (empty lists), as a
    program holding its data has; keep the result alive.  A full collection then
    traverses them all (it runs when the objects that survived younger collections
    since the last one reach a quarter of the old ones)."""
    keep = [[] for _ in range(n)]
    gc.collect()
    return keep


def live_objects() -> int:
    """Objects the garbage collector tracks, now."""
    return len(gc.get_objects())


def page_faults(fn, n: int = 10) -> float:
    """Minor page faults per call of ``fn()`` (after one warm-up call), or None where
    ``resource`` is missing.  A fresh ``mmap`` (glibc's malloc gives one to each block of
    128 KiB or more by default) faults in each of its pages when first touched."""
    try:
        import resource
    except ImportError:
        return None
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / n
