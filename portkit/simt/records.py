"""What a simulated launch leaves behind: places (thread + line), faults, and the record
of who wrote each element of each global array (used by ``portkit diff``)."""

from __future__ import annotations

import linecache
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.launch.kernel_set import LaunchConfig
from portkit.results import FailureSite
from portkit.simt.stamps import line_of, stamp_block, stamp_thread


@dataclass(frozen=True)
class Place:
    """A thread and the source line it was at."""

    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    file: str
    line: int

    @property
    def source(self) -> str:
        return linecache.getline(self.file, self.line).strip()

    def describe(self) -> str:
        return f"block {self.block}, thread {self.thread}, {self.file}:{self.line}: {self.source}"

    def site(self, kernel: str) -> FailureSite:
        """This place as a check row keeps it (results.FailureSite)."""
        return FailureSite(kernel, self.block, self.thread, self.file, self.line)


class SimulationFault(KernelError):
    """A kernel bug the simulator caught, with where it happened."""

    def __init__(
        self,
        kernel: str,
        kind: str,
        detail: str,
        place: Place | None,
        other: Place | None = None,
        other_what: str = "",
    ) -> None:
        lines = [f"kernel {kernel}: {detail}"]
        if place is not None:
            lines.append(f"  at {place.describe()}")
        if other is not None:
            lines.append(f"  {other_what or 'other'}: {other.describe()}")
        site = place.site(kernel) if place is not None else FailureSite(kernel)
        super().__init__("\n".join(lines), site)
        self.kernel, self.kind, self.detail, self.place, self.other = (
            kernel,
            kind,
            detail,
            place,
            other,
        )


@dataclass
class ArrayRecord:
    """Who last wrote each element of one global array in one launch."""

    name: str
    data: np.ndarray  # the array's memory (a view of the tensor's storage)
    writes: Any  # array('q') of stamps, -1 where nobody wrote
    write_lines: Any


@dataclass
class LaunchRecord:
    kernel: str
    config: LaunchConfig
    arrays: list[ArrayRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    warnings: list[Any] = field(default_factory=list)  # its SimWarnings (warning_log.py)

    def coordinates(self, stamp: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(block, thread) of a write stamp."""
        return (
            unflatten(stamp_block(stamp), self.config.grid),
            unflatten(stamp_thread(stamp), self.config.block),
        )

    def line(self, key: int) -> tuple[str, int]:
        return line_of(key, self.files)


def unflatten(linear: int, dims: Sequence[int]) -> tuple[int, int, int]:
    x, y = dims[0], dims[1]
    return (linear % x, (linear // x) % y, linear // (x * y))


def linear_index(thread: tuple[int, int, int], dims: tuple[int, int, int]) -> int:
    """The x-fastest linear index of a block in a grid, or of a thread in a block."""
    return thread[0] + thread[1] * dims[0] + thread[2] * dims[0] * dims[1]
