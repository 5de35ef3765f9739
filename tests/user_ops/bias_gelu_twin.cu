// The twin of bias_gelu_prototype.py: __nv_bfloat16 storage, float arithmetic, one
// rounding at each store; the bias gradient sums unrounded float terms per column.
#include <cuda_bf16.h>

#define INV_SQRT2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

__device__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ float gelu_grad(float z) {
    float cdf = 0.5f * (1.0f + erff(z * INV_SQRT2));
    return cdf + z * INV_SQRT_2PI * expf(-0.5f * z * z);
}

template <typename T>
__global__ void bias_gelu_fwd(const T* x, const T* bias, T* y, long long rows, long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float z = widen(x[i]) + widen(bias[i % cols]);
        y[i] = __float2bfloat16(0.5f * z * (1.0f + erff(z * INV_SQRT2)));
    }
}

template <typename T>
__global__ void bias_gelu_bwd(const T* x, const T* bias, const T* dy, T* dx, long long rows,
                              long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float z = widen(x[i]) + widen(bias[i % cols]);
        dx[i] = __float2bfloat16(widen(dy[i]) * gelu_grad(z));
    }
}

template <typename T>
__global__ void bias_gelu_dbias(const T* x, const T* bias, const T* dy, T* dbias,
                                long long rows, long long cols) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        float b = widen(bias[c]), s = 0.0f;
        for (long long r = 0; r < rows; r++)
            s += widen(dy[r * cols + c]) * gelu_grad(widen(x[r * cols + c]) + b);
        dbias[c] = __float2bfloat16(s);
    }
}
