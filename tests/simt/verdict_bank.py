"""Kernels in the styles tutorials use, each run on a GPU with numba and in portkit's
simulator, so that the simulator's verdict can be held against what the hardware did.

Half of the kernels are correct (though several lean on what the CUDA C++ guide leaves
undefined: threads that return before a barrier, loads nobody uses, every thread storing
one value, plain reads beside atomics); the other half carry one real bug each. A
simulator verdict must be red for every kernel whose GPU output was ever wrong, and never
red where the GPU was always right (docs/simulator.md, "The verdict bank").

Every value is a small integer held in float32 or int32, so that sums are exact in any
order and "right" means equal, bit for bit. Arrays that a bug may write or read past
their end are views of a longer buffer whose tail is a canary: a corrupted canary counts
as a wrong result, as the GPU leaves no other trace of an out-of-bounds access.

``run_in_simulator(entry)`` and ``run_on_gpu(entry, launches)`` take an entry of ``BANK``;
``scripts/gpu_verdict_bank.py`` runs both and prints the table.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, float32, int32

CANARY = 1000.0  # the value in a buffer's tail past a view's end


@dataclass(frozen=True)
class Entry:
    name: str
    pattern: str  # the tutorial style the kernel stands for
    bug: str  # "" for a correct kernel, else the bug it carries
    kernel: Any
    grid: int | tuple[int, ...]
    block: int | tuple[int, ...]
    make: Callable[[np.random.Generator], list[np.ndarray]]  # the buffers
    args: Callable[[Sequence[Any]], list[Any]]  # buffers -> launch arguments (views, sizes)
    expected: Callable[[list[np.ndarray]], dict[int, np.ndarray]]  # buffer index -> value

    @property
    def correct(self) -> bool:
        return not self.bug


def canaried(values: np.ndarray, tail: int = 4) -> np.ndarray:
    """``values`` followed by ``tail`` canary elements (the kernel gets a view of the head)."""
    return np.concatenate([values, np.full(tail, CANARY, values.dtype)])


def ints(rng: np.random.Generator, n: int, low: int = -8, high: int = 9) -> np.ndarray:
    return rng.integers(low, high, n).astype(np.float32)


# -- reductions: early returns before the barrier, tree sums -----------------------------
THREADS = 128
HALO = THREADS + 2  # a block's elements and one neighbour on each side


@cuda.jit
def block_sum_early_return(x, out, n):
    s = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= n:
        return  # threads past the data leave before the barrier (GPU-Puzzles style)
    s[tid] = x[i]
    cuda.syncthreads()
    if tid == 0:
        total = float32(0)
        live = min(THREADS, n - cuda.blockIdx.x * THREADS)
        for k in range(live):
            total += s[k]
        out[cuda.blockIdx.x] = total


@cuda.jit
def block_max_early_return(x, out, n):
    s = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= n:
        return
    s[tid] = x[i]
    cuda.syncthreads()
    stride = 1
    live = min(THREADS, n - cuda.blockIdx.x * THREADS)
    while stride < live:
        if tid % (2 * stride) == 0 and tid + stride < live:
            s[tid] = max(s[tid], s[tid + stride])
        stride *= 2
        cuda.syncthreads()
    if tid == 0:
        out[cuda.blockIdx.x] = s[0]


@cuda.jit
def tree_sum(x, out, n):
    s = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()
        stride //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = s[0]


def make_tree_sum_no_barrier(threads: int) -> Any:
    @cuda.jit
    def tree_sum_no_barrier(x, out, n):
        s = cuda.shared.array(threads, float32)
        tid = cuda.threadIdx.x
        i = cuda.grid(1)
        s[tid] = x[i] if i < n else float32(0)
        cuda.syncthreads()
        stride = threads // 2
        while stride > 0:
            if tid < stride:
                s[tid] += s[tid + stride]
            stride //= 2  # the barrier that belongs in this loop is missing
        if tid == 0:
            out[cuda.blockIdx.x] = s[0]

    return tree_sum_no_barrier


tree_sum_no_barrier = make_tree_sum_no_barrier(THREADS)


@cuda.jit
def tree_sum_early_return_loop(x, out, n):
    s = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= n:
        return  # then barriers in a loop, reached by the live threads only
    s[tid] = x[i]
    cuda.syncthreads()
    live = min(THREADS, n - cuda.blockIdx.x * THREADS)
    stride = 1
    while stride < THREADS:
        if tid % (2 * stride) == 0 and tid + stride < live:
            s[tid] += s[tid + stride]
        cuda.syncthreads()
        stride *= 2
    if tid == 0:
        out[cuda.blockIdx.x] = s[0]


@cuda.jit
def tree_sum_odd_block(x, out, n):
    s = cuda.shared.array(96, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2  # 96 -> 48 -> 24 -> 12 -> 6 -> 3 -> 1: drops the odd one out
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()
        stride //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = s[0]


@cuda.jit
def shared_sum_plain_add(x, out, n):
    total = cuda.shared.array(1, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if tid == 0:
        total[0] = 0
    cuda.syncthreads()
    if i < n:
        total[0] += x[i]  # every thread's read-modify-write races with the others'
    cuda.syncthreads()
    if tid == 0:
        out[cuda.blockIdx.x] = total[0]


@cuda.jit
def shared_sum_atomic(x, out, n):
    total = cuda.shared.array(1, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if tid == 0:
        total[0] = 0
    cuda.syncthreads()
    if i < n:
        cuda.atomic.add(total, 0, x[i])
    cuda.syncthreads()
    if tid == 0:
        out[cuda.blockIdx.x] = total[0]


@cuda.jit
def shared_sum_atomic_unzeroed(x, out, n):
    total = cuda.shared.array(1, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(total, 0, x[i])  # into an accumulator nobody set to zero
    cuda.syncthreads()
    if tid == 0:
        out[cuda.blockIdx.x] = total[0]


@cuda.jit
def warp_shuffle_sum(x, out, n):
    i = cuda.grid(1)
    v = x[i] if i < n else float32(0)
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)


@cuda.jit
def global_sum_plain_add(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[0] += x[i]  # a read-modify-write of one global element from every thread


@cuda.jit
def grid_stride_atomic_sum(x, out, n):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    acc = float32(0)
    for i in range(start, n, stride):
        acc += x[i]
    cuda.atomic.add(out, 0, acc)


@cuda.jit
def grid_stride_wrong_stride(x, out, n):
    start = cuda.grid(1)
    acc = float32(0)
    for i in range(start, n, cuda.blockDim.x):  # the block's width, not the grid's
        acc += x[i]
    cuda.atomic.add(out, 0, acc)


def sums_per_block(x: np.ndarray, n: int, threads: int) -> np.ndarray:
    blocks = math.ceil(n / threads)
    padded = np.zeros(blocks * threads, np.float32)
    padded[:n] = x[:n]
    return padded.reshape(blocks, threads).sum(axis=1, dtype=np.float32)


def maxes_per_block(x: np.ndarray, n: int, threads: int) -> np.ndarray:
    return np.array(
        [x[b : min(b + threads, n)].max() for b in range(0, n, threads)], np.float32
    )


# -- every thread storing one value; atomics beside plain reads -------------------------


@cuda.jit
def all_store_same(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[0] = 42  # every thread stores the same value


@cuda.jit
def any_positive_flag(x, flag, n):
    i = cuda.grid(1)
    if i < n and x[i] > 0:
        flag[0] = 1  # each thread that finds one stores the same 1


@cuda.jit
def last_writer_wins(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[0] = x[i]  # threads store different values to one element


@cuda.jit
def counters_read_beside_atomics(x, out, count, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(count, i % 2, 1)
        # a plain read of the other counter, which other threads bump atomically: the
        # author expects its final value (every thread of that parity counted)
        out[i] = x[i] + count[(i + 1) % 2]


@cuda.jit
def barrier_divergence(x, out, n):
    s = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    half = THREADS // 2
    if tid < half:
        cuda.syncthreads()  # only the first half waits here: live threads at two barriers
        s[tid] = x[i] if i < n else float32(0)
        s[tid + half] = x[i + half] if i + half < n else float32(0)
    cuda.syncthreads()
    if i < n:
        out[i] = 2 * s[tid]


@cuda.jit
def atomic_max_with_plain_read(x, out, n):
    i = cuda.grid(1)
    if i < n and x[i] > out[0]:  # a plain read of what other threads update atomically
        cuda.atomic.max(out, 0, x[i])


@cuda.jit
def histogram_atomic(data, hist, n, bins):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(hist, data[i] % bins, 1)


@cuda.jit
def histogram_plain(data, hist, n, bins):
    i = cuda.grid(1)
    if i < n:
        hist[data[i] % bins] += 1  # a plain update where threads share a bin


@cuda.jit
def histogram_shared_privatised(data, hist, n, bins):
    local = cuda.shared.array(16, int32)
    tid = cuda.threadIdx.x
    if tid < bins:
        local[tid] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(local, data[i] % bins, 1)
    cuda.syncthreads()
    if tid < bins:
        cuda.atomic.add(hist, tid, local[tid])


@cuda.jit
def histogram_bin_off_by_one(data, hist, n, bins):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(hist, data[i] % bins + 1, 1)  # bins shifted: the last lands past the end


# -- elementwise and stencils: guards and halos -----------------------------------------


@cuda.jit
def scale_guarded(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = 2 * x[i]


@cuda.jit
def scale_off_by_one(x, out, n):
    i = cuda.grid(1)
    if i <= n:  # one thread too many
        out[i] = 2 * x[i]


@cuda.jit
def stencil_shared_halo(x, out, n):
    s = cuda.shared.array(HALO, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid + 1] = x[i] if i < n else float32(0)
    if tid == 0:
        s[0] = x[i - 1] if i >= 1 else float32(0)
    if tid == THREADS - 1:
        s[HALO - 1] = x[i + 1] if i + 1 < n else float32(0)
    cuda.syncthreads()
    if i < n:
        out[i] = s[tid] + s[tid + 1] + s[tid + 2]


@cuda.jit
def stencil_no_right_edge(x, out, n):
    i = cuda.grid(1)
    if i < n:
        left = x[i - 1] if i >= 1 else float32(0)
        out[i] = left + x[i] + x[i + 1]  # the right neighbour of the last element is read anyway


def make_stencil_halo_no_barrier(threads: int) -> Any:
    halo = threads + 2

    @cuda.jit
    def stencil_halo_no_barrier(x, out, n):
        s = cuda.shared.array(halo, float32)
        tid = cuda.threadIdx.x
        i = cuda.grid(1)
        s[tid + 1] = x[i] if i < n else float32(0)
        if tid == 0:
            s[0] = x[i - 1] if i >= 1 else float32(0)
        if tid == threads - 1:
            s[halo - 1] = x[i + 1] if i + 1 < n else float32(0)
        # the cuda.syncthreads() between the loads and the reads is missing
        if i < n:
            out[i] = s[tid] + s[tid + 1] + s[tid + 2]

    return stencil_halo_no_barrier


stencil_halo_no_barrier = make_stencil_halo_no_barrier(THREADS)


def stencil3(x: np.ndarray, n: int) -> np.ndarray:
    padded = np.zeros(n + 2, np.float32)
    padded[1:-1] = x[:n]
    return (padded[:-2] + padded[1:-1] + padded[2:]).astype(np.float32)


# -- scans ------------------------------------------------------------------------------


@cuda.jit
def scan_double_buffer(x, out, n):
    a = cuda.shared.array(THREADS, float32)
    b = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    a[tid] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    offset = 1
    src_is_a = True
    while offset < THREADS:
        if src_is_a:
            b[tid] = a[tid] + a[tid - offset] if tid >= offset else a[tid]
        else:
            a[tid] = b[tid] + b[tid - offset] if tid >= offset else b[tid]
        cuda.syncthreads()
        src_is_a = not src_is_a
        offset *= 2
    if i < n:
        out[i] = a[tid] if src_is_a else b[tid]


def make_scan_in_place(threads: int) -> Any:
    @cuda.jit
    def scan_in_place(x, out, n):
        a = cuda.shared.array(threads, float32)
        tid = cuda.threadIdx.x
        i = cuda.grid(1)
        a[tid] = x[i] if i < n else float32(0)
        cuda.syncthreads()
        offset = 1
        while offset < threads:
            if tid >= offset:
                a[tid] += a[tid - offset]  # reads a neighbour another thread updates this step
            cuda.syncthreads()
            offset *= 2
        if i < n:
            out[i] = a[tid]

    return scan_in_place


scan_in_place = make_scan_in_place(THREADS)


def scans_per_block(x: np.ndarray, n: int, threads: int) -> np.ndarray:
    out = np.empty(n, np.float32)
    for b in range(0, n, threads):
        out[b : min(b + threads, n)] = np.cumsum(x[b : min(b + threads, n)], dtype=np.float32)
    return out


# -- tiled matmul and transpose with edge tiles ------------------------------------------
TILE = 16
PADDED = TILE + 1  # a padded row: the transposed reads hit 16 banks


@cuda.jit
def matmul_tiled_zero_fill(a, b, c, n):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.grid(2)
    acc = float32(0)
    for t in range((n + TILE - 1) // TILE):
        sa[tx, ty] = a[row, t * TILE + ty] if row < n and t * TILE + ty < n else float32(0)
        sb[tx, ty] = b[t * TILE + tx, col] if col < n and t * TILE + tx < n else float32(0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sa[tx, k] * sb[k, ty]
        cuda.syncthreads()
    if row < n and col < n:
        c[row, col] = acc


@cuda.jit
def matmul_tiled_discarded_loads(a, b, c, n):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.grid(2)
    acc = float32(0)
    for t in range((n + TILE - 1) // TILE):
        if row < n and t * TILE + ty < n:
            sa[tx, ty] = a[row, t * TILE + ty]  # no else: edge slots stay unwritten
        if col < n and t * TILE + tx < n:
            sb[tx, ty] = b[t * TILE + tx, col]
        cuda.syncthreads()
        if row < n and col < n:
            for k in range(min(TILE, n - t * TILE)):
                acc += sa[tx, k] * sb[k, ty]
        else:
            for k in range(TILE):
                acc += sa[tx, k] * sb[k, ty]  # outside the matrix: folded in, never stored
        cuda.syncthreads()
    if row < n and col < n:
        c[row, col] = acc


@cuda.jit
def matmul_tiled_edge_garbage(a, b, c, n):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.grid(2)
    acc = float32(0)
    for t in range((n + TILE - 1) // TILE):
        if row < n and t * TILE + ty < n:
            sa[tx, ty] = a[row, t * TILE + ty]
        if col < n and t * TILE + tx < n:
            sb[tx, ty] = b[t * TILE + tx, col]
        cuda.syncthreads()
        for k in range(TILE):  # the whole tile, stale edge slots included, for stored results
            acc += sa[tx, k] * sb[k, ty]
        cuda.syncthreads()
    if row < n and col < n:
        c[row, col] = acc


def make_matmul_tiled_no_second_barrier(tile: int) -> Any:
    @cuda.jit
    def matmul_tiled_no_second_barrier(a, b, c, n):
        sa = cuda.shared.array((tile, tile), float32)
        sb = cuda.shared.array((tile, tile), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row, col = cuda.grid(2)
        acc = float32(0)
        for t in range((n + tile - 1) // tile):
            sa[tx, ty] = a[row, t * tile + ty] if row < n and t * tile + ty < n else float32(0)
            sb[tx, ty] = b[t * tile + tx, col] if col < n and t * tile + tx < n else float32(0)
            cuda.syncthreads()
            for k in range(tile):
                acc += sa[tx, k] * sb[k, ty]
            # the barrier before the next tile's loads is missing
        if row < n and col < n:
            c[row, col] = acc

    return matmul_tiled_no_second_barrier


matmul_tiled_no_second_barrier = make_matmul_tiled_no_second_barrier(TILE)


@cuda.jit
def transpose_tiled(x, out, rows, cols):
    tile = cuda.shared.array((TILE, PADDED), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r, c = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    if r < rows and c < cols:
        tile[ty, tx] = x[r, c]
    cuda.syncthreads()
    r2, c2 = cuda.blockIdx.x * TILE + ty, cuda.blockIdx.y * TILE + tx
    if r2 < cols and c2 < rows:
        out[r2, c2] = tile[tx, ty]


@cuda.jit
def transpose_tiled_no_barrier(x, out, rows, cols):
    tile = cuda.shared.array((TILE, PADDED), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r, c = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    if r < rows and c < cols:
        tile[ty, tx] = x[r, c]
    # the barrier between the tile's writes and its transposed reads is missing
    r2, c2 = cuda.blockIdx.x * TILE + ty, cuda.blockIdx.y * TILE + tx
    if r2 < cols and c2 < rows:
        out[r2, c2] = tile[tx, ty]


def square(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(-3, 4, (n, n)).astype(np.float32)


N_MAT = 37  # not a multiple of TILE: the last tiles are edge tiles
MAT_GRID = ((N_MAT + TILE - 1) // TILE, (N_MAT + TILE - 1) // TILE)


def matmul_entry(name: str, kernel: Any, bug: str, pattern: str) -> Entry:
    return Entry(
        name,
        pattern,
        bug,
        kernel,
        MAT_GRID,
        (TILE, TILE),
        lambda rng: [square(rng, N_MAT), square(rng, N_MAT), np.zeros((N_MAT, N_MAT), np.float32)],
        lambda b: [b[0], b[1], b[2], N_MAT],
        lambda b: {2: (b[0] @ b[1]).astype(np.float32)},
    )


N = 1000  # 8 blocks of 128, the last one partly past the data
BLOCKS = math.ceil(N / THREADS)


def reduction_entry(name: str, kernel: Any, bug: str, pattern: str, threads: int = THREADS,
                    expected: Callable[[np.ndarray], np.ndarray] | None = None) -> Entry:
    blocks = math.ceil(N / threads)
    per_block = expected or (lambda x: sums_per_block(x, N, threads))
    return Entry(
        name,
        pattern,
        bug,
        kernel,
        blocks,
        threads,
        lambda rng: [ints(rng, N), np.zeros(blocks, np.float32)],
        lambda b: [b[0], b[1], N],
        lambda b: {1: per_block(b[0])},
    )


def total_entry(name: str, kernel: Any, bug: str, pattern: str, grid: int = BLOCKS) -> Entry:
    return Entry(
        name,
        pattern,
        bug,
        kernel,
        grid,
        THREADS,
        lambda rng: [ints(rng, N), np.zeros(1, np.float32)],
        lambda b: [b[0], b[1], N],
        lambda b: {1: np.array([b[0].sum(dtype=np.float32)], np.float32)},
    )


BINS = 10


def histogram_entry(name: str, kernel: Any, bug: str, pattern: str) -> Entry:
    return Entry(
        name,
        pattern,
        bug,
        kernel,
        BLOCKS,
        THREADS,
        lambda rng: [rng.integers(0, 1000, N).astype(np.int32), canaried(np.zeros(BINS, np.int32))],
        lambda b: [b[0], b[1][:BINS], N, BINS],
        lambda b: {1: canaried(np.bincount(b[0] % BINS, minlength=BINS).astype(np.int32))},
    )


def elementwise_entry(name: str, kernel: Any, bug: str, pattern: str,
                      expected: Callable[[np.ndarray], np.ndarray]) -> Entry:
    return Entry(
        name,
        pattern,
        bug,
        kernel,
        BLOCKS,
        THREADS,
        lambda rng: [canaried(ints(rng, N)), canaried(np.zeros(N, np.float32))],
        lambda b: [b[0][:N], b[1][:N], N],
        lambda b: {1: canaried(expected(b[0][:N]))},
    )


def scan_entry(name: str, kernel: Any, bug: str, pattern: str) -> Entry:
    return Entry(
        name,
        pattern,
        bug,
        kernel,
        BLOCKS,
        THREADS,
        lambda rng: [ints(rng, N), np.zeros(N, np.float32)],
        lambda b: [b[0], b[1], N],
        lambda b: {1: scans_per_block(b[0], N, THREADS)},
    )


ROWS, COLS = 37, 50


def transpose_entry(name: str, kernel: Any, bug: str) -> Entry:
    return Entry(
        name,
        "tiled transpose through shared memory, edge tiles",
        bug,
        kernel,
        ((COLS + TILE - 1) // TILE, (ROWS + TILE - 1) // TILE),
        (TILE, TILE),
        lambda rng: [rng.integers(-9, 10, (ROWS, COLS)).astype(np.float32),
                     np.zeros((COLS, ROWS), np.float32)],
        lambda b: [b[0], b[1], ROWS, COLS],
        lambda b: {1: np.ascontiguousarray(b[0].T)},
    )


EARLY = "early return before a block barrier"
BANK: list[Entry] = [
    reduction_entry("block_sum_early_return", block_sum_early_return, "", EARLY),
    reduction_entry("block_max_early_return", block_max_early_return, "", EARLY,
                    expected=lambda x: maxes_per_block(x, N, THREADS)),
    reduction_entry("tree_sum_early_return_loop", tree_sum_early_return_loop, "", EARLY),
    reduction_entry("tree_sum", tree_sum, "", "tree reduction in shared memory"),
    reduction_entry("tree_sum_no_barrier", tree_sum_no_barrier,
                    "no barrier between the reduction's steps", "tree reduction in shared memory"),
    reduction_entry("tree_sum_odd_block", tree_sum_odd_block,
                    "halving a 96-thread block drops elements", "tree reduction in shared memory",
                    threads=96),
    reduction_entry("shared_sum_atomic", shared_sum_atomic, "", "shared accumulator, atomics"),
    reduction_entry("shared_sum_plain_add", shared_sum_plain_add,
                    "a plain += on one shared element from every thread",
                    "shared accumulator, atomics"),
    reduction_entry("shared_sum_atomic_unzeroed", shared_sum_atomic_unzeroed,
                    "the shared accumulator is never zeroed", "shared accumulator, atomics"),
    total_entry("warp_shuffle_sum", warp_shuffle_sum, "", "warp shuffle reduction"),
    total_entry("grid_stride_atomic_sum", grid_stride_atomic_sum, "", "grid-stride loop", grid=3),
    total_entry("grid_stride_wrong_stride", grid_stride_wrong_stride,
                "strides by the block, not the grid: elements counted several times",
                "grid-stride loop", grid=3),
    total_entry("global_sum_plain_add", global_sum_plain_add,
                "a plain += on one global element from every thread",
                "atomics beside plain updates"),
    Entry("all_store_same", "every thread storing one value", "", all_store_same, BLOCKS,
          THREADS, lambda rng: [ints(rng, N), np.zeros(1, np.float32)],
          lambda b: [b[0], b[1], N], lambda b: {1: np.array([42], np.float32)}),
    Entry("any_positive_flag", "every thread storing one value", "", any_positive_flag, BLOCKS,
          THREADS, lambda rng: [ints(rng, N), np.zeros(1, np.int32)],
          lambda b: [b[0], b[1], N], lambda b: {1: np.array([int((b[0] > 0).any())], np.int32)}),
    Entry("last_writer_wins", "every thread storing one value",
          "threads store different values to one element: the survivor depends on the schedule",
          last_writer_wins, BLOCKS, THREADS,
          lambda rng: [ints(rng, N), np.zeros(1, np.float32)],
          lambda b: [b[0], b[1], N], lambda b: {1: b[0][N - 1 : N].copy()}),
    Entry("atomic_max_with_plain_read", "atomics beside plain reads", "",
          atomic_max_with_plain_read, BLOCKS, THREADS,
          lambda rng: [ints(rng, N), np.full(1, -100, np.float32)],
          lambda b: [b[0], b[1], N], lambda b: {1: np.array([b[0].max()], np.float32)}),
    Entry("counters_read_beside_atomics", "atomics beside plain reads",
          "a plain read of a counter other threads bump atomically: what it sees depends on "
          "their order", counters_read_beside_atomics, BLOCKS, THREADS,
          lambda rng: [ints(rng, N), np.zeros(N, np.float32), np.zeros(2, np.int32)],
          lambda b: [b[0], b[1], b[2], N],
          lambda b: {1: b[0] + np.float32(N // 2), 2: np.array([N // 2, N // 2], np.int32)}),
    histogram_entry("histogram_atomic", histogram_atomic, "", "histogram"),
    histogram_entry("histogram_shared_privatised", histogram_shared_privatised, "", "histogram"),
    histogram_entry("histogram_plain", histogram_plain, "a plain += where threads share a bin",
                    "histogram"),
    histogram_entry("histogram_bin_off_by_one", histogram_bin_off_by_one,
                    "bins shifted by one: the last bin is written past the end", "histogram"),
    elementwise_entry("scale_guarded", scale_guarded, "", "elementwise with a guard",
                      lambda x: 2 * x),
    elementwise_entry("scale_off_by_one", scale_off_by_one, "`i <= n`: one write past the end",
                      "elementwise with a guard", lambda x: 2 * x),
    elementwise_entry("barrier_divergence", barrier_divergence,
                      "the block's first half waits at one barrier, the second half at "
                      "another: the second half reads shared memory before it is written",
                      "barriers in divergent code", lambda x: 2 * x),
    elementwise_entry("stencil_shared_halo", stencil_shared_halo, "",
                      "stencil with a shared halo", lambda x: stencil3(x, N)),
    elementwise_entry("stencil_no_right_edge", stencil_no_right_edge,
                      "reads one element past the end at the right edge",
                      "stencil with a shared halo", lambda x: stencil3(x, N)),
    elementwise_entry("stencil_halo_no_barrier", stencil_halo_no_barrier,
                      "no barrier between the halo's loads and the reads",
                      "stencil with a shared halo", lambda x: stencil3(x, N)),
    scan_entry("scan_double_buffer", scan_double_buffer, "", "block scan"),
    scan_entry("scan_in_place", scan_in_place,
               "an in-place Hillis-Steele step reads what a neighbour updates", "block scan"),
    matmul_entry("matmul_tiled_zero_fill", matmul_tiled_zero_fill, "", "tiled matmul, edge tiles"),
    matmul_entry("matmul_tiled_discarded_loads", matmul_tiled_discarded_loads, "",
                 "tiled matmul, edge tiles (loads outside the matrix discarded)"),
    matmul_entry("matmul_tiled_edge_garbage", matmul_tiled_edge_garbage,
                 "edge tiles' unfilled slots are folded into stored results",
                 "tiled matmul, edge tiles"),
    matmul_entry("matmul_tiled_no_second_barrier", matmul_tiled_no_second_barrier,
                 "no barrier before the next tile's loads", "tiled matmul, edge tiles"),
    transpose_entry("transpose_tiled", transpose_tiled, ""),
    transpose_entry("transpose_tiled_no_barrier", transpose_tiled_no_barrier,
                    "no barrier between the tile's writes and its transposed reads"),
]


def stress_variants() -> list[Entry]:
    """The bank's four missing-barrier races at 1,024 threads a block (32 warps, more than
    an SM's schedulers run at once), where a GPU gets to show them; at 128 threads an H200
    ran them right in 100 of 100 launches."""
    n, threads = 1 << 16, 1024
    blocks, side, tile = n // threads, 200, 32
    grid2 = ((side + tile - 1) // tile,) * 2
    race = "no barrier (stress: 1,024 threads a block)"
    data = lambda rng: [ints(rng, n), np.zeros(n, np.float32)]  # noqa: E731
    return [
        Entry("tree_sum_no_barrier@1024", "tree reduction", race, make_tree_sum_no_barrier(threads),
              blocks, threads, lambda rng: [ints(rng, n), np.zeros(blocks, np.float32)],
              lambda b: [b[0], b[1], n], lambda b: {1: sums_per_block(b[0], n, threads)}),
        Entry("stencil_halo_no_barrier@1024", "stencil", race,
              make_stencil_halo_no_barrier(threads), blocks, threads, data,
              lambda b: [b[0], b[1], n], lambda b: {1: stencil3(b[0], n)}),
        Entry("scan_in_place@1024", "block scan", race, make_scan_in_place(threads), blocks,
              threads, data, lambda b: [b[0], b[1], n],
              lambda b: {1: scans_per_block(b[0], n, threads)}),
        Entry("matmul_tiled_no_second_barrier@32x32", "tiled matmul", race,
              make_matmul_tiled_no_second_barrier(tile), grid2, (tile, tile),
              lambda rng: [square(rng, side), square(rng, side),
                           np.zeros((side, side), np.float32)],
              lambda b: [b[0], b[1], b[2], side], lambda b: {2: (b[0] @ b[1]).astype(np.float32)}),
    ]


def wrong_buffers(entry: Entry, buffers: list[np.ndarray]) -> list[int]:
    """Indices of the buffers whose value is not the expected one (canaries included)."""
    expected = entry.expected(buffers)
    return [i for i, want in expected.items() if not np.array_equal(buffers[i], want)]


def run_on_gpu(entry: Entry, launches: int, seed: int = 0) -> dict[str, Any]:
    """``launches`` launches of the kernel on the GPU with numba, fresh inputs each time
    (the same values), and how many of them left a wrong result."""
    host = entry.make(np.random.default_rng(seed))
    wrong, distinct, faults = 0, set(), []
    for _ in range(launches):
        device = [cuda.to_device(b) for b in host]
        try:
            entry.kernel[entry.grid, entry.block](*entry.args(device))
            cuda.synchronize()
        except Exception as exc:  # a launch that faults is a wrong result too
            faults.append(f"{type(exc).__name__}: {exc}".splitlines()[0])
            wrong += 1
            continue
        result = [d.copy_to_host() for d in device]
        wrong += bool(wrong_buffers(entry, result))
        distinct.add(b"".join(r.tobytes() for r in result))
    return {"launches": launches, "wrong": wrong, "distinct_results": len(distinct),
            "faults": sorted(set(faults))[:3]}


def run_in_simulator(entry: Entry, seed: int = 0, strict: bool = False) -> dict[str, Any]:
    """The kernel in portkit's simulator: its report (error or warnings) and whether the
    values it left are right."""
    from portkit.simt import simulate

    buffers = entry.make(np.random.default_rng(seed))
    kernel = simulate(entry.kernel)
    try:
        with warnings.catch_warnings():  # kept on the kernel: shown in the verdict instead
            warnings.simplefilter("ignore")
            kernel[entry.grid, entry.block](*entry.args(buffers))
    except Exception as exc:  # a simulator report: the kind names the rule
        return {"verdict": "error", "kind": getattr(exc, "kind", type(exc).__name__),
                "detail": str(exc).splitlines()[0], "wrong": None, "warnings": []}
    return {"verdict": "ok", "kind": "", "detail": "", "wrong": bool(wrong_buffers(entry, buffers)),
            "warnings": sorted({w.kind for w in kernel.warnings})}
