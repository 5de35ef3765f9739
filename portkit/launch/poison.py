"""The output poison: how checks tell an element no kernel wrote from one a kernel
computed. ``k.empty*`` fills outputs with it during checks; guards and diff read it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def poison_bits(dtype: torch.dtype) -> tuple[torch.dtype, int] | None:
    """How ``k.empty`` fills float outputs during checks: a NaN with a payload that no
    arithmetic produces (GPUs and CPUs return a canonical NaN), so an element that still
    holds it was never written, and one that holds another NaN was computed."""
    import torch

    return {
        torch.float32: (torch.int32, 0x7FC0DEAD),
        torch.float64: (torch.int64, 0x7FF8DEADDEADBEEF),
        # Half types: quiet NaNs with a payload (canonical ones are 0x7E00 and 0x7FC0).
        torch.float16: (torch.int16, 0x7EAD),
        torch.bfloat16: (torch.int16, 0x7FAD),
    }.get(dtype)


def is_poison(tensor: torch.Tensor) -> torch.Tensor:
    """Where ``tensor`` still holds the output poison (elements no kernel wrote)."""
    import torch

    poison = poison_bits(tensor.dtype)
    if poison is not None:
        return tensor.contiguous().view(poison[0]) == poison[1]
    return torch.isnan(tensor) if tensor.dtype.is_floating_point else tensor == -1


def input_guard_bits(dtype: torch.dtype) -> tuple[torch.dtype, int] | None:
    """What the guards around *inputs* hold: a NaN with another payload than the output
    poison. A GPU may carry a NaN's payload through arithmetic (float64 on an H100 does),
    so ``out[n] = a[n] + b[n]`` past the end must not store the output guard's own bits."""
    import torch

    return {
        torch.float32: (torch.int32, 0x7FC0BAD0),
        torch.float64: (torch.int64, 0x7FF8BADBADBADBAD),
        torch.float16: (torch.int16, 0x7EBA),
        torch.bfloat16: (torch.int16, 0x7FFA),
    }.get(dtype)
