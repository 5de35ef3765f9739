// WRONG TWIN vector_add/writes_nothing: the kernel body is empty (same signature), so no element of out is written. A diff shows every element of every non-empty case as NaN (the poison): n of n differ, first at [0], in every block and thread.
// n = 0 launches nothing and passes. Elements whose right answer is NaN (9 of the 24
// special values: nan + x, inf + -inf) equal the poison, so the special cases show 15 of
// 24 (seen on an H200). Only the body differs from the real twin.
// Twin of prototypes/vector_add.py.
template <typename T>
__global__ void vector_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                           long long n) {
}
