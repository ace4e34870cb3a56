"""Graphviz pictures of an IR (its text form is `ir.show`)."""
from __future__ import annotations

import re

from .ir import block_lines, fmt


def dot(ir, title="") -> str:
    """The IR as a Graphviz digraph: one box per block, one edge per branch."""
    return _digraph(title or ir.meta.name, _blocks(ir, "b", "  "))


def dots(pictures) -> str:
    """Several IRs, ``[(title, ir), …]``, as one digraph that draws each in a box of its
    own (a cluster), for one picture of every stage (Graphviz draws only a stream's first
    digraph)."""
    lines = []
    for k, (title, ir) in enumerate(pictures):
        lines += [f'  subgraph "cluster_{k}" {{', f'    label="{_esc(title)}";']
        lines += _blocks(ir, f"s{k}b", "    ") + ["  }"]
    return _digraph(" / ".join(t for t, _ in pictures), lines)


def _esc(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _digraph(title, lines):
    return "\n".join([f'digraph "{_esc(title)}" {{', '  node [shape=box fontname="monospace"];',
                      *lines, "}"])


def _legend(ir, prefix, indent):
    """A box naming the values of the picture that have a name in the source (``%5 h``,
    ``@g5`` its gradient) and the tape's push and pop; none where nothing is named."""
    defined = {id(v) for blk in ir.blocks for v in [*blk.args, *(x for x, _ in blk.stmts)]}
    named = [(repr(v), n) for v, n in ir.meta.names.items() if id(v) in defined]
    if not named:
        return []
    named.sort(key=lambda t: (t[0][0], int(re.sub(r"\D", "", t[0]) or 0)))
    rows = [f"{t}  {'the gradient of ' + n if t.startswith('@') else n}" for t, n in named]
    label = "\\l".join(_esc(r) for r in ["names in the source:"] + rows) + "\\l"
    return [f'{indent}{prefix}names [shape=note label="{label}"];']


def _blocks(ir, prefix, indent):
    out = []
    for b in range(len(ir.blocks)):
        text = "\\l".join(_esc(l) for l in block_lines(ir, b)) + "\\l"
        out.append(f'{indent}{prefix}{b} [label="{text}"];')
        for br in ir.blocks[b].branches:
            if br.kind == "br":
                label = f' [label="unless {_esc(fmt(br.cond))}"]' if br.cond is not None else ""
                out.append(f"{indent}{prefix}{b} -> {prefix}{br.target}{label};")
    return out + _legend(ir, prefix, indent)
