"""Type inference for the compiled tier: each value's type, the refusals, and the CLI
stages that show the typed IR and the fused gradient's source."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import bytegrad

from bytegrad.runtime.compiled import _FUNCS
from bytegrad.transforms.typed import (BOOL, F32, F64, I64, Array, NotCompilableError, Tuple, infer,
                                       parse, promote)
from compiled_programs import matvec_sum, ode

import operator

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compiled_programs.py")


def types_of(f, *argtypes):
    t = infer(f, argtypes, _FUNCS)
    return {st.line: [] for _, _, st in t.ir.statements()}, t


def test_values_get_the_types_numba_gives_them():
    def f(x, n, a):
        k = n // 2
        y = x[k] * a
        z = n / 2
        return y + z + (n > 1)
    t = infer(f, (Array("float32", 1), I64, F64), _FUNCS)
    by_line = {}
    for _, v, st in t.ir.statements():
        by_line.setdefault(st.line, []).append(t.types[v])
    first = f.__code__.co_firstlineno
    assert by_line[first + 1] == [I64]
    assert by_line[first + 2] == [F32, F64]
    assert by_line[first + 3] == [F64]
    assert by_line[first + 4] == [F64, BOOL, F64]


def test_promotion_follows_numba():
    assert promote(I64, I64) == I64 and promote(BOOL, BOOL) == I64
    assert promote(I64, I64, operator.truediv) == F64
    assert promote(F32, I64) == F64 and promote(F32, F32) == F32 and promote(F32, F64) == F64


def test_a_variable_holding_two_kinds_is_refused_at_its_line():
    def f(x, a):
        y = x
        if a > 0:
            y = a
        return y * 2.0
    with pytest.raises(NotCompilableError) as e:
        infer(f, (Array("float64", 1), F64), _FUNCS)
    assert "float64[:] on one path and a float64 on another" in str(e.value)


@pytest.mark.regression
def test_an_int_to_a_power_that_may_be_negative_is_refused():
    # (typed int, as numba computes it: 2 ** -1 was 0, a wrong value and gradient, silently)
    def f(x, n):
        return x * 2 ** n

    def squared(x, n):
        return x * n ** 2
    with pytest.raises(NotCompilableError) as e:
        infer(f, (F64, I64), _FUNCS)
    assert e.value.line == f.__code__.co_firstlineno + 1 and "2 ** -1 is 0.5" in str(e.value)
    t = infer(squared, (F64, I64), _FUNCS)
    assert t.types[t.ir.blocks[0].stmts[0][0]] == I64  # (n ** 2: a power known not negative)
    assert bytegrad.value_and_grad(f, jit="auto")(1.5, -1) == (0.75, 0.5)


def test_an_array_row_is_refused_by_its_line():
    def f(A):
        return A[0][1]
    with pytest.raises(NotCompilableError) as e:
        infer(f, (Array("float64", 2),), _FUNCS)
    assert e.value.line == f.__code__.co_firstlineno + 1 and "a row" in str(e.value)


def test_calls_are_inlined_with_the_callees_file():
    t = infer(matvec_sum, (Array("float64", 2), Array("float64", 1)), _FUNCS)
    assert {repr(t.types[a]) for a in t.ir.blocks[0].args[1:]} == {"float64[:, :]", "float64[:]"}
    from compiled_programs import calls_and_builtins, _helper
    t = infer(calls_and_builtins, (Array("float64", 1),), _FUNCS)
    lines = {st.line for _, _, st in t.ir.statements()}
    assert _helper.__code__.co_firstlineno + 1 in lines


def test_parse_reads_what_the_printer_writes():
    sig = (Array("float64", 3), F32, Tuple((I64, BOOL, Array("float32", 1))))
    assert parse(", ".join(map(repr, sig))) == sig
    with pytest.raises(ValueError, match="complex128"):
        parse("complex128")


def run_cli(*argv):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "bytegrad", "ir", "dump", *argv],
                          capture_output=True, text=True, env=env)


def test_cli_dumps_the_typed_ir_and_the_fused_source(tmp_path):
    r = run_cli(f"{PROGRAMS}:ode", "--stage", "typed", "--args", "float64, float64, float64")
    assert r.returncode == 0, r.stderr
    assert "math.sin(%" in r.stdout and ": float64" in r.stdout and "# typed IR of ode" in r.stdout
    r = run_cli(f"{PROGRAMS}:ode", "--stage", "fused", "--args", "float64, float64, float64",
                "--argnums", "0")
    assert r.returncode == 0, r.stderr
    path = tmp_path / "fused_ode.py"
    path.write_text(r.stdout.split("\n", 1)[1])
    spec = importlib.util.spec_from_file_location("fused_ode", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.fused(0.5, 1.2, 0.7, 1.0, 4, 4)
    assert out[0] == ode(0.5, 1.2, 0.7)
    h = 1e-6
    assert abs(out[1] - (ode(0.5 + h, 1.2, 0.7) - ode(0.5 - h, 1.2, 0.7)) / (2 * h)) < 1e-6
    r = run_cli(f"{PROGRAMS}:ode", "--stage", "typed")
    assert r.returncode != 0 and "--args" in r.stderr
