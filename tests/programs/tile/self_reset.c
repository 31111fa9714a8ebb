/* BRISC starts NCRISC itself (docs/launch_noc.md §3.5), then asserts its own reset: it must stop at once. */
#include "tile_test.h"
int main(void) {
    REG(0xFFB12238) = NC_ENTRY;            /* NCRISC_RESET_PC */
    REG(0xFFB1223C) = 1;                   /* NCRISC_RESET_PC_OVERRIDE */
    REG(0xFFB121B0) = 0x7000;              /* release NCRISC (bit 18), keep TRISCs held, BRISC (bit 11) stays 0 */
    REG(0xFFB121B0) = 0x7800;              /* assert own reset */
    L1(0x30008) = 0xBAD;                   /* never reached */
    return 0;
}
