// Twin of prototypes/matmul.py: c = a @ b, a register-blocked GEMM that sums in double on
// the H100's FP64 tensor cores (DMMA, mma.sync m16n8k8 .f64).
//
// Why double and not float32 FMA (as cuBLAS's SGEMM): the check judges matmul against a
// float64 reference with torch's float32 tolerance (rtol 1.3e-6, atol 1e-5). A float32
// sum of K = 1000 standard-normal products is off by up to ~2e-4 (44,358 of 10^6 elements
// of 1000^3 outside the tolerance, emulated on the CPU; a float32 sum in chunks of 16
// added in double still leaves elements at 0.96 of the bound): cuBLAS's own float32
// result fails the same check. Exact products summed in double pass with room to spare.
// The H100 does double FMAs at 67 TFLOP/s on its tensor cores (the same peak as float32 on
// its CUDA cores; 34 on its FP64 CUDA cores), so the double sum need not be slower.
//
// Layout (what each choice pays for):
// - Block tile BM x BN = 128 x 64, 128 threads = 4 warps as 2 x 2, warp tile 64 x 32 =
//   4 x 4 mma tiles of 16 x 8: 64 double accumulators per thread. 128 x 64 (not
//   128 x 128) gives 1000^3 128 blocks for 132 SMs (one wave) instead of 64.
// - BK = 8, one m16n8k8 per mma tile per k-tile: a warp issues 16 independent DMMAs between
//   barriers. Shared memory holds the tiles as double (converted once, at the store),
//   double-buffered (33 KiB static, two blocks per SM): the next tile's global loads are
//   issued into registers before the current tile is multiplied, stored after; one
//   __syncthreads per k-tile.
// - Row strides of 12 (a, [m][k]) and 68 (b, [k][n]) doubles: the fragment reads of a
//   half-warp hit 16 distinct 8-byte bank pairs (no conflicts).
// - Global loads are 4-element packs (16 bytes in float32) where the pack lies inside the
//   matrix and the rows are 16-byte aligned (K and N multiples of 4, aligned pointers);
//   elsewhere (edge tiles, odd shapes) the same pack element by element, zero past the
//   edges. The fast path is never shrunk by the edges: only the packs that cross them.
// - Epilogue: each double rounds once to T at the store (float32, half, bfloat16 alike).
//
// Expected gap to cuBLAS SGEMM (TF32 off, ~32 TFLOP/s at 1000^3 on an H100): DMMA's peak
// equals SGEMM's, but this kernel feeds the tensor cores through mma.sync and register-
// staged shared memory (no TMA, no wgmma: there is no f64 wgmma), and doubles double the
// shared-memory traffic per FLOP; expect 0.6-0.9x at 1000^3 (one block of 4 warps per SM,
// little latency hiding) and 0.7-1.0x at 4096^3 (untimed when written: no GPU).
//
// The prototype cannot issue mma.sync: it computes each thread's accumulators (the mma's
// C fragment: rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 tile; g = lane / 4,
// t = lane % 4) with scalar multiply-adds in k order. On a CPU (twin-cpu) this file runs
// the same instruction emulated with warp shuffles from the A and B fragments' documented
// layout, so the CPU check covers the fragment loads as well as the C mapping.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define BM 128
#define BN 64
#define BK 8
#define SA (BK + 4)  // a tile row stride in doubles
#define SB (BN + 4)  // b tile row stride in doubles
#define THREADS 128
#define WM 64  // warp tile
#define WN 32
#define MT (WM / 16)  // mma tiles per warp tile
#define NT (WN / 8)

// The prototype's float64(v): __half and __nv_bfloat16 convert through float, exactly.
template <typename T> __device__ double wide(T v) { return (double)v; }
template <> __device__ double wide<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ double wide<__nv_bfloat16>(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}

// Four consecutive elements, loaded as one access (16 bytes in float32).
template <typename T> struct alignas(4 * sizeof(T)) Pack4 { T v[4]; };

// The pack of 4 elements of row `row` starting at column `col` of a rows x cols matrix p,
// as doubles; zero past the edges. `vec`: rows are 4-element aligned (checked by the caller).
template <typename T>
__device__ __forceinline__ void load_pack(const T* __restrict__ p, long long rows, long long cols,
                                          long long row, long long col, bool vec, double out[4]) {
    if (vec && row < rows && col + 3 < cols) {
        const Pack4<T> pk = *reinterpret_cast<const Pack4<T>*>(p + row * cols + col);
        for (int i = 0; i < 4; ++i) out[i] = wide(pk.v[i]);
    } else {
        for (int i = 0; i < 4; ++i)
            out[i] = (row < rows && col + i < cols) ? wide(p[row * cols + col + i]) : 0.0;
    }
}

