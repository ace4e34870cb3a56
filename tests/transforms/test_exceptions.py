"""``try``/``except``/``else``/``finally``, ``raise`` and ``with``: lifted with catch
edges (a statement that may raise inside a ``try`` ends its block with ``br h (…)
on raise``), run natively (an exception-table entry per such block), and
differentiated along the path the call took: the reverse pass leaves out a
statement that raised and carries gradients from the handler back to the values
computed before the raise."""
from __future__ import annotations

import contextlib
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from checks import check_grad


def guarded_log(x, y):
    try:
        z = x * y
        w = math.log(z)
    except ValueError:
        w = x * 3.0
    else:
        w = w * y
    finally:
        w = w + y
    return w


@settings(max_examples=30, deadline=None)
@given(x=st.floats(-3, 3).filter(lambda t: abs(t) > 1e-2), y=st.floats(0.1, 3))
def test_the_gradient_follows_the_handler_or_the_else_arm(x, y):
    check_grad(guarded_log, x, y)


def test_the_lifted_ir_shows_the_catch_edges():
    text = str(bytegrad.stages(guarded_log).lifted)
    assert "on raise" in text and "ops.exc_match" in text


def _checked_sqrt(a):
    b = a * 2.0  # computed, then the callee raises: it leaves nothing on the tape
    if b < 0:
        raise ValueError("negative")
    return math.sqrt(b)


def callee_raises(x):
    a = x * x - 1.0
    try:
        r = _checked_sqrt(a) * x
    except ValueError as e:
        r = a * 3.0 + len(e.args)
    return r


@pytest.mark.parametrize("x", [2.0, 0.5, -0.5, -2.0])
def test_a_value_computed_before_the_raise_gets_its_gradient(x):
    check_grad(callee_raises, x)


def nested(x, n):
    try:
        try:
            if n == 0:
                raise KeyError("zero")
            y = x / n
        except KeyError:
            y = x * x
            raise TypeError("again") from None
        finally:
            x = x * 2.0
    except TypeError:
        y = y + x
    return y * x


@pytest.mark.parametrize("n", [0, 3])
def test_nested_handlers_and_a_raise_from_a_handler(n):
    check_grad(lambda x: nested(x, n), 1.7)


def reraised(x):
    try:
        try:
            return math.log(x)
        except ValueError:
            raise
    except ValueError:
        return x * 5.0


@pytest.mark.parametrize("x", [2.0, -2.0])
def test_a_bare_raise_reraises_what_is_handled(x):
    check_grad(reraised, x)


class Scaled:
    """A context manager whose ``__enter__`` computes from a differentiable value."""

    def __init__(self, k, suppress=False):
        self.k, self.suppress = k, suppress

    def __enter__(self):
        return self.k * 2.0

    def __exit__(self, kind, exc, tb):
        return self.suppress


def with_scaled(x, k, suppress):
    y = x
    with Scaled(k, suppress) as v:
        y = x * v
        if x > 1.0:
            y = y / (x - 3.0) if x < 2.0 else math.log(-x)  # (raises for x >= 2)
    return y + k


@pytest.mark.parametrize("x", [0.5, 1.5, 2.5])
def test_with_and_an_exit_that_suppresses(x):
    check_grad(lambda x, k: with_scaled(x, k, True), x, 1.3)


def test_an_exception_that_exit_does_not_suppress_propagates():
    with pytest.raises(ValueError):
        bytegrad.gradient(lambda x, k: with_scaled(x, k, False), 2.5, 1.3)


