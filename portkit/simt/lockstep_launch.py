"""The machine's lockstep path: a launch run by the lockstep engine, and, when one of
its checks fails, the re-run per thread that names the fault.

The re-run costs what the fault's chunk costs, not the grid, and no copy of the inputs:
the failed chunk undoes what it wrote (``lockstep/journal.py``), the chunks before it
stand (they passed), and the per-thread engine goes on from the failed chunk's first
block to the first fault, its sparse shadows seeded with the stamps the lockstep run
left, so a race with an earlier block is still seen. A chunk that runs clean per thread
(a lockstep check stricter than the per-thread one, or something not vectorised) goes
on per thread to the launch's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.layout import memory_view
from portkit.simt.records import ArrayRecord, LaunchRecord
from portkit.simt.scalars import BFloat16Bits
from portkit.simt.schedule import REVERSED
from portkit.simt.tally import AtomicTally

AUTO, LOCKSTEP, PER_THREAD = "auto", "lockstep", "per-thread"


@dataclass(frozen=True)
class EngineChoice:
    """Which engine ran one launch, and why (``portkit sim --verbose`` prints these)."""

    kernel: str
    engine: str
    reason: str


def try_lockstep(
    machine: Any, name: str, dispatcher: Any, config: LaunchConfig, args: Sequence[Any]
) -> LaunchRecord | None:
    """Run the launch in ``machine``'s lockstep engine if it applies. None (inputs as
    they were) when it does not or when a check failed and the failed chunk ran clean
    per thread: the per-thread engine then runs the whole launch. A fault the chunk's
    re-run finds is raised."""
    if machine.engine == PER_THREAD:
        machine.engines.append(EngineChoice(name, PER_THREAD, "chosen"))
        return None
    from portkit.simt.lockstep import LockstepEngine

    if machine._lockstep is None:
        machine._lockstep = LockstepEngine(machine.rewriter, machine.files)
    refused = machine._lockstep.refused(dispatcher)
    if machine.rewriter.rewrite(dispatcher).grid_syncs:
        refused = "a grid barrier (every block must be alive at once: grid_run.py)"
    if refused is None and any(isinstance(a, BFloat16Bits) for a in args):
        refused = "bfloat16 arrays (the lockstep engine has no bfloat16 arithmetic)"
    if refused is not None:
        machine.engines.append(EngineChoice(name, PER_THREAD, refused))
        return None
    ran = _run_lockstep(machine, dispatcher, config, args)
    if isinstance(ran, tuple):
        reason, shadows = ran
        machine.engines.append(EngineChoice(name, PER_THREAD, f"re-run per thread: {reason}"))
        failed = machine._lockstep.failed
        if failed is None:
            return None  # nothing ran: the whole launch per thread
        return _continue_per_thread(machine, name, dispatcher, config, args, failed, shadows)
    machine.tally.merge(machine._lockstep.tally)
    record = LaunchRecord(name, config)
    for parameter, arg, shadow in zip(machine.rewriter.rewrite(dispatcher).parameters, args, ran):
        if shadow is not None:
            flat, _ = memory_view(arg, parameter)
            record.arrays.append(ArrayRecord(parameter, flat, *shadow.record()))
    record.files = list(machine.files)
    machine.records.append(record)
    machine.engines.append(EngineChoice(name, LOCKSTEP, "vectorised"))
    if machine.on_block is not None:
        total = config.grid[0] * config.grid[1] * config.grid[2]
        machine.on_block(total, total)
    return record


def _run_lockstep(
    machine: Any, dispatcher: Any, config: LaunchConfig, args: Sequence[Any]
) -> list[Any] | tuple[str, list[Any]]:
    """The launch's lockstep run: its shadows, or why it stopped and the shadows the
    chunks before the failed one left (the failed chunk undone)."""
    from portkit.simt.lockstep import LaneShadow, Unsupported

    # NumPy shadows, not the per-thread engine's array('q'), each slot allocated at its
    # first use: a 2^24-element launch allocates what it touches, at memset speed.
    shadows = [LaneShadow(a.size) if isinstance(a, np.ndarray) else None for a in args]
    machine._lockstep.tally = AtomicTally()
    try:
        machine._lockstep.launch(dispatcher, config, args, shadows, machine.schedule)
    except KernelError:
        raise  # the launch itself is wrong (an argument): the same for both engines
    except Exception as exc:  # Unsupported, a failed check, or anything unforeseen
        reason = str(exc) if isinstance(exc, Unsupported) else f"{type(exc).__name__}: {exc}"
        return reason, shadows
    return shadows


def _continue_per_thread(
    machine: Any,
    name: str,
    dispatcher: Any,
    config: LaunchConfig,
    args: Sequence[Any],
    failed: range,
    shadows: list[Any],
) -> LaunchRecord:
    """Run the blocks from ``failed`` on (in the launch's order) per thread, their
    sparse shadows seeded with the stamps the lockstep chunks left; raises the fault
    they find, which is the first block's to fault: a bug costs the blocks of its chunk
    up to the faulting one. A chunk that runs clean (a lockstep check stricter than the
    per-thread one, or something not vectorised) goes on per thread to the launch's end."""
    total = config.grid[0] * config.grid[1] * config.grid[2]
    blocks = range(failed.stop) if machine.schedule == REVERSED else range(failed.start, total)
    machine.tally.merge(machine._lockstep.tally)  # the chunks that ran to the end
    return machine.run_per_thread(name, dispatcher, config, args, blocks, seeds=shadows)
