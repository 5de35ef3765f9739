// Twin of prototypes/softmax_warp.py: one warp per row (blockDim.x / WARP rows a block: the
// launcher's rows_per_block knob, at most MAX_THREADS / WARP), no shared memory, no barrier
// (but the split kernels below, softmax_warp_split_{held_,}fwd and
// softmax_warp_split_{stream_,}bwd: a row over a block of warps, the warps_per_row and
// bwd_warps_per_row knobs), arithmetic in T (float accumulation for float, as
// torch.softmax), in the prototype's order. Rows of at most 32 packs a lane are held in
// registers (softmax_warp_held{2,8,32}_fwd: max, then exps and sum); longer rows stream
// (softmax_warp_fwd: online softmax, the sum rescaled at most once per pack). Lane l takes
// packs l, l + 32, ... then tail columns left to right, then xor butterflies 16, 8, 4, 2, 1
// for the row's max and then for the sum.
//
// Speed: 16-byte loads and stores (Pack<T>) when the row is 16-byte aligned, scalar
// accesses for the same columns otherwise; each lane issues all its loads (held rows) or
// UNROLL packs' loads (streamed rows) before using any: a warp per row has few threads per
// row, so each needs many bytes in flight; one division per row.
#define WARP 32
// The largest block a launcher asks for (rows_per_block 8). 256 threads a block leave the
// register-held kernels the 255 registers a thread that 128 did (65536 / 256 = 256).
#define MAX_THREADS 256
#define FULL_MASK 0xffffffffu

// 16 bytes of T, aligned so that one copy is one 128-bit load or store.
template <typename T>
struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

__device__ inline bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

// L2 eviction priorities for a row read twice (a streamed row, or a backward row longer
// than a chunk): its first read carries an evict_last policy, so its lines are still in
// L2 for the second read (what torch.compile's kernels ask for with triton's
// eviction_policy="evict_last"), and the second read an evict_first one (not read again).
// Without them the second read of 1024 rows of 32768 floats came mostly from DRAM: 78% of
// copy bandwidth for the backward, torch.compile's 96% (one H200, 2026-11-28). A row read
// once (held) gets evict_normal, the plain load's. The CPU twin reads plainly.
enum L2Priority { EVICT_NORMAL, EVICT_LAST, EVICT_FIRST };

__device__ __forceinline__ unsigned long long l2_policy(int priority) {
#ifndef PORTKIT_CUDA_CPU
    unsigned long long normal, last, first;  // the two not returned are optimised away
    asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(normal));
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(last));
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(first));
    return priority == EVICT_LAST ? last : priority == EVICT_FIRST ? first : normal;
#else
    return (unsigned long long)priority;
#endif
}

// One 16-byte load under an L2 policy from l2_policy.
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const Pack<T>* p, unsigned long long policy) {
#ifndef PORTKIT_CUDA_CPU
    uint4 r;
    asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "l"(policy));
    Pack<T> v;
    memcpy(&v, &r, sizeof(v));
    return v;
#else
    (void)policy;
    return *p;
#endif
}

template <typename T>
__device__ inline T negative_infinity() {
    return -T(__int_as_float(0x7f800000));
}

// The running (max m, sum s of exp(x - m)) after N more columns v: the sum is rescaled
// at most once per pack (to the pack's maximum, if larger), then each column adds one
// exp. A branch per column would make a warp run both sides and cost up to three exps.
template <typename T, int N>
__device__ inline void online_update(T& m, T& s, const T (&v)[N]) {
    T top = v[0];
#pragma unroll
    for (int j = 1; j < N; ++j) top = v[j] > top ? v[j] : top;
    if (top > m) {  // a new maximum rescales the sum (s is 0 while m is -inf)
        s = s * exp(m - top);
        m = top;
    }
#pragma unroll
    for (int j = 0; j < N; ++j)
        if (v[j] != negative_infinity<T>()) s = s + exp(v[j] - m);  // -inf adds nothing
}

