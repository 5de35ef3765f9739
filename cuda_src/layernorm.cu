// Twin of prototypes/layernorm.py: y = (x - mean) * rstd * w + b per row, each output
// rounded once at its store; xhat * w + b in float for the narrow types, double for double
// (the prototype's wide flag, here the Affine<T> type). The sums across threads are double
// for every dtype (__half, __nv_bfloat16, float, double storage); a thread's own partial
// sums are double too, except in the forward for __half and __nv_bfloat16 (Hold<T>, the
// prototype's narrow path, below). Every summation is the prototype's, in its order: a
// thread's packs t, t + nx, ... column by column, then its tail column, a warp butterfly
// (xor 16..1), the row's warps left to right.
//
// What the kernels pay for, and why (16384x4096 bfloat16 and 4096x4096 float, an H100):
// - 16-byte loads and stores (Pack<T>: 8 bfloat16, 4 float, 2 double) whenever every row
//   pointer is 16-byte aligned, the same packs element by element otherwise; a thread
//   issues all its packs of a row before using any.
// - The forward holds its columns of the row in registers, widened once (Hold<T>), for
//   the mean, the variance about the mean and the output: the row crosses device memory
//   once each way (the old kernel read it three times). cdiv(cols, FWD_ELEMS) threads a
//   row, whole warps (256 at 4096 columns); rows longer than MAX_THREADS x FWD_ELEMS are
//   walked in chunks and re-read (from L2).
// - __half and __nv_bfloat16 forward: the row's elements, a thread's partial sums,
//   x - mean and xhat are float (Hold<T>); each thread's partial goes to double once per
//   reduction, the sums across threads and mean and 1/std stay double. Holding them as
//   double cost 96 registers (2 blocks of 256 threads an SM: 2 rows, 16 KiB, in flight,
//   the load/reduce/compute/reduce/store phases serialised) and two conversions an element
//   at 16 a clock per SM: 227 us against torch's 121 at 16384x4096 bfloat16 (H100,
//   2026-11-24). As float: 64 registers (4 blocks of 256 an SM), 16 elements a thread
//   summed in float (error ~1e-6 relative, far inside the half tolerances).
// - float and double hold double elements; double work is kept off their output path: conversions
//   to and from double run at a quarter of the FP64 FMA rate on an H100 (16 a clock per
//   SM), so an element costs two (x in, xhat out) and four double adds/multiplies;
//   xhat * w + b is one float FMA.
// - The weight and bias gradients without atomics and without a second read of x and dy
//   (the old kernel looped one thread per column over every row: 10-20x slower than the
//   row pass): a persistent grid (BWD_THREADS_PER_SM threads' worth of blocks per SM,
//   up to 128 registers a thread) walks the rows, each thread keeping its columns' dy and
//   xhat between the passes, and their two gradient sums, in double registers (w comes
//   from L1 each pass); one partial row of each per
//   block at the end (132 x 4096 doubles twice at 4096 columns: 3% of the backward's
//   traffic); layernorm_bwd_wb sums them column by column in blocks of 16 x 32 threads.
// - float forward only: a persistent grid (the launcher's FWD_THREADS_PER_SM threads'
//   worth of blocks an SM) walks rows blockIdx.x, blockIdx.x + gridDim.x, ... and issues
//   the NEXT row's 16-byte loads before this row's two double reductions, so its bytes
//   are in flight through both barriers and the output pass (fwd_rows_held). Forward
//   against torch (H100, 2026-11-24, one run each, one row a block -> pipelined): float
//   4096x4096 0.99 -> 1.21x, 16384x4096 1.08 -> 1.33x; ptxas sm_90: 114 registers (nvcc
//   13.0; 117 through NVRTC), no spills: 2 blocks of 256 an SM, as one row a block's 98.
//   Its two reductions take one barrier each (row_sum_once, two part arrays in turn).
//   Not for bfloat16: 0.88 -> 0.69x at 16384x4096 (79 registers: 3 blocks an SM, not 4),
//   nor double (its next row in flight spills at 128 registers): they keep one row a
//   block (grid = rows), 64 and 128 registers.
// - 1/std is 1.0 / sqrt(var + eps), correctly rounded here and in the prototype
//   (math.sqrt): a pow(var + eps, 0.5) is a long double-precision call, on every thread's
//   path between the variance and the output pass.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define FWD_ELEMS 16  // columns a thread holds per row in the forward
#define BWD_ELEMS 8   // and in the backward (dy, xhat, w and two gradient sums each)
#define MAX_THREADS 512
#define WARP 32
#define MAX_WARPS 32
#define FULL_MASK 0xffffffffu
#define W_COLS 16
#define W_ROWS 32

