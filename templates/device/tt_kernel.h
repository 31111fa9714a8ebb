/* Kernel runtime basics shared by all five cores: MMIO access, status/progress words, the host's stop flag,
 * the start-up handshake between cores. (memset/memcpy, which the compiler may call: tt_libc.c.)
 *
 * Needs (before inclusion): tt_layout.h, and args.h for TT_SYNC_BASE. TT_CORE_INDEX comes from the compiler
 * command line (runtime/compile.py), so one header serves every core. */
#ifndef TT_KERNEL_H
#define TT_KERNEL_H

#include <stdint.h>
#include <stddef.h>

#ifndef TT_CORE_INDEX
#error "TT_CORE_INDEX must be defined (0 brisc, 1 ncrisc, 2..4 trisc0..2); runtime/compile.py passes it"
#endif
#ifndef TT_SYNC_BASE
#error "TT_SYNC_BASE must be defined by args.h (include args.h before tt_kernel.h)"
#endif

#define TT_REG32(addr) (*(volatile uint32_t *)(uintptr_t)(addr))
#define TT_L1_U8(addr) (*(volatile uint8_t *)(uintptr_t)(addr))
#define TT_L1_U16(addr) (*(volatile uint16_t *)(uintptr_t)(addr))

#include "tt_convert.h"   /* float16 buffers' conversions (static inline: no code unless a mover uses them) */

/* Error codes in the status word (+4). Mirrored in runtime/driver.py ERROR_NAMES for messages. */
#define TT_ERR_STOPPED 1u          /* the host set LAUNCH_STOP while this core was waiting */
#define TT_ERR_NOC_ALIGN 2u        /* a NoC request broke the src/dst congruence rule (plan or allocator bug) */
#define TT_ERR_GATHER_OOB 3u       /* an index expression pointed outside its buffer (lowering bug) */
#define TT_ERR_BAD_PLAN 4u         /* a compile-time impossible configuration reached the device */

/* status block of this core: +0 done, +4 error, +8 progress */
#define TT_STATUS_WORD(w) TT_REG32(TT_STATUS_BASE + TT_STATUS_STRIDE * TT_CORE_INDEX + 4u * (w))

/* The baby cores' L0 data cache is not coherent with the NoC or the other cores: every poll of a word written
 * elsewhere, and every consumption of NoC-written data, goes after a fence. Also a compiler barrier. */
static inline void tt_fence(void) { __asm__ volatile("fence" ::: "memory"); }

static inline uint32_t tt_arg(uint32_t i) { return TT_REG32(TT_ARGS_BASE + 4u * i); }
static inline uint32_t tt_generation(void) { return TT_REG32(TT_LAUNCH_GENERATION); }

/* Retire with an error: status error := code, then park. crt0 is not returned to, so `done` stays unwritten and
 * the driver reports the code. */
static inline __attribute__((noreturn)) void tt_fail(uint32_t code)
{
    tt_fence();
    TT_STATUS_WORD(1) = code;
    tt_fence();
    for (;;) __asm__ volatile("j .");
}

static inline void tt_check_stop(void)
{
    if (TT_REG32(TT_LAUNCH_STOP)) tt_fail(TT_ERR_STOPPED);
}

/* Every blocking wait of the kernels goes through this, so a host-side timeout can always retire the cores. */
#define TT_WAIT_UNTIL(cond)          \
    do {                             \
        for (;;) {                   \
            tt_fence();              \
            if (cond) break;         \
            tt_check_stop();         \
        }                            \
    } while (0)

/* n 32-bit words := word from addr on, eight stores per loop step (a reduction reader's per-output constant fills a
 * whole tile: the loop's own instructions, not the stores, would otherwise cost most of its cycles) */
static inline void tt_fill_words(uint32_t addr, uint32_t word, uint32_t n)
{
    volatile uint32_t *p = (volatile uint32_t *)(uintptr_t)addr, *end = p + n;
    for (; p + 8 <= end; p += 8) {
        p[0] = word; p[1] = word; p[2] = word; p[3] = word; p[4] = word; p[5] = word; p[6] = word; p[7] = word;
    }
    for (; p < end; p++) *p = word;
}

/* progress counter (status +8): the driver shows it in timeout messages, so a hang says how far each core got */
static inline void tt_progress(void) { TT_STATUS_WORD(2) = TT_STATUS_WORD(2) + 1u; }

/* Start-up handshake. L1 survives soft reset, so shared words left by the previous launch are stale until their
 * owner re-initialises them. Each core publishes ready := generation (the host writes a fresh generation per
 * launch) once its shared state (CB counters, semaphores) is initialised; others wait for it. */
#define TT_READY_WORD(core) TT_REG32(TT_SYNC_BASE + 16u * (core))

static inline void tt_signal_ready(void)
{
    tt_fence();
    TT_READY_WORD(TT_CORE_INDEX) = tt_generation();
    tt_fence();
}

static inline void tt_wait_ready(uint32_t core)
{
    uint32_t gen = tt_generation();
    TT_WAIT_UNTIL(TT_READY_WORD(core) == gen);
}

#endif
