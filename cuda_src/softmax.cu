// Twin of prototypes/softmax.py, arithmetic in T (float accumulation for float, as
// torch.softmax), warp-shuffle reductions. Three forward paths, chosen by the row's length:
//
// - softmax_rows_fwd, rows of at most 4 KiB (1024 float32 / 512 float64 columns): `group`
//   lanes a row, the row held in registers (its comment);
// - softmax_fwd, rows of at most NX x HELD packs (NX = blockDim.x, 128 by default: 4096
//   float32 / 2048 float64 columns): a block of NX threads a row, the row held in registers between its one
//   read and its one write (held_row_fwd): the maximum first (thread, xor butterfly 16..1,
//   warps left to right), then one exp a column and the sum (same order, no online
//   rescaling), one division, the store. It pays for one DRAM read and one exp an element
//   (what torch's own kernel does), all 8 x 16 B loads a thread issued before any is used
//   (16 KiB a block in flight), and two barriers a row;
// - softmax_fwd, longer rows: online softmax (running max and sum in one pass, the sum
//   rescaled at most once per pack), each thread's sum moved to the warp's maximum, the
//   warps' pairs merged left to right, then a second read of the row for the output (from
//   L1/L2: the row crosses DRAM once in and once out), UNROLL packs' loads in flight,
//   its chunks of NX x UNROLL packs walked from the row's end (what was read last first).
// In every path a thread takes packs t, t + NX, ... (or g, g + group, ...) then its
// tail columns packs * W + t, ..., left to right: the prototype's order, stage by stage.
//
// Held rows' one read and one write carry cache-streaming hints (load_stream /
// store_stream): nothing of a held row is read again. A row read twice (the streamed
// forward, the backward past one chunk) asks L2 to keep it on its first read and lets it
// go on its second (l2_policy): on an H200, 1024x32768 forward 106.6 -> 101.3 us and
// backward 126 -> 117.6, 8192x8192 backward 252 -> 232 (2026-11-28, one A/B run).
//
// Speed: 16-byte loads and stores (Pack<T>) when the row is 16-byte aligned (cols a
// multiple of 4 float / 2 double on torch's aligned allocations), scalar accesses for the
// same columns otherwise; one division per row (out = exp(x - m) * (1 / s)).
// Forward, twin / torch on an H100 (2026-11-24, medians of 20): 4096x4096 1.27,
// 16384x1024 1.01, 1024x32768 1.14, 32768x256 1.08, 8192x8192 1.09 (the online pass for
// every row over 1024 columns gave 0.97 / 1.01 / 1.14 / 0.99 / 1.06; the held rows
// without the hints 1.25 / 1.00 / 0.98 / 0.99 / 1.11).
// ptxas (sm_90, nvcc 13.0), float32 / float64 registers, no spills: softmax_fwd 60 / 70
// (8 / 7 blocks of 128 an SM), softmax_rows_fwd 80 / 92, softmax_bwd 52 / 62.
// Threads a block: the launcher's knobs (threads, rows_threads), at most MAX_THREADS; the
// kernels read blockDim.x (NX). 256 keeps softmax_rows_fwd's 255 registers a thread.
#define MAX_THREADS 256
#define WARP 32
#define MAX_WARPS (MAX_THREADS / WARP)
#define NX ((int)blockDim.x)
#define WARPS (NX / WARP)
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

// Streaming hints for the held rows' one read and one write (the streamed rows' loads
// carry L2 policies instead, l2_policy below): nothing of a held row is read again.
// - loads: ld.global.nc.L1::no_allocate.L2::256B -- the read-only path, no L1 line
//   allocated (the L1 keeps no stale 256 MiB stream, and the SM's L1/smem carve-out stays
//   free), and a hint that L2 fetch the whole 256-byte block from DRAM: the next warps'
//   sectors are then L2 hits, fewer and larger DRAM requests (what torch's clone gets from
//   its access pattern alone);
// - stores: st.global.cs (evict-first): the output's lines leave L2 first, so they do not
//   push out input blocks that the 256-byte prefetch just brought in.
// The CPU twin (PORTKIT_CUDA_CPU) reads and writes plainly.
template <typename T>
__device__ __forceinline__ Pack<T> load_stream(const Pack<T>* p) {
#ifndef PORTKIT_CUDA_CPU
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    Pack<T> v;
    memcpy(&v, &r, sizeof(v));
    return v;
#else
    return *p;
#endif
}

