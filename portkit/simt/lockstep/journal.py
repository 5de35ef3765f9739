"""What one chunk changed in a launch's global arrays, so a failed chunk can be undone.

The lockstep engine used to copy every input before a launch, to restore it for the
re-run that names a fault (as large as the arrays, however little the fault's re-run
needs). A chunk's journal instead keeps the old values, and the old shadow stamps and
lines, of each element the chunk touches, the first time it touches it: undoing it
leaves the arrays and shadows as the chunks before it left them, and the per-thread
engine goes on from there. An element already touched in this chunk carries a stamp
of one of its blocks (every checked access leaves one), so it is not saved twice: the
journal grows with the elements a chunk touches, not with its accesses.

An element no earlier access of the launch touched (every stamp nobody's, so every
line 0) keeps only its value: its position (int32 where the array allows) and the bytes of
its data, 8 bytes for a float32 output, not the 24 of value, stamps and lines. Those go
on a ``Tape`` the launch's chunks share, so each chunk writes over the memory the one
before it used instead of faulting fresh pages in (a chunk of a big output saves
hundreds of MB).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.simt.lockstep.lane_shadow import LINE_SLOTS, SLOTS, STAMP_SLOTS

_INT32_POSITIONS = 1 << 31


class Tape:
    """Bytes that grow as a chunk saves and are reused by the next chunk (``rewind``)."""

    def __init__(self) -> None:
        self.bytes = np.empty(0, np.uint8)
        self.used = 0

    def rewind(self) -> None:
        self.used = 0

    def reserve(self, count: int, dtype: np.dtype) -> tuple[int, int]:
        """Room for ``count`` items of ``dtype``, aligned: (start, end) in bytes."""
        start = -(-self.used // 16) * 16
        end = start + count * dtype.itemsize
        if end > self.bytes.size:
            grown = np.empty(max(end, 2 * self.bytes.size), np.uint8)
            grown[: self.used] = self.bytes[: self.used]
            self.bytes = grown
        self.used = end
        return start, end

    def view(self, span: tuple[int, int], dtype: np.dtype) -> np.ndarray:
        return self.bytes[span[0] : span[1]].view(dtype)


class Journal:
    """The undo record of the chunk of blocks ``first .. first + blocks - 1``."""

    def __init__(self, first: int, blocks: int, tape: Tape | None = None) -> None:
        self.first, self.blocks = first, blocks
        self.tape = Tape() if tape is None else tape
        self.tape.rewind()  # the chunk before ran to the end: its record is not needed
        self.fresh: list[tuple[np.ndarray, Any, tuple, tuple, np.dtype]] = []
        # (data, shadow, positions, old values, old slots) of elements touched before
        self.entries: list[tuple[np.ndarray, Any, np.ndarray, np.ndarray, dict]] = []
        self._allocated: dict[int, tuple[Any, set[str]]] = {}  # slots before the chunk
        self.saved = 0  # elements saved (tests: proportional to what the chunk touches)

    def save(
        self, data: np.ndarray, shadow: Any, active: np.ndarray, stamps: dict | None = None
    ) -> None:
        """Keep ``data``'s and ``shadow``'s values at ``active`` (flat positions) that
        this chunk has not touched yet, before an access changes them. ``stamps``: the
        stamp slots' values at ``active`` the caller has already read."""
        if id(shadow) not in self._allocated:
            self._allocated[id(shadow)] = (shadow, {s for s in SLOTS if shadow.has(s)})
        found = dict(stamps or {})
        for name in STAMP_SLOTS:
            if name not in found and shadow.has(name):
                found[name] = getattr(shadow, name)[active]
        lo, hi = shadow.block_range(self.first, self.blocks)
        touched: Any = None
        for values in found.values():
            # lo <= v < hi in one compare: v - lo read as unsigned (nobody's is below lo)
            offset = np.subtract(values, values.dtype.type(lo))
            mine = offset.view(offset.dtype.str.replace("i", "u")) < hi - lo
            if touched is None and mine.all():
                return  # the chunk touched every element already (a state drawn again)
            touched = mine if touched is None else touched | mine
        if touched is not None and touched.any():
            keep = ~touched
            active = active[keep]
            found = {s: v[keep] for s, v in found.items()}
        if active.size == 0:
            return
        self.saved += int(active.size)
        fresh: Any = True
        for values in found.values():
            fresh = fresh & (values == shadow.nobody)
        if fresh is True or fresh.all():
            self._save_fresh(data, shadow, active)
        else:
            if fresh.any():
                self._save_fresh(data, shadow, active[fresh])
                older = ~fresh
                active, found = active[older], {s: v[older] for s, v in found.items()}
            old = {s: getattr(shadow, s)[active] for s in LINE_SLOTS if shadow.has(s)}
            self.entries.append((data, shadow, active, data[active], {**found, **old}))

    def _save_fresh(self, data: np.ndarray, shadow: Any, active: np.ndarray) -> None:
        """Positions and values of elements untouched before this chunk, on the tape."""
        kind = np.dtype(np.int32 if shadow.size < _INT32_POSITIONS else np.int64)
        where = self.tape.reserve(active.size, kind)
        self.tape.view(where, kind)[:] = active
        values = self.tape.reserve(active.size, data.dtype)
        np.take(data, active, out=self.tape.view(values, data.dtype))
        self.fresh.append((data, shadow, where, values, kind))

    def undo(self) -> None:
        """Put every saved value back, latest first; drop slots the chunk allocated."""
        for data, shadow, where, span, kind in reversed(self.fresh):
            active = self.tape.view(where, kind)
            data[active] = self.tape.view(span, data.dtype)
            for name in SLOTS:  # untouched before this chunk: no stamps, no lines
                if shadow.has(name):
                    getattr(shadow, name)[active] = shadow.nobody if name in STAMP_SLOTS else 0
        for data, shadow, active, values, old in reversed(self.entries):
            data[active] = values
            for name, slot in old.items():
                if name in LINE_SLOTS:
                    shadow.put_lines(name, active, slot)
                else:
                    getattr(shadow, name)[active] = slot
        for shadow, before in self._allocated.values():
            for name in SLOTS:
                if shadow.has(name) and name not in before:
                    delattr(shadow, name)
        self.entries.clear()
        self.fresh.clear()
