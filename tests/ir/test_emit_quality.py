"""Performance sanity without timing anything: the lifter's output stays small and
the emitter turns operations back into native instructions, so emitted code does
the work of the original with about as many instructions."""
from __future__ import annotations

import dis
import math
import sys
import tracemalloc
import types
import weakref

import numpy as np
import pytest

import bytegrad

from bytegrad.ir import Global, emit, lift, ops
from test_lift_oracle import CORPUS


def instructions(code):
    return [i.opname for i in dis.get_instructions(code)]


def test_arithmetic_becomes_native_instructions():
    def f(x, y):
        z = x * y + 3.0 - x / y
        z **= 2
        return -z if z > 0 and x is not None else z @ y if x in y else y[1:2]
    ops_ = instructions(emit(lift(f)))
    assert "CALL" not in ops_
    assert {"BINARY_OP", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "UNARY_NEGATIVE",
            "BINARY_SUBSCR", "BUILD_SLICE"} <= set(ops_)


def test_attributes_items_and_containers_become_native_instructions():
    def f(o, xs):
        o.a = xs[0]
        xs[1] = o.b
        return (o.a, [xs], {o.b})
    ops_ = instructions(emit(lift(f)))
    assert "CALL" not in ops_
    assert {"LOAD_ATTR", "STORE_ATTR", "BINARY_SUBSCR", "STORE_SUBSCR",
            "BUILD_TUPLE", "BUILD_LIST", "BUILD_SET"} <= set(ops_)


def test_for_loop_is_lowered_to_for_iter():
    def f(x, n):
        s = 0.0
        for i in range(n):
            s += x * i
        return s
    ir = lift(f)
    calls = [st.fn for _, _, st in ir.statements() if getattr(st.fn, "__module__", "") != "_operator"]
    assert calls == [Global("range"), iter, ops.iterate]
    code = instructions(emit(ir))
    assert code.count("CALL") == 2  # range and iter; ops.iterate is lowered to FOR_ITER
    assert "FOR_ITER" in code


@pytest.mark.parametrize("f", [f for f, _ in CORPUS], ids=[f.__name__ for f, _ in CORPUS])
def test_emitted_code_is_not_much_bigger(f):
    before = len(instructions(f.__code__))
    after = len(instructions(emit(lift(f))))
    assert after <= 5 * before + 20


def test_unbound_checks_only_where_a_path_leaves_the_local_unassigned():
    checked = {f.__name__ for f, _ in CORPUS
               if any(st.fn is ops.bound for _, _, st in lift(f).statements())}
    assert checked == {"maybe_deleted", "maybe_assigned", "loop_variable_after_empty_loop",
                       "maybe_deleted_then_deleted", "maybe_assigned_in_loop",
                       "library_context_managers",  # (a with whose __exit__ may suppress)
                       "code_after_a_try_is_not_covered_by_it"}


def _generated(n):
    body = "\n".join(f"        t{i % 7} = s * {i} + t{(i + 3) % 7}" for i in range(n))
    src = (f"def g(x, n):\n    s = x\n" + "".join(f"    t{j} = {j}\n" for j in range(7)) +
           f"    for k in range(n):\n{body}\n        s = s + t0\n    return s\n")
    ns = {}
    exec(compile(src, "<generated>", "exec"), ns)
    return ns["g"]


def test_lifting_scales_linearly_and_keeps_only_live_loop_variables():
    sizes = {}
    for n in (50, 100, 200):
        ir = lift(_generated(n))
        sizes[n] = sum(1 for _ in ir.statements())
        assert len(ir.blocks) <= 4
        # the loop header carries the iterator, s and t0..t6, nothing else
        assert max(len(b.args) for b in ir.blocks[1:]) <= 9
    assert sizes[200] - sizes[100] == 2 * (sizes[100] - sizes[50])


def _scalar_program(x, n):
    s = 0.0
    for i in range(n):
        s += math.sin(x) * s - x ** 2 / (s * s + 2.0) + (n - i)
    return s * x


@pytest.mark.parametrize("args", [(0.7, 4), (np.float64(0.7), 3), (2, 3), (np.float32(0.7), 2)],
                         ids=["float", "float64", "int", "float32"])
