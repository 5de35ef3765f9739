// WRONG TWIN sigmoid/barrier_in_bound_check: sigmoid_fwd calls __syncthreads() inside `if (i < n)`, so in the last block of a size that is not a multiple of 256 the threads past n never reach the barrier (undefined behaviour: a hang or a wrong result on some GPUs). A diff shows NOTHING on today's GPUs (the values are right).
// Catcher: compute-sanitizer synccheck (a divergent barrier, with block and thread);
// portkit check passes, and the simulator catches it only in the prototype.
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
    if (i < n) {
        T v = x[i];
        __syncthreads();  // BUG: a barrier only the threads inside the bound reach
        out[i] = stable_sigmoid(v);
    }
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
