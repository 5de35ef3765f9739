"""How an array's elements map to flat memory: shape, strides (in elements) and offset,
and the flat view a launch writes through (C- or Fortran-ordered, never a silent copy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from portkit.errors import KernelError


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    offset: int

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> Layout:
        strides, step = [], 1
        for n in reversed(shape):
            strides.append(step)
            step *= n
        return Layout(tuple(shape), tuple(reversed(strides)), 0)


def memory_view(array: np.ndarray, name: str) -> tuple[np.ndarray, Layout]:
    """The array's memory as a flat view (writes land in ``array``) and its layout.
    C- and Fortran-ordered arrays are viewed in place, and so is a strided view (a device
    array's ``d[::2]`` or ``d[:, 3]``, which numba passes to a kernel as it is): the flat
    view spans its elements' memory, lowest address first, never a copy that would drop
    the kernel's writes. Strides that are not whole elements are refused."""
    if array.flags.c_contiguous:
        return array.reshape(-1), Layout.contiguous(array.shape)
    item = array.itemsize
    if any(s % item for s in array.strides):
        raise KernelError(
            f"argument {name} is a view whose strides {array.strides} are not whole "
            f"{item}-byte elements: pass a contiguous array (np.ascontiguousarray)"
        )
    steps = tuple(s // item for s in array.strides)
    if array.flags.f_contiguous:
        return array.ravel(order="K"), Layout(array.shape, steps, 0)
    low = sum(min(0, step * (n - 1)) for step, n in zip(steps, array.shape))
    high = sum(max(0, step * (n - 1)) for step, n in zip(steps, array.shape))
    # the element at the lowest address, as a view: the flat memory starts there
    corner = array[
        tuple(slice(n - 1, n) if step < 0 else slice(0, 1) for step, n in zip(steps, array.shape))
    ]
    flat = np.lib.stride_tricks.as_strided(corner, shape=(high - low + 1,), strides=(item,))
    return flat, Layout(array.shape, steps, -low)


def is_strided(array: np.ndarray) -> bool:
    """A view that is neither C- nor Fortran-ordered (``d[::2]``, ``d[1:4, ::2]``)."""
    return bool(array.size) and not (array.flags.c_contiguous or array.flags.f_contiguous)


def shape_of(shape: Any) -> tuple[int, ...]:
    """A ``cuda.shared.array``/``local.array`` shape (an int or a tuple) as a tuple."""
    items = shape if isinstance(shape, tuple) else (shape,)
    return tuple(int(i) for i in items)
