"""Library code a differentiated function calls, unmodified: SciPy and NumPy functions
written in Python (with ``try``, ``with`` and dtype logic inside) are differentiated
through their code, their C calls by rules."""
from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.special
import scipy.stats

import bytegrad

from checks import check_grad, fd_directional

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


_X, _Y = np.array([0.3, -1.2, 2.1]), np.array([0.5, 1.5])
_SQUARE = np.array([[2.0, 0.3, -0.1], [0.4, 1.5, 0.2], [-0.3, 0.1, 1.8]])


def _put(x, y):
    a = x * 1.0
    np.put_along_axis(a, np.array([2]), y[0] * y[1], 0)
    return np.sum(a ** 2)


_IN_PYTHON = [
    (lambda x: np.sum(np.vander(x, 3) * np.arange(9.0).reshape(3, 3)), (_X,)),
    (lambda x, y: np.sum(np.block([x, y]) ** 3), (_X, _Y)),
    (lambda x, y: np.sum(np.block([[x[:2], y], [y, x[1:]]]) * np.arange(8.0).reshape(2, 4)), (_X, _Y)),
    (lambda y: np.sum(np.logspace(y[0], y[1], 4)), (_Y,)),
    (lambda y: np.sum(np.geomspace(y[0], y[1], 4) ** 2), (_Y,)),
    (lambda x: np.linalg.vector_norm(x, ord=3), (_X,)),
    (lambda a: np.linalg.matrix_norm(a, ord="fro"), (_SQUARE,)),
    (lambda x: np.sum(_Y.__array_wrap__(x * 2.0) ** 2), (_X,)),
    (lambda a: np.sum(np.linalg.tensorinv(a, ind=1) * np.arange(9.0).reshape(3, 3)), (_SQUARE,)),
    (_put, (_X, _Y)),
    (lambda x, y: np.sum(np.insert(x, 1, y[0]) ** 2 * np.arange(4.0)), (_X, _Y)),
    (lambda x, y: np.sum(np.insert([x[0], x[1]], 0, y) ** 3), (_X, _Y)),
    (lambda x: np.sum(np.delete(x, 1) ** 2), (_X,)),
    (lambda x, y: np.sum(np.apply_along_axis(lambda r: r * r[0], 0, np.outer(x, y))), (_X, _Y)),
    (lambda x: np.sum(np.delete(x, [0, 2]) ** 3 + np.delete(x, slice(0, 3, 2)) ** 2), (_X,)),
    (lambda x: np.sum(np.sin(np.delete(x, 0))), (_X,)),
]
_IN_PYTHON_IDS = ["vander", "block", "block-2d", "logspace", "geomspace", "vector_norm", "matrix_norm",
                  "array_wrap", "tensorinv", "put_along_axis", "insert", "insert-list", "delete",
                  "apply_along_axis", "delete-list-slice", "delete-first"]


@pytest.mark.regression
@pytest.mark.parametrize("f, args", _IN_PYTHON, ids=_IN_PYTHON_IDS)
def test_numpy_functions_written_in_python_are_entered(f, args):
    """A NumPy function with no rule whose implementation is Python code is differentiated
    through it (NoRuleError said "no Python bytecode": the dispatcher is C); np.block's
    C np.concatenate has np.concatenate's rule; ndarray.__array_wrap__ (tensorsolve's) and the
    _array_converter that np.insert and np.apply_along_axis take their arguments through have rules."""
    check_grad(f, *args)


@pytest.mark.regression
@pytest.mark.parametrize("f, args", _IN_PYTHON, ids=_IN_PYTHON_IDS)
def test_numpy_functions_written_in_python_in_forward_mode(f, args):
    """The same code in forward mode.  (Its rule was derived from the reverse one, whose
    pullback undid the writes into the array np.delete returns: a value of uninitialized
    memory; the _array_converter had no forward rule.)"""
    rng = np.random.default_rng(3)
    vs = [rng.standard_normal(np.shape(a)) for a in args]
    y, dy = bytegrad.jvp(f, args, tuple(vs))
    assert y == pytest.approx(f(*args))
    assert dy == pytest.approx(fd_directional(f, args, vs), rel=1e-5, abs=1e-7)


@pytest.mark.regression
@pytest.mark.parametrize("f, what", [
    (lambda x, y: np.sum(np.meshgrid(x, y)[0] * np.meshgrid(x, y)[1] ** 2), "assigning an array's .shape"),
    (lambda x, y: np.sum(np.lib.stride_tricks.sliding_window_view(x, 2) ** 2),
     "assigning an array's .dtype|ndarray._set_dtype has no differentiation rule"),  # (NumPy 2.4|2.5)
    (lambda x, y: np.sum(np.ediff1d(x, to_begin=y[0]) ** 2), "numpy.subtract: in-place out="),
    (lambda x, y: np.sum(np.linalg.tensorsolve(np.outer(x, x) + np.eye(3), x)), "assigning an array's .shape"),
], ids=["meshgrid", "sliding_window_view", "ediff1d", "tensorsolve"])
def test_numpy_functions_whose_python_code_may_be_refused(f, what):
    """Their gradients match finite differences, or (with NumPy versions whose code does
    what cannot be differentiated, as 2.4's meshgrid assigns ``a.shape``) the error names
    it, the user's line and the NumPy function that line calls."""
    line = f.__code__.co_firstlineno
    try:
        bytegrad.gradient(f, _X, _Y)
    except (NotImplementedError, TypeError) as e:
        assert re.search(what, str(e)) and f"{__file__}:{line}: in numpy." in str(e)
    else:
        check_grad(f, _X, _Y)
