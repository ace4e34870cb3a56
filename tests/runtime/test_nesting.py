"""Nested differentiation: gradients of gradients in every combination of modes,
against closed forms and finite differences of the inner gradient, with no
perturbation confusion; and the clear refusal of what it does not reach yet."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad import grad, gradient, jvp, pullback, value_and_grad, vjp

from checks import fd_gradient
from signatures import calls


def along(g):
    """``x ↦ d/dε g(x + ε)`` by forward mode."""
    return lambda x: jvp(g, (x,), (1.0,))[1]


OUTER = {"reverse": grad, "forward": along}  # a derivative operator of each mode
INNER = {"reverse": lambda f, y: grad(f)(y), "forward": lambda f, y: jvp(f, (y,), (1.0,))[1]}
COMBINATIONS = [(o, i) for o in OUTER for i in INNER]


# -- perturbation confusion --------------------------------------------------------------

@pytest.mark.parametrize("outer, inner", COMBINATIONS)
def test_no_perturbation_confusion_in_any_combination_of_modes(outer, inner):
    # d/dx [x · d/dy (x + y) at y = 1] at x = 1 is 1 (confusing the two levels gives 2)
    d = INNER[inner]
    assert OUTER[outer](lambda x: x * d(lambda y: x + y, 1.0))(1.0) == 1.0
    # d/dx [x · d/dy (x · y)] = d/dx x² = 2x: the inner derivative depends on x
    assert OUTER[outer](lambda x: x * d(lambda y: x * y, 1.0))(1.5) == pytest.approx(3.0)


# -- second derivatives in closed form ----------------------------------------------------

SECOND = [
    (lambda x: x ** 3 * math.sin(x),
     lambda x: 6 * x * math.sin(x) + 6 * x ** 2 * math.cos(x) - x ** 3 * math.sin(x)),
    (lambda x: math.exp(0.5 * x) * math.cos(x),
     lambda x: math.exp(0.5 * x) * (-0.75 * math.cos(x) - math.sin(x))),
    (lambda x: np.tanh(x), lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
]


@pytest.mark.parametrize("outer, inner", COMBINATIONS)
@pytest.mark.parametrize("k", range(len(SECOND)))
def test_second_derivatives_match_closed_forms(outer, inner, k):
    f, d2 = SECOND[k]
    d = INNER[inner]
    for x in (-0.7, 0.3, 1.9):
        assert OUTER[outer](lambda x: d(f, x))(x) == pytest.approx(d2(x), rel=1e-10, abs=1e-12)


def test_grad_of_grad_with_loops_branches_and_closures():
    def f(x):
        s = 0.0
        for k in range(1, 4):
            s = s + (math.sin(k * x) if x > 0 else x ** k)
        return s

    def d2(x):
        return sum(-k * k * math.sin(k * x) for k in range(1, 4)) if x > 0 else 2 + 6 * x
    for x in (0.4, -0.6):
        assert grad(grad(f))(x) == pytest.approx(d2(x))
        assert jvp(grad(f), (x,), (1.0,))[1] == pytest.approx(d2(x))


def test_hessian_vector_products_on_arrays_match_finite_differences_of_the_gradient():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 4))

    def f(x):
        return np.sum(np.tanh(A @ x) ** 2) + np.sum(x ** 4) * 0.1

    x, v = rng.standard_normal(4), rng.standard_normal(4)
    g = grad(f)
    expected = fd_gradient(lambda x: float(g(x) @ v), (x,), 0)  # H v, H symmetric
    _, hv = jvp(g, (x,), (v,))  # forward over reverse
    assert np.allclose(hv, expected, rtol=1e-6, atol=1e-7)
    rv = grad(lambda x: jvp(f, (x,), (v,))[1])(x)  # reverse over forward
    assert np.allclose(rv, expected, rtol=1e-6, atol=1e-7)
    rr = grad(lambda x: np.sum(grad(f)(x) * v))(x)  # reverse over reverse
    assert np.allclose(rr, expected, rtol=1e-6, atol=1e-7)


def test_gradient_pullback_vjp_and_value_and_grad_inside_a_function_being_differentiated():
    def inner(x, y):
        return x * x * y + math.sin(y)

    def by_gradient(x):
        return gradient(inner, x, 2.0)[0] * x  # 4x · x = 4x²

    def by_pullback(x):
        y, back = pullback(inner, x, 2.0)
        return back(3.0)[0] + y  # 12 x + 2x² + sin 2

    def by_vjp(x):
        y, f = vjp(inner, x, 2.0)
        return f(1.0)[1]  # x² + cos 2

    def by_value_and_grad(x):
        v, g = value_and_grad(inner, argnums=(0, 1))(x, 2.0)
        return v * g[1]  # (2x² + sin 2)(x² + cos 2)

    x = 0.8
    expected = {by_gradient: 8 * x, by_pullback: 12 + 4 * x, by_vjp: 2 * x,
                by_value_and_grad: 4 * x * (x * x + math.cos(2)) + (2 * x * x + math.sin(2)) * 2 * x}
    for fn, d in expected.items():
        assert grad(fn)(x) == pytest.approx(d)
        assert jvp(fn, (x,), (1.0,))[1] == pytest.approx(d)


def test_grad_of_a_function_using_jvp_on_arrays():
    w = np.array([0.5, -1.0, 2.0])

    def directional(x):  # <∇ sum(sin(x)·w), w> = Σ cos(x) w²
        return jvp(lambda z: np.sum(np.sin(z) * w), (x,), (w,))[1]

    x = np.array([0.1, 0.4, -0.3])
    assert np.allclose(grad(directional)(x), -np.sin(x) * w ** 2)


def test_inner_gradients_of_closures_over_arrays_and_objects():
    class Model:
        def __init__(self, w):
            self.w = w

        def loss(self, x):
            return np.sum((self.w * x) ** 2)

    def outer(w):
        m = Model(w)
        gx = grad(m.loss)(np.ones(3))  # 2 w² x
        return np.sum(gx * w)  # 2 Σ w³

    w = np.array([0.5, 1.5, -2.0])
    assert np.allclose(grad(outer)(w), 6 * w ** 2)
    assert np.allclose(jvp(outer, (w,), (np.ones(3),))[1], np.sum(6 * w ** 2))


def test_third_derivatives_over_an_inner_gradient_in_every_order_of_outer_modes():
    def f(x):
        return x ** 4 * math.sin(x)

    def d3(x):  # (x⁴ sin x)'''
        return (24 * x * math.sin(x) + 36 * x * x * math.cos(x) - 12 * x ** 3 * math.sin(x)
                - x ** 4 * math.cos(x))
    x = 0.9
    assert grad(grad(grad(f)))(x) == pytest.approx(d3(x))
    assert along(grad(grad(f)))(x) == pytest.approx(d3(x))
    assert grad(along(grad(f)))(x) == pytest.approx(d3(x))
    assert along(along(grad(f)))(x) == pytest.approx(d3(x))


def test_second_derivatives_through_comprehensions_and_star_calls_of_a_tuple():
    def f(x):
        return sum([x ** k for k in range(4)]) + math.pow(*(x, 3.0))  # 1 + x + 2x² ... + x³

    assert grad(grad(f))(1.5) == pytest.approx(2 + 6 * 1.5 + 6 * 1.5)


def test_what_nesting_does_not_reach_yet_is_refused_by_line_never_a_wrong_gradient():
    def appends_to_its_argument(x, out):
        out.append(x * x)
        return out[0]

    with pytest.raises(NotImplementedError, match=r"test_nesting\.py:\d+: nested differentiation"):
        grad(grad(lambda x: appends_to_its_argument(x, [])))(1.5)


@pytest.mark.parametrize("outer, inner", COMBINATIONS)
def test_calls_like_g_x_star_args_and_loops_over_sequences_differentiate_to_second_order(outer, inner):
    def h(a, b, c):
        return a * b * c

    def over(v):
        s = 0.0
        for x in (v, v * v):
            s = s + x * x
        for j, x in enumerate([v, 2.0]):
            s = s + (j + 1) * x * v
        return s  # v² + v⁴ + v² + 4 v

    def zips(v):
        s = 0.0
        for a, b in zip((v, v * v), [2.0, v]):
            s = s + a * b
        return s  # 2 v + v³
    for f, second in ((lambda v: math.pow(v, *(3.0,)), lambda v: 6.0 * v),
                      (zips, lambda v: 6.0 * v),
                      (lambda v: math.hypot(v, 2.0 * v, 3.0), lambda v: 45.0 / (5.0 * v * v + 9.0) ** 1.5),
                      (lambda v: complex(v, v * v).imag * v, lambda v: 6.0 * v),
                      (lambda v: h(v, *[v * v, 2.0]), lambda v: 12.0 * v),
                      (lambda v: h(*[v], *(v, v)), lambda v: 6.0 * v),
                      (over, lambda v: 4.0 + 12.0 * v ** 2)):
        _second_order_matches(f, second, outer, inner)


# -- generated nested programs ------------------------------------------------------------

UNARY = [np.sin, np.tanh, lambda u: u * u, lambda u: np.exp(0.3 * u)]
BINARY = [lambda a, b: a * b, lambda a, b: a + 2.0 * b, lambda a, b: a - b * b]


def program(ops):
    """``f(x, y)``: a chain of unary and binary steps mixing the outer ``x`` and the inner
    ``y``, with a branch and a loop."""
    def f(x, y):
        u = y
        for kind, k in ops:
            if kind == "u":
                u = UNARY[k](u)
            else:
                u = BINARY[k](u, x) if u > 0 else BINARY[k](x, u)
        return u * x + y
    return f


ops_strategy = st.lists(st.tuples(st.sampled_from("ub"), st.integers(0, 2)), min_size=1, max_size=5)


@settings(max_examples=15, deadline=None)
@given(ops=ops_strategy, x=st.floats(-1.0, 1.0), y=st.floats(-1.0, 1.0))
def test_generated_nested_programs_match_finite_differences_of_the_inner_gradient(ops, x, y):
    f = program(ops)

    def inner_grad(x):  # ∂f/∂y at (x, y), first order: what the outer differentiates
        return gradient(f, x, y)[1]
    expected = fd_gradient(lambda x: x * inner_grad(x), (x,), 0, h=1e-5)
    for outer, inner in COMBINATIONS:
        d = INNER[inner]
        got = OUTER[outer](lambda x: x * d(lambda y: f(x, y), y))(x)
        assert got == pytest.approx(expected, rel=1e-4, abs=1e-6), (outer, inner)


# -- the depth, and what is refused -------------------------------------------------------

def test_nestlevel_is_the_depth_of_differentiation():
    seen = []

    def f(x):
        seen.append(bytegrad.nestlevel())
        return x * x

    grad(grad(f))(1.0)
    assert max(seen) == 2
    seen.clear()
    along(along(f))(1.0)
    assert max(seen) == 2
    seen.clear()
    grad(f)(1.0)
    assert max(seen) == 1


def test_an_inner_gradient_given_a_keyword_that_carries_a_gradient_is_refused_by_line():
    def inner(x, scale=1.0):
        return x * scale

    with pytest.raises(NotImplementedError, match=r"test_nesting\.py:\d+: nested differentiation"):
        grad(lambda x: gradient(inner, x, scale=x)[0])(1.0)


def test_a_jacobian_inside_a_function_being_differentiated_is_refused_by_line():
    with pytest.raises(NotImplementedError, match=r"test_nesting\.py:\d+: a Jacobian"):
        grad(lambda x: bytegrad.jacfwd(np.sin)(x))(1.0)


@pytest.mark.regression
def test_functions_made_in_the_library_s_own_rules_lifted_at_second_order_read_its_globals():
    # (a comprehension or generator expression of a forward rule that a second level
    # lifts took the user's globals: NameError for zero_tangent, _taken)
    def f(x):
        lows = np.array(x, np.float32)  # (a linear rule that checks its other tangents)
        return float(lows[0]) * x[1]

    x = np.array([0.3, -0.6, 1.1])
    assert np.allclose(bytegrad.hvp(f, (x,), (np.ones(3),)), [1.0, 1.0, 0.0])
    assert np.allclose(jvp(grad(f), (x,), (np.ones(3),))[1], [1.0, 1.0, 0.0])
    inner = lambda x: jvp(lambda y: x * y, (1.0,), (1.0,))[1]  # noqa: E731
    with pytest.raises(bytegrad.NestingError):  # (what nesting does not reach: by line)
        bytegrad.hvp(lambda x: x * inner(x), (1.5,), (1.0,))


def test_second_order_matrix_products_match_finite_differences_of_the_gradient():
    # (float matrices take the product's own reverse rules, the rest the lifted forward rule)
    rng = np.random.default_rng(3)
    A, B, C = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal((2, 2))
    u = rng.standard_normal(4)

    def f(A, B, C, u):
        return np.sum(np.tanh(A @ B) @ C) ** 2 + np.sum((A @ u) ** 3)

    args = (A, B, C, u)
    ts = tuple(rng.standard_normal(np.shape(a)) for a in args)
    got = bytegrad.hvp(f, args, ts, argnums=(0, 1, 2, 3))
    g = grad(f, argnums=(0, 1, 2, 3))
    h = 1e-6
    plus = g(*(a + h * t for a, t in zip(args, ts)))
    minus = g(*(a - h * t for a, t in zip(args, ts)))
    for k in range(4):
        assert np.allclose(got[k], (plus[k] - minus[k]) / (2 * h), rtol=1e-5, atol=1e-6), k
    assert all(np.allclose(a, b) for a, b in zip(got, jvp(g, args, ts)[1]))
    one = bytegrad.hvp(f, args, (ts[0], None, None, None), argnums=1)  # (the mixed block alone)
    assert np.allclose(one, jvp(grad(f, 1), args, (ts[0], None, None, None))[1])


@pytest.mark.parametrize("which", [(0,), (1,), (0, 1)])
def test_second_order_array_sums_powers_and_reductions_with_broadcasting_match_finite_differences(which):
    rng = np.random.default_rng(4)
    A, b = rng.standard_normal((5, 4)), rng.standard_normal(4)

    def f(A, b):
        return np.mean((A + b) ** 3) + np.sum(A - b) ** 2 + np.sum(A ** 2, 0) @ b  # (axis by position)

    args = (A, b)
    ts = tuple(rng.standard_normal(a.shape) if i in which else None for i, a in enumerate(args))
    got = bytegrad.hvp(f, args, ts, argnums=(0, 1))
    g, h = grad(f, argnums=(0, 1)), 1e-6
    plus = g(*(a if t is None else a + h * t for a, t in zip(args, ts)))
    minus = g(*(a if t is None else a - h * t for a, t in zip(args, ts)))
    for k in range(2):
        assert np.allclose(got[k], (plus[k] - minus[k]) / (2 * h), rtol=1e-5, atol=1e-6), k


# -- calls with keyword arguments in code differentiated to second order -----------------

def _cubed(x, scale=1.0, *, power=3):
    return scale * x ** power


class _Scaled:
    def __init__(self, k):
        self.k = k

    def at(self, x, *, power=2):
        return self.k * x ** power


@pytest.mark.parametrize("f, second, combinations", [
    (lambda x: _cubed(x, scale=2.0), lambda x: 12.0 * x, COMBINATIONS),  # a keyword naming a position
    (lambda x: _cubed(x, power=4), lambda x: 12.0 * x ** 2, COMBINATIONS),  # a keyword-only one
    (lambda x: _cubed(x, scale=x), lambda x: 12.0 * x ** 2, COMBINATIONS),  # one carrying the gradient
    (lambda x: _cubed(power=3, x=x, scale=x * x), lambda x: 20.0 * x ** 3, COMBINATIONS),  # all by name
    (lambda x: _Scaled(2.0).at(x, power=3), lambda x: 12.0 * x, COMBINATIONS),  # a method's
    (lambda x: np.sum(np.array([[x, 2 * x], [x * x, 1.0]]) ** 2, axis=0)[1], lambda x: 8.0, COMBINATIONS),
    (lambda x: np.mean(np.array([x, x * x]) ** 2, axis=0), lambda x: 1.0 + 6.0 * x ** 2, COMBINATIONS),
])
def test_a_call_with_keywords_differentiates_to_second_order(f, second, combinations):
    for outer, inner in combinations:
        _second_order_matches(f, second, outer, inner)


def _second_order_matches(f, second, outer, inner):
    d2 = OUTER[outer](lambda y: INNER[inner](f, y))
    for x in (0.7, 1.3):
        want = second(x) if second else fd_gradient(lambda y: INNER[inner](f, y), [x], 0, h=1e-5)
        assert d2(x) == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_a_call_with_keywords_differentiates_to_third_order():
    f = lambda x: _cubed(x, scale=x, power=4)  # noqa: E731  (x⁵)
    assert grad(grad(grad(f)))(1.5) == pytest.approx(60.0 * 1.5 ** 2)
    assert along(along(grad(f)))(1.5) == pytest.approx(60.0 * 1.5 ** 2)


def test_hessian_and_hvp_of_numpy_reductions_given_an_axis():
    X = np.array([[0.3, -1.2, 0.8], [1.1, 0.4, -0.6]])

    def f(X):
        return np.sum(np.mean(X ** 3, axis=0) * np.max(X, axis=1, keepdims=True))
    H = bytegrad.hessian(f)(X)
    for i in range(X.size):
        e = np.zeros(X.size)
        e[i] = 1.0
        col = fd_gradient(lambda y: bytegrad.grad(f)(y.reshape(X.shape)).ravel() @ e, [X.ravel()], 0, h=1e-5)
        np.testing.assert_allclose(H.reshape(X.size, X.size)[:, i], col, rtol=1e-5, atol=1e-7)
    v = np.ones_like(X)
    np.testing.assert_allclose(bytegrad.hvp(f, (X,), (v,)), (H.reshape(X.size, X.size) @ v.ravel()).reshape(X.shape),
                               rtol=1e-10)


@settings(max_examples=25, deadline=None)
@given(calls())
def test_second_order_binds_a_call_as_python_does(call):
    # f is linear, so the Hessian of f² is 2 c cᵀ, c its coefficients
    f, src, args, kw = call
    names, n = list(kw), len(args)

    def through(*vals):
        return f(*vals[:n], **{k: vals[n + i] for i, k in enumerate(names)})
    vals = [float(v) for v in args + list(kw.values())]
    if not vals:
        return
    c = [fd_gradient(through, vals, i) for i in range(len(vals))]
    H = bytegrad.hessian(lambda *v: through(*v) ** 2, argnums=tuple(range(len(vals))))(*vals)
    for i in range(len(vals)):
        for j in range(len(vals)):
            assert H[i][j] == pytest.approx(2 * c[i] * c[j], abs=1e-6), (src, i, j)


def test_a_keyword_a_rule_takes_as_a_keyword_carrying_a_gradient_is_refused_by_line():
    def weighted(x, *, w):
        return w * x

    @bytegrad.rule(weighted)
    def _(x, *, w):
        return w * x, lambda d: (None, w * d, {"w": x * d})

    with pytest.raises(bytegrad.NestingError, match=r"test_nesting\.py:\d+: .*keyword argument 'w'"):
        bytegrad.hessian(lambda x: weighted(x, w=x) ** 2)(1.5)


@pytest.mark.regression
@pytest.mark.parametrize("outer, inner", COMBINATIONS)
def test_dicts_built_by_a_comprehension_or_by_unpacking_carry_second_derivatives(outer, inner):
    # (their forward rules changed the dict in place and returned it; the reverse level
    # lifting them followed the value returned, not the change, and the gradient was None)
    def comprehension(v):
        d = {k: v * i for i, k in enumerate(["a", "b", "c"])}
        return d["c"] ** 2  # 4 v²

    def unpacked(v):
        a, b = {"x": v}, {"y": 2 * v}
        c = {**a, **b}
        return c["x"] * c["y"] + _cubed(x=c["x"], scale=v)  # 2 v² + v⁴
    for f, second in ((comprehension, lambda v: 8.0), (unpacked, lambda v: 4.0 + 12.0 * v ** 2)):
        _second_order_matches(f, second, outer, inner)


def _vec(x):
    return np.array([x, x * x, 0.5])


def _mat(x):  # (distinct singular values, no ties in row or column sums)
    return np.array([[x, 0.3, -1.0], [x * x, 2.0, 0.1]])


NUMPY_SECOND = {
    "sin": lambda x: np.sum(np.sin(_vec(x))), "exp": lambda x: np.exp(_vec(x)).sum(),
    "tanh": lambda x: np.tanh(_vec(x))[1], "dot": lambda x: np.dot(_vec(x), _vec(x)),
    "max": lambda x: np.max(_vec(x) * _vec(x)), "where": lambda x: np.where(_vec(x) > 0.6, _vec(x), -_vec(x)).sum(),
    "clip": lambda x: np.clip(_vec(x), 0.1, 0.6).sum(), "cumsum": lambda x: np.cumsum(_vec(x) ** 2)[2],
    "prod": lambda x: np.prod(_vec(x)), "norm": lambda x: np.linalg.norm(_vec(x)), "std": lambda x: np.std(_vec(x)),
    "solve": lambda x: np.linalg.solve(np.array([[2.0, x], [x, 3.0]]), np.array([1.0, x]))[0],
    "outer": lambda x: np.outer(_vec(x), _vec(x))[0, 1], "reshape": lambda x: (_vec(x).reshape(3, 1) ** 3).sum(),
    "concatenate": lambda x: np.concatenate([_vec(x), _vec(x) ** 2]).sum(),
    "stack": lambda x: np.stack([_vec(x), _vec(x)], axis=1)[1, 0] ** 3,
    "ndarray.sum": lambda x: (_vec(x) ** 2).sum(), "mean axis": lambda x: np.mean(np.outer(_vec(x), _vec(x)) ** 2, axis=1)[0],
    "norm ord=2": lambda x: np.linalg.norm(_vec(x), ord=2),
    "norm axis": lambda x: np.linalg.norm(np.outer(_vec(x), _vec(x)), axis=1)[0] ** 1.5,
    "norm fro": lambda x: np.linalg.norm(np.outer(_vec(x), _vec(x)) + 1.0, "fro"),
    **{f"norm matrix ord={p}": (lambda p: lambda x: np.linalg.norm(_mat(x), p))(p)
       for p in (2, -2, "nuc", 1, -1, np.inf, -np.inf)},
    **{f"norm vector ord={p}": (lambda p: lambda x: np.linalg.norm(_vec(x) - 0.3, p))(p)
       for p in (1, 3, 0.5, np.inf, -np.inf)},
    "norm matrix ord=2 axis": lambda x: np.linalg.norm(np.stack([_mat(x), _mat(x) ** 2]), 2, axis=(1, 2))[1],
}


@pytest.mark.parametrize("name", NUMPY_SECOND)
def test_numpy_functions_differentiate_to_second_order_in_every_combination_of_modes(name):
    f = NUMPY_SECOND[name]
    for outer, inner in COMBINATIONS:
        _second_order_matches(f, None, outer, inner)


@pytest.mark.regression
@pytest.mark.parametrize("outer, inner", COMBINATIONS)
def test_a_starred_argument_followed_by_others_differentiates_to_second_order(outer, inner):
    # (``g(*t, v)`` builds its argument list by extending, then appending in place; the
    # append's forward rule changed the list, which a reverse level did not follow: 2.8 for 4.2)
    def g(a, b, c):
        return a * c ** 2

    for f, second in ((lambda v: g(*(v,), v * v, v), lambda v: 6.0 * v),
                      (lambda v: g(*(v,), 2.0, v) * v, lambda v: 12.0 * v ** 2),
                      (lambda v: max(*(v * v,), v ** 3) * v, lambda v: 6.0 * v if v < 1 else 12.0 * v * v),
                      (lambda v: g(*(v,), v * v, *(v,)), lambda v: 6.0 * v)):
        _second_order_matches(f, second, outer, inner)


@pytest.mark.regression
@pytest.mark.parametrize("outer, inner", COMBINATIONS)
def test_a_ufunc_writing_into_out_at_second_order_is_refused_by_line(outer, inner):
    # (a ValueError: the call of the inner level's tangent, which passes ``out=`` on to the
    # ufunc, was taken for the ufunc, its pair (value, tangent) written into the array)
    def f(x):
        a = np.array([x, 2.0])
        return np.sum(np.multiply(a, a, out=np.empty(2)) * x)
    assert bytegrad.grad(f)(0.7) == pytest.approx(3 * 0.7 ** 2 + 4.0)
    # (forward over reverse refuses the change in place first: the array out= writes)
    with pytest.raises((TypeError, bytegrad.NestingError),
                       match=r"test_nesting\.py:\d+: (numpy.multiply: in-place out=|nested .* change in place)"):
        OUTER[outer](lambda y: INNER[inner](f, y))(0.7)


@pytest.mark.parametrize("outer, inner", COMBINATIONS)
def test_lists_and_arrays_a_function_makes_and_changes_differentiate_to_second_order(outer, inner):
    def in_list(x):
        xs = [x, 1.0]
        xs[1] = x * x
        return xs[0] * xs[1]  # x³

    def appended(x):
        xs = [x]
        xs.append(x * x)
        return xs[0] * xs[-1]  # x³

    def in_array(x):
        a = np.zeros(3)
        for i in range(3):
            a[i] = x ** (i + 1)
        a[0] = a[0] * a[2]  # x⁴
        return a.sum()  # x⁴ + x² + x³

    for f, second in ((in_list, lambda x: 6.0 * x), (appended, lambda x: 6.0 * x),
                      (in_array, lambda x: 12.0 * x * x + 2.0 + 6.0 * x)):
        _second_order_matches(f, second, outer, inner)


@pytest.mark.regression
@pytest.mark.parametrize("outer, inner", COMBINATIONS)
def test_a_change_in_place_at_second_order_is_refused_by_line_in_every_combination(outer, inner):
    # (forward over forward gave numbers, wrong ones: 1.4 for 4.2)
    def in_array(x):
        a = np.array([x, 2 * x, 3.0])
        view = a[0:2]
        a += x ** 2
        return np.sum(view * view)

    def in_dict(x):
        d = {"a": x}
        d.update(b=x * x, a=x ** 3)
        return d["a"] * d["b"]

    def view_read_after_a_write(x):  # (a view that a later write changes: not passed on)
        a = np.zeros(2)
        view = a[:1]
        a[0] = x * x
        return np.sum(view) * x

    for f in (in_array, in_dict, view_read_after_a_write):
        with pytest.raises(bytegrad.NestingError,
                           match=r"test_nesting\.py:\d+: .*(change in place|a part of an array read)"):
            OUTER[outer](lambda y: INNER[inner](f, y))(0.7)


def _squares_its_first(xs):
    xs[0] = xs[0] ** 2  # (changes its argument)
    return xs[0] * xs[1]


_GLOBAL = np.array([2.0])


def _scales_a_global(x):
    _GLOBAL[0] = _GLOBAL[0] * x  # (changes what the module holds)
    return _GLOBAL[0] * x


@pytest.mark.regression
def test_forward_over_reverse_refuses_a_function_that_changes_what_it_reads():
    # (the inner gradient ran f three times, each scaling the global: 3.38 for 4.0, silently)
    with pytest.raises(bytegrad.NestingError, match=r"test_nesting\.py:\d+: .*a change in place"):
        bytegrad.jvp(bytegrad.grad(_scales_a_global), (1.3,), (1.0,))


@pytest.mark.regression
@pytest.mark.parametrize("second", [
    lambda f, x: bytegrad.jvp(bytegrad.grad(f), (x,), (np.array([1.0, 0.0]),)),
    lambda f, x: bytegrad.hessian(lambda v: (f(v), 0.0), has_aux=True)(x),
    lambda f, x: bytegrad.jacfwd(bytegrad.grad(f))(x)], ids=["jvp of grad", "hessian with aux", "jacfwd of grad"])
def test_forward_over_reverse_refuses_a_function_that_changes_its_arguments(second):
    # (the inner gradient ran f again on what f had changed: [[0, 10.1], [3, 0]] for
    # [[4, 3], [3, 0]], silently)
    with pytest.raises(bytegrad.NestingError, match=r"test_nesting\.py:\d+: .*a change in place of its arguments"):
        second(_squares_its_first, np.array([1.5, 2.0]))
