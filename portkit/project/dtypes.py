"""The dtypes of the author's contract, by name, and how each reaches a kernel.

An op names the dtypes it accepts (``@portkit.op(dtypes=...)``); a case names the dtype
of its inputs (one for all, or one per input). Names are torch's (``"bfloat16"``).

How a tensor of each dtype reaches a prototype kernel (numba-cuda or the simulator):
every dtype as itself, except ``bfloat16``: torch describes it to numba as ``<V2`` (raw
bytes), which numba cannot type, so a bfloat16 tensor arrives as a ``uint16`` array of
its bits and the kernel converts with ``numba.cuda.bf16`` (docs/authoring.md shows how).
The twin gets the same memory as ``__nv_bfloat16*``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INTEGER_DTYPES = ("int8", "uint8", "int16", "int32", "int64")
DTYPES = FLOAT_DTYPES + INTEGER_DTYPES + ("bool",)
# What an op accepts when it does not say: the two dtypes every example op handles.
DEFAULT_OP_DTYPES = ("float32", "float64")
# bfloat16 as a prototype kernel sees it (see the module docstring).
BITS_VIEW = {"bfloat16": "uint16"}


def is_float(name: str) -> bool:
    return name in FLOAT_DTYPES


def torch_dtype(name: str) -> torch.dtype:
    import torch

    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is not one of {DTYPES}")
    return getattr(torch, name)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")


def prototype_view(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor as a numba kernel (compiled or simulated) receives it."""
    import torch

    view = BITS_VIEW.get(dtype_name(tensor.dtype))
    return tensor if view is None else tensor.view(getattr(torch, view))
