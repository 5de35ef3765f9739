// Alternative to cuda_src/sigmoid.cu for a timing run (scripts/bench_alternatives.sh
// scripts/tuning/sigmoid_hint.cu): the repository's twin with cache-streaming hints on
// its 16-byte packs (load_stream / store_stream below), nothing else changed. Why it
// could beat 0.94x torch on an H100: the kernel is at 94-95% of copy bandwidth with one
// 16-byte load per thread per iteration and 2048 threads an SM (32 KiB in flight an SM,
// enough by Little's law), so what is left is DRAM efficiency, not occupancy: the 256-byte
// L2 prefetch halves the DRAM requests per byte, and evict-first stores keep the output
// from competing with the prefetched input in L2. ptxas (sm_90, nvcc 13.0), float: fwd and
// bwd 32 registers, no spills (the repository's: 32 with 12 and 20 bytes of spill stores).
// Twin of prototypes/sigmoid.py: exp only of non-positive numbers, so +-100000 is safe.
//
// What makes it fast (a memory-bound op: one read and one write per element):
// - 16-byte loads and stores (float4 / double2 through Pack<T>) when both pointers are
//   16-byte aligned, which torch's allocations are; otherwise the same elements through
//   scalar accesses, so the element-to-thread mapping never depends on alignment;
// - a grid-stride loop over a grid the launcher sizes to the SM count (a few full waves
//   of resident blocks instead of one thread per element and a tail of half-empty blocks);
// - float math in float (exp of a float is expf): no double on the float path;
// - __launch_bounds__(256, 8): at most 32 registers, so the 8 blocks of 256 threads per SM
//   that the launcher's grid assumes are all resident (one wave, no straggling blocks).
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

// One exp and one division, no branch: 1 / (1 + z) for v >= 0, z / (1 + z) below, with
// z = exp(-|v|) <= 1. (A branch with an exp on each side made a warp of mixed signs
// run both sides: 92% of copy bandwidth instead of the 97% of this form on an H100.)
template <typename T>
__device__ T stable_sigmoid(T v) {
    const T z = exp(-fabs(v));
    return (v >= T(0) ? T(1) : z) / (T(1) + z);
}

template <typename T>
__global__ void __launch_bounds__(256, 8) sigmoid_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    constexpr int W = Pack<T>::N;
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long packs = n / W;
    if (aligned16(x) && aligned16(out)) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(x);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(out);
#pragma unroll 2
        for (long long p = start; p < packs; p += stride) {
            Pack<T> v = load_stream(xv + p);
#pragma unroll
            for (int j = 0; j < W; ++j) v.v[j] = stable_sigmoid(v.v[j]);
            store_stream(ov + p, v);
        }
    } else {  // the same packs, element by element
#pragma unroll 1
        for (long long p = start; p < packs; p += stride)
            for (int j = 0; j < W; ++j) out[p * W + j] = stable_sigmoid(x[p * W + j]);
    }
#pragma unroll 1
    for (long long i = packs * W + start; i < n; i += stride) out[i] = stable_sigmoid(x[i]);
}

template <typename T>
__global__ void __launch_bounds__(256, 8) sigmoid_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                            long long n) {
    constexpr int W = Pack<T>::N;
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long packs = n / W;
    if (aligned16(y) && aligned16(dy) && aligned16(dx)) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(y);
        const Pack<T>* dyv = reinterpret_cast<const Pack<T>*>(dy);
        Pack<T>* dxv = reinterpret_cast<Pack<T>*>(dx);
#pragma unroll 4  // what nvcc chose for the plain loads; the asm ones stop it unrolling
        for (long long p = start; p < packs; p += stride) {
            const Pack<T> s = load_stream(yv + p), g = load_stream(dyv + p);
            Pack<T> d;
#pragma unroll
            for (int j = 0; j < W; ++j) d.v[j] = g.v[j] * s.v[j] * (T(1) - s.v[j]);
            store_stream(dxv + p, d);
        }
    } else {  // the same packs, element by element
#pragma unroll 1
        for (long long p = start; p < packs; p += stride)
            for (int j = 0; j < W; ++j) {
                const long long i = p * W + j;
                dx[i] = dy[i] * y[i] * (T(1) - y[i]);
            }
    }
#pragma unroll 1
    for (long long i = packs * W + start; i < n; i += stride) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
}
