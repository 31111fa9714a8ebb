/* SFPU instructions in C: the data effect of a run of decoded SFPU instructions on the LRegs, the lane flags and Dst,
 * the same bits as the functional model in chip/numerics/sfpu (the reference, which the equality tests pin this
 * against), one handler per instruction named after it. Covered: what the emulator defers (accel/deferral.py) in the
 * Vector Unit's plain state (no LaneConfig bit set, no SFPLOADMACRO work): SFPLOAD/SFPSTORE in the 32-bit Dst modes,
 * the SFPMAD family on the Blackhole FMA datapath (chip/numerics/fma.py, docs/sfpu_path.md), moves, integer, bit and
 * FP-field operations, SFPCAST's deterministic modes, SFPARECIP, SFPMUL24 without INDIRECT_VA/VD, SFPSWAP (LaneConfig
 * clear: no exchange, no argmin/argmax indices), SFPTRANSP, SFPCONFIG into a programmable constant (LReg[11..14]), and
 * the lane-flag instructions that do not touch the flag stack. The caller (accel/sfpu_native.py) encodes each
 * instruction as a record of REC int32 and guarantees the conditions above; an op code this file does not know ends
 * the run.
 * Built by accel/native.py with the host compiler. */
#include <stdint.h>
#include <string.h>

#define REC 8                 /* record: op, mod, va, vb, vc, vd, imm, addr */
#define LANES 32
#define SIGN 0x80000000u
#define ONE_F32 0x3F800000u
#define CANONICAL_NAN 0x7FC00000u

/* op codes: the order of OP_NAMES, which the loader checks against its own table */
enum { OP_SFPLOAD, OP_SFPSTORE, OP_SFPMAD, OP_SFPADDI, OP_SFPMULI, OP_SFPLOADI, OP_SFPEXMAN, OP_SFPSETEXP,
       OP_SFPSETMAN, OP_SFPSETSGN, OP_SFPDIVP2, OP_SFPAND, OP_SFPOR, OP_SFPXOR, OP_SFPNOT, OP_SFPABS, OP_SFPSHFT,
       OP_SFPARECIP, OP_SFPNOP, OP_SFPMOV, OP_SFPCAST, OP_SFPEXEXP, OP_SFPLZ, OP_SFPIADD, OP_SFPSETCC, OP_SFPENCC,
       OP_SFPGT, OP_SFPLE, OP_SFPMUL24, OP_SFPSWAP, OP_SFPTRANSP, OP_SFPCONFIG, OP_COUNT };
static const char OP_NAMES[] = "SFPLOAD SFPSTORE SFPMAD SFPADDI SFPMULI SFPLOADI SFPEXMAN SFPSETEXP SFPSETMAN "
    "SFPSETSGN SFPDIVP2 SFPAND SFPOR SFPXOR SFPNOT SFPABS SFPSHFT SFPARECIP SFPNOP SFPMOV SFPCAST SFPEXEXP SFPLZ "
    "SFPIADD SFPSETCC SFPENCC SFPGT SFPLE SFPMUL24 SFPSWAP SFPTRANSP SFPCONFIG";

const char *sfpu_op_names(void) { return OP_NAMES; }

/* SFPARECIP's tables (lane_math._RECIP_LUT, _EXP_LUT), handed over by the loader: one copy of the data */
static const uint8_t *recip_lut, *exp_lut;
static int64_t exp_lut_len;

void sfpu_set_tables(const uint8_t *recip, const uint8_t *exp, int32_t exp_len) {
    recip_lut = recip; exp_lut = exp; exp_lut_len = exp_len;
}

static uint32_t clz32(uint32_t v) { return v ? (uint32_t)__builtin_clz(v) : 32; }
static int32_t sext(int32_t v, int bits) { return v & (1 << (bits - 1)) ? v - (1 << bits) : v; }
static int64_t smag_key(uint32_t v) { return v >= SIGN ? (int64_t)SIGN - 1 - v : (int64_t)v; }

/* The Blackhole FMA x * y + z on FP32 bit patterns, 8 lanes at a time in GCC's vector extension (every step branch-free,
 * so the AVX2 clone below runs it on whole registers: ~5x the scalar code's speed on random operands): fma._fma_exact
 * lane by lane, in integers (the comments there say why each step is as it is): denormal inputs read as zero, the
 * product kept on a 27-bit grid with a sticky bit, semi-sticky alignment, one round to nearest even, denormal results
 * flushed, the rare cases patched in order. Every quantity fits 32 bits: the 48-bit product of the mantissas is formed
 * from 12-bit halves (hi * 2^24 + lo), the aligned sum stays below 2^29, and a shift by 32 or more gives 0 (SHR8). */
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
#define U8(x) ((v8u){0} + (uint32_t)(x))                             /* x in every lane */
#define I8(x) ((v8i){0} + (int32_t)(x))
#define SEL8(m, a, b) ((((v8u)(m)) & (a)) | (~((v8u)(m)) & (b)))     /* m: a comparison's all-ones / zero lanes */
#define SHR8(v, s) SEL8((s) < U8(32), (v) >> ((s) & U8(31)), U8(0))    /* v >> s, 0 for s >= 32 */

/* out[0..7] = fma(x, y ^ ny, z ^ nz) lane by lane (vectors stay inside: passed by value, their ABI would depend on the
 * clone's target) */
