/* Writes a few words (and a byte and a halfword) into L1 at ARG(0). */
#include "tt.h"
int main(void) {
    volatile uint32_t *p = (volatile uint32_t *)(uintptr_t)ARG(0);
    p[0] = 0xC0FFEE42u;
    p[1] = ARG(1) * 3u + 1u;
    ((volatile uint8_t *)p)[8] = 0xA5;
    ((volatile uint16_t *)p)[6] = 0xBEEF;
    return 0;
}
