"""Realistic programs at sizes where the buffer cache of large gradient arrays
(primitives/buffers.py, 64 KiB and up) is active: MLPs, autoencoders, RNNs, attention,
hypergradients, residual blocks, dict and dataclass models, the NumPy rules
(convolve/correlate/interp, cov/corrcoef, nan_to_num, put/place/fill_diagonal) in use,
gradients kept, dropped, changed in place or fed back as inputs and seeds.

Big arrays are checked by random-direction tests: ``<g, v>`` against
``(f(x + h v) - f(x - h v)) / 2h`` (``check_direction``).
"""
import copy
import dataclasses
import threading

import numpy as np
import pytest

import bytegrad
from checks import check_direction, check_grad, fd_gradient, rnd, shared_memory

N = 128  # 128 x 128 float64 = 128 KiB: the cache is active


# ---------------------------------------------------------------- MLP training loop

def mlp_loss(W1, b1, W2, b2, X, Y):
    H = np.tanh(X @ W1 + b1)
    P = H @ W2 + b2
    return np.mean((P - Y) ** 2)


@pytest.mark.regression
def test_mlp_training_loop_keeps_each_steps_gradients():
    W1, b1, W2, b2 = rnd((N, N), 1, 0.1), rnd(N, 2, 0.1), rnd((N, N), 3, 0.1), rnd(N, 4, 0.1)
    X, Y = rnd((64, N), 5), rnd((64, N), 6)
    params = [W1, b1, W2, b2]
    history, snapshots = [], []
    for step in range(4):
        gs = bytegrad.gradient(mlp_loss, *params, X, Y)
        history.append(gs)
        snapshots.append([np.copy(g) if g is not None else None for g in gs])
        params = [p - 0.1 * g for p, g in zip(params, gs[:4])]
    # nothing the later calls did changed an earlier step's gradients
    for gs, snap in zip(history, snapshots):
        for g, s in zip(gs[:4], snap[:4]):
            np.testing.assert_array_equal(g, s)
    # fresh recomputation of step 0
    p0 = [W1, b1, W2, b2]
    fresh = bytegrad.gradient(mlp_loss, *p0, X, Y)
    for g, s in zip(fresh[:4], snapshots[0][:4]):
        np.testing.assert_allclose(g, s, rtol=1e-12)
    args = (*p0, X, Y)
    for i in range(4):
        check_direction(mlp_loss, args, fresh, (i,))
    assert not shared_memory(fresh, args)


@pytest.mark.regression
def test_mlp_gradients_dropped_and_in_place_update():
    """The caller updates the gradient in place (g *= lr) and drops it: the cache reuses it."""
    W1, b1, W2, b2 = rnd((N, N), 11, 0.1), rnd(N, 12, 0.1), rnd((N, N), 13, 0.1), rnd(N, 14, 0.1)
    X, Y = rnd((64, N), 15), rnd((64, N), 16)
    ref = [np.copy(g) for g in bytegrad.gradient(mlp_loss, W1, b1, W2, b2, X, Y)[:4]]
    for _ in range(5):
        gs = bytegrad.gradient(mlp_loss, W1, b1, W2, b2, X, Y)
        for g, r in zip(gs[:4], ref):
            np.testing.assert_allclose(g, r, rtol=1e-12)
            g *= 0.01  # a change in place; the next call must not see it
        del gs
    kept = bytegrad.gradient(mlp_loss, W1, b1, W2, b2, X, Y)
    kept_copy = [np.copy(g) for g in kept[:4]]
    for _ in range(3):
        bytegrad.gradient(mlp_loss, W1, b1, W2, b2, X, Y)
    for g, c in zip(kept[:4], kept_copy):
        np.testing.assert_array_equal(g, c)


@pytest.mark.regression
def test_gradient_views_only_kept():
    """A caller who keeps only a view (row, transpose, reshape) of a gradient."""
    W1, b1, W2, b2 = rnd((N, N), 21, 0.1), rnd(N, 22, 0.1), rnd((N, N), 23, 0.1), rnd(N, 24, 0.1)
    X, Y = rnd((64, N), 25), rnd((64, N), 26)
    g = bytegrad.gradient(mlp_loss, W1, b1, W2, b2, X, Y)
    T, R, F = g[0].T, g[2][3], g[0].reshape(-1)
    Tc, Rc, Fc = T.copy(), R.copy(), F.copy()
    del g
    for _ in range(4):
        bytegrad.gradient(mlp_loss, W1 * 1.1, b1, W2 * 0.9, b2, X, Y)
    np.testing.assert_array_equal(T, Tc)
    np.testing.assert_array_equal(R, Rc)
    np.testing.assert_array_equal(F, Fc)


# ---------------------------------------------------------------- autoencoder

def autoencoder(W, b, c, X):
    Z = np.maximum(X @ W + b, 0.0)            # encoder, relu
    R = Z @ W.T + c                           # tied decoder
    return np.mean((R - X) ** 2) + 1e-3 * np.sum(W * W)


@pytest.mark.regression
def test_tied_autoencoder():
    W, b, c, X = rnd((N, 64), 31, 0.1), rnd(64, 32, 0.1), rnd(N, 33, 0.1), rnd((96, N), 34)
    args = (W, b, c, X)
    g = bytegrad.gradient(autoencoder, *args)
    for i in range(4):
        check_direction(autoencoder, args, g, (i,))
    assert not shared_memory(g, args)


# ---------------------------------------------------------------- RNN with preallocated state

def rnn(Wh, Wx, x, h0):
    T = x.shape[0]
    H = np.zeros((T + 1, h0.shape[0]))
    H[0] = h0
    for t in range(T):
        H[t + 1] = np.tanh(Wh @ H[t] + Wx @ x[t])
    return np.sum(H[1:] ** 2) / T


@pytest.mark.regression
def test_rnn_in_place_states():
    Wh, Wx = rnd((N, N), 41, 0.08), rnd((N, 32), 42, 0.1)
    x, h0 = rnd((6, 32), 43), rnd(N, 44)
    args = (Wh, Wx, x, h0)
    before = [a.copy() for a in args]
    g = bytegrad.gradient(rnn, *args)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
    for i in range(4):
        check_direction(rnn, args, g, (i,))