def test_a_taped_rules_fast_path_is_inline_and_tapes_what_its_call_does(args, monkeypatch):
    """`ops.Inline`: where the operands are floats (or, for + and -, ints) the record's
    work is written inline (type tests, the operation, the pushes); any other operand
    takes the call.  Either
    way the result and the tape are the call's."""
    from bytegrad.runtime.forward import compiled
    emitter = sys.modules["bytegrad.ir.emit"]  # (the package exports the function `emit`)
    fwd = compiled(_scalar_program).stages.forward
    inline = emitter.emit(fwd)
    guards = [i.argval for i in dis.get_instructions(inline)]
    assert float in guards and int in guards  # (``n - i``: ints, active through n)
    monkeypatch.setattr(emitter, "_fast", lambda st: False)
    called = emitter.emit(fwd)
    run = lambda code: types.FunctionType(code, _scalar_program.__globals__)(_scalar_program, *args)
    (y1, tape1), (y2, tape2) = run(inline), run(called)
    assert y1 == y2 and len(tape1) == len(tape2)
    assert all(map(_same_entry, tape1, tape2))


def _same_entry(a, b):
    """Tape entries alike: the same object (a rule's marker), equal values, or pullbacks
    of the same kind (made anew per run)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    return a == b if type(a) in (int, float, np.float64, np.float32) else callable(a)


def _clearing(ir):
    """``ir`` marked as code where no value's end can be seen (as the adjoint is)."""
    ir.meta.clearable = None
    return ir


def test_a_local_is_cleared_after_its_last_use_where_no_code_can_see_it():
    def f(make, probe):
        a = make()
        n = len(a) + len(a)  # read twice: kept in a local, not on the stack
        return n + probe()
    ref = []

    def make():
        a = np.zeros(2)
        ref.append(weakref.ref(a))
        return a
    g = types.FunctionType(emit(_clearing(lift(f))), {"len": len})
    assert g(f, make, lambda: int(ref[0]() is None)) == 5  # freed before probe ran (%1 is f)
    g = types.FunctionType(emit(lift(f)), {"len": len})  # (by default, as Python: at the end)
    assert g(f, make, lambda: int(ref[-1]() is None)) == 4


def test_a_loop_body_clears_its_locals_and_makes_them_again():
    def f(xs, probe):
        s, dead = 0.0, 0
        for x in xs:
            a = np.full(1, x)
            s += a[0] * a[0]
            dead += probe()
        return s, dead
    refs = []

    def full(n, v):
        a = np.full(n, v)
        refs.append(weakref.ref(a))
        return a
    g = types.FunctionType(emit(_clearing(lift(f))), {"np": types.SimpleNamespace(full=full)})
    assert g(f, [1.0, 2.0, 3.0], lambda: int(refs[-1]() is None)) == (14.0, 3)


class _Counted:
    """An object whose end its class counts."""
    live = 0

    def __init__(self, v):
        self.v = v
        _Counted.live += 1

    def __del__(self):
        _Counted.live -= 1


@pytest.mark.regression
def test_other_objects_live_to_the_end_of_the_function_as_in_python():
    def f(x):
        t = _Counted(2.0)
        y = x * t.v + t.v  # (t's last read: as Python does, it lives on, and is counted)
        return y * (1 + _Counted.live)
    g = types.FunctionType(emit(lift(f)), {"_Counted": _Counted})
    assert g(f, 1.5) == f(1.5) == 10.0
    assert bytegrad.value_and_grad(f)(1.5) == (10.0, 4.0)


def test_a_gradient_holds_no_more_memory_than_its_primal_needs():
    """The forward pass frees the arrays the pullbacks do not keep as it goes, as the
    primal does; kept to the end of the function, the MLP's took 2.3 times the memory."""
    from bytegrad.bench.cases_numpy import _mlp_args, mlp
    args = _mlp_args(256, 256)
    g = bytegrad.grad(mlp, argnums=(0, 1, 2, 3))
    g(*args)  # (the gradients' arrays, cached for the next call, are not counted)

    def peak(fn):
        tracemalloc.start()
        try:
            fn()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak(lambda: g(*args)) <= 1.3 * peak(lambda: mlp(*args))
