"""out = a + b, one thread per element. The smallest op: no backward, two inputs."""

import torch
from numba import cuda

import portkit

THREADS = 256


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]


@portkit.op(
    reference=torch.add,
    cases=portkit.cases.elementwise(
        inputs=2, special=[float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e30]
    ),
)
class VectorAdd:
    def forward(k, a, b):
        out = k.empty_like(a)
        n = a.numel()
        if n:
            k.vector_add[portkit.cdiv(n, THREADS), THREADS](a, b, out, n)
        return out, ()
