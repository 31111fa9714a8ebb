/* SFPU differential kernel (tests/diff/test_diff_sfpu_ttsim.py): the same three TRISC ELFs run on EmuDevice and on
 * ttsim. Compiled three times: -DTRISC_UNPACK (TRISC0), -DTRISC_MATH (TRISC1), -DTRISC_PACK (TRISC2).
 *
 *   TRISC0  unpacks N_SLOTS fp32 tiles from L1 (IN, 4 KiB each) into Dst32b slots 0..N_SLOTS-1 (raw bits kept),
 *           then posts semaphore UNPACKED.
 *   TRISC1  writes cfg 1 (ALU formats, SFPU_Fp32_enabled) from the argument block, takes UNPACKED, and streams the
 *           host-built program (N_WORDS run-time Tensix words at PROG) into its instruction buffer with plain stores;
 *           every word of the SFPU program, including the instruction under test, comes from L1. Posts MATHDONE.
 *   TRISC2  takes MATHDONE and packs the N_SLOTS Dst slots back to L1 (OUT), fp32 -> fp32 (identity).
 *
 * Cross-thread waits are RISC-V polls of the semaphores (never an in-stream SEMWAIT, so no Tensix thread blocks
 * while its RISC-V keeps pushing: ttsim does not throttle MMIO pushes). The Tensix words used by the fixed part
 * come from -D macros computed by the test with chip.isa.encode (W_* below).
 * Sequences and config values: docs/sfpu_path.md §3, 5, 6, 7, 10. */
#include <stdint.h>

#define REG32(a) (*(volatile uint32_t *)(uintptr_t)(a))
#define ARG(i) REG32(0x100u + 4u * (i))
#define GENERATION REG32(0x10u)
#define READY_WORD REG32(SYNC_WORD)          /* TRISC0 -> others: semaphores initialised (= generation) */
#define PUSH(w) (REG32(0xFFE40000u) = (w))
#define CFG(i) REG32(0xFFEF0000u + 4u * (i))
#define SEM(i) REG32(0xFFE80020u + 4u * (i))

enum { A_NSLOTS, A_IN, A_OUT, A_PROG, A_NWORDS, A_ALU_CFG };
#define SEM_UNPACKED 0u
#define SEM_MATHDONE 1u

static inline void fence(void) { __asm__ volatile("fence" ::: "memory"); }

static inline void tensix_idle(void)
{
    REG32(0xFFE80004u) = 0u;
    (void)REG32(0xFFE80004u);
}

static inline void sem_take(uint32_t s)
{
    for (;;) {
        fence();
        if (SEM(s)) break;
        if (REG32(0x14u)) { fence(); __asm__ volatile("j ."); }  /* host asked to stop */
    }
    SEM(s) = 1u;   /* a RISC-V store of 1 decrements */
}

static inline void set_gpr(uint32_t gpr, uint32_t v)
{
    PUSH(W_SETDMAREG_BASE | ((v & 0xFFFFu) << 8) | (2u * gpr));
    PUSH(W_SETDMAREG_BASE | ((v >> 16) << 8) | (2u * gpr + 1u));
}

#if defined(TRISC_UNPACK)
int main(void)
{
    CFG(64) = 0x01000010u; CFG(65) = 0x00040001u; CFG(72) = 0x00000020u; CFG(73) = 0x0000001Fu;
    CFG(57) = 0x00000400u; CFG(86) = 0x01000100u; CFG(92) = 0u;
    PUSH(W_SEMINIT_UNPACKED);
    PUSH(W_SEMINIT_MATHDONE);
    PUSH(W_UNP_ADCXY_RESET);
    PUSH(W_UNP_ADCZW_RESET);
    PUSH(W_UNP_ADCXX_FACE);
    PUSH(W_SRCA_OVRD_OFF);
    tensix_idle();
    fence();
    READY_WORD = GENERATION;
    fence();
    uint32_t n = ARG(A_NSLOTS), in = ARG(A_IN);
    for (uint32_t s = 0; s < n; s++) {
        set_gpr(4, ((in + 4096u * s) >> 4) - 1u);
        set_gpr(5, 64u + 1024u * s);
        PUSH(W_STALL_CFG_UNPACK);
        PUSH(W_WRCFG_UNP_BASE);
        PUSH(W_WRCFG_UNP_DEST);
        PUSH(W_UNP_ADCZW_TILE);
        PUSH(W_UNPACR_DST_FACE); PUSH(W_UNPACR_DST_FACE); PUSH(W_UNPACR_DST_FACE); PUSH(W_UNPACR_DST_FACE);
        tensix_idle();
    }
    PUSH(W_STALL_SYNC_UNPACK);
    PUSH(W_SEMPOST_UNPACKED);
    tensix_idle();
    return 0;
}

#elif defined(TRISC_MATH)
int main(void)
{
    CFG(1) = ARG(A_ALU_CFG);
    PUSH(W_DST_SEC1_INCR2);
    uint32_t gen = GENERATION;
    for (;;) { fence(); if (READY_WORD == gen) break; }
    sem_take(SEM_UNPACKED);
    PUSH(W_MATH_OFFSET0);
    PUSH(W_SETRWC_DST);
    const volatile uint32_t *prog = (const volatile uint32_t *)(uintptr_t)ARG(A_PROG);
    uint32_t n = ARG(A_NWORDS);
    for (uint32_t i = 0; i < n; i++) {
        PUSH(prog[i]);
        if ((i & 31u) == 31u) tensix_idle();   /* keep the thread's FIFO short */
    }
    PUSH(W_STALL_SYNC_MATH);
    PUSH(W_SEMPOST_MATHDONE);
    tensix_idle();
    return 0;
}

#elif defined(TRISC_PACK)
int main(void)
{
    CFG(12) = 0x00400004u; CFG(13) = 0x10000400u; CFG(18) = 0x1u; CFG(20) = 0u; CFG(24) = 0xFFFFu;
    CFG(28) = 0x1000u; CFG(68) = 0u; CFG(70) = 0x001u; CFG(71) = 0u;
    PUSH(W_PACK_SEC0);
    PUSH(W_PACK_SEC1);
    PUSH(W_PACK_SEC2);
    PUSH(W_PCK_ADCXY_RESET);
    PUSH(W_PCK_ADCZW_RESET);
    PUSH(W_PCK_ADCXX_ROW);
    uint32_t gen = GENERATION;
    for (;;) { fence(); if (READY_WORD == gen) break; }
    sem_take(SEM_MATHDONE);
    uint32_t n = ARG(A_NSLOTS), out = ARG(A_OUT);
    for (uint32_t s = 0; s < n; s++) {
        set_gpr(4, ((out + 4096u * s) >> 4) - 1u);
        set_gpr(5, 64u * s);
        PUSH(W_STALL_CFG_PACK);
        PUSH(W_WRCFG_PCK_DEST);
        PUSH(W_WRCFG_PCK_OFFSET);
        for (int face = 0; face < 3; face++) {
            PUSH(W_PACR_ROWS); PUSH(W_PACR_ROWS); PUSH(W_PACR_ROWS);
            PUSH(W_PACR_NEXT_FACE);
        }
        PUSH(W_PACR_ROWS); PUSH(W_PACR_ROWS); PUSH(W_PACR_ROWS);
        PUSH(W_PACR_LAST);
        tensix_idle();
    }
    PUSH(W_STALL_SYNC_PACK);
    tensix_idle();
    return 0;
}
#else
#error "compile with -DTRISC_UNPACK, -DTRISC_MATH or -DTRISC_PACK"
#endif
