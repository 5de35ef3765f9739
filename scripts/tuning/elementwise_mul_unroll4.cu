// Alternative twin of prototypes/elementwise_mul.py for an H100 timing run (swap it in for
// cuda_src/elementwise_mul.cu; same kernel, same signature, same launcher).
//
// mul_bwd is cuda_src's own (already 1.14x torch).
// Candidate against the 3-4% gap to torch (twin 97% of copy, torch 101%): each thread
// loads U = 4 packs of each input (16 bytes each, THREADS packs apart, so each of the U
// loads of a warp is one coalesced 512-byte access) before it adds any, where the
// cuda_src twin has one or two in flight; no __launch_bounds__ register cap (4 x 2 packs
// need ~40 registers: 6 blocks of 256 per SM, 1536 threads x 128 bytes = 192 KiB in
// flight per SM, about 10x what 3 TB/s x ~700 ns latency needs over 132 SMs). The grid
// may be the launcher's (8 blocks per SM, grid-stride) or one sized to the data
// (cdiv(packs, 256 * U) blocks, as torch does): the loop covers both. Values are
// elementwise, so check (numba vs twin) agrees whatever thread computes an element.
#define THREADS 256
#define U 4

template <typename T>
struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

__device__ inline bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

template <typename T>
__global__ void __launch_bounds__(THREADS) mul_fwd(const T* __restrict__ a,
                                                      const T* __restrict__ b,
                                                      T* __restrict__ out, long long n) {
    constexpr int W = Pack<T>::N;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long packs = n / W;
    if (aligned16(a) && aligned16(b) && aligned16(out)) {
        const Pack<T>* av = reinterpret_cast<const Pack<T>*>(a);
        const Pack<T>* bv = reinterpret_cast<const Pack<T>*>(b);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(out);
        const long long step = (long long)gridDim.x * THREADS * U;
        for (long long base = (long long)blockIdx.x * THREADS * U + threadIdx.x; base < packs;
             base += step) {
            Pack<T> x[U], y[U];
#pragma unroll
            for (int k = 0; k < U; ++k)
                if (base + k * THREADS < packs) {
                    x[k] = av[base + k * THREADS];
                    y[k] = bv[base + k * THREADS];
                }
#pragma unroll
            for (int k = 0; k < U; ++k)
                if (base + k * THREADS < packs) {
                    Pack<T> r;
#pragma unroll
                    for (int j = 0; j < W; ++j) r.v[j] = x[k].v[j] * y[k].v[j];
                    ov[base + k * THREADS] = r;
                }
        }
    } else {
        const long long stride = (long long)gridDim.x * blockDim.x;
#pragma unroll 1
        for (long long p = tid; p < packs; p += stride)
            for (int j = 0; j < W; ++j) out[p * W + j] = a[p * W + j] * b[p * W + j];
    }
    const long long i = packs * W + tid;  // the tail: fewer than W elements, block 0
    if (i < n) out[i] = a[i] * b[i];
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
