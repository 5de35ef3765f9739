# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_exception.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_exception.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


def foo(ary):
    x = cuda.threadIdx.x
    if x == 2:
        # NOTE: indexing with a out-of-bounds constant can fail at
        # compile-time instead (because the getitem is rewritten as a
        # static_getitem)
        ary.shape[-x]


def run():
    safe_foo = cuda.jit(debug=True, opt=False)(foo)
    safe_foo[1, 3](np.array([0, 1]))
    return {}
