/*
 * check_opt_rewrite.c - the text form (graph_parse) and subgraph rewriting
 * (replace_pattern).
 *
 * Parsing: printer output reads back to the same text (seed.onnx's printed
 * form and inline graphs with attributes, omitted inputs, views and a
 * multi-output op), and bad text fails with FX_ERR_INVALID and a message
 * naming line:column.  Rewriting: patterns and replacements written inline;
 * each case checks the replaced graph against a reviewed golden file under
 * tests/golden/opt/rewrite/, the MatchList contents and, when the rewrite
 * keeps the meaning, the interpreter's outputs before and after (allclose,
 * through tu_run_pass).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "opt_check_util.h"

/* --- helpers ---------------------------------------------------------------- */

static Tensor *scalar(float v)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 0};
    Tensor *x = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(x);
    *(float *)x->data = v;
    return x;
}

/* Constants the inline graphs refer to by target. */
typedef struct Constants {
    Tensor *one, *two, *zero, *w;
    NamedTensor list[4];
} Constants;

static Constants constants;

static void constants_setup(void)
{
    tu_setup();
    constants.one = scalar(1.0f);
    constants.two = scalar(2.0f);
    constants.zero = scalar(0.0f);
    TensorType wt = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}};
    constants.w = tensor_new(&wt, &tu_diag);
    ck_assert_ptr_nonnull(constants.w);
    for (int i = 0; i < 6; i++)
        ((float *)constants.w->data)[i] = 0.25f * (float)(i - 2);
    constants.list[0] = (NamedTensor){"one", constants.one};
    constants.list[1] = (NamedTensor){"two", constants.two};
    constants.list[2] = (NamedTensor){"zero", constants.zero};
    constants.list[3] = (NamedTensor){"w", constants.w};
}

static void constants_teardown(void)
{
    tensor_free(constants.one);
    tensor_free(constants.two);
    tensor_free(constants.zero);
    tensor_free(constants.w);
    tu_teardown();
}

static Graph *parse(const char *text)
{
    Graph *g = graph_parse(text, constants.list, 4, &tu_diag);
    if (!g)
        diag_print(&tu_diag, stderr);
    ck_assert_ptr_nonnull(g);
    return g;
}

/* The pattern, replacement and options tu_run_pass's pass applies (owned
 * here until the next case or the teardown). */
static struct {
    Graph *pattern, *replacement;
    RewriteOptions options;
    MatchList matches;
} rw;

static FxStatus rewrite_pass(Graph *g, PassResult *r, Diag *d)
{
    FxStatus st = replace_pattern(g, rw.pattern, rw.replacement, &rw.options, &rw.matches, d);
    r->changes = rw.matches.count;
    return st;
}

/* Applies the rewrite to the graph parsed from `text`, checking meaning
 * (when keeps_meaning) and the golden file; leaves the matches in rw. */
static Graph *rewrite(const char *text, const char *pattern, const char *replacement,
                      const RewriteOptions *o, bool keeps_meaning, const char *golden)
{
    Graph *g = parse(text);
    graph_free(rw.pattern);
    graph_free(rw.replacement);
    rw.pattern = parse(pattern);
    rw.replacement = parse(replacement);
    rw.options = o ? *o : (RewriteOptions){0};
    match_list_free(&rw.matches);
    if (keeps_meaning) {
        ck_assert_int_eq(tu_run_pass(g, rewrite_pass, 1e-6, 1e-6), rw.matches.count);
    } else {
        PassResult res = {0};
        FxStatus st = rewrite_pass(g, &res, &tu_diag);
        if (st != FX_OK)
            diag_print(&tu_diag, stderr);
        ck_assert_int_eq(st, FX_OK);
        ck_assert_int_eq(graph_lint(g, true, &tu_diag), FX_OK);
    }
    tu_assert_golden(g, "rewrite", golden);
    return g;
}

static const char *pattern_add_self = "%x : placeholder[target=x]\n"
                                      "%add : call_function[target=Add](args = (%x, %x))\n"
                                      "return (%add,)\n";
static const char *replacement_mul_two = "%x : placeholder[target=x]\n"
                                         "%two : get_attr[target=two]\n"
                                         "%mul : call_function[target=Mul](args = (%x, %two))\n"
                                         "return (%mul,)\n";

static const char *pattern_relu_add = "%a : placeholder[target=a]\n"
                                      "%b : placeholder[target=b]\n"
                                      "%add : call_function[target=Add](args = (%a, %b))\n"
                                      "%relu : call_function[target=Relu](args = (%add,))\n"
                                      "return (%relu,)\n";
