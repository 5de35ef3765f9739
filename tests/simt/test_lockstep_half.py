"""float16 and bfloat16 in the lockstep engine: bit for bit the per-thread engine.

Each kernel runs in both engines on the same inputs (edge values: NaN with and without
payload and sign, inf, -0, subnormals, the largest finite, rounding ties, float64
values whose double rounding through float32 differs from one rounding), and the
lockstep run must neither fall back (``lockstep_fallback="error"`` makes a fallback the
launch's error) nor differ in one bit. A sweep of all 65,536 bfloat16 bit patterns
checks the lane arithmetic against the per-thread engine's scalar, ``BFloat16``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from numba import cuda, float32, float64
from numba.core.types import float16
from numba.cuda import bf16, fp16

from portkit.backends.sim import host_array
from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.lockstep.bfloat16 import BF16Lanes, round_to_bits
from portkit.simt.machine import LOCKSTEP, PER_THREAD, Machine
from portkit.simt.scalars import SIMULATED_BF16, BFloat16, BFloat16Bits, bfloat16_store

# -- edge values -------------------------------------------------------------------------
BF16_EDGES = [
    0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x0001, 0x807F,
    0x007F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFA0, 0x3B80, 0x3C00, 0x3F81,
    0x4000, 0x4040, 0xC040, 0x0100, 0x3F7F, 0x3400,
]  # fmt: skip
F16_EDGES = [
    0x0000, 0x8000, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x0400, 0x8400, 0x0001, 0x83FF,
    0x03FF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x1400, 0x1000, 0x3C01, 0x4000,
    0x4200, 0xC200, 0x0800, 0x3BFF, 0x7800, 0x5BFF,
]  # fmt: skip
# float32 bit patterns of stores into bfloat16: ties to even either way, just past one,
# NaNs (payload, sign), overflow to inf, subnormals.
F32_STORES = [
    0x3F808000, 0x3F818000, 0x3F808001, 0xBF808000, 0x7F7F8000, 0x7F7FFFFF, 0x7F800001,
    0xFFC00001, 0x00008000, 0x00018000, 0x80000001, 0x007FFFFF, 0x3F800000, 0x00000000,
    0x80000000, 0x7F800000,
]  # fmt: skip
# float64 values whose rounding to float32 lands on a bfloat16 tie (the per-thread
# store rounds through float32: twice), and plain ones.
F64_STORES = [1 + 2**-8 + 2**-30, 1 + 2**-8 - 2**-30, -(1 + 2**-7 + 2**-8 + 2**-31), 3.4e38, 1e-45]


def _pairs(edges: list[int], seed: int, n: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Every edge value against every edge value, then random bit patterns."""
    a, b = np.meshgrid(np.array(edges, np.uint16), np.array(edges, np.uint16))
    rng = np.random.default_rng(seed)
    rest = n - a.size
    x = np.concatenate([a.ravel(), rng.integers(0, 1 << 16, rest).astype(np.uint16)])
    y = np.concatenate([b.ravel(), rng.integers(0, 1 << 16, rest).astype(np.uint16)])
    return x, y


def _bf16(bits: np.ndarray) -> np.ndarray:
    return bits.copy().view(BFloat16Bits)


def _f16(bits: np.ndarray) -> np.ndarray:
    return bits.copy().view(np.float16)


