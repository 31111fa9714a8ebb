/* A TRISC posts semaphore 2 through the MMIO window (a store with bit 0 clear = SEMPOST). */
#include "tile_test.h"
int main(void) {
    REG(0xFFE80020 + 4 * 2) = 0;
    return 0;
}
