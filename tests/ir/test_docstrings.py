"""Every example in a docstring runs, so the IR a docstring shows is the IR the code makes."""
import doctest
import importlib
import pkgutil

import pytest

import bytegrad

MODULES = sorted(m.name for m in pkgutil.walk_packages(bytegrad.__path__, "bytegrad.")
                 if not m.name.startswith(("bytegrad.tests", "bytegrad.bench", "bytegrad.__main__")))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} fail (run " \
                               f"python -m doctest -v on the module to see them)"
