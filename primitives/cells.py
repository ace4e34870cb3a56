"""Rules for closure cells and function creation.

A cell is mutable (``nonlocal`` rebinds it), so its gradient lives in the
shadow: reads add to it, and the store or creation that put the value there
takes it out as the value's gradient.
"""
from __future__ import annotations

from ..ir import ops
from ..runtime.errors import running_frame
from ..runtime.rules import effectful, nograd, rule
from ..runtime.shadow import current
from ..runtime.algebra import unwrap


@rule(ops.make_cell)
def _make_cell(*value):
    cell, shadow = ops.make_cell(*value), current()
    return cell, lambda d: (None,) + ((unwrap(shadow.take(cell)),) if value else ())


@rule(ops.cell_get)
def _cell_get(cell, name="?", *own):
    shadow = current()

    def back(d):
        shadow.add(cell, d)
        return (None, d, None) + own  # d(cell) is reported, not propagated: see _closure_cell
    return ops.cell_get(cell, name, *own), back


@rule(ops.cell_set)
def _cell_set(cell, value):
    ops.cell_set(cell, value)
    shadow = current()
    shadow.writes += 1  # (a change a callee's lost tape would not undo: `forward_in_try`)
    return None, lambda d: (None, None, unwrap(shadow.take(cell)))


@rule(ops.closure_cell)
def _closure_cell(fn, i):
    """A closure's gradient is the dict of its captured names' gradients.  The
    cells' own gradients travel in the shadow to where the values were stored;
    this dict keeps the pullbacks between closure and cell from being skipped,
    and tells a caller what the closure's captures received."""
    name = fn.__code__.co_freevars[i]
    return ops.closure_cell(fn, i), lambda d: (None, {name: d}, None)


@rule(ops.make_function)
def _make_function(code, closure=None, defaults=None, kwdefaults=None):
    fn = ops.function_in(running_frame().f_globals, code, closure, defaults, kwdefaults)

    def back(d):  # captured values' gradients travel in the shadow; defaults' come here
        if not isinstance(d, dict):
            return None, None, None, None, None
        kwd = d.get("__kwdefaults__")
        return None, None, None, d.get("__defaults__"), (kwd or None) and dict(kwd)
    return fn, back


effectful(ops.make_cell, ops.cell_set)
