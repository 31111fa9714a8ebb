/* Minimal start-up for the ttsim/emu test programs (any core; symbols come from the linker command line:
   __stack_top, __status = this core's status block, see harness.py).
   sp -> local RAM, zero .bss, a0 = main(), status.error = a0, status.done = generation, park. */
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
