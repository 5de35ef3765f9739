// WRONG TWIN vector_add/writes_nothing: the kernel body is empty (same signature), so no element of out is written. A diff shows every element of every non-empty case as NaN (the poison): n of n differ, first at [0], in every block and thread.
// n = 0 launches nothing and passes. Elements whose right answer is NaN (9 of the 24
// special values: nan + x, inf + -inf) are NaN on both sides, so the special cases show
// 15 of 24 (seen on an H200 with the old one-thread-per-element version). Only the body
// differs from the real twin.
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
    // BUG: nothing here; out is never written
}
