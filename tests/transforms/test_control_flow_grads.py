"""Gradients of scalar Python code with control flow, checked against finite
differences (`check_grad`) or exact closed forms.

Tests marked "needs math rules" call ``math.sin``/``math.exp``/... and need the
rules of ``primitives/math.py``; tests marked "needs builtin rules" call
``sum``/``min``/``max``/``float`` and need ``primitives/builtins.py``.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import bytegrad
from checks import check_grad, check_stateful


# ---------------------------------------------------------------------------
# straight-line code
# ---------------------------------------------------------------------------

def test_straight_line_polynomial():
    def f(x, y):
        a = x * y
        b = a + x * x
        c = b - y / x
        d = c * c - 3.0 * a
        return d / (1.0 + y * y)

    check_grad(f, 1.3, -0.7)
    check_grad(f, -2.1, 0.4)


def test_straight_line_unary_and_inplace_ops():
    def f(x, y):
        z = -x
        z += y
        z *= x
        z -= 2.0 * y
        z /= 1.5
        z **= 2
        return +z - abs(y) + x ** 3

    check_grad(f, 0.8, 1.7)
    check_grad(f, 1.9, -0.6)


def test_straight_line_reassignment_and_reuse():
    def f(x):
        y = x
        y = y * y
        y = y * x + y
        x = y - x  # the parameter is rebound
        return x * y

    check_grad(f, 1.1)
    check_grad(f, -0.4)


def test_pow_with_float_exponent_and_variable_exponent():
    check_grad(lambda x: x ** 2.5 + x ** -1.5, 1.7)
    check_grad(lambda x, y: x ** y, 1.3, 2.2)
    check_grad(lambda x: 2.0 ** x, 0.9)


def test_int_arguments_get_none():
    def f(x, n):
        return x * n + n * n

    assert bytegrad.gradient(f, 2.0, 3) == (3.0, None)
    check_grad(f, 2.0, 3)


def test_constant_function_gradient_is_zero_or_none():
    def f(x):
        return 3.0

    g, = bytegrad.gradient(f, 2.0)
    assert g is None or g == 0.0


def test_unused_argument():
    def f(x, y):
        return y * y

    g = bytegrad.gradient(f, 2.0, 3.0)
    assert g[0] is None or g[0] == 0.0
    assert g[1] == 6.0


def test_integer_literal_arithmetic_mixed_with_floats():
    def f(x):
        k = 2 * 3 + 1  # an int that carries no gradient
        return k * x + x // 1 * 0 + (x % 1.0)

    check_grad(f, 2.3)


# ---------------------------------------------------------------------------
# if / elif / else
# ---------------------------------------------------------------------------

def piecewise(x):
    if x < -1.0:
        y = -x * x
    elif x < 0.5:
        y = 3.0 * x + 2.0
    elif x < 2.0:
        y = x * x * x
    else:
        y = 1.0 / x
    return y * 2.0


@pytest.mark.parametrize("x", [-2.5, -0.3, 1.2, 3.7])
def test_if_elif_else(x):
    check_grad(piecewise, x)


def test_if_elif_else_closed_form():
    assert bytegrad.gradient(piecewise, -2.0) == (8.0,)
    assert bytegrad.gradient(piecewise, 0.0) == (6.0,)
    assert bytegrad.gradient(piecewise, 1.0) == (6.0,)
    assert bytegrad.gradient(piecewise, 4.0) == (-2.0 / 16.0,)


def test_if_without_else_and_variable_defined_only_in_branch():
    def f(x, y):
        z = x
        if y > x:
            w = y * y
            z = z * w
        if x > 0:
            z = z + x
        return z

    for args in [(0.5, 1.5), (1.5, 0.5), (-0.5, 1.5), (-1.5, -2.5)]:
        check_grad(f, *args)


def test_nested_ifs():
    def f(x, y):
        if x > 0:
            if y > 0:
                return x * y
            else:
                return x - y * y
        else:
            if y > x:
                r = x * x * y
            else:
                r = y / (1.0 + x * x)
            return r

    for args in [(1.0, 2.0), (1.0, -2.0), (-1.0, 2.0), (-1.0, -3.0)]:
        check_grad(f, *args)


def test_branch_on_int_argument():
    def f(x, n):
        if n % 2 == 0:
            return x * x
        return x * x * x

    assert bytegrad.gradient(f, 2.0, 4) == (4.0, None)
    assert bytegrad.gradient(f, 2.0, 3) == (12.0, None)


def test_branch_on_bool_of_float_and_not():
    def f(x, y):
        if not y:
            return x * 10.0
        if x:
            return x * y
        return y

    check_grad(f, 2.0, 3.0)
    assert bytegrad.gradient(f, 2.0, 0.0)[0] == 10.0


# ---------------------------------------------------------------------------
# while loops whose trip count depends on the data
# ---------------------------------------------------------------------------

def halve_until_small(x):
    n = 0
    while x > 1.0:
        x = x / 2.0
        n += 1
    return x * x + n


@pytest.mark.parametrize("x", [0.7, 3.0, 5.0, 100.0])
def test_while_halving(x):
    check_grad(halve_until_small, x)


def test_while_halving_closed_form():
    # 5 → 2.5 → 1.25 → 0.625: x/8, output (x/8)^2 + 3, derivative 2x/64
    assert bytegrad.gradient(halve_until_small, 5.0) == (2 * 5.0 / 64,)


def newton_sqrt(a):
    y = a if a > 1.0 else 1.0
    while abs(y * y - a) > 1e-12 * a:
        y = 0.5 * (y + a / y)
    return y


@pytest.mark.parametrize("a", [0.3, 2.0, 10.0, 123.4])
def test_while_newton_sqrt(a):
    g, = check_grad(newton_sqrt, a)
    assert g == pytest.approx(0.5 / math.sqrt(a), rel=1e-8)


def test_while_newton_cube_root_of_a_function_of_two_args():
    def f(x, y):
        a = x * x + y
        z = 1.0
        k = 0
        while abs(z * z * z - a) > 1e-13 and k < 100:
            z = z - (z * z * z - a) / (3.0 * z * z)
            k += 1
        return z * y

    check_grad(f, 1.5, 2.0)


def test_while_true_with_break():
    def f(x):
        s = 0.0
        t = x
        while True:
            s = s + t
            t = t * 0.5
            if t < 0.01:
                break
        return s

    check_grad(f, 1.3)


def test_while_with_else():
    def f(x):
        k = 0
        while k < 3:
            x = x * x * 0.5 + 0.1
            k += 1
        else:
            x = x + 1.0
        return x

    check_grad(f, 0.9)


def test_while_loop_accumulates_data_dependent_number_of_terms():
    def f(x):
        # exp(x) by its series, stopping when the terms are small
        term, s, k = 1.0, 1.0, 0
        while abs(term) > 1e-17:
            k += 1
            term = term * x / k
            s = s + term
        return s

    g, = check_grad(f, 0.7)
    assert g == pytest.approx(math.exp(0.7), rel=1e-12)


# ---------------------------------------------------------------------------
# for over range with break / continue, early return, nested loops
# ---------------------------------------------------------------------------

def test_for_range_accumulate():
    def f(x):
        s = 0.0
        for i in range(5):
            s = s * x + i
        return s

    # s = x^3 + 2x^2 + 3x + 4 after the loop (Horner with 0..4)
    x = 1.7
    assert bytegrad.gradient(f, x)[0] == pytest.approx(3 * x * x + 4 * x + 3, rel=1e-14)
    check_grad(f, x)


def test_for_range_continue_and_break():
    def f(x):
        s = 0.0
        for i in range(10):
            if i % 2 == 0:
                continue
            s = s + x ** i
            if s > 50.0:
                break
        return s

    check_grad(f, 1.5)
    check_grad(f, 2.5)
    check_grad(f, 0.5)


def test_for_else():
    def f(x):
        for i in range(4):
            x = x * 1.1
            if x > 100.0:
                break
        else:
            x = x * x
        return x

    check_grad(f, 2.0)      # no break: else runs
    check_grad(f, 90.0)     # break


def test_for_range_with_loop_variable_used_in_arithmetic():
    def f(x):
        s = 0.0
        for i in range(1, 6):
            s = s + i * x ** i / (i + 1)
        return s

    check_grad(f, 0.8)


def test_early_return_inside_loop():
    def f(x):
        for i in range(10):
            x = x * 1.5
            if x > 20.0:
                return x * x
        return -x

    check_grad(f, 1.0)     # returns inside the loop
    check_grad(f, 0.001)   # falls through


def test_early_return_inside_while():
    def f(x, y):
        while x < 10.0:
            x = x * y
            if x * y > 30.0:
                return x + y
        return x * y

    check_grad(f, 1.0, 2.0)
    check_grad(f, 1.3, 1.7)


def test_many_returns():
    def f(x):
        if x < 0:
            return x
        for i in range(3):
            if x > 5:
                return x * i
            x = x * 2
        while x > 1:
            x = x - 1
            if x < 2:
                return x * x
        return x * 3

    for x in [-1.0, 6.0, 1.3, 0.1, 0.01]:
        check_grad(f, x)


def test_nested_loops():
    def f(x, y):
        s = 0.0
        for i in range(3):
            t = x
            for j in range(4):
                t = t * y + j
                if j == i:
                    continue
                s = s + t * 0.1
        return s

    check_grad(f, 0.7, 1.2)


def test_nested_loops_with_inner_break_and_data_dependent_while():
    def f(x):
        s = 0.0
        for i in range(4):
            y = x + i
            while y > 1.0:
                y = y * 0.5
            for j in range(5):
                if j > i:
                    break
                s = s + y * j
        return s

    check_grad(f, 0.3)
    check_grad(f, 2.2)


def test_loop_that_never_runs():
    def f(x, n):
        for i in range(n):
            x = x * x
        return x

    assert bytegrad.gradient(f, 3.0, 0) == (1.0, None)
    assert bytegrad.gradient(f, 3.0, 2) == (4 * 27.0, None)


# ---------------------------------------------------------------------------
# and / or, conditional expressions, chained comparisons
# ---------------------------------------------------------------------------

def test_or_returns_a_value():
    def f(x, y):
        return (x * 0.0) or y * y

    check_grad(f, 2.0, 3.0)
    assert bytegrad.gradient(f, 2.0, 3.0)[1] == 6.0


def test_and_returns_a_value():
    def f(x, y):
        return (x * x) and y * x

    check_grad(f, 2.0, 3.0)
    assert bytegrad.gradient(f, 2.0, 3.0) == (3.0, 2.0)


def test_and_or_chain():
    def f(x, y):
        z = (x > 1.0 and x * 2.0) or y * 3.0
        return z

    assert bytegrad.gradient(f, 2.0, 5.0) == (2.0, None) or \
        bytegrad.gradient(f, 2.0, 5.0) == (2.0, 0.0)
    g = bytegrad.gradient(f, 0.5, 5.0)
    assert (g[0] is None or g[0] == 0.0) and g[1] == 3.0
    check_grad(f, 2.0, 5.0)
    check_grad(f, 0.5, 5.0)


def test_or_with_first_operand_truthy_float():
    def f(x, y):
        return x or y

    assert bytegrad.gradient(f, 2.0, 5.0)[0] == 1.0
    assert bytegrad.gradient(f, 0.0, 5.0)[1] == 1.0


def test_conditional_expression():
    def f(x, y):
        a = x * x if x > y else -x * y
        b = y if a > 1.0 else a * y
        return a + b

    for args in [(2.0, 1.0), (0.5, 1.0), (0.3, -0.2), (-2.0, -3.0)]:
        check_grad(f, *args)


def test_chained_comparisons():
    def f(x):
        if 0.0 < x < 1.0:
            return x * x
        elif 1.0 <= x < 2.0 <= x * x:
            return x * x * x
        elif -1.0 < x <= 0.0:
            return -x
        return 5.0 * x

    for x in [0.5, 1.5, 1.2, -0.5, 3.0, -4.0]:
        check_grad(f, x)


def test_comparison_results_used_as_numbers():
    def f(x):
        return (x > 1.0) * x + (x < 1.0) * x * x

    check_grad(f, 2.0)
    check_grad(f, 0.5)


# ---------------------------------------------------------------------------
# tuples: packing, unpacking, starred
# ---------------------------------------------------------------------------

def test_tuple_packing_and_unpacking():
    def f(x, y):
        t = (x, y * y, x * y)
        a, b, c = t
        a, b = b, a  # swap
        return a * 2.0 + b * c

    check_grad(f, 1.5, -0.5)


def test_tuple_indexing():
    def f(x, y):
        t = (x * x, y, 3.0)
        return t[0] * t[1] + t[2] * t[-1] + t[1]

    check_grad(f, 1.5, 2.5)


def test_starred_unpacking():
    def f(x, y):
        first, *mid, last = (x, x * 2.0, y, x * y, y * y)
        s = first * last
        for m in mid:
            s = s + m * m
        return s

    check_grad(f, 0.8, 1.3)


def test_starred_unpacking_empty_middle():
    def f(x, y):
        a, *rest, b = [x, y]
        return a * b + len(rest)

    check_grad(f, 0.8, 1.3)


def test_starred_unpacking_of_tuple_argument():
    def f(t):
        head, *tail = t
        s = head
        for v in tail:
            s = s * v
        return s

    check_stateful(f, (1.5, 2.0, -0.5))


def test_tuple_return_of_inner_function():
    def divmod_like(a, b):
        return a * b, a - b

    def f(x, y):
        p, q = divmod_like(x, y)
        return p * q

    check_grad(f, 2.0, 0.5)


def test_starred_call_arguments():
    def g(a, b, c):
        return a * b - c

    def f(x, y):
        args = (x, y)
        return g(*args, x * y) + g(*[y, y, x])

    check_grad(f, 1.2, 0.7)


def test_list_and_tuple_constructors():
    def f(x, y):
        t = tuple([x, y * y])
        xs = list(t)
        return xs[0] * xs[1] + t[1]

    check_grad(f, 1.5, 0.5)


def test_nested_tuple_unpacking():
    def f(x, y):
        (a, b), c = (x, y * 2.0), x * y
        return a * b * c

    check_grad(f, 1.2, 0.7)


# ---------------------------------------------------------------------------
# loops over lists, tuples, arrays; zip, enumerate, dict.items
# ---------------------------------------------------------------------------

def sum_of_squares(xs):
    s = 0.0
    for v in xs:
        s = s + v * v
    return s


def test_for_over_list_argument():
    g, = check_stateful(sum_of_squares, [1.0, -2.0, 3.5])
    assert g == [2.0, -4.0, 7.0]


def test_for_over_tuple_argument():
    g, = check_stateful(sum_of_squares, (1.0, -2.0, 3.5))
    assert g == (2.0, -4.0, 7.0)


def test_for_over_numpy_array():
    xs = np.array([1.0, -2.0, 3.5, 0.25])
    g, = check_grad(sum_of_squares, xs)
    assert isinstance(g, np.ndarray) and g.shape == xs.shape
    np.testing.assert_allclose(g, 2 * xs)


def test_for_over_list_built_inside():
    def f(x, y):
        s = 1.0
        for v in [x, y, x * y, 2.0]:
            s = s * v + v
        return s

    check_grad(f, 0.5, 1.5)


def test_for_over_tuple_built_inside():
    def f(x, y):
        s = 0.0
        for v in (x, y * y, x - y):
            s = s + v * v * v
        return s

    check_grad(f, 0.5, 1.5)


def test_for_over_list_with_break():
    def f(xs):
        s = 0.0
        for v in xs:
            if v < 0:
                break
            s = s + v * v
        return s

    g, = check_stateful(f, [1.0, 2.0, -1.0, 4.0])
    assert g == [2.0, 4.0, 0.0, 0.0] or g == [2.0, 4.0, None, None]


def test_for_over_array_with_scalar_parameter():
    def f(xs, w):
        s = 0.0
        for v in xs:
            s = s * w + v
        return s

    check_grad(f, np.array([0.5, 1.0, -1.5, 2.0]), 0.9)


def test_for_over_rows_of_2d_array():
    def f(a):
        s = 0.0
        for row in a:
            s = s + row[0] * row[1]
        return s

    a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    g, = check_grad(f, a)
    np.testing.assert_array_equal(g, [[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]])


def test_for_over_dict_keys():
    def f(d):
        s = 0.0
        for k in d:
            s = s + d[k] * d[k]
        return s

    g, = check_stateful(f, {"a": 1.0, "b": -2.0})
    assert g == {"a": 2.0, "b": -4.0}


def test_zip_of_lists():
    def dot(xs, ys):
        s = 0.0
        for a, b in zip(xs, ys):
            s = s + a * b
        return s

    g = check_stateful(dot, [1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert g == ([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])


def test_zip_of_arrays():
    def f(xs, ys):
        s = 0.0
        for a, b in zip(xs, ys):
            s = s + a * b * a
        return s

    check_grad(f, np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]))


def test_zip_unequal_lengths():
    def f(xs, ys):
        s = 0.0
        for a, b in zip(xs, ys):
            s = s + a * b
        return s

    g = check_stateful(f, [1.0, 2.0, 3.0], [4.0, 5.0])
    assert list(g[0]) == [4.0, 5.0, 0.0] or list(g[0]) == [4.0, 5.0, None]


def test_enumerate():
    def f(xs):
        s = 0.0
        for i, v in enumerate(xs):
            s = s + (i + 1) * v * v
        return s

    g, = check_stateful(f, [1.0, 2.0, 3.0])
    assert g == [2.0, 8.0, 18.0]
    check_grad(f, np.array([1.0, 2.0, 3.0]))


def test_enumerate_with_start():
    def f(xs):
        s = 0.0
        for i, v in enumerate(xs, 2):
            s = s + i * v
        return s

    g, = check_stateful(f, [1.0, 2.0, 3.0])
    assert g == [2.0, 3.0, 4.0]


def test_dict_items():
    def f(d):
        s = 0.0
        for k, v in d.items():
            s = s + len(k) * v * v
        return s

    g, = check_stateful(f, {"a": 1.0, "bb": 2.0, "ccc": -1.0})
    assert g == {"a": 2.0, "bb": 8.0, "ccc": -6.0}


def test_dict_values_and_lookup():
    def f(d, x):
        s = d["w"] * x
        for v in d.values():
            s = s + v * x
        return s

    check_stateful(f, {"w": 2.0, "b": 3.0}, 1.5)


def test_dict_built_inside_function():
    def f(x, y):
        d = {"x": x, "y": y * y}
        return d["x"] * d["y"] + d["x"]

    check_grad(f, 1.5, 2.0)


def test_array_index_reads_in_loop_give_full_gradient():
    def f(xs):
        s = 0.0
        for i in range(len(xs)):
            s = s + xs[i] * xs[i] * i
        return s

    xs = np.array([1.0, 2.0, 3.0, 4.0])
    g, = check_grad(f, xs)
    assert isinstance(g, np.ndarray) and g.shape == (4,)
    np.testing.assert_array_equal(g, [0.0, 4.0, 12.0, 24.0])


def test_array_index_reads_of_some_elements_only():
    def f(xs):
        s = 0.0
        for i in range(0, len(xs), 2):
            s = s + xs[i] * 3.0
        return s

    xs = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    g, = check_grad(f, xs)
    assert isinstance(g, np.ndarray) and g.shape == (5,)
    np.testing.assert_array_equal(g, [3.0, 0.0, 3.0, 0.0, 3.0])


def test_array_single_index_read():
    def f(xs):
        return xs[2] * xs[2]

    g, = check_grad(f, np.array([1.0, 2.0, 3.0]))
    assert isinstance(g, np.ndarray)
    np.testing.assert_array_equal(g, [0.0, 0.0, 6.0])


def test_2d_array_index_reads_in_nested_loop():
    def f(a):
        s = 0.0
        n, m = a.shape
        for i in range(n):
            for j in range(m):
                s = s + a[i, j] * a[i, j] * (i - j)
        return s

    a = np.arange(6.0).reshape(2, 3) + 0.5
    g, = check_grad(f, a)
    assert g.shape == a.shape


def test_list_index_reads_in_loop():
    def f(xs, w):
        s = 0.0
        for i in range(len(xs)):
            s = s + xs[i] * w ** i
        return s

    g = check_stateful(f, [1.0, 2.0, 3.0], 0.5)
    assert g[0] == [1.0, 0.5, 0.25]


def test_array_index_with_negative_and_data_dependent_index():
    def f(xs, x):
        i = 0
        while xs[i] < x:
            i += 1
        return xs[i] * x + xs[-1]

    check_grad(f, np.array([1.0, 2.0, 3.0, 4.0]), 2.5)


def test_reversed_list():
    def f(xs):
        s = 0.0
        for v in reversed(xs):
            s = s * 0.5 + v
        return s

    check_stateful(f, [1.0, 2.0, 3.0])


def test_list_append_in_loop():
    def f(xs, w):
        ys = []
        for v in xs:
            ys.append(v * w)
        s = 0.0
        for y in ys:
            s = s + y * y
        return s

    check_stateful(f, [1.0, -2.0, 3.0], 0.5)


def test_list_item_assignment():
    def f(x, y):
        zs = [0.0, 0.0, 1.0]
        zs[0] = x * y
        zs[1] = zs[0] * x
        return zs[0] + zs[1] + zs[2]

    check_grad(f, 1.5, 2.0)


# ---------------------------------------------------------------------------
# comprehensions
# ---------------------------------------------------------------------------

def test_list_comprehension_over_list_argument():
    def f(xs):
        ys = [v * v for v in xs]
        s = 0.0
        for y in ys:
            s = s + y
        return s

    g, = check_stateful(f, [1.0, 2.0, 3.0])
    assert g == [2.0, 4.0, 6.0]


def test_list_comprehension_with_condition_and_closure_over_argument():
    def f(xs, w):
        ys = [v * w for v in xs if v > 0]
        s = 0.0
        for y in ys:
            s = s + y * y
        return s

    check_stateful(f, [1.0, -2.0, 3.0], 0.5)


def test_list_comprehension_over_array():
    def f(xs):
        ys = [xs[i] * i for i in range(len(xs))]
        return ys[0] + ys[1] * ys[2]

    check_grad(f, np.array([1.0, 2.0, 3.0]))


def test_nested_list_comprehension():
    def f(x, y):
        m = [[x * i + y * j for j in range(3)] for i in range(2)]
        s = 0.0
        for row in m:
            for v in row:
                s = s + v * v
        return s

    check_grad(f, 0.3, 0.7)


def test_dict_comprehension():
    def f(xs):
        d = {i: v * v for i, v in enumerate(xs)}
        return d[0] + d[1] * d[2]

    check_stateful(f, [1.0, 2.0, 3.0])


def test_dict_comprehension_over_items():
    def f(d):
        e = {k: v * 2.0 for k, v in d.items()}
        return e["a"] * e["b"]

    g, = check_stateful(f, {"a": 1.5, "b": 2.5})
    assert g == {"a": 10.0, "b": 6.0}


# ---------------------------------------------------------------------------
# calls of other user functions
# ---------------------------------------------------------------------------

def helper_poly(x, a, b=2.0, *, c=1.0):
    return a * x * x + b * x + c


def helper_varargs(*xs):
    s = 0.0
    for v in xs:
        s = s * 2.0 + v
    return s


def helper_kwargs(x, **kw):
    s = x
    for k, v in kw.items():
        s = s * v
    return s


def test_call_positional():
    def f(x, y):
        return helper_poly(x, y) * helper_poly(y, x, x)

    check_grad(f, 0.7, 1.3)


def test_call_keywords_and_defaults():
    def f(x, y):
        return helper_poly(x, a=y) + helper_poly(y, 2.0, c=x) + helper_poly(a=x, x=y, b=x * y)

    check_grad(f, 0.7, 1.3)


def test_call_varargs():
    def f(x, y):
        return helper_varargs(x, y, x * y) + helper_varargs() + helper_varargs(y)

    check_grad(f, 0.7, 1.3)


def test_call_kwargs():
    def f(x, y):
        return helper_kwargs(x, a=y, b=x) + helper_kwargs(y, **{"z": x * x})

    check_grad(f, 0.7, 1.3)


def test_gradient_of_function_with_defaults_directly():
    assert bytegrad.gradient(helper_poly, 2.0, 3.0) == (14.0, 4.0)
    check_grad(helper_poly, 2.0, 3.0)


def test_gradient_of_varargs_function_directly():
    g = check_grad(helper_varargs, 1.0, 2.0, 3.0)
    assert g == (4.0, 2.0, 1.0)


def test_gradient_with_keyword_arguments():
    # keyword arguments are not positional: gradient returns one entry per positional one
    g = bytegrad.gradient(helper_poly, 2.0, 3.0, c=5.0)
    assert g == (14.0, 4.0)


def test_call_chain_depth():
    def a(x):
        return x * x + 1.0

    def b(x):
        return a(x) * a(x + 1.0)

    def c(x):
        return b(a(x)) - a(b(x))

    check_grad(c, 0.3)


def test_function_passed_as_argument():
    def apply_twice(g, x):
        return g(g(x))

    def f(x):
        return apply_twice(lambda v: v * v + x, x)

    check_grad(f, 0.6)


def test_same_function_called_in_loop():
    def step(x, h):
        return x + h * x * (1.0 - x)

    def f(x0, h):
        x = x0
        for _ in range(20):
            x = step(x, h)
        return x

    check_grad(f, 0.1, 0.3)


# ---------------------------------------------------------------------------
# recursion
# ---------------------------------------------------------------------------

def rec_pow(x, n):
    if n == 0:
        return 1.0
    if n % 2 == 0:
        h = rec_pow(x, n // 2)
        return h * h
    return x * rec_pow(x, n - 1)


def fib_poly(x, n):
    """F_0 = 1, F_1 = x, F_n = F_{n-1} + x F_{n-2}."""
    if n == 0:
        return 1.0
    if n == 1:
        return x
    return fib_poly(x, n - 1) + x * fib_poly(x, n - 2)


def test_recursive_power():
    for n in [0, 1, 2, 5, 8]:
        g = bytegrad.gradient(rec_pow, 1.3, n)
        assert g[1] is None
        assert g[0] == pytest.approx(n * 1.3 ** (n - 1) if n else 0.0, rel=1e-13) or \
            (n == 0 and g[0] is None)
    check_grad(rec_pow, 1.3, 7)


def test_recursive_fibonacci_polynomial():
    # F_5 = 1 + 6x + 5x^2 + ... check numerically; F_4 = x^2 + 3x... via FD
    check_grad(fib_poly, 0.7, 6)
    # F_3 = F_2 + x F_1 = (x + x) + x*x = 2x + x^2 → derivative 2 + 2x
    assert bytegrad.gradient(fib_poly, 0.7, 3)[0] == pytest.approx(2 + 2 * 0.7, rel=1e-14)


def test_nested_recursive_function_through_a_cell():
    def f(x):
        def go(v, n):
            return v if n == 0 else go(v * x, n - 1)
        return go(x, 3)  # x^4

    g, = check_grad(f, 1.1)
    assert g == pytest.approx(4 * 1.1 ** 3, rel=1e-13)


def test_mutual_recursion():
    def f(x):
        return is_even_poly(x, 5)

    check_grad(f, 0.6)


def is_even_poly(x, n):
    return 1.0 if n == 0 else x * is_odd_poly(x, n - 1) + 1.0


def is_odd_poly(x, n):
    return x if n == 0 else x * is_even_poly(x, n - 1) - 2.0


# ---------------------------------------------------------------------------
# closures, lambdas, nonlocal
# ---------------------------------------------------------------------------

def test_lambda_capturing_differentiable_variable():
    def f(x):
        g = lambda y: x * y
        return g(3.0)

    assert bytegrad.gradient(f, 2.0) == (3.0,)
    check_grad(f, 2.0)


def test_lambda_capturing_and_taking_differentiable_values():
    def f(x, y):
        g = lambda a: a * x + y
        return g(x) * g(y)

    check_grad(f, 0.7, 1.9)


def test_closure_defined_with_def():
    def f(x):
        scale = x * x

        def inner(y):
            return scale * y + x

        return inner(x) + inner(2.0)

    check_grad(f, 1.3)


def test_nonlocal_rebinding():
    def f(x):
        acc = 0.0

        def add(v):
            nonlocal acc
            acc = acc + v * x

        add(x)
        add(2.0)
        return acc

    g, = check_grad(f, 1.5)
    assert g == pytest.approx(2 * 1.5 + 2.0, rel=1e-14)


def test_nonlocal_rebinding_in_loop():
    def f(x):
        state = x

        def step():
            nonlocal state
            state = state * state * 0.5 + x

        for _ in range(3):
            step()
        return state

    check_grad(f, 0.8)


def test_closure_cell_read_after_rebinding_in_outer_function():
    def f(x):
        y = x
        g = lambda: y * 2.0
        a = g()
        y = x * x  # rebinds the cell the lambda reads
        b = g()
        return a + b * y

    check_grad(f, 1.3)


def test_closure_returned_from_function():
    def make(a):
        def h(v):
            return a * v * v
        return h

    def f(x, y):
        h = make(x)
        return h(y) + make(y)(x)

    check_grad(f, 0.7, 1.9)


def test_lambda_with_default_argument_capturing_value():
    def f(x):
        g = lambda y, k=x: k * y
        return g(2.0) + g(3.0, k=x * x)

    check_grad(f, 0.9)


def test_closure_over_loop_variable():
    def f(x):
        fs = [lambda v, i=i: v * x ** i for i in range(3)]
        s = 0.0
        for g in fs:
            s = s + g(x)
        return s

    check_grad(f, 1.2)


# ---------------------------------------------------------------------------
# bound methods of a user class
# ---------------------------------------------------------------------------

class Quadratic:
    def __init__(self, a, b):
        self.a = a
        self.b = b

    def eval(self, x):
        return self.a * x * x + self.b * x

    def deriv_sum(self, x, y):
        return self.eval(x) * y + 2.0 * self.a * x

    def __call__(self, x):
        return self.eval(x) + 1.0


Q = Quadratic(2.0, -1.0)


def test_bound_method_call_on_global_object():
    def f(x):
        return Q.eval(x) + Q.deriv_sum(x, x)

    check_grad(f, 0.7)


def test_bound_method_object_built_inside_from_constants():
    def f(x):
        q = Quadratic(3.0, 0.5)
        return q.eval(x) * q.deriv_sum(x, 2.0)

    check_grad(f, 0.7)


def test_callable_object():
    def f(x):
        return Q(x) * Q(x * x)

    check_grad(f, 0.7)


def test_gradient_of_bound_method_directly():
    g = bytegrad.gradient(Q.eval, 1.5)
    assert g == (2 * 2.0 * 1.5 - 1.0,)
    check_grad(Q.deriv_sum, 0.7, 1.1)


class Accumulator:
    def __init__(self):
        self.total = 0.0

    def add(self, v):
        self.total = self.total + v * v


def test_method_storing_into_attribute():
    def f(x, y):
        acc = Accumulator()
        acc.add(x)
        acc.add(x * y)
        return acc.total

    check_grad(f, 1.5, 0.5)


def test_object_built_from_differentiable_value():
    def f(x):
        q = Quadratic(x, 1.0)
        return q.eval(2.0)  # 4x + 2

    check_grad(f, 1.5)


# ---------------------------------------------------------------------------
# prints, f-strings, asserts, globals
# ---------------------------------------------------------------------------

def test_print_and_fstring_do_not_break_gradients(capsys):
    def f(x):
        y = x * x
        print(f"y = {y:.3f}, x = {x!r}")
        msg = f"{x} and {y * 2.0}"
        print("value", y, msg, sep="|")
        return y * x

    check_grad(f, 1.5)
    assert "y = 2.250" in capsys.readouterr().out


def test_string_formatting_with_percent_and_format():
    def f(x):
        s = "%.2f" % x
        t = "{:.1f}".format(x * 2.0)
        return x * x * (len(s) + len(t))

    check_grad(f, 1.5)


# pytest rewrites the asserts of test modules (a failing one calls pytest's own
# helpers, which are not differentiable), so functions with asserts are compiled
# from source here, as they would be in user code.
_ASSERT_SRC = """
def with_asserts(x):
    assert x > 0, f"x must be positive, got {x}"
    y = x * x
    assert y >= 0
    assert isinstance(y, float), "y is a float"
    return y * 3.0
