"""Second derivatives: `hvp` and `hessian`, forward over reverse.

``hvp(f, primals, tangents)`` is ``jvp(grad(f), primals, tangents)[1]``, as JAX defines
it.  Computed so, the jvp's forward rule of the inner gradient (`nesting.vjp_at`) runs
the pullback of ``a ↦ jvp(f, a, tangents)`` (reverse over the tangent code), and beside
it the gradient itself and ``f`` at the outer level, which the Hessian-vector product
drops.  Outside any differentiation `hvp` runs that pullback alone (and the gradient
only where the product has a zero: the jvp gives None where the gradient is None, a
zero elsewhere).  `hessian` is that pullback once for up to 128 columns: the tangents
along them stacked in `batching.Batch`es, and the seed too, so that each gradient is a
Batch of one per column (`_batched_hvp`, primitives/batches.py); where the code does
what a Batch does not define (NumPy's reductions of a tangent), one `hvp` per column,
laid out as the inputs.
Inside a differentiated function `hvp` is the jvp, lifted by the outer level as any
code is.

    >>> import bytegrad
    >>> bytegrad.hvp(lambda x: x ** 4, (2.0,), (1.0,))   # 12 x²
    48.0
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable, Sequence

import numpy as np

from . import api, batching
from .api import _callable, grad
from .computing import computing
from .jax_api import _dense, _held, _inputs, _leaves, _pairs, _rebuild, forward_jacobian, jacfwd, jvp
from .jvp import NESTED, NESTED_BATCHED, compiled_tangent
from .nesting import _Along, refusing_changes
from .tangents import TangentShadow, isolated_at
from .utilities import nestlevel

_COMPUTING = computing()


def hvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        argnums: int | Sequence[int] = 0) -> Any:
    """The Hessian-vector product ``∇²f · tangents``: the tangent of ``grad(f, argnums)``
    at ``primals`` along ``tangents`` (one per positional argument, None for zero), by
    forward over reverse, as JAX's documentation defines it:
    ``jvp(grad(f), primals, tangents)[1]``."""
    _callable(f)
    if nestlevel():  # (first: an outer level lifts what runs before it)
        return jvp(grad(f, argnums), primals, tangents)[1]
    single, wanted, _ = api._argnums(argnums)
    n = len(primals) if isinstance(primals, (tuple, list)) else 0
    if not all(-n <= i < n for i in wanted):  # (its error)
        return jvp(grad(f, argnums), primals, tangents)[1]
    primals, tangents = _pairs(primals, tangents)
    tf, args, wrt, at = _tangent_of(f, primals, tangents, wanted)
    with _COMPUTING:
        with isolated_at(0, TangentShadow()) as sh, refusing_changes(sh, f):
            (y, _), back = api._pullback(tf, args, wrt, {})
        if isinstance(y, (bool, int, np.integer, np.bool_)):  # (piecewise constant: no gradient)
            return None if single else (None,) * len(wanted)
        g = back((None, api._seed(y, f)))  # (the seed on the tangent alone)
    dg = tuple(g[at + i % n] for i in wanted)
    if any(d is None for d in _leaves(dg)):
        # (zero, or no gradient at all, which the jvp of the gradient gives as None: the
        # gradient tells them apart)
        like = api._value_and_gradient(f, primals, _positions(wanted, n), {})[1]
        like = tuple(like[i] for i in wanted)
    else:
        like = tuple(primals[i] for i in wanted)
    held = _held(primals, tangents)
    out = tuple(_dense(d, v, held) for d, v in zip(dg, like))
    return out[0] if single else out


def _tangent_of(f, primals, tangents, wanted, variant=NESTED):
    """``(g, args, wrt, at)``: ``g(*args)`` is ``(f(*primals), its tangent)``, to be
    differentiated in the positions ``wrt``; the gradient of ``primals[i]`` is at
    ``at + i``.  A Python function's tangent code is called itself, the tangents
    constants, so reverse mode leaves out what only they, or arguments outside
    ``wanted``, would need (of the MLP loss, half the matrix products); its ``variant``
    (`jvp.NESTED`, or `jvp.NESTED_BATCHED`: every call through `jvp_call`)."""
    n = len(primals)
    if type(f) is types.FunctionType:
        c = compiled_tangent(f, variant)
        if c.arity == n:
            return (types.FunctionType(c.tangent_code, f.__globals__), (f,) + primals + (None,) + tangents,
                    tuple(1 + i for i in _positions(wanted, n)), 1)
    return _Along(f, None, tangents, TangentShadow()), primals, _positions(wanted, n), 0


def _positions(wanted, n):
    """The positions of the arguments ``wanted`` names (negative, or more than once)."""
    return tuple(sorted({i % n for i in wanted}))


def hessian(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
            has_aux: bool = False) -> Callable[..., Any]:
    """JAX's ``hessian``: ``jacfwd(grad(f, argnums), argnums)``, forward over reverse:
    the Hessian-vector products of the input elements' columns in batched passes, or
    one at a time (`hvp`).  For ``x`` of shape ``(n,)``
    it is ``(n, n)``; in general ``in.shape + in.shape`` per pair of input leaves, with
    tuples, lists and dicts laid out as `jacfwd` lays them out."""
    _callable(f)
    if has_aux:  # (the aux comes with the gradient)
        return jacfwd(grad(f, argnums, has_aux), argnums, has_aux)

    @functools.wraps(f)
    def hess(*args, **kw):  # (keyword arguments pass through, as JAX's: no derivative in them)
        g = (lambda *a: f(*a, **kw)) if kw else f

        def column(a, ts):
            d = hvp(g, a, ts, argnums)
            x = _inputs(a, argnums, "hessian")[2]
            if any(leaf is None for leaf in _leaves(d)):  # (an input the value does not depend on: a
                # zero block, as JAX's; its gradient is None, the one zero)
                d = _rebuild(x, iter([np.zeros(np.shape(v), np.result_type(v, 0.0)) if leaf is None else leaf
                                      for leaf, v in zip(_leaves(d), _leaves(x))]))
            return None, d
        return forward_jacobian(column, None, args, argnums, False, "hessian",
                                lambda a, ts: _batched_hvp(g, a, ts, argnums), FEWEST)
    return hess


# (below it, the columns take less time: a batch's operation on k numbers costs about as
# much as the k operations of scalar code)
FEWEST = 8


def _batched_hvp(f, primals, tangents, argnums):
    """`hvp` along the directions of the Batches in ``tangents``, in one reverse pass of
    the tangent code seeded with a Batch (primitives/batches.py): ``(x, d)``, ``x`` the
    inputs as `hvp` returns their gradients, ``d`` holding Batches; raises
    `batching.Abandon` where the directions must be taken one at a time (and where
    anything is not as `hvp` would take it: its errors and zeros are the columns')."""
    single, wanted, _ = api._argnums(argnums)
    k = batching.size(tangents)
    try:
        tf, args, wrt, at = _tangent_of(f, tuple(primals), tuple(tangents), wanted, NESTED_BATCHED)
        with _COMPUTING, batching.reverse_pass(k) as state:
            with isolated_at(0, TangentShadow()) as sh, refusing_changes(sh, f):
                (y, dy), back = api._pullback(tf, args, wrt, {})
            if type(y) not in (float, np.float64) or type(dy) is not batching.Batch or dy.b.shape != (k,):
                raise batching.Abandon
            g = back((None, batching.Batch(np.ones(k))))
    except (batching.Unbatchable, Exception):
        # (an error of yours the columns raise again; or NumPy's, given a Batch where it
        # takes a number: ``a[i] = d`` is a ValueError)
        raise batching.Abandon from None
    n = len(primals)
    dg = tuple(g[at + i % n] for i in wanted)
    x = tuple(primals[i] for i in wanted)
    leaves = list(_leaves(dg))
    if state.abandoned or len(leaves) != len(list(_leaves(x))) or \
            any(type(d) is not batching.Batch for d in leaves):
        raise batching.Abandon  # (code of yours caught an Unbatchable; or a zero: the columns tell)
    return (x[0], dg[0]) if single else (x, dg)