// s, a sum of exp(x - m), as a sum of exp(x - big), big >= m: one exp. An empty sum stays 0
// (its m may be -inf, and -inf - -inf would be NaN).
template <typename T>
__device__ inline T moved(T s, T m, T big) {
    return s != T(0) ? s * exp(m - big) : s;
}

template <typename T>
__device__ inline T warp_max(T v) {
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) {
        const T other = __shfl_xor_sync(FULL_MASK, v, offset);
        v = other > v ? other : v;
    }
    return v;
}

template <typename T>
__device__ inline T warp_sum(T v) {
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}

// v's maximum and sum over a block of warps (the split kernels): a butterfly per warp,
// then every thread merges the warps' values from part (shared memory, one a warp) in
// warp order, so all threads get the same result.
template <typename T>
__device__ inline T block_max(T v, T* part) {
    v = warp_max(v);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = v;
    __syncthreads();
    v = part[0];
    for (int w = 1; w < (int)(blockDim.x / WARP); ++w) v = part[w] > v ? part[w] : v;
    return v;
}

template <typename T>
__device__ inline T block_sum(T v, T* part) {
    v = warp_sum(v);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = v;
    __syncthreads();
    v = T(0);
    for (int w = 0; w < (int)(blockDim.x / WARP); ++w) v += part[w];
    return v;
}

// exp(v - m), 0 for v == -inf: a row of -inf sums to 0 (its output NaN, as torch's), and
// -inf - -inf would be NaN.
template <typename T>
__device__ inline T exp_from(T v, T m) {
    return v != negative_infinity<T>() ? exp(v - m) : T(0);
}

// Rows of at most 32 packs a lane (4096 float / 2048 double columns) stay in registers
// between their one read and their one write: one exp per column, no online rescaling (the
// maximum is known before any exp), and no second read. The second read is what the
// streaming kernel below paid for at 4096x4096 (0.84x torch): 36 warps an SM, each 16 KiB
// into its row, put 76 MiB of other rows between an element's two reads, more than the
// 50 MiB L2, so it came from DRAM again. Lane l holds packs l, l + 32, ... (at most
// PACKS), every load issued before any is used, and its tail column packs * W + l if the
// row has one (fewer than W a row). The max is a butterfly over the tail and held columns,
// then each held column becomes its exp and the sum (tail last) is a butterfly too.
// PACKS is the register array's static size, so each size is its own kernel (below): a
// kernel's registers are those of its largest path, and a 256-column row in a 32-pack
// kernel would hold 8 of 128 floats at a quarter of the occupancy.
template <typename T, int PACKS>
__device__ inline void held_row_fwd(const T* __restrict__ x, T* __restrict__ out,
                                    long long rows, long long cols) {
    constexpr int W = Pack<T>::N;
    const int lane = threadIdx.x % WARP;
    const long long row = (long long)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    if (row >= rows) return;  // a whole warp leaves together
    const T* xr = x + row * cols;
    T* outr = out + row * cols;
    const long long packs = cols / W;
    const bool vector = aligned16(xr) && aligned16(outr);

    Pack<T> v[PACKS];
    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
#pragma unroll
        for (int u = 0; u < PACKS; ++u)
            if (lane + u * WARP < packs) v[u] = xv[lane + u * WARP];
    } else {  // the same packs, element by element
#pragma unroll
        for (int u = 0; u < PACKS; ++u)
            if (lane + u * WARP < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) v[u].v[j] = xr[(lane + u * WARP) * (long long)W + j];
    }

    const long long c = packs * W + lane;  // this lane's tail column, if the row has one
    const T t = c < cols ? xr[c] : negative_infinity<T>();  // -inf moves neither max nor sum

    T m = t;  // the row's maximum: tail, held columns, butterfly
#pragma unroll
    for (int u = 0; u < PACKS; ++u)
        if (lane + u * WARP < packs)
