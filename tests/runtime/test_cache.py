"""The cache of transforms cannot be fooled by equal code, rebound globals or
forgotten modules."""
import gc
import math
import weakref

import numpy as np
import pytest

import bytegrad
from bytegrad.runtime import forward as fwd

_SOURCE = "def f(x):\n    return op(x) * x\n"


def _module(op, filename="<same source>"):
    ns = {"op": op}
    exec(compile(_SOURCE, filename, "exec"), ns)
    return ns


def test_equal_code_in_two_modules_gets_two_transforms():
    a, b = _module(math.floor), _module(math.sin)
    assert a["f"].__code__ == b["f"].__code__  # equal, not identical
    assert bytegrad.grad(a["f"])(2.5) == math.floor(2.5)
    assert bytegrad.grad(b["f"])(2.5) == pytest.approx(math.sin(2.5) + 2.5 * math.cos(2.5))
    assert bytegrad.grad(a["f"])(2.5) == math.floor(2.5)


def test_a_rebound_global_re_decides_activity():
    ns = _module(math.floor, "<rebound>")
    assert bytegrad.grad(ns["f"])(2.5) == math.floor(2.5)
    ns["op"] = math.sin
    assert bytegrad.grad(ns["f"])(2.5) == pytest.approx(math.sin(2.5) + 2.5 * math.cos(2.5))
    ns["op"] = math.floor
    assert bytegrad.grad(ns["f"])(2.5) == math.floor(2.5)


def test_a_global_bound_later_re_decides_activity():
    ns = {}
    exec(compile("def f(x):\n    return later(x) * x\n", "<later>", "exec"), ns)
    ns["later"] = math.floor
    assert bytegrad.grad(ns["f"])(2.5) == math.floor(2.5)
    ns["later"] = math.exp
    assert bytegrad.grad(ns["f"])(2.5) == pytest.approx(math.exp(2.5) * 3.5)


def _cached(code_id) -> bool:
    return any((k if type(k) is int else k[0]) == code_id for k in fwd._CACHE.entries)


class _Marker:
    pass


def test_the_cache_keeps_no_module_alive():
    ns = _module(math.sin, "<forgotten>")
    marker = ns["marker"] = _Marker()
    gone = weakref.ref(marker)
    key = id(ns["f"].__code__)
    assert bytegrad.grad(ns["f"])(1.0) == pytest.approx(math.sin(1.0) + math.cos(1.0))
    assert _cached(key)
    del ns, marker
    gc.collect()
    assert gone() is None
    assert not _cached(key)  # dropped with its code


def test_a_global_number_that_changes_keeps_its_transform():
    ns = {"scale": 2.0}
    exec(compile("def f(x):\n    return x * scale\n", "<scaled>", "exec"), ns)
    assert bytegrad.grad(ns["f"])(1.0) == 2.0
    made = [c for k, cs in fwd._CACHE.entries.items() for c in cs
            if (k if type(k) is int else k[0]) == id(ns["f"].__code__)]
    for scale in (3.0, 0.5, 7.25):
        ns["scale"] = scale
        assert bytegrad.grad(ns["f"])(1.0) == scale  # the value read now, the same transform
    again = [c for k, cs in fwd._CACHE.entries.items() for c in cs
             if (k if type(k) is int else k[0]) == id(ns["f"].__code__)]
    assert again == made
    ns["scale"] = np.array(3.0)  # another type: decided again
    assert bytegrad.grad(ns["f"])(1.0) == 3.0


def test_every_kind_of_global_read_is_checked():
    """The check made for the globals a transform read (`cache.still_decided`) covers a
    module attribute by identity (``m.op``), a number read as a module attribute
    (``m.k``: by type), a global held strongly (a list) and a name that was missing."""
    import types
    m = types.ModuleType("m")
    m.op, m.k = math.floor, 2.0
    ns = {"m": m, "coefs": [1.0]}
    src = ("def f(x):\n    if 'extra' in coefs:\n        return later(x)\n"
           "    return m.op(x) * x * m.k\n")
    exec(compile(src, "<kinds>", "exec"), ns)
    f = ns["f"]
    c = fwd.compiled(f)
    assert bytegrad.grad(f)(2.5) == math.floor(2.5) * 2.0
    m.k = 3.0  # the same type: the same transform
    assert bytegrad.grad(f)(2.5) == math.floor(2.5) * 3.0 and fwd.compiled(f) is c
    m.op = math.sin  # an attribute rebound: decided again
    assert bytegrad.grad(f)(2.5) == pytest.approx((math.sin(2.5) + 2.5 * math.cos(2.5)) * 3.0)
    m.op = math.floor
    assert c.still_decided(ns)
    assert not c.still_decided({**ns, "coefs": [1.0]})  # another list
    assert not c.still_decided({**ns, "later": math.exp})  # a missing name bound
    m.k = np.float64(3.0)  # another type
    assert not c.still_decided(ns)


def test_a_called_function_is_checked_at_every_call():
    """A function called from differentiated code is found by its identity (no search of
    the cache at each call), and still checked: a rebound global, a new ``__code__``."""
    ns = _module(math.floor, "<called>")
    f = ns["f"]
    caller = lambda x: f(x) + 0.0  # noqa: E731
    assert bytegrad.grad(caller)(2.5) == math.floor(2.5)
    ns["op"] = math.sin
    assert bytegrad.grad(caller)(2.5) == pytest.approx(math.sin(2.5) + 2.5 * math.cos(2.5))
    f.__code__ = compile("def f(x):\n    return op(x) * x * x\n", "<new code>", "exec").co_consts[0]
    assert bytegrad.grad(caller)(2.5) == pytest.approx(2 * 2.5 * math.sin(2.5) + 2.5 ** 2 * math.cos(2.5))


def test_a_called_function_keeps_no_module_alive():
    ns = _module(math.sin, "<called, forgotten>")
    marker = ns["marker"] = _Marker()
    gone = weakref.ref(marker)
    f = ns["f"]
    key = id(f)
    assert bytegrad.grad(lambda x: f(x) * 1.0)(1.0) == pytest.approx(math.sin(1.0) + math.cos(1.0))
    assert key in fwd._RUNNING
    del ns, marker, f
    gc.collect()
    assert gone() is None
    assert key not in fwd._RUNNING
