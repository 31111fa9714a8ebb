/* The data side of the tile words as plain C functions on raw buffers: the unpacker (UNPACR), the packer (PACR), and
 * the FPU's MVMUL and ELWMUL / ELWADD / ELWSUB. Included by tile_native.c (their numpy bindings, called by the Python
 * handlers) and by tile_handlers.c (the handlers' common case in C, called from sfpu_issue_native.c's issue path).
 * Each conversion is the bit-for-bit counterpart of a function in chip/numerics/formats.py or fpu_math.py, named
 * beside it. */
#include <stdint.h>
#include <string.h>

#include "mvmul_native.c"     /* mvmul_steps: MVMUL's numerics (fp32 Dst, 8-bit-exponent sources) */

/* Unpacker conversions: L1 datum -> the Src / Dst32b word (fp32 layout). Codes shared with tile_native.py. */
enum {
    UNP_COPY32 = 0,      /* FP32 / TF32 / INT32 into Dst32b: the word as it is */
    UNP_FP32_TF32 = 1,   /* formats.unp_fp32_to_tf32: low 13 mantissa bits dropped */
    UNP_FP32_BF16 = 2,   /* formats.unp_fp32_to_bf16: exponent 0 -> signed zero, then the top 16 bits */
    UNP_BF16 = 3,        /* formats.bf16_to_src: the 16 bits to the top half */
    UNP_FP16 = 4,        /* formats.fp16_to_src: sign to bit 31, exponent and mantissa to bits 27..13 */
    UNP_KINDS
};
/* Packer conversions: Dst word -> L1 datum. */
enum {
    PACK_COPY32 = 0,     /* FP32 / INT32 from a 32-bit Dst kept as they are (unpack_pack's plain copy) */
    PACK_FP32_BF16 = 1,  /* formats.early_fp32_to_bf16 (NaN -> Inf, round half away, exponent 0 -> +0), BF16 out */
    PACK_HI16 = 2,       /* INT16 from a 32-bit Dst: the high half in Dst's BF16 field order (formats.shuffle_bf16) */
    PACK_DST16_BF16 = 3, /* BF16 from a 16-bit Dst (Dst.read16, unshuffled): formats.early_bf16 with rounding */
    PACK_KINDS
};

static const int unp_in_bytes[UNP_KINDS] = {4, 4, 4, 2, 2};
static const int pack_out_bytes[PACK_KINDS] = {4, 2, 2, 2};

/* One loop per conversion, with no per-datum branch or call, so that GCC vectorises each (the build's -O3); a datum
 * is loaded by memcpy (L1 datums need not be aligned; the host is little-endian, as tile_pack's copy assumes). */
static void unp_fp32_tf32(const uint8_t *p, int64_t n, uint32_t *out) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, p + 4 * i, 4);
        out[i] = x & 0xFFFFE000u;
    }
}

static void unp_fp32_bf16(const uint8_t *p, int64_t n, uint32_t *out) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, p + 4 * i, 4);
        uint32_t normal = -(uint32_t)((x & 0x7F800000u) != 0);   /* exponent 0: only the sign is kept */
        out[i] = x & (0x80000000u | (normal & 0x7FFF0000u));
    }
}

static void unp_bf16(const uint8_t *p, int64_t n, uint32_t *out) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t x;
        memcpy(&x, p + 2 * i, 2);
        out[i] = (uint32_t)x << 16;
    }
}

static void unp_fp16(const uint8_t *p, int64_t n, uint32_t *out) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        uint32_t x = h;
        out[i] = (x & 0x8000u) << 16 | (x & 0x7FFFu) << 13;
    }
}

/* `count` datums of kind `kind` from l1[start..] into out[0..count); -1 when the L1 range is outside l1_bytes. */
static int tile_unpack(const uint8_t *l1, int64_t l1_bytes, int64_t start, int64_t count, int kind, uint32_t *out) {
    int nb = unp_in_bytes[kind];
    if (start < 0 || count < 0 || start + count * nb > l1_bytes)
        return -1;
    const uint8_t *p = l1 + start;
    switch (kind) {
    case UNP_COPY32: memcpy(out, p, (size_t)count * 4); break;
    case UNP_FP32_TF32: unp_fp32_tf32(p, count, out); break;
    case UNP_FP32_BF16: unp_fp32_bf16(p, count, out); break;
    case UNP_BF16: unp_bf16(p, count, out); break;
    default: unp_fp16(p, count, out); break;
    }
    return 0;
}

