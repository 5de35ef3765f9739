"""out = a + b. The smallest op: no backward, two inputs.

The layout is the twin's (cuda_src/vector_add.cu), the one every elementwise example
here uses: a grid-stride loop over packs of 16 bytes (4 float32 or 2 float64) on a full
grid (one pack a thread), then a scalar tail. The twin moves a pack with one 16-byte load
or store; numba cannot load an array slice as one vector, so the prototype moves the
same elements with `width` scalar accesses, in the same thread. Indices are int64
(`allow-int64-index`), as the twin's `long long`: a tensor may pass 2^31 elements."""

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
def vector_add(a, b, out, n):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    width = 16 // a.itemsize  # elements in one of the twin's 16-byte packs
    packs = n // width
    for p in range(start, packs, stride):
        for j in range(width):
            i = p * width + j  # portkit: allow-int64-index
            out[i] = a[i] + b[i]
    for i in range(packs * width + start, n, stride):
        out[i] = a[i] + b[i]


@portkit.op(
    reference=torch.add,
    baseline=torch.add,
    cases=portkit.cases.elementwise(
        inputs=2, special=[float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e30]
    ),
    bench=[portkit.cases.custom("float32-n67108864", [(N_BENCH,)] * 2)],
)
class VectorAdd:
    def forward(k, a, b):
        out = k.empty_like(a)
        n = a.numel()
        if n:
            k.vector_add[grid_for(k, n, a.element_size()), THREADS](a, b, out, n)
        return out, ()
