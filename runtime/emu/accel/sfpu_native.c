/* SFPU instructions in C: the data effect of a run of decoded SFPU instructions on the LRegs, the lane flags and Dst,
 * the same bits as the functional model in chip/numerics/sfpu (the reference, which the equality tests pin this
 * against), one handler per instruction named after it. Covered: what the emulator defers (accel/deferral.py) in the
 * Vector Unit's plain state (no LaneConfig bit set, no SFPLOADMACRO work): SFPLOAD/SFPSTORE in the 32-bit Dst modes,
 * the SFPMAD family on the Blackhole FMA datapath (chip/numerics/fma.py, docs/sfpu_path.md), moves, integer, bit and
 * FP-field operations, SFPCAST's deterministic modes, SFPARECIP, SFPMUL24 without INDIRECT_VA/VD, SFPSWAP (LaneConfig
 * clear: no exchange, no argmin/argmax indices), SFPTRANSP, and the lane-flag instructions that do not touch the flag
 * stack. The caller (accel/sfpu_native.py) encodes each instruction as a record of REC int32 and guarantees the
 * conditions above; an op code this file does not know ends the run.
 * Built by accel/native.py with the host compiler. */
#include <stdint.h>

#define REC 8                 /* record: op, mod, va, vb, vc, vd, imm, addr */
#define LANES 32
#define SIGN 0x80000000u
#define ONE_F32 0x3F800000u
#define CANONICAL_NAN 0x7FC00000u

/* op codes: the order of OP_NAMES, which the loader checks against its own table */
enum { OP_SFPLOAD, OP_SFPSTORE, OP_SFPMAD, OP_SFPADDI, OP_SFPMULI, OP_SFPLOADI, OP_SFPEXMAN, OP_SFPSETEXP,
       OP_SFPSETMAN, OP_SFPSETSGN, OP_SFPDIVP2, OP_SFPAND, OP_SFPOR, OP_SFPXOR, OP_SFPNOT, OP_SFPABS, OP_SFPSHFT,
       OP_SFPARECIP, OP_SFPNOP, OP_SFPMOV, OP_SFPCAST, OP_SFPEXEXP, OP_SFPLZ, OP_SFPIADD, OP_SFPSETCC, OP_SFPENCC,
       OP_SFPGT, OP_SFPLE, OP_SFPMUL24, OP_SFPSWAP, OP_SFPTRANSP, OP_COUNT };
static const char OP_NAMES[] = "SFPLOAD SFPSTORE SFPMAD SFPADDI SFPMULI SFPLOADI SFPEXMAN SFPSETEXP SFPSETMAN "
    "SFPSETSGN SFPDIVP2 SFPAND SFPOR SFPXOR SFPNOT SFPABS SFPSHFT SFPARECIP SFPNOP SFPMOV SFPCAST SFPEXEXP SFPLZ "
    "SFPIADD SFPSETCC SFPENCC SFPGT SFPLE SFPMUL24 SFPSWAP SFPTRANSP";

const char *sfpu_op_names(void) { return OP_NAMES; }

/* SFPARECIP's tables (lane_math._RECIP_LUT, _EXP_LUT), handed over by the loader: one copy of the data */
static const uint8_t *recip_lut, *exp_lut;
static int64_t exp_lut_len;

void sfpu_set_tables(const uint8_t *recip, const uint8_t *exp, int32_t exp_len) {
    recip_lut = recip; exp_lut = exp; exp_lut_len = exp_len;
}

static int bitlen64(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; }
static uint32_t clz32(uint32_t v) { return v ? (uint32_t)__builtin_clz(v) : 32; }
static int32_t sext(int32_t v, int bits) { return v & (1 << (bits - 1)) ? v - (1 << bits) : v; }
static int64_t smag_key(uint32_t v) { return v >= SIGN ? (int64_t)SIGN - 1 - v : (int64_t)v; }

/* The Blackhole FMA x * y + z on FP32 bit patterns: fma._fma_exact lane by lane, in integers (the comments there say
 * why each step is as it is): denormal inputs read as zero, the product kept on a 27-bit grid with a sticky bit,
 * semi-sticky alignment, one round to nearest even, denormal results flushed, the rare cases patched in order. */