static inline uint32_t fp32_to_bf16_round(uint32_t x) {
    uint32_t nan = -(uint32_t)((x & 0x7FFFFFFFu) > 0x7F800000u);
    x = (x & ~nan) | (nan & ((x & 0x80000000u) | 0x7F800000u));   /* NaN -> Inf of the same sign */
    uint32_t r = (x + 0x8000u) >> 16;     /* ties away from zero on the magnitude pattern (x <= 0xFF800000 now) */
    return (r & 0x7FFF) < 0x80 ? 0 : r;                      /* exponent 0 (denormal, either zero) -> +0 */
}

/* formats.early_bf16's clamps of a BF16 pattern: NaN -> Inf of the same sign, exponent 0 -> +0 */
static inline uint32_t early_bf16_clamp(uint32_t h) {
    h = (h & 0x7FFF) > 0x7F80 ? (h & 0x8000) | 0x7F80 : h;
    return (h & 0x7FFF) < 0x80 ? 0 : h;
}

/* Dst's BF16 field order (Sign, Man(7), Exp(8)) and back: chip/numerics/dst.py */
static inline uint32_t shuffle_bf16(uint32_t h) { return (h & 0x8000u) | (h & 0x7Fu) << 8 | (h >> 7 & 0xFFu); }
static inline uint32_t unshuffle_bf16(uint32_t h) { return (h & 0x8000u) | (h & 0xFFu) << 7 | (h >> 8 & 0x7Fu); }

/* A Dst row's 16 words -> 16-bit datums h[0..16) by `kind` (not PACK_COPY32), `high`: PACK_DST16_BF16's half. All
 * 16 converted whatever the caller keeps (a fixed count: one vectorised loop a kind, no remainder). */
static void pack_row16(const uint32_t *row, int kind, int high, uint16_t h[16]) {
    if (kind == PACK_FP32_BF16)
        for (int c = 0; c < 16; c++)
            h[c] = (uint16_t)fp32_to_bf16_round(row[c]);
    else if (kind == PACK_HI16)
        for (int c = 0; c < 16; c++)
            h[c] = (uint16_t)shuffle_bf16(row[c] >> 16);
    else if (high)
        for (int c = 0; c < 16; c++)
            h[c] = (uint16_t)early_bf16_clamp(row[c] >> 16);
    else
        for (int c = 0; c < 16; c++)
            h[c] = (uint16_t)early_bf16_clamp(unshuffle_bf16(row[c] & 0xFFFF));
}

/* Dst rows first, first + step, ... (n_rows of them; Dst32b rows, or Dst16b rows for PACK_DST16_BF16), the first
 * `per` columns of each, converted by `kind`, to l1[addr..]; the number of bytes written, or -1 when the L1 range is
 * outside l1_bytes. rows32: Dst32b as 512 x 16 words. */
static int64_t tile_pack(const uint32_t *rows32, int first, int n_rows, int step, int per, int kind, uint8_t *l1,
                  int64_t l1_bytes, int64_t addr) {
    int nb = pack_out_bytes[kind];
    int64_t total = (int64_t)n_rows * per * nb;
    if (addr < 0 || addr + total > l1_bytes)
        return -1;
    uint8_t *p = l1 + addr;
    uint16_t h[16];
    for (int r = 0; r < n_rows; r++) {
        int row_index = first + r * step, high = 1;
        if (kind == PACK_DST16_BF16) {        /* Dst16b row -> its Dst32b row and half (dst.py's _row16_to_32) */
            high = !(row_index & 8);
            row_index = ((row_index >> 4) << 3 | (row_index & 7)) & 511;
        }
        const uint32_t *row = rows32 + (int64_t)row_index * 16;
        if (kind == PACK_COPY32) {
            memcpy(p, row, (size_t)per * 4);         /* (little-endian host, as numpy's '<u4' view assumes) */
            p += per * 4;
            continue;
        }
        pack_row16(row, kind, high, h);
        memcpy(p, h, (size_t)per * 2);        /* (little-endian host) */
        p += per * 2;
    }
    return total;
}

/* One MVMUL's data effect: Dst32b rows rd..rd+7 += SrcB rows rb..rb+7 @ SrcA rows ra..ra+15 (banks of 64 x 16
 * words, rows32 512 x 16), the rows marked written and no longer undefined (dst.py's Dst.mark_defined: `written` per
 * Dst32b row, `cleared16` per Dst16b row, both halves). The caller checked rows, formats and the 8-row alignment. */
static void tile_mvmul(const uint32_t *srca, int ra, const uint32_t *srcb, int rb, uint32_t *rows32, uint8_t *written,
                uint8_t *cleared16, int rd, uint32_t mask_a, uint32_t mask_b, int32_t phase) {
    int32_t slot = 0;
    mvmul_steps(srca + ra * 16, srcb + rb * 16, mask_a, mask_b, &phase, &slot, 1, rows32 + rd * 16);
    memset(written + rd, 1, 8);
    memset(cleared16 + 2 * rd, 0, 16);        /* Adj32 of rows rd..rd+7 (rd a multiple of 8): 2rd..2rd+7, and + 8 */
}

