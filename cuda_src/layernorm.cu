// Twin of prototypes/layernorm.py: one block per row, double sums in shared memory for
// every dtype; the weight/bias gradients in a second kernel, one thread per column.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define THREADS 128

// The prototype's float64(v): __half and __nv_bfloat16 convert through float, exactly.
template <typename T> __device__ double wide(T v) { return (double)v; }
template <> __device__ double wide<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ double wide<__nv_bfloat16>(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}

__device__ double block_sum(double* buf, int tid, double value) {
    buf[tid] = value;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (tid < stride) buf[tid] += buf[tid + stride];
        __syncthreads();
    }
    double total = buf[0];
    __syncthreads();
    return total;
}

template <typename T>
__global__ void layernorm_fwd(const T* __restrict__ x, const T* __restrict__ w,
                              const T* __restrict__ b, T* __restrict__ out,
                              double* __restrict__ mean, double* __restrict__ rstd,
                              long long cols, double eps) {
    __shared__ double buf[THREADS];
    const int tid = threadIdx.x;
    const long long row = blockIdx.x;
    const T* xr = x + row * cols;
    T* outr = out + row * cols;

    double s = 0.0;
    for (long long c = tid; c < cols; c += THREADS) s += wide(xr[c]);
    const double mu = block_sum(buf, tid, s) / cols;

    s = 0.0;
    for (long long c = tid; c < cols; c += THREADS) {
        double d = wide(xr[c]) - mu;
        s += d * d;
    }
    const double var = block_sum(buf, tid, s) / cols;
    const double r = 1.0 / pow(var + eps, 0.5);

    for (long long c = tid; c < cols; c += THREADS) {
        double xhat = (wide(xr[c]) - mu) * r;
        outr[c] = (T)(xhat * wide(w[c]) + wide(b[c]));
    }
    if (tid == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }
}

template <typename T>
__global__ void layernorm_bwd_x(const T* __restrict__ x, const T* __restrict__ w,
                                const T* __restrict__ dy, const double* __restrict__ mean,
                                const double* __restrict__ rstd, T* __restrict__ dx,
                                long long cols) {
    __shared__ double buf[THREADS];
    const int tid = threadIdx.x;
    const long long row = blockIdx.x;
    const long long base = row * cols;
    const double mu = mean[row], r = rstd[row];

    double s1 = 0.0, s2 = 0.0;
    for (long long c = tid; c < cols; c += THREADS) {
        double g = wide(dy[base + c]) * wide(w[c]);
        s1 += g;
        s2 += g * (wide(x[base + c]) - mu) * r;
    }
    const double m1 = block_sum(buf, tid, s1) / cols;
    const double m2 = block_sum(buf, tid, s2) / cols;

    for (long long c = tid; c < cols; c += THREADS) {
        double g = wide(dy[base + c]) * wide(w[c]);
        double xhat = (wide(x[base + c]) - mu) * r;
        dx[base + c] = (T)(r * (g - m1 - xhat * m2));
    }
}

template <typename T>
__global__ void layernorm_bwd_wb(const T* __restrict__ x, const T* __restrict__ dy,
                                 const double* __restrict__ mean,
                                 const double* __restrict__ rstd, T* __restrict__ dw,
                                 T* __restrict__ db, long long rows, long long cols) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        double sw = 0.0, sb = 0.0;
        for (long long row = 0; row < rows; ++row) {
            double g = wide(dy[row * cols + c]);
            sw += g * (wide(x[row * cols + c]) - mean[row]) * rstd[row];
            sb += g;
        }
        dw[c] = (T)sw;
        db[c] = (T)sb;
    }
}
