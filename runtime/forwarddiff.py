"""Mixed mode (§5 of the Zygote paper): `forwarddiff`, forward mode inside reverse mode.

Reverse mode keeps a tape entry per operation and pays a pullback call for each; for a
function of a few inputs that runs a long computation (an ODE step loop, a scalar
recursion), pushing one tangent per input through it in forward mode costs less and
keeps no tape.  ``forwarddiff(f, *args)`` is ``f(*args)``; under reverse mode, its
forward pass also computes the Jacobian of ``f`` (one `jvp` per input element), and its
pullback applies the transposed Jacobian to the output's gradient.

    >>> import bytegrad, math
    >>> def loss(a):
    ...     return bytegrad.forwarddiff(lambda a: math.sin(a) * a, a) ** 2
    >>> round(bytegrad.grad(loss)(0.5), 12) == round(2 * math.sin(0.5) * 0.5 * (math.cos(0.5) * 0.5 + math.sin(0.5)), 12)
    True
"""
from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np

from .algebra import is_differentiable
from .errors import full_name, user_location
from .forward import forward
from .frules import frule
from .jax_api import jacfwd
from .jvp import jvp_call
from .mutation import wrapping
from .rules import rule


def forwarddiff(f: Callable[..., Any], /, *args: Any) -> Any:
    """``f(*args)``, differentiated by forward mode inside reverse mode: the Jacobian of
    ``f`` in its float and float-array arguments is computed during the forward pass, one
    `jvp` per input element, and the pullback applies it.  Use it for a function with few
    inputs and a long computation.  ``f`` must return a float or a float array, and take
    every value to differentiate as an argument: a function that captures one (a closure
    over an array, a bound method) is differentiated in reverse mode as any call is."""
    return f(*args)


def _captures(f) -> bool:
    """Whether ``f`` holds a value that can carry a gradient (in its closure, or as the
    ``self`` of a bound method), which forward mode in the arguments would not reach."""
    held = [c.cell_contents for c in getattr(f, "__closure__", None) or () if _full(c)]
    if isinstance(f, types.MethodType):
        held.append(f.__self__)
    return any(map(is_differentiable, held))


def _differentiated(args):
    """The positions of the arguments to differentiate in; an error for an argument
    forward mode would leave without a gradient."""
    nums = []
    for i, a in enumerate(args):
        if isinstance(a, (float, np.floating)) or isinstance(a, np.ndarray) and a.dtype.kind == "f":
            nums.append(i)
        elif is_differentiable(a):
            raise TypeError(f"{'{}:{}'.format(*user_location())}: forwarddiff takes floats and float "
                            f"arrays as the arguments to differentiate, got a {type(a).__name__} "
                            f"(argument {i}); pass its arrays one by one")
    return tuple(nums)


def _full(cell):
    try:
        cell.cell_contents
    except ValueError:  # empty
        return False
    return True


@rule(forwarddiff)
def _forwarddiff(f, /, *args):
    if _captures(f):  # (its captured values need their gradients: reverse mode gives them)
        y, pb = forward(f, *args)
        return y, wrapping(pb, lambda dy: (None, *pb(dy)))
    nums = _differentiated(args)
    y = f(*args)
    if not nums:
        return y, lambda dy: (None,) * (len(args) + 2)
    if not (isinstance(y, (float, np.floating)) or isinstance(y, np.ndarray) and y.dtype.kind == "f"):
        raise TypeError(f"{'{}:{}'.format(*user_location())}: forwarddiff needs {full_name(f)} to "
                        f"return a float or a float array, got a {type(y).__name__}")
    J = jacfwd(f, argnums=nums)(*args)  # one block per argument: y.shape + arg.shape

    def back(dy):
        g = [None] * len(args)
        for i, block in zip(nums, J):
            d = np.tensordot(np.asarray(dy), block, axes=np.ndim(y))
            g[i] = d if isinstance(args[i], np.ndarray) else type(args[i])(d)
        return (None, None, *g)
    return y, back


@frule(forwarddiff)
def _forwarddiff_tangent(tangents, f, /, *args):
    return jvp_call(*((f, tangents[0], tangents[1:]) + args))
