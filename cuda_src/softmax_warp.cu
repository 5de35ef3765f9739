// Twin of prototypes/softmax_warp.py: one warp per row (ROWS_PER_BLOCK rows per block), no
// shared memory, no barrier. Online softmax (running max and sum in one pass over the row)
// in T (float accumulation for float, as torch.softmax), in the prototype's order: lane l
// takes packs l, l + 32, ... then tail columns left to right, then an xor butterfly 16, 8,
// 4, 2, 1 over (max, sum) pairs.
//
// Speed: 16-byte loads and stores (Pack<T>) when the row is 16-byte aligned, scalar
// accesses for the same columns otherwise; the loops are unrolled 4 deep so each lane has
// several loads in flight; the second read of the row hits L1/L2.
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

// The running (max, sum of exp(x - max)) after one more column v.
template <typename T>
__device__ inline void online_update(T& m, T& s, T v) {
    if (v > m) {  // a new maximum rescales the sum; exp(v - v) is 1, or NaN for v = +inf
        s = s * exp(m - v) + exp(v - v);
        m = v;
    } else if (v != negative_infinity<T>()) {  // -inf adds nothing; NaN propagates
        s = s + exp(v - m);
    }
}

// Two (max, sum) pairs as one; the same bits whichever pair comes first.
template <typename T>
__device__ inline void merge(T& m, T& s, T m2, T s2) {
    const T big = m2 > m ? m2 : m;
    if (big == negative_infinity<T>()) {  // both empty so far
        s = s + s2;
    } else {
        s = s * exp(m - big) + s2 * exp(m2 - big);
    }
    m = big;
}

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
#pragma unroll 4
        for (long long p = lane; p < packs; p += WARP) {
            const Pack<T> v = xv[p];
#pragma unroll
            for (int j = 0; j < W; ++j) online_update(m, s, v.v[j]);
        }
    } else {
        for (long long p = lane; p < packs; p += WARP)
            for (int j = 0; j < W; ++j) online_update(m, s, xr[p * W + j]);
    }
    for (long long c = packs * W + lane; c < cols; c += WARP) online_update(m, s, xr[c]);

#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) {
        const T m2 = __shfl_xor_sync(FULL_MASK, m, offset);
        const T s2 = __shfl_xor_sync(FULL_MASK, s, offset);
        merge(m, s, m2, s2);
    }

    if (vector) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(outr);
#pragma unroll 4
        for (long long p = lane; p < packs; p += WARP) {
            Pack<T> v = xv[p];
#pragma unroll
            for (int j = 0; j < W; ++j) v.v[j] = exp(v.v[j] - m) / s;
            ov[p] = v;
        }
    } else {
        for (long long p = lane; p < packs; p += WARP)
            for (int j = 0; j < W; ++j) outr[p * W + j] = exp(xr[p * W + j] - m) / s;
    }
    for (long long c = packs * W + lane; c < cols; c += WARP) outr[c] = exp(xr[c] - m) / s;
}

template <typename T>
__global__ void softmax_warp_bwd(const T* __restrict__ y, const T* __restrict__ dy,
                                 T* __restrict__ dx, long long rows, long long cols) {
    constexpr int W = Pack<T>::N;
    const int lane = threadIdx.x % WARP;
    const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    if (row >= rows) return;
    const T* yr = y + row * cols;
    const T* dyr = dy + row * cols;
    T* dxr = dx + row * cols;
    const long long packs = cols / W;
    const bool vector = aligned16(yr) && aligned16(dyr) && aligned16(dxr);

    T dot = T(0);
    if (vector) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(yr);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dyr);
#pragma unroll 4
        for (long long p = lane; p < packs; p += WARP) {
            const Pack<T> a = yv[p], g = gv[p];
#pragma unroll
            for (int j = 0; j < W; ++j) dot += a.v[j] * g.v[j];
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
#pragma unroll 4
        for (long long p = lane; p < packs; p += WARP) {
            const Pack<T> a = yv[p], g = gv[p];
            Pack<T> r;
#pragma unroll
            for (int j = 0; j < W; ++j) r.v[j] = a.v[j] * (g.v[j] - dot);
            dv[p] = r;
        }
    } else {
        for (long long p = lane; p < packs; p += WARP)
            for (int j = 0; j < W; ++j) dxr[p * W + j] = yr[p * W + j] * (dyr[p * W + j] - dot);
    }
    for (long long c = packs * W + lane; c < cols; c += WARP) dxr[c] = yr[c] * (dyr[c] - dot);
}
