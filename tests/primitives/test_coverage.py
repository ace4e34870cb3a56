"""docs/numpy.md is generated from the rule registry and must match it."""
from bytegrad.primitives import coverage


def test_numpy_coverage_page_is_current():
    with open(coverage.path()) as f:
        on_disk = f.read()
    assert on_disk == coverage.render(), \
        "docs/numpy.md is stale: run `python -m bytegrad.primitives.coverage`"
