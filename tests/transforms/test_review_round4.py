"""Review round 4: the public API with structured data.

``grad``/``value_and_grad`` with tuple ``argnums`` over dicts, lists, named tuples,
dataclasses and nested objects (mutated or not), ``pullback(..., wrt=...)`` of a mutating
function, ``@differentiable`` on functions and methods, keyword-only arguments, mutable
default arguments and ``**kwargs`` containers that ``f`` changes, dicts with tuple/int/float
keys, empty containers, int/bool/None fields, 0-d and float32 outputs, values read from an
argument before it is changed, the same array passed twice.

Passing cases compare with central finite differences on deep copies (``check_stateful``,
``check_pullback``, or ``_fd`` below).  What this review found is kept as regression
tests.
"""
import copy
import dataclasses
import functools
from typing import NamedTuple

import numpy as np
import pytest

import bytegrad
from checks import check_pullback, check_stateful, fd_gradient


# ---------------------------------------------------------------------------
# grad / value_and_grad with argnums over mutated structured arguments
# ---------------------------------------------------------------------------

def _dicts_mutated(a, n, b):
    a["w"][0] = a["w"][1] * b["v"][2]
    b["v"] *= 2.0
    return np.sum(a["w"] ** 2) + np.sum(b["v"]) * n


def _dicts():
    return {"w": np.array([1.0, 2.0, 3.0])}, 3, {"v": np.array([0.5, 1.5, 2.5])}


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


# ---------------------------------------------------------------------------
# keyword-only, default and **kwargs arguments that f changes
# ---------------------------------------------------------------------------

def test_mutable_default_array_accumulates_like_plain_calls():
    def f(x, buf=np.zeros(3)):
        buf += x
        return np.sum(buf * x)

    x = np.array([1.0, 2.0, 3.0])
    for _ in range(2):
        before = f.__defaults__[0].copy()
        (g,) = bytegrad.gradient(f, x.copy())
        assert np.allclose(f.__defaults__[0], before + x)    # as a plain call leaves it
        assert np.allclose(g, before + 2 * x)                # the old contents are constants


def test_mutable_default_list_appended():
    def f(x, hist=[]):
        hist.append(x * 2.0)
        return sum(np.sum(t * x) for t in hist)

    x = np.array([1.0, 2.0])
    (g1,) = bytegrad.gradient(f, x.copy())
    (g2,) = bytegrad.gradient(f, x.copy())
    assert len(f.__defaults__[0]) == 2
    assert np.allclose(g1, 4 * x) and np.allclose(g2, 4 * x + 2 * x)


def test_keyword_only_buffer_written_with_the_argument():
    def f(x, *, buf):
        buf[0] = x[0] * 3.0
        return np.sum(buf * x)

    b = np.ones(3)
    y, (g,) = bytegrad.value_and_gradient(f, np.array([1.0, 2.0, 3.0]), buf=b)
    assert y == 8.0 and np.array_equal(b, [3.0, 1.0, 1.0])
    assert np.allclose(g, fd_gradient(lambda x: f(x, buf=np.ones(3)), [np.array([1.0, 2.0, 3.0])], 0))


def test_kwargs_containers_written_and_appended():
    def f(x, **kw):
        kw["a"][0] = x[1] * 2.0
        kw["b"].append(x * kw["a"][0])
        return np.sum(kw["a"] * x) + np.sum(kw["b"][-1])

    A, L = np.array([1.0, 2.0, 3.0]), []
    x = np.array([1.0, 2.0, 3.0])
    y, (g,) = bytegrad.value_and_gradient(f, x.copy(), a=A, b=L)
    A0, L0 = np.array([1.0, 2.0, 3.0]), []
    assert y == f(x.copy(), a=A0, b=L0)
    assert np.array_equal(A, A0) and len(L) == 1 and np.array_equal(L[0], L0[0])
    assert np.allclose(g, fd_gradient(lambda x: f(x, a=np.array([1.0, 2.0, 3.0]), b=[]), [x], 0))


def test_kwargs_dict_passed_with_double_star_inside():
    def f(d):
        def inner(x, **kw):
            kw["w"] = kw["w"] * x
            return kw["w"]
        return np.sum(inner(2.0, **d)) + np.sum(d["w"])
    check_stateful(f, {"w": np.array([1.0, 2.0])})


