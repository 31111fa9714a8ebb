/* BRISC sees GPRs[3][64] at REGFILE_BASE, TRISC i sees GPRs[i] repeated every 256 bytes (ScalarUnit.md,
   MemoryOrdering.md). T1 sets its GPR 5 with two SETDMAREGs (WORD0/WORD1) and tells B; B reads it through its view
   and writes T2's GPR 9, then tells T2, which reads it through its own view. Results at RESULTS + 4*k. */
#include "mailbox.h"

int main(void) {
#if ROLE == 0
    consume(REG(MB(2)));                                      /* token T1 -> B */
    L1(RESULTS + 0) = REG(REGFILE + 4 * (64 * 1 + 5));        /* GPRs[1][5] */
    REG(REGFILE + 4 * (64 * 2 + 9)) = 0x5A5A0009u;            /* GPRs[2][9] */
    store_done(REGFILE + 4 * (64 * 2 + 9));
    REG(MB(3)) = 1;                                           /* token B -> T2 */
#elif ROLE == 2
    PUSH(WORD0);
    PUSH(WORD1);
    ttsync();
    REG(REGFILE + 4 * 7) = 0x77u;
    store_done(REGFILE + 4 * 7);
    L1(RESULTS + 4) = REG(REGFILE + ALIAS + 4 * 7);           /* the same GPR 7 through an alias */
    L1(RESULTS + 8) = REG(REGFILE + 4 * 5);
    REG(MB(0)) = 1;                                           /* token T1 -> B */
#elif ROLE == 3
    consume(REG(MB(0)));                                      /* token B -> T2 */
    L1(RESULTS + 12) = REG(REGFILE + 4 * 9);
#endif
    return 0;
}
