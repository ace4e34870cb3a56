"""The cache of large gradient arrays: an array is reused only when nothing refers to it."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad.primitives import buffers

BIG = (128, 128)  # 128 KiB of float64: cached


def test_empty_has_the_shape_and_dtype_asked_for():
    for shape, dtype in [(BIG, np.float64), ((256, 64), np.float32), ((3,), np.float64),
                         ((64, 64, 4), np.complex128)]:
        a = buffers.empty(shape, dtype)
        assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous


def test_a_dropped_array_is_reused_and_a_held_one_is_not():
    a = buffers.empty(BIG)
    address = a.ctypes.data
    b = buffers.empty(BIG)
    assert not np.shares_memory(a, b)
    del a
    c = buffers.empty(BIG)
    assert c.ctypes.data == address  # the memory of the dropped array, not fresh pages
    assert not np.shares_memory(b, c)


def test_a_view_keeps_its_array_from_reuse():
    a = buffers.empty(BIG)
    v = a[::2, 1:]
    del a
    b = buffers.empty(BIG)
    assert not np.shares_memory(v, b)


def test_small_arrays_are_left_to_numpy():
    a = buffers.empty((8, 8))
    del a
    assert buffers._cache().get(((8, 8), np.dtype(np.float64))) is None


def test_the_cache_stays_under_its_limit():
    for n in range(1, 40):  # shapes of 1 to 39 MiB, all dropped at once
        buffers.empty((n, 1 << 17))
        assert buffers._local.size <= buffers.LIMIT


def test_threads_get_their_own_arrays():
    mine = buffers.empty(BIG)
    mine[...] = 1.0
    theirs = []
    t = threading.Thread(target=lambda: theirs.append(buffers.empty(BIG)))
    t.start()
    t.join()
    theirs[0][...] = 2.0
    assert not np.shares_memory(mine, theirs[0]) and np.all(mine == 1.0)


SHAPES = [BIG, (64, 256), (256, 256)]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["take", "drop", "view"]), st.integers(0, 7)),
                min_size=1, max_size=40))
def test_live_arrays_never_share_memory_or_change(steps):
    """Random takes, drops and views: every array still referred to (directly or by a
    view) keeps the contents it was given, and no two of them share memory."""
    held = []  # (array or view, marker)
    for k, (what, i) in enumerate(steps):
        if what == "take":
            a = buffers.empty(SHAPES[i % len(SHAPES)])
            a[...] = k
            held.append((a, k))
        elif held and what == "drop":
            held.pop(i % len(held))
        elif held and what == "view":
            j = i % len(held)
            held[j] = (held[j][0][1:, ::2], held[j][1])  # only the view keeps the array
    for a, marker in held:
        assert np.all(a == marker)
    for j, (a, _) in enumerate(held):
        for b, _ in held[j + 1:]:
            assert not np.shares_memory(a, b)


def _mlp(W1, b1, W2, b2, X, Y):
    h = np.tanh(X @ W1 + b1)
    return np.mean((h @ W2 + b2 - Y) ** 2)


def _mlp_exact(W1, b1, W2, b2, X, Y):
    h = np.tanh(X @ W1 + b1)
    dout = 2.0 * (h @ W2 + b2 - Y) / Y.size
    dpre = (dout @ W2.T) * (1.0 - h * h)
    return X.T @ dpre, dpre.sum(0), h.T @ dout, dout.sum(0)


def test_gradients_the_caller_keeps_are_not_overwritten_by_later_calls():
    """A training loop that keeps every step's gradients (large enough to be cached):
    each stays equal to the exact gradient of its own step."""
    rng = np.random.default_rng(0)
    g = bytegrad.grad(_mlp, argnums=(0, 1, 2, 3))
    kept = []
    for step in range(buffers.PER_SHAPE + 3):
        args = (rng.standard_normal((128, 128)) / 11, rng.standard_normal(128),
                rng.standard_normal((128, 128)) / 11, rng.standard_normal(128),
                rng.standard_normal((64, 128)), rng.standard_normal((64, 128)))
        kept.append((g(*args), _mlp_exact(*args)))
    for got, exact in kept:
        for a, b in zip(got, exact):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    arrays = [a for got, _ in kept for a in got]
    for j, a in enumerate(arrays):
        assert not any(np.shares_memory(a, b) for b in arrays[j + 1:])


def test_an_array_its_holder_reshaped_retyped_or_froze_is_not_handed_out_again():
    for change in (lambda a: setattr(a, "shape", (-1,)),
                   lambda a: setattr(a, "dtype", np.int64),
                   lambda a: setattr(a.flags, "writeable", False)):
        def run():
            a = buffers.empty(BIG)
            change(a)
            del a
            b = buffers.empty(BIG)
            assert b.shape == BIG and b.dtype == np.float64 and b.flags.writeable
        t = threading.Thread(target=run)  # a fresh cache
        t.start()
        t.join()


# -- 4. buffer cache ------------------------------------------------------------------

@pytest.mark.regression
def test_buffer_cache_leaves_held_views_and_changed_arrays_alone():
    n = 128
    r = np.random.default_rng(7)
    A, B = r.standard_normal((n, n)), r.standard_normal((n, n))
    f = lambda A, B: np.sum(np.tanh(A @ B))  # noqa: E731
    gA, _ = bytegrad.gradient(f, A, B)
    held = {"view": gA[1:], "T": gA.T, "frombuffer": np.frombuffer(gA),
            "memoryview": memoryview(gA)}
    ref = gA.copy()
    del gA
    for k in range(3):
        bytegrad.gradient(f, A * (2 + k), B)
    assert np.array_equal(held["view"], ref[1:]) and np.array_equal(held["T"], ref.T)
    assert np.array_equal(held["frombuffer"], ref.reshape(-1))
    assert np.array_equal(np.asarray(held["memoryview"]), ref)
    for change in (lambda g: setattr(g, "shape", (n * n,)),
                   lambda g: setattr(g.flags, "writeable", False)):
        g, _ = bytegrad.gradient(f, A, B)
        change(g)
        del g
        g2, _ = bytegrad.gradient(f, A, B)
        assert g2.shape == (n, n) and g2.flags.writeable and g2.dtype == np.float64
