/*
 * verify.c - `fxcc verify`: compile a model, build it with the system C
 * compiler, run it and the interpreter on the same inputs, and compare every
 * output with a tolerance.  With per_node, every intermediate value is made
 * an extra output of both, so the first node whose compiled value differs
 * from the interpreter's is named: the usual way to find a wrong kernel.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../frontend/frontend.h"
#include "codegen.h"

static bool is_computed(const Node *n)
{
    return (n->opcode == FX_OPCODE_CALL_FUNCTION || n->opcode == FX_OPCODE_CALL_METHOD ||
            n->opcode == FX_OPCODE_CALL_MODULE) &&
           n->num_outputs == 1; /* multi-output nodes are read through their getitems */
}

/* Output names for the values appended after the first `before` outputs:
 * the names of their nodes. */
static bool name_new_outputs(Graph *g, int before)
{
    Node *out = graph_output_node(g);
    const char **names = arena_alloc(&g->arena, (size_t)(out->num_args + 1) * sizeof *names);
    if (!names)
        return false;
    for (int k = 0; k < out->num_args; k++)
        names[k] = k < before && out->onnx_outputs ? out->onnx_outputs[k] : out->args[k]->name;
    out->onnx_outputs = names;
    return true;
}

int cg_expose_values(Graph *g, Graph *mirror)
{
    Node *out = graph_output_node(g);
    Node *mirror_out = mirror ? graph_output_node(mirror) : NULL;
    int before = out->num_args, mirror_before = mirror_out ? mirror_out->num_args : 0, added = 0;
    for (Node *n = g->root.next; n != out; n = n->next) {
        if (!is_computed(n))
            continue;
        if (mirror) {
            Node *m = graph_find(mirror, n->name);
            if (!m || !is_computed(m) || !type_equal(&m->out_types[0], &n->out_types[0]))
                continue;
            if (node_append_arg(mirror_out, m) < 0)
                return -1;
        }
        if (node_append_arg(out, n) < 0)
            return -1;
        added++;
    }
    if (!name_new_outputs(g, before) || (mirror && !name_new_outputs(mirror, mirror_before)))
        return -1;
    return added;
}

static FxStatus make_temp_dir(char *buf, size_t cap, Diag *d)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, cap, "%s/fxcc-verify-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(buf))
        return diag_error(d, FX_ERR_IO, "cannot create a temporary folder: %s", strerror(errno));
    return FX_OK;
}

static void remove_dir_files(const char *dir, const char *sub)
{
    char cmd_dir[4300];
    snprintf(cmd_dir, sizeof cmd_dir, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
    char *argv[] = {"rm", "-rf", cmd_dir, NULL};
    cg_spawn(argv, NULL, NULL);
}

FxStatus cg_verify(Graph *g, Graph *reference, Tensor **inputs, int num_inputs,
                   const CgVerifyOptions *vo, FILE *report, Diag *d)
{
    if (!reference)
        reference = g;
    char dir[4096];
    FxStatus st;
    if (vo->keep_dir) {
        snprintf(dir, sizeof dir, "%s", vo->keep_dir);
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return diag_error(d, FX_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    } else if ((st = make_temp_dir(dir, sizeof dir, d)) != FX_OK) {
        return st;
    }
    int first_extra = graph_num_outputs(g);
    bool exposed = !vo->per_node || cg_expose_values(g, reference == g ? NULL : reference) >= 0;
    int num_out = graph_num_outputs(g);
    Tensor **want = fx_alloc_array((size_t)num_out + 1, sizeof *want);
    Tensor **got = fx_alloc_array((size_t)num_out + 1, sizeof *got);
    char **paths = fx_alloc_array((size_t)num_inputs + 1, sizeof *paths);
    if (!exposed || !want || !got || !paths) {
        st = diag_error(d, FX_ERR_NOMEM, "out of memory");
        goto done;
    }
    CgOptions co = vo->cg;
    co.emit_main = true;
    char model_dir[4200], out_dir[4200];
    snprintf(model_dir, sizeof model_dir, "%s/model", dir);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    if ((st = cg_compile(g, &co, model_dir, NULL, d)) != FX_OK)
        goto done;
    for (int k = 0; k < num_inputs; k++) {
        paths[k] = fx_malloc(4300);
        if (!paths[k]) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            goto done;
        }
        snprintf(paths[k], 4300, "%s/input_%d.npy", dir, k);
        if ((st = tensor_file_write(paths[k], inputs[k], d)) != FX_OK)
            goto done;
    }
    if ((st = cg_build_main(model_dir, &vo->build, d)) != FX_OK)
        goto done;
    mkdir(out_dir, 0777);
    if ((st = cg_run_main(model_dir, (const char *const *)paths, num_inputs, out_dir, d)) != FX_OK)
        goto done;
    if ((st = interp_run(reference, (const Tensor *const *)inputs, num_inputs, want, num_out, NULL, NULL,
                         d)) != FX_OK)
        goto done;
    Node *out = graph_output_node(g);
    bool all_ok = true;
    for (int k = 0; k < num_out; k++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/output_%d.npy", out_dir, k);
        if ((st = tensor_file_read(path, &got[k], d)) != FX_OK)
            goto done;
        CompareResult c =
            tensor_compare(got[k], want[k], vo->rtol, tensor_scaled_atol(want[k], vo->atol));
        const Node *src = out->args[k];
        if (k < first_extra)
            fprintf(report, "output %d (%s): max abs error %.3g, max rel error %.3g%s\n", k,
                    out->onnx_outputs && out->onnx_outputs[k] ? out->onnx_outputs[k] : src->name,
                    c.max_abs, c.max_rel, c.ok ? "" : "  MISMATCH");
        if (!c.ok && all_ok && k >= first_extra)
            fprintf(report, "first diverging node: %s (max abs error %.3g, max rel error %.3g)\n",
                    src->name, c.max_abs, c.max_rel);
        all_ok &= c.ok;
    }
    if (vo->per_node && all_ok)
        fprintf(report, "all %d intermediate values agree\n", num_out - first_extra);
    if (!all_ok)
        st = diag_error(d, FX_ERR_RUNTIME,
                        "the compiled model differs from the interpreter beyond rtol %g, atol %g "
                        "(times the largest reference magnitude when above 1)",
                        vo->rtol, vo->atol);
done:
    for (int k = 0; k < num_out && want; k++) {
        tensor_free(want[k]);
        tensor_free(got ? got[k] : NULL);
    }
    for (int k = 0; k < num_inputs && paths; k++)
        free(paths[k]);
    free(want);
    free(got);
    free(paths);
    if (!vo->keep_dir && st == FX_OK)
        remove_dir_files(dir, NULL);
    else if (!vo->keep_dir)
        fprintf(report, "build folder kept for inspection: %s\n", dir);
    return st;
}