def rnn_batched(Wh, X, H):
    """H is preallocated by the caller (T+1, B, n) and filled in place."""
    for t in range(X.shape[0]):
        H[t + 1] = np.tanh(H[t] @ Wh + X[t])
    return np.mean(H[-1] ** 2)


@pytest.mark.regression
def test_rnn_batched_writes_into_callers_array():
    Wh, X = rnd((N, N), 45, 0.08), rnd((3, 64, N), 46)
    H = np.zeros((4, 64, N))
    H[0] = rnd((64, N), 47)
    plain = H.copy()
    rnn_batched(Wh, X, plain)
    g = bytegrad.gradient(rnn_batched, Wh, X, H)
    np.testing.assert_array_equal(H, plain)  # holds what the plain call leaves
    H0 = np.zeros((4, 64, N)); H0[0] = rnd((64, N), 47)
    f = lambda Wh, X, H0: rnn_batched(Wh, X, H0.copy())
    for i in range(2):
        check_direction(f, (Wh, X, H0), g, (i,))
    # the initial state's gradient: only H[0] matters
    v = np.zeros_like(H0); v[0] = rnd((64, N), 48)
    h = 1e-5
    fd = (f(Wh, X, H0 + h * v) - f(Wh, X, H0 - h * v)) / (2 * h)
    assert np.isclose(np.sum(g[2] * v), fd, rtol=1e-5)


# ---------------------------------------------------------------- logistic regression + interp

def logreg_interp(w, b, knots_y, X, y, knots_x):
    f1 = np.interp(X[:, 0], knots_x, knots_y)           # learned piecewise-linear feature
    z = X @ w + b + f1
    p = 1.0 / (1.0 + np.exp(-z))
    eps = 1e-12
    return -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))


@pytest.mark.regression
def test_logistic_regression_with_interp_feature():
    X = rnd((200, N), 51)
    w, b = rnd(N, 52, 0.05), 0.1
    knots_x = np.linspace(-3, 3, 9)
    knots_y = rnd(9, 53, 0.5)
    y = (np.random.default_rng(54).random(200) > 0.5).astype(float)
    check_grad(lambda w, b, ky: logreg_interp(w, b, ky, X, y, knots_x), w, b, knots_y)


# ---------------------------------------------------------------- 1-D CNN with np.convolve

def cnn1d(k1, k2, w, signal, target):
    h = np.tanh(np.convolve(signal, k1, mode="same"))
    h = np.convolve(h, k2, mode="valid")
    h2 = np.correlate(h, k1, mode="full")
    return np.mean((h2[: target.shape[0]] * w - target) ** 2)


@pytest.mark.regression
def test_cnn1d_convolve_correlate_big_signal():
    signal = rnd(20000, 61)              # 160 KiB
    k1, k2 = rnd(7, 62, 0.3), rnd(5, 63, 0.3)
    target = rnd(19000, 64)
    w = rnd(19000, 65)
    args = (k1, k2, w, signal, target)
    g = bytegrad.gradient(cnn1d, *args)
    for i in (0, 1):
        np.testing.assert_allclose(g[i], fd_gradient(cnn1d, args, i), rtol=1e-5, atol=1e-8)
    for i in (2, 3, 4):
        check_direction(cnn1d, args, g, (i,))


# ---------------------------------------------------------------- Gaussian log-likelihood

def gauss_ll(mu, L, X):
    S = L @ L.T + 0.5 * np.eye(L.shape[0])
    sign, logdet = np.linalg.slogdet(S)
    D = X - mu
    m = np.sum(D * np.linalg.solve(S, D.T).T, axis=1)
    return -0.5 * np.mean(m) - 0.5 * logdet


@pytest.mark.regression
def test_gaussian_loglik_slogdet_solve():
    d = 40
    mu, L, X = rnd(d, 71, 0.1), rnd((d, d), 72, 0.2), rnd((300, d), 73)   # X 96 KiB
    args = (mu, L, X)
    g = bytegrad.gradient(gauss_ll, *args)
    for i in range(3):
        check_direction(gauss_ll, args, g, (i,))


def cov_fit(X):
    C = np.cov(X, rowvar=False)
    sign, ld = np.linalg.slogdet(C + 1e-3 * np.eye(C.shape[0]))
    R = np.corrcoef(X[:, :8], rowvar=False)
    return ld + np.sum(R ** 2)


@pytest.mark.regression
def test_cov_corrcoef_slogdet():
    X = rnd((400, 24), 74) + 0.1 * rnd((400, 1), 75)  # 75 KiB
    g = bytegrad.gradient(cov_fit, X)
    check_direction(cov_fit, (X,), g, (0,), n=3)


def weighted_cov(X, aw):
    C = np.cov(X, aweights=aw)
    return np.trace(C) + np.sum(C[0] * C[1])


@pytest.mark.regression
def test_weighted_cov_rows():
    X, aw = rnd((16, 800), 76), np.abs(rnd(800, 77)) + 0.1   # X 100 KiB
    g = bytegrad.gradient(weighted_cov, X, aw)
    check_direction(weighted_cov, (X, aw), g, (0,))
    check_direction(weighted_cov, (X, aw), g, (1,))


# ---------------------------------------------------------------- attention

def attention(Wq, Wk, Wv, X):
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    S = Q @ K.T / np.sqrt(Q.shape[1])
    S = S - np.max(S, axis=1, keepdims=True)
    A = np.exp(S)
    A = A / np.sum(A, axis=1, keepdims=True)
    O = A @ V
    return np.mean(O ** 2) + np.mean(O)


@pytest.mark.regression
def test_self_attention():
    Wq, Wk, Wv, X = (rnd((N, N), 81 + i, 0.1) for i in range(4))
    args = (Wq, Wk, Wv, X)
    g = bytegrad.gradient(attention, *args)
    for i in range(4):
        check_direction(attention, args, g, (i,))
    assert not shared_memory(g, args)


