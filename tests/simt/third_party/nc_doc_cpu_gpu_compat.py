# Source: numba-cuda 0.30.4, numba/cuda/tests/doc_examples/test_cpu_gpu_compat.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/doc_examples/test_cpu_gpu_compat.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
from math import pi

import numba
from numba import cuda


@numba.jit
def business_logic(x, y, z):
    return 4 * z * (2 * x - (4 * y) / 2 * pi)


@cuda.jit
def f(res, xarr, yarr, zarr):
    tid = cuda.grid(1)
    if tid < len(xarr):
        # The function decorated with numba.jit may be directly reused
        res[tid] = business_logic(xarr[tid], yarr[tid], zarr[tid])


def run():
    X = cuda.to_device([1, 10, 234])
    Y = cuda.to_device([2, 2, 4014])
    Z = cuda.to_device([3, 14, 2211])
    results = cuda.to_device([0.0, 0.0, 0.0])
    f.forall(len(X))(results, X, Y, Z)
    return {"results": results.copy_to_host()}
