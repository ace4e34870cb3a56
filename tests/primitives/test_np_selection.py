"""np.select, np.choose and np.piecewise (primitives/np_selection.py), checked with
`bytegrad.testing.check_rule` (the conditions and indices are held away from their
switching points, where the finite differences show that they get no gradient)."""
import numpy as np
import pytest

import bytegrad
from bytegrad.testing import check_rule
from checks import arr

X = arr((3, 6), seed=1)
A, B, C = X


def test_select():
    check_rule(lambda a, b, c: np.select([a > 0, b > 0], [a, b * 2], c), A, B, C)
    check_rule(lambda a, b: np.select([a > 0, b > 0], (a, b * 2)), A, B)
    check_rule(lambda a, b: np.select([a > 0, b > 0], np.stack([a, b]), default=1.5), A, B)
    check_rule(lambda a, b: np.select([a > 0], [b[:1]], default=2.0), A, B)  # broadcast choice
    g = bytegrad.gradient(lambda a, d: np.sum(np.select([a > 0, a > -1], [a, 2 * a], d)),
                          np.array([1.0, -0.5, -2.0]), 0.0)
    assert np.array_equal(g[0], [1, 2, 0]) and g[1] == 1.0  # the first true condition wins


def test_choose():
    idx = np.array([0, 2, 1, 1, 0, 2])
    check_rule(lambda a, b, c: np.choose(idx, [a, b, c]), A, B, C)
    check_rule(lambda ch: np.choose(idx + 2, ch, mode="wrap"), X)
    check_rule(lambda ch: np.choose(idx[:, None] + 1, [ch[0], 2.0, ch[1]], mode="clip"),
               X[:2, :1].copy())
    with pytest.raises(TypeError, match="np.choose: an output array given positionally"):
        bytegrad.gradient(lambda a: np.sum(np.choose(idx, [a, a], np.empty(6))), A)


def test_piecewise_differentiates_the_callables():
    def f(x, s, k):
        return np.piecewise(x, [x < -0.5, x > 0.5], [lambda v: np.sin(v) * s, k, lambda v: v ** 2])
    check_rule(f, A, 1.5, 0.25)
    check_rule(lambda x, s: np.piecewise(x, [x < 0], [lambda v, t: v * t, lambda v, t: np.exp(v) + t], s),
               X, 0.7)
    x = np.array([-1.0, 0.5, 2.0])
    g, = bytegrad.gradient(lambda x: np.sum(np.piecewise(x, [x < 0, x < 1], [lambda v: 10 * v,
                                                                              lambda v: v])), x)
    assert np.array_equal(g, [1, 1, 0])  # the later condition wins; no "otherwise": 0
    with pytest.raises(ValueError, match="np.piecewise: with 2 condition"):
        bytegrad.gradient(lambda x: np.sum(np.piecewise(x, [x < 0, x < 1], [np.sin])), x)


def test_piecewise_callables_that_change_objects():
    def f(x, w):
        store = {"w": 0.0}

        def piece(v):
            store["w"] = w * 3  # a write whose gradient must come back even though y has none
            return v * 0
        np.piecewise(x, [x > 0], [piece, 0.0])
        return store["w"] + np.sum(x)
    g = bytegrad.gradient(f, A, 0.5)
    assert g[1] == 3.0 and np.array_equal(g[0], np.ones_like(A))
