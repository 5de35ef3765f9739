// The twin of the mixed-precision idiom: A is the compute type (float for __half,
// __nv_bfloat16 and float storage, double for double), decided at launch by the `norm`
// tensor; widen() reads any storage type into it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define WARP 32

template <typename A, typename T> __device__ A widen(T v) { return (A)v; }
template <> __device__ float widen<float, __half>(__half v) { return __half2float(v); }
template <> __device__ float widen<float, __nv_bfloat16>(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

template <typename T, typename A>
__global__ void l2norm_fwd(const T* x, T* out, A* norm, long long cols, A eps, A one) {
    long long row = blockIdx.x;
    int lane = threadIdx.x;
    A s = 0;
    for (long long c = lane; c < cols; c += WARP) {
        A v = widen<A>(x[row * cols + c]);
        s += v * v;
    }
    for (int off = WARP / 2; off > 0; off /= 2) s += __shfl_down_sync(0xFFFFFFFF, s, off);
    s = __shfl_sync(0xFFFFFFFF, s, 0) + eps;
    A r = one / sqrt(s);
    for (long long c = lane; c < cols; c += WARP) out[row * cols + c] = (T)(widen<A>(x[row * cols + c]) * r);
    if (lane == 0) norm[row] = s;
}

template <typename T, typename A>
__global__ void l2norm_bwd(const T* x, const A* norm, const T* dy, T* dx, long long cols, A one) {
    long long row = blockIdx.x;
    int lane = threadIdx.x;
    A r = one / sqrt(norm[row]);
    A d = 0;
    for (long long c = lane; c < cols; c += WARP)
        d += widen<A>(dy[row * cols + c]) * (widen<A>(x[row * cols + c]) * r);
    for (int off = WARP / 2; off > 0; off /= 2) d += __shfl_down_sync(0xFFFFFFFF, d, off);
    d = __shfl_sync(0xFFFFFFFF, d, 0);
    for (long long c = lane; c < cols; c += WARP) {
        A y = widen<A>(x[row * cols + c]) * r;
        dx[row * cols + c] = (T)((widen<A>(dy[row * cols + c]) - y * d) * r);
    }
}
