"""The cyclic garbage collector, paused while a gradient is computed.

A tape is millions of small container objects (pullbacks, tuples, cells) that live
only until the reverse pass has read it.  The collector counts each as a new
object and rescans them, with every other live object of the process at each full
collection: in a process holding 10⁶ objects (a notebook that imported torch and
jax) that tripled a gradient's time.  Reference counting still frees everything that
is not in a cycle; cycles the user's code makes are collected once the computation
is over.  Threads share one collector, so it stays paused until the last computation
in any thread ends, and it is left off if it was off.
"""
from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_depth = 0
_resume = False


class paused:
    """``with paused():`` runs its body with the collector paused (re-entrant)."""

    __slots__ = ()

    def __enter__(self):
        global _depth, _resume
        with _lock:
            if _depth == 0:
                _resume = gc.isenabled()
                gc.disable()
            _depth += 1

    def __exit__(self, *exc):
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
