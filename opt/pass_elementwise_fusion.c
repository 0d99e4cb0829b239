/*
 * pass_elementwise_fusion.c - placeholder until the pass lands: changes nothing.
 */
#include "opt.h"

FxStatus pass_elementwise_fusion(Graph *g, PassResult *r, Diag *d)
{
    (void)g;
    (void)d;
    r->changes = 0;
    return FX_OK;
}