/* relu(a + b) = max(a + b, 0) */
static const char *replacement_max = "%a : placeholder[target=a]\n"
                                     "%b : placeholder[target=b]\n"
                                     "%zero : get_attr[target=zero]\n"
                                     "%sum : call_function[target=Add](args = (%a, %b))\n"
                                     "%max : call_function[target=Max](args = (%sum, %zero))\n"
                                     "return (%max,)\n";

static const Node *match_node(const Match *m, const Graph *pattern, const char *name)
{
    const Node *pn = graph_find(pattern, name);
    ck_assert_ptr_nonnull(pn);
    ck_assert_int_lt(pn->id, m->num_nodes);
    return m->nodes[pn->id];
}

/* --- parsing ------------------------------------------------------------------ */

static void assert_round_trip(const char *text, const NamedTensor *c, int nc)
{
    Graph *g = graph_parse(text, c, nc, &tu_diag);
    if (!g)
        diag_print(&tu_diag, stderr);
    ck_assert_ptr_nonnull(g);
    char *again = tu_print(g);
    ck_assert_msg(strcmp(again, text) == 0, "round trip differs:\n%s\nwas:\n%s", again, text);
    ck_assert_int_eq(graph_lint(g, true, &tu_diag), FX_OK);
    free(again);
    graph_free(g);
}

START_TEST(test_parse_round_trip_seed)
{
    Graph *g = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/seed.onnx", FXCC_SOURCE_DIR);
    OnnxLoadOptions opt = {0};
    ck_assert_int_eq(onnx_load(path, &opt, &g, &tu_diag), FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(g, NULL, 0, &tu_diag), FX_OK);
    char *text = tu_print(g);
    snprintf(path, sizeof path, "%s/tests/golden/seed.txt", FXCC_SOURCE_DIR);
    char *golden = tu_slurp(path);
    ck_assert_str_eq(text, golden);
    NamedTensor c[16];
    int nc = 0;
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        if (n->opcode == FX_OPCODE_GET_ATTR && nc < 16)
            c[nc++] = (NamedTensor){n->target, n->value};
    assert_round_trip(text, c, nc);
    free(golden);
    free(text);
    graph_free(g);
}
END_TEST

START_TEST(test_parse_round_trip_inline)
{
    /* attributes of every kind, an omitted input, a view, a multi-output
     * op read through getitem */
    const char *text =
        "graph():\n"
        "    %x : [num_users=3] placeholder[target=x]  # float32[2, 3]\n"
        "    %w : [num_users=1] get_attr[target=w]  # float32[2, 3]\n"
        "    %lo : [num_users=1] get_attr[target=zero]  # float32[]\n"
        "    %add : [num_users=1] call_function[target=Add](args = (%x, %w), kwargs = {})  # float32[2, 3]\n"
        "    %clip : [num_users=1] call_function[target=Clip](args = (%add, %lo, None), kwargs = {})  # float32[2, 3]\n"
        "    %leaky : [num_users=1] call_function[target=LeakyRelu](args = (%clip,), kwargs = {alpha: 0.0099999998})  # float32[2, 3]\n"
        "    %t : [num_users=1] call_function[target=Transpose](args = (%x,), kwargs = {perm: [1, 0]})  # float32[3, 2]\n"
        "    %flat : [num_users=1] call_method[target=flatten](args = (%t,), kwargs = {axis: 1})  # float32[3, 2]\n"
        "    %split : [num_users=2] call_function[target=Split](args = (%x,), kwargs = {axis: 1})  # (float32[2, 1], float32[2, 1], float32[2, 1])\n"
        "    %s0 : [num_users=1] call_function[target=getitem](args = (%split, 0), kwargs = {})  # float32[2, 1]\n"
        "    %s2 : [num_users=1] call_function[target=getitem](args = (%split, 2), kwargs = {})  # float32[2, 1]\n"
        "    %sub : [num_users=1] call_function[target=Sub](args = (%s0, %s2), kwargs = {})  # float32[2, 1]\n"
        "    return (%leaky, %flat, %sub)\n";
    assert_round_trip(text, constants.list, 4);
}
END_TEST

