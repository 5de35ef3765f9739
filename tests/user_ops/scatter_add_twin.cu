// The twin of scatter_add_prototype.py: atomicAdd forward (indices repeat), gather backward.
template <typename T>
__global__ void scatter_add_zero(T* out, long long rows, long long dim) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * dim) out[i] = (T)0;
}

template <typename T>
__global__ void scatter_add_fwd(const T* src, const long long* idx, T* out, long long n,
                                long long dim) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * dim) {
        long long r = i / dim, c = i - r * dim;
        atomicAdd(out + idx[r] * dim + c, src[i]);
    }
}

template <typename T>
__global__ void scatter_add_bwd(const T* dout, const long long* idx, T* dsrc, long long n,
                                long long dim) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * dim) {
        long long r = i / dim, c = i - r * dim;
        dsrc[i] = dout[idx[r] * dim + c];
    }
}