# ---------------------------------------------------------------------------
# structured arguments: keys, empties, named tuples, dataclasses, fields
# ---------------------------------------------------------------------------

def _tuple_int_keys(d, x):
    d[(0, 1)] = d[(0, 1)] * x
    d[0] = d.get(0, 0.0) + x ** 2
    d[1.5] = d[0] * d[(0, 1)]
    return d[1.5] + d[(0, 1)] ** 2


def test_dict_with_tuple_int_and_float_keys():
    check_stateful(_tuple_int_keys, {(0, 1): 3.0, 0: 1.0}, 2.0)


def test_empty_list_and_dicts():
    def f(d, e, l, x):
        s = x * 1.0
        for k in d:
            s = s + d[k] * x
        for v in l:
            s = s + v
        return s
    assert check_stateful(f, {}, {}, [], 2.0)[3] == 1.0


class _P(NamedTuple):
    a: np.ndarray
    b: float
    k: int


def _nt(p, q):
    p.a[0] = q.b * p.a[1]
    return np.sum(p.a) * p.b + q.a[p.k] * p.k


def test_named_tuples_with_int_fields_under_argnums():
    mk = lambda: (_P(np.array([1.0, 2.0, 3.0]), 0.5, 2), _P(np.array([4.0, 5.0, 6.0]), 1.5, 1))
    full = check_stateful(_nt, *mk())
    gp, gq = bytegrad.grad(_nt, argnums=(0, 1))(*mk())
    assert gp[2] is None and gq[2] is None
    assert np.allclose(gp[0], full[0][0]) and np.allclose(gq[1], full[1][1])


class _NTC(NamedTuple):
    xs: list
    d: dict


def test_named_tuple_holding_a_list_and_dict_changed():
    def f(nt, y):
        nt.xs[0] = nt.xs[0] * y
        nt.d["k"] = nt.xs[0] + nt.d["k"]
        nt.xs.pop()
        return nt.d["k"] * y + sum(nt.xs)
    check_stateful(f, _NTC([1.0, 2.0, 3.0], {"k": 0.5}), 1.5)


@dataclasses.dataclass
class _Inner:
    v: np.ndarray
    s: float


@dataclasses.dataclass
class _Outer:
    inner: _Inner
    items: list
    extra: dict


def test_nested_dataclasses_with_list_dict_and_replaced_field():
    def f(o, x):
        o.inner.v[1] = x * o.inner.s
        o.items.append(o.inner.v * 2.0)
        o.extra[(1, 2)] = o.items[0] * x
        o.extra[3] = x ** 2
        o.inner = _Inner(o.inner.v + 1.0, o.inner.s * 3)
        return (np.sum(o.extra[(1, 2)]) + o.extra[3] + np.sum(o.inner.v) * o.inner.s
                + sum(np.sum(t) for t in o.items))
    check_stateful(f, _Outer(_Inner(np.array([1.0, 2.0, 3.0]), 0.7), [np.array([0.1, 0.2, 0.3])], {}), 1.3)


@dataclasses.dataclass(frozen=True)
class _Frozen:
    a: np.ndarray
    lst: list


def test_frozen_dataclass_whose_array_and_list_change():
    def f(fz, x):
        fz.a[1] = x
        fz.lst.append(fz.a * x)
        return np.sum(fz.lst[-1]) + np.sum(fz.a)
    check_stateful(f, _Frozen(np.array([1.0, 2.0]), [np.array([1.0, 1.0])]), 0.7)


class _Model:
    def __init__(self, w):
        self.w = w
        self.n = 3
        self.mask = np.array([True, False, True])
        self.opt = None

    def step(self, x):
        self.w = self.w - 0.1 * x * self.n
        self.w[self.mask] *= 2.0
        return np.sum(self.w ** 2)


def test_object_with_int_bool_mask_and_none_fields_changed_by_a_method():
    g = check_stateful(_Model.step, _Model(np.array([1.0, 2.0, 3.0])), np.array([0.3, 0.2, 0.1]))
    assert g[0].get("n") is None and g[0].get("mask") is None and g[0].get("opt") is None


