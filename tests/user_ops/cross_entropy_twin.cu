#define THREADS 64

template <typename T>
__global__ void cross_entropy_fwd(const T* logits, const long long* target, T* loss,
                                  double* lse, long long cols) {
    long long row = blockIdx.x;
    int tid = threadIdx.x;
    __shared__ double buf[THREADS];
    double m = -__longlong_as_double(0x7ff0000000000000LL);  // -inf: NVRTC has no HUGE_VAL
    for (long long c = tid; c < cols; c += THREADS) m = fmax(m, (double)logits[row * cols + c]);
    buf[tid] = m;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s /= 2) {
        if (tid < s) buf[tid] = fmax(buf[tid], buf[tid + s]);
        __syncthreads();
    }
    m = buf[0];
    __syncthreads();
    double acc = 0.0;
    for (long long c = tid; c < cols; c += THREADS) acc += exp((double)logits[row * cols + c] - m);
    buf[tid] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s /= 2) {
        if (tid < s) buf[tid] += buf[tid + s];
        __syncthreads();
    }
    if (tid == 0) {
        double total = m + log(buf[0]);
        lse[row] = total;
        loss[row] = (T)(total - (double)logits[row * cols + target[row]]);
    }
}

template <typename T>
__global__ void cross_entropy_bwd(const T* logits, const long long* target, const double* lse,
                                  const T* dloss, T* dlogits, long long cols) {
    long long row = blockIdx.x;
    for (long long c = threadIdx.x; c < cols; c += THREADS) {
        double p = exp((double)logits[row * cols + c] - lse[row]);
        if (c == target[row]) p -= 1.0;
        dlogits[row * cols + c] = (T)(p * (double)dloss[row]);
    }
}
