/*
 * report.c - what a model adds to a firmware image, before any cross
 * compiler runs: the flash of its code and weights, the RAM of its arena,
 * of the library data its code brings and of the caller's output buffers,
 * and the stack its run needs; per layer and in total (`fxcc compile
 * --report`, `--report-json FILE`).
 *
 * Code and stack come from codegen/runtime_costs.c, the runtime measured on
 * a Cortex-M4F by scripts/runtime_costs.py: for each function its bytes, its
 * own frame and its callees.  A layer's kernels are the functions its block
 * calls (CgPlan.step_calls); the model's code is every function reachable
 * from them, each counted once, plus an estimate of NAME_run itself; a
 * layer's stack is its deepest chain of frames.  A recursive function
 * (none among the kernels) would count one frame.  tests/firmware_qemu.sh
 * holds these figures against arm-none-eabi-size of the example and the
 * stack it measures; the table must be rewritten when the runtime changes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen.h"

/* NAME_run and NAME.c's tables, per step with code and once: fitted to the
 * generated code of the test models (dscnn_kws_run: 716 bytes, 11 steps),
 * with room to spare. */
enum { RUN_CODE_PER_STEP = 64, RUN_CODE_BASE = 256 };
/* NAME_run's own frame (the epilogue structs of its blocks, saved
 * registers): 136 to 160 bytes on the test models, and the caller's. */
enum { RUN_FRAME_BYTES = 192 };

