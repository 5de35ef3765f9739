"""A bank of correct kernels: what portkit's simulator must run, and run right.

Each kernel is an ordinary ``numba.cuda.jit`` kernel, small enough for a test to launch
it on the simulator in milliseconds (and on a GPU, by ``tests/simt/test_simt_gpu.py``). The
docstring of each says what it exercises and how it is meant to be launched.

The first part covers the features every prototype leans on: thread coordinates in 1-3
dimensions, shared (static and dynamic), local and constant memory, barriers with
predicates, every warp intrinsic, every atomic with its return value, device functions
(also ones that wait), ``math``, numba's typing rules, and ``print``.

The last part, "kernels the simulator gets wrong", holds correct kernels on which the
simulator disagrees with numba on a GPU; ``tests/simt/test_simt.py`` marks their tests
``xfail(strict=True)`` with the reason.
"""

import math

import numba
import numpy as np
from numba import cuda, float32, int32, int64
from numba.cuda import libdevice

FULL_MASK = 0xFFFFFFFF
THREADS = 128  # block size of the static shared-memory kernels
TILE = 8  # transpose tile: blocks of TILE x TILE threads
TILE_PADDED = TILE + 1  # one padding column against bank conflicts
COEFFS = np.array([0.5, -1.25, 2.0, 0.75], dtype=np.float32)  # c0 + c1 x + c2 x^2 + c3 x^3
LOCAL_SIZE = 4
COEF_TUPLE = (0.1, 0.2)  # a module-level tuple of float64 constants


# -- coordinates -----------------------------------------------------------------------


@cuda.jit
def axpy(a, x, y, out, n):
    """``out = a * x + y`` (float32) with ``cuda.grid(1)`` and a bound check; launch with
    more threads than ``n``."""
    i = cuda.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


@cuda.jit
def grid_stride(x, out, who, n):
    """A grid-stride loop over ``n`` elements with fewer threads than elements: ``out =
    3x + 1`` in float32, and ``who[i]`` is the global thread that wrote element ``i``."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        out[i] = x[i] * float32(3) + float32(1)
        who[i] = start


@cuda.jit
def coords_2d(out):
    """Every thread of a 2-D launch records its coordinates in ``out[row, col]``: block x,
    block y, thread x, thread y, grid width and height in threads (``cuda.gridsize(2)``).
    ``out`` may be smaller than the grid: threads outside it do nothing."""
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        width, height = cuda.gridsize(2)
        out[row, col, 0] = cuda.blockIdx.x
        out[row, col, 1] = cuda.blockIdx.y
        out[row, col, 2] = cuda.threadIdx.x
        out[row, col, 3] = cuda.threadIdx.y
        out[row, col, 4] = width
        out[row, col, 5] = height


@cuda.jit
def coords_3d(out):
    """A 3-D grid of 3-D blocks: ``out[z, y, x]`` holds the linear index from
    ``cuda.grid(3)`` and ``cuda.gridsize(3)``, then threadIdx, blockIdx and blockDim
    packed as ``x + 10 y + 100 z``, then the grid's depth in threads."""
    x, y, z = cuda.grid(3)
    nx, ny, nz = cuda.gridsize(3)
    if z < out.shape[0] and y < out.shape[1] and x < out.shape[2]:
        out[z, y, x, 0] = x + nx * (y + ny * z)
        out[z, y, x, 1] = cuda.threadIdx.x + 10 * cuda.threadIdx.y + 100 * cuda.threadIdx.z
        out[z, y, x, 2] = cuda.blockIdx.x + 10 * cuda.blockIdx.y + 100 * cuda.blockIdx.z
        out[z, y, x, 3] = cuda.blockDim.x + 10 * cuda.blockDim.y + 100 * cuda.blockDim.z
        out[z, y, x, 4] = nz


