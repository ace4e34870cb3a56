"""Unit tests of the IR data structures: printer, verifier, CFG, simplify passes."""
from __future__ import annotations

import operator

import pytest

from bytegrad.ir import IR, Branch, Global, Slot, Stmt, Var, dot, function, ops, show, verify
from bytegrad.ir.cfg import CFG
from bytegrad.ir.ir import copy as copy_ir
from bytegrad.ir.simplify import dead_args, merge_blocks, prune_unreachable, renumber, simplify, trivial_args
from bytegrad.ir.verify import IRError


def br(target, *args, unless=None):
    return Branch("br", target, args, unless)


def ret(x):
    return Branch("return", args=[x])


def tiny():
    """``def f(x): return x * x if x * x else x``, by hand::

        1: (%1, %2)
          %3 = operator.mul(%2, %2)
          br 3 unless %3
          br 2
        2:
          return %3
        3:
          return %2
    """
    ir = IR()
    ir.argument(0)
    x = ir.argument(0)
    y = ir.push(0, Stmt(operator.mul, [x, x]))
    b2, b3 = ir.block(), ir.block()
    ir.branch(0, br(b3, unless=y))
    ir.branch(0, br(b2))
    ir.branch(b2, ret(y))
    ir.branch(b3, ret(x))
    return ir


# ---------------------------------------------------------------------------
# printer
# ---------------------------------------------------------------------------

def test_printer_format():
    assert show(tiny()) == "\n".join([
        "1: (%1, %2)",
        "  %3 = operator.mul(%2, %2)",
        "  br 3 unless %3",
        "  br 2",
        "2:",
        "  return %3",
        "3:",
        "  return %2",
    ])


def test_printer_lines_arguments_keywords_and_operands():
    ir = IR()
    a = ir.argument(0)
    v = ir.push(0, Stmt(Global("foo"), [a, 1.5, "s"], {"k": None}, line=7))
    b = ir.block()
    c = ir.argument(b)
    ir.branch(0, br(b, v))
    w = ir.push(b, Stmt(ops.build_tuple, [c, c], line=12))
    ir.push(b, Stmt(len, [w]), dest=Slot("acc"))
    ir.branch(b, Branch("raise", args=[w]))
    text = show(ir).splitlines()
    assert text[0] == "1: (%1)"
    assert text[1] == f"{'  %2 = foo(%1, 1.5, ' + repr('s') + ', k=None)':<48} # line 7"
    assert text[2] == "  br 2 (%2)"
    assert text[3] == "2: (%3)"
    assert text[4] == f"{'  %4 = ops.build_tuple(%3, %3)':<48} # line 12"
    assert text[5] == "  @acc = len(%4)"
    assert text[6] == "  raise %4"
    assert repr(ir) == show(ir)


def test_dot():
    d = dot(tiny(), title='the "tiny" one')
    assert d.startswith('digraph "the \\"tiny\\" one" {')
    assert '  b0 -> b2 [label="unless %3"];' in d
    assert "  b0 -> b1;" in d
    assert "b1 [label=\"2:\\l  return %3\\l\"];" in d
    assert d.endswith("}")


def test_emit_hand_built_ir():
    g = function(tiny(), {})
    assert g(None, 3) == 9
    assert g(None, 0) == 0


# ---------------------------------------------------------------------------
# verifier
# ---------------------------------------------------------------------------

def diamond_using(value_from_branch):
    """1 → 2, 3 → 4; block 2 defines %v; block 4 returns ``value_from_branch(%v, %x)``."""
    ir = IR()
    x = ir.argument(0)
    b2, b3, b4 = ir.block(), ir.block(), ir.block()
    ir.branch(0, br(b3, unless=x))
    ir.branch(0, br(b2))
    v = ir.push(b2, Stmt(operator.neg, [x]))
    ir.branch(b2, br(b4))
    ir.branch(b3, br(b4))
    ir.branch(b4, ret(value_from_branch(v, x)))
    return ir


def test_verifier_accepts_good_ir():
    verify(tiny())
    verify(diamond_using(lambda v, x: x))


def test_verifier_rejects_use_not_dominated():
    with pytest.raises(IRError, match="does not dominate"):
        verify(diamond_using(lambda v, x: v))


