// Twin of prototypes/sigmoid.py: torch's 1 / (1 + exp(-x)), safe at +-100000 and +-inf.
//
// What makes it fast (a memory-bound op: one read and one write per element):
// - 16-byte loads and stores (float4 / double2 through Pack<T>) when both pointers are
//   16-byte aligned, which torch's allocations are; otherwise the same elements through
//   scalar accesses, so the element-to-thread mapping never depends on alignment;
// - a full grid, one pack a thread (the grid-stride loop runs once): on an H100 at 2^26
//   float32 it beat a grid of 8 resident blocks per SM looping over the packs (0.94 ->
//   0.96x torch forward, docs/bench.md): the block scheduler hides the tail;
// - float math in float (exp of a float is expf): no double on the float path;
// - __launch_bounds__(256) without a minimum of blocks per SM: capped at 32 registers
//   (256, 8), ptxas spilled 12 bytes in sigmoid_fwd and 20 in sigmoid_bwd, and on an H100
//   (2026-11-24, the full grid) the backward ran at 0.95x torch capped, 1.01x uncapped;
//   the forward was 0.96x either way. 38 registers (NVRTC 13, sm_90): 6 blocks of 256 an SM.
// 16 bytes of T, aligned so that one copy is one 128-bit load or store.
template <typename T>
struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

__device__ inline bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

// torch's form, 1 / (1 + exp(-v)): one exp and one division, nothing else; safe at the
// extremes (exp(100000) = inf gives 1 / inf = 0). On an H100 (2026-11-24, full grid) it
// ran the forward at 1.01x torch, the branchless 1 / (1 + z) | z / (1 + z) with
// z = exp(-|v|) (an abs and a select more) at 0.96x; a branch with an exp on each side
// had made a warp of mixed signs run both sides (92% of copy bandwidth).
template <typename T>
__device__ T stable_sigmoid(T v) {
    return T(1) / (T(1) + exp(-v));
}

template <typename T>
__global__ void __launch_bounds__(256) sigmoid_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    constexpr int W = Pack<T>::N;
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long packs = n / W;
    if (aligned16(x) && aligned16(out)) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(x);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(out);
#pragma unroll 2
        for (long long p = start; p < packs; p += stride) {
            Pack<T> v = xv[p];
#pragma unroll
            for (int j = 0; j < W; ++j) v.v[j] = stable_sigmoid(v.v[j]);
            ov[p] = v;
        }
    } else {  // the same packs, element by element
#pragma unroll 1
        for (long long p = start; p < packs; p += stride)
            for (int j = 0; j < W; ++j) out[p * W + j] = stable_sigmoid(x[p * W + j]);
    }
#pragma unroll 1
    for (long long i = packs * W + start; i < n; i += stride) out[i] = stable_sigmoid(x[i]);
}

// The forward of the fwd_packs / fwd_threads knobs' other values (the defaults, 1 and
// 256, launch sigmoid_fwd): each thread moves per_thread (at most MAX_PACKS) packs, all
// loads issued before any is used; block b's chunk is blockDim.x * per_thread packs, its
// thread t's packs p0, p0 + blockDim.x, ... (coalesced at each step), and a grid-stride
// loop over chunks; the scalar tail as sigmoid_fwd's. Why: at 2^26 float32 on an H200
// sigmoid_fwd ran at 93% of copy bandwidth against torch's 98%; torch's vectorized kernel
// gives a thread several 16-byte packs in flight at once, and an H200 has 1.4x an H100's
// bandwidth at the same SM count, so each SM needs more bytes in flight (Little's law)
// than one pack a thread and six blocks of 256 an SM give.
#define MAX_PACKS 4
#define MAX_FWD_THREADS 512

template <typename T>
__global__ void __launch_bounds__(MAX_FWD_THREADS)
    sigmoid_fwd_packs(const T* __restrict__ x, T* __restrict__ out, long long n,
                      long long per_thread) {
    constexpr int W = Pack<T>::N;
    const long long nt = blockDim.x;
    const long long chunk = nt * per_thread;
    const long long stride = (long long)gridDim.x * chunk;
    const long long packs = n / W;
    const long long first = (long long)blockIdx.x * chunk + threadIdx.x;
    if (aligned16(x) && aligned16(out)) {
        const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(x);
        Pack<T>* ov = reinterpret_cast<Pack<T>*>(out);
        for (long long p0 = first; p0 < packs; p0 += stride) {
            Pack<T> v[MAX_PACKS];
#pragma unroll
            for (int u = 0; u < MAX_PACKS; ++u)
                if (u < per_thread && p0 + u * nt < packs) v[u] = xv[p0 + u * nt];
#pragma unroll
            for (int u = 0; u < MAX_PACKS; ++u) {
                if (u < per_thread && p0 + u * nt < packs) {
#pragma unroll
                    for (int j = 0; j < W; ++j) v[u].v[j] = stable_sigmoid(v[u].v[j]);
                    ov[p0 + u * nt] = v[u];
                }
            }
        }
    } else {  // the same packs, element by element
#pragma unroll 1
        for (long long p0 = first; p0 < packs; p0 += stride)
            for (long long u = 0; u < per_thread; ++u) {
                const long long p = p0 + u * nt;
                if (p < packs)
                    for (int j = 0; j < W; ++j) out[p * W + j] = stable_sigmoid(x[p * W + j]);
            }
    }
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll 1
    for (long long i = packs * W + start; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = stable_sigmoid(x[i]);
}

template <typename T>
__global__ void __launch_bounds__(256) sigmoid_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                            long long n) {
    constexpr int W = Pack<T>::N;
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long packs = n / W;
    if (aligned16(y) && aligned16(dy) && aligned16(dx)) {
        const Pack<T>* yv = reinterpret_cast<const Pack<T>*>(y);
        const Pack<T>* dyv = reinterpret_cast<const Pack<T>*>(dy);
        Pack<T>* dxv = reinterpret_cast<Pack<T>*>(dx);
        for (long long p = start; p < packs; p += stride) {
            const Pack<T> s = yv[p], g = dyv[p];
            Pack<T> d;
#pragma unroll
            for (int j = 0; j < W; ++j) d.v[j] = g.v[j] * s.v[j] * (T(1) - s.v[j]);
            dxv[p] = d;
        }
    } else {  // the same packs, element by element
#pragma unroll 1
        for (long long p = start; p < packs; p += stride)
            for (int j = 0; j < W; ++j) {
                const long long i = p * W + j;
                dx[i] = dy[i] * y[i] * (T(1) - y[i]);
            }
    }
#pragma unroll 1
    for (long long i = packs * W + start; i < n; i += stride) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
}
