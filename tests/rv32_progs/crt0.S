/* Minimal test runtime: stack in local RAM, call main, store its result at RESULT_ADDR, park in `j .`. */
    .section .text.start
    .globl _start
_start:
    li sp, 0xFFB01000
    call main
    li t0, 0x100          /* RESULT_ADDR (argument block in the tile map) */
    sw a0, 0(t0)
1:  j 1b
