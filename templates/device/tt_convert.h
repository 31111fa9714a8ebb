/* float16 (IEEE binary16) <-> float32 bit conversions for the readers and writers of float16 buffers
 * (lowering/codegen/c_exprs.py). The baby cores have no FPU: integer arithmetic on the bit patterns.
 * Widening is exact (binary16 denormals become float32 normals); narrowing rounds to nearest, ties to even, overflows
 * to inf, gives binary16 denormals below 2^-14 and keeps NaNs NaN (quiet, sign and the payload's top bits kept). */
#ifndef TT_CONVERT_H
#define TT_CONVERT_H

#include <stdint.h>

static inline uint32_t tt_f16_to_f32(uint32_t h)
{
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return sign | 0x7F800000u | (m << 13);             /* inf, NaN */
    if (e == 0u) {
        if (m == 0u) return sign;                                       /* +-0 */
        e = 113u;                                                        /* denormal: normalise (m * 2^-24) */
        while (!(m & 0x400u)) { m <<= 1; e--; }
        return sign | (e << 23) | ((m & 0x3FFu) << 13);
    }
    return sign | ((e + 112u) << 23) | (m << 13);
}

/* a float32 bit pattern as a C float (index math reading a float buffer: lowering/codegen/c_exprs.py INDEX_LOAD) */
static inline float tt_f32_from_bits(uint32_t b)
{
    union { uint32_t u; float f; } v = { b };
    return v.f;
}

static inline uint32_t tt_f32_bits(float f)
{
    union { float f; uint32_t u; } v = { f };
    return v.u;
}

static inline uint16_t tt_f32_to_f16(uint32_t f)
{
    uint32_t sign = (f >> 16) & 0x8000u, a = f & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));   /* NaN stays NaN */
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);     /* >= 65520 rounds to inf (and inf itself) */
    uint32_t q, rem, half;
    if (a < 0x38800000u) {                                          /* below 2^-14: a denormal in units of 2^-24 */
        uint32_t e = a >> 23, shift = 126u - e;
        if (e < 102u) return (uint16_t)sign;                          /* under half of 2^-24 (fp32 denormals too) */
        uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
        q = m >> shift; rem = m & ((1u << shift) - 1u); half = 1u << (shift - 1u);
    } else {                                                         /* normal: rebias the exponent, drop 13 bits */
        uint32_t r = a - 0x38000000u;
        q = r >> 13; rem = r & 0x1FFFu; half = 0x1000u;
    }
    if (rem > half || (rem == half && (q & 1u))) q++;               /* a carry into the exponent is correct */
    return (uint16_t)(sign | q);
}

/* index math on float16 / bfloat16 values (lowering/index.py ROUND): a float32 result rounded to the narrow format,
 * to nearest even, and widened back */
static inline float tt_round_f16(float x) { return tt_f32_from_bits(tt_f16_to_f32(tt_f32_to_f16(tt_f32_bits(x)))); }

static inline float tt_round_bf16(float x)
{
    uint32_t b = tt_f32_bits(x);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return x;                   /* NaN stays NaN */
    return tt_f32_from_bits((b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u);
}

#endif