# ---------------------------------------------------------------------------
# outputs: 0-d arrays, float32 scalars, values read before a write
# ---------------------------------------------------------------------------

def test_zero_d_array_output():
    check_stateful(lambda x: np.array(np.sum(x ** 2)), np.array([1.0, 2.0]))


def test_zero_d_argument_written_and_returned():
    def f(x):
        out = x
        x[...] = x * x
        return out
    check_stateful(f, np.array(3.0))


def test_float32_scalar_outputs():
    for f in (lambda x: np.float32(np.sum(x ** 2)), lambda x: np.sum(x ** 2)):
        y, (g,) = bytegrad.value_and_gradient(f, np.array([1.0, 2.0], dtype=np.float32))
        assert y == np.float32(5.0) and g.dtype == np.float32 and np.allclose(g, [2.0, 4.0])


def test_value_read_before_the_argument_is_written():
    def f(x):
        s = x[0] * 2.0
        t = x
        x[0] = 5.0
        x[1] *= s
        return s * x[1] + t[0]
    check_stateful(f, np.array([1.0, 2.0, 3.0]))

    def g(x):
        y = x.sum()
        x *= 3
        return y
    check_stateful(g, np.array([1.0, 2.0, 3.0]))


def test_same_array_passed_twice_and_written():
    def f(a, b):
        a[0] = b[1] * 3.0
        return np.sum(a * b)
    v = np.array([1.0, 2.0, 3.0])
    y, (ga, gb) = bytegrad.value_and_gradient(f, v, v)
    w = np.array([1.0, 2.0, 3.0])
    assert y == f(w, w) and np.array_equal(v, w)

    def total(u):
        u = u.copy()
        return f(u, u)
    assert np.allclose(ga + gb, fd_gradient(total, [np.array([1.0, 2.0, 3.0])], 0), atol=1e-5)


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


# ---------------------------------------------------------------------------
# open: what this review found
# ---------------------------------------------------------------------------

class _Scale:
    """A callable object: ``is_differentiable`` calls it non-differentiable."""
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return self.w * x


def _loop_layers(layers, x):
    for layer in layers:
        x = layer(x)
    return x


def test_indexing_a_list_of_callable_objects_is_right():
    def f(layers, x):
        for i in range(len(layers)):
            x = layers[i](x)
        return x
    check_stateful(f, [_Scale(2.0), _Scale(3.0)], 0.5)


def test_for_loop_over_a_list_of_callable_objects():
    # expected ([{'w': 1.5}, {'w': 1.0}], 6.0); got (None, 6.0)
    check_stateful(_loop_layers, [_Scale(2.0), _Scale(3.0)], 0.5)


def test_generator_over_callable_objects():
    check_stateful(lambda ls, x: sum(l(x) for l in ls), [_Scale(2.0), _Scale(3.0)], 0.5)


def test_items_loop_over_callable_objects():
    def f(d, x):
        for _, v in d.items():
            x = v(x)
        return x
    check_stateful(f, {"a": _Scale(2.0), "b": _Scale(3.0)}, 0.5)


class _Net:
    """The usual model: layers held in a list attribute, applied in a loop."""
    def __init__(self):
        self.layers = [_Scale(2.0), _Scale(3.0)]
        self.b = np.array([1.0])

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_model_with_a_list_of_callable_layers():
    def f(net, x):
        y = net(x)
        net.b[0] = 0.1
        return y + net.b[0]
    check_stateful(f, _Net(), 0.5)


def test_for_loop_over_partials():
    def mul(a, x):
        return a * x
    g = bytegrad.gradient(_loop_layers, [functools.partial(mul, 2.0)], 0.5)
    assert g[0] is not None and g[0][0]["args"] == (0.5,)


class _WithMethod:
    def __init__(self, w):
        self.w = w

    @bytegrad.differentiable
    def loss(self, x):
        return self.w * x


def test_differentiable_method_grad_on_an_instance():
    o = _WithMethod(2.0)
    g = o.loss.grad(0.5)          # expected ({'w': 0.5}, 2.0) or 2.0: anything but a crash
    assert g is not None
