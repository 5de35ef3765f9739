// WRONG TWIN rmsnorm/drops_weight: the forward stores x * rstd and forgets the weight, a port that copied the normalisation and not the scale. A diff shows every output element off by the factor w[c] (the backward kernels are right, so only the forward and numba vs twin outputs fail).
// Twin of prototypes/rmsnorm.py: half-precision storage, float arithmetic, one block per
// row with a float shared-memory tree reduction; the weight gradient one thread per column.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define THREADS 128

// The prototype's float32(v).
template <typename T> __device__ float widen(T v) { return (float)v; }
template <> __device__ float widen<__half>(__half v) { return __half2float(v); }
template <> __device__ float widen<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ float block_sum(float* buf, int tid, float value) {
    buf[tid] = value;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (tid < stride) buf[tid] += buf[tid + stride];
        __syncthreads();
    }
    float total = buf[0];
    __syncthreads();
    return total;
}

template <typename T>
__global__ void rmsnorm_fwd(const T* __restrict__ x, const T* __restrict__ w,
                            T* __restrict__ out, float* __restrict__ rstd, long long cols,
                            float eps) {
    __shared__ float buf[THREADS];
    const int tid = threadIdx.x;
    const long long base = (long long)blockIdx.x * cols;

    float s = 0.0f;
    for (long long c = tid; c < cols; c += THREADS) {
        float v = widen(x[base + c]);
        s += v * v;
    }
    const float r = 1.0f / sqrtf(block_sum(buf, tid, s) / (float)cols + eps);
    for (long long c = tid; c < cols; c += THREADS)
        out[base + c] = (T)(widen(x[base + c]) * r);
    if (tid == 0) rstd[blockIdx.x] = r;
}

template <typename T>
__global__ void rmsnorm_bwd_x(const T* __restrict__ x, const T* __restrict__ w,
                              const T* __restrict__ dy, const float* __restrict__ rstd,
                              T* __restrict__ dx, long long cols) {
    __shared__ float buf[THREADS];
    const int tid = threadIdx.x;
    const long long base = (long long)blockIdx.x * cols;
    const float r = rstd[blockIdx.x];

    float s = 0.0f;
    for (long long c = tid; c < cols; c += THREADS)
        s += widen(dy[base + c]) * widen(w[c]) * widen(x[base + c]) * r;
    const float m = block_sum(buf, tid, s) / (float)cols;
    for (long long c = tid; c < cols; c += THREADS) {
        float xhat = widen(x[base + c]) * r;
        dx[base + c] = (T)(r * (widen(dy[base + c]) * widen(w[c]) - xhat * m));
    }
}

template <typename T>
__global__ void rmsnorm_bwd_w(const T* __restrict__ x, const T* __restrict__ dy,
                              const float* __restrict__ rstd, T* __restrict__ dw,
                              long long rows, long long cols) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        float s = 0.0f;
        for (long long row = 0; row < rows; ++row)
            s += widen(dy[row * cols + c]) * widen(x[row * cols + c]) * rstd[row];
        dw[c] = (T)s;
    }
}
