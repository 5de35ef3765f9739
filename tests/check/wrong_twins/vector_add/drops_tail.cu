// WRONG TWIN vector_add/drops_tail: the scalar tail loop is gone, so the last n % W elements (W = 4 float32 / 2 float64 elements per 16-byte pack), which no whole pack covers, are never written. A diff shows exactly out[W * (n / W) : n] as NaN (the poison), everything before it equal: out[0] for n = 1, out[124:127] (float32) or out[126] (float64) for n = 127, out[128] for n = 129, out[6] of the 7-element gradcheck case.
// Sizes that are a multiple of W pass: n = 128, 1000, the 24 special values and 2^24
// (n = 0 launches nothing). The old one-thread-per-element version of this mistake was
// `floor_grid` (a block returned when blockIdx.x >= n / blockDim.x); under the grid-stride
// layout the grid no longer decides which elements are written, the pack count does.
// Only the tail loop (2 lines) is removed.
// Twin of prototypes/vector_add.py. The pattern of every elementwise twin here
// (cuda_src/sigmoid.cu says why): 16-byte packs in a grid-stride loop sized by the
// launcher to the SM count, scalar accesses for the same elements when a pointer is not
// 16-byte aligned, then a scalar tail of n % (16 / sizeof(T)) elements.

// __launch_bounds__(256, 8): at most 32 registers, so the launcher's 8 blocks of 256
// threads per SM are all resident.

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
__global__ void __launch_bounds__(256, 8) vector_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
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
            for (int j = 0; j < W; ++j) r.v[j] = x.v[j] + y.v[j];
            ov[p] = r;
        }
    } else {  // the same packs, element by element
#pragma unroll 1
        for (long long p = start; p < packs; p += stride)
            for (int j = 0; j < W; ++j) out[p * W + j] = a[p * W + j] + b[p * W + j];
    }
    // BUG: the scalar tail loop (elements packs * W .. n - 1) is gone
}
