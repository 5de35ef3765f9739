// Twin of prototypes/add_rmsnorm.py: h = x + residual, y = h * rstd * w, rstd =
// 1 / sqrt(mean(h^2) + eps) per row; float arithmetic on __nv_bfloat16, __half or float
// storage, each output rounded once at its store. Every summation is the prototype's, in
// its order: a thread's packs t, t + tx, ... column by column, then its tail column, a
// warp butterfly (xor 16..1), the row's warps left to right.
//
// What the kernels pay for, and why (16384x4096, an H100: 132 SMs, 64K registers each):
// - 16-byte loads and stores (Pack<T>, 8 bfloat16 or 4 float) whenever every row pointer
//   is 16-byte aligned (cols a multiple of the pack on torch's allocations), the same packs
//   element by element otherwise. A thread issues the packs of every tensor it reads for
//   a row before using any.
// - A row's packs stay in registers (float h, and dy, dh as stored) from the reduction to
//   the output pass, so the row crosses device memory once each way. A thread holds
//   FWD_ELEMS (16) elements of a row in the forward, BWD_ELEMS (8) in the backward (two
//   float packs, one bfloat16/float16 pack): 256 threads a row at 4096 columns forward,
//   512 backward, so two blocks (two rows) are in flight per SM. Rows longer than 1024 threads' worth are walked in
//   chunks and re-read (from L2) for the output pass.
// - Registers buy occupancy: __launch_bounds__(1024) caps both row kernels at 64
//   registers (1024 threads per SM at least, where the 128 registers of holding 32 floats
//   of h and of a float64 weight-gradient sum gave 512 and spilled), so that while some
//   blocks wait at a row's barrier others have their loads in flight. In-row indices are
//   32-bit (a row has fewer than 2^31 columns), the row's base pointer 64-bit.
// - Short rows (cols <= 32 threads' worth) get one warp each, ty rows per block of 128
//   threads: the reduction is then a butterfly and one barrier, the same code as long rows.
// - One barrier pair per row (the warps' sums through 32 floats of shared memory).
// - The backward moves 4 row-sized tensors for float (h read, dy, dh read, dx written),
//   5 for bfloat16/float16 (x and residual in place of h, whose stored copy is rounded:
//   ReadsH says why), where it moved 6: dx is written once and the launcher returns it as
//   both inputs' gradient (autograd gives each its own .grad). One pass over the rows, and
//   the weight gradient without atomics: a persistent grid (1024 threads' worth of blocks
//   per SM, what 64 registers keep resident) walks the rows, each thread summing the
//   weight gradient of its own columns over its rows in float registers (about 62 rows
//   at 4096 columns), one float partial row per block row at the end (264 x 4096
//   floats: under 1% of the traffic); add_rmsnorm_bwd_w sums them per
//   column in float64 in blocks of 16 x 32 threads (256 blocks at 4096 columns).
// - ptxas (NVRTC 13.5, sm_90, 64 registers): the aligned one-chunk paths alone compile to
//   44 (bfloat16) and 62 (float) registers without spills in the forward, and in the
//   backward to 61 (float) and 64 (bfloat16, float16) without spills (before, reading x
//   and residual and writing dres: 64 with 12/20 bytes of spill stores/loads for
//   bfloat16, 276/240 for float). The whole backward kernel spills 8/16 (float), 20/16
//   (bfloat16) and 8/8 (float16) bytes, in its unaligned and chunked paths. One float
//   pack a thread (1024 threads a row, one row an SM: 63 registers, no spills; 644 us
//   against 793 last round, when it read 6 tensors) is kept complete in
//   scripts/tuning/add_rmsnorm_bwd_one_pack.cu for a timing run.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define FWD_ELEMS 16  // elements of a row a thread holds in the forward
#define BWD_ELEMS 8   // and in the backward: two float packs, one bfloat16/float16 pack
#define WARP 32
#define MAX_WARPS 32
#define FULL_MASK 0xffffffffu
#define W_COLS 16
#define W_ROWS 32
#define ROW_THREADS_MAX 1024  // the launchers' largest block; caps registers at 64