# ---------------------------------------------------------------- hypergradients

def unrolled_sgd(lr, wd, W0, X, Y):
    W = W0.copy()
    for _ in range(3):
        R = X @ W - Y
        G = X.T @ R / X.shape[0] + wd * W
        W -= lr * G                       # in place on a local copy
    return np.mean((X @ W - Y) ** 2)


@pytest.mark.regression
def test_hypergradient_unrolled_sgd():
    W0, X, Y = rnd((N, N), 91, 0.1), rnd((64, N), 92), rnd((64, N), 93)
    lr, wd = 0.05, 0.01
    before = W0.copy()
    g = bytegrad.gradient(unrolled_sgd, lr, wd, W0, X, Y)
    np.testing.assert_array_equal(W0, before)
    for i in (0, 1):
        fd = fd_gradient(unrolled_sgd, (lr, wd, W0, X, Y), i, h=1e-6)
        assert np.isclose(g[i], fd, rtol=1e-5), (i, g[i], fd)
    check_direction(unrolled_sgd, (lr, wd, W0, X, Y), g, (2,))


def unrolled_sgd_inplace_arg(lr, W, X, Y):
    """Updates the caller's W in place (a user's 'train' function)."""
    for _ in range(2):
        G = X.T @ (X @ W - Y) / X.shape[0]
        W -= lr * G
    return np.mean((X @ W - Y) ** 2)


@pytest.mark.regression
def test_hypergradient_in_place_on_argument():
    W, X, Y = rnd((N, N), 94, 0.1), rnd((64, N), 95), rnd((64, N), 96)
    lr = 0.05
    plain = W.copy()
    unrolled_sgd_inplace_arg(lr, plain, X, Y)
    W0 = W.copy()
    g = bytegrad.gradient(unrolled_sgd_inplace_arg, lr, W, X, Y)
    np.testing.assert_array_equal(W, plain)
    fd = fd_gradient(unrolled_sgd_inplace_arg, (lr, W0, X, Y), 0)
    assert np.isclose(g[0], fd, rtol=1e-5), (g[0], fd)
    check_direction(unrolled_sgd_inplace_arg, (lr, W0, X, Y), g, (1,))


# ---------------------------------------------------------------- residual blocks

def resnet(Ws, X):
    H = X
    for W in Ws:
        H = H + np.tanh(H @ W)          # same-shape a + b
    return np.mean(H * H)


@pytest.mark.regression
def test_residual_blocks_list_of_weights():
    Ws = [rnd((N, N), 100 + i, 0.05) for i in range(3)]
    X = rnd((64, N), 110)
    g = bytegrad.gradient(resnet, Ws, X)
    assert isinstance(g[0], list) and len(g[0]) == 3
    for i in range(3):
        check_direction(resnet, (Ws, X), g, (0, i))
    check_direction(resnet, (Ws, X), g, (1,))
    assert not shared_memory(g, (Ws, X))


def sum_two(a, b):
    return np.mean(a + b) + np.sum((a + b) * a) * 1e-3


@pytest.mark.regression
def test_same_shape_add_both_sides_separate():
    a, b = rnd((N, N), 111), rnd((N, N), 112)
    ga, gb = bytegrad.gradient(lambda a, b: np.mean(a + b), a, b)
    assert not np.shares_memory(ga, gb)
    np.testing.assert_allclose(ga, 1.0 / a.size)
    ga *= 2
    np.testing.assert_allclose(gb, 1.0 / a.size)
    g = bytegrad.gradient(sum_two, a, b)
    check_direction(sum_two, (a, b), g, (0,))
    check_direction(sum_two, (a, b), g, (1,))


def checkpointed_res(W1, W2, X):
    def block(H, W):
        return H + np.tanh(H @ W)
    H = bytegrad.checkpoint(block, X, W1)
    H = bytegrad.checkpoint(block, H, W2)
    return np.mean(H ** 2)


@pytest.mark.regression
def test_checkpointed_residual():
    W1, W2, X = rnd((N, N), 113, 0.05), rnd((N, N), 114, 0.05), rnd((64, N), 115)
    g = bytegrad.gradient(checkpointed_res, W1, W2, X)
    for i in range(3):
        check_direction(checkpointed_res, (W1, W2, X), g, (i,))


# ---------------------------------------------------------------- gradients as next inputs

def quad(x, A):
    return 0.5 * np.sum(x * (A @ x)) + np.mean(x)


@pytest.mark.regression
def test_gradient_fed_back_as_input():
    A = rnd((N, N), 121, 0.05); A = A @ A.T + np.eye(N)
    x = rnd((N, N), 122)
    xs = [x]
    for _ in range(4):
        g = bytegrad.gradient(quad, xs[-1], A)[0]
        xs.append(g)               # the gradient itself is the next input
    ref = [x]
    for _ in range(4):
        ref.append(A @ ref[-1] + 1.0 / x.size)
    for a, b in zip(xs, ref):
        np.testing.assert_allclose(a, b, rtol=1e-10)


@pytest.mark.regression
def test_gradient_used_as_seed_of_pullback():
    W, X = rnd((N, N), 123, 0.1), rnd((N, N), 124)
    f = lambda W, X: np.tanh(X @ W)
    y, back = bytegrad.pullback(f, W, X)
    seed = bytegrad.gradient(lambda W: np.mean((X @ W) ** 2), W)[0]
    seed_copy = seed.copy()
    g1 = back(seed)
    np.testing.assert_array_equal(seed, seed_copy)
    g1c = [g.copy() for g in g1]
    g2 = back(seed)
    for a, b in zip(g1, g1c):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(g2, g1c):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert not shared_memory(list(g1) + list(g2), (W, X, seed))
    d = 1 - y ** 2
    np.testing.assert_allclose(g1[0], X.T @ (seed * d), rtol=1e-10)
    np.testing.assert_allclose(g1[1], (seed * d) @ W.T, rtol=1e-10)


# ---------------------------------------------------------------- float32 networks

