// WRONG TWIN softmax/missing_syncthreads: the __syncthreads() inside block_reduce's loop is gone, so no thread waits for the tree reduction: warps 1-3 (threads 32-127) leave the loop after a few empty iterations and read buf[0] while warp 0 is still reducing, so they get a partial max and a partial sum (forward) or dot (backward). A diff shows essentially every element wrong in every row of more than 32 columns (values too large, up to ~50x: partial sums), in all columns, since the sum also mixes partial sums taken against different maxima; rows of at most 32 columns (1x1, 2x3, the 2x12 special case) are handled by warp 0 alone and pass.
// Why this barrier and not another: each of the other three was removed in turn from the
// real twin and `portkit check --backend twin` run three times on an H200. Without the one
// after `buf[tid] = m`: only float32-4096x4096 failed. Without the one after the max
// reduction (everyone reads buf[0] before thread 0 overwrites it a whole exp() loop later):
// nothing failed. Without the one after `buf[tid] = s`: 3x127, 3x1000 and 4096x4096 failed
// but 4x128 and 2x129 passed (why the shape matters was not investigated; perhaps the
// compiler moves the load of buf[tid + 64] above the exp() loop). Without this one every
// case with more than 32 columns failed in every run, as it must: the warps with no part
// in the last stages (warp 1 leaves after one stage, warps 2-3 take part in none) race
// ahead by construction, so it is wrong on every launch, not occasionally. It also removes
// the barrier before `return buf[0]`, and block_reduce serves softmax_bwd, so the
// backward's dot is wrong too. Seen on an H200, three runs: every element of the 3x127,
// 4x128, 2x129 and 3x1000 cases (both dtypes) wrong in the forward, all but at most 20 in
// the backward, the same counts each run; 4096x4096 99.9% wrong, the count varying by a
// few thousand between runs (a race); the narrow cases passed. Only that one line is
// removed.
// Twin of prototypes/softmax.py: one block per row, double accumulation in shared memory.
#define THREADS 128

__device__ double block_reduce(double* buf, int tid, bool use_max) {
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            buf[tid] = use_max ? fmax(buf[tid], buf[tid + stride]) : buf[tid] + buf[tid + stride];
        }  // BUG: the __syncthreads() that belongs after this if is gone
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
