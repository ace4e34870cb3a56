"""Realistic small programs written the way a scientist or ML engineer
writes them (an RNN class with a hidden-state list, a Kalman filter updating arrays in
place, an explicit heat-equation stencil, the forward algorithm with a log-sum-exp table,
soft k-means with a dict of centroids, an optimizer class with momentum in a dict, a
network built from Layer objects with activation attributes, a particle system with a
neighbour list, a recursive tree of Node objects, a string-keyed config dict).

Every gradient is compared with central finite differences on deep copies
(``check_stateful``) and the arguments must end as a plain call leaves them.
"""
import math

import numpy as np
import pytest

import bytegrad
from checks import check_grad, check_pullback, check_stateful


def rng(seed):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------
# 1. tiny autoregressive RNN class with a hidden-state list
# ---------------------------------------------------------------------------

class TinyRNN:
    def __init__(self, Wh, Wx, Wo):
        self.Wh = Wh
        self.Wx = Wx
        self.Wo = Wo
        self.hidden = []

    def step(self, x):
        h_prev = self.hidden[-1] if self.hidden else np.zeros(self.Wh.shape[0])
        h = np.tanh(self.Wh @ h_prev + self.Wx * x)
        self.hidden.append(h)
        return float(self.Wo @ h)

    def generate(self, x0, n):
        xs = [x0]
        for _ in range(n):
            xs.append(self.step(xs[-1]))
        return xs


def rnn_loss(model, x0, targets):
    preds = model.generate(x0, len(targets))
    loss = 0.0
    for p, t in zip(preds[1:], targets):
        loss += (p - t) ** 2
    return loss / len(targets)


def test_autoregressive_rnn_with_hidden_list():
    r = rng(0)
    m = TinyRNN(0.5 * r.standard_normal((3, 3)), r.standard_normal(3), r.standard_normal(3))
    check_stateful(rnn_loss, m, 0.3, [0.1, -0.2, 0.4, 0.0])


# ---------------------------------------------------------------------------
# 2. Kalman filter updating mean and covariance in place
# ---------------------------------------------------------------------------

def kalman_nll(mu, P, F, Q, H, R, ys):
    nll = 0.0
    for y in ys:
        mu[:] = F @ mu
        P[:, :] = F @ P @ F.T + Q
        S = H @ P @ H.T + R
        resid = y - H @ mu
        K = P @ H.T @ np.linalg.inv(S)
        mu += K @ resid
        P -= K @ H @ P
        nll += 0.5 * (resid @ np.linalg.solve(S, resid) + np.log(np.linalg.det(S)))
    return nll


