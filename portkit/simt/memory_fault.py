"""``MemoryFault``: a checked access failed (simulated memory, uninitialised values), and
how such a fault writes an index; the machine adds block, thread and source line
(``machine.Machine.fault``)."""

from __future__ import annotations

import operator
from typing import Any


class MemoryFault(Exception):
    """A checked access failed; the machine adds block, thread and source line."""

    def __init__(self, kind: str, detail: str, other: tuple[int, int] | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.other = other  # (stamp, line key) of the earlier access in a race


def out_of_bounds(
    name: str,
    space: str,
    shape: tuple[int, ...],
    index: Any,
    access: str,
    axis: int | None,
    i: int,
    n: int,
) -> MemoryFault:
    """Index ``i`` of dimension ``axis`` (None: a 1-D array) outside ``0..n-1``."""
    where = f" (dimension {axis})" if axis is not None else ""
    if i < 0:
        why = (
            f"negative index {i}{where}; numba on a GPU wraps it to the end of the "
            f"array and the C twin {access}s memory before it, so the two disagree"
        )
    else:
        why = f"index {i}{where} is past the end (size {n})"
    return MemoryFault(
        "out-of-bounds",
        f"out-of-bounds {access} of {space} array {name}{show_index(index)} "
        f"of shape {shape}: {why}",
    )


def as_integer(value: Any, name: str, index: Any) -> int:
    """``value`` as an index of array ``name``, or the fault of a non-integer index."""
    try:
        return operator.index(value)
    except TypeError:
        raise MemoryFault(
            "index",
            f"{name}{show_index(index)}: index {value!r} is {type(value).__name__}, "
            f"not an integer",
        ) from None


def show_index(index: Any) -> str:
    """An index as the kernel wrote it: ``[i, j]``, ``[1:4]``."""
    items = index if type(index) is tuple else (index,)
    return "[" + ", ".join(_show_item(i) for i in items) + "]"


def _show_item(item: Any) -> str:
    if type(item) is slice:
        parts = ["" if v is None else str(v) for v in (item.start, item.stop)]
        return ":".join(parts) + ("" if item.step is None else f":{item.step}")
    return str(item)