def library_managers(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(x) * x
    with contextlib.suppress(ZeroDivisionError):
        scale = float(x[0]) / int(x[0] > 1.5)  # (ZeroDivisionError where x[0] <= 1.5)
        y = y * scale
    return np.sum(np.where(np.isfinite(y), y, 0.0))


@pytest.mark.parametrize("x0", [2.0, 1.0])
def test_numpy_errstate_and_contextlib_suppress(x0):
    check_grad(library_managers, np.array([x0, 0.5, 3.0]))


def test_a_change_made_before_the_raise_stays_as_the_plain_call_leaves_it():
    def f(xs):
        try:
            xs.append(xs[0] * 2.0)
            raise RuntimeError
        except RuntimeError:
            return xs[-1] * 3.0
    xs = [1.5]
    assert bytegrad.gradient(f, xs) == ([6.0],) and xs == [1.5, 3.0]


def _write_then_raise(a, x):
    a[0] = x * 2.0
    if x > 0:
        raise ValueError("after the write")
    return a


def catches_a_callee_that_wrote(x):
    a = np.zeros(3)
    try:
        _write_then_raise(a, x)
    except ValueError:
        pass
    return np.sum(a * a) + x


def test_a_caught_callee_that_changed_something_before_it_raised_is_refused_not_wrong():
    """Its frame, and the tape that would reverse the write, are gone: the gradient
    is refused (the plain call's value and exception flow are kept until then)."""
    with pytest.raises(NotImplementedError, match=r"test_exceptions.py:\d+: .*_write_then_raise "
                                                   r"changed an object in place and then raised "
                                                   r"ValueError, which a try caught"):
        bytegrad.gradient(catches_a_callee_that_wrote, 1.5)
    check_grad(catches_a_callee_that_wrote, -1.5)  # (no raise: fine)
    with pytest.raises(ValueError, match="after the write"):  # not caught: the plain error
        bytegrad.gradient(lambda x: _write_then_raise(np.zeros(2), x)[0], 1.5)


@contextlib.contextmanager
def _doubled(k):
    yield k * 2.0


def test_a_generator_context_manager_is_differentiated():
    def f(x):
        with np.printoptions(precision=3), _doubled(3.0) as s:
            return np.sum(x ** 2) * s

    def through(x):
        with _doubled(x) as s:
            return s * x
    check_grad(f, np.array([1.0, 2.0]))
    check_grad(through, 1.5)
    check_grad(lambda x: _doubled(x).__enter__() * x, 1.5)


def _no_rule(x):
    return struct.pack("d", x)  # (a C function without a rule)


@pytest.mark.parametrize("handler", ["except Exception", "except TypeError", "except", "finally"])
def test_no_handler_of_the_users_takes_bytegrads_refusals(handler):
    """A NoRuleError raised inside a try would send the code down a path the plain call
    never takes: it goes on up, whatever the handler says."""
    body = "return x * 5.0" if handler != "finally" else "pass"
    scope = {"_no_rule": _no_rule}
    exec(f"def f(x):\n    try:\n        _no_rule(x)\n        return x * 2.0\n    {handler}:\n"
         f"        {body}\n", scope)
    with pytest.raises(bytegrad.NoRuleError, match="struct.pack"):
        bytegrad.gradient(scope["f"], 0.7)


class _Cleans:
    def __init__(self):
        self.cleaned = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleaned = True
        return True  # (suppresses everything: but not a refusal)


def test_a_refusal_inside_with_still_lets_exit_clean_up():
    m = _Cleans()

    def f(x):
        with m:
            _no_rule(x)
        return x
    with pytest.raises(bytegrad.NoRuleError):
        bytegrad.gradient(f, 0.7)
    assert m.cleaned


def truth_test_raises(x, log):
    try:
        y = x * 3.0
        if np.array([x, x]) > 0:  # ValueError: the truth value is ambiguous
            return y
    except ValueError:
        return x * 5.0
    finally:
        log.append("finally")


def test_a_truth_test_that_raises_inside_a_try_is_caught():
    log = []
    assert check_grad(lambda x: truth_test_raises(x, log), 0.7) == (5.0,)
    assert log and set(log) == {"finally"}


def test_a_raise_inside_a_handler_has_the_handled_exception_as_its_context():
    def f(x):
        try:
            try:
                1 / 0
            except ZeroDivisionError:
                raise ValueError("again")
        except ValueError as e:
            return x * (2.0 if isinstance(e.__context__, ZeroDivisionError) else 3.0)
    assert check_grad(f, 0.7) == (2.0,)


def test_a_callee_that_rebinds_a_nonlocal_and_raises_is_refused_not_wrong():
    def f(x):
        y = x

        def bump():
            nonlocal y
            y = y * x
            raise KeyError("after the store")
        try:
            bump()
        except KeyError:
            pass
        return y
    with pytest.raises(NotImplementedError, match="bump changed an object in place"):
        bytegrad.gradient(f, 0.7)


def test_an_exception_made_of_differentiable_values_is_made_plainly():
    def f(x):
        try:
            if x > 0:
                raise ValueError("too big", x * 2.0)
            return x
        except ValueError as e:
            return x * 3.0 + len(e.args)
    assert check_grad(f, 0.7) == (3.0,)


class _Carrying(Exception):
    def __init__(self, v):
        super().__init__("carries v")
        self.v = v


def _caught(payload, use):
    """``a ↦ use(e, a)`` of the ValueError made of ``payload(a)``, raised and caught."""
    def f(a):
        try:
            raise ValueError(payload(a))
        except ValueError as e:
            return use(e, a)
    f.__name__ = "_payload"
    return f


_payload = _caught(lambda a: a * a, lambda e, a: e.args[0] * a)


def _field(a):
    try:
        raise _Carrying(a * a)
    except _Carrying as e:
        return e.v * a


def _from_a_callee(a):
    def h(c):
        raise ValueError(c)
    try:
        h(a * a)
    except ValueError as e:
        return e.args[0] * a


_CARRIED = r"test_exceptions\.py:\d+: a derivative reaches a value read out of the exception " \
           r"\w+ made at .*test_exceptions\.py:\d+"


@pytest.mark.regression
@pytest.mark.parametrize("f", [_payload, _field, _from_a_callee], ids=lambda f: f.__name__)
def test_a_derivative_reaching_a_value_read_out_of_an_exception_is_refused_by_line(f):
    # (no gradient goes through an exception: both modes gave a * a, silently, for 3 a²)
    with pytest.raises(NotImplementedError, match=_CARRIED):
        bytegrad.grad(f)(1.3)


@pytest.mark.regression
@pytest.mark.parametrize("f", [_payload, _from_a_callee], ids=lambda f: f.__name__)
def test_forward_mode_takes_an_exceptions_arguments_tangents(f):
    y, dy = bytegrad.jvp(f, (1.3,), (1.0,))
    assert dy == pytest.approx(3 * 1.3 ** 2)


def test_forward_mode_refuses_a_field_your_exception_stored():
    with pytest.raises(NotImplementedError, match=_CARRIED):
        bytegrad.jvp(_field, (1.3,), (1.0,))


def test_an_exceptions_values_read_where_no_derivative_reaches_them_are_fine():
    def constant(a):  # (a constant the raise itself holds: no derivative reaches the exception)
        try:
            raise ValueError(2.0)
        except ValueError as e:
            return e.args[0] * a
    counted = _caught(lambda a: a * a, lambda e, a: a * len(e.args))
    assert check_grad(constant, 1.3) == (2.0,)
    assert bytegrad.jvp(constant, (1.3,), (1.0,)) == (2.6, 2.0)
    assert check_grad(counted, 1.3) == (1.0,)
    assert bytegrad.jvp(counted, (1.3,), (1.0,)) == (1.3, 1.0)


def _key_of_a_missing_entry(a):
    try:
        {}[a * 2.0]
    except KeyError as e:
        return e.args[0] * a


def _key_in_a_callee(a):
    def lookup(d, k):
        return d[k]
    try:
        lookup({"b": 1.0}, a * 2.0)
    except KeyError as e:
        return e.args[0] * a


@pytest.mark.regression
@pytest.mark.parametrize("f", [_key_of_a_missing_entry, _key_in_a_callee], ids=lambda f: f.__name__)
def test_the_key_of_a_key_error_c_code_raised(f):
    # (both modes gave 2 a for 4 a, silently: the key was read as a constant)
    assert bytegrad.jvp(f, (1.3,), (1.0,)) == (pytest.approx(2 * 1.3 ** 2), pytest.approx(4 * 1.3))
    with pytest.raises(NotImplementedError, match=_CARRIED):  # (the lookup raised: no pullback)
        bytegrad.grad(f)(1.3)


def _raises(c):
    if c > 0:
        raise ValueError(2.5)  # (a raise outside any try)
    return c


def _caught_constant(a):
    try:
        _raises(a)
    except ValueError as e:
        return e.args[0] * a


def _caught_plainly(a):
    try:
        _raises(1)  # (given nothing that carries a derivative: run plainly)
    except ValueError as e:
        v = e.args[0]
    return 2 * a if v > 1 else a


def _constant_key(a):
    try:
        {}[1.5]
    except KeyError as e:
        return e.args[0] * a


@pytest.mark.regression
@pytest.mark.parametrize("f, dfda", [(_caught_constant, 2.5), (_caught_plainly, 2.0), (_constant_key, 1.5)],
                         ids=["raised by a function of yours", "raised by one run plainly", "a constant key"])
def test_constants_read_out_of_exceptions_are_constants(f, dfda):
    # (a check of how the exception was raised refused these, in both modes)
    assert check_grad(f, 1.3) == (pytest.approx(dfda),)
    assert bytegrad.jvp(f, (1.3,), (1.0,))[1] == pytest.approx(dfda)


@pytest.mark.regression
def test_a_global_alone_on_a_line_raises_its_name_error():
    # (the read was dropped: the try's body went on, a wrong value and gradient; without
    # a try, no NameError)
    def probe(x):
        try:
            _a_name_no_module_defines  # noqa: B018, F821
            return x * 100.0
        except NameError:
            return x * 2.0

    def bare(x):
        _a_name_no_module_defines  # noqa: B018, F821
        return x
    assert bytegrad.value_and_grad(probe)(0.7) == pytest.approx((1.4, 2.0))
    assert bytegrad.jvp(probe, (0.7,), (1.0,)) == pytest.approx((1.4, 2.0))
    with pytest.raises(NameError, match="_a_name_no_module_defines"):
        bytegrad.grad(bare)(0.7)

