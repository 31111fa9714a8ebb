/* MVMUL runs in C: the data effect of S back-to-back MVMULs (fp32 Dst, 8-bit-exponent sources), the same bits as
 * chip/numerics/fpu_math.py's mvmul19_batch with fp32_acc and exp8 (the reference, which the equality tests pin this
 * against). Per step: the two group terms of every output (_group_terms), then one accumulate into Dst (accumulate).
 * Facts and the numerics' description: docs/fpu_path.md §10.1-10.3. Built by accel/native.py with the host compiler.
 *
 * srca: S x 16 (k) x 16 (n) SrcA words, srcb: S x 8 (m) x 16 (k) SrcB words, read through mask_a / mask_b
 * (fpu_math.src19_mask of their formats) as the multiplier's 19-bit view, bits 31..13; phase: S fidelity phases;
 * slot: S Dst blocks (0..U-1); dst: U x 8 x 16 plain fp32-layout words, updated in place, step by step.
 *
 * Computed on half a Dst row at a time: 8 columns in one vector of int32 lanes (GCC / clang vector extensions, which
 * the compiler maps onto the host's SIMD registers: one AVX2 register in the avx2 clone). Every intermediate fits 31
 * bits: a product is at most 2 * 31 * 127 (14 bits), a group sum of 8 at most 2^15 (a term's magnitude 2^28), Dst's
 * significand 2^24, their sum under 2^30. */
#include <stdint.h>
#include <string.h>

#define ZERO_EXP (-(1 << 12))     /* a zero operand's exponent: every product with it has exponent <= 0 */
typedef int32_t row_i __attribute__((vector_size(32)));     /* half a Dst row: 8 int32 lanes */
typedef uint32_t row_u __attribute__((vector_size(32)));
typedef float row_f __attribute__((vector_size(32)));

/* (macros, not functions: clang refuses AVX vectors as arguments of a function built without AVX) */
#define VSPLAT(x) ((row_i){0} + (x))
#define VSEL(m, a, b) (((a) & (m)) | ((b) & ~(m)))      /* m: lanes of 0 / -1 */
#define VMAX(a, b) VSEL((a) > (b), a, b)
#define VMIN(a, b) VSEL((a) < (b), a, b)
/* a term's magnitude shifted right by d (target exponent - its exponent; half an ulp added, minus bias where it
 * moves); shifts of 31 or more give 0 (fpu_math._align). dc: d clamped to 0..30. */
#define VALIGN(man, d, dc, bias) ((((man) + ((VSPLAT(1) << (dc)) >> 1) - ((bias) & ((d) > 0))) >> (dc)) & ((d) < 31))
#define VCLAMP(d) VMIN(VMAX(d, VSPLAT(0)), VSPLAT(30))

/* 8 Dst words + two terms each (ts: sign 0 / 1, te: exp, tm: man; 0, 0, 0 for none), one rounding:
 * fpu_math.accumulate with fp32_acc and exp8. Every intermediate fits 31 bits (see the top). */
static inline __attribute__((always_inline)) void accumulate_row(uint32_t *dst, const row_i ts[2], const row_i te[2],
                                                                 const row_i tm[2]) {
    row_u w;
    memcpy(&w, dst, sizeof w);
    row_i sign_d = (row_i)(w >> 31), exp_d = (row_i)(w >> 23 & 0xFF);
    row_i man = ((row_i)(w & 0x7FFFFF) | 0x800000) & (exp_d != 0);
    row_i e = VMAX(te[0], te[1]);
    e = VMAX(exp_d, e);
    row_i zero = e <= 0, d = e - exp_d;
    man = VALIGN(man, d, VCLAMP(d), VSPLAT(0));
    for (int i = 0; i < 2; i++) {
        row_i dt = e - te[i], t = VALIGN(tm[i], dt, VCLAMP(dt), ts[i]), neg = -(ts[i] ^ sign_d);  /* -1: subtract */
        man += (t ^ neg) - neg;
    }
    row_i flip = man < 0, sign = sign_d ^ (flip & 1);
    man = (man ^ flip) - flip;
    zero |= man == 0;
    man = VSEL(zero, VSPLAT(1), man);
    /* bitlen(man), man in 1 .. 2^30: the exponent of the nearest float, one less where that float rounded up */
    row_i len = ((row_i)__builtin_convertvector(man, row_f) >> 23) - 126;
    len += (VSPLAT(1) << (len - 1)) > man;
    row_i shift = 24 - len, rs = VMAX(-shift, VSPLAT(0));
    e -= shift;
    man = ((man + ((VSPLAT(1) << rs) >> 1)) >> rs) << VMAX(shift, VSPLAT(0));
    e += man >> 24 & 1;
    row_i out = sign << 31 | e << 23 | (man & 0x7FFFFF);
    out = VSEL(e >= 255, sign << 31 | 0x7F800000, out);
    w = (row_u)(out & ~(zero | (e <= 0)));
    memcpy(dst, &w, sizeof w);
}

/* The two group terms (ts, te, tm: accumulate_row's) of half a Dst row: Dst row m's columns 8h .. 8h + 7, from SrcA's
 * prepared rows (ae: exponents, am: signed fidelity slices times two, both [2k + h]) and SrcB's row m (be, bm). A
 * group's products are aligned to its largest exponent emax and rounded half up in magnitude: for a product v of
 * either sign, ((v + (v < 0 ? -1 : 0)) >> d + 1) >> 1 (floor shifts) is the magnitude's ((|v| >> d) + 1) >> 1 with
 * v's sign, so no separate sign is needed. A product with exponent <= 0 is zero: `underflow` keeps that test, which
 * the caller drops when no product of the step can have it (its operands' least exponents sum above 0); a zero
 * operand's product is 0 either way (its slice is 0). */
