"""`bytegrad ir dump`: every stage as text, and as Graphviz."""
import subprocess
import sys
import textwrap

import pytest

from bytegrad.__main__ import main


def write(tmp_path):
    f = tmp_path / "prog.py"
    f.write_text(textwrap.dedent("""
        def foo(x, n):
            for i in range(n):
                if x > 1:
                    x = x * 0.5
            return x * x
    """))
    return f


def test_dump_all_stages(tmp_path, capsys):
    main(["ir", "dump", f"{write(tmp_path)}:foo"])
    out = capsys.readouterr().out
    for stage in ("lifted", "forward", "adjoint"):
        assert f"# {stage} IR of foo" in out
    assert "1: (%1, %2, %3)" in out          # the function, x and n
    assert "ops.iterate" in out and "# line 4" in out
    assert "@g" in out                       # the adjoint's gradient slots


def test_dump_of_the_batched_tangent_code_calls_every_rule_through_jvp_call(tmp_path, capsys):
    main(["ir", "dump", f"{write(tmp_path)}:foo", "--stage", "tangent"])
    plain = capsys.readouterr().out
    main(["ir", "dump", f"{write(tmp_path)}:foo", "--stage", "batched"])
    out = capsys.readouterr().out
    assert out.startswith("# batched IR of foo")
    assert "jvp.REALS" in plain and "jvp.REALS" not in out  # (no arithmetic written out)
    assert "jvp.jvp_call(operator.mul" in out and "frule[" not in out


def test_dump_of_the_transform_a_call_with_arrays_gets(tmp_path, capsys):
    f = tmp_path / "soft.py"
    f.write_text(textwrap.dedent("""
        import numpy as np
        def soft(x):
            z = x - np.max(x)
            return np.log(np.sum(np.exp(z))) - z[0]
    """))
    main(["ir", "dump", f"{f}:soft", "--stage", "forward"])
    assert "ops.watch(KEPT" not in capsys.readouterr().out  # (x may be an object of yours)
    main(["ir", "dump", f"{f}:soft", "--stage", "forward", "--arrays"])
    assert capsys.readouterr().out.count("ops.watch(KEPT") == 4  # (max, exp, sum, log)


def test_dump_of_a_generator(tmp_path, capsys):
    f = tmp_path / "gen.py"
    f.write_text("def pairs(xs):\n    for a, b in zip(xs, xs[1:]):\n        yield a * b\n")
    main(["ir", "dump", f"{f}:pairs"])
    out = capsys.readouterr().out
    for stage in ("lifted", "forward", "adjoint"):
        assert f"# {stage} IR of pairs ({f}:1) (a generator: ops.yield_ suspends it)" in out
    assert out.count("ops.yield_(") == 1 + 2 + 1  # the yield; the forward's first (its tape) too
    assert "1: (%1, %2, %3)" in out  # the adjoint's: tape, gradient, the yield it stopped at


def test_dump_dot_to_file(tmp_path):
    out = tmp_path / "foo.dot"
    main(["ir", "dump", f"{write(tmp_path)}:foo", "--stage", "forward", "--format", "dot",
          "-o", str(out)])
    text = out.read_text()
    assert text.startswith('digraph "forward foo"') and "->" in text


def test_python_dash_m_and_module_target(tmp_path):
    write(tmp_path)
    r = subprocess.run([sys.executable, "-m", "bytegrad", "ir", "dump", "prog:foo", "--stage", "lifted"],
                       cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": str(tmp_path), "PATH": ""})
    assert r.returncode == 0, r.stderr
    assert "# lifted IR of foo" in r.stdout


def test_dump_dot_of_every_stage_is_one_picture(tmp_path, capsys):
    import re
    main(["ir", "dump", f"{write(tmp_path)}:foo", "--format", "dot"])
    out = capsys.readouterr().out
    assert out.count("digraph") == 1 and out.rstrip().endswith("}")
    labels = re.findall(r'label="(\w+) foo";', out)
    assert labels == ["lifted", "forward", "adjoint", "tangent"]
    nodes = re.findall(r"^\s+(s\db\d+) \[label", out, re.M)
    assert len(nodes) == len(set(nodes)) and {n[:2] for n in nodes} == {"s0", "s1", "s2", "s3"}
    edges = re.findall(r"(s\db\d+) -> (s\db\d+)", out)
    assert edges and all(a[:2] == b[:2] and b in nodes for a, b in edges)  # (within a stage)
    assert out.count("{") == out.count("}")


def test_dot_pictures_name_the_sources_values(tmp_path, capsys):
    import re
    main(["ir", "dump", f"{write(tmp_path)}:foo", "--format", "dot"])
    legends = dict(re.findall(r"(s\d)bnames \[shape=note label=\"(.*?)\"\];", capsys.readouterr().out))
    rows = {k: v.split("\\l") for k, v in legends.items()}
    assert {"%2  x", "%3  n"} <= set(rows["s0"])                   # lifted: the parameters
    assert any(r.endswith("  i") for r in rows["s0"])              # and the loop's counter
    assert "%5  push: onto the tape" in rows["s1"]                 # forward
    assert "@g2  the gradient of x" in rows["s2"]                  # adjoint: slots, the pop
    assert any(r.endswith("pop: the tape's next entry, last first") for r in rows["s2"])
    assert {"%2  x"} <= set(rows["s3"]) and any(r.endswith("the tangent of x") for r in rows["s3"])
    for k, r in rows.items():  # each value named once: stale names of dropped values are left out
        tokens = [x.split("  ")[0] for x in r[1:] if x]
        assert len(tokens) == len(set(tokens)), (k, r)


@pytest.mark.parametrize("target, says", [
    ("{dir}/nosuch.py:f", "no file"), ("nosuch_module_xyz:f", "no module 'nosuch_module_xyz'"),
    ("{prog}:textwrap", "not a function"), ("{prog}", "expected FILE.py:FUNC")])
def test_a_bad_target_gets_one_line_without_a_traceback(tmp_path, target, says):
    prog = tmp_path / "prog2.py"
    prog.write_text("import textwrap\n")
    t = target.format(dir=tmp_path, prog=prog)
    r = subprocess.run([sys.executable, "-m", "bytegrad", "ir", "dump", t], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_missing_function_is_named_without_a_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "bytegrad", "ir", "dump", f"{write(tmp_path)}:nope"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "has no 'nope'" in r.stderr and "FILE.py:FUNC" in r.stderr


def test_dump_marks_where_tasks_and_their_adjoints_are_scheduled(tmp_path, capsys):
    f = tmp_path / "par.py"
    f.write_text(textwrap.dedent("""
        import functools
        from concurrent.futures import ThreadPoolExecutor

        def loss(w, xs):
            with ThreadPoolExecutor(2) as ex:
                fs = [ex.submit(abs, w * x) for x in xs]
                return sum(f.result() for f in fs)

        def plain(w):
            return w * w
    """))
    main(["ir", "dump", f"{f}:loss", "--stage", "adjoint"])
    out = capsys.readouterr().out
    assert "# adjoint IR of loss" in out
    assert "#   line 7: submit: schedules a task" in out              # (in the comprehension)
    assert "#   line 8: result: awaits a task: its pullback schedules the task's adjoint" in out
    main(["ir", "dump", f"{f}:plain", "--stage", "lifted"])
    assert "schedule or await a task" not in capsys.readouterr().out
