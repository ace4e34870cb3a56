"""Calls of transformed functions bind their arguments exactly as Python binds them.

Functions are generated over every combination of parameter kinds (positional-only,
positional-or-keyword, ``*args``, keyword-only with and without defaults, ``**kw``)
and called in every way Python allows; the value must be the plain call's and the
gradient of each argument the coefficient of the parameter it lands in.
"""
import functools
import math

import numpy as np
import pytest
from hypothesis import given

import bytegrad

from checks import fd_gradient
from signatures import calls


@given(calls())
def test_transformed_call_binds_as_python_does(call):
    f, src, args, kw = call
    names = list(kw)
    n = len(args)

    def through(*vals):  # every argument positional here, so each gets a gradient
        return f(*vals[:n], **dict(zip(names, vals[n:])))
    vals = args + list(kw.values())
    y, grads = bytegrad.value_and_gradient(through, *vals)
    assert y == pytest.approx(f(*args, **kw)), src
    for i, g in enumerate(grads):
        assert (g or 0.0) == pytest.approx(fd_gradient(through, vals, i), abs=1e-6), (src, i)


def test_keyword_only_after_varargs_bind_to_their_names():
    def g(*its, t=None):
        return its[0][0] * its[1][1]

    def h(fn, *its, t=None):
        if t is not None:  # the default must be bound to t, not to a slot of its
            return 0.0
        return fn(its[0][0])
    x = np.array([1.0, 2.0, 3.0])
    ga, gb = bytegrad.grad(lambda a, b: g(a, b), argnums=(0, 1))(x, x)
    np.testing.assert_array_equal(ga, [2.0, 0.0, 0.0])
    np.testing.assert_array_equal(gb, [0.0, 1.0, 0.0])
    np.testing.assert_allclose(bytegrad.grad(lambda a: h(np.sin, a))(x), [math.cos(1.0), 0.0, 0.0])


@pytest.mark.parametrize("name", ["f", "wrt", "args", "kw"])
def test_parameters_named_like_the_machinery(name):
    ns = {}
    exec(f"def h(x, {name}=2.0):\n    return x * {name}\n", ns)
    h = ns["h"]
    assert bytegrad.grad(lambda x: h(x, **{name: 3.0}))(2.0) == 3.0
    assert bytegrad.gradient(h, 2.0, **{name: 5.0}) == (5.0,)
    assert bytegrad.grad(h)(2.0, **{name: 5.0}) == 5.0


def _passing_on(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


def test_functools_wraps_wrapper_binds_its_own_signature():
    @_passing_on
    def power(x, p=2):
        return x ** p
    assert bytegrad.grad(power)(3.0) == pytest.approx(6.0)
    assert bytegrad.grad(lambda x: power(x, p=3))(2.0) == pytest.approx(12.0)
    assert bytegrad.grad(lambda x: power(p=3, x=x))(2.0) == pytest.approx(12.0)


@pytest.mark.regression
@pytest.mark.parametrize("name", ["line", "fn", "self", "args"])
def test_call_site_keywords_named_like_the_lifter(name):
    ns = {}
    exec(f"def h(x, {name}=1.0):\n    return x * {name}\n", ns)
    h = ns["h"]
    ns["h"] = h
    exec(f"def caller(a):\n    return h(a, {name}=5.0)\n", ns)
    y, (g,) = bytegrad.value_and_gradient(ns["caller"], 0.3)
    assert y == pytest.approx(1.5) and g == 5.0


def test_a_default_values_gradient_goes_through_the_function():
    """A default argument's value gets its gradient: through the function passed in (as
    ``{"__defaults__": …, "__kwdefaults__": …}``), and on to the value a function made in
    the differentiated code took it from."""
    def made_inside(x):
        scale = lambda y, s=x * x: y * s  # noqa: E731
        return scale(3.0)
    assert bytegrad.grad(made_inside)(1.5) == pytest.approx(3.0 * 2 * 1.5)

    def apply(f, y):
        return f(y)

    def weight(y, w=2.0, *, b=0.5):
        return y * w + b
    g = bytegrad.gradient(apply, weight, 3.0)[0]
    assert g == {"__defaults__": (3.0,), "__kwdefaults__": {"b": 1.0}}
