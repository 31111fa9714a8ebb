/* Script player for the FPU differential tests: each TRISC walks a list of u32 commands in L1 (address ARG(core)),
 * so one ELF per core serves every case and the Python test decides the instruction words at run time.
 * Commands: 0 end | 1 w: push Tensix word w (MMIO push; the lists stay far below ttsim's 512-entry pipe FIFO)
 *           2 i v: config word i := v from the RISC-V | 3: wait until this thread's Tensix work has drained
 *           4 a v: L1 word a := v | 5 a v: wait until L1 word a == v (cross-core ordering of the config phase). */
#include "tt.h"

#ifndef PLAYER_CORE
#error "build with -DPLAYER_CORE=<0..2> (TRISC index)"
#endif

#define TENSIX_CFG_BASE 0xFFEF0000u
#define TENSIX_PUSH 0xFFE40000u
#define TENSIX_SYNC 0xFFE80004u

int main(void) {
    volatile uint32_t *p = (volatile uint32_t *)(uintptr_t)ARG(PLAYER_CORE);
    for (;;) {
        uint32_t op = *p++;
        if (op == 0) break;
        if (op == 1) {
            REG32(TENSIX_PUSH) = *p++;
        } else if (op == 2) {
            uint32_t i = *p++;
            REG32(TENSIX_CFG_BASE + 4u * i) = *p++;
        } else if (op == 3) {
            REG32(TENSIX_SYNC) = 0u;          /* keeps the load from overtaking earlier pushes */
            (void)REG32(TENSIX_SYNC);         /* stalls until the thread's instructions retired */
        } else if (op == 4) {
            uint32_t a = *p++;
            __asm__ volatile("fence rw, rw" ::: "memory");
            REG32(a) = *p++;
        } else if (op == 5) {
            uint32_t a = *p++, v = *p++;
            while (REG32(a) != v) {
                if (REG32(0x14u)) return 1;   /* host asked to stop (layout LAUNCH_STOP) */
            }
            __asm__ volatile("fence rw, rw" ::: "memory");
        } else {
            return 2;
        }
    }
    return 0;
}
