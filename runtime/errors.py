"""Errors a user meets while differentiating, each naming the fix, and where in the
user's code they point."""
import os
import sys

from ..ir.ir import full_name  # noqa: F401  (the one formatter of a callable's name)


class NoRuleError(TypeError):
    """A callable without a rule or Python bytecode received a differentiable value."""

    def __init__(self, f, filename, line):
        full = full_name(f)
        self.callable, self.filename, self.line = f, filename, line
        if isinstance(f, type) and f.__module__ != "builtins":
            super().__init__(
                f"{filename}:{line}: a differentiable value reaches the constructor of class "
                f"{full}, and constructors are not transformed yet; build the object outside the "
                f"differentiated function, or give {full} a rule with @bytegrad.rule({full})")
            return
        super().__init__(
            f"{filename}:{line}: {full} has no differentiation rule and no Python bytecode, "
            f"but a differentiable value reaches it. Add a rule:\n"
            f"    @bytegrad.rule({full})\n"
            f"    def _(*args):\n"
            f"        y = {full}(*args)\n"
            f"        return y, lambda dy: (None, <gradient of each argument>...)\n"
            f"or wrap the value in bytegrad.stop_gradient if no gradient should flow.")


class NotScalarError(ValueError):
    pass


def user_frame():
    """The innermost frame outside bytegrad's runtime and rules: the user's code
    being differentiated (its transformed code keeps the user's file and globals)."""
    frame = sys._getframe(1)
    while frame.f_code.co_filename.startswith(_RUNTIME_DIRS):
        frame = frame.f_back
    return frame


def user_location():
    """``(file, line)`` of the user's line that is being differentiated."""
    frame = user_frame()
    return frame.f_code.co_filename, frame.f_lineno


_RUNTIME_DIRS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d) + os.sep
                      for d in ("runtime", "primitives"))
