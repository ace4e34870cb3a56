"""The NumPy cases: array code written once with ``import numpy as np``.

Each function below is ordinary NumPy code; the primal timing runs it on NumPy arrays and
bytegrad differentiates exactly it.  The other peers run the very same code object with
the global ``np`` rebound to their own NumPy (``autograd.numpy``, ``jax.numpy``, or a
small torch namespace in ``bench/peer.py``): see ``Case.peer_fn`` in ``case.py``.  Functions the cases
call (``lotka_volterra``) use arithmetic only, or are rebound the same way.

Reference gradients are closed forms (or, for the RK4 loop, a hand-written discrete
adjoint), computed with NumPy.
"""
from __future__ import annotations

import numpy as np

try:
    from .case import Case
except ImportError:  # run as a script from bench/ (the peer subprocess)
    from case import Case


# ------------------------------------------------------------------------------ the cases

def mlp(W1, b1, W2, b2, X, Y):
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    return np.mean((out - Y) ** 2)


def trace_ab(A, B):
    return np.trace(A @ B)


def softmax_xent(logits, label):
    z = logits - np.max(logits)
    return np.log(np.sum(np.exp(z))) - z[label]


def lotka_volterra(x, y, alpha):
    xy = x * y
    return alpha * x - 0.4 * xy, 0.1 * xy - 0.4 * y


def rk4(x0, y0, alpha, dt, steps):
    x, y = x0, y0
    for _ in range(steps):
        k1x, k1y = lotka_volterra(x, y, alpha)
        k2x, k2y = lotka_volterra(x + 0.5 * dt * k1x, y + 0.5 * dt * k1y, alpha)
        k3x, k3y = lotka_volterra(x + 0.5 * dt * k2x, y + 0.5 * dt * k2y, alpha)
        k4x, k4y = lotka_volterra(x + dt * k3x, y + dt * k3y, alpha)
        x = x + dt / 6 * (k1x + 2 * k2x + 2 * k3x + k4x)
        y = y + dt / 6 * (k1y + 2 * k2y + 2 * k3y + k4y)
    return np.sum(x * y)


# ------------------------------------------------------------------------------ inputs

def _mlp_args(n=256, batch=64):
    rng = np.random.default_rng(2)
    return (rng.standard_normal((n, n)) / np.sqrt(n), 0.1 * rng.standard_normal(n),
            rng.standard_normal((n, n)) / np.sqrt(n), 0.1 * rng.standard_normal(n),
            rng.standard_normal((batch, n)), rng.standard_normal((batch, n)))


def _trace_args(n=200):
    rng = np.random.default_rng(3)
    return rng.standard_normal((n, n)), rng.standard_normal((n, n))


def _softmax_args(n=100):
    rng = np.random.default_rng(4)
    return 3.0 * rng.standard_normal(n), 37


def _rk4_args(n=100):
    rng = np.random.default_rng(5)
    return rng.uniform(5.0, 15.0, n), rng.uniform(2.0, 8.0, n), 1.1, 0.05, 50


# ------------------------------------------------------------------------------ references

def _mlp_grad(W1, b1, W2, b2, X, Y):
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    dout = 2.0 * (out - Y) / out.size
    dpre = (dout @ W2.T) * (1.0 - h * h)
    return X.T @ dpre, dpre.sum(0), h.T @ dout, dout.sum(0)


def _trace_grad(A, B):
    return B.T, A.T


def _softmax_grad(logits, label):
    p = np.exp(logits - logits.max())
    p /= p.sum()
    p[label] -= 1.0
    return (p,)


def _lv_vjp(x, y, alpha, u, v):
    """The pullback of ``lotka_volterra`` at (x, y, alpha) for output gradients (u, v)."""
    return u * (alpha - 0.4 * y) + 0.1 * v * y, -0.4 * u * x + v * (0.1 * x - 0.4), float(np.sum(u * x))


