"""Every callable registered as non-differentiable is a claim that its result carries no
gradient for any input.  This goes through the whole registry: each one is called on
float inputs (the first of a few argument shapes it accepts) and again with the
inputs moved by a small step; the result must hold no float at all (an int, a bool, a
string, a dtype, an index) or hold the same floats (piecewise constant: finite
differences are zero)."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import bytegrad
from bytegrad.runtime.errors import full_name
from bytegrad.runtime.rules import RULES

_X = np.random.default_rng(0).uniform(0.3, 2.0, 5)
_CALLS = [(_X,), (1.37,), (_X, _X * 0.7), (1.37, 0.61), (_X, 2), (1.37, 2), (_X, 0.5),
          ([1.37, 2.74],), ((1.37, 0.3),), (_X.reshape(5, 1),)]

# what no call on floats can judge, and why the claim holds
_BY_DESIGN = {
    "bytegrad.runtime.api.stop_gradient": "no gradient, by definition",
    "numpy.empty_like": "its values are whatever memory held, not functions of the input",
    "numpy._core._multiarray_umath.empty_like": "np.empty_like's C implementation (the same)",
    "bytegrad.ir.ops.raise_from": "it gives an exception its cause (the check passes floats)",
    "bytegrad.runtime.nesting._kept": "a copy of the arguments, compared after the call, which no "
                                      "gradient may reach",
}


def _moved(args, h):
    def move(a):
        if isinstance(a, float):
            return a + h
        if isinstance(a, np.ndarray):
            return a * (1 + h)
        if isinstance(a, (list, tuple)):
            return type(a)(v + h for v in a)
        return a
    return tuple(map(move, args))


def _floats(y):
    """The floats ``y`` holds, flattened (to compare two results)."""
    if isinstance(y, (float, complex, np.floating, np.complexfloating)):
        return [complex(y)]
    if isinstance(y, np.ndarray):
        return list(y.ravel()) if y.dtype.kind in "fc" else []
    if isinstance(y, (list, tuple, set, frozenset)):
        return [v for item in (sorted(y, key=repr) if isinstance(y, (set, frozenset)) else y)
                for v in _floats(item)]
    if isinstance(y, dict):
        return [v for item in y.values() for v in _floats(item)]
    return []


def _judge(f):
    """None if the claim holds on the first argument shape ``f`` accepts, else what
    changed; ``...`` where ``f`` accepts none of them (ints only, a shape, a string)."""
    for args in _CALLS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y0 = _floats(f(*copy.deepcopy(args)))
                y1 = _floats(f(*copy.deepcopy(_moved(args, 1e-7))))
        except Exception:
            continue
        same = len(y0) == len(y1) and all(a == b or (a != a and b != b) for a, b in zip(y0, y1))
        return None if same else f"{full_name(f)}{tuple(type(a).__name__ for a in args)}: {y0[:3]} → {y1[:3]}"
    return ...


def _claims():
    out = []
    for f, r in RULES.items():
        name = full_name(f)
        if r.nondiff and name not in _BY_DESIGN and not name.startswith("numpy.random") \
                and "Generator" not in name:  # (draws: their parameters' rules are tested)
            out.append(f)
    return out


def test_every_non_differentiable_claim_holds():
    verdicts = list(map(_judge, _claims()))
    assert sum(v is not ... for v in verdicts) > 100  # (most take floats: the check is real)
    wrong = [w for w in verdicts if w is not None and w is not ...]
    assert not wrong, "registered as non-differentiable, but the result moves with the input:\n" \
        + "\n".join(wrong)


def test_the_check_can_fail():
    assert _judge(np.sin) is not None and _judge(lambda x: {x}) is not None
    assert _judge(np.floor) is None and _judge(len) is None and _judge(range) is ...
