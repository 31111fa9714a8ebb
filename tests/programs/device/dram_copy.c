/* DRAM (ARG(4)) @ARG(0) -> L1 @ARG(1) (NoC0), transform each word w -> w * 2654435761 ^ (w >> 7),
   then L1 -> DRAM @ARG(3) (NoC1), ARG(2) bytes. */
#include "tt.h"
int main(void) {
    uint32_t src = ARG(0), buf = ARG(1), len = ARG(2), dst = ARG(3), xy = ARG(4);
    noc_read(0, xy, src, buf, len);
    for (uint32_t a = buf; a < buf + len; a += 4) {
        uint32_t w = REG32(a);
        REG32(a) = w * 2654435761u ^ (w >> 7);
    }
    noc_write(1, buf, xy, dst, len);
    return 0;
}
