# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_sync.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_sync.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda
from numba.cuda import int32


def coop_syncwarp(res):
    sm = cuda.shared.array(32, int32)
    i = cuda.grid(1)

    sm[i] = i
    cuda.syncwarp()

    if i < 16:
        sm[i] = sm[i] + sm[i + 16]
        cuda.syncwarp(0xFFFF)

    if i < 8:
        sm[i] = sm[i] + sm[i + 8]
        cuda.syncwarp(0xFF)

    if i < 4:
        sm[i] = sm[i] + sm[i + 4]
        cuda.syncwarp(0xF)

    if i < 2:
        sm[i] = sm[i] + sm[i + 2]
        cuda.syncwarp(0x3)

    if i == 0:
        res[0] = sm[0] + sm[1]


def run():
    compiled = cuda.jit("void(int32[:])")(coop_syncwarp)
    res = np.zeros(1, dtype=np.int32)
    compiled[1, 32](res)
    return {"res": res}


def expected():
    """What numba-cuda's test asserts: the sum of 0 to 31."""
    return {"res": np.array([496], dtype=np.int32)}
