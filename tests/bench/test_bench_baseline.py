"""An op's ``baseline=`` on a CPU: each example op's baseline agrees with its reference on
the op's cases (judged by the bench runner itself, forward and backward), the bench
names the fastest torch row and reports the twin against it first, a wrong baseline is
a failed row that never wins, and the declaration is validated. A scripted clock gives
each torch function its own time; nothing here measures a time."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from portkit.bench.model import BASELINE, COMPILED, Report
from portkit.errors import OpDefinitionError
from portkit.results import Outcome
from tests.bench.test_bench import FakeClock, report, roles_report

REPO = Path(__file__).resolve().parents[2]


def repo_session():
    from portkit.project.session import Session

    return Session.from_environment(REPO)


OPS = sorted(repo_session().catalog.names)


def cpu_cases(op):
    """The op's cases a CPU runs quickly: neither GPU-sized nor GPU-only."""
    return [c for c in op.definition.cases if not c.large and not c.gpu_only]


@pytest.mark.parametrize("name", OPS)
def test_every_example_baseline_agrees_with_its_reference(name):
    """What bench checks before it times a baseline, on every CPU case of the op."""
    from portkit.bench.runner import Bench
    from portkit.bench.tasks import Baseline

    op = repo_session().op(name)
    assert op.definition.baseline is not None, f"{name} declares no baseline="
    directions = {"forward", "backward"} if op.definition.has_backward else {"forward"}
    bench = Bench(FakeClock(), reps=1, warmup=1)
    for case in cpu_cases(op):
        rows = bench.run_case(op, case, [Baseline()])
        assert {m.direction for m in rows} == directions, case.name
        for m in rows:
            assert m.status is Outcome.PASS, f"{name} {case.name} {m.direction}: {m.detail}"


def test_matmul_is_a_teaching_example_and_the_others_are_claims():
    session = repo_session()
    teaching = {n for n in OPS if session.op(n).definition.teaching}
    assert teaching == {"matmul"}


# -- the runner: which torch row wins ------------------------------------------------------


class WorkClock(FakeClock):
    """Time passes only when a torch function says it worked: ``spend(us)``."""

    def __init__(self):
        super().__init__()
        self.now = 0.0

    def mark(self):
        return self.now

    def spend(self, us):
        self.now += us


def timed_op(clock, reference_us, baseline_us, baseline_factor=1.0):
    """sigmoid with a reference and a baseline that take the given time on ``clock``."""
    op = repo_session().op("sigmoid")

    def reference(x):
        clock.spend(reference_us)
        return torch.sigmoid(x)

    def baseline(x):
        clock.spend(baseline_us)
        return torch.sigmoid(x) * baseline_factor

    definition = replace(op.definition, reference=reference, baseline=baseline)
    return replace(op, definition=definition)


def run_torch_rows(clock, op, compiled_us):
    from portkit.backends import create
    from portkit.bench.runner import Bench
    from portkit.bench.tasks import Baseline, CompiledReference
    from portkit.project.cases import Case
    from portkit.project.session import Session

    def compiler(function):
        def compiled(x):
            clock.spend(compiled_us)
            return torch.sigmoid(x)

        return compiled

    config = Session.from_environment(REPO).config
    backends = [create("torch", config), Baseline(), CompiledReference(compiler)]
    rows = Bench(clock, reps=3, warmup=1).run_op(op, [Case("n40", ((40,),))], backends)
    return report(*rows)


def test_bench_names_the_fastest_torch_row_and_its_ratio():
    clock = WorkClock()
    r = run_torch_rows(clock, timed_op(clock, 50.0, 5.0), compiled_us=20.0)
    for direction in ("forward", "backward"):
        rows = {m.implementation: m for m in r.measurements if m.direction == direction}
        assert set(rows) == {"torch", "baseline", "torch.compile"}
        assert all(m.status is Outcome.PASS for m in rows.values()), rows
        forward = direction == "forward"
        # the backward is autograd's on a graph made once: no function is called, no time
        if not forward:
            continue
        assert {m.implementation: m.time.median for m in rows.values()} == {
            "torch": 50.0, "baseline": 5.0, "torch.compile": 20.0,
        }  # fmt: skip
        for m in rows.values():
            assert r.best_torch(m) is rows["baseline"]
            assert r.best_role(m) == BASELINE
        assert r.figures(rows["torch"])["x_best"] == pytest.approx(0.1)
        assert r.figures(rows["baseline"])["x_best"] == pytest.approx(1.0)
    # slower baseline: the reference wins
    clock = WorkClock()
    r = run_torch_rows(clock, timed_op(clock, 10.0, 40.0), compiled_us=20.0)
    twin_like = r.find("sigmoid", "n40", "forward", "baseline")
    assert r.best_role(twin_like) == "reference"


def test_a_wrong_baseline_fails_and_never_wins():
    clock = WorkClock()
    r = run_torch_rows(clock, timed_op(clock, 50.0, 1.0, baseline_factor=3.0), compiled_us=5.0)
    wrong = r.find("sigmoid", "n40", "forward", "baseline")
    assert wrong.status is Outcome.FAIL and wrong.time is None and wrong.failed, wrong
    assert "differ" in wrong.detail
    assert wrong in r.failures
    torch_row = r.find("sigmoid", "n40", "forward", "torch")
    assert r.best_role(torch_row) == COMPILED  # 5 us; the wrong baseline's 1 us is no row
    assert r.figures(torch_row)["x_best"] == pytest.approx(5.0 / 50.0)