template <typename T>
__device__ __forceinline__ void store_stream(Pack<T>* p, const Pack<T>& v) {
#ifndef PORTKIT_CUDA_CPU
    uint4 r;
    memcpy(&r, &v, sizeof(r));
    __stcs(reinterpret_cast<uint4*>(p), r);
#else
    *p = v;
#endif
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

// exp(v - m), 0 for v == -inf: a row of -inf sums to 0 (its output NaN, as torch's), and
// -inf - -inf would be NaN.
template <typename T>
__device__ inline T exp_from(T v, T m) {
    return v != negative_infinity<T>() ? exp(v - m) : T(0);
}

// Short rows (at most WARP * LANE_PACKS packs, 4 KiB: 1024 float / 512 double columns),
// the launcher's choice for them. A block of 128 for one 256-column row left half its
// threads idle and a wave of 16 such blocks an SM kept only 16 KiB in flight (0.53x torch
// at 32768x256). Here `group` lanes serve a row (the fewest, a power of two <= WARP, that
// hold its packs LANE_PACKS a lane), NX / group rows a block, and the row stays in
// registers between its one read and its one write: no second read, one exp per column,
// no online rescaling (the maximum is known before any exp), xor butterflies inside the
// group (offsets group / 2 .. 1), no shared memory, no barrier. Every lane issues all its
// packs' loads (up to 128 bytes) before using any. Lane g holds packs g, g + group, ...;
// its tail columns packs * W + g, ... (fewer than W a row) are read in both passes.
// 80 registers (float32; 96 double), no spills: 6 blocks of 128 an SM, 96 KiB of loads in
// flight an SM; capping them at 64 (8 blocks) spills the held row.
// LP: the packs a lane holds at most, the register array's static size (a kernel's
// registers are its largest path's): LANE_PACKS in softmax_rows_fwd, 2 in softmax_rows2_fwd.
#define LANE_PACKS 8

template <typename T, int LP>
__device__ inline void rows_held(const T* __restrict__ x, T* __restrict__ out, long long rows,
                                 long long cols, int group) {
    constexpr int W = Pack<T>::N;
    const int tid = threadIdx.x;
    const int g = tid % group;
    const long long row = (long long)blockIdx.x * (NX / group) + tid / group;
    long long packs = cols / W;
    if (row >= rows) {  // past the last row: no columns, but the lanes still shuffle
        packs = 0;
        cols = 0;
    }
    const T* xr = x + row * cols;
    T* outr = out + row * cols;
    const bool vector = aligned16(xr) && aligned16(outr);

    Pack<T> v[LP];
    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
#pragma unroll
        for (int u = 0; u < LP; ++u)
            if (g + u * group < packs) v[u] = load_stream(xv + g + u * group);
    } else {  // the same packs, element by element
#pragma unroll
        for (int u = 0; u < LP; ++u)
            if (g + u * group < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) v[u].v[j] = xr[(g + u * group) * (long long)W + j];
    }

    T m = negative_infinity<T>();  // the row's maximum: held columns, tail, butterfly
#pragma unroll
    for (int u = 0; u < LP; ++u)
        if (g + u * group < packs)
#pragma unroll
            for (int j = 0; j < W; ++j) m = v[u].v[j] > m ? v[u].v[j] : m;
    for (long long c = packs * W + g; c < cols; c += group) m = xr[c] > m ? xr[c] : m;
    for (int offset = group / 2; offset > 0; offset /= 2) {
        const T other = __shfl_xor_sync(FULL_MASK, m, offset);
        m = other > m ? other : m;
    }

    T s = T(0);  // the sum, in the same order; each held column becomes its exp
#pragma unroll
    for (int u = 0; u < LP; ++u) {
        if (g + u * group < packs) {
#pragma unroll
            for (int j = 0; j < W; ++j) {
                v[u].v[j] = exp_from(v[u].v[j], m);
                s += v[u].v[j];
            }
        }
    }
    for (long long c = packs * W + g; c < cols; c += group) s += exp_from(xr[c], m);
    for (int offset = group / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(FULL_MASK, s, offset);

    const T inv = T(1) / s;
#pragma unroll
    for (int u = 0; u < LP; ++u) {
        if (g + u * group < packs) {
#pragma unroll
            for (int j = 0; j < W; ++j) v[u].v[j] = v[u].v[j] * inv;
            if (vector)
                store_stream(reinterpret_cast<Pack<T>*>(outr) + g + u * group, v[u]);
            else
#pragma unroll
                for (int j = 0; j < W; ++j) outr[(g + u * group) * (long long)W + j] = v[u].v[j];
        }
    }
    for (long long c = packs * W + g; c < cols; c += group) outr[c] = exp_from(xr[c], m) * inv;
}

template <typename T>
__global__ void __launch_bounds__(MAX_THREADS) softmax_rows_fwd(const T* __restrict__ x,
                                                            T* __restrict__ out, long long rows,
                                                            long long cols, int group) {
    rows_held<T, LANE_PACKS>(x, out, rows, cols, group);
}

// The rows_lane_packs knob's 2 (rows of at most 64 packs: 256 float / 128 double columns):
// 2 packs a lane, so 32 lanes a 256-column row, and few registers. Why: at 32768x256
// float the 8-pack kernel (80 registers: 6 blocks of 128 an SM) ran at 91% of copy
// bandwidth on an H200 (torch 98%), softmax_warp's held2 kernel, this layout, at 98%.
template <typename T>
__global__ void __launch_bounds__(MAX_THREADS) softmax_rows2_fwd(const T* __restrict__ x,
                                                             T* __restrict__ out, long long rows,
                                                             long long cols, int group) {
    rows_held<T, 2>(x, out, rows, cols, group);
}

// Loads are issued UNROLL packs at a time (all of them before any is used), then the
// packs are processed in column order: the same order as a plain loop, so the arithmetic
// matches the prototype's, with UNROLL loads in flight per thread.
#define UNROLL 4

// Rows of at most NX x HELD packs (4096 float / 2048 double columns at 128 threads) stay
// in registers.
#define HELD 8

// softmax_fwd for a row held in registers: max, then exps and sum, then the store.
template <typename T>
__device__ inline void held_row_fwd(const T* xr, T* outr, long long cols, T* part_m, T* part_s) {
    constexpr int W = Pack<T>::N;
    const int tid = threadIdx.x;
    const int lane = tid % WARP;
    const int warp = tid / WARP;
    const long long packs = cols / W;
    const bool vector = aligned16(xr) && aligned16(outr);

    Pack<T> v[HELD];
    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
#pragma unroll
        for (int u = 0; u < HELD; ++u)
            if (tid + u * NX < packs) v[u] = load_stream(xv + tid + u * NX);
    } else {  // the same packs, element by element
#pragma unroll
        for (int u = 0; u < HELD; ++u)
            if (tid + u * NX < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) v[u].v[j] = xr[(tid + u * NX) * (long long)W + j];
    }

    T m = negative_infinity<T>();
#pragma unroll
    for (int u = 0; u < HELD; ++u)
        if (tid + u * NX < packs)
#pragma unroll
            for (int j = 0; j < W; ++j) m = v[u].v[j] > m ? v[u].v[j] : m;
    for (long long c = packs * W + tid; c < cols; c += NX) m = xr[c] > m ? xr[c] : m;
    m = warp_max(m);
    if (lane == 0) part_m[warp] = m;
    __syncthreads();
    m = part_m[0];
#pragma unroll
    for (int w = 1; w < WARPS; ++w) m = part_m[w] > m ? part_m[w] : m;

    T s = T(0);  // each held column becomes its exp
#pragma unroll
    for (int u = 0; u < HELD; ++u)
        if (tid + u * NX < packs)
#pragma unroll
            for (int j = 0; j < W; ++j) {
                v[u].v[j] = exp_from(v[u].v[j], m);
                s += v[u].v[j];
            }
    for (long long c = packs * W + tid; c < cols; c += NX) s += exp_from(xr[c], m);
    s = warp_sum(s);
    if (lane == 0) part_s[warp] = s;
    __syncthreads();
    s = part_s[0];
#pragma unroll
    for (int w = 1; w < WARPS; ++w) s += part_s[w];

    const T inv = T(1) / s;  // a row of -inf: s = 0, 0 * inf = NaN, as torch
#pragma unroll
    for (int u = 0; u < HELD; ++u) {
        if (tid + u * NX < packs) {
#pragma unroll
            for (int j = 0; j < W; ++j) v[u].v[j] = v[u].v[j] * inv;
            if (vector)
                store_stream(reinterpret_cast<Pack<T>*>(outr) + tid + u * NX, v[u]);
            else
#pragma unroll
                for (int j = 0; j < W; ++j) outr[(tid + u * NX) * (long long)W + j] = v[u].v[j];
        }
    }
    for (long long c = packs * W + tid; c < cols; c += NX) outr[c] = exp_from(xr[c], m) * inv;
}

