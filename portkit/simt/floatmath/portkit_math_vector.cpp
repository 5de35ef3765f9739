// The simulator's entry points to portkit_math.h: one loop per function and float type
// over whole arrays (the lockstep engine computes a warp's lanes in one call).
#include "portkit_math.h"

#define PORTKIT_EXPORT extern "C" __attribute__((visibility("default")))
#define PORTKIT_VECTOR_UNARY(fn)                                                         \
    PORTKIT_EXPORT void portkit_v_##fn##_f32(const float* x, float* out, long n) {       \
        for (long i = 0; i < n; ++i) out[i] = portkit_math_##fn##f(x[i]);                \
    }                                                                                   \
    PORTKIT_EXPORT void portkit_v_##fn##_f64(const double* x, double* out, long n) {     \
        for (long i = 0; i < n; ++i) out[i] = fn(x[i]);                                  \
    }
#define PORTKIT_VECTOR_BINARY(fn)                                                        \
    PORTKIT_EXPORT void portkit_v_##fn##_f32(const float* x, const float* y, float* out, \
                                            long n) {                                   \
        for (long i = 0; i < n; ++i) out[i] = portkit_math_##fn##f(x[i], y[i]);          \
    }                                                                                   \
    PORTKIT_EXPORT void portkit_v_##fn##_f64(const double* x, const double* y,           \
                                            double* out, long n) {                      \
        for (long i = 0; i < n; ++i) out[i] = fn(x[i], y[i]);                            \
    }
PORTKIT_MATH_UNARY(PORTKIT_VECTOR_UNARY)
PORTKIT_MATH_BINARY(PORTKIT_VECTOR_BINARY)

PORTKIT_EXPORT void portkit_v_fma_f32(const float* a, const float* b, const float* c,
                                      float* out, long n) {
    for (long i = 0; i < n; ++i) out[i] = fmaf(a[i], b[i], c[i]);
}
PORTKIT_EXPORT void portkit_v_fma_f64(const double* a, const double* b, const double* c,
                                      double* out, long n) {
    for (long i = 0; i < n; ++i) out[i] = fma(a[i], b[i], c[i]);
}
