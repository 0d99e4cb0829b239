/*
 * fuzz_graph_parse.c - libFuzzer target for the text form (opt/graph_parse.c)
 * and the subgraph rewriter built on it (opt/rewrite.c).
 *
 * The input is graph text.  Rejection is fine; what must hold otherwise:
 *   - printing the parsed graph and parsing that again gives the same text
 *     (the printer's output always reads back, and reads back the same);
 *   - a parsed graph that lints still lints after two fixed rewrites
 *     (Add(x, x) -> Mul(x, 2) and Relu(Add(a, b)) -> Max(Add(a, b), 0), the
 *     second with commutative matching);
 *   - used as a pattern and as its own replacement on a small fixed graph,
 *     the parsed graph leaves that graph lint-clean.
 * A broken property aborts, so libFuzzer records the input.  get_attr targets
 * w, one and idx have values (float32[2, 3], a float32 scalar, int64[2]);
 * any other is a wildcard.  FUZZ_VERBOSE=1 prints the diagnostics.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opt/opt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static NamedTensor constants[3];
static Graph *add_self, *mul_two, *relu_add, *max_zero;

static const char *const target_text =
    "%x : placeholder[target=x] : float32[2, 3]\n"
    "%y : placeholder[target=y] : float32[2, 3]\n"
    "%w : get_attr[target=w]\n"
    "%a : call_function[target=Add](args = (%x, %w))\n"
    "%r : call_function[target=Relu](args = (%a,))\n"
    "%m : call_function[target=Mul](args = (%r, %y))\n"
    "%s : call_function[target=Add](args = (%m, %m))\n"
    "return (%s,)\n";

static Graph *must_parse(const char *text)
{
    Diag d;
    diag_init(&d);
    Graph *g = graph_parse(text, constants, 3, &d);
    if (!g) {
        diag_print(&d, stderr);
        abort(); /* the harness's own text */
    }
    diag_free(&d);
    return g;
}

static void init(void)
{
    TensorType wt = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}};
    TensorType st = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 0};
    int64_t idx[2] = {0, 1};
    Tensor *w = tensor_new(&wt, NULL), *one = tensor_new(&st, NULL);
    Tensor *ix = tensor_new_ints(idx, 2, NULL);
    if (!w || !one || !ix)
        abort();
    *(float *)one->data = 1.0f;
    constants[0] = (NamedTensor){"w", w};
    constants[1] = (NamedTensor){"one", one};
    constants[2] = (NamedTensor){"idx", ix};
    add_self = must_parse("%x : placeholder[target=x]\n"
                          "%s : call_function[target=Add](args = (%x, %x))\n"
                          "return (%s,)\n");
    mul_two = must_parse("%x : placeholder[target=x]\n"
                         "%one : get_attr[target=one]\n"
                         "%two : call_function[target=Add](args = (%one, %one))\n"
                         "%m : call_function[target=Mul](args = (%x, %two))\n"
                         "return (%m,)\n");
    relu_add = must_parse("%a : placeholder[target=a]\n%b : placeholder[target=b]\n"
                          "%s : call_function[target=Add](args = (%a, %b))\n"
                          "%r : call_function[target=Relu](args = (%s,))\n"
                          "return (%r,)\n");
    max_zero = must_parse("%a : placeholder[target=a]\n%b : placeholder[target=b]\n"
                          "%one : get_attr[target=one]\n"
                          "%zero : call_function[target=Sub](args = (%one, %one))\n"
                          "%s : call_function[target=Add](args = (%a, %b))\n"
                          "%m : call_function[target=Max](args = (%s, %zero))\n"
                          "return (%m,)\n");
}

static char *print_to_string(const Graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        abort();
    graph_print(g, mem);
    fclose(mem);
    return text;
}

static void check(bool ok, const char *what, const Diag *d, const char *text)
{
    if (ok)
        return;
    diag_print(d, stderr);
    fprintf(stderr, "fuzz_graph_parse: %s\n%s\n", what, text ? text : "");
    abort();
}

static void round_trip(const Graph *g, Diag *d)
{
    char *first = print_to_string(g);
    Graph *again = graph_parse(first, constants, 3, d);
    check(again != NULL, "printed graph does not parse again", d, first);
    char *second = print_to_string(again);
    check(strcmp(first, second) == 0, "printed graph reads back differently", d, second);
    free(second);
    free(first);
    graph_free(again);
}

static void rewrite_parsed(Graph *g, Diag *d)
{
    if (graph_lint(g, false, d) != FX_OK)
        return;
    RewriteOptions plain = {0}, commutative = {.commutative = true};
    MatchList l;
    if (replace_pattern(g, add_self, mul_two, &plain, &l, d) == FX_OK)
        match_list_free(&l);
    check(graph_lint(g, false, d) == FX_OK, "rewrite of Add(x, x) broke the graph", d, NULL);
    if (replace_pattern(g, relu_add, max_zero, &commutative, &l, d) == FX_OK)
        match_list_free(&l);
    check(graph_lint(g, false, d) == FX_OK, "rewrite of Relu(Add) broke the graph", d, NULL);
}

static void parsed_as_pattern(const Graph *pattern, Diag *d)
{
    Graph *target = must_parse(target_text);
    RewriteOptions o = {.commutative = true};
    MatchList l;
    if (replace_pattern(target, pattern, pattern, &o, &l, d) == FX_OK)
        match_list_free(&l);
    check(graph_lint(target, false, d) == FX_OK, "a pattern replaced by itself broke the graph",
          d, NULL);
    graph_free(target);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!add_self)
        init();
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    Diag d;
    diag_init(&d);
    Graph *g = graph_parse(text, constants, 3, &d);
    if (g) {
        round_trip(g, &d);
        parsed_as_pattern(g, &d);
        rewrite_parsed(g, &d);
        graph_free(g);
    }
    if (getenv("FUZZ_VERBOSE"))
        diag_print(&d, stderr);
    diag_free(&d);
    free(text);
    return 0;
}
