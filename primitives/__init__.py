"""The rule library; importing it registers every rule."""
from . import operators, containers, cells, math, builtins, arrays  # noqa: F401
