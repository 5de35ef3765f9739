// Twin of prototypes/softmax_warp.py: one warp per row (ROWS_PER_BLOCK rows per block), no
// shared memory, no barrier. Online softmax (running max and sum in one pass over the row,
// the sum rescaled at most once per pack) in T (float accumulation for float, as torch.softmax), in the prototype's order: lane l
// takes packs l, l + 32, ... then tail columns left to right, then xor butterflies 16, 8,
// 4, 2, 1 for the row's max and then for the sum (each lane's moved to that max).
//
// Speed: 16-byte loads and stores (Pack<T>) when the row is 16-byte aligned, scalar
// accesses for the same columns otherwise; each lane issues UNROLL packs' loads before
// using any (a warp per row has few threads per row, so each needs many bytes in flight);
// the second read of the row hits L1/L2; one division per row.
#define WARP 32
#define ROWS_PER_BLOCK 4
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

// Loads are issued UNROLL packs at a time (all of them before any is used), then the
// packs are processed in column order: the same order as a plain loop, so the arithmetic
// matches the prototype's, with UNROLL loads in flight per thread.
#define UNROLL 8

template <typename T>
__global__ void softmax_warp_fwd(const T* __restrict__ x, T* __restrict__ out, long long rows,
                                 long long cols) {
    constexpr int W = Pack<T>::N;
    const int lane = threadIdx.x % WARP;
    const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    if (row >= rows) return;  // a whole warp leaves together
    const T* xr = x + row * cols;
    T* outr = out + row * cols;
    const long long packs = cols / W;
    const bool vector = aligned16(xr) && aligned16(outr);

    T m = negative_infinity<T>();
    T s = T(0);
    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
        for (long long p0 = lane; p0 < packs; p0 += (long long)WARP * UNROLL) {
            Pack<T> v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * WARP < packs) v[u] = xv[p0 + u * WARP];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * WARP < packs) online_update(m, s, v[u].v);
        }
    } else {  // the same packs, element by element
        for (long long p = lane; p < packs; p += WARP) {
            T v[W];
            for (int j = 0; j < W; ++j) v[j] = xr[p * W + j];
            online_update(m, s, v);
        }
    }
    for (long long c = packs * W + lane; c < cols; c += WARP) {
        const T v[1] = {xr[c]};
        online_update(m, s, v);
    }

    const T big = warp_max(m);  // the row's maximum, then the sum, each lane's moved to it
    s = moved(s, m, big);
    m = big;
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(FULL_MASK, s, offset);

    const T inv = T(1) / s;  // one division per row; each column is exp(x - m) * inv
    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(outr);
        for (long long p0 = lane; p0 < packs; p0 += (long long)WARP * UNROLL) {
            Pack<T> v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * WARP < packs) v[u] = xv[p0 + u * WARP];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (p0 + u * WARP < packs) {
#pragma unroll
                    for (int j = 0; j < W; ++j) v[u].v[j] = exp(v[u].v[j] - m) * inv;
                    ov[p0 + u * WARP] = v[u];
                }
            }
        }
    } else {
        for (long long p = lane; p < packs; p += WARP)
            for (int j = 0; j < W; ++j) outr[p * W + j] = exp(xr[p * W + j] - m) * inv;
    }
    for (long long c = packs * W + lane; c < cols; c += WARP) outr[c] = exp(xr[c] - m) * inv;
}

template <typename T>
__global__ void softmax_warp_bwd(const T* __restrict__ y, const T* __restrict__ dy,
                                 T* __restrict__ dx, long long rows, long long cols) {
    const int lane = threadIdx.x % WARP;
    const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    if (row >= rows) return;
    const T* yr = y + row * cols;
    const T* dyr = dy + row * cols;
    T* dxr = dx + row * cols;
    constexpr int W = Pack<T>::N;
    const bool vector = aligned16(yr) && aligned16(dyr) && aligned16(dxr);
    const long long packs = cols / W;

    T dot = T(0);
    if (vector) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(yr);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dyr);
        for (long long p0 = lane; p0 < packs; p0 += (long long)WARP * UNROLL) {
            Pack<T> a[UNROLL], g[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (p0 + u * WARP < packs) {
                    a[u] = yv[p0 + u * WARP];
                    g[u] = gv[p0 + u * WARP];
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (p0 + u * WARP < packs)
#pragma unroll
                    for (int j = 0; j < W; ++j) dot += a[u].v[j] * g[u].v[j];
        }
    } else {
        for (long long p = lane; p < packs; p += WARP)
            for (int j = 0; j < W; ++j) dot += yr[p * W + j] * dyr[p * W + j];
    }
    for (long long c = packs * W + lane; c < cols; c += WARP) dot += yr[c] * dyr[c];

#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(FULL_MASK, dot, offset);

    if (vector) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(yr);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dyr);
        Pack<T>* dv = reinterpret_cast<Pack<T>*>(dxr);
        for (long long p0 = lane; p0 < packs; p0 += (long long)WARP * UNROLL) {
            Pack<T> a[UNROLL], g[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (p0 + u * WARP < packs) {
                    a[u] = yv[p0 + u * WARP];
                    g[u] = gv[p0 + u * WARP];
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
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