START_TEST(test_parse_round_trip_goldens)
{
    /* this suite's own golden graphs read back to the same text; copies of
     * constants are named two_1, zero_1 */
    static const char *const names[] = {
        "add_self", "chained", "commutative_backtrack", "commutative_off", "commutative_on",
        "constant_value", "filter", "filter_overlap", "interior_used", "multi_output",
        "overlap", "relu_add", "type_change", "wildcard_constant"};
    NamedTensor c[6] = {constants.list[0], constants.list[1], constants.list[2],
                        constants.list[3], {"two_1", constants.two}, {"zero_1", constants.zero}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/golden/opt/rewrite/%s.txt", FXCC_SOURCE_DIR,
                 names[i]);
        char *text = tu_slurp(path);
        assert_round_trip(text, c, 6);
        free(text);
    }
}
END_TEST

START_TEST(test_parse_short_form)
{
    /* no header, no annotations, the placeholder's type after a colon,
     * kwargs omitted: defaults filled as at import */
    Graph *g = parse("%x : placeholder[target=x] : float32[1, 4]\n"
                     "%e : call_function[target=Elu](args = (%x,))\n"
                     "%l : call_function[target=LeakyRelu](args = (%e,), kwargs = {alpha: 1})\n"
                     "return %l\n");
    char *text = tu_print(g);
    ck_assert_str_eq(text,
                     "graph():\n"
                     "    %x : [num_users=1] placeholder[target=x]  # float32[1, 4]\n"
                     "    %e : [num_users=1] call_function[target=Elu](args = (%x,), kwargs = {alpha: 1.0})  # float32[1, 4]\n"
                     "    %l : [num_users=1] call_function[target=LeakyRelu](args = (%e,), kwargs = {alpha: 1.0})  # float32[1, 4]\n"
                     "    return (%l,)\n");
    free(text);
    graph_free(g);
}
END_TEST

START_TEST(test_parse_pattern_wildcard)
{
    /* no types and a constant nobody supplied: a pattern, not propagated */
    Graph *g = graph_parse("%x : placeholder[target=x]\n"
                           "%k : get_attr[target=k]\n"
                           "%m : call_function[target=Mul](args = (%x, %k))\n"
                           "return (%m,)\n",
                           NULL, 0, &tu_diag);
    ck_assert_ptr_nonnull(g);
    const Node *k = graph_find(g, "k");
    ck_assert_ptr_nonnull(k);
    ck_assert_ptr_null(k->value);
    ck_assert(!graph_find(g, "m")->shapes_known);
    char *text = tu_print(g);
    ck_assert_str_eq(text, "graph():\n"
                           "    %x : [num_users=1] placeholder[target=x]\n"
                           "    %k : [num_users=1] get_attr[target=k]\n"
                           "    %m : [num_users=1] call_function[target=Mul](args = (%x, %k), kwargs = {})\n"
                           "    return (%m,)\n");
    free(text);
    graph_free(g);
}
END_TEST

static const struct {
    const char *text, *message;
} bad_texts[] = {
    {"%x : placeholder[target=x]\n", "2:1: the graph has no return line"},
    {"%x : placeholder[target=x]\n%a : call_function[target=Relu](args = (%y,))\nreturn (%a,)\n",
     "2:41: '%y' is not defined on an earlier line"},
    {"%x : placeholder[target=x]\n%a : call_function[target=Frobnicate](args = (%x,))\nreturn (%a,)\n",
     "2:27: 'Frobnicate' is not a call_function target"},
    {"%x : placeholder[target=x]\n%a : call_function[target=Elu](args = (%x,), kwargs = {alpha: 'big'})\nreturn (%a,)\n",
     "2:63: attribute 'alpha' is a float"},
    {"%x : placeholder[target=x]\n%a : call_function[target=Elu](args = (%x,), kwargs = {beta: 1.0})\nreturn (%a,)\n",
     "2:56: Elu has no attribute 'beta'"},
    {"%x : placeholder[target=x]\n%x : placeholder[target=y]\nreturn (%x,)\n",
     "2:1: '%x' is defined twice"},
    {"%x : [num_users=2] placeholder[target=x]\nreturn (%x,)\n",
     "1:1: '%x' says num_users=2 but has 1"},
    {"%x : placeholder[target=x] : float33[2]\nreturn (%x,)\n",
     "1:30: 'float33' is not a supported element type"},
    {"%x : placeholder[target=x]\n%a : call_function[target=Add](args = (%x,))\nreturn (%a,)\n",
     "2:27: Add takes 2 to 2 arguments, not 1"},
    {"%x : placeholder[target=x]\n%a : call_function[target=Relu](args = (%x %x))\nreturn (%a,)\n",
     "2:44: expected ',' or ')' after an argument, found '%'"},
    {"%x : placeholder[target=x]\nreturn (%x,)\n%y : placeholder[target=y]\n",
     "3:1: text after the return line"},
    {"%x : placeholder[target=x\nreturn (%x,)\n", "1:25: unterminated target"},
    {"%x : placeholder[target=x] : float32[2, 3]\n%y : placeholder[target=y] : float32[4]\n"
     "%a : call_function[target=Add](args = (%x, %y))\nreturn (%a,)\n",
     "do not broadcast"},
    {"%x : placeholder[target=x]\n%m : call_module[target=fused.m](args = (%x,))\nreturn (%m,)\n",
     "2:6: call_module nodes cannot be parsed"},
    {"%x : placeholder[target=x]\n%a : call_function[target=Transpose](args = (%x,), kwargs = {perm: [1, 0.5]})\nreturn (%a,)\n",
     "2:72: attribute 'perm' is a list of ints"},
    {"%x : placeholder[target=x]\n\x01return (%x,)\n",
     "2:1: expected '%name : ...', 'return' or 'graph():', found byte 0x01"},
};

