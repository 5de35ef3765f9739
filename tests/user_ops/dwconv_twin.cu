// The twin of dwconv_prototype.py: same kernels, templated on the scalar type.
#define TILE 128
#define K 3
#define HALO (TILE + K - 1)

template <typename T>
__global__ void dwconv_fwd(const T* x, const T* w, T* out, long long length,
                           long long out_length) {
    long long t0 = (long long)blockIdx.x * TILE;
    long long c = blockIdx.y, b = blockIdx.z, channels = gridDim.y;
    int tid = threadIdx.x;
    __shared__ T tile[HALO];
    const T* row = x + (b * channels + c) * length;
    for (int j = tid; j < HALO; j += TILE)
        if (t0 + j < length) tile[j] = row[t0 + j];
    __syncthreads();
    long long i = t0 + tid;
    if (i < out_length) {
        T acc = tile[tid] * w[c * K];
        for (int k = 1; k < K; ++k) acc += tile[tid + k] * w[c * K + k];
        out[(b * channels + c) * out_length + i] = acc;
    }
}

template <typename T>
__global__ void dwconv_bwd_x(const T* dout, const T* w, T* dx, long long length,
                             long long out_length, T one) {
    long long c = blockIdx.y, b = blockIdx.z, channels = gridDim.y;
    long long i = (long long)blockIdx.x * TILE + threadIdx.x;
    if (i < length) {
        T acc = one - one;
        for (int k = 0; k < K; ++k) {
            long long j = i - k;
            if (j >= 0 && j < out_length) acc += dout[(b * channels + c) * out_length + j] * w[c * K + k];
        }
        dx[(b * channels + c) * length + i] = acc;
    }
}

template <typename T>
__global__ void dwconv_zero(T* dw) {
    dw[blockIdx.x * K + threadIdx.y] = T(0);  // block (1, K): threadIdx.y is k
}

template <typename T>
__global__ void dwconv_bwd_w(const T* x, const T* dout, T* dw, long long out_length) {
    long long c = blockIdx.y, b = blockIdx.z, channels = gridDim.y;
    long long i = (long long)blockIdx.x * TILE + threadIdx.x;
    long long length = out_length + K - 1;
    if (i < out_length)
        for (int k = 0; k < K; ++k)
            atomicAdd(&dw[c * K + k], dout[(b * channels + c) * out_length + i] *
                                          x[(b * channels + c) * length + i + k]);
}
