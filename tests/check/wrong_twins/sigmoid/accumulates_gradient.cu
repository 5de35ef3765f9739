// WRONG TWIN sigmoid/accumulates_gradient: sigmoid_bwd accumulates `dx[i] += ...` into a gradient buffer nobody zeroed (k.empty_like), so it reads memory no one wrote. A diff of the backward shows every element wrong: NaN under portkit's output poison, garbage otherwise; the forward is right.
// Catchers: portkit check (the poisoned output NaN propagates into every gradient) and
// compute-sanitizer initcheck (under initcheck outputs are left unpoisoned, so the read
// is of uninitialised global memory: file, line and thread).
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
        dx[i] += dy[i] * s * (T(1) - s);  // BUG: reads dx[i], which nobody wrote
    }
}
