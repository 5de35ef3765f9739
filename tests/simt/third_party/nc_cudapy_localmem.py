# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_localmem.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_localmem.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda
from numba.cuda import int32


def culocal(A, B):
    C = cuda.local.array(1000, dtype=int32)
    for i in range(C.shape[0]):
        C[i] = A[i]
    for i in range(C.shape[0]):
        B[i] = C[i]


def run():
    jculocal = cuda.jit("void(int32[:], int32[:])")(culocal)
    A = np.arange(1000, dtype="int32")
    B = np.zeros_like(A)
    jculocal[1, 1](A, B)
    return {"B": B}
