"""``hessian`` and ``hvp``: JAX's conventions (``argnums``, pytrees, ``has_aux``),
against closed forms and finite differences of the gradient."""
from __future__ import annotations

import numpy as np
import pytest

import bytegrad
from bytegrad import grad, hessian, hvp

from checks import fd_gradient


def rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2
    return s


def rosenbrock_hessian(x):
    n = len(x)
    H = np.zeros((n, n))
    for i in range(n - 1):
        H[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        H[i + 1, i + 1] += 200
        H[i, i + 1] += -400 * x[i]
        H[i + 1, i] += -400 * x[i]
    return H


def test_hessian_of_rosenbrock_matches_its_closed_form():
    x = np.array([0.3, -1.2, 0.8, 1.5])
    H = hessian(rosenbrock)(x)
    assert H.shape == (4, 4)
    assert np.allclose(H, rosenbrock_hessian(x), rtol=1e-12, atol=1e-9)


def mlp_loss(params, X, y):
    h = np.tanh(X @ params["W1"] + params["b1"])
    out = h @ params["W2"]
    return np.mean((out - y) ** 2)


def test_hvp_of_a_small_mlp_loss_matches_finite_differences_of_the_gradient():
    rng = np.random.default_rng(0)
    params = {"W1": rng.standard_normal((3, 4)), "b1": rng.standard_normal(4),
              "W2": rng.standard_normal(4)}
    v = {k: rng.standard_normal(p.shape) for k, p in params.items()}
    X, y = rng.standard_normal((5, 3)), rng.standard_normal(5)
    got = hvp(mlp_loss, (params, X, y), (v, None, None))
    assert list(got) == list(params)
    h = 1e-6
    plus = {k: p + h * v[k] for k, p in params.items()}
    minus = {k: p - h * v[k] for k, p in params.items()}
    gp, gm = grad(mlp_loss)(plus, X, y), grad(mlp_loss)(minus, X, y)
    for k in params:
        assert np.allclose(got[k], (gp[k] - gm[k]) / (2 * h), rtol=1e-5, atol=1e-7), k


def test_hessian_argnums_and_mixed_blocks_match_closed_forms():
    def f(x, y):
        return x ** 3 * y + np.sin(y) * x

    x, y = 0.7, -0.4
    Hyy = hessian(f, argnums=1)(x, y)
    assert Hyy == pytest.approx(-np.sin(y) * x)
    (Hxx, Hxy), (Hyx, Hyy2) = hessian(f, argnums=(0, 1))(x, y)
    assert Hxx == pytest.approx(6 * x * y)
    assert Hxy == pytest.approx(3 * x * x + np.cos(y)) and Hyx == pytest.approx(Hxy)
    assert Hyy2 == pytest.approx(Hyy)
    assert hvp(f, (x, y), (1.0, 0.0), argnums=1) == pytest.approx(3 * x * x + np.cos(y))


def test_hessian_with_aux_and_of_a_function_of_a_matrix():
    A = np.array([[2.0, 0.5], [0.5, 1.0]])

    def quad(X):
        return 0.5 * np.sum(X * (A @ X)), "aux"

    X = np.array([[1.0, 2.0], [3.0, 4.0]])
    H, aux = hessian(quad, has_aux=True)(X)
    assert aux == "aux" and H.shape == (2, 2, 2, 2)
    expected = np.einsum("ik,jl->ijkl", A, np.eye(2))  # ∂²/∂X_ij ∂X_kl = A_ik δ_jl
    assert np.allclose(H, expected)


def test_hessian_of_a_program_with_branches_loops_and_objects_matches_finite_differences():
    class Spring:
        def __init__(self, k):
            self.k = k

        def energy(self, d):
            return 0.5 * self.k * d * d if d > 0 else 0.1 * self.k * d ** 4

    def total(x):
        springs = [Spring(k) for k in (1.0, 2.0, 3.0)]
        return sum([s.energy(x[i] - x[i + 1]) for i, s in enumerate(springs[:len(x) - 1])])

    x = np.array([0.5, -0.3, 0.2, 0.9])
    H = hessian(total)(x)
    g = grad(total)
    expected = np.array([fd_gradient(lambda z: g(z)[i], (x,), 0) for i in range(4)])
    assert np.allclose(H, expected, rtol=1e-5, atol=1e-6)
