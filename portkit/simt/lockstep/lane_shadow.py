"""Who last wrote and read each element of one allocation, in the lockstep engine.

The six slots of ``memory.Shadow`` (write, read and second-read stamps, and the line of
each), as NumPy arrays, each allocated at its first use: an input nobody writes never
gets write stamps, an output nobody reads no read stamps, most arrays no second reader.

Two encodings keep a big launch's bookkeeping proportionate to its data:

- **stamps**: the full int64 stamp (``stamps.py``), or, for the global arrays of a
  kernel that never waits (no barrier, no warp operation: every stamp's epoch and
  generation stay 0), an int32 *code*, one more than the thread's linear index in the
  grid (``block * threads + thread + 1``), so that nobody is 0 and a slot is
  ``np.zeros``: pages the launch never touches are never backed by memory. 4 bytes an
  element instead of 8; ``nobody`` is the value that means "no access".
- **lines**: a uint8 index into the shadow's table of line keys (a kernel touches an
  array from a few lines), widened to the int32 keys themselves past 255 lines: 1 byte
  an element instead of 4; and no array at all while every access of a slot came from
  one line (an output written by one statement): its stamped elements have that line.

Everything outside this module that reads a slot whole (``portkit diff``'s writer
record, the per-thread engine's seeds) gets full stamps and line keys from
``record()`` and ``seed_value()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.simt.stamps import EPOCH_SHIFT, NOBODY, THREAD_BITS, THREAD_MASK

STAMP_SLOTS = ("writes", "reads", "reads2")
LINE_SLOTS = ("write_lines", "read_lines", "read2_lines")
SLOTS = ("writes", "write_lines", "reads", "read_lines", "reads2", "read2_lines")
_STAMPS_OF = dict(zip(LINE_SLOTS, STAMP_SLOTS))
_TABLE_SIZE = 256  # line codes a uint8 holds; code 0 is key 0, "no line"
_CODE_LIMIT = 1 << 31  # grid threads an int32 code holds


def ordered(other: np.ndarray, me: np.ndarray, cross_block: bool) -> np.ndarray:
    """``memory.ordered`` for arrays of stamps. Most pairs are told apart by the bits
    above the generation (another block, or a barrier between): the full rule runs only
    on pairs of one block and one barrier epoch."""
    result = (other >> EPOCH_SHIFT) != (me >> EPOCH_SHIFT)
    rest = np.flatnonzero(~result)
    if cross_block:  # another block: unordered in global memory
        result &= (other >> 32) == (me >> 32)
    if rest.size:
        o, m = other[rest], me[rest]
        ot, mt = o & THREAD_MASK, m & THREAD_MASK
        new_generation = (o >> THREAD_BITS) != (m >> THREAD_BITS)
        result[rest] = (ot == mt) | (new_generation & ((ot >> 5) == (mt >> 5)))
    return result


class LaneShadow:
    """The shadow of one allocation (a global array of a launch, or shared memory)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.threads = 0  # threads per block when stamps are int32 codes, else 0
        self.nobody = NOBODY  # what a stamp slot holds where nobody accessed
        self._lines: list[int] = [0]  # line keys by code
        self._codes: dict[int, int] = {0: 0}
        self.wide = False  # line slots hold the keys themselves (more than 255 lines)
        # A line slot not allocated yet whose every stamped element (its stamp slot not
        # nobody's) has one line: that line's code, no array (an output written from
        # one line needs no per-element lines). Kept after the slot is allocated, for a
        # failed chunk's undo that drops the slot again.
        self._constant: dict[str, int] = {}
        # (positions, stamps) of a read after which every stamp slot there held the
        # reading lane's own stamp: the write back to them (next, nothing between) needs
        # no gather and no check (``LaneArray._check_writes``)
        self.mine: tuple[np.ndarray, np.ndarray] | None = None

    def __getattr__(self, name: str) -> np.ndarray:  # only for a slot not yet allocated
        if name in STAMP_SLOTS:
            if self.threads:
                slot = np.zeros(self.size, np.int32)
            else:
                slot = np.full(self.size, NOBODY, np.int64)
        elif name in LINE_SLOTS:
            slot = np.zeros(self.size, np.int32 if self.wide else np.uint8)
            code = self._constant.get(name)
            stamps = _STAMPS_OF[name]
            if code and self.has(stamps):  # every stamped element has the one line
                np.copyto(slot, code, where=getattr(self, stamps) != self.nobody)
        else:
            raise AttributeError(name)
        setattr(self, name, slot)
        return slot

    def has(self, slot: str) -> bool:
        """Whether ``slot`` was allocated (an unallocated one holds NOBODY or 0 only)."""
        return slot in self.__dict__

    # -- stamps --------------------------------------------------------------------------
    def use_codes(self, threads: int, grid_threads: int) -> bool:
        """Hold stamps as int32 thread codes (a kernel that never waits, ``threads`` per
        block); only before any stamp slot exists and while every code fits."""
        if grid_threads >= _CODE_LIMIT - 1 or any(self.has(s) for s in STAMP_SLOTS):
            return False
        self.threads, self.nobody = threads, 0
        return True

    def me(self, chunk: Any) -> np.ndarray:
        """The active lanes' stamps in this shadow's encoding."""
        return chunk.active_codes() if self.threads else chunk.active_stamps()

    def full(self, values: np.ndarray) -> np.ndarray:
        """Full int64 stamps of ``values`` read from a stamp slot (NOBODY stays NOBODY)."""
        if not self.threads:
            return values
        wide = values.astype(np.int64) - 1
        block, thread = np.divmod(wide, self.threads)
        return np.where(wide < 0, np.int64(NOBODY), block << 32 | thread)

    def all_ordered(
        self, other: np.ndarray, me: np.ndarray, suspect: np.ndarray, cross: bool
    ) -> bool:
        """Whether every ``suspect`` lane's access ``other`` happens before its own ``me``
        (both in this encoding); the stamp rule runs on the suspects only (often none:
        an input nobody writes)."""
        lanes = np.flatnonzero(suspect)
        if lanes.size == 0:
            return True
        return bool(np.all(ordered(self.full(other[lanes]), self.full(me[lanes]), cross)))

    def block_range(self, first: int, blocks: int) -> tuple[int, int]:
        """The stamp values (this encoding) of blocks ``first .. first + blocks - 1``."""
        if self.threads:
            return first * self.threads + 1, (first + blocks) * self.threads + 1
        return first << 32, (first + blocks) << 32

    # -- lines ---------------------------------------------------------------------------
    def line_code(self, key: int) -> int:
        """What a line slot holds for line key ``key``."""
        if self.wide:
            return key
        code = self._codes.get(key)
        if code is None:
            if len(self._lines) == _TABLE_SIZE:
                self._widen_lines()
                return key
            code = self._codes[key] = len(self._lines)
            self._lines.append(key)
        return code

    def set_lines(self, name: str, positions: Any, code: int) -> None:
        """Line slot ``name`` at ``positions`` (just stamped) becomes ``code``."""
        if not self.has(name) and self._constant.get(name, code) == code:
            self._constant[name] = code
            return
        getattr(self, name)[positions] = code

    def _widen_lines(self) -> None:
        self._constant = {n: self._lines[c] for n, c in self._constant.items()}
        for name in LINE_SLOTS:
            if self.has(name):
                setattr(self, name, self.line_keys(getattr(self, name)))
        self.wide = True

    def line_keys(self, codes: np.ndarray) -> np.ndarray:
        """Line keys of ``codes`` read from a line slot (or saved from one before the
        slot widened: uint8 codes are always the table's)."""
        if codes.dtype != np.uint8:
            return codes
        return np.array(self._lines, np.int32)[codes]

    def put_lines(self, name: str, positions: np.ndarray, codes: np.ndarray) -> None:
        """Put back line values saved from slot ``name`` (the slot may have widened since)."""
        slot = getattr(self, name)
        slot[positions] = self.line_keys(codes) if slot.dtype != codes.dtype else codes

    # -- whole slots for the rest of the simulator -----------------------------------------
    def seeds(self, name: str) -> bool:
        """Whether slot ``name`` holds anything but NOBODY or 0 (allocated, or a line
        slot whose one line is held without an array)."""
        return self.has(name) or name in self._constant

    def seed_value(self, name: str, position: int) -> int:
        """Slot ``name`` at ``position`` as the per-thread engine holds it (a full stamp,
        a line key)."""
        if not self.has(name):
            if name in STAMP_SLOTS:
                return NOBODY
            code = self._constant.get(name, 0)
            stamps = _STAMPS_OF[name]
            if not code or not self.has(stamps) or getattr(self, stamps)[position] == self.nobody:
                return 0
            return code if self.wide else self._lines[code]
        value = getattr(self, name)[position]
        if name in STAMP_SLOTS:
            return int(self.full(np.asarray([value]))[0])
        return int(self.line_keys(np.asarray([value]))[0])

    def record(self) -> tuple[Any, Any]:
        """Write stamps and lines for the launch's record, decoded element by element as
        they are read (``portkit diff`` reads a few), never copied whole."""
        return _Decoded(self, "writes"), _Decoded(self, "write_lines")


class _Decoded:
    """One slot of a ``LaneShadow`` as full stamps or line keys: ``[position]`` and
    ``np.asarray`` (the whole slot decoded, for the small launches ``portkit diff`` runs)."""

    def __init__(self, shadow: LaneShadow, name: str) -> None:
        self.shadow, self.name = shadow, name

    def __len__(self) -> int:
        return self.shadow.size

    def __getitem__(self, position: int) -> int:
        return self.shadow.seed_value(self.name, int(position))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        shadow = self.shadow
        if not shadow.has(self.name) and self.name in STAMP_SLOTS:
            values = np.full(shadow.size, NOBODY, np.int64)
        elif self.name in STAMP_SLOTS:
            values = shadow.full(getattr(shadow, self.name))
        else:
            values = shadow.line_keys(getattr(shadow, self.name))
        return values if dtype is None else values.astype(dtype, copy=False)