// The prototype's float64(v) and float32(v): __half and __nv_bfloat16 through float, exactly.
template <typename A, typename T> __device__ inline A widen(T v) { return (A)v; }
template <> __device__ inline double widen<double, __half>(__half v) {
    return (double)__half2float(v);
}
template <> __device__ inline double widen<double, __nv_bfloat16>(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}
template <> __device__ inline float widen<float, __half>(__half v) { return __half2float(v); }
template <> __device__ inline float widen<float, __nv_bfloat16>(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

// The type of xhat * w + b: the prototype's wide flag (float64 storage only).
template <typename T> struct Affine { using type = float; };
template <> struct Affine<double> { using type = double; };

template <typename X, typename T>
__device__ inline T affine(X xhat, T w, T b) {
    using A = typename Affine<T>::type;
    return (T)((A)xhat * widen<A>(w) + widen<A>(b));
}

// The forward's type for a row's elements in registers and a thread's partial sums:
// float for the 2-byte types (the prototype's narrow path), double for float and double.
template <typename T> struct Hold { using type = double; };
template <> struct Hold<__half> { using type = float; };
template <> struct Hold<__nv_bfloat16> { using type = float; };

// 16 bytes of T, aligned so that one copy is one 128-bit load or store.
template <typename T>
struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

__device__ inline bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

// How row code picks its load width (16-byte packs, else element by element). PER_ROW: for
// each row inside the loops; the compiler keeps both copies there and issues the one not
// taken predicated off (rmsnorm's bfloat16 backward: 46 instructions an element against
// torch.compile's 16, ncu source counters). PACKS / ELEMENTS: once a launch, by the
// kernel (every row aligned or not), each a compiled copy with only its own loads. Side by
// side on an H200 (2026-11-28), once a launch in every kernel against PER_ROW: the bfloat16
// backward 211.6 -> 194.5 us and the float32 forward 152.0 -> 144.0 take it; the bfloat16
// forward (95.0 -> 105.4: 64 -> 76 registers, fewer blocks an SM) and the float32 backward
// (229.6 -> 310.1) keep PER_ROW. This selection, against all PER_ROW, in a later run
// (16384x4096): bfloat16 backward 215.5 -> 200.4 us, float32 forward 154.0 -> 146.6, the
// rest within 0.5 us (results/gpu-runs/2026-11-28-device-draws-4xh200).
enum Width { PER_ROW, PACKS, ELEMENTS };

template <int WIDTH> __device__ inline bool use_packs(bool row_aligned) {
    return WIDTH == PER_ROW ? row_aligned : WIDTH == PACKS;
}

// Every row of the (rows, cols) tensors at a and b, and the rows w and c, 16-byte aligned.
template <typename T>
__device__ inline bool rows_aligned16(const T* a, const T* b, const T* w, const T* c,
                                      long long cols) {
    return cols % (16 / (long long)sizeof(T)) == 0 && aligned16(a) && aligned16(b) &&
           aligned16(w) && aligned16(c);
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

// The packs p0, p0 + nx, ... of one chunk of a row, widened to H; loads issued together.
template <int P, typename T, typename H>
__device__ inline void load_chunk(const T* row, long long p0, long long packs, bool vector,
                                  H (&v)[P][Pack<T>::N]) {
    Pack<T> raw[P];
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (p0 + (long long)u * blockDim.x < packs) raw[u] = load_pack(row, p0 + u * blockDim.x, vector);
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (p0 + (long long)u * blockDim.x < packs)
#pragma unroll
            for (int j = 0; j < Pack<T>::N; ++j) v[u][j] = widen<H>(raw[u].v[j]);
}

__device__ inline double warp_sum(double v) {
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}

// row_sum with one barrier, not two: for callers that alternate between two part arrays
// (fwd_rows_held: the mean's, then the variance's), so that no thread writes an array
// before every thread has read it (the other array's barrier lies between).
__device__ inline double row_sum_once(double* part, double value) {
    const double v = warp_sum(value);
    if (threadIdx.x % WARP == 0) part[threadIdx.x / WARP] = v;
    __syncthreads();
    double total = part[0];
    for (int i = 1; i < (int)(blockDim.x / WARP); ++i) total += part[i];
    return total;
}

// The sum of value over the block (one row); every thread calls it and gets the sum.
__device__ inline double row_sum(double* part, double value) {
    const double total = row_sum_once(part, value);
    __syncthreads();  // read before the next sums overwrite it
    return total;
}

// row_sum of two values at once (the narrow backward's two row sums): each summed in
// row_sum's order, with one pair of barriers where two row_sum calls take two pairs.
// part: 2 x MAX_WARPS.
__device__ inline void row_sum2(double* part, double& a, double& b) {
    const double va = warp_sum(a), vb = warp_sum(b);
    if (threadIdx.x % WARP == 0) {
        part[threadIdx.x / WARP] = va;
        part[MAX_WARPS + threadIdx.x / WARP] = vb;
    }
    __syncthreads();
    double ta = part[0], tb = part[MAX_WARPS];
    for (int i = 1; i < (int)(blockDim.x / WARP); ++i) {
        ta += part[i];
        tb += part[MAX_WARPS + i];
    }
    __syncthreads();  // read before the next sums overwrite them
    a = ta;
    b = tb;
}

// One row. FITS: the row is one chunk (packs <= blockDim.x x P), held in registers.
template <typename T, bool FITS>
__device__ inline void fwd_row(const T* xr, const T* w, const T* b, T* yr, double* mean,
                               double* rstd, long long row, long long cols, double eps,
                               double* part) {
    constexpr int W = Pack<T>::N;
    constexpr int P = FWD_ELEMS / W > 0 ? FWD_ELEMS / W : 1;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long packs = cols / W;
    const long long tail = packs * W;
    const bool vector = aligned16(xr) && aligned16(yr) && aligned16(w) && aligned16(b);
    using H = typename Hold<T>::type;
    H v[P][W];  // x; FITS: x - mean after the first reduction
    H s = 0;  // this thread's partial sum; double once for the row's sum
    for (long long p0 = tx; p0 < packs; p0 += nx * P) {
        load_chunk(xr, p0, packs, vector, v);
#pragma unroll
        for (int u = 0; u < P; ++u)
            if (p0 + u * nx < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) s += v[u][j];
        if (FITS) break;
    }
    for (long long c = tail + tx; c < cols; c += nx) s += widen<H>(xr[c]);
    const double mu = row_sum(part, (double)s) / cols;
    const H m = (H)mu;

    s = 0;
    for (long long p0 = tx; p0 < packs; p0 += nx * P) {
        if (!FITS) load_chunk(xr, p0, packs, vector, v);
#pragma unroll
        for (int u = 0; u < P; ++u)
            if (p0 + u * nx < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    v[u][j] -= m;
                    s += v[u][j] * v[u][j];
                }
        if (FITS) break;
    }
    for (long long c = tail + tx; c < cols; c += nx) {
        const H d = widen<H>(xr[c]) - m;
        s += d * d;
    }
    const double var = row_sum(part, (double)s) / cols;
    const double r = 1.0 / sqrt(var + eps);
    const H rh = (H)r;

    for (long long p0 = tx; p0 < packs; p0 += nx * P) {
        if (!FITS) {
            load_chunk(xr, p0, packs, vector, v);
#pragma unroll
            for (int u = 0; u < P; ++u)
#pragma unroll
                for (int j = 0; j < W; ++j) v[u][j] -= m;
        }
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = p0 + u * nx;
            if (p < packs) {
                const Pack<T> wp = load_pack(w, p, vector), bp = load_pack(b, p, vector);
                Pack<T> out;
#pragma unroll
                for (int j = 0; j < W; ++j) out.v[j] = affine(v[u][j] * rh, wp.v[j], bp.v[j]);
                store_pack(yr, p, out, vector);
            }
        }
        if (FITS) break;
    }
    for (long long c = tail + tx; c < cols; c += nx)
        yr[c] = affine((widen<H>(xr[c]) - m) * rh, w[c], b[c]);
    if (tx == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }
}

// A row's raw packs and tail element, in flight while the previous row is reduced.
template <typename T, int P>
struct RowLoads {
    Pack<T> raw[P];
    T tail;
};

// Issues the loads of row xr's packs tx, tx + nx, ... and of its tail column; nothing waits
// on them until the row is used.
template <typename T, int P>
__device__ inline void issue_row(const T* xr, long long packs, long long cols, bool vector,
                                 RowLoads<T, P>& in) {
    const long long nx = blockDim.x;
    const long long tx = threadIdx.x;
#pragma unroll
    for (int u = 0; u < P; ++u)
        if (tx + u * nx < packs) in.raw[u] = load_pack(xr, tx + u * nx, vector);
    if (packs * Pack<T>::N + tx < cols) in.tail = xr[packs * Pack<T>::N + tx];
}

__device__ inline bool row_vector(const void* xr, const void* yr, bool wb) {
    return wb && aligned16(xr) && aligned16(yr);
}

// The rows blockIdx.x, blockIdx.x + gridDim.x, ... of a row that is one chunk
// (packs <= blockDim.x x P), software-pipelined: the next row's loads are issued before
// this row's two reductions, so its bytes are in flight through both barriers and the
// output pass. Each row's arithmetic is fwd_row<T, true>'s, in its order.
template <typename T, int WIDTH>
__device__ inline void fwd_rows_held(const T* x, const T* w, const T* b, T* out, double* mean,
                                     double* rstd, long long rows, long long cols, double eps,
                                     double* part) {
    constexpr int W = Pack<T>::N;
    constexpr int P = FWD_ELEMS / W > 0 ? FWD_ELEMS / W : 1;
    using H = typename Hold<T>::type;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long packs = cols / W;
    const long long tail = packs * W;
    const bool has_tail = tail + tx < cols;  // a thread owns at most one tail column
    const bool wb = aligned16(w) && aligned16(b);

    RowLoads<T, P> in;
    long long row = blockIdx.x;
    if (row < rows)
        issue_row(x + row * cols, packs, cols,
                  use_packs<WIDTH>(row_vector(x + row * cols, out + row * cols, wb)), in);
    for (; row < rows; row += gridDim.x) {
        const long long base = row * cols;
        T* yr = out + base;
        const bool vector = use_packs<WIDTH>(row_vector(x + base, yr, wb));
        H v[P][W];  // x, then x - mean after the first reduction
#pragma unroll
        for (int u = 0; u < P; ++u)
            if (tx + u * nx < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) v[u][j] = widen<H>(in.raw[u].v[j]);
        const H xt = has_tail ? widen<H>(in.tail) : (H)0;

        const long long next = row + gridDim.x;  // its loads fly while this row reduces
        if (next < rows)
            issue_row(x + next * cols, packs, cols,
                      use_packs<WIDTH>(row_vector(x + next * cols, out + next * cols, wb)), in);

        H s = 0;
#pragma unroll
        for (int u = 0; u < P; ++u)
            if (tx + u * nx < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) s += v[u][j];
        if (has_tail) s += xt;
        const double mu = row_sum_once(part, (double)s) / cols;
        const H m = (H)mu;

        s = 0;
#pragma unroll
        for (int u = 0; u < P; ++u)
            if (tx + u * nx < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    v[u][j] -= m;
                    s += v[u][j] * v[u][j];
                }
        const H dt = xt - m;
        if (has_tail) s += dt * dt;
        const double var = row_sum_once(part + MAX_WARPS, (double)s) / cols;
        const double r = 1.0 / sqrt(var + eps);
        const H rh = (H)r;

#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = tx + u * nx;
            if (p < packs) {
                const Pack<T> wp = load_pack(w, p, vector), bp = load_pack(b, p, vector);
                Pack<T> o;
#pragma unroll
                for (int j = 0; j < W; ++j) o.v[j] = affine(v[u][j] * rh, wp.v[j], bp.v[j]);
                store_pack(yr, p, o, vector);
            }
        }
        if (has_tail) yr[tail + tx] = affine(dt * rh, w[tail + tx], b[tail + tx]);
        if (tx == 0) {
            mean[row] = mu;
            rstd[row] = r;
        }
    }
}

