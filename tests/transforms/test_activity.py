"""Activity analysis: what is recorded, and what stays a plain call.

Immutable numbers (ints, floats from arithmetic on numbers, ``len``, a loop counter
over a range) can never be changed in place, so an in-place operator on a number
(``s += t``) is arithmetic and spreads no hazard to the counters and indices it was
computed from.
"""
import functools
import heapq
import itertools
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

import changers
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


def _index_changed_by_another_modules_function(x):
    i = np.array([0, 0, 2])
    y = x[i]
    changers.reverse_in_place(i)  # (a constant callee: Python code, which may change i)
    return np.sum(y * np.array([1.0, 2.0, 3.0]))


def _reverse_acc(acc, _):
    changers.reverse_in_place(acc)
    return acc


def _index_changed_by_code_a_rule_runs(x):
    i = np.array([0, 0, 2])
    y = x[i]
    functools.reduce(_reverse_acc, [1], i)  # (reduce's rule runs _reverse_acc on i)
    return np.sum(y * np.array([1.0, 2.0, 3.0]))


@pytest.mark.regression
@pytest.mark.parametrize("f", [_index_fill, _index_imul, _index_out, _list_index_reverse,
                               _index_user_function, _mask_fill, _matrix_fill, _constant_out,
                               _index_changed_by_another_modules_function,
                               _index_changed_by_code_a_rule_runs])
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



# -- values changed in place anywhere ------------------------------------------------
#
# Whatever changes a value in place (the same function, a callee, the caller through the
# returned value or a part of it, a closure, a generator's consumer, a method,
# ``f(*args, **kw)``, ``out=``, a rule that runs the user's code), the reverse pass finds
# the gradient of what the value held before.  A static pass that leaves some pullbacks
# unwatched (issue 9, "mutation as its own pass") must keep every one of these right.


def _zero_first(a):
    a[0] = 0.0


def _inner_tanh(x):
    return np.tanh(x) * 2.0


def _inner_pair(x):
    h = np.tanh(x) * 2.0
    return h, h[1:]


def _inner_listed(x):
    h = np.sin(x) * 2.0
    return [h, x]


def _yields(x):
    h = np.sin(x) * 2.0
    yield h
    yield h * x


def _changed_by_a_callee(x):
    h = np.sin(x) * 1.5
    _zero_first(h)
    return np.sum(h * x)


def _changed_through_apply(x):
    h = np.sin(x) * 1.5
    fn, args = _zero_first, [h]
    fn(*args)
    return np.sum(h * x)


def _out_through_keywords(x):
    h = np.sin(x) * 1.5
    np.multiply(h, x, **{"out": h})
    return np.sum(h * x)


def _changed_by_a_method(x):
    h = np.sin(x) * 1.5
    h.fill(2.0)
    return np.sum(h * x)


def _sorted_unbound(x):
    h = np.sin(x) * 1.5
    np.ndarray.sort(h)
    return np.sum(h * x)


def _changed_by_a_closure(x):
    h = np.sin(x) * 1.5

    def clear():
        h[0] = 0.0
    clear()
    return np.sum(h * x)


def _changed_by_the_caller(x):
    h = _inner_tanh(x)
    h *= x
    return np.sum(h * x)


def _view_changed_by_the_caller(x):
    h, v = _inner_pair(x)
    v[0] = 3.0
    return np.sum(h * x)


def _item_changed_by_the_caller(x):
    items = _inner_listed(x)
    items[0][1] = 0.0
    return np.sum(items[0] * x)


def _yielded_and_changed(x):
    s = 0.0
    for h in _yields(x):
        h[0] = 1.0
        s = s + np.sum(h * x)
    return s


def _changed_in_a_loop(x):
    a = np.cos(x) * 1.0
    for i in range(3):
        b = a
        b[i] = b[i] * x[i]
    return np.sum(a * x)


def _changed_before_an_unchanged_callee(x):
    a = x * 1.0
    a[0] = 2.0 * x[1]
    return _mlp_like(a)


def _mlp_like(a):
    return np.sum(np.tanh(a) * a)


