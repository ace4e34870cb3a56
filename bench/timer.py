"""``timeit``-style best-of-N timing that stays within a time budget."""
from __future__ import annotations

import gc
import time
import timeit


def _autorange(t: timeit.Timer, min_time: float):
    """``timeit.Timer.autorange`` with a configurable minimum: the first loop count in
    1, 2, 5, 10, 20, 50, … whose loop takes at least ``min_time`` seconds."""
    i = 1
    while True:
        for j in (1, 2, 5):
            number = i * j
            elapsed = t.timeit(number)
            if elapsed >= min_time:
                return number, elapsed
        i *= 10


def best_of(fn, repeat: int = 5, min_time: float = 0.1, budget: float = 3.0) -> dict:
    """The best per-call time of ``fn()`` in seconds, ``timeit``-style: a loop count is
    chosen so that one loop takes at least ``min_time`` seconds, then up to ``repeat``
    more loops are timed, as many as fit in ``budget`` seconds (a function taking
    seconds per call is timed by its autorange loop alone), and the minimum per-call time
    over all loops is returned.  Garbage collection is off while timing, as in ``timeit``.
    Returns ``{"best": s, "number": calls per loop, "samples": loops}``."""
    t = timeit.Timer(fn)
    number, elapsed = _autorange(t, min_time)
    samples = [elapsed / number]
    extra = min(repeat, int(budget // max(elapsed, 1e-9)))
    if extra > 0:
        samples += [s / number for s in t.repeat(extra, number)]
    return {"best": min(samples), "number": number, "samples": len(samples)}


def once(fn) -> tuple:
    """``(fn(), seconds)`` for a single call, with garbage collection off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        y = fn()
        return y, time.perf_counter() - t0
    finally:
        if enabled:
            gc.enable()


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
