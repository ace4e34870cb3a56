"""Errors raised while lifting or emitting IR."""


class UnsupportedError(Exception):
    """A construct the lifter cannot (yet) turn into IR, with where it was found."""

    def __init__(self, construct, filename, line, func="?"):
        self.construct, self.filename, self.line = construct, filename, line
        super().__init__(
            f"{filename}:{line}: {construct} in {func}() is not supported by bytegrad; "
            f"move it out of the differentiated code or give {func} a rule with bytegrad.rule")