template <typename T>
__global__ void softmax_fwd(const T* __restrict__ x, T* __restrict__ out, long long cols) {
    __shared__ T part_m[MAX_WARPS];
    __shared__ T part_s[MAX_WARPS];
    constexpr int W = Pack<T>::N;
    const int tid = threadIdx.x;
    const int lane = tid % WARP;
    const int warp = tid / WARP;
    const T* xr = x + (long long)blockIdx.x * cols;
    T* outr = out + (long long)blockIdx.x * cols;
    const long long packs = cols / W;
    if (packs <= (long long)NX * HELD) {  // the whole row in registers (uniform per block)
        held_row_fwd(xr, outr, cols, part_m, part_s);
        return;
    }
    const bool vector = aligned16(xr) && aligned16(outr);

    T m = negative_infinity<T>();
    T s = T(0);
    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
        const unsigned long long keep = l2_policy(EVICT_LAST);  // read again below
        for (long long p0 = tid; p0 < packs; p0 += (long long)NX * UNROLL) {
            Pack<T> v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * NX < packs) v[u] = load_pack(xv + p0 + u * NX, keep);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * NX < packs) online_update(m, s, v[u].v);
        }
    } else {  // the same packs, element by element
        for (long long p = tid; p < packs; p += NX) {
            T v[W];
            for (int j = 0; j < W; ++j) v[j] = xr[p * W + j];
            online_update(m, s, v);
        }
    }
    for (long long c = packs * W + tid; c < cols; c += NX) {
        const T v[1] = {xr[c]};
        online_update(m, s, v);
    }

    const T big = warp_max(m);  // the warp's maximum, then its sum moved to it
    s = warp_sum(moved(s, m, big));
    if (lane == 0) {
        part_m[warp] = big;
        part_s[warp] = s;
    }
    __syncthreads();
    m = part_m[0];
