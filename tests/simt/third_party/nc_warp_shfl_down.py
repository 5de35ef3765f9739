# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_warp_ops.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_warp_ops.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


def use_shfl_sync_down(ary, delta):
    i = cuda.grid(1)
    val = cuda.shfl_down_sync(0xFFFFFFFF, i, delta)
    ary[i] = val


def run():
    compiled = cuda.jit("void(int32[:], int32)")(use_shfl_sync_down)
    out = {}
    for delta in (0, 3, 31):
        ary = np.empty(32, dtype=np.int32)
        compiled[1, 32](ary, delta)
        out[f"delta{delta}"] = ary
    return out


def expected():
    """What numba-cuda's test asserts (for each delta): lanes past the end keep their own."""
    out = {}
    for delta in (0, 3, 31):
        exp = np.arange(32, dtype=np.int32)
        exp[: 32 - delta] += delta
        out[f"delta{delta}"] = exp
    return out