__attribute__((always_inline)) static inline void fma8(const uint32_t *px, const uint32_t *py, const uint32_t *pz,
                                                       uint32_t ny, uint32_t nz, uint32_t *pout) {
    v8u x, y, z;
    memcpy(&x, px, 32);
    memcpy(&y, py, 32);
    memcpy(&z, pz, 32);
    y ^= U8(ny);
    z ^= U8(nz);
    v8i ex = (v8i)(x >> 23 & U8(255)), ey = (v8i)(y >> 23 & U8(255)), ez = (v8i)(z >> 23 & U8(255));
    v8u mx = SEL8(ex != I8(0), (x & U8(0x7FFFFF)) | U8(0x800000), U8(0));
    v8u my = SEL8(ey != I8(0), (y & U8(0x7FFFFF)) | U8(0x800000), U8(0));
    v8u mz = SEL8(ez != I8(0), (z & U8(0x7FFFFF)) | U8(0x800000), U8(0));
    v8u p_sign = (x ^ y) & U8(SIGN), z_sign = z & U8(SIGN);
    v8u xh = mx >> 12, xl = mx & U8(0xFFF), yh = my >> 12, yl = my & U8(0xFFF), mid = xh * yl + xl * yh;
    v8u lo = xl * yl + ((mid & U8(0xFFF)) << 12), hi = xh * yh + (mid >> 12);
    v8u pm = ((hi << 4) + (lo >> 20)) | ((v8u)((lo & U8(0xFFFFF)) != U8(0)) & U8(1));   /* (mx my << 3) >> 23, sticky */
    v8i pe = ex + ey - I8(127);
    v8u zm = mz << 3;
    v8i re = (v8i)SEL8(pe > ez, (v8u)pe, (v8u)ez);
    v8u sp = (v8u)(re - pe), sz = (v8u)(re - ez);
    v8u pa = SHR8(pm, sp), za = SHR8(zm, sz);
    pa |= (v8u)((pa != U8(0)) & ((pa << (sp & U8(31))) != pm)) & U8(1);     /* (pa != 0: the shift was < 32) */
    za |= (v8u)((za != U8(0)) & ((za << (sz & U8(31))) != zm)) & U8(1);
    v8u rm = SEL8(p_sign == z_sign, pa + za, SEL8(pa > za, pa - za, za - pa));
    v8u r_sign = SEL8(pa >= za, p_sign, z_sign);
    v8u len = U8(0), v = rm, step;                  /* the bit length of rm (0 for 0), by halving */
    for (int b = 16; b; b >>= 1) {
        step = (v8u)(v >= U8(1u << b)) & U8(b);
        v >>= step;
        len += step;
    }
    v8i n = (v8i)(len + v) - I8(27);
    re += n;
    v8i ren = (v8i)SEL8(re > I8(0), (v8u)re, U8(0));
    n += (v8i)((v8u)(ren == I8(0)) & U8(1));
    v8i right = (v8i)SEL8(n > I8(0), (v8u)n, U8(0));
    v8u rm2 = SHR8(rm << ((v8u)(right - n) & U8(31)), (v8u)right);
    rm2 |= (v8u)(((rm & ((v8u)right | U8(1))) != U8(0)) & (right != I8(0))) & U8(1);
    v8u r = ((v8u)ren << 23) + (rm2 >> 3 & U8(0x7FFFFF));  /* unsigned: ren may exceed 255 (those lanes are replaced) */
    r += ((rm2 & U8(7)) + (r & U8(1)) + U8(3)) >> 3;
    v8u out = r_sign | SEL8((r >> 23) == U8(0), U8(0), r);
    out = SEL8(re >= I8(255), r_sign | U8(0x7F800000), out);                  /* overflow of the sum */
    out = SEL8(rm == U8(0), z_sign & p_sign, out);                             /* exact cancellation */
    out = SEL8((pm == U8(0)) | (pe < I8(0)), SEL8(zm != U8(0), z, z_sign & p_sign), out);   /* product zero or underflowing */
    v8i xin = ex == I8(255), yin = ey == I8(255), zin = ez == I8(255);       /* non-finite input or product overflow */
    v8i is_nan = (xin & ((mx != U8(0x800000)) | (my == U8(0)))) | (yin & ((my != U8(0x800000)) | (mx == U8(0))))
                 | (zin & (zm != U8(0x4000000))) | (zin & (xin | yin) & (z_sign != p_sign));
    v8u special = SEL8(is_nan, U8(CANONICAL_NAN), SEL8(zin, z, p_sign | U8(0x7F800000)));
    out = SEL8(xin | yin | zin | (pe >= I8(255)), special, out);
    memcpy(pout, &out, 32);
}

/* out[i] = fma(x[i], y[i] ^ ny, z[i] ^ nz) for i < n, n a multiple of 8 (ny, nz: sign flips) */
#if defined(__x86_64__) && defined(__GLIBC__) && (defined(__clang__) || __GNUC__ >= 6)
__attribute__((target_clones("avx2", "default")))
#endif
static void fma_lanes_int(const uint32_t *x, const uint32_t *y, const uint32_t *z, uint32_t ny, uint32_t nz,
                          uint32_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i += 8)
        fma8(x + i, y + i, z + i, ny, nz, out + i);
}

static int fma_f64_fast;         /* 0: fma8 on every lane (TT_EMU_FMA_F64_NATIVE=0); sfpu_set_fma_f64 sets it at load */
static int64_t fma_f64_groups;   /* 8-lane groups it was asked for since the library loaded (for the tests) */
static int64_t fma_f64_declined; /* of them, those it declined */

