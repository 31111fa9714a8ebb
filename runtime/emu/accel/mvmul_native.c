/* MVMUL runs in C: the data effect of S back-to-back MVMULs (fp32 Dst, 8-bit-exponent sources), the same bits as
 * chip/numerics/fpu_math.py's mvmul19_batch with fp32_acc and exp8 (the reference, which the equality tests pin this
 * against). Per step: the two group terms of every output (_group_terms), then one accumulate into Dst (accumulate).
 * Facts and the numerics' description: docs/fpu_path.md §10.1-10.3. Built by accel/native.py with the host compiler.
 *
 * srca: S x 16 (k) x 16 (n) SrcA words, srcb: S x 8 (m) x 16 (k) SrcB words, read through mask_a / mask_b
 * (fpu_math.src19_mask of their formats) as the multiplier's 19-bit view, bits 31..13; phase: S fidelity phases;
 * slot: S Dst blocks (0..U-1); dst: U x 8 x 16 plain fp32-layout words, updated in place, step by step. */
#include <stdint.h>

#define ZERO_EXP (-(1 << 12))     /* a zero operand's exponent: every product with it has exponent <= 0 */

static int bitlen(int64_t v) { return v ? 64 - __builtin_clzll((unsigned long long)v) : 0; }  /* v >= 0 */

/* a term's magnitude shifted right from exp to target (half an ulp added, minus bias); shifts of 31 or more give 0 */
static int64_t align(int64_t man, int64_t exp, int64_t target, int64_t bias) {
    int64_t d = target - exp;
    if (d <= 0) return man;
    if (d >= 31) return 0;
    return (man + ((int64_t)1 << (d - 1)) - bias) >> d;
}

/* Dst word + two terms (sign, exp, man), one rounding: fpu_math.accumulate with fp32_acc and exp8 */
static uint32_t accumulate2(uint32_t dst, const int64_t ts[2], const int64_t te[2], const int64_t tm[2]) {
    int64_t sign_d = dst >> 31 & 1, exp_d = dst >> 23 & 0xFF;
    int64_t man = exp_d == 0 ? 0 : (int64_t)((dst & 0x7FFFFF) | 0x800000);
    int64_t e = exp_d;
    for (int i = 0; i < 2; i++) if (te[i] > e) e = te[i];
    int early_zero = e <= 0;
    man = align(man, exp_d, e, 0);
    for (int i = 0; i < 2; i++) {
        int64_t t = align(tm[i], te[i], e, ts[i]);
        man = ts[i] == sign_d ? man + t : man - t;
    }
    int64_t sign = man < 0 ? sign_d ^ 1 : sign_d;
    if (man < 0) man = -man;
    int zero = early_zero || man == 0;
    if (zero) man = 1;
    int64_t shift = 24 - bitlen(man);
    e -= shift;
    if (shift < 0) {
        int64_t rs = -shift > 62 ? 62 : -shift;
        man = (man + ((int64_t)1 << (rs - 1))) >> rs;
    } else {
        man <<= shift > 62 ? 62 : shift;
    }
    if (man & 0x1000000) e += 1;
    man &= 0x7FFFFF;
    if (zero || e <= 0) return 0;
    if (e >= 255) return (uint32_t)(sign << 31 | 0xFFu << 23);
    return (uint32_t)(sign << 31 | e << 23 | man);
}

/* Built for AVX2 beside the baseline where the compiler and C library can pick at load time (GCC / clang ifuncs on
 * glibc): the products' per-column shifts vectorise only with AVX2's variable shifts (5.1 -> 3.4 us per step here). */
#if defined(__x86_64__) && defined(__GLIBC__) && (defined(__clang__) || __GNUC__ >= 6)
__attribute__((target_clones("avx2", "default")))
#endif
void mvmul_steps(const uint32_t *srca, const uint32_t *srcb, uint32_t mask_a, uint32_t mask_b, const int32_t *phase,
                 const int32_t *slot, int32_t steps, uint32_t *dst) {
    for (int s = 0; s < steps; s++) {
        const uint32_t *a = srca + s * 256, *b = srcb + s * 128;
        int p = phase[s];
        int adj = -127 - (p & 1 ? 5 : 0) - (p & 2 ? 7 : 0);        /* exp_prod_adj(fp32_acc, p, exp8) */
        int a_exp[256], a_man[256], a_sgn[256], b_exp[128], b_man[128], b_sgn[128];
        for (int i = 0; i < 256; i++) {
            int v = (a[i] & mask_a) >> 13, ea = v >> 10 & 0xFF, m11 = (v & 0x3FF) | 0x400;
            a_exp[i] = ea ? ea : ZERO_EXP;
            a_man[i] = ea ? (p & 1 ? (m11 >> 1) & 31 : m11 >> 6) : 0;
            a_sgn[i] = v >> 18 & 1 ? -1 : 1;
        }
        for (int i = 0; i < 128; i++) {
            int v = (b[i] & mask_b) >> 13, eb = v >> 10 & 0xFF, m11 = (v & 0x3FF) | 0x400;
            b_exp[i] = (eb ? eb : ZERO_EXP) + adj;
            b_man[i] = eb ? (p & 2 ? (m11 & 15) << 3 : m11 >> 4) : 0;
            b_sgn[i] = v >> 18 & 1 ? -1 : 1;
        }
        /* n innermost (the compiler vectorises these loops over the 16 columns) */
        uint32_t *d = dst + slot[s] * 128;
        for (int m = 0; m < 8; m++) {
            int64_t ts[2][16], te[2][16], tm[2][16];
            for (int g = 0; g < 2; g++) {
                int emax[16], tot[16];
                for (int n = 0; n < 16; n++) { emax[n] = INT32_MIN; tot[n] = 0; }
                for (int k = g * 8; k < g * 8 + 8; k++) {
                    int be = b_exp[m * 16 + k];
                    for (int n = 0; n < 16; n++) {
                        int e = a_exp[k * 16 + n] + be;
                        emax[n] = e > emax[n] ? e : emax[n];
                    }
                }
                for (int k = g * 8; k < g * 8 + 8; k++) {
                    int be = b_exp[m * 16 + k], bm = b_man[m * 16 + k], bs = b_sgn[m * 16 + k];
                    for (int n = 0; n < 16; n++) {
                        /* a product with exponent <= 0 is zero; the rest aligned to emax, round half up */
                        int e = a_exp[k * 16 + n] + be, dd = emax[n] - e;
                        int prod2 = e <= 0 ? 0 : (a_man[k * 16 + n] << 1) * bm;
                        int sh = dd >= 32 ? 0 : prod2 >> (dd & 31);
                        tot[n] += ((sh + 1) >> 1) * a_sgn[k * 16 + n] * bs;
                    }
                }
                for (int n = 0; n < 16; n++) {
                    int live = emax[n] > 0;
                    ts[g][n] = live && tot[n] < 0;
                    te[g][n] = live ? emax[n] : 0;
                    tm[g][n] = live ? (int64_t)(tot[n] < 0 ? -tot[n] : tot[n]) << 13 : 0;
                }
            }
            for (int n = 0; n < 16; n++) {
                int64_t s2[2] = {ts[0][n], ts[1][n]}, e2[2] = {te[0][n], te[1][n]}, m2[2] = {tm[0][n], tm[1][n]};
                d[m * 16 + n] = accumulate2(d[m * 16 + n], s2, e2, m2);
            }
        }
    }
}
