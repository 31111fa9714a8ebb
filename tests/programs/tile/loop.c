/* speed: a compute loop (xorshift + multiply-accumulate), result stored to L1. ITERS from the command line. */
#include "tile_test.h"
int main(void) {
    uint32_t x = 1, acc = 0;
    for (uint32_t i = 0; i < ITERS; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        acc += x * 3u + (i & 7);
    }
    L1(0x30000) = acc;
    L1(0x30004) = 1;
    return 0;
}
