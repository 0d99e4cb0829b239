/*
 * pass_dce.c - dead-code elimination as a pass: every node whose value
 * nobody reads is erased, repeatedly, so whole dead chains go (unused
 * constants, getitems nobody reads and then the multi-output node behind
 * them).  Graph inputs and the output node always stay: the generated
 * code's signature is the model's, whether or not an input is read.
 */
#include "opt.h"

FxStatus pass_dce(Graph *g, PassResult *r, Diag *d)
{
    (void)d;
    r->changes = graph_eliminate_dead_code(g);
    return FX_OK;
}