enum { ELW_MUL = 0, ELW_ADD = 1, ELW_SUB = 2 };

/* One ELWMUL / ELWADD / ELWSUB's data effect on an fp32 Dst with 8-bit-exponent sources: Dst32b rows rd..rd+7 =
 * (Dst, or 0 without `accumulate`) + SrcA rows ra..ra+7 op SrcB rows rb..rb+7 (`bcast` bit 1: SrcB's first row to
 * every row, bit 0: its column 0 to every column), one rounding (accumulate_row). The operands' 19-bit views, zero
 * tests (SrcB's only when `flush`: ALU_ACC_CTRL_Zero_Flag_disabled_src=0) and terms are fpu_math.elwmul19's (one
 * fidelity phase of the product) and elwadd19's (the smaller magnitude aligned on an 11-bit grid). Rows marked as
 * tile_mvmul marks them. */
#if defined(__x86_64__) && defined(__GLIBC__) && (defined(__clang__) || __GNUC__ >= 6)
__attribute__((target_clones("avx2", "default")))     /* (accumulate_row's variable shifts: see mvmul_steps) */
#endif
static void tile_elw(const uint32_t *srca, int ra, const uint32_t *srcb, int rb, uint32_t *rows32, uint8_t *written,
              uint8_t *cleared16, int rd, uint32_t mask_a, uint32_t mask_b, int op, int bcast, int flush,
              int accumulate, int phase) {
    int64_t adj = -127 - (phase & 1 ? 5 : 0) - (phase & 2 ? 7 : 0);       /* exp_prod_adj(fp32_acc, phase, exp8) */
    for (int r = 0; r < 8; r++) {
        int32_t ts[16] = {0}, te[16] = {0}, tm[16] = {0};                /* one term per column */
        for (int c = 0; c < 16; c++) {
            uint32_t bw = srcb[(rb + (bcast & 2 ? 0 : r)) * 16 + (bcast & 1 ? 0 : c)] ^ (op == ELW_SUB ? 1u << 31 : 0);
            int64_t a = (srca[(ra + r) * 16 + c] & mask_a) >> 13 & 0x7FFFF, b = (bw & mask_b) >> 13 & 0x7FFFF;
            int za = (a & 0x3FFFF) < 0x400, zb = flush && (b & 0x3FFFF) < 0x400;
            if (op == ELW_MUL) {
                int64_t exp = (a >> 10 & 0xFF) + (b >> 10 & 0xFF) + adj;
                int64_t ma = (a & 0x3FF) | 0x400, mb = (b & 0x3FF) | 0x400;
                if (!(za || zb || exp <= 0)) {
                    ts[c] = (a >> 18 ^ b >> 18) & 1;
                    te[c] = exp;
                    tm[c] = ((phase & 1 ? ma >> 1 & 31 : ma >> 6) * (phase & 2 ? (mb & 15) << 3 : mb >> 4)) << 13;
                }                          /* (a zero term's exponent, max(adj, 0), is 0 with 8-bit exponents) */
            } else {
                if (za)
                    a = 0;
                if (zb)
                    b = 0;
                if ((a & 0x3FFFF) < (b & 0x3FFFF)) {
                    int64_t x = a;
                    a = b;
                    b = x;
                }
                int64_t ea = a >> 10 & 0xFF, eb = b >> 10 & 0xFF, d = ea - eb;
                int64_t ma = a ? (a & 0x3FF) | 0x400 : 0, mb = b ? (b & 0x3FF) | 0x400 : 0;
                int64_t ds = d < 1 ? 1 : d > 11 ? 11 : d;
                mb = d <= 0 ? mb : d < 12 ? (mb + ((int64_t)1 << (ds - 1))) >> ds : 0;
                ts[c] = a >> 18 & 1;
                te[c] = ea;
                tm[c] = (ts[c] == (b >> 18 & 1) ? ma + mb : ma - mb) << 13;
            }
        }
        uint32_t *out = rows32 + (rd + r) * 16;
        if (!accumulate)
            memset(out, 0, 16 * sizeof *out);
        for (int h = 0; h < 2; h++) {                  /* accumulate_row's 8 lanes; the second term stays zero */
            row_i terms[6] = {{0}};
            memcpy(&terms[0], ts + 8 * h, sizeof terms[0]);
            memcpy(&terms[2], te + 8 * h, sizeof terms[0]);
            memcpy(&terms[4], tm + 8 * h, sizeof terms[0]);
            accumulate_row(out + 8 * h, terms, terms + 2, terms + 4);
        }
    }
    memset(written + rd, 1, 8);
    memset(cleared16 + 2 * rd, 0, 16);
}
