/* Integer arithmetic mix (mul/mulh/div/rem incl. corner cases, shifts, 64-bit via libgcc), results to L1 @ARG(0). */
#include "tt.h"
static uint32_t seed = 12345;   /* .data */
static uint32_t table[64];      /* .bss */
static uint32_t rnd(void) { seed = seed * 1103515245u + 12345u; return seed ^ (seed >> 15); }
int main(void) {
    volatile uint32_t *out = (volatile uint32_t *)(uintptr_t)ARG(0);
    uint32_t n = 0;
    static const int32_t edge[] = {0, 1, -1, 7, -7, 0x7FFFFFFF, (int32_t)0x80000000};
    for (unsigned i = 0; i < sizeof edge / sizeof edge[0]; i++)
        for (unsigned j = 0; j < sizeof edge / sizeof edge[0]; j++) {
            volatile int32_t a = edge[i], b = edge[j];
            out[n++] = (uint32_t)(a / b);          /* x/0 = -1, INT_MIN/-1 = INT_MIN on RISC-V */
            out[n++] = (uint32_t)(a % b);
            out[n++] = (uint32_t)((uint32_t)a / (uint32_t)b);
            out[n++] = (uint32_t)((uint32_t)a % (uint32_t)b);
            out[n++] = (uint32_t)(((int64_t)a * b) >> 32);
            out[n++] = (uint32_t)(((uint64_t)(uint32_t)a * (uint32_t)b) >> 32);
        }
    for (unsigned i = 0; i < 64; i++) table[i] = rnd();
    uint64_t acc = 0;
    for (unsigned i = 0; i < 2000; i++) {
        uint32_t x = rnd(), y = table[i & 63] | 1;
        table[i & 63] ^= x / y + (x % y) * 31u + (x << (y & 31)) + ((int32_t)x >> (y & 31));
        acc = acc * 6364136223846793005ull + table[i & 63];
        acc ^= acc / (uint64_t)(y | 0x100);
    }
    for (unsigned i = 0; i < 64; i++) out[n++] = table[i];
    out[n++] = (uint32_t)acc;
    out[n++] = (uint32_t)(acc >> 32);
    ARG(1) = n;
    return 0;
}