def mlp32(W1, W2, X):
    H = np.tanh(X @ W1)
    P = H @ W2
    return np.mean(P * P)


@pytest.mark.regression
def test_float32_mlp():
    W1, W2, X = (rnd((N, N), 130 + i, 0.1, np.float32) for i in range(3))   # 64 KiB each
    g = bytegrad.gradient(mlp32, W1, W2, X)
    for x, gg in zip((W1, W2, X), g):
        assert gg.dtype == np.float32 and gg.shape == x.shape
    g64 = bytegrad.gradient(mlp32, *(a.astype(np.float64) for a in (W1, W2, X)))
    for a, b in zip(g, g64):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-7)
    # and a float64 call with the same shape after, sharing no buffer
    c = [x.copy() for x in g]
    bytegrad.gradient(mlp32, *(a.astype(np.float64) for a in (W1, W2, X)))
    for a, b in zip(g, c):
        np.testing.assert_array_equal(a, b)


def elementwise32(x, y):
    return np.mean(np.sin(x) * np.exp(-y * y) + np.abs(x - y))


@pytest.mark.regression
def test_float32_fused_elementwise():
    x, y = rnd((N, 256), 135, 1.0, np.float32), rnd((N, 256), 136, 1.0, np.float32)
    g = bytegrad.gradient(elementwise32, x, y)
    g64 = bytegrad.gradient(elementwise32, x.astype(float), y.astype(float))
    for a, b in zip(g, g64):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-9)


# ---------------------------------------------------------------- dict / dataclass models

def dict_model(params, X, Y):
    H = np.tanh(X @ params["W1"] + params["b1"])
    P = H @ params["W2"]
    return np.mean((P - Y) ** 2) + 1e-4 * sum(np.sum(v * v) for v in params.values())


@pytest.mark.regression
def test_dict_model_with_argnums():
    params = {"W1": rnd((N, N), 141, 0.1), "b1": rnd(N, 142, 0.1), "W2": rnd((N, N), 143, 0.1)}
    X, Y = rnd((64, N), 144), rnd((64, N), 145)
    g = bytegrad.grad(dict_model, argnums=0)(params, X, Y)
    assert set(g) == set(params)
    for k in params:
        check_direction(dict_model, (params, X, Y), (g,), (0, k))
    y, (gp, gx) = bytegrad.value_and_grad(dict_model, argnums=(0, 1))(params, X, Y)
    assert np.isclose(y, dict_model(params, X, Y))
    for k in params:
        np.testing.assert_allclose(gp[k], g[k], rtol=1e-12)
    check_direction(dict_model, (params, X, Y), (gp, gx), (1,))
    assert not shared_memory((g, gp, gx), (params, X, Y))


@dataclasses.dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray

    def __call__(self, x):
        return np.tanh(x @ self.W + self.b)


@dataclasses.dataclass
class Net:
    layers: list
    head: np.ndarray


def net_loss(net, X, Y):
    h = X
    for layer in net.layers:
        h = layer(h)
    return np.mean((h @ net.head - Y) ** 2)


@pytest.mark.regression
def test_dataclass_network():
    net = Net([Layer(rnd((N, N), 150 + i, 0.1), rnd(N, 160 + i, 0.1)) for i in range(2)],
              rnd((N, 16), 170, 0.1))
    X, Y = rnd((64, N), 171), rnd((64, 16), 172)
    g = bytegrad.grad(net_loss)(net, X, Y)
    assert isinstance(g, dict) and isinstance(g["layers"], list)
    for i in range(2):
        for k in ("W", "b"):
            check_direction(net_loss, (net, X, Y), (g,), (0, "layers", i, k))
    check_direction(net_loss, (net, X, Y), (g,), (0, "head"))


# ---------------------------------------------------------------- threads

@pytest.mark.regression
def test_two_threads_gradients_at_once():
    W1, b1, W2, b2 = rnd((N, N), 181, 0.1), rnd(N, 182, 0.1), rnd((N, N), 183, 0.1), rnd(N, 184, 0.1)
    Xs = [rnd((64, N), 185 + i) for i in range(2)]
    Y = rnd((64, N), 187)
    refs = [bytegrad.gradient(mlp_loss, W1, b1, W2, b2, X, Y) for X in Xs]
    results = [[], []]
    errors = []

    def work(i):
        try:
            for _ in range(6):
                results[i].append(bytegrad.gradient(mlp_loss, W1, b1, W2, b2, Xs[i], Y))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for i in range(2):
        for gs in results[i]:
            for a, b in zip(gs[:4], refs[i][:4]):
                np.testing.assert_allclose(a, b, rtol=1e-12)


# ---------------------------------------------------------------- new rules in realistic use

def robust_loss(x, y):
    r = np.log(x) - y                    # -inf / nan where x <= 0
    r = np.nan_to_num(r, nan=0.0, posinf=10.0, neginf=-10.0)
    return np.mean(r ** 2)


@pytest.mark.regression
def test_nan_to_num_robust_loss():
    x = np.abs(rnd((N, N), 190)) + 0.1
    x[1, :5] = -1.0                         # nan, replaced
    y = rnd((N, N), 191)
    y[0, :5] = -np.inf                      # log(x) - y = inf, replaced
    y[2, :5] = np.inf                       # -inf, replaced
    with np.errstate(all="ignore"):
        g = bytegrad.gradient(robust_loss, x, y)
        assert np.all(g[0][:3, :5] == 0) and np.all(g[1][:3, :5] == 0)
        v = rnd((N, N), 192); v[:3] = 0
        h = 1e-6
        fd = (robust_loss(x + h * v, y) - robust_loss(x - h * v, y)) / (2 * h)
        assert np.isclose(np.sum(g[0] * v), fd, rtol=1e-5)
        v = rnd((N, N), 193); v[:3] = 0
        fd = (robust_loss(x, y + h * v) - robust_loss(x, y - h * v)) / (2 * h)
        assert np.isclose(np.sum(g[1] * v), fd, rtol=1e-5)


def masked_fill(x, vals):
    y = x * 2.0
    np.place(y, y > 1.0, vals)            # place cycles vals over the masked positions
    return np.mean(np.sin(y))


