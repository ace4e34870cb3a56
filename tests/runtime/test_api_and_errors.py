"""The public API's conventions and the errors a user meets."""
from __future__ import annotations

import copy
import dataclasses
import inspect
import operator
import os

import _statistics
import numpy as np
import pytest

import bytegrad
from bytegrad import stop_gradient
from bytegrad.runtime.watch import WATCH
from checks import check_grad, check_stateful

THIS_FILE = os.path.basename(__file__)


def f2(x, y):
    return x * x * y + 3.0 * y


def lineno_of(f, text):
    """The line number of the first line of ``f``'s source that contains ``text``."""
    lines, start = inspect.getsourcelines(f)
    for k, line in enumerate(lines):
        if text in line:
            return start + k
    raise AssertionError(f"{text!r} not in the source of {f.__name__}")


# ---------------------------------------------------------------------------
# gradient / pullback / grad / value_and_grad
# ---------------------------------------------------------------------------

def test_gradient_returns_one_entry_per_positional_argument():
    g = bytegrad.gradient(f2, 2.0, 5.0)
    assert isinstance(g, tuple) and len(g) == 2
    assert g == (20.0, 7.0)


def test_gradient_of_single_argument_is_a_one_tuple():
    assert bytegrad.gradient(lambda x: x * x, 3.0) == (6.0,)


def test_value_and_gradient():
    y, g = bytegrad.value_and_gradient(f2, 2.0, 5.0)
    assert y == f2(2.0, 5.0) and g == (20.0, 7.0)


def test_grad_argnums_int():
    assert bytegrad.grad(f2)(2.0, 5.0) == 20.0
    assert bytegrad.grad(f2, argnums=0)(2.0, 5.0) == 20.0
    assert bytegrad.grad(f2, argnums=1)(2.0, 5.0) == 7.0
    assert bytegrad.grad(f2, 1)(2.0, 5.0) == 7.0


def test_grad_argnums_tuple():
    assert bytegrad.grad(f2, argnums=(0, 1))(2.0, 5.0) == (20.0, 7.0)
    assert bytegrad.grad(f2, argnums=(1,))(2.0, 5.0) == (7.0,)
    assert bytegrad.grad(f2, argnums=(1, 0))(2.0, 5.0) == (7.0, 20.0)


def test_grad_negative_argnums_count_from_the_end():
    assert bytegrad.grad(f2, argnums=-1)(2.0, 5.0) == 7.0
    assert bytegrad.grad(f2, argnums=(-1, 0))(2.0, 5.0) == (7.0, 20.0)


def test_grad_argnums_out_of_range_is_an_error_naming_it():
    for argnums in (2, (0, 2), -3):
        with pytest.raises(IndexError, match=r"index -?\d \(argnums/wrt\) is out of range .* 2 positional"):
            bytegrad.grad(f2, argnums=argnums)(2.0, 5.0)


def test_value_and_grad_argnums():
    assert bytegrad.value_and_grad(f2)(2.0, 5.0) == (35.0, 20.0)
    assert bytegrad.value_and_grad(f2, argnums=1)(2.0, 5.0) == (35.0, 7.0)
    assert bytegrad.value_and_grad(f2, argnums=(0, 1))(2.0, 5.0) == (35.0, (20.0, 7.0))


def test_grad_keeps_the_function_name_and_passes_keywords():
    def h(x, scale=1.0):
        return scale * x * x

    gh = bytegrad.grad(h)
    assert gh.__name__ == "h"
    assert gh(3.0) == 6.0
    assert gh(3.0, scale=2.0) == 12.0
    assert bytegrad.value_and_grad(h)(3.0, scale=2.0) == (18.0, 12.0)


def test_pullback_with_non_unit_seed():
    y, back = bytegrad.pullback(f2, 2.0, 5.0)
    assert y == 35.0
    assert back(1.0) == (20.0, 7.0)
    assert back(2.5) == (50.0, 17.5)
    assert back(-1.0) == (-20.0, -7.0)


def test_pullback_can_be_called_many_times():
    def f(x, y):
        s = 0.0
        for i in range(4):
            if s < 10.0:
                s = s + x * y * i
        return s

    y, back = bytegrad.pullback(f, 1.5, 2.0)
    first = back(1.0)
    assert back(1.0) == first
    assert back(3.0) == tuple(3.0 * g for g in first)
    assert back(1.0) == first


