"""Rules of the builtins min, max, sum, float, complex, round, divmod, int, bool."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
import bytegrad.primitives.builtins  # noqa: F401  (registers the rules)
from bytegrad.runtime.rules import RULES
from checks import check_grad

SETTINGS = settings(max_examples=30, deadline=None)
gradient = bytegrad.gradient


# ---- min and max ----------------------------------------------------------------

def test_max_with_key():
    assert gradient(lambda x: max(x, 2.0 * x, key=abs), -1.5) == (2.0,)
    assert gradient(lambda x: min(x, 2.0 * x, key=abs), -1.5) == (1.0,)
    assert gradient(lambda xs: max(xs, key=lambda v: -v), [1.0, -2.0, 3.0]) == ([None, 1.0, None],)


@SETTINGS
@given(st.floats(-5, 5), st.floats(-5, 5), st.floats(-5, 5))
def test_min_max_several_arguments(a, b, c):
    if min(abs(a - b), abs(b - c), abs(a - c), abs(a * b - c)) < 1e-3:
        return  # too close to a kink for finite differences
    check_grad(lambda a, b, c: max(a, b, c) * 2.0 + min(a * b, c), a, b, c)


@SETTINGS
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=6, unique=True))
def test_min_max_iterable(xs):
    if len(xs) > 1 and min(abs(a - b) for a in xs for b in xs if a is not b) < 1e-3:
        return  # too close to a kink for finite differences
    f = (lambda xs: max(xs) - 3.0 * min(xs))
    g = gradient(f, xs)[0]
    want = [0.0] * len(xs)
    want[xs.index(max(xs))] += 1.0
    want[xs.index(min(xs))] -= 3.0
    assert [0.0 if v is None else v for v in g] == want
    arr = np.array(xs)
    check_grad(f, arr)
    assert type(gradient(f, tuple(xs))[0]) is tuple


def test_min_max_ties_route_to_first():
    assert gradient(lambda a, b: max(a, b), 2.0, 2.0) == (1.0, None)
    assert gradient(lambda a, b: min(a, b), 2.0, 2.0) == (1.0, None)
    assert gradient(lambda xs: max(xs), [1.0, 3.0, 3.0, 2.0]) == ([None, 1.0, None, None],)
    assert gradient(lambda xs: min(xs), (4.0, 1.0, 3.0, 1.0)) == ((None, 1.0, None, None),)
    # with a key: the first element whose key is extreme
    assert gradient(lambda a, b: max(a, b, key=abs), -2.0, 2.0) == (1.0, None)
    g = gradient(lambda xs: max(xs), np.array([1.0, 3.0, 3.0]))[0]
    assert g.tolist() == [0.0, 1.0, 0.0]


def test_min_max_default_and_ints():
    assert gradient(lambda xs, d: min(xs, default=d), [], 2.0) == ([], 1.0)  # a list mirrors its input
    assert gradient(lambda xs, d: max(xs, default=d), [1.0], 2.0) == ([1.0], None)
    assert gradient(lambda a, b: max(a, b), 3, 2.0) == (None, None)  # an int is chosen
    assert gradient(lambda a, b: max(a, b) * 1.0, 1, 2.0) == (None, 1.0)
    with pytest.raises(ValueError):
        gradient(lambda xs: max(xs), [])
    with pytest.raises(TypeError):
        gradient(lambda a, b: max(a, b, default=0.0), 1.0, 2.0)


# ---- sum ------------------------------------------------------------------------

def test_sum_kinds():
    assert gradient(lambda xs: sum(xs), [1.0, 2, 3.0]) == ([1.0, None, 1.0],)
    assert gradient(lambda xs: sum(xs) * 2.0, (1.0, 2.0)) == ((2.0, 2.0),)
    g = gradient(lambda xs: sum(xs), np.arange(4.0))[0]
    assert isinstance(g, np.ndarray) and g.tolist() == [1.0] * 4
    check_grad(lambda m: sum(sum(m)) * 1.5, np.arange(6.0).reshape(2, 3))  # rows, then items
    check_grad(lambda xs, s: sum(xs, s) * sum(xs, start=s), np.array([1.0, -2.0]), 0.5)
    check_grad(lambda x, y, s: sum([x, y * x, 2], s) * sum((x, y), start=s), 1.5, -0.5, 0.25)
    assert gradient(lambda xs, s: sum(xs, start=s), (1.0, 2.0), 3.0) == ((1.0, 1.0), 1.0)
    assert gradient(lambda xs: sum(xs), [1, 2]) == ([None, None],)  # ints get None; the list is mirrored


def test_sum_of_lists_concatenates():
    def f(x, y):
        zs = sum([[x, 1.0], [y]], [])
        return zs[0] * 2.0 + zs[2] * zs[0]

    check_grad(f, 1.5, -0.5)


def test_sum_over_list_built_in_loop():
    def f(xs):
        ys = [v * i for i, v in enumerate(xs)]  # a comprehension: a loop of list appends
        return sum(ys) + sum([v * v for v in xs], 1.0)

    xs = [0.01 * i for i in range(200)]
    g = gradient(f, xs)[0]
    assert type(g) is list and np.allclose(g, [i + 2 * v for i, v in enumerate(xs)])
    check_grad(f, np.linspace(-1.0, 1.0, 7))


def test_sum_over_list_appended_in_loop():
    def f(x, n):
        xs = []
        for i in range(n):
            xs.append(x * i)
        return sum(xs)

    assert gradient(f, 0.3, 100)[0] == pytest.approx(sum(range(100)))


def test_sum_of_a_long_list():
    # speed is measured in bench/, not here; this checks the result on a long input
    n = 100_000
    g, = gradient(lambda xs: sum(xs) * 2.0, [1.0] * n)
    assert type(g) is list and len(g) == n and all(v == 2.0 for v in g)


# ---- float, complex, round, divmod, int, bool ---------------------------------------

def test_float():
    assert gradient(lambda x: float(x) * 2.0, 3.0) == (2.0,)
    assert gradient(lambda x: float(x) * 2.0, 3) == (None,)
    assert gradient(lambda x: float("2.5") * x, 3.0) == (2.5,)
    assert gradient(lambda x: float(x) * 2.0, np.float32(3.0)) == (2.0,)
    g = gradient(lambda x: float(x) * 2.0, np.array(3.0))[0]
    assert isinstance(g, np.ndarray) and g.shape == () and g == 2.0
    check_grad(lambda x: float(x * x) + x, 1.3)


def test_complex():
    assert gradient(lambda x, y: abs(complex(x, y)) ** 2, 3.0, -4.0) == (6.0, -8.0)
    check_grad(lambda x, y: abs(complex(x, y) * (0.5 + 2j) + 1.0), 0.3, -0.8)
    check_grad(lambda x, y: abs(complex(real=x, imag=y) + 1j), 0.3, -0.8)
    check_grad(lambda z, w: abs(complex(z, w) - 2.0), 0.3 + 0.1j, -0.8 + 0.4j)
    check_grad(lambda x: abs(complex(x)) + abs(complex(x, 2)), 0.7)
    assert gradient(lambda x: abs(complex("1+2j")) * x, 2.0) == (5 ** 0.5,)


def test_round_has_zero_gradient_of_the_right_type():
    assert gradient(lambda x: round(x, 1) + x, 7.53) == (1.0,)
    assert gradient(lambda x: round(x) * x, 2.6) == (3.0,)
    _, back = RULES[round](7.53, 1)
    g = back(1.0)
    assert g[1] == 0.0 and type(g[1]) is float and g[2] is None
    _, back = RULES[round](np.float32(1.26), 1)
    assert back(np.float32(1.0))[1] == 0 and type(back(np.float32(1.0))[1]) is np.float32


@SETTINGS
@given(st.floats(-20, 20), st.sampled_from([0.7, 2.5, -1.3, 3.0]))
def test_divmod(a, b):
    if abs(a / b - round(a / b)) < 1e-4:
        return  # too close to a jump for finite differences
    check_grad(lambda a, b: divmod(a, b)[1] * 2.0 + divmod(a, b)[0], a, b)

    def unpacked(a, b):
        q, r = divmod(a, b)
        return r * q

    check_grad(unpacked, a, b)


def test_divmod_values():
    assert gradient(lambda a, b: divmod(a, b)[1], 7.5, 2.0) == (1.0, -3.0)
    assert gradient(lambda a, b: divmod(a, b)[0], 7.5, 2.0) == (0.0, -0.0)
    assert gradient(lambda a, b: divmod(a, b)[1], 7, 2.0) == (None, -3.0)


def test_int_and_bool_are_not_differentiable():
    assert gradient(lambda x: int(x) * x, 2.7) == (2.0,)
    assert gradient(lambda x: x * bool(x) + int(3.5), 2.7) == (1.0,)


def test_dict_from_pairs_and_keywords():
    def f(x, y):
        d = dict([("a", x), ("b", y * x), ("a", y)])  # the later "a" wins
        e = dict({"a": x}, b=y * y)
        g = dict(iter([("c", x * x)]), d=y)
        return d["a"] * d["b"] + e["a"] * e["b"] + g["c"] * g["d"]
    check_grad(f, 0.7, 1.3)


class _Fields:
    def __init__(self, v):
        self.v = v

    @property
    def twice(self):
        return self.v * 2.0


@pytest.mark.regression
def test_getattr_with_a_default():
    assert check_grad(lambda x: getattr(_Fields(x), "zzz", x * 4.0), 0.7) == (4.0,)
    assert check_grad(lambda x: getattr(_Fields(x), "v", 9.0) * x, 0.7) == (1.4,)
    assert check_grad(lambda x: getattr(_Fields(x), "twice", 9.0) * x, 0.7) == (2.8,)
    g = bytegrad.gradient(lambda o, d: getattr(o, "zzz", d) + getattr(o, "v", d), _Fields(0.7), 2.0)
    assert g == ({"v": 1.0}, 1.0)


@pytest.mark.regression
def test_the_object_of_a_bound_method_gets_the_methods_gradient():
    # (its gradient was a dict of the method's fields, {'__self__': g}: a list then
    # summed a str, the key, into a float)
    def from_list(x):
        xs = [x, 2.0]
        m = xs.append
        return m.__self__[0] * x

    def from_object(x):
        f = _Fields(x * x)
        m = f.__repr__
        return m.__self__.v * x
    assert check_grad(from_list, 1.5) == (3.0,)
    assert check_grad(from_object, 1.5) == pytest.approx((3 * 1.5 ** 2,))
    # (forward mode dropped the tangent: 1.19 for 2.87)
    assert bytegrad.jvp(lambda x: sum([x, x * x].count.__self__) * x, (0.7,), (1.0,))[1] == \
        pytest.approx(2 * 0.7 + 3 * 0.7 ** 2)


@pytest.mark.regression
def test_a_gradient_through_an_arrays_base_is_refused_by_line_and_a_test_of_it_is_fine():
    # (the array got a dict of fields for a gradient, {'base': g}, and NumPy failed on it)
    def through_base(x):
        v = (x * 2.0)[1:]
        return np.sum(v.base * x)

    def tests_base(x):
        v = (x * 2.0)[1:]
        return np.sum(v * v) if v.base is not None else 0.0
    x = np.array([0.3, 1.2, -0.7])
    with pytest.raises(NotImplementedError, match=r"test_builtins_rules\.py:\d+: a gradient reaches `\.base`"):
        bytegrad.grad(through_base)(x)
    assert check_grad(tests_base, x)[0] == pytest.approx(np.array([0.0, 8 * 1.2, 8 * -0.7]))


@pytest.mark.regression
def test_fields_of_yours_named_real_and_imag_are_fields():
    # (the complex numbers' special case took them: gradient None for 3 x²)
    def f(x):
        o = _Fields(x)
        o.real, o.imag = x * x, x
        return o.real * o.imag
    assert check_grad(f, 0.7) == pytest.approx((3 * 0.49,))
