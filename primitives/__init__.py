"""The rule library; importing it registers every rule."""
from . import operators, containers, cells  # noqa: F401
