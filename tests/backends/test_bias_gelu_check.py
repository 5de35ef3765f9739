"""A float32 tanh-GELU op with a bias whose gradient is a column sum over 64 rows: the
simulator and the CPU twin agree on it bit for bit (tanhf is portkit_math.h's in both),
so ``portkit check`` passes on a CPU machine, as it does on a GPU."""

from __future__ import annotations

import pytest

from portkit.backends.twin_cpu.build import find_compiler

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler on this machine")

PROTOTYPE = """
import math

import torch
from numba import cuda, float32

import portkit

ROWS, COLS = 64, 1000
K = 0.7978845608028654
A = 0.044715


def reference(x, b):
    return torch.nn.functional.gelu(x + b, approximate="tanh")


@cuda.jit
def bias_gelu_fwd(x, b, y, rows, cols):
    i = cuda.grid(1)
    if i < rows * cols:
        r = i // cols
        c = i % cols
        u = x[r, c] + b[c]
        t = math.tanh(float32(K) * (u + float32(A) * u * u * u))
        y[r, c] = float32(0.5) * u * (float32(1) + t)


@cuda.jit
def bias_gelu_bwd(x, b, dy, dx, db, rows, cols):
    c = cuda.grid(1)
    if c < cols:
        acc = float32(0)
        for r in range(rows):
            u = x[r, c] + b[c]
            t = math.tanh(float32(K) * (u + float32(A) * u * u * u))
            dt = (float32(1) - t * t) * float32(K) * (float32(1) + float32(3) * float32(A) * u * u)
            g = dy[r, c] * (float32(0.5) * (float32(1) + t) + float32(0.5) * u * dt)
            dx[r, c] = g
            acc += g
        db[c] = acc


@portkit.op(
    reference=reference,
    cases=[portkit.cases.custom("rows64", [(ROWS, COLS), (COLS,)], "float32")],
    same_shape=False,
)
class BiasGelu:
    def forward(k, x, b):
        y = k.empty_like(x)
        rows, cols = x.shape
        k.bias_gelu_fwd[portkit.cdiv(rows * cols, 256), 256](x, b, y, rows, cols)
        return y, (x, b)

    def backward(k, saved, dy):
        x, b = saved
        rows, cols = x.shape
        dx = k.empty_like(x)
        db = k.empty_like(b)
        k.bias_gelu_bwd[portkit.cdiv(cols, 128), 128](x, b, dy, dx, db, rows, cols)
        return dx, db
"""

TWIN = r"""
#include <cuda_runtime.h>

#define K 0.7978845608028654f
#define A 0.044715f

extern "C" __global__ void bias_gelu_fwd(const float* x, const float* b, float* y, long long rows,
                                         long long cols) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        const float u = x[i] + b[i % cols];
        const float t = tanhf(K * (u + A * u * u * u));
        y[i] = 0.5f * u * (1.0f + t);
    }
}

extern "C" __global__ void bias_gelu_bwd(const float* x, const float* b, const float* dy,
                                         float* dx, float* db, long long rows, long long cols) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        float acc = 0.0f;
        for (long long r = 0; r < rows; ++r) {
            const float u = x[r * cols + c] + b[c];
            const float t = tanhf(K * (u + A * u * u * u));
            const float dt = (1.0f - t * t) * K * (1.0f + 3.0f * A * u * u);
            const float g = dy[r * cols + c] * (0.5f * (1.0f + t) + 0.5f * u * dt);
            dx[r * cols + c] = g;
            acc += g;
        }
        db[c] = acc;
    }
}
"""


def test_bias_gelu_passes_check_on_the_cpu(make_project, cli):
    root = make_project({"bias_gelu": (PROTOTYPE, TWIN)})
    result = cli(root, "check", "bias_gelu")
    assert result.exit_code == 0, result.output
    assert "twin-cpu" in result.output
