"""docs/python.md is generated from the rule registry and must match it."""
import pytest

from bytegrad.primitives import python_coverage


def test_python_coverage_page_is_current():
    with open(python_coverage.path()) as f:
        on_disk = f.read()
    if f"on CPython {python_coverage.version()}" not in on_disk:
        pytest.skip("docs/python.md lists another CPython version's names")
    assert on_disk == python_coverage.render(), \
        "docs/python.md is stale: run `python -m bytegrad.primitives.python_coverage`"


def test_the_page_classifies_the_standard_library():
    entries = python_coverage._entries()
    assert "functools.reduce" in entries["rule"] and "bisect.bisect_left" in entries["plain"]
    assert "set.add" in entries["refused"] and "collections.deque" in entries["refused"]
    assert "statistics.fmean" in entries["python"]