// Rows longer than one chunk, one at a time. Not inlined: inlined into the kernel's row
// loop it lifted the whole kernel from 64 to 114 registers (bfloat16, ptxas sm_90), and
// the held path's registers are what the float grid is sized by.
template <typename T>
__device__ __noinline__ void fwd_rows_chunked(const T* x, const T* w, const T* b, T* out,
                                              double* mean, double* rstd, long long rows,
                                              long long cols, double eps, double* part) {
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const long long base = row * cols;
        fwd_row<T, false>(x + base, w, b, out + base, mean, rstd, row, cols, eps, part);
    }
}

// float: a persistent grid (the launcher's FWD_THREADS_PER_SM threads' worth of blocks an
// SM) walks the rows, pipelined; every other T: one row a block (grid = rows), the code and
// registers of before. wide: the prototype's flag for xhat * w + b in float64; here
// Affine<T> decides it.
template <typename T> struct Pipelined { static constexpr bool value = false; };
template <> struct Pipelined<float> { static constexpr bool value = true; };

template <typename T>
__global__ void __launch_bounds__(MAX_THREADS)
    layernorm_fwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                  T* __restrict__ out, double* __restrict__ mean, double* __restrict__ rstd,
                  long long rows, long long cols, double eps, long long wide) {
    __shared__ double part[2 * MAX_WARPS];  // fwd_rows_held: the mean's, the variance's
    constexpr int P = FWD_ELEMS / Pack<T>::N > 0 ? FWD_ELEMS / Pack<T>::N : 1;
    const bool fits = cols / Pack<T>::N <= (long long)blockDim.x * P;
    if constexpr (Pipelined<T>::value) {
        if (fits && rows_aligned16(x, out, w, b, cols))
            fwd_rows_held<T, PACKS>(x, w, b, out, mean, rstd, rows, cols, eps, part);
        else if (fits)
            fwd_rows_held<T, ELEMENTS>(x, w, b, out, mean, rstd, rows, cols, eps, part);
        else
            fwd_rows_chunked(x, w, b, out, mean, rstd, rows, cols, eps, part);
    } else {
        const long long row = blockIdx.x;
        const long long base = row * cols;
        if (fits)
            fwd_row<T, true>(x + base, w, b, out + base, mean, rstd, row, cols, eps, part);
        else
            fwd_row<T, false>(x + base, w, b, out + base, mean, rstd, row, cols, eps, part);
    }
}

