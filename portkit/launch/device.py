"""What a launcher may ask about the machine its kernels run on: the SM count, to size a
grid-stride loop's grid to a few waves of resident blocks.

On a simulated implementation (the kernels run on the CPU) the answer is a small
constant: a simulator gains nothing from a large grid, and a small one makes the
grid-stride loops actually loop, so the simulator exercises them."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

SIMULATED_SM_COUNT = 2
# `portkit lint` and `portkit compile` trace the launchers on the CPU to see the launches
# a GPU would get; they check for sm_90, so they see an H100's grid.
TRACED_SM_COUNT = 132


@cache
def _cuda_sm_count(device_index: int) -> int:
    import torch

    return torch.cuda.get_device_properties(device_index).multi_processor_count


def sm_count(k: Any) -> int:
    """Streaming multiprocessors of the GPU behind ``k`` (``SIMULATED_SM_COUNT`` when
    ``k`` runs on the CPU): ``grid = min(cdiv(work, threads), 8 * portkit.sm_count(k))``."""
    if getattr(k, "implementation", None) == "trace":
        return TRACED_SM_COUNT
    if getattr(k, "device", "cpu") != "cuda":
        return SIMULATED_SM_COUNT
    global _get_device
    if _get_device is None:
        # torch.cuda.current_device() checks lazy initialisation on every call; a launcher
        # asks on every launch, after torch initialised CUDA, so read the device directly.
        import torch

        torch.cuda.init()
        _get_device = torch._C._cuda_getDevice
    return _cuda_sm_count(_get_device())


_get_device: Callable[[], int] | None = None
