"""``forwarddiff``: forward mode inside reverse mode (Zygote §5), against ``grad`` of
the same function and finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

import bytegrad
from bytegrad import forwarddiff, grad, jvp

from checks import fd_gradient


def integrate(k, y0):
    """A long computation with two inputs: Euler steps of y' = -k y + sin(y)."""
    y = y0
    for _ in range(200):
        y = y + 0.01 * (-k * y + math.sin(y))
    return y


def test_forwarddiff_gives_the_gradient_grad_gives_and_finite_differences_give():
    def loss(k, y0):
        return forwarddiff(integrate, k, y0) ** 2

    def plain(k, y0):
        return integrate(k, y0) ** 2

    got = grad(loss, argnums=(0, 1))(0.7, 1.3)
    assert got == pytest.approx(grad(plain, argnums=(0, 1))(0.7, 1.3), rel=1e-10)
    assert got[0] == pytest.approx(fd_gradient(plain, (0.7, 1.3), 0), rel=1e-6)
    assert got[1] == pytest.approx(fd_gradient(plain, (0.7, 1.3), 1), rel=1e-6)


def test_forwarddiff_of_arrays_applies_the_transposed_jacobian():
    W = np.array([[1.0, -2.0, 0.5], [0.3, 0.0, 1.0]])

    def layer(x, b):
        return np.tanh(W @ x + b)

    def loss(x, b):
        return np.sum(forwarddiff(layer, x, b) * np.array([2.0, -1.0]))

    x, b = np.array([0.1, -0.4, 0.8]), np.array([0.2, -0.3])
    gx, gb = grad(loss, argnums=(0, 1))(x, b)
    plain = lambda x, b: np.sum(layer(x, b) * np.array([2.0, -1.0]))  # noqa: E731
    assert np.allclose(gx, fd_gradient(plain, (x, b), 0), rtol=1e-6)
    assert np.allclose(gb, fd_gradient(plain, (x, b), 1), rtol=1e-6)


def test_forwarddiff_runs_plainly_and_in_forward_mode():
    assert forwarddiff(math.sin, 0.3) == math.sin(0.3)
    assert jvp(lambda a: forwarddiff(integrate, a, 1.0), (0.7,), (1.0,))[1] == \
        pytest.approx(fd_gradient(integrate, (0.7, 1.0), 0), rel=1e-6)


def test_a_function_capturing_a_differentiable_value_gets_its_gradient_by_reverse_mode():
    def loss(k):
        return forwarddiff(lambda y0: integrate(k, y0), 1.0) ** 2

    assert grad(loss)(0.7) == pytest.approx(fd_gradient(lambda k: integrate(k, 1.0) ** 2, (0.7,), 0),
                                            rel=1e-6)


def test_forwarddiff_refuses_a_container_argument_by_line():
    with pytest.raises(TypeError, match=r"test_forwarddiff\.py:\d+: forwarddiff takes floats and float arrays"):
        grad(lambda a: forwarddiff(lambda xs: xs[0] * xs[1], [a, 2.0]))(1.0)
