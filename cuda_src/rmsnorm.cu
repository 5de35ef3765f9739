// Twin of prototypes/rmsnorm.py: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) per
// row; float arithmetic on __nv_bfloat16, __half or float storage, each output rounded once
// at its store. Every summation is the prototype's, in its order: a thread's packs t,
// t + nx, ... column by column, then its tail column, a warp butterfly (xor 16..1), the
// row's warps left to right.
//
// What the kernels pay for, and why (16384x4096 bfloat16, an H100):
// - 16-byte loads and stores (Pack<T>, 8 bfloat16 or 4 float) whenever the row pointers are
//   16-byte aligned (the forward: this row's; the backward: every row's, cols a multiple of
//   the pack), the same packs element by element otherwise, each width a compiled copy of
//   its own (VECTOR); a thread issues all its packs of a row before using any.
// - A row stays in registers (float) from the reduction to the output pass, so it crosses
//   device memory once each way: the launcher gives a row cdiv(cols, FWD_ELEMS) threads in
//   whole warps (256 at 4096 columns), each owning at most 16 columns; rows longer than
//   MAX_THREADS x FWD_ELEMS are walked in chunks and re-read (from L2) for the output pass.
// - One barrier pair per row (the warps' sums through 32 floats of shared memory).
// - The weight gradient without atomics and without a second read of x and dy (the old
//   kernel looped one thread per column over every row: 20x slower than the row pass):
//   a persistent grid (BWD_THREADS_PER_SM threads' worth of blocks per SM) walks the rows,
//   each thread keeping its columns' sums in float registers over the rows its block walks
//   (62-264), one partial row per block at the end, in double (264 x 4096 doubles at 4096
//   columns on an H100: 2% of the backward's traffic); rmsnorm_bwd_w sums them column by
//   column in double, in blocks of 16 x 32 threads (256 blocks at 4096 columns: every SM
//   busy). The per-thread sums were double: the bfloat16 backward is issue-bound (ncu,
//   2026-11-28), and a double sum costs a conversion and a double add an element; in float,
//   side by side on an H200, 167.5 -> 157.7 us at 16384x4096 and 63.0 -> 59.9 at
//   4096x4096 (torch.compile's kernel sums in float32 over 16 rows a program). A row too
//   wide for registers (!FITS) sums into its partial row, rounded to float at each add.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define FWD_ELEMS 16  // columns a thread holds per row in the forward
#define BWD_ELEMS 8   // and in the backward (x, dy and the weight gradient sums)
#define MAX_THREADS 512
#define WARP 32
#define MAX_WARPS 32
#define FULL_MASK 0xffffffffu
#define W_COLS 16
#define W_ROWS 32

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

// The load width (VECTOR: 16-byte packs, else element by element) is a template parameter
// of the row code, chosen once by the kernel, so each compiled copy issues only its own
// loads. Chosen per row inside the loops, the compiler kept both and predicated one off:
// the bfloat16 backward issued 46 instructions an element against torch.compile's 16
// (ncu source counters, H200, 2026-11-28).
// Every row of the backward's x, dy and dx, and w, 16-byte aligned.
template <typename T>
__device__ inline bool bwd_aligned16(const T* x, const T* w, const T* dy, const T* dx,
                                     long long cols) {
    return cols % Pack<T>::N == 0 && aligned16(x) && aligned16(w) && aligned16(dy) &&
           aligned16(dx);
}

template <typename T>
__device__ inline Pack<T> load_pack(const T* row, long long p, bool vector) {
    if (vector) return reinterpret_cast<const Pack<T>*>(row)[p];
    Pack<T> v;
#pragma unroll
    for (int j = 0; j < Pack<T>::N; ++j) v.v[j] = row[p * Pack<T>::N + j];
    return v;
}

template <typename T>
__device__ inline void store_pack(T* row, long long p, const Pack<T>& v, bool vector) {
    if (vector) {
        reinterpret_cast<Pack<T>*>(row)[p] = v;
        return;
    }
#pragma unroll
    for (int j = 0; j < Pack<T>::N; ++j) row[p * Pack<T>::N + j] = v.v[j];
}

// The packs p0, p0 + nx, ... of one chunk of a row, widened; loads issued together.
template <int P, typename T>
__device__ inline void load_chunk(const T* row, long long p0, long long packs, bool vector,
                                  float (&v)[P][Pack<T>::N]) {
    Pack<T> raw[P];
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (p0 + (long long)u * blockDim.x < packs) raw[u] = load_pack(row, p0 + u * blockDim.x, vector);
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (p0 + (long long)u * blockDim.x < packs)
#pragma unroll
            for (int j = 0; j < Pack<T>::N; ++j) v[u][j] = widen(raw[u].v[j]);
}

