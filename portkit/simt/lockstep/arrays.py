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

from portkit.simt.lockstep.bfloat16 import BF16Lanes, lanes_of, round_to_bits
from portkit.simt.lockstep.lane_atomics import lane_atomic
from portkit.simt.lockstep.lane_shadow import STAMP_SLOTS, LaneShadow, ordered
from portkit.simt.lockstep.lanes import is_lanes
from portkit.simt.lockstep.vectorize import Unsupported
from portkit.simt.memory import CONST, GLOBAL, _line_key
from portkit.simt.scalars import BFloat16, BFloat16Bits
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

    def count_atomic(self, array: LaneArray, unordered: str | None = None) -> bool: ...


_UNSIGNED = {np.dtype(f"i{size}"): np.dtype(f"u{size}") for size in (1, 2, 4, 8)}


def _past(item: np.ndarray, n: int) -> bool:
    """Whether any index is negative or ``>= n``: one pass, a negative index read as
    unsigned is past every bound."""
    unsigned = _UNSIGNED.get(item.dtype)
    if unsigned is not None:
        item = item.view(unsigned)
    return bool(item.max() >= n)


def _bits_of(value: Any) -> Any:
    """The bfloat16 bits a store of ``value`` writes (one value, or one per lane)."""
    if isinstance(value, BFloat16):
        return value.bits
    bits = round_to_bits(value)
    return bits if is_lanes(value) else bits[0]


def _strictly_increasing(flat: np.ndarray) -> bool:
    return flat.size < 2 or bool(np.all(flat[1:] > flat[:-1]))


