/* TRISC1 pushes WORD (an ELWADD on SrcA/SrcB banks the test filled), waits with TTSync and reads Dst32b row 0
   through the fp32 view and Dst16b row 0 (the high halves) through the bf16 view into OUT. */
#include "mailbox.h"
#define OUT 0x32000u
int main(void) {
    uint32_t shift = 14 + 5 * 1;
    REG(TENSIX_CFG(3)) = 0;                              /* fmt 0 */
    store_done(TENSIX_CFG(3));
    PUSH(WORD);
    ttsync();
    for (unsigned i = 0; i < 16; i++) L1(OUT + 4 * i) = ((volatile uint32_t *)DST_BASE)[i];
    REG(TENSIX_CFG(3)) = 3u << (shift + 2);              /* fmt 3: bf16 */
    store_done(TENSIX_CFG(3));
    for (unsigned i = 0; i < 16; i++) L1(OUT + 64 + 4 * i) = ((volatile uint16_t *)DST_BASE)[i];
    return 0;
}
