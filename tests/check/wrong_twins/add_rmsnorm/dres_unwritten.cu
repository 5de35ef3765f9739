// WRONG TWIN add_rmsnorm/dres_unwritten: the backward stores the gradient of x and not the (equal) gradient of residual, a port that returned one gradient where the op has two inputs that receive it. A diff shows every element of the residual's gradient unwritten (NaN poison), the forward, dx and dw right.
// Twin of prototypes/add_rmsnorm.py: h = x + residual, y = h * rstd * w, rstd =
// 1 / sqrt(mean(h^2) + eps) per row; float arithmetic on __nv_bfloat16, __half or float
// storage, each output rounded once at its store. Every summation is the prototype's, in
// its order: a thread's packs t, t + tx, ... column by column, then its tail column, a
// warp butterfly (xor 16..1), the row's warps left to right.
//
// What the kernels pay for, and why (16384x4096 bfloat16, an H100):
// - 16-byte loads and stores (Pack<T>, 8 bfloat16 or 4 float) whenever every row pointer
//   is 16-byte aligned (cols a multiple of the pack on torch's allocations), the same packs
//   element by element otherwise. Each thread issues its PACKS_PER_THREAD packs of every
//   tensor it reads before using any: 4 x 16 bytes of x and of residual in flight per
//   thread in the forward, of x, residual and dy in the backward.
// - A row's packs stay in registers (float h, and dy) from the reduction to the output
//   pass, so the row crosses device memory once each way: the launcher gives a row
//   cdiv(packs, 4) threads rounded up to whole warps (128 threads at 4096 bfloat16 columns,
//   256 at 4096 float), so a thread owns at most 4 packs; rows longer than 1024 threads x 4
//   packs are walked in chunks and re-read (from L2) for the output pass.
// - Short rows (cols <= 32 x 4 packs) get one warp each, ty rows per block of 128 threads:
//   the reduction is then a butterfly and one barrier, the same code as long rows.
// - One barrier pair per row (the warps' sums through 32 floats of shared memory).
// - The weight gradient without atomics and without re-reading dy and h: a persistent grid
//   (512 threads' worth of blocks per SM) walks the rows, each thread keeping the sums of
//   its own columns in registers, one float partial row per block row at the end (528 x
//   4096 floats at 4096 bfloat16 columns on an H100, 2% of the backward's traffic);
//   add_rmsnorm_bwd_w sums them column by column in blocks of 16 x 32 threads (256 blocks
//   at 4096 columns: every SM busy).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define FWD_PACKS 4  // packs of 16 bytes a thread holds per row in the forward
#define BWD_PACKS 2  // and in the backward (x, residual, dy, dh: twice the registers)
#define WARP 32
#define MAX_WARPS 32
#define FULL_MASK 0xffffffffu
#define W_COLS 16
#define W_ROWS 32
#define FWD_THREADS 512
#define BWD_THREADS 512

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

// h = x + residual in float for the PACKS_PER_THREAD packs of the chunk starting at pack p0
// (stride blockDim.x); all loads are issued before any is used.
template <int P, typename T>
__device__ inline void load_h(const T* xr, const T* rr, long long p0, long long packs, bool vector,
                              float (&hv)[P][Pack<T>::N]) {
    Pack<T> a[P], b[P];
#pragma unroll
    for (int u = 0; u < P; ++u) {
        const long long p = p0 + (long long)u * blockDim.x;
        if (p < packs) {
            a[u] = load_pack(xr, p, vector);
            b[u] = load_pack(rr, p, vector);
        }
    }
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (p0 + (long long)u * blockDim.x < packs)
#pragma unroll
            for (int j = 0; j < Pack<T>::N; ++j) hv[u][j] = widen(a[u].v[j]) + widen(b[u].v[j]);
}

// The packs of one chunk of a tensor, loads issued together.
template <int P, typename T>
__device__ inline void load_chunk(const T* row, long long p0, long long packs, bool vector,
                                  Pack<T> (&v)[P]) {
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (p0 + (long long)u * blockDim.x < packs) v[u] = load_pack(row, p0 + u * blockDim.x, vector);
}

