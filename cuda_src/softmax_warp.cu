// Twin of prototypes/softmax_warp.py: one block of 128 threads (4 warps) per row, double
// accumulation, warp-shuffle reductions. Same order as the prototype, stage by stage:
// per-thread columns in order, xor butterfly 16, 8, 4, 2, 1, then partials[0..WARPS-1]
// folded left to right by every thread.
#define THREADS 128
#define WARP 32
#define WARPS (THREADS / WARP)
#define FULL_MASK 0xffffffffu

// Every lane of the warp must call it; every lane gets the result.
__device__ double warp_reduce(double v, bool use_max) {
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) {
        const double other = __shfl_xor_sync(FULL_MASK, v, offset);
        v = use_max ? fmax(v, other) : v + other;
    }
    return v;
}

// Every thread of the block must call it: it holds two barriers.
__device__ double block_reduce(double v, double* partials, int tid, bool use_max) {
    const int lane = tid % WARP;
    const int warp = tid / WARP;
    v = warp_reduce(v, use_max);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    double total = partials[0];
#pragma unroll
    for (int w = 1; w < WARPS; ++w) total = use_max ? fmax(total, partials[w]) : total + partials[w];
    __syncthreads();  // everyone has read partials before the next call overwrites them
    return total;
}

template <typename T>
__global__ void softmax_warp_fwd(const T* __restrict__ x, T* __restrict__ out, long long cols) {
    __shared__ double partials[WARPS];
    const int tid = threadIdx.x;
    const T* xr = x + (long long)blockIdx.x * cols;
    T* outr = out + (long long)blockIdx.x * cols;

    double m = __longlong_as_double(0xfff0000000000000ULL);  // -inf, as the prototype starts
    for (long long c = tid; c < cols; c += THREADS) m = fmax(m, (double)xr[c]);
    m = block_reduce(m, partials, tid, true);

    double s = 0.0;
    for (long long c = tid; c < cols; c += THREADS) s += exp((double)xr[c] - m);
    s = block_reduce(s, partials, tid, false);

    for (long long c = tid; c < cols; c += THREADS) outr[c] = (T)(exp((double)xr[c] - m) / s);
}

template <typename T>
__global__ void softmax_warp_bwd(const T* __restrict__ y, const T* __restrict__ dy,
                                 T* __restrict__ dx, long long cols) {
    __shared__ double partials[WARPS];
    const int tid = threadIdx.x;
    const long long base = (long long)blockIdx.x * cols;

    double dot = 0.0;
    // The product in T, then widened: exactly what the prototype does for float32.
    for (long long c = tid; c < cols; c += THREADS) dot += (double)(y[base + c] * dy[base + c]);
    dot = block_reduce(dot, partials, tid, false);

    for (long long c = tid; c < cols; c += THREADS)
        dx[base + c] = (T)(y[base + c] * (dy[base + c] - dot));
}
