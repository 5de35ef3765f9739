"""Row-wise L2 normalisation: out = x / sqrt(sum(x^2) + eps), one warp per row.

The mixed-precision idiom: one kernel computes in float32 for float16, bfloat16 and
float32 storage and in float64 for float64. The launcher passes `one`, a scalar of the
compute type; `x[row, c] * one` widens an element to it (exact), and every value derived
from `one` stays in it. numba compiles one specialisation per argument types, so float64
inputs get float64 arithmetic and the others float32, with no float64 instruction.
"""

import math

import numpy as np
import torch
from numba import cuda

import portkit

WARP = 32
EPS = 1e-6


@cuda.jit
def l2norm_fwd(x, out, norm, cols, eps, one):
    row = cuda.blockIdx.x
    lane = cuda.threadIdx.x
    s = one - one  # zero of the compute type (`one * 0` would promote to float64)
    for c in range(lane, cols, WARP):
        v = x[row, c] * one
        s += v * v
    off = WARP // 2
    while off > 0:
        s += cuda.shfl_down_sync(0xFFFFFFFF, s, off)
        off //= 2
    s = cuda.shfl_sync(0xFFFFFFFF, s, 0) + eps
    r = one / math.sqrt(s)
    for c in range(lane, cols, WARP):
        out[row, c] = x[row, c] * one * r  # rounded once, at the store
    if lane == 0:
        norm[row] = s


@cuda.jit
def l2norm_bwd(x, norm, dy, dx, cols, one):
    row = cuda.blockIdx.x
    lane = cuda.threadIdx.x
    r = one / math.sqrt(norm[row])
    d = one - one
    for c in range(lane, cols, WARP):
        d += (dy[row, c] * one) * (x[row, c] * one * r)
    off = WARP // 2
    while off > 0:
        d += cuda.shfl_down_sync(0xFFFFFFFF, d, off)
        off //= 2
    d = cuda.shfl_sync(0xFFFFFFFF, d, 0)
    for c in range(lane, cols, WARP):
        y = x[row, c] * one * r
        dx[row, c] = (dy[row, c] * one - y * d) * r


def compute_type(t: torch.Tensor):
    """float64 arithmetic for float64 storage, float32 for every narrower float."""
    return (np.float64, torch.float64) if t.dtype == torch.float64 else (np.float32, torch.float32)


@portkit.op(
    reference=lambda x: x / torch.sqrt((x * x).sum(-1, keepdim=True) + EPS),
    cases=portkit.cases.rows(
        shapes=[(3, 5), (2, 129)],
        dtypes=("float16", "bfloat16", "float32", "float64"),
        large=None,
    ),
    dtypes=("float16", "bfloat16", "float32", "float64"),
)
class L2Norm:
    def forward(k, x):
        rows, cols = x.shape
        scalar, stats = compute_type(x)
        out = k.empty_like(x)
        norm = k.empty((rows,), stats)
        if rows:
            k.l2norm_fwd[rows, WARP](x, out, norm, cols, scalar(EPS), scalar(1))
        return out, (x, norm)

    def backward(k, saved, dy):
        x, norm = saved
        rows, cols = x.shape
        scalar, _ = compute_type(x)
        dx = k.empty_like(x)
        if rows:
            k.l2norm_bwd[rows, WARP](x, norm, dy, dx, cols, scalar(1))
        return (dx,)
