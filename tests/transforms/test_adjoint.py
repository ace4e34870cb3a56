"""The adjoint pass (transforms/adjoint.py)."""
import math
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bytegrad
from bytegrad.runtime import algebra


def _accums(f):
    """The statements of ``f``'s adjoint that call accum, as text."""
    return [line.strip() for line in str(bytegrad.stages(f).adjoint).splitlines()
            if "algebra.accum(" in line]


def _loop(x):
    s = x
    for _ in range(3):
        s = s * x
    return s + x


def _branch(x, c):
    y = math.sin(x) if c else x * 3.0
    return y + x


def test_a_slot_empty_on_every_path_takes_its_first_gradient_without_accum():
    """``first_into_empty``: the first gradient into a slot that is None on every path
    to it is a plain copy; where a loop or a join may bring one already, accum stays."""
    f = lambda x: x * math.sin(x)  # noqa: E731  (x's slot: two gradients, the first plain)
    assert len(_accums(f)) == 1
    assert bytegrad.grad(f)(0.7) == pytest.approx(math.sin(0.7) + 0.7 * math.cos(0.7))
    assert _accums(_loop)  # the loop adds into x's slot round after round
    assert bytegrad.grad(_loop)(1.5) == pytest.approx(4 * 1.5 ** 3 + 1)
    assert _accums(_branch)  # after the join, either arm may have added into x's slot
    assert bytegrad.grad(_branch)(0.4, True) == pytest.approx(math.cos(0.4) + 1)
    assert bytegrad.grad(_branch)(0.4, False) == pytest.approx(4.0)
    g = [1.0]
    assert algebra.accum(None, g) is g  # (why a copy is the same: None is zero)


def _arith(x, y, n):
    s = x * y - n
    for i in range(n):
        s = s * x + y - i
        s = s - x * s
    return s * 0.5 + y


_KINDS = {"float": float, "float64": np.float64, "int": int, "float32": np.float32}


@settings(max_examples=40, deadline=None)
@given(st.floats(-1.5, 1.5), st.floats(-1.5, 1.5), st.integers(0, 3),
       st.sampled_from(sorted(_KINDS)), st.sampled_from(sorted(_KINDS)))
def test_backs_written_out_give_what_their_calls_give(x, y, n, kx, ky):
    """`ops.InlineBack`: where a taped rule describes its fast paths, the adjoint of a short
    function writes them out (no call of ``mul_back``/``add_back``); the gradients equal
    those of the calls the adjoint of a long function keeps, for floats, NumPy scalars,
    ints and float32 alike, and central differences."""
    from bytegrad.transforms import adjoint
    args = (_KINDS[kx](round(x * 4) / 4 if kx == "int" else x), _KINDS[ky](y), n)
    written = str(bytegrad.stages(_arith).adjoint)
    assert "mul_back" not in written and "add_back" not in written and "mul_given" in written
    g_out = bytegrad.gradient(_arith, *args)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(adjoint, "_UNROLL_LIMIT", -1)
        fresh = types.FunctionType(_arith.__code__.replace(), globals())  # (its own transform)
        kept = str(bytegrad.stages(fresh).adjoint)
        assert "mul_back" in kept and "mul_given" not in kept
        g_call = bytegrad.gradient(fresh, *args)
    for a, b in zip(g_out, g_call):
        assert (a is None) == (b is None) and (a is None or a == pytest.approx(b, rel=1e-12, abs=1e-12))
    for i, (a, k) in enumerate(zip(args[:2], (kx, ky))):
        if k in ("int",):
            assert g_out[i] is None
            continue
        h = 1e-6
        up = [a if type(a) is int else float(a) for a in args]  # (in double precision)
        dn = list(up)
        up[i], dn[i] = float(a) + h, float(a) - h
        fd = (_arith(*up) - _arith(*dn)) / (2 * h)
        assert float(g_out[i]) == pytest.approx(fd, rel=1e-4 if k == "float32" else 1e-6, abs=1e-5)
