// Twin of prototypes/vector_add.py.
template <typename T>
__global__ void vector_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                           long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
