"""The bank of correct kernels (tests/simt/kernels.py) on portkit's simulator.

Every result is checked exactly against NumPy or a closed form: coordinates, memory
spaces, barriers, warp intrinsics, atomics with their return values, device functions,
``math``, numba's typing, ``print``. Kernels without warp operations are also checked
against numba's own simulator. Tests marked ``xfail(strict=True)`` are simulator bugs (or
semantics where the simulator is stricter than a GPU): the reason says which.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.machine import Machine
from portkit.simt.records import SimulationFault
from tests.simt import kernels as K

FULL = 0xFFFFFFFF


def dims(value) -> tuple[int, int, int]:
    value = value if isinstance(value, tuple) else (value,)
    return value + (1,) * (3 - len(value))


def run(kernel, args, grid=1, block=32, shared=0, machine: Machine | None = None) -> None:
    """Launch ``kernel`` on the simulator; arrays in ``args`` are updated in place."""
    config = LaunchConfig(dims(grid), dims(block), shared)
    (machine or Machine()).launch(kernel.py_func.__name__, kernel, config, args)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def as_int32(bits: int) -> int:
    """A 32-bit mask as the int32 numba's ballot_sync returns."""
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def butterfly(values: np.ndarray, width: int = 32) -> np.ndarray:
    """What a shfl_xor_sync butterfly sum (width/2 ... 1) leaves in every lane, in float32."""
    v = values.reshape(-1, width).copy()
    lanes = np.arange(width)
    offset = width // 2
    while offset > 0:
        v = v + v[:, lanes ^ offset]
        offset //= 2
    return v.reshape(-1)


# -- coordinates -----------------------------------------------------------------------


def test_axpy_with_bound_check():
    g = rng(1)
    n = 100
    x = g.random(n, dtype=np.float32)
    y = g.random(n, dtype=np.float32)
    out = np.full(n, np.nan, np.float32)
    a = np.float32(1.5)
    run(K.axpy, [a, x, y, out, n], grid=4, block=32)
    np.testing.assert_array_equal(out, a * x + y)


def test_grid_stride_loop_covers_every_element_once():
    g = rng(2)
    n = 1000
    x = g.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    who = np.full(n, -1, np.int64)
    run(K.grid_stride, [x, out, who, n], grid=2, block=64)
    np.testing.assert_array_equal(out, x * np.float32(3) + np.float32(1))
    np.testing.assert_array_equal(who, np.arange(n) % 128)


