"""Activity analysis: what is recorded, and what stays a plain call.

Immutable numbers (ints, floats from arithmetic on numbers, ``len``, a loop counter
over a range) can never be changed in place, so an in-place operator on a number
(``s += t``) is arithmetic and spreads no hazard to the counters and indices it was
computed from.
"""
from math import sin

import numpy as np
import pytest

import bytegrad
from bytegrad.ir import Global, Var
from bytegrad.runtime.forward import compiled
from bytegrad.transforms.activity import scalars
from bytegrad.runtime.rules import scalar_kind
from bytegrad.transforms.reverse import resolve
from bytegrad.bench.cases import rosenbrock as rosen_rebound, rosenbrock_iadd as rosen_inplace

from checks import arr, check_grad, check_stateful


def _recorded(f, wrt=None):
    """The callees the forward pass records (calls of the runtime's rules or forward),
    in the transform where only the entry arguments ``wrt`` are active (default: all)."""
    fwd = compiled(f, wrt).stages.forward
    return [st for b in fwd.blocks for _, st in b.stmts if st.fn is not None
            and getattr(st.fn, "__module__", "").startswith("bytegrad.")
            and "ops" not in st.fn.__module__]


def test_in_place_accumulation_of_numbers_records_what_rebinding_records():
    assert len(_recorded(rosen_inplace)) == len(_recorded(rosen_rebound))
    x = arr(6)
    check_grad(rosen_inplace, x)
    check_grad(rosen_rebound, x)


def test_counters_and_bounds_of_a_loop_stay_plain():
    plain = [st.fn for b in compiled(rosen_inplace).stages.forward.blocks for _, st in b.stmts]
    lifted = compiled(rosen_inplace).stages.lifted
    g = rosen_inplace.__globals__
    numbers = scalars(lifted, lambda f: scalar_kind(resolve(f, g)))
    made = {v: st for b in lifted.blocks for v, st in b.stmts}
    names = {str(getattr(made[v].fn, "name", made[v].fn)) for v in numbers if v in made}
    assert {"len", "<built-in function sub>", "<built-in function add>"} <= names
    assert any(getattr(f, "name", None) == "range" for f in plain)  # range(...) itself is plain


def test_numbers_are_found_through_loops_and_branches():
    def f(x, n):
        s, k = 0.0, 0
        while k < n:
            s += sin(k) if k % 2 else float(k)
            k += 1
        return s * x
    lifted = compiled(f).stages.lifted
    numbers = scalars(lifted, lambda fn: scalar_kind(resolve(fn, f.__globals__)))
    args = lifted.blocks[0].args
    assert not any(a in numbers for a in args)  # arguments may be anything
    loop_args = [a for b in lifted.blocks[1:] for a in b.args]
    assert loop_args and all(a in numbers for a in loop_args)
    check_grad(f, 1.5, 5)


def test_in_place_accumulation_of_arrays_and_lists_still_tracks_aliases():
    def rows(x):
        s = 0.0
        for r in x:  # s is an array after the first row, then changed in place
            s += r
        return np.sum(s * s)
    check_grad(rows, arr((3, 4)))

    def nested(x):
        row = [0.0, 0.0]
        acc = []
        acc += [row]
        acc[-1][0] = x  # changes row through the list it was added to
        return row[0] * 3.0 + acc[0][1]
    check_stateful(nested, 1.5)


def test_an_index_array_changed_after_use_is_tracked():
    def f(x):
        i = np.array([0, 1])
        z = x[i]
        np.place(i, [True, True], [2, 2])
        return np.sum(z * x[i])
    check_stateful(f, arr(3))


# An object a pullback holds (an index, a mask, a constant matrix) changed in place
# afterwards by a call that is otherwise inactive: the change must be recorded, so
# that the pullback reads the object as it was.

def _clobber(a):
    a[:] = 1


def _index_fill(x):
    i = np.array([0, 2])
    y = x[i]
    i.fill(1)
    return np.sum(y * np.array([1.0, 5.0]))


def _index_imul(x):
    i = np.array([0, 2])
    y = x[i]
    i *= 0
    return np.sum(y * np.array([1.0, 5.0]))


def _index_out(x):
    i = np.array([0, 2])
    y = x[i]
    np.add(i, -1, out=i)
    return np.sum(y * np.array([1.0, 5.0]))


def _list_index_reverse(x):
    i = [0, 2]
    y = x[i]
    i.reverse()
    return np.sum(y * np.array([1.0, 5.0]))


def _index_user_function(x):
    i = np.array([0, 2])
    y = x[i]
    _clobber(i)
    return np.sum(y * np.array([1.0, 5.0]))


def _mask_fill(x):
    m = np.array([True, False, True])
    y = np.where(m, x, 0.0)
    m.fill(False)
    return np.sum(y * np.array([1.0, 5.0, 7.0]))


def _matrix_fill(x):
    W = np.array([[1.0, 2.0, 0.5], [3.0, 4.0, -1.0]])
    y = W @ x
    W.fill(0.0)
    return np.sum(y * y)


def _constant_out(x):
    coef = np.arange(3.0)
    y = np.dot(x, coef)
    np.multiply(coef, 10.0, out=coef)
    return y * y


@pytest.mark.regression
@pytest.mark.parametrize("f", [_index_fill, _index_imul, _index_out, _list_index_reverse,
                               _index_user_function, _mask_fill, _matrix_fill, _constant_out])
def test_an_object_a_pullback_holds_changed_later_by_an_inactive_call(f):
    check_stateful(f, np.array([0.5, -1.2, 2.0]))


def _rows_by_shape(A, x):
    n = A.shape[0]  # n shares a class with A (a pullback holds A), but range changes nothing
    s = 0.0
    for i in range(n):
        for j in range(n):
            s = s + A[i, j] * x[j]
    return s


@pytest.mark.regression
def test_a_bound_taken_from_an_array_keeps_its_loop_plain():
    text = str(bytegrad.stages(_rows_by_shape).forward)
    assert " = range(" in text and "forward(range" not in text
    check_grad(_rows_by_shape, arr((3, 3)), arr(3, seed=1))



def _term(x, i):
    return x * (i + 1) ** 2 / (i + 2)


def _series(x):
    s = 0.0
    for i in range(5):
        s = s + _term(x, i)
    return s


def test_a_call_given_an_argument_without_gradient_takes_the_transform_where_it_is_inactive():
    """``_term(x, i)`` with a loop counter ``i``: the call goes to the transform of
    ``_term`` where only ``x`` is active, which records nothing of ``i``."""
    from bytegrad.runtime.forward import forward_with
    calls = [st for b in compiled(_series).stages.forward.blocks for _, st in b.stmts
             if st.fn is forward_with]
    assert [st.args[:2] for st in calls] == [((0, 1), Global("_term"))]
    everything, partly = _recorded(_term), _recorded(_term, (0, 1))
    assert len(partly) == 2 and len(everything) > len(partly)  # x * …, … / …
    assert bytegrad.grad(_series)(0.7) == pytest.approx(sum((i + 1) ** 2 / (i + 2) for i in range(5)))
    check_grad(_series, 0.7)