// The backward's rows, walked by a persistent grid, one row per block at a time. Each
// thread adds the weight and bias gradients of the columns it owns over its rows: in
// registers when the row is one chunk (FITS), else in the block's partial rows pw and pb
// of global memory; they hold the sums at the end either way. B: the type of a thread's
// per-element arithmetic and its own partial sums: double (layernorm_bwd), or float for
// the 2-byte types' narrow path (layernorm_bwd32: the sums across threads and the
// partial rows stay double, each thread's partial widened once; every gradient partial
// is a float sum, so a double partial row holds it exactly).
template <typename T, bool FITS, typename B, int WIDTH>
__device__ inline void bwd_rows(const T* x, const T* w, const T* dy, const double* mean,
                                const double* rstd, T* dx, double* pw, double* pb,
                                long long rows, long long cols, double* sums) {
    constexpr int W = Pack<T>::N;
    constexpr int P = BWD_ELEMS / W;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long packs = cols / W;
    const long long tail = packs * W;

    B aw[P][W], ab[P][W];  // FITS: this thread's columns' sums
    B aw_tail = 0.0, ab_tail = 0.0;  // a thread owns at most one tail column
#pragma unroll
    for (int u = 0; u < P; ++u)
#pragma unroll
        for (int j = 0; j < W; ++j) aw[u][j] = ab[u][j] = 0.0;
    if (!FITS)
        for (long long p = tx; p < packs; p += nx)
            for (int j = 0; j < W; ++j) pw[p * W + j] = pb[p * W + j] = 0.0;

    B gv[P][W], hv[P][W];  // dy and xhat of the thread's packs (w: from L1 per pack)
    constexpr bool narrow = sizeof(B) < sizeof(double);
    const double inv_cols = narrow ? 1.0 / cols : 0.0;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const long long base = row * cols;
        const T *xr = x + base, *dyr = dy + base;
        T* dxr = dx + base;
        const bool vector =
            use_packs<WIDTH>(aligned16(xr) && aligned16(dyr) && aligned16(dxr) && aligned16(w));
        const B mu = (B)mean[row], r = (B)rstd[row];
        B s1 = 0.0, s2 = 0.0;  // sums of g = dy * w and of g * xhat over the row
        for (long long p0 = tx; p0 < packs; p0 += nx * P) {
            load_chunk(dyr, p0, packs, vector, gv);
            load_chunk(xr, p0, packs, vector, hv);
#pragma unroll
            for (int u = 0; u < P; ++u)
                if (p0 + u * nx < packs) {
                    const Pack<T> wp = load_pack(w, p0 + u * nx, vector);
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        hv[u][j] = (hv[u][j] - mu) * r;
                        const B g = gv[u][j] * widen<B>(wp.v[j]);
                        s1 += g;
                        s2 += g * hv[u][j];
                    }
                }
            if (FITS) break;
        }
        for (long long c = tail + tx; c < cols; c += nx) {
            const B g = widen<B>(dyr[c]) * widen<B>(w[c]);
            s1 += g;
            s2 += g * ((widen<B>(xr[c]) - mu) * r);
        }
        // the narrow path: both sums behind one pair of barriers (row_sum2; sums holds
        // 2 x MAX_WARPS), times 1 / cols, divided once a thread (a double division in the
        // row loop is a call whose saved registers spilled at float's 64 registers)
        B m1, m2;
        if (narrow) {
            double t1 = s1, t2 = s2;
            row_sum2(sums, t1, t2);
            m1 = (B)(t1 * inv_cols);
            m2 = (B)(t2 * inv_cols);
        } else {
            m1 = (B)(row_sum(sums, (double)s1) / cols);
            m2 = (B)(row_sum(sums, (double)s2) / cols);
        }
        for (long long p0 = tx; p0 < packs; p0 += nx * P) {
            if (!FITS) {
                load_chunk(dyr, p0, packs, vector, gv);
                load_chunk(xr, p0, packs, vector, hv);
#pragma unroll
                for (int u = 0; u < P; ++u)
#pragma unroll
                    for (int j = 0; j < W; ++j) hv[u][j] = (hv[u][j] - mu) * r;
            }
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const long long p = p0 + u * nx;
                if (p < packs) {
                    const Pack<T> wp = load_pack(w, p, vector);
                    Pack<T> out;
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        const B dyc = gv[u][j], xhat = hv[u][j];
                        out.v[j] = (T)(r * (dyc * widen<B>(wp.v[j]) - m1 - xhat * m2));
                        if (FITS) {
                            aw[u][j] += dyc * xhat;
                            ab[u][j] += dyc;
                        } else {  // B's sum, held in a double (exactly, for float)
                            pw[p * W + j] = (B)pw[p * W + j] + dyc * xhat;
                            pb[p * W + j] = (B)pb[p * W + j] + dyc;
                        }
                    }
                    store_pack(dxr, p, out, vector);
                }
            }
            if (FITS) break;
        }
        for (long long c = tail + tx; c < cols; c += nx) {
            const B dyc = widen<B>(dyr[c]);
            const B xhat = (widen<B>(xr[c]) - mu) * r;
            dxr[c] = (T)(r * (dyc * widen<B>(w[c]) - m1 - xhat * m2));
            aw_tail += dyc * xhat;
            ab_tail += dyc;
        }
    }
    if (FITS)
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = tx + u * nx;
            if (p < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    pw[p * W + j] = aw[u][j];
                    pb[p * W + j] = ab[u][j];
                }
        }
    if (tail + tx < cols) {
        pw[tail + tx] = aw_tail;
        pb[tail + tx] = ab_tail;
    }
}