@pytest.mark.regression
def test_place_big():
    x, vals = rnd((N, N), 200), rnd(7, 201)
    with np.errstate(all="ignore"):
        g = bytegrad.gradient(masked_fill, x, vals)
    check_direction(masked_fill, (x, vals), g, (0,))
    np.testing.assert_allclose(g[1], fd_gradient(masked_fill, (x, vals), 1), rtol=1e-5, atol=1e-9)


def diag_reg(A, lam):
    B = A @ A.T
    np.fill_diagonal(B, lam)
    return np.sum(np.tanh(B)) / B.size


@pytest.mark.regression
def test_fill_diagonal_big():
    A, lam = rnd((N, N), 210, 0.1), 0.7
    g = bytegrad.gradient(diag_reg, A, lam)
    check_direction(diag_reg, (A, lam), g, (0,))
    assert np.isclose(g[1], fd_gradient(diag_reg, (A, lam), 1), rtol=1e-6)


def put_scatter(x, v):
    y = x.copy()
    np.put(y, [5, 60000, 3, 5], v)           # repeated 5: the last write wins
    y.put([10, 20], v[:2] * 3.0)
    return np.sum(y * y) / y.size


@pytest.mark.regression
def test_put_big():
    x, v = rnd((N, 4 * N), 220), rnd(4, 221)    # 512 KiB
    g = bytegrad.gradient(put_scatter, x, v)
    check_direction(put_scatter, (x, v), g, (0,))
    np.testing.assert_allclose(g[1], fd_gradient(put_scatter, (x, v), 1), rtol=1e-5, atol=1e-10)


def put_into_arg(x, v):
    x.put([1, 2, 3], v)
    x *= 1.5
    return np.mean(x ** 2)


@pytest.mark.regression
def test_put_into_argument_stateful():
    x, v = rnd((N, N), 222), rnd(3, 223)
    plain = x.copy(); put_into_arg(plain, v.copy())
    x0 = x.copy()
    g = bytegrad.gradient(put_into_arg, x, v)
    np.testing.assert_array_equal(x, plain)
    f = lambda x, v: put_into_arg(x.copy(), v)
    check_direction(f, (x0, v), g, (0,))
    np.testing.assert_allclose(g[1], fd_gradient(f, (x0, v), 1), rtol=1e-5, atol=1e-10)


# ---------------------------------------------------------------- reductions and layer norm

def layernorm_net(W, g_, b_, X):
    H = X @ W
    mu = np.mean(H, axis=1, keepdims=True)
    var = np.var(H, axis=1, keepdims=True)
    Z = (H - mu) / np.sqrt(var + 1e-5) * g_ + b_
    return np.mean(np.tanh(Z)) + np.mean(Z * Z)


@pytest.mark.regression
def test_layernorm():
    W, g_, b_, X = rnd((N, N), 240, 0.1), rnd(N, 241), rnd(N, 242), rnd((64, N), 243)
    g = bytegrad.gradient(layernorm_net, W, g_, b_, X)
    for i in range(4):
        check_direction(layernorm_net, (W, g_, b_, X), g, (i,))


def many_means(x):
    return np.mean(x) * np.mean(x ** 2) + np.sum(x) / x.size + np.mean(np.mean(x, axis=0))


@pytest.mark.regression
def test_whole_array_means_kept_gradients():
    x = rnd((N, N), 250)
    g1 = bytegrad.gradient(many_means, x)[0]
    c1 = g1.copy()
    g2 = bytegrad.gradient(many_means, x * 2)[0]
    np.testing.assert_array_equal(g1, c1)
    check_direction(many_means, (x,), (g1,), (0,))
    check_direction(many_means, (x * 2,), (g2,), (0,))
    gm = bytegrad.gradient(np.mean, x)[0]
    np.testing.assert_allclose(gm, 1.0 / x.size)
    assert not np.shares_memory(gm, g1)


def mean_of_param_twice(x):
    return np.mean(x) + np.mean(x)


@pytest.mark.regression
def test_mean_twice_accumulates():
    x = rnd((N, N), 251)
    g = bytegrad.gradient(mean_of_param_twice, x)[0]
    np.testing.assert_allclose(g, 2.0 / x.size)


def scatter_add_embed(E, idx, Y):
    emb = E[idx]                            # repeated rows
    acc = np.zeros((len(idx), E.shape[1]))
    np.add.at(acc, np.arange(len(idx)) % 7, emb)
    return np.mean((acc[:7] - Y) ** 2) + np.mean(emb ** 2)


@pytest.mark.regression
def test_embedding_scatter_add():
    E, Y = rnd((N, N), 260), rnd((7, N), 261)
    idx = np.random.default_rng(262).integers(0, N, 500)
    g = bytegrad.gradient(scatter_add_embed, E, idx, Y)
    assert g[1] is None
    check_direction(scatter_add_embed, (E, idx, Y), g, (0,))
    check_direction(scatter_add_embed, (E, idx, Y), g, (2,))


# ---------------------------------------------------------------- hooks, stop_gradient

def clipped(W, X):
    Wc = bytegrad.hook(lambda g: np.clip(g, -1e-4, 1e-4), W)
    T = bytegrad.stop_gradient(X @ W)
    return np.mean((X @ Wc) ** 2) + np.mean(T * W[:64])


@pytest.mark.regression
def test_hook_clip_and_stop_gradient():
    W, X = rnd((N, N), 270, 0.5), rnd((64, N), 271)
    g = bytegrad.gradient(clipped, W, X)[0]
    raw = 2 * X.T @ (X @ W) / (64 * N)
    expect = np.clip(raw, -1e-4, 1e-4)
    expect[:64] += (X @ W) / (64 * N)
    np.testing.assert_allclose(g, expect, rtol=1e-10, atol=1e-14)


# ---------------------------------------------------------------- pullbacks with array seeds

def two_layer(W1, W2, X):
    return np.tanh(X @ W1) @ W2


