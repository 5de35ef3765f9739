// Alternative to cuda_src/elementwise_mul.cu for a timing run (scripts/bench_alternatives.sh
// scripts/tuning/elementwise_mul_hint.cu): the repository's twin with cache-streaming
// hints on its 16-byte packs (load_stream / store_stream below), nothing else changed.
// Why it could beat 0.96x torch forward on an H100: at 97% of copy bandwidth with 2048
// threads an SM, what is left is DRAM efficiency: 256-byte L2 prefetch on the input
// streams (fewer, larger DRAM requests), evict-first stores for the outputs. The
// backward (five streams, already 1.14x) gets the same hints; watch it does not regress:
// ptxas gives it 34 registers (the repository's 50) with the same 4-way unroll, so nvcc
// keeps fewer loads of later iterations in flight. ptxas, float fwd: 32, no spills.
// Twin of prototypes/elementwise_mul.py: 16-byte packs in a grid-stride loop, scalar
// accesses for the same elements when a pointer is not 16-byte aligned, a scalar tail
// (cuda_src/sigmoid.cu explains the pattern).

// __launch_bounds__(256, 8) on mul_fwd: at most 32 registers, so the launcher's 8 blocks
// of 256 threads per SM are all resident. Not on mul_bwd (five streams): capped at 32
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

// Streaming hints (the only change from the repository's twin): every byte is touched once,
// so nothing is worth keeping in L1 or L2.
// - loads: ld.global.nc.L1::no_allocate.L2::256B -- the read-only path, no L1 line
//   allocated (the L1 keeps no stale 256 MiB stream, and the SM's L1/smem carve-out stays
//   free), and a hint that L2 fetch the whole 256-byte block from DRAM: the next warps'
//   sectors are then L2 hits, fewer and larger DRAM requests (what torch's clone gets from
//   its access pattern alone);
// - stores: st.global.cs (evict-first): the output's lines leave L2 first, so they do not
//   push out input blocks that the 256-byte prefetch just brought in.
// Same element-to-thread mapping, same arithmetic: bit-identical outputs, the prototype
// unchanged. The CPU twin (PORTKIT_CUDA_CPU) reads and writes plainly.
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
#pragma unroll 4  // what nvcc chose for the plain loads; the asm ones stop it unrolling
        for (long long p = start; p < packs; p += stride) {
            const Pack<T> x = load_stream(av + p), y = load_stream(bv + p);
            Pack<T> r;
#pragma unroll
            for (int j = 0; j < W; ++j) r.v[j] = x.v[j] * y.v[j];
            store_stream(ov + p, r);
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
#pragma unroll 4  // what nvcc chose for the plain loads; the asm ones stop it unrolling
        for (long long p = start; p < packs; p += stride) {
            const Pack<T> x = load_stream(av + p), y = load_stream(bv + p), g = load_stream(gv + p);
            Pack<T> ra, rb;
#pragma unroll
            for (int j = 0; j < W; ++j) {
                ra.v[j] = g.v[j] * y.v[j];
                rb.v[j] = g.v[j] * x.v[j];
            }
            store_stream(dav + p, ra);
            store_stream(dbv + p, rb);
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
