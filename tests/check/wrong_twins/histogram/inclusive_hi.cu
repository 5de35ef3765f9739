// WRONG TWIN histogram/inclusive_hi: the range test is v <= hi, so a value equal to hi (2.0) is counted in the last bin where the prototype drops it. A diff shows only the last count, one too high, in the edges cases (which hold 2.0); random inputs never hit 2.0 exactly and match.
// Twin of prototypes/histogram.py: one thread per element, int atomics, bin in double.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <typename T>
__global__ void histogram(const T* __restrict__ x, int* __restrict__ counts, long long n,
                          long long bins, double lo, double hi) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        double v = (double)(float)x[i];  // half types convert through float, exactly
        if (v >= lo && v <= hi) {
            long long b = (long long)((v - lo) / (hi - lo) * (double)bins);
            if (b >= bins) b = bins - 1;
            atomicAdd(counts + b, 1);
        }
    }
}
