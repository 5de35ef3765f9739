"""softmax_warp's forward picks its kernel by row length: register-held rows in kernels of
2, 8 and 32 packs a lane, streamed rows beyond; traced on the CPU (no GPU), the twin's
kernels compiled by NVRTC for their register counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.launch.trace import record_launches
from portkit.project.cases import Case

REPO = Path(__file__).resolve().parents[2]
STREAMED = "softmax_warp_fwd"
SPLIT = "softmax_warp_split_fwd"  # a streamed row over a block of warps (warps_per_row > 1)
SPLIT_HELD = "softmax_warp_split_held_fwd"  # a row over a block of warps, held where it fits
SPLIT_BWD = "softmax_warp_split_bwd"  # a held row over a block of warps (bwd_warps_per_row > 1)
STREAM_BWD = "softmax_warp_split_stream_bwd"  # a longer row over a block of warps
SPLIT_KERNELS = {SPLIT, SPLIT_HELD, SPLIT_BWD, STREAM_BWD}
FORWARD_KERNELS = {
    "softmax_warp_held2_fwd",
    "softmax_warp_held8_fwd",
    "softmax_warp_held32_fwd",
    STREAMED,
}


@pytest.fixture(scope="module")
def op():
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    return discover(load_config(REPO)).get("softmax_warp")


def launches(op, rows: int, cols: int, dtype: str, backward: bool, **knobs):
    choice = None
    if knobs:
        from portkit.project.tuning_table import declared_choice

        choice = declared_choice(op).pinned(knobs)
    case = Case("probe", ((rows, cols),), dtype)
    return record_launches(op, case, backward=backward, knob_choice=choice)


def forward_launch(op, rows: int, cols: int, dtype: str, **knobs):
    (launch,) = launches(op, rows, cols, dtype, False, **knobs)
    return launch


def backward_launch(op, rows: int, cols: int, dtype: str, **knobs):
    _, launch = launches(op, rows, cols, dtype, True, **knobs)
    return launch


@pytest.mark.parametrize(
    ("cols", "dtype", "kernel"),
    [
        (1, "float32", "softmax_warp_held2_fwd"),
        (256, "float32", "softmax_warp_held2_fwd"),  # 64 packs: 2 a lane
        (259, "float32", "softmax_warp_held2_fwd"),  # 64 packs and a 3-column tail
        (260, "float32", "softmax_warp_held8_fwd"),  # 65 packs
        (1024, "float32", "softmax_warp_held8_fwd"),
        (1028, "float32", "softmax_warp_held32_fwd"),
        (4096, "float32", "softmax_warp_held32_fwd"),
        (4100, "float32", STREAMED),
        (32768, "float32", STREAMED),
        (128, "float64", "softmax_warp_held2_fwd"),  # 64 packs of 2 columns
        (130, "float64", "softmax_warp_held8_fwd"),
        (2048, "float64", "softmax_warp_held32_fwd"),
        (2050, "float64", STREAMED),
    ],
)
def test_forward_kernel_follows_the_packs_a_lane(op, cols, dtype, kernel):
    launch = forward_launch(op, 5, cols, dtype)
    assert launch.kernel == kernel
    # a warp per row, 4 rows a block, whatever the kernel
    assert launch.config.grid == (2, 1, 1) and launch.config.block == (128, 1, 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_forward_kernel_has_a_simulator_sized_case(op, dtype):
    cases = [
        c
        for c in op.definition.cases
        if c.dtype == dtype and c.numel and not c.gpu_only and not c.large
    ]
    launched = {launch.kernel for case in cases for launch in record_launches(op, case)}
    assert launched == FORWARD_KERNELS | {"softmax_warp_bwd"}


@pytest.mark.parametrize("warps", [4, 8, 16])
def test_warps_per_row_splits_a_streamed_row_over_a_block(op, warps):
    launch = forward_launch(op, 5, 32768, "float32", warps_per_row=warps)
    assert launch.kernel == SPLIT
    assert launch.config.grid == (5, 1, 1) and launch.config.block == (warps * 32, 1, 1)


@pytest.mark.parametrize(
    ("cols", "dtype", "warps", "kernel"),
    [
        (8192, "float32", 8, SPLIT_HELD),  # 2048 packs: 8 a thread of 256
        (8192, "float32", 4, SPLIT),  # 16 a thread of 128: more than held
        (8196, "float32", 8, SPLIT),  # 2049 packs: 9 a thread
        (4100, "float32", 8, SPLIT_HELD),  # a streamed row of a warp, held by 8 warps
        (16384, "float32", 16, SPLIT_HELD),
        (4098, "float64", 4, SPLIT),  # 2049 packs of 2 columns: 17 a thread of 128
        (4098, "float64", 16, SPLIT_HELD),
    ],
)
def test_warps_per_row_holds_a_split_row_where_it_fits(op, cols, dtype, warps, kernel):
    launch = forward_launch(op, 5, cols, dtype, warps_per_row=warps)
    assert launch.kernel == kernel
    assert launch.config.grid == (5, 1, 1) and launch.config.block == (warps * 32, 1, 1)


@pytest.mark.parametrize(
    ("cols", "dtype"), [(4096, "float32"), (1000, "float32"), (2048, "float64")]
)
def test_warps_per_row_leaves_held_rows_a_warp_each(op, cols, dtype):
    held = forward_launch(op, 5, cols, dtype)
    assert forward_launch(op, 5, cols, dtype, warps_per_row=8) == held


@pytest.mark.parametrize(
    ("cols", "dtype", "warps", "kernel"),
    [
        (4096, "float32", 4, SPLIT_BWD),  # 1024 packs: 8 a thread of 128
        (4100, "float32", 4, STREAM_BWD),  # 1025 packs: 9 a thread, more than held
        (4100, "float32", 8, SPLIT_BWD),
        (16384, "float32", 16, SPLIT_BWD),  # 4096 packs: 8 a thread of 512
        (32768, "float32", 16, STREAM_BWD),
        (2048, "float64", 4, SPLIT_BWD),
        (1, "float32", 4, SPLIT_BWD),  # no pack, the tail column only
        (4096, "float32", 1, "softmax_warp_bwd"),  # the default: a warp a row
    ],
)
def test_bwd_warps_per_row_gives_a_row_a_block_held_where_it_fits(op, cols, dtype, warps, kernel):
    launch = backward_launch(op, 5, cols, dtype, bwd_warps_per_row=warps)
    assert launch.kernel == kernel
    if kernel in (SPLIT_BWD, STREAM_BWD):
        assert launch.config.grid == (5, 1, 1) and launch.config.block == (warps * 32, 1, 1)
    else:  # a warp a row, bwd_rows_per_block (4) rows a block
        assert launch.config.grid == (2, 1, 1) and launch.config.block == (128, 1, 1)


def test_the_split_kernel_is_traced_for_the_checks(op):
    """The defaults never launch it; the compile and signature checks and the twin's
    instantiations see it through the traced launches of the other knob values."""
    from portkit.launch.trace import launch_signatures, traced_launches

    traced = {launch.kernel for _, launch in traced_launches(op)}
    assert SPLIT_KERNELS <= traced
    assert SPLIT_KERNELS <= set(launch_signatures(op, "float64"))


@pytest.fixture(scope="module")
def twin_float32(op):
    from portkit.lint.resources import twin_usage

    kernels = FORWARD_KERNELS | SPLIT_KERNELS
    return {kernel: twin_usage(op.twin_path, f"{kernel}<float>") for kernel in kernels}


@pytest.mark.parametrize("kernel", sorted(FORWARD_KERNELS | SPLIT_KERNELS))
def test_twin_row_kernels_do_not_spill(twin_float32, kernel):
    usage = twin_float32[kernel]
    assert usage.registers > 0
    assert (usage.spill_store_bytes, usage.spill_load_bytes, usage.local_bytes) == (0, 0, 0)


@pytest.mark.parametrize(
    ("kernel", "most"),
    # 32: 64 warps an SM for 256-column rows; 64: 32 warps an SM for 1024-column rows
    # 128: the split kernels launch 512 threads (warps_per_row, bwd_warps_per_row 16)
    [
        ("softmax_warp_held2_fwd", 32),
        ("softmax_warp_held8_fwd", 64),
        (SPLIT, 128),
        (SPLIT_HELD, 64),  # 4 blocks of 256 an SM
        (SPLIT_BWD, 128),
        (STREAM_BWD, 128),
    ],
)
def test_row_kernels_keep_their_occupancy(twin_float32, kernel, most):
    assert twin_float32[kernel].registers <= most