uint32_t sfpu_fma(uint32_t x, uint32_t y, uint32_t z) {
    int64_t ex = x >> 23 & 255, ey = y >> 23 & 255, ez = z >> 23 & 255;
    uint64_t mx = ex ? (x & 0x7FFFFF) | 0x800000 : 0, my = ey ? (y & 0x7FFFFF) | 0x800000 : 0;
    uint64_t mz = ez ? (z & 0x7FFFFF) | 0x800000 : 0;
    uint32_t p_sign = (x ^ y) & SIGN, z_sign = z & SIGN;
    uint64_t pm = (mx * my) << 3;
    pm = pm >> 23 | ((pm & 0x7FFFFF) != 0);
    int64_t pe = ex + ey - 127;
    uint64_t zm = mz << 3;
    int64_t re = pe > ez ? pe : ez;
    int64_t sp = re - pe < 63 ? re - pe : 63, sz = re - ez < 63 ? re - ez : 63;
    uint64_t pa = pm >> sp, za = zm >> sz;
    pa |= (((pa << sp) ^ pm) != 0) & (pa != 0);
    za |= (((za << sz) ^ zm) != 0) & (za != 0);
    uint64_t rm = p_sign == z_sign ? pa + za : pa > za ? pa - za : za - pa;
    uint32_t r_sign = pa >= za ? p_sign : z_sign;
    int64_t n = bitlen64(rm) - 27;
    re += n;
    int64_t ren = re > 0 ? re : 0;
    n += ren ? 0 : 1;
    int64_t right = n > 0 ? n : 0;
    uint64_t rm2 = (rm << (right - n)) >> right;
    rm2 |= ((rm & (uint64_t)(right | 1)) != 0) & (right != 0);
    int64_t r = (ren << 23) + (int64_t)(rm2 >> 3 & 0x7FFFFF);
    r += ((int64_t)(rm2 & 7) + (r & 1) + 3) >> 3;
    if ((r >> 23) == 0) r = 0;
    uint32_t out = r_sign | (uint32_t)r;
    if (re >= 255) out = r_sign | 0x7F800000;                  /* overflow of the sum */
    if (rm == 0) out = z_sign & p_sign;                        /* exact cancellation */
    if (pm == 0 || pe < 0) out = zm ? z : z_sign & p_sign;     /* product zero or underflowing on its own */
    int xin = ex == 255, yin = ey == 255, zin = ez == 255;
    if (xin || yin || zin || pe >= 255) {                      /* non-finite input or the product overflows */
        int is_nan = (xin && (mx != 0x800000 || my == 0)) || (yin && (my != 0x800000 || mx == 0))
                     || (zin && zm != 0x4000000) || (zin && (xin || yin) && z_sign != p_sign);
        out = is_nan ? CANONICAL_NAN : zin ? z : p_sign | 0x7F800000;
    }
    return out;
}

/* fma on n lanes (the equality tests' entry point) */
void sfpu_fma_lanes(const uint32_t *x, const uint32_t *y, const uint32_t *z, uint32_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = sfpu_fma(x[i], y[i], z[i]);
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
} State;

static int writable(int vd) { return vd < 8 || vd == 16; }
static int enabled(const State *s, int l) { return s->lf[l] || !s->use[l]; }

/* Dst (row, column) of lane l at an even address below 512: rows (addr & ~3) + l / 8, columns 2 (l % 8) + addr bit 1 */
#define DST_AT(s, addr, l) ((s)->dst[((addr) & ~3) + (l) / 8][2 * ((l) % 8) + ((addr) >> 1 & 1)])

static void SFPLOAD(State *s, const int32_t *r) {
    int vd = r[5], addr = r[7];
    for (int l = 0; l < LANES; l++)
        if (enabled(s, l)) s->lreg[vd][l] = DST_AT(s, addr, l);
}

static void SFPSTORE(State *s, const int32_t *r) {
    int mode = r[1], vd = r[5], addr = r[7];
    for (int l = 0; l < LANES; l++) {
        if (!enabled(s, l)) continue;
        uint32_t d = s->lreg[vd][l];
        if (mode == 3 && (d & 0x7F800000) == 0) d &= SIGN;   /* FP32: denormals flushed to signed zero */
        if (mode == 7) {   /* HI16: the word as is in Dst's storage, whose canonical word unshuffles the high half */
            uint32_t h = d >> 16;
            d = ((h & 0x8000) | (h & 0xFF) << 7 | (h >> 8 & 0x7F)) << 16 | (d & 0xFFFF);
        }
        DST_AT(s, addr, l) = d;
        s->written[(addr & ~3) + l / 8] = 1;
    }
}

static void SFPMAD(State *s, const int32_t *r) {   /* also SFPADD, SFPMUL; no INDIRECT_VA/VD */
    int mod = r[1], vd = r[5];
    uint32_t nb = mod & 1 ? SIGN : 0, nc = mod & 2 ? SIGN : 0;
    uint32_t *a = s->lreg[r[2]], *b = s->lreg[r[3]], *c = s->lreg[r[4]];
    for (int l = 0; l < LANES; l++)
        if (enabled(s, l)) s->lreg[vd][l] = sfpu_fma(a[l], b[l] ^ nb, c[l] ^ nc);
}

static void SFPADDI(State *s, const int32_t *r) {  /* BF16ToFP32(Imm16) * 1.0 + VD */
    int vd = r[5];
    uint32_t nc = r[1] & 2 ? SIGN : 0, imm = (uint32_t)r[6] << 16;
    for (int l = 0; l < LANES; l++)
        if (enabled(s, l)) s->lreg[vd][l] = sfpu_fma(imm, ONE_F32, s->lreg[vd][l] ^ nc);
}

