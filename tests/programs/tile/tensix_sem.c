/* (d) TRISC0: push WORD0..WORD2 (e.g. SEMINIT, SEMPOST, NOP, built by the test) to its Tensix thread, wait for the
   thread to go idle (TTSync), then read semaphore 2 back through the MMIO window. */
#include "tile_test.h"
int main(void) {
    REG(0xFFE40000) = WORD0;
    REG(0xFFE40000) = WORD1;
    REG(0xFFE40000) = WORD2;
    (void)REG(0xFFE80004);
    L1(0x30000) = REG(0xFFE80020 + 4 * 2);
    return 0;
}
