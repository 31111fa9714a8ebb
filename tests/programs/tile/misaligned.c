/* (c) DRAM read with src 0x20 -> dst 0x100000: not congruent mod 64, must be rejected. */
#include "tile_test.h"
int main(void) {
    noc_read(0, 18, 12, 0x20, 0x100000, 64);
    return 0;
}