// d += a(16x8) * b(8x8) in double: mma.sync.m16n8k8.f64 (sm_90). Fragments, g = lane / 4,
// t = lane % 4: a0..a3 = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]; b0, b1 = B[t][g],
// B[t+4][g]; d0..d3 = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
__device__ __forceinline__ void mma_16x8x8(double d[4], const double a[4], const double b[2]) {
#ifndef PORTKIT_CUDA_CPU
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
    // The CPU twin: the same product from the same fragments, gathered with shuffles.
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int kk = 0; kk < 8; ++kk) {
        const int hi = kk / 4, q = kk % 4;
        const double x0 = __shfl_sync(0xffffffffu, a[2 * hi], g * 4 + q);
        const double x1 = __shfl_sync(0xffffffffu, a[2 * hi + 1], g * 4 + q);
        const double y0 = __shfl_sync(0xffffffffu, b[hi], (2 * t) * 4 + q);
        const double y1 = __shfl_sync(0xffffffffu, b[hi], (2 * t + 1) * 4 + q);
        d[0] += x0 * y0;
        d[1] += x0 * y1;
        d[2] += x1 * y0;
        d[3] += x1 * y1;
    }
#endif
}

template <typename T>
__global__ void __launch_bounds__(THREADS, 2)
    matmul_tiled(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                 long long m, long long n, long long k) {
    __shared__ double ta[2][BM * SA];
    __shared__ double tb[2][BK * SB];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const int wm = (warp / 2) * WM, wn = (warp % 2) * WN;
    const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
    const bool vec_a = k % 4 == 0 && (unsigned long long)a % sizeof(Pack4<T>) == 0;
    const bool vec_b = n % 4 == 0 && (unsigned long long)b % sizeof(Pack4<T>) == 0;

    // Each thread stages two packs of a (rows tid / 2 and 64 + tid / 2, columns 4 * (tid % 2))
    // and one of b (row tid / 16, columns 4 * (tid % 16)).
    const int ar = tid / 2, ac = 4 * (tid % 2), br = tid / 16, bc = 4 * (tid % 16);
    double sa0[4], sa1[4], sb[4];
    auto fetch = [&](long long k0) {
        load_pack(a, m, k, row0 + ar, k0 + ac, vec_a, sa0);
        load_pack(a, m, k, row0 + 64 + ar, k0 + ac, vec_a, sa1);
        load_pack(b, k, n, k0 + br, col0 + bc, vec_b, sb);
    };
    auto stash = [&](int buf) {
        for (int i = 0; i < 4; ++i) {
            ta[buf][ar * SA + ac + i] = sa0[i];
            ta[buf][(64 + ar) * SA + ac + i] = sa1[i];
            tb[buf][br * SB + bc + i] = sb[i];
        }
    };

    double acc[MT][NT][4];
    for (int i = 0; i < MT; ++i)
        for (int j = 0; j < NT; ++j)
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0;

    const long long tiles = (k + BK - 1) / BK;
    fetch(0);
    stash(0);
    __syncthreads();
    for (long long tile = 0; tile < tiles; ++tile) {
        const int buf = tile % 2;
        if (tile + 1 < tiles) fetch((tile + 1) * BK);  // in flight during the multiply
        const double* sa = ta[buf];
        const double* sb_ = tb[buf];
        double fa[MT][4], fb[NT][2];
        for (int i = 0; i < MT; ++i) {
            const int r = wm + 16 * i + g;
            fa[i][0] = sa[r * SA + t];
            fa[i][1] = sa[(r + 8) * SA + t];
            fa[i][2] = sa[r * SA + t + 4];
            fa[i][3] = sa[(r + 8) * SA + t + 4];
        }
        for (int j = 0; j < NT; ++j) {
            const int col = wn + 8 * j + g;
            fb[j][0] = sb_[t * SB + col];
            fb[j][1] = sb_[(t + 4) * SB + col];
        }
        for (int i = 0; i < MT; ++i)
            for (int j = 0; j < NT; ++j) mma_16x8x8(acc[i][j], fa[i], fb[j]);
        if (tile + 1 < tiles) stash(1 - buf);  // the other buffer: last read before the barrier
        __syncthreads();
    }

    for (int i = 0; i < MT; ++i)
        for (int j = 0; j < NT; ++j)
            for (int e = 0; e < 4; ++e) {
                const long long row = row0 + wm + 16 * i + g + 8 * (e / 2);
                const long long col = col0 + wn + 8 * j + 2 * t + e % 2;
                if (row < m && col < n) c[row * n + col] = (T)acc[i][j][e];
            }
}
