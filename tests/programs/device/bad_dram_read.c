/* Deliberate fatal error on ttsim: DRAM read whose src and dst are not congruent mod 64 (0x20 -> L1 0x100000). */
#include "tt.h"
int main(void) {
    noc_read(0, ARG(0), 0x20u, 0x100000u, 64u);
    return 0;
}
