"""Kernels with one planted bug each, for the simulator to catch.

``# BUG: <kernel>`` marks the line the simulator must report; ``# OTHER: <kernel>`` the
line of the other access of a race. Tests find the lines by these markers.
"""

from numba import cuda, float32

THREADS = 128


@cuda.jit
def off_by_one(x, out, n):
    i = cuda.grid(1)
    if i <= n:  # seed 000's bound: one thread too many
        out[i] = x[i]  # BUG: off_by_one


@cuda.jit
def negative_index(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] - x[i - 1]  # BUG: negative_index


@cuda.jit
def missing_syncthreads(x, out, n):
    buf = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[tid] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            buf[tid] += buf[tid + stride]  # BUG: missing_syncthreads  # OTHER: missing_syncthreads
        # the cuda.syncthreads() that belongs here is missing
        stride //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def stencil_without_barrier(x, out, n):
    buf = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[tid] = x[i]  # OTHER: stencil_without_barrier
    if tid > 0:
        out[i] = buf[tid] - buf[tid - 1]  # BUG: stencil_without_barrier


@cuda.jit
def blocks_share_output(x, out, n):
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < n:
        out[tid] = x[i]  # BUG: blocks_share_output  # OTHER: blocks_share_output


@cuda.jit
def uninitialised_shared(x, out, n):
    buf = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if tid < THREADS // 2:
        buf[tid] = x[i]
    cuda.syncthreads()
    out[i] = buf[tid]  # BUG: uninitialised_shared


@cuda.jit
def uninitialised_local(x, out, n):
    acc = cuda.local.array(4, float32)
    i = cuda.grid(1)
    for k in range(3):
        acc[k] = x[i]
    out[i] = acc[0] + acc[3]  # BUG: uninitialised_local


@cuda.jit
def divergent_syncthreads(x, out, n):
    buf = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < n:
        buf[tid] = x[i]
        cuda.syncthreads()  # BUG: divergent_syncthreads
        out[i] = buf[THREADS - 1 - tid]  # USE: divergent_syncthreads


@cuda.jit
def shuffle_lane_missing(x, out, n):
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    v = x[i]
    if lane < 16:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, 16)  # BUG: shuffle_lane_missing
    out[i] = v


@cuda.jit
def shuffle_reads_outside_mask(x, out, n):
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    v = x[i]
    if lane < 16:
        v += cuda.shfl_down_sync(0x0000FFFF, v, 8)  # BUG: shuffle_reads_outside_mask
    out[i] = v


@cuda.jit
def different_barriers(x, out, n):
    tid = cuda.threadIdx.x
    if tid < 64:
        cuda.syncthreads()  # BUG: different_barriers
    else:
        cuda.syncthreads()  # OTHER: different_barriers
    out[cuda.grid(1)] = x[cuda.grid(1)]


@cuda.jit
def dynamic_shared_too_small(x, out, n):
    buf = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    buf[tid] = x[cuda.grid(1)]  # BUG: dynamic_shared_too_small
    cuda.syncthreads()
    out[cuda.grid(1)] = buf[tid]


@cuda.jit
def row_col_2d_overrun(x, out, rows, cols):
    c, r = cuda.grid(2)
    if r < rows and c <= cols:
        out[r, c] = x[r, c]  # BUG: row_col_2d_overrun


@cuda.jit
def neighbour_without_barrier(x, out, n):
    # Held out of the simulator's design: reads the neighbour's slot, which the
    # neighbour does write, but in the same barrier interval (no cuda.syncthreads()).
    s = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i]  # BUG: neighbour_without_barrier
    out[i] = s[(t + 1) % THREADS]  # OTHER: neighbour_without_barrier
