"""Arrays as lanes see them: checked gathers and scatters.

A ``LaneArray`` is a flat NumPy buffer with a shape and strides and an offset that may
differ per lane (a shared array's block, a local array's thread, a view ``x[row]``).
Every access checks the active lanes at once, with the per-thread engine's rules and
its stamps (``memory.py``: block, barrier epoch, warp generation, thread), kept in the
same ``Shadow`` arrays, so the writer record ``portkit diff`` reads is the same:

- bounds of every index of every active lane, negative ones included;
- an uninitialised shared or local read: an element nobody has written;
- a race: a write meeting another thread's unordered write or read, several lanes
  writing one element in one statement, a read meeting another thread's unordered
  write. Reads are recorded conservatively (an element read by two threads keeps two
  distinct readers), so a later writer conflicts with at least one of them.

A failed check raises ``Unsupported`` with what failed; the machine re-runs the launch
in the per-thread engine, which reports it with the exact thread and line.
"""

from __future__ import annotations

import operator
from typing import Any, Protocol

import numpy as np

from portkit.simt.lockstep.integer_sums import integer_sums
from portkit.simt.lockstep.lanes import is_lanes
from portkit.simt.lockstep.vectorize import Unsupported
from portkit.simt.memory import CONST, GLOBAL, _line_key
from portkit.simt.stamps import EPOCH_SHIFT, NOBODY, THREAD_BITS, THREAD_MASK
from portkit.simt.tally import AtomicTally


class Lanes(Protocol):
    """What a lane array asks of the chunk of threads running it (``chunk.Chunk``): which
    lanes are active, their stamps, the source files of line keys, and atomics' order."""

    mask: np.ndarray
    active_count: int
    n: int
    files: Any
    reversed: bool  # atomics run their lanes last to first (the reversed schedule)

    @property
    def full_lanes(self) -> bool: ...

    def active_stamps(self) -> np.ndarray: ...

    def count_atomic(self, array: LaneArray) -> None: ...


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


def _all_ordered(other: np.ndarray, me: np.ndarray, suspect: np.ndarray, cross: bool) -> bool:
    """Whether every ``suspect`` lane's access ``other`` happens before its own ``me``;
    the stamp rule runs on the suspects only (often none: an input nobody writes)."""
    lanes = np.flatnonzero(suspect)
    return lanes.size == 0 or bool(np.all(ordered(other[lanes], me[lanes], cross)))


def _integer(value: Any) -> bool:
    """An atomic operand that casts to an integer array's type as the lane loop does."""
    if is_lanes(value):
        return value.dtype.kind in "iu"
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _strictly_increasing(flat: np.ndarray) -> bool:
    return flat.size < 2 or bool(np.all(flat[1:] > flat[:-1]))


_STAMP_SLOTS = ("writes", "reads", "reads2")
_LINE_SLOTS = ("write_lines", "read_lines", "read2_lines")


