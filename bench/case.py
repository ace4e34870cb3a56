"""A benchmark case (``Case``), how a peer runs its code (``rebind``), and the gradient
check (``max_rel_error``).  Imports only NumPy: every peer's subprocess loads it."""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class Case:
    name: str
    fn: Callable                  # the plain function: primal timing and bytegrad
    make_args: Callable           # () -> positional arguments (NumPy / Python numbers)
    wrt: tuple                    # indices of the arguments differentiated
    reference: Callable           # (*args) -> reference gradients, one per index in wrt
    description: str
    # lib -> the function a peer differentiates, where rebinding ``np`` is not enough (the
    # ``math.sin`` in ``recursion``); ``lib`` has the peer's ``np`` and ``sin``.
    peer_variant: Callable | None = None
    # A smaller instance for jax without jit, which takes seconds per call and minutes to
    # warm up on the full size (each distinct x[i] is compiled separately).
    small_args: Callable | None = None
    small_size: str = ""
    target: float | None = None   # the target for bytegrad's gradient / primal
    # Hand-written gradients to compare bytegrad with: name -> function of the arguments;
    # hand_target = (name, ratio): bytegrad's gradient within ratio x that one.
    hand: dict = field(default_factory=dict)
    hand_target: tuple | None = None
    # jax.jit compiles this case last: XLA takes minutes over it (peer.py abandons a
    # compile after --jit-limit seconds, and everything after it waits for a restart).
    jit_last: bool = False

    def peer_fn(self, lib=None):
        """The function a peer differentiates: the same code with the peer's NumPy as the
        global ``np`` (or the case's ``peer_variant``).  ``lib`` has attributes ``np`` and
        ``sin``; None gives the plain function."""
        if lib is None:
            return self.fn
        if self.peer_variant is not None:
            return self.peer_variant(lib)
        return rebind(self.fn, np=lib.np)


def rebind(f, **names):
    """``f`` (the same code object) running with ``names`` replacing its globals; the
    plain functions of ``f``'s module that ``f`` may call are rebound the same way.  A
    bound method stays bound to its object."""
    if isinstance(f, types.MethodType):
        return types.MethodType(rebind(f.__func__, **names), f.__self__)
    g = dict(f.__globals__, **names)
    for k, v in list(g.items()):
        if type(v) is types.FunctionType and v.__module__ == f.__module__:
            g[k] = types.FunctionType(v.__code__, g, v.__name__, v.__defaults__, v.__closure__)
    return types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)


def max_rel_error(got, ref) -> float:
    """Largest |got - ref| over all gradients, relative to max(1, |ref|)."""
    worst = 0.0
    for g, r in zip(got, ref):
        g = np.asarray(g, dtype=float)
        r = np.asarray(r, dtype=float)
        if g.shape != r.shape:
            return float("inf")
        scale = max(1.0, float(np.max(np.abs(r))) if r.size else 1.0)
        worst = max(worst, float(np.max(np.abs(g - r))) / scale if r.size else 0.0)
    return worst