def test_pullback_twice_with_array_index_reads_does_not_alias_results():
    def f(xs):
        s = 0.0
        for i in range(len(xs)):
            s = s + xs[i] * xs[i]
        return s

    xs = np.array([1.0, 2.0, 3.0])
    y, back = bytegrad.pullback(f, xs)
    g1, = back(1.0)
    g1_copy = g1.copy()
    g2, = back(1.0)
    np.testing.assert_array_equal(g1, g1_copy)  # the second call did not update the first result
    np.testing.assert_array_equal(g2, 2 * xs)
    g2 += 100.0  # mutating a result does not change later results
    np.testing.assert_array_equal(back(1.0)[0], 2 * xs)
    np.testing.assert_array_equal(xs, [1.0, 2.0, 3.0])


def test_pullback_twice_through_closures():
    def f(x):
        k = x * 2.0
        g = lambda y: k * y * x
        return g(x) + g(1.0)

    y, back = bytegrad.pullback(f, 1.5)
    first = back(1.0)
    assert back(1.0) == first
    assert back(2.0) == (2 * first[0],)
    check_grad(f, 1.5)


def test_pullback_of_tuple_output():
    y, back = bytegrad.pullback(lambda x, y: (x * y, x + y), 2.0, 3.0)
    assert y == (6.0, 5.0)
    assert back((1.0, 0.0)) == (3.0, 2.0)
    assert back((0.0, 1.0)) == (1.0, 1.0)
    assert back((1.0, 1.0)) == (4.0, 3.0)


def test_pullback_of_array_output():
    y, back = bytegrad.pullback(lambda x: np.array([1.0, 2.0, 3.0]) * x, 2.0)
    np.testing.assert_array_equal(y, [2.0, 4.0, 6.0])
    assert back(np.array([1.0, 1.0, 1.0]))[0] == 6.0
    assert back(np.array([0.0, 1.0, 0.0]))[0] == 2.0


def test_pullback_of_function_with_keyword_arguments():
    def h(x, scale=1.0):
        return scale * x * x

    y, back = bytegrad.pullback(h, 3.0, scale=2.0)
    assert y == 18.0
    assert back(1.0) == (12.0,)


def test_stages():
    st = bytegrad.stages(f2)
    for stage in ("lifted", "forward", "adjoint"):
        assert hasattr(st, stage)


# ---------------------------------------------------------------------------
# @differentiable
# ---------------------------------------------------------------------------

@bytegrad.differentiable
def cube(x):
    return x * x * x


@bytegrad.differentiable
def poly2(x, y):
    return x * y + y * y


def test_differentiable_runs_as_before():
    assert cube(2.0) == 8.0
    assert cube(3) == 27  # also for ints, plainly
    assert poly2(2.0, 3.0) == 15.0
    assert cube.__name__ == "cube"
    assert cube.__doc__ == cube.f.__doc__


def test_differentiable_grad_follows_grad_argument_0_by_default_or_argnums():
    assert cube.grad(2.0) == 12.0
    assert poly2.grad(2.0, 3.0) == 3.0 == bytegrad.grad(poly2.f)(2.0, 3.0)
    assert poly2.grad(2.0, 3.0, argnums=1) == 8.0
    assert poly2.grad(2.0, 3.0, argnums=(0, 1)) == (3.0, 8.0)


def test_differentiable_value_and_grad_follows_value_and_grad():
    assert cube.value_and_grad(2.0) == (8.0, 12.0)
    assert poly2.value_and_grad(2.0, 3.0) == (15.0, 3.0)
    assert poly2.value_and_grad(2.0, 3.0, argnums=(0, 1)) == (15.0, (3.0, 8.0))


def test_differentiable_ir_of_every_stage_and_stages_of_the_decorated_function():
    text = cube.ir("all")
    for stage in ("lifted", "primal", "forward", "adjoint"):
        assert f"# {stage}\n" in text
    assert bytegrad.stages(cube).adjoint is bytegrad.stages(cube.f).adjoint
    with pytest.raises(ValueError, match="unknown stage 'tangents'"):
        cube.ir("tangents")