@cuda.jit
def transpose_tiled(x, out):
    """``out = x.T`` through a padded 2-D shared tile; blocks of (TILE, TILE) threads, any
    shape (partial tiles at the edges)."""
    tile = cuda.shared.array((TILE, TILE_PADDED), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    rows, cols = x.shape
    r = cuda.blockIdx.y * TILE + ty
    c = cuda.blockIdx.x * TILE + tx
    if r < rows and c < cols:
        tile[ty, tx] = x[r, c]
    cuda.syncthreads()
    r_out = cuda.blockIdx.x * TILE + ty
    c_out = cuda.blockIdx.y * TILE + tx
    if r_out < cols and c_out < rows:
        out[r_out, c_out] = tile[tx, ty]


# -- shared, dynamic shared, local and constant memory ------------------------------------


@cuda.jit
def block_sum(x, out, n):
    """Tree reduction in static shared memory with a barrier per level: ``out[b]`` is the
    float32 sum of block ``b``'s THREADS elements (zeros past ``n``)."""
    buf = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[tid] = x[i] if i < n else float32(0)
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
def dynamic_shared_reverse(x, out, n):
    """Dynamic shared memory (``cuda.shared.array(0, float32)``, sized by the launch's
    shared bytes: 2 * blockDim.x floats) cut into two views: the first half stages the
    block's elements, the second their doubles; ``out`` is each block reversed, doubled."""
    buf = cuda.shared.array(0, float32)
    nb = cuda.blockDim.x
    staged = buf[:nb]
    doubled = buf[nb:]
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    staged[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    doubled[t] = staged[nb - 1 - t] * float32(2)
    cuda.syncthreads()
    if i < n:
        out[i] = doubled[t]


@cuda.jit
def local_prefix(x, out):
    """Per-thread ``cuda.local.array``: each thread loads LOCAL_SIZE consecutive elements,
    turns them into a running sum in local memory, and stores them back."""
    acc = cuda.local.array(LOCAL_SIZE, float32)
    i = cuda.grid(1)
    if i * LOCAL_SIZE < x.shape[0]:
        for k in range(LOCAL_SIZE):
            acc[k] = x[i * LOCAL_SIZE + k]
        for k in range(1, LOCAL_SIZE):
            acc[k] += acc[k - 1]
        for k in range(LOCAL_SIZE):
            out[i * LOCAL_SIZE + k] = acc[k]


@cuda.jit
def local_matrix(a, out):
    """A 2-D ``cuda.local.array((2, 2), int64)``: the matrix ``[[a, a+1], [a+2, a+3]]``
    of each thread's integer, squared; ``out[i]`` is the square's four entries."""
    m = cuda.local.array((2, 2), int64)
    sq = cuda.local.array((2, 2), int64)
    i = cuda.grid(1)
    if i < a.shape[0]:
        for r in range(2):
            for c in range(2):
                m[r, c] = a[i] + 2 * r + c
        for r in range(2):
            for c in range(2):
                sq[r, c] = m[r, 0] * m[0, c] + m[r, 1] * m[1, c]
        for k in range(4):
            out[i, k] = sq[k // 2, k % 2]


@cuda.jit
def const_poly(x, out):
    """``cuda.const.array_like`` of the module-level float32 COEFFS: Horner's rule in
    float32, the coefficients read backwards with ``range(2, -1, -1)``."""
    c = cuda.const.array_like(COEFFS)
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        acc = c[3]
        for k in range(2, -1, -1):
            acc = acc * v + c[k]
        out[i] = acc


# -- barriers with predicates --------------------------------------------------------------


@cuda.jit
def barrier_predicates(x, out):
    """``syncthreads_count``, ``syncthreads_and`` and ``syncthreads_or`` of ``x > 0`` (an
    integer predicate, as numba requires); thread 0 of block ``b`` stores them in
    ``out[b]``."""
    i = cuda.grid(1)
    pred = 1 if x[i] > 0 else 0
    count = cuda.syncthreads_count(pred)
    every = cuda.syncthreads_and(pred)
    some = cuda.syncthreads_or(pred)
    if cuda.threadIdx.x == 0:
        b = cuda.blockIdx.x
        out[b, 0] = count
        out[b, 1] = every
        out[b, 2] = some


# -- warp intrinsics -------------------------------------------------------------------------


@cuda.jit
def warp_shuffles(x, idx_out, up_out, down_out, xor_out, lane_out):
    """Every shuffle with the full mask, in blocks of whole warps: ``shfl_sync`` from lane
    31 - lane, ``shfl_up_sync`` by 3, ``shfl_down_sync`` by 5, ``shfl_xor_sync`` with 6
    (float32 values), and an int64 ``shfl_xor_sync`` of the global index with 1."""
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    v = x[i]
    idx_out[i] = cuda.shfl_sync(FULL_MASK, v, 31 - lane)
    up_out[i] = cuda.shfl_up_sync(FULL_MASK, v, 3)
    down_out[i] = cuda.shfl_down_sync(FULL_MASK, v, 5)
    xor_out[i] = cuda.shfl_xor_sync(FULL_MASK, v, 6)
    lane_out[i] = cuda.shfl_xor_sync(FULL_MASK, i, 1)


@cuda.jit
def warp_reduce_xor(x, out):
    """Butterfly reduction with ``shfl_xor_sync`` (16, 8, 4, 2, 1): every lane ends with
    its warp's float32 total and stores it."""
    i = cuda.grid(1)
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    out[i] = v


@cuda.jit
def warp_reduce_down(x, out):
    """The classic ``shfl_down_sync`` reduction; lane 0 of each warp stores the total in
    ``out[global warp index]``."""
    i = cuda.grid(1)
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL_MASK, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // 32] = v


@cuda.jit
def warp_votes(x, out):
    """Votes of ``x > 0`` with the full mask, per thread in ``out[i]``: ``activemask``
    (taken first, all lanes converged), ``ballot_sync`` (an int32: lane 31 makes it
    negative), ``any_sync``, ``all_sync``, ``eq_sync`` of the boolean predicate,
    ``lanemask_lt`` and ``laneid``."""
    i = cuda.grid(1)
    active = cuda.activemask()
    p = x[i] > 0
    out[i, 0] = active
    out[i, 1] = cuda.ballot_sync(FULL_MASK, p)
    out[i, 2] = cuda.any_sync(FULL_MASK, p)
    out[i, 3] = cuda.all_sync(FULL_MASK, p)
    out[i, 4] = cuda.eq_sync(FULL_MASK, p)
    out[i, 5] = cuda.lanemask_lt()
    out[i, 6] = cuda.laneid


@cuda.jit
def half_warp_ballots(x, out):
    """Partial masks in divergent branches: lanes 0-15 vote with mask 0x0000ffff, lanes
    16-31 with 0xffff0000; each half sees only its own lanes' bits, and swaps indices
    with ``shfl_xor_sync(mask, i, 8)``, which stays within the half."""
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    p = x[i] > 0
    if lane < 16:
        out[i, 0] = cuda.ballot_sync(0x0000FFFF, p)
        out[i, 1] = cuda.shfl_xor_sync(0x0000FFFF, i, 8)
    else:
        out[i, 0] = cuda.ballot_sync(0xFFFF0000, p)
        out[i, 1] = cuda.shfl_xor_sync(0xFFFF0000, i, 8)


@cuda.jit
def warp_exchange_syncwarp(x, out):
    """Warp-synchronous exchange through shared memory, ordered by ``syncwarp`` alone (no
    ``syncthreads``): each lane reads its right neighbour's slot, then, after the slots
    are rewritten, its left neighbour's. Blocks of 64 threads. Not a race."""
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    base = t - lane
    buf[t] = x[cuda.grid(1)]
    cuda.syncwarp()
    right = buf[base + (lane + 1) % 32]
    cuda.syncwarp()
    buf[t] = right * float32(2)
    cuda.syncwarp(FULL_MASK)
    out[cuda.grid(1)] = buf[base + (lane + 31) % 32]


# -- atomics -----------------------------------------------------------------------------------


@cuda.jit
def atomic_add_sub(counters, olds):
    """int32 ``atomic.add(counters, 0, 1)`` and ``atomic.sub(counters, 1, 3)``; every
    thread stores the old values it got in ``olds[i]``."""
    i = cuda.grid(1)
    olds[i, 0] = cuda.atomic.add(counters, 0, 1)
    olds[i, 1] = cuda.atomic.sub(counters, 1, 3)


@cuda.jit
def atomic_max_min(ints, floats, iacc, facc, iolds, folds):
    """``atomic.max`` and ``atomic.min`` on int32 (``iacc[0]``, ``iacc[1]``) and float32
    (``facc[0]``, ``facc[1]``) with the old values returned."""
    i = cuda.grid(1)
    iolds[i, 0] = cuda.atomic.max(iacc, 0, ints[i])
    iolds[i, 1] = cuda.atomic.min(iacc, 1, ints[i])
    folds[i, 0] = cuda.atomic.max(facc, 0, floats[i])
    folds[i, 1] = cuda.atomic.min(facc, 1, floats[i])


@cuda.jit
def atomic_exch_cas(acc, flag, olds):
    """``atomic.exch`` (each thread swaps in ``i + 1``), a ticket counter built on
    ``atomic.cas`` (a retry loop that only uses the values cas returns: thread tickets
    are 0..n-1 in some order), and ``atomic.compare_and_swap`` on a flag (one winner)."""
    i = cuda.grid(1)
    olds[i, 0] = cuda.atomic.exch(acc, 0, i + 1)
    expected = 0
    while True:
        got = cuda.atomic.cas(acc, 1, expected, expected + 1)
        if got == expected:
            break
        expected = got
    olds[i, 1] = expected
    olds[i, 2] = cuda.atomic.compare_and_swap(flag, 0, i + 1)


@cuda.jit
def atomic_bitwise(bits, olds):
    """uint32 ``atomic.or_`` (set bit ``lane`` of 0), ``atomic.and_`` (clear it from all
    ones) and ``atomic.xor`` (flip it) in one warp, with the old values."""
    lane = cuda.threadIdx.x
    bit = 1 << lane
    olds[lane, 0] = cuda.atomic.or_(bits, 0, bit)
    olds[lane, 1] = cuda.atomic.and_(bits, 1, ~bit)
    olds[lane, 2] = cuda.atomic.xor(bits, 2, bit)


@cuda.jit
def atomic_inc_dec(counters, olds, limit):
    """uint32 ``atomic.inc`` and ``atomic.dec`` with a limit: inc counts 0..limit and wraps
    to 0; dec counts down and wraps from 0 to ``limit``."""
    i = cuda.grid(1)
    olds[i, 0] = cuda.atomic.inc(counters, 0, limit)
    olds[i, 1] = cuda.atomic.dec(counters, 1, limit)


@cuda.jit
def histogram(values, bins, total):
    """A per-block histogram in shared memory (zeroed by the block, atomics on shared
    memory, barriers), merged into global ``bins`` with atomics; every thread also adds
    1 to the one global counter ``total[0]``."""
    local_bins = cuda.shared.array(8, int32)
    t = cuda.threadIdx.x
    if t < 8:
        local_bins[t] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < values.shape[0]:
        cuda.atomic.add(local_bins, values[i] % 8, 1)
    cuda.atomic.add(total, 0, 1)
    cuda.syncthreads()
    if t < 8:
        cuda.atomic.add(bins, t, local_bins[t])


@cuda.jit
def atomic_float_sums(x, acc32, acc64):
    """float32 and float64 ``atomic.add`` of the same float32 values, whose sums are exact
    (small integers), so the order of the additions does not matter."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(acc32, 0, x[i])
        cuda.atomic.add(acc64, 0, x[i])


# -- device functions -----------------------------------------------------------------------


@cuda.jit(device=True)
def clamp(v, lo, hi):
    """A device function with no waits: ``min(max(v, lo), hi)``."""
    return min(max(v, lo), hi)


@cuda.jit(device=True)
def stage_and_mirror(buf, value, t, nb):
    """A device function that contains ``syncthreads``: stage a value in shared memory,
    wait for the block, return the mirrored slot."""
    buf[t] = value
    cuda.syncthreads()
    return buf[nb - 1 - t]


@cuda.jit(device=True)
def warp_total(v):
    """A device function that shuffles: the butterfly sum of ``v`` over the warp."""
    offset = 16
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    return v


@cuda.jit(device=True)
def block_total(buf, v):
    """A device function that calls a waiting device function, then waits at a barrier:
    the float32 total of the block (blocks of whole warps, at most 32 warps)."""
    t = cuda.threadIdx.x
    total = warp_total(v)
    if t % 32 == 0:
        buf[t // 32] = total
    cuda.syncthreads()
    result = float32(0)
    for w in range(cuda.blockDim.x // 32):
        result += buf[w]
    return result


@cuda.jit
def device_clamp(x, out, lo, hi):
    """Calls ``clamp`` (float32 arguments, float32 result)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = clamp(x[i], lo, hi)


@cuda.jit
def device_mirror(x, out):
    """Calls ``stage_and_mirror`` (a barrier inside a device function); blocks of
    THREADS threads: ``out`` is each block of ``x`` reversed."""
    buf = cuda.shared.array(THREADS, float32)
    i = cuda.grid(1)
    out[i] = stage_and_mirror(buf, x[i], cuda.threadIdx.x, cuda.blockDim.x)


@cuda.jit
def device_warp_total(x, out):
    """Calls ``warp_total`` (a shuffle inside a device function)."""
    i = cuda.grid(1)
    out[i] = warp_total(x[i])


@cuda.jit
def device_block_total(x, out):
    """Calls ``block_total`` (nested waiting device functions): ``out[b]`` is block
    ``b``'s float32 total, stored by thread 0."""
    buf = cuda.shared.array(32, float32)
    total = block_total(buf, x[cuda.grid(1)])
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = total


# -- math, typing and print -------------------------------------------------------------------


@cuda.jit
def math_functions(x, out):
    """``math.exp``, ``log``, ``sqrt``, ``tanh`` and ``floor`` of float32 ``x`` (positive),
    stored in float32 rows of ``out``: numba evaluates them in float32."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        out[0, i] = math.exp(v)
        out[1, i] = math.log(v)
        out[2, i] = math.sqrt(v)
        out[3, i] = math.tanh(v)
        out[4, i] = math.floor(v)


@cuda.jit
def typing_rules(x, ints, f64, i64):
    """numba's typing, made visible: float32 products stored in float64 (an int or float
    literal widens to float64; ``float32(3)`` does not), float32 overflow, floor
    division and modulo of negative numbers (Python's rules, for ints and floats), int32
    and uint32 casts that wrap, and int32 arithmetic that is widened to int64 instead of
    wrapping. One thread. ``x = [1.1, 3.3, -2.7, 3e38]``,
    ``ints = [-7, 2, 7, -2, 2**31 + 5, 2**32 - 3, 5]``."""
    if cuda.grid(1) != 0:
        return
    v = x[0]
    f64[0] = v * 3  # float64: int literal
    f64[1] = v * 0.1  # float64: float literal
    f64[2] = v * float32(3)  # float32, then widened on store
    f64[3] = v * float32(0.1)
    f64[4] = v + x[1]  # float32 + float32 is float32
    f64[5] = v / 3  # true division: float64
    f64[6] = x[3] * 2  # float64: no overflow
    f64[7] = x[3] * float32(2)  # float32: inf
    f64[8] = x[2] % float32(2)  # Python's float modulo: 1.3 (in float32)
    f64[9] = x[2] // float32(2)  # Python's floor division: -2
    f64[10] = v * (cuda.threadIdx.x + 3)  # int32 thread index, widened: float64
    i64[0] = ints[0] // ints[1]  # -7 // 2 == -4
    i64[1] = ints[0] % ints[1]  # -7 % 2 == 1
    i64[2] = ints[2] // ints[3]  # 7 // -2 == -4
    i64[3] = ints[2] % ints[3]  # 7 % -2 == -1
    i64[4] = numba.int32(ints[4])  # 2**31 + 5 wraps to -2**31 + 5
    i64[5] = numba.int32(2147483647) + 1  # int32 + int64: 2**31, no wrap
    i64[6] = numba.int32(2147483647) * numba.int32(2)  # int32 * int32 is int64: 2**32 - 2
    i64[7] = numba.uint32(ints[0])  # -7 wraps to 2**32 - 7
    i64[8] = numba.uint32(ints[5] + ints[6])  # 2**32 + 2 wraps to 2
    i64[9] = cuda.threadIdx.x + numba.int32(2147483647) + numba.int32(1)  # int64: 2**31


@cuda.jit
def print_values(x):
    """``print`` in a kernel: each thread prints a string, a float32 and its index."""
    i = cuda.grid(1)
    print("x", x[i], "i", i)


# -- kernels the simulator gets wrong ----------------------------------------------------------
# Correct kernels on which portkit's simulator disagrees with numba on a GPU; the test of
# each in tests/simt/test_simt.py is xfail(strict=True) and says why.


@cuda.jit
def eq_sync_truthy(out):
    """``eq_sync`` votes on a boolean *predicate* (numba lowers it to ``vote.sync.uni``
    after ``predicate != 0``): ``lane + 1`` is nonzero, hence true, in every lane, so the
    vote is uniform and ``eq_sync`` returns True, although the integers differ."""
    i = cuda.grid(1)
    out[i] = cuda.eq_sync(FULL_MASK, cuda.threadIdx.x % 32 + 1)


@cuda.jit
def activemask_after_vote(x, out):
    """``activemask`` after a warp vote, with every lane converged: a GPU returns the full
    mask in every lane."""
    i = cuda.grid(1)
    b = cuda.ballot_sync(FULL_MASK, x[i] > 0)
    out[i, 0] = b
    out[i, 1] = cuda.activemask()


@cuda.jit
def atomic_add_float64_value(acc, values):
    """``atomic.add`` on a float32 array of a float64 value: numba casts the value to the
    array's dtype (float32) before adding. With ``acc[0] = 1`` and ``values[0] = 2**-24 +
    2**-50``, float32(value) = 2**-24 and 1 + 2**-24 rounds to 1 (ties to even)."""
    if cuda.grid(1) == 0:
        cuda.atomic.add(acc, 0, values[0])


@cuda.jit
def float_power(x, out):
    """``x ** 2`` with float32 ``x`` is float32 in numba (an integer power keeps the float
    type), unlike ``x * 2``; stored in float64 so the rounding shows."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] ** 2


@cuda.jit
def floor_product(x, out):
    """``math.floor`` of a float32 is a float32 in numba-cuda (not an int), so
    ``floor(x) * x`` is a float32 product; stored in float64 so the rounding shows."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = math.floor(x[i]) * x[i]


@cuda.jit
def floor_large(x, out):
    """``math.floor`` of a float32 beyond the int64 range (1e30) is just that float."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = math.floor(x[i])


@cuda.jit
def numpy_int32_square(a, out):
    """``np.int32(a) * np.int32(a)`` is int64 in numba (int32 arithmetic widens), so
    70000**2 does not wrap."""
    i = cuda.grid(1)
    if i < a.shape[0]:
        v = np.int32(a[i])
        out[i] = v * v


@cuda.jit
def uint32_difference(a, b, out):
    """``uint32 - uint32`` is uint64 in numba: 1 - 3 is 2**64 - 2, stored in float64."""
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = numba.uint32(a[i]) - numba.uint32(b[i])


@cuda.jit
def round_product(x, out):
    """``round(float32)`` is int64 in numba, so ``round(x) * x`` is float64."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = round(x[i]) * x[i]


@cuda.jit
def math_pow_int(x, out):
    """``math.pow(float32, int)`` is float64 in numba (unlike ``math.exp(float32)``)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = math.pow(x[i], 2)


@cuda.jit
def tuple_constant(x, out):
    """A module-level tuple of floats is a tuple of float64 constants in numba, so
    ``x * COEF_TUPLE[0]`` is float64, like ``x * 0.1``."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * COEF_TUPLE[0]


@cuda.jit
def unified_variable(x, scale, out):
    """numba gives a variable one type for the whole function: ``best`` starts as a
    float64 literal, so it is float64 even after ``best = x[k]`` (float32), and
    ``best * scale[0]`` is a float64 product."""
    if cuda.grid(1) != 0:
        return
    best = -1.0e30
    for k in range(x.shape[0]):
        if x[k] > best:
            best = x[k]
    out[0] = best * scale[0]


@cuda.jit
def uint64_plus_literal(a, out):
    """``uint64 + 1`` (an int literal) is int64 in numba, exact; 2**60 + 1 + 1."""
    if cuda.grid(1) == 0:
        out[0] = numba.uint64(a[0]) + 1


@cuda.jit
def dynamic_shared_two_dtypes(out):
    """All dynamic shared arrays of a block alias one buffer, whatever their dtype: the
    float32 1.0 written through ``f`` reads as the int32 0x3f800000 through ``n``."""
    f = cuda.shared.array(0, float32)
    n = cuda.shared.array(0, int32)
    t = cuda.threadIdx.x
    if t == 0:
        f[0] = float32(1.0)
    cuda.syncthreads()
    out[t] = n[0]


@cuda.jit
def long_barrier_loop(out, steps):
    """A block that loads a value into shared memory once, then runs ``steps`` barrier-
    separated steps reading it (a persistent, iterative kernel). Correct for any number of
    steps. Blocks of 32 threads."""
    table = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    if t == 0:
        table[0] = float32(0.5)
    acc = float32(0)
    for _step in range(steps):
        cuda.syncthreads()
        acc += table[0]
    out[t] = acc


@cuda.jit
def many_shuffles(out, rounds):
    """Lane 0 writes shared memory, the warp then does ``rounds`` full-mask shuffles (warp
    operations, which the simulator counts as ordering the warp's lanes), and every lane
    reads the value. One warp. (CUDA's memory model promises this ordering for ``syncwarp``
    only; shuffles stand in for it here because the simulator cannot run ``syncwarp``.)"""
    buf = cuda.shared.array(1, float32)
    lane = cuda.threadIdx.x
    if lane == 0:
        buf[0] = float32(7)
    v = lane
    for _round in range(rounds):
        v = cuda.shfl_xor_sync(FULL_MASK, v, 1)
    out[lane] = buf[0] + v


@cuda.jit
def ballot_after_exit(x, out, n):
    """Lanes past ``n`` return early; the rest vote with the full mask. PTX defines this:
    ``vote.sync`` waits for the *non-exited* lanes of the mask, and exited lanes vote
    false."""
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = cuda.ballot_sync(FULL_MASK, x[i] > 0)


@cuda.jit
def small_block_warp_sum(x, out):
    """A block of 16 threads (one partial warp) reducing with full-mask ``shfl_xor_sync``
    by 8, 4, 2, 1: lanes 16-31 do not exist, and no lane reads from them."""
    t = cuda.threadIdx.x
    v = x[t]
    offset = 8
    while offset > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, offset)
        offset //= 2
    out[t] = v


@cuda.jit
def negative_index_wraps(x, out):
    """``x[i - 1]`` at ``i == 0`` is ``x[-1]``: numba wraps negative indices of signed
    integer type (Python semantics), on the GPU too; lane 0 reads the last element."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i - 1]


@cuda.jit
def match_and_select(x, f, out):
    """``match_any_sync`` over int32 values that repeat and over float32 bits (-0.0 is not
    0.0, a NaN matches its own bits), ``match_all_sync`` (the mask and True where a warp
    holds one value, else 0 and False) and ``selp`` choosing by lane parity."""
    i = cuda.grid(1)
    out[i, 0] = cuda.match_any_sync(FULL_MASK, x[i])
    mask, alike = cuda.match_all_sync(FULL_MASK, x[i] // 64)
    out[i, 1] = mask
    out[i, 2] = 1 if alike else 0
    out[i, 3] = cuda.match_any_sync(FULL_MASK, f[i])
    # numba types both values alike or refuses the call (-x[i] alone is int64): int32(...)
    out[i, 4] = cuda.selp(cuda.laneid % 2 == 0, x[i], int32(-x[i]))


@cuda.jit
def record_fields(r, out):
    """A record array's fields read and written as attributes of an element (``r[i].x``),
    as numba allows, beside the item form (``r[i]["n"]``)."""
    i = cuda.grid(1)
    if i < r.shape[0]:
        out[i] = r[i].x * r[i]["n"]
        r[i].x = r[i].x + 1


@cuda.jit
def libdevice_calls(x, n, out, out32):
    """``numba.cuda.libdevice`` functions as a kernel calls them: C math in float64 and
    float32, rounding, min/max (``umin`` compares unsigned) and bit counts. The float32
    result goes to a float32 array: libdevice's ``powf`` is within its documented ULPs of
    the correctly rounded value (an H200 gave ``powf(x, 2)`` 1 ULP from ``x * x``), so it
    is compared in float32, not at float64's tolerance."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        out[i, 0] = libdevice.exp(v)
        out32[i] = libdevice.powf(float32(v), float32(2))
        out[i, 1] = libdevice.trunc(v * 2.5)
        out[i, 2] = libdevice.round(v * 2.5)
        out[i, 3] = libdevice.fmax(v, 0.0)
        out[i, 4] = libdevice.umin(n[i], 7)
        out[i, 5] = libdevice.popc(n[i]) + libdevice.clz(n[i])


@cuda.jit
def bit_counts(x32, u64, out32, outu):
    """``cuda.popc``/``clz``/``ffs`` as numba-cuda lowers them: an int32 over its 32 bits
    (a negative one's popc is at most 32), a uint64 over its 64 (``popc.b64``, ``clz.b64``);
    ``brev`` of a uint64 over 64 bits (``__nv_brevll``), of an int32 over 32 (``__nv_brev``)."""
    i = cuda.grid(1)
    if i < x32.shape[0]:
        out32[i, 0] = cuda.popc(x32[i])
        out32[i, 1] = cuda.clz(x32[i])
        out32[i, 2] = cuda.ffs(x32[i])
        outu[i, 0] = cuda.popc(u64[i])
        outu[i, 1] = cuda.clz(u64[i])
        outu[i, 2] = cuda.ffs(u64[i])
        outu[i, 3] = cuda.brev(u64[i])
        outu[i, 4] = cuda.brev(x32[i])


@cuda.jit
def integer_powers(x, y, n, out32, out64):
    """A float raised to an integer as numba-cuda computes it: by squaring in the float's
    type (``x ** 2`` is ``x * x``), a negative power ``1.0 / r`` rounded to the type, the
    exponent a literal or a value per thread."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out32[i, 0] = x[i] ** 3
        out32[i, 1] = x[i] ** -2
        out32[i, 2] = x[i] ** n[i]
        out64[i, 0] = y[i] ** 5
        out64[i, 1] = y[i] ** n[i]
