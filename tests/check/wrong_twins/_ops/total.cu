// Twin of _ops/total.py (bank-only op): a block reduction in shared memory, then one
// atomicAdd of the block's partial sum into the float64 result.
#define THREADS 256

template <typename T>
__global__ void total_partial(const T* __restrict__ x, double* __restrict__ out, long long n) {
    __shared__ double buf[THREADS];
    const int tid = threadIdx.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    buf[tid] = i < n ? (double)x[i] : 0.0;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (tid < stride) buf[tid] += buf[tid + stride];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(out, buf[0]);
}
