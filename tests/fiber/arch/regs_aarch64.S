/* Test helpers for tern_switch_context on aarch64 (AAPCS64). Used by context_test and
 * context_check through tests/fiber/arch/context_harness.h.
 *
 *   uint64_t tern_test_regs_run(RegsShared* shared, uint64_t rounds)
 *     Loads the "main" patterns into x19-x28, x29, d8-d15 and FPCR, then switches `rounds` times
 *     to shared->peer_ctx (a context running tern_test_regs_peer) and after each return checks
 *     that every one of them still holds its pattern and that the switch returned `shared`.
 *     Restores the caller's registers and FPCR and returns the mismatches: bits 0-31 what this
 *     side saw, bits 32-63 what the peer saw (see below).
 *
 *   void tern_test_regs_peer(RegsShared* shared)
 *     A context entry. Records the FPCR it starts with, loads different "peer" patterns into the
 *     same registers and FPCR, and loops: switch back to shared->main_ctx, then check its own
 *     patterns survived, OR-ing mismatches into shared->peer_mismatch. Never returns.
 *
 *   void tern_test_probe_entry(EntryProbe* probe)
 *     A context entry that stores its stack pointer at entry in probe->entry_sp and continues
 *     in probe->next(probe) on the same stack (a tail branch, so `next` sees the same sp).
 *
 * Mismatch bits: 0-9 x19-x28, 10 x29, 11-18 d8-d15, 19 FPCR, 20 the switch returned the wrong
 * arg.
 *
 * RegsShared layout: +0 main_ctx  +8 peer_ctx  +16 peer_mismatch  +24 peer_rounds
 *   +32 FPCR the peer started with  +40 unused (x87 control word on x86-64).
 */

#define SH_MAIN_CTX 0
#define SH_PEER_CTX 8
#define SH_PEER_MISMATCH 16
#define SH_PEER_ROUNDS 24
#define SH_PEER_ENTRY_FPCR 32
#define SH_PEER_ENTRY_UNUSED 40

/* Pattern table: x19-x29 at +0..+80, d8-d15 at +88..+144, FPCR at +152. */
#define PT_X29 80
#define PT_D8 88
#define PT_FPCR 152

/* FPCR bits compared: AHP, DN, FZ and RMode (other bits may be RAZ/WI). Main rounds toward zero
 * with FZ; the peer rounds toward +infinity with DN. */
#define FPCR_MASK 0x07c00000
#define MAIN_FPCR 0x01c00000
#define PEER_FPCR 0x02400000

        .section .rodata
        .p2align 3
.Lmain_patterns:
        .quad   0x0123456789abcdef, 0x1032547698badcfe, 0xf0e1d2c3b4a59687, 0x5a5a5a5aa5a5a5a5
        .quad   0x8000000000000001, 0x7ffffffffffffffe, 0x1111111122222222, 0x3333333344444444
        .quad   0x5555555566666666, 0x7777777788888888, 0x99999999aaaaaaaa
        .quad   0x3ff0000000000001, 0xc00921fb54442d18, 0x0000000000000001, 0x7fefffffffffffff
        .quad   0x8000000000000000, 0x4005bf0a8b145769, 0xbff8000000000000, 0x0123456789abcdef
        .quad   MAIN_FPCR
.Lpeer_patterns:
        .quad   0xfedcba9876543210, 0xefcdab8967452301, 0x0f1e2d3c4b5a6978, 0xa5a5a5a55a5a5a5a
        .quad   0x7ffffffffffffffe, 0x8000000000000001, 0xeeeeeeeedddddddd, 0xccccccccbbbbbbbb
        .quad   0xaaaaaaaa99999999, 0x8888888877777777, 0x6666666655555555
        .quad   0xc00fffffffffffff, 0x400921fb54442d18, 0xfffffffffffffffe, 0x0010000000000000
        .quad   0x0000000000000000, 0xc005bf0a8b145769, 0x3ff8000000000000, 0xfedcba9876543210
        .quad   PEER_FPCR

/* Points x9 at the pattern table `table`. */
.macro table_address table
        adrp    x9, \table
        add     x9, x9, :lo12:\table
.endm

