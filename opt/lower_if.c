/*
 * lower_if.c - an If decided at run time, laid out flat for the code
 * generator.
 *
 * The generated code is one straight function over one arena, so each
 * branch's nodes are copied in place of the If between a BranchBegin and a
 * BranchEnd (ir/ops/control_flow.c): the emitted BranchBegin jumps past its
 * branch when the branch is not taken, so only the taken one runs.  Each
 * output is then Where(cond, then value, else value), which reads the
 * value the taken branch wrote.  The memory planner sees ordinary values,
 * so both branches get arena space, live until the Where.  The interpreter
 * of the flat graph runs both branches (their ops are pure) and gives the
 * same results.  The pipeline runs this after the passes for the commands
 * that generate code; If folding (fold_if.c) has already removed every If
 * whose condition was known.
 */
#include <stdlib.h>

#include "opt.h"

static FxStatus lower_if(Node *n, Diag *d)
{
    const Graph *branches[2] = {n->body, n->else_body};
    int outputs = n->num_outputs;
    Node **results = fx_alloc_array((size_t)(3 * outputs), sizeof *results);
    if (!results)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    InsertPoint ip = insert_before(n);
    Node *cond = n->args[0];
    FxStatus st = FX_OK;
    for (int b = 0; b < 2 && st == FX_OK; b++) {
        Node *begin = ip_create_op(&ip, &fx_op_BranchBegin, b ? "else_begin" : "then_begin",
                                   &cond, 1, d);
        if (!begin || !node_set_attr_int(begin, "negate", b)) {
            st = begin ? diag_node_error(d, FX_ERR_NOMEM, n, "out of memory") : FX_ERR_INVALID;
            break;
        }
        if (!branches[b] || graph_num_placeholders(branches[b]) != n->num_args - 1)
            st = diag_node_error(d, FX_ERR_INVALID, n, "a branch does not fit its arguments");
        if (st == FX_OK)
            st = graph_inline_body(&ip, branches[b], n->args + 1, results + b * outputs, d);
        if (st == FX_OK && !ip_create_op(&ip, &fx_op_BranchEnd, b ? "else_end" : "then_end",
                                         &begin, 1, d))
            st = FX_ERR_INVALID;
    }
    for (int k = 0; k < outputs && st == FX_OK; k++) {
        Node *args[3] = {cond, results[k], results[outputs + k]};
        if (!(results[2 * outputs + k] = ip_create_op(&ip, &fx_op_Where, n->name, args, 3, d)))
            st = FX_ERR_INVALID;
    }
    if (st == FX_OK)
        st = node_replace_outputs(n, results + 2 * outputs, d);
    free(results);
    return st;
}

int lower_runtime_ifs(Graph *g, Diag *d)
{
    /* Lowering erases the If and its getitems, and a branch may hold Ifs of
     * its own: the walk starts over after each one. */
    int lowered = 0;
    for (Node *n = g->root.next; n != &g->root;) {
        if (n->op != &fx_op_If || n->opcode != FX_OPCODE_CALL_FUNCTION) {
            n = n->next;
            continue;
        }
        if (lower_if(n, d) != FX_OK)
            return -1;
        lowered++;
        n = g->root.next;
    }
    return lowered;
}
