"""RMS normalisation with a weight, as LLaMA-style models use it in bfloat16:
``y = x / sqrt(mean(x**2) + eps) * w`` over the last dimension of a 2-D ``x``.

Half-precision storage, float32 arithmetic: every element is widened to float32 on load
and the result is rounded once at the store. The op accepts bfloat16, float16 and float32,
not float64, so it has no gradcheck (`portkit check` says why); its backward is checked
against the reference's autograd (run in float32 and rounded, like the kernels).

Layout (the twin's, cuda_src/rmsnorm.cu; the prototype keeps its element-to-thread mapping
and every summation order, so the two agree within the twin tolerance):

- one block per row in the forward, ``row_threads`` threads (whole warps): thread t owns
  the row's 16-byte packs t, t + nx, ... (8 bfloat16/float16 or 4 float32 columns each),
  then tail column packs * width + t; it sums its squares pack by pack, column by column,
  then a warp butterfly (xor 16..1) and the row's warps left to right (``row_sum``);
- backward: a persistent grid (a few blocks per SM) walks the rows, one row per block at a
  time; each thread keeps the weight gradient of the columns it owns summed over its rows
  (in registers in the twin, in the ``part`` buffer here: the same additions in the same
  order), float32 sums of float32 products, and leaves one partial row per block, in
  float64; ``rmsnorm_bwd_w`` sums the partials per column in float64, 32 at a time, then
  the 32 sums in order.
  Deterministic: no atomics.
"""

import math

import torch
from numba import cuda, float32, float64

import portkit

FWD_ELEMS = 16  # columns a thread holds per row in the forward (the twin's registers)
BWD_ELEMS = 8  # and in the backward (x and dy, plus the weight gradient sums)
MAX_THREADS = 512  # a row's threads at most (the twin's __launch_bounds__)
BWD_THREADS_PER_SM = 1024  # the backward's persistent grid: this many threads per SM
ROWS_PER_PART = 128  # at most (16384 rows on an H100's 132 SMs: 124 a block)
WARP = 32
MAX_WARPS = 32
FULL_MASK = 0xFFFFFFFF
W_COLS = 16  # rmsnorm_bwd_w: a block sums 16 columns' partials, 32 rows at a time
W_ROWS = 32
EPS = 1e-6
DTYPES = ("bfloat16", "float16", "float32")


