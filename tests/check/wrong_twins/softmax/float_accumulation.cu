// WRONG TWIN softmax/float_accumulation: the shared buffer, block_reduce and the accumulators m, s and dot are float where the prototype keeps float64, so the max and every partial sum are rounded to float (relative error ~1e-7). A diff against the numba prototype shows small relative errors (~1e-8 to 1e-7, a few float ULPs of s or dot) over nearly every element of every float64 case, 1x1 included (m rounded to float makes exp(x - m) != 1: 1.0000000336); float32 cases match within the twin tolerance.
// Against the PyTorch reference the float64 forward and backward mostly stay inside
// rtol=atol=1e-7 (softmax values are < 1, so the error is below the absolute floor), so
// `--backend twin` alone may pass them: the numba~twin comparison (rtol=atol=1e-12) is
// the check that sees it, and gradcheck of the twin (float64-gradcheck, 2x3), whose
// finite differences (eps 1e-6) magnify the float rounding of s to ~1e-2, fails too.
// Seen on an H200: exactly that, numba vs twin on the 7 float64 cases (the special case
// in its gradient only, 3 of 24) and twin gradcheck; every twin-vs-reference check passed.
// Only the types of buf, block_reduce, m, s, dot (and fmax -> fmaxf) differ.
// Twin of prototypes/softmax.py: one block per row, double accumulation in shared memory.
#define THREADS 128

__device__ float block_reduce(float* buf, int tid, bool use_max) {
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            buf[tid] = use_max ? fmaxf(buf[tid], buf[tid + stride]) : buf[tid] + buf[tid + stride];
        }
        __syncthreads();
    }
    return buf[0];
}

template <typename T>
__global__ void softmax_fwd(const T* __restrict__ x, T* __restrict__ out, long long cols) {
    __shared__ float buf[THREADS];
    const int tid = threadIdx.x;
    const T* xr = x + (long long)blockIdx.x * cols;
    T* outr = out + (long long)blockIdx.x * cols;

    float m = __int_as_float(0xff800000);  // -inf, as the prototype starts
    for (long long c = tid; c < cols; c += THREADS) m = fmaxf(m, (float)xr[c]);
    buf[tid] = m;
    __syncthreads();
    m = block_reduce(buf, tid, true);
    __syncthreads();

    float s = 0.0f;
    for (long long c = tid; c < cols; c += THREADS) s += exp((double)xr[c] - m);
    buf[tid] = s;
    __syncthreads();
    s = block_reduce(buf, tid, false);

    for (long long c = tid; c < cols; c += THREADS) outr[c] = (T)(exp((double)xr[c] - m) / s);
}

template <typename T>
__global__ void softmax_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                            long long cols) {
    __shared__ float buf[THREADS];
    const int tid = threadIdx.x;
    const long long base = (long long)blockIdx.x * cols;

    float dot = 0.0f;
    // The product in T, then widened: exactly what the prototype does for float32.
    for (long long c = tid; c < cols; c += THREADS) dot += (double)(y[base + c] * dy[base + c]);
    buf[tid] = dot;
    __syncthreads();
    dot = block_reduce(buf, tid, false);

    for (long long c = tid; c < cols; c += THREADS)
        dx[base + c] = (T)(y[base + c] * (dy[base + c] - dot));
}
