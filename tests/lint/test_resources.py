"""Resource usage of prototypes and twins, compiled for sm_90 on a machine with no GPU:
registers and memory from ptxas's verbose log, float64 work, access widths and
special functions from the PTX."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, int64

from portkit.errors import PortkitError, TwinCompileError
from portkit.lint.ptx import KernelProperties, PtxModule, ResourceUsage, kernel_usage
from portkit.lint.resources import prototype_usage, twin_usage
from portkit.numba_internals import device_compute_capability

REPO = Path(__file__).resolve().parents[2]
F32_ARRAY = float32[::1]


def repo_op(name: str):
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    return discover(load_config(REPO)).get(name)


def float32_signatures(op) -> dict[str, tuple]:
    """Kernel name -> argument types, from the float32 cases that launch it (softmax picks
    its forward kernel by row length)."""
    from portkit.launch.trace import launch_signatures

    return launch_signatures(op, "float32")


@pytest.fixture(scope="module")
def usage() -> dict[str, dict[str, ResourceUsage]]:
    """{"prototype"|"twin": {kernel: ResourceUsage}} for sigmoid and softmax in float32."""
    found: dict[str, dict[str, ResourceUsage]] = {"prototype": {}, "twin": {}}
    for name in ("sigmoid", "softmax"):
        op = repo_op(name)
        for kernel, signature in float32_signatures(op).items():
            found["prototype"][kernel] = prototype_usage(op.kernels[kernel], signature)
            found["twin"][kernel] = twin_usage(op.twin_path, f"{kernel}<float>")
    return found


def test_every_kernel_of_both_ops_was_measured(usage):
    # sigmoid_fwd_packs, softmax_rows2_fwd and softmax_bwd_wide: launched by a knob's other
    # value, traced too
    expected = {"sigmoid_fwd", "sigmoid_bwd", "sigmoid_fwd_packs"}
    expected |= {"softmax_fwd", "softmax_rows_fwd", "softmax_rows2_fwd", "softmax_bwd"}
    expected |= {"softmax_bwd_wide"}
    assert set(usage["prototype"]) == expected
    assert set(usage["twin"]) == expected


@pytest.mark.parametrize("kernel", ["sigmoid_fwd", "sigmoid_bwd"])
def test_sigmoid_registers_on_both_sides(usage, kernel):
    assert usage["prototype"][kernel].registers > 0
    assert usage["twin"][kernel].registers > 0


@cuda.jit(device=True)
def sigmoid_before_fix(v):
    # prototypes/sigmoid.py before `portkit lint` was run on it: bare int literals.
    if v >= 0:
        z = math.exp(-v)
        return 1 / (1 + z)
    z = math.exp(v)
    return z / (1 + z)


@cuda.jit
def sigmoid_fwd_before_fix(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = sigmoid_before_fix(x[i])


def test_int_literals_promote_a_float32_sigmoid_to_float64(usage):
    # `1 / (1 + z)`: an int over a float32 is a float64 division in numba.
    with device_compute_capability((9, 0)):
        before = prototype_usage(sigmoid_fwd_before_fix, (F32_ARRAY, F32_ARRAY, int64))
    assert before.f64_instructions > 0
    assert any(key.endswith(".f64") for key in before.special_functions)
    # The repository's prototype, fixed with float32 constants, matches its twin.
    prototype, twin = usage["prototype"]["sigmoid_fwd"], usage["twin"]["sigmoid_fwd"]
    assert prototype.f64_instructions == 0
    assert twin.f64_instructions == 0
    assert not any(key.endswith(".f64") for key in prototype.special_functions)
    assert not any(key.endswith(".f64") for key in twin.special_functions)


def test_sigmoid_twin_moves_16_byte_packs_and_the_prototype_cannot(usage):
    # The twin reads and writes 16-byte packs (a float4 per access); numba has no vector
    # load of an array slice, so the prototype moves the same elements 4 bytes at a time.
    for side in ("prototype", "twin"):
        fwd = usage[side]["sigmoid_fwd"]
        assert fwd.shared_bytes == 0, side
        # exp of a float32 on both sides: the SFU's ex2.
        assert fwd.special_functions.get("ex2.approx.f32", 0) > 0, side
    prototype = usage["prototype"]["sigmoid_fwd"]
    assert prototype.local_bytes == 0 and prototype.spill_store_bytes == 0
    # No register cap (capped at 32 the division's slow path spilled, and the backward was
    # slower on an H100): the kernel fits without spilling, 6 blocks of 256 threads an SM
    # at least (38 registers with NVRTC 13).
    twin = usage["twin"]["sigmoid_fwd"]
    assert twin.spill_store_bytes == 0 and twin.registers * 256 * 6 <= 65536
    assert usage["twin"]["sigmoid_fwd"].global_loads.get(16, 0) > 0
    assert usage["twin"]["sigmoid_fwd"].global_stores.get(16, 0) > 0
    assert set(usage["prototype"]["sigmoid_fwd"].global_loads) == {4}
    assert set(usage["prototype"]["sigmoid_fwd"].global_stores) == {4}


@pytest.mark.parametrize(("kernel", "floats"), [("softmax_fwd", 16), ("softmax_bwd", 8)])
def test_softmax_shares_one_float_per_warp_and_statistic_on_both_sides(usage, kernel, floats):
    # Up to 8 warps (the threads knobs' largest block, MAX_THREADS 256): (max, sum) per warp
    # forward, the dot product per warp backward; float32 accumulation for float32 inputs
    # on both sides, as torch.softmax.
    for side in ("prototype", "twin"):
        assert usage[side][kernel].shared_bytes == floats * 4, side
        assert usage[side][kernel].f64_instructions == 0, side


PLANTED_CU = """\
extern "C" __global__ void plain_kernel(const float4* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 v = x[i];
        out[i] = v.x + v.y + v.z + v.w;
    }
}

