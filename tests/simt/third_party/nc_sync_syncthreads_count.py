# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_sync.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_sync.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


def use_syncthreads_count(ary_in, ary_out):
    i = cuda.grid(1)
    ary_out[i] = cuda.syncthreads_count(ary_in[i])


def run():
    compiled = cuda.jit("void(int32[:], int32[:])")(use_syncthreads_count)
    ary_in = np.ones(72, dtype=np.int32)
    ary_out = np.zeros(72, dtype=np.int32)
    ary_in[31] = 0
    ary_in[42] = 0
    compiled[1, 72](ary_in, ary_out)
    return {"ary_out": ary_out}
