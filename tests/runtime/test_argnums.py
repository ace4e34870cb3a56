"""``argnums`` of ``grad``/``value_and_grad`` and ``wrt`` of ``pullback``: ints (also
NumPy integers and negative ones), tuples, lists, ranges and arrays, repeated indices,
indices into ``*args``, defaults, keyword-only and ``**kwargs`` parameters, bound
methods, callable objects, partials and ``@differentiable`` methods; indices out of
range are an IndexError naming them."""
from __future__ import annotations

import copy
import functools

import numpy as np
import pytest

import bytegrad
from checks import arr, check_pullback, check_stateful, fd_gradient

X = np.array([1.0, 2.0, 3.0])
Y = np.array([0.5, -1.0, 2.0])
Z = np.array([2.0, 0.5, -1.0])


def _f_default(a, b=Y):
    return np.sum(np.sin(a) * b)


def _f_kwonly(a, s=2.0, *, k=3.0):
    return np.sum(a ** 2) * s * k


def _f_var(a, b, *rest):
    return np.sum(a * b) + sum(np.sum(r * a * b) for r in rest)


def _f_star(*xs):
    return np.sum(xs[0] * xs[-1] ** 2)


def _f_kw(a, **kw):
    return np.sum(a * kw.get("c", 2.0))


def _f_none(a, b=None):
    if b is None:
        b = a
    return np.sum(a * b)


def _f_mut(a, buf):
    buf[:] = 2 * a
    return np.sum(buf * buf)


class C:
    def __init__(self):
        self.w = Z

    def m(self, a, b):
        return np.sum(self.w * a * b ** 2)

    def __call__(self, a, b):
        return np.sum(self.w * a ** 2 * b)

    @bytegrad.differentiable
    def d(self, a, b):
        return np.sum(self.w * np.cos(a) * b)


_c = C()
_lam = lambda a, s=3.0: np.sum(a ** 3) * s  # noqa: E731
_p = functools.partial(_f_var, X)
_pk = functools.partial(_f_default, b=Z)

API_CASES = [
    ("default", lambda: bytegrad.grad(_f_default, 0)(X), _f_default, (X,), 0),
    ("default neg", lambda: bytegrad.grad(_f_default, -1)(X), _f_default, (X,), 0),
    ("kwonly passed", lambda: bytegrad.grad(_f_kwonly, 0)(X, k=4.0),
     lambda a: _f_kwonly(a, k=4.0), (X,), 0),
    ("kwonly default", lambda: bytegrad.grad(_f_kwonly, 1)(X, 1.5), _f_kwonly, (X, 1.5), 1),
    ("varargs into rest", lambda: bytegrad.grad(_f_var, 2)(X, Y, Z), _f_var, (X, Y, Z), 2),
    ("varargs named", lambda: bytegrad.grad(_f_var, 1)(X, Y, Z), _f_var, (X, Y, Z), 1),
    ("varargs neg", lambda: bytegrad.grad(_f_var, -1)(X, Y, Z), _f_var, (X, Y, Z), 2),
    ("star only", lambda: bytegrad.grad(_f_star, (0, -1))(X, Y, Z)[1], _f_star, (X, Y, Z), 2),
    ("**kw", lambda: bytegrad.grad(_f_kw)(X), _f_kw, (X,), 0),
    ("**kw passed", lambda: bytegrad.grad(_f_kw)(X, c=Y), lambda a: _f_kw(a, c=Y), (X,), 0),
    ("default None", lambda: bytegrad.grad(_f_none, 0)(X), _f_none, (X,), 0),
    ("mutated non-wrt argument", lambda: bytegrad.grad(_f_mut, 0)(X, np.zeros(3)),
     lambda a: _f_mut(a, np.zeros(3)), (X,), 0),
    ("bound method", lambda: bytegrad.grad(_c.m, 1)(X, Y), _c.m, (X, Y), 1),
    ("bound method np.int64", lambda: bytegrad.grad(_c.m, np.int64(0))(X, Y), _c.m, (X, Y), 0),
    ("callable object", lambda: bytegrad.grad(_c, 1)(X, Y), _c, (X, Y), 1),
    ("callable object neg", lambda: bytegrad.grad(_c, -2)(X, Y), _c, (X, Y), 0),
    ("partial", lambda: bytegrad.grad(_p, 1)(Y, Z), _p, (Y, Z), 1),
    ("partial kw", lambda: bytegrad.grad(_pk, 0)(X), _pk, (X,), 0),
    ("lambda default", lambda: bytegrad.grad(_lam, 0)(X), _lam, (X,), 0),
    ("lambda default passed", lambda: bytegrad.grad(_lam, 1)(X, 2.0), _lam, (X, 2.0), 1),
    ("differentiable method", lambda: _c.d.grad(X, Y, argnums=1), _c.d, (X, Y), 1),
    ("differentiable pullback wrt", lambda: _c.d.pullback(X, Y, wrt=[-1])[1](1.0)[1],
     _c.d, (X, Y), 1),
    ("pullback wrt neg", lambda: bytegrad.pullback(_f_var, X, Y, Z, wrt=(-1,))[1](1.0)[2],
     _f_var, (X, Y, Z), 2),
    ("argnums ndarray", lambda: bytegrad.grad(_f_var, np.array([1]))(X, Y)[0], _f_var, (X, Y), 1),
]


