/* Depth and aggregate rules (Mailboxes.md): BRISC pushes N0 values to T0 then N1 values to T1, counting pushes in
   RESULTS + 0; the TRISCs (when released) pop them into RESULTS + 0x100 * ROLE + 4 * k. */
#include "mailbox.h"

int main(void) {
#if ROLE == 0
    for (unsigned k = 0; k < N0; k++) { REG(MB(1)) = 0x100u + k; L1(RESULTS) = k + 1; }
    for (unsigned k = 0; k < N1; k++) { REG(MB(2)) = 0x200u + k; L1(RESULTS) = N0 + k + 1; }
#elif ROLE == 1
    for (unsigned k = 0; k < N0; k++) L1(RESULTS + 0x100 + 4 * k) = REG(MB(0));
#elif ROLE == 2
    for (unsigned k = 0; k < N1; k++) L1(RESULTS + 0x200 + 4 * k) = REG(MB(0));
#endif
    return 0;
}
