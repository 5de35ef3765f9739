"""Row-wise softmax over a 2-D tensor: one block of ``threads`` threads per row (a knob,
THREADS = 128 by default, `portkit tune` may pick another per GPU; blockDim.x below),
warp-shuffle reductions. Rows of at most 4 KiB go to softmax_rows_fwd instead (its
docstring): the row held in registers, `group` lanes a row, several rows a block.

softmax_fwd holds a row of at most THREADS * HELD packs (4096 float32 / 2048 float64
columns) in registers (`held`) between its one read and its one write: thread t takes
packs t, t + THREADS, ... (at most HELD), then its tail columns packs * width + t, ...;
the maximum over them in that order, a butterfly (`cuda.shfl_xor_sync`, offsets 16, 8,
4, 2, 1) for the warp's maximum, the warps' maxima left to right after a barrier; then
the sum of exp_from(x, m) in the same order (no online rescaling: the maximum is known
before any exp), the same butterfly and the warps' sums left to right; out =
exp_from(x, m) * (1 / s). One exp per column and one read of the row.

Longer rows are read twice, once for the statistics and once for the output, but from
device memory once: a block's row is still in L1/L2 for the second read. The kernel
works in the input's dtype (float32 accumulation for float32, as torch.softmax does),
in this order, which the twin repeats exactly:

1. online statistics per thread: thread t walks the row's 16-byte packs t, t + THREADS,
   ... (4 float32 or 2 float64 columns each, left to right), then the tail columns
   packs * width + t, ... ; per pack, the running maximum m moves to the pack's maximum
   if that is larger, rescaling the running sum s of exp(x - m) once (`rescale`), then
   each column adds exp(x - m) (`add_exp`): one exp per column and no branch around it;
   a tail column is a pack of one;
2. in each warp, a butterfly for the warp's maximum, each thread's sum moved to it
   (`moved`: one exp), and a butterfly for the sum; a + b == b + a bit for bit, so
   every lane ends with the same pair;
3. lane 0 of each warp writes its pair to shared memory; after a barrier every thread
   takes the maximum of the warps' maxima, then adds their sums moved to it, left to
   right. (Merging (max, sum) pairs at every butterfly step would cost two exps per
   step: as many exps as the columns themselves at 1024 columns.)

4. out = exp(x - m) * inv with inv = 1 / s, one division per row.

The backward is the same walk for dot = sum(y * dy), then dx = y * (dy - dot).

The twin moves each pack with one 16-byte load or store when the row is 16-byte
aligned; numba cannot load an array slice as one vector, so the prototype reads the
same columns with `width` scalar loads. The twin also issues all of a held row's loads
(4 packs' on longer rows) before it uses any, and processes them in the order above.
Indices are int64 (`allow-int64-index`), as the
twin's `long long`."""

import math

import numpy as np
import torch
from numba import cuda, float32

import portkit

THREADS = 128  # 4 warps per row; a multiple of WARP: the default of the threads knobs
MAX_THREADS = 256  # the most a launcher gives a block (the twin's __launch_bounds__)
WARP = 32
MAX_WARPS = MAX_THREADS // WARP
WIDE_WARPS = 1024 // WARP  # softmax_bwd_wide's blocks: up to 1024 threads
FULL_MASK = 0xFFFFFFFF  # all 32 lanes take part in every shuffle
LANE_PACKS = 8  # short rows: packs a lane holds (128 bytes: 32 float32 registers)
HELD = 8  # softmax_fwd: packs a thread holds (rows of up to THREADS * HELD packs)
HELD_COLS = 32  # LANE_PACKS or HELD packs of up to 4 columns (float32, float64)
HELD2_COLS = 8  # softmax_rows2_fwd: 2 packs of up to 4 columns


@cuda.jit(device=True)
def rescale(m, s, top):
    """The running (max m, sum s of exp(x - m)) moved to a new maximum, if top is larger
    (s is 0 while m is -inf). Called once per pack, with the pack's maximum."""
    if top > m:
        return top, s * math.exp(m - top)
    return m, s


@cuda.jit(device=True)
def add_exp(m, s, v):
    """s plus exp(v - m): one exp per column, no branch around it (-inf adds nothing;
    NaN propagates)."""
    if v != -float32(math.inf):
        return s + math.exp(v - m)
    return s


@cuda.jit(device=True)
def moved(s, m, big):
    """s, a sum of exp(x - m), as a sum of exp(x - big), big >= m: one exp. An empty sum
    stays 0 (its m may be -inf, and -inf - -inf would be NaN)."""
    if s != 0:
        return s * math.exp(m - big)
    return s


