/* (b) NCRISC: wait for BRISC's flag, then 4 KiB L1 0x100000 -> DRAM (18,12)@0x200000 over NoC1, then done. */
#include "tile_test.h"
int main(void) {
    while (L1(0x30000) != 1) { __asm__ volatile("fence" ::: "memory"); }
    noc_write(1, 0x100000, 18, 12, 0x200000, 4096);
    L1(0x30004) = 2;
    return 0;
}
