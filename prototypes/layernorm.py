"""Layer normalisation over the last dimension with weight and bias:
``y = (x - mean) / sqrt(var + eps) * w + b`` for each row of a 2-D ``x``.

Every sum across threads is float64 for every dtype (`allow-float64`): the row's mean, its
variance about the mean (the two-pass form does not cancel), the backward's two row sums,
and the weight and bias gradients across rows. So float64 is exact enough for gradcheck,
and the others match the float64 reference rounded once. Mean and 1/std are saved as
float64. The last step, ``xhat * w + b``, is float32 for float16, bfloat16 and float32
(``wide`` = 0: one float32 rounding of xhat, far inside the float32 tolerance) and float64
for float64. The forward's narrow path (float16, bfloat16: ``row_stats32``, ``affine32``)
keeps a thread's elements, its partial sums, x - mean and xhat in float32, each partial
widened once for the float64 sum across threads: the twin then holds its elements in
float registers (64 a thread, not 96) and converts once a thread, not twice an element.

Layout (the twin's, cuda_src/layernorm.cu; same element-to-thread mapping and summation
orders, so the two agree within the twin tolerance):

- forward: blocks walk rows blockIdx.x, blockIdx.x + gridDim.x, ..., ``row_threads``
  threads (whole warps) a row; float32 a persistent grid (``FWD_THREADS_PER_SM`` threads'
  worth of blocks an SM: the twin loads a block's next row while it reduces this one), the
  other dtypes grid = rows (one row a block); thread t owns the
  row's 16-byte packs t, t + nx, ... (8 bfloat16/float16, 4 float32, 2 float64 columns),
  then tail column packs * width + t; it sums pack by pack, column by column, then a warp
  butterfly (xor 16..1) and the row's warps left to right (``row_sum``);
- backward: a persistent grid (a few blocks per SM) walks the rows, one row per block at a
  time; each thread keeps the weight and bias gradients of its columns summed over its rows
  (in registers in the twin, in ``partw``/``partb`` here: the same additions in the same
  order) and leaves one partial row per block; ``layernorm_bwd_wb`` sums the partials per
  column, 32 at a time, then the 32 sums in order. Deterministic: no atomics. With the
  bwd_half_math knob's "float32", float16 and bfloat16 take ``layernorm_bwd32`` (float32
  with bwd_float_math's): the same layout with float32 per-element arithmetic and partial
  sums (the forward's narrow path).
"""

import math

import torch
from numba import cuda, float32, float64

import portkit

FWD_ELEMS = 16  # columns a thread holds per row in the forward (the twin's registers)
BWD_ELEMS = 8  # and in the backward (dy, xhat, w and two gradient sums per column)
MAX_THREADS = 512  # a row's threads at most (the twin's __launch_bounds__)
# float32's forward grid: the threads an SM keeps resident at the twin's 114-117 registers
# (ptxas sm_90: 2 blocks of 256). More would queue blocks behind a full SM: a second wave.
FWD_THREADS_PER_SM = 512
BWD_THREADS_PER_SM = 512  # the backward's persistent grid: ~110 registers a thread
ROWS_PER_PART = 128  # at most (16384 rows on an H100's 132 SMs: 124 a block)
WARP = 32
MAX_WARPS = 32
FULL_MASK = 0xFFFFFFFF
W_COLS = 16  # layernorm_bwd_wb: a block sums 16 columns' partials, 32 rows at a time
W_ROWS = 32
EPS = 1e-5
DTYPES = ("float32", "float16", "bfloat16", "float64")


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
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)  # portkit: allow-float64
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
        total += part[i]  # portkit: allow-float64 allow-int64-index
    cuda.syncthreads()  # every thread has read the sums before the next call overwrites them
    return total


@cuda.jit(device=True)
def affine(x, w, b, out, row, c, mu, r, wide):
    xhat = (float64(x[row, c]) - mu) * r  # portkit: allow-float64
    if wide:
        out[row, c] = xhat * float64(w[c]) + float64(b[c])  # portkit: allow-float64
    else:
        out[row, c] = float32(xhat) * float32(w[c]) + float32(b[c])


