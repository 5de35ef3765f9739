"""Kernels for the one rule for red (docs/simulator.md): each kernel a GPU runs right
(a warning) beside a buggy sibling (an error).

``# WARN: <kernel>`` marks the line a warning names; ``# BUG: <kernel>`` the line an
error names. Tests find the lines by these markers.
"""

from numba import cuda, float32, int32

TPB = 32


# -- threads that returned count as arrived at a block barrier -------------------------
@cuda.jit
def block_sum_early_return(x, out, n):
    """Threads past n return before the barrier; thread 0 sums the live threads' slots."""
    s = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= n:
        return
    s[t] = x[i]
    cuda.syncthreads()  # WARN: block_sum_early_return
    if t == 0:
        acc = float32(0)
        live = min(TPB, n - cuda.blockIdx.x * TPB)
        for k in range(live):
            acc += s[k]
        out[cuda.blockIdx.x] = acc


@cuda.jit
def block_sum_reads_exited_slots(x, out, n):
    """The sibling: thread 0 sums every slot, the exited threads' too (never written)."""
    s = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= n:
        return
    s[t] = x[i]
    cuda.syncthreads()
    if t == 0:
        acc = float32(0)
        for k in range(TPB):
            acc += s[k]
        out[cuda.blockIdx.x] = acc  # BUG: block_sum_reads_exited_slots


@cuda.jit
def count_positive_early_return(x, out, n):
    """syncthreads_count after some threads returned: they cast no vote (bar.red)."""
    i = cuda.grid(1)
    if i >= n:
        return
    c = cuda.syncthreads_count(x[i] > 0)  # WARN: count_positive_early_return
    out[i] = c


# -- uninitialised values: an error where used -----------------------------------------
@cuda.jit
def tile_slot_dropped(x, out, n):
    """Threads past n fold a tile slot nobody filled into acc and never store acc."""
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < n:
        tile[t] = x[i]
    cuda.syncthreads()
    acc = float32(1)
    acc += tile[t] * 2  # WARN: tile_slot_dropped
    if i < n:
        out[i] = acc


@cuda.jit
def tile_slot_stored(x, out, n):
    """The sibling: acc stored by every thread, the ones past n too."""
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < n:
        tile[t] = x[i]
    cuda.syncthreads()
    acc = float32(1)
    acc += tile[t] * 2
    out[i] = acc  # BUG: tile_slot_stored


@cuda.jit
def local_dropped(x, out, n):
    tmp = cuda.local.array(2, float32)
    i = cuda.grid(1)
    tmp[0] = x[i]
    unused = tmp[1] + tmp[0]  # WARN: local_dropped
    out[i] = tmp[0]
    del unused


@cuda.jit
def local_branched_on(x, out, n):
    tmp = cuda.local.array(2, float32)
    i = cuda.grid(1)
    tmp[0] = x[i]
    if tmp[1] > 0:  # BUG: local_branched_on
        tmp[0] = 0
    out[i] = tmp[0]


@cuda.jit
def local_as_index(x, out, n):
    tmp = cuda.local.array(2, int32)
    i = cuda.grid(1)
    tmp[0] = i
    out[tmp[1]] = x[i]  # BUG: local_as_index


@cuda.jit
def local_math_then_index(x, out, n):
    """Poison flows through a math function and a cast into an index."""
    tmp = cuda.local.array(2, float32)
    i = cuda.grid(1)
    tmp[0] = x[i]
    j = int(abs(tmp[1]))
    out[j] = x[i]  # BUG: local_math_then_index


@cuda.jit
def shared_atomic_operand(x, out, n):
    tile = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    if t > 0:
        tile[t] = x[t]
    cuda.syncthreads()
    cuda.atomic.add(out, 0, tile[t])  # BUG: shared_atomic_operand


@cuda.jit
def poison_through_shared(x, out, n):
    """An uninitialised value stored to shared memory keeps that slot uninitialised."""
    a = cuda.shared.array(TPB, float32)
    b = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    if t > 0:
        a[t] = x[t]
    cuda.syncthreads()
    b[t] = a[t] + 1
    cuda.syncthreads()
    out[t] = b[t]  # BUG: poison_through_shared


# -- write-write races: the values decide ----------------------------------------------
@cuda.jit
def everyone_stores_one(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[0] = float32(1)  # WARN: everyone_stores_one


@cuda.jit
def everyone_stores_theirs(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[0] = x[i]  # BUG: everyone_stores_theirs


# -- reads racing with atomics: a second schedule decides --------------------------------
@cuda.jit
def histogram_peek_unused(x, hist, out, n):
    """Each thread counts its value, then peeks at a bin others update atomically; the
    peek cannot change the output."""
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(hist, x[i] % 4, 1)
        seen = hist[i % 4]  # WARN: histogram_peek_unused
        out[i] = x[i] + seen * 0


@cuda.jit
def histogram_peek_stored(x, hist, out, n):
    """The sibling: the peeked count is stored: it depends on the order."""
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(hist, x[i] % 4, 1)
        out[i] = hist[i % 4]  # BUG: histogram_peek_stored


@cuda.jit
def vote_on_uninitialised(x, out, n):
    tmp = cuda.local.array(1, float32)
    i = cuda.grid(1)
    c = cuda.syncthreads_count(tmp[0] > 0)  # BUG: vote_on_uninitialised
    out[i] = c


@cuda.jit
def min_max(x, minmax):
    """numba-examples' histogram ``min_max``: a plain read of what others update atomically;
    the atomics' result is the same whatever each thread read."""
    i = cuda.grid(1)
    local_min = minmax[0]  # WARN: min_max
    local_max = minmax[1]
    if i < x.shape[0]:
        local_min = min(local_min, x[i])
        local_max = max(local_max, x[i])
    cuda.atomic.min(minmax, 0, local_min)
    cuda.atomic.max(minmax, 1, local_max)
