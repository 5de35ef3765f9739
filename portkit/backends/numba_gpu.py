"""``numba``: the prototype compiled by numba-cuda and launched on a GPU.

Launches go on PyTorch's current stream (numba would otherwise use its own default
stream and race with torch's work) and tensors are wrapped without the
``__cuda_array_interface__`` stream sync, which is redundant on the same stream.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from portkit.backends.base import Backend, cuda_unavailable_reason
from portkit.launch.kernel_set import KernelSet, LaunchConfig
from portkit.project.dtypes import prototype_view


class NumbaKernel:
    def __init__(self, dispatcher: Any) -> None:
        self._dispatcher = dispatcher

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import torch
        from numba import cuda

        stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
        # bfloat16 reaches numba as uint16 bits (torch describes it as raw bytes, "<V2").
        device_args = [
            cuda.as_cuda_array(prototype_view(a), sync=False) if isinstance(a, torch.Tensor) else a
            for a in args
        ]
        with warnings.catch_warnings():
            # Small grids are deliberate in edge-size cases; numba warns about each.
            # (numba-cuda raises its own copy of the class, so match the message.)
            warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU")
            self._dispatcher[config.grid, config.block, stream, config.shared_bytes](*device_args)


class NumbaGPU(Backend):
    name = "numba"
    role = "prototype"
    device = "cuda"
    description = "prototype compiled by numba-cuda, on the GPU"

    def _probe(self) -> str | None:
        reason = cuda_unavailable_reason()
        if reason:
            return reason
        from numba import cuda

        if not cuda.is_available():
            return "numba-cuda sees no GPU (driver or NVVM missing)"
        return None

    def kernels(self, op, *, poison_outputs: bool = False) -> KernelSet:
        targets = {name: NumbaKernel(d) for name, d in op.kernels.items()}
        return KernelSet(op.name, self.name, self.device, targets, poison_outputs)
