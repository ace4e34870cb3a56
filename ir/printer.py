"""Graphviz pictures of an IR (its text form is `ir.show`)."""
from __future__ import annotations

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


def _blocks(ir, prefix, indent):
    out = []
    for b in range(len(ir.blocks)):
        text = "\\l".join(_esc(l) for l in block_lines(ir, b)) + "\\l"
        out.append(f'{indent}{prefix}{b} [label="{text}"];')
        for br in ir.blocks[b].branches:
            if br.kind == "br":
                label = f' [label="unless {_esc(fmt(br.cond))}"]' if br.cond is not None else ""
                out.append(f"{indent}{prefix}{b} -> {prefix}{br.target}{label};")
    return out
