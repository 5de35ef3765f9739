// WRONG TWIN total/global_accumulator_race: each block adds its partial sum with `out[0] += ...` instead of atomicAdd, so blocks running at once read the same old total and overwrite each other's additions. A diff shows the one element too small (lost partial sums) in cases of many blocks; a single block (n1, n1000 has 4) may pass.
// Catcher: portkit check (values, the 4M-element case: 16,384 blocks on ~132 SMs lose
// additions on every run seen). compute-sanitizer cannot: racecheck watches shared
// memory only, and this race is in global memory between blocks.
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
    if (tid == 0) out[0] += buf[0];  // BUG: read-modify-write racing with other blocks
}