@cuda.jit(device=True)
def affine32(x, w, b, out, row, c, mu32, r32):
    """The narrow path's output: xhat in float32 from float32 x - mean and 1/std."""
    xhat32 = (float32(x[row, c]) - mu32) * r32
    out[row, c] = xhat32 * float32(w[c]) + float32(b[c])


@cuda.jit(device=True)
def row_stats(x, part, row, cols, eps):
    """Mean and 1/std of the row, every element and partial sum in float64."""
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    width = 16 // x.itemsize  # columns in one of the twin's 16-byte packs
    packs = cols // width
    tail = packs * width
    s = float64(0.0)
    for p in range(tx, packs, nx):
        for j in range(width):
            s += float64(x[row, p * width + j])  # portkit: allow-float64 allow-int64-index
    for c in range(tail + tx, cols, nx):
        s += float64(x[row, c])  # portkit: allow-float64
    mu = row_sum(part, s) / cols  # portkit: allow-float64

    s = float64(0.0)
    for p in range(tx, packs, nx):
        for j in range(width):
            d = float64(x[row, p * width + j]) - mu  # portkit: allow-float64 allow-int64-index
            s += d * d  # portkit: allow-float64
    for c in range(tail + tx, cols, nx):
        d = float64(x[row, c]) - mu  # portkit: allow-float64
        s += d * d  # portkit: allow-float64
    var = row_sum(part, s) / cols  # portkit: allow-float64
    return mu, 1.0 / math.sqrt(var + eps)  # portkit: allow-float64


@cuda.jit(device=True)
def row_stats32(x, part, row, cols, eps):
    """The narrow path's row_stats: a thread's elements and partial sums in float32, each
    partial widened once for the float64 sum across threads; x - mean against the float32
    mean. Returns the float64 mean and 1/std (saved) and their float32 roundings."""
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    width = 16 // x.itemsize
    packs = cols // width
    tail = packs * width
    s32 = float32(0.0)
    for p in range(tx, packs, nx):
        for j in range(width):
            s32 += float32(x[row, p * width + j])  # portkit: allow-int64-index
    for c in range(tail + tx, cols, nx):
        s32 += float32(x[row, c])
    mu = row_sum(part, float64(s32)) / cols  # portkit: allow-float64
    mu32 = float32(mu)

    s32 = float32(0.0)
    for p in range(tx, packs, nx):
        for j in range(width):
            d32 = float32(x[row, p * width + j]) - mu32  # portkit: allow-int64-index
            s32 += d32 * d32
    for c in range(tail + tx, cols, nx):
        d32 = float32(x[row, c]) - mu32
        s32 += d32 * d32
    var = row_sum(part, float64(s32)) / cols  # portkit: allow-float64
    r = 1.0 / math.sqrt(var + eps)  # portkit: allow-float64
    return mu, r, mu32, float32(r)


@cuda.jit
def layernorm_fwd(x, w, b, out, mean, rstd, rows, cols, eps, wide):
    """Blocks walk the rows, one row per block at a time (grid = rows: one row each). The
    float32 twin issues the next row's loads before this row's reductions; the values and
    their order are these."""
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    part = cuda.shared.array(MAX_WARPS, dtype=float64)
    width = 16 // x.itemsize
    packs = cols // width
    tail = packs * width
    for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        if x.itemsize == 2:  # float16, bfloat16: the narrow path
            mu, r, mu32, r32 = row_stats32(x, part, row, cols, eps)
            for p in range(tx, packs, nx):
                for j in range(width):
                    affine32(x, w, b, out, row, p * width + j, mu32, r32)
            for c in range(tail + tx, cols, nx):
                affine32(x, w, b, out, row, c, mu32, r32)
        else:
            mu, r = row_stats(x, part, row, cols, eps)
            for p in range(tx, packs, nx):
                for j in range(width):
                    affine(x, w, b, out, row, p * width + j, mu, r, wide)
            for c in range(tail + tx, cols, nx):
                affine(x, w, b, out, row, c, mu, r, wide)
        if tx == 0:
            mean[row] = mu
            rstd[row] = r


@cuda.jit(device=True)
def bwd_sums(x, w, dy, row, c, mu, r, s1, s2):
    """The row sums of g = dy * w and g * xhat, with this element added."""
    g = float64(dy[row, c]) * float64(w[c])  # portkit: allow-float64
    return s1 + g, s2 + g * ((float64(x[row, c]) - mu) * r)  # portkit: allow-float64


