// Twin of prototypes/elementwise_mul.py.
template <typename T>
__global__ void mul_fwd(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                        long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * b[i];
}

template <typename T>
__global__ void mul_bwd(const T* __restrict__ a, const T* __restrict__ b,
                        const T* __restrict__ dout, T* __restrict__ da, T* __restrict__ db,
                        long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        T g = dout[i];
        da[i] = g * b[i];
        db[i] = g * a[i];
    }
}