/* The same FMA in float64 (chip/numerics/fma.py _fma_fast's formulation, which its tests pin against _fma_exact) on
 * x86-64 with AVX2, ~1/3 of fma8's instructions: the product of two FP32 is exact in float64; both terms scaled by the
 * power of two that puts the larger exponent on fma8's 27-bit grid (2^(153 - max(pe, ez))) are truncated to integers
 * with a sticky LSB (the semi-sticky alignment), their sum is exact, and float64 -> FP32 rounds it to nearest even
 * once. It declines an 8-lane group with a denormal, Inf or NaN input, a product exponent outside 0..254 or a result
 * that is denormal or near overflow: fma8 (the reference, and the path without AVX2) then runs the group. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FMA_F64_AVX2 1
#define AVX2_FN __attribute__((target("avx2"), always_inline)) static inline

/* 2^e on four lanes (e: int32, -1022 <= e <= 1023), the float64 with that exponent field */
AVX2_FN __m256d pow2_4(__m128i e) {
    return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm_add_epi32(e, _mm_set1_epi32(1023))), 52));
}

/* q's integer part (|q| < 2^28) with a sticky LSB where q is not an integer, q's sign kept (a zero part: signed 0) */
AVX2_FN __m256d sticky_trunc(__m256d q) {
    __m256d sign = _mm256_and_pd(q, _mm256_castsi256_pd(_mm256_set1_epi64x((int64_t)0x8000000000000000ull)));
    __m256d aq = _mm256_xor_pd(q, sign);
    __m128i ti = _mm256_cvttpd_epi32(aq);
    __m256d t = _mm256_cvtepi32_pd(ti), odd = _mm256_cvtepi32_pd(_mm_or_si128(ti, _mm_set1_epi32(1)));
    __m256d r = _mm256_blendv_pd(odd, t, _mm256_cmp_pd(t, aq, _CMP_EQ_OQ));
    r = _mm256_and_pd(r, _mm256_cmp_pd(t, _mm256_setzero_pd(), _CMP_NEQ_OQ));
    return _mm256_or_pd(r, sign);
}

/* four lanes' sum in float64 (sh: each lane's scale exponent), or 0 where a lane's FP32 is neither 0 nor normal */
AVX2_FN int sum4(__m256d x, __m256d y, __m256d z, __m128i sh, __m128 *out) {
    __m256d up = pow2_4(sh);
    __m256d s = _mm256_mul_pd(_mm256_add_pd(sticky_trunc(_mm256_mul_pd(_mm256_mul_pd(x, y), up)),
                                            sticky_trunc(_mm256_mul_pd(z, up))),
                              pow2_4(_mm_sub_epi32(_mm_setzero_si128(), sh)));
    __m256d as = _mm256_andnot_pd(_mm256_set1_pd(-0.0), s);
    __m256d fine = _mm256_or_pd(_mm256_cmp_pd(as, _mm256_setzero_pd(), _CMP_EQ_OQ),
                                _mm256_and_pd(_mm256_cmp_pd(as, _mm256_set1_pd(0x1p-126), _CMP_GE_OQ),
                                              _mm256_cmp_pd(as, _mm256_set1_pd(0x1p127), _CMP_LT_OQ)));
    *out = _mm256_cvtpd_ps(s);                   /* to nearest even (the FPU's default mode) */
    return _mm256_movemask_pd(fine) == 0xF;
}

/* out[0..7] = fma(x, y ^ ny, z ^ nz), or 0 (out untouched) where the float64 form does not apply to every lane */
AVX2_FN int fma8_f64(const uint32_t *px, const uint32_t *py, const uint32_t *pz, uint32_t ny, uint32_t nz,
                     uint32_t *pout) {
    __m256i x = _mm256_loadu_si256((const __m256i *)px);
    __m256i y = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)py), _mm256_set1_epi32((int32_t)ny));
    __m256i z = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)pz), _mm256_set1_epi32((int32_t)nz));
    __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), zero = _mm256_setzero_si256(), e255 = _mm256_set1_epi32(255);
    __m256i ax = _mm256_and_si256(x, abs), ay = _mm256_and_si256(y, abs), az = _mm256_and_si256(z, abs);
    __m256i ex = _mm256_srli_epi32(ax, 23), ey = _mm256_srli_epi32(ay, 23), ez = _mm256_srli_epi32(az, 23);
    __m256i bad = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi32(ex, e255), _mm256_cmpeq_epi32(ey, e255)),
                                  _mm256_cmpeq_epi32(ez, e255));                        /* Inf, NaN */
    __m256i den = _mm256_or_si256(_mm256_or_si256(_mm256_andnot_si256(_mm256_cmpeq_epi32(ax, zero),
                                                                      _mm256_cmpeq_epi32(ex, zero)),
                                                  _mm256_andnot_si256(_mm256_cmpeq_epi32(ay, zero),
                                                                      _mm256_cmpeq_epi32(ey, zero))),
                                  _mm256_andnot_si256(_mm256_cmpeq_epi32(az, zero), _mm256_cmpeq_epi32(ez, zero)));
    __m256i pzero = _mm256_or_si256(_mm256_cmpeq_epi32(ex, zero), _mm256_cmpeq_epi32(ey, zero));
    __m256i pe = _mm256_blendv_epi8(_mm256_sub_epi32(_mm256_add_epi32(ex, ey), _mm256_set1_epi32(127)), ez, pzero);
    bad = _mm256_or_si256(_mm256_or_si256(bad, den), _mm256_or_si256(_mm256_cmpgt_epi32(zero, pe),
                                                                     _mm256_cmpgt_epi32(pe, _mm256_set1_epi32(254))));
    if (!_mm256_testz_si256(bad, bad)) return 0;
    __m256i sh = _mm256_sub_epi32(_mm256_set1_epi32(153), _mm256_max_epi32(pe, ez));
    __m256 fx = _mm256_castsi256_ps(x), fy = _mm256_castsi256_ps(y), fz = _mm256_castsi256_ps(z);
    __m128 lo, hi;
    if (!sum4(_mm256_cvtps_pd(_mm256_castps256_ps128(fx)), _mm256_cvtps_pd(_mm256_castps256_ps128(fy)),
              _mm256_cvtps_pd(_mm256_castps256_ps128(fz)), _mm256_castsi256_si128(sh), &lo)
        || !sum4(_mm256_cvtps_pd(_mm256_extractf128_ps(fx, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(fy, 1)),
                 _mm256_cvtps_pd(_mm256_extractf128_ps(fz, 1)), _mm256_extracti128_si256(sh, 1), &hi))
        return 0;
    _mm_storeu_ps((float *)pout, lo);
    _mm_storeu_ps((float *)pout + 4, hi);
    return 1;
}

