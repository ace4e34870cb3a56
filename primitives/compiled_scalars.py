"""The scalar functions the compiled tier calls, each with its derivative as numba code.

Each entry gives the function's name in the generated source and, per argument, the
partial derivative as an expression of ``{x}`` (``{x0}``, ``{x1}`` for two arguments)
and ``{y}``, the result; the reverse sweep multiplies it by the result's adjoint.
"""
from __future__ import annotations

import math

import numpy as np

from ..runtime.compiled import ScalarFn, scalar_function

_SIGN = "(1.0 if {x} > 0 else -1.0 if {x} < 0 else 0.0)"
_POW = ("({x1} * {x0} ** ({x1} - 1.0) if {x1} != 0 else 0.0)",
        "({y} * math.log(abs({x0})) if {x0} != 0 else 0.0)")
_ATAN2 = ("{x1} / ({x0} * {x0} + {x1} * {x1})", "-{x0} / ({x0} * {x0} + {x1} * {x1})")
UNARY = {  # name: d/dx
    "sin": "math.cos({x})", "cos": "-math.sin({x})", "tan": "1.0 + {y} * {y}",
    "exp": "{y}", "log": "1.0 / {x}", "sqrt": "0.5 / {y}", "tanh": "1.0 - {y} * {y}",
    "sinh": "math.cosh({x})", "cosh": "math.sinh({x})", "log1p": "1.0 / (1.0 + {x})",
    "expm1": "{y} + 1.0", "log10": "1.0 / ({x} * math.log(10.0))", "log2": "1.0 / ({x} * math.log(2.0))",
}
_MATH_ONLY = {"atan": "1.0 / (1.0 + {x} * {x})", "asin": "1.0 / math.sqrt(1.0 - {x} * {x})",
              "acos": "-1.0 / math.sqrt(1.0 - {x} * {x})", "fabs": _SIGN,
              "erf": "1.1283791670955126 * math.exp(-{x} * {x})"}
_NUMPY_ONLY = {"arctan": _MATH_ONLY["atan"], "arcsin": _MATH_ONLY["asin"],
               "arccos": _MATH_ONLY["acos"], "abs": _SIGN, "absolute": _SIGN}

for _name, _d in {**UNARY, **_MATH_ONLY}.items():
    scalar_function(getattr(math, _name), ScalarFn(f"math.{_name}", (_d,)))
for _name, _d in {**UNARY, **_NUMPY_ONLY}.items():
    scalar_function(getattr(np, _name), ScalarFn(f"np.{_name}", (_d,)))
scalar_function(math.atan2, ScalarFn("math.atan2", _ATAN2))
scalar_function(np.arctan2, ScalarFn("np.arctan2", _ATAN2))
scalar_function(math.hypot, ScalarFn("math.hypot", ("{x0} / {y}", "{x1} / {y}")))
scalar_function(math.pow, ScalarFn("math.pow", _POW))
for _name in ("floor", "ceil", "trunc"):
    scalar_function(getattr(math, _name), ScalarFn(f"math.{_name}", ("0.0",), int_result=True))