static void SFPMULI(State *s, const int32_t *r) {  /* BF16ToFP32(Imm16) * VD + 0.0 */
    int vd = r[5];
    uint32_t nc = r[1] & 2 ? SIGN : 0, imm = (uint32_t)r[6] << 16;
    for (int l = 0; l < LANES; l++)
        if (enabled(s, l)) s->lreg[vd][l] = sfpu_fma(imm, s->lreg[vd][l] ^ nc, 0);
}

static void SFPLOADI(State *s, const int32_t *r) {
    int mod = r[1], vd = r[5];
    uint32_t imm = (uint32_t)r[6] & 0xFFFF;
    for (int l = 0; l < LANES; l++) {
        if (!enabled(s, l)) continue;
        uint32_t old = s->lreg[vd][l], v;
        switch (mod) {
        case 0: v = imm << 16; break;
        case 1: v = (imm >> 15) << 31 | ((imm >> 10 & 0x1F) + 112) << 23 | (imm & 0x3FF) << 13; break;
        case 2: v = imm; break;
        case 4: v = (uint32_t)sext((int32_t)imm, 16); break;
        case 8: v = imm << 16 | (old & 0xFFFF); break;
        default: v = (old & 0xFFFF0000) | imm; break;   /* 10 */
        }
        s->lreg[vd][l] = v;
    }
}

/* the element-wise LReg instructions without flags: value of lane l (the lane is enabled and VD writable) */
static uint32_t lanewise(const State *s, int op, const int32_t *r, int l) {
    int mod = r[1], vc = r[4], vd = r[5], imm = r[6];
    uint32_t c = s->lreg[vc][l], d = s->lreg[vd][l];
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
    case OP_SFPAND: return s->lreg[mod & 1 ? imm & 15 : vd][l] & c;
    case OP_SFPOR: return s->lreg[mod & 1 ? imm & 15 : vd][l] | c;
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
        if (mod == 1) return (int32_t)s->lreg[imm & 15][l] < 0 ? approx_recip(mag) : c;
        return sign + approx_exp(mag);
    }
    case OP_SFPMOV: return mod & 1 ? c ^ SIGN : c;
    case OP_SFPCAST: return cast(c, mod & 3);
    }
    return d;
}

/* SFPEXEXP, SFPLZ, SFPIADD: a value and, for VD < 8, the lane flag (mode bits: 2 from the value, 8 inverted) */
static void valued_flag(State *s, int op, const int32_t *r) {
    int mod = r[1], vc = r[4], vd = r[5], imm = r[6];
    if (!writable(vd)) return;
    for (int l = 0; l < LANES; l++) {
        if (!enabled(s, l)) continue;
        uint32_t c = s->lreg[vc][l], v;
        int flag;
        if (op == OP_SFPEXEXP) {
            int32_t e = (int32_t)(c >> 23 & 0xFF) - (mod & 1 ? 0 : 127);
            v = (uint32_t)e;
            flag = mod & 2 ? e < 0 : s->lf[l];
        } else if (op == OP_SFPLZ) {
            if (mod & 4) c &= 0x7FFFFFFF;
            v = clz32(c);
            flag = mod & 2 ? c != 0 : s->lf[l];
        } else {
            v = mod & 1 ? c + (uint32_t)sext(imm & 0xFFF, 12) : mod & 2 ? c - s->lreg[vd][l] : c + s->lreg[vd][l];
            flag = mod & 4 ? s->lf[l] : (int)(v >> 31);
        }
        s->lreg[vd][l] = v;
        if (vd < 8) s->lf[l] = (uint8_t)(mod & 8 ? !flag : flag);
    }
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

/* Execute n records from prog; returns how many ran (less than n at an op code this file does not know). */
int32_t sfpu_run(uint32_t *lreg, uint8_t *lane_flags, uint8_t *use_lane_flags, uint32_t *dst, uint8_t *written,
                 const int32_t *prog, int32_t n) {
    State st = {(uint32_t (*)[LANES])lreg, lane_flags, use_lane_flags, (uint32_t (*)[16])dst, written};
    State *s = &st;
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
        case OP_SFPEXEXP: case OP_SFPLZ: case OP_SFPIADD: valued_flag(s, op, r); break;
        case OP_SFPSETCC: SFPSETCC(s, r); break;
        case OP_SFPENCC: SFPENCC(s, r); break;
        case OP_SFPGT: case OP_SFPLE: compare(s, op, r); break;
        case OP_SFPMUL24: if (writable(vd)) SFPMUL24(s, r); break;
        case OP_SFPSWAP: SFPSWAP(s, r); break;
        case OP_SFPTRANSP: SFPTRANSP(s); break;
        default:
            if (op < 0 || op >= OP_COUNT) return i;
            if (writable(vd))             /* lane l's value depends on lane l only: written as computed */
                for (int l = 0; l < LANES; l++) if (enabled(s, l)) s->lreg[vd][l] = lanewise(s, op, r, l);
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
