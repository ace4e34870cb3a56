"""The cache of large gradient arrays: an array is reused only when nothing refers to it."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad.primitives import buffers
from checks import check_direction

BIG = (128, 128)  # 128 KiB of float64: cached

# what a user may still do to an array the cache handed out (NumPy 2.5 deprecates it)
pytestmark = pytest.mark.filterwarnings("ignore:Setting the (shape|dtype) on a NumPy array:DeprecationWarning")


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


@pytest.mark.regression
def test_a_weakly_referenced_array_keeps_its_values():
    # The cache counted strong references only: a weak reference saw the array change.
    import weakref
    a = buffers.empty(BIG)
    a[:] = 1.0
    r = weakref.ref(a)
    del a
    b = buffers.empty(BIG)
    b[:] = 2.0
    assert r() is None or np.all(r() == 1.0)


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


# ---------------------------------------------------------------------------
# gradients kept by the caller or by bytegrad are never written over (the cache is in use: 128 x 128)
# ---------------------------------------------------------------------------

N = 128  # 128 x 128 float64 = 128 KiB: above buffers.SMALL, so the cache is used
_R = np.random.default_rng(6)
X = _R.standard_normal((N, N))
W0 = _R.standard_normal((N, N)) * 0.1
V0 = _R.standard_normal((N, N)) * 0.1


def _without_cache(fn, *args):
    """``fn(*args)`` with the buffer cache switched off (every array fresh)."""
    old = buffers.SMALL
    buffers.SMALL = 1 << 62
    try:
        return fn(*args)
    finally:
        buffers.SMALL = old


def _in_thread(fn):
    """``fn()`` in a new thread (a fresh buffer cache); re-raises what it raised."""
    out = {}

    def run():
        try:
            out["r"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out["e"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "e" in out:
        raise out["e"]
    return out["r"]


_KINKED = {"h": 1e-7, "rtol": 1e-4}  # finite differences of programs with |.| at 16384 entries


def _same(ga, gb):
    if isinstance(ga, dict):
        return ga.keys() == gb.keys() and all(_same(ga[k], gb[k]) for k in ga)
    if isinstance(ga, (list, tuple)):
        return len(ga) == len(gb) and all(_same(a, b) for a, b in zip(ga, gb))
    if ga is None or gb is None:
        return ga is gb
    return np.shape(ga) == np.shape(gb) and np.allclose(ga, gb, rtol=1e-12, atol=1e-14)

_stash = []


def _keep(g):
    _stash.append(g)
    return g


def _twice_used_with_hook(W, X):
    H = np.tanh(X @ bytegrad.hook(_keep, W))
    return np.mean(H @ W) + np.sum(np.abs(H))


def _mutating(W, X):
    A = W.copy()
    A[3] = X[2] @ W
    A += X @ W
    A[:, 5] = 1.0
    return np.sum(np.abs(A)) + np.mean(A @ W)


def _checkpointed(W, X):
    y = bytegrad.checkpoint(lambda a, b: np.tanh(a @ b), X, W)
    return np.sum(y @ W) + np.mean(np.abs(y))


def _put_in_loop(W, X):
    acc = np.zeros((N, N))
    for i in range(3):
        acc = acc + np.abs(X @ W) * i
        np.put(acc, [0, 5, 7], W[0, :3])
    return np.mean(acc) + np.sum(acc @ W.T)


@pytest.mark.regression
@pytest.mark.parametrize("f", [_twice_used_with_hook, _mutating, _checkpointed, _put_in_loop])
def test_cache_results_kept_across_calls(f):
    kept = [bytegrad.gradient(f, W0 * (1 + 0.1 * k), X) for k in range(5)]
    refs = [_without_cache(bytegrad.gradient, f, W0 * (1 + 0.1 * k), X) for k in range(5)]
    assert all(_same(a, b) for a, b in zip(kept, refs))
    for k in (0, 4):  # and the results are right, not merely equal (a small step: |.| has
        for i in (0, 1):  # kinks, and a step of 1e-5 crosses some of 16384 of them)
            check_direction(f, (W0 * (1 + 0.1 * k), X), kept[k], (i,), **_KINKED)


@pytest.mark.regression
def test_cache_hook_stashed_gradients_survive_later_calls():
    _stash.clear()
    for k in range(4):
        bytegrad.gradient(_twice_used_with_hook, W0 * (1 + 0.1 * k), X)
    got = list(_stash)
    _stash.clear()
    for k in range(4):
        _without_cache(bytegrad.gradient, _twice_used_with_hook, W0 * (1 + 0.1 * k), X)
    assert len(got) == len(_stash) == 4
    assert all(np.array_equal(a, b) for a, b in zip(got, _stash))


def _mm(W):
    return np.sum(np.tanh(X @ W))


@pytest.mark.regression
def test_cache_views_memoryview_frombuffer_of_dropped_gradients_survive():
    t = bytegrad.gradient(_mm, W0)[0].T           # only a view is kept
    m = memoryview(bytegrad.gradient(_mm, W0 * 2)[0])
    b = np.frombuffer(bytegrad.gradient(_mm, W0 * 3)[0])
    r = np.asarray(bytegrad.gradient(_mm, W0 * 4)[0]).reshape(-1)
    copies = [t.copy(), bytes(m), b.copy(), r.copy()]
    cached = buffers._cache().get(((N, N), np.dtype(np.float64)), [])
    assert any(np.shares_memory(c, t) for c in cached)  # the cache is in use here
    for k in range(8):
        bytegrad.gradient(_mm, W0 * (5 + k))
    assert np.array_equal(t, copies[0]) and bytes(m) == copies[1]
    assert np.array_equal(b, copies[2]) and np.array_equal(r, copies[3])


def _mlp_loss(p, X):
    h = np.tanh(X @ p["W"])
    return np.mean((h @ p["V"]) ** 2) + np.mean(np.abs(p["W"]))


def _train(steps):
    p = {"W": W0.copy(), "V": V0.copy()}
    grads = []
    for _ in range(steps):
        g = bytegrad.gradient(_mlp_loss, p, X)[0]
        grads.append(g)
        for k in p:
            p[k] -= 0.1 * g[k]
    return p, grads


@pytest.mark.regression
def test_cache_training_loop_with_gradients_in_dicts():
    p1, g1 = _train(4)
    p2, g2 = _without_cache(_train, 4)
    assert _same(p1, p2) and _same(g1, g2)
    p = {"W": W0.copy(), "V": V0.copy()}
    check_direction(_mlp_loss, (p, X), (g1[0], None), (0, "W"), **_KINKED)
    check_direction(_mlp_loss, (p, X), (g1[0], None), (0, "V"), **_KINKED)


@pytest.mark.regression
def test_cache_pullback_called_twice_and_gradient_as_seed():
    y, back = bytegrad.pullback(lambda W: np.tanh(X @ W) @ W, W0)
    d1, d2 = np.ones((N, N)), _R.standard_normal((N, N))
    g1 = back(d1)[0]
    c1 = g1.copy()
    g2 = back(d2)[0]
    g3 = back(d1)[0]
    assert np.array_equal(g1, c1) and np.allclose(g3, c1) and g1 is not g2
    _, back2 = bytegrad.pullback(lambda W: X @ W, W0)
    assert np.allclose(back2(back(d2)[0])[0], X.T @ g2)


@pytest.mark.regression
def test_cache_threads():
    res = {}

    def work(t):
        res[t] = [bytegrad.gradient(_twice_used_with_hook, W0 * (1 + 0.01 * t), X * (1 + 0.01 * k))
                  for k in range(6)]

    ts = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for t in range(3):
        for k in (0, 5):
            args = (W0 * (1 + 0.01 * t), X * (1 + 0.01 * k))
            ref = _without_cache(bytegrad.gradient, _twice_used_with_hook, *args)
            assert _same(res[t][k], ref)
            check_direction(_twice_used_with_hook, args, res[t][k], (0,), n=1, **_KINKED)
    _stash.clear()


@pytest.mark.regression
def test_cache_nested_gradient_inside_a_hook():
    inner = []

    def hook(g):
        gi = bytegrad.gradient(lambda A: np.mean(np.tanh(A @ X) ** 2), g)[0]
        inner.append(gi)
        return g + 0.01 * gi

    def f(W):
        H = bytegrad.hook(hook, np.tanh(X @ W))
        return np.mean(H @ W) + np.mean(np.abs(W))

    got = [bytegrad.gradient(f, W0 * (1 + 0.1 * k))[0] for k in range(3)]
    got_inner = list(inner)
    inner.clear()
    ref = [_without_cache(bytegrad.gradient, f, W0 * (1 + 0.1 * k))[0] for k in range(3)]
    assert _same(got, ref) and _same(got_inner, inner)


# Pinned bug: the cache trusts that an array it handed out still has the shape, dtype and
# flags it had.  The caller owns a gradient and may legitimately change its metadata in
# place (``g.shape = -1`` to flatten it, ``g.flags.writeable = False`` to freeze it,
# ``g.dtype = ...`` to reinterpret it) before dropping it; the cache then hands the same
# object out again.

_POISON_FNS = {
    "mean": lambda W: np.mean(W),                          # _spread (np.mean fast path)
    "matmul": lambda W: np.sum(np.tanh(X @ W)),            # buffers.matmul
    "abs": lambda W: np.sum(np.abs(W)),                    # fused numba kernel
    "sum_axis": lambda W: np.sum(np.sum(W, axis=0) ** 2),  # _spread
}


def _after_user_changed_a_dropped_gradient(fn, change):
    ref = bytegrad.gradient(fn, W0)[0].copy()
    g = bytegrad.gradient(fn, W0)[0]
    change(g)
    del g
    return ref, [bytegrad.gradient(fn, W0)[0] for _ in range(2)]


def _flatten(g):
    g.shape = (-1,)


def _freeze(g):
    g.flags.writeable = False


def _reinterpret(g):
    g.dtype = np.int64


@pytest.mark.regression
@pytest.mark.parametrize("name", ["mean", "matmul", "abs"])
def test_cache_gradient_flattened_in_place_by_user_then_dropped(name):
    # Pinned bug: mean -> the next gradient has shape (16384,) instead of (128, 128);
    # matmul/abs -> ValueError from matmul's out= / the kernel's broadcast
    ref, later = _in_thread(lambda: _after_user_changed_a_dropped_gradient(_POISON_FNS[name], _flatten))
    for g in later:
        assert g.shape == (N, N) and np.allclose(g, ref)


@pytest.mark.regression
@pytest.mark.parametrize("name", ["mean", "matmul", "sum_axis"])
def test_cache_gradient_made_read_only_by_user_then_dropped(name):
    # Pinned bug: every later gradient of that shape in the thread raises
    # "ValueError: assignment destination is read-only" / "output array is read-only"
    ref, later = _in_thread(lambda: _after_user_changed_a_dropped_gradient(_POISON_FNS[name], _freeze))
    for g in later:
        assert np.allclose(g, ref)


@pytest.mark.regression
@pytest.mark.parametrize("name", ["mean", "sum_axis"])
def test_cache_gradient_dtype_reinterpreted_by_user_then_dropped(name):
    # Pinned bug: mean -> the next gradient is an int64 array of zeros (1/16384 truncated);
    # sum_axis -> every later gradient is float64 but truncated to integers
    ref, later = _in_thread(lambda: _after_user_changed_a_dropped_gradient(_POISON_FNS[name], _reinterpret))
    for g in later:
        assert g.dtype == np.float64 and np.allclose(g, ref)
