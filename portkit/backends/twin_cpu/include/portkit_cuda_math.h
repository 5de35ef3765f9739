// Atomics, cache-hinted loads and stores, math functions and intrinsics for
// portkit_cuda_cpu.h (included from it, after the runtime).
#pragma once

// ---- atomics: one fiber runs at a time and none is preempted, so a read-modify-write
// is atomic as written. Only the overloads CUDA has are declared.
#define PORTKIT_ATOMIC(NAME, T, EXPR)                                                             \
    inline T NAME(T* address, T val) {                                                           \
        T old = *address;                                                                        \
        *address = (EXPR);                                                                       \
        return old;                                                                              \
    }                                                                                            \
    inline T NAME##_block(T* a, T v) { return NAME(a, v); }                                      \
    inline T NAME##_system(T* a, T v) { return NAME(a, v); }
#define PORTKIT_ATOMIC_INTS(NAME, EXPR)                                                           \
    PORTKIT_ATOMIC(NAME, int, EXPR)                                                               \
    PORTKIT_ATOMIC(NAME, unsigned, EXPR)                                                          \
    PORTKIT_ATOMIC(NAME, unsigned long long, EXPR)
PORTKIT_ATOMIC_INTS(atomicAdd, old + val)
PORTKIT_ATOMIC(atomicAdd, float, (portkit_cpu::note_float_atomic(address, 4), old + val))
PORTKIT_ATOMIC(atomicAdd, double, (portkit_cpu::note_float_atomic(address, 8), old + val))
PORTKIT_ATOMIC(atomicSub, int, old - val)
PORTKIT_ATOMIC(atomicSub, unsigned, old - val)
PORTKIT_ATOMIC_INTS(atomicExch, val)
PORTKIT_ATOMIC(atomicExch, float, val)
PORTKIT_ATOMIC_INTS(atomicMax, old > val ? old : val)
PORTKIT_ATOMIC(atomicMax, long long, old > val ? old : val)
PORTKIT_ATOMIC_INTS(atomicMin, old < val ? old : val)
PORTKIT_ATOMIC(atomicMin, long long, old < val ? old : val)
PORTKIT_ATOMIC_INTS(atomicAnd, old & val)
PORTKIT_ATOMIC_INTS(atomicOr, old | val)
PORTKIT_ATOMIC_INTS(atomicXor, old ^ val)
PORTKIT_ATOMIC(atomicInc, unsigned, old >= val ? 0u : old + 1)
PORTKIT_ATOMIC(atomicDec, unsigned, (old == 0 || old > val) ? val : old - 1)
#undef PORTKIT_ATOMIC_INTS
#undef PORTKIT_ATOMIC
#define PORTKIT_CAS(T)                                                                            \
    inline T atomicCAS(T* address, T compare, T val) {                                           \
        T old = *address;                                                                        \
        if (old == compare) *address = val;                                                      \
        return old;                                                                              \
    }                                                                                            \
    inline T atomicCAS_block(T* a, T c, T v) { return atomicCAS(a, c, v); }                      \
    inline T atomicCAS_system(T* a, T c, T v) { return atomicCAS(a, c, v); }
PORTKIT_CAS(int)
PORTKIT_CAS(unsigned)
PORTKIT_CAS(unsigned long long)
PORTKIT_CAS(unsigned short)
#undef PORTKIT_CAS

// ---- loads and stores with cache hints: plain accesses on a CPU ----
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldca(const T* p) { return *p; }
template <typename T> inline T __ldcg(const T* p) { return *p; }
template <typename T> inline T __ldcs(const T* p) { return *p; }
template <typename T> inline T __ldlu(const T* p) { return *p; }
template <typename T> inline T __ldcv(const T* p) { return *p; }
template <typename T> inline void __stwb(T* p, T v) { *p = v; }
template <typename T> inline void __stcg(T* p, T v) { *p = v; }
template <typename T> inline void __stcs(T* p, T v) { *p = v; }
template <typename T> inline void __stwt(T* p, T v) { *p = v; }

