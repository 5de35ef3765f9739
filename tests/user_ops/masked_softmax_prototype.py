"""Attention-style row softmax with a boolean mask and a scale, written from README.md
and docs/authoring.md alone: y = softmax(scale * x + (0 where mask else -inf)) over the
last dimension, forward and backward, in float32, float16 and bfloat16.

One warp per row, float32 arithmetic for every storage dtype, one rounding at the store.
The forward saves the row's log-sum-exp in float32 (as FlashAttention does) and the
backward recomputes y from it, so the backward never sees a y rounded to half precision.
The mask is a structured input made by the case (`inputs=`): causal, or random with the
diagonal kept, so no row is fully masked and neither launcher nor reference clamps.
"""

import math

import torch
from numba import cuda, float32
from portkit.cases import custom

import portkit

WARP = 32


@cuda.jit
def masked_softmax_fwd(x, mask, y, lse, cols, scale):
    row = cuda.blockIdx.x
    lane = cuda.threadIdx.x
    sc = float32(scale)
    m = float32(-math.inf)
    for c in range(lane, cols, WARP):
        if mask[row, c]:
            m = max(m, float32(x[row, c]) * sc)
    off = WARP // 2
    while off > 0:
        m = max(m, cuda.shfl_xor_sync(0xFFFFFFFF, m, off))
        off //= 2
    s = float32(0.0)
    for c in range(lane, cols, WARP):
        if mask[row, c]:
            s += math.exp(float32(x[row, c]) * sc - m)
    off = WARP // 2
    while off > 0:
        s += cuda.shfl_xor_sync(0xFFFFFFFF, s, off)
        off //= 2
    for c in range(lane, cols, WARP):
        if mask[row, c]:
            y[row, c] = math.exp(float32(x[row, c]) * sc - m) / s
        else:
            y[row, c] = float32(0.0)
    if lane == 0:
        lse[row] = m + math.log(s)


@cuda.jit
def masked_softmax_bwd(x, mask, lse, scale, dy, dx, cols):
    row = cuda.blockIdx.x
    lane = cuda.threadIdx.x
    sc = scale[0]
    top = lse[row]
    d = float32(0.0)
    for c in range(lane, cols, WARP):
        if mask[row, c]:
            d += float32(dy[row, c]) * math.exp(float32(x[row, c]) * sc - top)
    off = WARP // 2
    while off > 0:
        d += cuda.shfl_xor_sync(0xFFFFFFFF, d, off)
        off //= 2
    for c in range(lane, cols, WARP):
        if mask[row, c]:
            p = math.exp(float32(x[row, c]) * sc - top)
            dx[row, c] = sc * p * (float32(dy[row, c]) - d)
        else:
            dx[row, c] = float32(0.0)


def reference(x, mask, scale):
    return torch.softmax((x * scale).masked_fill(~mask, float("-inf")), dim=-1)


def causal(rows, cols):
    """x ~ 4 N(0, 1) (peaked rows), a lower-triangular mask: row r sees columns 0..r."""

    def make(generator, dtype, device):
        x = 4 * torch.randn(rows, cols, generator=generator)
        return x.to(dtype), torch.ones(rows, cols, dtype=torch.bool).tril()

    return make


def padded(rows, cols):
    """x ~ N(0, 1), a random keep-mask (3 in 4 kept) with column r % cols always kept."""

    def make(generator, dtype, device):
        x = torch.randn(rows, cols, generator=generator)
        mask = torch.rand(rows, cols, generator=generator) < 0.75
        mask[torch.arange(rows), torch.arange(rows) % cols] = True
        return x.to(dtype), mask

    return make


def case(name, dtype, mask, shape, scale, seed):
    return custom(
        name,
        [shape, shape],
        dtype,
        input_dtypes=(dtype, "bool"),
        inputs=mask(*shape),
        extra=(scale,),
        seed=seed,
    )


CASES = [
    case("float32-causal", "float32", causal, (37, 37), 0.5, 0),
    case("float32-padded", "float32", padded, (5, 129), 0.125, 1),
    case("float16-causal", "float16", causal, (40, 64), 0.125, 2),
    case("float16-padded", "float16", padded, (3, 300), 1.0, 3),
    case("bfloat16-causal", "bfloat16", causal, (33, 96), 0.125, 4),
    case("bfloat16-padded", "bfloat16", padded, (6, 77), 0.3, 5),
]


@portkit.op(
    reference=reference,
    cases=CASES,
    dtypes=("float32", "float16", "bfloat16"),
    input_dtypes=(None, "bool"),
)
class MaskedSoftmax:
    def forward(k, x, mask, scale):
        rows, cols = x.shape
        y = k.empty_like(x)
        lse = k.empty((rows,), torch.float32)
        if rows:
            k.masked_softmax_fwd[rows, WARP](x, mask, y, lse, cols, scale)
        # backward needs the scale, and saves hold tensors only (authoring.md)
        saved_scale = k.empty((1,), torch.float32).fill_(scale)
        return y, (x, mask, lse, saved_scale)

    def backward(k, saved, dy):
        x, mask, lse, scale = saved
        rows, cols = x.shape
        dx = k.empty_like(x)
        if rows:
            k.masked_softmax_bwd[rows, WARP](x, mask, lse, scale, dy, dx, cols)
        return dx, None, None  # no gradient for the mask, nor for the scale (a scalar)
