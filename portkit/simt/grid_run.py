"""A cooperative launch in the per-thread engine: a kernel that waits at a grid barrier
(``g = cuda.cg.this_grid(); g.sync()``) has every block's threads alive at once.

Each block runs (``BlockRun``) until all its threads wait at the grid barrier; once
every block of the grid is there, each passes it and runs on to the next one or its
end. The grid must fit the simulated GPU at once, as a cooperative launch must fit a
real one (blocks per SM for the block size and shared memory, times the SMs), else
``CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE``. Past the barrier, every global access
made before it is ordered before every one after: the global shadows' read stamps are
cleared and their write stamps set aside (kept for the launch's record of who wrote
what), so a block touching an element another block touched before the barrier is no
race.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from portkit.errors import LaunchError
from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.block_run import BlockRun
from portkit.simt.device import blocks_per_sm, current_device
from portkit.simt.intrinsics import Dim3
from portkit.simt.memory import SimArray
from portkit.simt.records import SimulationFault, unflatten
from portkit.simt.stamps import NOBODY
from portkit.simt.transform import SimulatedFunction


def check_fits(config: LaunchConfig) -> None:
    """A cooperative grid must be resident at once on the simulated device."""
    spec = current_device().spec
    total = config.grid[0] * config.grid[1] * config.grid[2]
    fits = blocks_per_sm(spec, config.threads_per_block, config.shared_bytes) * spec.sms
    if total > fits:
        raise LaunchError(
            f"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: a kernel with a grid barrier "
            f"launched with {total} blocks of {config.threads_per_block} threads; the "
            f"simulated {spec.name} holds {fits} such blocks at once"
        )


def run_cooperative(
    machine: Any,
    name: str,
    function: SimulatedFunction,
    args: list[Any],
    chosen: Sequence[int],
    config: LaunchConfig,
) -> None:
    check_fits(config)
    thread_ids = [Dim3(*unflatten(t, config.block)) for t in range(config.threads_per_block)]
    blocks = []
    for block in chosen:
        coords = unflatten(block, config.grid)
        machine.enter_block(coords, {}, len(thread_ids))
        machine.blocks_per_thread += 1
        run = BlockRun(machine, name, function, args, block << 32, thread_ids, None, None)
        blocks.append((coords, machine._shared, run))
    shadows = [a._shadow for a in args if isinstance(a, SimArray) and a._shadow]
    kept: list[dict[int, tuple[int, int]]] = [{} for _ in shadows]
    while blocks:
        waiting = []
        for coords, shared, run in blocks:
            machine.enter_block(coords, shared, len(thread_ids))
            if run.run():
                waiting.append((coords, shared, run))
            else:
                machine.settle_shared(name)
        if waiting and len(waiting) < len(blocks):
            ended = next(b for b in blocks if b not in waiting)
            coords, shared, run = waiting[0]
            machine.enter_block(coords, shared, len(thread_ids))
            raise SimulationFault(
                name,
                "barrier-divergence",
                f"the grid barrier is reached by {len(waiting)} of the grid's {len(blocks)} "
                f"blocks; block {ended[0]} ended without reaching it (every thread of the "
                f"grid must reach it, or the GPU hangs)",
                machine.place(run._runnable[0], *run._where(run._runnable[0])),
            )
        if waiting:
            for shadow, earlier in zip(shadows, kept):
                _order_before(shadow, earlier)
        for coords, shared, run in waiting:
            machine.enter_block(coords, shared, len(thread_ids))
            run.pass_grid_barrier()
        blocks = waiting
    for shadow, earlier in zip(shadows, kept):
        for flat, (stamp, line) in earlier.items():
            if shadow.writes[flat] == NOBODY:
                shadow.writes[flat], shadow.write_lines[flat] = stamp, line


def _order_before(shadow: Any, kept: dict[int, tuple[int, int]]) -> None:
    """Forget the stamps of accesses made before a grid barrier (they are ordered before
    every later one); the write stamps go to ``kept`` for the launch's record."""
    if isinstance(shadow.writes, dict):
        written = [(f, s) for f, s in shadow.writes.items() if s != NOBODY]
        slots: list[Any] = [shadow.writes, shadow.reads, shadow.reads2]
        lines = shadow.write_lines
    else:
        stamps = np.frombuffer(shadow.writes, np.int64)
        flats = np.flatnonzero(stamps != NOBODY)
        written = list(zip(flats.tolist(), stamps[flats].tolist()))
        slots = [np.frombuffer(s, np.int64) for s in (shadow.writes, shadow.reads, shadow.reads2)]
        lines = np.frombuffer(shadow.write_lines, np.int32)
    kept.update((flat, (stamp, int(lines[flat]))) for flat, stamp in written)
    for slot in slots:
        if isinstance(slot, dict):
            slot.clear()
        else:
            slot[:] = NOBODY
