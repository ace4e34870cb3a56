"""Gradient utilities written as rules, as in §2 of the Zygote paper: ``hook``,
``checkpoint``, ``nestlevel`` (and the rule of ``stop_gradient``).  None of them is
known to a pass; each is a plain function plus an entry in the rule registry.
"""
from __future__ import annotations

from . import shadow, tangents
from .api import stop_gradient
from .errors import user_location
from .forward import forward
from .rules import nograd, rule


def hook(fn, x):
    """``x``; in the reverse pass its gradient ``dx`` is replaced by ``fn(dx)``::

        clip = lambda g: np.clip(g, -1.0, 1.0)
        bytegrad.gradient(lambda w: loss(bytegrad.hook(clip, w)), w)   # clipped gradient

    ``fn`` runs on the gradient as it is (not differentiated); ``hook(print, x)``
    shows it, ``hook(operator.neg, x)`` reverses it.
    """
    return x


@rule(hook)
def _hook(fn, x):
    shadow.hand_on(x, "hook")
    return x, lambda dy: (None, None, fn(dy))


def checkpoint(f, /, *args, **kw):
    """``f(*args, **kw)``, differentiated without keeping ``f``'s tape: the forward pass runs
    ``f`` plainly, and the reverse pass runs it again under AD to get its pullback.
    Trades time (``f`` runs twice) for memory.  ``f`` must give the same result when
    run again: no randomness, and the arguments must not be mutated in between::

        y = bytegrad.checkpoint(block, h, w)   # inside a function being differentiated
    """
    return f(*args, **kw)


@rule(checkpoint)
def _checkpoint(f, /, *args, **kw):
    outer = shadow.current()
    y = f(*args, **kw)

    def back(dy):
        with shadow.fresh() as sh:
            _, pb = forward(f, *args, **kw)
        g = pb(dy)
        sh.hand_on(outer)
        return (None, *g)
    return y, back


def nestlevel() -> int:
    """The order of differentiation in progress: 0 outside any gradient, 1 while
    ``gradient``/``pullback`` runs the forward pass of the function it differentiates
    (and while ``checkpoint`` re-runs one), 2 inside a gradient of a gradient.

    Zygote's rule ``nestlevel() = nestlevel() + 1`` needs every call to pass through
    the transform; here a call with no differentiable argument stays a plain call, so
    the level is read from the runtime: the number of gradient computations whose
    forward pass is running (each has its own shadow), and of forward-mode levels an
    outer one lifts (`tangents.current_in`: ``jvp`` of ``jvp``).  An inner gradient's
    function runs once at the outer level too (for its value), where the count is one
    less.
    """
    return tangents.levels()


@rule(nestlevel)
def _nestlevel():
    return nestlevel(), nograd(0)


@rule(stop_gradient)
def _stop_gradient(x):
    return stop_gradient(x), nograd(1)


def _nested(f, /, *args, **kw):
    file, line = user_location()
    raise NotImplementedError(
        f"{file}:{line}: a Jacobian (jacfwd, jacrev) inside a function being differentiated is "
        f"not supported yet: nest grad, value_and_grad, gradient, pullback, vjp or jvp instead")


# -- forward mode: the same utilities' forward rules; the API nested (runtime/nesting.py)
from . import jax_api, nesting  # noqa: E402,F401  (after the rules above: it imports the API they extend)
from .frules import frule  # noqa: E402
from .jvp import jvp_call  # noqa: E402

rule(jax_api._inputs)(_nested)  # (what every Jacobian function calls first)
frule(jax_api._inputs)(lambda tangents, /, *args, **kw: _nested(None))


@frule(stop_gradient)
def _stop_gradient_tangent(tangents, x):
    return x, None


@frule(hook)
def _hook_tangent(tangents, fn, x):
    return x, tangents[1]  # (a hook changes gradients, not tangents)


@frule(checkpoint)
def _checkpoint_tangent(tangents, f, /, *args):
    return jvp_call(f, tangents[0], tangents[1:], *args)  # (no tape to save in forward mode)


@frule(nestlevel)
def _nestlevel_tangent(tangents):
    return nestlevel(), None
