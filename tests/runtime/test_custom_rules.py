"""User rules through the public API (bytegrad.rule / defrule) and the gradient
utilities written as rules (hook, checkpoint, nestlevel, stop_gradient)."""
from __future__ import annotations

import itertools
import math
import operator
import weakref

import numpy as np
import pytest
import scipy.special

import bytegrad
from bytegrad import stop_gradient
from bytegrad.runtime import rules
from bytegrad.testing import check_rule
from checks import arr, check_grad, check_stateful, fd_gradient


@pytest.fixture
def restore_rules():
    """Rules registered for shared callables (ufuncs) must not outlive the test."""
    saved = dict(rules.RULES)  # (records are replaced, never changed)
    yield
    rules.RULES.clear()
    rules.RULES.update(saved)


def normal_pdf(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


# ---------------------------------------------------------------------------
# (a) a Python function: the rule replaces the transform
# ---------------------------------------------------------------------------

def guarded_softplus(x):
    try:  # try/except is not transformed: without a rule this cannot be differentiated
        return math.log1p(math.exp(x))
    except OverflowError:
        return x


@bytegrad.rule(guarded_softplus)
def _softplus_rule(x):
    return guarded_softplus(x), lambda dy: (None, dy / (1.0 + math.exp(-x)))


def test_rule_makes_an_untransformable_python_function_differentiable():
    for x in (-2.0, 0.3, 4.0):
        check_grad(lambda x: guarded_softplus(x) * x, x)


def sign(x):
    return 1.0 if x > 0 else -1.0


@bytegrad.rule(sign)
def _straight_through(x):  # a deliberate non-derivative: the rule must win over the transform
    return sign(x), lambda dy: (None, dy)


def test_rule_overrides_the_transform_of_a_python_function():
    assert bytegrad.gradient(lambda x: 3.0 * sign(x), -0.5) == (3.0,)
    assert bytegrad.gradient(lambda x: sign(x) * sign(x), 2.0) == (2.0,)


def test_the_decorator_returns_the_rule_itself():
    y, back = _softplus_rule(0.5)
    assert y == guarded_softplus(0.5)
    assert back(1.0)[1] == pytest.approx(1.0 / (1.0 + math.exp(-0.5)))


# ---------------------------------------------------------------------------
# (b) a C function without a rule
# ---------------------------------------------------------------------------

def test_rule_for_a_ufunc_without_one(restore_rules):
    ndtr = scipy.special.ndtr
    assert rules.rule_for(ndtr) is None

    def f(x):  # fresh code: nothing compiled before the rule existed is reused
        return np.sum(ndtr(x) * x)

    with pytest.raises(bytegrad.NoRuleError):
        bytegrad.gradient(f, arr(4))

    @bytegrad.rule(ndtr)
    def _(x):
        return ndtr(x), lambda dy: (None, dy * normal_pdf(x))

    check_grad(f, arr(4))
    check_grad(lambda x: ndtr(x) ** 2, 0.4)


def test_defrule_is_the_functional_form(restore_rules):
    log_ndtr = scipy.special.log_ndtr
    assert rules.rule_for(log_ndtr) is None
    r = bytegrad.defrule(log_ndtr, lambda x: (log_ndtr(x),
                                              lambda dy: (None, dy * normal_pdf(x) / scipy.special.ndtr(x))))
    assert callable(r)
    check_grad(lambda x: log_ndtr(x) * x, -1.2)
    check_grad(lambda x: np.sum(log_ndtr(x)), arr(3, seed=2))


# ---------------------------------------------------------------------------
# (c) a method, also on subclasses that inherit it; (d) a callable object
# ---------------------------------------------------------------------------

class Spring:
    def __init__(self, k):
        self.k = k

    def energy(self, x):
        try:  # untransformable on purpose: only the rule can differentiate it
            return 0.5 * self.k * x * x
        finally:
            pass


class StiffSpring(Spring):  # inherits energy and so its rule
    pass


class CubicSpring(Spring):  # overrides energy: the rule of Spring.energy does not apply
    def energy(self, x):
        return self.k * x * x * x


@bytegrad.rule(Spring.energy)
def _energy(self, x):  # self is the first argument; its gradient is None here
    return self.energy(x), lambda dy: (None, None, dy * self.k * x)


@pytest.mark.parametrize("cls", [Spring, StiffSpring, CubicSpring])
def test_rule_of_a_method_applies_to_obj_method_calls(cls):
    s = cls(3.0)

    def f(x):
        return s.energy(x) + x

    check_grad(f, 0.7)


def test_rule_of_a_method_with_the_object_as_an_argument():
    def f(s, x):
        return s.energy(x) * x

    for s in (Spring(2.0), StiffSpring(5.0)):
        g = bytegrad.gradient(f, s, 1.5)[1]
        assert g == pytest.approx(fd_gradient(lambda x: f(s, x), (1.5,), 0))


class Affine:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self, x):
        with open(__file__):  # a with statement: untransformable, so the rule must apply
            return self.a * x + self.b


