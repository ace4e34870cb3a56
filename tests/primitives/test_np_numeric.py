"""np.gradient, np.trapezoid, np.polyval and np.polyfit (primitives/np_numeric.py), checked
with `bytegrad.testing.check_rule` and closed forms."""
import numpy as np
import pytest

import bytegrad
from bytegrad.testing import check_rule
from checks import arr

X = arr((5, 6), seed=1)
XS = np.cumsum(np.random.default_rng(2).random(6) + 0.5)  # increasing coordinates


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient(edge_order):
    e = {"edge_order": edge_order}
    check_rule(np.gradient, X, kw=e)
    check_rule(lambda f, h: np.gradient(f, h, **e), X, 0.7)
    check_rule(lambda f, h, k: np.gradient(f, h, k, **e), X, 0.7, 1.3)
    check_rule(lambda f, h: np.gradient(f, h, axis=1, **e), X, 0.7)
    check_rule(lambda f: np.gradient(f, 2.0, XS, **e), X)  # coordinates: the gradient of f
    check_rule(lambda f: np.gradient(f, XS, axis=-1, **e), X.astype(np.float32))
    check_rule(np.gradient, X[0] + 1j * X[1], kw=e)


def test_gradient_closed_form_and_coordinates():
    g, = bytegrad.gradient(lambda f: np.sum(np.gradient(f)), np.zeros(4))
    assert np.array_equal(g, [-1.5, 0.5, -0.5, 1.5])  # column sums of [-1 1; -½ 0 ½; …; -1 1]
    for e in (1, 2):  # the coordinates too
        check_rule(lambda x: np.gradient(X, 0.5, x, edge_order=e), XS)
        check_rule(lambda f, x: np.gradient(f, x, axis=0, edge_order=e), X + 1j * X[::-1], XS[:5])
    check_rule(lambda x: np.gradient(X[0], x), np.arange(6.0))  # uniform coordinates


def test_trapezoid():
    check_rule(np.trapezoid, X)
    check_rule(lambda y, x: np.trapezoid(y, x), X, XS)
    check_rule(lambda y, x: np.trapezoid(y, x, axis=0), X, XS[:5].copy())
    check_rule(lambda y, x: np.trapezoid(y, x), X, np.cumsum(X ** 2 + 0.1, axis=1))
    check_rule(lambda y, h: np.trapezoid(y, dx=h, axis=0), X, 0.3)
    g = bytegrad.gradient(lambda y, h: np.trapezoid(y, dx=h), np.array([1.0, 2.0, 4.0]), 0.5)
    assert np.array_equal(g[0], [0.25, 0.5, 0.25]) and g[1] == 4.5


def test_polyval_and_polyfit():
    p = arr(4, seed=3)
    check_rule(np.polyval, p, X)
    check_rule(np.polyval, p, 0.7)
    check_rule(np.polyval, p[:1].copy(), X)
    g = bytegrad.gradient(np.polyval, np.array([1.0, 2.0, 3.0]), 2.0)
    assert np.array_equal(g[0], [4, 2, 1]) and g[1] == 2 * 2 + 2
    check_rule(lambda x, y: np.polyfit(x, y, 2), XS, X[0])
    check_rule(lambda x, y: np.polyfit(x, y, 3), XS, X.T.copy())
    # an exact fit: the coefficients move with y as the interpolating polynomial does
    g, = bytegrad.gradient(lambda y: np.polyfit(XS[:3], y, 2)[-1], np.ones(3))
    assert np.allclose(g, np.linalg.inv(np.vander(XS[:3]))[-1])
    w = np.linspace(0.5, 2.0, 6)
    check_rule(lambda x, y, w: np.polyfit(x, y, 2, w=w), XS, X[0], w)
    check_rule(lambda x, y, w: np.polyfit(x, y, 1, None, False, w), XS, X.T.copy(), w)
    for kw in ({"full": True}, {"cov": True}):
        with pytest.raises(NotImplementedError, match=f"np.polyfit\\(..., {list(kw)[0]}"):
            bytegrad.gradient(lambda y: np.sum(np.polyfit(XS, y, 2, **kw)[0]), X[0])
