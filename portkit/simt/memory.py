"""Simulated memory: arrays that check every access a kernel makes.

A ``SimArray`` wraps a flat NumPy buffer (a tensor's storage for global memory, a fresh
buffer for shared and local memory) with a shape, strides and an offset, so views and
multi-dimensional indexing work as in numba. Each access is checked:

- bounds, per dimension, negative indices included (a GPU does not wrap them);
- shared and local memory start poisoned, and reading an element no thread of the
  block (or, for local memory, this thread) has written is an error;
- races: every element remembers the last writer and reader as a *stamp*
  (block, barrier epoch, thread), so two threads of a block touching one element
  between two barriers, one of them writing, or two blocks touching one element of
  global memory with a write among them, is reported with both threads and lines.

The write stamps of global memory outlive the launch: they are the recorded
writer map that ``portkit diff`` reads (which block and thread last wrote each element).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from portkit.simt.layout import Layout
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


GLOBAL, SHARED, LOCAL, CONST = "global", "shared", "local", "constant"


class MemoryFault(Exception):
    """A checked access failed; the machine adds block, thread and source line."""

    def __init__(self, kind: str, detail: str, other: tuple[int, int] | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.other = other  # (stamp, line key) of the earlier access in a race


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
    ) -> None:
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
        return SimArray(self._data[field], *parts, self._shadow, self._written)

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
            self._check_read(shadow, flat)
        elif self._written is not None and not self._written[flat]:
            raise self._uninitialised(index)
        value = self._data[flat]
        read_as = self._read_as
        return read_as(value) if read_as is not None else value

    def __setitem__(self, index: Any, value: Any) -> None:
        flat = self._element(index, "write")
        if flat is None:
            raise MemoryFault(
                "unsupported", f"assigning to a slice of {self.name} is not supported"
            )
        if self.space == CONST:
            raise MemoryFault("const-write", f"write to constant memory {self.name}{_show(index)}")
        shadow = self._shadow
        if shadow is not None:
            self._check_write(shadow, flat)
        elif self._written is not None:
            self._written[flat] = 1
        self._data[flat] = bfloat16_store(value) if self._bfloat16 else value

    # -- indexing ----------------------------------------------------------------------
    def _element(self, index: Any, access: str) -> int | None:
        """The flat position of one element, or None when ``index`` makes a view."""
        if type(index) is tuple:
            if len(index) != self._ndim or any(type(i) is slice for i in index):
                if len(index) > self._ndim:
                    raise MemoryFault(
                        "index",
                        f"{self.name}{_show(index)}: {len(index)} indices into a "
                        f"{self._ndim}-D array of shape {self._shape}",
                    )
                return None
            flat = self._offset
            for axis, i in enumerate(index):
                i = _integer(i, self.name, index)
                n = self._shape[axis]
                if not 0 <= i < n:
                    raise self._out_of_bounds(index, access, axis, i, n)
                flat += i * self._strides[axis]
            return flat
        if type(index) is slice or self._ndim != 1:
            if self._ndim == 0:
                raise MemoryFault("index", f"{self.name} is 0-D and cannot be indexed")
            return None
        i = _integer(index, self.name, index)
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
                i = _integer(item, self.name, index)
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
        )
        return view

    # -- checks ------------------------------------------------------------------------
    def _check_read(self, shadow: Shadow, flat: int) -> None:
        me = self._machine.stamp
        written = shadow.writes[flat]
        if written != me:
            if written == NOBODY:
                if self.space == SHARED:
                    if flat not in shadow.unwritten_reads:
                        line = _line_key(sys._getframe(2), self._machine.files)
                        shadow.unwritten_reads[flat] = (me, line)
                elif self._poisoned:
                    raise self._uninitialised(None, flat)
            elif not ordered(written, me, self._cross_block):
                raise MemoryFault(
                    "race",
                    f"read of {self.name}[{self._position(flat)}]",
                    (written, shadow.write_lines[flat]),
                )
        read = shadow.reads[flat]
        line = _line_key(sys._getframe(2), self._machine.files)
        if read == me or read == NOBODY or ordered(read, me, self._cross_block):
            shadow.reads[flat] = me
            shadow.read_lines[flat] = line
        else:  # another thread read it concurrently: keep it, and remember this read too
            shadow.reads2[flat] = me
            shadow.read2_lines[flat] = line

    def _check_write(self, shadow: Shadow, flat: int) -> None:
        me = self._machine.stamp
        cross_block = self._cross_block
        other = shadow.writes[flat]
        if other != me and other != NOBODY and not ordered(other, me, cross_block):
            raise MemoryFault(
                "race",
                f"write of {self.name}[{self._position(flat)}] after another thread's write",
                (other, shadow.write_lines[flat]),
            )
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
                raise MemoryFault(
                    "race",
                    f"write of {self.name}[{self._position(flat)}] after {what}",
                    (other, lines[flat]),
                )
        shadow.writes[flat] = me
        shadow.write_lines[flat] = _line_key(sys._getframe(2), self._machine.files)

    def atomic_update(self, index: Any, update: Any, summand: Any = None) -> Any:
        """Read-modify-write one element as a single indivisible step; returns the old
        value. Atomics never race, but they do read: uninitialised shared memory fails.
        ``summand``: the value an ``atomic.add``/``sub`` adds, counted for a float array
        of global memory (its result depends on the order: simt/tally.py)."""
        flat = self._element(index, "atomic")
        if flat is None:
            raise MemoryFault("index", f"atomic on {self.name}{_show(index)} needs one element")
        if self.space == CONST:
            raise MemoryFault("const-write", f"atomic on constant memory {self.name}")
        shadow = self._shadow
        if shadow is not None:
            if self._poisoned and shadow.writes[flat] == NOBODY:
                raise self._uninitialised(index)
            shadow.writes[flat] = self._machine.stamp
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
        where = f" (dimension {axis})" if self._ndim > 1 else ""
        if i < 0:
            why = (
                f"negative index {i}{where}; numba on a GPU wraps it to the end of the "
                f"array and the C twin {access}s memory before it, so the two disagree"
            )
        else:
            why = f"index {i}{where} is past the end (size {n})"
        return MemoryFault(
            "out-of-bounds",
            f"out-of-bounds {access} of {self.space} array {self.name}{_show(index)} "
            f"of shape {self._shape}: {why}",
        )

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
        shown = _show(index) if index is not None else f"[{self._position(flat or 0)}]"
        who = "no thread of this block" if self.space == SHARED else "this thread"
        return MemoryFault(
            "uninitialised",
            f"read of uninitialised {self.space} memory {self.name}{shown}: {who} has "
            f"written it yet",
        )


def _integer(value: Any, name: str, index: Any) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise MemoryFault(
            "index",
            f"{name}{_show(index)}: index {value!r} is {type(value).__name__}, not an integer",
        ) from None


def _show(index: Any) -> str:
    items = index if type(index) is tuple else (index,)
    return "[" + ", ".join(_show_item(i) for i in items) + "]"


def _show_item(item: Any) -> str:
    if type(item) is slice:
        parts = ["" if v is None else str(v) for v in (item.start, item.stop)]
        return ":".join(parts) + ("" if item.step is None else f":{item.step}")
    return str(item)


def _line_key(frame: Any, files: dict[str, int]) -> int:
    filename = frame.f_code.co_filename
    number = files.get(filename)
    if number is None:
        number = files[filename] = len(files)
    return number << LINE_BITS | frame.f_lineno


def poisoned(size: int, dtype: np.dtype) -> np.ndarray:
    """Fresh shared or local memory: NaN or a recognisable pattern, never a lucky zero."""
    if dtype.kind == "f":
        return np.full(size, np.nan, dtype)
    return np.full(size, 0x5A5A5A5A5A5A5A5A, np.uint64).astype(dtype)
