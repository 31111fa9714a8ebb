/* Pop one value from the mailbox FROM -> me (index FROM) and store it at RESULTS + 4 * ROLE, + 1 as a marker. */
#include "mailbox.h"
int main(void) {
    L1(RESULTS + 4 * ROLE) = REG(MB(FROM)) + 1;
    return 0;
}