#pragma unroll
            for (int j = 0; j < W; ++j) m = v[u].v[j] > m ? v[u].v[j] : m;
    m = warp_max(m);

    T s = T(0);  // the sum, in the same order; each held column becomes its exp
#pragma unroll
    for (int u = 0; u < PACKS; ++u) {
        if (lane + u * WARP < packs) {
#pragma unroll
            for (int j = 0; j < W; ++j) {
                v[u].v[j] = exp_from(v[u].v[j], m);
                s += v[u].v[j];
            }
        }
    }
    s = warp_sum(s + exp_from(t, m));

    const T inv = T(1) / s;  // one division per row
#pragma unroll
    for (int u = 0; u < PACKS; ++u) {
        if (lane + u * WARP < packs) {
#pragma unroll
            for (int j = 0; j < W; ++j) v[u].v[j] = v[u].v[j] * inv;
            if (vector)
                reinterpret_cast<Pack<T>*>(outr)[lane + u * WARP] = v[u];
            else
#pragma unroll
                for (int j = 0; j < W; ++j) outr[(lane + u * WARP) * (long long)W + j] = v[u].v[j];
        }
    }
    if (c < cols) outr[c] = exp_from(t, m) * inv;
}

// Up to 64 packs (256 float columns): 8 floats a lane and few registers, so 64 warps an SM
// (1 KiB of loads each) where the 8-pack kernel's registers would allow 24.
template <typename T>
__global__ void __launch_bounds__(MAX_THREADS) softmax_warp_held2_fwd(const T* __restrict__ x,
                                                                  T* __restrict__ out,
                                                                  long long rows, long long cols) {
    held_row_fwd<T, 2>(x, out, rows, cols);
}

// Up to 256 packs (1024 float columns): 4 KiB a warp in flight.
template <typename T>
__global__ void __launch_bounds__(MAX_THREADS) softmax_warp_held8_fwd(const T* __restrict__ x,
                                                                  T* __restrict__ out,
                                                                  long long rows, long long cols) {
    held_row_fwd<T, 8>(x, out, rows, cols);
}

// Up to 1024 packs (4096 float columns): 128 floats a lane, so few warps an SM, but each
// has 16 KiB in flight (an SM's loads in flight are what DRAM bandwidth needs, not warps).
template <typename T>
__global__ void __launch_bounds__(MAX_THREADS) softmax_warp_held32_fwd(const T* __restrict__ x,
                                                                   T* __restrict__ out,
                                                                   long long rows, long long cols) {
    held_row_fwd<T, 32>(x, out, rows, cols);
}

// Longer rows stream: online statistics over the row, then a second read for the output.
// Loads are issued UNROLL packs at a time (all of them before any is used), then the
// packs are processed in column order: the same order as a plain loop, so the arithmetic
// matches the prototype's. UNROLL 16 (8 KiB a warp in flight): 1024 rows of 32768 columns
// are only 8 warps an SM, so each must keep many bytes in flight; registers do not limit
// the warps there. The output pass walks each lane's packs backwards, tail first: the end of
// the row was read last, so it is the part most likely still in L2 (a 128 KiB row times
// every resident warp is more than L2 holds).
#define UNROLL 16

// Thread t of nt's online (max m, sum s) over a row: packs t, t + nt, ... (UNROLL packs'
// loads in flight, processed in column order), then tail columns packs * W + t, ...: a lane
// of softmax_warp_fwd (nt = WARP) or a thread of softmax_warp_split_fwd (nt = blockDim.x).
// Inlined, so the warp kernel's strides stay the constant WARP.
template <typename T>
__device__ __forceinline__ void streamed_stats(const T* __restrict__ xr, long long cols,
                                               long long packs, bool vector, long long t,
                                               long long nt, T& m, T& s) {
    constexpr int W = Pack<T>::N;
    m = negative_infinity<T>();
    s = T(0);
    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
        const unsigned long long keep = l2_policy(EVICT_LAST);  // streamed_write reads it again
        for (long long p0 = t; p0 < packs; p0 += nt * UNROLL) {
            Pack<T> v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * nt < packs) v[u] = load_pack(xv + p0 + u * nt, keep);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * nt < packs) online_update(m, s, v[u].v);
        }
    } else {  // the same packs, element by element
        for (long long p = t; p < packs; p += nt) {
            T v[W];
            for (int j = 0; j < W; ++j) v[j] = xr[p * W + j];
            online_update(m, s, v);
        }
    }
    for (long long c = packs * W + t; c < cols; c += nt) {
        const T v[1] = {xr[c]};
        online_update(m, s, v);
    }
}