def row_threads(cols, itemsize, elems):
    """Threads for one row: whole warps, each owning at most ``elems`` columns (in whole
    16-byte packs) when MAX_THREADS allow it; longer rows are walked in chunks."""
    width = 16 // itemsize
    wanted = portkit.cdiv(portkit.cdiv(cols // width, max(1, elems // width)), WARP) * WARP
    return min(MAX_THREADS, max(WARP, wanted))


@cuda.jit(device=True)
def warp_sum(v):
    offset = WARP // 2
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    return v


@cuda.jit(device=True)
def row_sum(part, value):
    """Sum ``value`` over the block (one row), every thread calling it; all get the sum."""
    v = warp_sum(value)
    if cuda.threadIdx.x % WARP == 0:
        part[cuda.threadIdx.x // WARP] = v
    cuda.syncthreads()
    total = part[0]
    for i in range(1, cuda.blockDim.x // WARP):
        total += part[i]  # portkit: allow-int64-index
    cuda.syncthreads()  # every thread has read the sums before the next call overwrites them
    return total


@cuda.jit
def rmsnorm_fwd(x, w, out, rstd, cols, eps):
    row = cuda.blockIdx.x
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    part = cuda.shared.array(MAX_WARPS, dtype=float32)
    width = 16 // x.itemsize  # columns in one of the twin's 16-byte packs
    packs = cols // width
    tail = packs * width

    s = float32(0.0)
    for p in range(tx, packs, nx):
        for j in range(width):
            v = float32(x[row, p * width + j])  # portkit: allow-int64-index
            s += v * v
    for c in range(tail + tx, cols, nx):
        v = float32(x[row, c])
        s += v * v
    r = float32(1.0) / math.sqrt(row_sum(part, s) / float32(cols) + float32(eps))
    for p in range(tx, packs, nx):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            out[row, c] = float32(x[row, c]) * r * float32(w[c])
    for c in range(tail + tx, cols, nx):
        out[row, c] = float32(x[row, c]) * r * float32(w[c])
    if tx == 0:
        rstd[row] = r


@cuda.jit(device=True)
def bwd_element(x, w, dy, dx, part, row, c, r, m):
    """dx of one element, and its term of the weight gradient added to the block's partial."""
    g = float32(dy[row, c])
    xhat = float32(x[row, c]) * r
    dx[row, c] = r * (g * float32(w[c]) - xhat * m)
    # float sums (the twin's registers), kept in the float64 partial row: each value is a
    # float, so the round trip is exact
    part[cuda.blockIdx.x, c] = float64(float32(part[cuda.blockIdx.x, c]) + g * xhat)


@cuda.jit
def rmsnorm_bwd(x, w, dy, rstd, dx, part, rows, cols):
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    sums = cuda.shared.array(MAX_WARPS, dtype=float32)
    width = 16 // x.itemsize
    packs = cols // width
    tail = packs * width

    for p in range(tx, packs, nx):  # the columns this thread owns
        for j in range(width):
            part[cuda.blockIdx.x, p * width + j] = float64(0.0)  # portkit: allow-int64-index
    for c in range(tail + tx, cols, nx):
        part[cuda.blockIdx.x, c] = float64(0.0)

    for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        r = rstd[row]
        s = float32(0.0)  # sum of g * w * xhat over the row, xhat = x * rstd
        for p in range(tx, packs, nx):
            for j in range(width):
                c = p * width + j  # portkit: allow-int64-index
                s += float32(dy[row, c]) * float32(w[c]) * (float32(x[row, c]) * r)
        for c in range(tail + tx, cols, nx):
            s += float32(dy[row, c]) * float32(w[c]) * (float32(x[row, c]) * r)
        m = row_sum(sums, s) / float32(cols)
        for p in range(tx, packs, nx):
            for j in range(width):
                bwd_element(x, w, dy, dx, part, row, p * width + j, r, m)
        for c in range(tail + tx, cols, nx):
            bwd_element(x, w, dy, dx, part, row, c, r, m)


@cuda.jit
def rmsnorm_bwd_w(part, dw, parts, cols):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = cuda.blockIdx.x * W_COLS + tx
    sums = cuda.shared.array((W_ROWS, W_COLS), dtype=float64)
    s = float64(0.0)
    if c < cols:
        for p in range(ty, parts, W_ROWS):
            s += part[p, c]  # portkit: allow-float64
    sums[ty, tx] = s
    cuda.syncthreads()
    if ty == 0 and c < cols:
        for i in range(1, W_ROWS):
            s += sums[i, tx]  # portkit: allow-float64
        dw[c] = float32(s)


def reference(x, w):
    # float32 for half precision (as the kernels), float64 for the control's float64 run
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    r = torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + EPS)
    return (wide * r * w.to(wide.dtype)).to(x.dtype)


def baseline(x, w):
    """What a user would call: torch's F.rms_norm (torch >= 2.4), in the input's dtype."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, EPS)


def _cases():
    # 37x64: a backward grid (2 "SMs" in the simulator) that loops over rows; 2x8200
    # float32: rows longer than MAX_THREADS threads x FWD_ELEMS columns, walked in chunks.
    shapes = ((1, 1), (3, 127), (2, 129), (4, 1000), (37, 64))
    cases = [
        portkit.cases.custom(f"{dt}-{r}x{c}", [(r, c), (c,)], dt, seed=i)
        for dt in DTYPES
        for i, (r, c) in enumerate(shapes)
    ]
    cases.append(portkit.cases.custom("float32-2x8200", [(2, 8200), (8200,)], seed=5))
    # 20x1000 float32: a backward block of 4 warps that loops over rows (16 blocks for
    # 20 rows), so row_sum's second barrier is what keeps the next row's sums from
    # overwriting this row's before every warp has read them. Added because `portkit
    # mutate rmsnorm` dropped that barrier and no other case noticed (docs/mutate.md).
    cases.append(portkit.cases.custom("float32-20x1000", [(20, 1000), (1000,)], seed=6))
    shape = [(4096, 4096), (4096,)]
    # In the lockstep engine about 35 CPU seconds on the 2-core CI machine (1024 of its
    # rows: 11.5 s; docs/scale.md): more than the CPU suite's share for one case.
    gpu_only = "16M bfloat16 elements: about 35 s of CPU in the simulator, kept for the GPU"
    cases.append(
        portkit.cases.custom("bfloat16-4096x4096", shape, "bfloat16", large=True, gpu_only=gpu_only)
    )
    return cases


# portkit bench: the square case, and a transformer's activations in bfloat16 and float32
BENCH = [
    portkit.cases.custom(f"{dt}-{r}x{c}", [(r, c), (c,)], dt)
    for dt, r, c in (
        ("bfloat16", 4096, 4096),
        ("bfloat16", 16384, 4096),
        ("float32", 16384, 4096),
    )
]


@portkit.op(
    reference=reference,
    baseline=baseline,
    cases=_cases(),
    dtypes=DTYPES,
    same_shape=False,
    bench=BENCH,
    # Launch parameters `portkit tune` may pick per GPU (the first value the default):
    # columns a forward / backward thread aims to hold (fewer: more threads a row, up to
    # MAX_THREADS; more: fewer threads, a row longer than the twin's registers hold is
    # walked in chunks) and the backward's persistent grid, in threads per SM.
    knobs={
        "fwd_elems": [FWD_ELEMS, 8, 32],
        "bwd_elems": [BWD_ELEMS, 4, 16],
        "bwd_threads_per_sm": [BWD_THREADS_PER_SM, 512, 2048],
    },
    # No declared tolerance: the weight gradient at 16384x4096 (16384 rows summed; the
    # kernels add each thread's float32 products in float32 over its block's rows, then
    # the partial rows in float64; the reference sums in float32) is within the measured
    # control, 5x torch's own error against float64 (checking/control.py). The kernels'
    # sums emulated on the CPU against it (scripts/emulate_weight_gradient.py, seed 0,
    # docs/seeds.md): margin 0.12-0.24 in float32 over 132-528 partial rows (max error
    # 5.5e-5 to 1.0e-4, torch's 8.7e-5), 0.11 in bfloat16. The tolerances declared on
    # 2026-11-24 (rtol 1.6e-2 / atol 5e-4 bfloat16, 1.3e-6 / 2e-4 float32) predate the
    # control.
)
class RMSNorm:
    def check_inputs(x, w):
        if x.dim() != 2 or w.shape != (x.shape[1],):
            raise portkit.InputError(
                f"rmsnorm takes x (rows, cols) and weight (cols,); got "
                f"{tuple(x.shape)}, {tuple(w.shape)}"
            )

    def forward(k, x, w):
        rows, cols = x.shape
        out = k.empty_like(x)
        rstd = k.empty((rows,), torch.float32)
        if rows and cols:
            threads = row_threads(cols, x.element_size(), portkit.knobs(k, x).fwd_elems)
            k.rmsnorm_fwd[rows, threads](x, w, out, rstd, cols, EPS)
        return out, (x, w, rstd)

    def backward(k, saved, dy):
        x, w, rstd = saved
        rows, cols = x.shape
        dx, dw = k.empty_like(x), k.empty_like(w)
        if not cols:
            return dx, dw
        kn = portkit.knobs(k, x)  # x: the forward's bucket, so both pick one table entry
        threads = row_threads(cols, x.element_size(), kn.bwd_elems)
        per_sm = max(1, kn.bwd_threads_per_sm // threads)
        # a few blocks per SM, or ROWS_PER_PART rows a block (a simulated 2-SM grid)
        parts = max(
            1, min(rows, max(per_sm * portkit.sm_count(k), portkit.cdiv(rows, ROWS_PER_PART)))
        )
        part = k.empty((parts, cols), torch.float64)
        k.rmsnorm_bwd[parts, threads](x, w, dy, rstd, dx, part, rows, cols)
        k.rmsnorm_bwd_w[portkit.cdiv(cols, W_COLS), (W_COLS, W_ROWS)](part, dw, parts, cols)
        return dx, dw
