# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_warp_ops.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_warp_ops.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


def use_independent_scheduling(arr):
    i = cuda.threadIdx.x
    if i % 4 == 0:
        ballot = cuda.ballot_sync(0x11111111, True)
    elif i % 4 == 1:
        ballot = cuda.ballot_sync(0x22222222, True)
    elif i % 4 == 2:
        ballot = cuda.ballot_sync(0x44444444, True)
    elif i % 4 == 3:
        ballot = cuda.ballot_sync(0x88888888, True)
    arr[i] = ballot


def run():
    compiled = cuda.jit("void(uint32[:])")(use_independent_scheduling)
    arr = np.empty(32, dtype=np.uint32)
    compiled[1, 32](arr)
    return {"arr": arr}


def expected():
    """What numba-cuda's test asserts."""
    return {"arr": np.tile(np.array((0x11111111, 0x22222222, 0x44444444, 0x88888888),
                                    dtype=np.uint32), 8)}
