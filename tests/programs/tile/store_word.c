/* (a) each core writes a distinct word: CORE_ID comes from the command line. */
#include "tile_test.h"
int main(void) {
    L1(0x30000 + 4 * CORE_ID) = 0xC0DE0000u + CORE_ID;
    return 0;
}