/* fma_lanes_int's result, each 8-lane group through fma8_f64 where it applies */
__attribute__((target("avx2"))) static void fma_lanes_f64(const uint32_t *x, const uint32_t *y, const uint32_t *z,
                                                          uint32_t ny, uint32_t nz, uint32_t *out, int64_t n) {
    fma_f64_groups += n / 8;
    for (int64_t i = 0; i < n; i += 8) {
        if (fma8_f64(x + i, y + i, z + i, ny, nz, out + i)) continue;
        fma_f64_declined++;
        fma8(x + i, y + i, z + i, ny, nz, out + i);
    }
}
#endif

/* the float64 form on or off; returns whether it is on (never without AVX2) */
int32_t sfpu_set_fma_f64(int32_t on) {
#ifdef FMA_F64_AVX2
    fma_f64_fast = on != 0 && __builtin_cpu_supports("avx2");
#else
    fma_f64_fast = 0;
    (void)on;
#endif
    return fma_f64_fast;
}
int64_t sfpu_fma_f64_groups(void) { return fma_f64_groups; }
int64_t sfpu_fma_f64_declined(void) { return fma_f64_declined; }

static void fma_lanes(const uint32_t *x, const uint32_t *y, const uint32_t *z, uint32_t ny, uint32_t nz, uint32_t *out,
                      int64_t n) {
#ifdef FMA_F64_AVX2
    /* (its last rounding is the MXCSR's: to nearest only; and every FP exception masked, as the integer form raises
     * none: an unmasked one, e.g. feenableexcept(FE_INEXACT) elsewhere in the process, would trap in the float form) */
    if (fma_f64_fast && (_mm_getcsr() & 0x7F80) == 0x1F80) {
        fma_lanes_f64(x, y, z, ny, nz, out, n);
        return;
    }
#endif
    fma_lanes_int(x, y, z, ny, nz, out, n);
}

/* fma on n lanes (the equality tests' entry point) */
void sfpu_fma_lanes(const uint32_t *x, const uint32_t *y, const uint32_t *z, uint32_t *out, int64_t n) {
    int64_t whole = n & ~(int64_t)7;
    fma_lanes(x, y, z, 0, 0, out, whole);
    uint32_t t[4][8] = {{0}};
    for (int64_t i = whole; i < n; i++) {
        t[0][i - whole] = x[i];
        t[1][i - whole] = y[i];
        t[2][i - whole] = z[i];
    }
    fma_lanes(t[0], t[1], t[2], 0, 0, t[3], 8);
    for (int64_t i = whole; i < n; i++) out[i] = t[3][i - whole];
}

static uint32_t approx_recip(uint32_t x) {     /* ApproxRecip of SFPARECIP.md, sign-cleared input */
    if (x < 0x00800000) return 0x7F800000;
    if (x < 0x7E800000) return (253 - (x >> 23)) << 23 | (uint32_t)recip_lut[x >> 16 & 0x7F] << 16;
    return 0;
}

static uint32_t approx_exp(uint32_t x) {       /* ApproxExp of SFPARECIP.md, sign-cleared input */
    uint32_t lo = x & 0xFFFF;
    int64_t i = (int64_t)(x >> 16) - 0x3C80;
    uint32_t lut = (uint32_t)exp_lut[i < 0 ? 0 : i >= exp_lut_len ? exp_lut_len - 1 : i] << 16;
    if (x < 0x00800000) return 0x3F800000;
    if (x < 0x3C800000) return 0x3F810000 | lo;
    if (x < 0x3F320000) return 0x3F800000 | lut | lo;
    if (x < 0x40000000) return 0x40000000 | lut | lo;
    return 0x40800000 | lo;
}

/* SFPCAST's int32 -> FP32 round-to-nearest-even (mode 0), the two's-complement/sign-magnitude swaps (2, 3) */
static uint32_t cast(uint32_t c, int mode) {
    if (mode == 0) {
        uint32_t sign = c & SIGN, mag = c & 0x7FFFFFFF, lz = mag ? clz32(mag) : 157;
        uint32_t norm = mag << (lz & 31);
        uint32_t d = sign + ((157 - lz) << 23) + (norm >> 8);
        return d + ((norm & 0x80) != 0 && (norm & 0x17F) != 0);
    }
    if (mode == 2) return c >= SIGN ? 0u - c : c;
    uint32_t sign = c & SIGN;
    return sign | (sign ? 0u - c : c);
}

typedef struct {
    uint32_t (*lreg)[LANES];      /* 17 x 32 */
    uint8_t *lf, *use;            /* LaneFlags, UseLaneFlagsForLaneEnable */
    uint32_t (*dst)[16];          /* Dst32b rows */
    uint8_t *written;             /* Dst32b rows written since reset */
    uint32_t on;                  /* bit l: lane l enabled (lf[l] || !use[l]); set by lanes_on after lf / use change */
} State;

#define ALL_ON 0xFFFFFFFFu

