"""The bank of planted bugs: each caught by portkit's simulator, at the right place."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.machine import Machine
from portkit.simt.records import SimulationFault
from tests.simt import planted_bugs

SOURCE = Path(planted_bugs.__file__)


def marked_line(tag: str, name: str) -> int:
    for number, text in enumerate(SOURCE.read_text().splitlines(), 1):
        if re.search(rf"# {tag}: {name}\b", text):
            return number
    raise AssertionError(f"no '# {tag}: {name}' in {SOURCE}")


def run(name: str, args, grid=1, block=128, shared=0) -> SimulationFault:
    config = LaunchConfig(_dims(grid), _dims(block), shared)
    with pytest.raises(SimulationFault) as caught:
        Machine().launch(name, getattr(planted_bugs, name), config, args)
    fault = caught.value
    assert fault.place is not None and fault.place.file == str(SOURCE)
    assert fault.place.line == marked_line("BUG", name), str(fault)
    return fault


def _dims(value):
    value = value if isinstance(value, tuple) else (value,)
    return value + (1,) * (3 - len(value))


def vectors(n: int, out_size: int | None = None):
    x = np.arange(n, dtype=np.float32)
    return x, np.full(out_size or n, np.nan, np.float32)


def test_off_by_one_bound_reads_past_the_end():
    x, out = vectors(100)
    fault = run("off_by_one", [x, out, 100])
    assert fault.kind == "out-of-bounds"
    assert fault.place.block == (0, 0, 0) and fault.place.thread == (100, 0, 0)
    assert "read of global array x[100] of shape (100,)" in fault.detail
    assert "past the end" in fault.detail
    assert "if i <= n" not in str(fault)  # the line reported is the access, not the bound
    assert "out[i] = x[i]" in str(fault)


def test_negative_index_is_not_wrapped():
    x, out = vectors(64)
    fault = run("negative_index", [x, out, 64])
    assert fault.kind == "out-of-bounds"
    assert fault.place.thread == (0, 0, 0)
    assert "x[-1]" in fault.detail and "negative index -1" in fault.detail


def test_missing_syncthreads_in_a_tree_reduction_is_a_race():
    x, out = vectors(128, 1)
    fault = run("missing_syncthreads", [x, out, 128])
    assert fault.kind == "race"
    assert "buf[1]" in fault.detail
    assert fault.place.thread == (1, 0, 0)
    assert fault.other is not None and fault.other.thread == (0, 0, 0)
    assert fault.other.line == marked_line("OTHER", "missing_syncthreads")
    assert "no barrier between them" in str(fault)


def test_reading_a_neighbours_shared_slot_without_a_barrier_is_a_race():
    x, out = vectors(128)
    fault = run("stencil_without_barrier", [x, out, 128])
    assert fault.kind == "race"
    assert fault.place.thread == (1, 0, 0)
    assert "read of buf[0] after another thread's write" in fault.detail
    assert fault.other.thread == (0, 0, 0)
    assert fault.other.line == marked_line("OTHER", "stencil_without_barrier")


def test_two_blocks_writing_one_output_element():
    x, out = vectors(256, 128)
    fault = run("blocks_share_output", [x, out, 256], grid=2)
    assert fault.kind == "race"
    assert fault.place.block == (1, 0, 0) and fault.place.thread == (0, 0, 0)
    assert fault.other.block == (0, 0, 0) and fault.other.thread == (0, 0, 0)
    assert "out[0]" in fault.detail


def test_uninitialised_shared_read():
    x, out = vectors(128)
    fault = run("uninitialised_shared", [x, out, 128])
    assert fault.kind == "uninitialised"
    assert fault.place.thread == (64, 0, 0)
    assert "shared memory buf[64]" in fault.detail


def test_read_of_a_slot_another_thread_writes_later_is_a_race_not_uninitialised():
    """`s[t] = x[i]; out[i] = s[(t + 1) % 128]` without a barrier: thread 0 reads s[1]
    before thread 1 writes it. That is a missing barrier, reported with both threads
    and both lines, not a read of uninitialised memory."""
    x, out = vectors(128)
    fault = run("neighbour_without_barrier", [x, out, 128])
    assert fault.kind == "race"
    assert "missing cuda.syncthreads()?" in fault.detail and "s[1]" in fault.detail
    assert "uninitialised" not in str(fault)
    assert fault.place.thread == (1, 0, 0)  # the writer, at the BUG line (the write)
    assert fault.other is not None and fault.other.thread == (0, 0, 0)
    assert fault.other.line == marked_line("OTHER", "neighbour_without_barrier")  # the read
    assert "s[t] = x[i]" in str(fault) and "out[i] = s[(t + 1) % THREADS]" in str(fault)


def test_uninitialised_local_read():
    x, out = vectors(128)
    fault = run("uninitialised_local", [x, out, 128])
    assert fault.kind == "uninitialised"
    assert fault.place.thread == (0, 0, 0) and "local memory acc[3]" in fault.detail


def test_shared_memory_is_fresh_for_every_block():
    # Block 0 writes all of buf; block 1 only half: its other half must read as unwritten.
    x, out = vectors(256)
    fault = run("uninitialised_shared", [x, out, 256], grid=2)
    assert fault.place.block == (0, 0, 0)  # already block 0 reads unwritten slots


def test_syncthreads_inside_the_bound_check_diverges_in_the_last_block():
    """Threads that returned count as arrived at the barrier (the PTX ISA's exit releases
    it; an H100 gave right sums in 250 of 250 launches of such a block sum): that is a
    warning. The kernel's real bug is what the live threads then read: the exited
    threads' slots, never written, stored to out: an uninitialised value used."""
    x, out = vectors(200, 256)
    machine = Machine()
    config = LaunchConfig((2, 1, 1), (128, 1, 1), 0)
    with pytest.raises(SimulationFault) as caught:
        machine.launch(
            "divergent_syncthreads", planted_bugs.divergent_syncthreads, config, [x, out, 200]
        )
    fault = caught.value
    assert fault.kind == "uninitialised" and "stored to global memory out[" in fault.detail
    assert fault.place.block == (1, 0, 0)
    assert fault.place.line == marked_line("USE", "divergent_syncthreads")
    [warning] = machine.warnings
    assert warning.kind == "barrier-after-exit" and warning.place.block == (1, 0, 0)
    assert warning.place.line == marked_line("BUG", "divergent_syncthreads")
    assert "reached by 72 of the block's 128 threads; 56 exited" in warning.detail


