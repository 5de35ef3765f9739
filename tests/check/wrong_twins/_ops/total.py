"""total(x): the sum of every element, a bank-only op for the wrong-twin bank (not one of
the project's ops): each block reduces its 256 elements in shared memory and adds its
partial sum to the float64 result with one atomic add."""

import torch
from numba import cuda, float64

import portkit

THREADS = 256


@cuda.jit
def total_partial(x, out, n):
    buf = cuda.shared.array(THREADS, float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[tid] = float64(x[i]) if i < n else float64(0)
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            buf[tid] += buf[tid + stride]
        cuda.syncthreads()
        stride //= 2
    if tid == 0:
        cuda.atomic.add(out, 0, buf[0])


def reference(x):
    return x.double().sum().reshape(1)


@portkit.op(
    reference=reference,
    cases=[
        portkit.cases.custom("float32-n1", [(1,)]),
        portkit.cases.custom("float32-n1000", [(1000,)]),
        portkit.cases.custom("float64-n4097", [(4097,)], "float64"),
        portkit.cases.custom("float32-n4194304", [(4194304,)], gpu_only=True),
    ],
)
class Total:
    def forward(k, x):
        out = k.empty((1,), torch.float64)
        out.zero_()
        n = x.numel()
        if n:
            k.total_partial[portkit.cdiv(n, THREADS), THREADS](x, out, n)
        return out, ()