def test_differentiable_pullback():
    y, back = cube.pullback(2.0)
    assert y == 8.0
    assert back(1.0) == (12.0,)
    assert back(0.5) == (6.0,)


def test_differentiable_ir():
    lifted = cube.ir()
    assert isinstance(lifted, str)
    assert "operator.mul" in lifted and "return" in lifted
    assert cube.ir("lifted") == lifted
    for stage in ("forward", "adjoint"):
        text = cube.ir(stage)
        assert isinstance(text, str) and text.startswith("1:")


def test_differentiable_called_inside_differentiated_code():
    def f(x):
        return cube(x) * 2.0 + poly2(x, 1.0)

    assert bytegrad.gradient(f, 2.0) == (2.0 * 12.0 + 1.0,)
    check_grad(f, 1.3)


def test_differentiable_on_a_method():
    class Model:
        def __init__(self, w):
            self.w = w

        @bytegrad.differentiable
        def loss(self, x):
            return self.w * x * x

    m = Model(3.0)
    assert m.loss(2.0) == 12.0
    assert Model.loss(m, 2.0) == 12.0


# ---------------------------------------------------------------------------
# stop_gradient (the NoRuleError message recommends it)
# ---------------------------------------------------------------------------

def test_stop_gradient_by_global_name():
    def f(x):
        return x * stop_gradient(x)

    assert bytegrad.gradient(f, 2.0) == (2.0,)


def test_stop_gradient_through_a_local_name():
    def f(x):
        sg = stop_gradient
        return x * sg(x)

    assert bytegrad.gradient(f, 2.0) == (2.0,)


def test_stop_gradient_as_attribute_of_the_module():
    def f(x):
        return x * bytegrad.stop_gradient(x)

    assert bytegrad.gradient(f, 2.0) == (2.0,)


def test_stop_gradient_passed_as_a_value():
    def f(x, sg):
        y = x * x
        return sg(y) * y

    assert bytegrad.gradient(f, 3.0, bytegrad.stop_gradient) == (9.0 * 6.0, None)


# ---------------------------------------------------------------------------
# NotScalarError
# ---------------------------------------------------------------------------

def test_list_output_raises_not_scalar_error():
    def pair(x):
        return [x, x * 2.0]

    with pytest.raises(bytegrad.NotScalarError) as e:
        bytegrad.gradient(pair, 1.0)
    assert "pullback" in str(e.value)
    assert "pair" in str(e.value)


def test_tuple_and_array_output_raise_not_scalar_error():
    with pytest.raises(bytegrad.NotScalarError, match="pullback"):
        bytegrad.gradient(lambda x: (x, x), 1.0)
    with pytest.raises(bytegrad.NotScalarError, match="pullback"):
        bytegrad.gradient(lambda x: np.array([1.0, 2.0]) * x, 1.0)


def test_int_output_has_no_gradient():
    # an int-valued function is piecewise constant: its gradient is zero (None)
    def step(x):
        return int(x > 0)

    assert bytegrad.gradient(step, 1.0) == (None,)


def test_complex_output_raises_not_scalar_error():
    with pytest.raises(bytegrad.NotScalarError, match="pullback"):
        bytegrad.gradient(lambda x: x * 1j, 1.0)


def test_not_scalar_error_is_a_value_error():
    assert issubclass(bytegrad.NotScalarError, ValueError)


def test_scalar_like_outputs_are_fine():
    assert bytegrad.gradient(lambda x: np.float64(2.0) * x, 1.5) == (2.0,)
    g, = bytegrad.gradient(lambda xs: xs * 2.0, np.array([1.5]))
    np.testing.assert_array_equal(g, [2.0])


# ---------------------------------------------------------------------------
# NoRuleError
# ---------------------------------------------------------------------------

def no_rule_caller(x):
    y = x * 2.0
    z = _statistics._normal_dist_inv_cdf(0.3, y, 1.0)  # a C function without a rule
    return z + y


def no_rule_outer(x):
    return no_rule_caller(x * 3.0) + x