/* The lane-enable mask from the flags: read per lane it had cost two byte loads and a branch on every lane of every
 * instruction; with every lane on (the common case) the loops below run without a test. */
#define BYTES_LSB 0x0101010101010101ull
static uint64_t nonzero_bytes(const uint8_t *p) {     /* 8 bytes from p: 1 in each byte that is not 0, else 0 */
    uint64_t x;
    memcpy(&x, p, 8);
    return (((x & 0x7F * BYTES_LSB) + 0x7F * BYTES_LSB) | x) >> 7 & BYTES_LSB;
}
static void lanes_on(State *s) {        /* (8 lanes a step: called after every flag instruction) */
    uint32_t on = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (int l = 0; l < LANES; l += 8) {   /* the multiply gathers byte k's bit 0 into bit 56 + k (no carries) */
        uint64_t b = nonzero_bytes(s->lf + l) | (nonzero_bytes(s->use + l) ^ BYTES_LSB);
        on |= (uint32_t)((b * 0x0102040810204080ull) >> 56) << l;
    }
#else
    for (int l = 0; l < LANES; l++) on |= (uint32_t)((s->lf[l] != 0) | (s->use[l] == 0)) << l;
#endif
    s->on = on;
}

static int writable(int vd) { return vd < 8 || vd == 16; }
static int enabled(const State *s, int l) { return s->on >> l & 1; }

static void write_enabled(State *s, int vd, const uint32_t *v) {    /* LReg[vd] := v on the enabled lanes */
    if (s->on == ALL_ON) {
        memcpy(s->lreg[vd], v, sizeof s->lreg[vd]);
        return;
    }
    for (int l = 0; l < LANES; l++)
        if (enabled(s, l)) s->lreg[vd][l] = v[l];
}

/* Dst (row, column) of lane l at an even address below 512: rows (addr & ~3) + l / 8, columns 2 (l % 8) + addr bit 1 */
#define DST_AT(s, addr, l) ((s)->dst[((addr) & ~3) + (l) / 8][2 * ((l) % 8) + ((addr) >> 1 & 1)])

static void SFPLOAD(State *s, const int32_t *r) {
    int vd = r[5], addr = r[7];
    if (s->on == ALL_ON) {        /* DST_AT row by row: lanes 8q..8q+7 from row (addr & ~3) + q, every other column */
        const uint32_t (*rows)[16] = s->dst + (addr & ~3);
        int half = addr >> 1 & 1;
        for (int q = 0; q < 4; q++)
            for (int c = 0; c < 8; c++) s->lreg[vd][8 * q + c] = rows[q][2 * c + half];
        return;
    }
    for (int l = 0; l < LANES; l++)
        if (enabled(s, l)) s->lreg[vd][l] = DST_AT(s, addr, l);
}

static uint32_t stored(int mode, uint32_t d) {     /* SFPSTORE: the Dst word of LReg word d */
    if (mode == 3 && (d & 0x7F800000) == 0) d &= SIGN;   /* FP32: denormals flushed to signed zero */
    if (mode == 7) {   /* HI16: the word as is in Dst's storage, whose canonical word unshuffles the high half */
        uint32_t h = d >> 16;
        d = ((h & 0x8000) | (h & 0xFF) << 7 | (h >> 8 & 0x7F)) << 16 | (d & 0xFFFF);
    }
    return d;
}

static void SFPSTORE(State *s, const int32_t *r) {
    int mode = r[1], vd = r[5], addr = r[7];
    if (s->on == ALL_ON) {              /* every lane (DST_AT row by row, as SFPLOAD): all four rows written */
        uint32_t (*rows)[16] = s->dst + (addr & ~3), v[LANES];
        int half = addr >> 1 & 1;
        memcpy(v, s->lreg[vd], sizeof v);
        for (int q = 0; q < 4; q++)
            for (int c = 0; c < 8; c++) rows[q][2 * c + half] = stored(mode, v[8 * q + c]);
        memset(s->written + (addr & ~3), 1, LANES / 8);
        return;
    }
    for (int l = 0; l < LANES; l++) {
        if (!enabled(s, l)) continue;
        DST_AT(s, addr, l) = stored(mode, s->lreg[vd][l]);
        s->written[(addr & ~3) + l / 8] = 1;
    }
}

static void SFPMAD(State *s, const int32_t *r) {   /* also SFPADD, SFPMUL; no INDIRECT_VA/VD */
    int mod = r[1], vd = r[5];
    uint32_t nb = mod & 1 ? SIGN : 0, nc = mod & 2 ? SIGN : 0;
    uint32_t out[LANES];
    fma_lanes(s->lreg[r[2]], s->lreg[r[3]], s->lreg[r[4]], nb, nc, out, LANES);
    write_enabled(s, vd, out);
}

static void SFPADDI(State *s, const int32_t *r) {  /* BF16ToFP32(Imm16) * 1.0 + VD */
    int vd = r[5];
    uint32_t nc = r[1] & 2 ? SIGN : 0, imm[LANES], one[LANES], out[LANES];
    for (int l = 0; l < LANES; l++) imm[l] = (uint32_t)r[6] << 16, one[l] = ONE_F32;
    fma_lanes(imm, one, s->lreg[vd], 0, nc, out, LANES);
    write_enabled(s, vd, out);
}

static void SFPMULI(State *s, const int32_t *r) {  /* BF16ToFP32(Imm16) * VD + 0.0 */
    int vd = r[5];
    uint32_t nc = r[1] & 2 ? SIGN : 0, imm[LANES], zero[LANES] = {0}, out[LANES];
    for (int l = 0; l < LANES; l++) imm[l] = (uint32_t)r[6] << 16;
    fma_lanes(imm, s->lreg[vd], zero, nc, 0, out, LANES);
    write_enabled(s, vd, out);
}

