/*
 * check_opt_seed.c - the acceptance case: the seed model,
 * linear(x + param).clamp(0, 1), is one fused node after -O2 (the Add folded
 * into the Gemm's bias, the clamp fused into its epilogue; on the host its
 * weights packed at compile time, a GemmPacked, in the portable pipeline a
 * FusedGemm), and that node still gives ONNX Runtime's numbers in the
 * interpreter and compiled for both targets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "opt_check_util.h"

static Tensor *read_tensor(const char *path)
{
    Tensor *t = NULL;
    FxStatus st = tensor_file_read(path, &t, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    return t;
}

START_TEST(test_seed_is_one_fused_node)
{
    Graph *g = tu_load_model("examples/seed.onnx");
    Graph *reference = graph_clone(g, &tu_diag);
    ck_assert_ptr_nonnull(reference);
    /* check: the pass manager compares the interpreter after every pass. */
    PassOptions po = {.check = true};
    FxStatus st = opt_run_level(g, 2, &po, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);

    ck_assert_int_eq(tu_count_calls(g), 1);
    ck_assert_int_eq(tu_count_op(g, "GemmPacked"), 1);
    tu_assert_golden(g, "seed", "O2");

    Graph *portable = graph_clone(reference, &tu_diag);
    ck_assert_ptr_nonnull(portable);
    PassOptions portable_po = {.check = true, .portable = true};
    ck_assert_int_eq(opt_run_level(portable, 2, &portable_po, &tu_diag), FX_OK);
    ck_assert_int_eq(tu_count_calls(portable), 1);
    ck_assert_int_eq(tu_count_op(portable, "FusedGemm"), 1);
    tu_assert_golden(portable, "seed", "O2_portable");
    graph_free(portable);

    Tensor *x = read_tensor(FXCC_SOURCE_DIR "/examples/seed_input.npy");
    Tensor *want = read_tensor(FXCC_SOURCE_DIR "/examples/seed_expected.npy");
    Tensor *got = NULL;
    const Tensor *in[1] = {x};
    ck_assert_int_eq(interp_run(g, in, 1, &got, 1, NULL, NULL, &tu_diag), FX_OK);
    CompareResult c = tensor_compare(got, want, 1e-5, 1e-6);
    ck_assert_msg(c.ok, "fused seed differs from ONNX Runtime: max abs %g", c.max_abs);

    const FxTarget targets[2] = {FX_TARGET_HOST, FX_TARGET_PORTABLE};
    for (int k = 0; k < 2; k++) {
        char dir[256];
        snprintf(dir, sizeof dir, "/tmp/fxcc_seed_%d_%ld", k, (long)getpid());
        CgVerifyOptions vo = {.cg = {.name = "seed", .target = targets[k]},
                              .build = {.target = targets[k]},
                              .rtol = 1e-5, .atol = 1e-6, .keep_dir = dir};
        FILE *report = fopen("/dev/null", "w");
        st = cg_verify(g, reference, &x, 1, &vo, report, &tu_diag);
        fclose(report);
        if (st != FX_OK)
            diag_print(&tu_diag, stderr);
        ck_assert_msg(st == FX_OK, "compiled fused seed differs from the unoptimized interpreter");
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    tensor_free(x);
    tensor_free(want);
    tensor_free(got);
    graph_free(g);
    graph_free(reference);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_seed");
    TCase *t = tcase_create("seed");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_seed_is_one_fused_node);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