def _launch(engine: str, kernel, args, threads: int = 128):
    machine = Machine(engine=engine, lockstep_fallback="error")
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    n = next(a.size for a in args if isinstance(a, np.ndarray))
    config = LaunchConfig((-(-n // threads), 1, 1), (threads, 1, 1), 0)
    machine.launch(kernel.__name__, kernel, config, copies)
    return copies, machine.engines[-1]


def same_in_both_engines(kernel, *args, threads: int = 128, any_nan: tuple[int, ...] = ()):
    """Run ``kernel`` in both engines; assert the lockstep run vectorised and wrote the
    per-thread run's bits. Returns the outputs. ``any_nan``: float32/float64 outputs
    whose NaNs may differ in sign and payload (plain float32/float64 arithmetic of two
    NaNs: NumPy's scalar code and its SIMD loops return different operands' NaN, in
    both engines since before half precision; the GPU returns its canonical NaN)."""
    slow, _ = _launch(PER_THREAD, kernel, args, threads)
    fast, engine = _launch(LOCKSTEP, kernel, args, threads)
    assert engine.engine == LOCKSTEP and not engine.fallback, engine.reason
    for k, (a, b) in enumerate(zip(slow, fast)):
        if isinstance(a, np.ndarray):
            if k in any_nan:
                nan = np.isnan(a) & np.isnan(b)
                a, b = np.where(nan, 0, a), np.where(nan, 0, b)
            differ = np.flatnonzero(a.view(np.uint8) != b.view(np.uint8))
            assert differ.size == 0, f"argument {k} differs between the engines at {differ[:5]}"
    return fast


# -- kernels -----------------------------------------------------------------------------
@cuda.jit
def arithmetic(x, y, add, sub, mul, div, neg, ab, cmp):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        add[i] = a + b
        sub[i] = a - b
        mul[i] = a * b
        div[i] = a / b
        neg[i] = -a
        ab[i] = abs(b)
        cmp[i] = (a < b) + 2 * (a <= b) + 4 * (a == b) + 8 * (a != b) + 16 * (a > b)


@cuda.jit
def mixed(x, y, out32, out64, back):
    # bfloat16 (or float16) with float32, float64 and int64, both orders; a divergent
    # assignment and a conditional expression of the storage type; conversions.
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        f = float32(1.5) * a + b * float32(0.25)
        out32[i] = f - float32(a) * float32(b)
        out64[i] = a * float64(0.1) + 3 * b + float64(a) - float(b)
        c = a
        if i % 3 == 0:
            c = b * b
        back[i] = c if i % 2 == 0 else a - c


@cuda.jit
def stores(f32, f64, out_from32, out_from64, ints, out_from_int):
    i = cuda.grid(1)
    if i < f32.size:
        out_from32[i] = f32[i]
        out_from64[i] = f64[i]
        out_from_int[i] = ints[i]


@cuda.jit
def fp16_intrinsics(x, y, z, out, flags):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        c = z[i]
        out[i, 0] = fp16.hadd(a, b)
        out[i, 1] = fp16.hsub(a, b)
        out[i, 2] = fp16.hmul(a, b)
        out[i, 3] = fp16.hdiv(a, b)
        out[i, 4] = fp16.hfma(a, b, c)
        out[i, 5] = fp16.hneg(a)
        out[i, 6] = fp16.habs(a)
        out[i, 7] = fp16.hmax(a, b)
        out[i, 8] = fp16.hmin(a, b)
        out[i, 9] = fp16.hsqrt(a)
        out[i, 10] = fp16.hexp(b)
        out[i, 11] = fp16.hrcp(a)
        out[i, 12] = float16(float32(a) * float32(3.0))
        flags[i] = (
            fp16.heq(a, b) + 2 * fp16.hne(a, b) + 4 * fp16.hlt(a, b) + 8 * fp16.hge(a, b)
        )


@cuda.jit
def bf16_intrinsics(x, y, z, out, f32, bits):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        c = z[i]
        out[i, 0] = bf16.hadd(a, b)
        out[i, 1] = bf16.hsub(a, b)
        out[i, 2] = bf16.hmul(a, b)
        out[i, 3] = bf16.hdiv(a, b)
        out[i, 4] = bf16.hfma(a, b, c)
        out[i, 5] = bf16.hneg(a)
        out[i, 6] = bf16.habs(a)
        out[i, 7] = bf16.hmax(a, b)
        out[i, 8] = bf16.hmin(a, b)
        out[i, 9] = bf16.hsqrt(a)
        out[i, 10] = bf16.hexp(b)
        out[i, 11] = bf16.hrcp(a)
        out[i, 12] = bf16.float32_to_bfloat16_rn(float32(a) * float32(3.0))
        out[i, 13] = bf16.uint16_as_bfloat16(bf16.bfloat16_as_uint16(b) ^ 1)
        out[i, 14] = bf16.float32_to_bfloat16(float32(0.1))  # a uniform value
        out[i, 15] = bf16.bfloat16(b)  # a copy: NaN payloads kept
        f32[i] = bf16.bfloat162float(a) + bf16.hisnan(b) + 2 * bf16.hisinf(a)
        bits[i] = bf16.bfloat16_as_short(a)


# -- tests -------------------------------------------------------------------------------
def _outputs(make, n: int, count: int) -> list[np.ndarray]:
    return [make(np.zeros(n, np.uint16)) for _ in range(count)]


def test_bfloat16_arithmetic_and_comparisons_match_per_thread_bit_for_bit():
    x, y = _pairs(BF16_EDGES, seed=1)
    outs = _outputs(_bf16, x.size, 6)
    done = same_in_both_engines(
        arithmetic, _bf16(x), _bf16(y), *outs, np.zeros(x.size, np.int32)
    )
    # and the values are the GPU's: float32 arithmetic rounded to nearest even
    fx, fy = (torch.from_numpy(v.view(np.int16)).view(torch.bfloat16).float() for v in (x, y))
    expected = (fx * fy).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan((fx * fy).numpy())
    assert np.array_equal(done[4][~nan], expected[~nan])


def test_float16_arithmetic_and_comparisons_match_per_thread_bit_for_bit():
    x, y = _pairs(F16_EDGES, seed=2)
    outs = _outputs(_f16, x.size, 6)
    same_in_both_engines(arithmetic, _f16(x), _f16(y), *outs, np.zeros(x.size, np.int32))


@pytest.mark.parametrize("half", [_bf16, _f16], ids=["bfloat16", "float16"])
def test_mixed_types_conversions_and_divergent_values_match(half):
    x, y = _pairs(BF16_EDGES if half is _bf16 else F16_EDGES, seed=3)
    n = x.size
    same_in_both_engines(
        mixed, half(x), half(y), np.zeros(n, np.float32), np.zeros(n, np.float64),
        half(np.zeros(n, np.uint16)), any_nan=(2, 3),
    )  # fmt: skip


@pytest.mark.parametrize("half", [_bf16, _f16], ids=["bfloat16", "float16"])
def test_stores_round_as_per_thread(half):
    rng = np.random.default_rng(4)
    n = 512
    f32 = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    f32[: len(F32_STORES)] = F32_STORES
    f64 = rng.standard_normal(n) * 10.0 ** rng.integers(-40, 40, n)
    f64[: len(F64_STORES)] = F64_STORES
    ints = rng.integers(-(2**40), 2**40, n)
    outs = _outputs(half, n, 3)
    done = same_in_both_engines(
        stores, f32.view(np.float32), f64, outs[0], outs[1], ints, outs[2]
    )
    if half is _bf16:  # one rounding from float32, as bfloat16_store
        expected = [bfloat16_store(v) for v in f32.view(np.float32)]
        assert done[2].view(np.uint16).tolist() == expected


def test_float16_intrinsics_match_per_thread():
    x, y = _pairs(F16_EDGES, seed=5)
    z = np.random.default_rng(6).permutation(x)
    out = np.zeros((x.size, 13), np.float16)
    same_in_both_engines(
        fp16_intrinsics, _f16(x), _f16(y), _f16(z), out, np.zeros(x.size, np.int32)
    )


def test_bfloat16_intrinsics_match_per_thread():
    x, y = _pairs(BF16_EDGES, seed=7)
    z = np.random.default_rng(8).permutation(x)
    out = np.zeros((x.size, 16), np.uint16).view(BFloat16Bits)
    same_in_both_engines(
        bf16_intrinsics, _bf16(x), _bf16(y), _bf16(z), out,
        np.zeros(x.size, np.float32), np.zeros(x.size, np.int16),
    )  # fmt: skip


def test_every_bfloat16_pattern_computes_as_the_per_thread_scalar():
    # All 65,536 patterns against a shuffled copy: the lanes' + - * / and the rounding of
    # float32 and float64 values, against BFloat16's scalar arithmetic and store.
    x = np.arange(1 << 16, dtype=np.uint16)
    y = np.random.default_rng(9).permutation(x)
    a, b = BF16Lanes.of_bits(x), BF16Lanes.of_bits(y)
    scalars = [(BFloat16.from_bits(p), BFloat16.from_bits(q)) for p, q in zip(x, y)]
    for name, lanes in (("+", a + b), ("-", a - b), ("*", a * b), ("/", a / b)):
        assert isinstance(lanes, BF16Lanes)
        expected = [eval(f"p {name} q").bits for p, q in scalars]  # noqa: S307
        assert lanes.bits().tolist() == expected, name
    wide = np.random.default_rng(10).standard_normal(1 << 16) * 3.0
    assert round_to_bits(wide).tolist() == [bfloat16_store(v) for v in wide]


def test_lane_bf16_functions_are_the_per_thread_ones():
    from portkit.simt.lockstep.bfloat16 import _LANE_FUNCTIONS

    assert set(_LANE_FUNCTIONS) == set(SIMULATED_BF16._functions)


@cuda.jit
def shared_and_local_bf16(x, out, wide):
    # bfloat16 shared and local arrays hold bfloat16: a float32 stored rounds
    tile = cuda.shared.array(128, bf16.bfloat16)
    mine = cuda.local.array(2, bf16.bfloat16)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i]
    mine[0] = float32(x[i]) * float32(1.001)
    mine[1] = mine[0] * x[i]
    cuda.syncthreads()
    out[i] = tile[127 - t]
    wide[i] = float32(mine[0]) + float32(mine[1])


def test_bfloat16_shared_and_local_arrays_run_in_lockstep_and_round_stores():
    x, _ = _pairs(BF16_EDGES, seed=12, n=128 * 6)
    wide = np.zeros(x.size, np.float32)
    done = same_in_both_engines(
        shared_and_local_bf16, _bf16(x), _bf16(np.zeros(x.size, np.uint16)), wide, any_nan=(2,)
    )
    assert done[1].reshape(-1, 128).tolist() == _bf16(x).reshape(-1, 128)[:, ::-1].tolist()
    values = (x.astype(np.uint32) << 16).view(np.float32)

    def bf(v):  # rounded to bfloat16, as a float32
        return (round_to_bits(v).astype(np.uint32) << 16).view(np.float32)

    with np.errstate(all="ignore"):
        first = bf(values * np.float32(1.001))  # the local store rounds
        expected = first + bf(first * values)
    number = ~np.isnan(expected)
    assert number.sum() > 600 and np.isnan(done[2][~number]).all()
    assert np.array_equal(done[2][number], expected[number])


# -- the newcomer kernels of scripts/simulator_bench_kernels.py, small -------------------
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))


@pytest.mark.parametrize("name, size", [("causal_softmax", 40), ("transpose", 45)])
def test_newcomer_bfloat16_kernels_run_in_lockstep_as_per_thread(name, size):
    import simulator_bench_kernels as bench

    kernel = {k.name: k for k in bench.KERNELS}[name]
    outputs = {}
    for engine in (PER_THREAD, LOCKSTEP):
        case = kernel.make(size, np.random.default_rng(11))
        machine = Machine(engine=engine, lockstep_fallback="error")
        grid, block = (*case.grid, 1, 1)[:3], (*case.block, 1, 1)[:3]
        machine.launch(name, kernel.dispatcher, LaunchConfig(grid, block, 0), case.args)
        assert machine.engines[-1].engine == engine and not machine.engines[-1].fallback
        case.check()
        outputs[engine] = case.args[1].tobytes()
    assert outputs[PER_THREAD] == outputs[LOCKSTEP]


def test_bfloat16_tensors_from_torch_read_as_bits():
    t = torch.tensor([1.0, -2.5, float("inf")], dtype=torch.bfloat16)
    assert host_array(t).view(np.uint16).tolist() == t.view(torch.int16).numpy().view(
        np.uint16
    ).tolist()
