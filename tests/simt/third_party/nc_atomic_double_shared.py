# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_atomics.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_atomics.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
# The test builds this kernel from a template with exec(); here {func} is
# cuda.atomic.add, written out.
import numpy as np
from numba import cuda
from numba.cuda import float64


def atomic_double_shared(res, ary):
    tid = cuda.threadIdx.x
    smary = cuda.shared.array(32, float64)
    smary[tid] = ary[tid]
    smres = cuda.shared.array(1, float64)
    if tid == 0:
        smres[0] = res[0]
    cuda.syncthreads()
    cuda.atomic.add(smres, 0, smary[tid])
    cuda.syncthreads()
    if tid == 0:
        res[0] = smres[0]


def run():
    kernel = cuda.jit("void(float64[:], float64[:])")(atomic_double_shared)
    ary = np.arange(32, dtype=np.float64) * 0.25
    res = np.array([1.5])
    kernel[1, 32](res, ary)
    return {"res": res}