/* SFPLOADI: every lane gets the same word, or (Mod0 8, 10) the same half beside the half it keeps: the mode decided
 * once per instruction, not per lane (a long body's constants are SFPLOADI pairs, a third of its words): keep keeps
 * the old word's bits, set sets the new ones, on the enabled lanes */
static void SFPLOADI(State *s, const int32_t *r) {
    int mod = r[1], vd = r[5];
    uint32_t imm = (uint32_t)r[6] & 0xFFFF, keep = 0, set;
    switch (mod) {
    case 0: set = imm << 16; break;
    case 1: set = (imm >> 15) << 31 | ((imm >> 10 & 0x1F) + 112) << 23 | (imm & 0x3FF) << 13; break;
    case 2: set = imm; break;
    case 4: set = (uint32_t)sext((int32_t)imm, 16); break;
    case 8: set = imm << 16, keep = 0xFFFF; break;
    default: set = imm, keep = 0xFFFF0000; break;   /* 10 */
    }
    uint32_t *d = s->lreg[vd];
    if (s->on == ALL_ON) {          /* (the common case: a loop the compiler vectorises) */
        for (int l = 0; l < LANES; l++) d[l] = (d[l] & keep) | set;
        return;
    }
    for (int l = 0; l < LANES; l++)
        if (enabled(s, l)) d[l] = (d[l] & keep) | set;
}

/* the element-wise LReg instructions without flags: a lane's value from its VC word c, its VD word d and its word x
 * of LReg[Imm & 15] (the lane is enabled and VD writable) */
__attribute__((always_inline)) static inline uint32_t lanewise(int op, int mod, int imm, uint32_t c, uint32_t d,
                                                               uint32_t x) {
    switch (op) {
    case OP_SFPEXMAN: return (c & 0x7FFFFF) + (mod & 1 ? 0 : 1u << 23);
    case OP_SFPSETEXP: {
        uint32_t e = mod & 1 ? (uint32_t)imm & 0xFF : mod & 2 ? d >> 23 & 0xFF : d & 0xFF;
        return (c & 0x807FFFFF) | e << 23;
    }
    case OP_SFPSETMAN: return (c & 0xFF800000) | (mod & 1 ? ((uint32_t)imm & 0xFFF) << 11 : d & 0x7FFFFF);
    case OP_SFPSETSGN: return (c & 0x7FFFFFFF) | (mod & 1 ? ((uint32_t)imm & 1) << 31 : d & SIGN);
    case OP_SFPDIVP2: {
        uint32_t e = c >> 23 & 0xFF, imm8 = (uint32_t)imm & 0xFF;
        e = mod & 1 ? (e == 255 ? e : (e + imm8) & 0xFF) : imm8;
        return (c & 0x807FFFFF) | e << 23;
    }
    case OP_SFPAND: return (mod & 1 ? x : d) & c;
    case OP_SFPOR: return (mod & 1 ? x : d) | c;
    case OP_SFPXOR: return d ^ c;
    case OP_SFPNOT: return ~c;
    case OP_SFPABS:
        if (mod & 1) return c > 0xFF800000 ? c : c & 0x7FFFFFFF;   /* FLOAT: -NaN keeps its sign */
        return c >= SIGN ? 0u - c : c;
    case OP_SFPSHFT: {
        uint32_t x = d;
        int32_t amt = (int32_t)c;
        if (mod & 1) {
            if (mod & 4) x = c;
            amt = sext(imm & 0xFFF, 12);
        }
        if (amt >= 0) return x << (amt & 31);
        int rs = (int)((uint32_t)0 - (uint32_t)amt) & 31;
        return mod & 2 ? (uint32_t)((int32_t)x >> rs) : x >> rs;
    }
    case OP_SFPARECIP: {
        uint32_t sign = c & SIGN, mag = c - sign;
        if (mod == 0) return sign + approx_recip(mag);
        if (mod == 1) return (int32_t)x < 0 ? approx_recip(mag) : c;
        return sign + approx_exp(mag);
    }
    case OP_SFPMOV: return mod & 1 ? c ^ SIGN : c;
    case OP_SFPCAST: return cast(c, mod & 3);
    }
    return d;
}

/* An element-wise instruction on every lane: the loop specialised per op code (lanewise inlined with a constant op)
 * and on copies of the fields (a store through lreg may alias the record, so the compiler had reloaded them and
 * dispatched on op for every lane); the values then written on the enabled lanes. */
static void lanewise_run(State *s, int op, const int32_t *r) {
    int mod = r[1], imm = r[6], vd = r[5];
    const uint32_t *c = s->lreg[r[4]], *d = s->lreg[vd], *x = s->lreg[imm & 15];
    uint32_t out[LANES];
    switch (op) {
#define LANEWISE(o) case o: for (int l = 0; l < LANES; l++) out[l] = lanewise(o, mod, imm, c[l], d[l], x[l]); break;
    LANEWISE(OP_SFPEXMAN) LANEWISE(OP_SFPSETEXP) LANEWISE(OP_SFPSETMAN) LANEWISE(OP_SFPSETSGN) LANEWISE(OP_SFPDIVP2)
    LANEWISE(OP_SFPAND) LANEWISE(OP_SFPOR) LANEWISE(OP_SFPXOR) LANEWISE(OP_SFPNOT) LANEWISE(OP_SFPABS)
    LANEWISE(OP_SFPSHFT) LANEWISE(OP_SFPARECIP) LANEWISE(OP_SFPMOV) LANEWISE(OP_SFPCAST)
#undef LANEWISE
    default: for (int l = 0; l < LANES; l++) out[l] = d[l];
    }
    write_enabled(s, vd, out);
}