def test_kalman_filter_in_place():
    r = rng(1)
    mu = np.array([0.0, 1.0])
    P = np.eye(2) * 0.5
    F = np.array([[1.0, 0.1], [0.0, 1.0]])
    Q = np.eye(2) * 0.01
    H = np.array([[1.0, 0.0]])
    R = np.array([[0.2]])
    ys = [r.standard_normal(1) for _ in range(4)]
    check_stateful(kalman_nll, mu, P, F, Q, H, R, ys, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------------
# 3. 1-D heat equation, explicit stencil with slice assignment
# ---------------------------------------------------------------------------

def heat(u, k, steps):
    for _ in range(steps):
        u[1:-1] = u[1:-1] + k * (u[2:] - 2 * u[1:-1] + u[:-2])
    return np.sum(u ** 2 * np.linspace(0.0, 1.0, u.size))


def test_heat_equation_stencil():
    u = np.sin(np.linspace(0, np.pi, 9)) + 0.1 * rng(2).standard_normal(9)
    check_stateful(heat, u, 0.2, 5)


def heat_with_bc(u, k, left, right, steps):
    for _ in range(steps):
        u[0] = left
        u[-1] = right
        lap = np.zeros_like(u)
        lap[1:-1] = u[2:] - 2 * u[1:-1] + u[:-2]
        u += k * lap
    return u[len(u) // 2] + 0.5 * u.mean()


def test_heat_equation_with_dirichlet_boundaries():
    u = rng(3).random(7)
    check_stateful(heat_with_bc, u, 0.25, 1.0, -0.5, 4)


# ---------------------------------------------------------------------------
# 4. HMM forward algorithm with a log-sum-exp table
# ---------------------------------------------------------------------------

def logsumexp(v):
    m = np.max(v)
    return m + np.log(np.sum(np.exp(v - m)))


def hmm_forward(log_pi, log_A, log_B, obs):
    T = len(obs)
    S = log_pi.shape[0]
    alpha = np.zeros((T, S))
    alpha[0] = log_pi + log_B[:, obs[0]]
    for t in range(1, T):
        for j in range(S):
            alpha[t, j] = logsumexp(alpha[t - 1] + log_A[:, j]) + log_B[j, obs[t]]
    return logsumexp(alpha[-1])


def test_hmm_forward_log_table():
    r = rng(4)
    log_pi = np.log(np.array([0.6, 0.4]))
    log_A = np.log(np.array([[0.7, 0.3], [0.2, 0.8]])) + 0.01 * r.standard_normal((2, 2))
    log_B = np.log(r.dirichlet(np.ones(3), size=2))
    check_stateful(hmm_forward, log_pi, log_A, log_B, [0, 2, 1, 1, 0])


def viterbi_soft(emit, trans, gamma):
    # smoothed Viterbi: max replaced by gamma * logsumexp(./gamma), backpointers in a list
    T, S = emit.shape
    score = [emit[0].copy()]
    back = []
    for t in range(1, T):
        cand = score[-1][:, None] + trans
        back.append(np.argmax(cand, axis=0))
        score.append(gamma * np.log(np.sum(np.exp(cand / gamma), axis=0)) + emit[t])
    best = int(np.argmax(score[-1]))
    path = [best]
    for bp in reversed(back):
        path.append(int(bp[path[-1]]))
    return score[-1][best] + 0.01 * sum(path)


def test_soft_viterbi_with_backpointers():
    r = rng(5)
    check_stateful(viterbi_soft, r.standard_normal((5, 3)), r.standard_normal((3, 3)), 0.5)


# ---------------------------------------------------------------------------
# 5. soft k-means with a dict of centroids
# ---------------------------------------------------------------------------

def soft_kmeans(centroids, X, beta, iters):
    names = sorted(centroids)
    for _ in range(iters):
        d = {k: np.sum((X - centroids[k]) ** 2, axis=1) for k in names}
        logits = np.stack([-beta * d[k] for k in names])
        w = np.exp(logits - logits.max(axis=0))
        w = w / w.sum(axis=0)
        for i, k in enumerate(names):
            centroids[k] = (w[i][:, None] * X).sum(axis=0) / w[i].sum()
    return sum(np.sum(d[k] * w[i]) for i, k in enumerate(names))


def test_soft_kmeans_dict_of_centroids():
    r = rng(6)
    X = np.concatenate([r.standard_normal((4, 2)) + 2, r.standard_normal((4, 2)) - 2])
    cents = {"a": np.array([1.0, 1.0]), "b": np.array([-1.0, -0.5])}
    check_stateful(soft_kmeans, cents, X, 0.7, 2)


# ---------------------------------------------------------------------------
# 6. gradient-descent optimizer class with momentum state in a dict
# ---------------------------------------------------------------------------

class Momentum:
    def __init__(self, lr, mu):
        self.lr = lr
        self.mu = mu
        self.state = {}

    def update(self, params, grads):
        for name, g in grads.items():
            if name not in self.state:
                self.state[name] = np.zeros_like(g)
            self.state[name] = self.mu * self.state[name] + g
            params[name] -= self.lr * self.state[name]


def quad_grads(params, A):
    return {"x": A @ params["x"] + params["y"], "y": params["y"] - 0.5 * params["x"]}


def unrolled_momentum(params, A, opt, steps):
    for _ in range(steps):
        opt.update(params, quad_grads(params, A))
    x = params["x"]
    return 0.5 * x @ A @ x + np.sum(params["y"] ** 2)


def test_momentum_optimizer_class_with_state_dict():
    A = np.array([[2.0, 0.3], [0.3, 1.0]])
    params = {"x": np.array([1.0, -1.0]), "y": np.array([0.5, 0.2])}
    check_stateful(unrolled_momentum, params, A, Momentum(0.1, 0.9), 3)


# ---------------------------------------------------------------------------
# 7. network from a list of Layer objects with an activation attribute
# ---------------------------------------------------------------------------

def relu(z):
    return np.maximum(z, 0.0)


def softplus(z):
    return np.log1p(np.exp(z))


class Layer:
    def __init__(self, W, b, act):
        self.W = W
        self.b = b
        self.act = act

    def __call__(self, x):
        return self.act(x @ self.W + self.b)


class Net:
    def __init__(self, layers):
        self.layers = layers

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def net_loss(net, X, y):
    out = net.forward(X)[:, 0]
    return np.mean((out - y) ** 2)


def _net(seed):
    r = rng(seed)
    return Net([Layer(r.standard_normal((3, 4)), r.standard_normal(4) + 0.5, np.tanh),
                Layer(r.standard_normal((4, 4)), r.standard_normal(4) + 1.0, softplus),
                Layer(r.standard_normal((4, 1)), r.standard_normal(1), lambda z: z)])


def test_net_of_layer_objects_with_activation_attributes():
    r = rng(7)
    check_stateful(net_loss, _net(7), r.standard_normal((5, 3)), r.standard_normal(5))


def train_net(net, X, y, lr, steps):
    # the net trains itself with bytegrad's own gradients, and we differentiate the
    # final loss with respect to the learning rate... via its initial weights
    for _ in range(steps):
        for layer in net.layers:
            layer.W = layer.W * (1.0 - lr)   # weight decay, rebinds the attribute
    return net_loss(net, X, y)


def test_weight_decay_rebinding_layer_attributes():
    r = rng(8)
    check_stateful(train_net, _net(8), r.standard_normal((4, 3)), r.standard_normal(4), 0.1, 2)


# ---------------------------------------------------------------------------
# 8. particle system with a neighbour list
# ---------------------------------------------------------------------------

def build_neighbours(pos, cutoff):
    n = len(pos)
    nbrs = [[] for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if np.linalg.norm(pos[i] - pos[j]) < cutoff:
                nbrs[i].append(j)
                nbrs[j].append(i)
    return nbrs


def spring_energy(pos, vel, k, r0, dt, steps):
    nbrs = build_neighbours(pos, 2.0)
    for _ in range(steps):
        force = np.zeros_like(pos)
        for i, js in enumerate(nbrs):
            for j in js:
                d = pos[i] - pos[j]
                r = np.sqrt(d @ d)
                force[i] -= k * (r - r0) * d / r
        vel += dt * force
        pos += dt * vel
    return 0.5 * np.sum(vel ** 2) + pos[0, 0]


def test_particle_system_with_neighbour_list():
    pos = np.array([[0.0, 0.0], [1.1, 0.1], [0.2, 0.9], [5.0, 5.0]])
    vel = np.zeros((4, 2))
    check_stateful(spring_energy, pos, vel, 3.0, 1.0, 0.05, 4)


# ---------------------------------------------------------------------------
# 9. recursive tree of Node objects whose leaf values are parameters
# ---------------------------------------------------------------------------

class Node:
    def __init__(self, value=None, children=None, weight=1.0):
        self.value = value
        self.children = children if children is not None else []
        self.weight = weight

    def is_leaf(self):
        return not self.children


def tree_eval(node, temp):
    if node.is_leaf():
        return node.value
    vals = [tree_eval(c, temp) for c in node.children]
    # soft-max pooling of the children, scaled by the node's weight
    m = max(vals)
    return node.weight * (m + temp * math.log(sum(math.exp((v - m) / temp) for v in vals)))


def _tree():
    return Node(children=[
        Node(children=[Node(0.3), Node(-1.2), Node(0.8)], weight=0.9),
        Node(1.5),
        Node(children=[Node(children=[Node(0.1), Node(0.4)], weight=1.3), Node(-0.7)]),
    ], weight=1.1)


def test_recursive_tree_of_nodes():
    check_stateful(tree_eval, _tree(), 0.5)


def normalise_leaves(node, total):
    # writes back into the tree: every leaf becomes its share of the total
    if node.is_leaf():
        node.value = node.value / total
        return node.value
    return sum(normalise_leaves(c, total) * node.weight for c in node.children)


def test_recursive_tree_mutated_in_place():
    check_stateful(normalise_leaves, _tree(), 2.5)


# ---------------------------------------------------------------------------
# 10. string-keyed config dict mixing ints, floats, arrays, strings, bools
# ---------------------------------------------------------------------------

def run_experiment(cfg, x):
    n_iter = cfg["n_iter"]
    lr = cfg["lr"]
    w = cfg["init"].copy()
    for it in range(n_iter):
        g = 2 * (w - x) + cfg["l2"] * w
        if cfg["clip"]:
            g = np.clip(g, -cfg["clip_value"], cfg["clip_value"])
        w = w - lr * g
        if cfg["schedule"] == "decay":
            lr = lr * cfg["gamma"]
    cfg["history"].append(float(np.sum(w)))
    return np.sum((w - x) ** 2) + cfg["l2"] * np.sum(w ** 2)


def _cfg():
    return {"n_iter": 4, "lr": 0.1, "init": np.array([0.5, -0.3, 2.0]), "l2": 0.01,
            "clip": True, "clip_value": 1.0, "schedule": "decay", "gamma": 0.9,
            "history": [], "name": "run-1"}


def test_string_keyed_config_dict():
    check_stateful(run_experiment, _cfg(), np.array([1.0, 0.2, -0.4]))


# ---------------------------------------------------------------------------
# 11. a few more everyday patterns
# ---------------------------------------------------------------------------

def running_stats(xs, alpha):
    # exponential moving mean/var kept in a dict, then a normalised loss (batch-norm-ish)
    stats = {"mean": 0.0, "var": 1.0, "count": 0}
    for x in xs:
        stats["count"] += 1
        delta = x - stats["mean"]
        stats["mean"] += alpha * delta
        stats["var"] = (1 - alpha) * (stats["var"] + alpha * delta ** 2)
    z = (xs[-1] - stats["mean"]) / np.sqrt(stats["var"] + 1e-5)
    return z ** 2 + stats["count"] * 0.0


def test_running_statistics_in_a_dict():
    check_stateful(running_stats, [0.3, 1.2, -0.5, 0.8, 2.0], 0.3)


def ode_rk4(y, theta, dt, steps):
    def f(y):
        return np.array([y[1], -theta[0] * np.sin(y[0]) - theta[1] * y[1]])
    traj = [y.copy()]
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        traj.append(y)
    traj = np.array(traj)
    return np.sum(traj[:, 0] ** 2)


def test_rk4_pendulum_with_closure():
    check_stateful(ode_rk4, np.array([1.0, 0.0]), np.array([9.81, 0.3]), 0.05, 6)


def attention(Q, K, V, mask):
    scores = Q @ K.T / np.sqrt(Q.shape[1])
    scores[~mask] = -1e9
    scores -= scores.max(axis=1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=1, keepdims=True)
    return np.sum((w @ V) ** 2)


def test_masked_attention_in_place_softmax():
    r = rng(9)
    mask = np.tril(np.ones((3, 3), dtype=bool))
    check_stateful(attention, r.standard_normal((3, 2)), r.standard_normal((3, 2)),
                   r.standard_normal((3, 2)), mask)


def batch_pullback(W, X):
    H = np.tanh(X @ W)
    H[:, 0] *= 2.0
    return {"hidden": H, "norms": [np.linalg.norm(h) for h in H]}


def test_pullback_of_structured_batch_output():
    r = rng(10)
    W, X = r.standard_normal((2, 3)), r.standard_normal((4, 2))
    seed = {"hidden": r.standard_normal((4, 3)), "norms": list(r.standard_normal(4))}
    check_pullback(batch_pullback, seed, W, X)


# ---------------------------------------------------------------------------
# 12. second batch: everyday Python idioms around the numerics
# ---------------------------------------------------------------------------

class Module:
    def __init__(self):
        self.cache = {}

    def params(self):
        return [k for k in self.__dict__ if k not in ("cache", "name")]


class Dense(Module):
    def __init__(self, W, b, name):
        super().__init__()
        self.W = W
        self.b = b
        self.name = name

    @property
    def n_out(self):
        return self.W.shape[1]

    def forward(self, x):
        z = x @ self.W + self.b
        self.cache["z"] = z
        return z


class TanhDense(Dense):
    def forward(self, x):
        z = super().forward(x)
        a = np.tanh(z)
        self.cache["a"] = a
        return a


def inherited_mlp(layers, X):
    h = X
    for l in layers:
        h = l.forward(h)
    reg = sum(np.sum(getattr(l, p) ** 2) for l in layers for p in l.params())
    return np.sum(h) / layers[-1].n_out + 0.01 * reg


def test_inheritance_super_property_cache_and_getattr():
    r = rng(11)
    layers = [TanhDense(r.standard_normal((2, 3)), r.standard_normal(3), "h1"),
              Dense(r.standard_normal((3, 2)), r.standard_normal(2), "out")]
    check_stateful(inherited_mlp, layers, r.standard_normal((4, 2)))


def minibatches(X, y, size):
    for i in range(0, len(X), size):
        yield X[i:i + size], y[i:i + size]


def sgd_epoch(w, X, y, lr):
    losses = []
    for xb, yb in minibatches(X, y, 2):
        err = xb @ w - yb
        losses.append(np.mean(err ** 2))
        w -= lr * 2 * xb.T @ err / len(yb)
    return sum(losses) + np.sum(w ** 2)


def test_generator_of_minibatches_with_in_place_sgd():
    r = rng(12)
    check_stateful(sgd_epoch, r.standard_normal(3), r.standard_normal((6, 3)),
                   r.standard_normal(6), 0.1)


def minibatch_list(X, y, size):
    return [(X[i:i + size], y[i:i + size]) for i in range(0, len(X), size)]


def sgd_epoch_list(w, X, y, lr):
    losses = []
    for xb, yb in minibatch_list(X, y, 2):
        err = xb @ w - yb
        losses.append(np.mean(err ** 2))
        w -= lr * 2 * xb.T @ err / len(yb)
    return sum(losses) + np.sum(w ** 2)


def test_list_of_minibatches_with_in_place_sgd():
    r = rng(12)
    check_stateful(sgd_epoch_list, r.standard_normal(3), r.standard_normal((6, 3)),
                   r.standard_normal(6), 0.1)


def message_passing(h, edges, W):
    # graph neural net layer: scatter-add messages along edges
    for _ in range(2):
        src = np.array([e[0] for e in edges])
        dst = np.array([e[1] for e in edges])
        msg = np.tanh(h[src] @ W)
        agg = np.zeros_like(h)
        np.add.at(agg, dst, msg)
        h = h + agg
    return np.sum(h ** 2)


def test_graph_message_passing_with_add_at():
    r = rng(13)
    edges = [(0, 1), (1, 2), (2, 0), (3, 1), (0, 2)]
    check_stateful(message_passing, r.standard_normal((4, 2)), edges, 0.5 * r.standard_normal((2, 2)))


def scatter_fancy(h, idx, vals):
    h[idx] += vals
    return np.sum(np.sin(h))


def test_fancy_index_in_place_add():
    r = rng(14)
    check_stateful(scatter_fancy, r.standard_normal(5), np.array([0, 2, 4]), r.standard_normal(3))


def histogram_loss(samples, centers, bw):
    # kernel density on a grid, grid cells accumulated in a defaultdict
    from collections import defaultdict
    dens = defaultdict(float)
    for s in samples:
        for i, c in enumerate(centers):
            dens[i] += math.exp(-0.5 * ((s - c) / bw) ** 2)
    return sum(v * v for v in dens.values()) / len(samples)


def test_defaultdict_density_accumulator_is_a_clear_error():
    # (a locally imported defaultdict is made by a call bytegrad runs plainly)
    with pytest.raises(NotImplementedError, match="made by a call bytegrad ran plainly"):
        bytegrad.gradient(histogram_loss, [0.1, 0.5, -0.3, 1.2], [-0.5, 0.0, 0.5, 1.0], 0.4)


def histogram_loss_get(samples, centers, bw):
    dens = {}
    for s in samples:
        for i, c in enumerate(centers):
            dens[i] = dens.get(i, 0.0) + math.exp(-0.5 * ((s - c) / bw) ** 2)
    return sum(v * v for v in dens.values()) / len(samples)


def test_dict_get_density_accumulator():
    check_stateful(histogram_loss_get, [0.1, 0.5, -0.3, 1.2], [-0.5, 0.0, 0.5, 1.0], 0.4)


def sorted_topk(scores, k):
    # pick the top k by value (a discrete choice) and return a smooth loss on them
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    top = [scores[i] for i in order[:k]]
    best = max(scores, key=lambda s: s * s)
    return sum(t ** 2 for t in top) + best


def test_sorted_with_key_lambda_and_max_key():
    check_stateful(sorted_topk, [0.3, -1.5, 0.9, 0.1, 1.2], 3)


def cholesky_gp_nll(x, y, ell, sigma):
    K = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / ell ** 2)
    K[np.arange(len(x)), np.arange(len(x))] += sigma ** 2
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    idx = np.arange(len(x))
    return 0.5 * y @ alpha + np.sum(np.log(L[idx, idx]))


def test_gaussian_process_nll_with_cholesky():
    r = rng(15)
    check_stateful(cholesky_gp_nll, np.linspace(0, 2, 5), r.standard_normal(5), 0.7, 0.3,
                   rtol=1e-4)


def diag_penalty(A):
    return np.sum(np.diag(A) ** 2) + np.sum(np.diag(A[0]) @ A)


def test_np_diag():
    # np.diag is everywhere in scientific code (diag of a matrix, diagonal matrix from a vector)
    A = rng(20).standard_normal((3, 3))
    check_stateful(diag_penalty, A)


def safe_log_loss(p_list, eps):
    total = 0.0
    for p in p_list:
        try:
            if p <= 0:
                raise ValueError("non-positive")
            total += math.log(p)
        except ValueError:
            total += math.log(eps)
    return -total


def test_try_except_in_a_loss():
    g = check_grad(lambda a, b, c, d, eps: safe_log_loss([a, b, c, d], eps), 0.3, -0.1, 0.7, -0.5, 1e-3)
    assert g[0] == pytest.approx(-1 / 0.3) and g[1] is None and g[3] is None
    assert g[4] == pytest.approx(-2 / 1e-3)  # (two terms took the handler's log(eps))


_memo = {}


def fib_poly(n, x):
    # a memoised recursion keyed on int only; the cache is cleared by the caller
    if n in _memo:
        return _memo[n]
    if n < 2:
        r = x if n == 1 else 1.0
    else:
        r = x * fib_poly(n - 1, x) + fib_poly(n - 2, x)
    _memo[n] = r
    return r


def fib_entry(x):
    _memo.clear()
    return fib_poly(6, x)


def test_memoised_recursion_with_module_level_cache():
    check_stateful(fib_entry, 0.7)


def sort_in_place(xs, w):
    xs.sort()
    arr = np.array(xs)
    arr.sort()
    return float(np.dot(arr, w))


def test_list_sort_in_place():
    check_stateful(sort_in_place, [0.3, -1.0, 2.0, 0.5], np.array([1.0, 2.0, 3.0, 4.0]))


def einsum_bilinear(A, x, y):
    out = np.einsum("ij,bi,bj->b", A, x, y)
    c = np.cumsum(out)
    return np.sum(np.where(c > 0, c, 0.1 * c))


def test_einsum_cumsum_where():
    r = rng(16)
    check_stateful(einsum_bilinear, r.standard_normal((2, 3)), r.standard_normal((4, 2)),
                   r.standard_normal((4, 3)))


def dict_update_setdefault(params, extra):
    merged = dict(params)
    merged.update(extra)
    merged.setdefault("bias", 0.5)
    logs = {}
    for k, v in merged.items():
        logs.setdefault("norms", []).append(np.sum(np.asarray(v) ** 2))
    return sum(logs["norms"]) * merged["bias"]


def test_dict_update_and_setdefault():
    check_stateful(dict_update_setdefault, {"w": np.array([1.0, 2.0]), "s": 0.3},
                   {"v": np.array([0.5, -0.5, 1.0])})


def fstring_logging(w, xs):
    log = []
    for i, x in enumerate(xs):
        w = w * 0.9 + x
        log.append(f"step {i}: w={w:.3f}")
    return w ** 2 + len("".join(log)) * 0.0


def test_fstring_logging_of_floats():
    check_stateful(fstring_logging, 0.5, [0.1, 0.2, -0.3])


def gp_nll_with_diagonal(L_flat, y):
    # Cholesky-factor parametrisation as it is usually written: tril + diagonal
    L = np.tril(L_flat.reshape(3, 3))
    K = L @ L.T + 0.1 * np.eye(3)
    return 0.5 * y @ np.linalg.solve(K, y) + np.sum(np.log(np.abs(np.diagonal(L))))


def test_tril_and_diagonal():
    r = rng(21)
    check_stateful(gp_nll_with_diagonal, r.standard_normal(9) + 2.0, r.standard_normal(3),
                   rtol=1e-4)


def logged_training(w, X, y, lr):
    history = []
    for _ in range(3):
        err = X @ w - y
        loss = np.mean(err ** 2)          # a NumPy float64 scalar
        history.append(loss.item())       # the usual `loss.item()` for logging
        w = w - lr * 2 * X.T @ err / len(y)
    return np.mean((X @ w - y) ** 2) + 0.0 * history[-1]


def test_item_on_numpy_scalar():
    r = rng(22)
    check_stateful(logged_training, r.standard_normal(2), r.standard_normal((4, 2)),
                   r.standard_normal(4), 0.1)


def test_item_on_zero_d_array_works():
    def f(w):
        return np.asarray(np.sum(w ** 2)).item() * 2.0
    check_stateful(f, np.array([0.5, -1.0]))


# ---------------------------------------------------------------------------
# an SGD optimizer, an EMA and RNN cells keeping state in place
# ---------------------------------------------------------------------------

# ----- optimizer / EMA / RNN / dtypes / pullback / argnums -----

class SGD:
    def __init__(self, params, lr):
        self.params = params
        self.lr = lr
        self.vel = {k: np.zeros_like(v) for k, v in params.items()}
    def step(self, grads):
        for k in self.params:
            self.vel[k] *= 0.9
            self.vel[k] += grads[k]
            self.params[k] -= self.lr * self.vel[k]

def loss_fn(p, x):
    return np.sum((p["w"] * x + p["b"]) ** 2)

def train(p, x, lr):
    opt = SGD(p, lr)
    for _ in range(3):
        g = {"w": 2 * (opt.params["w"] * x + opt.params["b"]) * x,
             "b": 2 * (opt.params["w"] * x + opt.params["b"])}
        opt.step(g)
    return loss_fn(opt.params, x)

@pytest.mark.regression
def test_optimizer_dict_arrays():
    p = {"w": np.array([0.5, -0.3]), "b": np.array([0.1, 0.2])}
    check_stateful(train, p, np.array([1.0, 2.0]), 0.05)

class EMA:
    def __init__(self, decay):
        self.decay = decay
        self.avg = None
    def update(self, v):
        if self.avg is None:
            self.avg = v.copy()
        else:
            self.avg *= self.decay
            self.avg += (1 - self.decay) * v
        return self.avg

def f_ema(xs, d):
    e = EMA(d)
    for x in xs:
        e.update(x)
    return np.sum(e.avg ** 2)

@pytest.mark.regression
def test_ema():
    xs = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.2])]
    check_stateful(f_ema, xs, 0.8)

