/* Never finishes: bumps the progress word of its status block (for timeout tests). */
#include "tt.h"
int main(void) {
    for (;;) REG32(0x40u + 8u) += 1u;   /* BRISC status +8: progress */
    return 0;
}
