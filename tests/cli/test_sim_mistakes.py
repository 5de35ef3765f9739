"""``portkit sim`` on mistakes and corner cases: one line and exit 2 for a usage
mistake, never a traceback; outputs smaller than the inputs print in the table."""

from __future__ import annotations

import json

import pytest

ROW_SUM = """\
import portkit
from numba import cuda


@cuda.jit
def row_sum_fwd(x, out, rows, cols):
    r = cuda.grid(1)
    if r < rows:
        total = x[r, 0] * 0
        for c in range(cols):
            total += x[r, c]
        out[r] = total


@portkit.op(
    reference=lambda x: x.sum(1),
    cases=portkit.cases.rows(
        shapes=((3, 5), (1, 1), (0, 4)), dtypes=("float32",), large=None, gradcheck=False
    ),
)
class RowSum:
    def forward(k, x):
        rows, cols = x.shape
        out = k.empty((rows,), dtype=x.dtype)
        if rows:
            k.row_sum_fwd[portkit.cdiv(rows, 32), 32](x, out, rows, cols)
        return out, ()
"""


@pytest.fixture
def row_sum(make_project):
    return make_project({"row_sum": (ROW_SUM, None)})


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("case", ["float32-3x5", "float32-1x1", "float32-0x4"])
def test_sim_output_smaller_than_show(cli, row_sum, case):
    result = cli(row_sum, "sim", "row_sum", "--case", case)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert result.output.rstrip().endswith("PASS")


def test_sim_default_case_of_a_row_reduction(cli, row_sum):
    # the default case is the largest, 3x5: 15 input elements, 3 output elements
    result = cli(row_sum, "sim", "row_sum")
    assert result.exit_code == 0, result.output
    table = [line for line in result.output.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in table] == [str(j) for j in range(8)]
    # rows past the output's 3 elements show the input alone
    assert table[5].split("│")[3].strip() == ""
    assert result.output.rstrip().endswith("PASS")


SPIN_BODY = """\
j = i
while j >= 0:
    j = (j + 1) % 7
out[i] = x[i]"""


@pytest.fixture
def spinning(make_project, sources):
    return make_project(
        {"spin": (sources.unary_op("spin", SPIN_BODY, cases=sources.ONE_CASE), None)}
    )


@pytest.mark.parametrize("engine", ["lockstep", "per-thread"])
def test_sim_budget_stops_a_kernel_that_never_finishes(cli, spinning, monkeypatch, engine):
    monkeypatch.setenv("PORTKIT_SIMT_ENGINE", engine)
    result = cli(spinning, "sim", "spin", "--budget", "0.3")
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert (
        "kernel spin_fwd: still running after 0.3 s (the budget of one simulated launch) "
        "at block (0, 0, 0), thread (0, 0, 0), " in out
    )
    assert "spin.py:" in out and "needs --budget SECONDS or [tool.portkit] sim-budget" in out
    assert "Traceback" not in result.output


def test_check_budget_fails_the_case_and_goes_on(cli, spinning):
    result = cli(spinning, "check", "spin", "--backend", "sim", "--no-compile", "--budget", "0.3")
    assert result.exit_code == 1, result.output
    assert "still running after 0.3 s" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_sim_budget_from_pyproject(cli, make_project, sources):
    table = 'prototypes = "prototypes"\ncuda-src = "cuda_src"\nsim-budget = 0.3\n'
    root = make_project(
        {"spin": (sources.unary_op("spin", SPIN_BODY, cases=sources.ONE_CASE), None)},
        portkit_table=table,
    )
    result = cli(root, "sim", "spin")
    assert result.exit_code == 1, result.output
    assert "still running after 0.3 s" in " ".join(result.output.split())


@pytest.mark.parametrize("value", ['"fast"', "-1", "true", "inf"])
def test_sim_budget_in_pyproject_is_validated(cli, make_project, sources, value):
    table = f'prototypes = "prototypes"\ncuda-src = "cuda_src"\nsim-budget = {value}\n'
    root = make_project({"twice": (sources.unary_op("twice"), None)}, portkit_table=table)
    result = cli(root, "sim", "twice")
    assert result.exit_code == 2, result.output
    (line,) = lines(result.output)
    assert line.endswith(
        "[tool.portkit] sim-budget must be a number of seconds >= 0 (0: no limit), got "
        + repr({'"fast"': "fast", "-1": -1, "true": True, "inf": float("inf")}[value])
    )


def test_sim_budget_option_is_validated(cli, row_sum):
    result = cli(row_sum, "sim", "row_sum", "--budget", "-1")
    assert result.exit_code == 2
    assert (
        "Invalid value for '--budget': -1.0 is not in the range 0<=x<=1000000000.0" in result.output
    )


def test_check_logs_progress_when_not_a_terminal(cli, make_project, sources):
    root = make_project({"twice": (sources.unary_op("twice", cases=sources.ONE_CASE), None)})
    result = cli(root, "check", "twice", "--backend", "sim")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "checking twice: compile for sm_90, lint (1/2)...",
        "checking twice float32-n129 (2/2)...",
    ]