/* SFPEXEXP, SFPLZ, SFPIADD: a value and, for VD < 8, the lane flag (mode bits: 2 from the value, 8 inverted) */
static void valued_flag(State *s, int op, const int32_t *r) {
    int mod = r[1], vc = r[4], vd = r[5], imm = r[6];
    if (!writable(vd)) return;
    /* every lane computed into locals first (the byte stores to lf may alias anything: stored in the loop, they had
     * made the compiler reload the record and the rows on every lane), then written on the enabled lanes */
    const uint32_t *lc = s->lreg[vc], *ld = s->lreg[vd];
    const uint8_t *lf = s->lf;
    uint32_t value[LANES];
    uint8_t flags[LANES];
    for (int l = 0; l < LANES; l++) {
        uint32_t c = lc[l], v;
        int flag;
        if (op == OP_SFPEXEXP) {
            int32_t e = (int32_t)(c >> 23 & 0xFF) - (mod & 1 ? 0 : 127);
            v = (uint32_t)e;
            flag = mod & 2 ? e < 0 : lf[l];
        } else if (op == OP_SFPLZ) {
            if (mod & 4) c &= 0x7FFFFFFF;
            v = clz32(c);
            flag = mod & 2 ? c != 0 : lf[l];
        } else {
            v = mod & 1 ? c + (uint32_t)sext(imm & 0xFFF, 12) : mod & 2 ? c - ld[l] : c + ld[l];
            flag = mod & 4 ? lf[l] : (int)(v >> 31);
        }
        value[l] = v;
        flags[l] = (uint8_t)(mod & 8 ? !flag : flag);
    }
    write_enabled(s, vd, value);
    if (vd < 8)
        for (int l = 0; l < LANES; l++)
            if (enabled(s, l)) s->lf[l] = flags[l];
}

static void SFPSETCC(State *s, const int32_t *r) {
    int mod = r[1], vc = r[4], imm = r[6];
    for (int l = 0; l < LANES; l++) {
        if (!enabled(s, l)) continue;
        int32_t c = (int32_t)s->lreg[vc][l];     /* integer test: -0.0 counts as negative */
        int flag = mod & 8 ? 0 : mod & 1 ? imm & 1 : mod == 0 ? c < 0 : mod == 2 ? c != 0 : mod == 4 ? c >= 0 : c == 0;
        s->lf[l] = (uint8_t)(flag && s->use[l]);
    }
}

static void SFPENCC(State *s, const int32_t *r) {  /* every lane, whatever LaneEnabled says */
    int mod = r[1], imm2 = r[6] & 3;
    for (int l = 0; l < LANES; l++) {
        if (mod & 2) s->use[l] = imm2 & 1;
        else if (mod & 1) s->use[l] = !s->use[l];
        s->lf[l] = mod & 8 ? (imm2 & 2) != 0 : 1;
    }
}

static void compare(State *s, int op, const int32_t *r) {   /* SFPGT, SFPLE without MUTATE_STACK */
    int mod = r[1], vc = r[4], vd = r[5];
    for (int l = 0; l < LANES; l++) {
        if (!enabled(s, l)) continue;
        int gt = smag_key(s->lreg[vc][l]) < smag_key(s->lreg[vd][l]);   /* VD > VC */
        int result = op == OP_SFPGT ? gt : !gt;
        if (mod & 8 && writable(vd)) s->lreg[vd][l] = result ? 0xFFFFFFFFu : 0;
        if (mod & 1) s->lf[l] = (uint8_t)result;
    }
}

/* SFPMUL24 (no INDIRECT_VA/VD): the 23-bit integer product, low or UPPER half, then Mul24ShiftAdd's alignment with
 * VC as the FMA datapath does it (chip/numerics/sfpu/mad.py says why each step is as it is) */
static void SFPMUL24(State *s, const int32_t *r) {
    int mod = r[1], vd = r[5];
    uint32_t *a = s->lreg[r[2]], *b = s->lreg[r[3]], *c = s->lreg[r[4]];
    for (int l = 0; l < LANES; l++) {
        if (!enabled(s, l)) continue;
        int64_t p = mod & 1 ? (int64_t)(((uint64_t)(a[l] & 0x7FFFFF) * (b[l] & 0x7FFFFF)) >> 23)
                            : (int64_t)(((uint64_t)a[l] * b[l]) & 0x7FFFFF);
        int64_t z = c[l], z_e = z >> 23 & 0xFF;
        int64_t r_e = z_e > 129 ? z_e : 129, sh = (r_e - z_e) & 31;
        int64_t z_grs = ((1 << 23) + (z & 0x7FFFFF)) << 3;
        int64_t p2 = p >> ((r_e - 129) & 31), zm = z_grs >> sh;
        int64_t carry = (((zm << sh) ^ z_grs) > 0xFFFF) << 16;
        int64_t summed = (p2 + zm + carry) & 0x7FFFFF;
        s->lreg[vd][l] = (uint32_t)(z_e == 0 ? p : zm != 0 ? summed : p2);
    }
}

/* SFPSWAP with LaneConfig clear: Mod1 0 swaps VC and VD; otherwise each lane puts the sign-magnitude minimum in VD or
 * in VC, as Mod1's lane pattern says (a Mod1 without a pattern: the maximum in VD on every lane) */