extern "C" __global__ void local_kernel(const float* x, float* out, int k) {
    float buf[256];
    for (int j = 0; j < 256; ++j) buf[j] = x[j + threadIdx.x];
    out[threadIdx.x] = buf[k & 255] + buf[(k * 7) & 255];
}

__noinline__ __device__ float tenth(float v) { return (float)(v * 0.1 + 1e-300); }

template <typename T>
__global__ void calls_helper(const T* x, T* out) { out[threadIdx.x] = tenth(x[threadIdx.x]); }
"""


@pytest.fixture
def planted_cu(tmp_path) -> Path:
    path = tmp_path / "planted.cu"
    path.write_text(PLANTED_CU)
    return path


def test_float4_load_is_16_bytes_wide(planted_cu):
    plain = twin_usage(planted_cu, "plain_kernel")
    assert plain.global_loads == {16: 1}
    assert plain.global_stores == {4: 1}
    assert plain.registers > 0
    assert plain.local_bytes == 0


def test_dynamically_indexed_array_lives_in_local_memory(planted_cu):
    local = twin_usage(planted_cu, "local_kernel")
    assert local.local_bytes >= 256 * 4
    assert local.registers > 0


def test_twin_counts_the_functions_a_kernel_calls(planted_cu):
    # The float64 work is in the non-inlined helper, not in the kernel's own body.
    helper = twin_usage(planted_cu, "calls_helper<float>")
    assert helper.f64_instructions >= 2  # cvt.f64.f32, fma.rn.f64, cvt.rn.f32.f64


def test_twin_compile_errors_carry_nvrtc_log(planted_cu, tmp_path):
    with pytest.raises(TwinCompileError, match="nope"):
        twin_usage(planted_cu, "nope<float>")
    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" __global__ void k(float* x) { x[0] = undeclared; }\n')
    with pytest.raises(TwinCompileError, match=r"broken\.cu.*undeclared"):
        twin_usage(broken, "k")
    with pytest.raises(TwinCompileError, match="cannot be read"):
        twin_usage(tmp_path / "missing.cu", "k")


@cuda.jit
def planted_exp(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = math.exp(x[i])


def test_prototype_math_exp_on_float32_uses_the_sfu():
    result = prototype_usage(planted_exp, (F32_ARRAY, F32_ARRAY, int64))
    assert any(key.startswith("ex2.approx") for key in result.special_functions)
    assert result.f64_instructions == 0  # math.exp of a float32 stays float32
    assert result.registers > 0


def _shared_body(x, out):
    buf = cuda.shared.array(64, dtype=np.float32)
    tid = cuda.threadIdx.x
    buf[tid] = x[tid]
    cuda.syncthreads()
    out[tid] = buf[63 - tid]


@pytest.mark.parametrize("lto", [True, False])
def test_prototype_shared_array_with_and_without_lto(lto):
    # Without LTO numba's PTX declares the array at module scope, which ptxas's
    # relocatable compile does not count: the module adds it from the PTX.
    # (cuda.jit(lto=False)(f) would drop the option in numba-cuda 0.30: pass f directly.)
    kernel = cuda.jit(_shared_body, lto=lto)
    assert kernel.targetoptions["lto"] is lto
    result = prototype_usage(kernel, (F32_ARRAY, F32_ARRAY))
    assert result.shared_bytes == 64 * 4
    assert result.registers > 0
    assert result.global_loads == {4: 1} and result.global_stores == {4: 1}


@pytest.mark.parametrize("lto", [True, False])
def test_prototype_max_registers_is_honoured_and_spills(lto):
    op = repo_op("softmax")
    signature = float32_signatures(op)["softmax_fwd"]
    tight = cuda.jit(op.kernels["softmax_fwd"].py_func, max_registers=24, lto=lto)
    result = prototype_usage(tight, signature)
    assert result.registers <= 24
    assert result.spill_store_bytes > 0 and result.spill_load_bytes > 0
    # Spilled registers live in the stack frame (ptxas counts the bytes of every spill
    # store instruction, which can exceed the frame: one slot is stored many times).
    assert result.local_bytes > 0


def test_prototype_compile_error_is_a_portkit_error():
    @cuda.jit
    def broken(x):
        x[0] = undefined_name  # noqa: F821

    with pytest.raises(PortkitError, match=r"broken.*does not compile for sm_90"):
        prototype_usage(broken, (F32_ARRAY,))


SYNTHETIC_PTX = textwrap.dedent(
    """\
    .version 8.0
    .target sm_90
    .address_size 64
    .extern .func  (.param .b32 func_retval0) __nv_expf(.param .b32 __nv_expf_param_0);
    .visible .shared .align 4 .b8 smem_a[256];
    .visible .shared .align 8 .b8 smem_unused[512];
    .extern .shared .align 16 .b8 smem_dynamic[];

    .func  (.param .b32 func_retval0) helper(.param .b32 helper_param_0)
    {
        .reg .f64 %fd<3>;
        .loc 1 2 3
        sqrt.rn.f64 %fd1, %fd2;
        st.param.f32 [func_retval0+0], %f1;
        ret;
    }

    .visible .entry kern(.param .u64 kern_param_0)
    .maxntid 128, 1, 1
    {
        .reg .pred %p<2>;
        // ld.global.f64 in a comment does not count
        ld.global.nc.v2.f64 {%fd1, %fd2}, [%rd1];
    $L__BB0_1:
        @%p1 ld.global.u8 %rs1, [%rd1];
        @!%p1 bra $L__BB0_1;
        mov.f64 %fd3, 0d3FF0000000000000;
        setp.lt.f64 %p1, %fd1, %fd3;
        ld.shared.f32 %f1, [smem_a];
        { // callseq 0
        call.uni (retval0),
        __nv_expf,
        (param0);
        }
        call.uni (retval0), helper, (param0);
        ex2.approx.ftz.f32 %f2, %f1;
        st.global.v4.b32 [%rd2], {%r1, %r2, %r3, %r4};
        div.s32 %r5, %r6, %r7;
        ret;
    }
    """
)


def test_ptx_counting_rules_on_synthetic_ptx():
    module = PtxModule(SYNTHETIC_PTX)
    assert module.entries() == ["kern"]
    assert module.reachable("kern") == ["kern", "helper"]
    assert module.module_shared_bytes("kern") == 256  # unused and dynamic ones left out
    result = kernel_usage(module, "kern", KernelProperties(registers=7, stack_frame=16), 0)
    assert result.registers == 7 and result.local_bytes == 16
    assert result.global_loads == {1: 1, 16: 1}
    assert result.global_stores == {16: 1}
    # setp.lt.f64 and the helper's sqrt.rn.f64; not mov.f64, ld.global...f64, st.param.
    assert result.f64_instructions == 2
    assert result.special_functions == {
        "__nv_expf": 1,
        "ex2.approx.f32": 1,
        "sqrt.rn.f64": 1,
    }
