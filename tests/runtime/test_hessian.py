"""``hessian`` and ``hvp``: JAX's conventions (``argnums``, pytrees, ``has_aux``),
against closed forms and finite differences of the gradient."""
from __future__ import annotations

import functools
import math
import os
import re
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytegrad
from bytegrad import grad, hessian, hvp
from bytegrad.runtime import hessian as hessian_module, jax_api

import batched_passes
from batched_passes import passes, retrying, same  # noqa: F401  (passes: a fixture)
from checks import fd_hessian

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "transforms"))
from test_random_programs import draw_program  # noqa: E402


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


class Spring:
    def __init__(self, k):
        self.k = k

    def energy(self, d):
        return 0.5 * self.k * d * d if d > 0 else 0.1 * self.k * d ** 4


def test_hessian_of_a_program_with_branches_loops_and_objects_matches_finite_differences():
    def total(x):
        springs = [Spring(k) for k in (1.0, 2.0, 3.0)]
        return sum([s.energy(x[i] - x[i + 1]) for i, s in enumerate(springs[:len(x) - 1])])

    x = np.array([0.5, -0.3, 0.2, 0.9])
    H = hessian(total)(x)
    expected = fd_hessian(total, x)
    assert np.allclose(H, expected, rtol=1e-5, atol=1e-6)


# -- hvp outside any differentiation: one reverse pass over the tangent code -------------

@settings(max_examples=25, deadline=None)
@given(st.integers(2, 8).flatmap(lambda n: st.tuples(
    st.lists(st.floats(-2, 2), min_size=n, max_size=n),
    st.lists(st.floats(-2, 2), min_size=n, max_size=n))))
def test_hvp_of_the_rosenbrock_loop_matches_its_closed_form(xv):
    x, v = map(np.array, xv)
    assert np.allclose(hvp(rosenbrock, (x,), (v,)), rosenbrock_hessian(x) @ v, rtol=1e-12, atol=1e-9)


def piecewise(x):
    s, i = 0.0, 0
    while i < len(x):
        a = x[i]
        if a > 0.2:
            s = s + a * a * x[(i + 1) % len(x)] / (1.0 + a * a)
        elif a < -0.5:
            s -= -a ** 3 + 2 * a
        else:
            s = s * 0.5 + 3 * a ** 2 - a / 4
        i += 1
    return s * s + len(x)


def mixed_types(x, m):
    t = 0  # (an int at first, then a float64)
    for i in range(len(x)):
        t = t + i * x[i] ** 2
    rows = [m[j] * x[j] for j in range(m.shape[0])]  # (rows of a matrix: arrays)
    return t * (rows[0] @ rows[1]) + float(x[0]) * -x[1] + math.fsum([x[0] * x[2]])


class Scale:
    def __init__(self, k):
        self.k = k

    def apply(self, v):
        return self.k * v * v if v > 0 else -v


def with_objects(x, scale):
    s = 0.0
    for i in range(len(x)):
        s = s + scale.apply(x[i]) * x[0]
    return s