__device__ inline float warp_sum(float v) {
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}

// The sum of value over the block (one row); every thread calls it and gets the sum.
__device__ inline float row_sum(float* part, float value) {
    const float v = warp_sum(value);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = v;
    __syncthreads();
    float total = part[0];
    for (int i = 1; i < (int)(blockDim.x / WARP); ++i) total += part[i];
    __syncthreads();  // read before the next row's sums overwrite it
    return total;
}

// One row. FITS: the row is one chunk (packs <= blockDim.x x P), held in registers.
template <typename T, bool FITS, bool VECTOR>
__device__ inline void fwd_row(const T* xr, const T* w, T* yr, float* rstd, long long row,
                               long long cols, float eps, float* part) {
    constexpr int W = Pack<T>::N;
    constexpr int P = FWD_ELEMS / W;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long packs = cols / W;
    const long long tail = packs * W;
    constexpr bool vector = VECTOR;
    float v[P][W];
    float s = 0.0f;
    for (long long p0 = tx; p0 < packs; p0 += nx * P) {
        load_chunk(xr, p0, packs, vector, v);
#pragma unroll
        for (int u = 0; u < P; ++u)
            if (p0 + u * nx < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) s += v[u][j] * v[u][j];
        if (FITS) break;
    }
    for (long long c = tail + tx; c < cols; c += nx) {
        const float a = widen(xr[c]);
        s += a * a;
    }
    const float r = 1.0f / sqrtf(row_sum(part, s) / (float)cols + eps);
    for (long long p0 = tx; p0 < packs; p0 += nx * P) {
        if (!FITS) load_chunk(xr, p0, packs, vector, v);
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = p0 + u * nx;
            if (p < packs) {
                const Pack<T> wp = load_pack(w, p, vector);
                Pack<T> out;
#pragma unroll
                for (int j = 0; j < W; ++j) out.v[j] = (T)(v[u][j] * r * widen(wp.v[j]));
                store_pack(yr, p, out, vector);
            }
        }
        if (FITS) break;
    }
    for (long long c = tail + tx; c < cols; c += nx) yr[c] = (T)(widen(xr[c]) * r * widen(w[c]));
    if (tx == 0) rstd[row] = r;
}

template <typename T>
__global__ void __launch_bounds__(MAX_THREADS)
    rmsnorm_fwd(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                float* __restrict__ rstd, long long cols, float eps) {
    __shared__ float part[MAX_WARPS];
    const long long row = blockIdx.x;
    const long long base = row * cols;
    const bool fits = cols / Pack<T>::N <= (long long)blockDim.x * (FWD_ELEMS / Pack<T>::N);
    const bool vector = aligned16(x + base) && aligned16(out + base) && aligned16(w);
    if (fits && vector)
        fwd_row<T, true, true>(x + base, w, out + base, rstd, row, cols, eps, part);
    else if (fits)
        fwd_row<T, true, false>(x + base, w, out + base, rstd, row, cols, eps, part);
    else if (vector)
        fwd_row<T, false, true>(x + base, w, out + base, rstd, row, cols, eps, part);
    else
        fwd_row<T, false, false>(x + base, w, out + base, rstd, row, cols, eps, part);
}

