"""`only_reads` is a claim about each callable it marks (`transforms.kept` trusts it): called
on arrays, it changes none of them and returns nothing that shares memory with one.
Checked for every marked callable in the registry."""
import operator

import numpy as np
import pytest

import bytegrad  # noqa: F401  (registers the rules)
from bytegrad.runtime.rules import RULES

MARKED = sorted({f for f, r in RULES.items() if r.reads and r.returns != "scalar"},
                key=lambda f: (getattr(f, "__module__", None) or "", getattr(f, "__qualname__", repr(f))))


def _inputs(k):
    """Candidate operand lists of ``k`` arrays: floats in (0.2, 0.9) (every domain), ints,
    bools, datetimes, floats and ints, one element (what ``not`` takes)."""
    rng = np.random.default_rng(k)
    floats = [rng.uniform(0.2, 0.9, (4, 4)) for _ in range(k)]
    return (floats, [np.arange(1, 17).reshape(4, 4) + i for i in range(k)],
            [a > 0.5 for a in floats], [np.arange(16).reshape(4, 4).astype("M8[D]")] * k,
            floats[:1] + [np.arange(16).reshape(4, 4) % 3] * (k - 1), [np.array([0.5])] * k)


def _arrays(y):
    if isinstance(y, tuple):
        return [a for part in y for a in _arrays(part)]
    return [y] if isinstance(y, np.ndarray) else []


@pytest.mark.parametrize("f", MARKED, ids=lambda f: getattr(f, "__qualname__", repr(f)))
def test_a_callable_marked_only_reads_changes_and_shares_nothing(f):
    n = RULES[f].reads
    calls = 0
    for k in sorted({min(n, getattr(f, "nin", n)), 1}, reverse=True):
        for xs in _inputs(k):
            before = [x.copy() for x in xs]
            try:
                with np.errstate(all="ignore"):
                    y = f(*xs)
            except (TypeError, ValueError, np.exceptions.DTypePromotionError):
                continue
            calls += 1
            for x, b in zip(xs, before):
                assert np.array_equal(x, b), f"{f} changed an operand"
            for a in _arrays(y):
                assert not any(np.shares_memory(a, x) for x in xs), f"{f}'s result shares an operand's memory"
    assert calls, f"no operands found to call {f} with"


def test_the_arithmetic_operators_are_marked():
    assert all(RULES[f].reads == 2 for f in (operator.add, operator.mul, operator.matmul, np.add))
