"""Residual add fused with RMS normalisation, as LLaMA-style models run it between layers:
``h = x + residual`` (the updated residual stream) and ``y = h / sqrt(mean(h**2) + eps) * w``
over the last dimension of 2-D tensors; both ``y`` and ``h`` are outputs.

Unfused, torch makes several passes over the rows (the add, the square, the mean, two
products, two casts); fused, the forward reads x and residual once and writes y and h
once, and the backward reads h (float32; x and residual for bfloat16 and float16, see
below), dy and dh once and writes the input gradient once: d/dx and d/dresidual of h are
both the identity, so the backward returns one tensor for both, as torch's add does
(autograd gives x.grad and residual.grad storage of their own). Add a small float32
buffer of per-block weight-gradient partials. ``bytes=`` below declares that traffic.

Precision: float32 arithmetic for bfloat16, float16 and float32 storage (not float64, as
``rmsnorm``: its backward is checked against the reference's autograd, no gradcheck). The
forward's norm is taken of h in float32, before h is rounded to the storage dtype at its
store, so each output is rounded once; the reference computes the same in float32. The
float32 backward reads the stored h, exactly the h the norm used. For bfloat16 and
float16 the stored h is rounded once (2^-9 / 2^-12 relative), and a backward from it
missed the reference's gradients at those dtypes' tolerances (the weight gradient, whose
sum of g * h over the rows cancels: bfloat16-4x1000, float16-150x41), so those read x and
residual and add them in float32, as the forward did.

Layout (the twin's, cuda_src/add_rmsnorm.cu; the prototype keeps its element-to-thread
mapping and every summation order, so the two agree within the twin tolerance):

- a row is worked by ``tx`` threads (whole warps), ``ty`` rows to a block (``geometry``):
  thread t owns the row's 16-byte packs t, t + tx, ... (8 bfloat16/float16 or 4 float32
  columns each), then tail column packs * width + t; the row's threads sum their squares
  (pack by pack, column by column), then a warp butterfly (xor 16..1) and the row's warp
  sums left to right (``row_sum``);
- ``tx`` is chosen so that a thread owns at most FWD_ELEMS (forward) or BWD_ELEMS
  (backward) elements of a row, whole packs: the twin holds them in registers between the
  reduction and the output pass (longer rows are walked in chunks of 1024 threads' worth
  and re-read);
- backward, one pass over h (or x and residual), dy and dh: a persistent grid (a few
  blocks per SM)
  walks the rows; each thread keeps the weight gradient of the columns it owns summed over
  its rows in float32 (in registers in the twin, in the ``part`` buffer here, the same
  additions in the same order) and writes one partial row per block row;
  ``add_rmsnorm_bwd_w`` sums the partials per column in float64, 32 of them at a time,
  then the 32 sums left to right.
"""

import math

import torch
from numba import cuda, float32, float64

import portkit

FWD_ELEMS = 16  # elements of a row a thread holds in the forward (the twin's registers)
BWD_ELEMS = 8  # in the backward (h, dy, dh and the weight-gradient sums)
ROW_THREADS = 128  # threads per block at least: short rows share a block, ty rows of tx
WARP = 32
MAX_WARPS = 32  # 1024 threads
FULL_MASK = 0xFFFFFFFF
ROW_THREADS_MAX = 1024  # blocks at most (the twin's __launch_bounds__: 64 registers)
BWD_THREADS_PER_SM = 1024  # the backward's persistent grid: what 64 registers keep resident
W_COLS = 16  # add_rmsnorm_bwd_w: a block sums 16 columns' partials, 32 rows at a time
W_ROWS = 32
EPS = 1e-6
DTYPES = ("float32", "bfloat16", "float16")