// The backward's rows, walked by a persistent grid, one row per block at a time. Each
// thread adds the weight gradient of the columns it owns over its rows: in registers when
// the row is one chunk (FITS), else in the block's partial row pr of global memory; pr
// holds the sums at the end either way.
template <typename T, bool FITS, bool VECTOR>
__device__ inline void bwd_rows(const T* x, const T* w, const T* dy, const float* rstd, T* dx,
                                double* pr, long long rows, long long cols, float* sums) {
    constexpr int W = Pack<T>::N;
    constexpr int P = BWD_ELEMS / W;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long packs = cols / W;
    const long long tail = packs * W;

    float acc[P][W];  // FITS: this thread's columns' sums (float: see the header)
    float acc_tail = 0.0f;  // a thread owns at most one tail column (cols % W < 32)
#pragma unroll
    for (int u = 0; u < P; ++u)
#pragma unroll
        for (int j = 0; j < W; ++j) acc[u][j] = 0.0;
    if (!FITS)
        for (long long p = tx; p < packs; p += nx)
            for (int j = 0; j < W; ++j) pr[p * W + j] = 0.0;

    float xv[P][W], gv[P][W];  // x and dy of the thread's packs, in float
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const long long base = row * cols;
        const T *xr = x + base, *dyr = dy + base;
        T* dxr = dx + base;
        constexpr bool vector = VECTOR;
        const float r = rstd[row];
        float s = 0.0f;  // sum of g * w * xhat over the row, g = dy, xhat = x * r
        for (long long p0 = tx; p0 < packs; p0 += nx * P) {
            load_chunk(dyr, p0, packs, vector, gv);
            load_chunk(xr, p0, packs, vector, xv);
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const long long p = p0 + u * nx;
                if (p < packs) {
                    const Pack<T> wp = load_pack(w, p, vector);
#pragma unroll
                    for (int j = 0; j < W; ++j) s += gv[u][j] * widen(wp.v[j]) * (xv[u][j] * r);
                }
            }
            if (FITS) break;
        }
        for (long long c = tail + tx; c < cols; c += nx)
            s += widen(dyr[c]) * widen(w[c]) * (widen(xr[c]) * r);
        const float m = row_sum(sums, s) / (float)cols;
        for (long long p0 = tx; p0 < packs; p0 += nx * P) {
            if (!FITS) {
                load_chunk(dyr, p0, packs, vector, gv);
                load_chunk(xr, p0, packs, vector, xv);
            }
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const long long p = p0 + u * nx;
                if (p < packs) {
                    const Pack<T> wp = load_pack(w, p, vector);
                    Pack<T> out;
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        const float g = gv[u][j];
                        const float xhat = xv[u][j] * r;
                        out.v[j] = (T)(r * (g * widen(wp.v[j]) - xhat * m));
                        if (FITS)
                            acc[u][j] += g * xhat;
                        else
                            pr[p * W + j] = (double)((float)pr[p * W + j] + g * xhat);
                    }
                    store_pack(dxr, p, out, vector);
                }
            }
            if (FITS) break;
        }
        for (long long c = tail + tx; c < cols; c += nx) {
            const float g = widen(dyr[c]);
            const float xhat = widen(xr[c]) * r;
            dxr[c] = (T)(r * (g * widen(w[c]) - xhat * m));
            acc_tail += g * xhat;
        }
    }
    if (FITS)
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = tx + u * nx;
            if (p < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) pr[p * W + j] = (double)acc[u][j];
        }
    if (tail + tx < cols) pr[tail + tx] = (double)acc_tail;
}

// A row's raw packs of x and dy and their tail elements, in flight while the block
// reduces the previous row.
template <typename T, int P>
struct BwdLoads {
    Pack<T> x[P], dy[P];
    T x_tail, dy_tail;
    float r;
};

// Issues the loads of one row's packs tx, tx + nx, ... and tail column; nothing waits on
// them until the row is used.
template <typename T, int P>
__device__ inline void issue_bwd_row(const T* x, const T* dy, const float* rstd, long long row,
                                     long long cols, bool vector,
                                     BwdLoads<T, P>& in) {
    const long long nx = blockDim.x, tx = threadIdx.x, base = row * cols;
    const long long packs = cols / Pack<T>::N;
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (tx + u * nx < packs) {
            in.dy[u] = load_pack(dy + base, tx + u * nx, vector);
            in.x[u] = load_pack(x + base, tx + u * nx, vector);
        }
    const long long c = packs * Pack<T>::N + tx;
    if (c < cols) {
        in.dy_tail = dy[base + c];
        in.x_tail = x[base + c];
    }
    in.r = rstd[row];
}

