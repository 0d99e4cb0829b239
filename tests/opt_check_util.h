/*
 * opt_check_util.h - what every check_opt_*.c suite needs: small graphs built
 * inline, golden files of the printed graph, and the before/after check of a
 * pass (the interpreter's outputs allclose, the graph linted).
 */
#ifndef FXCC_OPT_CHECK_UTIL_H
#define FXCC_OPT_CHECK_UTIL_H

#include <check.h>

#include "codegen/codegen.h"
#include "opt/opt.h"

/* The suites' diagnostics; tu_setup/tu_teardown are Check fixtures. */
extern Diag tu_diag;
void tu_setup(void);
void tu_teardown(void);

/* A placeholder of the given type. */
Node *tu_input(Graph *g, const char *name, DType dtype, int rank, const int64_t *dims);
/* A get_attr node owning value (typed like it). */
Node *tu_constant(Graph *g, const char *name, Tensor *value);
/* A float32 scalar constant. */
Node *tu_scalar(Graph *g, const char *name, float value);
/* A float32 constant filled with scale * ((i * 7) % 11 - 5): small,
 * deterministic, with both signs and zeros. */
Node *tu_weights(Graph *g, const char *name, int rank, const int64_t *dims, float scale);
/* tu_input and tu_weights of type float32 with the dims written out: the
 * first `rank` of d0..d3 count. */
Node *tu_input_f32(Graph *g, const char *name, int rank, int64_t d0, int64_t d1, int64_t d2,
                   int64_t d3);
Node *tu_weights_f32(Graph *g, const char *name, int rank, int64_t d0, int64_t d1, int64_t d2,
                     int64_t d3, float scale);
/* A 1-D int64 constant holding v[0..count) (axes, shapes, pads). */
Node *tu_ints(Graph *g, const char *name, const int64_t *v, int64_t count);
/* A model loaded, frozen, shaped and linted by the pipeline, no passes
 * (FXCC_SOURCE_DIR-relative path); fails the test on error. */
Graph *tu_load_model(const char *relative_path);
/* The printer's text of g (malloc'd). */
char *tu_print(const Graph *g);
/* A call node of ONNX op (or module kind) `op_name` at the end of g, its
 * attribute defaults filled and its types inferred; fails the test if it
 * cannot be made. */
Node *tu_op(Graph *g, const char *op_name, Node *const *args, int num_args);
/* tu_op with up to three arguments; trailing NULLs are not passed (a NULL
 * before a non-NULL argument is an omitted optional input). */
Node *tu_op3(Graph *g, const char *op_name, Node *a, Node *b, Node *c);
/* A 2-D Conv of x by w (b may be NULL) with `pad` on every side, stride and
 * group. */
Node *tu_conv(Graph *g, Node *x, Node *w, Node *b, int64_t pad, int64_t stride, int64_t group);
/* Re-infers n's types after the test changed its attributes. */
void tu_reinfer(Node *n);
/* The output node returning results, then shape propagation. */
void tu_finish(Graph *g, Node *const *results, int count);

/* Number of nodes of op `op_name` (call nodes only). */
int tu_count_op(const Graph *g, const char *op_name);
/* Number of call_function / call_method / call_module nodes. */
int tu_count_calls(const Graph *g);

/* The whole file, NUL-terminated; fails the test if it cannot be read. */
char *tu_slurp(const char *path);
/* The printed graph must equal tests/golden/opt/DIR/NAME.txt; with
 * FXCC_UPDATE_GOLDEN set in the environment the file is rewritten first
 * (review the diff before committing it). */
void tu_assert_golden(const Graph *g, const char *dir, const char *name);

/* Runs `pass` on g with fixed random inputs: the interpreter's outputs before
 * and after must be allclose (rtol, atol), shapes must propagate and the
 * graph (and every module body) must lint.  Returns the pass's change count. */
int tu_run_pass(Graph *g, PassFn pass, double rtol, double atol);

/* Compiles g for the host and the portable target, runs it on fixed random
 * inputs and asserts its outputs allclose to the interpreter running ref
 * (g itself when NULL), as `fxcc verify` does. */
void tu_assert_compiled_matches(Graph *g, Graph *ref, const char *name, double rtol,
                                double atol);
/* Runs the suite (CK_NORMAL) and returns main's exit status. */
int tu_main(Suite *s);

#endif
