"""The lockstep engine against the per-thread engine: bit-identical outputs and the same
faults (kind, detail with array and index, block, thread, line, other thread) on the
whole kernel bank (the cases of test_simt_gpu.py, which give every kernel its inputs)
and the whole planted-bug bank; and the lockstep engine really runs where it should."""

from __future__ import annotations

import numpy as np
import pytest

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.machine import LOCKSTEP, PER_THREAD, Machine
from portkit.simt.records import SimulationFault
from tests.simt import kernels as K
from tests.simt import planted_bugs
from tests.simt.test_simt_gpu import CASES

# Kernels the lockstep engine must run itself (no fallback): elementwise and
# grid-stride kernels, shared-memory blocks with barriers, warp shuffles and votes,
# device functions, local and constant memory, one atomic statement per array.
MUST_VECTORISE = {
    "axpy",
    "grid_stride",
    "coords_2d",
    "coords_3d",
    "transpose_tiled",
    "block_sum",
    "dynamic_shared_reverse",
    "local_prefix",
    "local_matrix",
    "const_poly",
    "barrier_predicates",
    "warp_shuffles",
    "warp_reduce_xor",
    "warp_reduce_down",
    "device_clamp",
    "device_warp_total",
    "device_block_total",
    "math_functions",
    "histogram",
    "warp_exchange_syncwarp",
    "half_warp_ballots",
    "device_mirror",
    "eq_sync_truthy",
    "typing_rules",
    "atomic_float_sums",
    "long_barrier_loop",
}


def _dims(value) -> tuple[int, int, int]:
    value = value if isinstance(value, tuple) else (value,)
    return value + (1,) * (3 - len(value))


def _launch(engine: str, module, name: str, args, grid, block, shared):
    machine = Machine(engine=engine)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    config = LaunchConfig(_dims(grid), _dims(block), shared)
    fault = None
    try:
        machine.launch(name, getattr(module, name), config, copies)
    except SimulationFault as exc:
        fault = exc
    return copies, fault, machine.engines


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _fault_key(fault: SimulationFault | None):
    if fault is None:
        return None
    return (fault.kind, fault.detail, fault.place, fault.other)


def _compare(module, name, args, grid, block, shared):
    slow, slow_fault, _ = _launch(PER_THREAD, module, name, args, grid, block, shared)
    fast, fast_fault, engines = _launch(LOCKSTEP, module, name, args, grid, block, shared)
    assert _fault_key(fast_fault) == _fault_key(slow_fault)
    for k, (a, b) in enumerate(zip(slow, fast)):
        if isinstance(a, np.ndarray):
            assert _same_bits(a, b), f"argument {k} of {name} differs between the engines"
    return engines, slow_fault


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_kernel_bank_agrees(case):
    args = case.make_args(np.random.default_rng(0))
    engines, _ = _compare(K, case.kernel, args, case.grid, case.block, case.shared)
    assert len(engines) == 1
    if case.kernel in MUST_VECTORISE:
        assert engines[0].engine == LOCKSTEP, engines[0].reason


def _vectors(n, out_size=None):
    return [np.arange(n, dtype=np.float32), np.full(out_size or n, np.nan, np.float32), n]


BUGS = [
    ("off_by_one", _vectors(100), 1, 128, 0),
    ("negative_index", _vectors(64), 1, 128, 0),
    ("missing_syncthreads", _vectors(128, 1), 1, 128, 0),
    ("stencil_without_barrier", _vectors(128), 1, 128, 0),
    ("blocks_share_output", _vectors(256, 128), 2, 128, 0),
    ("uninitialised_shared", _vectors(128), 1, 128, 0),
    ("uninitialised_shared", _vectors(256), 2, 128, 0),
    ("uninitialised_local", _vectors(128), 1, 128, 0),
    ("divergent_syncthreads", _vectors(200, 256), 2, 128, 0),
    ("different_barriers", _vectors(128), 1, 128, 0),
    ("shuffle_lane_missing", _vectors(32), 1, 32, 0),
    ("shuffle_reads_outside_mask", _vectors(32), 1, 32, 0),
    ("dynamic_shared_too_small", _vectors(128), 1, 128, 64 * 4),
    (
        "row_col_2d_overrun",
        [np.zeros((3, 5), np.float32), np.zeros((3, 5), np.float32), 3, 5],
        1,
        (8, 8),
        0,
    ),
]


@pytest.mark.parametrize("bug", BUGS, ids=[f"{b[0]}-{b[2]}" for b in BUGS])
def test_planted_bug_bank_agrees(bug):
    name, args, grid, block, shared = bug
    engines, fault = _compare(planted_bugs, name, args, grid, block, shared)
    assert fault is not None  # every planted bug is caught, by either engine
    assert engines[-1].engine == PER_THREAD  # the report comes from a per-thread re-run


def test_auto_is_lockstep_for_an_elementwise_kernel_and_says_why_not_elsewhere():
    machine = Machine()
    x = np.ones(100, np.float32)
    out = np.zeros(100, np.float32)
    config = LaunchConfig((4, 1, 1), (32, 1, 1), 0)
    machine.launch("axpy", K.axpy, config, [np.float32(2), x, x, out, 100])
    machine.launch("print_values", K.print_values, LaunchConfig((1, 1, 1), (2, 1, 1), 0), [x])
    assert [e.engine for e in machine.engines] == [LOCKSTEP, PER_THREAD]
    assert "print" in machine.engines[1].reason
    np.testing.assert_array_equal(out, np.full(100, 3, np.float32))


