// WRONG TWIN softmax/unrolled_sum_no_tail: the sum loop of softmax_fwd is unrolled by two with no tail, so in a row of odd width the thread with the last pair reads xr[cols]: the next row's first element (in bounds, a wrong sum) or, in the last row, one element past the input. A diff shows every element of every odd-width row wrong by one factor (1x1, 3x127, 2x129 and the odd special rows); even widths pass.
// Catchers: portkit check (values; the last row's read past the input meets the input's
// NaN guard, so the whole row is NaN) and compute-sanitizer memcheck (the read past the
// allocation, with thread and line, since under the sanitizer allocations are exact).
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
    m = block_reduce(buf, tid, true);
    __syncthreads();

    double s = 0.0;
    // Unrolled by two, without a tail: the last pair of an odd-width row reads xr[cols].
    for (long long c = 2 * tid; c < cols; c += 2 * THREADS)
        s += exp((double)xr[c] - m) + exp((double)xr[c + 1] - m);  // BUG: reads past the row
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
