"""The watch engine through edits: each run's verdict, and what it rebuilt."""

from __future__ import annotations

import threading
import time

from portkit.project.session import Session
from portkit.results import Outcome
from portkit.watch.engine import Engine
from portkit.watch.loop import watch_loop
from portkit.watch.view import PlainView, op_line
from tests.watch.conftest import edit


def test_sim_edits_pass_fail_with_the_mismatch_then_pass_and_rebuild_only_the_edited_op(watched):
    root = watched("wt_loop")
    engine = Engine(Session.from_environment(root), mode="sim")
    first = engine.run()
    assert {n: v.status for n, v in first.verdicts.items()} == {
        "wt_loop": "pass",
        "wt_loop_other": "pass",
    }
    other = engine.session.op("wt_loop_other")

    prototype = root / "prototypes" / "wt_loop.py"
    edit(prototype, "x[i] * 2.0", "x[i] * 2.5")  # the bug
    bug = engine.run()
    assert list(bug.verdicts) == ["wt_loop"]  # the untouched op is not re-run
    assert bug.reimported == ["wt_loop"] and bug.recompiled == []
    verdict = bug.verdicts["wt_loop"]
    assert verdict.status is Outcome.FAIL
    (problem,) = verdict.problems
    assert problem.kind == "mismatch" and problem.backend == "sim" and problem.check == "forward"
    assert "129 of 129 elements differ" in problem.text
    assert engine.session.op("wt_loop_other") is other  # not imported again
    assert engine.failing == ["wt_loop"]

    edit(prototype, "x[i] * 2.5", "x[i] * 2.0")  # the fix
    fixed = engine.run()
    assert fixed.verdicts["wt_loop"].status is Outcome.PASS and fixed.reimported == ["wt_loop"]
    assert engine.failing == []
    assert engine.run().verdicts == {}  # nothing changed: nothing runs


def test_a_fault_names_kernel_block_thread_and_line(watched):
    root = watched("wt_fault")
    engine = Engine(Session.from_environment(root), ["wt_fault"], "sim")
    assert engine.run().verdicts["wt_fault"].status is Outcome.PASS
    edit(root / "prototypes" / "wt_fault.py", "if i < n:", "if i <= n:")
    (problem,) = engine.run().verdicts["wt_fault"].problems
    assert problem.kind == "fault"
    assert problem.kernel == "wt_fault_fwd"
    assert problem.block == (4, 0, 0) and problem.thread == (1, 0, 0)
    assert problem.where == f"{root / 'prototypes' / 'wt_fault.py'}:15"
    assert "wt_fault.py:15" in op_line(engine.run(every_op=True).verdicts["wt_fault"])


def test_a_syntax_error_is_shown_with_its_line_and_the_next_save_recovers(watched):
    root = watched("wt_syntax")
    engine = Engine(Session.from_environment(root), ["wt_syntax"], "sim")
    engine.run()
    prototype = root / "prototypes" / "wt_syntax.py"
    edit(prototype, "x[i] * 2.0", "x[i] * (2.0")
    broken = engine.run().verdicts["wt_syntax"]
    assert broken.status is Outcome.ERROR
    (problem,) = broken.problems
    assert problem.kind == "error" and problem.where == f"{prototype}:15"  # the error's site
    assert "load: wt_syntax.py:15: op wt_syntax cannot be loaded" in problem.line()
    assert "SyntaxError" in problem.text
    edit(prototype, "x[i] * (2.0", "x[i] * 2.0")
    assert engine.run().verdicts["wt_syntax"].status is Outcome.PASS


