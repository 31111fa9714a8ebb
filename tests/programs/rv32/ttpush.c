/* Pushes Tensix words two ways: .ttinsn encodings (rotl2, emitted as raw .word) and sw to INSTRN_BUF_BASE.
   A loop mixes them with ordinary work so a Stall in the middle of a block is exercised. */
#define INSTRN_BUF ((volatile unsigned *)0xFFE40000)

int main(void) {
    unsigned acc = 0;
    for (int i = 0; i < 5; i++) {
        acc = acc * 3 + (unsigned)i;
        asm volatile(".word 0x08000048");          /* ttinsn(0x02000012) */
        INSTRN_BUF[0] = 0x01000000u + (unsigned)i;
        acc += 7;
        asm volatile(".word 0x48D159E0" ::: "memory");  /* ttinsn(0x12345678) */
    }
    return (int)acc;
}
