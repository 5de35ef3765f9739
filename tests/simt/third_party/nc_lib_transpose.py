# Source: numba-cuda 0.30.4, numba/cuda/kernels/transpose.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/kernels/transpose.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
# The library's cuda.kernels.transpose kernel, its closure (tile_shape, dt) made module
# globals: tiles of 4 x 4 threads (the library derives them from the device's
# MAX_THREADS_PER_BLOCK).
import numpy as np
from numba import cuda
from numba.cuda import float32

dt = float32
tile_width = 4
tile_height = 4
tile_shape = (tile_height, tile_width + 1)


@cuda.jit
def kernel(input, output):
    tile = cuda.shared.array(shape=tile_shape, dtype=dt)

    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockIdx.x * cuda.blockDim.x
    by = cuda.blockIdx.y * cuda.blockDim.y
    x = by + tx
    y = bx + ty

    if by + ty < input.shape[0] and bx + tx < input.shape[1]:
        tile[ty, tx] = input[by + ty, bx + tx]
    cuda.syncthreads()
    if y < output.shape[0] and x < output.shape[1]:
        output[y, x] = tile[tx, ty]


def run():
    a = np.arange(7 * 10, dtype=np.float32).reshape(7, 10)
    b = np.zeros((10, 7), dtype=np.float32)
    # one block per tile, plus one for remainders
    blocks = int(b.shape[0] / tile_height + 1), int(b.shape[1] / tile_width + 1)
    # one thread per tile element
    threads = tile_height, tile_width
    kernel[blocks, threads](a, b)
    return {"b": b}
