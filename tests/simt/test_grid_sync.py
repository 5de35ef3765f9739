"""Cooperative groups' grid barrier (``g = cuda.cg.this_grid(); g.sync()``) in the
simulator: every block meets at it, writes before it are seen after it by any block
and are no race, a block that never reaches it is reported, and a grid too large to be
resident at once is refused as a GPU refuses a cooperative launch."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.errors import LaunchError
from portkit.launch.kernel_set import LaunchConfig
from portkit.simt import simulate
from portkit.simt.device import blocks_per_sm, current_device
from portkit.simt.machine import Machine
from portkit.simt.records import SimulationFault
from portkit.simt.stamps import THREAD_MASK

BLOCKS, THREADS = 4, 32


@cuda.jit
def shift_left_after_grid_sync(x, out):
    i = cuda.grid(1)
    x[i] = i * 2
    g = cuda.cg.this_grid()
    g.sync()  # every block's writes to x are visible past here
    out[i] = x[(i + 1) % x.size]


@cuda.jit(device=True)
def wait_for_the_grid():
    cuda.cg.this_grid().sync()


@cuda.jit
def shift_left_after_device_grid_sync(x, out):
    i = cuda.grid(1)
    x[i] = i * 2
    wait_for_the_grid()
    out[i] = x[(i + 1) % x.size]


@cuda.jit
def shift_left_without_grid_sync(x, out):
    i = cuda.grid(1)
    x[i] = i * 2
    out[i] = x[(i + 1) % x.size]


@cuda.jit
def rotate_steps(x, steps):
    # Each step every thread reads its right neighbour (another block at block edges),
    # waits for the whole grid, then writes: a grid-wide rotation per step.
    i = cuda.grid(1)
    g = cuda.cg.this_grid()
    for _ in range(steps):
        value = x[(i + 1) % x.size]
        g.sync()
        x[i] = value
        g.sync()


@cuda.jit
def guarded_shift_after_grid_sync(x, out, n):
    i = cuda.grid(1)
    if i >= n:
        return  # threads past the data leave before the grid barrier
    x[i] = i * 2
    cuda.cg.this_grid().sync()
    out[i] = x[(i + 1) % n]


@cuda.jit
def block_1_skips_the_grid_sync(x):
    i = cuda.grid(1)
    if cuda.blockIdx.x == 1:
        return
    x[i] = 1
    cuda.cg.this_grid().sync()


def _arrays():
    x = np.zeros(BLOCKS * THREADS, np.int64)
    return x, np.zeros_like(x)


@pytest.mark.parametrize("engine", ["auto", "per-thread"])
@pytest.mark.parametrize("kernel", [shift_left_after_grid_sync, shift_left_after_device_grid_sync])
def test_grid_sync_makes_other_blocks_writes_visible(engine, kernel):
    x, out = _arrays()
    simulate(kernel, engine=engine)[BLOCKS, THREADS](x, out)
    n = out.size
    assert np.array_equal(out, (np.arange(n) + 1) % n * 2)


def test_threads_that_exited_do_not_hold_up_the_grid_sync():
    x, out = _arrays()
    n = x.size - 5  # the last block's 5 last threads are past the end
    simulate(guarded_shift_after_grid_sync)[BLOCKS, THREADS](x, out, n)
    assert np.array_equal(out[:n], (np.arange(n) + 1) % n * 2)
    assert not out[n:].any()


def test_without_the_grid_sync_the_same_reads_race():
    x, out = _arrays()
    with pytest.raises(SimulationFault) as caught:
        simulate(shift_left_without_grid_sync)[BLOCKS, THREADS](x, out)
    assert caught.value.kind == "race"


def test_grid_sync_in_a_loop_rotates_the_whole_grid():
    x = np.arange(BLOCKS * THREADS, dtype=np.int64)
    simulate(rotate_steps)[BLOCKS, THREADS](x, 5)
    assert np.array_equal(x, np.roll(np.arange(BLOCKS * THREADS), -5))


def test_a_block_that_never_reaches_the_grid_sync_is_reported():
    x, _ = _arrays()
    with pytest.raises(SimulationFault) as caught:
        simulate(block_1_skips_the_grid_sync)[BLOCKS, THREADS](x)
    fault = caught.value
    assert fault.kind == "barrier-divergence"
    assert f"reached by {BLOCKS - 1} of the grid's {BLOCKS} blocks" in fault.detail
    assert "block (1, 0, 0) ended" in fault.detail


def test_a_grid_larger_than_the_device_holds_is_refused():
    spec = current_device().spec
    fits = blocks_per_sm(spec, 1024) * spec.sms
    x = np.zeros((fits + 1) * 1024, np.int64)
    with pytest.raises(LaunchError) as caught:
        simulate(shift_left_after_grid_sync)[fits + 1, 1024](x, x.copy())
    message = str(caught.value)
    assert message.startswith("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE")
    assert f"{fits + 1} blocks of 1024 threads" in message and f"holds {fits}" in message
    assert "\n" not in message


def test_the_launch_record_keeps_writers_from_before_the_grid_sync():
    x, out = _arrays()
    machine = Machine()
    config = LaunchConfig((BLOCKS, 1, 1), (THREADS, 1, 1), 0)
    record = machine.launch("shift", shift_left_after_grid_sync, config, [x, out])
    writers = {r.name: np.frombuffer(r.writes, np.int64) for r in record.arrays}
    threads = np.arange(BLOCKS * THREADS)
    # x was written before the barrier, out after it: each element by its own thread.
    for name in ("x", "out"):
        assert np.array_equal(writers[name] >> 32, threads // THREADS)
        assert np.array_equal(writers[name] & THREAD_MASK, threads % THREADS)