def test_coords_2d():
    out = np.full((7, 20, 6), -1, np.int64)
    run(K.coords_2d, [out], grid=(3, 2), block=(8, 4))
    row, col = np.indices((7, 20))
    expected = np.stack(
        [col // 8, row // 4, col % 8, row % 4, np.full_like(row, 24), np.full_like(row, 8)], axis=-1
    )
    np.testing.assert_array_equal(out, expected)


def test_coords_3d():
    out = np.full((6, 6, 8, 5), -1, np.int64)
    run(K.coords_3d, [out], grid=(2, 3, 2), block=(4, 2, 3))
    z, y, x = np.indices((6, 6, 8))
    thread = x % 4 + 10 * (y % 2) + 100 * (z % 3)
    block = x // 4 + 10 * (y // 2) + 100 * (z // 3)
    expected = np.stack(
        [x + 8 * (y + 6 * z), thread, block, np.full_like(x, 4 + 20 + 300), np.full_like(x, 6)],
        axis=-1,
    )
    np.testing.assert_array_equal(out, expected)


def test_transpose_through_a_shared_tile():
    x = rng(3).standard_normal((10, 13)).astype(np.float32)
    out = np.full((13, 10), np.nan, np.float32)
    run(K.transpose_tiled, [x, out], grid=(2, 2), block=(8, 8))
    np.testing.assert_array_equal(out, x.T)


# -- memory spaces -----------------------------------------------------------------------


def tree_sums(x: np.ndarray, n: int, blocks: int, threads: int) -> np.ndarray:
    buf = np.zeros(blocks * threads, np.float32)
    buf[:n] = x[:n]
    buf = buf.reshape(blocks, threads)
    stride = threads // 2
    while stride > 0:
        buf[:, :stride] = buf[:, :stride] + buf[:, stride : 2 * stride]
        stride //= 2
    return buf[:, 0]


def test_block_sum_tree_reduction():
    n = 300
    x = rng(4).standard_normal(n).astype(np.float32)
    out = np.full(3, np.nan, np.float32)
    run(K.block_sum, [x, out, n], grid=3, block=K.THREADS)
    np.testing.assert_array_equal(out, tree_sums(x, n, 3, K.THREADS))


def test_dynamic_shared_memory_sized_by_the_launch():
    n, block = 90, 32
    x = rng(5).standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    run(K.dynamic_shared_reverse, [x, out, n], grid=3, block=block, shared=2 * block * 4)
    padded = np.zeros(96, np.float32)
    padded[:n] = x
    expected = (padded.reshape(3, block)[:, ::-1] * np.float32(2)).reshape(-1)[:n]
    np.testing.assert_array_equal(out, expected)


def test_local_array_running_sums():
    x = rng(6).standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    run(K.local_prefix, [x, out], grid=1, block=32)  # 16 threads have work
    expected = x.reshape(16, 4).copy()
    for k in range(1, 4):
        expected[:, k] = expected[:, k] + expected[:, k - 1]
    np.testing.assert_array_equal(out, expected.reshape(-1))


def test_two_dimensional_local_array():
    a = np.array([-3, 0, 5, 100], np.int64)
    out = np.zeros((4, 4), np.int64)
    run(K.local_matrix, [a, out], block=8)
    for i, v in enumerate(a):
        m = np.array([[v, v + 1], [v + 2, v + 3]], np.int64)
        np.testing.assert_array_equal(out[i], (m @ m).reshape(-1))


def test_constant_memory_polynomial():
    x = np.linspace(-2, 2, 100, dtype=np.float32)
    out = np.full(100, np.nan, np.float32)
    run(K.const_poly, [x, out], grid=4, block=32)
    c = K.COEFFS
    acc = np.full_like(x, c[3])
    for k in (2, 1, 0):
        acc = acc * x + c[k]  # float32 throughout, one rounding per operation
    np.testing.assert_array_equal(out, acc)


# -- barriers with predicates ----------------------------------------------------------------


def test_syncthreads_count_and_or():
    g = rng(7)
    x = np.concatenate([g.standard_normal(64), g.random(64) + 0.5, -g.random(64)])
    x = x.astype(np.float32)
    out = np.full((3, 3), -1, np.int32)
    run(K.barrier_predicates, [x, out], grid=3, block=64)
    positives = int((x[:64] > 0).sum())
    assert 0 < positives < 64
    np.testing.assert_array_equal(out, [[positives, 0, 1], [64, 1, 1], [0, 0, 0]])


# -- warp intrinsics -------------------------------------------------------------------------


def test_every_shuffle():
    x = rng(8).standard_normal(64).astype(np.float32)
    outs = [np.full(64, np.nan, np.float32) for _ in range(4)] + [np.full(64, -1, np.int64)]
    run(K.warp_shuffles, [x, *outs], block=64)
    t = np.arange(64)
    lane, base = t % 32, t - t % 32
    np.testing.assert_array_equal(outs[0], x[base + 31 - lane])
    np.testing.assert_array_equal(outs[1], x[np.where(lane >= 3, t - 3, t)])
    np.testing.assert_array_equal(outs[2], x[np.where(lane + 5 < 32, t + 5, t)])
    np.testing.assert_array_equal(outs[3], x[base + (lane ^ 6)])
    np.testing.assert_array_equal(outs[4], t ^ 1)


def test_warp_reduction_with_shfl_xor():
    x = rng(9).standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    run(K.warp_reduce_xor, [x, out], block=64)
    np.testing.assert_array_equal(out, butterfly(x))
    assert np.allclose(
        out, np.repeat(x.reshape(2, 32).sum(axis=1, dtype=np.float64), 32), rtol=1e-5
    )


def test_warp_reduction_with_shfl_down():
    x = rng(10).standard_normal(128).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    run(K.warp_reduce_down, [x, out], grid=2, block=64)
    v = x.reshape(4, 32).copy()
    lanes = np.arange(32)
    offset = 16
    while offset > 0:
        v = v + v[:, np.where(lanes + offset < 32, lanes + offset, lanes)]
        offset //= 2
    np.testing.assert_array_equal(out, v[:, 0])


def test_votes_masks_and_lane_ids():
    g = rng(11)
    mixed = g.standard_normal(32)
    mixed[31], mixed[0] = 1.0, -1.0  # lane 31 votes yes: the int32 ballot is negative
    x = np.concatenate([mixed, g.random(32) + 0.5, -g.random(32)]).astype(np.float32)
    out = np.full((96, 7), -99, np.int64)
    run(K.warp_votes, [x, out], block=96)
    lane = np.arange(96) % 32
    votes = (x > 0).reshape(3, 32)
    ballots = [as_int32(sum(1 << k for k in range(32) if votes[w, k])) for w in range(3)]
    assert ballots[0] < 0 and ballots[1] == -1 and ballots[2] == 0
    np.testing.assert_array_equal(out[:, 0], FULL)
    np.testing.assert_array_equal(out[:, 1], np.repeat(ballots, 32))
    np.testing.assert_array_equal(out[:, 2], np.repeat([1, 1, 0], 32))
    np.testing.assert_array_equal(out[:, 3], np.repeat([0, 1, 0], 32))
    np.testing.assert_array_equal(out[:, 4], np.repeat([0, 1, 1], 32))
    np.testing.assert_array_equal(out[:, 5], (1 << lane) - 1)
    np.testing.assert_array_equal(out[:, 6], lane)


def test_votes_and_shuffles_with_half_warp_masks():
    x = rng(12).standard_normal(32).astype(np.float32)
    x[31] = 1.0
    out = np.full((32, 2), -99, np.int64)
    run(K.half_warp_ballots, [x, out], block=32)
    bits = [int(v) << k for k, v in enumerate(x > 0)]
    low, high = sum(bits[:16]), as_int32(sum(bits[16:]))
    np.testing.assert_array_equal(out[:, 0], [low] * 16 + [high] * 16)
    np.testing.assert_array_equal(out[:, 1], np.arange(32) ^ 8)


def test_warp_synchronous_exchange_ordered_by_syncwarp_is_not_a_race():
    x = rng(13).standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    run(K.warp_exchange_syncwarp, [x, out], block=64)
    np.testing.assert_array_equal(out, x * np.float32(2))


# -- atomics -----------------------------------------------------------------------------------


def test_atomic_add_and_sub_return_every_old_value_once():
    counters = np.array([0, 1000], np.int32)
    olds = np.full((128, 2), -1, np.int64)
    run(K.atomic_add_sub, [counters, olds], grid=2, block=64)
    np.testing.assert_array_equal(counters, [128, 1000 - 3 * 128])
    assert sorted(olds[:, 0]) == list(range(128))
    assert sorted(olds[:, 1]) == sorted(1000 - 3 * k for k in range(128))


def test_atomic_max_and_min():
    g = rng(14)
    ints = g.integers(-1000, 1000, 64).astype(np.int32)
    floats = g.standard_normal(64).astype(np.float32)
    iacc = np.array([-5000, 5000], np.int32)
    facc = np.array([-1e30, 1e30], np.float32)
    iolds = np.zeros((64, 2), np.int64)
    folds = np.zeros((64, 2), np.float32)
    run(K.atomic_max_min, [ints, floats, iacc, facc, iolds, folds], block=64)
    np.testing.assert_array_equal(iacc, [ints.max(), ints.min()])
    np.testing.assert_array_equal(facc, [floats.max(), floats.min()])
    # Whatever the order, each old value is the initial value or some thread's value.
    assert set(iolds[:, 0]) <= {-5000, *ints} and -5000 in iolds[:, 0]
    assert set(folds[:, 1]) <= {np.float32(1e30), *floats} and np.float32(1e30) in folds[:, 1]
    # The simulator's order is fixed (thread order): the olds are the running extremes.
    np.testing.assert_array_equal(iolds[:, 0], np.maximum.accumulate(np.r_[-5000, ints])[:-1])
    np.testing.assert_array_equal(iolds[:, 1], np.minimum.accumulate(np.r_[5000, ints])[:-1])
    running = np.maximum.accumulate(np.concatenate([np.float32([-1e30]), floats]))
    np.testing.assert_array_equal(folds[:, 0], running[:-1])


def test_atomic_exch_cas_and_compare_and_swap():
    acc = np.zeros(2, np.int32)
    flag = np.zeros(1, np.int32)
    olds = np.full((64, 3), -1, np.int64)
    run(K.atomic_exch_cas, [acc, flag, olds], block=64)
    # exch: the olds and the final value are the initial 0 and every i + 1, once each.
    assert sorted([*olds[:, 0], acc[0]]) == list(range(65))
    # cas ticket counter: every ticket once, the counter at n.
    assert acc[1] == 64 and sorted(olds[:, 1]) == list(range(64))
    # compare_and_swap: one winner saw 0; everyone else saw the winner's i + 1.
    winners = np.flatnonzero(olds[:, 2] == 0)
    assert len(winners) == 1 and flag[0] == winners[0] + 1
    assert set(np.delete(olds[:, 2], winners)) == {flag[0]}


def test_atomic_bitwise():
    bits = np.array([0, FULL, 0], np.uint32)
    olds = np.full((32, 3), -1, np.int64)
    run(K.atomic_bitwise, [bits, olds], block=32)
    np.testing.assert_array_equal(bits, [FULL, 0, FULL])
    own = 1 << np.arange(32)
    popcounts = [[bin(int(v)).count("1") for v in olds[:, k]] for k in range(3)]
    assert np.all(olds[:, 0] & own == 0) and sorted(popcounts[0]) == list(range(32))
    assert np.all(olds[:, 1] & own == own) and sorted(popcounts[1]) == list(range(1, 33))
    assert np.all(olds[:, 2] & own == 0) and sorted(popcounts[2]) == list(range(32))
    assert np.all(olds >= 0)  # uint32 olds are never negative


def test_atomic_inc_and_dec_wrap_at_the_limit():
    counters = np.array([0, 5], np.uint32)
    olds = np.full((40, 2), -1, np.int64)
    run(K.atomic_inc_dec, [counters, olds, 9], block=40)
    np.testing.assert_array_equal(counters, [40 % 10, (5 - 40) % 10])
    assert sorted(olds[:, 0]) == sorted(k % 10 for k in range(40))
    assert sorted(olds[:, 1]) == sorted((5 - k) % 10 for k in range(40))


def test_histogram_in_shared_memory_and_one_global_counter():
    values = rng(15).integers(0, 100, 200).astype(np.int32)
    bins = np.zeros(8, np.int32)
    total = np.zeros(1, np.int32)
    run(K.histogram, [values, bins, total], grid=2, block=128)
    np.testing.assert_array_equal(bins, np.bincount(values % 8, minlength=8))
    assert total[0] == 256


def test_float_atomic_adds():
    x = rng(16).integers(-50, 50, 100).astype(np.float32)
    acc32 = np.zeros(1, np.float32)
    acc64 = np.zeros(1, np.float64)
    run(K.atomic_float_sums, [x, acc32, acc64], block=128)
    assert acc32[0] == x.sum() and acc64[0] == x.sum()


@pytest.mark.parametrize("kernel", ["atomic_exch_cas", "atomic_max_min", "atomic_add_sub"])
def test_atomics_are_deterministic(kernel):
    def launch():
        g = rng(17)
        if kernel == "atomic_exch_cas":
            args = [np.zeros(2, np.int32), np.zeros(1, np.int32), np.zeros((64, 3), np.int64)]
        elif kernel == "atomic_add_sub":
            args = [np.array([0, 1000], np.int32), np.zeros((64, 2), np.int64)]
        else:
            args = [
                g.integers(-99, 99, 64).astype(np.int32),
                g.standard_normal(64).astype(np.float32),
                np.array([-999, 999], np.int32),
                np.array([-9, 9], np.float32),
                np.zeros((64, 2), np.int64),
                np.zeros((64, 2), np.float32),
            ]
        run(getattr(K, kernel), args, grid=1, block=64)
        return args

    first, second = launch(), launch()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


# -- device functions ---------------------------------------------------------------------------


def test_device_function_without_waits():
    x = rng(18).uniform(-3, 3, 50).astype(np.float32)
    out = np.full(50, np.nan, np.float32)
    run(K.device_clamp, [x, out, np.float32(-1), np.float32(1.5)], grid=2, block=32)
    np.testing.assert_array_equal(out, np.clip(x, np.float32(-1), np.float32(1.5)))


def test_device_function_with_syncthreads():
    x = rng(19).standard_normal(256).astype(np.float32)
    out = np.full(256, np.nan, np.float32)
    run(K.device_mirror, [x, out], grid=2, block=K.THREADS)
    np.testing.assert_array_equal(out, x.reshape(2, K.THREADS)[:, ::-1].reshape(-1))


def test_device_function_with_a_shuffle():
    x = rng(20).standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    run(K.device_warp_total, [x, out], block=64)
    np.testing.assert_array_equal(out, butterfly(x))


def test_nested_waiting_device_functions():
    x = rng(21).standard_normal(192).astype(np.float32)
    out = np.full(2, np.nan, np.float32)
    run(K.device_block_total, [x, out], grid=2, block=96)
    warps = butterfly(x).reshape(2, 3, 32)[:, :, 0]
    expected = np.zeros(2, np.float32)
    for w in range(3):
        expected = expected + warps[:, w]
    np.testing.assert_array_equal(out, expected)


# -- math, typing, print ----------------------------------------------------------------------


def test_math_functions_in_float32():
    x = np.linspace(0.1, 4.0, 40, dtype=np.float32)
    out = np.full((5, 40), np.nan, np.float32)
    run(K.math_functions, [x, out], grid=2, block=32)
    for row, fn in enumerate((math.exp, math.log, math.sqrt, math.tanh)):
        np.testing.assert_array_equal(out[row], [np.float32(fn(float(v))) for v in x])
    np.testing.assert_array_equal(out[4], np.floor(x))


def test_typing_matches_numba():
    x = np.array([1.1, 3.3, -2.7, 3e38], np.float32)
    ints = np.array([-7, 2, 7, -2, 2**31 + 5, 2**32 - 3, 5], np.int64)
    f64 = np.full(11, np.nan)
    i64 = np.zeros(10, np.int64)
    run(K.typing_rules, [x, ints, f64, i64], block=32)
    v = np.float64(x[0])
    expected = [
        v * 3,
        v * 0.1,
        np.float64(x[0] * np.float32(3)),
        np.float64(x[0] * np.float32(0.1)),
        np.float64(x[0] + x[1]),
        v / 3,
        np.float64(x[3]) * 2,
        np.inf,
        np.float64(np.float32(1.3)),  # -2.7 % 2 in float32, with Python's sign rule
        -2.0,
        v * 3,
    ]
    np.testing.assert_array_equal(f64, expected)
    assert f64[0] != f64[2] and f64[1] != f64[3]  # the rounding is visible
    assert f64[8] == np.float64(np.remainder(x[2], np.float32(2)))
    np.testing.assert_array_equal(
        i64,
        [-4, 1, -4, -1, -(2**31) + 5, 2**31, 2**32 - 2, 2**32 - 7, 2, 2**31],
    )


def test_print_is_tagged_with_block_and_thread(capsys):
    x = np.array([0.5, 1.5, -2.25, 3.0, 4.5, 1e-3], np.float32)
    run(K.print_values, [x], grid=2, block=3)
    lines = capsys.readouterr().out.splitlines()
    expected = [
        f"[block ({i // 3}, 0, 0) thread ({i % 3}, 0, 0)] x {str(x[i])} i {i}" for i in range(6)
    ]
    assert lines == expected
    assert lines[0] == "[block (0, 0, 0) thread (0, 0, 0)] x 0.5 i 0"


# -- cross-check with numba's own simulator (kernels without warp operations) ------------------


def _numba_cases():
    g = rng(22)
    n = 100
    x = g.standard_normal(n).astype(np.float32)
    return {
        "axpy": (
            [np.float32(0.75), x, g.random(n, dtype=np.float32), np.zeros(n, np.float32), n],
            4,
            32,
            0,
        ),
        "grid_stride": ([x, np.zeros(n, np.float32), np.zeros(n, np.int64), n], 2, 16, 0),
        "coords_2d": ([np.zeros((7, 20, 6), np.int64)], (3, 2), (8, 4), 0),
        "coords_3d": ([np.zeros((6, 6, 8, 5), np.int64)], (2, 3, 2), (4, 2, 3), 0),
        "transpose_tiled": (
            [x[:90].reshape(9, 10), np.zeros((10, 9), np.float32)],
            (2, 2),
            (8, 8),
            0,
        ),
        "block_sum": ([x, np.zeros(1, np.float32), n], 1, K.THREADS, 0),
        "dynamic_shared_reverse": ([x, np.zeros(n, np.float32), n], 4, 32, 256),
        "local_prefix": ([x[:64], np.zeros(64, np.float32)], 1, 32, 0),
        "local_matrix": ([np.arange(-3, 5, dtype=np.int64), np.zeros((8, 4), np.int64)], 1, 8, 0),
        "const_poly": ([x, np.zeros(n, np.float32)], 4, 32, 0),
        "barrier_predicates": ([x[:96], np.zeros((3, 3), np.int32)], 3, 32, 0),
        "histogram": (
            [g.integers(0, 50, n).astype(np.int32), np.zeros(8, np.int32), np.zeros(1, np.int32)],
            1,
            128,
            0,
        ),
        "atomic_float_sums": (
            [np.round(x * 10), np.zeros(1, np.float32), np.zeros(1, np.float64)],
            1,
            128,
            0,
        ),
    }


@pytest.mark.parametrize("name", sorted(_numba_cases()))
def test_agrees_with_numbas_simulator(name):
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    args, grid, block, shared = _numba_cases()[name]
    ours = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kernel = getattr(K, name)
    run(kernel, ours, grid, block, shared)
    FakeCUDAKernel(kernel.py_func, device=False)[grid, block, 0, shared](*theirs)
    for a, b in zip(ours, theirs):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


# -- where the simulator disagrees with numba on a GPU ------------------------------------------


def test_eq_sync_votes_on_truth_values():
    out = np.full(32, -1, np.int64)
    run(K.eq_sync_truthy, [out], block=32)
    np.testing.assert_array_equal(out, 1)


def test_activemask_after_a_vote_is_the_full_warp():
    # After a vote the lanes are resumed one by one to their end; a lane that ended
    # before its peers reached activemask used to leave their mask (lane k got
    # ~((1 << k) - 1)). activemask counts lanes that had not exited when the round began.
    x = np.ones(32, np.float32)
    out = np.zeros((32, 2), np.int64)
    run(K.activemask_after_vote, [x, out], block=32)
    np.testing.assert_array_equal(out[:, 0], -1)
    np.testing.assert_array_equal(out[:, 1], FULL)


def test_atomic_add_casts_the_value_to_the_array_dtype():
    acc = np.ones(1, np.float32)
    values = np.array([2.0**-24 + 2.0**-50])
    run(K.atomic_add_float64_value, [acc, values], block=1)
    assert acc[0] == np.float32(1) + np.float32(values[0]) == 1.0


def test_float32_power_of_an_int_stays_float32():
    x = np.array([1.1, 3.3, -2.7, 0.3], np.float32)
    out = np.zeros(4)
    run(K.float_power, [x, out], block=32)
    np.testing.assert_array_equal(out, (x * x).astype(np.float64))


def test_floor_of_float32_is_float32():
    x = np.array([1.1, 3.3, -2.7, 0.3], np.float32)
    out = np.zeros(4)
    run(K.floor_product, [x, out], block=32)
    np.testing.assert_array_equal(out, (np.floor(x) * x).astype(np.float64))


def test_floor_of_a_large_float():
    x = np.array([1e30, -1e30], np.float32)
    out = np.zeros(2)
    run(K.floor_large, [x, out], block=32)
    np.testing.assert_array_equal(out, x.astype(np.float64))


@pytest.mark.xfail(
    strict=True,
    reason="simulator bug: np.int32(x) in a kernel stays a NumPy int32 (transform.py "
    "simulated_value leaves numpy alone), so int32 * int32 wraps in 32 bits; numba widens "
    "it to int64",
)
def test_numpy_int32_arithmetic_widens():
    a = np.array([70000, 3], np.int64)
    out = np.zeros(2, np.int64)
    run(K.numpy_int32_square, [a, out], block=32)
    np.testing.assert_array_equal(out, [70000**2, 9])


@pytest.mark.xfail(
    strict=True,
    reason="simulator bug: uint32 values are held as int64 (scalars.py widen / NumberCast), "
    "so uint32 - uint32 is a negative int64; numba types it uint64 (2**64 - 2)",
)
def test_uint32_difference_is_uint64():
    a = np.array([1], np.uint32)
    b = np.array([3], np.uint32)
    out = np.zeros(1)
    run(K.uint32_difference, [a, b, out], block=32)
    assert out[0] == 2.0**64 - 2


def test_round_of_float32_is_int64():
    x = np.array([1.1, 3.3, -2.7, 0.3], np.float32)
    out = np.zeros(4)
    run(K.round_product, [x, out], block=32)
    np.testing.assert_array_equal(out, np.round(x).astype(np.float64) * x.astype(np.float64))


def test_math_pow_of_float32_and_int_is_float64():
    x = np.array([1.1, 3.3, -2.7, 0.3], np.float32)
    out = np.zeros(4)
    run(K.math_pow_int, [x, out], block=32)
    np.testing.assert_array_equal(out, x.astype(np.float64) ** 2)


@pytest.mark.xfail(
    strict=True,
    reason="simulator bug: a module-level tuple of floats is left as Python floats "
    "(transform.py simulated_value converts bool/int/float only), so x * COEF_TUPLE[0] is "
    "float32; numba types the tuple's items float64",
)
def test_tuple_constants_are_float64():
    x = np.array([1.1, 3.3, -2.7, 0.3], np.float32)
    out = np.zeros(4)
    run(K.tuple_constant, [x, out], block=32)
    np.testing.assert_array_equal(out, x.astype(np.float64) * 0.1)


@pytest.mark.xfail(
    strict=True,
    reason="simulator limitation: Python variables have no fixed type; numba unifies a "
    "variable's types over the function (float64 literal, then float32 values: float64), "
    "so best * scale is a float64 product in numba and a float32 one in the simulator",
)
def test_variable_types_are_unified():
    x = np.array([0.3, 1.1, -2.0], np.float32)
    scale = np.array([3.3], np.float32)
    out = np.zeros(1)
    run(K.unified_variable, [x, scale, out], block=1)
    assert out[0] == np.float64(x[1]) * np.float64(scale[0])


@pytest.mark.xfail(
    strict=True,
    reason="simulator bug: uint64 + int literal is int64 in numba; the simulator computes "
    "NumPy's uint64 + int64, a float64, and 2**60 + 2 rounds to 2**60",
)
def test_uint64_plus_literal_is_exact():
    a = np.array([2**60 + 1], np.uint64)
    out = np.zeros(1, np.int64)
    run(K.uint64_plus_literal, [a, out], block=1)
    assert out[0] == 2**60 + 2


@pytest.mark.parametrize("engine", ["lockstep", "per-thread"])
def test_dynamic_shared_arrays_of_two_dtypes_alias(engine):
    out = np.zeros(4, np.int64)
    machine = Machine(engine=engine)
    run(K.dynamic_shared_two_dtypes, [out], block=4, shared=16, machine=machine)
    np.testing.assert_array_equal(out, 0x3F800000)
    assert machine.engines[-1].engine == engine


def test_long_barrier_loop_below_the_epoch_wrap():
    out = np.zeros(32, np.float32)
    run(K.long_barrier_loop, [out, 8191], block=32)
    np.testing.assert_array_equal(out, np.float32(0.5 * 8191))


@pytest.mark.parametrize("engine", ["lockstep", "per-thread"])
def test_long_barrier_loop_past_the_epoch_wrap(engine):
    # The barrier epoch in a stamp has 13 bits; epochs.refresh keeps older stamps from
    # coming round to the current epoch (a false race 8192 barriers on, before).
    out = np.zeros(32, np.float32)
    machine = Machine(engine=engine)
    run(K.long_barrier_loop, [out, 8192 + 100], block=32, machine=machine)
    np.testing.assert_array_equal(out, np.float32(0.5 * (8192 + 100)))
    assert machine.engines[-1].engine == engine


def test_many_shuffles_below_the_generation_wrap():
    out = np.zeros(32, np.float32)
    run(K.many_shuffles, [out, 255], block=32)
    np.testing.assert_array_equal(out, 7 + (np.arange(32) ^ 1))


@pytest.mark.parametrize("engine", ["per-thread", "lockstep"])
@pytest.mark.parametrize("rounds", [256, 257, 512])
def test_many_shuffles_at_the_generation_wrap(engine, rounds):
    # The warp generation has 8 bits; every 128 operations the warp's older stamps move
    # to the generation before the current one (epochs.refresh_generations), so lane 0's
    # write stays ordered before the reads however many shuffles come between.
    out = np.zeros(32, np.float32)
    machine = Machine(engine=engine)
    run(K.many_shuffles, [out, rounds], block=32, machine=machine)
    assert machine.engines[0].engine == engine
    np.testing.assert_array_equal(out, 7 + (np.arange(32) ^ (rounds % 2)))


def test_ballot_after_some_lanes_exited():
    """vote.sync waits for the non-exited lanes of its mask (PTX): lanes that returned
    early vote no (block_run.py EXITED_ARRIVE; it was a 'warp-divergence' report)."""
    x = np.ones(32, np.float32)
    out = np.full(32, -1, np.int64)
    run(K.ballot_after_exit, [x, out, 20], block=32)
    np.testing.assert_array_equal(out[:20], (1 << 20) - 1)


@pytest.mark.xfail(
    strict=True,
    raises=SimulationFault,
    reason="stricter than a GPU: a full mask in a block of 16 threads names lanes that do "
    "not exist; a GPU treats them as exited and the reduction (which never reads them) "
    "works; the simulator reports 'warp-mask ... lanes 16-31 do not exist' (block_run.py "
    "_mask)",
)
def test_full_mask_in_a_partial_warp():
    x = rng(23).standard_normal(16).astype(np.float32)
    out = np.zeros(16, np.float32)
    run(K.small_block_warp_sum, [x, out], block=16)
    np.testing.assert_array_equal(out, butterfly(x, 16))


@pytest.mark.xfail(
    strict=True,
    raises=SimulationFault,
    reason="doubtful semantic: numba wraps negative signed indices (x[-1] is the last "
    "element; seen on an H200, numba-cuda 0.30.4); the simulator reports them as "
    "out-of-bounds, saying a GPU does not wrap (memory.py _out_of_bounds): a useful "
    "diagnostic, but its message is wrong for numba",
)
def test_negative_index_wraps_as_in_numba():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    run(K.negative_index_wraps, [x, out], block=8)
    np.testing.assert_array_equal(out, np.roll(x, 1))


@pytest.mark.parametrize("engine", ["lockstep", "per-thread"])
def test_writes_reach_a_fortran_ordered_output(engine):
    x = rng(24).standard_normal((10, 13)).astype(np.float32)
    out = np.asfortranarray(np.full((13, 10), np.nan, np.float32))
    run(K.transpose_tiled, [x, out], grid=(2, 2), block=(8, 8), machine=Machine(engine=engine))
    np.testing.assert_array_equal(out, x.T)


def test_a_strided_view_is_written_in_place_not_silently_copied():
    """A strided view (a device array's ``d[:, ::2]``, as numba passes it) is run in
    place: the kernel's writes land in the array it views, the other columns untouched.
    (Where it comes from decides whether a launch takes it: launcher.py refuses a
    non-contiguous *host* array, as numba does.)"""
    base = np.full((13, 20), -1.0, np.float32)
    x = rng().standard_normal((10, 13)).astype(np.float32)
    run(K.transpose_tiled, [x, base[:, ::2]], grid=(2, 2), block=(8, 8))
    np.testing.assert_array_equal(base[:, ::2], x.T)
    assert (base[:, 1::2] == -1.0).all()
