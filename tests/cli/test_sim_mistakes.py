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