def _rk4_grad(x0, y0, alpha, dt, steps):
    """The discrete adjoint of ``rk4``, by hand: the states going forward, then each step's
    four stages in reverse."""
    states = [(x0, y0)]
    x, y = x0, y0
    for _ in range(steps):
        k1 = lotka_volterra(x, y, alpha)
        k2 = lotka_volterra(x + 0.5 * dt * k1[0], y + 0.5 * dt * k1[1], alpha)
        k3 = lotka_volterra(x + 0.5 * dt * k2[0], y + 0.5 * dt * k2[1], alpha)
        k4 = lotka_volterra(x + dt * k3[0], y + dt * k3[1], alpha)
        x = x + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        y = y + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        states.append((x, y))
    gx, gy, ga = y.copy(), x.copy(), 0.0               # d sum(x * y)
    for x, y in reversed(states[:-1]):
        k1 = lotka_volterra(x, y, alpha)
        p2 = (x + 0.5 * dt * k1[0], y + 0.5 * dt * k1[1])
        k2 = lotka_volterra(*p2, alpha)
        p3 = (x + 0.5 * dt * k2[0], y + 0.5 * dt * k2[1])
        k3 = lotka_volterra(*p3, alpha)
        p4 = (x + dt * k3[0], y + dt * k3[1])
        c1, c2 = dt / 6, dt / 3
        k1x, k1y, k2x, k2y = c1 * gx, c1 * gy, c2 * gx, c2 * gy
        k3x, k3y, k4x, k4y = c2 * gx, c2 * gy, c1 * gx, c1 * gy
        px, py, pa = _lv_vjp(*p4, alpha, k4x, k4y)      # stage 4 at s + dt k3
        gx, gy, ga = gx + px, gy + py, ga + pa
        k3x, k3y = k3x + dt * px, k3y + dt * py
        px, py, pa = _lv_vjp(*p3, alpha, k3x, k3y)      # stage 3 at s + dt/2 k2
        gx, gy, ga = gx + px, gy + py, ga + pa
        k2x, k2y = k2x + 0.5 * dt * px, k2y + 0.5 * dt * py
        px, py, pa = _lv_vjp(*p2, alpha, k2x, k2y)      # stage 2 at s + dt/2 k1
        gx, gy, ga = gx + px, gy + py, ga + pa
        k1x, k1y = k1x + 0.5 * dt * px, k1y + 0.5 * dt * py
        px, py, pa = _lv_vjp(x, y, alpha, k1x, k1y)     # stage 1 at s
        gx, gy, ga = gx + px, gy + py, ga + pa
    return gx, gy, ga


# ------------------------------------------------------------------------------ hand-written

def trace_ab_closed_form(A, B):
    """The value and the closed-form gradient ``(B.T, A.T)``."""
    return np.trace(A @ B), (B.T, A.T)


def trace_ab_by_hand(A, B):
    """The value and the gradient by the chain rule written out by hand, the rules bytegrad
    applies (``trace``'s pullback is ``dy * I``, ``@``'s is ``(dC @ B.T, A.T @ dC)``)."""
    C = A @ B
    y = np.trace(C)
    dC = np.eye(C.shape[0])
    return y, (dC @ B.T, A.T @ dC)


def trace_ab_gradient_only(A, B):
    """The closed-form gradient alone, without the value: two transposed views."""
    return B.T, A.T


NUMPY_CASES = [
    Case("mlp", mlp, _mlp_args, (0, 1, 2, 3), _mlp_grad,
         "h = tanh(X @ W1 + b1), out = h @ W2 + b2, mean((out - Y)^2); W1, W2 256x256, "
         "b1, b2 256, X, Y 64x256, float64; d/dW1, d/db1, d/dW2, d/db2 (not X, Y)",
         target=2.6),
    Case("trace_AB", trace_ab, _trace_args, (0, 1), _trace_grad,
         "trace(A @ B), A, B 200x200; d/dA, d/dB",
         hand={"closed form, with the value": trace_ab_closed_form,
               "chain rule by hand, with the value": trace_ab_by_hand,
               "closed form (B.T, A.T) alone": trace_ab_gradient_only},
         hand_target=("closed form, with the value", 1.3)),
    Case("softmax_xent", softmax_xent, _softmax_args, (0,), _softmax_grad,
         "z = logits - max(logits), log(sum(exp(z))) - z[label]; 100 classes, integer label; "
         "d/dlogits", target=6.0),
    Case("rk4", rk4, _rk4_args, (0, 1, 2), _rk4_grad,
         "RK4, 50 steps of dt = 0.05 of Lotka-Volterra (x' = alpha x - 0.4 xy, "
         "y' = 0.1 xy - 0.4 y) on arrays of 100 states; sum(x * y) at the end; "
         "d/dx0, d/dy0, d/dalpha", jit_last=True),
]
