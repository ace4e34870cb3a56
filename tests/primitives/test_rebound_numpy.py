"""Rebinding a NumPy or math function (a monkeypatch, a test double) changes what the
user's code calls, and never what a rule computes."""
import math

import numpy as np
import pytest

import bytegrad

from checks import arr, check_grad


def sum_of_sines(x):
    return np.sum(np.sin(x))


def sine(x):
    return math.sin(x) * x


def test_a_rule_computes_with_the_numpy_it_was_imported_with(monkeypatch):
    x = arr(4)
    monkeypatch.setattr(np, "sin", np.cos)  # the rule of np.cos uses sin
    sines = -np.asarray([math.sin(v) for v in x])  # (np.sin is patched here)
    np.testing.assert_allclose(bytegrad.grad(lambda x: np.sum(np.cos(x)))(x), sines)


def test_user_code_calls_what_the_module_names_now(monkeypatch):
    x = arr(4)
    np.testing.assert_allclose(bytegrad.grad(sum_of_sines)(x), np.cos(x))
    monkeypatch.setattr(np, "sin", np.cos)
    np.testing.assert_allclose(bytegrad.grad(sum_of_sines)(x), -np.asarray([math.sin(v) for v in x]))
    check_grad(sum_of_sines, x)
    monkeypatch.undo()
    np.testing.assert_allclose(bytegrad.grad(sum_of_sines)(x), np.cos(x))


def test_a_rebound_math_function_is_called_and_differentiated(monkeypatch):
    assert bytegrad.grad(sine)(0.7) == pytest.approx(math.sin(0.7) + 0.7 * math.cos(0.7))
    monkeypatch.setattr(math, "sin", math.exp)
    assert bytegrad.grad(sine)(0.7) == pytest.approx(math.exp(0.7) * 1.7)


def norm_of(x):
    return np.linalg.norm(x) * 2.0


def test_functions_of_submodules_are_resolved_and_rebinding_them_is_seen(monkeypatch):
    x = np.array([3.0, 4.0])
    np.testing.assert_allclose(bytegrad.grad(norm_of)(x), 2.0 * x / 5.0)
    assert "= numpy.linalg.norm(%2)" in str(bytegrad.stages(norm_of).primal)
    monkeypatch.setattr(np.linalg, "norm", lambda v: np.sum(v * v))
    np.testing.assert_allclose(bytegrad.grad(norm_of)(x), 4.0 * x)


def _swaps_exp(x):
    old = np.exp
    np.exp = np.sin  # while the function runs: after bytegrad decided what np.exp is
    y = np.exp(x)
    np.exp = old
    return y


@pytest.mark.regression
def test_a_module_function_rebound_while_the_function_runs_raises(monkeypatch):
    monkeypatch.setattr(np, "exp", np.exp)  # (put back after the test, whatever happens)
    with pytest.raises(RuntimeError, match=r"np\.exp was rebound while the function"):
        bytegrad.gradient(_swaps_exp, 0.5)


def test_a_math_rule_computes_with_math_as_it_was_imported(monkeypatch):
    monkeypatch.setattr(math, "sin", math.cos)  # the rule of math.cos uses sin
    assert bytegrad.grad(lambda x: math.cos(x) * 1.0)(0.3) == pytest.approx(-0.29552020666133955)