class LaneShadow:
    """Who last wrote and read each element of one allocation (``memory.Shadow``'s six
    slots and stamps, as NumPy arrays): global arrays of a launch and shared memory.
    A slot is allocated at its first use: an input nobody writes never gets write
    stamps, an output nobody reads no read stamps, most arrays no second reader (a
    2^24-element launch would otherwise fault in 36 bytes a element, 9x its data)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __getattr__(self, name: str) -> np.ndarray:  # only for a slot not yet allocated
        if name in _STAMP_SLOTS:
            slot = np.full(self.size, NOBODY, np.int64)
        elif name in _LINE_SLOTS:
            slot = np.zeros(self.size, np.int32)
        else:
            raise AttributeError(name)
        setattr(self, name, slot)
        return slot

    def has(self, slot: str) -> bool:
        """Whether ``slot`` was allocated (an unallocated one holds NOBODY or 0 only)."""
        return slot in self.__dict__

    def record(self) -> tuple[np.ndarray, np.ndarray]:
        """Write stamps and lines for the launch's record, without allocating them for an
        array nobody wrote."""
        if self.has("writes"):
            return self.writes, self.write_lines
        nobody = np.broadcast_to(np.int64(NOBODY), (self.size,))
        return nobody, np.broadcast_to(np.int32(0), (self.size,))


class LaneArray:
    """An array of global, shared, local or constant memory, seen by every lane."""

    tally: AtomicTally | None = None  # global arrays: where float atomic sums are counted
    journal: Any = None  # global arrays: the chunk's undo record (journal.py)

    def __init__(
        self,
        data: np.ndarray,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: Any,
        space: str,
        chunk: Lanes,
        shadow: LaneShadow | None = None,
        written: np.ndarray | None = None,
    ) -> None:
        self.data, self._shape, self._strides, self.offset = data, shape, strides, offset
        self.space, self.chunk, self.shadow, self.written = space, chunk, shadow, written
        self._poisoned = space != GLOBAL and space != CONST
        self._cross_block = space == GLOBAL
        kind = data.dtype
        self._widen = kind.kind in "iu" and kind.itemsize < 8

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        raise Unsupported(f"np.{ufunc.__name__} over whole arrays (each thread runs it)")

    @property
    def shape(self) -> tuple[np.int64, ...]:
        return tuple(np.int64(n) for n in self._shape)

    @property
    def size(self) -> np.int64:
        return np.int64(int(np.prod(self._shape)))

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def itemsize(self) -> np.int64:
        return np.int64(self.data.dtype.itemsize)

    def __len__(self) -> int:
        return self._shape[0] if self._shape else 0

    # -- indexing ------------------------------------------------------------------------
    def _items(self, index: Any) -> tuple:
        return index if type(index) is tuple else (index,)

    def flat(self, index: Any) -> Any:
        """Flat positions of one element per lane, or None for a view."""
        items = self._items(index)
        if len(items) > len(self._shape):
            raise Unsupported("too many indices")
        if len(items) < len(self._shape) or any(type(i) is slice for i in items):
            return None
        mask = self.chunk.mask
        flat = self.offset
        for axis, item in enumerate(items):
            if is_lanes(item):
                if item.dtype.kind not in "iu":
                    raise Unsupported(f"an index of type {item.dtype}")
                lo, hi = item < 0, item >= self._shape[axis]
                if np.any((lo | hi) & mask):
                    raise Unsupported(f"out-of-bounds access of {self.space} memory")
            else:
                try:
                    item = operator.index(item)
                except TypeError:
                    raise Unsupported("a non-integer index") from None
                if not 0 <= item < self._shape[axis] and self.chunk.active_count:
                    raise Unsupported(f"out-of-bounds access of {self.space} memory")
            flat = flat + item * self._strides[axis]
        return flat

    def view(self, index: Any) -> LaneArray:
        items = self._items(index)
        shape, strides, offset = [], [], self.offset
        for axis, n in enumerate(self._shape):
            item = items[axis] if axis < len(items) else slice(None)
            if type(item) is slice:
                if any(is_lanes(v) for v in (item.start, item.stop, item.step)):
                    raise Unsupported("a slice whose bounds differ between threads")
                start, stop, step = item.indices(n)
                shape.append(len(range(start, stop, step)))
                strides.append(self._strides[axis] * step)
                offset = offset + start * self._strides[axis]
            else:
                one = self.flat_axis(item, axis)
                offset = offset + one * self._strides[axis]
        return LaneArray(
            self.data,
            tuple(shape),
            tuple(strides),
            offset,
            self.space,
            self.chunk,
            self.shadow,
            self.written,
        )

    def flat_axis(self, item: Any, axis: int) -> Any:
        n = self._shape[axis]
        bad = (item < 0) | (item >= n)
        if np.any(bad & self.chunk.mask) if is_lanes(item) else (bad and self.chunk.active_count):
            raise Unsupported(f"out-of-bounds view of {self.space} memory")
        return item

    # -- loads and stores ------------------------------------------------------------------
    def load(self, index: Any, frame: Any) -> Any:
        flat = self.flat(index)
        if flat is None:
            return self.view(index)
        chunk = self.chunk
        if not is_lanes(flat):
            if chunk.active_count:
                self._check_reads(np.full(chunk.active_count, flat, np.int64), frame, True)
                value = self.data[flat]
            else:
                value = self.data.dtype.type(0)
            if self._widen:
                return np.int64(value)
            return value
        if chunk.full_lanes:
            active = flat
            values = self.data[flat] if self.data.size else np.zeros(flat.size, self.data.dtype)
        else:
            active = flat[chunk.mask]
            values = np.zeros(flat.size, self.data.dtype)
            values[chunk.mask] = self.data[active]
        self._check_reads(active, frame, False)
        if self._widen:
            values = values.astype(np.int64)
        return values

    def store(self, index: Any, value: Any, frame: Any) -> None:
        flat = self.flat(index)
        if flat is None:
            raise Unsupported("assigning to a slice")
        if self.space == CONST:
            raise Unsupported("a write to constant memory")
        chunk = self.chunk
        if not chunk.active_count:
            return
        if not is_lanes(flat):
            if chunk.active_count > 1:
                raise Unsupported("several threads write one element (a race)")
            flat = np.full(chunk.n, flat, np.int64)
        if chunk.full_lanes:
            active = flat
            values = value
        else:
            active = flat[chunk.mask]
            values = value[chunk.mask] if is_lanes(value) else value
        self._check_writes(active, frame)
        if not _strictly_increasing(active) and self._repeats(active):
            raise Unsupported("several threads write one element in one statement (a race)")
        self.data[active] = values

    def _repeats(self, active: np.ndarray) -> bool:
        """Whether two lanes wrote one element: the stamps just written are then not all
        the lanes' own (a gather, where np.unique hashed every index)."""
        if self.written is not None or self.shadow is None:
            return np.unique(active).size != active.size
        return bool(np.any(self.shadow.writes[active] != self.chunk.active_stamps()))

    # -- checks ----------------------------------------------------------------------------
    def _check_reads(self, active: np.ndarray, frame: Any, same: bool) -> None:
        if self.written is not None:  # local memory: this lane's own writes
            if not np.all(self.written[active]):
                raise Unsupported("a read of uninitialised local memory")
            return
        shadow = self.shadow
        if shadow is None:
            return
        if self.journal is not None:
            self.journal.save(self.data, shadow, active)
        me = self.chunk.active_stamps()
        cross = self._cross_block
        if not shadow.has("writes"):  # nobody wrote any element: an input, say
            if self._poisoned and active.size:
                raise Unsupported("a read of uninitialised shared memory")
        else:
            written = shadow.writes[active]
            other = written != me
            if other.any():
                nobody = written == NOBODY
                if self._poisoned and np.any(other & nobody):
                    raise Unsupported("a read of uninitialised shared memory")
                if not _all_ordered(written, me, other & ~nobody, cross):
                    raise Unsupported("a read racing with another thread's write")
        line = _line_key(frame, self.chunk.files)
        read = shadow.reads[active]
        first = (read == me) | (read == NOBODY)
        later = np.flatnonzero(~first)
        if later.size:  # the stamp rule only where the cheap tests did not decide
            first[later] = ordered(read[later], me[later], cross)
        if later.size == 0 or first.all():
            shadow.reads[active] = me
            shadow.read_lines[active] = line
        else:
            shadow.reads[active[first]] = me[first]
            shadow.read_lines[active[first]] = line
            second = ~first
            shadow.reads2[active[second]] = me[second]
            shadow.read2_lines[active[second]] = line
        if same or not _strictly_increasing(active):
            # Several lanes read one element: keep a second, distinct reader of each.
            order = np.argsort(active, kind="stable")
            sorted_flat = active[order]
            repeat = np.flatnonzero(sorted_flat[1:] == sorted_flat[:-1]) + 1
            if repeat.size:
                shadow.reads2[sorted_flat[repeat]] = me[order[repeat - 1]]
                shadow.read2_lines[sorted_flat[repeat]] = line

    def _check_writes(self, active: np.ndarray, frame: Any) -> None:
        if self.written is not None:
            self.written[active] = True
            return
        shadow = self.shadow
        if shadow is None:
            return
        if self.journal is not None:
            self.journal.save(self.data, shadow, active)
        me = self.chunk.active_stamps()
        cross = self._cross_block
        for slot in _STAMP_SLOTS:
            if not shadow.has(slot):
                continue
            other = getattr(shadow, slot)[active]
            if not _all_ordered(other, me, (other != me) & (other != NOBODY), cross):
                raise Unsupported("a write racing with another thread's access")
        shadow.writes[active] = me
        shadow.write_lines[active] = _line_key(frame, self.chunk.files)

    def atomic(
        self, index: Any, update: Any, operands: tuple, frame: Any, add_sign: int = 0
    ) -> Any:
        """Read-modify-write per active lane, in thread order; returns the old values.
        ``update(old, *operands of the lane)`` is the per-thread engine's own update.
        ``add_sign`` (1: atomic.add, -1: atomic.sub) sums integers over all lanes at once."""
        flat = self.flat(index)
        if flat is None:
            raise Unsupported("an atomic on a view")
        if self.space == CONST:
            raise Unsupported("an atomic on constant memory")
        chunk = self.chunk
        chunk.count_atomic(self)
        lanes = np.flatnonzero(chunk.mask)[:: -1 if chunk.reversed else 1]  # schedule.py
        flats = np.broadcast_to(flat, (chunk.n,))[lanes]
        shadow = self.shadow
        if shadow is not None and self._poisoned and np.any(shadow.writes[flats] == NOBODY):
            raise Unsupported("an atomic on uninitialised shared memory")
        data = self.data
        if self.journal is not None:
            self.journal.save(data, shadow, flats)
        operand = operands[0] if add_sign else None
        if add_sign and data.dtype.kind in "iu" and _integer(operand) and lanes.size:
            olds = integer_sums(data, flats, lanes, operand, add_sign, chunk.n)
        else:
            columns = [
                np.broadcast_to(v, (chunk.n,))[lanes] if is_lanes(v) else None for v in operands
            ]
            olds = np.zeros(lanes.size, data.dtype)
            # Float sums depend on the order: counted per element (simt/tally.py).
            tally = self.tally if add_sign and data.dtype.kind == "f" else None
            for k, position in enumerate(flats.tolist()):
                args = [v if c is None else c[k] for v, c in zip(operands, columns)]
                old = data[position]
                data[position] = update(old, *args)
                olds[k] = old
                if tally is not None:
                    tally.add(data, position, old, data.dtype.type(args[0]))
        if shadow is not None:
            stamps = chunk.active_stamps()[:: -1 if chunk.reversed else 1]
            shadow.writes[flats] = stamps  # in run order: the last lane wins, as per thread
            shadow.write_lines[flats] = _line_key(frame, chunk.files)
        result = np.zeros(chunk.n, data.dtype)
        result[lanes] = olds
        if self._widen:
            result = result.astype(np.int64)
        return result
