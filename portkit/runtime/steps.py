"""What a recording holds: the buffers a call allocated, the launches it made, and how
its result is built, with every tensor named by a reference (``Ref``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_SIGNATURES = 256  # recordings per launcher; a model calls an op with a few dozen signatures

# A reference to a tensor of the call: ``i >= 0`` is the call's leaf i (its inputs,
# flattened), ``-1 - j`` is the j-th buffer the call allocated.
Ref = int


@dataclass(frozen=True)
class ReplayLaunch:
    """One launch as a launch target can repeat it (``LaunchTarget.replay_step``).

    ``values`` are the launch's values with ``None`` where a data pointer goes;
    ``pointers`` maps each of those slots to the position of its tensor among the
    launch's arguments. ``driver`` launches them (``DriverKernel.launch``); the compiled
    replayer takes ``function`` (the kernel's driver handle as an int, which
    ``cuLaunchKernel`` accepts) and ``packed`` instead.
    """

    driver: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    warps: int
    values: tuple[Any, ...]
    pointers: tuple[tuple[int, int], ...]  # (slot, argument position)

    @property
    def function(self) -> int:
        return int(self.driver.handle)

    def packed(self) -> bytes:
        """The parameter block with zeros where the data pointers go."""
        values = list(self.values)
        for slot, _ in self.pointers:
            values[slot] = 0
        return self.driver.packed(values)


@dataclass(frozen=True)
class RecordedLaunch:
    step: ReplayLaunch
    refs: tuple[tuple[int, Ref], ...]  # (slot, tensor reference)


@dataclass(frozen=True)
class Recording:
    """Everything needed to repeat one call of a launcher for one input signature."""

    device: Any  # torch.device of the call's tensors
    allocations: tuple[Any, ...]  # the buffers allocated, as meta tensors (shape, strides, dtype)
    launches: tuple[RecordedLaunch, ...]
    result: Any  # the result's structure: tuples, lists and None, with Refs for tensors
    # What portkit.load's op returns for this call in plain eager (``eager_template``),
    # or None where only the launcher's result is replayed (backwards, odd results).
    eager: Any = None


def eager_template(result: Any, outputs: int) -> Any:
    """A forward's ``(outputs, saved)`` template as ``OpCallable`` returns it in plain
    eager: the one output, or the tuple of them (None where that call would raise, so
    that it does)."""
    if type(result) not in (tuple, list) or len(result) != 2:
        return None
    out = result[0]
    if type(out) is int:
        return out if outputs == 1 else None
    if type(out) in (tuple, list) and len(out) == outputs and all(type(o) is int for o in out):
        return tuple(out) if len(out) > 1 else out[0]
    return None
