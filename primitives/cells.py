"""Rules for closure cells and function creation.

A cell is mutable (``nonlocal`` rebinds it), so its gradient lives in the
shadow: reads add to it, and the store or creation that put the value there
takes it out as the value's gradient.
"""
from __future__ import annotations

import sys

from ..ir import ops
from ..runtime.rules import effectful, nograd, rule
from ..runtime.shadow import current
from ..runtime.algebra import unwrap


@rule(ops.make_cell)
def _make_cell(*value):
    cell, shadow = ops.make_cell(*value), current()
    return cell, lambda d: (None,) + ((unwrap(shadow.take(cell)),) if value else ())


@rule(ops.cell_get)
def _cell_get(cell, name="?"):
    shadow = current()

    def back(d):
        shadow.add(cell, d)
        return None, None, None
    return ops.cell_get(cell, name), back


@rule(ops.cell_set)
def _cell_set(cell, value):
    ops.cell_set(cell, value)
    shadow = current()
    return None, lambda d: (None, None, unwrap(shadow.take(cell)))


@rule(ops.closure_cell)
def _closure_cell(fn, i):
    return ops.closure_cell(fn, i), nograd(2)


@rule(ops.make_function)
def _make_function(code, closure=None, defaults=None, kwdefaults=None):
    caller = sys._getframe(2)  # the transformed function that called forward
    return ops.function_in(caller.f_globals, code, closure, defaults, kwdefaults), nograd(4)


effectful(ops.make_cell, ops.cell_set)