// A row's raw packs of x and dy, their tail elements and the row's mean and 1/std, in
// flight while the block reduces the previous row.
template <typename T, int P>
struct BwdLoads {
    Pack<T> x[P], dy[P];
    T x_tail, dy_tail;
    double mean, rstd;
};

__device__ inline bool bwd_vector(const void* xr, const void* dyr, const void* dxr, bool w) {
    return w && aligned16(xr) && aligned16(dyr) && aligned16(dxr);
}

// Issues the loads of one row's packs tx, tx + nx, ..., its tail column and its mean and
// 1/std; nothing waits on them until the row is used.
template <typename T, int P>
__device__ inline void issue_bwd_row(const T* x, const T* dy, const double* mean,
                                     const double* rstd, const T* dx, long long row,
                                     long long cols, bool wv, BwdLoads<T, P>& in) {
    const long long nx = blockDim.x, tx = threadIdx.x, base = row * cols;
    const long long packs = cols / Pack<T>::N;
    const bool vector = bwd_vector(x + base, dy + base, dx + base, wv);
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
    in.mean = mean[row];
    in.rstd = rstd[row];
}

// bwd_rows<T, true, B> software-pipelined: the next row's loads are issued before this
// row's reductions, so its bytes are in flight through the barriers and the output pass.
// Each row's arithmetic is bwd_rows<T, true, B>'s, in its order. (rmsnorm's float32
// backward, pipelined so on an H200: 0.62 -> 0.98 of torch.compile's speed, 2026-11-28.)
template <typename T, typename B>
__device__ inline void bwd_rows_held(const T* x, const T* w, const T* dy, const double* mean,
                                     const double* rstd, T* dx, double* pw, double* pb,
                                     long long rows, long long cols, double* sums) {
    constexpr int W = Pack<T>::N;
    constexpr int P = BWD_ELEMS / W;
    const int tx = threadIdx.x;
    const long long nx = blockDim.x;
    const long long packs = cols / W;
    const long long tail = packs * W;
    const bool has_tail = tail + tx < cols;  // a thread owns at most one tail column
    const bool wv = aligned16(w);

    B aw[P][W], ab[P][W];
    B aw_tail = 0.0, ab_tail = 0.0;
#pragma unroll
    for (int u = 0; u < P; ++u)
#pragma unroll
        for (int j = 0; j < W; ++j) aw[u][j] = ab[u][j] = 0.0;

    constexpr bool narrow = sizeof(B) < sizeof(double);
    const double inv_cols = narrow ? 1.0 / cols : 0.0;
    BwdLoads<T, P> in;
    long long row = blockIdx.x;
    if (row < rows) issue_bwd_row(x, dy, mean, rstd, dx, row, cols, wv, in);
    for (; row < rows; row += gridDim.x) {
        const long long base = row * cols;
        T* dxr = dx + base;
        const bool vector = bwd_vector(x + base, dy + base, dxr, wv);
        const B mu = (B)in.mean, r = (B)in.rstd;
        B gv[P][W], hv[P][W];  // dy and x, then xhat
#pragma unroll
        for (int u = 0; u < P; ++u)
            if (tx + u * nx < packs)
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    gv[u][j] = widen<B>(in.dy[u].v[j]);
                    hv[u][j] = widen<B>(in.x[u].v[j]);
                }
        const B gt = has_tail ? widen<B>(in.dy_tail) : (B)0;
        const B xt = has_tail ? widen<B>(in.x_tail) : (B)0;
        const long long next = row + gridDim.x;  // its loads fly while this row reduces
        if (next < rows) issue_bwd_row(x, dy, mean, rstd, dx, next, cols, wv, in);

        B s1 = 0.0, s2 = 0.0;  // sums of g = dy * w and of g * xhat over the row
#pragma unroll
        for (int u = 0; u < P; ++u)
            if (tx + u * nx < packs) {
                const Pack<T> wp = load_pack(w, tx + u * nx, vector);
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    hv[u][j] = (hv[u][j] - mu) * r;
                    const B g = gv[u][j] * widen<B>(wp.v[j]);
                    s1 += g;
                    s2 += g * hv[u][j];
                }
            }
        const B ht = (xt - mu) * r;
        if (has_tail) {
            const B g = gt * widen<B>(w[tail + tx]);
            s1 += g;
            s2 += g * ht;
        }
        B m1, m2;  // as bwd_rows: both sums behind one pair of barriers on the narrow path
        if (narrow) {
            double t1 = s1, t2 = s2;
            row_sum2(sums, t1, t2);
            m1 = (B)(t1 * inv_cols);
            m2 = (B)(t2 * inv_cols);
        } else {
            m1 = (B)(row_sum(sums, (double)s1) / cols);
            m2 = (B)(row_sum(sums, (double)s2) / cols);
        }
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const long long p = tx + u * nx;
            if (p < packs) {
                const Pack<T> wp = load_pack(w, p, vector);
                Pack<T> out;
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    const B dyc = gv[u][j], xhat = hv[u][j];
                    out.v[j] = (T)(r * (dyc * widen<B>(wp.v[j]) - m1 - xhat * m2));
                    aw[u][j] += dyc * xhat;
                    ab[u][j] += dyc;
                }
                store_pack(dxr, p, out, vector);
            }
        }
        if (has_tail) {
            dxr[tail + tx] = (T)(r * (gt * widen<B>(w[tail + tx]) - m1 - ht * m2));
            aw_tail += gt * ht;
            ab_tail += gt;
        }
    }