// ---- math: CUDA's names over portkit_math.h, the functions the simulator computes too.
// float: the float64 function rounded once; double: the C library's. The fast intrinsics
// take the accurate path, which is within their documented error of what a GPU gives.
#define PORTKIT_CUDA_UNARY(fn)                                                                  \
    inline float fn##f(float x) { return portkit_math_##fn##f(x); }                               \
    inline float fn(float x) { return portkit_math_##fn##f(x); }
#define PORTKIT_CUDA_BINARY(fn)                                                                 \
    inline float fn##f(float x, float y) { return portkit_math_##fn##f(x, y); }                  \
    inline float fn(float x, float y) { return portkit_math_##fn##f(x, y); }
PORTKIT_MATH_UNARY(PORTKIT_CUDA_UNARY)
PORTKIT_MATH_BINARY(PORTKIT_CUDA_BINARY)
#undef PORTKIT_CUDA_UNARY
#undef PORTKIT_CUDA_BINARY
// Exact functions: the C library's float forms, under C++'s float overloads as CUDA has.
#define PORTKIT_CUDA_EXACT_UNARY(fn) inline float fn(float x) { return fn##f(x); }
#define PORTKIT_CUDA_EXACT_BINARY(fn) inline float fn(float x, float y) { return fn##f(x, y); }
PORTKIT_MATH_EXACT_UNARY(PORTKIT_CUDA_EXACT_UNARY)
PORTKIT_MATH_EXACT_BINARY(PORTKIT_CUDA_EXACT_BINARY)
#undef PORTKIT_CUDA_EXACT_UNARY
#undef PORTKIT_CUDA_EXACT_BINARY
inline float fma(float a, float b, float c) { return fmaf(a, b, c); }
inline float ldexp(float x, int e) { return ldexpf(x, e); }
inline float frexp(float x, int* e) { return frexpf(x, e); }
inline float modf(float x, float* i) { return modff(x, i); }
inline float scalbn(float x, int e) { return scalbnf(x, e); }
inline int ilogb(float x) { return ilogbf(x); }
inline long lrint(float x) { return lrintf(x); }
inline long long llrint(float x) { return llrintf(x); }
inline long lround(float x) { return lroundf(x); }
inline long long llround(float x) { return llroundf(x); }
inline float remquo(float x, float y, int* q) { return remquof(x, y, q); }
// Classification: CUDA declares these for float and double (and the integer types).
template <typename T> inline bool isnan(T x) { return __builtin_isnan(x); }
template <typename T> inline bool isinf(T x) { return __builtin_isinf(x); }
template <typename T> inline bool isfinite(T x) { return __builtin_isfinite(x); }
template <typename T> inline bool signbit(T x) { return __builtin_signbit(x); }
// abs, labs and llabs come from <stdlib.h> (libstdc++ declares abs for the float types).

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }
inline float sinpif(float x) { return portkit_math_sinf(x * 3.14159265358979323846); }
inline float cospif(float x) { return portkit_math_cosf(x * 3.14159265358979323846); }
inline void sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline void sincos(double x, double* s, double* c) { *s = sin(x); *c = cos(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : (x == x ? x : 0.0f)); }
inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }

inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned i) { float x; memcpy(&x, &i, 4); return x; }
inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
inline double __longlong_as_double(long long i) { double x; memcpy(&x, &i, 8); return x; }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline float __int2float_rn(int i) { return (float)i; }
inline int __double2int_rn(double x) { return (int)nearbyint(x); }
inline float __double2float_rn(double x) { return (float)x; }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
    return (x >> 16) | (x << 16);
}
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline unsigned __sad(int a, int b, unsigned c) { return (unsigned)(a > b ? a - b : b - a) + c; }

// CUDA's global min/max overloads for device code.
#define PORTKIT_MINMAX(T)                                                                         \
    inline T min(T a, T b) { return a < b ? a : b; }                                             \
    inline T max(T a, T b) { return a > b ? a : b; }
PORTKIT_MINMAX(int)
PORTKIT_MINMAX(unsigned)
PORTKIT_MINMAX(long)
PORTKIT_MINMAX(unsigned long)
PORTKIT_MINMAX(long long)
PORTKIT_MINMAX(unsigned long long)
#undef PORTKIT_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
inline long long min(long long a, int b) { return min(a, (long long)b); }
inline long long min(int a, long long b) { return min((long long)a, b); }
inline long long max(long long a, int b) { return max(a, (long long)b); }
inline long long max(int a, long long b) { return max((long long)a, b); }
