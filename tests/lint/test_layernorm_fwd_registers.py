"""The layernorm twin's half-precision forward holds its row in float, not double: few
enough registers for 4 blocks of 256 threads an SM (sm_90, ptxas via NVRTC; no GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.lint.resources import twin_usage

TWIN = Path(__file__).resolve().parents[2] / "cuda_src" / "layernorm.cu"
REGISTERS_PER_SM = 65536


@pytest.mark.parametrize("dtype", ["__half", "__nv_bfloat16"])
def test_half_forward_fits_four_blocks_of_256_threads_an_sm(dtype):
    usage = twin_usage(TWIN, f"layernorm_fwd<{dtype}>")
    assert usage.spill_store_bytes == 0 and usage.spill_load_bytes == 0
    assert usage.registers * 256 * 4 <= REGISTERS_PER_SM, usage.registers


@pytest.mark.parametrize("dtype", ["__half", "__nv_bfloat16"])
def test_half_forward_does_a_fraction_of_floats_double_work(dtype):
    # a double conversion or two per element (float: 16 a thread) against one per thread
    half = twin_usage(TWIN, f"layernorm_fwd<{dtype}>").f64_instructions
    single = twin_usage(TWIN, "layernorm_fwd<float>").f64_instructions
    assert half * 2 < single, (half, single)


def test_float_forward_with_its_next_row_in_flight_fits_two_blocks_of_256_threads_an_sm():
    usage = twin_usage(TWIN, "layernorm_fwd<float>")
    assert usage.spill_store_bytes == 0 and usage.spill_load_bytes == 0
    assert usage.registers * 256 * 2 <= REGISTERS_PER_SM, usage.registers
