"""What a gradient computation changes in the interpreter while it runs.

**The cyclic garbage collector is paused.**  A tape is many small container objects
(pullbacks, tuples, cells) that live only until the reverse pass has read it.  The
collector counts each as a new object and rescans them, with every other live object
of the process at each full collection: in a process holding 10⁶ objects (a notebook
that imported torch and jax) that tripled a gradient's time.  Reference counting still
frees everything that is not in a cycle; cycles the user's code makes are collected
once the computation is over.  It is left off if it was off.

**The recursion limit is scaled.**  One level of a user's recursion runs as two frames
going forward (``forward`` and the transformed function) and two counted calls going
back (the pullback's ``__call__``, which the adjoint calls as a method, `ops.pull`, and
the adjoint it calls); a call that binds keywords or
defaults, three each way (``_call``; the pullback's ``__call__``).  So while a
computation runs the limit is `FRAMES` times the user's: a recursion reaches the depth
the plain call reaches (a plain one, deeper).  Those calls also use the C stack (a plain
recursion of Python functions does not), so the limit is scaled only where the stack
holds the scaled depth with room to spare (`_levels`: the main thread, under its stack's
size); elsewhere (a raised limit, another thread, or the main thread while another
thread computes) it stays the user's, so a recursion too deep raises an error rather
than crashing the interpreter.  A recursion that goes too deep raises `DepthError` (a
``RecursionError``) naming the user's line and the fix.

Threads share both settings, so they are restored when the last computation in any
thread ends.
"""
from __future__ import annotations

import gc
import os
import sys
import threading

FRAMES = 3
_MARGIN = 100  # frames of the API and the rules around the user's code

_lock = threading.Lock()
_depth = 0
_resume = False
_limits = None  # (the user's limit, the scaled one)


_BYTES_PER_LEVEL = 4096  # C stack per level of a differentiated recursion: 1-1.5 KB


def _levels():
    """How many levels of a differentiated recursion this thread's C stack holds: the
    main thread's stack is the process's limit (read once); another thread's size is not
    known (``threading.stack_size`` tells only what new threads get), so none is assumed."""
    global _main_levels
    if threading.get_ident() != _MAIN:
        return 0
    if _main_levels is None:
        try:
            import resource
            size = resource.getrlimit(resource.RLIMIT_STACK)[0]
        except (ImportError, ValueError):
            size = -1
        _main_levels = (size if size > 0 else 8 << 20) // _BYTES_PER_LEVEL
    return _main_levels


_main_levels = None
_MAIN = threading.main_thread().ident


class DepthError(RecursionError):
    """A recursion too deep to differentiate under the current recursion limit."""


class computing:
    """``with computing():`` runs a gradient computation (re-entrant)."""

    __slots__ = ()

    def __enter__(self):
        global _depth, _resume, _limits
        with _lock:
            if _depth == 0:
                _resume = gc.isenabled()
                gc.disable()
                user = sys.getrecursionlimit()
                scaled = user * FRAMES + _MARGIN
                _limits = (user, scaled if scaled <= FRAMES * _levels() else user)
                sys.setrecursionlimit(_limits[1])
            elif _limits[1] != _limits[0] and threading.get_ident() != _MAIN:
                # another thread's stack may not hold the main thread's scaled depth
                try:
                    sys.setrecursionlimit(_limits[0])
                    _limits = (_limits[0], _limits[0])
                except RecursionError:  # (this thread is deeper than that already)
                    pass
            _depth += 1

    def __exit__(self, kind, e, tb):
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _resume:
                    gc.enable()
                if sys.getrecursionlimit() == _limits[1]:  # (unless the user's code set it)
                    sys.setrecursionlimit(_limits[0])
        if kind is RecursionError:  # (a DepthError from an inner computation is not one)
            raise _too_deep(tb) from e


def _too_deep(tb):
    file, line = _user_line(tb)
    user, limit = _limits
    raised = f"so it raised the limit to {limit} while it ran" if limit != user else \
        "and did not raise it (in another thread than the main one, or past what the stack holds)"
    return DepthError(
        f"{file}:{line}: maximum recursion depth exceeded while differentiating (the "
        f"recursion limit is {user}, bytegrad runs up to {FRAMES} frames per level of your "
        f"recursion, {raised}); raise the limit before calling bytegrad, with "
        f"sys.setrecursionlimit(n), or write the recursion as a loop")


_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep, \
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "primitives") + os.sep


def _user_line(tb):
    """``(file, line)`` of the innermost frame of ``tb`` outside bytegrad's runtime."""
    where = ("<unknown>", 0)
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(_OURS) and tb.tb_lineno is not None:
            where = (code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return where