@cuda.jit(device=True)
def bwd_element(x, w, dy, dx, partw, partb, row, c, mu, r, m1, m2):
    """dx of one element, and its terms of the weight and bias gradients added to the
    block's partial rows."""
    dyc = float64(dy[row, c])  # portkit: allow-float64
    xhat = (float64(x[row, c]) - mu) * r  # portkit: allow-float64
    dx[row, c] = r * (dyc * float64(w[c]) - m1 - xhat * m2)  # portkit: allow-float64
    partw[cuda.blockIdx.x, c] += dyc * xhat  # portkit: allow-float64
    partb[cuda.blockIdx.x, c] += dyc  # portkit: allow-float64


@cuda.jit(device=True)
def zero_partials(partw, partb, packs, width, cols):
    """This block's row of each gradient partial zeroed, each thread its own columns (packs
    tx, tx + nx, ..., then tail columns): the ones it accumulates into afterwards."""
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    for p in range(tx, packs, nx):
        for j in range(width):
            partw[cuda.blockIdx.x, p * width + j] = 0.0  # portkit: allow-int64-index
            partb[cuda.blockIdx.x, p * width + j] = 0.0  # portkit: allow-int64-index
    for c in range(packs * width + tx, cols, nx):
        partw[cuda.blockIdx.x, c] = 0.0
        partb[cuda.blockIdx.x, c] = 0.0


@cuda.jit
def layernorm_bwd(x, w, dy, mean, rstd, dx, partw, partb, rows, cols):
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    sums = cuda.shared.array(MAX_WARPS, dtype=float64)
    width = 16 // x.itemsize
    packs = cols // width
    tail = packs * width

    zero_partials(partw, partb, packs, width, cols)  # the columns this thread owns

    for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        mu = mean[row]
        r = rstd[row]
        s1 = float64(0.0)
        s2 = float64(0.0)
        for p in range(tx, packs, nx):
            for j in range(width):
                s1, s2 = bwd_sums(x, w, dy, row, p * width + j, mu, r, s1, s2)
        for c in range(tail + tx, cols, nx):
            s1, s2 = bwd_sums(x, w, dy, row, c, mu, r, s1, s2)
        m1 = row_sum(sums, s1) / cols  # portkit: allow-float64
        m2 = row_sum(sums, s2) / cols  # portkit: allow-float64
        for p in range(tx, packs, nx):
            for j in range(width):
                bwd_element(x, w, dy, dx, partw, partb, row, p * width + j, mu, r, m1, m2)
        for c in range(tail + tx, cols, nx):
            bwd_element(x, w, dy, dx, partw, partb, row, c, mu, r, m1, m2)


@cuda.jit(device=True)
def bwd_sums32(x, w, dy, row, c, mu32, r32, s1, s2):
    """bwd_sums in float32 (the narrow path)."""
    g = float32(dy[row, c]) * float32(w[c])
    return s1 + g, s2 + g * ((float32(x[row, c]) - mu32) * r32)


@cuda.jit(device=True)
def bwd_element32(x, w, dy, dx, partw, partb, row, c, mu32, r32, m1, m2):
    """bwd_element in float32: the partial rows hold float32 sums (exactly, as float64)."""
    dyc = float32(dy[row, c])
    xhat = (float32(x[row, c]) - mu32) * r32
    dx[row, c] = r32 * (dyc * float32(w[c]) - m1 - xhat * m2)
    partw[cuda.blockIdx.x, c] = float32(partw[cuda.blockIdx.x, c]) + dyc * xhat
    partb[cuda.blockIdx.x, c] = float32(partb[cuda.blockIdx.x, c]) + dyc


