"""Library code a differentiated function calls, unmodified: SciPy and NumPy functions
written in Python (with ``try``, ``with`` and dtype logic inside) are differentiated
through their code, their C calls by rules."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.special
import scipy.stats

import bytegrad

from checks import check_grad

X = np.array([1.2, 0.7, -0.3, 0.4])


@pytest.mark.parametrize("f", [
    lambda x: scipy.optimize.rosen(x),
    lambda x: np.sum(np.r_[x, x * 2.0] ** 2),
    lambda x: np.sum(scipy.stats.norm.logpdf(x, loc=0.1, scale=1.3)),
    lambda x: np.sum(scipy.linalg.expm(np.outer(x, x) * 0.1)),
], ids=["scipy.optimize.rosen", "np.r_", "scipy.stats.norm.logpdf", "scipy.linalg.expm"])
def test_library_functions_differentiate_unmodified(f):
    check_grad(f, X)


# ----------------------------------------------------- calls given nothing differentiable

def _never_lifted(n):
    """A function the lifter refuses (``except*``): it runs only if it is run plainly."""
    y = 0
    try:
        y = n * 2
    except* ValueError:
        pass
    return y


def _with_int(x, n):
    return x * _never_lifted(n)


def test_a_function_given_only_ints_runs_plainly_never_lifted():
    # ``n`` is a parameter, so the call is differentiated; at run time it gets an int
    check_grad(lambda x: _with_int(x, 3), 1.7)
    assert bytegrad.grad(_with_int)(1.7, 3) == 6.0


def test_scipy_factorial_of_an_int_runs_plainly():
    check_grad(lambda x: x * scipy.special.factorial(5), 0.3)


def test_a_function_given_only_ints_is_differentiated_where_its_closure_or_defaults_carry_a_gradient():
    def closure(x):
        def inner(k):
            return x * k
        return inner(3)

    def default(x):
        def inner(k, s=x * 2.0):
            return s * k
        return inner(3)

    assert bytegrad.grad(closure)(1.5) == 3.0
    assert bytegrad.grad(default)(1.5) == 6.0
