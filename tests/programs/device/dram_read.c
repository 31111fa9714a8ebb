/* NoC0 read of ARG(2) bytes from DRAM (ARG(3)) @ARG(0) to L1 @ARG(1); then ARG(4) = sum of the words read. */
#include "tt.h"
int main(void) {
    uint32_t src = ARG(0), dst = ARG(1), len = ARG(2);
    noc_read(0, ARG(3), src, dst, len);
    uint32_t sum = 0;
    for (uint32_t a = dst; a < dst + len; a += 4) sum += REG32(a);
    ARG(4) = sum;
    return 0;
}
