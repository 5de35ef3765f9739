// WRONG TWIN matmul/drops_partial_tile: the tile loop runs while start + TILE <= k, so the last, partial tile of the K dimension is never added: right only when K is a multiple of 16. A diff shows every element of c short of its last K % 16 products (all zeros for K < 16), in every case but the empty 2x0x3.
// Twin of prototypes/matmul.py: TILE x TILE blocks, tiles of a and b in shared memory as
// double (zero past the edges), one double sum per element of c.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TILE 16

// The prototype's float64(v): __half and __nv_bfloat16 convert through float, exactly.
template <typename T> __device__ double wide(T v) { return (double)v; }
template <> __device__ double wide<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ double wide<__nv_bfloat16>(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}

template <typename T>
__global__ void matmul_tiled(const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ c, long long m, long long n, long long k) {
    __shared__ double ta[TILE][TILE];
    __shared__ double tb[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long row = (long long)blockIdx.y * TILE + ty;
    const long long col = (long long)blockIdx.x * TILE + tx;

    double acc = 0.0;
    for (long long start = 0; start + TILE <= k; start += TILE) {
        ta[ty][tx] = (row < m && start + tx < k) ? wide(a[row * k + start + tx]) : 0.0;
        tb[ty][tx] = (start + ty < k && col < n) ? wide(b[(start + ty) * n + col]) : 0.0;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += ta[ty][i] * tb[i][tx];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = (T)acc;
}
