"""Reverse rules of a `Batch`'s operations: `hessian`'s columns in one reverse pass.

`hessian` differentiates ``f``'s tangent code in reverse mode with the tangents of k
directions stacked in Batches (`runtime/batching.py`), and seeds the reverse pass with a
Batch too: direction j's seed on direction j's tangent.  No direction's tangent reaches
another's, so every gradient is a Batch of k, one per seed: a value's, each seed's
gradient of it (an operand ``x`` of ``x * dx``); a Batch's, each direction's along its
own seed.  The rules below compute them from the Batches' elementwise arithmetic; what
a Batch does not define raises `Unbatchable`, and the columns are computed one at a
time.

    >>> import operator
    >>> from bytegrad.runtime.batching import Batch
    >>> from bytegrad.runtime.forward import forward
    >>> y, back = forward(operator.mul, 3.0, Batch(np.array([1.0, 2.0])))
    >>> y.b, back(Batch(np.array([1.0, 1.0])))[1].b   # 3 dx, and each seed's d/d3.0
    (array([3., 6.]), array([1., 2.]))
"""
from __future__ import annotations

from ._frozen import np

from ..runtime.batching import Batch, Unbatchable
from ..runtime.rules import Lazy, rule
from ._util import summed


def _binary(method, grads):
    """The rule of Batch ``method`` ``s op o``; ``grads(d, s, o, y)`` gives the unsummed
    gradients of ``s`` and ``o`` for gradient Batch ``d`` of ``y``."""
    def r(s, o):
        y = method(s, o)

        def back(d):
            if d is None:
                return None, None, None
            ds, do = grads(d, s, o, y)
            return None, summed(ds, s), summed(do, o)
        return y, back
    rule(method)(r)


for _name, _grads in (
        ("add", lambda d, s, o, y: (d, d)), ("radd", lambda d, s, o, y: (d, d)),
        ("sub", lambda d, s, o, y: (d, -d)), ("rsub", lambda d, s, o, y: (-d, d)),
        ("mul", lambda d, s, o, y: (d * o, d * s)), ("rmul", lambda d, s, o, y: (d * o, d * s)),
        ("truediv", lambda d, s, o, y: (d / o, -(d * y) / o)),
        ("rtruediv", lambda d, s, o, y: (-(d * y) / s, d / s))):
    _binary(getattr(Batch, f"__{_name}__"), _grads)


@rule(Batch.__neg__)
def _neg(s):
    return -s, lambda d: (None, None if d is None else -d)


@rule(Batch.__pos__)
def _pos(s):
    return s, lambda d: (None, d)


@rule(Batch.__getitem__)
def _getitem(s, key):
    y = s[key]

    def grad(d):
        if type(d) is not Batch:
            raise Unbatchable
        g = np.zeros(s.b.shape, np.result_type(s.b.dtype, d.b.dtype))
        at = (slice(None),) + (tuple(key) if isinstance(key, tuple) else (key,))
        np.add.at(g, at, d.b)  # (an index array may repeat an element)
        return Batch(g)
    # (read where the adjoint wants it: of the tangents given, never)
    return y, lambda d: Lazy(None, None if d is None else lambda: grad(d), None)
