"""The values a function only reads (`transforms.kept`): which they are, and gradients of
programs where they meet changes in place, against finite differences."""
import numpy as np
import pytest

import bytegrad
from bytegrad.runtime.forward import _CACHE, _Hooks
from bytegrad.transforms.kept import kept
from bytegrad.transforms.reverse import _Resolving

from checks import check_grad, check_stateful


def kept_calls(f, numeric=None):
    """The names of the callees whose results ``f`` only reads, in order, when its entry
    arguments ``numeric`` are arrays or numbers (by default all its parameters, as for a
    call with arrays)."""
    if numeric is None:
        numeric = tuple(range(1, f.__code__.co_argcount + 1))
    primal = bytegrad.stages(f).primal
    hooks = _Resolving(_Hooks, f.__globals__)  # (``len`` is a global)
    ks = kept(primal, hooks.reads, hooks.view, hooks.methods, numeric)
    return [getattr(st.fn, "__name__", repr(st.fn)) for _, v, st in primal.statements() if v in ks]


def read_only(x, W):
    h = np.tanh(x @ W)
    return np.sum(h * h) + len(h)


def changed_later(x):
    h = np.tanh(x)
    s = np.sum(h)
    h[0] = 0.0
    return s + np.sum(h * 3.0)


def through_a_view(x):
    h = np.exp(x)
    v = h[1:]
    v *= 2.0
    return np.sum(h)


def read_through_a_view(x):
    h = np.exp(x)
    return np.sum(h[1:]) + np.dot(h.T[0], h[0])


def a_view_given_to_an_operator(x, w):
    h = np.exp(x)
    return np.sum(h[1:] * w)


def a_view_given_to_an_operator_with_arrays(x):
    h = np.exp(x)
    return np.sum(h[1:] * 2.0 - np.sin(x[1:]) * h[:-1])


def into_out(x):
    h = np.sin(x)
    np.multiply(x, x, out=h)
    return np.sum(h)


def handed_to_code(x):
    h = np.cos(x)
    return _total(h) + np.sum(h)


def _total(a):
    return np.sum(a * a)


def in_a_loop(x):
    h = np.tanh(x)
    for _ in range(2):
        h = h * 2.0
    return np.sum(h)


def returned(x):
    return np.tanh(x) * 2.0


def test_values_read_only_by_calls_that_read_are_kept():
    assert kept_calls(read_only) == ["matmul", "tanh", "mul", "sum", "len"]


def test_a_value_changed_in_place_later_is_not_kept():
    assert kept_calls(changed_later) == ["sum", "mul", "sum"]


def test_a_value_whose_view_is_changed_is_not_kept():
    assert kept_calls(through_a_view) == []


def test_a_value_read_through_views_is_kept():
    assert kept_calls(read_through_a_view) == ["exp", "sum", "dot"]


def test_a_value_whose_view_an_operator_is_given_with_what_may_be_an_object_is_not_kept():
    # (a user's operator method given the view would take only the view's part of a change)
    assert kept_calls(a_view_given_to_an_operator, numeric=(1,)) == ["mul"]  # (w may be yours)
    assert kept_calls(a_view_given_to_an_operator) == ["exp", "mul"]
    assert kept_calls(a_view_given_to_an_operator_with_arrays) == ["exp", "mul", "sin", "mul", "sub"]


def test_a_value_written_through_out_is_not_kept():
    assert kept_calls(into_out) == []


def test_a_value_handed_to_python_code_is_not_kept():
    # (np.sum's result too: added to what your code returned, which may be an object of yours)
    assert kept_calls(handed_to_code) == []


def softmax_like(x):
    z = x - np.max(x)
    return np.log(np.sum(np.exp(z))) - z[0]


def test_values_made_from_arguments_that_are_arrays_are_kept():
    # (an x of yours would make z one, whose method ``__rsub__`` would be given the log)
    assert kept_calls(softmax_like, numeric=()) == []
    assert kept_calls(softmax_like) == ["max", "sub", "exp", "sum", "log"]


def test_the_transform_a_call_with_arrays_gets_keeps_them():
    g = bytegrad.grad(softmax_like)
    x = np.array([0.3, -0.7, 1.1])
    check_grad(softmax_like, x)
    g(x)
    made = [c for cs in _CACHE.entries.values() for c in cs
            if c.stages.lifted.meta.name == "softmax_like"]
    assert any("ops.watch(KEPT" in str(c.stages.forward) for c in made)


def test_values_passed_to_another_block_or_returned_are_not_kept():  # (tanh's is multiplied)
    assert kept_calls(in_a_loop) == []
    assert kept_calls(returned) == ["tanh"]


