/* Context switch for x86-64, System V ABI.
 *
 *   void* tern_switch_context(void** save_sp, void* to_sp, void* arg)
 *
 * Saves what the ABI makes callee-saved (rbx, rbp, r12-r15, the MXCSR control bits and the x87
 * control word) on the current stack, stores the stack pointer in *save_sp, loads to_sp and
 * restores the same set from there; returns arg in the resumed context.
 *
 * MXCSR is loaded only when its control bits (rounding, FTZ/DAZ, exception masks) differ from
 * the current ones, and then with the current status flags (bits 0-5) kept. The ABI makes those
 * flags caller-saved, so a switch may leave them as they are; restoring each context's own
 * flags would be as correct but far slower: an ldmxcsr that changes a status flag cost 40-90 ns
 * on the Intel Xeon KVM guest this was measured on (about 2 ns when it changes nothing), and two
 * fibers of which one has done an inexact floating-point operation since its last
 * switch and the other has not would pay it on every switch (a tern-bench switch run whose
 * timing fiber computes a double per batch measured 70-90 ns per switch that way). Comparing
 * costs a load of what stmxcsr just stored; stmxcsr itself remains the costliest instruction
 * here. The x87 control word is likewise reloaded only when it differs.
 *
 * The resume returns with `ret` when the resumed context suspended at the same call site as the
 * current one (the common case under the scheduler: fibers park in the same wait path). The
 * return-stack predictor holds the current context's return addresses, so it then predicts the
 * resume and the returns after it as far as the two call chains agree. Otherwise it jumps
 * through a register, which the indirect predictor learns, where `ret` would always mispredict.
 *
 * Frame (from the saved stack pointer up):
 *   +0 MXCSR (4 bytes)  +4 x87 control word (2 bytes)  +8 r12  +16 r13  +24 r14  +32 r15
 *   +40 rbx  +48 rbp  +56 resume address
 */
        .text
        .globl  tern_switch_context
        .type   tern_switch_context, @function
        .p2align 4
tern_switch_context:
        .cfi_startproc
        pushq   %rbp
        pushq   %rbx
        pushq   %r15
        pushq   %r14
        pushq   %r13
        pushq   %r12
        movq    48(%rsp), %r10          /* our return address: where this context resumes */
        subq    $8, %rsp
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movl    (%rsp), %r11d           /* MXCSR now */
        movzwl  4(%rsp), %r9d           /* x87 control word now */
        movq    %rsp, (%rdi)

        movq    %rsi, %rsp
.Lrestore:                              /* rsp: to; r11d, r9w: MXCSR, x87 CW now; r10, rdx */
        movl    (%rsp), %r8d
        xorl    %r11d, %r8d
        testl   $0xffffffc0, %r8d       /* control bits differ? */
        jnz     .Lload_mxcsr
.Lmxcsr_done:
        cmpw    4(%rsp), %r9w
        jne     .Lload_x87cw
.Lx87cw_done:
        addq    $8, %rsp
        popq    %r12
        popq    %r13
        popq    %r14
        popq    %r15
        popq    %rbx
        popq    %rbp
        movq    %rdx, %rax
        cmpq    (%rsp), %r10            /* resuming at our own call site? */
        jne     .Lother_site
        ret
.Lother_site:
        popq    %rcx
        jmp     *%rcx

.Lload_mxcsr:                           /* the resumed context's control bits, today's flags */
        xorl    %r11d, %r8d
        andl    $0xffffffc0, %r8d
        andl    $0x3f, %r11d
        orl     %r11d, %r8d
        movl    %r8d, (%rsp)
        ldmxcsr (%rsp)
        jmp     .Lmxcsr_done
.Lload_x87cw:
        fldcw   4(%rsp)
        jmp     .Lx87cw_done
        .cfi_endproc
        .size   tern_switch_context, .-tern_switch_context

/*   void tern_exit_context(void* to_sp, void* arg)
 *
 * Resumes to_sp from a context that never runs again: nothing is saved, the restore is the one
 * above. It resumes with `ret`: a context that entered through the trampoline below and made no
 * call it has not returned from (the scheduler's fibers end by jumps) leaves the return-stack
 * predictor as it found it, whose top is then the return address of the switch that first
 * resumed this context (for a fiber that finishes without parking, its joiner's switch into it),
 * so the resume and the returns after it are predicted. */
        .globl  tern_exit_context
        .type   tern_exit_context, @function
        .p2align 4
tern_exit_context:
        .cfi_startproc
        stmxcsr -8(%rsp)
        fnstcw  -4(%rsp)
        movl    -8(%rsp), %r11d         /* MXCSR now */
        movzwl  -4(%rsp), %r9d          /* x87 control word now */
        movq    %rsi, %rdx              /* arg */
        movq    %rdi, %rsp
        movq    56(%rsp), %r10          /* its own resume address: resume with ret */
        jmp     .Lrestore
        .cfi_endproc
        .size   tern_exit_context, .-tern_exit_context

/* First code a new context runs: its frame was built by tern::make_context with the entry
 * function in rbx. rax holds the arg of the switch that started it. The stack is 16-byte
 * aligned here; a zero return address (which ends unwinding) gives the entry the alignment the
 * ABI promises. The entry is reached by a jump, not a call, so that the context pushes nothing
 * onto the return-stack predictor that tern_exit_context would find there. */
        .globl  tern_context_trampoline
        .hidden tern_context_trampoline
        .type   tern_context_trampoline, @function
        .p2align 4
tern_context_trampoline:
        .cfi_startproc
        .cfi_undefined rip
        xorl    %ebp, %ebp
        movq    %rax, %rdi
        pushq   $0
        jmpq    *%rbx
        .cfi_endproc
        .size   tern_context_trampoline, .-tern_context_trampoline

        .section .note.GNU-stack,"",@progbits