@pytest.mark.regression
@pytest.mark.parametrize("name, got, f, args, i", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_argnums_against_finite_differences(name, got, f, args, i):
    assert np.allclose(got(), fd_gradient(f, args, i), atol=1e-6)


@pytest.mark.regression
def test_out_of_range_indices_raise_index_error():
    with pytest.raises(IndexError, match="argument index 5"):
        bytegrad.grad(_f_var, 5)(X, Y)
    with pytest.raises(IndexError, match="argument index -3"):
        bytegrad.pullback(_f_var, X, Y, wrt=[-3])


def _f3(a, b, c):
    return np.sum(a * b) + c * 2


_A3, _B3 = arr(3, seed=1), arr(3, seed=2)


@pytest.mark.regression
def test_argnums_forms_that_work():
    assert bytegrad.grad(_f3, -1)(_A3, _B3, 1.5) == 2.0
    ga, gc = bytegrad.grad(_f3, (-3, -1))(_A3, _B3, 1.5)
    assert np.allclose(ga, _B3) and gc == 2.0
    g1, g2 = bytegrad.grad(_f3, (0, 0))(_A3, _B3, 1.5)
    assert np.allclose(g1, _B3) and np.allclose(g2, _B3)
    gc, ga = bytegrad.grad(_f3, [2, 0])(_A3, _B3, 1.5)
    assert gc == 2.0 and np.allclose(ga, _B3)
    assert len(bytegrad.grad(_f3, range(2))(_A3, _B3, 1.5)) == 2
    assert bytegrad.grad(_f3, ())(_A3, _B3, 1.5) == ()
    assert np.allclose(bytegrad.grad(_f3, 0)(_A3, _B3, c=1.5), _B3)
    y, (gb, gc) = bytegrad.value_and_grad(_f3, (1, 2))(_A3, _B3, 1.5)
    assert np.isclose(y, _f3(_A3, _B3, 1.5)) and np.allclose(gb, _A3) and gc == 2.0
    for bad in (3, -4, (0, 3)):
        with pytest.raises(IndexError, match="out of range"):
            bytegrad.grad(_f3, bad)(_A3, _B3, 1.5)
    g = bytegrad.pullback(_f3, _A3, _B3, 1.5, wrt=[2, 0])[1](1.0)
    assert np.allclose(g[0], _B3) and g[1] is None and g[2] == 2.0


@pytest.mark.regression
def test_argnums_numpy_integer():
    # Pinned bug: an argnums computed with NumPy (np.int64) is refused with
    # "TypeError: 'numpy.int64' object is not iterable" (JAX takes any integer)
    assert np.allclose(bytegrad.grad(_f3, np.int64(1))(_A3, _B3, 1.5), _A3)


@pytest.mark.regression
def test_argnums_into_star_args():
    # Pinned bug: grad of a function taking *args with argnums past its named parameters
    # crashes inside the activity analysis: "IndexError: list index out of range"
    # (bytegrad.gradient of the same function works: (2.0, 3.0))
    assert bytegrad.grad(lambda *xs: xs[0] * xs[1], 1)(3.0, 2.0) == 3.0

    def g(a, *rest):
        return a * rest[0] * rest[1]
    assert bytegrad.grad(g, (0, 2))(3.0, 2.0, 5.0) == (10.0, 6.0)


@pytest.mark.regression
def test_pullback_wrt_negative_index():
    # Pinned bug: pullback(..., wrt=(-1,)) silently returns None for every argument
    # (grad's argnums=-1 works); expected the last argument's gradient 2.0
    g = bytegrad.pullback(_f3, _A3, _B3, 1.5, wrt=(-1,))[1](1.0)
    assert g[2] == 2.0


# ---------------------------------------------------------------------------
# grad / value_and_grad with argnums over mutated structured arguments
# ---------------------------------------------------------------------------

def _dicts_mutated(a, n, b):
    a["w"][0] = a["w"][1] * b["v"][2]
    b["v"] *= 2.0
    return np.sum(a["w"] ** 2) + np.sum(b["v"]) * n


def _dicts():
    return {"w": np.array([1.0, 2.0, 3.0])}, 3, {"v": np.array([0.5, 1.5, 2.5])}


@pytest.mark.regression
def test_grad_argnums_0_2_of_mutated_dicts():
    full = check_stateful(_dicts_mutated, *_dicts())
    args = _dicts()
    plain = copy.deepcopy(args)
    y0 = _dicts_mutated(*plain)
    y, (ga, gb) = bytegrad.value_and_grad(_dicts_mutated, argnums=(0, 2))(*args)
    assert y == y0
    assert np.array_equal(args[0]["w"], plain[0]["w"]) and np.array_equal(args[2]["v"], plain[2]["v"])
    assert np.allclose(ga["w"], full[0]["w"]) and np.allclose(gb["v"], full[2]["v"])
    gi = bytegrad.grad(_dicts_mutated, argnums=2)(*_dicts())
    assert np.allclose(gi["v"], full[2]["v"])


def _buf_written_by_wrt(buf, x, c):
    buf[0] = x[0] * c[1]
    buf[1:] = x[1:] ** 2
    c[0] = buf[2] * 3.0
    return np.sum(buf * c) + c[0] * x[2]


@pytest.mark.regression
@pytest.mark.parametrize("argnums", [1, (1,), (1, 2), (2,), (0, 1), (-2,), (2, 1)])
def test_argnums_where_an_unselected_argument_carries_the_gradient(argnums):
    args = [np.zeros(3), np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.5, 2.5])]
    work = copy.deepcopy(args)
    got = bytegrad.grad(_buf_written_by_wrt, argnums=argnums)(*work)
    plain = copy.deepcopy(args)
    _buf_written_by_wrt(*plain)
    assert all(np.array_equal(a, b) for a, b in zip(work, plain))
    nums = (argnums,) if isinstance(argnums, int) else argnums
    got = (got,) if isinstance(argnums, int) else got
    for g, i in zip(got, nums):
        assert np.allclose(g, fd_gradient(_buf_written_by_wrt, args, i % 3), atol=1e-5)


