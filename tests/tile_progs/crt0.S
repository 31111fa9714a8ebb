/* Minimal start-up for the tile tests: stack in core-local RAM (STACK_TOP from the command line), call main, park.
   No .bss clearing: the test programs keep their state in explicit L1 words. */
    .section .text.start, "ax"
    .global _start
_start:
    li sp, STACK_TOP
    call main
1:  j 1b