@pytest.mark.regression
def test_pullback_array_seed_called_twice_views_kept():
    W1, W2, X = rnd((N, N), 280, 0.1), rnd((N, N), 281, 0.1), rnd((64, N), 282)
    y, back = bytegrad.pullback(two_layer, W1, W2, X, wrt=(0, 1))
    seed = rnd(y.shape, 283)
    g1 = back(seed)
    assert g1[2] is None
    keep = g1[0][::2]                  # only a view kept
    kc = keep.copy()
    del g1
    g2 = back(seed)
    g3 = back(seed * 2)
    np.testing.assert_array_equal(keep, kc)
    np.testing.assert_allclose(g3[0], 2 * g2[0], rtol=1e-12)
    assert not np.shares_memory(g2[0], g3[0])
    H = np.tanh(X @ W1)
    np.testing.assert_allclose(g2[1], H.T @ seed, rtol=1e-10)
    np.testing.assert_allclose(g2[0], X.T @ ((seed @ W2.T) * (1 - H ** 2)), rtol=1e-10)


@pytest.mark.regression
def test_stored_gradient_reshaped_by_caller():
    """The caller reshapes a kept gradient in place then drops the reshape again."""
    W, X = rnd((N, N), 290, 0.1), rnd((N, N), 291)
    f = lambda W, X: np.mean((X @ W) ** 2)
    g = bytegrad.gradient(f, W, X)[0]
    c = g.copy()
    g.shape = (N * N,)
    for _ in range(3):
        bytegrad.gradient(f, W * 1.5, X)
    g.shape = (N, N)
    np.testing.assert_array_equal(g, c)
    g2 = bytegrad.gradient(f, W, X)[0]
    np.testing.assert_array_equal(g2, c)
    assert not np.shares_memory(g, g2)


@pytest.mark.regression
def test_read_only_gradient_after_caller_freezes_it():
    W, X = rnd((N, N), 292, 0.1), rnd((N, N), 293)
    f = lambda W, X: np.mean((X @ W) ** 2)
    g = bytegrad.gradient(f, W, X)[0]
    g.flags.writeable = False
    c = g.copy()
    del X  # nothing
    for _ in range(3):
        gg = bytegrad.gradient(f, W, rnd((N, N), 293))[0]
        assert gg.flags.writeable
    np.testing.assert_array_equal(g, c)


# ---------------------------------------------------------------- VAE-style with reparam

def vae(We, Wmu, Wlv, Wd, X, eps):
    H = np.tanh(X @ We)
    mu, logvar = H @ Wmu, H @ Wlv
    z = mu + np.exp(0.5 * logvar) * eps
    R = z @ Wd
    rec = np.mean((R - X) ** 2)
    kl = -0.5 * np.mean(1 + logvar - mu ** 2 - np.exp(logvar))
    return rec + kl


@pytest.mark.regression
def test_vae_loss():
    We, Wmu, Wlv = rnd((N, N), 300, 0.1), rnd((N, 32), 301, 0.1), rnd((N, 32), 302, 0.1)
    Wd, X, eps = rnd((32, N), 303, 0.1), rnd((64, N), 304), rnd((64, 32), 305)
    args = (We, Wmu, Wlv, Wd, X, eps)
    g = bytegrad.gradient(vae, *args)
    for i in range(6):
        check_direction(vae, args, g, (i,))


# ---------------------------------------------------------------- Adam inside a function

def adam_steps(W, X, Y, lr):
    m = np.zeros_like(W)
    v = np.zeros_like(W)
    for t in range(1, 3):
        G = X.T @ (X @ W - Y) / X.shape[0]
        m = 0.9 * m + 0.1 * G
        v = 0.999 * v + 0.001 * G * G
        mh = m / (1 - 0.9 ** t)
        vh = v / (1 - 0.999 ** t)
        W = W - lr * mh / (np.sqrt(vh) + 1e-8)
    return np.mean((X @ W - Y) ** 2)


@pytest.mark.regression
def test_adam_unrolled():
    W, X, Y = rnd((N, N), 310, 0.1), rnd((64, N), 311), rnd((64, N), 312)
    g = bytegrad.gradient(adam_steps, W, X, Y, 0.01)
    check_direction(adam_steps, (W, X, Y, 0.01), g, (0,), h=1e-8, rtol=1e-4)  # sign-like step: small h
    fd = fd_gradient(adam_steps, (W, X, Y, 0.01), 3)
    assert np.isclose(g[3], fd, rtol=1e-5)


# ---------------------------------------------------------------- interp period / correlate same

def phase_model(theta, fp, t):
    x = t * theta
    return np.mean(np.interp(x, np.linspace(0, 2 * np.pi, fp.shape[0], endpoint=False),
                             fp, period=2 * np.pi) ** 2)


@pytest.mark.regression
def test_interp_periodic_big_x():
    t = np.linspace(0.01, 20, 10000)       # 80 KiB
    fp = rnd(16, 320)
    theta = 1.3
    g = bytegrad.gradient(phase_model, theta, fp, t)
    np.testing.assert_allclose(g[1], fd_gradient(phase_model, (theta, fp, t), 1), rtol=1e-5, atol=1e-9)
    assert np.isclose(g[0], fd_gradient(phase_model, (theta, fp, t), 0, h=1e-7), rtol=1e-3)


def matched_filter(template, x):
    c = np.correlate(x, template, mode="same")
    return np.log(np.sum(np.exp(c / 10.0)))


@pytest.mark.regression
def test_correlate_same_matched_filter():
    template, x = rnd(31, 330), rnd(12000, 331)
    g = bytegrad.gradient(matched_filter, template, x)
    np.testing.assert_allclose(g[0], fd_gradient(matched_filter, (template, x), 0), rtol=1e-5, atol=1e-9)
    check_direction(matched_filter, (template, x), g, (1,))


# ---------------------------------------------------------------- list-of-state RNN (lists)

def gru_like(Wz, Wh, xs, h):
    hs = []
    for x in xs:
        z = 1 / (1 + np.exp(-(h @ Wz + x)))
        c = np.tanh(h @ Wh + x)
        h = (1 - z) * h + z * c
        hs.append(h)
    return np.mean(hs[-1] ** 2) + 0.1 * np.mean(np.stack(hs))


