"""The rule library; importing it registers every rule."""
from . import operators, containers, cells, math, builtins, arrays  # noqa: F401
from . import np_reductions, np_linalg  # noqa: F401
