"""On a GPU: the same kernel, written once, runs on float16, bfloat16 and float32 tensors
through numba-cuda (bfloat16 passed as its uint16 bits, typed as numba-cuda's bfloat16
array) and gives bit for bit what the simulator gives."""

from __future__ import annotations

import pytest
import torch
from numba import cuda, float32

from portkit.backends.numba_gpu import NumbaKernel
from portkit.backends.sim import host_array
from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.machine import Machine

needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU visible to PyTorch on this machine"
)


@cuda.jit
def affine(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(x[i]) * float32(2.0) + float32(0.25)  # exact product: FMA or not


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_numba_and_simulator_agree_in_half_precision(dtype):
    n = 1000
    x = torch.randn(n, generator=torch.Generator().manual_seed(0)).to(dtype)
    config = LaunchConfig((4, 1, 1), (256, 1, 1))

    on_cpu = torch.zeros_like(x)
    Machine(None, None).launch("affine", affine, config, [host_array(x), host_array(on_cpu), n])

    x_gpu, on_gpu = x.cuda(), torch.zeros(n, dtype=dtype, device="cuda")
    NumbaKernel(affine).launch(config, [x_gpu, on_gpu, n])
    torch.cuda.synchronize()
    assert torch.equal(on_gpu.cpu(), on_cpu)
    assert torch.equal(on_cpu, (x.float() * 2 + 0.25).to(dtype))
