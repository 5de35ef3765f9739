// Twin of prototypes/cumsum.py: one block per row, one pass over it, float64 sums in the
// prototype's order (its docstring lists the steps).
//
// What it pays for (4096x4096 float32 on an H100: 128 MiB moved, ~45 us at copy speed):
// - one read of x and one write of the output: the first version's float64 scratch
//   buffer and add-back pass moved 24 bytes per float32 element (218 us, torch 180);
// - 16-byte loads and stores (Pack<T>) when the row is 16-byte aligned (cols * sizeof(T)
//   a multiple of 16, as 4096 is), the same elements one by one otherwise;
// - the next tile's pack is loaded before this tile is scanned, so a thread has two
//   packs in flight and a row's tiles overlap their latency with the scan;
// - the block scan is warp shuffles plus one barrier per tile (warp totals in two
//   alternating slots), not a shared-memory Hillis-Steele with a barrier per step;
// - 4096 rows are 4096 blocks of 256 threads: about four waves on 132 SMs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define THREADS 256
#define WARPS (THREADS / 32)

// The prototype's float64(v): __half and __nv_bfloat16 convert through float, exactly.
template <typename T> __device__ double wide(T v) { return (double)v; }
template <> __device__ double wide<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ double wide<__nv_bfloat16>(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}

// 16 bytes of T, aligned so that one copy is one 128-bit load or store.
template <typename T>
struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

__device__ inline bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

// The pack of a row that starts at column c0 (zeros past the row's end).
template <typename T>
__device__ inline Pack<T> load_pack(const T* row, long long c0, long long cols, bool vec) {
    constexpr int W = Pack<T>::N;
    Pack<T> p;
    if (vec && c0 + W <= cols) return *reinterpret_cast<const Pack<T>*>(row + c0);
#pragma unroll
    for (int j = 0; j < W; ++j) p.v[j] = c0 + j < cols ? row[c0 + j] : T(0.0f);
    return p;
}

template <typename T>
__global__ void __launch_bounds__(THREADS) cumsum_rows(const T* __restrict__ x,
                                                       T* __restrict__ out, long long cols) {
    constexpr int W = Pack<T>::N;
    constexpr long long TILE = (long long)THREADS * W;
    __shared__ double warp_totals[2][WARPS];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const T* xrow = x + (long long)blockIdx.x * cols;
    T* orow = out + (long long)blockIdx.x * cols;
    const bool vec = aligned16(xrow) && aligned16(orow);
    double carry = 0.0;
    int slot = 0;
    Pack<T> next = load_pack(xrow, (long long)tid * W, cols, vec);
    for (long long start = 0; start < cols; start += TILE) {
        const long long c0 = start + (long long)tid * W;
        const Pack<T> cur = next;
        if (start + TILE < cols) next = load_pack(xrow, c0 + TILE, cols, vec);
        double total = 0.0;
#pragma unroll
        for (int j = 0; j < W; ++j)
            if (c0 + j < cols) total += wide(cur.v[j]);
        double v = total;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            const double up = __shfl_up_sync(0xFFFFFFFFu, v, d);
            if (lane >= d) v = up + v;
        }
        double lane_offset = __shfl_up_sync(0xFFFFFFFFu, v, 1);
        if (lane == 0) lane_offset = 0.0;
        if (lane == 31) warp_totals[slot][warp] = v;
        __syncthreads();
        double s = carry;
        for (int w = 0; w < warp; ++w) s += warp_totals[slot][w];
        s += lane_offset;
        if (vec && c0 + W <= cols) {
            Pack<T> o;
#pragma unroll
            for (int j = 0; j < W; ++j) {
                s += wide(cur.v[j]);
                o.v[j] = (T)s;
            }
            *reinterpret_cast<Pack<T>*>(orow + c0) = o;
        } else {
#pragma unroll
            for (int j = 0; j < W; ++j)
                if (c0 + j < cols) {
                    s += wide(cur.v[j]);
                    orow[c0 + j] = (T)s;
                }
        }
#pragma unroll
        for (int w = 0; w < WARPS; ++w) carry += warp_totals[slot][w];
        slot = 1 - slot;
    }
}