START_TEST(test_parse_errors)
{
    for (size_t i = 0; i < sizeof bad_texts / sizeof bad_texts[0]; i++) {
        diag_clear(&tu_diag);
        Graph *g = graph_parse(bad_texts[i].text, NULL, 0, &tu_diag);
        ck_assert_msg(g == NULL, "case %zu parsed", i);
        ck_assert_uint_ge(tu_diag.count, 1);
        bool named = false;
        for (size_t e = 0; e < tu_diag.count; e++)
            named |= strstr(tu_diag.entries[e].message, bad_texts[i].message) != NULL;
        ck_assert_msg(named, "case %zu: wanted \"%s\", got \"%s\"", i, bad_texts[i].message,
                      tu_diag.entries[0].message);
        ck_assert_msg(tu_diag.entries[0].status == FX_ERR_INVALID ||
                          tu_diag.entries[0].status == FX_ERR_SHAPE,
                      "case %zu: status %d", i, tu_diag.entries[0].status);
    }
}
END_TEST

/* --- rewriting ------------------------------------------------------------------ */

START_TEST(test_add_self_to_mul)
{
    /* Add(x, x) becomes Mul(x, 2); Add(x, y) does not match, the placeholder
     * used twice must bind the same node twice */
    Graph *g = rewrite("%x : placeholder[target=x] : float32[2, 3]\n"
                       "%y : placeholder[target=y] : float32[2, 3]\n"
                       "%twice : call_function[target=Add](args = (%x, %x))\n"
                       "%other : call_function[target=Add](args = (%x, %y))\n"
                       "%out : call_function[target=Sub](args = (%twice, %other))\n"
                       "return (%out,)\n",
                       pattern_add_self, replacement_mul_two, NULL, true, "add_self");
    ck_assert_int_eq(rw.matches.count, 1);
    const Match *m = &rw.matches.items[0];
    ck_assert_str_eq(m->anchor->name, "twice");
    ck_assert_int_eq(m->num_placeholders, 1);
    ck_assert_str_eq(m->placeholders[0]->name, "x");
    ck_assert_int_eq(m->num_replacements, 1);
    ck_assert_str_eq(m->replacements[0]->name, "mul");
    ck_assert_int_eq(tu_count_op(g, "Add"), 1);
    ck_assert_int_eq(tu_count_op(g, "Mul"), 1);
    graph_free(g);
}
END_TEST

START_TEST(test_chained_matches)
{
    /* the second match reads the first one's anchor: after the first
     * replacement it reads the replacement */
    Graph *g = rewrite("%x : placeholder[target=x] : float32[3]\n"
                       "%a : call_function[target=Add](args = (%x, %x))\n"
                       "%b : call_function[target=Add](args = (%a, %a))\n"
                       "return (%b,)\n",
                       pattern_add_self, replacement_mul_two, NULL, true, "chained");
    ck_assert_int_eq(rw.matches.count, 2);
    ck_assert_str_eq(rw.matches.items[1].placeholders[0]->name, "mul");
    ck_assert_int_eq(tu_count_op(g, "Add"), 0);
    graph_free(g);
}
END_TEST

