"""The CPython version layer (ir/cpython): which interpreters bytegrad runs on, and
what its decoder and writer do on the running one.  The lifter's oracle
(test_lift_oracle) is the main test of each version's decoder and writer: the whole
suite runs on every supported version (``make test-all``)."""
from __future__ import annotations

import dis
import importlib
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

import bytegrad
from bytegrad.ir import UnsupportedError, cpython, emit, function, lift

ROOT = Path(bytegrad.__file__).resolve().parent


@pytest.mark.parametrize("version", [(3, 10, 13), (3, 14, 0)])
def test_an_unsupported_interpreter_is_refused_at_import(version):
    fake = f"import sys; sys.version_info = {version!r}; import bytegrad"
    r = subprocess.run([sys.executable, "-c", fake], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last == (f"ImportError: bytegrad supports CPython 3.11, 3.12, 3.13; this is "
                    f"{'%d.%d.%d' % version}. Install bytegrad in an environment made with one "
                    f"of those.")


def test_the_package_metadata_names_the_supported_versions():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    low, high = cpython.SUPPORTED[0], cpython.SUPPORTED[-1]
    assert meta["requires-python"] == f">={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}"
    named = {c.rsplit(" :: ", 1)[1] for c in meta["classifiers"]
             if c.startswith("Programming Language :: Python :: 3.")}
    assert named == {"%d.%d" % v for v in cpython.SUPPORTED}


def test_the_running_interpreter_is_supported_and_decoded_by_its_own_module():
    assert sys.version_info[:2] in cpython.SUPPORTED
    assert cpython.Decoder.__module__.endswith("py%d%d" % sys.version_info[:2])


def _names(code):
    return [i.opname for i in dis.get_instructions(code)]


def test_a_pullback_is_called_as_a_method_of_its_own():
    """`ops.pull` → ``LOAD_METHOD __call__`` (3.12+: ``LOAD_ATTR`` with the method
    flag), so a transformed function's pullback recurses in Python frames only."""
    def f(x):
        return g(x) * x
    adjoint = bytegrad.stages(f).adjoint  # (g is a global: a transformed call)
    code = emit(adjoint)
    calls = [i for i in dis.get_instructions(code) if i.argval == "__call__"]
    assert calls and all(i.opname in ("LOAD_METHOD", "LOAD_ATTR") for i in calls)


def test_a_transformed_functions_pullback_is_run_without_a_frame_of_its_own():
    """`ops.pull` tests for the runtime's `Pullback` and calls its adjoint directly
    (``pb.func(pb.args[0], dy)``): a recursion goes back one frame per level."""
    def f(x):
        return g(x) * x
    code = emit(bytegrad.stages(f).adjoint)
    names = [i.argval for i in dis.get_instructions(code)]
    assert "func" in names and "args" in names
    assert bytegrad.grad(f)(3.0) == pytest.approx(27.0)


def g(x):
    return x * x


@pytest.mark.parametrize("f, args", [
    (lambda x: +x, (-2,)),
    (lambda x: not x, ([],)),
    (lambda xs: xs[1:2], ([1, 2, 3],)),
])
def test_operators_stay_native_instructions(f, args):
    """Operators the interpreter has an instruction for are emitted as that instruction,
    whatever it is on this version (``+x`` is an intrinsic call on 3.12+)."""
    ir = lift(f)
    assert not {"CALL", "CALL_KW", "CALL_FUNCTION_EX"} & set(_names(emit(ir)))
    assert function(ir, {})(f, *args) == f(*args)


def _code_objects(modules):
    """Every code object of the functions and methods of ``modules``, nested ones too."""
    def inner(c):
        yield c
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                yield from inner(k)
    seen = {}
    for m in modules:
        for v in vars(importlib.import_module(m)).values():
            fs = [v] if isinstance(v, types.FunctionType) else \
                [x for x in vars(v).values() if isinstance(x, types.FunctionType)] if isinstance(v, type) else []
            for f in fs:
                seen.update((id(c), c) for c in inner(f.__code__))
    return list(seen.values())


def test_library_code_lifts_and_emits_or_is_refused_by_name():
    """The functions of a few standard and NumPy modules, on this interpreter: each is
    lifted and emitted again, or refused with `UnsupportedError`; nothing else."""
    lifted = 0
    for c in _code_objects(["json.encoder", "fractions", "statistics", "textwrap", "dataclasses",
                            "numpy._core.fromnumeric", "numpy.linalg._linalg"]):
        try:
            emit(lift(c))
            lifted += 1
        except UnsupportedError:
            pass
    assert lifted > 300
