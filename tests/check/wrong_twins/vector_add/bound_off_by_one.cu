// WRONG TWIN vector_add/bound_off_by_one: the scalar tail loop runs while `i <= n` instead of `i < n`, so the thread whose tail index reaches n (thread n % W of block 0, W = 4 float32 / 2 float64 elements per 16-byte pack) reads a[n], b[n] past the inputs and writes out[n], one element past the output, in every non-empty case (n a multiple of W included: thread 0 then). A diff of the n elements shows NOTHING (all equal): the stray store lands outside the tensor.
// Catchers: portkit check's guard zones (the launch fails with a GuardViolation naming
// `out`, 1 element after its end) and compute-sanitizer memcheck (thread and line); on a
// CPU, twin-cpu's AddressSanitizer (the read of a[n] first). Without guards the store
// usually lands in the caching allocator's padding and nothing shows (on an H200 all 48
// checks of the old one-thread-per-element version passed).
// Only `<` -> `<=` in the tail loop differs from the real twin.
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
#pragma unroll 1
    for (long long i = packs * W + start; i <= n; i += stride) out[i] = a[i] + b[i];  // BUG
}