def test_an_op_without_a_baseline_gets_a_skipped_row():
    from portkit.bench.runner import Bench
    from portkit.bench.tasks import NO_BASELINE, Baseline
    from portkit.project.cases import Case

    op = repo_session().op("sigmoid")
    op = replace(op, definition=replace(op.definition, baseline=None))
    rows = Bench(FakeClock(), reps=2, warmup=1).run_case(op, Case("n8", ((8,),)), [Baseline()])
    assert [(m.status, m.detail) for m in rows] == [(Outcome.SKIP, NO_BASELINE)] * 2
    assert not any(m.failed for m in rows)


# -- the report: best torch first, old reports still read ----------------------------------


def with_baseline(median, **fields):
    base = roles_report().find("op", "c", "forward", "torch")
    return replace(
        base, implementation="baseline", role=BASELINE, time=type(base.time).of([median] * 5),
        **fields,
    )  # fmt: skip


def test_json_puts_best_torch_and_x_best_first_and_keeps_x_torch():
    r = report(*roles_report().measurements, with_baseline(0.5))
    data = json.loads(json.dumps(r.to_dict()))
    twin = next(row for row in data["results"] if row["implementation"] == "twin")
    figures = list(twin)[list(twin).index("teaching") + 1 :]
    assert figures[:2] == ["best_torch", "x_best"]
    assert twin["best_torch"] == "baseline"
    assert twin["x_best"] == pytest.approx(0.25)  # baseline 0.5 us, twin 2 us
    assert twin["x_torch"] == pytest.approx(0.5)  # against the reference, as before
    assert Report.from_dict(data) == r


def test_an_old_report_without_baseline_rows_compares_and_figures():
    from portkit.bench.regression import SAME, compare_reports

    old = roles_report().to_dict()
    for row in old["results"]:
        for key in ("teaching", "best_torch", "x_best"):
            del row[key]
    old_report = Report.from_dict(old)
    assert all(m.teaching == "" for m in old_report.measurements)
    twin = old_report.find("op", "c", "forward", "twin")
    assert old_report.best_role(twin) == "reference"  # no baseline row: the reference
    new = report(*roles_report().measurements, with_baseline(0.5))
    verdicts = {v.key[3]: v.status for v in compare_reports(old_report, new)}
    assert verdicts == {"torch": SAME, "numba": SAME, "twin": SAME, "baseline": "new"}


def test_the_table_shows_best_torch_first_and_marks_teaching_rows():
    from rich.console import Console

    from portkit.bench.table import results_table

    twin = roles_report().find("op", "c", "forward", "twin")
    r = report(*roles_report().measurements[:2], replace(twin, teaching="float64 sums"))
    r = report(*r.measurements, with_baseline(0.5))
    console = Console(width=250, record=True)
    console.print(results_table(r))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "impl" in line)
    assert header.index("x best") < header.index("best torch") < header.index("median us")
    assert header.index("median us") < header.index("x ref")
    twin_line = next(line for line in text.splitlines() if " twin " in line)
    assert "0.25" in twin_line and "baseline" in twin_line  # x best, best torch
    assert "teaching example: no speed claim" in twin_line


# -- the declaration -----------------------------------------------------------------------


def declare(**options):
    import portkit

    def forward(k, x):
        return x, ()

    cases = [portkit.cases.custom("float32-n4", [(4,)])]
    cls = type("Neg", (), {"forward": staticmethod(forward)})
    return portkit.op(reference=torch.neg, cases=cases, dtypes=("float32",), **options)(cls)


def test_baseline_and_teaching_are_validated():
    spec = declare(baseline=torch.neg, teaching="a lesson").__portkit_op__
    assert spec.baseline is torch.neg and spec.teaching == "a lesson"
    assert declare().__portkit_op__.baseline is None
    with pytest.raises(OpDefinitionError, match="baseline must be callable"):
        declare(baseline="torch.neg")
    for bad in ("", "  ", True):
        with pytest.raises(OpDefinitionError, match="teaching is the reason"):
            declare(teaching=bad)


# -- a torch row against a kernels' tolerance ----------------------------------------------


def rows_with_a_kernels_tolerance(monkeypatch, baseline):
    """sigmoid's baseline rows where the op declares an exact tolerance for its kernels
    (as rmsnorm declared one for its float64 partial sums before the measured control)."""
    from portkit.bench import runner as runner_module
    from portkit.bench.runner import Bench
    from portkit.bench.tasks import Baseline
    from portkit.checking.compare import Tolerance
    from portkit.project.cases import Case

    exact = Tolerance(rtol=0.0, atol=0.0, reason="the kernels round once, as the reference")
    monkeypatch.setattr(
        runner_module, "tolerances_of", lambda op, case, direction, expected: [exact] * 4
    )
    op = repo_session().op("sigmoid")
    op = replace(op, definition=replace(op.definition, baseline=baseline))
    case = Case("n4096", ((4096,),))
    rows = Bench(FakeClock(), reps=2, warmup=1).run_case(op, case, [Baseline()])
    return {m.direction: m for m in rows}


def test_a_torch_row_beyond_the_kernels_tolerance_is_judged_by_the_control(monkeypatch):
    # another float32 order of the same function: ULPs from torch.sigmoid, within twice
    # torch's own float32 error against float64
    rows = rows_with_a_kernels_tolerance(monkeypatch, lambda x: 1 / (1 + torch.exp(-x)))
    assert rows["forward"].status is Outcome.PASS, rows["forward"].detail


def test_a_wrong_torch_row_fails_the_control_too(monkeypatch):
    rows = rows_with_a_kernels_tolerance(monkeypatch, lambda x: torch.sigmoid(x) * 1.001)
    wrong = rows["forward"]
    assert wrong.status is Outcome.FAIL, wrong
    assert "against float64" in wrong.detail and "torch's float32 error" in wrong.detail
