// WRONG TWIN softmax/swapped_row_col: softmax_fwd indexes x and out as [c][row] (flat c * rows + row, rows = gridDim.x) instead of [row][c], i.e. it treats the row-major (rows, cols) tensor as column-major, so block r softmaxes the elements whose flat index is r mod rows and writes them back in place. A diff shows wrong values (still in [0, 1], rows no longer summing to 1; for a square tensor it is a softmax over dim 0) in every case with more than one row and more than one column, and gradients wrong through the saved output; only 1x1 passes. How many elements: all of 3x127, 4x128, 2x129; about half to all of the rest.
// The index stays inside the tensor (c * rows + row < rows * cols), so nothing is written
// out of bounds and no element keeps its NaN poison: the error is in the values alone.
// The backward is the real one, but gets the wrong saved output, so gradients differ too.
// Seen on an H200: against the reference 381/381, 512/512, 258/258 (float64), 2947/3000,
// 9/24 special, 6/6 gradcheck; on 4096x4096 float32 only 2.5M of 16.8M, since a column's
// normaliser over 4096 iid values is within a few percent of a row's and softmax values
// there (~2.4e-4) sit near atol=1e-5; numba vs twin (tighter) flags 12.4M of them.
// Only the forward's indexing differs from the real twin.
// Twin of prototypes/softmax.py: one block per row, double accumulation in shared memory.
#define THREADS 128

__device__ double block_reduce(double* buf, int tid, bool use_max) {
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            buf[tid] = use_max ? fmax(buf[tid], buf[tid + stride]) : buf[tid] + buf[tid + stride];
        }
        __syncthreads();
    }
    return buf[0];
}

template <typename T>
__global__ void softmax_fwd(const T* __restrict__ x, T* __restrict__ out, long long cols) {
    __shared__ double buf[THREADS];
    const int tid = threadIdx.x;
    const long long row = blockIdx.x, rows = gridDim.x;

    double m = __longlong_as_double(0xfff0000000000000ULL);  // -inf, as the prototype starts
    for (long long c = tid; c < cols; c += THREADS) m = fmax(m, (double)x[c * rows + row]);
    buf[tid] = m;
    __syncthreads();
    m = block_reduce(buf, tid, true);
    __syncthreads();

    double s = 0.0;
    for (long long c = tid; c < cols; c += THREADS) s += exp((double)x[c * rows + row] - m);
    buf[tid] = s;
    __syncthreads();
    s = block_reduce(buf, tid, false);

    for (long long c = tid; c < cols; c += THREADS)
        out[c * rows + row] = (T)(exp((double)x[c * rows + row] - m) / s);
}

template <typename T>
__global__ void softmax_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                            long long cols) {
    __shared__ double buf[THREADS];
    const int tid = threadIdx.x;
    const long long base = (long long)blockIdx.x * cols;

    double dot = 0.0;
    // The product in T, then widened: exactly what the prototype does for float32.
    for (long long c = tid; c < cols; c += THREADS) dot += (double)(y[base + c] * dy[base + c]);
    buf[tid] = dot;
    __syncthreads();
    dot = block_reduce(buf, tid, false);

    for (long long c = tid; c < cols; c += THREADS)
        dx[base + c] = (T)(y[base + c] * (dy[base + c] - dot));
}