def test_syncthreads_inside_the_bound_check_is_the_old_error_in_strict_mode():
    x, out = vectors(200, 256)
    config = LaunchConfig((2, 1, 1), (128, 1, 1), 0)
    with pytest.raises(SimulationFault) as caught:
        Machine(strict=True).launch(
            "divergent_syncthreads", planted_bugs.divergent_syncthreads, config, [x, out, 200]
        )
    fault = caught.value
    assert fault.kind == "barrier-divergence"
    assert fault.place.block == (1, 0, 0)
    assert fault.place.line == marked_line("BUG", "divergent_syncthreads")
    assert "reached by 72 of the block's 128 threads; 56 exited" in fault.detail


def test_threads_at_different_barriers():
    x, out = vectors(128)
    fault = run("different_barriers", [x, out, 128])
    assert fault.kind == "barrier-divergence"
    assert fault.place.thread == (0, 0, 0)
    assert fault.other.thread == (64, 0, 0)
    assert fault.other.line == marked_line("OTHER", "different_barriers")


def test_shuffle_with_a_lane_missing_from_the_mask():
    x, out = vectors(32)
    fault = run("shuffle_lane_missing", [x, out, 32], block=32)
    assert fault.kind == "warp-divergence"
    assert fault.place.thread == (0, 0, 0)
    assert "mask 0xffffffff: lane 16, named in the mask, exited" in fault.detail


def test_shuffle_reading_a_lane_outside_the_mask():
    x, out = vectors(32)
    fault = run("shuffle_reads_outside_mask", [x, out, 32], block=32)
    assert fault.kind == "warp-mask"
    assert fault.place.thread == (8, 0, 0)
    assert "reads lane 16, which is not in the mask 0x0000ffff" in fault.detail


def test_dynamic_shared_memory_smaller_than_the_block_uses():
    x, out = vectors(128)
    fault = run("dynamic_shared_too_small", [x, out, 128], shared=64 * 4)
    assert fault.kind == "out-of-bounds"
    assert fault.place.thread == (64, 0, 0)
    assert "write of shared array buf[64] of shape (64,)" in fault.detail


def test_two_dimensional_overrun_names_the_dimension():
    x = np.zeros((3, 5), np.float32)
    out = np.zeros((3, 5), np.float32)
    fault = run("row_col_2d_overrun", [x, out, 3, 5], block=(8, 8))
    assert fault.kind == "out-of-bounds"
    assert fault.place.thread == (5, 0, 0)
    assert "x[0, 5]" in fault.detail and "(dimension 1)" in fault.detail
