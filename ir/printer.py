"""IRTools-format text and Graphviz pictures of an IR."""
from __future__ import annotations

from .ir import fmt


def _args(vs):
    return f": ({', '.join(map(repr, vs))})" if vs else ":"


def block_lines(ir, b):
    blk = ir.blocks[b]
    yield f"{b + 1}{_args(blk.args)}"
    for v, st in blk.stmts:
        line = f"  {v!r} = {st!r}"
        if st.line is not None:
            line = f"{line:<48} # line {st.line}"
        yield line
    for br in blk.branches:
        yield f"  {br!r}"


def show(ir) -> str:
    """The IR as text::

        1: (%1, %2)
          %3 = operator.mul(%2, %2)                    # line 3
          return %3
    """
    out = []
    for b in range(len(ir.blocks)):
        out.extend(block_lines(ir, b))
    return "\n".join(out)


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
