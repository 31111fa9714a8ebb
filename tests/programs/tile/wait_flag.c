/* Spin detection: wait until L1 word FLAG+4 becomes nonzero (polled, no stores), then count the polls' end in FLAG+8.
 * With WORK > 0 the program instead does WORK iterations of stores, then raises FLAG+4 (the other core's signal),
 * then POST more iterations; DELAY nops before raising it move the store cycle by cycle. */
#include "tile_test.h"
#ifndef POST
#define POST 0
#endif
#ifndef ABORT
#define ABORT 0
#endif
#ifndef DELAY
#define DELAY 0
#endif
#define TT_STR(x) #x
#define TT_XSTR(x) TT_STR(x)
int main(void) {
#if WORK
    for (uint32_t i = 0; i < WORK; i++) L1(0x30010) = L1(0x30010) + i;
    __asm__ volatile(".rept " TT_XSTR(DELAY) "\n nop\n .endr");
    L1(0x30004) = 1;
    for (uint32_t i = 0; i < POST; i++) L1(0x30010) = L1(0x30010) + i;
#else
#if ABORT
    while (L1(0x30004) == 0) { if (L1(0x30020)) break; }   /* the kernels' waits: an abort word read each turn too */
#else
    while (L1(0x30004) == 0) {}
#endif
    L1(0x30008) = L1(0x30004) + 1;
#endif
    return 0;
}