@pytest.mark.parametrize("f, args", [
    (piecewise, (np.array([0.7, -0.9, 0.1, 0.4, -0.2]),)),
    (mixed_types, (np.array([0.3, -0.6, 1.1]), np.array([[0.5, 1.5, -1.0], [2.0, -0.5, 0.25]]))),
    (with_objects, (np.array([0.4, -1.3, 0.8]), Scale(1.5))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_hvp_of_programs_with_branches_loops_and_mixed_types_matches_finite_differences(f, args):
    v = np.random.default_rng(1).standard_normal(args[0].shape)
    got = hvp(f, args, (v,) + (None,) * (len(args) - 1))
    g = grad(f)
    h = 1e-6
    fd = (g(args[0] + h * v, *args[1:]) - g(args[0] - h * v, *args[1:])) / (2 * h)
    assert np.allclose(got, fd, rtol=1e-5, atol=1e-6)
    assert np.allclose(got, bytegrad.jvp(g, args, (v,) + (None,) * (len(args) - 1))[1], rtol=1e-12, atol=1e-12)


def test_hvp_lays_out_zeros_and_argnums_as_the_jvp_of_the_gradient_does():
    def f(x, w, n, d):
        return np.sum(x ** 2 * w[0]) + d["a"] * n + 0.0 * np.sum(d["b"])

    args = (np.array([1.0, 2.0]), (0.5, 3.0), 4, {"a": 1.5, "b": np.zeros(2)})
    ts = (np.array([1.0, -1.0]), (1.0, 0.0), None, {"a": 1.0})
    for argnums in (0, (0, 1), (1, 3), (3,), (), 2, (0, 2), -4):  # (w[1], n: no gradient)
        got = hvp(f, args, ts, argnums)
        want = bytegrad.jvp(grad(f, argnums), args, ts)[1]
        assert _same_tree(got, want), argnums


def _same_tree(a, b):
    if isinstance(a, (tuple, list, dict)):
        ks = a.keys() if isinstance(a, dict) else range(len(a))
        return type(a) is type(b) and len(a) == len(b) and all(_same_tree(a[k], b[k]) for k in ks)
    return type(a) is type(b) and (a is None or np.array_equal(a, b))


def test_hvp_inside_a_gradient_is_the_jvp_of_the_gradient_lifted():
    f = lambda x: x ** 3 * math.sin(x)  # noqa: E731
    x = 0.7
    d3 = (6 * math.sin(x) + 18 * x * math.cos(x) - 9 * x * x * math.sin(x)
          - x ** 3 * math.cos(x))
    assert math.isclose(grad(lambda x: hvp(f, (x,), (1.0,)))(x), d3, rel_tol=1e-12)
    assert math.isclose(bytegrad.jvp(lambda x: hvp(f, (x,), (1.0,)), (x,), (1.0,))[1], d3, rel_tol=1e-12)


def test_hvp_of_a_piecewise_constant_function_is_none_as_the_jvp_of_its_gradient():
    assert hvp(lambda x: int(x > 0), (1.0,), (1.0,)) is None
    assert bytegrad.jvp(grad(lambda x: int(x > 0)), (1.0,), (1.0,))[1] is None


def test_hessian_of_a_function_with_no_gradient_is_zero_never_nan():
    # (a column that is None would leave the Jacobian's empty blocks as they were: NaN;
    # its gradient, None, is the zero: JAX's Hessian of a constant is zeros)
    for f in (lambda x: int(x[0] > 0), lambda x: 3.0):
        assert hessian(f)(np.array([1.0, 2.0])).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def _scaled_cubes(x, scale=1.0, shift=0.5, power=3):
    return scale * np.sum((x - shift) ** power)


@pytest.mark.parametrize("kw", [{"scale": 2.0}, {"power": 4}, {"shift": -1.0, "scale": 0.5},
                                {"power": 4, "scale": 3.0, "shift": 0.0}])
def test_hessian_passes_keyword_arguments_through_as_jax_does(kw):
    x = np.array([1.0, 2.0, -0.5])
    a = {**dict(scale=1.0, shift=0.5, power=3), **kw}
    p = a["power"]
    closed = np.diag(a["scale"] * p * (p - 1) * (x - a["shift"]) ** (p - 2))
    np.testing.assert_allclose(hessian(_scaled_cubes)(x, **kw), closed, rtol=1e-12)


def test_hessian_passes_a_keyword_only_argument_through():
    def f(x, *, scale=1.0):
        return scale * np.sum(x ** 3)
    x = np.array([1.0, -2.0])
    np.testing.assert_allclose(hessian(f)(x, scale=2.0), np.diag(12.0 * x), rtol=1e-12)


# -- hessian's columns in one reverse pass: the tangents and the seed batched ------------

by_columns = functools.partial(batched_passes.by_columns, hessian)


@pytest.fixture
def batched(passes, monkeypatch):
    """The batched passes, taken from one column on (not `hessian_module.FEWEST`)."""
    monkeypatch.setattr(hessian_module, "FEWEST", 1)
    return passes


def trig(x):
    return math.sin(x[0]) * math.exp(x[1]) + math.log(x[2] ** 2 + 1.0) + np.tanh(x[0] * x[2])


def branches(x):
    s = 0.0
    for i in range(len(x)):
        if x[i] > 0:
            s = s + x[i] ** 3
        else:
            s = s - x[i] * x[0]
    return s


def quotients(x):
    q = x[0] / (x[1] + x[2] ** 2) - 1.0 / x[0]
    q += abs(x[1]) * x[2] ** 2 + max(x[1], x[2]) ** 2
    return -q * x[1] + (+x[2]) ** 2.5


def springs(x):
    parts = {"s": [Spring(k) for k in (1.0, 2.0)]}
    return sum([s.energy(x[i] - x[i + 1]) for i, s in enumerate(parts["s"])])


@pytest.mark.parametrize("f", [rosenbrock, trig, branches, quotients, springs])
def test_scalar_programs_take_their_hessian_in_one_pass(f, batched):
    x = np.array([0.7, -1.3, 0.4])
    H = hessian(f)(x)
    assert batched == [False]
    same(H, by_columns(f, x))
    np.testing.assert_allclose(H, fd_hessian(f, x), rtol=1e-5, atol=1e-6)


def test_the_rosenbrock_loop_takes_chunks_of_columns_in_passes(batched, monkeypatch):
    x = np.linspace(-1.0, 1.5, 12)
    monkeypatch.setattr(jax_api, "_BATCHED_ELEMENTS", 60)  # five columns a pass: three passes
    np.testing.assert_allclose(hessian(rosenbrock)(x), rosenbrock_hessian(x), rtol=1e-12, atol=1e-9)
    assert batched == [False]


def test_dicts_argnums_and_keywords_go_through_the_batch(batched):
    def f(p, y, scale=1.0):
        return scale * (p["w"][0] ** 2 * p["b"] + p["b"] ** 3 * y + math.sin(p["w"][1] * y))

    p, y = {"w": np.array([0.3, -0.8]), "b": 1.5}, 0.6
    same(hessian(f)(p, y, scale=2.0), by_columns(f, p, y, scale=2.0))
    same(hessian(f, argnums=(0, 1))(p, y), by_columns(f, p, y, argnums=(0, 1)))
    assert batched == [False, False]


@pytest.mark.parametrize("f", [lambda x: np.sum(np.sin(x) * x ** 2), lambda x: x @ x])
def test_vectorised_numpy_goes_a_column_at_a_time(f, batched):
    x = np.array([0.7, -1.3, 0.4])
    H = hessian(f)(x)
    assert batched == [True]  # (NumPy's reductions of a Batch: not defined)
    np.testing.assert_allclose(H, fd_hessian(f, x), rtol=1e-5, atol=1e-6)


@pytest.mark.regression
def test_an_unbatchable_caught_by_a_bare_except_of_yours_still_abandons_the_batch(batched):
    def f(x):
        try:
            t = np.sum(x * x)  # (a Batch's reduction raises inside; caught below)
        except:  # noqa: E722
            t = 0.0
        return t + x[0] ** 3

    x = np.array([0.5, 2.0])
    np.testing.assert_allclose(hessian(f)(x), [[2.0 + 6 * 0.5, 0.0], [0.0, 2.0]], rtol=1e-12)
    assert batched == [True]


def test_an_error_of_yours_is_raised_as_the_columns_raise_it(batched):
    def f(x):
        if x[0] > 0:
            raise ValueError("yours")
        return x[0] ** 2

    with pytest.raises(ValueError, match="yours"):
        hessian(f)(np.array([1.0]))
    assert batched == [True]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_programs_batched_are_the_column_by_column_hessian(data):
    src, f, args, y, _ = draw_program(data, use_math=True)
    argnums = tuple(range(len(args)))
    fewest, hessian_module.FEWEST = hessian_module.FEWEST, 1
    try:
        try:
            want = by_columns(f, *args, argnums=argnums)
        except Exception as e:  # (no gradient, refused; a construct second order refuses)
            with pytest.raises(type(e), match=re.escape(str(e)[:40])):
                hessian(f, argnums)(*args)
            return
        same(hessian(f, argnums)(*args), want, rtol=1e-9)
    finally:
        hessian_module.FEWEST = fewest


def test_a_few_columns_go_one_at_a_time(passes):
    f = rosenbrock
    for n in (hessian_module.FEWEST - 1, hessian_module.FEWEST):
        x = np.linspace(-1.0, 1.5, n)
        np.testing.assert_allclose(hessian(f)(x), rosenbrock_hessian(x), rtol=1e-12, atol=1e-9)
    assert passes == [False]  # (only the second: batched)


@pytest.mark.regression
@pytest.mark.parametrize("argnums", [(0, 0), (1, -1), (-1, -2)])
def test_an_argument_named_twice_or_from_the_end_gets_every_block(argnums, batched):
    def f(a, b):
        return a[0] ** 2 * b[1] + a[1] * b[0] ** 3

    a, b = np.array([1.0, 2.0]), np.array([0.5, 1.5])
    H = {(0, 0): [[2 * b[1], 0.0], [0.0, 0.0]], (1, 1): [[6 * a[1] * b[0], 0.0], [0.0, 0.0]],
         (0, 1): [[0.0, 2 * a[0]], [3 * b[0] ** 2, 0.0]]}
    block = lambda i, j: np.array(H[(i, j)]) if (i, j) in H else np.array(H[(j, i)]).T  # noqa: E731
    pos = [i % 2 for i in argnums]
    want = tuple(tuple(block(i, j) for j in pos) for i in pos)
    same(hessian(f, argnums)(a, b), want)
    same(by_columns(f, a, b, argnums=argnums), want)
    assert batched == [False]
    same(bytegrad.jacfwd(lambda a, b: np.array([a[0] ** 2 * b[1], a[1] * b[0] ** 3]), (0, 0))(a, b),
         (np.diag([2 * a[0] * b[1], b[0] ** 3]),) * 2)


def square(v):
    return v * v


@bytegrad.frule(square)
def _square_tangent(tangents, v):
    (dv,) = tangents  # (a rule of yours may test its tangent's type: it never sees a batch)
    return square(v), 2.0 * v * dv if isinstance(dv, (float, np.floating, np.ndarray)) else 0.0


@pytest.mark.regression
def test_a_forward_rule_of_yours_never_takes_a_batch(batched):
    f = lambda x: square(x[0] * x[1]) * x[2]  # noqa: E731
    x = np.array([0.3, -1.2, 2.0])
    H = hessian(f)(x)
    assert batched == [True]
    np.testing.assert_allclose(H, fd_hessian(f, x), rtol=1e-5, atol=1e-6)


@pytest.mark.regression
def test_code_of_yours_that_retries_on_any_error_ends(batched):
    attempts = []
    f = retrying(attempts, lambda v, x: v ** 3 * x[1])
    np.testing.assert_allclose(hessian(f)(np.array([0.5, 2.0])), [[6.0, 0.75], [0.75, 0.0]], rtol=1e-12)
    assert batched == [True] and len(attempts) <= 2


@pytest.mark.regression
def test_a_float32_input_gets_its_gradients_in_its_dtype(batched):
    f = lambda s: math.sin(s) * s ** 3 * np.float64(1.0)  # noqa: E731
    for x in (np.float32(0.7), np.array(0.7, dtype=np.float32)):
        np.testing.assert_array_equal(hessian(f)(x), by_columns(f, x))
    assert batched == [False, False]


@pytest.mark.regression
def test_an_input_the_value_does_not_depend_on_gets_zero_blocks():
    # (refused: "hessian needs float inputs and outputs ... got a NoneType"; JAX gives zeros)
    p = {"w": np.array([0.5, -1.0]), "b": 0.3}
    h = bytegrad.hessian(lambda p: np.sum(p["w"] ** 3))(p)
    np.testing.assert_allclose(h["w"]["w"], np.diag(6 * p["w"]))
    assert h["w"]["b"].tolist() == [0.0, 0.0] and h["b"]["w"].tolist() == [0.0, 0.0] and h["b"]["b"] == 0.0
    h2 = bytegrad.hessian(lambda x, y: np.sum(x ** 3), (0, 1))(np.array([0.5, 2.0]), 1.5)
    np.testing.assert_allclose(h2[0][0], np.diag([3.0, 12.0]))
    assert h2[1][1] == 0.0 and h2[0][1].tolist() == [0.0, 0.0]