def _part_and_whole(x):
    y = x * 2.0
    return y[:1], y


def _part_changed_whole_read_later(x):
    t = _part_and_whole(x)
    t[0][0] = 0.0
    return np.sum(t[1] ** 2)


def _view_changed_base_read(x):
    v = (x * 2.0)[:1]
    v = _identity_view(v)
    v[0] = 0.0
    return np.sum(v.base ** 2)


def _identity_view(v):
    return v


def _changed_in_another_module(x):
    y = x * 2.0
    changers.zero_head(y)
    return np.sum(y ** 2)


def _changed_by_a_constructor_elsewhere(x):
    y = x * 2.0
    changers.Zeroing(y)
    return np.sum(y ** 2)


def _add_into(acc, a):
    acc[:2] += a
    return acc


def _reduced_into(x):
    acc = x * 2.0
    functools.reduce(_add_into, [x[:2], x[2:]], acc)
    return np.sum(acc ** 2)


def _accumulated_into(x):
    acc = np.sin(x)
    for _ in itertools.accumulate([x[:2], x[2:]], _add_into, initial=acc):
        pass
    return np.sum(acc ** 2)


def _piece(v, a):
    changers.zero_head(a)
    return v * 2.0


def _piecewise_changes_its_extra_argument(x):
    y = x * 2.0
    np.piecewise(x, [x > 1.5], [_piece, 0.0], y)
    return np.sum(y ** 2)


def _key_changes_its_item(x):
    y = x * 2.0
    heapq.nlargest(1, [y], key=lambda a: changers.zero_head(a)[1])
    return np.sum(y ** 2)


@pytest.mark.parametrize("f", [_changed_by_a_callee, _changed_through_apply,
                               _out_through_keywords, _changed_by_a_method, _sorted_unbound,
                               _changed_by_a_closure, _changed_by_the_caller,
                               _view_changed_by_the_caller, _item_changed_by_the_caller,
                               _yielded_and_changed, _changed_in_a_loop,
                               _changed_before_an_unchanged_callee,
                               _part_changed_whole_read_later, _view_changed_base_read,
                               _changed_in_another_module, _changed_by_a_constructor_elsewhere,
                               _reduced_into, _accumulated_into,
                               _piecewise_changes_its_extra_argument, _key_changes_its_item])
def test_a_value_changed_in_place_anywhere_keeps_its_gradient(f):
    check_stateful(f, arr(4, seed=3) + 0.5)


def _reaches(fn, targets, depth=4, seen=None):
    """Whether function ``fn`` may call one of ``targets`` (by name, through the module
    functions and closures it refers to, ``depth`` deep)."""
    import types
    seen = set() if seen is None else seen
    code = getattr(fn, "__code__", None)
    if code is None or code in seen or depth < 0:
        return False
    seen.add(code)
    todo, names = [code], set()
    while todo:
        c = todo.pop()
        names |= set(c.co_names)
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    if names & targets:
        return True
    called = [fn.__globals__.get(n) for n in names]
    for cell in fn.__closure__ or ():
        try:
            called.append(cell.cell_contents)
        except ValueError:
            pass
    return any(isinstance(g, types.FunctionType) and g.__module__.startswith("bytegrad")
               and _reaches(g, targets, depth - 1, seen) for g in called)


def test_every_rule_that_changes_an_argument_says_so():
    """The analysis reads `changes_arguments` and `effectful` to find what may change in
    place; a rule that marks an object in the shadow (a change) and says neither would let
    its argument's maker go unwatched.  (``getattr``, and ``object.__getattribute__`` and
    ``type.__getattribute__`` as it, adopt an object's ``__dict__`` as its fields' gradient:
    no change.)"""
    from bytegrad.runtime.rules import RULES
    silent = sorted({getattr(f, "__qualname__", repr(f)) for f, r in list(RULES.items())
                     if r.fn is not None and not (r.effectful or r.changes_args)
                     and _reaches(r.fn, {"mark", "own", "rewrite", "overwrite", "array_update"})})
    assert silent == ["getattr", "object.__getattribute__", "type.__getattribute__"]
