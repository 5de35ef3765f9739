# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_atomics.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_atomics.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


def atomic_cas_1dim(res, old, ary, fill_val):
    gid = cuda.grid(1)
    if gid < res.size:
        old[gid] = cuda.atomic.cas(res, gid, fill_val, ary[gid])


def run():
    rng = np.random.default_rng(0)
    fill, unfill = -99, -1
    res = np.asarray([fill] * 50 + [unfill] * 50, dtype=np.int32)
    rng.shuffle(res)
    out = np.zeros_like(res)
    ary = rng.integers(1, 10, size=res.shape).astype(res.dtype)
    cuda_func = cuda.jit(atomic_cas_1dim)
    cuda_func[10, 10](res, out, ary, fill)
    return {"res": res, "out": out}