def test_c_function_without_rule_raises_no_rule_error():
    assert _statistics._normal_dist_inv_cdf not in bytegrad.runtime.rules.RULES
    line = lineno_of(no_rule_caller, "_normal_dist_inv_cdf(0.3")
    with pytest.raises(bytegrad.NoRuleError) as e:
        bytegrad.gradient(no_rule_caller, 1.0)
    msg = str(e.value)
    assert "_normal_dist_inv_cdf" in msg
    assert THIS_FILE in msg
    assert f"{THIS_FILE}:{line}" in msg
    assert "bytegrad.rule" in msg
    assert e.value.line == line
    assert os.path.basename(e.value.filename) == THIS_FILE
    assert e.value.callable is _statistics._normal_dist_inv_cdf


def test_no_rule_error_points_at_the_inner_function():
    line = lineno_of(no_rule_caller, "_normal_dist_inv_cdf(0.3")
    with pytest.raises(bytegrad.NoRuleError) as e:
        bytegrad.gradient(no_rule_outer, 1.0)
    assert f"{THIS_FILE}:{line}" in str(e.value)


def test_no_rule_error_is_a_type_error():
    assert issubclass(bytegrad.NoRuleError, TypeError)


def test_c_function_without_rule_is_fine_without_differentiable_values():
    def f(x):
        q = _statistics._normal_dist_inv_cdf(0.3, 0.0, 1.0)  # constants only
        return q * x

    g, = bytegrad.gradient(f, 2.0)
    assert g == pytest.approx(_statistics._normal_dist_inv_cdf(0.3, 0.0, 1.0))


def test_everything_the_no_rule_message_suggests_exists():
    with pytest.raises(bytegrad.NoRuleError) as e:
        bytegrad.gradient(no_rule_caller, 1.0)
    msg = str(e.value)
    for name in ("rule", "stop_gradient", "nondifferentiable"):
        if f"bytegrad.{name}" in msg:
            assert hasattr(bytegrad, name), f"the message suggests bytegrad.{name}, which does not exist"


def test_registering_a_rule_fixes_no_rule_error():
    from statistics import NormalDist

    def inv_cdf_rule(p, mu, sigma):
        y = _statistics._normal_dist_inv_cdf(p, mu, sigma)
        return y, lambda dy: (None, None, dy, dy * (y - mu) / sigma)

    def f(x):  # a fresh function, so no compiled code of an earlier run is reused
        return _statistics._normal_dist_inv_cdf(0.3, x, 2.0) * x

    rules = bytegrad.runtime.rules.RULES
    assert _statistics._normal_dist_inv_cdf not in rules
    bytegrad.rule(_statistics._normal_dist_inv_cdf)(inv_cdf_rule)
    try:
        g, = bytegrad.gradient(f, 1.5)
        q = NormalDist(1.5, 2.0).inv_cdf(0.3)
        assert g == pytest.approx(q + 1.5, rel=1e-12)
    finally:
        del rules[_statistics._normal_dist_inv_cdf]


# ---------------------------------------------------------------------------
# UnsupportedError
# ---------------------------------------------------------------------------

def uses_class(x):
    class Local:
        pass
    return x * 2.0


def uses_genexpr(xs):
    s = 0.0
    for v in (x * x for x in xs):
        s = s + v
    return s


@pytest.mark.parametrize("f, what, marker", [
    (uses_class, "class definition", "class Local"),
])
def test_unsupported_construct_raises_unsupported_error(f, what, marker):
    with pytest.raises(bytegrad.UnsupportedError) as e:
        bytegrad.gradient(f, 1.5)
    msg = str(e.value)
    assert what in msg
    assert f.__name__ in msg
    assert THIS_FILE in msg


def test_unsupported_error_names_the_line():
    with pytest.raises(bytegrad.UnsupportedError) as e:
        bytegrad.gradient(uses_class, 1.5)
    assert e.value.line == lineno_of(uses_class, "class Local")


def test_unsupported_construct_in_called_function():
    def f(x):
        return uses_class(x) + x

    with pytest.raises(bytegrad.UnsupportedError, match="class definition"):
        bytegrad.gradient(f, 1.5)


def test_generator_expression_is_differentiated():
    """Generator expressions and generator functions are differentiated
    (tests/ir/test_genexpr.py, tests/transforms/test_generators.py)."""
    check_grad(uses_genexpr, np.array([1.0, 2.0]))