// Thread t of nt's output exp(x - m) * inv: the tail columns first, then its packs
// backwards (the end of the row was read last, so it is the part most likely in L2).
template <typename T>
__device__ __forceinline__ void streamed_write(const T* __restrict__ xr, T* __restrict__ outr,
                                               long long cols, long long packs, bool vector,
                                               long long t, long long nt, T m, T inv) {
    constexpr int W = Pack<T>::N;
    for (long long c = packs * W + t; c < cols; c += nt) outr[c] = exp(xr[c] - m) * inv;
    const long long mine = (packs - t + nt - 1) / nt;
    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(outr);
        const unsigned long long last_use = l2_policy(EVICT_FIRST);
        for (long long k0 = mine - 1; k0 >= 0; k0 -= UNROLL) {
            Pack<T> v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (k0 - u >= 0) v[u] = load_pack(xv + t + (k0 - u) * nt, last_use);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (k0 - u >= 0) {
#pragma unroll
                    for (int j = 0; j < W; ++j) v[u].v[j] = exp(v[u].v[j] - m) * inv;
                    ov[t + (k0 - u) * nt] = v[u];
                }
            }
        }
    } else {
        for (long long k = mine - 1; k >= 0; --k) {
            const long long p = t + k * nt;
            for (int j = 0; j < W; ++j) outr[p * W + j] = exp(xr[p * W + j] - m) * inv;
        }
    }
}

template <typename T>
__global__ void softmax_warp_fwd(const T* __restrict__ x, T* __restrict__ out, long long rows,
                                 long long cols) {
    constexpr int W = Pack<T>::N;
    const int lane = threadIdx.x % WARP;
    const long long row = (long long)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    if (row >= rows) return;  // a whole warp leaves together
    const T* xr = x + row * cols;
    T* outr = out + row * cols;
    const long long packs = cols / W;
    const bool vector = aligned16(xr) && aligned16(outr);

    T m, s;
    streamed_stats(xr, cols, packs, vector, lane, WARP, m, s);

    const T big = warp_max(m);  // the row's maximum, then the sum, each lane's moved to it
    s = warp_sum(moved(s, m, big));
    m = big;

    const T inv = T(1) / s;  // one division per row; each column is exp(x - m) * inv
    streamed_write(xr, outr, cols, packs, vector, lane, WARP, m, inv);
}

// A streamed row split over a block of warps (the launcher's warps_per_row knob, at most
// MAX_SPLIT_THREADS / WARP; one row a block, grid = rows): thread t walks packs t, t + nt,
// ... (UNROLL packs' loads in flight, processed in column order) then tail columns
// packs * W + t, ...; each warp's (max, sum) by butterflies, as softmax_warp_fwd's row's,
// then every thread merges the warps' pairs from shared memory in warp order (the row's
// maximum, then each warp's sum moved to it). The output pass walks each thread's packs
// backwards, tail first, as softmax_warp_fwd's does. Why: 1024 rows of 32768 floats are
// 1024 warps in softmax_warp_fwd, every row in flight at once (128 MiB, more than L2), so
// most of each row's second read came from DRAM (46% of copy bandwidth on an H200).
#define MAX_SPLIT_THREADS 512
#define MAX_SPLIT_WARPS (MAX_SPLIT_THREADS / WARP)

