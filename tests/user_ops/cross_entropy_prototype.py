import math

import torch
from numba import cuda, float64

import portkit

THREADS = 64


@cuda.jit
def cross_entropy_fwd(logits, target, loss, lse, cols):
    # one block per row: max, then log-sum-exp, in shared memory
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    buf = cuda.shared.array(THREADS, float64)
    m = -math.inf
    for c in range(tid, cols, THREADS):
        m = max(m, float64(logits[row, c]))
    buf[tid] = m
    cuda.syncthreads()
    s = THREADS // 2
    while s > 0:
        if tid < s:
            buf[tid] = max(buf[tid], buf[tid + s])
        cuda.syncthreads()
        s //= 2
    m = buf[0]
    cuda.syncthreads()
    acc = 0.0
    for c in range(tid, cols, THREADS):
        acc += math.exp(float64(logits[row, c]) - m)
    buf[tid] = acc
    cuda.syncthreads()
    s = THREADS // 2
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        total = m + math.log(buf[0])
        lse[row] = total
        loss[row] = total - float64(logits[row, target[row]])


@cuda.jit
def cross_entropy_bwd(logits, target, lse, dloss, dlogits, cols):
    row = cuda.blockIdx.x
    for c in range(cuda.threadIdx.x, cols, THREADS):
        p = math.exp(float64(logits[row, c]) - lse[row])
        if c == target[row]:
            p -= 1.0
        dlogits[row, c] = p * float64(dloss[row])


def reference(logits, target):
    return torch.nn.functional.cross_entropy(logits, target, reduction="none")


CASES = [
    portkit.cases.custom(
        "rows3",
        [(3, 10), (3,)],
        "float32",
        input_dtypes=("float32", "int64"),
        int_range=(0, 10),
        seed=1,
    ),
    portkit.cases.custom(
        "rows5x129",
        [(5, 129), (5,)],
        "float32",
        input_dtypes=("float32", "int64"),
        int_range=(0, 129),
        seed=2,
    ),
    portkit.cases.custom(
        "grad",
        [(4, 33), (4,)],
        "float64",
        input_dtypes=("float64", "int64"),
        int_range=(0, 33),
        seed=3,
        gradcheck=True,
    ),
]


@portkit.op(reference=reference, cases=CASES, input_dtypes=(None, "int64"), same_shape=False)
class CrossEntropy:
    def forward(k, logits, target):
        rows, cols = logits.shape
        loss = k.empty((rows,), logits.dtype)
        lse = k.empty((rows,), torch.float64)
        if rows:
            k.cross_entropy_fwd[rows, THREADS](logits, target, loss, lse, cols)
        return loss, (logits, target, lse)

    def backward(k, saved, dloss):
        logits, target, lse = saved
        rows, cols = logits.shape
        dlogits = k.empty_like(logits)
        if rows:
            k.cross_entropy_bwd[rows, THREADS](logits, target, lse, dloss, dlogits, cols)
        return dlogits, None
