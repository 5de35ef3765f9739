"""The watch's problems are read from fields (a row's stage, site and mismatch, a diff's
writer and error site, a load error's site), never from a message's text."""

from __future__ import annotations

import ast
from pathlib import Path

from portkit.project.session import Session
from portkit.results import CheckResult, FailureSite, Outcome, Stage, ValueMismatch
from portkit.watch.engine import Engine
from portkit.watch.model import problem_of
from portkit.watch.view import op_line
from tests.watch.conftest import edit

WATCH = Path(__file__).resolve().parents[2] / "portkit" / "watch"


def test_no_watch_module_imports_re():
    found = []
    for path in sorted(WATCH.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            found += [f"{path.name}: {n}" for n in names if n in ("re", "regex")]
    assert not found, found


def test_a_row_is_a_problem_by_its_fields_whatever_its_text_says():
    site = FailureSite("k_fwd", (4, 0, 0), (1, 0, 0), "/p/prototypes/k.py", 15)
    fault = problem_of(
        CheckResult("k", "n129", "sim", "forward", Outcome.FAIL, "kernel k_fwd: oob", site=site)
    )
    assert (fault.kind, fault.kernel, fault.block, fault.thread) == (
        "fault", "k_fwd", (4, 0, 0), (1, 0, 0)
    )  # fmt: skip
    assert fault.where == "/p/prototypes/k.py:15"
    assert fault.line() == (
        "sim / forward / n129: kernel k_fwd, block (4, 0, 0), thread (1, 0, 0), k.py:15: oob"
    )
    # a message that names places and counts is still text: nothing is parsed out of it
    text = "kernel other, block (1, 2, 3), thread (0, 0, 0), x.py:9: 3 of 9 elements differ"
    quiet = problem_of(CheckResult("k", "n129", "sim", "forward", Outcome.FAIL, text))
    assert quiet.kind == "fault" and quiet.kernel is quiet.block is quiet.where is None
    assert quiet.line() == f"sim / forward / n129: {text}"

    differ = ValueMismatch("output 0", 3, 9)
    row = CheckResult("k", "n9", "sim", "forward", Outcome.FAIL, "values", mismatch=differ)
    mismatch = problem_of(row)
    assert mismatch.kind == "mismatch" and mismatch.mismatch == differ

    compiled = problem_of(
        CheckResult(
            "k", "all", "twin", "compile sm_90", Outcome.FAIL, "twin k.cu does not compile",
            stage=Stage.COMPILE, site=FailureSite(file="/p/cuda_src/k.cu", line=6),
        )
    )  # fmt: skip
    assert compiled.kind == "compile" and compiled.where == "/p/cuda_src/k.cu:6"
    assert compiled.line() == "twin / compile sm_90 / all: k.cu:6: twin k.cu does not compile"


def test_check_mode_shows_the_value_mismatch_and_the_twins_compile_line(watched):
    root = watched("wp_check")
    engine = Engine(
        Session.from_environment(root), ["wp_check"], "check", backends=["sim", "twin-cpu"]
    )
    assert engine.run().verdicts["wp_check"].status is Outcome.PASS

    edit(root / "prototypes" / "wp_check.py", "x[i] * 2.0", "x[i] * 2.5")
    problems = engine.run().verdicts["wp_check"].problems
    by = {(p.backend, p.check): p for p in problems}
    forward = by[("sim", "forward")]
    assert forward.kind == "mismatch" and forward.mismatch == ValueMismatch("output 0", 129, 129)
    vs = by[("sim", "vs twin-cpu")]  # prototype against twin: a value mismatch too
    assert vs.kind == "mismatch" and vs.mismatch == ValueMismatch("output 0", 129, 129)
    edit(root / "prototypes" / "wp_check.py", "x[i] * 2.5", "x[i] * 2.0")

    twin = root / "cuda_src" / "wp_check.cu"
    edit(twin, "x[i] * T(2);", "x[i] * T(2)")
    verdict = engine.run().verdicts["wp_check"]
    (compiled,) = [p for p in verdict.problems if p.backend == "twin-cpu"]
    assert compiled.kind == "compile" and compiled.where.endswith("wp_check.cu:5")
    assert "twin-cpu / compile / all: wp_check.cu:5: twin " in op_line(verdict)


def test_diff_mode_shows_where_a_side_that_could_not_run_failed(watched):
    root = watched("wp_diff")
    engine = Engine(Session.from_environment(root), ["wp_diff"], "diff")
    assert engine.run().verdicts["wp_diff"].status is Outcome.PASS
    edit(root / "prototypes" / "wp_diff.py", "if i < n:", "if i <= n:")
    (problem,) = engine.run().verdicts["wp_diff"].problems
    assert problem.kind == "fault" and problem.kernel == "wp_diff_fwd"
    assert problem.block == (4, 0, 0) and problem.thread == (1, 0, 0)
    assert problem.where == f"{root / 'prototypes' / 'wp_diff.py'}:15"
