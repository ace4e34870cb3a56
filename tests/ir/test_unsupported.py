"""Constructs the lifter rejects: each raises `UnsupportedError` naming the
construct and pointing at ``file:line`` of the offending line, marked ``# <-``
below."""
from __future__ import annotations

import inspect

import pytest

from bytegrad.ir import UnsupportedError, lift


async def async_generator(x):  # <-
    yield x


async def async_def(x):  # <-
    return x


async def async_await(x):  # <-
    y = x
    return await y


def class_definition(x):
    y = x
    class Local:  # <-
        z = 1
    return Local, y


def except_star(x):
    try:
        y = 1 / x
    except* ZeroDivisionError:  # <-
        y = 0
    return y


CASES = [
    (except_star, "except*"),
    (async_generator, "async generator"),
    (async_def, "async def"),
    (async_await, "async def"),
    (class_definition, "class definition"),
]


def marked_line(f):
    lines, first = inspect.getsourcelines(f)
    (i,) = [i for i, line in enumerate(lines) if line.rstrip().endswith("# <-")]
    return first + i


@pytest.mark.parametrize("f, construct", CASES, ids=[f.__name__ for f, _ in CASES])
def test_rejected_with_construct_and_line(f, construct):
    with pytest.raises(UnsupportedError) as info:
        lift(f)
    e = info.value
    line = marked_line(f)
    assert construct in e.construct
    assert e.line == line
    assert e.filename == f.__code__.co_filename
    msg = str(e)
    assert construct in msg
    assert f"{f.__code__.co_filename}:{line}:" in msg
    assert f.__name__ in msg


def test_nested_unsupported_code_is_not_lifted():
    """Defining a generator or a function with ``try`` inside lifted code is fine:
    only the outer function's own bytecode is lifted."""
    from bytegrad.ir import function

    def f(xs):
        def safe(x):
            try:
                return 1 / x
            except ZeroDivisionError:
                return 0.0
        return sum(safe(x) for x in xs)
    g = function(lift(f), f.__globals__)
    assert g(f, [1, 0, 2]) == f([1, 0, 2])
