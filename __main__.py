"""The command line: ``bytegrad ir dump FILE.py:FUNC [--stage …] [--format text|dot]``."""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

STAGES = ("lifted", "forward", "adjoint", "tangent")  # (tangent: forward mode's, `jvp`)


def load(target: str):
    """The function named by ``path/to/file.py:func`` or ``package.module:func``."""
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise SystemExit(f"bytegrad: expected FILE.py:FUNC or module:FUNC, got {target!r}")
    if where.endswith(".py") or os.sep in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise SystemExit(f"bytegrad: no file {where!r}; name a Python file and a function "
                             f"in it, as FILE.py:FUNC")
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    else:
        try:
            mod = importlib.import_module(where)
        except ModuleNotFoundError as e:
            if e.name is None or not where.startswith(e.name):
                raise  # (the module was found; something it imports was not)
            raise SystemExit(f"bytegrad: no module {e.name!r} to import (from {target!r}); "
                             f"name an importable module, or a file as FILE.py:FUNC") from None
    obj = mod
    for part in name.split("."):
        if not hasattr(obj, part):
            raise SystemExit(f"bytegrad: {where} has no {name!r} ({part!r} is missing); "
                             f"name a function defined there, as FILE.py:FUNC or FILE.py:Class.method")
        obj = getattr(obj, part)
    fn = getattr(obj, "__wrapped__", obj)
    if not hasattr(fn, "__code__"):
        raise SystemExit(f"bytegrad: {target!r} is a {type(fn).__name__}, not a function "
                         f"defined in Python; name a function, as FILE.py:FUNC or FILE.py:Class.method")
    return fn


def dump_compiled(fn, stage, args, wrt) -> str:
    """The typed IR of ``fn`` for argument types ``args`` (``"float64[:], float64"``), or the
    source of its fused gradient (``stage == "fused"``) with respect to positions ``wrt``."""
    if args is None:
        raise SystemExit(f"bytegrad: --stage {stage} needs the argument types, as --args "
                         f"\"float64[:], float64\" (float64, float32, int64, bool, arrays of "
                         f"1 to 3 dimensions, tuples of them)")
    from .runtime.compiled import _FUNCS
    from .transforms.fused import source
    from .transforms.typed import infer, parse
    sig = parse(args)
    typed = infer(fn, sig, _FUNCS)
    where = f"{fn.__qualname__} ({fn.__code__.co_filename}:{fn.__code__.co_firstlineno}) for ({args})"
    if stage == "typed":
        return f"# typed IR of {where}\n{typed!r}"
    wrt = tuple(i + 1 for i in wrt) if wrt else tuple(range(1, len(sig) + 1))
    return f"# fused gradient of {where}\n{source(typed, wrt, _FUNCS)}"


_TANGENT = {"tangent": {}, "batched": {"batched": True}, "nested": {"nested": True}}


def dump(fn, stages, fmt, arrays=False) -> str:
    from .ir import show
    from .ir.printer import dot, dots
    from .runtime.api import stages as stages_of
    from .runtime.jax_api import tangent_stages
    st = stages_of(fn, arrays) if set(stages) - set(_TANGENT) else None
    if len(stages) > 1 and st is not None and st.lifted.meta.generator:
        stages = [s for s in stages if s != "tangent"]  # (forward mode takes no generator yet)
    out = []
    for s in stages:
        ir = tangent_stages(fn, **_TANGENT[s]).tangent if s in _TANGENT else getattr(st, s)
        if fmt == "dot":
            out.append((f"{s} {fn.__qualname__}", ir))
        else:
            kind = " (a generator: ops.yield_ suspends it)" * ir.meta.generator
            out.append(f"# {s} IR of {fn.__qualname__} ({fn.__code__.co_filename}:{fn.__code__.co_firstlineno})"
                       f"{kind}\n{show(ir)}")
    if fmt == "dot":  # (one digraph: Graphviz draws only the first of a stream's)
        return dot(out[0][1], out[0][0]) if len(out) == 1 else dots(out)
    notes = task_notes(fn.__code__)
    return "\n\n".join(out) + (f"\n\n{notes}" if notes else "")


# What a call of these names does when it reaches a rule of primitives/threads.py,
# processes.py or cluster.py (a method of that name on anything else is an ordinary call).
TASK_CALLS = {
    "submit": "schedules a task: its forward pass runs on the pool; its pullback waits for the task's adjoint",
    "map": "schedules a task per item (submit), each awaited when its item is taken",
    "result": "awaits a task: its pullback schedules the task's adjoint on the same pool (the first await's, which runs last)",
    "gather": "awaits each task: its pullback schedules their adjoints",
    "as_completed": "yields the tasks as they finish (no gradient of its own)",
    "wait": "waits for tasks (no gradient of its own)",
    "Thread": "a thread: its pullback waits for the thread's adjoint",
    "join": "awaits a thread: its pullback starts the thread's adjoint in a thread of its own",
    "put": "sends an item: its pullback receives the item's gradient from the adjoint queue",
    "get": "receives an item: its pullback sends the item's gradient back to the put",
}


def task_notes(code) -> str:
    """Lines of ``code`` (and the code made inside it) that may schedule or await a task,
    and where their adjoints are scheduled, for ``ir dump``."""
    import dis
    rows, todo = [], [code]
    while todo:
        c = todo.pop()
        todo += [k for k in c.co_consts if hasattr(k, "co_code")]
        line = c.co_firstlineno
        for ins in dis.get_instructions(c):
            line = ins.positions.lineno or line if ins.positions else line
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL") and ins.argval in TASK_CALLS:
                rows.append((line, ins.argval))
    if not rows:
        return ""
    return ("# calls that schedule or await a task when their object is a pool, future, thread or\n"
            "# queue, and where the task's adjoint is scheduled:\n") + "\n".join(
        f"#   line {n}: {name}: {TASK_CALLS[name]}" for n, name in sorted(set(rows)))


def main(argv=None):
    p = argparse.ArgumentParser(prog="bytegrad", description="Inspect bytegrad's transforms.")
    sub = p.add_subparsers(dest="cmd", required=True)
    ir = sub.add_parser("ir", help="IR tools").add_subparsers(dest="ircmd", required=True)
    d = ir.add_parser("dump", help="print the lifted, forward, adjoint and tangent IR of a function")
    d.add_argument("target", help="FILE.py:FUNC or module.path:FUNC")
    d.add_argument("--stage", choices=STAGES + ("batched", "nested", "typed", "fused", "all"), default="all",
                   help="batched: the tangent code jacfwd runs on batches of tangents; nested: the "
                        "tangent code hessian and gradients of gradients run, where lists and arrays "
                        "the function makes pass their changes on; typed and fused (the compiled "
                        "tier's typed IR and generated source) need --args")
    d.add_argument("--args", help='argument types for --stage typed or fused: "float64[:], float64"')
    d.add_argument("--argnums", type=int, nargs="*", help="for --stage fused: the arguments whose "
                                                          "gradients it computes (default all)")
    d.add_argument("--arrays", action="store_true",
                   help="the transform of a call whose positional arguments are arrays or "
                        "numbers (gradient and grad make it for such a call)")
    d.add_argument("--format", choices=("text", "dot"), default="text")
    d.add_argument("-o", "--output", help="write to this file instead of standard output")
    a = p.parse_args(argv)
    fn = load(a.target)
    if a.stage in ("typed", "fused"):
        text = dump_compiled(fn, a.stage, a.args, a.argnums)
    else:
        text = dump(fn, STAGES if a.stage == "all" else (a.stage,), a.format, a.arrays)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
