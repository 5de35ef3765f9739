"""Row-wise softmax over a 2-D tensor, like softmax.py, with warp-shuffle block reductions.

One block of THREADS = 128 threads (WARPS = 4 warps of 32) per row. Every reduction
(max and sum in the forward, the dot product in the backward) runs in three stages,
in a fixed order the twin repeats exactly:

1. each thread accumulates its columns tid, tid + THREADS, ... in float64, in order;
2. a butterfly in each warp: ``cuda.shfl_xor_sync`` with offsets 16, 8, 4, 2, 1, so
   lane 0 ends with ((v0 + v16) + (v8 + v24)) + ... (every lane ends with the same
   value, since a + b == b + a bit for bit);
3. lane 0 of each warp writes its partial to a float64 shared array of WARPS entries;
   after a barrier every thread folds partials[0], partials[1], ... left to right, and a
   second barrier keeps the next reduction from overwriting partials still being read.

The float64 accumulation is a choice, as in softmax.py, so its lines say
`# portkit: allow-float64`; the column loop's index says `allow-int64-index` (numba
types int32 arithmetic as int64 anyway)."""

import math

import torch
from numba import cuda, float64

import portkit

THREADS = 128  # a multiple of WARP: 4 whole warps
WARP = 32
WARPS = THREADS // WARP
FULL_MASK = 0xFFFFFFFF  # all 32 lanes take part in every shuffle


@cuda.jit(device=True)
def warp_reduce(v, use_max):
    """Butterfly over the 32 lanes of the calling warp (offsets 16, 8, 4, 2, 1).

    Every lane of the warp must call it (FULL_MASK); every lane gets the result."""
    offset = WARP // 2
    while offset > 0:
        other = cuda.shfl_xor_sync(FULL_MASK, v, offset)
        if use_max:
            v = max(v, other)  # portkit: allow-float64
        else:
            v += other  # portkit: allow-float64
        offset //= 2
    return v


@cuda.jit(device=True)
def block_reduce(v, partials, tid, use_max):
    """Reduce one float64 per thread over the block; every thread gets the result.

    Every thread of the block must call it: it holds two barriers."""
    lane = tid % WARP
    warp = tid // WARP
    v = warp_reduce(v, use_max)
    if lane == 0:
        partials[warp] = v
    cuda.syncthreads()
    total = partials[0]
    for w in range(1, WARPS):
        if use_max:
            total = max(total, partials[w])  # portkit: allow-float64
        else:
            total += partials[w]  # portkit: allow-float64
    cuda.syncthreads()  # everyone has read partials before the next call overwrites them
    return total


@cuda.jit
def softmax_warp_fwd(x, out, cols):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    partials = cuda.shared.array(WARPS, dtype=float64)

    m = -math.inf  # portkit: allow-float64
    for c in range(tid, cols, THREADS):
        m = max(m, x[row, c])  # portkit: allow-float64
    m = block_reduce(m, partials, tid, True)

    s = 0.0
    for c in range(tid, cols, THREADS):
        s += math.exp(x[row, c] - m)  # portkit: allow-float64
    s = block_reduce(s, partials, tid, False)

    for c in range(tid, cols, THREADS):
        out[row, c] = math.exp(x[row, c] - m) / s  # portkit: allow-float64


@cuda.jit
def softmax_warp_bwd(y, dy, dx, cols):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    partials = cuda.shared.array(WARPS, dtype=float64)

    dot = 0.0
    for c in range(tid, cols, THREADS):
        dot += y[row, c] * dy[row, c]  # portkit: allow-float64
    dot = block_reduce(dot, partials, tid, False)

    for c in range(tid, cols, THREADS):
        dx[row, c] = y[row, c] * (dy[row, c] - dot)  # portkit: allow-float64


def reference(x):
    return torch.softmax(x, dim=-1)


@portkit.op(
    reference=reference,
    cases=portkit.cases.rows(special=[0.3, -100000.0, 100000.0, 0.5, -0.5, float("-inf")]),
)
class SoftmaxWarp:
    def check_inputs(x):
        if x.dim() != 2:
            raise portkit.InputError(f"softmax_warp takes a 2-D tensor, got {x.dim()}-D")

    def forward(k, x):
        out = k.empty_like(x)
        rows, cols = x.shape
        if rows and cols:
            k.softmax_warp_fwd[rows, THREADS](x, out, cols)
        return out, (out,)

    def backward(k, saved, dy):
        (y,) = saved
        dx = k.empty_like(y)
        rows, cols = y.shape
        if rows and cols:
            k.softmax_warp_bwd[rows, THREADS](y, dy, dx, cols)
        return (dx,)
