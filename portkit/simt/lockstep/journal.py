"""What one chunk changed in a launch's global arrays, so a failed chunk can be undone.

The lockstep engine used to copy every input before a launch, to restore it for the
re-run that names a fault (as large as the arrays, however little the fault's re-run
needs). A chunk's journal instead keeps the old values, and the old shadow stamps and
lines, of each element the chunk touches, the first time it touches it: undoing it
leaves the arrays and shadows as the chunks before it left them, and the per-thread
engine goes on from there. An element already touched in this chunk carries a stamp
of one of its blocks (every checked access leaves one), so it is not saved twice: the
journal grows with the elements a chunk touches, not with its accesses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

STAMPS = ("writes", "reads", "reads2")
SLOTS = ("writes", "write_lines", "reads", "read_lines", "reads2", "read2_lines")


class Journal:
    """The undo record of the chunk of blocks ``first .. first + blocks - 1``."""

    def __init__(self, first: int, blocks: int) -> None:
        self.first, self.blocks = first, blocks
        self.entries: list[tuple[np.ndarray, Any, np.ndarray, np.ndarray, dict]] = []
        self._allocated: dict[int, tuple[Any, set[str]]] = {}  # slots before the chunk
        self.saved = 0  # elements saved (tests: proportional to what the chunk touches)

    def save(self, data: np.ndarray, shadow: Any, active: np.ndarray) -> None:
        """Keep ``data``'s and ``shadow``'s values at ``active`` (flat positions) that
        this chunk has not touched yet, before an access changes them."""
        if id(shadow) not in self._allocated:
            self._allocated[id(shadow)] = (shadow, {s for s in SLOTS if shadow.has(s)})
        slots = [getattr(shadow, s) for s in STAMPS if shadow.has(s)]
        if slots:
            touched = np.zeros(active.size, bool)
            for slot in slots:  # NOBODY's block is -1: never this chunk's
                block = (slot[active] >> 32) - self.first
                touched |= (block >= 0) & (block < self.blocks)
            if touched.any():
                active = active[~touched]
        if active.size == 0:
            return
        old = {s: getattr(shadow, s)[active] for s in SLOTS if shadow.has(s)}
        self.entries.append((data, shadow, active, data[active], old))
        self.saved += int(active.size)

    def undo(self) -> None:
        """Put every saved value back, latest first; drop slots the chunk allocated."""
        for data, shadow, active, values, old in reversed(self.entries):
            data[active] = values
            for name, slot in old.items():
                getattr(shadow, name)[active] = slot
        for shadow, before in self._allocated.values():
            for name in SLOTS:
                if shadow.has(name) and name not in before:
                    delattr(shadow, name)
        self.entries.clear()
