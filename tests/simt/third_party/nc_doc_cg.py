# Source: numba-cuda 0.30.4, numba/cuda/tests/doc_examples/test_cg.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/doc_examples/test_cg.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda
from numba.cuda import int32

# Our kernel will take a 2D int32 array as an argument
sig = (int32[:, ::1],)


@cuda.jit(sig)
def sequential_rows(M):
    col = cuda.grid(1)
    g = cuda.cg.this_grid()

    rows = M.shape[0]
    cols = M.shape[1]

    for row in range(1, rows):
        opposite = cols - col - 1
        # Each row's elements are one greater than the previous row
        M[row, col] = M[row - 1, opposite] + 1
        # Wait until all threads have written their column element,
        # and that the write is visible to all other threads
        g.sync()


def run():
    A = np.zeros((16, 64), dtype=np.int32)  # the example's 1024 x 1024, smaller
    blockdim = 32
    griddim = A.shape[1] // blockdim
    sequential_rows[griddim, blockdim](A)
    return {"A": A}


def expected():
    """What the example asserts (its reference, at this size): row r holds r."""
    return {"A": np.tile(np.arange(16, dtype=np.int32), (64, 1)).T.copy()}