// One row of the forward. FITS: the row is one chunk (packs <= blockDim.x x PACKS), its h
// stays in registers for the output pass; otherwise chunks are re-read for it.
template <typename T, bool FITS>
__device__ inline void fwd_row(const T* xr, const T* rr, const T* w, T* yr, T* hr, float* rstd,
                               long long row, bool active, long long cols, float eps, float* part) {
    constexpr int W = Pack<T>::N;
    constexpr int P = FWD_PACKS;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long packs = cols / W;
    const long long tail = packs * W;
    const bool vector = aligned16(xr) && aligned16(rr) && aligned16(yr) && aligned16(hr) &&
                        aligned16(w);
    float hv[P][W];
    float s = 0.0f;
    if (active) {
        for (long long p0 = tx; p0 < packs; p0 += nx * P) {
            load_h(xr, rr, p0, packs, vector, hv);
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const long long p = p0 + u * nx;
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
        for (long long c = tail + tx; c < cols; c += nx) {
            const float v = widen(xr[c]) + widen(rr[c]);
            hr[c] = (T)v;
            s += v * v;
        }
    }
    const float r = 1.0f / sqrtf(row_sum(part, s) / (float)cols + eps);
    if (!active) return;  // after the last barrier
    for (long long p0 = tx; p0 < packs; p0 += nx * P) {
        if (!FITS) load_h(xr, rr, p0, packs, vector, hv);
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = p0 + u * nx;
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
    for (long long c = tail + tx; c < cols; c += nx)
        yr[c] = (T)((widen(xr[c]) + widen(rr[c])) * r * widen(w[c]));
    if (tx == 0) rstd[row] = r;
}

// At most FWD_THREADS threads a block (the launcher's limit): 128 registers a thread.
template <typename T>
__global__ void __launch_bounds__(FWD_THREADS) add_rmsnorm_fwd(const T* __restrict__ x, const T* __restrict__ residual,
                                const T* __restrict__ w, T* __restrict__ y, T* __restrict__ h,
                                float* __restrict__ rstd, long long rows, long long cols,
                                float eps) {
    __shared__ float part[MAX_WARPS];
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    const bool active = row < rows;  // a whole row of threads is idle past the last row
    const long long base = (active ? row : 0) * cols;
    if (cols / Pack<T>::N <= (long long)blockDim.x * FWD_PACKS)
        fwd_row<T, true>(x + base, residual + base, w, y + base, h + base, rstd, row, active, cols,
                         eps, part);
    else
        fwd_row<T, false>(x + base, residual + base, w, y + base, h + base, rstd, row, active,
                          cols, eps, part);
}

// The backward's rows, walked by a persistent grid. Each thread adds the weight gradient of
// the columns it owns over its rows: in shared memory (acc, laid out so that a warp's 32
// lanes hit 32 banks) when the launcher gave it room, else in its partial row pr of
// global memory; pr holds the sums at the end either way. FITS: the row is one chunk, and
// dy and dh stay in registers from the first pass too.
template <typename T, bool FITS>
__device__ inline void bwd_rows(const T* x, const T* residual, const T* w, const T* dy,
                                const T* dh, const float* rstd, T* dx, T* dres, double* pr,
                                double* acc, long long rows, long long cols, float* sums) {
    constexpr int W = Pack<T>::N;
    constexpr int P = BWD_PACKS;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long ny = blockDim.y;
    const long long packs = cols / W;
    const long long tail = packs * W;

    double acc_tail = 0.0;  // a thread owns at most one tail column (cols % W < 32)
    if (acc) {
#pragma unroll
        for (int i = 0; i < P * W; ++i) acc[i * nx + tx] = 0.0;
    } else {
        for (long long c = tx * W; c < tail; c += nx * W)
            for (int j = 0; j < W; ++j) pr[c + j] = 0.0;
    }

    float hv[P][W];           // h of the thread's packs of the row, in float
    Pack<T> gp[P], up[P];     // dy and dh, as stored
    const long long groups = (rows + ny - 1) / ny;
    for (long long group = blockIdx.x; group < groups; group += gridDim.x) {
        const long long row = group * ny + threadIdx.y;
        const bool active = row < rows;
        const long long base = (active ? row : 0) * cols;
        const T *xr = x + base, *rr = residual + base, *dyr = dy + base, *dhr = dh + base;
        T *dxr = dx + base, *drr = dres + base;
        const bool vector = aligned16(xr) && aligned16(rr) && aligned16(dyr) && aligned16(dhr) &&
                            aligned16(dxr) && aligned16(drr) && aligned16(w);
        float r = 0.0f, s = 0.0f;  // s: sum of g * hhat over the row, g = dy * w, hhat = h * r
        if (active) {
            r = rstd[row];
            for (long long p0 = tx; p0 < packs; p0 += nx * P) {
                load_chunk(dyr, p0, packs, vector, gp);
                if (FITS) load_chunk(dhr, p0, packs, vector, up);  // in flight with the rest
                load_h(xr, rr, p0, packs, vector, hv);
#pragma unroll
                for (int u = 0; u < P; ++u) {
                    const long long p = p0 + u * nx;
                    if (p < packs) {
                        const Pack<T> wp = load_pack(w, p, vector);
#pragma unroll
                        for (int j = 0; j < W; ++j)
                            s += widen(gp[u].v[j]) * widen(wp.v[j]) * (hv[u][j] * r);
                    }
                }
                if (FITS) break;
            }
            for (long long c = tail + tx; c < cols; c += nx) {
                const float v = widen(xr[c]) + widen(rr[c]);
                s += widen(dyr[c]) * widen(w[c]) * (v * r);
            }
        }
        const float m = row_sum(sums, s) / (float)cols;
        if (!active) continue;  // the barriers of later rows are still met
        for (long long p0 = tx; p0 < packs; p0 += nx * P) {
            if (!FITS) {
                load_chunk(dyr, p0, packs, vector, gp);
                load_chunk(dhr, p0, packs, vector, up);
                load_h(xr, rr, p0, packs, vector, hv);
            }
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const long long p = p0 + u * nx;
                if (p < packs) {
                    const Pack<T> wp = load_pack(w, p, vector);
                    // acc only ever serves one chunk: the launcher gives it room only if FITS
                    double* dw = acc ? acc + u * W * nx + tx : pr + p * W;
                    const long long step = acc ? nx : 1;
                    Pack<T> out;
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        const float g = widen(gp[u].v[j]);
                        const float hhat = hv[u][j] * r;
                        out.v[j] = (T)(r * (g * widen(wp.v[j]) - hhat * m) + widen(up[u].v[j]));
                        dw[j * step] += (double)(g * hhat);
                    }
                    store_pack(dxr, p, out, vector);
                    // BUG: the residual's gradient is never stored
                }
            }
            if (FITS) break;
        }
        for (long long c = tail + tx; c < cols; c += nx) {
            const float g = widen(dyr[c]);
            const float hhat = (widen(xr[c]) + widen(rr[c])) * r;
            const T d = (T)(r * (g * widen(w[c]) - hhat * m) + widen(dhr[c]));
            dxr[c] = d;
            acc_tail += (double)(g * hhat);
        }
    }
    if (acc)
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = tx + u * nx;
            if (p < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) pr[p * W + j] = acc[(u * W + j) * nx + tx];
        }
    if (tail + tx < cols) pr[tail + tx] = acc_tail;
}