START_TEST(test_two_node_pattern)
{
    /* Relu(Add(a, b)) twice; the MatchList maps every pattern node */
    Graph *g = rewrite("%x : placeholder[target=x] : float32[2, 3]\n"
                       "%w : get_attr[target=w]\n"
                       "%s1 : call_function[target=Add](args = (%x, %w))\n"
                       "%r1 : call_function[target=Relu](args = (%s1,))\n"
                       "%s2 : call_function[target=Add](args = (%r1, %x))\n"
                       "%r2 : call_function[target=Relu](args = (%s2,))\n"
                       "return (%r2,)\n",
                       pattern_relu_add, replacement_max, NULL, true, "relu_add");
    ck_assert_int_eq(rw.matches.count, 2);
    const Match *m0 = &rw.matches.items[0], *m1 = &rw.matches.items[1];
    ck_assert_str_eq(m0->anchor->name, "r1");
    ck_assert_str_eq(match_node(m0, rw.pattern, "add")->name, "s1");
    ck_assert_str_eq(match_node(m0, rw.pattern, "relu")->name, "r1");
    ck_assert_str_eq(m0->placeholders[0]->name, "x");
    ck_assert_str_eq(m0->placeholders[1]->name, "w");
    ck_assert_str_eq(m1->anchor->name, "r2");
    ck_assert_str_eq(m1->placeholders[0]->name, m0->replacements[0]->name);
    ck_assert_str_eq(m1->placeholders[1]->name, "x");
    ck_assert_ptr_null(m0->nodes[graph_output_node(rw.pattern)->id]);
    ck_assert_int_eq(tu_count_op(g, "Relu"), 0);
    ck_assert_int_eq(tu_count_op(g, "Max"), 2);
    graph_free(g);
}
END_TEST

START_TEST(test_interior_used_elsewhere)
{
    /* the Add is read by the Mul too: replacing would lose it */
    const char *text = "%x : placeholder[target=x] : float32[4]\n"
                       "%y : placeholder[target=y] : float32[4]\n"
                       "%s : call_function[target=Add](args = (%x, %y))\n"
                       "%r : call_function[target=Relu](args = (%s,))\n"
                       "%m : call_function[target=Mul](args = (%r, %s))\n"
                       "return (%m,)\n";
    Graph *before = parse(text);
    char *want = tu_print(before);
    Graph *g = rewrite(text, pattern_relu_add, replacement_max, NULL, true, "interior_used");
    ck_assert_int_eq(rw.matches.count, 0);
    char *got = tu_print(g);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);
    graph_free(before);
    graph_free(g);
}
END_TEST

static const char *relu_chain = "%x : placeholder[target=x] : float32[5]\n"
                                "%r1 : call_function[target=Relu](args = (%x,))\n"
                                "%r2 : call_function[target=Relu](args = (%r1,))\n"
                                "%r3 : call_function[target=Relu](args = (%r2,))\n"
                                "return (%r3,)\n";
static const char *pattern_relu_relu = "%x : placeholder[target=x]\n"
                                       "%inner : call_function[target=Relu](args = (%x,))\n"
                                       "%outer : call_function[target=Relu](args = (%inner,))\n"
                                       "return (%outer,)\n";
/* relu(relu(x)) = relu(x) */
static const char *replacement_relu = "%x : placeholder[target=x]\n"
                                      "%once : call_function[target=Relu](args = (%x,))\n"
                                      "return (%once,)\n";

START_TEST(test_overlapping)
{
    /* (r1, r2) and (r2, r3) share r2: only the first, by anchor order */
    Graph *g = rewrite(relu_chain, pattern_relu_relu, replacement_relu, NULL, true, "overlap");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_str_eq(rw.matches.items[0].anchor->name, "r2");
    ck_assert_int_eq(tu_count_op(g, "Relu"), 2);
    graph_free(g);
}
END_TEST

static bool refuse_anchor(const Match *m, const Graph *g, const Graph *pattern, void *user)
{
    (void)g;
    (void)pattern;
    return strcmp(m->anchor->name, (const char *)user) != 0;
}

START_TEST(test_filter)
{
    /* refusing (r1, r2) lets the overlapping (r2, r3) through */
    RewriteOptions o = {.filter = refuse_anchor, .user = "r2"};
    Graph *g = rewrite(relu_chain, pattern_relu_relu, replacement_relu, &o, true, "filter_overlap");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_str_eq(rw.matches.items[0].anchor->name, "r3");
    graph_free(g);

    /* refusing one of two independent matches */
    o.user = "d2";
    g = rewrite("%x : placeholder[target=x] : float32[3]\n"
                "%y : placeholder[target=y] : float32[3]\n"
                "%d1 : call_function[target=Add](args = (%x, %x))\n"
                "%d2 : call_function[target=Add](args = (%y, %y))\n"
                "%out : call_function[target=Div](args = (%d1, %d2))\n"
                "return (%out,)\n",
                pattern_add_self, replacement_mul_two, &o, true, "filter");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_str_eq(rw.matches.items[0].anchor->name, "d1");
    ck_assert_ptr_nonnull(graph_find(g, "d2"));
    graph_free(g);
}
END_TEST

