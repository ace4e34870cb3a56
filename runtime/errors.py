"""Errors a user meets while differentiating, each naming the fix."""


class NoRuleError(TypeError):
    """A callable without a rule or Python bytecode received a differentiable value."""

    def __init__(self, f, filename, line):
        name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
        mod = getattr(f, "__module__", None)
        mod = mod.lstrip("_") if mod else mod  # _operator.setitem is operator.setitem
        full = f"{mod}.{name}" if mod and mod != "builtins" else name
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
