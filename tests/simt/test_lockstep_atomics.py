"""Atomics whose old value a statement drops, run again in one chunk (a grid-stride
histogram, a privatised shared histogram, two statements of one kind): the lockstep
engine runs them itself (lockstep/unordered.py) and must leave the per-thread engine's
bits, writer record (stamp and line of each element's last writer) and faults, in
both schedules; where the order would show (an old value used, two kinds of operation
on one array), it still hands the chunk to the per-thread engine."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, int32

import portkit.simt.lockstep.engine as lockstep_engine
from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.machine import LOCKSTEP, PER_THREAD, Machine
from portkit.simt.records import SimulationFault

BINS = 16


@cuda.jit
def histogram_stride(data, hist, bins):
    start = cuda.grid(1)
    for i in range(start, data.size, cuda.gridsize(1)):
        cuda.atomic.add(hist, data[i] % bins, 1)


@cuda.jit
def histogram_shared(data, hist, bins):
    local = cuda.shared.array(BINS, int32)
    t = cuda.threadIdx.x
    if t < bins:
        local[t] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i] % bins, 1)
    cuda.syncthreads()
    if t < bins:
        cuda.atomic.add(hist, t, local[t])


@cuda.jit
def bit_and_extremes(data, ors, xors, hi, lo, total):
    i = cuda.grid(1)
    for k in range(i, data.size, cuda.gridsize(1)):
        v = data[k]
        cuda.atomic.or_(ors, v % 4, v)
        cuda.atomic.xor(xors, v % 4, v)
        cuda.atomic.max(hi, v % 3, v)
        cuda.atomic.min(lo, v % 3, v)
        cuda.atomic.add(total, 0, v)
        cuda.atomic.sub(total, 1, v)
        cuda.atomic.add(total, 1, 2 * v)


@cuda.jit
def add_then_max(data, hist):
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(hist, data[i] % 4, 1)
        cuda.atomic.max(hist, data[i] % 4, 3)


@cuda.jit
def old_value_used(data, hist, olds):
    i = cuda.grid(1)
    for k in range(i, data.size, cuda.gridsize(1)):
        olds[k] = cuda.atomic.add(hist, data[k] % 4, 1)


@cuda.jit
def reads_while_others_add(data, hist, out):
    i = cuda.grid(1)
    for k in range(i, data.size, cuda.gridsize(1)):
        cuda.atomic.add(hist, data[k] % 4, 1)
    if i < out.size:
        out[i] = hist[i % 4]


def _launch(engine, kernel, args, grid, block, schedule=None):
    machine = Machine(engine=engine, schedule=schedule)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    fault = None
    try:
        config = LaunchConfig((grid, 1, 1), (block, 1, 1), 0)
        machine.launch(kernel.__name__, kernel, config, copies)
    except SimulationFault as exc:
        fault = (exc.kind, exc.detail, exc.place, exc.other)
    records = [  # element by element: a re-run per thread keeps sparse ones
        (a.name, [(int(a.writes[i]), int(a.write_lines[i])) for i in range(a.data.size)])
        for r in machine.records
        for a in r.arrays
    ]
    return copies, fault, records, machine.engines[-1]


def _compare(kernel, args, grid, block, schedule=None):
    slow = _launch(PER_THREAD, kernel, args, grid, block, schedule)
    fast = _launch(LOCKSTEP, kernel, args, grid, block, schedule)
    for k, (a, b) in enumerate(zip(slow[0], fast[0])):
        if isinstance(a, np.ndarray):
            assert a.tobytes() == b.tobytes(), f"argument {k} differs between the engines"
    assert fast[1] == slow[1]
    if fast[1] is None:
        assert fast[2] == slow[2]  # the writer record: stamps and lines
    return fast


@pytest.fixture(params=[1 << 16, 4 * 32], ids=["one-chunk", "chunks-of-4-blocks"])
def chunk_lanes(request, monkeypatch):
    monkeypatch.setattr(lockstep_engine, "CHUNK_LANES", request.param)


def _data(n, seed=0):
    return np.random.default_rng(seed).integers(0, 1000, n).astype(np.int32)


@pytest.mark.parametrize("schedule", [None, "reversed"])
def test_grid_stride_histogram_runs_in_lockstep_as_per_thread(chunk_lanes, schedule):
    args = [_data(3000), np.zeros(BINS, np.int32), BINS]
    copies, _, _, engine = _compare(histogram_stride, args, 10, 32, schedule)
    assert engine.engine == LOCKSTEP, engine.reason
    np.testing.assert_array_equal(copies[1], np.bincount(args[0] % BINS, minlength=BINS))


def test_privatised_shared_histogram_with_barriers_runs_in_lockstep(chunk_lanes):
    args = [_data(5000, 1), np.zeros(BINS, np.int32), BINS]
    copies, _, _, engine = _compare(histogram_shared, args, 6, 64)
    assert engine.engine == LOCKSTEP, engine.reason
    np.testing.assert_array_equal(copies[1], np.bincount(args[0] % BINS, minlength=BINS))


def test_privatised_shared_histogram_reversed_agrees():
    # Reversed, a kernel with barriers orders its stamps otherwise: per thread, as before.
    args = [_data(2000, 2), np.zeros(BINS, np.int32), BINS]
    copies, _, _, _ = _compare(histogram_shared, args, 4, 64, "reversed")
    np.testing.assert_array_equal(copies[1], np.bincount(args[0] % BINS, minlength=BINS))


@pytest.mark.parametrize("schedule", [None, "reversed"])
def test_or_xor_max_min_and_add_sub_in_a_loop_run_in_lockstep(chunk_lanes, schedule):
    data = _data(2500, 3)
    ors, xors = np.zeros(4, np.int64), np.full(4, 7, np.int64)
    hi = np.full(3, -1, np.int32)
    lo = np.full(3, 5000, np.int32)
    total = np.array([0, 2**32 - 5], np.uint32)  # wraps
    args = [data, ors, xors, hi, lo, total]
    copies, _, _, engine = _compare(bit_and_extremes, args, 8, 32, schedule)
    assert engine.engine == LOCKSTEP, engine.reason
    assert copies[3].tolist() == [int(data[data % 3 == r].max()) for r in range(3)]
    assert copies[5][1] == np.uint32((2**32 - 5 + int(data.astype(np.int64).sum())) % 2**32)


@pytest.mark.parametrize(
    "kernel, args",
    [
        (add_then_max, [_data(300), np.zeros(4, np.int32)]),
        (old_value_used, [_data(300), np.zeros(4, np.int32), np.zeros(300, np.int32)]),
    ],
    ids=["two-kinds", "old-value-used"],
)
def test_atomics_whose_order_shows_still_run_per_thread(kernel, args):
    _, _, _, engine = _compare(kernel, args, 2, 32)
    assert engine.engine == PER_THREAD
    assert "two atomic statements" in engine.reason


def test_a_read_racing_with_other_threads_atomics_is_the_per_thread_fault(chunk_lanes):
    args = [_data(1000, 4), np.zeros(4, np.int32), np.zeros(64, np.int32)]
    _, fault, _, _ = _compare(reads_while_others_add, args, 4, 32)
    assert fault is not None and fault[0] == "race"
