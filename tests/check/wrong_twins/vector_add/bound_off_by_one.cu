// WRONG TWIN vector_add/bound_off_by_one: `if (i <= n)` instead of `i < n`, so thread n also runs and writes out[n], one element past the output (reading a[n], b[n] past the inputs). A diff of the n elements shows NOTHING (all equal): the stray store lands outside the tensor.
// On a GPU the visible symptom is at most indirect: the write usually lands in the caching
// allocator's rounding padding (invisible), may overwrite a neighbouring tensor (a later
// comparison fails somewhere unrelated), or, where the output ends at an unmapped page,
// raises "an illegal memory access" that poisons the CUDA context for the rest of the
// process. That was before guard zones (issue 10): portkit check now puts every tensor
// between guards and fails the launch that writes one (GuardViolation), and
// compute-sanitizer memcheck names the thread. Before them, plain check
// missed it (on an H200 all 48 checks passed). Only `<` -> `<=` below differs from the real twin.
// Twin of prototypes/vector_add.py.
template <typename T>
__global__ void vector_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                           long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = a[i] + b[i];  // BUG
}