@pytest.mark.parametrize("f", [read_only, changed_later, through_a_view, read_through_a_view,
                               a_view_given_to_an_operator, a_view_given_to_an_operator_with_arrays,
                               into_out, handed_to_code, in_a_loop])
def test_gradients_where_kept_values_meet_changes_in_place(f):
    x = np.array([0.3, -0.7, 1.1, 0.4])
    args = (x, np.eye(4) + 0.1) if f is read_only else (x, x[1:] * 2.0) if f is a_view_given_to_an_operator \
        else (x,)
    check_grad(f, *args)


def kept_after_a_change(x, buf):
    buf[0] = x[0] * 2.0  # (something is mutated: KEPT watches everything from here)
    h = np.tanh(x * buf[0])
    return np.sum(h * h)


def test_a_value_kept_after_a_change_in_place():
    check_stateful(kept_after_a_change, np.array([0.3, -0.7, 1.1]), np.zeros(3))


class Keeper:
    """An operator method that keeps the array it is given; `bump` changes it later."""

    __array_ufunc__ = None  # (an array + a Keeper: Python calls __radd__ with the array)

    def __init__(self):
        self.held = None

    def __radd__(self, other):
        self.held = other
        return other * 1.0

    def bump(self):
        self.held *= 3.0


def kept_by_user_code(x):
    k = Keeper()
    h = np.tanh(x)
    y = h + k
    k.bump()
    return np.sum(y) + np.sum(h * h)


def test_an_array_a_user_operator_method_keeps_and_changes_later():
    check_grad(kept_by_user_code, np.array([0.3, -0.7, 1.1]))


class Giver:
    """An operator method that returns an array it keeps, which `bump` changes later."""

    def __init__(self, a):
        self.a = a

    def __add__(self, other):
        return self.a

    def bump(self):
        self.a *= 2.0


def returned_by_user_code(x):
    g = Giver(np.sin(x))
    y = g + 1.0
    s = np.sum(y * y)
    g.bump()
    return s + np.sum(y)


def test_an_array_a_user_operator_method_returns_and_changes_later():
    check_grad(returned_by_user_code, np.array([0.3, -0.7, 1.1]))


class Changer:
    """An operator method that changes its array operand in place."""

    __array_ufunc__ = None

    def __radd__(self, other):
        other += 1.0
        return other


def changed_by_user_code(x):
    h = np.tanh(x)
    return np.sum(h + Changer())


def test_a_user_operator_method_that_changes_its_array_operand():
    # (the array is handed on: given to an operator with an object of yours)
    check_grad(changed_by_user_code, np.array([0.3, -0.7, 1.1]))


def changed_by_user_code_and_kept(x):
    y = x * 1.0
    keep = [y]  # (handed on: watched)
    z = y + Changer()
    return np.sum(z * x) + np.sum(keep[0] * x)


def test_a_user_operator_method_that_changes_an_array_handed_on_too():
    check_grad(changed_by_user_code_and_kept, np.array([0.3, -0.7, 1.1]))


# -- what a call may hand back: the analysis assumes no more than it must -------------------

class _Cfg:
    pass


