"""The adjoint pass (transforms/adjoint.py)."""
import math

import pytest

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