// At most BWD_THREADS threads a block (the launcher's limit): 128 registers a thread.
template <typename T>
__global__ void __launch_bounds__(BWD_THREADS) add_rmsnorm_bwd(const T* __restrict__ x, const T* __restrict__ residual,
                                const T* __restrict__ w, const T* __restrict__ dy,
                                const T* __restrict__ dh, const float* __restrict__ rstd,
                                T* __restrict__ dx, T* __restrict__ dres, double* __restrict__ part,
                                long long rows, long long cols, long long in_shared) {
    __shared__ float sums[MAX_WARPS];
    extern __shared__ double dynamic[];  // in_shared: BWD_PACKS x W doubles per thread
    double* pr = part + ((long long)blockIdx.x * blockDim.y + threadIdx.y) * cols;
    double* acc = in_shared ? dynamic + threadIdx.y * BWD_PACKS * Pack<T>::N * blockDim.x
                           : nullptr;
    if (cols / Pack<T>::N <= (long long)blockDim.x * BWD_PACKS)
        bwd_rows<T, true>(x, residual, w, dy, dh, rstd, dx, dres, pr, acc, rows, cols, sums);
    else
        bwd_rows<T, false>(x, residual, w, dy, dh, rstd, dx, dres, pr, acc, rows, cols, sums);
}

template <typename T>
__global__ void add_rmsnorm_bwd_w(const double* __restrict__ part, T* __restrict__ dw,
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
