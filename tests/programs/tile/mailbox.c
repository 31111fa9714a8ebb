/* B <-> T0/T1/T2 over the mailboxes (docs/launch_noc.md §3.5: B -> Ti written at 0xFFEC_1000/2000/3000, read by Ti at
   0xFFEC_0000), replies Ti -> B, then a ring B -> T0 -> T1 -> T2 -> B. At most one value per mailbox at any time,
   so it runs the same on ttsim (one slot) and on hardware (four). QUERY=1 adds non-blocking queries (+4), which
   the hardware defines and ttsim treats as fatal. Results: RESULTS + 4*k. */
#include "mailbox.h"
#ifndef QUERY
#define QUERY 0
#endif

int main(void) {
#if ROLE == 0
    for (unsigned i = 1; i <= 3; i++) REG(MB(i)) = 0x1110u + i - 1;       /* B -> Ti */
    for (unsigned i = 1; i <= 3; i++) {
        if (QUERY) while (!REG(MB_QUERY(i))) {}
        L1(RESULTS + 16 + 4 * i) = REG(MB(i));                            /* Ti -> B */
    }
    if (QUERY) L1(RESULTS + 60) = REG(MB_QUERY(1)) + 2 * REG(MB_QUERY(2)) + 0x10;  /* all popped: 0x10 */
    REG(MB(1)) = 0xA0u;                                                   /* ring start: B -> T0 */
    L1(RESULTS + 32) = REG(MB(3));                                        /* ring end: T2 -> B */
#else
    uint32_t v = REG(MB(0));                                              /* B -> Ti */
    L1(RESULTS + 4 * ROLE) = v;
    REG(MB(0)) = v + 0x100u * ROLE;                                       /* Ti -> B */
    uint32_t r = REG(MB(ROLE == 1 ? 0 : ROLE - 1));                       /* ring: B -> T0, T0 -> T1, T1 -> T2 */
    L1(RESULTS + 36 + 4 * ROLE) = r;
    REG(MB(ROLE == 3 ? 0 : ROLE + 1)) = r + 1;                            /* T0 -> T1, T1 -> T2, T2 -> B */
#endif
    return 0;
}
