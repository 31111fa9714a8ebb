/* speed: COUNT DRAM -> L1 reads of CHUNK bytes over NoC0 (the reader's inner loop), then done. */
#include "tile_test.h"
int main(void) {
    for (uint32_t i = 0; i < COUNT; i++)
        noc_read(0, 18, 12, (i * CHUNK) & 0xFFFFF, 0x100000 + ((i * CHUNK) & 0x3FFFF), CHUNK);
    L1(0x30004) = 1;
    return 0;
}
