"""Functions that change their arguments in place, in a module of their own: the tests
call them as ``changers.zero_head(a)``, a callee the transform resolves as a constant."""


def zero_head(a):
    a[0] = 0.0
    return a


class Zeroing:
    """A class whose constructor changes its argument."""

    def __init__(self, a):
        a[1] = 0.0
        self.a = a


def reverse_in_place(a):
    a[:] = a[::-1].copy()
