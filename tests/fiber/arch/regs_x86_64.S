/* Test helpers for tern_switch_context on x86-64 (System V). Used by context_test and
 * context_check through tests/fiber/arch/context_harness.h.
 *
 *   uint64_t tern_test_regs_run(RegsShared* shared, uint64_t rounds)
 *     Loads the "main" patterns into rbx, rbp, r12-r15, MXCSR and the x87 control word, then
 *     switches `rounds` times to shared->peer_ctx (a context running tern_test_regs_peer) and
 *     after each return checks that every one of them still holds its pattern and that the
 *     switch returned `shared`. Restores the caller's registers and control words and returns
 *     the mismatches: bits 0-31 what this side saw, bits 32-63 what the peer saw (see below).
 *
 *   void tern_test_regs_peer(RegsShared* shared)
 *     A context entry. Records the MXCSR and x87 control word it starts with, loads different
 *     "peer" patterns into the same registers and control words, and loops: switch back to
 *     shared->main_ctx, then check its own patterns survived, OR-ing mismatches into
 *     shared->peer_mismatch. Never returns.
 *
 *   void tern_test_probe_entry(EntryProbe* probe)
 *     A context entry that stores its stack pointer at entry in probe->entry_sp and continues
 *     in probe->next(probe) on the same stack (a tail jump, so `next` sees the same alignment).
 *
 * Mismatch bits: 0 rbx, 1 rbp, 2 r12, 3 r13, 4 r14, 5 r15, 6 MXCSR control bits,
 * 7 x87 control word, 8 the switch returned the wrong arg.
 *
 * RegsShared layout: +0 main_ctx  +8 peer_ctx  +16 peer_mismatch  +24 peer_rounds
 *   +32 MXCSR the peer started with  +40 x87 control word the peer started with.
 */

#define SH_MAIN_CTX 0
#define SH_PEER_CTX 8
#define SH_PEER_MISMATCH 16
#define SH_PEER_ROUNDS 24
#define SH_PEER_ENTRY_MXCSR 32
#define SH_PEER_ENTRY_X87CW 40

/* MXCSR: all exceptions masked; main rounds toward zero with FTZ, the peer rounds up with DAZ.
 * x87: main uses double precision rounding toward zero, the peer single precision rounding
 * down. The status flags (MXCSR bits 0-5) are not compared; neither are x87 CW bits 6-7 and
 * 12-15 (reserved or without effect). */
#define MAIN_MXCSR 0xff80
#define PEER_MXCSR 0x5fc0
#define MXCSR_CONTROL_MASK 0xffc0
#define MAIN_X87CW 0x0e7f
#define PEER_X87CW 0x047f
#define X87CW_MASK 0x0f3f

        .section .rodata
        .p2align 3
/* rbx, rbp, r12, r13, r14, r15 */
.Lmain_patterns:
        .quad   0x0123456789abcdef, 0x1032547698badcfe, 0xf0e1d2c3b4a59687
        .quad   0x5a5a5a5aa5a5a5a5, 0x8000000000000001, 0x7ffffffffffffffe
.Lpeer_patterns:
        .quad   0xfedcba9876543210, 0xefcdab8967452301, 0x0f1e2d3c4b5a6978
        .quad   0xa5a5a5a55a5a5a5a, 0x7ffffffffffffffe, 0x8000000000000001
.Lmain_x87cw:
        .short  MAIN_X87CW
.Lpeer_x87cw:
        .short  PEER_X87CW
        .p2align 2
.Lmain_mxcsr:
        .long   MAIN_MXCSR
.Lpeer_mxcsr:
        .long   PEER_MXCSR

/* Sets bit `bit` of r8 unless `reg` equals the quad at `table`+`off`. */
.macro check_reg reg, table, off, bit
        cmpq    \table+\off(%rip), \reg
        je      1f
        orq     $(1 << \bit), %r8
1:
.endm

/* Sets bits 6 and 7 of r8 unless MXCSR and the x87 CW hold `mxcsr` and `x87cw`; uses `slot`. */
.macro check_control mxcsr, x87cw, slot
        stmxcsr \slot
        movl    \slot, %eax
        andl    $MXCSR_CONTROL_MASK, %eax
        cmpl    $\mxcsr, %eax
        je      1f
        orq     $(1 << 6), %r8
1:
        fnstcw  \slot
        movzwl  \slot, %eax
        andl    $X87CW_MASK, %eax
        cmpl    $(\x87cw & X87CW_MASK), %eax
        je      1f
        orq     $(1 << 7), %r8
1:
.endm

        .text
        .globl  tern_test_regs_run
        .type   tern_test_regs_run, @function
        .p2align 4