// The prototype's float32(v).
template <typename T> __device__ inline float widen(T v) { return (float)v; }
template <> __device__ inline float widen<__half>(__half v) { return __half2float(v); }
template <> __device__ inline float widen<__nv_bfloat16>(__nv_bfloat16 v) {
    return __bfloat162float(v);
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

template <typename T>
__device__ inline Pack<T> load_pack(const T* row, int p, bool vector) {
    if (vector) return reinterpret_cast<const Pack<T>*>(row)[p];
    Pack<T> v;
#pragma unroll
    for (int j = 0; j < Pack<T>::N; ++j) v.v[j] = row[p * Pack<T>::N + j];
    return v;
}

template <typename T>
__device__ inline void store_pack(T* row, int p, const Pack<T>& v, bool vector) {
    if (vector) {
        reinterpret_cast<Pack<T>*>(row)[p] = v;
        return;
    }
#pragma unroll
    for (int j = 0; j < Pack<T>::N; ++j) row[p * Pack<T>::N + j] = v.v[j];
}

__device__ inline float warp_sum(float v) {
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}

// The sum of value over this thread's row (threadIdx.y); every thread of the block calls it.
__device__ inline float row_sum(float* part, float value) {
    const float v = warp_sum(value);
    const int warps = blockDim.x / WARP;
    const int first = threadIdx.y * warps;
    if (threadIdx.x % WARP == 0) part[first + threadIdx.x / WARP] = v;
    __syncthreads();
    float total = part[first];
    for (int i = 1; i < warps; ++i) total += part[first + i];
    __syncthreads();  // read before the next row's sums overwrite it
    return total;
}

// h = x + residual in float for the P packs of the chunk starting at pack p0 (stride
// blockDim.x); all loads are issued before any is used.
template <int P, typename T>
__device__ inline void load_h(const T* xr, const T* rr, int p0, int packs, bool vector,
                              float (&hv)[P][Pack<T>::N]) {
    Pack<T> a[P], b[P];
#pragma unroll
    for (int u = 0; u < P; ++u) {
        const int p = p0 + u * (int)blockDim.x;
        if (p < packs) {
            a[u] = load_pack(xr, p, vector);
            b[u] = load_pack(rr, p, vector);
        }
    }
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (p0 + u * (int)blockDim.x < packs)
#pragma unroll
            for (int j = 0; j < Pack<T>::N; ++j) hv[u][j] = widen(a[u].v[j]) + widen(b[u].v[j]);
}

// The packs of one chunk of a tensor, loads issued together.
template <int P, typename T>
__device__ inline void load_chunk(const T* row, int p0, int packs, bool vector, Pack<T> (&v)[P]) {
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (p0 + u * (int)blockDim.x < packs) v[u] = load_pack(row, p0 + u * (int)blockDim.x, vector);
}

// The backward's h of the P packs of a chunk, in float: the saved h itself for float
// storage (the h the norm used, bit for bit), x + residual for bfloat16 and float16, whose
// stored h is rounded once: the weight gradient sums g * h over the rows, and that rounding
// (2^-9 relative for bfloat16) left it outside the half dtypes' tolerances (portkit check,
// bfloat16-4x1000 and float16-150x41), so those read two tensors, float reads one.
template <typename T> struct ReadsH { static constexpr bool value = false; };
template <> struct ReadsH<float> { static constexpr bool value = true; };

template <int P, typename T>
__device__ inline void load_bwd_h(const T* xr, const T* rr, const T* hr, int p0, int packs,
                                  bool vector, float (&hv)[P][Pack<T>::N]) {
    if (ReadsH<T>::value) {
        Pack<T> a[P];
        load_chunk(hr, p0, packs, vector, a);
#pragma unroll
        for (int u = 0; u < P; ++u)
#pragma unroll
            for (int j = 0; j < Pack<T>::N; ++j) hv[u][j] = widen(a[u].v[j]);
    } else {
        load_h(xr, rr, p0, packs, vector, hv);
    }
}

template <typename T>
__device__ inline float bwd_h(const T* xr, const T* rr, const T* hr, int c) {
    return ReadsH<T>::value ? widen(hr[c]) : widen(xr[c]) + widen(rr[c]);
}

// One row of the forward. FITS: the row is one chunk (packs <= blockDim.x x P), its h
// stays in registers for the output pass; otherwise chunks are re-read for it.
template <typename T, bool FITS>
__device__ inline void fwd_row(const T* xr, const T* rr, const T* w, T* yr, T* hr, float* rstd,
                               long long row, bool active, int cols, float eps, float* part) {
    constexpr int W = Pack<T>::N;
    constexpr int P = FWD_ELEMS / W;
    const int tx = threadIdx.x;
    const int nx = blockDim.x;
    const int packs = cols / W;
    const int tail = packs * W;
    const bool vector = aligned16(xr) && aligned16(rr) && aligned16(yr) && aligned16(hr) &&
                        aligned16(w);
    float hv[P][W];
    float s = 0.0f;
    if (active) {
        for (int p0 = tx; p0 < packs; p0 += nx * P) {
            load_h(xr, rr, p0, packs, vector, hv);
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const int p = p0 + u * nx;
                if (p < packs) {
                    Pack<T> out;
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        out.v[j] = (T)hv[u][j];
                        s += hv[u][j] * hv[u][j];
                    }
                    store_pack(hr, p, out, vector);
                }
            }
            if (FITS) break;
        }
        for (int c = tail + tx; c < cols; c = cols) {  // one tail column at most
            const float v = widen(xr[c]) + widen(rr[c]);
            hr[c] = (T)v;
            s += v * v;
        }
    }
    const float r = 1.0f / sqrtf(row_sum(part, s) / (float)cols + eps);
    if (!active) return;  // after the last barrier
    for (int p0 = tx; p0 < packs; p0 += nx * P) {
        if (!FITS) load_h(xr, rr, p0, packs, vector, hv);
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const int p = p0 + u * nx;
            if (p < packs) {
                const Pack<T> wp = load_pack(w, p, vector);
                Pack<T> out;
#pragma unroll
                for (int j = 0; j < W; ++j) out.v[j] = (T)(hv[u][j] * r * widen(wp.v[j]));
                store_pack(yr, p, out, vector);
            }
        }
        if (FITS) break;
    }
    for (int c = tail + tx; c < cols; c = cols)  // one tail column at most
        yr[c] = (T)((widen(xr[c]) + widen(rr[c])) * r * widen(w[c]));
    if (tx == 0) rstd[row] = r;
}

