/* Runs after fw_reset (startup.S): C's initial memory, then main, then the
 * exit through semihosting; and the semihosting calls the harness prints
 * with. */
#include <string.h>

#include "fw.h"

int main(void);
void fw_start(void);
void fw_fault(void);

extern uint32_t _data_start[], _data_end[], _data_load[], _bss_start[], _bss_end[];

enum {
    SYS_WRITE0 = 0x04,
    SYS_EXIT = 0x18,
    /* SYS_EXIT reasons: QEMU exits with status 0 for the first, 1 otherwise. */
    ADP_STOPPED_APPLICATION_EXIT = 0x20026,
    ADP_STOPPED_RUN_TIME_ERROR = 0x20023
};

static uint32_t semihost(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static void semihost_exit(uint32_t reason)
{
    /* On AArch32 SYS_EXIT takes the reason itself in r1, not a pointer. */
    semihost(SYS_EXIT, (const void *)(uintptr_t)reason);
    for (;;)
        ;
}

void fw_puts(const char *s)
{
    semihost(SYS_WRITE0, s);
}

void fw_put_u32(uint32_t v)
{
    char text[11];
    int i = (int)sizeof text - 1;
    text[i] = '\0';
    do {
        text[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    fw_puts(text + i);
}

void fw_put_hex(uint64_t v, int digits)
{
    char text[17];
    if (digits > 16)
        digits = 16;
    text[digits] = '\0';
    for (int i = digits - 1; i >= 0; i--, v >>= 4)
        text[i] = "0123456789abcdef"[v & 0xf];
    fw_puts(text);
}

void fw_start(void)
{
    size_t data_bytes = (size_t)((uintptr_t)_data_end - (uintptr_t)_data_start);
    size_t bss_bytes = (size_t)((uintptr_t)_bss_end - (uintptr_t)_bss_start);
    memcpy(_data_start, _data_load, data_bytes);
    memset(_bss_start, 0, bss_bytes);
    semihost_exit(main() == 0 ? ADP_STOPPED_APPLICATION_EXIT : ADP_STOPPED_RUN_TIME_ERROR);
}

/* Every exception but SysTick: a fault means a wrong build or a kernel
 * bug, so say so and stop rather than hang under a test's timeout. */
void fw_fault(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    fw_puts("fault: exception ");
    fw_put_u32(ipsr & 0x1ff);
    fw_puts("\n");
    semihost_exit(ADP_STOPPED_RUN_TIME_ERROR);
}