@bytegrad.rule(Affine.__call__)
def _affine(self, x):
    return self(x), lambda dy: (None, None, dy * self.a)


def test_rule_of_call_applies_to_callable_objects():
    m = Affine(np.array([2.0, -1.0, 0.5]), 1.0)
    check_grad(lambda x: np.sum(m(x) ** 2), arr(3))
    check_grad(lambda x: np.sum(Affine(-3.0, 0.0)(x)), arr(3, seed=1))


# ---------------------------------------------------------------------------
# wrong rules and wrong registrations: errors naming the rule, the callee, the fix
# ---------------------------------------------------------------------------

def square(x, y):
    return x * x * y


def test_pullback_returning_too_few_gradients_is_named():
    def short(x, y):
        return square(x, y), lambda dy: (dy * 2 * x * y,)  # forgot d_f and d_y

    bytegrad.defrule(square, short)
    with pytest.raises(bytegrad.RuleError) as e:
        bytegrad.gradient(lambda x: square(x, 2.0), 1.5)
    msg = str(e.value)
    assert "short" in msg and "square" in msg
    assert "2 positional argument" in msg and "tuple of 3" in msg
    assert "lambda dy: (None, d1, d2)" in msg


def cube(x):
    return x ** 3


def test_pullback_returning_a_bare_gradient_is_named():
    bytegrad.defrule(cube, lambda x: (cube(x), lambda dy: 3 * x * x * dy))
    with pytest.raises(bytegrad.RuleError, match=r"cube.*returned a float.*tuple of 2"):
        bytegrad.gradient(lambda x: cube(x) + x, 1.5)


def half(x):
    return x / 2


def test_rule_returning_no_pair_is_named():
    bytegrad.defrule(half, lambda x: half(x))
    with pytest.raises(bytegrad.RuleError, match=r"half.*pair \(y, back\)"):
        bytegrad.gradient(lambda x: half(x) * x, 1.5)


def test_rule_error_is_a_type_error():
    assert issubclass(bytegrad.RuleError, TypeError)


def test_a_keyword_reaches_a_rule_in_its_position():
    def scaled(x, scale=1.0):
        return scale * x

    bytegrad.defrule(scaled, lambda x, scale=1.0: (scaled(x, scale),
                                                    lambda dy: (None, dy * scale, dy * x)))
    check_grad(lambda x, s: scaled(x, scale=s), 1.5, 0.5)


def test_a_rule_gives_keyword_only_gradients_in_a_trailing_dict():
    def scaled(x, *, scale=1.0):
        return scale * x

    bytegrad.defrule(scaled, lambda x, *, scale=1.0: (scaled(x, scale=scale),
                                                      lambda dy: (None, dy * scale, {"scale": dy * x})))
    check_grad(lambda x, s: scaled(x, scale=s), 1.5, 0.5)


def test_the_librarys_own_rules_are_not_wrapped():
    assert not hasattr(rules.rule_for(math.sin), "__wrapped__")
    assert rules.rule_for(guarded_softplus).__wrapped__ is _softplus_rule


def test_registering_a_bound_method_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"bound method.*bytegrad.rule\(Spring.energy\)"):
        bytegrad.rule(Spring(1.0).energy)
    with pytest.raises(TypeError, match=r"bytegrad.rule\(list.append\)"):
        bytegrad.rule([].append)


def test_decorator_without_a_callee_or_with_a_non_callable_is_refused():
    with pytest.raises(TypeError, match=r"@bytegrad.rule\(f\)"):
        bytegrad.rule()
    with pytest.raises(TypeError, match="not callable"):
        bytegrad.rule(3.0)


# ---------------------------------------------------------------------------
# check_rule validates user rules
# ---------------------------------------------------------------------------

def bump(x):
    return np.exp(-x * x)


def bad_bump(x):
    return np.exp(-x * x)


@bytegrad.rule(bump)
def _bump(x):
    y = bump(x)
    return y, lambda dy: (None, -2.0 * x * y * dy)


@bytegrad.rule(bad_bump)
def _bad_bump(x):
    y = bad_bump(x)
    return y, lambda dy: (None, 2.0 * x * y * dy)  # the sign is wrong


def test_check_rule_passes_a_correct_user_rule():
    g, = check_rule(bump, arr(5))
    assert g.shape == (5,)


def test_check_rule_catches_a_wrong_user_rule():
    with pytest.raises(AssertionError, match="finite difference"):
        check_rule(bad_bump, arr(5))


