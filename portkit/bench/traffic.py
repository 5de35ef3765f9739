"""Bytes and FLOPs of one call: what turns a time into GB/s and a fraction of the copy
roofline.

By default a forward moves its inputs and outputs once, and a backward reads what the
forward saved plus the upstream gradients and writes the input gradients: the fewest
bytes a memory-bound kernel can move. An op that knows better (a matmul re-reads
nothing, a fused op reads less) declares ``bytes=`` and ``flops=`` in ``@portkit.op``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from portkit.errors import OpDefinitionError


def tensor_bytes(values: Iterable[Any]) -> int:
    """Bytes of every tensor among ``values`` (other values and None count nothing)."""
    total = 0
    for value in values:
        if hasattr(value, "element_size") and hasattr(value, "numel"):
            total += int(value.numel()) * int(value.element_size())
    return total


def declared(model: Any, direction: str, inputs: tuple, op_name: str = "") -> int | None:
    """The op's own figure for ``direction`` (None when it declares none)."""
    if model is None:
        return None
    function = model.get(direction) if isinstance(model, Mapping) else model
    if function is None or (not isinstance(model, Mapping) and direction != "forward"):
        return None
    value = function(*inputs)
    if not isinstance(value, (int, float)) or value < 0:
        raise OpDefinitionError(
            f"op {op_name}: its {direction} cost model returned {value!r}, not a count >= 0"
        )
    return int(value)


def default_bytes(
    direction: str,
    inputs: tuple,
    outputs: tuple,
    saved: tuple = (),
    grad_outputs: tuple = (),
    grads: tuple = (),
) -> int:
    """Inputs + outputs for the forward; saved tensors + upstream gradients + input
    gradients for the backward."""
    if direction == "forward":
        return tensor_bytes(inputs) + tensor_bytes(outputs)
    return tensor_bytes(saved) + tensor_bytes(grad_outputs) + tensor_bytes(grads)
