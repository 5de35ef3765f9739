"""Sigmoid as torch computes it, 1 / (1 + exp(-x)): safe at the extremes (x = -100000:
exp overflows to inf and 1 / inf is 0; x = 100000: exp underflows to 0 and gives 1),
with no inf/inf as exp(x) / (1 + exp(x)) would give. Backward from the saved output.

Constants are float32(1): a bare `1` is an int64 literal, and numba types int64 with
float32 as float64, so float32 inputs were computed in float64 (`portkit lint` found
7 f64 instructions in sigmoid_fwd, 5 in sigmoid_bwd). float32(1) with a float64 input
still gives float64, so one kernel serves both dtypes.

The layout is the twin's (cuda_src/sigmoid.cu): a grid-stride loop over packs of 16
bytes (4 float32 or 2 float64), then a scalar tail. The twin moves a pack with one
16-byte load and store; numba has no vector load of an array slice, so the prototype
moves the same elements with `width` scalar accesses, in the same thread and order.
Indices are int64 (`allow-int64-index`), as the twin's `long long`: a tensor may hold
more than 2^31 elements."""

import math

import torch
from numba import cuda, float32

import portkit

THREADS = 256
N_BENCH = 1 << 26  # portkit bench: 256 MiB per float32 tensor, five times an H100's L2


def grid_for(k, n, itemsize):
    """One block per THREADS packs of 16 bytes: a full grid, each thread one pack (the
    kernel's grid-stride loop runs once). On an H100 at 2^26 float32 (2026-11-24,
    docs/bench.md) this beat a grid of 8 resident blocks per SM looping over the packs:
    vector_add 0.96 -> 1.00x torch, elementwise_mul 0.96 -> 1.00 forward and 1.14 -> 1.20
    backward, sigmoid 0.94 -> 0.96 (the block scheduler hides the tail; no loop
    overhead), as torch's own elementwise kernels do."""
    return portkit.cdiv(portkit.cdiv(n, 16 // itemsize), THREADS)


@cuda.jit(device=True)
def stable_sigmoid(v):
    """1 / (1 + exp(-v)): one exp, one division, nothing else. On an H100 (2026-11-24) this
    form ran at 1.01x torch where 1 / (1 + z) or z / (1 + z) with z = exp(-|v|) (an abs
    and a select more per element) ran at 0.96x."""
    one = float32(1)
    return one / (one + math.exp(-v))


@cuda.jit
def sigmoid_fwd(x, out, n):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    width = 16 // x.itemsize  # elements in one of the twin's 16-byte packs
    packs = n // width
    for p in range(start, packs, stride):
        for j in range(width):
            # int64 indices, as the twin's long long: tensors may pass 2^31 elements
            out[p * width + j] = stable_sigmoid(x[p * width + j])  # portkit: allow-int64-index
    for i in range(packs * width + start, n, stride):
        out[i] = stable_sigmoid(x[i])


@cuda.jit
def sigmoid_fwd_packs(x, out, n, per_thread):
    """The forward for the fwd_packs / fwd_threads knobs' other values: block b's chunk is
    blockDim.x * per_thread packs, thread t's packs in it p0, p0 + blockDim.x, ...
    (the twin issues their loads together), chunks grid-strided; the tail as
    sigmoid_fwd's."""
    nt = cuda.blockDim.x
    width = 16 // x.itemsize
    packs = n // width
    chunk = nt * per_thread
    stride = cuda.gridDim.x * chunk
    for p0 in range(cuda.blockIdx.x * chunk + cuda.threadIdx.x, packs, stride):
        for u in range(per_thread):
            p = p0 + u * nt  # portkit: allow-int64-index
            if p < packs:
                for j in range(width):
                    i = p * width + j  # portkit: allow-int64-index
                    out[i] = stable_sigmoid(x[i])
    for i in range(packs * width + cuda.grid(1), n, cuda.gridsize(1)):
        out[i] = stable_sigmoid(x[i])


@cuda.jit
def sigmoid_bwd(y, dy, dx, n):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    width = 16 // y.itemsize
    packs = n // width
    for p in range(start, packs, stride):
        for j in range(width):
            i = p * width + j  # portkit: allow-int64-index
            s = y[i]
            dx[i] = dy[i] * s * (float32(1) - s)
    for i in range(packs * width + start, n, stride):
        s = y[i]
        dx[i] = dy[i] * s * (float32(1) - s)


@portkit.op(
    reference=torch.sigmoid,
    baseline=torch.sigmoid,  # what a user calls instead of the twin: the reference itself
    cases=portkit.cases.elementwise(
        special=[0.3, -100000.0, 100000.0, 0.5, -0.5, float("inf"), float("-inf"), float("nan")]
    ),
    bench=[portkit.cases.custom("float32-n67108864", [(N_BENCH,)])],
    # The forward's launch, which `portkit tune` may pick per GPU (the first values the
    # default, sigmoid_fwd's one pack a thread in blocks of THREADS): 16-byte packs a
    # thread, and threads a block (sigmoid_fwd_packs for any other pair; at most the
    # twin's MAX_PACKS and MAX_FWD_THREADS).
    knobs={"fwd_packs": [1, 2, 4], "fwd_threads": [THREADS, 128, 512]},
)
class Sigmoid:
    def forward(k, x):
        out = k.empty_like(x)
        n = x.numel()
        if n:
            kn = portkit.knobs(k, x)
            if (kn.fwd_packs, kn.fwd_threads) == (1, THREADS):
                k.sigmoid_fwd[grid_for(k, n, x.element_size()), THREADS](x, out, n)
            else:
                per_block = kn.fwd_threads * kn.fwd_packs  # packs a block's chunk
                grid = portkit.cdiv(portkit.cdiv(n, 16 // x.element_size()), per_block)
                k.sigmoid_fwd_packs[grid, kn.fwd_threads](x, out, n, kn.fwd_packs)
        return out, (out,)

    def backward(k, saved, dy):
        (y,) = saved
        dx = k.empty_like(y)
        n = y.numel()
        if n:
            k.sigmoid_bwd[grid_for(k, n, y.element_size()), THREADS](y, dy, dx, n)
        return (dx,)