# ---------------------------------------------------------------------------
# hook
# ---------------------------------------------------------------------------

def clip_unit(g):
    return np.clip(g, -1.0, 1.0)


def test_hook_clips_the_gradient():
    w = np.array([0.1, 2.0, -3.0, 0.5])
    g, = bytegrad.gradient(lambda w: np.sum(bytegrad.hook(clip_unit, w) ** 3), w)
    np.testing.assert_allclose(g, np.clip(3 * w * w, -1.0, 1.0), rtol=1e-12)


def test_hook_is_the_identity_going_forward():
    w = arr(4)
    assert bytegrad.hook(clip_unit, w) is w
    check_grad(lambda w: np.sum(np.sin(bytegrad.hook(lambda g: g, w))), w)


def test_hook_negating_reverses_the_gradient_of_what_it_wraps_only():
    def f(x, y):
        return math.sin(bytegrad.hook(operator.neg, x)) * y

    x, y = 0.3, 1.7
    gx, gy = bytegrad.gradient(f, x, y)
    assert gx == pytest.approx(-fd_gradient(f, (x, y), 0))
    assert gy == pytest.approx(fd_gradient(f, (x, y), 1))


def test_hook_sees_the_gradient():
    seen = []
    bytegrad.gradient(lambda x: 5.0 * bytegrad.hook(lambda g: seen.append(g) or g, x), 2.0)
    assert seen == [5.0]


# ---------------------------------------------------------------------------
# checkpoint
# ---------------------------------------------------------------------------

def block(x, w):
    return np.tanh(x * w) * w


def deep(x, w):
    return np.sum(bytegrad.checkpoint(block, bytegrad.checkpoint(block, x, w), w) ** 2)


def shallow(x, w):
    return np.sum(block(block(x, w), w) ** 2)


def test_checkpoint_gives_the_gradient_without_checkpoint():
    x, w = arr(5), 0.7
    g = check_grad(deep, x, w)
    ref = bytegrad.gradient(shallow, x, w)
    np.testing.assert_allclose(g[0], ref[0], rtol=1e-12)
    assert g[1] == pytest.approx(ref[1], rel=1e-12)


@pytest.mark.regression
def test_checkpoint_passes_keyword_arguments_on():
    """``checkpoint(f, x, w=w)``: the keyword reaches ``f`` and gets its gradient (the rule
    took none: a TypeError naming bytegrad's own function)."""
    by_name = lambda x, w: np.sum(bytegrad.checkpoint(block, x, w=w) ** 2)  # noqa: E731
    g = check_grad(by_name, arr(5), 0.7)
    ref = bytegrad.gradient(lambda x, w: np.sum(block(x, w) ** 2), arr(5), 0.7)
    np.testing.assert_allclose(g[0], ref[0], rtol=1e-12)
    assert g[1] == pytest.approx(ref[1], rel=1e-12)


def test_checkpoint_runs_the_function_again_in_the_reverse_pass():
    levels = {}
    runs = itertools.count()  # advanced by a C call, which no reverse pass undoes

    def counted(x, w):
        levels[next(runs)] = bytegrad.nestlevel()
        return np.sin(x) * w

    y, back = bytegrad.pullback(lambda x, w: np.sum(bytegrad.checkpoint(counted, x, w)), arr(3), 2.0)
    assert list(levels) == [0]
    gx, gw = back(1.0)
    assert next(runs) == 2  # it ran again
    np.testing.assert_allclose(gx, 2.0 * np.cos(arr(3)), rtol=1e-12)
    assert gw == pytest.approx(np.sum(np.sin(arr(3))), rel=1e-12)
    # both runs belong to a gradient computation; what the re-run stored into `levels`
    # is undone, as the user's objects hold what the plain call left in them
    assert levels == {0: 1}


def kept_after_forward(use_checkpoint):
    """Whether an intermediate of ``inner`` is still alive once the forward pass is done."""
    refs = []

    def inner(x):
        t = x * x
        refs.append(weakref.ref(stop_gradient(t)))  # by global name: a plain call
        return np.sum(t * t)

    call = (lambda x: bytegrad.checkpoint(inner, x)) if use_checkpoint else inner
    y, back = bytegrad.pullback(call, arr(4))
    return refs[0]() is not None


def test_checkpoint_keeps_no_tape_of_the_function():
    assert kept_after_forward(False)  # the tape holds the pullback of t * t, hence t
    assert not kept_after_forward(True)


def test_checkpoint_of_a_closure_over_a_differentiated_variable():
    def f(x, y):
        def inner(z):
            return x * z + x ** 3  # reads x from the enclosing function
        return bytegrad.checkpoint(inner, y * y) * x

    check_grad(f, 0.8, -1.3)


