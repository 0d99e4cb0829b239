/* Vector table and reset handler for a Cortex-M4F.  The reset handler is
 * assembly because the C code is compiled for the FPU, so no C may run before
 * CPACR grants it, and because the stack must be painted before anything
 * uses it (fw_stack_used counts the words still holding the pattern). */
#include "fw.h"

    .syntax unified
    .cpu cortex-m4
    .fpu fpv4-sp-d16
    .thumb

    .section .vectors, "a", %progbits
    .global fw_vectors
fw_vectors:
    .word _stack_top
    .word fw_reset
    .word fw_fault          /* NMI */
    .word fw_fault          /* HardFault */
    .word fw_fault          /* MemManage */
    .word fw_fault          /* BusFault */
    .word fw_fault          /* UsageFault */
    .word 0, 0, 0, 0
    .word fw_fault          /* SVCall */
    .word fw_fault          /* DebugMonitor */
    .word 0
    .word fw_fault          /* PendSV */
    .word fw_systick

    .section .text.fw_reset, "ax", %progbits
    .global fw_reset
    .type fw_reset, %function
    .thumb_func
fw_reset:
    /* CPACR: full access to CP10 and CP11, the FPU. */
    ldr r0, =0xE000ED88
    ldr r1, [r0]
    orr r1, r1, #(0xF << 20)
    str r1, [r0]
    dsb
    isb
    /* Paint the whole stack, from its bottom up to the initial SP. */
    ldr r0, =_stack_bottom
    mov r1, sp
    ldr r2, =FW_STACK_PATTERN
1:  cmp r0, r1
    bhs 2f
    str r2, [r0], #4
    b 1b
2:  bl fw_start
3:  b 3b
    .pool
    .size fw_reset, . - fw_reset
