/* Spin detection: wait until L1 word FLAG+4 becomes nonzero (polled, no stores), then count the polls' end in FLAG+8.
 * With WORK > 0 the program instead does WORK iterations of stores, then raises FLAG+4 (the other core's signal),
 * then POST more iterations. */
#include "tile_test.h"
#ifndef POST
#define POST 0
#endif
int main(void) {
#if WORK
    for (uint32_t i = 0; i < WORK; i++) L1(0x30010) = L1(0x30010) + i;
    L1(0x30004) = 1;
    for (uint32_t i = 0; i < POST; i++) L1(0x30010) = L1(0x30010) + i;
#else
    while (L1(0x30004) == 0) {}
    L1(0x30008) = L1(0x30004) + 1;
#endif
    return 0;
}