#pragma unroll
    for (int u = 0; u < P; ++u) {
        const long long p = tx + u * nx;
        if (p < packs)
#pragma unroll
            for (int j = 0; j < W; ++j) {
                pw[p * W + j] = aw[u][j];
                pb[p * W + j] = ab[u][j];
            }
    }
    if (has_tail) {
        pw[tail + tx] = aw_tail;
        pb[tail + tx] = ab_tail;
    }
}

// bwd_rows with its Width: the 2-byte types' once a launch, every other type's per row.
template <typename T, bool FITS, typename B>
__device__ inline void bwd_rows_by_width(const T* x, const T* w, const T* dy,
                                         const double* mean, const double* rstd, T* dx,
                                         double* pw, double* pb, long long rows, long long cols,
                                         double* sums) {
    if constexpr (sizeof(T) == 2) {
        if (rows_aligned16(x, dy, w, dx, cols))
            bwd_rows<T, FITS, B, PACKS>(x, w, dy, mean, rstd, dx, pw, pb, rows, cols, sums);
        else
            bwd_rows<T, FITS, B, ELEMENTS>(x, w, dy, mean, rstd, dx, pw, pb, rows, cols, sums);
    } else {
        bwd_rows<T, FITS, B, PER_ROW>(x, w, dy, mean, rstd, dx, pw, pb, rows, cols, sums);
    }
}

