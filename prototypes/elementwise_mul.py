"""out = a * b with its backward: da = dout * b, db = dout * a (one kernel, two outputs).

Layout as in vector_add.py and the twin: a grid-stride loop over 16-byte packs on a full
grid (one pack a thread), then a scalar tail; the twin moves each pack with one 16-byte
access, the prototype with `width` scalar ones (numba has no vector load)."""

import torch
from numba import cuda

import portkit

THREADS = 256
N_BENCH = 1 << 26  # portkit bench: 256 MiB per float32 tensor, five times an H100's L2


def grid_for(k, n, itemsize):
    """One block per THREADS packs of 16 bytes: a full grid, each thread one pack
    (prototypes/sigmoid.py says why, with the H100 figures)."""
    return portkit.cdiv(portkit.cdiv(n, 16 // itemsize), THREADS)


@cuda.jit
def mul_fwd(a, b, out, n):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    width = 16 // a.itemsize  # elements in one of the twin's 16-byte packs
    packs = n // width
    for p in range(start, packs, stride):
        for j in range(width):
            i = p * width + j  # portkit: allow-int64-index
            out[i] = a[i] * b[i]
    for i in range(packs * width + start, n, stride):
        out[i] = a[i] * b[i]


@cuda.jit
def mul_bwd(a, b, dout, da, db, n):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    width = 16 // a.itemsize
    packs = n // width
    for p in range(start, packs, stride):
        for j in range(width):
            i = p * width + j  # portkit: allow-int64-index
            g = dout[i]
            da[i] = g * b[i]
            db[i] = g * a[i]
    for i in range(packs * width + start, n, stride):
        g = dout[i]
        da[i] = g * b[i]
        db[i] = g * a[i]


@portkit.op(
    reference=torch.mul,
    baseline=torch.mul,
    cases=portkit.cases.elementwise(inputs=2, special=[float("inf"), -2.5, 0.0, 1e-30, 3.0]),
    bench=[portkit.cases.custom("float32-n67108864", [(N_BENCH,)] * 2)],
)
class ElementwiseMul:
    def forward(k, a, b):
        out = k.empty_like(a)
        n = a.numel()
        if n:
            k.mul_fwd[grid_for(k, n, a.element_size()), THREADS](a, b, out, n)
        return out, (a, b)

    def backward(k, saved, dout):
        a, b = saved
        da, db = k.empty_like(a), k.empty_like(b)
        n = a.numel()
        if n:
            k.mul_bwd[grid_for(k, n, a.element_size()), THREADS](a, b, dout, da, db, n)
        return da, db