/* Index of name in the table (functions first, then the library), or -1. */
static int cost_find(const CgCostTable *t, const char *name)
{
    int lo = 0, hi = t->num_functions - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(t->functions[mid].name, name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    lo = 0;
    hi = t->num_library - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(t->library[mid].name, name);
        if (c == 0)
            return t->num_functions + mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static const CgCostFunction *cost_at(const CgCostTable *t, int i)
{
    return i < t->num_functions ? &t->functions[i] : &t->library[i - t->num_functions];
}

/* The k-th function that entry i calls. */
static const char *callee(const CgCostTable *t, int i, int k)
{
    const CgCostFunction *f = cost_at(t, i);
    return (i < t->num_functions ? t->callees : t->library_callees)[f->first_callee + k];
}

/* Marks i and what it calls in reached; adds the newly reached functions'
 * bytes. */
static void reach(const CgCostTable *t, int i, bool *reached, size_t *code, size_t *ram)
{
    if (reached[i])
        return;
    reached[i] = true;
    const CgCostFunction *f = cost_at(t, i);
    *code += (size_t)f->code_bytes;
    *ram += (size_t)f->ram_bytes;
    for (int k = 0; k < f->num_callees; k++) {
        int j = cost_find(t, callee(t, i, k));
        if (j >= 0)
            reach(t, j, reached, code, ram);
    }
}

/* The deepest chain of frames from i; depth[] memoizes (-1: not yet, -2:
 * on the current path, a recursion: counted once). */
static size_t deepest(const CgCostTable *t, int i, long *depth)
{
    if (depth[i] >= 0)
        return (size_t)depth[i];
    if (depth[i] == -2)
        return 0;
    depth[i] = -2;
    const CgCostFunction *f = cost_at(t, i);
    size_t below = 0;
    for (int k = 0; k < f->num_callees; k++) {
        int j = cost_find(t, callee(t, i, k));
        size_t d = j >= 0 ? deepest(t, j, depth) : 0;
        below = d > below ? d : below;
    }
    depth[i] = (long)(below + (size_t)f->stack_bytes);
    return (size_t)depth[i];
}

/* Calls each function named in a step's list ("a b c "). */
typedef void (*EachCall)(const CgCostTable *t, int i, void *ctx);
static void each_call(const CgCostTable *t, const char *calls, EachCall fn, void *ctx)
{
    for (const char *p = calls ? calls : ""; *p;) {
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[128];
        if (len < sizeof name) {
            memcpy(name, p, len);
            name[len] = '\0';
            int i = cost_find(t, name);
            if (i >= 0)
                fn(t, i, ctx);
        }
        p += len + (end != NULL);
    }
}

typedef struct Walk {
    bool *reached;
    long *depth;
    size_t code, ram, stack;
} Walk;

static void walk_reach(const CgCostTable *t, int i, void *ctx)
{
    Walk *w = ctx;
    reach(t, i, w->reached, &w->code, &w->ram);
}

static void walk_depth(const CgCostTable *t, int i, void *ctx)
{
    Walk *w = ctx;
    size_t d = deepest(t, i, w->depth);
    w->stack = d > w->stack ? d : w->stack;
}

FxStatus cg_firmware_report(const Graph *g, const CgPlan *p, FxTarget target, CgFirmware *f,
                            Diag *d)
{
    memset(f, 0, sizeof *f);
    const CgCostTable *t = target == FX_TARGET_CORTEX_M ? &cg_costs_small : &cg_costs_portable;
    size_t count = (size_t)t->num_functions + (size_t)t->num_library;
    bool *all = fx_alloc_array(count + 1, sizeof *all);
    bool *mine = fx_alloc_array(count + 1, sizeof *mine);
    long *depth = fx_alloc_array(count + 1, sizeof *depth);
    f->layers = fx_alloc_array((size_t)p->num_steps + 1, sizeof *f->layers);
    CgMemory m;
    FxStatus st = all && mine && depth && f->layers ? cg_plan_memory(p, &m, d)
                                                   : diag_error(d, FX_ERR_NOMEM, "out of memory");
    if (st != FX_OK) {
        free(all);
        free(mine);
        free(depth);
        cg_firmware_free(f);
        return st;
    }
    for (size_t i = 0; i < count; i++)
        depth[i] = -1;
    Walk total = {.reached = all, .depth = depth};
    int steps_with_code = 0;
    for (int s = 0; s < p->num_steps; s++) {
        const char *calls = p->step_calls ? p->step_calls[s] : NULL;
        if (!calls)
            continue;
        steps_with_code++;
        memset(mine, 0, count * sizeof *mine);
        Walk layer = {.reached = mine, .depth = depth};
        each_call(t, calls, walk_reach, &layer);
        each_call(t, calls, walk_depth, &layer);
        each_call(t, calls, walk_reach, &total);
        CgFirmwareLayer *l = &f->layers[f->num_layers++];
        const Node *n = p->order[s];
        l->node = n;
        l->cname = p->node_values[s] ? p->node_values[s]->cname : n->name;
        l->code_bytes = layer.code;
        l->stack_bytes = layer.stack;
        l->scratch_bytes = p->node_scratch[s] ? p->node_scratch[s]->bytes : 0;
        for (int k = 0; k < m.num_layers; k++)
            if (m.layers[k].node == n)
                l->weight_bytes = m.layers[k].bytes;
        total.stack = layer.stack > total.stack ? layer.stack : total.stack;
    }
    if (p->num_copies)
        each_call(t, "memcpy", walk_reach, &total);
    f->run_code_bytes = RUN_CODE_BASE + (size_t)steps_with_code * RUN_CODE_PER_STEP;
    f->code_bytes = total.code + f->run_code_bytes;
    f->library_ram_bytes = total.ram;
    f->weight_bytes = m.weight_bytes;
    f->arena_bytes = m.arena_bytes;
    f->scratch_bytes = m.scratch_bytes;
    f->stack_bytes = RUN_FRAME_BYTES + total.stack;
    const Node *out = graph_output_node(g);
    for (int k = 0; out && k < out->num_args; k++)
        f->outputs_bytes += type_nbytes(node_input_type(out, k));
    f->flash_bytes = f->code_bytes + f->weight_bytes;
    f->ram_bytes = f->arena_bytes + f->library_ram_bytes + f->outputs_bytes;
    cg_memory_free(&m);
    free(all);
    free(mine);
    free(depth);
    return FX_OK;
}

void cg_firmware_free(CgFirmware *f)
{
    free(f->layers);
    f->layers = NULL;
    f->num_layers = 0;
}

void cg_firmware_print(const CgFirmware *f, FILE *out)
{
    fprintf(out, "\nfirmware estimate per layer (Cortex-M4F; code: the functions it calls, "
                 "shared ones in each):\n");
    fprintf(out, "%-32s %-18s %9s %9s %9s %7s\n", "node", "op", "weights", "code", "scratch",
            "stack");
    for (int i = 0; i < f->num_layers; i++) {
        const CgFirmwareLayer *l = &f->layers[i];
        const Node *n = l->node;
        fprintf(out, "%-32s %-18s %9zu %9zu %9zu %7zu\n", l->cname,
                n->op ? n->op->name : fx_opcode_name(n->opcode), l->weight_bytes, l->code_bytes,
                l->scratch_bytes, l->stack_bytes);
    }
    fprintf(out, "flash: %zu bytes = code %zu (runtime and library %zu, the run function about "
                 "%zu) + weights %zu\n",
            f->flash_bytes, f->code_bytes, f->code_bytes - f->run_code_bytes, f->run_code_bytes,
            f->weight_bytes);
    fprintf(out, "RAM:   %zu bytes = arena %zu (largest scratch %zu) + library data %zu + "
                 "output buffers %zu\n",
            f->ram_bytes, f->arena_bytes, f->scratch_bytes, f->library_ram_bytes, f->outputs_bytes);
    fprintf(out, "stack: %zu bytes (the run's frame about %d, the deepest layer's calls %zu)\n",
            f->stack_bytes, (int)RUN_FRAME_BYTES, f->stack_bytes - RUN_FRAME_BYTES);
}

/* s as a JSON string (names are C identifiers; the model's base name may
 * hold anything). */
static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

FxStatus cg_firmware_write_json(const CgFirmware *f, const char *model, const char *name,
                                FxTarget target, const char *path, Diag *d)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out)
        return diag_error(d, FX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    const char *base = strrchr(model, '/');
    fprintf(out, "{\n  \"model\": ");
    json_string(out, base ? base + 1 : model);
    fprintf(out, ",\n  \"name\": ");
    json_string(out, name);
    fprintf(out, ",\n  \"target\": \"%s\",\n  \"core\": \"cortex-m4f\",\n",
            target == FX_TARGET_CORTEX_M ? "cortex-m" : "portable");
    fprintf(out, "  \"flash\": {\"total\": %zu, \"code\": %zu, \"run_code\": %zu, \"weights\": %zu},\n",
            f->flash_bytes, f->code_bytes, f->run_code_bytes, f->weight_bytes);
    fprintf(out, "  \"ram\": {\"total\": %zu, \"arena\": %zu, \"scratch\": %zu, \"library\": %zu, "
                 "\"outputs\": %zu, \"stack\": %zu},\n",
            f->ram_bytes, f->arena_bytes, f->scratch_bytes, f->library_ram_bytes, f->outputs_bytes,
            f->stack_bytes);
    fprintf(out, "  \"layers\": [");
    for (int i = 0; i < f->num_layers; i++) {
        const CgFirmwareLayer *l = &f->layers[i];
        fprintf(out, "%s\n    {\"node\": ", i ? "," : "");
        json_string(out, l->cname);
        fprintf(out, ", \"op\": ");
        json_string(out, l->node->op ? l->node->op->name : fx_opcode_name(l->node->opcode));
        fprintf(out, ", \"weights\": %zu, \"code\": %zu, \"scratch\": %zu, \"stack\": %zu}",
                l->weight_bytes, l->code_bytes, l->scratch_bytes, l->stack_bytes);
    }
    fprintf(out, "%s]\n}\n", f->num_layers ? "\n  " : "");
    bool failed = ferror(out) != 0;
    if (fclose(out) != 0 || failed || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return diag_error(d, FX_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    return FX_OK;
}