static const char *swapped_relu_add = "%x : placeholder[target=x] : float32[2, 2]\n"
                                      "%y : placeholder[target=y] : float32[2, 2]\n"
                                      "%r : call_function[target=Relu](args = (%x,))\n"
                                      "%s : call_function[target=Add](args = (%y, %r))\n"
                                      "return (%s,)\n";
static const char *pattern_add_relu = "%a : placeholder[target=a]\n"
                                      "%b : placeholder[target=b]\n"
                                      "%r : call_function[target=Relu](args = (%a,))\n"
                                      "%s : call_function[target=Add](args = (%r, %b))\n"
                                      "return (%s,)\n";
/* relu(a) + b = b - (-relu(a)) */
static const char *replacement_sub_neg = "%a : placeholder[target=a]\n"
                                         "%b : placeholder[target=b]\n"
                                         "%r : call_function[target=Relu](args = (%a,))\n"
                                         "%n : call_function[target=Neg](args = (%r,))\n"
                                         "%d : call_function[target=Sub](args = (%b, %n))\n"
                                         "return (%d,)\n";

START_TEST(test_commutative)
{
    Graph *g = rewrite(swapped_relu_add, pattern_add_relu, replacement_sub_neg, NULL, true,
                       "commutative_off");
    ck_assert_int_eq(rw.matches.count, 0);
    graph_free(g);

    RewriteOptions o = {.commutative = true};
    g = rewrite(swapped_relu_add, pattern_add_relu, replacement_sub_neg, &o, true,
                "commutative_on");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_str_eq(rw.matches.items[0].placeholders[0]->name, "x");
    ck_assert_str_eq(rw.matches.items[0].placeholders[1]->name, "y");
    graph_free(g);
}
END_TEST

START_TEST(test_commutative_backtracks)
{
    /* Mul(Add(a, b), a) against Mul(Add(x, y), y): the unswapped Add binds
     * a = x, then the Mul's second operand fails; the search must go back
     * and swap the Add */
    const char *pattern = "%a : placeholder[target=a]\n"
                          "%b : placeholder[target=b]\n"
                          "%s : call_function[target=Add](args = (%a, %b))\n"
                          "%m : call_function[target=Mul](args = (%s, %a))\n"
                          "return (%m,)\n";
    /* (a + b) * a = a * a + a * b */
    const char *replacement = "%a : placeholder[target=a]\n"
                              "%b : placeholder[target=b]\n"
                              "%aa : call_function[target=Mul](args = (%a, %a))\n"
                              "%ab : call_function[target=Mul](args = (%a, %b))\n"
                              "%sum : call_function[target=Add](args = (%aa, %ab))\n"
                              "return (%sum,)\n";
    RewriteOptions o = {.commutative = true};
    Graph *g = rewrite("%x : placeholder[target=x] : float32[3]\n"
                       "%y : placeholder[target=y] : float32[3]\n"
                       "%s : call_function[target=Add](args = (%x, %y))\n"
                       "%m : call_function[target=Mul](args = (%s, %y))\n"
                       "return (%m,)\n",
                       pattern, replacement, &o, true, "commutative_backtrack");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_str_eq(rw.matches.items[0].placeholders[0]->name, "y");
    ck_assert_str_eq(rw.matches.items[0].placeholders[1]->name, "x");
    graph_free(g);
}
END_TEST

START_TEST(test_constant_by_value)
{
    /* Mul(x, 1.0) is x; Mul(x, 2.0) is left alone */
    const char *pattern = "%x : placeholder[target=x]\n"
                          "%one : get_attr[target=one]\n"
                          "%m : call_function[target=Mul](args = (%x, %one))\n"
                          "return (%m,)\n";
    Graph *g = rewrite("%x : placeholder[target=x] : float32[2, 3]\n"
                       "%one : get_attr[target=one]\n"
                       "%two : get_attr[target=two]\n"
                       "%m1 : call_function[target=Mul](args = (%x, %one))\n"
                       "%m2 : call_function[target=Mul](args = (%m1, %two))\n"
                       "return (%m2,)\n",
                       pattern, "%x : placeholder[target=x]\nreturn (%x,)\n", NULL, true,
                       "constant_value");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_str_eq(rw.matches.items[0].anchor->name, "m1");
    ck_assert_str_eq(rw.matches.items[0].replacements[0]->name, "x");
    ck_assert_ptr_null(graph_find(g, "one")); /* dead after the rewrite: erased */
    ck_assert_int_eq(tu_count_op(g, "Mul"), 1);
    graph_free(g);
}
END_TEST

