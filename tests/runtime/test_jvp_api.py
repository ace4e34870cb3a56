"""The JAX-style API: ``jvp``, ``vjp``, ``jacfwd``, ``jacrev``, ``jacobian`` and
``has_aux`` on ``grad``/``value_and_grad``: conventions, shapes, pytrees, closed forms,
errors, and inputs left as they were."""
from __future__ import annotations

import collections
import math
import typing

import numpy as np
import pytest

import bytegrad
from bytegrad import grad, jacfwd, jacobian, jacrev, jvp, value_and_grad, vjp

rng = np.random.default_rng(11)
W = rng.standard_normal((2, 3))


def lin_tanh(x):
    return np.tanh(W @ x)


def closed_form_jacobian(x):
    return (1 - np.tanh(W @ x) ** 2)[:, None] * W


# -- jvp ------------------------------------------------------------------------------

def test_jvp_is_the_directional_derivative_in_closed_form():
    y, dy = jvp(lambda x, y: x * math.sin(y), (2.0, 0.5), (1.0, 0.0))
    assert y == 2.0 * math.sin(0.5) and dy == math.sin(0.5)
    y, dy = jvp(lambda x, y: x * math.sin(y), (2.0, 0.5), (0.0, 1.0))
    assert dy == pytest.approx(2.0 * math.cos(0.5))
    x, v = rng.standard_normal(3), rng.standard_normal(3)
    y, dy = jvp(lin_tanh, (x,), (v,))
    np.testing.assert_allclose(dy, closed_form_jacobian(x) @ v, rtol=1e-12)


def test_jvp_zero_tangents_give_zeros_of_the_outputs_kind():
    y, dy = jvp(lambda x, n: (np.sin(x) * 0 + 1.0, n + 1, 2.5), (np.ones(2), 3), (None, None))
    np.testing.assert_array_equal(dy[0], np.zeros(2))
    assert dy[1] is None and dy[2] == 0.0


def test_jvp_leaves_primals_and_tangents_unchanged_and_hands_back_its_own_arrays():
    x, v = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    x0, v0 = x.copy(), v.copy()

    def f(a):
        b = a * 1.0
        b[0] = 3.0 * a[1]
        return a  # the tangent handed back must not be the caller's v

    y, dy = jvp(f, (x,), (v,))
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(v, v0)
    assert dy is not v and not np.shares_memory(dy, v)
    dy *= 2
    np.testing.assert_array_equal(v, v0)


def test_jvp_of_pytrees():
    def f(p, x):
        return {"out": np.tanh(p["w"] @ x + p["b"]), "reg": np.sum(p["w"] ** 2)}

    p = {"w": W, "b": np.zeros(2)}
    x = rng.standard_normal(3)
    tw = rng.standard_normal(W.shape)
    y, dy = jvp(f, (p, x), ({"w": tw}, None))
    pre = W @ x
    np.testing.assert_allclose(dy["out"], (1 - np.tanh(pre) ** 2) * (tw @ x), rtol=1e-12)
    assert dy["reg"] == pytest.approx(2 * np.sum(W * tw))


class _Point(typing.NamedTuple):
    a: float
    b: float = 1.5


_Pair = collections.namedtuple("_Pair", "a b")


@pytest.mark.regression
@pytest.mark.parametrize("kind", [_Point, _Pair], ids=["typing.NamedTuple", "collections.namedtuple"])
def test_jvp_takes_a_named_tuple_tangent(kind):
    # (a NamedTuple tangent was rebuilt as kind([da, db]): field a held both, b its
    # default, a wrong jvp; collections' raised TypeError)
    def f(p):
        return 2.0 * p.b * p.a * p.a
    p, t = kind(0.5, 0.8), kind(1.0, 10.0)
    slope = 2.0 * (t.b * p.a ** 2 + 2 * p.b * p.a * t.a)
    assert jvp(f, (p,), (t,))[1] == pytest.approx(slope)
    assert jvp(lambda ps: f(ps[0]), ([p],), ([t],))[1] == pytest.approx(slope)
    assert tuple(bytegrad.hvp(f, (p,), (t,))) == pytest.approx((4 * p.b * t.a + 4 * p.a * t.b, 4 * p.a * t.a))


@pytest.mark.parametrize("primals, tangents, err, match", [
    ((np.ones(3),), (np.ones(2),), ValueError, r"tangents\[0\] has shape \(2,\) but its primal has shape \(3,\)"),
    ((1.0, 2.0), (1.0,), ValueError, "2 primals and 1 tangents"),
    (np.ones(3), np.ones(3), TypeError, r"tuples, one entry per positional argument"),
    ((3,), (1.0,), TypeError, r"tangents\[0\]: its primal int is not differentiable.*pass None"),
    (([1.0, 2.0],), ([1.0],), ValueError, r"tangents\[0\] must be a tuple or list of 2 tangents"),
    (({"a": 1.0},), ({"b": 1.0},), ValueError, r"keys among its primal's \['a'\]"),
])
def test_jvp_bad_tangents_are_named(primals, tangents, err, match):
    with pytest.raises(err, match=match):
        jvp(lambda *a: a[0], primals, tangents)


