// Alternative twin of prototypes/sigmoid.py for an H100 timing run (swap it in for
// cuda_src/sigmoid.cu; same kernels, same signatures, same launcher).
//
// Candidate against the 3-4% gap to torch (twin 94-95% of copy, torch 100-101%): each thread
// loads U = 4 packs of its input(s) (16 bytes each, THREADS packs apart, so each of the U
// loads of a warp is one coalesced 512-byte access) before it adds any, where the
// cuda_src twin has one or two in flight; no __launch_bounds__ register cap (the 32-register
// cap made the precise division's slow path spill 12 bytes; 4 packs need ~40 registers: 6 blocks of 256 per SM, 1536 threads x 128 bytes = 192 KiB in
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

// One exp and one division, no branch (cuda_src/sigmoid.cu says why).
template <typename T>
__device__ T stable_sigmoid(T v) {
    const T z = exp(-fabs(v));
    return (v >= T(0) ? T(1) : z) / (T(1) + z);
}

template <typename T>
__global__ void __launch_bounds__(THREADS) sigmoid_fwd(const T* __restrict__ x, T* __restrict__ out,
                                                       long long n) {
    constexpr int W = Pack<T>::N;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long packs = n / W;
    if (aligned16(x) && aligned16(out)) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(x);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(out);
        const long long step = (long long)gridDim.x * THREADS * U;
        for (long long base = (long long)blockIdx.x * THREADS * U + threadIdx.x; base < packs;
             base += step) {
            Pack<T> v[U];
#pragma unroll
            for (int k = 0; k < U; ++k)
                if (base + k * THREADS < packs) v[k] = xv[base + k * THREADS];
#pragma unroll
            for (int k = 0; k < U; ++k)
                if (base + k * THREADS < packs) {
#pragma unroll
                    for (int j = 0; j < W; ++j) v[k].v[j] = stable_sigmoid(v[k].v[j]);
                    ov[base + k * THREADS] = v[k];
                }
        }
    } else {
        const long long stride = (long long)gridDim.x * blockDim.x;
#pragma unroll 1
        for (long long p = tid; p < packs; p += stride)
            for (int j = 0; j < W; ++j) out[p * W + j] = stable_sigmoid(x[p * W + j]);
    }
    const long long i = packs * W + tid;  // the tail: fewer than W elements, block 0
    if (i < n) out[i] = stable_sigmoid(x[i]);
}

template <typename T>
__global__ void __launch_bounds__(THREADS) sigmoid_bwd(const T* __restrict__ y, const T* __restrict__ dy,
                                                       T* __restrict__ dx, long long n) {
    constexpr int W = Pack<T>::N;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long packs = n / W;
    if (aligned16(y) && aligned16(dy) && aligned16(dx)) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(y);
        const Pack<T>* gv = reinterpret_cast<const Pack<T>*>(dy);
        Pack<T>* dv = reinterpret_cast<Pack<T>*>(dx);
        const long long step = (long long)gridDim.x * THREADS * U;
        for (long long base = (long long)blockIdx.x * THREADS * U + threadIdx.x; base < packs;
             base += step) {
            Pack<T> s[U], g[U];
#pragma unroll
            for (int k = 0; k < U; ++k)
                if (base + k * THREADS < packs) {
                    s[k] = yv[base + k * THREADS];
                    g[k] = gv[base + k * THREADS];
                }
#pragma unroll
            for (int k = 0; k < U; ++k)
                if (base + k * THREADS < packs) {
                    Pack<T> d;
#pragma unroll
                    for (int j = 0; j < W; ++j) d.v[j] = g[k].v[j] * s[k].v[j] * (T(1) - s[k].v[j]);
                    dv[base + k * THREADS] = d;
                }
        }
    } else {
        const long long stride = (long long)gridDim.x * blockDim.x;
#pragma unroll 1
        for (long long p = tid; p < packs; p += stride)
            for (int j = 0; j < W; ++j) {
                const long long i = p * W + j;
                dx[i] = dy[i] * y[i] * (T(1) - y[i]);
            }
    }
    const long long i = packs * W + tid;
    if (i < n) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
}
