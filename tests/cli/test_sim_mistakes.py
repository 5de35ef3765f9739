"""``portkit sim`` on mistakes and corner cases: one line and exit 2 for a usage
mistake, never a traceback; outputs smaller than the inputs print in the table."""

from __future__ import annotations

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
