"""The CPU twin's header (portkit_cuda_cpu.h): CUDA semantics a twin relies on, one
kernel per test, compiled once for the module and launched through ctypes."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

from portkit.backends.twin_cpu.build import compile_twin_cpu, find_compiler

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler on this machine")

REVERSE, STRICT = 1, 2

KERNELS = r"""
extern "C" __global__ void shuffles(int* out) {
    const int lane = threadIdx.x % 32;
    const int base = threadIdx.x * 6;
    out[base + 0] = __shfl_sync(0xffffffffu, lane * 10, 3);          // everyone reads lane 3
    out[base + 1] = __shfl_up_sync(0xffffffffu, lane * 10, 2);       // lane - 2, or own
    out[base + 2] = __shfl_down_sync(0xffffffffu, lane * 10, 5);     // lane + 5, or own
    out[base + 3] = __shfl_xor_sync(0xffffffffu, lane * 10, 1);      // neighbour
    out[base + 4] = __shfl_down_sync(0xffffffffu, lane * 10, 4, 8);  // within segments of 8
    out[base + 5] = __shfl_sync(0xffffffffu, lane * 10, 2, 16);      // lane 2 of each half
}

extern "C" __global__ void shuffle_outside_mask(float* out) {
    const int lane = threadIdx.x;
    if (lane < 16) out[lane] = __shfl_down_sync(0x0000ffffu, 1.0f + lane, 8);
}

extern "C" __global__ void votes(unsigned* out) {
    const int t = threadIdx.x;
    const unsigned mask = __activemask();
    out[t * 5 + 0] = __ballot_sync(mask, t % 3 == 0);
    out[t * 5 + 1] = __any_sync(mask, t == 7);
    out[t * 5 + 2] = __all_sync(mask, t < 100);
    out[t * 5 + 3] = __all_sync(mask, t < 10);
    out[t * 5 + 4] = mask;
}

template <typename T>
__global__ void block_sum(const T* x, T* out, int n) {
    __shared__ T buf[64];
    const int t = threadIdx.x;
    buf[t] = t < n ? x[blockIdx.x * 64 + t] : T(0);
    __syncthreads();
    for (int s = 32; s > 0; s /= 2) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}

extern "C" __global__ void barrier_forms(int* out) {
    const int t = threadIdx.x;
    const int count = __syncthreads_count(t % 4 == 0);
    const int all = __syncthreads_and(t >= 0);
    const int any = __syncthreads_or(t == 50);
    const int none = __syncthreads_or(t > 1000);
    if (t == 0) { out[0] = count; out[1] = all; out[2] = any; out[3] = none; }
}

extern "C" __global__ void atomics(int* counter, float* total, unsigned* maximum, int* cas) {
    atomicAdd(counter, 1);
    atomicAdd(total, 0.5f);
    atomicMax(maximum, blockIdx.x * 1000u + threadIdx.x);
    atomicCAS(cas, 0, (int)(blockIdx.x * blockDim.x + threadIdx.x) + 1);  // only the first wins
}

// Block 0 writes its shared memory; every block then reads it before writing.
extern "C" __global__ void shared_poison(float* static_seen, float* dynamic_seen) {
    __shared__ float tile[4];
    extern __shared__ float dynamic[];
    if (threadIdx.x == 0) {
        static_seen[blockIdx.x] = tile[1];
        dynamic_seen[blockIdx.x] = dynamic[1];
        tile[1] = 42.0f;
        dynamic[1] = 43.0f;
    }
}

extern "C" __global__ void dynamic_shared_sum(const double* x, double* out) {
    extern __shared__ __align__(16) unsigned char raw[];
    double* s = reinterpret_cast<double*>(raw);
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        double acc = 0;
        for (unsigned i = 0; i < blockDim.x; ++i) acc += s[i];
        out[0] = acc;
    }
}

extern "C" __global__ void racy(int* out) {
    __shared__ int slot;
    slot = threadIdx.x;  // every thread writes: the last one before the barrier wins
    __syncthreads();
    out[threadIdx.x] = slot;
}

extern "C" __global__ void divergent_barrier(int* out) {
    if (threadIdx.x < 16) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}

extern "C" __global__ void warp_deadlock(int* out) {
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
    else __syncthreads();
}

template <typename T>
__global__ void affine16(const T* x, T* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * T(2.0f) + T(1.0f);
}

