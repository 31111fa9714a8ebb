/* (f) never finishes: bumps a word forever. */
#include "tile_test.h"
int main(void) {
    for (;;) L1(0x30000) = L1(0x30000) + 1;
}