@pytest.mark.parametrize(
    ("command", "marker", "interrupted"),
    [
        (["sim", "spin"], "spin in the simulator", "spin case float32-n129 in the simulator"),
        (["check", "spin", "--no-compile"], "checking spin", "spin float32-n129 (1/1)"),
    ],
)
def test_ctrl_c_says_what_it_interrupted(spinning, command, marker, interrupted):
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    process = subprocess.Popen(
        [sys.executable, "-m", "portkit.cli", *command, "--backend", "sim", "--budget", "0"],
        cwd=spinning,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    for line in process.stdout:  # until the launch that never ends has begun
        seen.append(line)
        if marker in line:
            break
    time.sleep(1)
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    output = "".join(seen) + rest
    assert process.returncode == 130, output
    assert output.splitlines()[-1] == f"interrupted while running {interrupted}"
    assert "Traceback" not in output and "Aborted" not in output


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = lines(result.output)
    return line


REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_sim_breakpoint_outside_every_launch(cli):
    # 300 float32 elements are 75 packs of 4: one block of 256 threads
    line = one_error_line(cli(REPO, "sim", "sigmoid", "--size", "300", "--block", "1"))
    assert line == (
        "error: --block (1, 0, 0) --thread (0, 0, 0) is outside the first launch of "
        "sigmoid_fwd, where pdb stops, so it would never stop; launches: sigmoid_fwd grid "
        "(1, 1, 1) block (256, 1, 1); sigmoid_bwd grid (1, 1, 1) block (256, 1, 1)"
    )


def test_sim_thread_outside_the_block(cli, row_sum):
    line = one_error_line(cli(row_sum, "sim", "row_sum", "--thread", "32"))
    assert line.startswith("error: --block (0, 0, 0) --thread (32, 0, 0) is outside")
    assert line.endswith("launches: row_sum_fwd grid (1, 1, 1) block (32, 1, 1)")


def test_sim_breakpoint_in_a_kernel_this_case_does_not_launch(cli, row_sum):
    args = ("--case", "float32-0x4", "--kernel", "row_sum_fwd", "--block", "0")
    line = one_error_line(cli(row_sum, "sim", "row_sum", *args))
    assert line == (
        "error: kernel row_sum_fwd is not launched on this case, so pdb would never stop; "
        "launches: none"
    )


def test_sim_dtype_conflicts_with_case(cli):
    args = ("sim", "sigmoid", "--case", "float32-n129", "--dtype", "float64")
    assert one_error_line(cli(REPO, *args)) == (
        "error: --dtype float64 conflicts with --case float32-n129, a float32 case: drop one"
    )


def test_diff_dtype_conflicts_with_case(cli):
    args = ("diff", "sigmoid", "--case", "float32-n129", "--dtype", "float64", "--sim")
    assert one_error_line(cli(REPO, *args)) == (
        "error: --dtype float64 conflicts with --case float32-n129, a float32 case: drop one"
    )


@pytest.mark.parametrize("command", ["sim", "diff"])
def test_empty_shape_is_a_usage_error(cli, command):
    result = cli(REPO, command, "sigmoid", "--shape", "")
    assert result.exit_code == 2
    assert "Error: Invalid value: shape is like 129 or 4x129, got ''" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--size", "1099511627777", "1099511627777 is not in the range 0<=x<=1099511627776"),
        ("--size", "99999999999999999999999", "is not in the range 0<=x<=1099511627776"),
        ("--seed", "99999999999999999999999", "is not in the range 0<=x<=9223372036854775807"),
        ("--seed", "-1", "-1 is not in the range 0<=x<=9223372036854775807"),
    ],
)
def test_size_and_seed_have_bounds(cli, option, value, message):
    result = cli(REPO, "sim", "sigmoid", option, value)
    assert result.exit_code == 2
    assert f"Error: Invalid value for '{option}': " in result.output and message in result.output
    assert "Traceback" not in result.output


def test_shape_of_more_than_2_to_the_40_elements(cli):
    result = cli(REPO, "sim", "softmax", "--shape", "1048576x1048577")
    assert result.exit_code == 2
    assert "shape 1048576x1048577 has more than 2^40 elements" in result.output


@pytest.mark.parametrize("command", ["sim", "diff"])
def test_a_case_too_large_for_memory_says_so_before_allocating(cli, monkeypatch, command):
    import portkit.project.case_choice as case_choice

    monkeypatch.setattr(case_choice, "available_memory", lambda: 1 << 30)
    line = one_error_line(cli(REPO, command, "sigmoid", "--size", "100000000"))
    # 10^8 float32 elements: 16 copies of 4 bytes and 48 bytes of shadows each
    needed = 100_000_000 * (16 * 4 + 48) / 2**30
    assert line == (
        f"error: op sigmoid on inputs 100000000 float32 needs about {needed:.1f} GiB (inputs, "
        "outputs and the simulator's bookkeeping); this machine has 1.0 GiB available: "
        "pick a smaller --size or --shape"
    )


def test_available_memory_reads_the_machine():
    from portkit.project.case_choice import available_memory

    available = available_memory()
    assert available is not None and 0 < available < 1 << 50


def test_check_case_that_a_named_op_lacks(cli):
    args = ("check", "sigmoid", "softmax", "--case", "float32-n129", "--backend", "sim")
    line = one_error_line(cli(REPO, *args))
    assert line.startswith("error: op softmax has no case 'float32-n129'; cases: float32-1x1, ")


def test_check_named_ops_each_need_one_of_the_cases(cli):
    """With several --case, each named op runs the ones it has; none at all is a mistake."""
    args = ("check", "sigmoid", "softmax", "--case", "float32-n129", "--case", "float32-3x127")
    result = cli(REPO, *args, "--backend", "sim", "--no-compile", "--json")
    assert result.exit_code == 0, result.output
    ran = {(r["op"], r["case"]) for r in json.loads(result.stdout)["results"]}
    assert {("sigmoid", "float32-n129"), ("softmax", "float32-3x127")} <= ran
