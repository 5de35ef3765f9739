"""Row-wise softmax over a 2-D tensor: one block per row, shared-memory tree
reductions between syncthreads. Sums and maxima are kept in float64 shared memory
for both dtypes, so the twin must accumulate in double too.

That float64 is a choice, so its lines say `# portkit: allow-float64`. The reduction
loop says `allow-int64-index`: numba types int32 arithmetic as int64 anyway, so no
spelling here gives 32-bit index math (PTX of three variants checked)."""

import math

import torch
from numba import cuda, float64

import portkit

THREADS = 128  # a power of two: the tree reduction halves it


@cuda.jit(device=True)
def block_reduce(buf, tid, use_max):
    """Tree-reduce buf[0:THREADS] into buf[0]; every thread of the block must call it."""
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            if use_max:
                # portkit: allow-float64 allow-int64-index
                buf[tid] = max(buf[tid], buf[tid + stride])
            else:
                # portkit: allow-float64 allow-int64-index
                buf[tid] += buf[tid + stride]
        cuda.syncthreads()
        stride //= 2  # portkit: allow-int64-index
    return buf[0]


@cuda.jit
def softmax_fwd(x, out, cols):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    buf = cuda.shared.array(THREADS, dtype=float64)

    m = -math.inf  # portkit: allow-float64
    for c in range(tid, cols, THREADS):
        m = max(m, x[row, c])  # portkit: allow-float64
    buf[tid] = m
    cuda.syncthreads()
    m = block_reduce(buf, tid, True)
    cuda.syncthreads()  # everyone has read buf[0] before it is overwritten

    s = 0.0
    for c in range(tid, cols, THREADS):
        s += math.exp(x[row, c] - m)  # portkit: allow-float64
    buf[tid] = s
    cuda.syncthreads()
    s = block_reduce(buf, tid, False)

    for c in range(tid, cols, THREADS):
        out[row, c] = math.exp(x[row, c] - m) / s  # portkit: allow-float64


@cuda.jit
def softmax_bwd(y, dy, dx, cols):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    buf = cuda.shared.array(THREADS, dtype=float64)

    dot = 0.0
    for c in range(tid, cols, THREADS):
        dot += y[row, c] * dy[row, c]  # portkit: allow-float64
    buf[tid] = dot
    cuda.syncthreads()
    dot = block_reduce(buf, tid, False)

    for c in range(tid, cols, THREADS):
        dx[row, c] = y[row, c] * (dy[row, c] - dot)  # portkit: allow-float64


def reference(x):
    return torch.softmax(x, dim=-1)


@portkit.op(
    reference=reference,
    cases=portkit.cases.rows(special=[0.3, -100000.0, 100000.0, 0.5, -0.5, float("-inf")]),
)
class Softmax:
    def check_inputs(x):
        if x.dim() != 2:
            raise portkit.InputError(f"softmax takes a 2-D tensor, got {x.dim()}-D")

    def forward(k, x):
        out = k.empty_like(x)
        rows, cols = x.shape
        if rows and cols:
            k.softmax_fwd[rows, THREADS](x, out, cols)
        return out, (out,)

    def backward(k, saved, dy):
        (y,) = saved
        dx = k.empty_like(y)
        rows, cols = y.shape
        if rows and cols:
            k.softmax_bwd[rows, THREADS](y, dy, dx, cols)
        return (dx,)