static inline __attribute__((always_inline)) void group_terms(const row_i *ae, const row_i *am, const int32_t *be,
                                                              const int32_t *bm, int underflow, row_i ts[2],
                                                              row_i te[2], row_i tm[2]) {
    for (int g = 0; g < 2; g++) {
        row_i e[8];
        for (int k = 0; k < 8; k++)
            e[k] = ae[2 * (8 * g + k)] + be[8 * g + k];
        row_i emax = e[0];
        for (int k = 1; k < 8; k++)
            emax = VMAX(emax, e[k]);
        row_i tot = VSPLAT(0);
        for (int k = 0; k < 8; k++) {
            row_i v = am[2 * (8 * g + k)] * bm[8 * g + k];
            if (underflow)
                v &= e[k] > 0;
            row_i d = VMIN(emax - e[k], VSPLAT(30));
            tot += (((v + (v >> 31)) >> d) + 1) >> 1;
        }
        row_i live = emax > 0, flip = tot < 0;
        ts[g] = live & flip & 1;
        te[g] = emax & live;
        tm[g] = (((tot ^ flip) - flip) << 13) & live;
    }
}

/* Built for AVX2 beside the baseline where the compiler and C library can pick at load time (GCC / clang ifuncs on
 * glibc): the variable shifts and 32-bit multiplies vectorise only with AVX2. Static, behind the plain mvmul_steps
 * below: clang 14 exports a cloned function's dispatcher as `mvmul_steps.ifunc`, which ctypes cannot find. */
#if defined(__x86_64__) && defined(__GLIBC__) && (defined(__clang__) || __GNUC__ >= 6)
__attribute__((target_clones("avx2", "default")))
#endif
static void mvmul_steps_cloned(const uint32_t *srca, const uint32_t *srcb, uint32_t mask_a, uint32_t mask_b,
                               const int32_t *phase, const int32_t *slot, int32_t steps, uint32_t *dst) {
    for (int s = 0; s < steps; s++) {
        int p = phase[s];
        int adj = -127 - (p & 1 ? 5 : 0) - (p & 2 ? 7 : 0);        /* exp_prod_adj(fp32_acc, p, exp8) */
        /* SrcA row k's exponents (ZERO_EXP for a zero) and twice its fidelity slice of the mantissa with its sign;
         * amin: the least exponent of a nonzero word (255 when none) */
        row_i a_exp[32], a_man2[32], amin = VSPLAT(255);    /* [2k + h]: row k's columns 8h .. 8h + 7 */
        for (int k = 0; k < 32; k++) {
            row_u w;
            memcpy(&w, srca + s * 256 + k * 8, sizeof w);
            row_i v = (row_i)((w & mask_a) >> 13), ea = v >> 10 & 0xFF, m11 = (v & 0x3FF) | 0x400, live = ea != 0;
            row_i neg = -(v >> 18 & 1), man2 = ((p & 1 ? m11 >> 1 & 31 : m11 >> 6) << 1) & live;
            a_exp[k] = VSEL(live, ea, VSPLAT(ZERO_EXP));
            a_man2[k] = (man2 ^ neg) - neg;
            amin = VSEL(live, VMIN(amin, ea), amin);
        }
        /* SrcB's exponents (with the phase's adjustment) and signed fidelity slices, one per (m, k), 8 at a time;
         * bmin as amin */
        int32_t b_exp[128], b_man[128];
        row_i bmin = VSPLAT(255);
        for (int i = 0; i < 128; i += 8) {
            row_u w;
            memcpy(&w, srcb + s * 128 + i, sizeof w);
            row_i v = (row_i)((w & mask_b) >> 13), eb = v >> 10 & 0xFF, m11 = (v & 0x3FF) | 0x400, live = eb != 0;
            row_i neg = -(v >> 18 & 1), man = (p & 2 ? (m11 & 15) << 3 : m11 >> 4) & live;
            row_i e = VSEL(live, eb, VSPLAT(ZERO_EXP)) + adj, sm = (man ^ neg) - neg;
            memcpy(b_exp + i, &e, sizeof e);
            memcpy(b_man + i, &sm, sizeof sm);
            bmin = VSEL(live, VMIN(bmin, eb), bmin);
        }
        int a_least = amin[0], b_least = bmin[0];
        for (int i = 1; i < 8; i++) {
            a_least = amin[i] < a_least ? amin[i] : a_least;
            b_least = bmin[i] < b_least ? bmin[i] : b_least;
        }
        int underflow = a_least + b_least + adj <= 0;    /* (the least exponent a product of nonzero words has) */
        uint32_t *d = dst + slot[s] * 128;
        for (int mh = 0; mh < 16; mh++) {      /* Dst row m = mh / 2, columns 8h .. 8h + 7 (h = mh % 2) */
            int m = mh >> 1, h = mh & 1;
            row_i ts[2], te[2], tm[2];
            if (underflow)
                group_terms(a_exp + h, a_man2 + h, b_exp + m * 16, b_man + m * 16, 1, ts, te, tm);
            else
                group_terms(a_exp + h, a_man2 + h, b_exp + m * 16, b_man + m * 16, 0, ts, te, tm);
            accumulate_row(d + mh * 8, ts, te, tm);
        }
    }
}

void mvmul_steps(const uint32_t *srca, const uint32_t *srcb, uint32_t mask_a, uint32_t mask_b, const int32_t *phase,
                 const int32_t *slot, int32_t steps, uint32_t *dst) {
    mvmul_steps_cloned(srca, srcb, mask_a, mask_b, phase, slot, steps, dst);
}
