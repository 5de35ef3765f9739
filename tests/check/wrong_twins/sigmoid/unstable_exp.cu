// WRONG TWIN sigmoid/unstable_exp: stable_sigmoid computes exp(v) / (1 + exp(v)) for every v, without the v >= 0 branch, so exp overflows for large positive v (v > ~88.7 in float, > ~709.8 in double) and inf / inf gives NaN where the answer is 1. A diff shows NaN (expected 1) at exactly the elements whose input is +100000 or +inf, in the special-value cases only (float32-special and float64-special: indices 2, 5, 10, 13, 18, 21 of 32), and NaN gradients at the same indices (sigmoid_bwd is right but reads the NaN saved output).
// Random normal inputs (|x| < ~6) stay within a few ULPs of the stable form and pass;
// -100000, -inf and nan give 0, 0 and nan as they should. Only stable_sigmoid differs.
// Twin of prototypes/sigmoid.py: exp only of non-positive numbers, so +-100000 is safe.
template <typename T>
__device__ T stable_sigmoid(T v) {
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
