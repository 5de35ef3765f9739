"""An op of constructs the example ops do not use: a 3-D grid over a 3-D tensor, a
local array, a range with a negative step, and a float32 device function: a blur
along the last dimension with weights exp(-d^2), normalised by the taps inside."""

import math

import torch
from numba import cuda, float32

import portkit


@cuda.jit(device=True)
def weight(d):
    return math.exp(-float32(d * d))


@cuda.jit
def blur3d(x, out, depth, rows, cols):
    c, r, z = cuda.grid(3)
    if z < depth and r < rows and c < cols:
        taps = cuda.local.array(3, dtype=float32)
        for d in range(2, -1, -1):
            taps[d] = weight(d - 1)
        acc = float32(0)
        norm = float32(0)
        for d in range(3):
            cc = c + d - 1
            if cc >= 0 and cc < cols:
                acc += taps[d] * x[z, r, cc]
                norm += taps[d]
        out[z, r, c] = acc / norm


def reference(x):
    w = torch.exp(-torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64))
    wide = torch.nn.functional.pad(x.double(), (1, 1))
    inside = torch.nn.functional.pad(torch.ones_like(x, dtype=torch.float64), (1, 1))
    acc = sum(w[d] * wide[..., d : d + x.shape[-1]] for d in range(3))
    norm = sum(w[d] * inside[..., d : d + x.shape[-1]] for d in range(3))
    return (acc / norm).to(x.dtype)


@portkit.op(
    reference=reference,
    cases=[
        portkit.cases.custom(f"float32-{'x'.join(map(str, s))}", [s], seed=i)
        for i, s in enumerate(((1, 1, 1), (2, 3, 5), (3, 4, 17)))
    ],
    dtypes=("float32",),
)
class Blur3d:
    def forward(k, x):
        depth, rows, cols = x.shape
        out = k.empty_like(x)
        grid = (portkit.cdiv(cols, 8), portkit.cdiv(rows, 4), depth)
        k.blur3d[grid, (8, 4, 1)](x, out, depth, rows, cols)
        return out, ()