# ---------------------------------------------------------------------------
# arguments are never modified
# ---------------------------------------------------------------------------

def test_list_argument_unchanged():
    def f(xs):
        s = 0.0
        for v in xs:
            s = s + v * v
        return s + xs[0] * xs[-1]

    xs = [1.0, 2.0, 3.0]
    keep = list(xs)
    g, = bytegrad.gradient(f, xs)
    assert xs == keep
    assert g == [2.0 + 3.0, 4.0, 6.0 + 1.0]
    g[0] = 99.0
    assert xs == keep


def test_array_argument_unchanged():
    def f(xs, w):
        s = 0.0
        for i in range(len(xs)):
            s = s + xs[i] * w
        for v in xs:
            s = s + v * v
        return s

    xs = np.array([1.0, 2.0, 3.0])
    keep = xs.copy()
    g = bytegrad.gradient(f, xs, 0.5)
    np.testing.assert_array_equal(xs, keep)
    np.testing.assert_array_equal(g[0], 0.5 + 2 * keep)
    assert not np.shares_memory(g[0], xs)
    g[0][:] = 0.0
    np.testing.assert_array_equal(xs, keep)


def test_array_gradient_does_not_alias_another_argument():
    def f(xs, ys):
        return xs @ ys

    xs, ys = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    gx, gy = bytegrad.gradient(f, xs, ys)
    np.testing.assert_array_equal(gx, ys)
    np.testing.assert_array_equal(gy, xs)
    gx += 1.0
    gy += 1.0
    np.testing.assert_array_equal(xs, [1.0, 2.0])
    np.testing.assert_array_equal(ys, [3.0, 4.0])


def test_dict_and_nested_arguments_unchanged():
    def f(d, t):
        s = d["a"] * t[0]
        for k, v in d.items():
            s = s + v * t[1]
        return s

    d, t = {"a": 1.5, "b": 2.0}, (3.0, 4.0)
    keep = copy.deepcopy((d, t))
    g = bytegrad.gradient(f, d, t)
    assert (d, t) == keep
    assert g[0] == {"a": 3.0 + 4.0, "b": 4.0}
    assert g[1] == (1.5, 3.5)


def test_int_and_str_arguments_get_none():
    def f(x, n, label):
        return x * n if label == "mul" else x + n

    assert bytegrad.gradient(f, 2.0, 3, "mul") == (3.0, None, None)
    assert bytegrad.gradient(f, 2.0, True, "add") == (1.0, None, None)


def _invalid(v):
    raise ValueError(f"invalid value {v}")  # always raises: it has no return at all


def test_a_function_that_always_raises_gives_the_users_error():
    def f(x):
        if x < 0.0:
            _invalid(x)
        return x * x
    assert bytegrad.gradient(f, 3.0) == (6.0,)
    with pytest.raises(ValueError, match="invalid value -1.0"):
        bytegrad.gradient(f, -1.0)
    with pytest.raises(ValueError, match="invalid value 2.0"):
        bytegrad.gradient(_invalid, 2.0)


# ---------------------------------------------------------------------------
# functions that raise on some inputs
# ---------------------------------------------------------------------------

def _always(x):
    raise ValueError(f"bad {x!r}")


class _C:
    def m(self, x):
        raise KeyError("from a method")


@pytest.mark.regression
def test_always_raising_functions_give_the_users_error():
    def via_method(x):
        if x > 5:
            _C().m(x)
        return x * x

    def via_closure(x):
        def inner(y):
            raise ValueError(f"inner {y!r}")
        if x > 5:
            inner(x)
        return x * 3

    def rec(x, n):
        if n == 0:
            _always(x)
        return rec(x * 2, n - 1)

    def loop(x):
        while True:
            x = x * 2
            if x > 100:
                raise ValueError(f"loop {x!r}")

    assert bytegrad.gradient(via_method, 2.0) == (4.0,)
    assert bytegrad.gradient(via_closure, 2.0) == (3.0,)
    with pytest.raises(KeyError, match="from a method"):
        bytegrad.gradient(via_method, 7.0)
    with pytest.raises(ValueError, match="inner 7.0"):
        bytegrad.gradient(via_closure, 7.0)
    with pytest.raises(ValueError, match="bad 8.0"):
        bytegrad.gradient(rec, 1.0, 3)
    with pytest.raises(ValueError, match="bad 1.0"):
        bytegrad.gradient(lambda x: bytegrad.checkpoint(_always, x), 1.0)
    with pytest.raises(ValueError, match="loop 128.0"):
        bytegrad.gradient(loop, 1.0)
    with pytest.raises(ValueError, match="bad 1.0"):
        bytegrad.pullback(lambda x, y: _always(x), 1.0, 2.0, wrt=(0,))
    with pytest.raises(AssertionError, match="nope"):
        bytegrad.gradient(lambda x: exec("assert False, 'nope'") if False else _assert(x), 1.0)
    assert not WATCH.all