def _pb_mutating(x, y):
    x[0] = y[0] * y[1]
    y[1] = x[2] * 2.0
    return x * y


@pytest.mark.regression
def test_pullback_wrt_one_of_a_mutating_function():
    xx, yy = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    full = check_pullback(_pb_mutating, np.ones(3), xx.copy(), yy.copy())
    a, b = xx.copy(), yy.copy()
    out, back = bytegrad.pullback(_pb_mutating, a, b, wrt=[1])
    g = back(np.ones(3))
    assert g[0] is None and np.allclose(g[1], full[1])
    pa, pb_ = xx.copy(), yy.copy()
    assert np.array_equal(out, _pb_mutating(pa, pb_))
    assert np.array_equal(a, pa) and np.array_equal(b, pb_)


def f_mut_two(a, b, s):
    a[0] = b[1] * s
    b[1] = a[0] * a[2]
    return np.sum(a) * np.sum(b)

@pytest.mark.regression
def test_argnums():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0])
    a0, b0 = a.copy(), b.copy()
    gb, gs = bytegrad.grad(f_mut_two, argnums=(1, 2))(a, b, 0.7)
    ga, gb2, gs2 = check_stateful(f_mut_two, a0.copy(), b0.copy(), 0.7)
    assert np.allclose(gb, gb2) and np.allclose(gs, gs2)
    aa, bb = a0.copy(), b0.copy(); f_mut_two(aa, bb, 0.7)
    assert np.array_equal(a, aa) and np.array_equal(b, bb)
    v, ga3 = bytegrad.value_and_grad(f_mut_two, argnums=0)(a0.copy(), b0.copy(), 0.7)
    assert np.allclose(ga3, ga)
    v2, (gb4,) = bytegrad.value_and_grad(f_mut_two, argnums=(1,))(a0.copy(), b0.copy(), 0.7)
    assert np.allclose(gb4, gb2)


def _through_a_view(x, y, z):
    z[0] = 2.0 * y[0]  # (z is a view of x: x[0] changes too)
    return np.sum(x * y) + z[1] * y[1]


@pytest.mark.regression
@pytest.mark.parametrize("argnums", [(0,), (0, 1), (1,), (0, 2), (), (1, 2)])
def test_argnums_of_a_call_whose_other_argument_is_a_view_of_one_asked(argnums):
    """Each asked gradient is the one computed with all asked for, whichever are asked
    (first ones or not), when an argument not asked for shares memory with one asked."""
    def call(nums):
        x = np.array([1.0, 2.0, 3.0, 4.0])
        return bytegrad.grad(_through_a_view, argnums=nums)(x, np.array([0.5, -1.0, 2.0, 3.0]), x[::2])
    every = call((0, 1, 2))
    for i, g in zip(argnums, call(argnums)):
        assert np.array_equal(g, every[i])
    # x[0] = 2 y[0] makes the first term 2 y[0]²; z[1] is x[2]
    assert np.allclose(every[1], [4 * 0.5, 2.0 + 3.0, 3.0, 4.0])