template <typename T>
__global__ void __launch_bounds__(MAX_SPLIT_THREADS)
    softmax_warp_split_fwd(const T* __restrict__ x, T* __restrict__ out, long long rows,
                           long long cols) {
    __shared__ T part_m[MAX_SPLIT_WARPS], part_s[MAX_SPLIT_WARPS];
    constexpr int W = Pack<T>::N;
    const int tid = threadIdx.x;
    const long long nt = blockDim.x;
    const int warps = blockDim.x / WARP;
    const long long row = blockIdx.x;
    if (row >= rows) return;  // the whole block leaves together (grid = rows: none does)
    const T* xr = x + row * cols;
    T* outr = out + row * cols;
    const long long packs = cols / W;
    const bool vector = aligned16(xr) && aligned16(outr);

    T m, s;
    streamed_stats(xr, cols, packs, vector, tid, nt, m, s);

    const T big = warp_max(m);  // this warp's maximum and sum
    s = warp_sum(moved(s, m, big));
    if (tid % WARP == 0) {
        part_m[tid / WARP] = big;
        part_s[tid / WARP] = s;
    }
    __syncthreads();
    m = part_m[0];  // the row's: every thread merges the same pairs in the same order
    for (int w = 1; w < warps; ++w) m = part_m[w] > m ? part_m[w] : m;
    s = T(0);
    for (int w = 0; w < warps; ++w) s += moved(part_s[w], part_m[w], m);

    const T inv = T(1) / s;
    streamed_write(xr, outr, cols, packs, vector, tid, nt, m, inv);
}

// A row split over a block of warps and held in registers (the warps_per_row knob, rows
// of at most SPLIT_HELD packs a thread; one row a block, grid = rows): thread t holds
// packs t, t + nt, ... (every load issued before any is used) and its tail column
// packs * W + t if the row has one. The row's maximum: tail, held columns, a butterfly
// per warp, the warps' maxima from shared memory in warp order; each held column becomes
// its exp and the sum follows in the same order (the warps' sums added in warp order);
// one division per row. Why: softmax_warp_split_fwd streams, so every element crosses
// DRAM twice; at 8192x8192 it ran at 71% of copy bandwidth on an H200 where
// torch.compile ran at 84% and softmax's block-a-row held kernel at 90% (2026-11-28).
// Written after that day's device time ran out: not yet timed, and no table picks it
// (`portkit tune softmax_warp --case float32-8192x8192` on a GPU tries it).
#define SPLIT_HELD 8

template <typename T>
__global__ void __launch_bounds__(MAX_SPLIT_THREADS)
    softmax_warp_split_held_fwd(const T* __restrict__ x, T* __restrict__ out, long long rows,
                                long long cols) {
    __shared__ T part_m[MAX_SPLIT_WARPS], part_s[MAX_SPLIT_WARPS];
    constexpr int W = Pack<T>::N;
    const int tid = threadIdx.x;
    const long long nt = blockDim.x;
    const long long row = blockIdx.x;
    if (row >= rows) return;  // the whole block leaves together (grid = rows: none does)
    const T* xr = x + row * cols;
    T* outr = out + row * cols;
    const long long packs = cols / W;
    const bool vector = aligned16(xr) && aligned16(outr);

    Pack<T> v[SPLIT_HELD];
#pragma unroll
    for (int u = 0; u < SPLIT_HELD; ++u) {
        const long long p = tid + u * nt;
        if (p < packs) {
            if (vector)
                v[u] = reinterpret_cast<const Pack<T>*>(xr)[p];
            else
#pragma unroll
                for (int j = 0; j < W; ++j) v[u].v[j] = xr[p * W + j];
        }
    }
    const long long c = packs * W + tid;  // this thread's tail column, if the row has one
    const T t = c < cols ? xr[c] : negative_infinity<T>();  // -inf moves neither max nor sum

    T m = t;
#pragma unroll
    for (int u = 0; u < SPLIT_HELD; ++u)
        if (tid + u * nt < packs)
#pragma unroll
            for (int j = 0; j < W; ++j) m = v[u].v[j] > m ? v[u].v[j] : m;
    m = block_max(m, part_m);

    T s = T(0);
#pragma unroll
    for (int u = 0; u < SPLIT_HELD; ++u)
        if (tid + u * nt < packs)
#pragma unroll
            for (int j = 0; j < W; ++j) {
                v[u].v[j] = exp_from(v[u].v[j], m);
                s += v[u].v[j];
            }
    s = block_sum(s + exp_from(t, m), part_s);

    const T inv = T(1) / s;  // one division per row
#pragma unroll
    for (int u = 0; u < SPLIT_HELD; ++u) {
        const long long p = tid + u * nt;
        if (p < packs) {
#pragma unroll
            for (int j = 0; j < W; ++j) v[u].v[j] = v[u].v[j] * inv;
            if (vector)
                reinterpret_cast<Pack<T>*>(outr)[p] = v[u];
            else
#pragma unroll
                for (int j = 0; j < W; ++j) outr[p * W + j] = v[u].v[j];
        }
    }
    if (c < cols) outr[c] = exp_from(t, m) * inv;
}

