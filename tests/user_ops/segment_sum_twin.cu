// The twin of segment_sum_prototype.py: one thread per (segment, column).
template <typename T>
__global__ void segment_sum_fwd(const T* values, const long long* offsets, T* out,
                                long long segments, long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < segments * cols) {
        long long s = i / cols, c = i - s * cols;
        out[i] = (T)0;
        for (long long r = offsets[s]; r < offsets[s + 1]; ++r) out[i] += values[r * cols + c];
    }
}

template <typename T>
__global__ void segment_sum_bwd(const T* dout, const long long* offsets, T* dvalues,
                                long long segments, long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < segments * cols) {
        long long s = i / cols, c = i - s * cols;
        for (long long r = offsets[s]; r < offsets[s + 1]; ++r) dvalues[r * cols + c] = dout[i];
    }
}
