// __half and __nv_bfloat16 for portkit_cuda_cpu.h: 16-bit storage, arithmetic in float
// rounded back to 16 bits (for + - * / that equals the correctly rounded 16-bit result,
// since float carries more than twice the bits of either format plus two).
#pragma once

namespace portkit_cpu {

inline uint16_t float_to_half_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0));
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to infinity
    if (x < 0x38800000u) {  // subnormal half (or zero): scale to an integer and round
        float a;
        memcpy(&a, &x, 4);
        const float scaled = a * 16777216.0f;  // 2^24: one half-subnormal step per unit
        return (uint16_t)(sign | (uint32_t)nearbyintf(scaled));
    }
    // normal: round to nearest even on the 13 dropped mantissa bits
    const uint32_t rounded = x + 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

inline float half_bits_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1f) x = sign | 0x7f800000u | (mant << 13);
    else if (exp == 0) {
        float v = (float)mant / 16777216.0f;
        memcpy(&x, &v, 4);
        x |= sign;
    } else x = sign | ((exp + 112u) << 23) | (mant << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

inline uint16_t float_to_bf16_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // quiet NaN
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
    const uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

}  // namespace portkit_cpu

#define PORTKIT_16BIT(TYPE, TO_BITS, TO_FLOAT)                                                    \
    struct TYPE {                                                                                \
        uint16_t bits;                                                                           \
        TYPE() = default;                                                                        \
        TYPE(float f) : bits(portkit_cpu::TO_BITS(f)) {}                                         \
        TYPE(double d) : bits(portkit_cpu::TO_BITS((float)d)) {}                                 \
        TYPE(int i) : bits(portkit_cpu::TO_BITS((float)i)) {}                                    \
        TYPE(long long i) : bits(portkit_cpu::TO_BITS((float)i)) {}                              \
        TYPE(unsigned i) : bits(portkit_cpu::TO_BITS((float)i)) {}                               \
        operator float() const { return portkit_cpu::TO_FLOAT(bits); }                           \
        TYPE& operator+=(TYPE o) { return *this = TYPE(float(*this) + float(o)); }               \
        TYPE& operator-=(TYPE o) { return *this = TYPE(float(*this) - float(o)); }               \
        TYPE& operator*=(TYPE o) { return *this = TYPE(float(*this) * float(o)); }               \
        TYPE& operator/=(TYPE o) { return *this = TYPE(float(*this) / float(o)); }               \
    };                                                                                           \
    inline TYPE operator+(TYPE a, TYPE b) { return TYPE(float(a) + float(b)); }                  \
    inline TYPE operator-(TYPE a, TYPE b) { return TYPE(float(a) - float(b)); }                  \
    inline TYPE operator*(TYPE a, TYPE b) { return TYPE(float(a) * float(b)); }                  \
    inline TYPE operator/(TYPE a, TYPE b) { return TYPE(float(a) / float(b)); }                  \
    inline TYPE operator-(TYPE a) { TYPE r; r.bits = a.bits ^ 0x8000u; return r; }               \
    inline bool operator==(TYPE a, TYPE b) { return float(a) == float(b); }                      \
    inline bool operator!=(TYPE a, TYPE b) { return float(a) != float(b); }                      \
    inline bool operator<(TYPE a, TYPE b) { return float(a) < float(b); }                        \
    inline bool operator<=(TYPE a, TYPE b) { return float(a) <= float(b); }                      \
    inline bool operator>(TYPE a, TYPE b) { return float(a) > float(b); }                        \
    inline bool operator>=(TYPE a, TYPE b) { return float(a) >= float(b); }

PORTKIT_16BIT(__half, float_to_half_bits, half_bits_to_float)
PORTKIT_16BIT(__nv_bfloat16, float_to_bf16_bits, bf16_bits_to_float)
#undef PORTKIT_16BIT
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;
struct __half2 { __half x, y; };
struct __nv_bfloat162 { __nv_bfloat16 x, y; };

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __half __double2half(double d) { return __half(d); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return float(b); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
inline float2 __half22float2(__half2 h) { return float2{float(h.x), float(h.y)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{float(h.x), float(h.y)}; }
#define PORTKIT_HALF_FN(T, PRE)                                                                   \
    inline T PRE##add(T a, T b) { return a + b; }                                                \
    inline T PRE##sub(T a, T b) { return a - b; }                                                \
    inline T PRE##mul(T a, T b) { return a * b; }                                                \
    inline T PRE##div(T a, T b) { return a / b; }                                                \
    inline T PRE##fma(T a, T b, T c) { return T(fmaf(float(a), float(b), float(c))); }          \
    inline T PRE##neg(T a) { return -a; }                                                        \
    inline T PRE##max(T a, T b) { return T(fmaxf(float(a), float(b))); }                         \
    inline T PRE##min(T a, T b) { return T(fminf(float(a), float(b))); }
PORTKIT_HALF_FN(__half, __h)
PORTKIT_HALF_FN(__nv_bfloat16, __h)
#undef PORTKIT_HALF_FN
// Math of the narrow types: the float32 function (portkit_math.h), rounded to the type,
// as the simulator computes them.
#define PORTKIT_HALF_MATH(T)                                                              \
    inline T hexp(T h) { return T(expf(float(h))); } \
    inline T hexp2(T h) { return T(exp2f(float(h))); } \
    inline T hexp10(T h) { return T(exp10f(float(h))); } \
    inline T hlog(T h) { return T(logf(float(h))); } \
    inline T hlog2(T h) { return T(log2f(float(h))); } \
    inline T hlog10(T h) { return T(log10f(float(h))); } \
    inline T hsin(T h) { return T(sinf(float(h))); } \
    inline T hcos(T h) { return T(cosf(float(h))); } \
    inline T htanh(T h) { return T(tanhf(float(h))); } \
    inline T hsqrt(T h) { return T(sqrtf(float(h))); } \
    inline T hrsqrt(T h) { return T(1.0f / sqrtf(float(h))); } \
    inline T hrcp(T h) { return T(1.0f / float(h)); }
PORTKIT_HALF_MATH(__half)
PORTKIT_HALF_MATH(__nv_bfloat16)
#undef PORTKIT_HALF_MATH

inline bool __hisnan(__half h) { return __builtin_isnan(float(h)); }
inline bool __hisnan(__nv_bfloat16 h) { return __builtin_isnan(float(h)); }
