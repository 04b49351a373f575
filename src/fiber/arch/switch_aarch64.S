/* Context switch for aarch64, AAPCS64.
 *
 *   void* tern_switch_context(void** save_sp, void* to_sp, void* arg)
 *
 * Saves what the ABI makes callee-saved (x19-x28, the frame pointer x29, the link register x30,
 * the low halves d8-d15 of v8-v15, and FPCR) on the current stack, stores sp in *save_sp, loads
 * to_sp and restores the same set from there; returns arg in the resumed context. FPCR is
 * written only when it differs from the current value (writing it can stall the pipeline).
 *
 * Frame (176 bytes, from the saved stack pointer up):
 *   +0 x19 x20  +16 x21 x22  +32 x23 x24  +48 x25 x26  +64 x27 x28  +80 x29 x30
 *   +96 d8 d9  +112 d10 d11  +128 d12 d13  +144 d14 d15  +160 FPCR  +168 unused
 */
        .text
        .globl  tern_switch_context
        .type   tern_switch_context, %function
        .p2align 4
tern_switch_context:
        .cfi_startproc
        sub     sp, sp, #176
        stp     x19, x20, [sp, #0]
        stp     x21, x22, [sp, #16]
        stp     x23, x24, [sp, #32]
        stp     x25, x26, [sp, #48]
        stp     x27, x28, [sp, #64]
        stp     x29, x30, [sp, #80]
        stp     d8, d9, [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        mrs     x9, fpcr
        str     x9, [sp, #160]
        mov     x10, sp
        str     x10, [x0]

        mov     sp, x1
.Lrestore:                              /* sp: to; x9: FPCR now; x2: arg */
        ldr     x11, [sp, #160]
        cmp     x9, x11
        b.eq    1f
        msr     fpcr, x11
1:
        ldp     x19, x20, [sp, #0]
        ldp     x21, x22, [sp, #16]
        ldp     x23, x24, [sp, #32]
        ldp     x25, x26, [sp, #48]
        ldp     x27, x28, [sp, #64]
        ldp     x29, x30, [sp, #80]
        ldp     d8, d9, [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        add     sp, sp, #176
        mov     x0, x2
        ret
        .cfi_endproc
        .size   tern_switch_context, .-tern_switch_context

/*   void tern_exit_context(void* to_sp, void* arg)
 *
 * Resumes to_sp from a context that never runs again: nothing is saved, the restore is the one
 * above. */
        .globl  tern_exit_context
        .type   tern_exit_context, %function
        .p2align 4
tern_exit_context:
        .cfi_startproc
        mrs     x9, fpcr
        mov     x2, x1
        mov     sp, x0
        b       .Lrestore
        .cfi_endproc
        .size   tern_exit_context, .-tern_exit_context

/* First code a new context runs: tern::make_context put the entry function in x19 and this
 * trampoline in x30. x0 holds the arg of the switch that started it; sp is 16-byte aligned. */
        .globl  tern_context_trampoline
        .hidden tern_context_trampoline
        .type   tern_context_trampoline, %function
        .p2align 4
tern_context_trampoline:
        .cfi_startproc
        .cfi_undefined x30
        mov     x29, #0
        blr     x19
        brk     #0
        .cfi_endproc
        .size   tern_context_trampoline, .-tern_context_trampoline

        .section .note.GNU-stack,"",%progbits