"""
_assert_ns = {}
exec(compile(_ASSERT_SRC, "<assert-source>", "exec"), _assert_ns)
with_asserts = _assert_ns["with_asserts"]


def test_assert_statements():
    check_grad(with_asserts, 1.5)
    assert bytegrad.gradient(with_asserts, 1.5) == (9.0,)


def test_assert_failure_propagates():
    with pytest.raises(AssertionError, match="x must be positive, got -1.0"):
        bytegrad.gradient(with_asserts, -1.0)


SCALE = 3.0
COEFFS = (1.0, -2.0, 0.5)
OFFSETS = {"a": 1.5}
N_STEPS = 4


def test_globals_holding_constants():
    def f(x):
        s = 0.0
        for c in COEFFS:
            s = s * x + c
        for _ in range(N_STEPS):
            s = s + SCALE * x
        return s + OFFSETS["a"] * x

    check_grad(f, 1.2)
    g, = bytegrad.gradient(f, 1.2)
    assert g == pytest.approx(2 * 1.2 - 2.0 + N_STEPS * SCALE + 1.5, rel=1e-14)


def test_module_level_function_reading_globals():
    def f(x):
        return piecewise(x * SCALE)

    check_grad(f, 0.1)


# ---------------------------------------------------------------------------
# generic numbers and complex inputs
# ---------------------------------------------------------------------------

def test_fraction_exact():
    assert bytegrad.gradient(lambda x: x ** 2 + 3 * x + 1, Fraction(1, 3)) == (Fraction(11, 3),)


def test_fraction_with_control_flow_exact():
    def f(x, y):
        s = Fraction(0)
        for i in range(3):
            if s < 1:
                s = s + x * y
            else:
                s = s - y / x
        return s

    g = bytegrad.gradient(f, Fraction(1, 2), Fraction(3, 4))
    # s: 3/8 → 3/4 → 9/8 (three additions, s < 1 before each): s = 3xy
    assert g == (Fraction(9, 4), Fraction(3, 2))
    assert all(type(v) is Fraction for v in g)


def test_complex_input_abs_squared():
    def f(z):
        return (z * z.conjugate()).real

    g, = check_grad(f, 1.0 + 2.0j)
    assert g == pytest.approx(2.0 + 4.0j)


def test_complex_input_with_loop_and_branch():
    def f(z, w):
        s = z
        for _ in range(3):
            s = s * w + z
        if s.real > 0:
            return s.real * s.imag
        return abs(s)

    check_grad(f, 0.3 + 0.4j, 0.9 - 0.2j)
    check_grad(f, -0.3 + 0.4j, 0.9 + 0.5j)


def test_complex_abs():
    check_grad(lambda z: abs(z * z + 1.0), 0.5 + 1.5j)


def test_complex_mixed_with_real_argument():
    def f(z, x):
        return (z * x).imag * x + z.real

    g = check_grad(f, 0.5 + 1.5j, 2.0)
    assert isinstance(g[1], float)


def test_numpy_scalar_inputs():
    check_grad(lambda x: x * x * 3.0 + x, np.float64(1.5))


# ---------------------------------------------------------------------------
# functions that need math rules (primitives/math.py)
# ---------------------------------------------------------------------------

def test_math_functions_in_control_flow():  # needs math rules
    def f(x):
        y = math.sin(x) * x
        if y > 0.5:
            y = math.exp(-y) + math.cos(y)
        else:
            y = math.tanh(y) * math.log(1.0 + x * x)
        for i in range(3):
            y = y + math.sqrt(1.0 + y * y) * 0.1
        return y

    check_grad(f, 0.3)
    check_grad(f, 1.4)


def test_builtins_in_control_flow():  # needs builtin rules (sum, min, max, float)
    def f(xs, y):
        s = sum(xs) + sum([v * v for v in xs])
        return max(s, y) * min(float(y), 2.0 * y)

    check_stateful(f, [1.0, 2.0, 3.0], 0.5)


def test_for_loop_over_an_array_where_some_items_get_no_gradient():
    def f(a):
        s = 0.0
        for v in a:
            if v > 0:
                s = s + v * v
        return s
    check_grad(f, np.array([-1.0, 2.0, 3.0, -0.5]))


def test_closure_made_inside_reads_globals():
    def f(x):
        def inner(z):
            return x * z + math.sin(x)
        return inner(2.0)
    check_grad(f, 1.1)


def _pick(a, b, c):
    return a * b + c


@pytest.mark.regression
def test_star_call_of_an_array_gives_an_array_gradient():
    g, = bytegrad.gradient(lambda x: _pick(*x), np.array([1.0, 2.0, 3.0]))
    assert isinstance(g, np.ndarray) and g.shape == (3,)
    assert np.allclose(g, [2.0, 1.0, 1.0])
