/* Start-up code for every core. Per-core constants come from the compiler command line (runtime/compile.py):
 *   TT_STACK_TOP    top of the core's private local RAM (stack; L1 images stay free of it)
 *   TT_STATUS_ADDR  this core's status block (+0 done, +4 error)
 *   TT_GEN_ADDR     the launch generation word
 * L1 and local RAM survive soft reset, so .bss is zeroed here on every launch. */
    .file "crt0.S"   /* else GCC names the symbol table's file entry after its temporary object: ELFs differ per build */
    .section .text.start, "ax"
    .globl _start
_start:
    li      sp, TT_STACK_TOP
    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sw      zero, 0(t0)
    addi    t0, t0, 4
    j       1b
2:  call    kmain
    li      t0, TT_STATUS_ADDR
    fence                           /* the kernel's results are visible before done/error */
    beqz    a0, 3f
    sw      a0, 4(t0)               /* kmain returned an error code */
    j       4f
3:  li      t1, TT_GEN_ADDR
    lw      t1, 0(t1)
    sw      t1, 0(t0)               /* done := generation */
4:  fence
5:  j       5b                      /* park: returning would re-enter L1 0 (the BRISC vector) */
