"""The rule library; importing it registers every rule."""
from . import operators, containers, cells, math, builtins  # noqa: F401