def f_ema_float(xs, d):
    e = EMA(d)
    avgs = [e.update(x) for x in xs]
    return sum(np.sum(a) for a in avgs)

@pytest.mark.regression
def test_ema_aliasing_returned():
    xs = [np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([3.0, 0.2])]
    check_stateful(f_ema_float, xs, 0.8)

class RNN:
    def __init__(self, W, U):
        self.W = W; self.U = U
        self.h = np.zeros(W.shape[0])
        self.hs = []
    def __call__(self, x):
        self.h = np.tanh(self.W @ self.h + self.U @ x)
        self.hs.append(self.h)
        return self.h

def f_rnn(W, U, xs):
    cell = RNN(W, U)
    for x in xs:
        cell(x)
    return np.sum(cell.h) + sum(np.sum(h * h) for h in cell.hs)

@pytest.mark.regression
def test_rnn_cell():
    r = np.random.default_rng(1)
    check_stateful(f_rnn, r.standard_normal((3, 3)) * 0.5, r.standard_normal((3, 2)), [r.standard_normal(2) for _ in range(3)])

class RNN2:
    def __init__(self, W):
        self.W = W
        self.h = np.zeros(W.shape[0])
    def step(self, x):
        self.h[:] = np.tanh(self.W @ self.h + x)   # in place on the hidden state
        return self.h

def f_rnn2(W, xs):
    cell = RNN2(W)
    out = 0.0
    for x in xs:
        out = out + np.sum(cell.step(x) ** 2)
    return out

@pytest.mark.regression
def test_rnn_inplace_hidden():
    r = np.random.default_rng(2)
    check_stateful(f_rnn2, r.standard_normal((3, 3)) * 0.5, [r.standard_normal(3) for _ in range(3)])