// bwd_rows<T, true> software-pipelined: the next row's loads are issued before this row's
// reduction, so its bytes are in flight through the barriers and the output pass (one
// row a block at a time left the loads idle there: 55% of copy bandwidth at float32
// 16384x4096 on an H200, torch.compile's kernels 88%, 2026-11-28). Each row's arithmetic
// is bwd_rows<T, true>'s, in its order. (A bfloat16 row held 16 columns a thread this way,
// its weight-gradient sums in shared memory to stay at 2 blocks of 256 an SM, as
// torch.compile's kernel runs: 180 us against rmsnorm_bwd's 163.5 at 16384x4096 on an
// H200, 2026-11-28; removed.)
template <typename T, bool VECTOR>
__device__ inline void bwd_rows_held(const T* x, const T* w, const T* dy, const float* rstd,
                                     T* dx, double* pr, long long rows, long long cols,
                                     float* sums) {
    constexpr int W = Pack<T>::N;
    constexpr int P = BWD_ELEMS / W;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long packs = cols / W;
    const long long tail = packs * W;
    const bool has_tail = tail + tx < cols;  // a thread owns at most one tail column
    constexpr bool vector = VECTOR;

    float acc[P][W];  // this thread's columns' sums (float: see the header)
    float acc_tail = 0.0f;
#pragma unroll
    for (int u = 0; u < P; ++u)
#pragma unroll
        for (int j = 0; j < W; ++j) acc[u][j] = 0.0;

    BwdLoads<T, P> in;
    long long row = blockIdx.x;
    if (row < rows) issue_bwd_row(x, dy, rstd, row, cols, vector, in);
    for (; row < rows; row += gridDim.x) {
        const long long base = row * cols;
        // This row's packs as loaded, widened where used (float's widen is the identity:
        // the same loads and stores as holding a float copy of them)
        const BwdLoads<T, P> cur = in;
        const float gt = has_tail ? widen(cur.dy_tail) : 0.0f;
        const float xt = has_tail ? widen(cur.x_tail) : 0.0f;
        const float r = cur.r;
        const long long next = row + gridDim.x;  // its loads fly while this row reduces
        if (next < rows) issue_bwd_row(x, dy, rstd, next, cols, vector, in);

        float s = 0.0f;  // sum of g * w * xhat over the row, g = dy, xhat = x * r
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = tx + u * nx;
            if (p < packs) {
                const Pack<T> wp = load_pack(w, p, vector);
#pragma unroll
                for (int j = 0; j < W; ++j)
                    s += widen(cur.dy[u].v[j]) * widen(wp.v[j]) * (widen(cur.x[u].v[j]) * r);
            }
        }
        if (has_tail) s += gt * widen(w[tail + tx]) * (xt * r);
        const float m = row_sum(sums, s) / (float)cols;
        T* dxr = dx + base;
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = tx + u * nx;
            if (p < packs) {
                const Pack<T> wp = load_pack(w, p, vector);
                Pack<T> out;
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    const float g = widen(cur.dy[u].v[j]);
                    const float xhat = widen(cur.x[u].v[j]) * r;
                    out.v[j] = (T)(r * (g * widen(wp.v[j]) - xhat * m));
                    acc[u][j] += g * xhat;
                }
                store_pack(dxr, p, out, vector);
            }
        }
        if (has_tail) {
            const float xhat = xt * r;
            dxr[tail + tx] = (T)(r * (gt * widen(w[tail + tx]) - xhat * m));
            acc_tail += gt * xhat;
        }
    }
#pragma unroll
    for (int u = 0; u < P; ++u) {
        const long long p = tx + u * nx;
        if (p < packs)
#pragma unroll
            for (int j = 0; j < W; ++j) pr[p * W + j] = (double)acc[u][j];
    }
    if (has_tail) pr[tail + tx] = (double)acc_tail;
}

// float: rows pipelined (bwd_rows_held); the 2-byte types keep bwd_rows (pipelined in this
// kernel, the bfloat16 one took 101 registers, not 64: one block of 512 an SM, not two,
// and ran slower).
template <typename T> struct PipelinedBwd { static constexpr bool value = false; };
template <> struct PipelinedBwd<float> { static constexpr bool value = true; };

template <typename T, bool VECTOR>
__device__ inline void bwd_kernel(const T* x, const T* w, const T* dy, const float* rstd,
                                  T* dx, double* pr, long long rows, long long cols,
                                  float* sums) {
    const bool fits = cols / Pack<T>::N <= (long long)blockDim.x * (BWD_ELEMS / Pack<T>::N);
    if (fits && PipelinedBwd<T>::value)
        bwd_rows_held<T, VECTOR>(x, w, dy, rstd, dx, pr, rows, cols, sums);
    else if (fits)
        bwd_rows<T, true, VECTOR>(x, w, dy, rstd, dx, pr, rows, cols, sums);
    else
        bwd_rows<T, false, VECTOR>(x, w, dy, rstd, dx, pr, rows, cols, sums);
}

template <typename T>
__global__ void __launch_bounds__(MAX_THREADS)
    rmsnorm_bwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ dy,
                const float* __restrict__ rstd, T* __restrict__ dx, double* __restrict__ part,
                long long rows, long long cols) {
    __shared__ float sums[MAX_WARPS];
    double* pr = part + (long long)blockIdx.x * cols;
    if (bwd_aligned16(x, w, dy, dx, cols))
        bwd_kernel<T, true>(x, w, dy, rstd, dx, pr, rows, cols, sums);
    else
        bwd_kernel<T, false>(x, w, dy, rstd, dx, pr, rows, cols, sums);
}

template <typename T>
__global__ void rmsnorm_bwd_w(const double* __restrict__ part, T* __restrict__ dw,
                              long long parts, long long cols) {
    __shared__ double sums[W_ROWS][W_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long c = (long long)blockIdx.x * W_COLS + tx;
    double s = 0.0;
    if (c < cols)
        for (long long p = ty; p < parts; p += W_ROWS) s += part[p * cols + c];
    sums[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < cols) {
        for (int i = 1; i < W_ROWS; ++i) s += sums[i][tx];
        dw[c] = (T)(float)s;
    }
}
