"""The array methods numba kernels call that make another view of the same memory:
``a.reshape(shape)`` (C-contiguous arrays, ``-1`` inferred, as numba allows),
``a.view(dtype)`` (reinterpreting the bytes of a contiguous array) and ``a.real`` /
``a.imag`` of a complex array (strided float views that writes and atomics go through).

Installed on ``SimArray`` (memory.py) when this module is imported. A reshape keeps the
array's checks (same elements, same shadow); ``view`` of another item size and
``real``/``imag`` see the memory as other elements, so their reads and writes are
bounds-checked but not race- or initialisation-checked.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from portkit.simt.layout import Layout
from portkit.simt.memory import MemoryFault, SimArray


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    step = 1
    for n, stride in zip(reversed(shape), reversed(strides)):
        if n != 1 and stride != step:
            return False
        step *= n
    return True


def _new_shape(array: SimArray, shape: Any) -> tuple[int, ...]:
    items = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    dims = [int(n) for n in items]
    size = math.prod(array._shape)
    unknown = [i for i, n in enumerate(dims) if n < 0]
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if unknown:
        known = math.prod(n for n in dims if n >= 0)
        if known == 0 or size % known:
            raise ValueError("total size of new array must be unchanged")
        dims[unknown[0]] = size // known
    if math.prod(dims) != size:
        raise ValueError("total size of new array must be unchanged")
    return tuple(dims)


def reshape(self: SimArray, *shape: Any) -> SimArray:
    """numba's ``reshape``: a view with a new shape of a C-contiguous array."""
    if not _c_contiguous(self._shape, self._strides):
        raise MemoryFault(
            "unsupported", f"reshape of {self.name}: numba reshapes C-contiguous arrays only"
        )
    dims = _new_shape(self, shape)
    layout = Layout.contiguous(dims)
    layout = Layout(layout.shape, layout.strides, self._offset)
    return SimArray(
        self._data, layout, self.name, self.space, self._machine, self._shadow, self._written
    )


def _dtype(kind: Any) -> np.dtype:
    """A NumPy dtype from NumPy's or numba's way of naming it (``np.int32``,
    ``numba.int32``, the simulator's typed casts)."""
    for candidate in (kind, getattr(kind, "dtype", None), getattr(kind, "numba_type", None)):
        try:
            return np.dtype(candidate)
        except TypeError:
            pass
    from numba.np.numpy_support import as_dtype

    return as_dtype(kind)


def view(self: SimArray, dtype: Any) -> SimArray:
    """numba's ``view``: the same bytes as elements of ``dtype`` (a contiguous array)."""
    new = _dtype(dtype)
    if new == self._data.dtype:
        return self
    if not _c_contiguous(self._shape, self._strides):
        raise MemoryFault("unsupported", f"view of {self.name}: numba views contiguous arrays only")
    old = self._data.dtype.itemsize
    size = math.prod(self._shape)
    raw = self._data[self._offset : self._offset + size].view(np.uint8)
    last = (self._shape[-1] if self._shape else 1) * old
    if last % new.itemsize:
        raise ValueError(
            "When changing to a larger dtype, its size must be a divisor of the total size "
            "in bytes of the last axis of the array."
        )
    dims = (*self._shape[:-1], last // new.itemsize)
    return SimArray(raw.view(new), Layout.contiguous(dims), self.name, self.space, self._machine)


def _part(self: SimArray, which: int, what: str) -> SimArray:
    kind = self._data.dtype
    if kind.kind != "c":
        if which == 0:
            return self
        raise MemoryFault("unsupported", f"{self.name}.imag of a real array")
    floats = self._data.view(np.dtype(f"f{kind.itemsize // 2}"))
    layout = Layout(self._shape, tuple(2 * s for s in self._strides), 2 * self._offset + which)
    return SimArray(floats, layout, f"{self.name}.{what}", self.space, self._machine)


def _real(self: SimArray) -> SimArray:
    return _part(self, 0, "real")


def _imag(self: SimArray) -> SimArray:
    return _part(self, 1, "imag")


SimArray.reshape = reshape  # type: ignore[attr-defined]
SimArray.view = view  # type: ignore[attr-defined]
SimArray.real = property(_real)  # type: ignore[attr-defined]
SimArray.imag = property(_imag)  # type: ignore[attr-defined]
