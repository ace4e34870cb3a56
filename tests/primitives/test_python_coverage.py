"""docs/python.md is generated from the rule registry and must match it."""
import subprocess
import sys

from bytegrad.primitives import python_coverage


def _names(page):
    return {line for line in page.splitlines() if line.startswith("|") or "`" in line}


def test_python_coverage_page_is_current():
    """On the version the page was made on, it is exactly what the registry gives; on
    another, every line both versions have is the same (their modules' names differ)."""
    with open(python_coverage.path()) as f:
        on_disk = f.read()
    # rendered as the command renders it, in a process of its own (tests register rules)
    page = subprocess.run([sys.executable, "-c", "from bytegrad.primitives import python_coverage as p; "
                           "print(p.render(), end='')"], capture_output=True, text=True, check=True).stdout
    if f"on CPython {python_coverage.version()}" in on_disk:
        assert on_disk == page, "docs/python.md is stale: run `python -m bytegrad.primitives.python_coverage`"
    else:
        shared = _names(on_disk) & _names(page)
        assert len(shared) > 0.8 * len(_names(page)), "docs/python.md is stale for this version too"


def test_the_page_classifies_the_standard_library():
    entries = python_coverage._entries()
    assert "functools.reduce" in entries["rule"] and "bisect.bisect_left" in entries["plain"]
    assert "set.add" in entries["refused"] and "collections.deque" in entries["refused"]
    assert "statistics.fmean" in entries["python"]
