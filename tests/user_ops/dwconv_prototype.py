"""Depthwise 1-D convolution (valid, kernel size 3), written from the README and
docs/authoring.md alone.

Forward: one block per (tile of outputs, channel, batch) on a 3-D grid; the tile and its
halo are staged in shared memory. Backward: dx by the transposed convolution, dw summed
over batch and length with float atomics (compared with the summation-order bound).
"""

import numpy as np
import torch
from numba import cuda

import portkit

TILE = 128
K = 3
HALO = TILE + K - 1  # a shared shape numba can type: a module-level constant


@cuda.jit
def dwconv_fwd(x, w, out, length, out_length):
    t0 = cuda.blockIdx.x * TILE
    c = cuda.blockIdx.y
    b = cuda.blockIdx.z
    tid = cuda.threadIdx.x
    tile = cuda.shared.array(HALO, x.dtype)
    for j in range(tid, HALO, TILE):
        if t0 + j < length:
            tile[j] = x[b, c, t0 + j]
    cuda.syncthreads()
    i = t0 + tid
    if i < out_length:
        acc = tile[tid] * w[c, 0]
        for k in range(1, K):
            acc += tile[tid + k] * w[c, k]
        out[b, c, i] = acc


@cuda.jit
def dwconv_bwd_x(dout, w, dx, length, out_length, one):
    # dx[b, c, i] = sum_k dout[b, c, i - k] * w[c, k]
    c = cuda.blockIdx.y
    b = cuda.blockIdx.z
    i = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    if i < length:
        acc = one - one  # zero in the data's type
        for k in range(K):
            j = i - k
            if j >= 0 and j < out_length:
                acc += dout[b, c, j] * w[c, k]
        dx[b, c, i] = acc


@cuda.jit
def dwconv_zero(dw):
    c, k = cuda.grid(2)
    if c < dw.shape[0] and k < dw.shape[1]:
        dw[c, k] = 0


@cuda.jit
def dwconv_bwd_w(x, dout, dw, out_length):
    # dw[c, k] = sum over b, i of dout[b, c, i] * x[b, c, i + k]
    c = cuda.blockIdx.y
    b = cuda.blockIdx.z
    i = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    if i < out_length:
        for k in range(K):
            cuda.atomic.add(dw, (c, k), dout[b, c, i] * x[b, c, i + k])


def reference(x, w):
    return torch.nn.functional.conv1d(x, w.unsqueeze(1), groups=x.shape[1])


CASES = [
    portkit.cases.custom("f32-2x3x10", [(2, 3, 10), (3, K)], "float32", seed=1),
    portkit.cases.custom("f32-1x2x300", [(1, 2, 300), (2, K)], "float32", seed=2),
    portkit.cases.custom("f64-2x2x131", [(2, 2, 131), (2, K)], "float64", seed=3),
    portkit.cases.custom("grad", [(1, 2, 9), (2, K)], "float64", seed=4, gradcheck=True),
]


@portkit.op(reference=reference, cases=CASES, same_shape=False)
class DwConv:
    def forward(k, x, w):
        batch, channels, length = x.shape
        out_length = length - K + 1
        out = k.empty((batch, channels, out_length), x.dtype)
        if out.numel():
            grid = (portkit.cdiv(out_length, TILE), channels, batch)
            k.dwconv_fwd[grid, TILE](x, w, out, length, out_length)
        return out, (x, w)

    def backward(k, saved, dout):
        x, w = saved
        batch, channels, length = x.shape
        out_length = dout.shape[2]
        one = np.float64(1) if x.dtype == torch.float64 else np.float32(1)
        dx = k.empty_like(x)
        dw = k.empty_like(w)
        k.dwconv_zero[(channels, 1), (1, K)](dw)
        if x.numel():
            grid = (portkit.cdiv(length, TILE), channels, batch)
            k.dwconv_bwd_x[grid, TILE](dout, w, dx, length, out_length, one)
        if dout.numel():
            grid = (portkit.cdiv(out_length, TILE), channels, batch)
            k.dwconv_bwd_w[grid, TILE](x, dout, dw, out_length)
        return dx, dw
