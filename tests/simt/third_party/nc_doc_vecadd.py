# Source: numba-cuda 0.30.4, numba/cuda/tests/doc_examples/test_vecadd.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/doc_examples/test_vecadd.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


@cuda.jit
def f(a, b, c):
    # like threadIdx.x + (blockIdx.x * blockDim.x)
    tid = cuda.grid(1)
    size = len(c)

    if tid < size:
        c[tid] = a[tid] + b[tid]


def run():
    np.random.seed(1)
    N = 1000
    a = cuda.to_device(np.random.random(N))
    b = cuda.to_device(np.random.random(N))
    c = cuda.device_array_like(a)
    f.forall(len(a))(a, b, c)
    forall = c.copy_to_host()
    nthreads = 256
    nblocks = (len(a) // nthreads) + 1
    f[nblocks, nthreads](a, b, c)
    return {"forall": forall, "c": c.copy_to_host()}
