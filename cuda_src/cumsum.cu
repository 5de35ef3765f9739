// Twin of prototypes/cumsum.py: block scan into a double scratch buffer, a scan of the
// segment totals, then each element adds its segment's offset.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define SCAN 128

// The prototype's float64(v): __half and __nv_bfloat16 convert through float, exactly.
template <typename T> __device__ double wide(T v) { return (double)v; }
template <> __device__ double wide<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ double wide<__nv_bfloat16>(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}

template <typename T>
__global__ void cumsum_block_scan(const T* __restrict__ x, double* __restrict__ partial,
                                  double* __restrict__ totals, long long cols) {
    __shared__ double buf[2][SCAN];
    const int tid = threadIdx.x;
    const long long segment = blockIdx.x, row = blockIdx.y;
    const long long segments = gridDim.x;
    const long long c = segment * SCAN + tid;

    buf[0][tid] = c < cols ? wide(x[row * cols + c]) : 0.0;
    __syncthreads();
    int src = 0;
    for (int offset = 1; offset < SCAN; offset *= 2) {
        const int dst = 1 - src;
        buf[dst][tid] = tid >= offset ? buf[src][tid] + buf[src][tid - offset] : buf[src][tid];
        __syncthreads();
        src = dst;
    }
    if (c < cols) partial[row * cols + c] = buf[src][tid];
    if (tid == SCAN - 1) totals[row * segments + segment] = buf[src][tid];
}

extern "C" __global__ void cumsum_scan_totals(const double* __restrict__ totals,
                                              double* __restrict__ offsets, long long rows,
                                              long long segments) {
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        double running = 0.0;
        for (long long s = 0; s < segments; ++s) {
            offsets[row * segments + s] = running;
            running += totals[row * segments + s];
        }
    }
}

template <typename T>
__global__ void cumsum_add_back(const double* __restrict__ partial,
                                const double* __restrict__ offsets, T* __restrict__ out,
                                long long cols) {
    const long long c = (long long)blockIdx.x * SCAN + threadIdx.x;
    const long long row = blockIdx.y;
    if (c < cols) out[row * cols + c] = (T)(partial[row * cols + c] + offsets[row * gridDim.x + blockIdx.x]);
}
