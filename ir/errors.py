"""Errors raised while lifting or emitting IR."""


class Refusal:
    """Mixed into bytegrad's errors that stop a gradient computation (a construct it
    cannot lift, a call without a rule): no handler of the user's code takes one, so
    that the code never goes on along a path the plain call would not take
    (`ops.exc_match`, `ops.handling`, `ops.with_except`)."""


class UnsupportedError(Refusal, Exception):
    """A construct the lifter cannot (yet) turn into IR, with where it was found."""

    def __init__(self, construct, filename, line, func="?"):
        self.construct, self.filename, self.line = construct, filename, line
        super().__init__(
            f"{filename}:{line}: {construct} in {func}() is not supported by bytegrad; "
            f"move it out of the differentiated code or give {func} a rule with bytegrad.rule")
