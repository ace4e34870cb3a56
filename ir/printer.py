"""Graphviz pictures of an IR (its text form is `ir.show`)."""
from __future__ import annotations

from .ir import block_lines, fmt


def dot(ir, title="") -> str:
    """The IR as a Graphviz digraph: one box per block, one edge per branch."""
    esc = lambda s: s.replace("\\", "\\\\").replace('"', '\\"')
    out = [f'digraph "{esc(title or ir.meta.name)}" {{', '  node [shape=box fontname="monospace"];']
    for b in range(len(ir.blocks)):
        text = "\\l".join(esc(l) for l in block_lines(ir, b)) + "\\l"
        out.append(f'  b{b} [label="{text}"];')
        for br in ir.blocks[b].branches:
            if br.kind == "br":
                label = f' [label="unless {fmt(br.cond)}"]' if br.cond is not None else ""
                out.append(f"  b{b} -> b{br.target}{label};")
    out.append("}")
    return "\n".join(out)