def test_a_twin_edit_compiles_that_twin_alone_and_keeps_the_prototype_module(watched):
    root = watched("wt_twin")
    engine = Engine(Session.from_environment(root), mode="check", backends=["twin-cpu"])
    first = engine.run()
    # each twin's two check builds: locals set to a pattern and to zero (twin_cpu/uninit.py)
    built = [
        "wt_twin (twin-cpu check)",
        "wt_twin (twin-cpu check-zero)",
        "wt_twin_other (twin-cpu check)",
        "wt_twin_other (twin-cpu check-zero)",
    ]
    assert sorted(first.recompiled) == built
    assert {v.status for v in first.verdicts.values()} == {"pass"}
    op = engine.session.op("wt_twin")

    twin = root / "cuda_src" / "wt_twin.cu"
    edit(twin, "x[i] * T(2)", "x[i] * T(3)")
    bug = engine.run()
    assert bug.reimported == [] and bug.recompiled == [
        "wt_twin (twin-cpu check)",
        "wt_twin (twin-cpu check-zero)",
    ]
    assert list(bug.verdicts) == ["wt_twin"]
    (problem,) = bug.verdicts["wt_twin"].problems
    assert problem.kind == "mismatch" and problem.backend == "twin-cpu"
    assert engine.session.op("wt_twin") is op  # the prototype was not imported again

    edit(twin, "x[i] * T(3)", "x[i] * T(2)")
    back = engine.run()  # the content seen before: its binary is in the cache
    assert back.verdicts["wt_twin"].status is Outcome.PASS and back.recompiled == []


def test_cases_that_failed_last_time_run_first(make_project, sources, monkeypatch):
    cases = '[portkit.cases.custom("a-first", [(33,)]), portkit.cases.custom("b-second", [(64,)])]'
    # Wrong for the second case only (n > 40), so the failing case is the last declared.
    body = "out[i] = x[i] * 2.0 if n < 40 else x[i]"
    root = make_project({"wt_order": (sources.unary_op("wt_order", body, cases=cases), None)})
    engine = Engine(Session.from_environment(root), ["wt_order"], "check", backends=["sim"])
    seen: list[list[str]] = []

    def cases_so_far(rerun) -> None:
        verdict = rerun.verdicts["wt_order"]
        seen.append(list(dict.fromkeys(r.case for r in verdict.results if r.backend == "sim")))

    engine.run(cases_so_far)
    assert seen[0] == ["a-first"]  # declared order on the first run
    edit(root / "prototypes" / "wt_order.py", "n < 40", "n  < 40")  # a save, no fix
    seen.clear()
    rerun = engine.run(cases_so_far)
    assert seen[0] == ["b-second"]  # the case that failed runs first
    assert rerun.first_verdict is not None and rerun.first_verdict <= rerun.seconds


def test_the_loop_wakes_on_a_save_and_stops_after_the_runs_asked(watched, capsys):
    from rich.console import Console

    root = watched("wt_wake")
    engine = Engine(Session.from_environment(root), ["wt_wake"], "sim")
    prototype = root / "prototypes" / "wt_wake.py"
    runs = []

    def save_after_first_run(rerun) -> None:
        runs.append(rerun)
        if rerun.number == 1:
            # Saved from another thread once the loop waits, as an editor would.
            threading.Timer(0.5, edit, (prototype, "x[i] * 2.0", "x[i] * 2.5")).start()

    t0 = time.monotonic()
    last = watch_loop(engine, PlainView(Console(width=200)), runs=2, on_run=save_after_first_run)
    assert time.monotonic() - t0 < 60
    assert [r.number for r in runs] == [1, 2]
    assert last.verdicts["wt_wake"].status is Outcome.FAIL and last.reimported == ["wt_wake"]
    out = capsys.readouterr().out
    assert "wt_wake pass in" in out and "wt_wake FAIL in" in out
    assert "run 2:" in out and "re-imported wt_wake" in out


def test_a_stop_event_ends_the_wait(watched):
    from rich.console import Console

    root = watched("wt_stop")
    engine = Engine(Session.from_environment(root), ["wt_stop"], "sim")
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    last = watch_loop(engine, PlainView(Console(width=200)), stop=stop)
    assert last.number == 1 and engine.runs == 1
