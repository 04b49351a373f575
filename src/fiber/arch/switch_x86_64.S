/* Context switch for x86-64, System V ABI.
 *
 *   void* tern_switch_context(void** save_sp, void* to_sp, void* arg)
 *
 * Saves what the ABI makes callee-saved (rbx, rbp, r12-r15, the MXCSR control bits and the x87
 * control word) on the current stack, stores the stack pointer in *save_sp, loads to_sp and
 * restores the same set from there; returns arg in the resumed context. The two control words
 * are loaded only when their control bits differ from the current ones: ldmxcsr and fldcw are
 * slow and almost never needed (MXCSR's exception flags, bits 0-5, are caller-saved and not
 * carried across a switch). The resume jumps through a register rather than `ret`, so the return-stack
 * predictor is not trained on addresses a switch never returns to.
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
        subq    $8, %rsp
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movl    (%rsp), %r8d
        movzwl  4(%rsp), %r9d
        movq    %rsp, (%rdi)

        movq    %rsi, %rsp
        xorl    (%rsp), %r8d
        testl   $0xffc0, %r8d          /* control bits only: the flags are caller-saved */
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
        popq    %rcx
        movq    %rdx, %rax
        jmp     *%rcx

.Lload_mxcsr:
        ldmxcsr (%rsp)
        jmp     .Lmxcsr_done
.Lload_x87cw:
        fldcw   4(%rsp)
        jmp     .Lx87cw_done
        .cfi_endproc
        .size   tern_switch_context, .-tern_switch_context

/* First code a new context runs: its frame was built by tern::make_context with the entry
 * function in rbx. rax holds the arg of the switch that started it. The stack is 16-byte
 * aligned here, so the call leaves the entry with the alignment the ABI promises. */
        .globl  tern_context_trampoline
        .hidden tern_context_trampoline
        .type   tern_context_trampoline, @function
        .p2align 4
tern_context_trampoline:
        .cfi_startproc
        .cfi_undefined rip
        xorl    %ebp, %ebp
        movq    %rax, %rdi
        callq   *%rbx
        ud2
        .cfi_endproc
        .size   tern_context_trampoline, .-tern_context_trampoline

        .section .note.GNU-stack,"",@progbits
