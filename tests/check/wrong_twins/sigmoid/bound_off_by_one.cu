// WRONG TWIN sigmoid/bound_off_by_one: `if (i <= n)` instead of `i < n` in sigmoid_fwd, so thread n reads x[n] and writes out[n], one element past both tensors. A diff of the n elements shows NOTHING (all equal), forward and backward alike: the stray store lands outside the tensor.
// On a GPU the visible symptom is at most indirect: the write usually lands in the caching
// allocator's rounding padding (invisible), may overwrite a neighbouring tensor (a later
// comparison fails somewhere unrelated), or, where the output ends at an unmapped page,
// raises "an illegal memory access" that poisons the CUDA context for the rest of the
// process. That was before guard zones (issue 10): portkit check now puts every tensor
// between guards and fails the launch that writes one (GuardViolation), and
// compute-sanitizer memcheck names the thread. Before them, plain check
// missed it. Seen on an H200: for n = 128 (a whole number of the allocator's 512-byte
// blocks, so no padding) out[128] landed on the numba run's saved
// input gradient, so `numba vs twin` failed on element [0] of the *prototype's* gradient
// (got 0.618, the sigmoid of whatever lay after x) in float32-n128 and float64-n128, and
// every other case passed: the symptom blames the wrong side.
// Only `<` -> `<=` in sigmoid_fwd differs; sigmoid_bwd is the real one.
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
    if (i <= n) out[i] = stable_sigmoid(x[i]);  // BUG
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