def _assert(x):
    assert False, "nope"


# ---------------------------------------------------------------------------
# outputs: 0-d arrays, float32 scalars; @differentiable with keyword arguments and on methods
# ---------------------------------------------------------------------------

@pytest.mark.regression
def test_zero_d_array_output():
    check_stateful(lambda x: np.array(np.sum(x ** 2)), np.array([1.0, 2.0]))


@pytest.mark.regression
def test_zero_d_argument_written_and_returned():
    def f(x):
        out = x
        x[...] = x * x
        return out
    check_stateful(f, np.array(3.0))


@pytest.mark.regression
def test_float32_scalar_outputs():
    for f in (lambda x: np.float32(np.sum(x ** 2)), lambda x: np.sum(x ** 2)):
        y, (g,) = bytegrad.value_and_gradient(f, np.array([1.0, 2.0], dtype=np.float32))
        assert y == np.float32(5.0) and g.dtype == np.float32 and np.allclose(g, [2.0, 4.0])


@pytest.mark.regression
def test_differentiable_function_with_keyword_buffer():
    @bytegrad.differentiable
    def f(x, *, scale=2.0, buf=None):
        if buf is not None:
            buf[:] = x
        return np.sum(x ** 2) * scale
    b = np.zeros(2)
    y, g = f.value_and_grad(np.array([1.0, 2.0]), scale=3.0, buf=b)
    assert y == 15.0 and np.allclose(g, [6.0, 12.0]) and np.array_equal(b, [1.0, 2.0])
    assert np.allclose(f.pullback(np.array([1.0, 2.0]))[1](1.0)[0], [4.0, 8.0])


class _WithMethod:
    def __init__(self, w):
        self.w = w

    @bytegrad.differentiable
    def loss(self, x):
        return self.w * x


@pytest.mark.regression
def test_differentiable_method_grad_on_an_instance():
    o = _WithMethod(2.0)
    assert o.loss.grad(0.5) == 2.0  # argument 0 of the bound method: x


@pytest.mark.parametrize("make", [
    lambda f: bytegrad.gradient(f, 1.0), lambda f: bytegrad.value_and_gradient(f, 1.0),
    lambda f: bytegrad.pullback(f, 1.0), lambda f: bytegrad.grad(f),
    lambda f: bytegrad.value_and_grad(f), lambda f: bytegrad.differentiable(f),
], ids=["gradient", "value_and_gradient", "pullback", "grad", "value_and_grad", "differentiable"])
@pytest.mark.parametrize("f", [3.0, None, "f"])
def test_a_first_argument_that_is_not_callable_is_named(make, f):
    with pytest.raises(TypeError, match=rf"{f!r} is not callable \(the function comes first"):
        make(f)


def test_calling_a_differentiable_value_is_pythons_error():
    with pytest.raises(TypeError, match="'float' object is not callable"):
        bytegrad.gradient(lambda x: x(2.0), 1.0)


@pytest.mark.regression
def test_a_suggested_rule_names_a_class_of_a_script_as_python_would():
    from bytegrad.runtime.errors import full_name
    Vec = type("Vec", (), {"__module__": "__main__"})
    assert full_name(Vec) == "__main__.Vec"
    assert full_name(operator.setitem) == "operator.setitem"  # (its module is _operator)