from numba import cuda, float32  # noqa: E402


@cuda.jit(device=True)
def _two_returns(v):
    if v >= 0:
        return v * float32(2)
    return -v


@cuda.jit
def _early_returns(x, out, n):
    i = cuda.grid(1)
    if i >= n:
        return
    acc = float32(0)
    for k in range(i % 5):
        if k == 3:
            break
        acc += _two_returns(x[i] - float32(k))
    out[i] = acc


def test_divergent_returns_breaks_and_device_functions_agree():
    x = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    args = [x, np.zeros(100, np.float32), 100]
    engines, fault = _compare(
        __import__(__name__, fromlist=["x"]), "_early_returns", args, 4, 32, 0
    )
    assert fault is None and engines[0].engine == LOCKSTEP, engines[0].reason


@cuda.jit
def _nan_atomics(values, hi, lo, olds):
    i = cuda.grid(1)
    olds[i] = cuda.atomic.nanmax(hi, 0, values[i])
    cuda.atomic.nanmin(lo, 0, values[i])


def test_nanmax_and_nanmin_skip_nans_and_return_the_old_value():
    # Found by numba-cuda's own tests (test_atomic_nanmax_returns_old_*): nanmax/nanmin
    # called the class's own max/min atomics instead of the builtins and raised.
    values = np.array([1, np.nan, 5, -2, np.nan, 3, 0, 4], np.float32)
    args = [
        values,
        np.array([np.nan], np.float32),
        np.array([9], np.float32),
        np.zeros(8, np.float32),
    ]
    module = __import__(__name__, fromlist=["x"])
    engines, fault = _compare(module, "_nan_atomics", args, 1, 8, 0)
    assert fault is None and engines[0].engine == LOCKSTEP, engines[0].reason
    hi, lo, olds = [a.copy() for a in args[1:]]
    Machine().launch(
        "_nan_atomics", _nan_atomics, LaunchConfig((1, 1, 1), (8, 1, 1), 0), [values, hi, lo, olds]
    )
    assert hi[0] == 5 and lo[0] == -2
    np.testing.assert_array_equal(olds, [np.nan, 1, 1, 5, 5, 5, 5, 5])


@cuda.jit
def _integer_atomics(keys, amounts, counts, ucounts, olds, uolds):
    i = cuda.grid(1)
    if i < keys.size:
        olds[i] = cuda.atomic.add(counts, keys[i], amounts[i])
        uolds[i] = cuda.atomic.sub(ucounts, keys[i], 3)


@pytest.mark.parametrize("blocks", [1, 3])
def test_integer_atomic_sums_wrap_and_return_old_values_as_per_thread(blocks):
    # The lockstep engine sums integer atomics for all lanes at once; the old value each
    # thread gets, the wrap-around and the final counts must be the per-thread loop's.
    rng = np.random.default_rng(5)
    n = 100 * blocks
    keys = rng.integers(0, 7, n).astype(np.int64)
    amounts = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    counts = np.array([2**31 - 1, -(2**31), 0, 5, 6, 7, 8], np.int32)
    ucounts = np.array([0, 1, 2, 3, 2**32 - 1, 5, 6], np.uint32)
    olds, uolds = np.zeros(n, np.int32), np.zeros(n, np.uint32)
    args = [keys, amounts, counts, ucounts, olds, uolds]
    module = __import__(__name__, fromlist=["x"])
    engines, fault = _compare(module, "_integer_atomics", args, blocks, 128, 0)
    assert fault is None and engines[0].engine == LOCKSTEP, engines[0].reason
    final = [a.copy() for a in args]
    Machine().launch(
        "_integer_atomics", _integer_atomics, LaunchConfig((blocks, 1, 1), (128, 1, 1), 0), final
    )
    expected = counts.astype(np.int64)
    np.add.at(expected, keys, amounts.astype(np.int64))
    np.testing.assert_array_equal(final[2], expected.astype(np.int32))  # wrapped
    assert final[3][0] == np.uint32((0 - 3 * np.count_nonzero(keys == 0)) % 2**32)
    first = int(np.flatnonzero(keys == 2)[0])  # the first thread on key 2 saw the start
    assert final[4][first] == 0 and final[5][first] == 2


@cuda.jit(device=True)
def _move_to(m, s, top):
    if top > m:
        return top, s * float32(0.5)
    return m, s


@cuda.jit
def _tuple_returns(x, out_m, out_s):
    i = cuda.grid(1)
    if i < x.size:
        m, s = _move_to(float32(0), float32(1), x[i])
        out_m[i] = m
        out_s[i] = s


def test_a_device_function_returning_tuples_from_two_places_runs_in_lockstep():
    x = np.random.default_rng(4).standard_normal(100).astype(np.float32)
    args = [x, np.zeros(100, np.float32), np.zeros(100, np.float32)]
    module = __import__(__name__, fromlist=["x"])
    engines, fault = _compare(module, "_tuple_returns", args, 4, 32, 0)
    assert fault is None and engines[0].engine == LOCKSTEP, engines[0].reason
    out_m, out_s = np.zeros(100, np.float32), np.zeros(100, np.float32)
    config = LaunchConfig((4, 1, 1), (32, 1, 1), 0)
    Machine().launch("_tuple_returns", _tuple_returns, config, [x, out_m, out_s])
    np.testing.assert_array_equal(out_m, np.maximum(x, 0))
    np.testing.assert_array_equal(out_s, np.where(x > 0, 0.5, 1).astype(np.float32))
