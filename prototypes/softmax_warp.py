"""Row-wise softmax over a 2-D tensor, one warp per row: no shared memory, no barrier.

softmax.py gives a long row a block of 128 threads; here a row gets a warp
(ROWS_PER_BLOCK rows per block), which suits short and medium rows, and a warp's
reduction is five shuffles with no `syncthreads`. The launcher picks the forward kernel by
the row's 16-byte packs (4 float32 or 2 float64 columns) a lane (`forward_kernel`):

- at most 32 (4096 float32 columns): the row is held in registers between its one read
  and its one write (kernels of 2, 8 and 32 packs a lane: the twin's register array has
  a static size, and a kernel's registers are its largest path's). Lane l holds packs
  l, l + 32, ... and its tail column packs * width + l if the row has one; `held_stats`:
  the row's maximum (tail, held columns, a butterfly), each held column becomes
  exp(x - max), the sum (held, then tail, a butterfly); out = e * (1 / sum): one exp per
  column, one division per row;
- longer rows stream (`softmax_warp_fwd`): online statistics in one pass, in this order,
  which the twin repeats exactly:
  1. lane l walks packs l, l + 32, ... (left to right), then the tail columns
     packs * width + l, ... (a pack of one); per pack the running max moves to the pack's
     max if larger (one rescale of the sum), then each column adds exp(x - max);
  2. a butterfly (`cuda.shfl_xor_sync`, offsets 16, 8, 4, 2, 1) for the row's maximum,
     each lane's sum moved to it (one exp), a butterfly for the sum: every lane ends with
     the same pair (a + b == b + a bit for bit), and no lane waits for another warp;
  3. out = exp(x - max) * (1 / sum), the tail first, then each lane's packs from the last
     to the first (the twin's second read starts where its first ended: in L2);
- streamed rows with the warps_per_row knob above 1: one row a block of that many warps,
  thread t in the place of lane l (stride blockDim.x, not 32); held in registers where
  the row is at most SPLIT_HELD packs a thread (`softmax_warp_split_held_fwd`: the held
  kernels' order, the warps' maxima and sums merged through shared memory in warp
  order), else streamed (`softmax_warp_split_fwd`: each warp's (max, sum) merged with the
  others' in warp order).

The statistics are in the input's dtype. `rescale`, `add_exp`, `moved` and `exp_from`
repeat softmax.py's so each op stays two files. The backward walks the row as the
streaming pass does for dot = sum(y * dy), then dx = y * (dy - dot); with the
bwd_warps_per_row knob above 1 a row takes a block of that many warps: held and read once
where it fits (`softmax_warp_split_bwd`), read twice beyond
(`softmax_warp_split_stream_bwd`).
The twin moves each pack with one 16-byte access when the row is 16-byte aligned; the
prototype reads the same columns with `width` scalar loads (numba has no vector load).
The twin also issues all its held packs' loads, or 16 packs' (streaming; 8 in the
backward), before using any: a warp per row has few threads per row, so each lane must
keep many bytes in flight (1024 rows of 32768 columns are only 1024 warps on 132 SMs).
Indices are int64 (`allow-int64-index`), as the twin's `long long`."""

import math

import torch
from numba import cuda, float32

import portkit

WARP = 32
ROWS_PER_BLOCK = 4  # 4 warps, 128 threads per block: the default of the rows_per_block knob
FULL_MASK = 0xFFFFFFFF  # all 32 lanes take part in every shuffle
MAX_WIDTH = 4  # columns in a 16-byte pack: 4 float32, 2 float64
HELD2, HELD8, HELD32 = 2 * MAX_WIDTH, 8 * MAX_WIDTH, 32 * MAX_WIDTH  # held columns a lane
MAX_SPLIT_WARPS = 16  # warps_per_row at most: the twin's MAX_SPLIT_THREADS / WARP
BWD_HELD = 8  # packs of y and of dy a thread of the twin's softmax_warp_split_bwd holds
SPLIT_HELD = 8  # packs of x a thread of softmax_warp_split_held_fwd holds
SPLIT_HELD_COLS = SPLIT_HELD * MAX_WIDTH  # its local array (numba wants a constant size)


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


