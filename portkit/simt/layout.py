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
    C- and Fortran-ordered arrays are viewed in place; others are refused, since a copy
    would silently drop the kernel's writes."""
    if array.flags.c_contiguous:
        return array.reshape(-1), Layout.contiguous(array.shape)
    if array.flags.f_contiguous:
        strides = tuple(s // array.itemsize for s in array.strides)
        return array.ravel(order="K"), Layout(array.shape, strides, 0)
    raise KernelError(
        f"argument {name} is a non-contiguous view (strides {array.strides}): pass a "
        f"contiguous array (np.ascontiguousarray) so the kernel's writes reach it"
    )


def shape_of(shape: Any) -> tuple[int, ...]:
    """A ``cuda.shared.array``/``local.array`` shape (an int or a tuple) as a tuple."""
    items = shape if isinstance(shape, tuple) else (shape,)
    return tuple(int(i) for i in items)
