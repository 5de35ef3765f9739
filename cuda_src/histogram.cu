// Twin of prototypes/histogram.py: each thread counts into its own column of a shared
// [bin][thread] table; the block sums each bin and adds it to the global count once.
//
// What it pays for (2^24 float32 on an H100: 64 MiB to read, ~22 us at copy speed):
// - no atomics per element: the first version's atomicAdd per element on 16 global
//   addresses serialised in L2 (3477 us, torch 1514). A thread's column is its own, so a
//   count is a plain shared load and store, and word [b][t] sits in bank t % 32: no bank
//   conflict whatever the bins of a warp's 32 elements (a shared histogram with atomics
//   serialises the lanes that hit one bin, which normal data does all the time);
// - one global atomic per block and non-zero bin at the end (1,056 blocks x 16 bins);
// - 16-byte loads (Pack<T>: 4 float32, 8 half, 2 double), two packs in flight per
//   thread, in a grid-stride loop over a grid the launcher sizes to 8 blocks of 256
//   threads per SM (16 KiB of table each, 128 KiB per SM), so the zeroing and the merge
//   are paid once per resident block;
// - unaligned x, and the last partial pack: the same packs element by element (element i
//   belongs to the thread of pack i / W, as in the prototype).
// Integer sums are exact: the counts do not depend on the order of anything.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define THREADS 256
#define MAX_BINS 16  // prototypes/histogram.py's MAX_BINS

// 16 bytes of T, aligned so that one copy is one 128-bit load.
template <typename T>
struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

__device__ inline bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

// The prototype's bin in double: half types convert through float, exactly.
template <typename T> __device__ inline double wide(T v) { return (double)(float)v; }
template <> __device__ inline double wide<double>(double v) { return v; }

// Count x in this thread's column (tid) of the table, if it lies in [lo, hi).
template <typename T>
__device__ inline void count(int (*table)[THREADS], int tid, T x, long long bins, double lo,
                             double hi) {
    const double v = wide(x);
    if (v >= lo && v < hi) {
        long long b = (long long)((v - lo) / (hi - lo) * (double)bins);
        if (b >= bins) b = bins - 1;  // v just under hi can round up to bins
        table[b][tid] += 1;
    }
}

template <typename T>
__global__ void __launch_bounds__(THREADS) histogram(const T* __restrict__ x,
                                                     int* __restrict__ counts, long long n,
                                                     long long bins, double lo, double hi) {
    __shared__ int table[MAX_BINS][THREADS];
    const int tid = threadIdx.x;
    for (long long b = 0; b < bins; ++b) table[b][tid] = 0;  // own column: no barrier
    constexpr int W = Pack<T>::N;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long packs = n / W;  // whole packs; a partial one follows if n % W != 0
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (aligned16(x)) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(x);
        for (; p + stride < packs; p += 2 * stride) {
            const Pack<T> a = xv[p], c = xv[p + stride];
#pragma unroll
            for (int j = 0; j < W; ++j) count(table, tid, a.v[j], bins, lo, hi);
#pragma unroll
            for (int j = 0; j < W; ++j) count(table, tid, c.v[j], bins, lo, hi);
        }
        for (; p < packs; p += stride) {
            const Pack<T> a = xv[p];
#pragma unroll
            for (int j = 0; j < W; ++j) count(table, tid, a.v[j], bins, lo, hi);
        }
    }
    // Unaligned x: every pack element by element; aligned: only the partial last pack.
#pragma unroll 1
    for (; p < (n + W - 1) / W; p += stride)
        for (long long i = p * W; i < p * W + W && i < n; ++i)
            count(table, tid, x[i], bins, lo, hi);
    __syncthreads();
    if (tid < bins) {
        int total = 0;
#pragma unroll 8
        // Staggered, as in the prototype: the readers of one step hit different banks.
        for (int t = 0; t < THREADS; ++t) total += table[tid][(t + tid) % THREADS];
        if (total) atomicAdd(counts + tid, total);  // a bin this block never saw: no atomic
    }
}