def test_an_error_inside_library_code_names_the_users_line_and_the_library_entry(tmp_path, monkeypatch):
    from bytegrad.runtime import errors
    (tmp_path / "somelib.py").write_text(
        "import struct\n\n\ndef helper(x):\n    return struct.pack('d', x)\n\n\n"
        "def entry(x):\n    return helper(x * 2.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(errors, "_LIBRARY_DIRS", errors._LIBRARY_DIRS + (str(tmp_path) + os.sep,))
    import somelib

    def user(x):
        return somelib.entry(x) + x  # (the line the error names)
    with pytest.raises(bytegrad.NoRuleError) as e:
        bytegrad.gradient(user, 1.5)
    line = lineno_of(user, "(the line the error names)")
    here = f"{__file__}:{line}"
    assert str(e.value).startswith(f"{here}: in somelib.entry, which this line calls, at "
                                   f"{tmp_path / 'somelib.py'}:5: struct.pack has no")
    assert "@bytegrad.rule(somelib.entry)" in str(e.value)
    assert e.value.via == ("somelib.entry", __file__, line)


def _managed(x, manager):
    with manager:  # the line the error names
        return x * 2.0


@pytest.mark.regression
def test_a_missing_rule_met_by_a_with_statement_names_the_users_line():
    """``with`` calls ``__enter__`` through `ops.with_enter`: the error names the user's
    line, not that helper's (bytegrad's own ``ir`` and ``transforms`` are not user code).
    (A C context manager with no rule: a lock has one, tests/primitives/test_threads_tasks.py.)"""
    import io
    line = inspect.getsourcelines(_managed)[1] + 1
    with pytest.raises(bytegrad.NoRuleError, match=rf"test_api_and_errors\.py:{line}: _IOBase\.__enter__"):
        bytegrad.gradient(_managed, 1.5, io.StringIO())


_SEEDED_X = np.array([1.0, -2.0, 0.5])


@dataclasses.dataclass
class _Fitted:
    mean: np.ndarray
    scale: float


@pytest.mark.regression
@pytest.mark.parametrize("f, seed, error, says", [
    (lambda x: (x * 2.0, np.sum(x)), (np.ones(3),), ValueError, "seed is a tuple of length 1 where the output is a tuple of length 2"),
    (lambda x: x * 2.0, np.ones(2), ValueError, "seed is a float64 array of shape (2,) where the output is a float64 array of shape (3,)"),
    (lambda x: x * 2.0, np.ones(3) * 1j, TypeError, "seed is a complex128 array of shape (3,) where the output is a float64 array"),
    (lambda x: x * 2.0, 1.0, ValueError, "seed is a float where the output is a float64 array of shape (3,)"),
    (lambda x: {"a": np.sum(x)}, {"a": 1.0, "b": 2.0}, ValueError, "seed has the key 'b', which the output lacks"),
    (lambda x: [x, (x[0], np.sum(x))], [None, (1.0, np.ones(2))], ValueError, "seed[1][1] is a float64 array of shape (2,) where the output[1][1] is a float64"),
    (lambda x: _Fitted(x * 2.0, x[0]), {"mean": 2.0}, ValueError, "seed.mean is a float where the output.mean is a float64 array of shape (3,)"),
    (lambda x: _Fitted(x * 2.0, x[0]), {"maen": np.ones(3)}, ValueError, "seed has the field 'maen', which the output lacks (its fields: ['mean', 'scale'])"),
    (lambda x: _Fitted(x * 2.0, x[0]), {"mean": 1j * np.ones(3)}, TypeError, "seed.mean is a complex128 array"),
    (lambda x: _Fitted(x * 2.0, x[0]), np.ones(3), ValueError, "where the output is a _Fitted (its seed: a dict of its fields' seeds"),
], ids=["short-tuple", "shape", "complex", "scalar-for-array", "extra-key", "nested", "object-field-shape",
        "object-misspelled-field", "object-complex", "object-not-a-dict"])
def test_a_seed_that_does_not_fit_the_output_is_refused(f, seed, error, says):
    """A seed of the wrong structure raised internal errors (IndexError, a broadcast
    ValueError, UFuncTypeError) or was taken silently (a scalar, extra keys)."""
    _, back = bytegrad.pullback(f, _SEEDED_X)
    with pytest.raises(error) as e:
        back(seed)
    assert says in str(e.value)


@pytest.mark.regression
def test_seeds_that_fit_the_output_still_give_its_gradient():
    """None for a part, a list for a tuple, a NumPy scalar for a float: all fit."""
    _, back = bytegrad.pullback(lambda x: (x * 2.0, {"s": np.sum(x ** 2)}), _SEEDED_X)
    np.testing.assert_allclose(back([np.ones(3), None])[0], 2.0 * np.ones(3))
    np.testing.assert_allclose(back((None, {"s": np.float64(0.5)}))[0], _SEEDED_X)  # ½ · 2x
    _, back = bytegrad.pullback(lambda x: _Fitted(x * 2.0, x[0] * 3.0), _SEEDED_X)
    np.testing.assert_allclose(back({"mean": np.ones(3)})[0], 2.0 * np.ones(3))
    np.testing.assert_allclose(back({"scale": 1.0})[0], [3.0, 0.0, 0.0])


@pytest.mark.regression
def test_the_output_of_a_pullback_is_the_callers_own():
    # (exp's pullback computes with its output: a residual made of it in place, r -= t,
    # changed the gradient, silently; and so did an aux changed in place before vjp_fn)
    p, t = np.array([0.3, -1.2, 2.0]), np.ones(3)
    r, back = bytegrad.pullback(np.exp, p)
    r -= t
    np.testing.assert_allclose(back(r)[0], np.exp(p) * (np.exp(p) - t))
    out, f_vjp, aux = bytegrad.vjp(lambda p: (np.sum(np.exp(p)), {"e": np.exp(p)}), p, has_aux=True)
    aux["e"] /= out
    np.testing.assert_allclose(f_vjp(1.0)[0], np.exp(p))


@pytest.mark.regression
def test_an_argument_changed_before_the_pullback_runs_is_refused():
    # (the gradient was taken at the changed point: at p - 0.1, not at p)
    p = np.array([0.3, -1.2, 2.0])
    _, back = bytegrad.pullback(lambda p: np.sum(p * p), p)
    p -= 0.1
    with pytest.raises(ValueError, match="changed in place after its pullback was made"):
        back(1.0)
    p += 0.1
    np.testing.assert_allclose(back(1.0)[0], 2 * p)


def test_a_pullback_of_a_function_that_changes_its_argument_runs_twice():
    def f(a):
        a[0] = a[0] * 2.0
        return np.sum(a ** 2)
    a = np.array([1.0, 2.0])
    _, back = bytegrad.pullback(f, a)
    assert back(1.0)[0].tolist() == [8.0, 4.0] == back(1.0)[0].tolist()
    assert a.tolist() == [2.0, 2.0]  # (as the call left it)


@pytest.mark.regression
@pytest.mark.parametrize("other", [np.array([np.array([1.0, 2.0]), np.array([3.0])], dtype=object),
                                   np.array(["NaT", "2020-01-01"], dtype="datetime64[D]"),
                                   np.array([float("nan"), "label"], dtype=object)],
                         ids=["arrays", "dates", "nan-and-text"])
def test_arguments_that_never_equal_themselves_pass_the_pullbacks_check(other):
    # (NaT, an object NaN or an array of arrays: taken for a change, or NumPy's ValueError)
    _, back = bytegrad.pullback(lambda x, o: x * 2.0, 1.5, other)
    assert back(1.0) == (2.0, None)


@pytest.mark.regression
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_an_np_matrix_argument_is_refused_in_reverse_mode():
    """Its ``*`` is a matrix product, so the rules' arithmetic on its gradients was wrong:
    ``mean(multiply(m, m))`` gave (M + 5) / 3 where 2 M / 9 is right."""
    m = np.matrix(np.arange(1.0, 10.0).reshape(3, 3))
    f = lambda a: float(np.mean(np.multiply(a, a)))  # noqa: E731
    for call in (lambda: bytegrad.gradient(f, m), lambda: bytegrad.grad(f)(m),
                 lambda: bytegrad.pullback(f, m), lambda: bytegrad.jacrev(lambda a: a * a)(m)):
        with pytest.raises(TypeError, match=r"np\.matrix.*np\.asarray\(m\)"):
            call()
    assert np.allclose(bytegrad.gradient(f, np.asarray(m))[0], 2 * np.asarray(m) / 9)
