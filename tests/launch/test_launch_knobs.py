"""Launches that a knob's other value changes, traced on the CPU (no GPU): layernorm's
bwd_half_math picks the float32 backward for the 2-byte dtypes only, sigmoid's fwd_packs /
fwd_threads pick sigmoid_fwd_packs and its grid, softmax's rows_lane_packs 2 a warp for a
row of up to 64 packs; the defaults launch what they did before the knobs came; the
twins' new kernels compiled by NVRTC for their registers."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.launch.trace import record_launches, traced_launches
from portkit.project.cases import Case
from portkit.project.tuning_table import declared_choice

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ops():
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    catalog = discover(load_config(REPO))
    return {name: catalog.get(name) for name in ("layernorm", "sigmoid", "softmax")}


def launches(op, shapes, dtype, **knobs):
    choice = declared_choice(op).pinned(knobs) if knobs else None
    return record_launches(op, Case("probe", shapes, dtype), knob_choice=choice)


def layernorm_bwd_kernels(op, dtype, **knobs):
    shapes = ((64, 4096), (4096,), (4096,))
    return [launch.kernel for launch in launches(op, shapes, dtype, **knobs)][1:]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_layernorm_bwd_half_math_float32_takes_the_narrow_backward(ops, dtype):
    assert layernorm_bwd_kernels(ops["layernorm"], dtype) == ["layernorm_bwd", "layernorm_bwd_wb"]
    narrow = layernorm_bwd_kernels(ops["layernorm"], dtype, bwd_half_math="float32")
    assert narrow == ["layernorm_bwd32", "layernorm_bwd_wb"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layernorm_bwd_half_math_leaves_the_wide_dtypes_alone(ops, dtype):
    op = ops["layernorm"]
    default = launches(op, ((64, 4096), (4096,), (4096,)), dtype)
    assert launches(op, ((64, 4096), (4096,), (4096,)), dtype, bwd_half_math="float32") == default


def test_sigmoid_defaults_launch_one_pack_a_thread(ops):
    (fwd, _) = launches(ops["sigmoid"], (((1 << 20) + 3,),), "float32")
    assert fwd.kernel == "sigmoid_fwd"
    assert fwd.config.block == (256, 1, 1) and fwd.blocks == ((1 << 18) + 1 + 255) // 256


@pytest.mark.parametrize(("packs", "threads"), [(1, 128), (2, 256), (4, 512), (4, 128)])
def test_sigmoid_fwd_packs_grid_covers_every_pack_once(ops, packs, threads):
    n = (1 << 20) + 3  # 2^18 packs of 4 floats and a 3-element tail
    (fwd, bwd) = launches(ops["sigmoid"], ((n,),), "float32", fwd_packs=packs, fwd_threads=threads)
    assert fwd.kernel == "sigmoid_fwd_packs" and fwd.args[-1] == packs
    assert fwd.config.block == (threads, 1, 1)
    assert fwd.blocks == -(-((1 << 18) + 1) // (threads * packs))  # the tail counted as a pack
    assert bwd.kernel == "sigmoid_bwd"  # the knobs are the forward's


@pytest.mark.parametrize(
    ("cols", "dtype", "kernel", "group"),
    [
        (256, "float32", "softmax_rows2_fwd", 32),  # 64 packs: 2 a lane, a warp a row
        (127, "float32", "softmax_rows2_fwd", 16),  # 31 packs and a 3-column tail
        (128, "float64", "softmax_rows2_fwd", 32),
        (260, "float32", "softmax_rows_fwd", 16),  # 65 packs: the 8-pack kernel, as before
        (1024, "float32", "softmax_rows_fwd", 32),
    ],
)
def test_softmax_rows_lane_packs_2_holds_short_rows_in_fewer_registers(
    ops, cols, dtype, kernel, group
):
    op = ops["softmax"]
    (fwd, _) = launches(op, ((1000, cols),), dtype, rows_lane_packs=2)
    assert (fwd.kernel, fwd.args[-1]) == (kernel, group)
    assert fwd.blocks == -(-1000 // (128 // group))  # rows_threads 128: 128 / group rows a block
    (default, _) = launches(op, ((1000, cols),), dtype)
    assert default.kernel == "softmax_rows_fwd"


def test_knob_only_kernels_are_traced(ops):
    """The defaults never launch them; the compile and signature checks and the twins'
    instantiations see them through the other knob values' traced launches."""
    assert "layernorm_bwd32" in {launch.kernel for _, launch in traced_launches(ops["layernorm"])}
    assert "sigmoid_fwd_packs" in {launch.kernel for _, launch in traced_launches(ops["sigmoid"])}
    assert "softmax_rows2_fwd" in {launch.kernel for _, launch in traced_launches(ops["softmax"])}


def test_ops_whose_defaults_launch_every_kernel_trace_nothing_more():
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    op = discover(load_config(REPO)).get("add_rmsnorm")  # knobs that change launches only
    defaults = [
        (case.name, launch)
        for case in op.definition.cases
        if not case.gpu_only
        for launch in record_launches(op, case)
    ]
    assert traced_launches(op) == defaults


@pytest.mark.parametrize(
    ("op_name", "kernel", "most"),
    [
        # 64: two blocks of 512 an SM (bwd_threads_per_sm 1024), where layernorm_bwd's 118
        # leave one
        ("layernorm", "layernorm_bwd32<__nv_bfloat16>", 64),
        # 64: 1024 threads an SM at 4 packs (64 bytes) in flight each
        ("sigmoid", "sigmoid_fwd_packs<float>", 64),
        # 48: 10 blocks of 128 an SM, where softmax_rows_fwd's 80 leave 6
        ("softmax", "softmax_rows2_fwd<float>", 48),
    ],
)
def test_twin_knob_kernels_keep_their_registers_and_do_not_spill(ops, op_name, kernel, most):
    from portkit.lint.resources import twin_usage

    usage = twin_usage(ops[op_name].twin_path, kernel)
    assert 0 < usage.registers <= most
    assert (usage.spill_store_bytes, usage.spill_load_bytes, usage.local_bytes) == (0, 0, 0)