template <typename T, typename B>
__device__ inline void bwd_kernel(const T* x, const T* w, const T* dy, const double* mean,
                                  const double* rstd, T* dx, double* partw, double* partb,
                                  long long rows, long long cols, double* sums) {
    const long long first = (long long)blockIdx.x * cols;
    const bool fits = cols / Pack<T>::N <= (long long)blockDim.x * (BWD_ELEMS / Pack<T>::N);
    if (fits && Pipelined<T>::value)  // float only (rmsnorm's bfloat16, pipelined: slower)
        bwd_rows_held<T, B>(x, w, dy, mean, rstd, dx, partw + first, partb + first, rows,
                            cols, sums);
    else if (fits)
        bwd_rows_by_width<T, true, B>(x, w, dy, mean, rstd, dx, partw + first, partb + first,
                                      rows, cols, sums);
    else
        bwd_rows_by_width<T, false, B>(x, w, dy, mean, rstd, dx, partw + first, partb + first,
                                       rows, cols, sums);
}

template <typename T>
__global__ void __launch_bounds__(MAX_THREADS)
    layernorm_bwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ dy,
                  const double* __restrict__ mean, const double* __restrict__ rstd,
                  T* __restrict__ dx, double* __restrict__ partw, double* __restrict__ partb,
                  long long rows, long long cols) {
    __shared__ double sums[MAX_WARPS];
    bwd_kernel<T, double>(x, w, dy, mean, rstd, dx, partw, partb, rows, cols, sums);
}