@pytest.mark.regression
def test_gru_like_list_of_states():
    Wz, Wh = rnd((N, N), 340, 0.1), rnd((N, N), 341, 0.1)
    xs = [rnd((64, N), 342 + i) for i in range(3)]
    h = rnd((64, N), 350)
    g = bytegrad.gradient(gru_like, Wz, Wh, xs, h)
    for i in (0, 1, 3):
        check_direction(gru_like, (Wz, Wh, xs, h), g, (i,))
    for j in range(3):
        check_direction(gru_like, (Wz, Wh, xs, h), g, (2, j))
    assert not shared_memory(g, (Wz, Wh, xs, h))


# ---------------------------------------------------------------- same array passed twice

def shared_weights(A, B):
    return np.mean((A @ B) ** 2) + np.mean(A + B)


@pytest.mark.regression
def test_same_array_passed_as_two_arguments():
    A = rnd((N, N), 360, 0.1)
    gA, gB = bytegrad.gradient(shared_weights, A, A)
    assert not np.shares_memory(gA, gB) and not np.shares_memory(gA, A)
    f = lambda X: shared_weights(X, X)
    gt = bytegrad.gradient(f, A)[0]
    np.testing.assert_allclose(gA + gB, gt, rtol=1e-10)
    check_direction(f, (A,), (gt,), (0,))
    g2 = bytegrad.grad(shared_weights, argnums=(0, 1, 0))(A, A)
    assert not np.shares_memory(g2[0], g2[2])
    np.testing.assert_allclose(g2[0], g2[2])


# ---------------------------------------------------------------- stateful model object

class Linear:
    def __init__(self, W):
        self.W = W
        self.cache = None

    def forward(self, x):
        self.cache = x
        return x @ self.W


def stateful_model(m, X):
    y = m.forward(X)
    m.W = m.W * 0.5           # the model rebinds its weights
    y2 = m.forward(np.tanh(y))
    return np.mean(y2 ** 2)


@pytest.mark.regression
def test_stateful_model_object():
    m, X = Linear(rnd((N, N), 370, 0.1)), rnd((64, N), 371)
    m0 = copy.deepcopy(m)
    plain = copy.deepcopy(m); stateful_model(plain, X)
    g = bytegrad.gradient(stateful_model, m, X)
    np.testing.assert_array_equal(m.W, plain.W)
    check_direction(stateful_model, (m0, X), g, (0, "W"))
    check_direction(stateful_model, (m0, X), g, (1,))


# ---------------------------------------------------------------- in-place activations

def inplace_relu_net(W1, W2, X):
    H = X @ W1
    H[H < 0] = 0.0                      # relu by a masked write
    H *= 1.5
    np.maximum(H, 0.1, out=H)           # out= into the same array
    P = H @ W2
    P += X                              # same-shape a += b
    return np.mean(P ** 2)


@pytest.mark.regression
def test_in_place_activations_big():
    W1, W2, X = rnd((N, N), 400, 0.1), rnd((N, N), 401, 0.1), rnd((64, N), 402)
    args = (W1, W2, X)
    g = bytegrad.gradient(inplace_relu_net, *args)
    for i in range(3):
        check_direction(inplace_relu_net, args, g, (i,))
    assert not shared_memory(g, args)


def mean_then_mutate(x, y):
    m = np.mean(x)
    x *= y                          # the caller's array, changed after its mean
    s = np.mean(x) + m * np.mean(x + x)
    x += 1.0
    return s + np.mean(x * x)


@pytest.mark.regression
def test_whole_mean_then_mutation_of_argument():
    x, y = rnd((N, N), 410), rnd((N, N), 411)
    x0 = x.copy()
    plain = x.copy(); mean_then_mutate(plain, y)
    g = bytegrad.gradient(mean_then_mutate, x, y)
    np.testing.assert_array_equal(x, plain)
    f = lambda x, y: mean_then_mutate(x.copy(), y)
    check_direction(f, (x0, y), g, (0,))
    check_direction(f, (x0, y), g, (1,))


def copyto_where(x, y):
    z = np.zeros_like(x)
    np.copyto(z, x * y, where=x > 0)
    z2 = np.nan_to_num(np.log(np.abs(z)), copy=False, neginf=-5.0)
    return np.mean(z2) + np.mean(z * z)


@pytest.mark.regression
def test_copyto_where_nan_to_num_in_place():
    x, y = rnd((N, N), 420), rnd((N, N), 421)
    with np.errstate(all="ignore"):
        g = bytegrad.gradient(copyto_where, x, y)
        assert np.all(np.isfinite(g[0])) and np.all(np.isfinite(g[1]))
        check_direction(copyto_where, (x, y), g, (0,), h=1e-7)
        check_direction(copyto_where, (x, y), g, (1,), h=1e-7)


# ---------------------------------------------------------------- global cache list

HISTORY = []


def logging_loss(W, X):
    H = np.tanh(X @ W)
    HISTORY.append(H)
    return np.mean(HISTORY[-1] ** 2) + np.mean(H)


@pytest.mark.regression
def test_global_list_of_activations():
    HISTORY.clear()
    W, X = rnd((N, N), 430, 0.1), rnd((64, N), 431)
    g = bytegrad.gradient(logging_loss, W, X)
    HISTORY.clear()
    check_direction(logging_loss, (W, X), g, (0,))
    HISTORY.clear()


# ---------------------------------------------------------------- methods, decorator, argnums

class Regressor:
    def __init__(self, W, b):
        self.W, self.b = W, b

    @bytegrad.differentiable
    def loss(self, W, b, X, Y):
        return np.mean((X @ W + b - Y) ** 2) + 1e-3 * np.sum(W * self.W)