#pragma unroll
    for (int w = 1; w < WARPS; ++w) m = part_m[w] > m ? part_m[w] : m;
    s = moved(part_s[0], part_m[0], m);
#pragma unroll
    for (int w = 1; w < WARPS; ++w) s += moved(part_s[w], part_m[w], m);

    const T inv = T(1) / s;  // one division per row; each column is exp(x - m) * inv
    if (vector) {
        // The second read walks the row's chunks from its end: the first pass read the end
        // last, so that part is the likeliest still in L2 (softmax_warp's split kernel
        // walks its rows the same way).
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(outr);
        const unsigned long long last_use = l2_policy(EVICT_FIRST);
        const long long chunk = (long long)NX * UNROLL;
        for (long long first = (packs - 1) / chunk * chunk; first >= 0; first -= chunk) {
            const long long p0 = first + tid;
            Pack<T> v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * NX < packs) v[u] = load_pack(xv + p0 + u * NX, last_use);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (p0 + u * NX < packs) {
#pragma unroll
                    for (int j = 0; j < W; ++j) v[u].v[j] = exp(v[u].v[j] - m) * inv;
                    store_stream(ov + p0 + u * NX, v[u]);
                }
            }
        }
    } else {
        for (long long p = tid; p < packs; p += NX)
            for (int j = 0; j < W; ++j) outr[p * W + j] = exp(xr[p * W + j] - m) * inv;
    }
    for (long long c = packs * W + tid; c < cols; c += NX) outr[c] = exp(xr[c] - m) * inv;
}