@cuda.jit(device=True)
def block_max(v, part):
    """v's maximum over a block of warps (the split kernels): a butterfly per warp, then
    every thread merges the warps' maxima from ``part`` (shared memory, one a warp) in
    warp order, so all threads get the same value."""
    v = warp_max(v)
    if cuda.threadIdx.x % WARP == 0:
        part[cuda.threadIdx.x // WARP] = v
    cuda.syncthreads()
    v = part[0]
    for w in range(1, cuda.blockDim.x // WARP):
        if part[w] > v:
            v = part[w]
    return v


@cuda.jit(device=True)
def block_sum(v, part):
    """v's sum over a block of warps, as block_max: the warps' sums added in warp order."""
    v = warp_sum(v)
    if cuda.threadIdx.x % WARP == 0:
        part[cuda.threadIdx.x // WARP] = v
    cuda.syncthreads()
    total = float32(0)  # float64 for a float64 v (numba unifies)
    for w in range(cuda.blockDim.x // WARP):
        total += part[w]
    return total


@cuda.jit(device=True)
def held_stats(held, lane_packs, lane, packs, width, t):
    """The row's (max, 1 / sum) from a lane's held packs (lane + u * WARP < packs) and its
    tail column t (-inf where it has none: it moves neither the max nor the sum); each held
    column becomes exp(x - max). Max over the held columns, the tail, a butterfly; the sum in
    the same order, a butterfly; one division per row. (`held` is 1-D, so the port can pass
    it; the kernels, which index the 2-D x and out, do the loads and stores.)"""
    m = t
    for u in range(lane_packs):
        if lane + u * WARP < packs:  # portkit: allow-int64-index
            for j in range(width):
                if held[u * width + j] > m:  # portkit: allow-int64-index
                    m = held[u * width + j]  # portkit: allow-int64-index
    m = warp_max(m)
    s = float32(0)
    for u in range(lane_packs):
        if lane + u * WARP < packs:  # portkit: allow-int64-index
            for j in range(width):
                e = exp_from(held[u * width + j], m)  # portkit: allow-int64-index
                held[u * width + j] = e  # portkit: allow-int64-index
                s += e
    s = warp_sum(s + exp_from(t, m))
    return m, float32(1) / s


# The three held kernels differ only in their register array's size (the twin's template
# argument): the loads before held_stats, the stores after it.
@cuda.jit
def softmax_warp_held2_fwd(x, out, rows, cols):
    lane = cuda.threadIdx.x % WARP
    row = cuda.blockIdx.x * (cuda.blockDim.x // WARP) + cuda.threadIdx.x // WARP
    if row >= rows:  # a whole warp leaves together: the shuffles keep all 32 lanes
        return
    width = 16 // x.itemsize
    packs = cols // width
    held = cuda.local.array(HELD2, dtype=x.dtype)
    for u in range(2):
        for j in range(width):
            if lane + u * WARP < packs:  # portkit: allow-int64-index
                held[u * width + j] = x[
                    row, (lane + u * WARP) * width + j
                ]  # portkit: allow-int64-index
    c = packs * width + lane  # this lane's tail column, if the row has one
    t = x[row, c] if c < cols else -float32(math.inf)
    m, inv = held_stats(held, 2, lane, packs, width, t)
    for u in range(2):
        for j in range(width):
            if lane + u * WARP < packs:  # portkit: allow-int64-index
                out[row, (lane + u * WARP) * width + j] = (
                    held[u * width + j] * inv
                )  # portkit: allow-int64-index
    if c < cols:
        out[row, c] = exp_from(t, m) * inv


@cuda.jit
def softmax_warp_held8_fwd(x, out, rows, cols):
    lane = cuda.threadIdx.x % WARP
    row = cuda.blockIdx.x * (cuda.blockDim.x // WARP) + cuda.threadIdx.x // WARP
    if row >= rows:
        return
    width = 16 // x.itemsize
    packs = cols // width
    held = cuda.local.array(HELD8, dtype=x.dtype)
    for u in range(8):
        for j in range(width):
            if lane + u * WARP < packs:  # portkit: allow-int64-index
                held[u * width + j] = x[
                    row, (lane + u * WARP) * width + j
                ]  # portkit: allow-int64-index
    c = packs * width + lane
    t = x[row, c] if c < cols else -float32(math.inf)
    m, inv = held_stats(held, 8, lane, packs, width, t)
    for u in range(8):
        for j in range(width):
            if lane + u * WARP < packs:  # portkit: allow-int64-index
                out[row, (lane + u * WARP) * width + j] = (
                    held[u * width + j] * inv
                )  # portkit: allow-int64-index
    if c < cols:
        out[row, c] = exp_from(t, m) * inv


@cuda.jit
def softmax_warp_held32_fwd(x, out, rows, cols):
    lane = cuda.threadIdx.x % WARP
    row = cuda.blockIdx.x * (cuda.blockDim.x // WARP) + cuda.threadIdx.x // WARP
    if row >= rows:
        return
    width = 16 // x.itemsize
    packs = cols // width
    held = cuda.local.array(HELD32, dtype=x.dtype)
    for u in range(32):
        for j in range(width):
            if lane + u * WARP < packs:  # portkit: allow-int64-index
                held[u * width + j] = x[
                    row, (lane + u * WARP) * width + j
                ]  # portkit: allow-int64-index
    c = packs * width + lane
    t = x[row, c] if c < cols else -float32(math.inf)
    m, inv = held_stats(held, 32, lane, packs, width, t)
    for u in range(32):
        for j in range(width):
            if lane + u * WARP < packs:  # portkit: allow-int64-index
                out[row, (lane + u * WARP) * width + j] = (
                    held[u * width + j] * inv
                )  # portkit: allow-int64-index
    if c < cols:
        out[row, c] = exp_from(t, m) * inv


@cuda.jit(device=True)
def streamed_stats(x, row, t, nt, packs, width, cols):
    """Thread t of nt's online (max, sum) over row's packs t, t + nt, ... (left to right;
    per pack the max moves once, then each column adds exp(x - max)), then its tail
    columns packs * width + t, ...: a lane of softmax_warp_fwd (nt = WARP) or a thread of
    softmax_warp_split_fwd (nt = blockDim.x)."""
    m = -float32(math.inf)  # float32 here; float64 for a float64 x (numba unifies)
    s = float32(0)
    for p in range(t, packs, nt):
        base = p * width  # portkit: allow-int64-index
        top = x[row, base]
        for j in range(1, width):
            if x[row, base + j] > top:  # portkit: allow-int64-index
                top = x[row, base + j]  # portkit: allow-int64-index
        m, s = rescale(m, s, top)
        for j in range(width):
            s = add_exp(m, s, x[row, base + j])  # portkit: allow-int64-index
    for c in range(packs * width + t, cols, nt):
        m, s = rescale(m, s, x[row, c])
        s = add_exp(m, s, x[row, c])
    return m, s


@cuda.jit(device=True)
def streamed_write(x, out, row, t, nt, packs, width, cols, m, inv):
    """Thread t of nt's output, exp(x - m) * inv: its tail columns first, then its packs
    from the last to the first (the twin's second read starts where its first ended)."""
    for c in range(packs * width + t, cols, nt):
        out[row, c] = math.exp(x[row, c] - m) * inv
    mine = (packs - t + nt - 1) // nt
    for k in range(mine - 1, -1, -1):
        for j in range(width):
            c = (t + k * nt) * width + j  # portkit: allow-int64-index
            out[row, c] = math.exp(x[row, c] - m) * inv


@cuda.jit
def softmax_warp_fwd(x, out, rows, cols):
    lane = cuda.threadIdx.x % WARP
    row = cuda.blockIdx.x * (cuda.blockDim.x // WARP) + cuda.threadIdx.x // WARP
    if row >= rows:  # a whole warp leaves together: the shuffles below keep all 32 lanes
        return
    width = 16 // x.itemsize  # columns in one of the twin's 16-byte packs
    packs = cols // width

    m, s = streamed_stats(x, row, lane, WARP, packs, width, cols)

    big = warp_max(m)  # the row's maximum, then the sum, each lane's moved to it
    s = warp_sum(moved(s, m, big))
    m = big

    inv = float32(1) / s  # one division per row; each column is exp(x - m) * inv
    streamed_write(x, out, row, lane, WARP, packs, width, cols, m, inv)


@cuda.jit
def softmax_warp_split_fwd(x, out, rows, cols):
    """A streamed row split over the block's warps (the warps_per_row knob; one row a
    block, grid = rows): thread t walks packs t, t + blockDim.x, ... then tail columns
    packs * width + t, ... as softmax_warp_fwd's lanes walk theirs with WARP; each warp's
    (max, sum) by butterflies, then every thread merges the warps' pairs from shared
    memory, warp 0 first: the row's maximum, then each warp's sum moved to it, in order."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    warps = nt // WARP
    row = cuda.blockIdx.x
    if row >= rows:  # the whole block leaves together (grid = rows: none does)
        return
    part_m = cuda.shared.array(MAX_SPLIT_WARPS, dtype=x.dtype)
    part_s = cuda.shared.array(MAX_SPLIT_WARPS, dtype=x.dtype)
    width = 16 // x.itemsize
    packs = cols // width

    m, s = streamed_stats(x, row, tid, nt, packs, width, cols)

    big = warp_max(m)  # this warp's maximum and sum, as softmax_warp_fwd's row's
    s = warp_sum(moved(s, m, big))
    if tid % WARP == 0:
        part_m[tid // WARP] = big
        part_s[tid // WARP] = s
    cuda.syncthreads()
    m = part_m[0]  # the row's: every thread merges the same pairs in the same order
    for w in range(1, warps):
        if part_m[w] > m:
            m = part_m[w]
    s = float32(0)
    for w in range(warps):
        s += moved(part_s[w], part_m[w], m)

    inv = float32(1) / s
    streamed_write(x, out, row, tid, nt, packs, width, cols, m, inv)


@cuda.jit
def softmax_warp_split_held_fwd(x, out, rows, cols):
    """A row split over the block's warps and held in registers (the warps_per_row knob,
    rows of at most SPLIT_HELD packs a thread; one row a block): thread t holds packs t,
    t + nt, ... and its tail column packs * width + t if the row has one. The row's
    maximum (tail, held columns, a butterfly per warp, then the warps' maxima from shared
    memory in warp order), each held column becomes exp(x - max), the sum in the same
    order (the warps' sums added in warp order), one division per row. The row is read
    once, where softmax_warp_split_fwd reads it twice."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    row = cuda.blockIdx.x
    if row >= rows:  # the whole block leaves together (grid = rows: none does)
        return
    part_m = cuda.shared.array(MAX_SPLIT_WARPS, dtype=x.dtype)
    part_s = cuda.shared.array(MAX_SPLIT_WARPS, dtype=x.dtype)
    width = 16 // x.itemsize
    packs = cols // width
    held = cuda.local.array(SPLIT_HELD_COLS, dtype=x.dtype)
    for u in range(SPLIT_HELD):
        for j in range(width):
            if tid + u * nt < packs:  # portkit: allow-int64-index
                held[u * width + j] = x[
                    row, (tid + u * nt) * width + j
                ]  # portkit: allow-int64-index
    c = packs * width + tid  # this thread's tail column, if the row has one
    t = x[row, c] if c < cols else -float32(math.inf)

    m = t  # the row's maximum: tail, held columns, a butterfly, the warps in order
    for u in range(SPLIT_HELD):
        if tid + u * nt < packs:  # portkit: allow-int64-index
            for j in range(width):
                if held[u * width + j] > m:  # portkit: allow-int64-index
                    m = held[u * width + j]  # portkit: allow-int64-index
    m = block_max(m, part_m)

    s = float32(0)  # the sum in the same order; each held column becomes its exp
    for u in range(SPLIT_HELD):
        if tid + u * nt < packs:  # portkit: allow-int64-index
            for j in range(width):
                e = exp_from(held[u * width + j], m)  # portkit: allow-int64-index
                held[u * width + j] = e  # portkit: allow-int64-index
                s += e
    s = block_sum(s + exp_from(t, m), part_s)

    inv = float32(1) / s  # one division per row
    for u in range(SPLIT_HELD):
        for j in range(width):
            if tid + u * nt < packs:  # portkit: allow-int64-index
                out[row, (tid + u * nt) * width + j] = (
                    held[u * width + j] * inv
                )  # portkit: allow-int64-index
    if c < cols:
        out[row, c] = exp_from(t, m) * inv


@cuda.jit
def softmax_warp_bwd(y, dy, dx, rows, cols):
    lane = cuda.threadIdx.x % WARP
    row = cuda.blockIdx.x * (cuda.blockDim.x // WARP) + cuda.threadIdx.x // WARP
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

    dot = warp_sum(dot)

    for p in range(lane, packs, WARP):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            dx[row, c] = y[row, c] * (dy[row, c] - dot)
    for c in range(packs * width + lane, cols, WARP):
        dx[row, c] = y[row, c] * (dy[row, c] - dot)


@cuda.jit(device=True)
def split_bwd_row(y, dy, dx, rows, cols, part):
    """The backward split over the block's warps (the bwd_warps_per_row knob; one row a
    block, grid = rows): dot = sum(y * dy) over thread t's packs t, t + blockDim.x, ...
    left to right, then its tail column packs * width + t, a butterfly per warp, then every
    thread adds the warps' sums from ``part`` (shared memory, one a warp), warp 0 first;
    dx = y * (dy - dot)."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    row = cuda.blockIdx.x
    if row >= rows:  # the whole block leaves together (grid = rows: none does)
        return
    width = 16 // y.itemsize
    packs = cols // width

    dot = float32(0)
    for p in range(tid, packs, nt):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            dot += y[row, c] * dy[row, c]
    t = packs * width + tid  # this thread's tail column, if the row has one
    if t < cols:
        dot += y[row, t] * dy[row, t]
    dot = block_sum(dot, part)

    for p in range(tid, packs, nt):
        for j in range(width):
            c = p * width + j  # portkit: allow-int64-index
            dx[row, c] = y[row, c] * (dy[row, c] - dot)
    if t < cols:
        dx[row, t] = y[row, t] * (dy[row, t] - dot)


# The twin's two split backwards differ in their reads only: softmax_warp_split_bwd holds
# a row of at most BWD_HELD packs a thread in registers between the passes (one read),
# softmax_warp_split_stream_bwd reads a longer row again, in chunks, the last chunk first.
@cuda.jit
def softmax_warp_split_bwd(y, dy, dx, rows, cols):
    part = cuda.shared.array(MAX_SPLIT_WARPS, dtype=y.dtype)
    split_bwd_row(y, dy, dx, rows, cols, part)


@cuda.jit
def softmax_warp_split_stream_bwd(y, dy, dx, rows, cols):
    part = cuda.shared.array(MAX_SPLIT_WARPS, dtype=y.dtype)
    split_bwd_row(y, dy, dx, rows, cols, part)


def split_forward_kernel(cols, itemsize, warps_per_row):
    """The split forward for rows of `cols` columns over warps_per_row warps:
    softmax_warp_split_held_fwd where the row fits in its registers (at most SPLIT_HELD
    packs a thread), softmax_warp_split_fwd (streamed, read twice) beyond."""
    packs = cols // (16 // itemsize)
    if portkit.cdiv(packs, warps_per_row * WARP) <= SPLIT_HELD:
        return "softmax_warp_split_held_fwd"
    return "softmax_warp_split_fwd"


def split_backward_kernel(cols, itemsize, warps_per_row):
    """The split backward for rows of `cols` columns over warps_per_row warps:
    softmax_warp_split_bwd where the row fits in its registers (at most BWD_HELD packs a
    thread), softmax_warp_split_stream_bwd beyond."""
    packs = cols // (16 // itemsize)
    if portkit.cdiv(packs, warps_per_row * WARP) <= BWD_HELD:
        return "softmax_warp_split_bwd"
    return "softmax_warp_split_stream_bwd"


# portkit bench: square, many short rows, few long rows (torch's hardest of the three),
# very short rows, and a square of 256 MiB a tensor (as the elementwise ops time)
BENCH_SHAPES = ((4096, 4096), (16384, 1024), (1024, 32768), (32768, 256), (8192, 8192))


# portkit.cases.rows' shapes, and three more so that every forward kernel has a case in
# both dtypes: packs a lane in float32 / float64 are 3 / 5 at 300 columns (held8),
# 8 / 16 at 1000 (held8 / held32), 17 / 33 at 2053 (held32 / streamed), 33 / 65 at 4103
# (streamed); an odd width makes the second row unaligned (scalar accesses)
CHECK_SHAPES = ((1, 1), (3, 127), (4, 128), (2, 129), (3, 1000), (2, 300), (2, 2053), (2, 4103))


def forward_kernel(cols, itemsize):
    """The forward kernel for rows of `cols` columns: the smallest register-held one that
    holds the row's packs (2, 8 or 32 a lane), or the streaming one for longer rows."""
    lane_packs = portkit.cdiv(cols // (16 // itemsize), WARP)
    for held in (2, 8, 32):
        if lane_packs <= held:
            return f"softmax_warp_held{held}_fwd"
    return "softmax_warp_fwd"


def reference(x):
    return torch.softmax(x, dim=-1)


@portkit.op(
    reference=reference,
    baseline=reference,  # torch.softmax over the last dimension: what a user would call
    cases=portkit.cases.rows(
        shapes=CHECK_SHAPES, special=[0.3, -100000.0, 100000.0, 0.5, -0.5, float("-inf")]
    ),
    bench=[portkit.cases.custom(f"float32-{r}x{c}", [(r, c)]) for r, c in BENCH_SHAPES],
    # Rows (warps) a block, forward and backward, that `portkit tune` may pick per GPU (the
    # first the default; at most the twin's MAX_THREADS / WARP = 8): kernels read it as
    # blockDim.x / WARP.
    # warps_per_row: a streamed row's warps in the forward (1: softmax_warp_fwd, a warp a
    # row; more: softmax_warp_split_fwd, one row a block of that many warps, rows_per_block
    # unused). 1024 rows of 32768 float32 are 1024 warps for 132 SMs, every row in flight
    # at once (128 MiB, more than L2: most of a row's second read comes from DRAM). Split
    # over 8 warps, each thread with the same bytes in flight, a row is done about 8x
    # sooner and fewer rows are in flight at once (blocks an SM are bounded by registers),
    # so more of their second reads hit L2.
    # bwd_warps_per_row: the backward's warps a row (1: softmax_warp_bwd, a warp a row,
    # which reads y and dy twice: 36 warps an SM of 4096-column rows put more bytes between
    # an element's two reads than L2 holds, so it ran at 57% of copy bandwidth on an H200;
    # more: softmax_warp_split_bwd, the row held in that many warps' registers and read
    # once, where it fits, BWD_HELD packs a thread; a longer row softmax_warp_split_stream_bwd,
    # read twice, but with a block a row fewer rows in flight, so the second read can
    # find it in L2).
    knobs={
        "rows_per_block": [ROWS_PER_BLOCK, 2, 8],
        "bwd_rows_per_block": [ROWS_PER_BLOCK, 2, 8],
        "warps_per_row": [1, 4, 8, 16],
        "bwd_warps_per_row": [1, 4, 8, 16],
    },
)
class SoftmaxWarp:
    def check_inputs(x):
        if x.dim() != 2:
            raise portkit.InputError(f"softmax_warp takes a 2-D tensor, got {x.dim()}-D")

    def forward(k, x):
        out = k.empty_like(x)
        rows, cols = x.shape
        if rows and cols:
            kn = portkit.knobs(k, x)
            name = forward_kernel(cols, x.element_size())
            if name == "softmax_warp_fwd" and kn.warps_per_row > 1:  # a long row, split
                name = split_forward_kernel(cols, x.element_size(), kn.warps_per_row)
                getattr(k, name)[rows, kn.warps_per_row * WARP](x, out, rows, cols)
            else:
                per_block = kn.rows_per_block
                kernel = getattr(k, name)
                kernel[portkit.cdiv(rows, per_block), per_block * WARP](x, out, rows, cols)
        return out, (out,)

    def backward(k, saved, dy):
        (y,) = saved
        dx = k.empty_like(y)
        rows, cols = y.shape
        if rows and cols:
            kn = portkit.knobs(k, y)  # y: the forward's out, in x's bucket
            if kn.bwd_warps_per_row > 1:
                name = split_backward_kernel(cols, y.element_size(), kn.bwd_warps_per_row)
                kernel = getattr(k, name)
                kernel[rows, kn.bwd_warps_per_row * WARP](y, dy, dx, rows, cols)
            else:
                per_block = kn.bwd_rows_per_block
                k.softmax_warp_bwd[portkit.cdiv(rows, per_block), per_block * WARP](
                    y, dy, dx, rows, cols
                )
        return (dx,)