def test_jvp_an_integer_primal_accepts_a_zero_tangent():
    assert jvp(lambda x, n: x * n, (2.0, 3), (1.0, 0)) == (6.0, 3.0)


# -- vjp ------------------------------------------------------------------------------

def test_vjp_returns_a_tuple_of_cotangents():
    x = rng.standard_normal(3)
    y, vjp_fn = vjp(lin_tanh, x)
    ct = np.array([1.0, -2.0])
    (g,) = vjp_fn(ct)
    np.testing.assert_allclose(g, closed_form_jacobian(x).T @ ct, rtol=1e-12)
    out, vjp_fn, aux = vjp(lambda x: (np.sum(x ** 2), {"n": len(x)}), x, has_aux=True)
    assert aux == {"n": 3}
    np.testing.assert_allclose(vjp_fn(1.0)[0], 2 * x)


def test_forward_and_reverse_agree_on_random_directions():
    x, u, v = rng.standard_normal(3), rng.standard_normal(2), rng.standard_normal(3)
    _, jv = jvp(lin_tanh, (x,), (v,))
    _, vjp_fn = vjp(lin_tanh, x)
    assert float(u @ jv) == pytest.approx(float(vjp_fn(u)[0] @ v), rel=1e-12)


# -- Jacobians ------------------------------------------------------------------------

@pytest.mark.parametrize("jac", [jacfwd, jacrev, jacobian])
def test_jacobian_of_a_vector_function_is_m_by_n(jac):
    x = rng.standard_normal(3)
    J = jac(lin_tanh)(x)
    assert J.shape == (2, 3)
    np.testing.assert_allclose(J, closed_form_jacobian(x), rtol=1e-12)


@pytest.mark.parametrize("jac", [jacfwd, jacrev])
def test_jacobian_shapes_follow_jax(jac):
    A = rng.standard_normal((2, 2))
    J = jac(lambda a: a @ a)(A)  # (2, 2) → (2, 2): (2, 2, 2, 2)
    assert J.shape == (2, 2, 2, 2)
    E = np.eye(2)
    for i in range(2):
        for j in range(2):
            e = np.outer(E[i], E[j])
            np.testing.assert_allclose(J[..., i, j], e @ A + A @ e, rtol=1e-12)
    g = jac(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))  # scalar output: the gradient's shape
    np.testing.assert_allclose(g, [3.0, 12.0])
    s = jac(lambda t: np.array([t, t * t]))(3.0)  # scalar input: (2,)
    np.testing.assert_allclose(s, [1.0, 6.0])


