"""Fused bias + GELU in bfloat16 end to end, y = gelu(x + bias) (the erf form, as
torch.nn.functional.gelu), written from README.md and docs/authoring.md alone: bfloat16
inputs, outputs and gradients, float32 arithmetic and accumulation inside, one rounding at
each store.

The backward writes dx = dy * gelu'(x + bias) and sums the bias gradient over rows in
float32 from the unrounded dx (recomputed, not read back from the bfloat16 dx).
"""

import math

import torch
from numba import cuda, float32
from portkit.cases import custom

import portkit

THREADS = 128
INV_SQRT2 = float32(0.7071067811865476)
INV_SQRT_2PI = float32(0.3989422804014327)
HALF = float32(0.5)
ONE = float32(1.0)


@cuda.jit(device=True)
def gelu_grad(z):
    cdf = HALF * (ONE + math.erf(z * INV_SQRT2))
    return cdf + z * INV_SQRT_2PI * math.exp(-HALF * z * z)


@cuda.jit
def bias_gelu_fwd(x, bias, y, rows, cols):
    i = cuda.grid(1)
    if i < rows * cols:
        r = i // cols
        c = i - r * cols
        z = float32(x[r, c]) + float32(bias[c])
        y[r, c] = HALF * z * (ONE + math.erf(z * INV_SQRT2))


@cuda.jit
def bias_gelu_bwd(x, bias, dy, dx, rows, cols):
    i = cuda.grid(1)
    if i < rows * cols:
        r = i // cols
        c = i - r * cols
        z = float32(x[r, c]) + float32(bias[c])
        dx[r, c] = float32(dy[r, c]) * gelu_grad(z)


@cuda.jit
def bias_gelu_dbias(x, bias, dy, dbias, rows, cols):
    c = cuda.grid(1)
    if c < cols:
        b = float32(bias[c])
        s = float32(0.0)
        for r in range(rows):
            s += float32(dy[r, c]) * gelu_grad(float32(x[r, c]) + b)
        dbias[c] = s


def reference(x, bias):
    return torch.nn.functional.gelu(x + bias)


def case(name, rows, cols, seed, **options):
    return custom(name, [(rows, cols), (cols,)], "bfloat16", seed=seed, **options)


CASES = [
    case("bfloat16-1x1", 1, 1, 0),
    case("bfloat16-3x129", 3, 129, 1),
    case("bfloat16-64x300", 64, 300, 2),
    case("bfloat16-512x40", 512, 40, 3),
    case("bfloat16-special", 4, 33, 4, special=[0.0, -0.0, 3.0, -3.0, 10.0, -10.0]),
]


@portkit.op(reference=reference, cases=CASES, dtypes=("bfloat16",), same_shape=False)
class BiasGelu:
    def forward(k, x, bias):
        rows, cols = x.shape
        y = k.empty_like(x)
        if y.numel():
            k.bias_gelu_fwd[portkit.cdiv(rows * cols, THREADS), THREADS](x, bias, y, rows, cols)
        return y, (x, bias)

    def backward(k, saved, dy):
        x, bias = saved
        rows, cols = x.shape
        dx, dbias = k.empty_like(x), k.empty_like(bias)
        if dx.numel():
            grid = portkit.cdiv(rows * cols, THREADS)
            k.bias_gelu_bwd[grid, THREADS](x, bias, dy, dx, rows, cols)
        if cols:
            k.bias_gelu_dbias[portkit.cdiv(cols, THREADS), THREADS](x, bias, dy, dbias, rows, cols)
        return dx, dbias