def test_verifier_rejects_use_before_definition_in_block():
    ir = IR()
    x = ir.argument(0)
    later = Var(99)
    ir.push(0, Stmt(operator.neg, [later]))
    ir.blocks[0].stmts.append((later, Stmt(operator.neg, [x])))
    ir.branch(0, ret(x))
    with pytest.raises(IRError, match="does not dominate"):
        verify(ir)


def test_verifier_rejects_wrong_branch_arity():
    ir = IR()
    x = ir.argument(0)
    b = ir.block()
    ir.argument(b)
    ir.argument(b)
    ir.branch(0, br(b, x))
    ir.branch(b, ret(x))
    with pytest.raises(IRError, match="passes 1 values to a block with 2 arguments"):
        verify(ir)


def test_verifier_rejects_undefined_double_definition_and_missing_terminator():
    ir = IR()
    ir.argument(0)
    ir.branch(0, ret(Var(42)))
    with pytest.raises(IRError, match="never defined"):
        verify(ir)

    ir = IR()
    x = ir.argument(0)
    ir.blocks[0].stmts.append((x, Stmt(operator.neg, [x])))
    ir.branch(0, ret(x))
    with pytest.raises(IRError, match="defined twice"):
        verify(ir)

    ir = IR()
    x = ir.argument(0)
    b = ir.block()
    ir.branch(0, br(b, unless=x))
    ir.branch(b, ret(x))
    with pytest.raises(IRError, match="block 1 does not end"):
        verify(ir)


# ---------------------------------------------------------------------------
# CFG
# ---------------------------------------------------------------------------

def test_cfg_diamond():
    cfg = CFG.of(diamond_using(lambda v, x: x))
    assert cfg.succs == [[2, 1], [3], [3], []]
    assert cfg.preds == [[], [0], [0], [1, 2]]
    assert cfg.order[0] == 0 and cfg.order[-1] == 3
    assert cfg.idom == {0: 0, 1: 0, 2: 0, 3: 0}
    assert cfg.dominates(0, 3) and cfg.dominates(3, 3)
    assert not cfg.dominates(1, 3) and not cfg.dominates(2, 3) and not cfg.dominates(3, 0)


def loop():
    """``while x: x = x - 1`` with a counter: 1 → 2 ⇄ 3, 2 → 4; block 5 unreachable."""
    ir = IR()
    x = ir.argument(0)
    head, body, exit_, dead = ir.block(), ir.block(), ir.block(), ir.block()
    h = ir.argument(head)
    ir.branch(0, br(head, x))
    ir.branch(head, br(exit_, unless=h))
    ir.branch(head, br(body))
    y = ir.push(body, Stmt(operator.sub, [h, 1]))
    ir.branch(body, br(head, y))
    ir.branch(exit_, ret(h))
    ir.branch(dead, br(head, 0))
    return ir


def test_cfg_loop():
    ir = loop()
    cfg = CFG.of(ir)
    assert cfg.preds[1] == [0, 2, 4]
    assert cfg.preds[2] == [1] and cfg.preds[3] == [1]
    assert cfg.idom == {0: 0, 1: 0, 2: 1, 3: 1}
    assert cfg.dominates(1, 2) and cfg.dominates(1, 3) and cfg.dominates(0, 2)
    assert not cfg.dominates(2, 1) and not cfg.dominates(2, 3)
    assert cfg.reachable(3) and not cfg.reachable(4)
    verify(ir)
    assert function(ir, {})(5) == 0


def test_cfg_is_cached_and_invalidated():
    ir = loop()
    assert CFG.of(ir) is CFG.of(ir)
    first = CFG.of(ir)
    ir.block()
    assert CFG.of(ir) is not first


# ---------------------------------------------------------------------------
# simplify
# ---------------------------------------------------------------------------

def test_prune_unreachable_renumbers_targets():
    # 1: br 3   2: return 0 (unreachable)   3: return %1
    ir = IR()
    x = ir.argument(0)
    dead, live = ir.block(), ir.block()
    ir.branch(0, br(live))
    ir.branch(dead, ret(0))
    ir.branch(live, ret(x))
    prune_unreachable(ir)
    assert show(ir) == "1: (%1)\n  br 2\n2:\n  return %1"
    verify(ir)