// The backward keeps 8 packs of each input in flight (its measured 1.19-1.76x torch).
// No L2 policies here: with them its held rows (32768x256) ran 3% slower on an H200
// (2026-11-28), and for a row it reads twice the tables pick the split kernels.
#define BWD_UNROLL 8

template <typename T>
__global__ void softmax_warp_bwd(const T* __restrict__ y, const T* __restrict__ dy,
                                 T* __restrict__ dx, long long rows, long long cols) {
    const int lane = threadIdx.x % WARP;
    const long long row = (long long)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    if (row >= rows) return;
    const T* yr = y + row * cols;
    const T* dyr = dy + row * cols;
    T* dxr = dx + row * cols;
    constexpr int W = Pack<T>::N;
    const bool vector = aligned16(yr) && aligned16(dyr) && aligned16(dxr);
    const long long packs = cols / W;

    // A row of at most WARP x BWD_UNROLL packs (1024 float columns) is one chunk: its packs
    // stay in a and g from the dot pass to the output pass, so y and dy cross DRAM once.
    // Same loads, same arithmetic in the same order.
    const bool held = vector && packs <= (long long)WARP * BWD_UNROLL;
    Pack<T> a[BWD_UNROLL], g[BWD_UNROLL];
    T dot = T(0);
    if (vector) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(yr);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dyr);
        for (long long p0 = lane; p0 < packs; p0 += (long long)WARP * BWD_UNROLL) {
#pragma unroll
            for (int u = 0; u < BWD_UNROLL; ++u) {
                if (p0 + u * WARP < packs) {
                    a[u] = yv[p0 + u * WARP];
                    g[u] = gv[p0 + u * WARP];
                }
            }
#pragma unroll
            for (int u = 0; u < BWD_UNROLL; ++u)
                if (p0 + u * WARP < packs)
#pragma unroll
                    for (int j = 0; j < W; ++j) dot += a[u].v[j] * g[u].v[j];
        }
    } else {
        for (long long p = lane; p < packs; p += WARP)
            for (int j = 0; j < W; ++j) dot += yr[p * W + j] * dyr[p * W + j];
    }
    for (long long c = packs * W + lane; c < cols; c += WARP) dot += yr[c] * dyr[c];

    dot = warp_sum(dot);

    if (vector) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(yr);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dyr);
        Pack<T>* dv = reinterpret_cast<Pack<T>*>(dxr);
        for (long long p0 = lane; p0 < packs; p0 += (long long)WARP * BWD_UNROLL) {
            if (!held) {
#pragma unroll
                for (int u = 0; u < BWD_UNROLL; ++u) {
                    if (p0 + u * WARP < packs) {
                        a[u] = yv[p0 + u * WARP];
                        g[u] = gv[p0 + u * WARP];
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < BWD_UNROLL; ++u) {
                if (p0 + u * WARP < packs) {
#pragma unroll
                    for (int j = 0; j < W; ++j) a[u].v[j] = a[u].v[j] * (g[u].v[j] - dot);
                    dv[p0 + u * WARP] = a[u];
                }
            }
        }
    } else {
        for (long long p = lane; p < packs; p += WARP)
            for (int j = 0; j < W; ++j) dxr[p * W + j] = yr[p * W + j] * (dyr[p * W + j] - dot);
    }
    for (long long c = packs * W + lane; c < cols; c += WARP) dxr[c] = yr[c] * (dyr[c] - dot);
}

