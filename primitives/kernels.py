"""numba kernels, compiled on first use (importing numba costs half a second, so
``import bytegrad`` must not), cached on disk (``cache=True``)."""
from __future__ import annotations

import functools


def kernel(fn=None, **options):
    """``fn`` jitted by numba the first time it is called; ``@kernel`` or, with numba
    options, ``@kernel(error_model="numpy")`` (for kernels that divide: ``x / 0``
    gives inf/nan as in NumPy instead of raising, and the loop vectorizes)."""
    if fn is None:
        return functools.partial(kernel, **options)
    jitted = None

    @functools.wraps(fn)
    def call(*args):
        nonlocal jitted
        if jitted is None:
            import numba
            jitted = numba.njit(cache=True, nogil=True, **options)(fn)
        return jitted(*args)
    call.py_func = fn
    return call


@kernel
def scatter_add(out, index, values):
    """``out[index[k]] += values[k]`` for flat arrays, repeated indices adding up
    (what ``np.add.at`` does, without its per-element overhead)."""
    for k in range(index.shape[0]):
        out[index[k]] += values[k]