template <typename T>
__global__ void __launch_bounds__(ROW_THREADS_MAX)
    add_rmsnorm_fwd(const T* __restrict__ x, const T* __restrict__ residual,
                    const T* __restrict__ w, T* __restrict__ y, T* __restrict__ h,
                    float* __restrict__ rstd, long long rows, long long cols, float eps) {
    __shared__ float part[MAX_WARPS];
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    const bool active = row < rows;  // a whole row of threads is idle past the last row
    const long long base = (active ? row : 0) * cols;
    const int n = (int)cols;
    if (n / Pack<T>::N <= (int)blockDim.x * (FWD_ELEMS / Pack<T>::N))
        fwd_row<T, true>(x + base, residual + base, w, y + base, h + base, rstd, row, active, n,
                         eps, part);
    else
        fwd_row<T, false>(x + base, residual + base, w, y + base, h + base, rstd, row, active, n,
                          eps, part);
}

// The backward's rows, walked by a persistent grid; pr is this thread row's partial row of
// the weight gradient. FITS: the row is one chunk: h, dy and dh stay in registers as stored
// (16-byte packs, widened where used) between the reduction and the output pass, and each
// thread sums the weight gradient of its columns in registers (acc), stored to pr at the
// end. Otherwise chunks are re-read and the sums are kept in pr itself (the same additions
// in the same order).
template <typename T, bool FITS>
__device__ inline void bwd_rows(const T* x, const T* residual, const T* h, const T* w,
                                const T* dy, const T* dh, const float* rstd, T* dx, float* pr,
                                long long rows, int cols, float* sums) {
    constexpr int W = Pack<T>::N;
    constexpr int P = BWD_ELEMS / W > 0 ? BWD_ELEMS / W : 1;
    const int tx = threadIdx.x;
    const int nx = blockDim.x;
    const long long ny = blockDim.y;
    const int packs = cols / W;
    const int tail = packs * W;

    float acc[P][W];
    float acc_tail = 0.0f;  // a thread owns at most one tail column (cols % W < 32)
#pragma unroll
    for (int u = 0; u < P; ++u)
#pragma unroll
        for (int j = 0; j < W; ++j) acc[u][j] = 0.0f;
    if (!FITS)
        for (int c = tx * W; c < tail; c += nx * W)
            for (int j = 0; j < W; ++j) pr[c + j] = 0.0f;

    float hv[P][W];        // h of the thread's packs of the row, in float
    Pack<T> gp[P], up[P];  // dy and dh, as stored
    const long long groups = (rows + ny - 1) / ny;
#pragma unroll 1  // one row at a time: blocks per SM, not unrolled rows, hide the latency
    for (long long group = blockIdx.x; group < groups; group += gridDim.x) {
        const long long row = group * ny + threadIdx.y;
        const bool active = row < rows;
        const long long base = (active ? row : 0) * (long long)cols;
        const T *xr = x + base, *rr = residual + base, *hr = h + base;
        const T *dyr = dy + base, *dhr = dh + base;
        T* dxr = dx + base;
        const bool vector = (ReadsH<T>::value ? aligned16(hr) : aligned16(xr) && aligned16(rr)) &&
                            aligned16(dyr) && aligned16(dhr) && aligned16(dxr) && aligned16(w);
        float r = 0.0f, s = 0.0f;  // s: sum of g * hhat over the row, g = dy * w, hhat = h * r
        if (active) {
            r = rstd[row];
            for (int p0 = tx; p0 < packs; p0 += nx * P) {
                load_chunk(dyr, p0, packs, vector, gp);
                if (FITS) load_chunk(dhr, p0, packs, vector, up);  // in flight with the rest
                load_bwd_h(xr, rr, hr, p0, packs, vector, hv);
#pragma unroll
                for (int u = 0; u < P; ++u) {
                    const int p = p0 + u * nx;
                    if (p < packs) {
                        const Pack<T> wp = load_pack(w, p, vector);
#pragma unroll
                        for (int j = 0; j < W; ++j)
                            s += widen(gp[u].v[j]) * widen(wp.v[j]) * (hv[u][j] * r);
                    }
                }
                if (FITS) break;
            }
            for (int c = tail + tx; c < cols; c = cols)  // one tail column at most
                s += widen(dyr[c]) * widen(w[c]) * (bwd_h(xr, rr, hr, c) * r);
        }
        const float m = row_sum(sums, s) / (float)cols;
        if (!active) continue;  // the barriers of later rows are still met
        // dy stays in registers across the barrier as stored (4 registers a pack), not as
        // the floats of the reduction (8 for bfloat16/float16): the empty asm hides the
        // packs' values from the compiler, which would otherwise keep the widened copies and
        // spill at 64 registers.
#pragma unroll
        for (int u = 0; u < P; ++u) {
            unsigned* gw = reinterpret_cast<unsigned*>(&gp[u]);
#pragma unroll
            for (int q = 0; q < 4; ++q) asm volatile("" : "+r"(gw[q]));
        }
        for (int p0 = tx; p0 < packs; p0 += nx * P) {
            if (!FITS) {
                load_chunk(dyr, p0, packs, vector, gp);
                load_chunk(dhr, p0, packs, vector, up);
                load_bwd_h(xr, rr, hr, p0, packs, vector, hv);
            }
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const int p = p0 + u * nx;
                if (p < packs) {
                    const Pack<T> wp = load_pack(w, p, vector);
                    Pack<T> out;
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        const float g = widen(gp[u].v[j]);
                        const float hhat = hv[u][j] * r;
                        out.v[j] = (T)(r * (g * widen(wp.v[j]) - hhat * m) + widen(up[u].v[j]));
                        if (FITS)
                            acc[u][j] += g * hhat;
                        else
                            pr[p * W + j] += g * hhat;
                    }
                    store_pack(dxr, p, out, vector);
                }
            }
            if (FITS) break;
        }
        for (int c = tail + tx; c < cols; c = cols) {  // one tail column at most
            const float g = widen(dyr[c]);
            const float hhat = bwd_h(xr, rr, hr, c) * r;
            dxr[c] = (T)(r * (g * widen(w[c]) - hhat * m) + widen(dhr[c]));
            acc_tail += g * hhat;
        }
    }
    if (FITS)
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const int p = tx + u * nx;
            if (p < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) pr[p * W + j] = acc[u][j];
        }
    if (tail + tx < cols) pr[tail + tx] = acc_tail;
}