// Packs p0, p0 + nt, ... (BWD_HELD of them, those below packs) of y into a and of dy into
// g: 16-byte loads when the row is aligned, the same packs element by element otherwise.
template <typename T, int N>
__device__ inline void load_bwd_chunk(const T* yr, const T* dyr, long long p0, long long nt,
                                      long long packs, bool vector, Pack<T> (&a)[N],
                                      Pack<T> (&g)[N], unsigned long long policy) {
    constexpr int W = Pack<T>::N;
#pragma unroll
    for (int u = 0; u < N; ++u) {
        const long long p = p0 + u * nt;
        if (p < packs) {
            if (vector) {
                a[u] = load_pack(reinterpret_cast<const Pack<T>*>(yr) + p, policy);
                g[u] = load_pack(reinterpret_cast<const Pack<T>*>(dyr) + p, policy);
            } else {
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    a[u].v[j] = yr[p * W + j];
                    g[u].v[j] = dyr[p * W + j];
                }
            }
        }
    }
}

// dot plus the products y * dy of the packs p0, p0 + nt, ... that a and g hold, in order.
template <typename T, int N>
__device__ inline void add_chunk_dot(T& dot, long long p0, long long nt, long long packs,
                                     const Pack<T> (&a)[N], const Pack<T> (&g)[N]) {
#pragma unroll
    for (int u = 0; u < N; ++u)
        if (p0 + u * nt < packs)
#pragma unroll
            for (int j = 0; j < Pack<T>::N; ++j) dot += a[u].v[j] * g[u].v[j];
}

// dx = y * (dy - dot) for the packs p0, p0 + nt, ... that a and g hold.
template <typename T, int N>
__device__ inline void store_bwd_chunk(T* dxr, long long p0, long long nt, long long packs,
                                       bool vector, T dot, Pack<T> (&a)[N],
                                       const Pack<T> (&g)[N]) {
    constexpr int W = Pack<T>::N;
#pragma unroll
    for (int u = 0; u < N; ++u) {
        const long long p = p0 + u * nt;
        if (p < packs) {
#pragma unroll
            for (int j = 0; j < W; ++j) a[u].v[j] = a[u].v[j] * (g[u].v[j] - dot);
            if (vector)
                reinterpret_cast<Pack<T>*>(dxr)[p] = a[u];
            else
#pragma unroll
                for (int j = 0; j < W; ++j) dxr[p * W + j] = a[u].v[j];
        }
    }
}

