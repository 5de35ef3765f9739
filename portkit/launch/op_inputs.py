"""The op-level input checks every call of an implementation runs, and ``as_tuple``.

The implementation itself, differentiable, is ``portkit.torch_op.load.registered_callable``
(one autograd path, ``runtime/autograd_function.py``, for check, diff and
``portkit.load``); ``check_inputs`` here is the slow path that explains a refused input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from portkit.errors import InputError
from portkit.project.dtypes import dtype_name

if TYPE_CHECKING:
    from portkit.project.discovery import Op


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def check_inputs(op: Op, inputs: Sequence[Any], device: str) -> None:
    """The op-level checks: device, dtype, contiguity, shapes, then the op's own rule."""
    import torch

    tensors = [(i, t) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise InputError(f"op {op.name}: no tensor among the inputs")
    problem = op.definition.refused_dtype([dtype_name(t.dtype) for _, t in tensors])
    if problem:
        raise InputError(f"op {op.name}: {problem}")
    for i, t in tensors:
        where = f"op {op.name}, input {i}"
        if t.device.type != device:
            raise InputError(
                f"{where}: tensor is on {t.device.type}, but this implementation runs on "
                f"{device}; move it with .to({device!r})"
            )
        if not t.is_contiguous():
            raise InputError(
                f"{where}: tensor with strides {t.stride()} is not contiguous; pass .contiguous()"
            )
    if op.definition.same_shape:
        shape = tensors[0][1].shape
        for i, t in tensors[1:]:
            if t.shape != shape:
                raise InputError(
                    f"op {op.name}: input {i} has shape {tuple(t.shape)} but input 0 has "
                    f"{tuple(shape)}; the op needs equal shapes"
                )
    if op.definition.check_inputs is not None:
        op.definition.check_inputs(*inputs)