tern_test_regs_run:
        .cfi_startproc
        pushq   %rbp
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset rbp, 0
        pushq   %rbx
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset rbx, 0
        pushq   %r12
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset r12, 0
        pushq   %r13
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset r13, 0
        pushq   %r14
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset r14, 0
        pushq   %r15
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset r15, 0
        /* Locals (rsp is 16-byte aligned after this): +0 caller's MXCSR, +4 caller's x87 CW,
         * +8 shared, +16 rounds left, +24 mismatches, +32 scratch. */
        subq    $40, %rsp
        .cfi_adjust_cfa_offset 40
        stmxcsr 0(%rsp)
        fnstcw  4(%rsp)
        movq    %rdi, 8(%rsp)
        movq    %rsi, 16(%rsp)
        movq    $0, 24(%rsp)

        ldmxcsr .Lmain_mxcsr(%rip)
        fldcw   .Lmain_x87cw(%rip)
        movq    .Lmain_patterns+0(%rip), %rbx
        movq    .Lmain_patterns+8(%rip), %rbp
        movq    .Lmain_patterns+16(%rip), %r12
        movq    .Lmain_patterns+24(%rip), %r13
        movq    .Lmain_patterns+32(%rip), %r14
        movq    .Lmain_patterns+40(%rip), %r15

.Lrun_loop:
        cmpq    $0, 16(%rsp)
        je      .Lrun_done
        movq    8(%rsp), %rdx
        leaq    SH_MAIN_CTX(%rdx), %rdi
        movq    SH_PEER_CTX(%rdx), %rsi
        call    tern_switch_context@PLT

        xorl    %r8d, %r8d
        cmpq    8(%rsp), %rax
        je      1f
        orq     $(1 << 8), %r8
1:
        check_reg %rbx, .Lmain_patterns, 0, 0
        check_reg %rbp, .Lmain_patterns, 8, 1
        check_reg %r12, .Lmain_patterns, 16, 2
        check_reg %r13, .Lmain_patterns, 24, 3
        check_reg %r14, .Lmain_patterns, 32, 4
        check_reg %r15, .Lmain_patterns, 40, 5
        check_control MAIN_MXCSR, MAIN_X87CW, 32(%rsp)
        orq     %r8, 24(%rsp)
        decq    16(%rsp)
        jmp     .Lrun_loop

.Lrun_done:
        movq    8(%rsp), %rdx
        movq    SH_PEER_MISMATCH(%rdx), %rax
        shlq    $32, %rax
        orq     24(%rsp), %rax
        ldmxcsr 0(%rsp)
        fldcw   4(%rsp)
        addq    $40, %rsp
        .cfi_adjust_cfa_offset -40
        popq    %r15
        .cfi_adjust_cfa_offset -8
        popq    %r14
        .cfi_adjust_cfa_offset -8
        popq    %r13
        .cfi_adjust_cfa_offset -8
        popq    %r12
        .cfi_adjust_cfa_offset -8
        popq    %rbx
        .cfi_adjust_cfa_offset -8
        popq    %rbp
        .cfi_adjust_cfa_offset -8
        ret
        .cfi_endproc
        .size   tern_test_regs_run, .-tern_test_regs_run

        .globl  tern_test_regs_peer
        .type   tern_test_regs_peer, @function
        .p2align 4
tern_test_regs_peer:
        .cfi_startproc
        /* Locals (rsp is 16-byte aligned after this): +0 shared, +8 scratch. */
        subq    $24, %rsp
        .cfi_adjust_cfa_offset 24
        movq    %rdi, 0(%rsp)
        stmxcsr 8(%rsp)
        movl    8(%rsp), %eax
        movq    %rax, SH_PEER_ENTRY_MXCSR(%rdi)
        fnstcw  8(%rsp)
        movzwl  8(%rsp), %eax
        movq    %rax, SH_PEER_ENTRY_X87CW(%rdi)

        ldmxcsr .Lpeer_mxcsr(%rip)
        fldcw   .Lpeer_x87cw(%rip)
        movq    .Lpeer_patterns+0(%rip), %rbx
        movq    .Lpeer_patterns+8(%rip), %rbp
        movq    .Lpeer_patterns+16(%rip), %r12
        movq    .Lpeer_patterns+24(%rip), %r13
        movq    .Lpeer_patterns+32(%rip), %r14
        movq    .Lpeer_patterns+40(%rip), %r15

.Lpeer_loop:
        movq    0(%rsp), %rdx
        incq    SH_PEER_ROUNDS(%rdx)
        leaq    SH_PEER_CTX(%rdx), %rdi
        movq    SH_MAIN_CTX(%rdx), %rsi
        call    tern_switch_context@PLT

        xorl    %r8d, %r8d
        cmpq    0(%rsp), %rax
        je      1f
        orq     $(1 << 8), %r8
1:
        check_reg %rbx, .Lpeer_patterns, 0, 0
        check_reg %rbp, .Lpeer_patterns, 8, 1
        check_reg %r12, .Lpeer_patterns, 16, 2
        check_reg %r13, .Lpeer_patterns, 24, 3
        check_reg %r14, .Lpeer_patterns, 32, 4
        check_reg %r15, .Lpeer_patterns, 40, 5
        check_control PEER_MXCSR, PEER_X87CW, 8(%rsp)
        movq    0(%rsp), %rdx
        orq     %r8, SH_PEER_MISMATCH(%rdx)
        jmp     .Lpeer_loop
        .cfi_endproc
        .size   tern_test_regs_peer, .-tern_test_regs_peer

        .globl  tern_test_probe_entry
        .type   tern_test_probe_entry, @function
        .p2align 4
tern_test_probe_entry:
        .cfi_startproc
        movq    %rsp, 0(%rdi)
        jmpq    *8(%rdi)
        .cfi_endproc
        .size   tern_test_probe_entry, .-tern_test_probe_entry

        .section .note.GNU-stack,"",@progbits
