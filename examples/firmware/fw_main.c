/* The harness: runs the model's glue once on the embedded inputs, then prints
 * over semihosting every output as the hex of its elements' bits (so the host
 * reads the exact values), the stack's high-water mark, and what the run
 * cost in SysTick ticks and DWT cycles; then the same for a second model
 * when the image has one (FW_TWO_MODELS).  The lines are parsed by
 * tests/firmware_qemu.sh; keep their form. */
#include "fw.h"

void fw_systick(void);

extern uint32_t _stack_bottom[], _stack_top[];

#define REG(addr) (*(volatile uint32_t *)(addr))
#define SYST_CSR REG(0xE000E010)
#define SYST_RVR REG(0xE000E014)
#define SYST_CVR REG(0xE000E018)
#define DEMCR REG(0xE000EDFC)
#define DWT_CTRL REG(0xE0001000)
#define DWT_CYCCNT REG(0xE0001004)

#define SYSTICK_PERIOD (1u << 24)

/* SysTick is 24 bits wide; its interrupt counts the wraps. */
static volatile uint32_t systick_wraps;

void fw_systick(void)
{
    systick_wraps++;
}

static void timers_start(void)
{
    SYST_RVR = SYSTICK_PERIOD - 1;
    SYST_CVR = 0;
    /* Processor clock, interrupt on wrap, enabled. */
    SYST_CSR = 7;
    /* The counter starts at 0 and takes the reload value on its first tick;
     * before that, systick_now would read a whole period too many. */
    while (SYST_CVR == 0)
        ;
    DEMCR |= 1u << 24;  /* TRCENA, which powers the DWT */
    DWT_CYCCNT = 0;
    DWT_CTRL |= 1;      /* CYCCNTENA */
}

/* Ticks since timers_start, read so that a wrap between the two reads is
 * not lost. */
static uint64_t systick_now(void)
{
    uint32_t wraps, value;
    do {
        wraps = systick_wraps;
        value = SYST_CVR;
    } while (wraps != systick_wraps);
    return (uint64_t)wraps * SYSTICK_PERIOD + (SYSTICK_PERIOD - 1 - value);
}

/* 2 * N instructions (subs and bne, N times; the load of N is lost in the
 * rounding), so the host can turn ticks into instructions under QEMU's
 * -icount, whatever clock QEMU gives SysTick. */
#define CALIBRATION_LOOPS 1000000u
static void calibration_loop(void)
{
    uint32_t n = CALIBRATION_LOOPS;
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
}

static uint32_t stack_used_bytes(void)
{
    const uint32_t *w = _stack_bottom;
    while (w < _stack_top && *w == FW_STACK_PATTERN)
        w++;
    return (uint32_t)((uintptr_t)_stack_top - (uintptr_t)w);
}

static void put_line_u64(const char *key, uint64_t v)
{
    fw_puts(key);
    fw_puts(" ");
    if (v >> 32) {
        fw_puts("0x");
        fw_put_hex(v, 16);
    } else {
        fw_put_u32((uint32_t)v);
    }
    fw_puts("\n");
}

static void print_output(int k, FwOutput out)
{
    const unsigned char *bytes = out.data;
    fw_puts("output ");
    fw_put_u32((uint32_t)k);
    fw_puts(" ");
    fw_puts(out.name);
    fw_puts(" dtype ");
    fw_put_u32((uint32_t)out.dtype);
    fw_puts(" count ");
    fw_put_u32((uint32_t)out.count);
    fw_puts("\n");
    for (size_t i = 0; i < out.count; i++) {
        uint64_t bits = 0;
        for (size_t b = 0; b < out.elem_bytes; b++)
            bits |= (uint64_t)bytes[i * out.elem_bytes + b] << (8 * b);
        fw_put_hex(bits, (int)(2 * out.elem_bytes));
        fw_puts((i + 1) % 8 == 0 || i + 1 == out.count ? "\n" : " ");
    }
}

/* One model's glue and inputs, so that an image with two models runs both
 * through the same code. */
typedef struct Glue {
    const char *(*name)(void);
    const char *(*run)(uint32_t num_inputs, const void *const *inputs, const uint32_t *input_bytes);
    int (*num_outputs)(void);
    FwOutput (*output)(int k);
    uint32_t num_inputs;
    const void *const *inputs;
    const uint32_t *input_bytes;
} Glue;

/* Runs one model and prints its block (the lines tests/firmware_qemu.sh
 * parses, "done" last); the stack's high-water mark is the image's so far. */
static int run_model(const Glue *g, uint64_t calibration_ticks)
{
    fw_puts("fxcc-firmware model ");
    fw_puts(g->name());
    fw_puts("\n");
    uint32_t c0 = DWT_CYCCNT;
    uint64_t t0 = systick_now();
    const char *error = g->run(g->num_inputs, g->inputs, g->input_bytes);
    uint64_t run_ticks = systick_now() - t0;
    uint32_t run_cycles = DWT_CYCCNT - c0;
    if (error) {
        fw_puts("error: ");
        fw_puts(error);
        fw_puts("\n");
        return 1;
    }
    for (int k = 0; k < g->num_outputs(); k++)
        print_output(k, g->output(k));

    uint32_t stack_used = stack_used_bytes();
    put_line_u64("stack_bytes", (uint64_t)((uintptr_t)_stack_top - (uintptr_t)_stack_bottom));
    put_line_u64("stack_used_bytes", stack_used);
    put_line_u64("calibration_instructions", 2ull * CALIBRATION_LOOPS);
    put_line_u64("calibration_systick_ticks", calibration_ticks);
    put_line_u64("run_systick_ticks", run_ticks);
    put_line_u64("run_dwt_cycles", run_cycles);
    if (stack_used >= (uint32_t)((uintptr_t)_stack_top - (uintptr_t)_stack_bottom)) {
        fw_puts("error: the stack overflowed (raise STACK_BYTES)\n");
        return 1;
    }
    fw_puts("done\n");
    return 0;
}

int main(void)
{
    timers_start();
    uint64_t t0 = systick_now();
    calibration_loop();
    uint64_t calibration_ticks = systick_now() - t0;

    const Glue first = {fw_model_name, fw_model_run, fw_model_num_outputs, fw_model_output,
                        fw_num_inputs, fw_inputs, fw_input_bytes};
    int failed = run_model(&first, calibration_ticks);
#ifdef FW_TWO_MODELS
    const Glue second = {fw_model2_name, fw_model2_run, fw_model2_num_outputs, fw_model2_output,
                         fw2_num_inputs, fw2_inputs, fw2_input_bytes};
    failed |= run_model(&second, calibration_ticks);
#endif
    return failed;
}