static void SFPSWAP(State *s, const int32_t *r) {
    static const uint32_t GETS_MIN[9] = {0, 0xFFFFFFFFu, 0x0000FFFFu, 0x00FF00FFu, 0xFF0000FFu, 0x000000FFu,
                                         0x0000FF00u, 0x00FF0000u, 0xFF000000u};
    int mod = r[1], vc = r[4], vd = r[5];
    uint32_t gets_min = mod >= 1 && mod <= 8 ? GETS_MIN[mod] : 0;
    for (int l = 0; l < LANES; l++) {
        if (!enabled(s, l)) continue;
        uint32_t c = s->lreg[vc][l], d = s->lreg[vd][l];
        int c_smaller = smag_key(c) < smag_key(d);
        if (mod != 0 && (gets_min >> l & 1 ? !c_smaller : c_smaller)) continue;
        if (vc < 8) s->lreg[vc][l] = d;
        if (vd < 8) s->lreg[vd][l] = c;
    }
}

/* SFPTRANSP: in LRegs 0-3 and in 4-7, the 4 x 4 blocks of 8 lanes transposed (LReg[b+i] lanes 8j..8j+7 take
 * LReg[b+j] lanes 8i..8i+7) on the enabled lanes */
static void SFPTRANSP(State *s) {
    for (int b = 0; b < 8; b += 4) {
        uint32_t old[4][LANES];
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < LANES; l++) old[i][l] = s->lreg[b + i][l];
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < LANES; l++)
                if (enabled(s, l)) s->lreg[b + i][l] = old[l / 8][8 * i + l % 8];
    }
}

/* SFPCONFIG into LReg[11..14] (VD 9 and 10 take nothing): LReg[VD] lane l := LReg[0] lane l % 8, or with Mod1 bit 0
 * the constant's default, where lane l % 8 is enabled by the flags and, with Mod1 bit 3, bit 2 (l % 8) of Imm16 is
 * set (chip/numerics/sfpu/lane_movement.py SFPCONFIG; state.py PRGM_CONST_DEFAULTS) */
static void SFPCONFIG(State *s, const int32_t *r) {
    static const uint32_t DEFAULTS[4] = {0xBF800000u, 0x37800000u, 0xBF2CC4C7u, 0xBEB08FF9u};   /* LReg[11..14] */
    int mod = r[1], vd = r[5];
    uint32_t imm = (uint32_t)r[6] & 0xFFFF;
    if (vd < 11 || vd > 14) return;
    for (int l = 0; l < LANES; l++) {
        int l8 = l & 7;
        if (!enabled(s, l8) || (mod & 8 && !(imm >> (2 * l8) & 1))) continue;
        s->lreg[vd][l] = mod & 1 ? DEFAULTS[vd - 11] : s->lreg[0][l8];
    }
}

/* Execute n records from prog; returns how many ran (less than n at an op code this file does not know). */
int32_t sfpu_run(uint32_t *lreg, uint8_t *lane_flags, uint8_t *use_lane_flags, uint32_t *dst, uint8_t *written,
                 const int32_t *prog, int32_t n) {
    State st = {(uint32_t (*)[LANES])lreg, lane_flags, use_lane_flags, (uint32_t (*)[16])dst, written, 0};
    State *s = &st;
    lanes_on(s);
    for (int32_t i = 0; i < n; i++) {
        const int32_t *r = prog + (int64_t)i * REC;
        int op = r[0], vd = r[5];
        switch (op) {
        case OP_SFPLOAD: if (vd < 8) SFPLOAD(s, r); break;
        case OP_SFPSTORE: SFPSTORE(s, r); break;
        case OP_SFPMAD: if (writable(vd)) SFPMAD(s, r); break;
        case OP_SFPADDI: if (writable(vd)) SFPADDI(s, r); break;
        case OP_SFPMULI: if (writable(vd)) SFPMULI(s, r); break;
        case OP_SFPLOADI: if (vd < 8) SFPLOADI(s, r); break;   /* LReg[8..16]: SFPCONFIG only */
        case OP_SFPNOP: break;
        case OP_SFPEXEXP: case OP_SFPLZ: case OP_SFPIADD: valued_flag(s, op, r); if (vd < 8) lanes_on(s); break;
        case OP_SFPSETCC: SFPSETCC(s, r); lanes_on(s); break;
        case OP_SFPENCC: SFPENCC(s, r); lanes_on(s); break;
        case OP_SFPGT: case OP_SFPLE: compare(s, op, r); lanes_on(s); break;
        case OP_SFPMUL24: if (writable(vd)) SFPMUL24(s, r); break;
        case OP_SFPSWAP: SFPSWAP(s, r); break;
        case OP_SFPTRANSP: SFPTRANSP(s); break;
        case OP_SFPCONFIG: SFPCONFIG(s, r); break;
        default:
            if (op < 0 || op >= OP_COUNT) return i;
            if (writable(vd)) lanewise_run(s, op, r);   /* lane l's value depends on lane l only */
        }
    }
    return n;
}

/* A batch's loop-carried chain (accel/deferral.py, _dq_batch): for each repetition r of k, the LRegs in `carried` (a
 * bit mask) take their value in repetition r from regs (17 x k x 32, as the batch left them), then prog runs; stops
 * (returning the repetitions done) where sfpu_run does not finish. */
int32_t sfpu_run_repeated(uint32_t *lreg, uint8_t *lane_flags, uint8_t *use_lane_flags, uint32_t *dst,
                          uint8_t *written, const int32_t *prog, int32_t n, const uint32_t *regs, int32_t k,
                          int32_t carried) {
    for (int32_t r = 0; r < k; r++) {
        for (int i = 0; i < 17; i++)
            if (carried >> i & 1)
                for (int l = 0; l < LANES; l++) lreg[i * LANES + l] = regs[((int64_t)i * k + r) * LANES + l];
        if (sfpu_run(lreg, lane_flags, use_lane_flags, dst, written, prog, n) != n) return r;
    }
    return k;
}
