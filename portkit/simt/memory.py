"""Simulated memory: arrays that check every access a kernel makes.

A ``SimArray`` wraps a flat NumPy buffer (a tensor's storage for global memory, a fresh
buffer for shared and local memory) with a shape, strides and an offset, so views and
multi-dimensional indexing work as in numba. Each access is checked:

- bounds, per dimension, negative indices included (a GPU does not wrap them);
- shared and local memory start poisoned: reading an element no thread of the block
  (or, for local memory, this thread) has written gives a ``Poison`` (poison.py), an
  error where it is used, a warning where it is dropped;
- races: every element remembers the last writer and reader as a *stamp* (block,
  barrier epoch, thread): two threads of a block touching one element between two
  barriers, one writing, or two blocks touching one global element with a write among
  them, are reported with both threads and lines (a write of the bits the element held
  and a read racing with atomics are judged further: same_value.py, second_schedule.py).

The write stamps of global memory outlive the launch: the writer map ``portkit diff``
reads (which block and thread last wrote each element).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from portkit.simt.layout import Layout
from portkit.simt.memory_fault import MemoryFault, as_integer, out_of_bounds, show_index
from portkit.simt.poison import Poison, PoisonUsed
from portkit.simt.same_value import judge_write, read_after_same_write
from portkit.simt.scalars import INT64, BFloat16, BFloat16Bits, bfloat16_store, widen
from portkit.simt.shadow import Shadow
from portkit.simt.stamps import LINE_BITS, NOBODY, ordered
from portkit.simt.tally import AtomicTally
from portkit.simt.ufuncs import whole_array_ufunc


class StampSource(Protocol):
    """What an array asks of the machine running it (``machine.Machine``): who is
    touching memory now, and the source files its line keys index."""

    stamp: int
    files: dict[str, int]  # source file -> its index in line keys
    tally: AtomicTally
    strict: bool  # warnings are errors (simt/warning_log.py)

    def memory_warning(
        self, kind: str, detail: str, frame: Any, other: tuple[int, int] | None = None
    ) -> None: ...

    def defer_poison_store(self, fault: MemoryFault, frame: Any) -> None: ...

    def suspect_race(self, fault: MemoryFault, frame: Any) -> None: ...


GLOBAL, SHARED, LOCAL, CONST = "global", "shared", "local", "constant"


class SimArray:
    """An array as a simulated kernel sees it."""

    def __init__(
        self,
        data: np.ndarray,
        layout: Layout,
        name: str,
        space: str,
        machine: StampSource,
        shadow: Shadow | None = None,
        written: bytearray | None = None,
        poison: dict[int, Poison] | None = None,
    ) -> None:
        if data.dtype.fields is not None:  # records: numba reads fields as r[i].x too
            data = data.view(np.dtype((np.record, data.dtype)))
        self._data = data  # flat, owns or views the memory
        self._layout = layout
        self._shape = layout.shape
        self._strides = layout.strides
        self._offset = layout.offset
        self._ndim = len(layout.shape)
        self._n0 = layout.shape[0] if layout.shape else 0
        self._s0 = layout.strides[0] if layout.shape else 0
        self.name = name
        self.space = space
        self._machine = machine
        self._shadow = shadow
        self._written = written  # local memory: which elements this thread wrote
        self._cross_block = space == GLOBAL
        self._poisoned = space in (SHARED, LOCAL)
        # Elements holding an uninitialised value a thread stored (poison.py): flat -> it.
        self._poison = poison if poison is not None or not self._poisoned else {}
        # How an element read is represented (numba's types) and how a store converts.
        self._bfloat16 = isinstance(data, BFloat16Bits)
        self._read_as = (
            BFloat16.from_bits
            if self._bfloat16
            else widen
            if data.dtype.kind in "iub" and data.dtype.itemsize < 8
            else None
        )

    # -- the array interface numba kernels use -------------------------------------------
    @property
    def shape(self) -> tuple[np.int64, ...]:
        return tuple(INT64(n) for n in self._shape)

    @property
    def size(self) -> np.int64:
        return INT64(int(np.prod(self._shape)))

    @property
    def ndim(self) -> int:
        return self._ndim

    @property
    def dtype(self) -> Any:
        return "bfloat16" if self._bfloat16 else self._data.dtype

    @property
    def itemsize(self) -> np.int64:
        return INT64(self._data.dtype.itemsize)

    def __len__(self) -> int:
        return self._n0

    def __iter__(self) -> Iterator[Any]:
        """``for v in arr`` (and ``enumerate``, ``zip``, copies): the first axis's elements,
        each read checked; not Python's ``__getitem__`` probing one past the end."""
        for i in range(self._n0):
            yield self[i]

    def __getattr__(self, field: str) -> SimArray:
        """``x.value1`` of a record array: that field of every element (the same checks)."""
        fields = self.__dict__["_data"].dtype.fields or {}
        if field not in fields or fields[field][0].shape:
            raise AttributeError(f"{type(self).__name__} {self.name} has no field {field!r}")
        parts = (self._layout, f"{self.name}.{field}", self.space, self._machine)
        return SimArray(self._data[field], *parts, self._shadow, self._written, self._poison)

    def __repr__(self) -> str:
        return f"<{self.space} array {self.name} {self._data.dtype} {self._shape}>"

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return whole_array_ufunc(ufunc, method, inputs, kwargs)  # np.sin(x, r) in a kernel

    def __getitem__(self, index: Any) -> Any:
        flat = self._element(index, "read")
        if flat is None:
            return self._view(index)
        shadow = self._shadow
        if shadow is not None:
            if self._check_read(shadow, flat) or (self._poison and flat in self._poison):
                return self._poisoned_read(flat, shadow)
        elif self._written is not None and (
            not self._written[flat] or (self._poison and flat in self._poison)
        ):
            return self._poisoned_read(flat, None)
        value = self._data[flat]
        read_as = self._read_as
        return read_as(value) if read_as is not None else value

    def __setitem__(self, index: Any, value: Any) -> None:
        flat = self._element(index, "write")
        if flat is None:
            raise MemoryFault("unsupported", f"assigning to a slice of {self.name} isn't supported")
        if self.space == CONST:
            where = f"{self.name}{show_index(index)}"
            raise MemoryFault("const-write", f"write to constant memory {where}")
        shadow = self._shadow
        racing = read = None
        if shadow is not None:
            racing, read = self._check_write(shadow, flat)
        elif self._written is not None:
            self._written[flat] = 1
        before = self._data[flat : flat + 1].tobytes() if shadow is not None else b""
        if type(value) is Poison:
            self._store_poison(flat, value)
        else:
            self._data[flat] = bfloat16_store(value) if self._bfloat16 else value
            if self._poison:
                self._poison.pop(flat, None)
        if shadow is not None:  # the bits it held: a race then reads or leaves those
            same = type(value) is not Poison and self._data[flat : flat + 1].tobytes() == before
            (shadow.same_writes.add if same else shadow.same_writes.discard)(flat)
            if read is not None:
                judge_write(self._machine, read, same, "read", sys._getframe(1))
            if racing is not None:
                judge_write(self._machine, racing, same, "write", sys._getframe(1))

    # -- indexing ----------------------------------------------------------------------
    def _element(self, index: Any, access: str) -> int | None:
        """The flat position of one element, or None when ``index`` makes a view."""
        if type(index) is tuple:
            if len(index) != self._ndim or any(type(i) is slice for i in index):
                if len(index) > self._ndim:
                    raise MemoryFault(
                        "index",
                        f"{self.name}{show_index(index)}: {len(index)} indices into a "
                        f"{self._ndim}-D array of shape {self._shape}",
                    )
                return None
            flat = self._offset
            for axis, i in enumerate(index):
                i = as_integer(i, self.name, index)
                n = self._shape[axis]
                if not 0 <= i < n:
                    raise self._out_of_bounds(index, access, axis, i, n)
                flat += i * self._strides[axis]
            return flat
        if type(index) is slice or self._ndim != 1:
            if self._ndim == 0:
                raise MemoryFault("index", f"{self.name} is 0-D and cannot be indexed")
            return None
        i = as_integer(index, self.name, index)
        if not 0 <= i < self._n0:
            raise self._out_of_bounds(index, access, 0, i, self._n0)
        return self._offset + i * self._s0

    def _view(self, index: Any) -> SimArray:
        items = index if type(index) is tuple else (index,)
        shape, strides, offset = [], [], self._offset
        for axis, n in enumerate(self._shape):
            item = items[axis] if axis < len(items) else slice(None)
            if type(item) is slice:
                start, stop, step = item.indices(n)
                shape.append(len(range(start, stop, step)))
                strides.append(self._strides[axis] * step)
                offset += start * self._strides[axis]
            else:
                i = as_integer(item, self.name, index)
                if not 0 <= i < n:
                    raise self._out_of_bounds(index, "view", axis, i, n)
                offset += i * self._strides[axis]
        view = SimArray(
            self._data,
            Layout(tuple(shape), tuple(strides), offset),
            self.name,
            self.space,
            self._machine,
            self._shadow,
            self._written,
            self._poison,
        )
        return view

    # -- checks ------------------------------------------------------------------------
    def _check_read(self, shadow: Shadow, flat: int) -> bool:
        """Check a read; True when it reads shared memory no thread wrote (poison.py)."""
        me = self._machine.stamp
        written = shadow.writes[flat]
        unwritten = False
        if written != me:
            if written == NOBODY:
                if self.space == SHARED:
                    unwritten = True
                    if flat not in shadow.unwritten_reads:
                        line = _line_key(sys._getframe(2), self._machine.files)
                        shadow.unwritten_reads[flat] = (me, line)
                elif self._poisoned:
                    raise self._uninitialised(None, flat)
            elif not ordered(written, me, self._cross_block):
                where = f"read of {self.name}[{self._position(flat)}]"
                other = (written, shadow.write_lines[flat])
                fault = MemoryFault("race", f"{where} after another thread's write", other)
                frame = sys._getframe(2)
                if flat in shadow.same_writes:  # a write of the bits it held: a warning
                    if not read_after_same_write(self._machine, fault, frame):
                        raise fault
                elif flat not in shadow.atomics or self._machine.strict:
                    raise fault
                else:  # racing with atomics only: the second schedule decides (machine.py)
                    self._machine.suspect_race(MemoryFault("race", where, other), frame)
        read = shadow.reads[flat]
        line = _line_key(sys._getframe(2), self._machine.files)
        if read == me or read == NOBODY or ordered(read, me, self._cross_block):
            shadow.reads[flat] = me
            shadow.read_lines[flat] = line
        else:  # another thread read it concurrently: keep it, and remember this read too
            shadow.reads2[flat] = me
            shadow.read2_lines[flat] = line
        return unwritten

    def _check_write(
        self, shadow: Shadow, flat: int
    ) -> tuple[MemoryFault | None, MemoryFault | None]:
        """Check a write: the faults of a racing earlier write and a racing read, to be
        judged by the value stored (``same_value.py``)."""
        me = self._machine.stamp
        cross_block = self._cross_block
        other = shadow.writes[flat]
        racing = read = None
        if other != me and other != NOBODY and not ordered(other, me, cross_block):
            what = f"write of {self.name}[{self._position(flat)}] after another thread's write"
            racing = MemoryFault("race", what, (other, shadow.write_lines[flat]))
        if shadow.atomics:
            shadow.atomics.discard(flat)
        for other, lines in (
            (shadow.reads[flat], shadow.read_lines),
            (shadow.reads2[flat], shadow.read2_lines),
        ):
            if other != me and other != NOBODY and not ordered(other, me, cross_block):
                what = "another thread's read"
                if shadow.unwritten_reads.get(flat, (None,))[0] == other:
                    what = (
                        "another thread read it before any thread had written it; "
                        "missing cuda.syncthreads()?"
                    )
                read = MemoryFault(
                    "race",
                    f"write of {self.name}[{self._position(flat)}] after {what}",
                    (other, lines[flat]),
                )
                break
        shadow.writes[flat] = me
        shadow.write_lines[flat] = _line_key(sys._getframe(2), self._machine.files)
        return racing, read

    def _poisoned_read(self, flat: int, shadow: Shadow | None) -> Poison:
        """The value of an uninitialised element (poison.py): a warning for local memory
        now (an error in strict mode), for shared memory at the next barrier
        (``settle_unwritten_reads``: another thread may write it first, a race)."""
        stored = self._poison.get(flat) if self._poison else None
        if stored is not None:
            return stored
        fault = self._uninitialised(None, flat)
        if shadow is None:  # local memory
            if self._machine.strict:
                raise fault
            self._machine.memory_warning("uninitialised-read", fault.detail, sys._getframe(2))
            return Poison(self._data[flat], fault.detail)
        return Poison(self._data[flat], fault.detail, (shadow, flat))

    def _store_poison(self, flat: int, value: Poison) -> None:
        """Store an uninitialised value: to shared or local memory the element stays
        uninitialised; to global memory it is used, an error (deferred to the barrier
        while the shared element it came from may yet be written: then a race)."""
        if self._poison is None:
            where = f"{self.name}[{self._position(flat)}]"
            fault = PoisonUsed(value, f"stored to {self.space} memory {where}")
            if value.pending is None:
                raise fault
            self._machine.defer_poison_store(fault, sys._getframe(2))
        else:
            self._poison[flat] = Poison(value.raw, value.origin)
        try:
            self._data[flat] = value.raw
        except (TypeError, ValueError, OverflowError):
            pass  # a NaN into an integer array: the bits stay as they were

    def atomic_update(self, index: Any, update: Any, summand: Any = None) -> Any:
        """Read-modify-write one element as a single indivisible step; returns the old
        value. Atomics never race, but they do read: uninitialised shared memory fails.
        ``summand``: the value an ``atomic.add``/``sub`` adds, counted for a float array
        of global memory (its result depends on the order: simt/tally.py)."""
        flat = self._element(index, "atomic")
        if flat is None:
            where = f"{self.name}{show_index(index)}"
            raise MemoryFault("index", f"atomic on {where} needs one element")
        if self.space == CONST:
            raise MemoryFault("const-write", f"atomic on constant memory {self.name}")
        shadow = self._shadow
        if shadow is not None:
            unset = shadow.writes[flat] == NOBODY or flat in (self._poison or ())
            if self._poisoned and unset:
                raise self._uninitialised(index)
            shadow.writes[flat] = self._machine.stamp
            shadow.atomics.add(flat)
            shadow.write_lines[flat] = _line_key(sys._getframe(2), self._machine.files)
        if self._bfloat16:
            raise MemoryFault("unsupported", f"atomics on bfloat16 array {self.name}")
        old = self._data[flat]
        self._data[flat] = update(old)
        if summand is not None and self.space == GLOBAL and self._data.dtype.kind == "f":
            self._machine.tally.add(self._data, flat, old, summand)
        read_as = self._read_as
        return read_as(old) if read_as is not None else old

    def _position(self, flat: int) -> str:
        """The index of a flat position, as the kernel would write it."""
        rest = flat - self._offset
        if self._ndim <= 1:
            return str(rest // max(self._s0, 1))
        coords = []
        for stride in self._strides:
            coords.append(rest // stride)
            rest %= stride
        return ", ".join(map(str, coords))

    def _out_of_bounds(self, index: Any, access: str, axis: int, i: int, n: int) -> MemoryFault:
        where = (self.name, self.space, self._shape)
        return out_of_bounds(*where, index, access, axis if self._ndim > 1 else None, i, n)

    def settle_unwritten_reads(self) -> tuple[int, int, str] | None:
        """At a barrier or the block's end: the first read of an element that no thread
        wrote in the interval, as (stamp, line key, detail), or None; then forget them."""
        shadow = self._shadow
        if shadow is None or not shadow.unwritten_reads:
            return None
        flat, (stamp, line) = next(iter(shadow.unwritten_reads.items()))
        shadow.unwritten_reads.clear()
        return stamp, line, str(self._uninitialised(None, flat))

    def _uninitialised(self, index: Any, flat: int | None = None) -> MemoryFault:
        shown = show_index(index) if index is not None else f"[{self._position(flat or 0)}]"
        who = "no thread of this block" if self.space == SHARED else "this thread"
        return MemoryFault(
            "uninitialised",
            f"read of uninitialised {self.space} memory {self.name}{shown}: {who} has "
            f"written it yet",
        )


def _line_key(frame: Any, files: dict[str, int]) -> int:
    filename = frame.f_code.co_filename
    number = files.get(filename)
    if number is None:
        number = files[filename] = len(files)
    return number << LINE_BITS | frame.f_lineno
