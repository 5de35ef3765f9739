"""The lockstep engine's bookkeeping stays proportionate to the data: int32 thread codes
and uint8 line codes in the shadows of a kernel that never waits, undo records that
keep only the value of an element no earlier access touched, and numba's simulator's
device arrays used in place; the checks see the same faults."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.host_arrays import host_copy
from portkit.simt.lockstep import LaneShadow
from portkit.simt.lockstep import engine as lockstep_engine
from portkit.simt.lockstep.journal import Journal
from portkit.simt.machine import PER_THREAD, Machine
from portkit.simt.records import SimulationFault
from portkit.simt.stamps import NOBODY

THREADS = 32
BLOCKS = 12  # 4 blocks a chunk below: 3 chunks


@cuda.jit
def scale(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * 2.0


@cuda.jit
def scale_with_barrier(x, out):
    i = cuda.grid(1)
    cuda.syncthreads()
    if i < out.size:
        out[i] = x[i] * 2.0


@cuda.jit
def block_reads_one_element_block_9_writes_it(x, out):
    i = cuda.grid(1)
    j = i // 1000  # 0 in every lane, a per-lane index
    if cuda.blockIdx.x == 9 and cuda.threadIdx.x == 3:
        x[j] = 5.0
    else:
        out[i] = x[j]


@cuda.jit
def double_in_place(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * 2.0


@cuda.jit
def read_own_and_next_then_write_own(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] + x[(i + 1) % x.size]


@cuda.jit
def two_store_lines(out):
    i = cuda.grid(1)
    if i % 3 == 0:
        out[i] = 1.0
    else:
        out[i] = 2.0


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(lockstep_engine, "CHUNK_LANES", 4 * THREADS)


def _launch(kernel, args, engine=None):
    machine = Machine(engine=engine)
    config = LaunchConfig((BLOCKS, 1, 1), (THREADS, 1, 1), 0)
    return machine, machine.launch(kernel.__name__, kernel, config, args)


def _shadow(record, parameter: str) -> LaneShadow:
    array = next(a for a in record.arrays if a.name == parameter)
    return array.writes.shadow


def test_a_kernel_that_never_waits_keeps_int32_codes_and_uint8_lines():
    n = BLOCKS * THREADS - 7
    x, out = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    machine, record = _launch(scale, [x, out])
    assert machine.engines[-1].engine == "lockstep"
    shadow = _shadow(record, "out")
    assert shadow.writes.dtype == np.int32
    assert not shadow.has("write_lines")  # one line wrote it all: no array
    assert not shadow.has("reads") and not shadow.has("reads2")  # out is never read
    assert _shadow(record, "x").reads.dtype == np.int32
    assert not _shadow(record, "x").has("writes")
    # The record decodes to the per-thread engine's stamps and line keys.
    _, whole = _launch(scale, [x, np.zeros_like(out)], PER_THREAD)
    mine, theirs = record.arrays[1], whole.arrays[1]
    assert np.array_equal(np.asarray(mine.writes), np.frombuffer(theirs.writes, np.int64))
    assert np.array_equal(np.asarray(mine.write_lines), np.frombuffer(theirs.write_lines, np.int32))
    assert mine.writes[n - 1] == ((n - 1) // THREADS) << 32 | (n - 1) % THREADS
    assert record.line(mine.write_lines[0]) == whole.line(theirs.write_lines[0])


def test_a_kernel_with_barriers_keeps_full_stamps():
    n = BLOCKS * THREADS
    _, record = _launch(scale_with_barrier, [np.ones(n, np.float32), np.zeros(n, np.float32)])
    assert _shadow(record, "out").writes.dtype == np.int64


def test_an_untouched_element_is_undone_from_its_value_alone():
    data = np.arange(10, dtype=np.float32)
    shadow = LaneShadow(data.size)
    assert shadow.use_codes(THREADS, 4 * THREADS)
    shadow.writes[[7, 8]] = 1 + THREADS  # block 1, thread 0: an earlier chunk
    shadow.write_lines[[7, 8]] = shadow.line_code(1234)
    journal = Journal(first=2, blocks=2)
    journal.save(data, shadow, np.array([0, 1, 2, 7], np.int64))
    [fresh], [touched] = journal.fresh, journal.entries
    positions = journal.tape.view(fresh[2], fresh[4])  # positions and values only
    assert positions.dtype == np.int32 and positions.tolist() == [0, 1, 2]
    assert journal.tape.view(fresh[3], data.dtype).tolist() == [0, 1, 2]
    assert touched[4]["writes"].tolist() == [1 + THREADS]
    # What the chunk does, then undoes.
    code = 2 * THREADS + 5  # block 2, thread 4: this chunk
    data[[0, 1, 2, 7]] = -1
    shadow.writes[[0, 1, 2, 7]] = code
    shadow.write_lines[[0, 1, 2, 7]] = shadow.line_code(99)
    journal.save(data, shadow, np.array([1, 7], np.int64))  # touched by this chunk: skipped
    assert journal.saved == 4
    journal.undo()
    assert np.array_equal(data, np.arange(10, dtype=np.float32))
    assert shadow.writes.tolist() == [0] * 7 + [1 + THREADS] * 2 + [0]
    assert shadow.seed_value("write_lines", 7) == 1234 and shadow.write_lines[0] == 0


def test_the_next_chunk_writes_its_undo_record_over_the_last_ones():
    data, shadow, tape = np.arange(64, dtype=np.float64), LaneShadow(64), None
    shadow.use_codes(THREADS, 2 * THREADS)
    for first in range(2):
        journal = Journal(first, 1, tape)
        journal.save(data, shadow, np.arange(32 * first, 32 * first + 32))
        tape = journal.tape
        assert tape.used == 32 * 4 + 32 * 8  # int32 positions, float64 values: 384 bytes
    assert tape.bytes.size == 384  # the second chunk's record took the first one's place


def test_more_than_255_lines_widen_the_line_slots_and_undo_still_restores():
    shadow = LaneShadow(4)
    shadow.write_lines[:] = [shadow.line_code(1000 + k) for k in range(4)]
    journal = Journal(first=0, blocks=1)
    data = np.zeros(4, np.float32)
    shadow.writes[:] = 7 << 32  # block 7: not this chunk
    journal.save(data, shadow, np.arange(4))
    for key in range(2000, 2300):
        shadow.line_code(key)
    assert shadow.wide and shadow.write_lines.dtype == np.int32
    assert shadow.write_lines.tolist() == [1000, 1001, 1002, 1003]  # keys now
    shadow.write_lines[:] = shadow.line_code(2299)
    journal.undo()
    assert shadow.write_lines.tolist() == [1000, 1001, 1002, 1003]


def test_lanes_reading_one_element_race_with_a_later_chunks_write():
    n = BLOCKS * THREADS
    args = [np.ones(4, np.float32), np.zeros(n, np.float32)]
    with pytest.raises(SimulationFault) as whole:
        _launch(block_reads_one_element_block_9_writes_it, [a.copy() for a in args], PER_THREAD)
    with pytest.raises(SimulationFault) as fast:
        _launch(block_reads_one_element_block_9_writes_it, args)
    assert fast.value.kind == whole.value.kind == "race"
    assert fast.value.place == whole.value.place  # block 9's write, at its line
    # The other thread is one of the many readers (the two engines may name different
    # ones): a reader of an earlier chunk, from the stamps the lockstep chunks left.
    assert fast.value.other.block[0] < 8 and fast.value.other.line == whole.value.other.line


def test_numba_simulator_device_arrays_are_used_in_place():
    from portkit.simt import simulated_cuda

    with simulated_cuda():
        from numba import cuda as simulated

        device = simulated.device_array((3, 4), np.float32)
        copied = host_copy("kernel k: parameter a", device)
    assert copied is not None and copied.host is device._ary
    assert copied.host.base is None or np.shares_memory(copied.host, device._ary)


def test_a_grid_too_big_for_int32_codes_keeps_full_stamps():
    shadow = LaneShadow(8)
    assert not shadow.use_codes(1024, 1 << 31)
    assert shadow.writes.dtype == np.int64 and shadow.writes[0] == NOBODY


def test_a_write_back_after_reading_its_own_elements_records_as_per_thread():
    x = np.arange(BLOCKS * THREADS, dtype=np.float32)
    machine, record = _launch(double_in_place, [x.copy()])
    _, whole = _launch(double_in_place, [x.copy()], PER_THREAD)
    assert machine.engines[-1].engine == "lockstep"
    assert np.array_equal(
        np.asarray(record.arrays[0].writes), np.frombuffer(whole.arrays[0].writes, np.int64)
    )
    lines = record.arrays[0].write_lines
    assert record.line(lines[5]) == whole.line(whole.arrays[0].write_lines[5])


def test_a_read_of_another_element_between_still_checks_the_write_back():
    x = np.arange(BLOCKS * THREADS, dtype=np.float32)
    with pytest.raises(SimulationFault) as whole:
        _launch(read_own_and_next_then_write_own, [x.copy()], PER_THREAD)
    with pytest.raises(SimulationFault) as fast:
        _launch(read_own_and_next_then_write_own, [x.copy()])
    assert fast.value.kind == whole.value.kind == "race"
    assert fast.value.place == whole.value.place and fast.value.other == whole.value.other


def test_an_array_written_from_two_lines_gets_uint8_line_codes():
    out = np.zeros(BLOCKS * THREADS, np.float32)
    _, record = _launch(two_store_lines, [out])
    _, whole = _launch(two_store_lines, [np.zeros_like(out)], PER_THREAD)
    shadow = _shadow(record, "out")
    assert shadow.has("write_lines") and shadow.write_lines.dtype == np.uint8
    assert np.array_equal(
        np.asarray(record.arrays[0].write_lines),
        np.frombuffer(whole.arrays[0].write_lines, np.int32),
    )
