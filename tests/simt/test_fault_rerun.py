"""A fault the lockstep engine finds costs its chunk, not the grid: the per-thread
engine re-runs only the failed chunk's blocks up to the faulting one, and names the
same array, index, block, thread, line and other thread as a whole per-thread run."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.lockstep import engine as lockstep_engine
from portkit.simt.machine import PER_THREAD, Machine
from portkit.simt.records import SimulationFault

THREADS = 32
BLOCKS = 41  # 8 blocks a chunk below: chunks [0, 8) ... [32, 40), [40, 41)


@cuda.jit
def vecadd_unguarded(a, b, c):
    i = cuda.grid(1)
    c[i] = a[i] + b[i]


@cuda.jit
def fault_in_block_13(x, out):
    i = cuda.grid(1)
    j = i
    if cuda.blockIdx.x == 13 and cuda.threadIdx.x == 7:
        j = i + 100000
    out[i] = x[j] * 2.0


@cuda.jit
def blocks_3_and_20_write_one_element(out):
    if cuda.threadIdx.x == 0 and (cuda.blockIdx.x == 3 or cuda.blockIdx.x == 20):
        out[0] = cuda.blockIdx.x


@cuda.jit
def two_atomic_statements(counts):
    # The first old value is used, so the two statements' order is per thread (two
    # dropped ones would run in lockstep: lockstep/unordered.py).
    seen = cuda.atomic.add(counts, cuda.blockIdx.x % 4, 1)
    cuda.atomic.add(counts, cuda.threadIdx.x % 4, 1 + seen - seen)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of 8 blocks of 32 threads, so a small grid has several."""
    monkeypatch.setattr(lockstep_engine, "CHUNK_LANES", 8 * THREADS)


def _run(kernel, args, engine: str | None = None, schedule: str | None = None):
    machine = Machine(engine=engine, schedule=schedule)
    config = LaunchConfig((BLOCKS, 1, 1), (THREADS, 1, 1), 0)
    with pytest.raises(SimulationFault) as caught:
        machine.launch(kernel.__name__, kernel, config, args)
    fault = caught.value
    return (fault.kind, fault.detail, fault.place, fault.other), machine


def _vecadd_args():
    n = (BLOCKS - 1) * THREADS + 5  # the last block has 27 threads past the end
    return [np.ones(n, np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)]


@pytest.mark.parametrize("schedule", ["forward", "reversed"])
def test_unguarded_vecadd_reports_as_whole_per_thread_run(schedule):
    whole, slow = _run(vecadd_unguarded, _vecadd_args(), PER_THREAD, schedule)
    fault, fast = _run(vecadd_unguarded, _vecadd_args(), None, schedule)
    assert fault == whole
    first = 40 * THREADS + (5 if schedule == "forward" else THREADS - 1)  # past the end
    assert fault[2].block == (40, 0, 0) and f"a[{first}]" in fault[1]
    assert slow.blocks_per_thread == (BLOCKS if schedule == "forward" else 1)
    assert fast.blocks_per_thread == 1  # the faulting block alone, not the grid
    assert fast.engines[-1].reason.startswith("re-run per thread")


def test_fault_mid_chunk_reruns_the_chunk_up_to_the_faulting_block():
    x = np.arange(BLOCKS * THREADS, dtype=np.float32)
    whole, _ = _run(fault_in_block_13, [x.copy(), np.zeros_like(x)], PER_THREAD)
    out = np.zeros_like(x)
    fault, fast = _run(fault_in_block_13, [x.copy(), out])
    assert fault == whole
    assert fault[2].block == (13, 0, 0) and fault[2].thread == (7, 0, 0)
    assert fast.blocks_per_thread == 13 - 8 + 1  # blocks 8..13 of chunk [8, 16)
    # Blocks before the fault ran, in either engine: their outputs are in memory.
    assert np.array_equal(out[: 13 * THREADS], x[: 13 * THREADS] * 2)


def test_race_with_a_block_of_an_earlier_chunk_names_it():
    whole, _ = _run(blocks_3_and_20_write_one_element, [np.zeros(4, np.int64)], PER_THREAD)
    fault, fast = _run(blocks_3_and_20_write_one_element, [np.zeros(4, np.int64)])
    assert fault == whole
    assert fault[0] == "race" and fault[2].block == (20, 0, 0)
    assert fault[3].block == (3, 0, 0)  # the earlier chunk's writer, from its stamps
    assert fast.blocks_per_thread == 20 - 16 + 1


def test_a_chunk_that_runs_clean_per_thread_goes_on_per_thread():
    config = LaunchConfig((BLOCKS, 1, 1), (THREADS, 1, 1), 0)
    expected = np.zeros(4, np.int64)
    Machine(engine=PER_THREAD).launch("k", two_atomic_statements, config, [expected])
    machine = Machine()
    counts = np.zeros(4, np.int64)
    machine.launch("k", two_atomic_statements, config, [counts])
    assert np.array_equal(counts, expected) and counts.sum() == 2 * BLOCKS * THREADS
    assert machine.engines[-1].engine == PER_THREAD
    assert len(machine.records) == 1
    assert machine.blocks_per_thread == BLOCKS  # from the failed (first) chunk on, once each


@cuda.jit
def accumulate_ten_times(x, out):
    i = cuda.grid(1)
    if i < out.size:
        for _ in range(10):
            out[i] = out[i] + x[i]
        x[i] = x[i] * 1  # x may be written: its reads are recorded too (unwritten.py)


@cuda.jit
def accumulate_ten_times_read_only(x, out):
    i = cuda.grid(1)
    if i < out.size:
        for _ in range(10):
            out[i] = out[i] + x[i]


def test_a_fault_does_not_run_the_earlier_chunks_again(monkeypatch):
    made = []
    chunk = lockstep_engine.Chunk
    monkeypatch.setattr(lockstep_engine, "Chunk", lambda *a: made.append(a[0]) or chunk(*a))
    fault, machine = _run(vecadd_unguarded, _vecadd_args())
    assert made == [0, 8, 16, 24, 32, 40]  # each chunk once; the failed one is undone
    assert machine.blocks_per_thread == 1


def test_a_chunks_undo_record_holds_each_element_it_touches_once():
    n = BLOCKS * THREADS
    x, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    machine = Machine()
    machine.launch(
        "k", accumulate_ten_times, LaunchConfig((BLOCKS, 1, 1), (THREADS, 1, 1), 0), [x, out]
    )
    assert machine.engines[-1].engine == "lockstep"
    assert np.all(out == 10)
    # 8 blocks a chunk touch 256 elements of x and of out, 32 accesses each lane
    assert machine._lockstep.journal_saved == 2 * 8 * THREADS


def test_an_input_no_thread_writes_costs_the_undo_record_nothing():
    n = BLOCKS * THREADS
    x, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    machine = Machine()
    config = LaunchConfig((BLOCKS, 1, 1), (THREADS, 1, 1), 0)
    machine.launch("k", accumulate_ten_times_read_only, config, [x, out])
    assert machine.engines[-1].engine == "lockstep"
    assert np.all(out == 10)
    assert machine._lockstep.journal_saved == 8 * THREADS  # out's elements only