// The bwd_half_math knob's "float32" (__half and __nv_bfloat16) and bwd_float_math's
// (float): the same rows with float per-element arithmetic. Why: at 16384x4096 bfloat16 the double
// path ran at 30% of copy bandwidth on an H200 (torch 40%): each element costs five
// float <-> double conversions (16 a clock per SM) and ten double operations, and its
// registers leave one block of 512 threads an SM, so nothing overlaps a block's
// barriers; in float an element costs no conversion to double and the registers leave
// room for a second block (bwd_threads_per_sm 1024).
template <typename T>
__global__ void __launch_bounds__(MAX_THREADS)
    layernorm_bwd32(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ dy,
                    const double* __restrict__ mean, const double* __restrict__ rstd,
                    T* __restrict__ dx, double* __restrict__ partw, double* __restrict__ partb,
                    long long rows, long long cols) {
    __shared__ double sums[2 * MAX_WARPS];  // row_sum2's
    bwd_kernel<T, float>(x, w, dy, mean, rstd, dx, partw, partb, rows, cols, sums);
}

template <typename T>
__global__ void layernorm_bwd_wb(const double* __restrict__ partw,
                                 const double* __restrict__ partb, T* __restrict__ dw,
                                 T* __restrict__ db, long long parts, long long cols) {
    __shared__ double sums_w[W_ROWS][W_COLS], sums_b[W_ROWS][W_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long c = (long long)blockIdx.x * W_COLS + tx;
    double sw = 0.0, sb = 0.0;
    if (c < cols)
        for (long long p = ty; p < parts; p += W_ROWS) {
            sw += partw[p * cols + c];
            sb += partb[p * cols + c];
        }
    sums_w[ty][tx] = sw;
    sums_b[ty][tx] = sb;
    __syncthreads();
    if (ty == 0 && c < cols) {
        for (int i = 1; i < W_ROWS; ++i) {
            sw += sums_w[i][tx];
            sb += sums_b[i][tx];
        }
        dw[c] = (T)sw;
        db[c] = (T)sb;
    }
}