def test_trivial_args_removed():
    # 1: (%1) br 2 (%1)   2: (%2) br 3 unless %2; br 2 (%2)   3: return %2
    ir = IR()
    x = ir.argument(0)
    b2, b3 = ir.block(), ir.block()
    a = ir.argument(b2)
    ir.branch(0, br(b2, x))
    ir.branch(b2, br(b3, unless=a))
    ir.branch(b2, br(b2, a))
    ir.branch(b3, ret(a))
    trivial_args(ir)
    assert ir.blocks[b2].args == []
    assert ir.blocks[0].branches[0].args == [] and ir.blocks[b2].branches[1].args == []
    assert ir.blocks[b2].branches[0].cond is x
    assert ir.blocks[b3].branches[0].args == [x]
    verify(ir)


def test_non_trivial_args_kept():
    ir = loop()
    trivial_args(ir)
    assert len(ir.blocks[1].args) == 1


def test_dead_args_removed():
    # 1: (%1) br 2 (%1, 5)   2: (%2, %3) return %2   -- %3 is never used
    ir = IR()
    x = ir.argument(0)
    b2 = ir.block()
    used, unused = ir.argument(b2), ir.argument(b2)
    ir.branch(0, br(b2, x, 5))
    ir.branch(b2, ret(used))
    dead_args(ir)
    assert ir.blocks[b2].args == [used]
    assert ir.blocks[0].branches[0].args == [x]
    verify(ir)


def test_dead_args_removes_loop_carried_dead_values():
    # a value passed around a loop and never read is dead, even though branches pass it
    ir = loop()
    head = 1
    dead_value = ir.argument(head)
    ir.blocks[0].branches[0].args.append(0)
    ir.blocks[2].branches[0].args.append(dead_value)
    ir.blocks[4].branches[0].args.append(0)
    dead_args(ir)
    assert len(ir.blocks[head].args) == 1
    verify(ir)


def test_merge_straight_line_blocks():
    # 1: (%1) %2 = neg(%1); br 2 (%2)   2: (%3) %4 = add(%3, 1); br 3   3: return %4
    ir = IR()
    x = ir.argument(0)
    b2, b3 = ir.block(), ir.block()
    y = ir.push(0, Stmt(operator.neg, [x]))
    ir.branch(0, br(b2, y))
    a = ir.argument(b2)
    z = ir.push(b2, Stmt(operator.add, [a, 1]))
    ir.branch(b2, br(b3))
    ir.branch(b3, ret(z))
    merge_blocks(ir)
    assert len(ir.blocks) == 1
    renumber(ir)
    assert show(ir) == "\n".join([
        "1: (%1)",
        "  %2 = operator.neg(%1)",
        "  %3 = operator.add(%2, 1)",
        "  return %3",
    ])
    verify(ir)


def test_merge_keeps_join_points_and_loop_headers():
    ir = diamond_using(lambda v, x: x)
    merge_blocks(ir)
    assert len(ir.blocks) == 4
    ir = loop()
    prune_unreachable(ir)
    merge_blocks(ir)
    assert len(ir.blocks) == 4


def test_simplify_all_passes():
    ir = IR()
    x = ir.argument(0)
    b2, b3 = ir.block(), ir.block()
    p, q = ir.argument(b2), ir.argument(b2)
    ir.branch(0, br(b2, x, x))
    y = ir.push(b2, Stmt(operator.mul, [p, 2]))
    ir.branch(b2, br(b3, y, 0))
    r, s = ir.argument(b3), ir.argument(b3)
    ir.branch(b3, ret(r))
    simplify(ir)
    assert show(ir) == "\n".join([
        "1: (%1)",
        "  %2 = operator.mul(%1, 2)",
        "  return %2",
    ])
    verify(ir)
    assert function(ir, {})(21) == 42


def test_copy_is_independent():
    ir = tiny()
    new = copy_ir(ir)
    assert show(new) == show(ir)
    new.blocks[0].args[1].id = 77
    assert "%77" in show(new) and "%77" not in show(ir)
