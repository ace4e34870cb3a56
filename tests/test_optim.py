"""`bytegrad.optim`: SGD (momentum, Nesterov) and Adam over structured parameters, against
their update rules written out, and training with `bytegrad.grad`."""
import copy
from collections import namedtuple

import numpy as np
import pytest

import bytegrad
from bytegrad import optim

Pair = namedtuple("Pair", "a b")


def _params():
    return {"W": np.array([[1.0, -2.0], [0.5, 3.0]]), "layers": [np.array([0.1, 0.2]), 1.5],
            "pair": Pair(np.array([2.0]), -0.5), "steps": 7, "name": "net"}


def _grads():
    return {"W": np.array([[0.2, -0.1], [0.4, 0.3]]), "layers": [np.array([1.0, -1.0]), None],
            "pair": Pair(None, 2.0), "steps": None, "name": None}


def _leaf(t, path):
    for k in path:
        t = t[k]
    return t


_FLOATS = [("W",), ("layers", 0), ("layers", 1), ("pair", 0), ("pair", 1)]


def _g(path, grads=None):
    g = _leaf(_grads() if grads is None else grads, path)
    return 0.0 if g is None else g


def test_sgd_step_is_p_minus_lr_g_and_keeps_the_structure():
    p, g = _params(), _grads()
    before = copy.deepcopy((p, g))
    opt = optim.SGD(lr=0.1)
    new, state = opt.update(p, g, opt.init(p))
    for path in _FLOATS:
        np.testing.assert_allclose(_leaf(new, path), _leaf(p, path) - 0.1 * _g(path), rtol=0, atol=1e-15)
    assert type(new["pair"]) is Pair and type(new["layers"]) is list and list(new) == list(p)
    assert new["steps"] == 7 and new["name"] == "net" and state is None
    assert repr(before) == repr((p, g))  # nothing given was changed in place


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_over_three_steps_against_the_recurrence(nesterov):
    opt = optim.SGD(lr=0.05, momentum=0.9, nesterov=nesterov)
    p = _params()
    state = opt.init(p)
    grads = [_grads(), {**_grads(), "W": -2 * _grads()["W"]}, _grads()]
    ref = {path: (np.array(_leaf(p, path), float), 0.0) for path in _FLOATS}
    for g in grads:
        p, state = opt.update(p, g, state)
        for path, (q, v) in ref.items():
            gi = _g(path, g)
            v = 0.9 * v + gi
            q = q - 0.05 * ((gi + 0.9 * v) if nesterov else v)
            ref[path] = (q, v)
    for path, (q, _) in ref.items():
        np.testing.assert_allclose(_leaf(p, path), q, rtol=1e-14, atol=1e-15)


def test_adam_over_three_steps_against_the_paper():
    lr, b1, b2, eps = 0.01, 0.8, 0.95, 1e-6
    opt = optim.Adam(lr, b1, b2, eps)
    p = _params()
    state = opt.init(p)
    ref = {path: (np.array(_leaf(p, path), float), 0.0, 0.0) for path in _FLOATS}
    for t in range(1, 4):
        g = {**_grads(), "W": t * _grads()["W"]}
        p, state = opt.update(p, g, state)
        for path, (q, m, v) in ref.items():
            gi = _g(path, g)
            m = b1 * m + (1 - b1) * gi
            v = b2 * v + (1 - b2) * gi * gi
            q = q - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
            ref[path] = (q, m, v)
    for path, (q, _, _) in ref.items():
        np.testing.assert_allclose(_leaf(p, path), q, rtol=1e-12, atol=1e-15)
    assert state[0] == 3 and p["steps"] == 7


def test_the_first_adam_step_moves_each_leaf_by_lr_against_its_gradient_sign():
    opt = optim.Adam(lr=0.01, eps=0.0)
    p = {"x": np.array([1.0, 2.0, 3.0])}
    new, _ = opt.update(p, {"x": np.array([5.0, -0.001, 2.0])}, opt.init(p))
    np.testing.assert_allclose(new["x"], [0.99, 2.01, 2.99], rtol=1e-14)


def _regression():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    w_true, b_true = np.array([1.5, -2.0, 0.5]), 0.3
    return X, X @ w_true + b_true, w_true, b_true


def _loss(params, X, y):
    r = X @ params["w"] + params["b"] - y
    return np.mean(r * r)


@pytest.mark.parametrize("opt", [optim.SGD(0.1), optim.SGD(0.05, momentum=0.9),
                                 optim.SGD(0.05, momentum=0.9, nesterov=True), optim.Adam(0.05)],
                         ids=["sgd", "momentum", "nesterov", "adam"])
def test_training_with_grad_fits_a_linear_model(opt):
    X, y, w_true, b_true = _regression()
    params = {"w": np.zeros(3), "b": 0.0}
    state = opt.init(params)
    g = bytegrad.grad(_loss)
    first = _loss(params, X, y)
    for _ in range(400):
        params, state = opt.update(params, g(params, X, y), state)
    assert _loss(params, X, y) < 1e-8 * first
    np.testing.assert_allclose(params["w"], w_true, atol=1e-4)
    assert abs(params["b"] - b_true) < 1e-4


def test_nesterov_needs_momentum():
    with pytest.raises(ValueError, match="momentum"):
        optim.SGD(0.1, nesterov=True)
