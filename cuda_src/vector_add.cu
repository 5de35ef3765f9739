// Twin of prototypes/vector_add.py. The pattern of every elementwise twin here
// (cuda_src/sigmoid.cu says why): 16-byte packs in a grid-stride loop over the launcher's
// full grid (one pack a thread: the loop runs once), scalar accesses for the same
// elements when a pointer is not 16-byte aligned, then a scalar tail of
// n % (16 / sizeof(T)) elements.

// __launch_bounds__(256, 8): at most 32 registers, so 8 blocks of 256 threads per SM
// are resident at once.

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
#pragma unroll 1
    for (long long i = packs * W + start; i < n; i += stride) out[i] = a[i] + b[i];
}
