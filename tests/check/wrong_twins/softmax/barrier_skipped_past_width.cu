// WRONG TWIN softmax/barrier_skipped_past_width: softmax_fwd waits at its first barrier only `if (tid < cols)`, so in rows narrower than the block (1x1, 3x127) the threads past the width skip it while the others wait: a __syncthreads() inside a divergent branch (undefined behaviour). A diff is not expected to show it reliably (the hardware barrier counts arrivals, so the values often come out right).
// Catcher: compute-sanitizer synccheck. Seen on an H100 (2026-11-23, compute-sanitizer
// 2025.3.1): "Barrier error detected. Divergent thread(s) in warp." at this line, for
// threads 96-126 of each block in float32-3x127 (warp 3, where thread 127 diverges).
// Twin of prototypes/softmax.py: one block per row, double accumulation in shared memory.
#define THREADS 128

__device__ double block_reduce(double* buf, int tid, bool use_max) {
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            buf[tid] = use_max ? fmax(buf[tid], buf[tid + stride]) : buf[tid] + buf[tid + stride];
        }
        __syncthreads();
    }
    return buf[0];
}

template <typename T>
__global__ void softmax_fwd(const T* __restrict__ x, T* __restrict__ out, long long cols) {
    __shared__ double buf[THREADS];
    const int tid = threadIdx.x;
    const T* xr = x + (long long)blockIdx.x * cols;
    T* outr = out + (long long)blockIdx.x * cols;

    double m = __longlong_as_double(0xfff0000000000000ULL);  // -inf, as the prototype starts
    for (long long c = tid; c < cols; c += THREADS) m = fmax(m, (double)xr[c]);
    buf[tid] = m;
    __syncthreads();
    if (tid < cols) __syncthreads();  // BUG: threads past the row's width skip this barrier
    m = block_reduce(buf, tid, true);
    __syncthreads();

    double s = 0.0;
    for (long long c = tid; c < cols; c += THREADS) s += exp((double)xr[c] - m);
    buf[tid] = s;
    __syncthreads();
    s = block_reduce(buf, tid, false);

    for (long long c = tid; c < cols; c += THREADS) outr[c] = (T)(exp((double)xr[c] - m) / s);
}

template <typename T>
__global__ void softmax_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                            long long cols) {
    __shared__ double buf[THREADS];
    const int tid = threadIdx.x;
    const long long base = (long long)blockIdx.x * cols;

    double dot = 0.0;
    // The product in T, then widened: exactly what the prototype does for float32.
    for (long long c = tid; c < cols; c += THREADS) dot += (double)(y[base + c] * dy[base + c]);
    buf[tid] = dot;
    __syncthreads();
    dot = block_reduce(buf, tid, false);

    for (long long c = tid; c < cols; c += THREADS)
        dx[base + c] = (T)(y[base + c] * (dy[base + c] - dot));
}
