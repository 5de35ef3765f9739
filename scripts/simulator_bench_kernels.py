"""The kernels ``bench_simulator.py`` times, each with its launch, inputs and check.

Every kernel is an ordinary ``numba.cuda.jit`` kernel in the style tutorials use. A
``Case`` is one launch at one size: its grid, block, arguments, the work it does (in the
kernel's unit: threads, multiply-adds, elements, loop iterations) and a check of the
output against NumPy (an assertion) that must pass before the launch's time counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, float32

THREADS = 128  # threads per block of the 1-D kernels
WARP = 32
TILE = 16  # the tiled matmul's tile edge (blocks of TILE x TILE threads)
BINS = 256  # histogram bins
PER_THREAD = 256  # grid-stride histogram: elements per thread
BATCH = 4  # causal softmax: BATCH x n x n scores
TILE_T = 32  # the transpose's tile edge
TILE_SHAPE = (TILE_T, TILE_T + 1)  # its shared tile, +1 column against bank conflicts


# --- the kernels --------------------------------------------------------------------
@cuda.jit
def sigmoid(x, out, n):
    i = cuda.grid(1)
    if i < n:
        v = x[i]
        if v >= float32(0.0):
            out[i] = float32(1.0) / (float32(1.0) + math.exp(-v))
        else:
            z = math.exp(v)
            out[i] = z / (float32(1.0) + z)


@cuda.jit
def block_sum(x, out, n):
    buf = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[tid] = x[i] if i < n else float32(0.0)
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            buf[tid] += buf[tid + stride]
        cuda.syncthreads()
        stride //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def warp_sum(x, out, n):
    i = cuda.grid(1)
    v = x[i] if i < n else float32(0.0)
    offset = WARP // 2
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.threadIdx.x % WARP == 0:
        out[i // WARP] = v


@cuda.jit
def matmul_tiled(a, b, c, n):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range((n + TILE - 1) // TILE):
        k = t * TILE
        sa[ty, tx] = a[row, k + tx] if row < n and k + tx < n else float32(0.0)
        sb[ty, tx] = b[k + ty, col] if k + ty < n and col < n else float32(0.0)
        cuda.syncthreads()
        for m in range(TILE):
            acc += sa[ty, m] * sb[m, tx]
        cuda.syncthreads()
    if row < n and col < n:
        c[row, col] = acc


@cuda.jit
def histogram(data, hist, bins):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, data.size, stride):
        cuda.atomic.add(hist, data[i] % bins, 1)


@cuda.jit
def histogram_1(data, hist, bins):
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(hist, data[i] % bins, 1)


@cuda.jit
def find_contiguous(target, stop, seq, answer):
    # advent-of-numba day 9's part 2 shape: thread i tries every run starting at i;
    # thread i loops stop - i times, its inner loop j times: unequal counts.
    i = cuda.grid(1)
    if i >= stop:
        return
    for j in range(stop - i):
        total = 0
        smallest = 999999999999999
        largest = 0
        for k in range(i, i + j):
            value = seq[k]
            total += value
            smallest = min(smallest, value)
            largest = max(largest, value)
        if total == target:
            answer[0] = smallest + largest


# The newcomer-style bfloat16 kernels: written as README.md teaches (read
# through ``float32(x[...])``, compute in float32, round once at the store into the
# bfloat16 output), not tuned for the simulator.
@cuda.jit
def causal_softmax(x, out, n):
    # One row of scores per block: row i of batch b attends to columns j <= i.
    b = cuda.blockIdx.x // n
    i = cuda.blockIdx.x % n
    tid = cuda.threadIdx.x
    part = cuda.shared.array(THREADS, float32)
    m = float32(-math.inf)
    for j in range(tid, n, THREADS):
        if j <= i:
            m = max(m, float32(x[b, i, j]))
    part[tid] = m
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            part[tid] = max(part[tid], part[tid + stride])
        cuda.syncthreads()
        stride //= 2
    m = part[0]
    cuda.syncthreads()
    s = float32(0.0)
    for j in range(tid, n, THREADS):
        if j <= i:
            s += math.exp(float32(x[b, i, j]) - m)
    part[tid] = s
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            part[tid] += part[tid + stride]
        cuda.syncthreads()
        stride //= 2
    s = part[0]
    for j in range(tid, n, THREADS):
        if j <= i:
            out[b, i, j] = math.exp(float32(x[b, i, j]) - m) / s
        else:
            out[b, i, j] = float32(0.0)


@cuda.jit
def transpose_tiled(x, out):
    # The tutorial transpose: a 32 x 32 block stages a tile in shared memory, padded
    # by one column, and writes it back transposed.
    tile = cuda.shared.array(TILE_SHAPE, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE_T + ty
    col = cuda.blockIdx.x * TILE_T + tx
    if row < x.shape[0] and col < x.shape[1]:
        tile[ty, tx] = float32(x[row, col])
    cuda.syncthreads()
    row = cuda.blockIdx.x * TILE_T + ty
    col = cuda.blockIdx.y * TILE_T + tx
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = tile[tx, ty]


# --- launches at a size -------------------------------------------------------------
@dataclass
class Case:
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: list[Any]
    work: int  # in the kernel's unit
    check: Callable[[], None]


def _blocks(n: int) -> int:
    return -(-n // THREADS)


def _sigmoid(n: int, rng: np.random.Generator) -> Case:
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)

    def check() -> None:
        v = x.astype(np.float64)
        z = np.exp(-np.abs(v))
        expected = np.where(v >= 0, 1 / (1 + z), z / (1 + z))
        np.testing.assert_allclose(out, expected, rtol=1e-6, atol=0)

    return Case((_blocks(n),), (THREADS,), [x, out, n], _blocks(n) * THREADS, check)


def tree_sums(x: np.ndarray, group: int, blocks: int) -> np.ndarray:
    """Sums of ``group`` consecutive elements (zero-padded to ``blocks * THREADS``), in
    the kernels' order: a float32 halving tree, so the result must match exactly."""
    padded = np.zeros(blocks * THREADS, np.float32)
    padded[: x.size] = x
    parts = padded.reshape(-1, group).copy()
    stride = group // 2
    while stride > 0:
        parts[:, :stride] += parts[:, stride : 2 * stride]
        stride //= 2
    return parts[:, 0]