extern "C" __global__ void builtins(float* out, const float4* v) {
    const float4 a = __ldg(v);
    const float4 b = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    out[0] = a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    out[1] = __expf(0.0f) + rsqrtf(4.0f) + __fdividef(1.0f, 4.0f) + fmaf(2.0f, 3.0f, 1.0f);
    out[2] = tanhf(0.0f) + erff(0.0f) + fabsf(-2.0f) + fmaxf(1.0f, -__int_as_float(0x7f800000))
             + fminf(1.0f, 3.0f);
    out[3] = (float)(gridDim.x * 100 + blockDim.x * 10 + warpSize);
    out[4] = __half2float(__float2half(1.0f / 3.0f));
    out[5] = __bfloat162float(__float2bfloat16(1.0f / 3.0f));
    out[6] = __int_as_float(__float_as_int(2.5f)) + (float)__popc(0xF0u);
}
"""

EXPRESSIONS = [
    "shuffles",
    "shuffle_outside_mask",
    "votes",
    "block_sum<float>",
    "block_sum<double>",
    "barrier_forms",
    "atomics",
    "shared_poison",
    "dynamic_shared_sum",
    "racy",
    "divergent_barrier",
    "warp_deadlock",
    "builtins",
    "affine16<__half>",
    "affine16<__nv_bfloat16>",
]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    folder = tmp_path_factory.mktemp("header")
    source = folder / "header_kernels.cu"
    source.write_text(KERNELS)
    built = compile_twin_cpu(source, EXPRESSIONS, folder / "cache", "plain")
    return ctypes.CDLL(str(built.path)), built.symbols


def launch(library, expression, grid, block, *args, shared=0, flags=STRICT):
    """Launch ``expression``; arrays are passed as pointers, numpy scalars by value.
    Returns the error message, or "" when the launch succeeded."""
    cdll, symbols = library
    holders = []
    for arg in args:
        if isinstance(arg, np.ndarray):
            holders.append(ctypes.c_void_p(arg.ctypes.data))
        else:
            data = np.asarray(arg).tobytes()
            holders.append(ctypes.create_string_buffer(data, len(data)))
    argv = (ctypes.c_void_p * max(len(holders), 1))(*(ctypes.addressof(h) for h in holders))
    error = ctypes.create_string_buffer(4096)
    dims = lambda d: (ctypes.c_uint * 3)(*(tuple(d) + (1, 1, 1))[:3])  # noqa: E731
    rc = getattr(cdll, symbols[expression])(
        dims(grid), dims(block), ctypes.c_size_t(shared), argv, flags, error, ctypes.c_size_t(4096)
    )
    message = error.value.decode()
    assert bool(rc) == bool(message)
    return message


def test_shuffles_follow_cuda_lane_rules(library):
    out = np.zeros(64 * 6, np.int32)
    assert launch(library, "shuffles", (1,), (64,), out) == ""
    got = out.reshape(64, 6)
    for t in range(64):
        lane = t % 32
        assert got[t, 0] == 30
        assert got[t, 1] == 10 * (lane - 2 if lane >= 2 else lane)
        assert got[t, 2] == 10 * (lane + 5 if lane + 5 < 32 else lane)
        assert got[t, 3] == 10 * (lane ^ 1)
        assert got[t, 4] == 10 * (lane + 4 if lane % 8 + 4 < 8 else lane)
        assert got[t, 5] == 10 * ((lane // 16) * 16 + 2)


def test_shuffle_from_a_lane_outside_the_mask_gives_poison(library):
    out = np.zeros(16, np.float32)
    assert launch(library, "shuffle_outside_mask", (1,), (32,), out) == ""
    assert np.array_equal(out[:8], np.arange(9, 17, dtype=np.float32))
    assert np.isnan(out[8:]).all()  # lanes 16..23 are outside the mask 0xffff


def test_votes_over_a_partial_warp(library):
    out = np.zeros(40 * 5, np.uint32)
    assert launch(library, "votes", (1,), (40,), out) == ""
    got = out.reshape(40, 5)
    full = sum(1 << t for t in range(32) if t % 3 == 0)
    tail = sum(1 << (t - 32) for t in range(32, 40) if t % 3 == 0)
    assert (got[:32, 0] == full).all() and (got[32:, 0] == tail).all()
    assert (got[:32, 1] == 1).all() and (got[32:, 1] == 0).all()  # lane 7 is in warp 0
    assert (got[:, 2] == 1).all()
    assert (got[:, 3] == 0).all()
    assert (got[:32, 4] == 0xFFFFFFFF).all() and (got[32:, 4] == 0xFF).all()


@pytest.mark.parametrize(
    "dtype, expression", [(np.float32, "block_sum<float>"), (np.float64, "block_sum<double>")]
)
@pytest.mark.parametrize("flags", [STRICT, STRICT | REVERSE])
def test_barriers_make_a_tree_reduction_exact_in_either_order(library, dtype, expression, flags):
    x = np.arange(3 * 64, dtype=dtype)
    out = np.zeros(3, dtype)
    assert launch(library, expression, (3,), (64,), x, out, np.int32(64), flags=flags) == ""
    assert np.array_equal(out, x.reshape(3, 64).sum(axis=1))


def test_barrier_count_and_or(library):
    out = np.zeros(4, np.int32)
    assert launch(library, "barrier_forms", (1,), (100,), out) == ""
    assert out.tolist() == [25, 1, 1, 0]


def test_atomics_are_read_modify_writes(library):
    counter, total = np.zeros(1, np.int32), np.zeros(1, np.float32)
    maximum, cas = np.zeros(1, np.uint32), np.zeros(1, np.int32)
    assert launch(library, "atomics", (3,), (50,), counter, total, maximum, cas) == ""
    assert counter[0] == 150 and total[0] == 75.0
    assert maximum[0] == 2049
    assert cas[0] == 1  # thread 0 of block 0 runs first and is the only one to see 0


def test_shared_memory_is_poisoned_for_every_block(library):
    static_seen, dynamic_seen = np.zeros(3, np.float32), np.zeros(3, np.float32)
    message = launch(library, "shared_poison", (3,), (8,), static_seen, dynamic_seen, shared=16)
    assert message == ""
    # Block 1 and 2 would see 42 and 43 if block 0's writes leaked into them.
    assert np.isnan(static_seen).all() and np.isnan(dynamic_seen).all()


def test_extern_shared_with_alignment(library):
    x = np.arange(1, 33, dtype=np.float64)
    out = np.zeros(1)
    assert launch(library, "dynamic_shared_sum", (1,), (32,), x, out, shared=32 * 8) == ""
    assert out[0] == x.sum()


def test_reverse_order_changes_a_race(library):
    forward, backward = np.zeros(8, np.int32), np.zeros(8, np.int32)
    assert launch(library, "racy", (1,), (8,), forward) == ""
    assert launch(library, "racy", (1,), (8,), backward, flags=STRICT | REVERSE) == ""
    assert forward.tolist() == [7] * 8  # thread 7 wrote last
    assert backward.tolist() == [0] * 8  # thread 0 wrote last


def test_divergent_barrier_is_an_error_naming_both_lines(library):
    message = launch(library, "divergent_barrier", (1,), (32,), np.zeros(32, np.int32))
    assert "divergent __syncthreads" in message
    assert "header_kernels.cu:" in message
    # Outside checks (flags 0) the same launch is tolerated, as a GPU would.
    assert launch(library, "divergent_barrier", (1,), (32,), np.zeros(32, np.int32), flags=0) == ""


def test_deadlock_is_reported_not_hung(library):
    message = launch(library, "warp_deadlock", (1,), (32,), np.zeros(32, np.int32))
    assert "deadlock" in message and "header_kernels.cu" in message


def test_builtins_vectors_math_and_16_bit_types(library):
    out = np.zeros(7, np.float32)
    v = np.array([1, 1, 1, 1], np.float32)
    assert launch(library, "builtins", (2,), (3,), out, v) == ""
    assert out[0] == 10.0
    assert out[1] == pytest.approx(1.0 + 0.5 + 0.25 + 7.0)
    assert out[2] == pytest.approx(0.0 + 0.0 + 2.0 + 1.0 + 1.0)
    assert out[3] == 2 * 100 + 3 * 10 + 32
    assert out[4] == float(np.float16(1 / 3))
    bits = int(np.array([1 / 3], np.float32).view(np.uint32)[0])
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16  # round to nearest even
    bf16 = np.array([rounded], np.uint32).view(np.float32)[0]
    assert out[5] == bf16 and math.isclose(out[5], 1 / 3, rel_tol=1e-2)
    assert out[6] == 2.5 + 4


@pytest.mark.parametrize("expression", ["affine16<__half>", "affine16<__nv_bfloat16>"])
def test_16_bit_templates_round_each_operation(library, expression):
    import torch

    dtype = torch.float16 if "half" in expression else torch.bfloat16
    x = torch.linspace(-3, 3, 50).to(dtype)
    out = torch.zeros_like(x)
    as_array = lambda t: t.view(torch.int16).numpy()  # noqa: E731 (shares the memory)
    assert launch(library, expression, (2,), (32,), as_array(x), as_array(out), np.int32(50)) == ""
    # Each operation is rounded to the 16-bit type, as torch does it elementwise.
    assert torch.equal(out, x * torch.tensor(2.0, dtype=dtype) + torch.tensor(1.0, dtype=dtype))
