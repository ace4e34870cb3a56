"""Errors a user meets while differentiating, each naming the fix, and where in the
user's code they point."""
import os
import sys
import sysconfig

from ..ir.emit import EMITTED
from ..ir.errors import Refusal
from ..ir.ir import full_name  # noqa: F401  (the one formatter of a callable's name)


class NoRuleError(Refusal, TypeError):
    """A callable without a rule or Python bytecode received a differentiable value.

    Where that happens inside library code, ``via`` is ``(entry, file, line)``: the
    outermost library function the user's code called (a rule for it would do too) and
    the user's line that called it."""

    def __init__(self, f, filename, line, via=None):
        full = full_name(f)
        self.callable, self.filename, self.line, self.via = f, filename, line, via
        place = _place(filename, line, via)
        full_hint = "" if via is None else f"\n(or give {via[0]} itself a rule: @bytegrad.rule({via[0]}))"
        if isinstance(f, type) and f.__module__ != "builtins":
            super().__init__(
                f"{place}: a differentiable value reaches the constructor of class "
                f"{full}, and constructors are not transformed yet; build the object outside the "
                f"differentiated function, or give {full} a rule with @bytegrad.rule({full})")
            return
        super().__init__(
            f"{place}: {full} has no differentiation rule and no Python bytecode, "
            f"but a differentiable value reaches it. Add a rule:\n"
            f"    @bytegrad.rule({full})\n"
            f"    def _(*args):\n"
            f"        y = {full}(*args)\n"
            f"        return y, lambda dy: (None, <gradient of each argument>...)\n"
            f"or wrap the value in bytegrad.stop_gradient if no gradient should flow.{full_hint}")


def _place(filename, line, via):
    """``file:line`` of an error; inside library code (``via``, from `library_entry`)
    the user's line first, then the library function it calls and the line there."""
    if via is None:
        return f"{filename}:{line}"
    entry, ufile, uline = via
    return f"{ufile}:{uline}: in {entry}, which this line calls, at {filename}:{line}"


def where() -> str:
    """`_place` of the line being differentiated now."""
    return _place(*user_location(), library_entry())


class NotScalarError(ValueError):
    pass


def carried(e, made_at, read_at):
    """The error for a derivative reaching a value read out of exception ``e``, made at
    ``made_at`` of values that carry one: it was made plainly (its arguments are a
    message, mostly), so no derivative goes back through it."""
    return NotImplementedError(
        f"{read_at[0]}:{read_at[1]}: a derivative reaches a value read out of the exception "
        f"{type(e).__name__} made at {made_at[0]}:{made_at[1]} of values that carry one, and "
        f"derivatives do not go through exceptions; return the value, or keep it in a variable")


def read_through_get(name, desc, read_at):
    """The error for a derivative reaching ``.name`` read through ``desc.__get__``, a
    descriptor of the user's without ``__set__``: Python runs it only where the object
    has no field ``name`` (a cache it fills, a method it binds), so it is run as Python
    runs it and no derivative is followed through it."""
    return NotImplementedError(
        f"{read_at[0]}:{read_at[1]}: a derivative reaches .{name}, read through "
        f"{type(desc).__name__}.__get__, a descriptor of yours without __set__, whose derivative "
        f"is not followed; give it a __set__ (a data descriptor is differentiated), or use a property")


def user_frame():
    """The innermost frame outside bytegrad's runtime and rules: the user's code
    being differentiated (its transformed code keeps the user's file and globals)."""
    frame = sys._getframe(1)
    while frame.f_code.co_filename.startswith(_RUNTIME_DIRS):
        frame = frame.f_back
    return frame


def running_frame():
    """The innermost frame of the code being differentiated: the user's, or code a
    transform emitted (also of bytegrad's own functions, which a level of nested
    differentiation lifts), whose globals are the function's."""
    frame = sys._getframe(1)
    while frame.f_code.co_filename.startswith(_RUNTIME_DIRS) and frame.f_code not in EMITTED:
        frame = frame.f_back
    return frame


def refuse_objects(what):
    """Refuse an array of objects (dtype=object) that ``what`` made from a value with a
    gradient: no rule follows a gradient through one, so it would be lost (None, silently)."""
    file, line = user_location()
    raise NotImplementedError(
        f"{file}:{line}: {what} made an array of objects (dtype=object) from a value with a gradient; "
        f"bytegrad does not differentiate arrays of objects (the gradient would be lost): "
        f"keep the values in an array of floats (o.astype(float), or no dtype=object)")


def user_location():
    """``(file, line)`` of the user's line that is being differentiated."""
    frame = user_frame()
    return frame.f_code.co_filename, frame.f_lineno


def library_entry():
    """``(entry, file, line)`` when the code being differentiated is a library's
    (installed packages, the standard library): the outermost library function on the
    way from the user's code, and the user's line that called it; else None."""
    frame, entry = user_frame(), None
    while frame is not None and (_is_library(frame) or frame.f_code.co_filename.startswith(_RUNTIME_DIRS)):
        if _is_library(frame):
            entry = frame
        frame = frame.f_back
    if entry is None or frame is None:
        return None
    name = entry.f_code.co_name.removeprefix("forward_")  # (the transformed code's name)
    return f"{entry.f_globals.get('__name__', '?')}.{name}", frame.f_code.co_filename, frame.f_lineno


def _is_library(frame):
    return frame.f_code.co_filename.startswith(_LIBRARY_DIRS)


_RUNTIME_DIRS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d) + os.sep
                      for d in ("ir", "transforms", "runtime", "primitives"))
_LIBRARY_DIRS = tuple(sorted({os.path.join(p, "") for p in (sysconfig.get_paths()[k] for k in
                                                             ("stdlib", "platstdlib", "purelib", "platlib"))}))
