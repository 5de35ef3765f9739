# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_laplace.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_laplace.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda
from numba.cuda import float64, void

tpb = 4  # the test's size under a simulator
SM_SIZE = tpb, tpb


@cuda.jit(float64(float64, float64), device=True, inline="always")
def get_max(a, b):
    if a > b:
        return a
    else:
        return b


@cuda.jit(void(float64[:, :], float64[:, :], float64[:, :]))
def jocabi_relax_core(A, Anew, error):
    err_sm = cuda.shared.array(SM_SIZE, dtype=float64)

    ty = cuda.threadIdx.x
    tx = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y

    n = A.shape[0]
    m = A.shape[1]

    i, j = cuda.grid(2)

    err_sm[ty, tx] = 0
    if j >= 1 and j < n - 1 and i >= 1 and i < m - 1:
        Anew[j, i] = 0.25 * (
            A[j, i + 1] + A[j, i - 1] + A[j - 1, i] + A[j + 1, i]
        )
        err_sm[ty, tx] = Anew[j, i] - A[j, i]

    cuda.syncthreads()

    # max-reduce err_sm vertically
    t = tpb // 2
    while t > 0:
        if ty < t:
            err_sm[ty, tx] = get_max(err_sm[ty, tx], err_sm[ty + t, tx])
        t //= 2
        cuda.syncthreads()

    # max-reduce err_sm horizontally
    t = tpb // 2
    while t > 0:
        if tx < t and ty == 0:
            err_sm[ty, tx] = get_max(err_sm[ty, tx], err_sm[ty, tx + t])
        t //= 2
        cuda.syncthreads()

    if tx == 0 and ty == 0:
        error[by, bx] = err_sm[0, 0]


def run():
    NN, NM = 8, 8
    A = np.zeros((NN, NM), dtype=np.float64)
    Anew = np.zeros((NN, NM), dtype=np.float64)
    for j in range(NN):
        A[j, 0] = 1.0
        Anew[j, 0] = 1.0
    blockdim = (tpb, tpb)
    griddim = (NN // blockdim[0], NM // blockdim[1])
    error_grid = np.zeros(griddim)
    dA, dAnew = cuda.to_device(A), cuda.to_device(Anew)
    derror_grid = cuda.to_device(error_grid)
    errors = []
    for _ in range(5):
        jocabi_relax_core[griddim, blockdim](dA, dAnew, derror_grid)
        errors.append(derror_grid.copy_to_host())
        dA, dAnew = dAnew, dA
    return {"A": dA.copy_to_host(), "errors": np.array(errors)}
