"""layernorm's forward grid: float32 a persistent grid that walks the rows (the twin
pipelines a block's next row), every other dtype one row a block; traced on the CPU with
the traced H100's SM count (no GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.launch.trace import record_launches
from portkit.project.cases import Case
from portkit.runtime.launch_contract import TRACED_SM_COUNT

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def op():
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    return discover(load_config(REPO)).get("layernorm")


def forward_launch(op, rows: int, cols: int, dtype: str):
    (launch,) = record_launches(
        op, Case("probe", ((rows, cols), (cols,), (cols,)), dtype), backward=False
    )
    return launch


def test_float32_walks_the_rows_with_a_persistent_grid(op):
    launch = forward_launch(op, 1000, 4096, "float32")
    per_sm = 512 // launch.config.threads_per_block  # the twin's 2 blocks of 256 an SM
    assert launch.config.threads_per_block == 256
    assert launch.blocks == per_sm * TRACED_SM_COUNT < 1000
    assert launch.args[6] == 1000  # rows: the kernel walks them


def test_float32_never_launches_more_blocks_than_rows(op):
    assert forward_launch(op, 3, 4096, "float32").blocks == 3


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64"])
def test_other_dtypes_keep_one_row_a_block(op, dtype):
    launch = forward_launch(op, 1000, 4096, dtype)
    assert launch.blocks == 1000
    assert launch.args[6] == 1000
