"""A cache of large gradient arrays, reused once nothing refers to them.

Why: glibc's malloc gives the memory of a freed large block back to the system when
it lies at the top of the heap, and a fresh block's pages then fault in on first touch.
A gradient is typically made, handed to the caller and dropped one step later, so
every call of a gradient of the MLP in ``bench/`` paid ~220 page faults (a third of its
time) for its two 512 KiB weight gradients.  The primal, whose temporaries die young,
pays none.  PyTorch and JAX keep their own caching allocators for the same reason.

A pullback asks `empty` for its output instead of NumPy.  A cached array is handed
out again only when the cache holds the only reference to it: a gradient the caller
still holds, any view of it (a view refers to its base) or a weak reference to it, is
never written over.
Small arrays are not cached (malloc reuses their memory without faults), nor are
arrays once the cache holds `LIMIT` bytes.  The cache is per thread.
"""
from __future__ import annotations

import sys
import threading
import weakref

from ._frozen import np

SMALL = 1 << 16          # arrays below 64 KiB are left to malloc
LIMIT = 64 << 20         # the most memory one thread's cache refers to
PER_SHAPE = 4            # a gradient and the previous call's, two of each shape
_FREE = 3                # references to a free array: the cache's list, `a`, getrefcount's argument

_local = threading.local()
_DTYPE = type(np.dtype(np.float64))  # (NumPy 2: a class per kind of dtype)


def _cache():
    c = getattr(_local, "cache", None)
    if c is None:
        c = _local.cache = {}
        _local.size = 0
    return c


def empty(shape, dtype=np.float64):
    """``np.empty(shape, dtype)``, from the cache when the array is large.

    The array is the caller's until the caller drops it; its contents are undefined.
    """
    if type(dtype) is not _DTYPE:
        dtype = np.dtype(dtype)
    n = dtype.itemsize
    for s in shape:
        n *= s
    if n < SMALL or n > LIMIT:
        return np.empty(shape, dtype)
    c = getattr(_local, "cache", None)
    if c is None:
        c = _cache()
    key = (tuple(shape), dtype)
    arrays = c.get(key)
    if arrays is None:
        arrays = c[key] = []
    for i in range(len(arrays)):
        a = arrays[i]
        if sys.getrefcount(a) == _FREE and not weakref.getweakrefcount(a):  # (no weak one either)
            # intact: its last holder may have set its shape, dtype or flags.writeable
            f = a.flags
            if a.shape == key[0] and a.dtype is dtype and f.writeable and f.c_contiguous \
                    and f.owndata:
                return a
            del arrays[i]  # reshaped, retyped or frozen: not ours now
            _local.size -= n
            break
    a = np.empty(shape, dtype)
    if len(arrays) == PER_SHAPE:
        # all in use by callers, who keep them: forget the oldest (it is theirs now)
        del arrays[0]
        _local.size -= n
    if _local.size + n > LIMIT:
        c.clear()
        _local.size = 0
        c[key] = arrays = []
    arrays.append(a)
    _local.size += n
    return a


def matmul(a, b):
    """``a @ b`` into an array from `empty` (2-D float operands; others as ``a @ b``)."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype.kind not in "fc" \
            or a.shape[0] * b.shape[1] * a.itemsize < SMALL:
        return a @ b
    return np.matmul(a, b, out=empty((a.shape[0], b.shape[1]), a.dtype))
