/* (b) BRISC: 4 KiB DRAM (18,12)@0 -> L1 0x100000 over NoC0 (two 2 KiB requests), then raise the flag. */
#include "tile_test.h"
int main(void) {
    noc_read(0, 18, 12, 0x0, 0x100000, 2048);
    noc_read(0, 18, 13, 0x800, 0x100800, 2048);   /* another translated coordinate of the same bank */
    __asm__ volatile("fence" ::: "memory");
    L1(0x30000) = 1;
    return 0;
}