@cuda.jit
def layernorm_bwd32(x, w, dy, mean, rstd, dx, partw, partb, rows, cols):
    """layernorm_bwd's narrow path (float16 and bfloat16 with the bwd_half_math knob's
    "float32", float32 with bwd_float_math's): per element float32 (mean and 1/std
    rounded to float32 once a row), a thread's row sums widened once for the float64
    sums across threads, their means through 1 / cols (float64, once a thread), the
    gradient partials float32 sums. (The
    twin reduces the two row sums behind one pair of barriers, `row_sum2`: each in
    row_sum's order, so the same values.)"""
    tx = cuda.threadIdx.x
    nx = cuda.blockDim.x
    sums = cuda.shared.array(MAX_WARPS, dtype=float64)
    width = 16 // x.itemsize
    packs = cols // width
    tail = packs * width
    inv_cols = 1.0 / cols  # portkit: allow-float64

    zero_partials(partw, partb, packs, width, cols)

    for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        mu32 = float32(mean[row])
        r32 = float32(rstd[row])
        s1 = float32(0.0)
        s2 = float32(0.0)
        for p in range(tx, packs, nx):
            for j in range(width):
                s1, s2 = bwd_sums32(x, w, dy, row, p * width + j, mu32, r32, s1, s2)
        for c in range(tail + tx, cols, nx):
            s1, s2 = bwd_sums32(x, w, dy, row, c, mu32, r32, s1, s2)
        m1 = float32(row_sum(sums, float64(s1)) * inv_cols)  # portkit: allow-float64
        m2 = float32(row_sum(sums, float64(s2)) * inv_cols)  # portkit: allow-float64
        for p in range(tx, packs, nx):
            for j in range(width):
                bwd_element32(x, w, dy, dx, partw, partb, row, p * width + j, mu32, r32, m1, m2)
        for c in range(tail + tx, cols, nx):
            bwd_element32(x, w, dy, dx, partw, partb, row, c, mu32, r32, m1, m2)


@cuda.jit
def layernorm_bwd_wb(partw, partb, dw, db, parts, cols):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    c = cuda.blockIdx.x * W_COLS + tx
    sums_w = cuda.shared.array((W_ROWS, W_COLS), dtype=float64)
    sums_b = cuda.shared.array((W_ROWS, W_COLS), dtype=float64)
    sw = float64(0.0)
    sb = float64(0.0)
    if c < cols:
        for p in range(ty, parts, W_ROWS):
            sw += partw[p, c]  # portkit: allow-float64
            sb += partb[p, c]  # portkit: allow-float64
    sums_w[ty, tx] = sw
    sums_b[ty, tx] = sb
    cuda.syncthreads()
    if ty == 0 and c < cols:
        for i in range(1, W_ROWS):
            sw += sums_w[i, tx]  # portkit: allow-float64
            sb += sums_b[i, tx]  # portkit: allow-float64
        dw[c] = sw
        db[c] = sb


def reference(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, EPS)


def _cases():
    # 37x64: grids (2 "SMs" in the simulator) that loop over rows, float32's forward
    # pipelined; 3x8200 float32: rows longer than MAX_THREADS threads x FWD_ELEMS columns,
    # walked in chunks by a forward grid of 2 blocks.
    shapes = ((1, 1), (3, 127), (2, 129), (4, 1000), (37, 64))
    cases = [
        portkit.cases.custom(f"{dt}-{r}x{c}", [(r, c), (c,), (c,)], dt, seed=i)
        for dt in DTYPES
        for i, (r, c) in enumerate(shapes)
    ]
    cases.append(portkit.cases.custom("float32-3x8200", [(3, 8200), (8200,), (8200,)], seed=5))
    cases.append(
        portkit.cases.custom("float32-4096x4096", [(4096, 4096), (4096,), (4096,)], large=True)
    )
    cases.append(
        portkit.cases.custom("float64-gradcheck", [(2, 5), (5,), (5,)], "float64", gradcheck=True)
    )
    return cases


# portkit bench: the square float32 case, and a transformer's activations
BENCH = [
    portkit.cases.custom(f"{dt}-{r}x{c}", [(r, c), (c,), (c,)], dt)
    for dt, r, c in (("float32", 4096, 4096), ("bfloat16", 16384, 4096), ("float32", 16384, 4096))
]


