"""Which launch, block and thread wrote an element: recorded by the simulator, not
guessed from an index formula.

Two sources, one question (``writer(tensor, flat_index)``):

- ``RecordedWriters``: the prototype ran in the simulator, which stamped every write
  of every launch; the answer is read off those stamps.
- ``ReplayedWriters``: the prototype ran on a GPU. Each launch's arguments were copied
  before it ran, so any block of it can be re-run alone in the simulator, whose stamps
  then say whether that block wrote the element. The first block tried is the one the
  element's position suggests; after each miss, the range of elements the block did
  write says which way to look. Only the blocks that must run are run.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from portkit.launch.kernel_set import LaunchConfig, LaunchTarget

if TYPE_CHECKING:
    import torch

    from portkit.simt.records import ArrayRecord, LaunchRecord

PROBES = 24  # blocks tried per element before giving up


@dataclass(frozen=True)
class Writer:
    launch: int  # position among the side's launches (forward then backward)
    kernel: str
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    file: str
    line: int
    grid: tuple[int, int, int]
    simulated_value: float | None = None  # what the simulator wrote there (replays only)

    @property
    def last_block(self) -> bool:
        return self.block == tuple(d - 1 for d in self.grid)

    def describe(self) -> str:
        return f"{self.kernel} #{self.launch} block {self.block} thread {self.thread}"


@dataclass
class CapturedLaunch:
    """One launch and copies of its arguments as they were just before it ran."""

    kernel: str
    config: LaunchConfig
    args: list[Any]  # cloned tensors (on the launch's device) and scalars
    pointers: list[int | None]  # data_ptr of each tensor argument as launched


class CapturingTarget(LaunchTarget):
    def __init__(self, name: str, inner: Any, log: list[CapturedLaunch]) -> None:
        self.name, self._inner, self._log = name, inner, log

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import torch

        copies = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
        pointers = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
        self._log.append(CapturedLaunch(self.name, config, copies, pointers))
        self._inner.launch(config, args)


def host_arguments(launch: CapturedLaunch) -> list[Any]:
    """Fresh NumPy copies of a captured launch's arguments, for the simulator."""
    import torch

    from portkit.backends.sim import host_array

    return [host_array(a.cpu().clone()) if isinstance(a, torch.Tensor) else a for a in launch.args]


def _written(stamps: Any) -> np.ndarray:
    """Flat positions a record's stamps mark as written."""
    if isinstance(stamps, dict):
        return np.fromiter((k for k, v in stamps.items() if v != -1), dtype=np.int64)
    return np.flatnonzero(np.asarray(stamps, dtype=np.int64) != -1)


def _writer_from(
    record: LaunchRecord, array: ArrayRecord, position: int, launch: int, value: float | None = None
) -> Writer | None:
    stamp = int(array.writes[position])  # array('q') or, from the lockstep engine, NumPy
    if stamp == -1:
        return None
    block, thread = record.coordinates(stamp)
    file, line = record.line(int(array.write_lines[position]))
    return Writer(launch, record.kernel, block, thread, file, line, record.config.grid, value)


class RecordedWriters:
    def __init__(self, records: Sequence[LaunchRecord]) -> None:
        self.records = list(records)

    def writer(self, tensor: torch.Tensor, position: int) -> Writer | None:
        pointer = tensor.data_ptr()
        for index in range(len(self.records) - 1, -1, -1):
            record = self.records[index]
            for array in record.arrays:
                if array.data.ctypes.data == pointer:
                    found = _writer_from(record, array, position, index)
                    if found is not None:
                        return found
        return None


class ReplayedWriters:
    def __init__(self, launches: Sequence[CapturedLaunch], dispatchers: Mapping[str, Any]) -> None:
        self.launches = list(launches)
        self.dispatchers = dispatchers
        self._runs: dict[tuple[int, int], tuple[LaunchRecord, list[Any]]] = {}
        self.blocks_run = 0

    def run_block(self, launch: int, block: int) -> tuple[LaunchRecord, list[Any]]:
        key = (launch, block)
        if key not in self._runs:
            from portkit.simt.machine import Machine

            captured = self.launches[launch]
            args = host_arguments(captured)
            record = Machine().launch(
                captured.kernel,
                self.dispatchers[captured.kernel],
                captured.config,
                args,
                blocks=[block],
            )
            self._runs[key] = (record, args)
            self.blocks_run += 1
        return self._runs[key]

    def writer(self, tensor: torch.Tensor, position: int) -> Writer | None:
        pointer = tensor.data_ptr()
        for index in range(len(self.launches) - 1, -1, -1):
            launch = self.launches[index]
            if pointer in launch.pointers:
                found = self._search(index, launch.pointers.index(pointer), position)
                if found is not None:
                    return found
        return None

    def _search(self, launch: int, argument: int, position: int) -> Writer | None:
        captured = self.launches[launch]
        blocks = math.prod(captured.config.grid)
        size = captured.args[argument].numel()
        first = guess = min(blocks - 1, position * blocks // max(size, 1))
        tried: set[int] = set()
        for _ in range(PROBES):
            if guess in tried or not 0 <= guess < blocks:
                guess = next((b for b in _around(first, blocks) if b not in tried), None)
                if guess is None:
                    return None
            tried.add(guess)
            record, args = self.run_block(launch, guess)
            parameter = record.arrays[_array_position(captured, argument)]
            value = float(args[argument].reshape(-1)[position])
            found = _writer_from(record, parameter, position, launch, value)
            if found is not None:
                return found
            written = _written(parameter.writes)
            if written.size == 0:
                guess = -1  # no hint: the next untried block around the first guess
                continue
            span = max(int(written.max() - written.min()) + 1, 1)
            if position < written.min():
                guess -= max(1, math.ceil((written.min() - position) / span))
            elif position > written.max():
                guess += max(1, math.ceil((position - written.max()) / span))
            else:  # inside this block's span but not written by it: interleaved; neighbours
                guess += 1
        return None


def _around(center: int, blocks: int) -> Iterator[int]:
    for distance in range(blocks):
        for candidate in (center - distance, center + distance):
            if 0 <= candidate < blocks:
                yield candidate


def _array_position(launch: CapturedLaunch, argument: int) -> int:
    """Index among the launch's array arguments (the records list arrays only)."""
    return sum(1 for p in launch.pointers[:argument] if p is not None)
