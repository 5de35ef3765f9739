// portkit_math.h: the math functions of portkit's CPU implementations, one source for both.
//
// Compiled into the CPU twin (portkit_cuda_cpu.h includes it) and into the small library
// the simulator calls over whole lane arrays (portkit/simt/floatmath/library.py), so a
// float function gives the same bits in both. The rule:
//   - float64: the C library's function (glibc);
//   - float32: the C library's float64 function of the widened argument, rounded once to
//     float32: within half an ULP of the exact value save near a rounding tie, well inside
//     CUDA's documented bounds (docs/simulator.md has the table);
//   - float16 and bfloat16 (portkit_half.h, simt/scalars.py): the float32 function,
//     rounded to the narrow type.
// No <math.h>: the C library's functions are declared here by hand, so a twin sees the
// names CUDA declares and not glibc's macros (INFINITY, M_PI...), which NVRTC lacks.
#pragma once

#ifdef __cplusplus
#define PORTKIT_C extern "C"
#define PORTKIT_NOEXCEPT noexcept
#else
#define PORTKIT_C extern
#define PORTKIT_NOEXCEPT
#endif

// Computed in double and rounded once (float32), or glibc's (float64).
#define PORTKIT_MATH_UNARY(X)                                                                   \
    X(acos) X(acosh) X(asin) X(asinh) X(atan) X(atanh) X(cbrt) X(cos) X(cosh) X(erf) X(erfc) \
    X(exp) X(exp2) X(exp10) X(expm1) X(lgamma) X(log) X(log10) X(log1p) X(log2) X(sin)      \
    X(sinh) X(sqrt) X(tan) X(tanh) X(tgamma) X(j0) X(j1) X(y0) X(y1)
#define PORTKIT_MATH_BINARY(X) X(atan2) X(pow) X(hypot) X(fmod) X(remainder) X(fdim)
// Exact in any correct implementation: the C library's own float and double functions.
#define PORTKIT_MATH_EXACT_UNARY(X) \
    X(fabs) X(floor) X(ceil) X(trunc) X(round) X(rint) X(nearbyint) X(logb)
#define PORTKIT_MATH_EXACT_BINARY(X) X(fmin) X(fmax) X(copysign) X(nextafter)

#define PORTKIT_DECLARE_UNARY(fn)                     \
    PORTKIT_C double fn(double) PORTKIT_NOEXCEPT;     \
    PORTKIT_C float fn##f(float) PORTKIT_NOEXCEPT;
#define PORTKIT_DECLARE_BINARY(fn)                        \
    PORTKIT_C double fn(double, double) PORTKIT_NOEXCEPT; \
    PORTKIT_C float fn##f(float, float) PORTKIT_NOEXCEPT;
// The float forms of the rounded-once functions are declared but never called: portkit
// defines its own below (portkit_math_<f>f), and the twin's header names them <f>f.
PORTKIT_MATH_EXACT_UNARY(PORTKIT_DECLARE_UNARY)
PORTKIT_MATH_EXACT_BINARY(PORTKIT_DECLARE_BINARY)
#undef PORTKIT_DECLARE_UNARY
#undef PORTKIT_DECLARE_BINARY
#define PORTKIT_DECLARE_UNARY(fn) PORTKIT_C double fn(double) PORTKIT_NOEXCEPT;
#define PORTKIT_DECLARE_BINARY(fn) PORTKIT_C double fn(double, double) PORTKIT_NOEXCEPT;
PORTKIT_MATH_UNARY(PORTKIT_DECLARE_UNARY)
PORTKIT_MATH_BINARY(PORTKIT_DECLARE_BINARY)
#undef PORTKIT_DECLARE_UNARY
#undef PORTKIT_DECLARE_BINARY
PORTKIT_C double fma(double, double, double) PORTKIT_NOEXCEPT;
PORTKIT_C float fmaf(float, float, float) PORTKIT_NOEXCEPT;
PORTKIT_C double ldexp(double, int) PORTKIT_NOEXCEPT;
PORTKIT_C float ldexpf(float, int) PORTKIT_NOEXCEPT;
PORTKIT_C double frexp(double, int*) PORTKIT_NOEXCEPT;
PORTKIT_C float frexpf(float, int*) PORTKIT_NOEXCEPT;
PORTKIT_C double modf(double, double*) PORTKIT_NOEXCEPT;
PORTKIT_C float modff(float, float*) PORTKIT_NOEXCEPT;
PORTKIT_C int ilogb(double) PORTKIT_NOEXCEPT;
PORTKIT_C int ilogbf(float) PORTKIT_NOEXCEPT;
PORTKIT_C long lrint(double) PORTKIT_NOEXCEPT;
PORTKIT_C long lrintf(float) PORTKIT_NOEXCEPT;
PORTKIT_C long long llrint(double) PORTKIT_NOEXCEPT;
PORTKIT_C long long llrintf(float) PORTKIT_NOEXCEPT;
PORTKIT_C long lround(double) PORTKIT_NOEXCEPT;
PORTKIT_C long lroundf(float) PORTKIT_NOEXCEPT;
PORTKIT_C long long llround(double) PORTKIT_NOEXCEPT;
PORTKIT_C long long llroundf(float) PORTKIT_NOEXCEPT;
PORTKIT_C double scalbn(double, int) PORTKIT_NOEXCEPT;
PORTKIT_C float scalbnf(float, int) PORTKIT_NOEXCEPT;
PORTKIT_C double remquo(double, double, int*) PORTKIT_NOEXCEPT;
PORTKIT_C float remquof(float, float, int*) PORTKIT_NOEXCEPT;
PORTKIT_C double nan(const char*) PORTKIT_NOEXCEPT;
PORTKIT_C float nanf(const char*) PORTKIT_NOEXCEPT;
PORTKIT_C double jn(int, double) PORTKIT_NOEXCEPT;
PORTKIT_C double yn(int, double) PORTKIT_NOEXCEPT;

// portkit_math_<f>f: float32 through double, rounded once.
#define PORTKIT_DEFINE_UNARY(fn) \
    static inline float portkit_math_##fn##f(float x) { return (float)fn((double)x); }
#define PORTKIT_DEFINE_BINARY(fn)                                    \
    static inline float portkit_math_##fn##f(float x, float y) {     \
        return (float)fn((double)x, (double)y);                      \
    }
PORTKIT_MATH_UNARY(PORTKIT_DEFINE_UNARY)
PORTKIT_MATH_BINARY(PORTKIT_DEFINE_BINARY)
#undef PORTKIT_DEFINE_UNARY
#undef PORTKIT_DEFINE_BINARY
