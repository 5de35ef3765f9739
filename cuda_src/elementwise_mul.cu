// Twin of prototypes/elementwise_mul.py: 16-byte packs in a grid-stride loop over the
// launcher's full grid (one pack a thread), scalar
// accesses for the same elements when a pointer is not 16-byte aligned, a scalar tail
// (cuda_src/sigmoid.cu explains the pattern).

// __launch_bounds__(256, 8) on mul_fwd: at most 32 registers, so 8 blocks of 256
// threads per SM are resident at once. Not on mul_bwd (five streams): capped at 32
// registers it fell from 95% to 84% of copy bandwidth on an H100 (docs/bench.md).

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
__global__ void __launch_bounds__(256, 8) mul_fwd(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                        long long n) {
    constexpr int W = Pack<T>::N;
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long packs = n / W;
    if (aligned16(a) && aligned16(b) && aligned16(out)) {
        const Pack<T>* av = reinterpret_cast<const Pack<T>*>(a);
        const Pack<T>* bv = reinterpret_cast<const Pack<T>*>(b);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(out);
        for (long long p = start; p < packs; p += stride) {
            const Pack<T> x = av[p], y = bv[p];
            Pack<T> r;
#pragma unroll
            for (int j = 0; j < W; ++j) r.v[j] = x.v[j] * y.v[j];
            ov[p] = r;
        }
    } else {  // the same packs, element by element
#pragma unroll 1
        for (long long p = start; p < packs; p += stride)
            for (int j = 0; j < W; ++j) out[p * W + j] = a[p * W + j] * b[p * W + j];
    }
#pragma unroll 1
    for (long long i = packs * W + start; i < n; i += stride) out[i] = a[i] * b[i];
}

template <typename T>
__global__ void mul_bwd(const T* __restrict__ a, const T* __restrict__ b,
                        const T* __restrict__ dout, T* __restrict__ da, T* __restrict__ db,
                        long long n) {
    constexpr int W = Pack<T>::N;
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long packs = n / W;
    if (aligned16(a) && aligned16(b) && aligned16(dout) && aligned16(da) && aligned16(db)) {
        const Pack<T>* av = reinterpret_cast<const Pack<T>*>(a);
        const Pack<T>* bv = reinterpret_cast<const Pack<T>*>(b);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dout);
        Pack<T>* dav = reinterpret_cast<Pack<T>*>(da);
        Pack<T>* dbv = reinterpret_cast<Pack<T>*>(db);
        for (long long p = start; p < packs; p += stride) {
            const Pack<T> x = av[p], y = bv[p], g = gv[p];
            Pack<T> ra, rb;
#pragma unroll
            for (int j = 0; j < W; ++j) {
                ra.v[j] = g.v[j] * y.v[j];
                rb.v[j] = g.v[j] * x.v[j];
            }
            dav[p] = ra;
            dbv[p] = rb;
        }
    } else {  // the same packs, element by element
#pragma unroll 1
        for (long long p = start; p < packs; p += stride)
            for (int j = 0; j < W; ++j) {
                const long long i = p * W + j;
                const T g = dout[i];
                da[i] = g * b[i];
                db[i] = g * a[i];
            }
    }
#pragma unroll 1
    for (long long i = packs * W + start; i < n; i += stride) {
        const T g = dout[i];
        da[i] = g * b[i];
        db[i] = g * a[i];
    }
}
