// The twin of masked_softmax_prototype.py: one warp per row, float arithmetic for float,
// __half and __nv_bfloat16 storage, one rounding at the store; the forward saves the
// row's log-sum-exp (float) and the backward recomputes y from it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define WARP 32

template <typename T> __device__ float widen(T v) { return (float)v; }
template <> __device__ float widen<__half>(__half v) { return __half2float(v); }
template <> __device__ float widen<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__global__ void masked_softmax_fwd(const T* x, const bool* mask, T* y, float* lse,
                                   long long cols, float scale) {
    long long row = blockIdx.x;
    int lane = threadIdx.x;
    const T* xr = x + row * cols;
    const bool* mr = mask + row * cols;
    float m = -__int_as_float(0x7f800000);  // -inf
    for (long long c = lane; c < cols; c += WARP)
        if (mr[c]) m = fmaxf(m, widen(xr[c]) * scale);
    for (int off = WARP / 2; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFF, m, off));
    float s = 0.0f;
    for (long long c = lane; c < cols; c += WARP)
        if (mr[c]) s += expf(widen(xr[c]) * scale - m);
    for (int off = WARP / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xFFFFFFFF, s, off);
    for (long long c = lane; c < cols; c += WARP)
        y[row * cols + c] = (T)(mr[c] ? expf(widen(xr[c]) * scale - m) / s : 0.0f);
    if (lane == 0) lse[row] = m + logf(s);
}

template <typename T>
__global__ void masked_softmax_bwd(const T* x, const bool* mask, const float* lse,
                                   const float* scale, const T* dy, T* dx, long long cols) {
    long long row = blockIdx.x;
    int lane = threadIdx.x;
    float sc = scale[0], top = lse[row];
    const T* xr = x + row * cols;
    const bool* mr = mask + row * cols;
    float d = 0.0f;
    for (long long c = lane; c < cols; c += WARP)
        if (mr[c]) d += widen(dy[row * cols + c]) * expf(widen(xr[c]) * sc - top);
    for (int off = WARP / 2; off > 0; off /= 2) d += __shfl_xor_sync(0xFFFFFFFF, d, off);
    for (long long c = lane; c < cols; c += WARP) {
        float g = 0.0f;
        if (mr[c]) g = sc * expf(widen(xr[c]) * sc - top) * (widen(dy[row * cols + c]) - d);
        dx[row * cols + c] = (T)g;
    }
}