# Mean, 1/std and the weight/bias gradient sums are float64 in the kernels: the reference
# runs in float64 too, rounded once (torch's float32 sums over 4096 rows differ, H100 run).
@portkit.op(
    reference=reference,
    baseline=reference,  # F.layer_norm: what a user would call (not widened, as bench runs it)
    cases=_cases(),
    dtypes=DTYPES,
    same_shape=False,
    reference_in="float64",
    bench=BENCH,
    # Launch parameters `portkit tune` may pick per GPU (the first value the default):
    # columns a forward / backward thread aims to hold (fewer: more threads a row, up to
    # MAX_THREADS; more: fewer, a longer row is walked in chunks), and the persistent
    # grids (the float32 forward's, the backward's) in threads per SM.
    knobs={
        "fwd_elems": [FWD_ELEMS, 8, 32],
        "fwd_threads_per_sm": [FWD_THREADS_PER_SM, 1024, 2048],
        # float16 / bfloat16 backward's per-element arithmetic: float64 (layernorm_bwd) or
        # float32 (layernorm_bwd32: no conversion to double an element, 64 registers a
        # thread, so 2 blocks of 512 an SM with bwd_threads_per_sm 1024, where the
        # float64 path's 118 leave 1; cuda_src/layernorm.cu says why). Before the other
        # backward knobs: `portkit tune`'s greedy search (--budget 10) then tries
        # bwd_threads_per_sm 1024 with it.
        "bwd_half_math": ["float64", "float32"],
        # float32 backward's per-element arithmetic, the same choice: at 4096x4096 and
        # 16384x4096 float32 the float64 path ran at 35-42% of copy bandwidth on an H200
        # (torch 43-47%, 2026-11-28: 0.94 and 0.98-0.99 of torch's speed), the half path's
        # numbers before its float32 path.
        "bwd_float_math": ["float64", "float32"],
        "bwd_elems": [BWD_ELEMS, 4, 16],
        "bwd_threads_per_sm": [BWD_THREADS_PER_SM, 1024, 256],
    },
)
class LayerNorm:
    def check_inputs(x, w, b):
        if x.dim() != 2 or w.shape != (x.shape[1],) or b.shape != (x.shape[1],):
            raise portkit.InputError(
                f"layernorm takes x (rows, cols), weight (cols,), bias (cols,); got "
                f"{tuple(x.shape)}, {tuple(w.shape)}, {tuple(b.shape)}"
            )

    def forward(k, x, w, b):
        rows, cols = x.shape
        out = k.empty_like(x)
        mean = k.empty((rows,), torch.float64)
        rstd = k.empty((rows,), torch.float64)
        if rows and cols:
            kn = portkit.knobs(k, x)
            threads = row_threads(cols, x.element_size(), kn.fwd_elems)
            grid = rows  # one row a block; float32: a persistent grid, rows a block
            if x.dtype == torch.float32:
                per_sm = max(1, kn.fwd_threads_per_sm // threads)
                grid = min(rows, per_sm * portkit.sm_count(k))
            wide = int(x.dtype == torch.float64)  # float64: xhat * w + b in float64 too
            k.layernorm_fwd[grid, threads](x, w, b, out, mean, rstd, rows, cols, EPS, wide)
        return out, (x, w, mean, rstd)

    def backward(k, saved, dy):
        x, w, mean, rstd = saved
        rows, cols = x.shape
        dx, dw, db = k.empty_like(x), k.empty_like(w), k.empty_like(w)
        if not cols:
            return dx, dw, db
        kn = portkit.knobs(k, x)  # x: the forward's bucket, so both pick one table entry
        threads = row_threads(cols, x.element_size(), kn.bwd_elems)
        per_sm = max(1, kn.bwd_threads_per_sm // threads)
        # a few blocks per SM, or ROWS_PER_PART rows a block (a simulated 2-SM grid)
        parts = max(
            1, min(rows, max(per_sm * portkit.sm_count(k), portkit.cdiv(rows, ROWS_PER_PART)))
        )
        partw = k.empty((parts, cols), torch.float64)
        partb = k.empty((parts, cols), torch.float64)
        narrow = (x.element_size() == 2 and kn.bwd_half_math == "float32") or (
            x.dtype == torch.float32 and kn.bwd_float_math == "float32"
        )
        kernel = k.layernorm_bwd32 if narrow else k.layernorm_bwd
        kernel[parts, threads](x, w, dy, mean, rstd, dx, partw, partb, rows, cols)
        grid = portkit.cdiv(cols, W_COLS)
        k.layernorm_bwd_wb[grid, (W_COLS, W_ROWS)](partw, partb, dw, db, parts, cols)
        return dx, dw, db