class _Zero:
    """An additive zero: its override hands back the array it is given."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        return inputs[0] if inputs[1] is self else inputs[1]


class _Ident:
    def __array_function__(self, func, types, args, kwargs):
        return args[0]


class _Clip:
    __array_ufunc__ = None

    def __gt__(self, other):
        return other


class _Store:
    __array_ufunc__ = None

    def __radd__(self, other):
        self.k = other
        return 0.0


class _Same:
    __array_ufunc__ = None

    def __radd__(self, other):
        return other


def _default_of_getattr(x):
    h = np.tanh(x)
    v = getattr(_Cfg, "buf", h)  # (h itself)
    v[0] = 0.0
    return np.sum(h * x)


def _key_of_an_index_expression(x):
    h = np.tanh(x)
    v = np.s_[h]  # (h itself)
    v[0] = 0.0
    return np.sum(h * x)


def _handed_back_by_an_override(x):
    h = np.tanh(x)
    y = h + _Zero()
    y[0] = 0.0
    return np.sum(y * x)


def _handed_back_by_array_function(x):
    h = np.tanh(x)
    y = np.dot(h, _Ident())
    y[0] = 0.0
    return np.sum(y * x)


def _handed_back_by_a_comparison(x):
    h = np.tanh(x)
    y = h < _Clip()
    y[0] = 0.0
    return np.sum(y * x)


def _view_kept_by_a_method(x):
    h = np.tanh(x)
    b = _Store()
    _ = h[1:] + b
    b.k[0] = 5.0  # (writes h[1])
    return np.sum(h * x)


def _view_handed_back_by_a_method(x):
    h = np.tanh(x)
    y = h[1:] + _Same()
    y[0] = 5.0
    return np.sum(h * x)


class _Recorder:
    def __getitem__(self, key):
        self.last = key
        return 1.0


def _key_kept_by_a_container(x):
    h = np.tanh(x)
    r = _Recorder()
    r[h]
    r.last *= 3.0  # (changes h)
    return np.sum(h * np.cos(x))


class _Acc:
    __array_ufunc__ = None

    def __init__(self, w):
        self.w = w

    def __radd__(self, other):
        other += self.w
        return other


RECORDER = _Recorder()


def _key_kept_by_a_global_container(x):
    h = np.tanh(x)
    RECORDER[h]
    RECORDER.last *= 3.0  # (changes h)
    return np.sum(h * np.cos(x))


KEEPER = Keeper()


def _kept_by_a_global_operand(x):
    h = np.tanh(x)
    y = h + KEEPER
    KEEPER.bump()  # (changes h)
    return np.sum(y * np.cos(x)) + np.sum(h * h)


def _constant_changed_by_a_method(x):
    buf = np.zeros(3)
    y = buf + _Acc(np.tanh(x))
    return np.sum(y * y)


def _changed_by_a_method_in_a_checkpoint(x):
    return bytegrad.checkpoint(changed_by_user_code, x)


@pytest.mark.regression
@pytest.mark.parametrize("f", [_key_kept_by_a_container, _key_kept_by_a_global_container,
                               _kept_by_a_global_operand, _constant_changed_by_a_method,
                               _changed_by_a_method_in_a_checkpoint])
def test_what_code_of_yours_is_given_and_changes_later(f):
    # (a container's key kept and changed: the gradient lost; a constant and a checkpoint:
    # refused, or lost, by a check at the end of the reverse pass this replaced)
    check_grad(f, np.array([0.3, -0.5, 0.7]))


@pytest.mark.regression
@pytest.mark.parametrize("f", [_default_of_getattr, _key_of_an_index_expression,
                               _handed_back_by_an_override, _handed_back_by_array_function,
                               _handed_back_by_a_comparison, _view_kept_by_a_method,
                               _view_handed_back_by_a_method])
def test_a_value_a_call_hands_back_and_that_is_changed_later(f):
    # (each gave h's gradient without the part the change left in the shadow: h was kept)
    check_grad(f, np.array([0.3, -0.5, 0.7]))


# -- what the call's types say of the arguments ------------------------------------------

def _beside_an_item_of_an_argument(x, objs):
    h = np.tanh(x)
    h + objs[0]  # (a Keeper: it keeps h)
    objs[0].bump()  # (changes h)
    return np.sum(h * x)


class _Makes:
    """An override that answers a ufunc with an object of yours."""

    def __init__(self, k):
        self.k = k

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        return self.k


def _beside_what_an_override_made(x, m):
    y = np.negative(m)  # (a Keeper)
    h = np.tanh(x)
    h + y
    y.bump()  # (changes h)
    return np.sum(h * x)


def _objects():
    a = np.empty(1, dtype=object)
    a[0] = Keeper()
    return a


def _fd(f, other):
    x, e = np.array([0.3, -0.7, 1.1]), 1e-6
    return x, np.array([(f(x + e * u, other()) - f(x - e * u, other())) / (2 * e) for u in np.eye(3)])


@pytest.mark.regression
def test_a_value_given_to_an_item_of_an_array_of_objects():
    # (an array of objects was taken for numbers: h kept, its gradient lost)
    x, fd = _fd(_beside_an_item_of_an_argument, _objects)
    assert np.allclose(bytegrad.grad(_beside_an_item_of_an_argument)(x.copy(), _objects()), fd,
                       atol=1e-6)


@pytest.mark.regression
def test_a_value_given_to_an_object_an_override_made_never_gets_a_wrong_gradient():
    # (a ufunc's result was taken for an array whatever its operands: h kept, its gradient
    # lost; the override's object itself has no gradient to give back, an error as without
    # the analysis)
    x, fd = _fd(_beside_what_an_override_made, lambda: _Makes(Keeper()))
    try:
        g = bytegrad.grad(_beside_what_an_override_made)(x.copy(), _Makes(Keeper()))
    except TypeError:
        return
    assert np.allclose(g, fd, atol=1e-6)
