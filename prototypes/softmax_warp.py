"""Row-wise softmax over a 2-D tensor, one warp per row: no shared memory, no barrier.

softmax.py gives a row a block of 128 threads, which suits long rows; here a row gets a
warp (ROWS_PER_BLOCK rows per block), which suits short and medium rows: 1024 float32
columns are 8 packs of 16 bytes per lane, and a warp's reduction is five shuffles with
no `syncthreads`. The statistics take one pass over the row (online softmax, as in
softmax.py, whose `rescale`, `add_exp` and `moved` are repeated here so each op stays
two files), in the input's dtype, in this order, which the twin repeats exactly:

1. lane l walks the row's 16-byte packs l, l + 32, ... (4 float32 or 2 float64 columns
   each, left to right), then the tail columns packs * width + l, ... (a pack of one);
   per pack the running max moves to the pack's max if larger (one rescale of the sum),
   then each column adds exp(x - max);
2. a butterfly (`cuda.shfl_xor_sync`, offsets 16, 8, 4, 2, 1) for the row's maximum,
   each lane's sum moved to it (one exp), a butterfly for the sum: every lane ends with
   the same pair (a + b == b + a bit for bit), and no lane waits for another warp;
3. out = exp(x - max) * (1 / sum), one division per row.

The backward walks the row the same way for dot = sum(y * dy), then dx = y * (dy - dot).
The twin moves each pack with one 16-byte access when the row is 16-byte aligned; the
prototype reads the same columns with `width` scalar loads (numba has no vector load).
The twin also issues 8 packs' loads per lane before using any: a warp per row has few
threads per row, so each lane must keep many bytes in flight (1024 rows of 32768
columns are only 1024 warps on 132 SMs).
Indices are int64 (`allow-int64-index`), as the twin's `long long`."""

import math

import torch
from numba import cuda, float32

import portkit

WARP = 32
ROWS_PER_BLOCK = 4  # 4 warps, 128 threads per block
THREADS = WARP * ROWS_PER_BLOCK
FULL_MASK = 0xFFFFFFFF  # all 32 lanes take part in every shuffle


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


@cuda.jit
def softmax_warp_fwd(x, out, rows, cols):
    lane = cuda.threadIdx.x % WARP
    row = cuda.blockIdx.x * ROWS_PER_BLOCK + cuda.threadIdx.x // WARP
    if row >= rows:  # a whole warp leaves together: the shuffles below keep all 32 lanes
        return
    width = 16 // x.itemsize  # columns in one of the twin's 16-byte packs
    packs = cols // width

    m = -float32(math.inf)  # float32 here; float64 for a float64 x (numba unifies)
    s = float32(0)
    for p in range(lane, packs, WARP):
        base = p * width  # portkit: allow-int64-index
        top = x[row, base]
        for j in range(1, width):
            if x[row, base + j] > top:  # portkit: allow-int64-index
                top = x[row, base + j]  # portkit: allow-int64-index
        m, s = rescale(m, s, top)
        for j in range(width):
            s = add_exp(m, s, x[row, base + j])  # portkit: allow-int64-index
    for c in range(packs * width + lane, cols, WARP):
        m, s = rescale(m, s, x[row, c])
        s = add_exp(m, s, x[row, c])

    big = m  # the row's maximum, by a butterfly; then the sum, each lane's moved to it
    offset = WARP // 2
    while offset > 0:
        other = cuda.shfl_xor_sync(FULL_MASK, big, offset)
        if other > big:
            big = other
        offset //= 2
    s = moved(s, m, big)
    m = big
    offset = WARP // 2
    while offset > 0:
        s += cuda.shfl_xor_sync(FULL_MASK, s, offset)
        offset //= 2

    inv = float32(1) / s  # one division per row; each column is exp(x - m) * inv
    for p in range(lane, packs, WARP):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            out[row, c] = math.exp(x[row, c] - m) * inv
    for c in range(packs * width + lane, cols, WARP):
        out[row, c] = math.exp(x[row, c] - m) * inv


@cuda.jit
def softmax_warp_bwd(y, dy, dx, rows, cols):
    lane = cuda.threadIdx.x % WARP
    row = cuda.blockIdx.x * ROWS_PER_BLOCK + cuda.threadIdx.x // WARP
    if row >= rows:
        return
    width = 16 // y.itemsize
    packs = cols // width

    dot = float32(0)
    for p in range(lane, packs, WARP):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            dot += y[row, c] * dy[row, c]
    for c in range(packs * width + lane, cols, WARP):
        dot += y[row, c] * dy[row, c]

    offset = WARP // 2
    while offset > 0:
        dot += cuda.shfl_xor_sync(FULL_MASK, dot, offset)
        offset //= 2

    for p in range(lane, packs, WARP):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            dx[row, c] = y[row, c] * (dy[row, c] - dot)
    for c in range(packs * width + lane, cols, WARP):
        dx[row, c] = y[row, c] * (dy[row, c] - dot)


# portkit bench: square, many short rows, few long rows (torch's hardest of the three),
# very short rows, and a square of 256 MiB a tensor (as the elementwise ops time)
BENCH_SHAPES = ((4096, 4096), (16384, 1024), (1024, 32768), (32768, 256), (8192, 8192))


def reference(x):
    return torch.softmax(x, dim=-1)


@portkit.op(
    reference=reference,
    cases=portkit.cases.rows(special=[0.3, -100000.0, 100000.0, 0.5, -0.5, float("-inf")]),
    bench=[portkit.cases.custom(f"float32-{r}x{c}", [(r, c)]) for r, c in BENCH_SHAPES],
)
class SoftmaxWarp:
    def check_inputs(x):
        if x.dim() != 2:
            raise portkit.InputError(f"softmax_warp takes a 2-D tensor, got {x.dim()}-D")

    def forward(k, x):
        out = k.empty_like(x)
        rows, cols = x.shape
        if rows and cols:
            k.softmax_warp_fwd[portkit.cdiv(rows, ROWS_PER_BLOCK), THREADS](x, out, rows, cols)
        return out, (out,)

    def backward(k, saved, dy):
        (y,) = saved
        dx = k.empty_like(y)
        rows, cols = y.shape
        if rows and cols:
            grid = portkit.cdiv(rows, ROWS_PER_BLOCK)
            k.softmax_warp_bwd[grid, THREADS](y, dy, dx, rows, cols)
        return (dx,)
