/* Format differential kernel (TRISC0 only; modelled on docs/sfpu_path.md §10): for each tile, one UNPACR
   stream moves L1 input into Dst (or, face by face, SrcA/SrcB followed by ELWADD into Dst) and one PACR stream
   moves it back to L1, with every format/config choice
   made by the host through the argument block:

   ARG(0) n_tiles       ARG(1) input L1 byte address of tile 0     ARG(2) input tile stride (bytes)
   ARG(3) output L1 byte address of tile 0                          ARG(4) output tile stride (bytes)
   ARG(5) n_setup       ARG(6) n_words (per-tile Tensix words)
   ARG(8 ..)            n_setup pairs (what, value): what < 0x10000 = config word index (RISC-V store),
                        what = 0x10000 = push `value` as a Tensix instruction
   then                 n_words Tensix instruction words pushed per tile, after cfg 76 / 124 (unpacker 0 / 1
                        base) and cfg 69 (packer L1 address) were set for the tile.
   All config stores happen while the Tensix thread is idle (TTSync load first), so no ordering is needed. */
#include "tt.h"

#define CFG(i) REG32(0xFFEF0000u + 4u * (i))
#define PUSH(w) (REG32(0xFFE40000u) = (w))
#define TT_SYNC 0xFFE80004u

static void wait_idle(void) {
    REG32(TT_SYNC) = 0;
    (void)REG32(TT_SYNC);
}

int main(void) {
    uint32_t n_tiles = ARG(0), in = ARG(1), in_stride = ARG(2), out = ARG(3), out_stride = ARG(4);
    uint32_t n_setup = ARG(5), n_words = ARG(6);
    volatile uint32_t *setup = &ARG(8);
    volatile uint32_t *words = setup + 2 * n_setup;
    for (uint32_t i = 0; i < n_setup; i++) {
        uint32_t what = setup[2 * i], value = setup[2 * i + 1];
        if (what < 0x10000u) {
            wait_idle();
            CFG(what) = value;
        } else {
            PUSH(value);
        }
    }
    for (uint32_t t = 0; t < n_tiles; t++) {
        wait_idle();
        CFG(76) = (in + t * in_stride) / 16 - 1;
        CFG(124) = (in + t * in_stride) / 16 - 1;   /* unpacker 1 reads the same input */
        CFG(69) = (out + t * out_stride) / 16 - 1;
        for (uint32_t k = 0; k < n_words; k++) {
            PUSH(words[k]);
            if ((k & 31) == 31) wait_idle();     /* MMIO pushes are not throttled in ttsim: keep its FIFO short */
        }
    }
    wait_idle();
    return 0;
}
