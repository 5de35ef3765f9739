"""`portkit diff` and `portkit bench` judge an output against the reference as `portkit
check` does, by the measured control (checking/control.py), so that none of the three
calls wrong what another passes. The newcomer's segment sum is the witness: its correct
cancelling sum (32 terms ~N(0, 8) adding up to about 0.1) misses the float32 dtype table
and is within twice torch's own float32 error; a kernel that drops a term is outside both.
"""

from __future__ import annotations

import json

from portkit.bench.tasks import tolerances_of, verify
from portkit.checking.reference_run import reference_run
from portkit.project.cases import make_inputs
from portkit.results import Outcome
from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("segment_sum")
DROPPED = PROTOTYPE.replace(
    "for r in range(offsets[s], offsets[s + 1]):\n            out[s, c] += values[r, c]",
    "for r in range(offsets[s] + 1, offsets[s + 1]):\n            out[s, c] += values[r, c]",
)
CASE = "float32-cancelling"


class Clock:
    """Marks 10 us apart; all the bench runner needs of a clock here."""

    cover_us = 0.0

    def __init__(self):
        self.now = 0.0

    def prepare(self, spin=True):
        pass

    def mark(self):
        self.now += 10.0
        return self.now

    def elapsed_us(self, start, end):
        return end - start

    def covers(self, host_us):
        return True


def bench_forward(make_project, load_op, prototype):
    from portkit.backends import create
    from portkit.bench.runner import Bench

    config, op = load_op(make_project({"segment_sum": (prototype, None)}), "segment_sum")
    bench = Bench(Clock(), reps=1, warmup=1, directions=("forward",))
    rows = bench.run_op(op, [op.case(CASE)], [create("torch", config), create("sim", config)])
    return op, next(m for m in rows if m.implementation == "sim")


def check_forward(make_project, cli, prototype) -> dict:
    root = make_project({"segment_sum": (prototype, None)})
    result = cli(root, "check", "segment_sum", "--backend", "sim", "--case", CASE, "--json")
    (row,) = [r for r in json.loads(result.stdout)["results"] if r["check"] == "forward"]
    return row


def diff_json(make_project, cli, prototype) -> dict:
    root = make_project({"segment_sum": (prototype, None)})
    result = cli(root, "diff", "segment_sum", "--sim", "--case", CASE, "--json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_the_dtype_table_alone_calls_the_correct_sum_wrong(make_project, load_op):
    """What diff and bench used: not idle, the case needs the control."""
    from portkit.backends import create

    config, op = load_op(make_project({"segment_sum": (PROTOTYPE, None)}), "segment_sum")
    case = op.case(CASE)
    inputs = make_inputs(case, "cpu")
    got, _ = op.definition.forward(create("sim", config).kernels(op), *inputs)
    expected, _ = reference_run(op, case, inputs, backward=False)
    assert verify([got], expected, tolerances_of(op, case, "forward", expected), "output")


def test_bench_passes_the_correct_sum_as_check_does(make_project, load_op, cli):
    _, measured = bench_forward(make_project, load_op, PROTOTYPE)
    assert measured.status is Outcome.PASS, measured.detail
    assert check_forward(make_project, cli, PROTOTYPE)["status"] == "pass"


def test_bench_fails_a_dropped_term_as_check_does(make_project, load_op, cli):
    assert DROPPED != PROTOTYPE
    _, measured = bench_forward(make_project, load_op, DROPPED)
    assert measured.status is Outcome.FAIL
    assert "torch's float32 error; bound 2x" in measured.detail
    assert check_forward(make_project, cli, DROPPED)["status"] == "fail"


def test_diff_agrees_with_check_on_the_correct_sum(make_project, cli):
    report = diff_json(make_project, cli, PROTOTYPE)
    (case,) = report["cases"]
    tensor = next(t for t in case["tensors"] if t["name"] == "output 0")
    assert tensor["mismatches"] == 0, tensor
    assert tensor["bound"].startswith("2x torch's float32 error against float64")


def test_diff_counts_what_check_fails(make_project, cli):
    report = diff_json(make_project, cli, DROPPED)
    (case,) = report["cases"]
    tensor = next(t for t in case["tensors"] if t["name"] == "output 0")
    row = check_forward(make_project, cli, DROPPED)
    # check's row: "output 0: N of 4096 elements differ"; diff counts the same elements
    assert f"{tensor['mismatches']} of 4096 elements differ" in row["detail"]
    assert tensor["mismatches"] > 0


def test_diff_keeps_the_twin_table_against_a_twin(make_project, cli):
    root = make_project({"segment_sum": (PROTOTYPE, TWIN)})
    result = cli(root, "diff", "segment_sum", "--case", "float64-gradcheck", "--json")
    tensors = json.loads(result.stdout)["cases"][0]["tensors"]
    # prototype against the CPU twin: one algorithm twice, the twin column as in check
    assert tensors and all(t["bound"] == "" for t in tensors)