# ---------------------------------------------------------------------------
# nestlevel, stop_gradient
# ---------------------------------------------------------------------------

def scaled_by_level(x):
    return x * bytegrad.nestlevel()


def test_nestlevel_is_zero_outside_and_one_inside_a_gradient():
    assert bytegrad.nestlevel() == 0
    assert scaled_by_level(3.0) == 0.0
    assert bytegrad.gradient(scaled_by_level, 3.0) == (1.0,)
    assert bytegrad.pullback(scaled_by_level, 3.0)[0] == 3.0
    assert bytegrad.nestlevel() == 0


def test_nestlevel_through_its_rule():
    y, back = bytegrad.pullback(bytegrad.nestlevel)
    assert y == 1 and back(1.0) == ()


def test_nestlevel_is_zero_again_after_an_error():
    with pytest.raises(ZeroDivisionError):
        bytegrad.gradient(lambda x: x / 0.0, 1.0)
    assert bytegrad.nestlevel() == 0


def test_stop_gradient_through_its_rule():
    y, back = bytegrad.pullback(bytegrad.stop_gradient, 2.5)
    assert y == 2.5 and back(1.0) == (None,)
    assert bytegrad.gradient(lambda x, sg: sg(x) * x, 2.5, bytegrad.stop_gradient) == (2.5, None)


# ---------------------------------------------------------------------------
# checkpoint and rules of functions whose arguments or results are changed in place
# ---------------------------------------------------------------------------

def blk(a, w):
    return np.tanh(a * w)

def f_ckpt(x, w):
    a = x.copy()
    a[1] = a[0] * 2
    y = bytegrad.checkpoint(blk, a, w)
    a[0] = 7.0 * w
    y[2] = y[2] * a[0]
    return np.sum(y * y) + np.sum(a)

@pytest.mark.regression
def test_checkpoint_mutated():
    check_stateful(f_ckpt, np.array([0.3, -0.2, 0.5]), 0.7)

def f_ckpt2(x, w):
    a = x.copy()
    y = bytegrad.checkpoint(blk, a, w)
    a *= 3.0
    return np.sum(y) + np.sum(a * a)

@pytest.mark.regression
def test_checkpoint_arg_mutated_after():
    check_stateful(f_ckpt2, np.array([0.3, -0.2, 0.5]), 0.7)

# custom rule on user function receiving mutable object
def scale_sum(v):
    return float(np.sum(v * v))

@bytegrad.rule(scale_sum)
def _ss(v):
    return scale_sum(v), lambda dy: (None, 2 * dy * v)

def f_rule_mut(x):
    a = x.copy()
    s = scale_sum(a)
    a[0] = 10.0
    return s + np.sum(a)

@pytest.mark.regression
def test_rule_arg_mutated_after():
    check_stateful(f_rule_mut, np.array([1., 2., 3.]))

def f_rule_mut_user(x):
    s = scale_sum(x)
    x[0] = 3.0 * x[1]
    return s + np.sum(x * x)

@pytest.mark.regression
def test_rule_user_arg_mutated_after():
    check_stateful(f_rule_mut_user, np.array([1., 2., 3.]))

def make_pair(v):
    return [v * 2.0, v * 3.0]

@bytegrad.rule(make_pair)
def _mp(v):
    return make_pair(v), lambda dy: (None, 2 * (0 if dy[0] is None else dy[0]) + 3 * (0 if dy[1] is None else dy[1]))

def f_rule_ret_list(x):
    p = make_pair(x)
    p[0] = p[0] * p[1]
    p.append(x)
    return p[0] + p[1] + p[2]

@pytest.mark.regression
def test_rule_returns_list_mutated():
    check_stateful(f_rule_ret_list, 1.3)

def make_arr(v):
    return np.array([v, 2 * v])

@bytegrad.rule(make_arr)
def _ma(v):
    return make_arr(v), lambda dy: (None, dy[0] + 2 * dy[1])

def f_rule_ret_arr(x):
    a = make_arr(x)
    a[0] = a[1] * a[0]
    a += 1.0
    return np.sum(a * a)

@pytest.mark.regression
def test_rule_returns_array_mutated():
    check_stateful(f_rule_ret_arr, 1.3)


@pytest.mark.regression
def test_an_override_replaces_the_values_on_the_tape_too(restore_rules):
    import math

    @bytegrad.rule(math.sin, override=True)
    def _(x):
        return math.sin(x), lambda dy: (None, dy * 100.0)  # (math.sin's values went on the tape)
    assert bytegrad.gradient(lambda x: math.sin(x), 0.3) == (100.0,)
    assert bytegrad.gradient(lambda x: math.sin(x), np.float32(0.3)) == (100.0,)