// dx is the gradient of both x and residual (h = x + residual): the launcher returns it
// for both, so the row is written once. h is read for float storage, x and residual for
// the half dtypes (ReadsH); the others are passed and not read.
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS_MAX)
    add_rmsnorm_bwd(const T* __restrict__ x, const T* __restrict__ residual,
                    const T* __restrict__ h, const T* __restrict__ w, const T* __restrict__ dy,
                    const T* __restrict__ dh, const float* __restrict__ rstd, T* __restrict__ dx,
                    float* __restrict__ part, long long rows, long long cols) {
    __shared__ float sums[MAX_WARPS];
    float* pr = part + ((long long)blockIdx.x * blockDim.y + threadIdx.y) * cols;
    const int n = (int)cols;
    constexpr int P = BWD_ELEMS / Pack<T>::N > 0 ? BWD_ELEMS / Pack<T>::N : 1;
    if (n / Pack<T>::N <= (int)blockDim.x * P)
        bwd_rows<T, true>(x, residual, h, w, dy, dh, rstd, dx, pr, rows, n, sums);
    else
        bwd_rows<T, false>(x, residual, h, w, dy, dh, rstd, dx, pr, rows, n, sums);
}

// dw[c]: the partial rows' column c summed in float64, 32 partials at a time, then the 32
// sums left to right.
template <typename T>
__global__ void add_rmsnorm_bwd_w(const float* __restrict__ part, T* __restrict__ dw,
                                  long long parts, long long cols) {
    __shared__ double sums[W_ROWS][W_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long c = (long long)blockIdx.x * W_COLS + tx;
    double s = 0.0;
    if (c < cols)
        for (long long p = ty; p < parts; p += W_ROWS) s += (double)part[p * cols + c];
    sums[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < cols) {
        for (int i = 1; i < W_ROWS; ++i) s += sums[i][tx];
        dw[c] = (T)(float)s;
    }
}
