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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.launch.kernel_set import LaunchConfig
from portkit.results import FailureSite
from portkit.simt.layout import is_strided, memory_view
from portkit.simt.records import ArrayRecord, LaunchRecord
from portkit.simt.schedule import REVERSED
from portkit.simt.tally import AtomicTally

AUTO, LOCKSTEP, PER_THREAD = "auto", "lockstep", "per-thread"


FALLBACKS = ("allow", "error")  # [tool.portkit] lockstep-fallback, PORTKIT_LOCKSTEP_FALLBACK


class LockstepFallback(KernelError):
    """A launch ran per thread where lockstep was wanted, under lockstep-fallback = "error"."""


@dataclass(frozen=True)
class EngineChoice:
    """Which engine ran one launch, and why (``portkit sim --verbose`` prints these).
    ``fallback``: the lockstep engine was tried or meant and the per-thread engine ran
    the launch (all of it, or from a chunk on) to its end."""

    kernel: str
    engine: str
    reason: str
    fallback: bool = False


def try_lockstep(
    machine: Any, name: str, dispatcher: Any, config: LaunchConfig, args: Sequence[Any]
) -> LaunchRecord | None:
    """Run the launch in ``machine``'s lockstep engine if it applies. None (inputs as
    they were) when the kernel is not chosen for it: the per-thread engine then runs the
    whole launch. A fault the per-thread re-run of a failed chunk finds is raised; a
    fallback is recorded in ``machine.engines`` and, under ``machine.lockstep_fallback
    == "error"``, raised as ``LockstepFallback``."""
    if machine.engine == PER_THREAD:
        machine.engines.append(EngineChoice(name, PER_THREAD, "chosen"))
        return None
    from portkit.simt.lockstep import LockstepEngine

    if machine._lockstep is None:
        machine._lockstep = LockstepEngine(machine.rewriter, machine.files)
    refused = machine._lockstep.refused(dispatcher)
    if machine.rewriter.rewrite(dispatcher).grid_syncs:
        refused = "a grid barrier (every block must be alive at once: grid_run.py)"
    if any(isinstance(a, np.ndarray) and is_strided(a) for a in args):
        refused = "a strided view of an array (d[::2]: its layout is the per-thread engine's)"
    if refused is not None:
        return _fall_back(
            machine, name, refused, lambda: machine.run_per_thread(name, dispatcher, config, args)
        )
    ran = _run_lockstep(machine, dispatcher, config, args)
    if isinstance(ran, tuple):
        reason, shadows = ran
        failed = machine._lockstep.failed
        if failed is None:  # nothing ran: the whole launch per thread
            rest = lambda: machine.run_per_thread(name, dispatcher, config, args)  # noqa: E731
        else:
            rest = lambda: _continue_per_thread(  # noqa: E731
                machine, name, dispatcher, config, args, failed, shadows
            )
        return _fall_back(machine, name, f"re-run per thread: {reason}", rest)
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


def _fall_back(
    machine: Any, name: str, reason: str, run: Callable[[], LaunchRecord]
) -> LaunchRecord:
    """Run the launch (or its rest) per thread. A fault it finds is raised: the launch
    has a bug, not a fallback. One that runs to the end is a fallback: counted in
    ``machine.engines``, and under lockstep-fallback = "error" the launch's error."""
    at = len(machine.engines)
    machine.engines.append(EngineChoice(name, PER_THREAD, reason))
    record = run()
    machine.engines[at] = EngineChoice(name, PER_THREAD, reason, fallback=True)
    if getattr(machine, "lockstep_fallback", "allow") == "error":
        raise LockstepFallback(
            f"kernel {name}: ran in the per-thread engine, not in lockstep: {reason} "
            f'(lockstep-fallback = "error"; PORTKIT_LOCKSTEP_FALLBACK=allow lets it run)',
            FailureSite(name),
        )
    return record


def _run_lockstep(
    machine: Any, dispatcher: Any, config: LaunchConfig, args: Sequence[Any]
) -> list[Any] | tuple[str, list[Any]]:
    """The launch's lockstep run: its shadows, or why it stopped and the shadows the
    chunks before the failed one left (the failed chunk undone). Only the engine's own
    signal stops it here (``Unsupported``: a construct not vectorised or a check that
    failed; ``engine.py`` turns what a chunk's kernel code raises into it); any other
    exception, the engine's own included, passes through: a timeout, an interrupt,
    MemoryError, the budget, a bug of the engine (not hidden as a fallback)."""
    from portkit.simt.lockstep import LaneShadow, Unsupported

    # NumPy shadows, not the per-thread engine's array('q'), each slot allocated at its
    # first use: a 2^24-element launch allocates what it touches, at memset speed.
    shadows = [LaneShadow(a.size) if isinstance(a, np.ndarray) else None for a in args]
    machine._lockstep.tally = AtomicTally()
    try:
        machine._lockstep.launch(dispatcher, config, args, shadows, machine.schedule)
    except Unsupported as exc:  # the engine's own signal; anything else passes through
        return str(exc), shadows
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
