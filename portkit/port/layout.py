"""Where a kernel's multi-dimensional arrays get their row lengths.

A twin takes contiguous tensors as flat pointers, so ``x[row, c]`` is
``x[row * cols + c]``: the draft needs, for each dimension past the first, an
expression for its length that the kernel can see. It is found in the launches the
op's cases make (portkit/launch/trace.py): the first scalar parameter, or grid or block
dimension, that equals that length in every launch of the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from portkit.launch.trace import Launch, TensorArg
from portkit.port.spelling import c_identifier

_DIMS = (
    ("gridDim.x", lambda c: c.grid[0]),
    ("gridDim.y", lambda c: c.grid[1]),
    ("gridDim.z", lambda c: c.grid[2]),
    ("blockDim.x", lambda c: c.block[0]),
    ("blockDim.y", lambda c: c.block[1]),
    ("blockDim.z", lambda c: c.block[2]),
)


def _scalar_values(launch: Launch, index: int) -> int | None:
    value = launch.args[index]
    if isinstance(value, TensorArg) or isinstance(value, bool):
        return None
    return int(value) if hasattr(value, "__index__") else None


def dimension(
    params: Sequence[str], launches: Sequence[Launch], array: str, dim: int | None
) -> str | None:
    """C expression for dimension ``dim`` of array parameter ``array`` (None: its
    element count) in every launch of the kernel, or None when nothing matches."""
    index = params.index(array)
    wanted = []
    for launch in launches:
        arg = launch.args[index]
        if not isinstance(arg, TensorArg) or (dim is not None and dim >= len(arg.shape)):
            return None
        wanted.append(math.prod(arg.shape) if dim is None else arg.shape[dim])
    if not wanted:
        return None
    for i, name in enumerate(params):
        if i != index and all(_scalar_values(l, i) == w for l, w in zip(launches, wanted)):
            return name
    for spelling, read in _DIMS:
        if all(read(l.config) == w for l, w in zip(launches, wanted)):
            return f"(long long){spelling}"
    return None


def dimension_parameter(array: str, dim: int) -> str:
    """The device function's parameter holding dimension ``dim`` of its array ``array``."""
    return f"{c_identifier(array)}_dim{dim}"
