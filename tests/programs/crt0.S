/* Start-up of every bare-metal test program (tests/support/programs.py links it first; symbols come from the linker
   command line: __stack_top = the core's local RAM top, __status = this core's status block, see chip/layout.py).
   sp -> local RAM, zero .bss, a0 = main(), status.error = a0, status.done = generation, park.
   The launch protocol (tests/support/harness.py) reads the two status words; the rv32 tests read main's result from
   the error word; programs launched by hand (tests/emu/test_tile.py) keep their results in L1 words of their own. */
    .file "crt0.S"   /* else GCC names the symbol table's file entry after its temporary object: ELFs differ per build */
    .section .init, "ax"
    .globl _start
_start:
    lui     sp, %hi(__stack_top)
    addi    sp, sp, %lo(__stack_top)
    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sw      zero, 0(t0)
    addi    t0, t0, 4
    j       1b
2:  call    main
    lui     t0, %hi(__status)
    addi    t0, t0, %lo(__status)
    sw      a0, 4(t0)          /* error word (0 = ok) */
    li      t1, 0x10           /* LAUNCH_GENERATION */
    lw      t1, 0(t1)
    fence   rw, rw
    sw      t1, 0(t0)          /* done = generation */
3:  j       3b