START_TEST(test_wildcard_constant)
{
    /* a constant of the pattern without a value matches any constant, but
     * not a placeholder; the replacement here changes the meaning */
    Graph *pattern = graph_parse("%x : placeholder[target=x]\n"
                                 "%k : get_attr[target=k]\n"
                                 "%m : call_function[target=Mul](args = (%x, %k))\n"
                                 "return (%m,)\n",
                                 NULL, 0, &tu_diag);
    ck_assert_ptr_nonnull(pattern);
    char *pattern_text = tu_print(pattern);
    Graph *g = rewrite("%x : placeholder[target=x] : float32[2, 3]\n"
                       "%y : placeholder[target=y] : float32[2, 3]\n"
                       "%w : get_attr[target=w]\n"
                       "%m1 : call_function[target=Mul](args = (%x, %w))\n"
                       "%m2 : call_function[target=Mul](args = (%m1, %y))\n"
                       "return (%m2,)\n",
                       pattern_text, "%x : placeholder[target=x]\nreturn (%x,)\n", NULL, false,
                       "wildcard_constant");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_str_eq(rw.matches.items[0].anchor->name, "m1");
    ck_assert_str_eq(match_node(&rw.matches.items[0], rw.pattern, "k")->name, "w");
    free(pattern_text);
    graph_free(pattern);
    graph_free(g);
}
END_TEST

START_TEST(test_type_change_skipped)
{
    /* Mul(x, k) -> x holds for m1 (k = 1.0, a scalar) but would turn m2's
     * float32[2, 3] into y's float32[3]: m2 is skipped */
    Graph *g = rewrite("%x : placeholder[target=x] : float32[2, 3]\n"
                       "%y : placeholder[target=y] : float32[3]\n"
                       "%one : get_attr[target=one]\n"
                       "%w : get_attr[target=w]\n"
                       "%m1 : call_function[target=Mul](args = (%x, %one))\n"
                       "%m2 : call_function[target=Mul](args = (%y, %w))\n"
                       "%s : call_function[target=Add](args = (%m1, %m2))\n"
                       "return (%s,)\n",
                       "%x : placeholder[target=x]\n%k : get_attr[target=k]\n"
                       "%m : call_function[target=Mul](args = (%x, %k))\nreturn (%m,)\n",
                       "%x : placeholder[target=x]\nreturn (%x,)\n", NULL, true, "type_change");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_str_eq(rw.matches.items[0].anchor->name, "m1");
    ck_assert_ptr_nonnull(graph_find(g, "m2"));
    graph_free(g);
}
END_TEST

START_TEST(test_multi_output_pattern)
{
    /* the pattern returns the Relu and the Add inside it; the Add is read
     * outside, through the second returned value */
    const char *pattern = "%a : placeholder[target=a]\n"
                          "%b : placeholder[target=b]\n"
                          "%s : call_function[target=Add](args = (%a, %b))\n"
                          "%r : call_function[target=Relu](args = (%s,))\n"
                          "return (%r, %s)\n";
    const char *replacement = "%a : placeholder[target=a]\n"
                              "%b : placeholder[target=b]\n"
                              "%zero : get_attr[target=zero]\n"
                              "%sum : call_function[target=Add](args = (%a, %b))\n"
                              "%max : call_function[target=Max](args = (%sum, %zero))\n"
                              "return (%max, %sum)\n";
    Graph *g = rewrite("%x : placeholder[target=x] : float32[4]\n"
                       "%y : placeholder[target=y] : float32[4]\n"
                       "%s : call_function[target=Add](args = (%x, %y))\n"
                       "%early : call_function[target=Neg](args = (%s,))\n"
                       "%r : call_function[target=Relu](args = (%s,))\n"
                       "%m : call_function[target=Mul](args = (%r, %early))\n"
                       "return (%m,)\n",
                       pattern, replacement, NULL, true, "multi_output");
    ck_assert_int_eq(rw.matches.count, 1);
    ck_assert_int_eq(rw.matches.items[0].num_replacements, 2);
    ck_assert_str_eq(rw.matches.items[0].replacements[1]->name, "sum");
    graph_free(g);
}
END_TEST