def geometry(cols, itemsize, elems, limit=ROW_THREADS_MAX, block=ROW_THREADS):
    """(threads per row, rows per block): whole warps, each thread owning at most ``elems``
    elements (whole 16-byte packs) of a row when ``limit`` threads allow it, and blocks of
    at least ``block`` threads."""
    packs = cols // (16 // itemsize)
    packs_per_thread = max(1, elems * itemsize // 16)
    wanted = portkit.cdiv(portkit.cdiv(packs, packs_per_thread), WARP) * WARP
    per_row = min(limit, max(WARP, wanted))
    return per_row, max(1, block // per_row)


@cuda.jit(device=True)
def warp_sum(v):
    offset = WARP // 2
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    return v


@cuda.jit(device=True)
def row_sum(part, value):
    """Sum ``value`` over the threads of this thread's row (threadIdx.y), every thread of
    the block calling it; each gets its row's sum."""
    v = warp_sum(value)
    warps = cuda.blockDim.x // WARP
    first = cuda.threadIdx.y * warps
    if cuda.threadIdx.x % WARP == 0:
        part[first + cuda.threadIdx.x // WARP] = v
    cuda.syncthreads()
    total = part[first]
    for i in range(1, warps):
        total += part[first + i]  # portkit: allow-int64-index
    cuda.syncthreads()  # every row has read its sums before the next call overwrites them
    return total


# launch_bounds as the twin's: numba left alone used more than 64 registers, and a block of
# 1024 threads (rows over 8192 bfloat16 / 4096 float32 columns) failed to launch on an H100
# (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).
@cuda.jit(launch_bounds=ROW_THREADS_MAX)
def add_rmsnorm_fwd(x, residual, w, y, h, rstd, rows, cols, eps):
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    active = row < rows  # a whole row of threads is idle past the last row
    part = cuda.shared.array(MAX_WARPS, dtype=float32)
    width = 16 // x.itemsize  # columns in one of the twin's 16-byte packs
    packs = cols // width
    tail = packs * width

    s = float32(0.0)
    if active:
        for p in range(tx, packs, nx):
            for j in range(width):
                c = p * width + j  # portkit: allow-int64-index
                v = float32(x[row, c]) + float32(residual[row, c])
                h[row, c] = v
                s += v * v
        for c in range(tail + tx, cols, nx):
            v = float32(x[row, c]) + float32(residual[row, c])
            h[row, c] = v
            s += v * v
    r = float32(1.0) / math.sqrt(row_sum(part, s) / float32(cols) + float32(eps))
    if active:
        for p in range(tx, packs, nx):
            for j in range(width):
                c = p * width + j  # portkit: allow-int64-index
                v = float32(x[row, c]) + float32(residual[row, c])
                y[row, c] = v * r * float32(w[c])
        for c in range(tail + tx, cols, nx):
            v = float32(x[row, c]) + float32(residual[row, c])
            y[row, c] = v * r * float32(w[c])
        if tx == 0:
            rstd[row] = r


@cuda.jit(device=True)
def bwd_h(x, residual, h, row, c):
    """The backward's h: the saved h for float32 storage, x + residual for the half dtypes
    (their stored h is rounded; see the module docstring)."""
    if h.itemsize == 4:
        return float32(h[row, c])
    return float32(x[row, c]) + float32(residual[row, c])


@cuda.jit(launch_bounds=ROW_THREADS_MAX)
def add_rmsnorm_bwd(x, residual, h, w, dy, dh, rstd, dx, part, rows, cols):
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    ny = cuda.blockDim.y
    prow = cuda.blockIdx.x * ny + cuda.threadIdx.y  # this thread row's partial row
    sums = cuda.shared.array(MAX_WARPS, dtype=float32)
    width = 16 // h.itemsize
    packs = cols // width
    tail = packs * width

    for p in range(tx, packs, nx):  # the columns this thread owns start at 0
        for j in range(width):
            part[prow, p * width + j] = float32(0.0)  # portkit: allow-int64-index
    for c in range(tail + tx, cols, nx):
        part[prow, c] = float32(0.0)

    groups = (rows + ny - 1) // ny  # portkit: allow-int64-index
    for group in range(cuda.blockIdx.x, groups, cuda.gridDim.x):
        row = group * ny + cuda.threadIdx.y  # portkit: allow-int64-index
        active = row < rows
        r = float32(0.0)
        s = float32(0.0)  # sum of g * hhat over the row, g = dy * w, hhat = h * rstd
        if active:
            r = rstd[row]
            for p in range(tx, packs, nx):
                for j in range(width):
                    c = p * width + j  # portkit: allow-int64-index
                    v = bwd_h(x, residual, h, row, c)
                    s += float32(dy[row, c]) * float32(w[c]) * (v * r)
            for c in range(tail + tx, cols, nx):
                v = bwd_h(x, residual, h, row, c)
                s += float32(dy[row, c]) * float32(w[c]) * (v * r)
        m = row_sum(sums, s) / float32(cols)
        if active:
            for p in range(tx, packs, nx):
                for j in range(width):
                    c = p * width + j  # portkit: allow-int64-index
                    g = float32(dy[row, c])
                    hhat = bwd_h(x, residual, h, row, c) * r
                    dx[row, c] = r * (g * float32(w[c]) - hhat * m) + float32(dh[row, c])
                    part[prow, c] += g * hhat
            for c in range(tail + tx, cols, nx):
                g = float32(dy[row, c])
                hhat = bwd_h(x, residual, h, row, c) * r
                dx[row, c] = r * (g * float32(w[c]) - hhat * m) + float32(dh[row, c])
                part[prow, c] += g * hhat


@cuda.jit
def add_rmsnorm_bwd_w(part, dw, parts, cols):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = cuda.blockIdx.x * W_COLS + tx
    sums = cuda.shared.array((W_ROWS, W_COLS), dtype=float64)
    s = float64(0.0)
    if c < cols:
        for p in range(ty, parts, W_ROWS):
            s += float64(part[p, c])  # portkit: allow-float64
    sums[ty, tx] = s
    cuda.syncthreads()
    if ty == 0 and c < cols:
        for i in range(1, W_ROWS):
            s += sums[i, tx]  # portkit: allow-float64
        dw[c] = float32(s)


def reference(x, residual, w):
    # float32 for half precision (as the kernels), float64 for the control's float64 run
    wide = torch.promote_types(x.dtype, torch.float32)
    h = x.to(wide) + residual.to(wide)
    r = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return (h * r * w.to(wide)).to(x.dtype), h.to(x.dtype)


def baseline(x, residual, w):
    """What a user would call: the add, then torch's F.rms_norm (torch >= 2.4; torch has no
    public fused add + RMSNorm), in float32 for half precision as the reference and the
    kernels. In bfloat16 and float16 throughout, torch rounds the norm's input gradient
    before adding dh: the two nearly cancel, and x's gradient was 74 bfloat16 ULPs off the
    reference (bfloat16-3x127, CPU, 2026-11-27), a wrong baseline that bench would fail."""
    wide = torch.promote_types(x.dtype, torch.float32)
    h = x.to(wide) + residual.to(wide)
    y = torch.nn.functional.rms_norm(h, (h.shape[-1],), w.to(wide), EPS)
    return y.to(x.dtype), h.to(x.dtype)


def _rows_bytes(x, residual, w, tensors):
    """``tensors`` row-sized tensors of x's dtype, plus w and the weight gradient or y."""
    return tensors * x.numel() * x.element_size() + 2 * w.numel() * w.element_size()


def _bwd_rows(x):
    """Row-sized tensors the backward moves: h, dy, dh and dx; x and residual for h in
    bfloat16 and float16."""
    return 4 if x.element_size() == 4 else 5


def _cases():
    # 1x1 and 3x127: most threads idle; 37x64: rows that do not fill the last block of
    # 4 rows; 150x41: a backward grid (2 "SMs" in the simulator, 16 blocks of 4 rows) that
    # loops; 2x129 and the odd column counts: scalar accesses on unaligned rows, tail
    # columns; 2x16390 (float32) and 2x8203 (bfloat16): rows longer than 1024 threads'
    # worth, walked in chunks (2x8203: the backward only, the forward's row fits).
    shapes = ((1, 1), (3, 127), (2, 129), (4, 1000), (37, 64))
    cases = [
        portkit.cases.custom(f"{dt}-{r}x{c}", [(r, c), (r, c), (c,)], dt, seed=i)
        for dt in DTYPES
        for i, (r, c) in enumerate(shapes)
    ]
    cases.append(portkit.cases.custom("float32-2x16390", [(2, 16390)] * 2 + [(16390,)], seed=5))
    cases.append(portkit.cases.custom("float32-0x8", [(0, 8), (0, 8), (8,)], seed=6))
    cases.append(
        portkit.cases.custom("float16-150x41", [(150, 41)] * 2 + [(41,)], "float16", seed=7)
    )
    cases.append(
        portkit.cases.custom("bfloat16-2x8203", [(2, 8203)] * 2 + [(8203,)], "bfloat16", seed=8)
    )
    # 20x1000 float32: backward blocks of one 4-warp row that loop over rows (16 blocks for
    # 20 rows), so row_sum's second barrier is what keeps the next row's sums from
    # overwriting this row's before every warp has read them (150x41 loops with one warp a
    # row). Added because `portkit mutate` dropped that barrier unseen (docs/mutate.md).
    cases.append(portkit.cases.custom("float32-20x1000", [(20, 1000)] * 2 + [(1000,)], seed=9))
    return cases + BENCH


# portkit bench: a LLaMA-sized hidden dimension over a batch of tokens
BENCH = [
    portkit.cases.custom(
        f"{dt}-16384x4096",
        [(16384, 4096), (16384, 4096), (4096,)],
        dt,
        large=True,
        gpu_only="67M elements per tensor: minutes in the simulator",
    )
    for dt in ("bfloat16", "float32")
]


@portkit.op(
    reference=reference,
    baseline=baseline,
    cases=_cases(),
    dtypes=DTYPES,
    same_shape=False,
    bench=BENCH,
    # No declared tolerance: the weight gradient at 16384x4096 (each thread sums its rows
    # in float32, then the partial rows are added in float64) is within the measured
    # control, 5x torch's own float32 error against float64 (checking/control.py). The
    # kernels' sum emulated on the CPU against it (2026-11-27, seed 0, docs/seeds.md), for
    # each backward grid the knobs allow (132, 264, 528 partial rows on an H100): margin
    # 0.30, 0.20, 0.16 in float32 (max error 1.1e-4 at 132 partials, torch's 7.0e-5), 0.11
    # in bfloat16. The tolerance declared before the control (rtol 1e-5, atol 5e-4) is gone.
    # forward: x, residual in, y, h out; backward: h (float32) or x and residual (bfloat16,
    # float16), dy, dh in, dx out (one tensor, both inputs' gradient), plus w and dw, and rstd
    bytes={
        "forward": lambda x, residual, w: _rows_bytes(x, residual, w, 4),
        "backward": lambda x, residual, w: (
            _rows_bytes(x, residual, w, _bwd_rows(x)) + x.shape[0] * 4
        ),
    },
    # Launch parameters `portkit tune` may pick per GPU (the first value the default):
    # elements a forward / backward thread aims to hold (fewer: more threads a row; more:
    # fewer, a longer row walked in chunks), the threads a block has at least (short rows
    # share it) and the backward's persistent grid in threads per SM.
    knobs={
        "fwd_elems": [FWD_ELEMS, 8, 32],
        "block_threads": [ROW_THREADS, 256, 512],
        "bwd_elems": [BWD_ELEMS, 4, 16],
        "bwd_threads_per_sm": [BWD_THREADS_PER_SM, 2048, 512],
    },
)
class AddRMSNorm:
    def check_inputs(x, residual, w):
        if x.dim() != 2 or residual.shape != x.shape or w.shape != (x.shape[1],):
            raise portkit.InputError(
                f"add_rmsnorm takes x and residual (rows, cols) and weight (cols,); got "
                f"{tuple(x.shape)}, {tuple(residual.shape)}, {tuple(w.shape)}"
            )

    def forward(k, x, residual, w):
        rows, cols = x.shape
        y, h = k.empty_like(x), k.empty_like(x)
        rstd = k.empty((rows,), torch.float32)
        if rows and cols:
            kn = portkit.knobs(k, x)
            per_row, per_block = geometry(
                cols, x.element_size(), kn.fwd_elems, block=kn.block_threads
            )
            grid = portkit.cdiv(rows, per_block)
            k.add_rmsnorm_fwd[grid, (per_row, per_block)](
                x, residual, w, y, h, rstd, rows, cols, EPS
            )
        return (y, h), (x, residual, h, w, rstd)

    def backward(k, saved, dy, dh):
        x, residual, h, w, rstd = saved  # the kernel reads h (float32) or x and residual
        rows, cols = h.shape
        dx, dw = k.empty_like(h), k.empty_like(w)
        if cols:
            kn = portkit.knobs(k, x)  # x: the forward's bucket, so both pick one table entry
            per_row, per_block = geometry(
                cols, h.element_size(), kn.bwd_elems, block=kn.block_threads
            )
            per_sm = max(1, kn.bwd_threads_per_sm // (per_row * per_block))
            grid = min(portkit.cdiv(rows, per_block), per_sm * portkit.sm_count(k))
            parts = grid * per_block
            part = k.empty((parts, cols), torch.float32)
            if rows:
                k.add_rmsnorm_bwd[grid, (per_row, per_block)](
                    x, residual, h, w, dy, dh, rstd, dx, part, rows, cols
                )
            k.add_rmsnorm_bwd_w[portkit.cdiv(cols, W_COLS), (W_COLS, W_ROWS)](part, dw, parts, cols)
        # d/dx and d/dresidual of h = x + residual are the same values: one tensor for
        # both, as torch's own add backward does (autograd gives each leaf its own .grad)
        return dx, dx, dw
