/* RISC-V T<ROLE-1> access to Dst (Dst.md "RISCV access to Dst"): fp32 values written through the window are read by
   SFPLOAD (WORD_LOAD0/2), doubled by SFPMAD (WORD_MAD) and stored back by SFPSTORE (WORD_STORE4/6), then read through
   the fp32, bf16, raw (no_swizzle) views; int32 / fp16 / int16 / int8 conversions; on TRISC2 (MULTI) a 32-bit access
   to two bf16 elements. Inputs at IN, results at OUT (see tests/emu/test_tile.py). */
#include "mailbox.h"
#define T (ROLE - 1)
#define IN 0x31000u
#define OUT 0x32000u
#define DST32 ((volatile uint32_t *)DST_BASE)
#define DST16 ((volatile uint16_t *)DST_BASE)
#define DST16S ((volatile int16_t *)DST_BASE)
#define DST8 ((volatile uint8_t *)DST_BASE)
#define DST8S ((volatile int8_t *)DST_BASE)
#define OUT32(k) L1(OUT + 4u * (k))

/* RISC_DEST_ACCESS_CTRL_SEC[T] = {no_swizzle, unsigned_int, fmt} in config word 3, bits 14 + 5*T */
static void set_ctrl(uint32_t fmt, uint32_t no_swizzle, uint32_t unsigned_int) {
    uint32_t shift = 14 + 5 * T;
    uint32_t c = REG(TENSIX_CFG(3)) & ~(0x1Fu << shift);
    REG(TENSIX_CFG(3)) = c | ((no_swizzle | unsigned_int << 1 | fmt << 2) << shift);
    store_done(TENSIX_CFG(3));
}

int main(void) {
    set_ctrl(0, 0, 0);                                   /* fp32 */
    for (unsigned i = 0; i < 64; i++) DST32[i] = L1(IN + 4 * i);   /* Dst32b rows 0..3 */
    consume(DST32[63]);                                  /* the stores are done before the pushes */
    PUSH(WORD_LOAD0); PUSH(WORD_MAD); PUSH(WORD_STORE4); /* even columns */
    PUSH(WORD_LOAD2); PUSH(WORD_MAD); PUSH(WORD_STORE6); /* odd columns */
    ttsync();
    for (unsigned i = 0; i < 64; i++) OUT32(i) = DST32[64 + i];    /* rows 4..7: 2x */
    set_ctrl(3, 0, 0);                                   /* bf16: Dst16b rows 4..7 are the high halves of 4..7 */
    for (unsigned i = 0; i < 64; i++) OUT32(64 + i) = DST16[64 + i];
    set_ctrl(0, 1, 0);                                   /* raw Dst32b bits */
    OUT32(128) = DST32[64];
    set_ctrl(1, 0, 0);                                   /* int32: two's complement <-> sign-magnitude */
    DST32[128] = (uint32_t)-5;
    DST32[129] = 0x80000000u;                            /* clamps to -(2**31 - 1) */
    OUT32(129) = DST32[128];
    OUT32(130) = DST32[129];
    set_ctrl(0, 0, 0);
    OUT32(131) = DST32[128];                             /* 0x80000005 */
    OUT32(132) = DST32[129];
    set_ctrl(2, 0, 0);                                   /* fp16 at Dst16b row 32 */
    DST16[32 * 16] = 0x3E00u;                            /* 1.5 */
    OUT32(133) = DST16[32 * 16];
    set_ctrl(2, 1, 0);
    OUT32(134) = DST16[32 * 16];                         /* raw: Sign,Man10,Exp5 */
    set_ctrl(4, 0, 0);                                   /* int16 at Dst16b row 33 */
    DST16[33 * 16] = (uint16_t)-7;
    OUT32(135) = (uint32_t)(int32_t)DST16S[33 * 16];
    set_ctrl(4, 0, 1);
    OUT32(136) = DST16[33 * 16];                         /* unsigned_int: raw sign-magnitude 0x8007 */
    set_ctrl(5, 0, 0);                                   /* int8 at Dst16b row 34 */
    DST8[34 * 16] = (uint8_t)-3;
    DST8[34 * 16 + 1] = 100;
    OUT32(137) = (uint32_t)(int32_t)DST8S[34 * 16];
    OUT32(138) = DST8[34 * 16 + 1];
    set_ctrl(5, 0, 1);
    OUT32(139) = DST8[34 * 16];                          /* unsigned_int: low 8 bits of the magnitude */
    set_ctrl(4, 1, 0);
    OUT32(140) = DST16[34 * 16];                         /* the Integer "8" word itself */
#if MULTI
    set_ctrl(3, 0, 0);                                   /* TRISC2: one lw = two bf16 elements */
    OUT32(141) = DST32[32];                              /* Dst16b row 4, columns 0 and 1 */
#endif
    return 0;
}