// One row of the backward (blockIdx.x's), dx = y * (dy - sum(y * dy)); part: a float per
// warp of the block.
template <typename T>
__device__ __forceinline__ void bwd_row(const T* __restrict__ y, const T* __restrict__ dy,
                                        T* __restrict__ dx, long long cols, T* part) {
    const int tid = threadIdx.x;
    const int lane = tid % WARP;
    const int warp = tid / WARP;
    const long long base = (long long)blockIdx.x * cols;
    const T* yr = y + base;
    const T* dyr = dy + base;
    T* dxr = dx + base;
    constexpr int W = Pack<T>::N;
    const bool vector = aligned16(yr) && aligned16(dyr) && aligned16(dxr);
    const long long packs = cols / W;

    // A row of at most NX x UNROLL packs is one chunk: its packs stay in a and g from the
    // dot pass to the output pass, so y and dy cross DRAM once (the second read of a
    // 4096-column row came partly from DRAM: 89% of copy bandwidth on an H200, torch.compile
    // 95%, 2026-11-28). Same loads, same arithmetic in the same order.
    const bool held = vector && packs <= (long long)NX * UNROLL;
    Pack<T> a[UNROLL], g[UNROLL];
    T dot = T(0);
    if (vector) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(yr);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dyr);
        const unsigned long long first = l2_policy(held ? EVICT_NORMAL : EVICT_LAST);
        for (long long p0 = tid; p0 < packs; p0 += (long long)NX * UNROLL) {
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (p0 + u * NX < packs) {
                    a[u] = load_pack(yv + p0 + u * NX, first);
                    g[u] = load_pack(gv + p0 + u * NX, first);
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * NX < packs)
#pragma unroll
                    for (int j = 0; j < W; ++j) dot += a[u].v[j] * g[u].v[j];
        }
    } else {
        for (long long p = tid; p < packs; p += NX)
            for (int j = 0; j < W; ++j) dot += yr[p * W + j] * dyr[p * W + j];
    }
    for (long long c = packs * W + tid; c < cols; c += NX) dot += yr[c] * dyr[c];

    dot = warp_sum(dot);
    if (lane == 0) part[warp] = dot;
    __syncthreads();
    dot = part[0];
#pragma unroll
    for (int w = 1; w < WARPS; ++w) dot += part[w];

    if (vector) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(yr);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dyr);
        Pack<T>* dv = reinterpret_cast<Pack<T>*>(dxr);
        const unsigned long long last_use = l2_policy(EVICT_FIRST);
        for (long long p0 = tid; p0 < packs; p0 += (long long)NX * UNROLL) {
            if (!held) {
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    if (p0 + u * NX < packs) {
                        a[u] = load_pack(yv + p0 + u * NX, last_use);
                        g[u] = load_pack(gv + p0 + u * NX, last_use);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (p0 + u * NX < packs) {
#pragma unroll
                    for (int j = 0; j < W; ++j) a[u].v[j] = a[u].v[j] * (g[u].v[j] - dot);
                    dv[p0 + u * NX] = a[u];
                }
            }
        }
    } else {
        for (long long p = tid; p < packs; p += NX)
            for (int j = 0; j < W; ++j) dxr[p * W + j] = yr[p * W + j] * (dyr[p * W + j] - dot);
    }
    for (long long c = packs * W + tid; c < cols; c += NX) dxr[c] = yr[c] * (dyr[c] - dot);
}

template <typename T>
__global__ void softmax_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                            long long cols) {
    __shared__ T part[MAX_WARPS];
    bwd_row(y, dy, dx, cols, part);
}

// The bwd_threads knob's 1024: one block of 1024 a row, one block an SM (60 registers), so
// 132 rows are in flight on an H200, not every row. Why: 1024 rows of 32768 float columns
// in softmax_bwd's blocks of 256 were all resident at once (256 MiB of y and dy, five
// times the L2), so each row's second read came from DRAM: 60% of copy bandwidth on an
// H200 against torch.compile's 97% (2026-11-28); 132 such rows are 33 MiB. Timed there
// (2026-11-28): 1024x32768 backward 125 us (tuned to this kernel), 117.6 us with the L2
// policies (torch.compile 101.5); at 8192x8192 a row fits one chunk of 1024 threads, held,
// and the tables pick it there too.
#define WIDE_THREADS 1024

template <typename T>
__global__ void __launch_bounds__(WIDE_THREADS)
    softmax_bwd_wide(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                     long long cols) {
    __shared__ T part[WIDE_THREADS / WARP];
    bwd_row(y, dy, dx, cols, part);
}