@pytest.mark.regression
def test_differentiable_method_and_negative_argnums():
    W, b = rnd((N, N), 440, 0.1), rnd(N, 441, 0.1)
    X, Y = rnd((64, N), 442), rnd((64, N), 443)
    m = Regressor(W.copy(), b.copy())
    gW, gb, gX, gY = m.loss.grad(W, b, X, Y, argnums=(0, 1, 2, 3))
    f = lambda W, b, X, Y: m.loss(W, b, X, Y)
    for i, gg in enumerate((gW, gb, gX, gY)):
        check_direction(f, (W, b, X, Y), (gW, gb, gX, gY), (i,))
    gy = bytegrad.grad(f, argnums=-1)(W, b, X, Y)
    np.testing.assert_allclose(gy, gY, rtol=1e-12)
    gs = bytegrad.grad(f, argnums=(np.int64(0), -3))(W, b, X, Y)
    np.testing.assert_allclose(gs[0], gW, rtol=1e-12)
    np.testing.assert_allclose(gs[1], gb, rtol=1e-12)


# ---------------------------------------------------------------- float32 scalar output

def f32_loss(W, X):
    return np.mean(np.tanh(X @ W) ** 2)      # a float32 scalar


@pytest.mark.regression
def test_float32_scalar_output_value_and_grad():
    W, X = rnd((N, N), 470, 0.1, np.float32), rnd((N, N), 471, 1.0, np.float32)
    y, g = bytegrad.value_and_grad(f32_loss)(W, X)
    assert y == f32_loss(W, X) and g.dtype == np.float32
    g64 = bytegrad.grad(f32_loss)(W.astype(float), X.astype(float))
    np.testing.assert_allclose(g, g64, rtol=5e-3, atol=1e-7)


# ---------------------------------------------------------------- x + x, same-shape sums

def doubled(x, w):
    y = x + x
    z = y + w
    z2 = z - x
    return np.mean(z2 * z) + np.mean(y)


@pytest.mark.regression
def test_self_add_same_shape():
    x, w = rnd((N, N), 480), rnd((N, N), 481)
    g = bytegrad.gradient(doubled, x, w)
    check_direction(doubled, (x, w), g, (0,))
    check_direction(doubled, (x, w), g, (1,))


# ---------------------------------------------------------------- interp w.r.t. knots x, big x

def warp(xp_inner, fp, x):
    xp = np.concatenate([[-4.0], np.sort(xp_inner), [4.0]])
    return np.mean(np.interp(x, xp, fp, left=0.0, right=1.0) * x)


@pytest.mark.regression
def test_interp_gradient_in_knot_positions():
    x = rnd(12000, 500) * 2.0        # 96 KiB
    xp_inner = np.linspace(-3, 3, 7) + 0.05 * rnd(7, 501)
    fp = rnd(9, 502)
    g = bytegrad.gradient(warp, xp_inner, fp, x)
    np.testing.assert_allclose(g[0], fd_gradient(warp, (xp_inner, fp, x), 0), rtol=1e-4, atol=1e-8)
    np.testing.assert_allclose(g[1], fd_gradient(warp, (xp_inner, fp, x), 1), rtol=1e-5, atol=1e-9)
    v = rnd(12000, 503)
    v[np.abs(x) > 3.9] = 0   # away from the knots +-4 (kinks)
    h = 1e-7
    fd = (warp(xp_inner, fp, x + h * v) - warp(xp_inner, fp, x - h * v)) / (2 * h)
    assert np.isclose(np.sum(g[2] * v), fd, rtol=1e-4)


# ---------------------------------------------------------------- tall fill_diagonal wrap, put clip

def tall_diag(A, v):
    B = A * 1.0
    np.fill_diagonal(B, v, wrap=True)
    B.put([-1, 10 ** 7], v[:2], mode="clip")
    return np.sum(np.sin(B)) / B.size


@pytest.mark.regression
def test_fill_diagonal_wrap_put_clip():
    A, v = rnd((4 * N, 64), 510), rnd(3, 511)        # 256 KiB
    g = bytegrad.gradient(tall_diag, A, v)
    check_direction(tall_diag, (A, v), g, (0,))
    np.testing.assert_allclose(g[1], fd_gradient(tall_diag, (A, v), 1), rtol=1e-5, atol=1e-10)


# ---------------------------------------------------------------- back() kept and reused across calls

@pytest.mark.regression
def test_two_pullbacks_interleaved():
    W, X = rnd((N, N), 520, 0.1), rnd((N, N), 521)
    f = lambda W, X: np.tanh(X @ W) @ W
    y1, b1 = bytegrad.pullback(f, W, X)
    y2, b2 = bytegrad.pullback(f, W * 2, X)
    s = rnd((N, N), 522)
    g1 = b1(s)
    g2 = b2(s)
    c1 = [g.copy() for g in g1]
    g1b = b1(s)
    for a, b in zip(g1, c1):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(g1b, c1):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert not shared_memory(list(g1) + list(g2) + list(g1b), (W, X, s))
    check_direction(lambda W, X: np.sum(f(W, X) * s), (W, X), g1, (0,))
    check_direction(lambda W, X: np.sum(f(W, X) * s), (W, X), g1, (1,))


def branchy(n):
    """``s = x`` then ``n`` times ``if s > 0: s = s * 1.01 else: s = s - 0.5``: a
    function of ``4n`` lines whose IR has a block per branch."""
    lines = ["def f(x):", "    s = x"]
    lines += ["    if s > 0:\n        s = s * 1.01\n    else:\n        s = s - 0.5"] * n
    lines.append("    return s")
    scope = {}
    exec(compile("\n".join(lines), f"<branchy {n}>", "exec"), scope)
    return scope["f"]


def test_a_long_function_with_a_branch_per_statement():
    """The IR passes are linear in the function's length: 300 branches transform (this
    took minutes when simplify rescanned the IR per removed argument)."""
    f = branchy(300)
    check_grad(f, 0.3)  # the one arm all the way: s stays positive, or (below) negative
    check_grad(f, -0.2)
    stages = bytegrad.stages(f)
    # the joins of the arms are not merged away (3.12's compiler copies the return into
    # the last arm, which leaves one join fewer)
    assert len(stages.lifted.blocks) in (3 * 300, 3 * 300 + 1)
