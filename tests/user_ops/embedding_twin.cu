// The twin of embedding_prototype.py: gather forward, scatter-add (atomicAdd) backward.
template <typename T>
__global__ void embedding_fwd(const T* weight, const long long* idx, T* out, long long n,
                              long long dim) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * dim) {
        long long r = i / dim, c = i - r * dim;
        out[i] = weight[idx[r] * dim + c];
    }
}

template <typename T>
__global__ void embedding_zero(T* dweight, long long rows, long long dim) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * dim) dweight[i] = (T)0;
}

template <typename T>
__global__ void embedding_bwd(const T* dout, const long long* idx, T* dweight, long long n,
                              long long dim) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * dim) {
        long long r = i / dim, c = i - r * dim;
        atomicAdd(dweight + idx[r] * dim + c, dout[i]);
    }
}