/* Loads x19-x29, d8-d15 and FPCR from the pattern table at x9. */
.macro load_patterns
        ldr     x10, [x9, #PT_FPCR]
        msr     fpcr, x10
        ldp     x19, x20, [x9, #0]
        ldp     x21, x22, [x9, #16]
        ldp     x23, x24, [x9, #32]
        ldp     x25, x26, [x9, #48]
        ldp     x27, x28, [x9, #64]
        ldr     x29, [x9, #PT_X29]
        ldp     d8, d9, [x9, #PT_D8]
        ldp     d10, d11, [x9, #PT_D8 + 16]
        ldp     d12, d13, [x9, #PT_D8 + 32]
        ldp     d14, d15, [x9, #PT_D8 + 48]
.endm

/* Sets bit `bit` of x12 unless x10 equals x11. */
.macro flag_unless_equal bit
        cmp     x10, x11
        b.eq    1f
        orr     x12, x12, #(1 << \bit)
1:
.endm

/* Sets bit `bit` of x12 unless general register `reg` equals the quad at x9 + `off`. */
.macro check_x reg, off, bit
        mov     x10, \reg
        ldr     x11, [x9, #\off]
        flag_unless_equal \bit
.endm

/* Sets bit `bit` of x12 unless FP register `reg` (a d register) equals the quad at x9 + `off`. */
.macro check_d reg, off, bit
        fmov    x10, \reg
        ldr     x11, [x9, #\off]
        flag_unless_equal \bit
.endm

/* ORs into x12 the mismatches between the registers and the pattern table at x9. */
.macro check_patterns
        check_x x19, 0, 0
        check_x x20, 8, 1
        check_x x21, 16, 2
        check_x x22, 24, 3
        check_x x23, 32, 4
        check_x x24, 40, 5
        check_x x25, 48, 6
        check_x x26, 56, 7
        check_x x27, 64, 8
        check_x x28, 72, 9
        check_x x29, PT_X29, 10
        check_d d8, PT_D8, 11
        check_d d9, PT_D8 + 8, 12
        check_d d10, PT_D8 + 16, 13
        check_d d11, PT_D8 + 24, 14
        check_d d12, PT_D8 + 32, 15
        check_d d13, PT_D8 + 40, 16
        check_d d14, PT_D8 + 48, 17
        check_d d15, PT_D8 + 56, 18
        mrs     x10, fpcr
        and     x10, x10, #FPCR_MASK
        ldr     x11, [x9, #PT_FPCR]
        flag_unless_equal 19
.endm

        .text
        .globl  tern_test_regs_run
        .type   tern_test_regs_run, %function
        .p2align 4
tern_test_regs_run:
        .cfi_startproc
        /* Frame (208 bytes): +0 x29 x30  +16..+95 x19-x28  +96..+159 d8-d15  +160 caller's FPCR
         * +168 shared  +176 rounds left  +184 mismatches. */
        stp     x29, x30, [sp, #-208]!
        .cfi_def_cfa_offset 208
        .cfi_offset x29, -208
        .cfi_offset x30, -200
        stp     x19, x20, [sp, #16]
        stp     x21, x22, [sp, #32]
        stp     x23, x24, [sp, #48]
        stp     x25, x26, [sp, #64]
        stp     x27, x28, [sp, #80]
        stp     d8, d9, [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        mrs     x9, fpcr
        str     x9, [sp, #160]
        stp     x0, x1, [sp, #168]
        str     xzr, [sp, #184]
        table_address .Lmain_patterns
        load_patterns

.Lrun_loop:
        ldr     x10, [sp, #176]
        cbz     x10, .Lrun_done
        ldr     x2, [sp, #168]
        add     x0, x2, #SH_MAIN_CTX
        ldr     x1, [x2, #SH_PEER_CTX]
        bl      tern_switch_context

        mov     x12, #0
        mov     x10, x0
        ldr     x11, [sp, #168]
        flag_unless_equal 20
        table_address .Lmain_patterns
        check_patterns
        ldr     x10, [sp, #184]
        orr     x10, x10, x12
        str     x10, [sp, #184]
        ldr     x10, [sp, #176]
        sub     x10, x10, #1
        str     x10, [sp, #176]
        b       .Lrun_loop

.Lrun_done:
        ldr     x2, [sp, #168]
        ldr     x0, [x2, #SH_PEER_MISMATCH]
        ldr     x10, [sp, #184]
        orr     x0, x10, x0, lsl #32
        ldr     x9, [sp, #160]
        msr     fpcr, x9
        ldp     x19, x20, [sp, #16]
        ldp     x21, x22, [sp, #32]
        ldp     x23, x24, [sp, #48]
        ldp     x25, x26, [sp, #64]
        ldp     x27, x28, [sp, #80]
        ldp     d8, d9, [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        ldp     x29, x30, [sp], #208
        .cfi_def_cfa_offset 0
        ret
        .cfi_endproc
        .size   tern_test_regs_run, .-tern_test_regs_run

        .globl  tern_test_regs_peer
        .type   tern_test_regs_peer, %function
        .p2align 4
tern_test_regs_peer:
        .cfi_startproc
        .cfi_undefined x30
        /* Frame (16 bytes): +0 shared. */
        sub     sp, sp, #16
        .cfi_def_cfa_offset 16
        str     x0, [sp]
        mrs     x9, fpcr
        str     x9, [x0, #SH_PEER_ENTRY_FPCR]
        str     xzr, [x0, #SH_PEER_ENTRY_UNUSED]
        table_address .Lpeer_patterns
        load_patterns

.Lpeer_loop:
        ldr     x2, [sp]
        ldr     x10, [x2, #SH_PEER_ROUNDS]
        add     x10, x10, #1
        str     x10, [x2, #SH_PEER_ROUNDS]
        add     x0, x2, #SH_PEER_CTX
        ldr     x1, [x2, #SH_MAIN_CTX]
        bl      tern_switch_context

        mov     x12, #0
        mov     x10, x0
        ldr     x11, [sp]
        flag_unless_equal 20
        table_address .Lpeer_patterns
        check_patterns
        ldr     x2, [sp]
        ldr     x10, [x2, #SH_PEER_MISMATCH]
        orr     x10, x10, x12
        str     x10, [x2, #SH_PEER_MISMATCH]
        b       .Lpeer_loop
        .cfi_endproc
        .size   tern_test_regs_peer, .-tern_test_regs_peer

        .globl  tern_test_probe_entry
        .type   tern_test_probe_entry, %function
        .p2align 4
tern_test_probe_entry:
        .cfi_startproc
        mov     x9, sp
        str     x9, [x0]
        ldr     x16, [x0, #8]
        br      x16
        .cfi_endproc
        .size   tern_test_probe_entry, .-tern_test_probe_entry

        .section .note.GNU-stack,"",%progbits
