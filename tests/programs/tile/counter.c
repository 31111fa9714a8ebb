/* (e) each launch bumps a counter in L1 (state that survives a soft reset). */
#include "tile_test.h"
int main(void) {
    L1(0x30000) = L1(0x30000) + 1;
    return 0;
}
