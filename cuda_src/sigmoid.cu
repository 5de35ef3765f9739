// Twin of prototypes/sigmoid.py: exp only of non-positive numbers, so +-100000 is safe.
template <typename T>
__device__ T stable_sigmoid(T v) {
    if (v >= T(0)) {
        T z = exp(-v);
        return T(1) / (T(1) + z);
    }
    T z = exp(v);
    return z / (T(1) + z);
}

template <typename T>
__global__ void sigmoid_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = stable_sigmoid(x[i]);
}

template <typename T>
__global__ void sigmoid_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                            long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        T s = y[i];
        dx[i] = dy[i] * s * (T(1) - s);
    }
}
