# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_nondet.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_nondet.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda
from numba.cuda import float32, void


@cuda.jit(void(float32[:, :], float32[:, :], float32[:]))
def diagproduct(c, a, b):
    startX, startY = cuda.grid(2)
    gridX = cuda.gridDim.x * cuda.blockDim.x
    gridY = cuda.gridDim.y * cuda.blockDim.y
    height = c.shape[0]
    width = c.shape[1]

    for x in range(startX, width, (gridX)):
        for y in range(startY, height, (gridY)):
            c[y, x] = a[y, x] * b[x]


def run():
    N = 8
    A = np.array(np.arange(N * N).reshape(N, N), dtype=np.float32)
    B = np.array(np.arange(N) + 0, dtype=A.dtype)
    F = np.empty(A.shape, dtype=A.dtype)
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    dF = cuda.to_device(F, copy=False)
    diagproduct[(1, 1), (32, 8)](dF, dA, dB)
    return {"F": dF.copy_to_host()}
