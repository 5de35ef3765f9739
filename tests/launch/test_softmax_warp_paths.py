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


def forward_launch(op, rows: int, cols: int, dtype: str):
    (launch,) = record_launches(op, Case("probe", ((rows, cols),), dtype), backward=False)
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


@pytest.fixture(scope="module")
def twin_float32(op):
    from portkit.lint.resources import twin_usage

    return {kernel: twin_usage(op.twin_path, f"{kernel}<float>") for kernel in FORWARD_KERNELS}


@pytest.mark.parametrize("kernel", sorted(FORWARD_KERNELS))
def test_twin_forward_kernels_do_not_spill(twin_float32, kernel):
    usage = twin_float32[kernel]
    assert usage.registers > 0
    assert (usage.spill_store_bytes, usage.spill_load_bytes, usage.local_bytes) == (0, 0, 0)


@pytest.mark.parametrize(
    ("kernel", "most"),
    # 32: 64 warps an SM for 256-column rows; 64: 32 warps an SM for 1024-column rows
    [("softmax_warp_held2_fwd", 32), ("softmax_warp_held8_fwd", 64)],
)
def test_short_row_kernels_keep_their_occupancy(twin_float32, kernel, most):
    assert twin_float32[kernel].registers <= most