@cuda.jit(device=True)
def exp_from(v, m):
    """exp(v - m), 0 for v == -inf: a row of -inf sums to 0 (its output NaN, as torch's),
    and -inf - -inf would be NaN."""
    if v != -float32(math.inf):
        return math.exp(v - m)
    return float32(0)


@cuda.jit(device=True)
def warp_max(v):
    offset = WARP // 2
    while offset > 0:
        other = cuda.shfl_xor_sync(FULL_MASK, v, offset)
        if other > v:
            v = other
        offset //= 2
    return v


@cuda.jit(device=True)
def warp_sum(v):
    offset = WARP // 2
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    return v


@cuda.jit
def softmax_fwd(x, out, cols):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    lane = tid % WARP
    warp = tid // WARP
    part_m = cuda.shared.array(MAX_WARPS, dtype=x.dtype)
    part_s = cuda.shared.array(MAX_WARPS, dtype=x.dtype)
    width = 16 // x.itemsize  # columns in one of the twin's 16-byte packs
    packs = cols // width

    if packs <= cuda.blockDim.x * HELD:  # the whole row held (uniform per block): max, then exps
        held = cuda.local.array(HELD_COLS, dtype=x.dtype)
        m = -float32(math.inf)
        for u in range(HELD):
            p = tid + u * cuda.blockDim.x  # portkit: allow-int64-index
            if p < packs:
                for j in range(width):
                    v = x[row, p * width + j]  # portkit: allow-int64-index
                    held[u * width + j] = v  # portkit: allow-int64-index
                    if v > m:
                        m = v
        for c in range(packs * width + tid, cols, cuda.blockDim.x):
            if x[row, c] > m:
                m = x[row, c]
        m = warp_max(m)
        if lane == 0:
            part_m[warp] = m
        cuda.syncthreads()
        m = part_m[0]
        for w in range(1, cuda.blockDim.x // WARP):
            if part_m[w] > m:
                m = part_m[w]

        s = float32(0)  # the sum, in the same order; each held column becomes its exp
        for u in range(HELD):
            if tid + u * cuda.blockDim.x < packs:  # portkit: allow-int64-index
                for j in range(width):
                    e = exp_from(held[u * width + j], m)  # portkit: allow-int64-index
                    held[u * width + j] = e  # portkit: allow-int64-index
                    s += e
        for c in range(packs * width + tid, cols, cuda.blockDim.x):
            s += exp_from(x[row, c], m)
        s = warp_sum(s)
        if lane == 0:
            part_s[warp] = s
        cuda.syncthreads()
        s = part_s[0]
        for w in range(1, cuda.blockDim.x // WARP):
            s += part_s[w]

        inv = float32(1) / s  # a row of -inf: s = 0, 0 * inf = NaN, as torch
        for u in range(HELD):
            p = tid + u * cuda.blockDim.x  # portkit: allow-int64-index
            if p < packs:
                for j in range(width):
                    e = held[u * width + j]  # portkit: allow-int64-index
                    out[row, p * width + j] = e * inv  # portkit: allow-int64-index
        for c in range(packs * width + tid, cols, cuda.blockDim.x):
            out[row, c] = exp_from(x[row, c], m) * inv
        return

    m = -float32(math.inf)  # float32 here; float64 for a float64 x (numba unifies)
    s = float32(0)
    for p in range(tid, packs, cuda.blockDim.x):
        base = p * width  # portkit: allow-int64-index
        top = x[row, base]
        for j in range(1, width):
            if x[row, base + j] > top:  # portkit: allow-int64-index
                top = x[row, base + j]  # portkit: allow-int64-index
        m, s = rescale(m, s, top)
        for j in range(width):
            s = add_exp(m, s, x[row, base + j])  # portkit: allow-int64-index
    for c in range(packs * width + tid, cols, cuda.blockDim.x):
        m, s = rescale(m, s, x[row, c])
        s = add_exp(m, s, x[row, c])

    big = warp_max(m)  # the warp's maximum; then its sum, each thread's moved to it
    s = warp_sum(moved(s, m, big))
    if lane == 0:
        part_m[warp] = big
        part_s[warp] = s
    cuda.syncthreads()
    m = part_m[0]
    for w in range(1, cuda.blockDim.x // WARP):
        if part_m[w] > m:
            m = part_m[w]
    s = moved(part_s[0], part_m[0], m)
    for w in range(1, cuda.blockDim.x // WARP):
        s += moved(part_s[w], part_m[w], m)

    inv = float32(1) / s  # one division per row; each column is exp(x - m) * inv
    # The second read walks from the row's end (the twin: its chunks of packs), where the
    # first pass read last: that part is the likeliest still in L2.
    for p in range(packs - 1 - (packs - 1 - tid) % cuda.blockDim.x, -1, -cuda.blockDim.x):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            out[row, c] = math.exp(x[row, c] - m) * inv
    for c in range(packs * width + tid, cols, cuda.blockDim.x):
        out[row, c] = math.exp(x[row, c] - m) * inv


@cuda.jit(device=True)
def rows_held(x, out, rows, cols, group, held, lane_packs):
    """Short rows (at most WARP * lane_packs packs): `group` lanes per row (a power of two,
    at most WARP), cuda.blockDim.x // group rows per block, the row held in registers (`held`)
    between its one read and its one write: one exp per column, no online rescaling.
    Lane g of a row holds packs g, g + group, ... (at most lane_packs), then reads its tail
    columns packs * width + g, ... (fewer than width a row) from memory in both passes.
    (`held` is 1-D and passed in, so each kernel sizes it: the twin's template argument.)"""
    tid = cuda.threadIdx.x
    g = tid % group
    row = cuda.blockIdx.x * (cuda.blockDim.x // group) + tid // group
    width = 16 // x.itemsize
    packs = cols // width
    if row >= rows:  # past the last row: no columns, but the lanes still shuffle
        packs = 0
        cols = 0

    m = -float32(math.inf)  # the row's maximum: held columns, tail, group butterfly
    for u in range(lane_packs):
        p = g + u * group  # portkit: allow-int64-index
        if p < packs:
            for j in range(width):
                v = x[row, p * width + j]  # portkit: allow-int64-index
                held[u * width + j] = v  # portkit: allow-int64-index
                if v > m:
                    m = v
    for c in range(packs * width + g, cols, group):
        if x[row, c] > m:
            m = x[row, c]
    offset = group // 2
    while offset > 0:
        other = cuda.shfl_xor_sync(FULL_MASK, m, offset)
        if other > m:
            m = other
        offset //= 2

    s = float32(0)  # the sum, in the same order; each held column becomes its exp
    for u in range(lane_packs):
        if g + u * group < packs:  # portkit: allow-int64-index
            for j in range(width):
                e = exp_from(held[u * width + j], m)  # portkit: allow-int64-index
                held[u * width + j] = e  # portkit: allow-int64-index
                s += e
    for c in range(packs * width + g, cols, group):
        s += exp_from(x[row, c], m)
    offset = group // 2
    while offset > 0:
        s += cuda.shfl_xor_sync(FULL_MASK, s, offset)
        offset //= 2

    inv = float32(1) / s
    for u in range(lane_packs):
        p = g + u * group  # portkit: allow-int64-index
        if p < packs:
            for j in range(width):
                out[row, p * width + j] = held[u * width + j] * inv  # portkit: allow-int64-index
    for c in range(packs * width + g, cols, group):
        out[row, c] = exp_from(x[row, c], m) * inv


@cuda.jit
def softmax_rows_fwd(x, out, rows, cols, group):
    """rows_held with LANE_PACKS packs a lane (the rows_lane_packs knob's default)."""
    held = cuda.local.array(HELD_COLS, dtype=x.dtype)
    rows_held(x, out, rows, cols, group, held, LANE_PACKS)


@cuda.jit
def softmax_rows2_fwd(x, out, rows, cols, group):
    """rows_held with 2 packs a lane (rows_lane_packs 2; rows of at most WARP * 2 packs)."""
    held = cuda.local.array(HELD2_COLS, dtype=x.dtype)
    rows_held(x, out, rows, cols, group, held, 2)


@cuda.jit(device=True)
def bwd_row(y, dy, dx, cols, part):
    """One row of the backward (blockIdx.x's): dot = sum(y * dy) over thread t's packs t,
    t + blockDim.x, ... then its tail columns, a butterfly per warp, the warps' sums (in
    ``part``, one a warp) added left to right; dx = y * (dy - dot)."""
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    lane = tid % WARP
    warp = tid // WARP
    width = 16 // y.itemsize
    packs = cols // width

    dot = float32(0)
    for p in range(tid, packs, cuda.blockDim.x):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            dot += y[row, c] * dy[row, c]
    for c in range(packs * width + tid, cols, cuda.blockDim.x):
        dot += y[row, c] * dy[row, c]

    dot = warp_sum(dot)
    if lane == 0:
        part[warp] = dot
    cuda.syncthreads()
    dot = part[0]
    for w in range(1, cuda.blockDim.x // WARP):
        dot += part[w]

    for p in range(tid, packs, cuda.blockDim.x):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            dx[row, c] = y[row, c] * (dy[row, c] - dot)
    for c in range(packs * width + tid, cols, cuda.blockDim.x):
        dx[row, c] = y[row, c] * (dy[row, c] - dot)


@cuda.jit
def softmax_bwd(y, dy, dx, cols):
    part = cuda.shared.array(MAX_WARPS, dtype=y.dtype)
    bwd_row(y, dy, dx, cols, part)


@cuda.jit
def softmax_bwd_wide(y, dy, dx, cols):
    """softmax_bwd for blocks above MAX_THREADS (the bwd_threads knob's 512 and 1024; the
    twin's __launch_bounds__(1024)): a long row a block, one or two blocks an SM, so fewer
    rows are in flight and a row's second read finds it in L2."""
    part = cuda.shared.array(WIDE_WARPS, dtype=y.dtype)
    bwd_row(y, dy, dx, cols, part)


# portkit bench: square, many short rows, few long rows (torch's hardest of the three),
# very short rows, and a square of 256 MiB a tensor (as the elementwise ops time)
BENCH_SHAPES = ((4096, 4096), (16384, 1024), (1024, 32768), (32768, 256), (8192, 8192))
# portkit.cases.rows' shapes (held in registers, by softmax_rows_fwd, up to 1024 float32
# columns), 2x1029: a row held by softmax_fwd with a tail column, and 2x4101: a row
# longer than softmax_fwd holds (the online pass) with a tail column; small for twin-cpu
CHECK_SHAPES = ((1, 1), (3, 127), (4, 128), (2, 129), (3, 1000), (2, 1029), (2, 4101))


def short_row_group(cols, itemsize, lane_packs=LANE_PACKS):
    """Lanes per row for softmax_rows_fwd (the fewest, a power of two, that hold the row's
    packs lane_packs a lane), or 0 for a row too long to hold (softmax_fwd streams it)."""
    packs = cols // (16 // itemsize)
    if packs > WARP * lane_packs:
        return 0
    group = 1
    while group * lane_packs < packs:
        group *= 2
    return group


def reference(x):
    return torch.softmax(x, dim=-1)


@portkit.op(
    reference=reference,
    baseline=reference,  # torch.softmax over the last dimension: what a user would call
    cases=portkit.cases.rows(
        shapes=CHECK_SHAPES, special=[0.3, -100000.0, 100000.0, 0.5, -0.5, float("-inf")]
    ),
    bench=[portkit.cases.custom(f"float32-{r}x{c}", [(r, c)]) for r, c in BENCH_SHAPES],
    # Threads a block that `portkit tune` may pick per GPU (the first the default, at most
    # MAX_THREADS): a long row's block (softmax_fwd, softmax_bwd: fewer threads hold fewer
    # packs in registers, more threads more) and the short rows' block (softmax_rows_fwd).
    knobs={
        "threads": [THREADS, 256, 64],
        # bwd_threads above MAX_THREADS: softmax_bwd_wide, a long row a block; 1024: a block
        # an SM; 512: two, and an 8192-float32-column row held (one chunk of 512 x 4 packs)
        "bwd_threads": [THREADS, 256, 64, 1024, 512],
        "rows_threads": [THREADS, 256, 64],
        # Packs a lane of a short row holds (the most; 2: softmax_rows2_fwd, for rows of at
        # most 64 packs, 256 float32 columns). At 32768x256 float32 the default's 8 lanes
        # a row, 8 packs each, ran at 91% of copy bandwidth on an H200 (torch 98%): 80
        # registers, 6 blocks of 128 an SM; softmax_warp's 32 lanes of 2 packs (28
        # registers) ran at 98% there. 2: a warp a row, more rows in flight an SM.
        "rows_lane_packs": [LANE_PACKS, 2],
    },
)
class Softmax:
    def check_inputs(x):
        if x.dim() != 2:
            raise portkit.InputError(f"softmax takes a 2-D tensor, got {x.dim()}-D")

    def forward(k, x):
        out = k.empty_like(x)
        rows, cols = x.shape
        kn = portkit.knobs(k, x)
        group = short_row_group(cols, x.element_size())
        kernel = k.softmax_rows_fwd
        if kn.rows_lane_packs == 2 and short_row_group(cols, x.element_size(), 2):
            group = short_row_group(cols, x.element_size(), 2)
            kernel = k.softmax_rows2_fwd
        if rows and cols and group:
            threads = kn.rows_threads
            kernel[portkit.cdiv(rows, threads // group), threads](
                x,
                out,
                rows,
                cols,
                np.int32(group),  # the twin's `int group`
            )
        elif rows and cols:
            k.softmax_fwd[rows, kn.threads](x, out, cols)
        return out, (out,)

    def backward(k, saved, dy):
        (y,) = saved
        dx = k.empty_like(y)
        rows, cols = y.shape
        if rows and cols:
            threads = portkit.knobs(k, y).bwd_threads  # y: the forward's out, x's bucket
            kernel = k.softmax_bwd if threads <= MAX_THREADS else k.softmax_bwd_wide
            kernel[rows, threads](y, dy, dx, cols)
        return (dx,)
