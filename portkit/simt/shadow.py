"""Shadow memory: who last wrote and read each element of one allocation.

The per-thread engine keeps one ``Shadow`` per array: ``array('q')`` slots for a whole
launch (36 bytes an element), dictionaries for a few blocks of a big one (``portkit
diff``'s re-runs, a fault's re-run of one chunk of blocks).
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from typing import Any

import numpy as np

from portkit.simt.stamps import NOBODY


class Shadow:
    """Who last wrote and read each element of one allocation, during one launch.

    Two read slots: the latest reader, and another thread that read concurrently with it.
    Whichever thread then writes, one of the two is a reader other than itself, so a
    write racing with any earlier read is caught and the other thread can be named."""

    __slots__ = (
        "writes",
        "write_lines",
        "reads",
        "read_lines",
        "reads2",
        "read2_lines",
        "unwritten_reads",
        "atomics",
        "same_writes",
    )

    def __init__(self, size: int, sparse: bool = False, seed: Any = None) -> None:
        # Shared memory read before any thread wrote it: flat -> (stamp, line key) of the
        # first such read. Not an error yet: if another thread of the block writes it
        # later in the same barrier interval, it is a race (a missing barrier); if nobody
        # does by the next barrier or the block's end, it is uninitialised.
        self.unwritten_reads: dict[int, tuple[int, int]] = {}
        # Elements whose last write was an atomic: a read racing with it is confirmed by
        # a second schedule (machine.py), not reported at once.
        self.atomics: set[int] = set()
        # Elements whose last write stored the bits they already held: a read racing
        # with it reads those bits in any order (a warning, memory.py).
        self.same_writes: set[int] = set()
        if sparse:
            # A few blocks of a big launch: only the elements they touch get an entry.
            # ``seed`` (a LaneShadow) answers the others: what earlier blocks left.
            for name in self.__slots__[:-3]:
                if seed is not None and seed.seeds(name):
                    setattr(self, name, _Seeded(seed, name))
                else:
                    setattr(self, name, defaultdict(_nobody if "lines" not in name else int))
            return
        self.writes = array("q", [NOBODY]) * size
        self.write_lines = array("i", [0]) * size
        self.reads = array("q", [NOBODY]) * size
        self.read_lines = array("i", [0]) * size
        self.reads2 = array("q", [NOBODY]) * size
        self.read2_lines = array("i", [0]) * size


def _nobody() -> int:
    return NOBODY


class _Seeded(dict):
    """A sparse slot whose elements without an entry read slot ``name`` of ``seed``, the
    ``LaneShadow`` another engine filled (a fault's re-run of one chunk: the blocks
    before it), as full stamps and line keys whatever its encoding."""

    def __init__(self, seed: Any, name: str) -> None:
        super().__init__()
        self.seed, self.name = seed, name

    def __missing__(self, key: int) -> int:
        return self.seed.seed_value(self.name, key)

def poisoned(size: int, dtype: np.dtype) -> np.ndarray:
    """Fresh shared or local memory: NaN or a recognisable pattern, never a lucky zero."""
    if dtype.kind == "f":
        return np.full(size, np.nan, dtype)
    return np.full(size, 0x5A5A5A5A5A5A5A5A, np.uint64).astype(dtype)


def poisoned_bfloat16(size: int) -> np.ndarray:
    """Fresh shared or local bfloat16 memory: its bits (``BFloat16Bits``, as a bfloat16
    argument), every one NaN."""
    from portkit.simt.scalars import BFloat16Bits

    return np.full(size, 0x7FFF, np.uint16).view(BFloat16Bits)
