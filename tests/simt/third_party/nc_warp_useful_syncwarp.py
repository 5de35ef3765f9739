# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_warp_ops.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_warp_ops.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


def useful_syncwarp(ary):
    i = cuda.grid(1)
    if i == 0:
        ary[0] = 42
    cuda.syncwarp(0xFFFFFFFF)
    ary[i] = ary[0]


def run():
    compiled = cuda.jit("void(int32[:])")(useful_syncwarp)
    nelem = 32
    ary = np.empty(nelem, dtype=np.int32)
    compiled[1, nelem](ary)
    return {"ary": ary}


def expected():
    """What numba-cuda's test asserts."""
    return {"ary": np.full(32, 42, dtype=np.int32)}
