# Source: numba-cuda 0.30.4, numba/cuda/tests/doc_examples/test_ufunc.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/doc_examples/test_ufunc.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


# A kernel calling a ufunc (sin, in this case)
@cuda.jit
def f(r, x):
    # Compute sin(x) with result written to r
    np.sin(x, r)


def run():
    x = np.arange(10, dtype=np.float32) - 5
    r = np.zeros_like(x)
    f[1, 1](r, x)
    return {"r": r}