START_TEST(test_bad_pattern)
{
    Graph *p = parse(pattern_add_self);
    Graph *r = parse("%a : placeholder[target=a]\n%b : placeholder[target=b]\n"
                     "%s : call_function[target=Add](args = (%a, %b))\nreturn (%s,)\n");
    Graph *g = parse(relu_chain);
    MatchList l;
    ck_assert_int_eq(replace_pattern(g, p, r, NULL, &l, &tu_diag), FX_ERR_INVALID);
    ck_assert_int_eq(l.count, 0);
    ck_assert_ptr_nonnull(strstr(tu_diag.entries[0].message, "placeholders"));
    graph_free(p);
    graph_free(r);
    graph_free(g);
}
END_TEST

/* A full binary tree of Adds, `depth` levels, over leaves[0..2^depth). */
static char *add_tree(const char *header, const char *const *leaves, int depth)
{
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    len += (size_t)snprintf(text + len, cap - len, "%s", header);
    int width = 1 << depth, id = 0;
    char names[64][16];
    for (int i = 0; i < width; i++)
        snprintf(names[i], sizeof names[i], "%s", leaves[i]);
    for (; width > 1; width /= 2)
        for (int i = 0; i < width / 2; i++) {
            char name[16];
            snprintf(name, sizeof name, "t%d", id++);
            len += (size_t)snprintf(text + len, cap - len,
                                    "%%%s : call_function[target=Add](args = (%%%s, %%%s))\n",
                                    name, names[2 * i], names[2 * i + 1]);
            snprintf(names[i], sizeof names[i], "%s", name);
        }
    snprintf(text + len, cap - len, "return (%%%s,)\n", names[0]);
    return text;
}

START_TEST(test_commutative_budget)
{
    /* every ordering of 31 commutative Adds is tried before the last leaf
     * fails: the search gives up with an error instead of hanging */
    const char *a[32], *xy[32];
    for (int i = 0; i < 32; i++) {
        a[i] = "a";
        xy[i] = i == 31 ? "y" : "x";
    }
    char *pattern = add_tree("%a : placeholder[target=a]\n", a, 5);
    char *text = add_tree("%x : placeholder[target=x] : float32[2]\n"
                          "%y : placeholder[target=y] : float32[2]\n", xy, 5);
    Graph *p = parse(pattern), *g = parse(text);
    RewriteOptions o = {.commutative = true};
    MatchList l;
    ck_assert_int_eq(replace_pattern(g, p, p, &o, &l, &tu_diag), FX_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tu_diag.entries[0].message, "steps"));
    ck_assert_int_eq(tu_count_op(g, "Add"), 31);
    o.commutative = false;
    ck_assert_int_eq(replace_pattern(g, p, p, &o, &l, &tu_diag), FX_OK);
    ck_assert_int_eq(l.count, 0);
    match_list_free(&l);
    graph_free(p);
    graph_free(g);
    free(pattern);
    free(text);
}
END_TEST

static void rw_teardown(void)
{
    match_list_free(&rw.matches);
    graph_free(rw.pattern);
    graph_free(rw.replacement);
    rw.pattern = rw.replacement = NULL;
    constants_teardown();
}

static Suite *suite(void)
{
    Suite *s = suite_create("opt_rewrite");
    TCase *t = tcase_create("parse");
    tcase_add_checked_fixture(t, constants_setup, constants_teardown);
    tcase_add_test(t, test_parse_round_trip_seed);
    tcase_add_test(t, test_parse_round_trip_inline);
    tcase_add_test(t, test_parse_round_trip_goldens);
    tcase_add_test(t, test_parse_short_form);
    tcase_add_test(t, test_parse_pattern_wildcard);
    tcase_add_test(t, test_parse_errors);
    suite_add_tcase(s, t);
    t = tcase_create("rewrite");
    tcase_add_checked_fixture(t, constants_setup, rw_teardown);
    tcase_add_test(t, test_add_self_to_mul);
    tcase_add_test(t, test_chained_matches);
    tcase_add_test(t, test_two_node_pattern);
    tcase_add_test(t, test_interior_used_elsewhere);
    tcase_add_test(t, test_overlapping);
    tcase_add_test(t, test_filter);
    tcase_add_test(t, test_commutative);
    tcase_add_test(t, test_commutative_backtracks);
    tcase_add_test(t, test_commutative_budget);
    tcase_add_test(t, test_constant_by_value);
    tcase_add_test(t, test_wildcard_constant);
    tcase_add_test(t, test_type_change_skipped);
    tcase_add_test(t, test_multi_output_pattern);
    tcase_add_test(t, test_bad_pattern);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