// The backward split over a block of warps (the launcher's bwd_warps_per_row knob; one row
// a block, grid = rows): thread t walks packs t, t + nt, ... in chunks of BWD_HELD packs of
// y and of dy, every load of a chunk issued before any is used. dot: the thread's packs
// in order, then its tail column packs * W + t (fewer than W a row), a butterfly per warp,
// then every thread adds the warps' sums from shared memory in warp order.
// HELD (softmax_warp_split_bwd): the row is one chunk (at most nt x BWD_HELD packs) and
// stays in registers for the output pass, so each element crosses DRAM once
// (softmax_warp_bwd reads the row twice, and at 4096x4096 its 36 warps an SM put more
// bytes between an element's two reads than the L2 holds: 57% of copy bandwidth on an
// H200). Not HELD (softmax_warp_split_stream_bwd, a longer row): the row is read again,
// chunk by chunk from its end (what the first pass read last is likeliest in L2). Why a
// block a row there: softmax_warp_bwd's warp a row keeps every row in flight (1024 rows of
// 32768 float columns: 256 MiB of y and dy), so the second read comes from DRAM (56% of
// copy bandwidth on an H200, torch.compile 97%, 2026-11-28); blocks of 16 warps are one
// an SM (99 registers), 132 rows and 33 MiB in flight, and the second read can find the
// row in L2. Timed on an H200 (2026-11-28): 1024x32768 backward 143 us at 8 warps a row
// (the tuned value; torch.compile 101.5), 141 with the L2 policies.
#define BWD_HELD 8

template <typename T, bool HELD>
__device__ __forceinline__ void split_bwd_row(const T* __restrict__ y, const T* __restrict__ dy,
                                              T* __restrict__ dx, long long rows,
                                              long long cols, T* part) {
    constexpr int W = Pack<T>::N;
    const int tid = threadIdx.x;
    const long long nt = blockDim.x;
    const long long row = blockIdx.x;
    if (row >= rows) return;  // the whole block leaves together (grid = rows: none does)
    const T* yr = y + row * cols;
    const T* dyr = dy + row * cols;
    T* dxr = dx + row * cols;
    const bool vector = aligned16(yr) && aligned16(dyr) && aligned16(dxr);
    const long long packs = cols / W;

    Pack<T> a[BWD_HELD], g[BWD_HELD];
    T dot = T(0);
    if (HELD) {
        load_bwd_chunk(yr, dyr, tid, nt, packs, vector, a, g, l2_policy(EVICT_NORMAL));
        add_chunk_dot(dot, tid, nt, packs, a, g);
    } else {
        const unsigned long long keep = l2_policy(EVICT_LAST);  // read again below
        for (long long p0 = tid; p0 < packs; p0 += nt * BWD_HELD) {
            load_bwd_chunk(yr, dyr, p0, nt, packs, vector, a, g, keep);
            add_chunk_dot(dot, p0, nt, packs, a, g);
        }
    }
    const long long c = packs * W + tid;  // this thread's tail column, if the row has one
    if (c < cols) dot += yr[c] * dyr[c];
    dot = block_sum(dot, part);

    if (HELD) {
        store_bwd_chunk(dxr, tid, nt, packs, vector, dot, a, g);
    } else if (packs > tid) {
        const unsigned long long last_use = l2_policy(EVICT_FIRST);
        for (long long k = (packs - 1 - tid) / (nt * BWD_HELD); k >= 0; --k) {
            const long long p0 = tid + k * nt * BWD_HELD;
            load_bwd_chunk(yr, dyr, p0, nt, packs, vector, a, g, last_use);
            store_bwd_chunk(dxr, p0, nt, packs, vector, dot, a, g);
        }
    }
    if (c < cols) dxr[c] = yr[c] * (dyr[c] - dot);
}

template <typename T>
__global__ void __launch_bounds__(MAX_SPLIT_THREADS)
    softmax_warp_split_bwd(const T* __restrict__ y, const T* __restrict__ dy,
                           T* __restrict__ dx, long long rows, long long cols) {
    __shared__ T part[MAX_SPLIT_WARPS];
    split_bwd_row<T, true>(y, dy, dx, rows, cols, part);
}

template <typename T>
__global__ void __launch_bounds__(MAX_SPLIT_THREADS)
    softmax_warp_split_stream_bwd(const T* __restrict__ y, const T* __restrict__ dy,
                                  T* __restrict__ dx, long long rows, long long cols) {
    __shared__ T part[MAX_SPLIT_WARPS];
    split_bwd_row<T, false>(y, dy, dx, rows, cols, part);
}
