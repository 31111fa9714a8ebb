/* float16 (IEEE binary16) <-> float32 bit conversions for the readers and writers of float16 buffers
 * (lowering/codegen/c_exprs.py). The baby cores have no FPU: integer arithmetic on the bit patterns.
 * Widening is exact (binary16 denormals become float32 normals); narrowing rounds to nearest, ties to even, overflows
 * to inf, gives binary16 denormals below 2^-14 and keeps NaNs NaN (quiet, sign and the payload's top bits kept). */
#ifndef TT_CONVERT_H
#define TT_CONVERT_H

#include <stdint.h>

/* Zbb's clz and minu: the baby cores implement Zbb (tt-isa-documentation, BlackholeA0/TensixTile/BabyRISCV/
 * InstructionSet.md), but the project compiles for rv32im (runtime/compile.py), so the compiler never emits them:
 * encoded by hand with .insn, which GNU as and LLVM's integrated assembler accept under -march=rv32im */
static inline uint32_t tt_clz(uint32_t x)
{
    uint32_t n;
    __asm__(".insn i 0x13, 1, %0, %1, 0x600" : "=r"(n) : "r"(x));          /* clz: OP-IMM, funct3 1, imm 0x600 */
    return n;
}

static inline uint32_t tt_minu(uint32_t x, uint32_t y)
{
    uint32_t n;
    __asm__(".insn r 0x33, 5, 5, %0, %1, %2" : "=r"(n) : "r"(x), "r"(y));   /* minu: OP, funct3 5, funct7 5 */
    return n;
}

/* One straight path for zeros, denormals and normals, so that a datum's cost does not depend on its value (a
 * denormal used to be normalised by a loop, one pass per leading zero); only inf and NaN branch off (a shorter path).
 * c = clz(min(a, 0x400)) is 21 for a normal, 22..31 for a denormal (21 + the shift that brings its leading one to bit
 * 10) and 32 for a zero. ((133 - c) << (31 - c)) + a, shifted left by c - 8, puts a's bits below float32's exponent
 * field and 133 - c in that field: 112 + e for a normal (e in a's bits 10..14), 133 - c + 1 for a denormal (its
 * leading one carries into the exponent). For a zero both shifts are taken mod 32, as sll takes them (31 and 24):
 * 101 << 31 then << 24 leaves nothing. */
static inline uint32_t tt_f16_to_f32(uint32_t h)
{
    uint32_t sign = (h >> 15) << 31, a = h & 0x7FFFu;          /* shifts, not a mask: one constant less to load */
    if (a >= 0x7C00u) return sign | 0x7F800000u | ((a & 0x3FFu) << 13);             /* inf, NaN */
    uint32_t c = tt_clz(tt_minu(a, 0x400u));
    return sign | ((((133u - c) << (~c & 31u)) + a) << ((c - 8u) & 31u));          /* ~c & 31 = 31 - c mod 32 */
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