def _reduction(group: int) -> Callable[[int, np.random.Generator], Case]:
    def make(n: int, rng: np.random.Generator) -> Case:
        x = rng.standard_normal(n).astype(np.float32)
        blocks = _blocks(n)
        out = np.full(blocks * THREADS // group, np.nan, np.float32)

        def check() -> None:
            np.testing.assert_array_equal(out, tree_sums(x, group, blocks))

        return Case((blocks,), (THREADS,), [x, out, n], blocks * THREADS, check)

    return make


def _matmul(n: int, rng: np.random.Generator) -> Case:
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.full((n, n), np.nan, np.float32)
    tiles = -(-n // TILE)

    def check() -> None:
        # The kernel's order: one float32 product and one float32 sum per step.
        expected = np.zeros((n, n), np.float32)
        for m in range(n):
            expected += np.outer(a[:, m], b[m, :]).astype(np.float32)
        np.testing.assert_array_equal(c, expected)

    work = (tiles * TILE) ** 2 * tiles * TILE  # multiply-adds, the padded edge included
    return Case((tiles, tiles), (TILE, TILE), [a, b, c, n], work, check)


def _histogram(n: int, rng: np.random.Generator) -> Case:
    data = rng.integers(0, 1_000_000, n).astype(np.int32)
    hist = np.zeros(BINS, np.int32)
    blocks = max(1, n // (PER_THREAD * THREADS))

    def check() -> None:
        np.testing.assert_array_equal(hist, np.bincount(data % BINS, minlength=BINS))

    return Case((blocks,), (THREADS,), [data, hist, BINS], n, check)


def _histogram_1(n: int, rng: np.random.Generator) -> Case:
    data = rng.integers(0, 1_000_000, n).astype(np.int32)
    hist = np.zeros(BINS, np.int32)

    def check() -> None:
        np.testing.assert_array_equal(hist, np.bincount(data % BINS, minlength=BINS))

    return Case((_blocks(n),), (THREADS,), [data, hist, BINS], n, check)


def _find_contiguous(stop: int, rng: np.random.Generator) -> Case:
    seq = rng.integers(1, 1_000_000, stop).astype(np.uint32)
    prefix = np.concatenate([[0], np.cumsum(seq, dtype=np.int64)])
    start, length = stop // 3, min(17, stop // 3)
    target = int(prefix[start + length] - prefix[start])
    # The run must be the only one with that sum (two would race on answer[0]).
    runs = [
        (i, j) for i in range(stop) for j in np.flatnonzero(prefix[i:stop] - prefix[i] == target)
    ]
    assert runs == [(start, length)], runs
    answer = np.zeros(1, np.uint32)
    chosen = seq[start : start + length]

    def check() -> None:
        assert int(answer[0]) == int(chosen.min()) + int(chosen.max()), answer

    iterations = (stop - 1) * stop * (stop + 1) // 6  # inner-loop steps of all threads
    return Case((_blocks(stop),), (THREADS,), [target, stop, seq, answer], iterations, check)


def bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 ``values`` rounded to bfloat16, as the simulator holds a bfloat16 array:
    its bits in a ``BFloat16Bits`` uint16 array (what the ``sim`` backend passes)."""
    import torch

    from portkit.backends.sim import host_array

    return host_array(torch.from_numpy(np.ascontiguousarray(values)).to(torch.bfloat16))


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _causal_softmax(n: int, rng: np.random.Generator) -> Case:
    x = bfloat16(rng.standard_normal((BATCH, n, n)).astype(np.float32))
    out = bfloat16(np.full((BATCH, n, n), np.nan, np.float32))

    def check() -> None:
        scores = bfloat16_values(x).astype(np.float64)
        causal = np.tril(np.ones((n, n), bool))
        scores = np.where(causal, scores, -np.inf)
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        expected = e / e.sum(axis=-1, keepdims=True)
        # float32 arithmetic rounded once to bfloat16: within one bfloat16 ULP (2^-8 rel.)
        np.testing.assert_allclose(bfloat16_values(out), expected, rtol=2**-8, atol=1e-30)

    return Case((BATCH * n,), (THREADS,), [x, out, n], BATCH * n * n, check)


def _transpose(rows: int, rng: np.random.Generator) -> Case:
    cols = 2 * rows + 2  # 2049 rows: the 2049 x 4100
    x = bfloat16(rng.standard_normal((rows, cols)).astype(np.float32))
    out = bfloat16(np.full((cols, rows), np.nan, np.float32))

    def check() -> None:
        np.testing.assert_array_equal(out, x.T)  # the bits, exactly

    grid = (-(-cols // TILE_T), -(-rows // TILE_T))
    return Case(grid, (TILE_T, TILE_T), [x, out], rows * cols, check)


@dataclass(frozen=True)
class Kernel:
    name: str
    kind: str  # the kernel kind the report names
    dispatcher: Any
    make: Callable[[int, np.random.Generator], Case]
    unit: str  # what ``Case.work`` counts
    numba: bool = True  # whether numba's simulator can run it


KERNELS = [
    Kernel("sigmoid", "elementwise", sigmoid, _sigmoid, "threads"),
    Kernel("block_sum", "block reduction", block_sum, _reduction(THREADS), "threads"),
    Kernel("warp_sum", "warp reduction", warp_sum, _reduction(WARP), "threads", numba=False),
    Kernel("matmul_tiled", "tiled matmul", matmul_tiled, _matmul, "multiply-adds"),
    Kernel("histogram", "atomics histogram, grid-stride", histogram, _histogram, "elements"),
    Kernel(
        "histogram_1", "atomics histogram, one per thread", histogram_1, _histogram_1, "elements"
    ),
    Kernel("find_contiguous", "unequal loops", find_contiguous, _find_contiguous, "loop steps"),
    # numba's simulator has no bfloat16 (docs/authoring.md): portkit's engines only.
    Kernel(
        "causal_softmax", "bfloat16 causal softmax, a row per block", causal_softmax,
        _causal_softmax, "scores", numba=False,
    ),
    Kernel(
        "transpose", "bfloat16 tiled transpose", transpose_tiled, _transpose, "elements",
        numba=False,
    ),
]