class LaneArray:
    """An array of global, shared, local or constant memory, seen by every lane."""

    tally: AtomicTally | None = None  # global arrays: where float atomic sums are counted
    _positions: tuple | None = None  # (index items, mask, positions) of the last access
    journal: Any = None  # global arrays: the chunk's undo record (journal.py)
    unwritten = False  # a parameter no thread writes: reads unrecorded (unwritten.py)

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
        # bfloat16 (its bits, as the per-thread engine holds it) loads as BF16Lanes
        self._bfloat16 = isinstance(data, BFloat16Bits)
        self._widen = kind.kind in "iu" and kind.itemsize < 8 and not self._bfloat16

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
    def dtype(self) -> Any:
        """The element type a kernel sees (``"bfloat16"`` for bfloat16, as per thread)."""
        return "bfloat16" if self._bfloat16 else self.data.dtype

    @property
    def itemsize(self) -> np.int64:
        return np.int64(self.data.dtype.itemsize)

    def __len__(self) -> int:
        return self._shape[0] if self._shape else 0

    # -- indexing ------------------------------------------------------------------------
    def _items(self, index: Any) -> tuple:
        return index if type(index) is tuple else (index,)

    def positions(self, index: Any) -> Any:
        """Flat positions of the active lanes' elements (one per active lane, in lane
        order, or one integer for all), or None for a view. Every index of every active
        lane is bounds-checked, negative ones included. The last answer is kept for the
        same index objects under the same mask (a draw loads and stores one state):
        lane values are never changed in place."""
        items = self._items(index)
        chunk = self.chunk
        cached = self._positions
        if (
            cached is not None
            and cached[1] is chunk.mask
            and len(cached[0]) == len(items)
            and all(a is b for a, b in zip(cached[0], items))
        ):
            return cached[2]
        if len(items) > len(self._shape):
            raise Unsupported("too many indices")
        if len(items) < len(self._shape) or any(type(i) is slice for i in items):
            return None
        full, mask = chunk.full_lanes, chunk.mask
        flat = self.offset
        if is_lanes(flat) and not full:
            flat = flat[mask]
        for axis, item in enumerate(items):
            if is_lanes(item):
                if item.dtype.kind not in "iu":
                    raise Unsupported(f"an index of type {item.dtype}")
                if not full:
                    item = item[mask]
                if item.size and _past(item, self._shape[axis]):
                    raise Unsupported(f"out-of-bounds access of {self.space} memory")
            else:
                try:
                    item = operator.index(item)
                except TypeError:
                    raise Unsupported("a non-integer index") from None
                if not 0 <= item < self._shape[axis] and chunk.active_count:
                    raise Unsupported(f"out-of-bounds access of {self.space} memory")
            stride = self._strides[axis]
            step = item if stride == 1 else item * stride
            # No copy for offset 0: positions, like lane values, are never changed in place.
            flat = step if type(flat) is int and flat == 0 else flat + step
        self._positions = (items, mask, flat)
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
        flat = self.positions(index)
        if flat is None:
            return self.view(index)
        chunk = self.chunk
        if not is_lanes(flat):
            if chunk.active_count:
                if not self.unwritten:
                    self._check_reads(np.full(chunk.active_count, flat, np.int64), frame, True)
                value = self.data[flat]
            else:
                value = self.data.dtype.type(0)
            if self._widen:
                return np.int64(value)
            if self._bfloat16:  # per lane: bfloat16 values are never uniform here
                return lanes_of(BFloat16.from_bits(value), chunk.n)
            return value
        if chunk.full_lanes:
            values = self.data[flat] if self.data.size else np.zeros(flat.size, self.data.dtype)
            if self._widen:
                values = values.astype(np.int64)
        else:  # narrow integers widen as they land (the same values)
            values = np.zeros(chunk.n, np.int64 if self._widen else self.data.dtype)
            values[chunk.mask] = self.data[flat]
        if not self.unwritten:
            self._check_reads(flat, frame, False)
        return BF16Lanes.of_bits(values) if self._bfloat16 else values

    def store(self, index: Any, value: Any, frame: Any) -> None:
        flat = self.positions(index)
        if flat is None:
            raise Unsupported("assigning to a slice")
        if self.space == CONST:
            raise Unsupported("a write to constant memory")
        if self.unwritten:  # unwritten.py missed a way to write it: per thread, to be sure
            raise Unsupported("a write to an array the kernel only reads")
        chunk = self.chunk
        if not chunk.active_count:
            return
        if not is_lanes(flat):
            if chunk.active_count > 1:
                raise Unsupported("several threads write one element (a race)")
            flat = np.full(1, flat, np.int64)
        values = value[chunk.mask] if is_lanes(value) and not chunk.full_lanes else value
        if self._bfloat16:  # rounded as the per-thread engine's bfloat16_store
            values = values.bits() if isinstance(values, BF16Lanes) else _bits_of(values)
        if self._check_writes(flat, frame) and self._repeats(flat):
            raise Unsupported("several threads write one element in one statement (a race)")
        self.data[flat] = values

    def _repeats(self, active: np.ndarray) -> bool:
        """Whether two lanes wrote one element: the stamps just written are then not all
        the lanes' own (a gather, where np.unique hashed every index)."""
        if _strictly_increasing(active):
            return False
        if self.written is not None or self.shadow is None:
            return np.unique(active).size != active.size
        return bool(np.any(self.shadow.writes[active] != self.shadow.me(self.chunk)))

    # -- checks ----------------------------------------------------------------------------
    def _stamps(self, active: np.ndarray) -> dict[str, np.ndarray]:
        """The allocated stamp slots at ``active``, after the journal kept what it needs
        (read once, for the journal and the checks both)."""
        shadow = self.shadow
        assert shadow is not None  # checks run only on shadowed arrays
        shadow.mine = None  # any access ends what a read left for the write after it
        found = {s: getattr(shadow, s)[active] for s in STAMP_SLOTS if shadow.has(s)}
        if self.journal is not None:
            self.journal.save(self.data, shadow, active, found)
        return found

    def _check_reads(self, active: np.ndarray, frame: Any, same: bool) -> None:
        if self.written is not None:  # local memory: this lane's own writes
            if not np.all(self.written[active]):
                raise Unsupported("a read of uninitialised local memory")
            return
        shadow = self.shadow
        if shadow is None:
            return
        found = self._stamps(active)
        me = shadow.me(self.chunk)
        cross = self._cross_block
        written = found.get("writes")
        if written is None:  # nobody wrote any element: an input, say
            if self._poisoned and active.size:
                raise Unsupported("a read of uninitialised shared memory")
        else:
            other = written != me
            if other.any():
                nobody = written == shadow.nobody
                if self._poisoned and np.any(other & nobody):
                    raise Unsupported("a read of uninitialised shared memory")
                if not shadow.all_ordered(written, me, other & ~nobody, cross):
                    raise Unsupported("a read racing with another thread's write")
        line = shadow.line_code(_line_key(frame, self.chunk.files))
        read = found.get("reads")
        first: Any = True  # every lane is its element's first reader (or ordered after it)
        if read is not None:
            again = read == me
            if again.all():  # each lane read its element last (distinct lanes, elements)
                shadow.set_lines("read_lines", active, line)
                if written is not None and not other.any() and not shadow.has("reads2"):
                    shadow.mine = (active, me)  # every stamp here is the lane's own
                return
            first = again | (read == shadow.nobody)
            later = np.flatnonzero(~first)
            if later.size:  # the stamp rule only where the cheap tests did not decide
                first[later] = ordered(shadow.full(read[later]), shadow.full(me[later]), cross)
            if later.size == 0 or first.all():
                first = True
        reads = shadow.reads
        if first is True:
            reads[active] = me
            shadow.set_lines("read_lines", active, line)
        else:
            reads[active[first]] = me[first]
            shadow.set_lines("read_lines", active[first], line)
            second = ~first
            shadow.reads2[active[second]] = me[second]
            shadow.set_lines("read2_lines", active[second], line)
        if (same or not _strictly_increasing(active)) and np.any(reads[active] != me):
            # Several lanes read one element (one of them then lost the read slot, or a
            # second reader came): keep a second, distinct reader of each.
            order = np.argsort(active, kind="stable")
            sorted_flat = active[order]
            repeat = np.flatnonzero(sorted_flat[1:] == sorted_flat[:-1]) + 1
            if repeat.size:
                shadow.reads2[sorted_flat[repeat]] = me[order[repeat - 1]]
                shadow.set_lines("read2_lines", sorted_flat[repeat], line)

    def _check_writes(self, active: np.ndarray, frame: Any) -> bool:
        """Check and record the active lanes' writes at ``active``; whether two of them
        may have written one element (False where each lane wrote its element last:
        distinct lanes have distinct stamps, so their elements are distinct)."""
        if self.written is not None:
            self.written[active] = True
            return True
        shadow = self.shadow
        if shadow is None:
            return True
        me = shadow.me(self.chunk)
        mine = shadow.mine
        if mine is not None and mine[0] is active and mine[1] is me:
            # Written back where the lanes just read their own elements (a state drawn
            # from): every stamp is the lane's own, the journal has the old values.
            shadow.mine = None
            shadow.set_lines(
                "write_lines", active, shadow.line_code(_line_key(frame, self.chunk.files))
            )
            return False
        found = self._stamps(active)
        again = False
        for name, other in found.items():
            suspect = other != me
            if not suspect.any():  # this thread's own accesses (a state it draws from)
                again = again or name == "writes"
                continue
            suspect &= other != shadow.nobody
            if not shadow.all_ordered(other, me, suspect, self._cross_block):
                raise Unsupported("a write racing with another thread's access")
        if not again:
            shadow.writes[active] = me
        shadow.set_lines(
            "write_lines", active, shadow.line_code(_line_key(frame, self.chunk.files))
        )
        return not again

    def atomic(
        self,
        index: Any,
        update: Any,
        operands: tuple,
        frame: Any,
        add_sign: int = 0,
        unused: str | None = None,
    ) -> Any:
        """Read-modify-write per active lane, in thread order (``lane_atomics.py``)."""
        if self._bfloat16:
            raise Unsupported("an atomic on a bfloat16 array")  # per thread: its fault
        return lane_atomic(self, index, update, operands, frame, add_sign, unused)
