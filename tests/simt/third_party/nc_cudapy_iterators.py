# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_iterators.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_iterators.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


@cuda.jit
def enumerator(x, error):
    count = 0

    for i, v in enumerate(x):
        if count != i:
            error[0] = 1
        if v != x[i]:
            error[0] = 2

        count += 1

    if count != len(x):
        error[0] = 3


@cuda.jit
def zipper(x, y, error):
    i = 0

    for xv, yv in zip(x, y):
        if xv != x[i]:
            error[0] = 1
        if yv != y[i]:
            error[0] = 2

        i += 1

    if i != len(x):
        error[0] = 3


def run():
    x = np.asarray((10, 9, 8, 7, 6))
    y = np.asarray((1, 2, 3, 4, 5))
    e1 = np.zeros(1, dtype=np.int32)
    enumerator[1, 1](x, e1)
    e2 = np.zeros(1, dtype=np.int32)
    zipper[1, 1](x, y, e2)
    return {"enumerate": e1, "zip": e2}
