"""The seed programs: a straight-line program with a known closed form, and the
call chains of the Zygote / IRTools blog posts (``foo(x) = baz(bar(x))``, with a
branch and with a loop), against closed forms and finite differences.

The ``*_sin`` variants use ``math.sin``/``math.cos`` and need the rules of
``primitives/math.py``; the others use operators only.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import bytegrad
from checks import check_grad


# ---------------------------------------------------------------------------
# (a) straight-line: v = 2 p q + 3 r = 490 x^3 + 3 / y
# ---------------------------------------------------------------------------

def seed_a(x, y):
    p = 7 * x
    r = 1 / y
    q = p * x * 5
    v = 2 * p * q + 3 * r
    return v


@pytest.mark.parametrize("x, y", [(1.0, 1.0), (2.0, 3.0), (-0.5, 0.25), (1.7, -2.3)])
def test_seed_a_closed_form(x, y):
    dx, dy = bytegrad.gradient(seed_a, x, y)
    assert dx == pytest.approx(1470 * x * x, rel=1e-14)
    assert dy == pytest.approx(-3 / (y * y), rel=1e-14)
    v, (gx, gy) = bytegrad.value_and_gradient(seed_a, x, y)
    assert v == pytest.approx(490 * x ** 3 + 3 / y, rel=1e-14)
    assert (gx, gy) == (dx, dy)


def test_seed_a_finite_differences():
    check_grad(seed_a, 0.9, 1.4)


def test_seed_a_exact_at_integers_valued_floats():
    # all intermediate values are exact in binary floating point here
    assert bytegrad.gradient(seed_a, 2.0, 4.0) == (5880.0, -0.1875)


def test_seed_a_argnums():
    assert bytegrad.grad(seed_a)(2.0, 4.0) == 5880.0
    assert bytegrad.grad(seed_a, argnums=1)(2.0, 4.0) == -0.1875
    assert bytegrad.grad(seed_a, argnums=(1, 0))(2.0, 4.0) == (-0.1875, 5880.0)


def test_seed_a_int_argument_gets_none():
    # an int x is not differentiable, y is
    assert bytegrad.gradient(seed_a, 2, 4.0) == (None, -0.1875)


# ---------------------------------------------------------------------------
# (b) call chains, operators only
# ---------------------------------------------------------------------------

def bar(x):
    return x * x * 0.5 + 0.25


def dbar(x):
    return x


def baz(x):
    return 1.0 / (1.0 + x * x) + 3.0 * x


def dbaz(x):
    return -2.0 * x / (1.0 + x * x) ** 2 + 3.0


def foo(x):
    return baz(bar(x))


def foo_branch(x):
    if x > 1:
        return bar(x)
    else:
        return baz(x)


def foo_loop(x):
    for i in range(10):
        x = bar(x)
    return baz(x)


def foo_loop_closed_form(x):
    d = 1.0
    for i in range(10):
        d = d * dbar(x)
        x = bar(x)
    return d * dbaz(x)


@pytest.mark.parametrize("x", [-1.3, 0.2, 0.9, 2.5])
def test_chain(x):
    g, = bytegrad.gradient(foo, x)
    assert g == pytest.approx(dbaz(bar(x)) * dbar(x), rel=1e-13)
    check_grad(foo, x)


@pytest.mark.parametrize("x", [-1.3, 0.2, 0.9, 2.5])
def test_chain_with_branch(x):
    g, = bytegrad.gradient(foo_branch, x)
    assert g == pytest.approx(dbar(x) if x > 1 else dbaz(x), rel=1e-13)
    check_grad(foo_branch, x)


@pytest.mark.parametrize("x", [-0.9, 0.1, 0.6, 1.1])
def test_chain_with_loop(x):
    g, = bytegrad.gradient(foo_loop, x)
    assert g == pytest.approx(foo_loop_closed_form(x), rel=1e-12, abs=1e-300)
    check_grad(foo_loop, x)


def test_chain_value_unchanged():
    y, back = bytegrad.pullback(foo_loop, 0.6)
    assert y == foo_loop(0.6)
    assert back(1.0)[0] == pytest.approx(foo_loop_closed_form(0.6), rel=1e-12)


def zygote_pow(x, n):
    r = 1
    for i in range(n):
        r *= x
    return r


def test_zygote_pow():
    # Zygote's README: gradient(x -> pow(x, 3), 5) == (75,)
    assert bytegrad.gradient(zygote_pow, 5.0, 3) == (75.0, None)
    assert bytegrad.gradient(lambda x: zygote_pow(x, 3), 5.0) == (75.0,)
    check_grad(zygote_pow, 1.3, 6)


def test_zygote_pow_small_exponents():
    # pow(x, 0) is the int 1 (what `gradient` does with an int output is
    # tested in tests/runtime/test_api_and_errors.py); its pullback gives nothing
    y, back = bytegrad.pullback(zygote_pow, 5.0, 0)
    assert y == 1 and type(y) is int
    assert bytegrad.gradient(zygote_pow, 5.0, 1) == (1.0, None)
    assert bytegrad.gradient(zygote_pow, 5.0, 2) == (10.0, None)


# ---------------------------------------------------------------------------
# (b) call chains with math.sin — need the math rules
# ---------------------------------------------------------------------------

def bar_sin(x):
    return math.sin(x) * x


def dbar_sin(x):
    return math.cos(x) * x + math.sin(x)


def baz_sin(x):
    return x * x + 3.0 * x


def dbaz_sin(x):
    return 2.0 * x + 3.0


def foo_sin(x):
    return baz_sin(bar_sin(x))


def foo_sin_branch(x):
    if x > 1:
        return bar_sin(x)
    else:
        return baz_sin(x)


def foo_sin_loop(x):
    for i in range(10):
        x = bar_sin(x)
    return baz_sin(x)


def foo_sin_loop_closed_form(x):
    d = 1.0
    for i in range(10):
        d = d * dbar_sin(x)
        x = bar_sin(x)
    return d * dbaz_sin(x)


@pytest.mark.parametrize("x", [-1.3, 0.2, 0.9, 2.5])
def test_chain_sin(x):  # needs math rules
    g, = bytegrad.gradient(foo_sin, x)
    assert g == pytest.approx(dbaz_sin(bar_sin(x)) * dbar_sin(x), rel=1e-13)
    check_grad(foo_sin, x)


@pytest.mark.parametrize("x", [-1.3, 0.2, 0.9, 2.5])
def test_chain_sin_with_branch(x):  # needs math rules
    g, = bytegrad.gradient(foo_sin_branch, x)
    assert g == pytest.approx(dbar_sin(x) if x > 1 else dbaz_sin(x), rel=1e-13)
    check_grad(foo_sin_branch, x)


@pytest.mark.parametrize("x", [0.5, 1.0, 1.5, 2.0])
def test_chain_sin_with_loop(x):  # needs math rules
    g, = bytegrad.gradient(foo_sin_loop, x)
    assert g == pytest.approx(foo_sin_loop_closed_form(x), rel=1e-10, abs=1e-12)
    check_grad(foo_sin_loop, x, rtol=1e-4)


def test_chain_on_array_elements():
    # the loop chain, applied to each element read from an array
    def f(xs):
        s = 0.0
        for i in range(len(xs)):
            s = s + foo_loop(xs[i])
        return s

    xs = np.array([-0.9, 0.1, 0.6])
    g, = check_grad(f, xs)
    np.testing.assert_allclose(g, [foo_loop_closed_form(v) for v in xs], rtol=1e-12)