@pytest.mark.parametrize("jac", [jacfwd, jacrev])
def test_jacobian_argnums_and_pytrees(jac):
    def f(x, y):
        return {"a": x * y[0], "b": (np.sum(x) * y[1],)}

    x, y = np.array([1.0, 2.0]), (3.0, 4.0)
    J = jac(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(J["a"][0], 3.0 * np.eye(2))
    np.testing.assert_allclose(J["a"][1][0], x)
    np.testing.assert_allclose(J["a"][1][1], [0.0, 0.0])
    np.testing.assert_allclose(J["b"][0][0], [4.0, 4.0])
    assert J["b"][0][1][1] == pytest.approx(3.0)
    Jx = jac(f, argnums=0)(x, y)
    np.testing.assert_allclose(Jx["b"][0], [4.0, 4.0])


def _appending(xs, a):
    xs.append(xs[0] * 2.0)  # (changes its arguments: the list grows, the array is scaled)
    a *= 3.0
    return xs[0] * xs[1] + xs[-1] + np.sum(a * a)


@pytest.mark.regression
@pytest.mark.parametrize("jac", [jacfwd, jacrev])
def test_a_jacobian_of_a_function_that_changes_its_arguments(jac):
    # (laid out as the arguments were after the call, and each column computed after the
    # last had changed them: StopIteration, or a RuntimeError from a generator)
    xs, a = [0.5, 1.5], np.array([1.0, -2.0])
    plain_xs, plain_a = list(xs), a.copy()
    _appending(plain_xs, plain_a)
    J = jac(_appending, argnums=(0, 1))(xs, a)
    assert xs == plain_xs and np.array_equal(a, plain_a)  # (as one call leaves them)
    h = 1e-6
    for i in range(2):
        up, down = [0.5, 1.5], [0.5, 1.5]
        up[i] += h
        down[i] -= h
        fd = (_appending(up, np.array([1.0, -2.0])) - _appending(down, np.array([1.0, -2.0]))) / (2 * h)
        assert float(J[0][i]) == pytest.approx(fd, rel=1e-6)
    np.testing.assert_allclose(J[1], 18.0 * np.array([1.0, -2.0]), rtol=1e-12)


def test_jacrev_runs_the_function_once(monkeypatch):
    calls = []

    def f(x):
        calls.append(1)
        return np.sin(x)

    J = jacrev(f)(np.array([0.1, 0.2, 0.3]))
    assert len(calls) == 1
    np.testing.assert_allclose(J, np.diag(np.cos([0.1, 0.2, 0.3])))


@pytest.mark.parametrize("jac", [jacfwd, jacrev])
def test_jacobian_has_aux_and_rejects_integers(jac):
    J, aux = jac(lambda x: (x * 2.0, "note"), has_aux=True)(np.ones(2))
    np.testing.assert_allclose(J, 2 * np.eye(2))
    assert aux == "note"
    with pytest.raises(TypeError, match="needs float inputs"):
        jac(lambda n: n * 2.0)(3)


# -- has_aux ------------------------------------------------------------------------------

def test_grad_and_value_and_grad_with_aux():
    def loss(w, x):
        pred = w @ x
        return np.sum(pred ** 2), {"pred": pred, "n": 2}

    w, x = W.copy(), rng.standard_normal(3)
    g, aux = grad(loss, has_aux=True)(w, x)
    np.testing.assert_allclose(g, 2 * np.outer(w @ x, x), rtol=1e-12)
    np.testing.assert_allclose(aux["pred"], w @ x)
    (out, aux2), (gw, gx) = value_and_grad(loss, argnums=(0, 1), has_aux=True)(w, x)
    assert out == pytest.approx(np.sum((w @ x) ** 2))
    np.testing.assert_allclose(gx, 2 * w.T @ (w @ x), rtol=1e-12)
    assert aux2["n"] == 2


def test_has_aux_needs_a_pair():
    with pytest.raises(TypeError, match=r"has_aux=True: .* must return a pair \(output, aux\)"):
        grad(lambda x: x * 2.0, has_aux=True)(1.0)


def test_jvp_of_methods_classes_and_object_tangents():
    import dataclasses

    @dataclasses.dataclass
    class P:
        w: float

        def energy(self, x):
            return self.w * x ** 2

    p = P(2.0)
    assert jvp(p.energy, (3.0,), (1.0,)) == (18.0, 12.0)  # d/dx w x² = 2 w x
    obj, dobj = jvp(P, (3.0,), (1.0,))
    assert obj == P(3.0) and dobj == {"w": 1.0}
    assert jvp(lambda q, x: q.energy(x), (p, 3.0), ({"w": 1.0}, None)) == (18.0, 9.0)  # d/dw = x²


@pytest.mark.regression
@pytest.mark.parametrize("jac", [bytegrad.jacfwd, bytegrad.jacrev, bytegrad.jacobian])
def test_jacobians_pass_keyword_arguments_through(jac):
    """As JAX's: keyword arguments reach ``f`` and get no derivative (the functions took
    none, and the TypeError blamed the user's function)."""
    f = lambda x, *, s, shift=0.0: np.sin(x) * s + shift  # noqa: E731
    x = np.array([0.3, -1.2])
    assert np.allclose(jac(f)(x, s=3.0, shift=1.0), np.diag(3.0 * np.cos(x)))


@pytest.mark.regression
def test_a_jacobian_given_an_argument_that_cannot_be_copied():
    # (the arguments were copied to tell whether the call changed them: TypeError, cannot
    # pickle '_thread.lock' or 'module')
    import threading

    def f(x, lock, m):
        with lock:
            return m.sin(x) * x
    x = np.array([0.5, 2.0])
    want = np.diag(np.cos(x) * x + np.sin(x))
    np.testing.assert_allclose(jacfwd(f)(x, threading.Lock(), np), want, rtol=1e-12)
    np.testing.assert_allclose(bytegrad.hessian(lambda x, lock: np.sum(f(x, lock, np)))(x, threading.Lock()),
                               np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-12)


@pytest.mark.regression
@pytest.mark.parametrize("jac", [jacfwd, jacrev])
def test_a_jacobian_of_an_empty_output(jac):
    # (jacfwd reshaped its columns with -1: a ValueError from NumPy for a zero-size output)
    x = np.array([0.3, -1.2, 2.0])
    assert jac(lambda v: v[:0])(x).shape == (0, 3)
    assert jac(lambda v: v[:0].reshape(0, 2))(np.ones(2)).shape == (0, 2, 2)

