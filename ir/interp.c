/*
 * interp.c - the reference interpreter: fxcc's eager mode.
 *
 * Runs a shape-propagated graph node by node, calling each op's reference
 * kernel.  Like FX's Interpreter it frees a value right after its last use,
 * so peak memory follows the same liveness the memory planner uses.  Inputs
 * must match the placeholders' types exactly; a mismatch is reported naming
 * the input, never run.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

FxStatus node_eval(const Node *n, const Tensor *const *inputs, Tensor **outputs, Diag *d)
{
    for (int k = 0; k < n->num_outputs; k++) {
        outputs[k] = tensor_new(&n->out_types[k], d);
        if (!outputs[k]) {
            for (int j = 0; j < k; j++) {
                tensor_free(outputs[j]);
                outputs[j] = NULL;
            }
            return diag_node_error(d, FX_ERR_NOMEM, n, "cannot allocate output %d", k);
        }
    }
    EvalCtx c = {.node = n, .num_inputs = n->num_args, .in = inputs,
                 .num_outputs = n->num_outputs, .out = outputs, .diag = d};
    FxStatus st = n->op->eval(&c);
    if (st != FX_OK)
        for (int k = 0; k < n->num_outputs; k++) {
            tensor_free(outputs[k]);
            outputs[k] = NULL;
        }
    return st;
}

/* Per-node state of one run, indexed by the node's position. */
typedef struct Slot {
    Tensor **values; /* num_outputs entries; NULL until computed */
    bool borrowed;   /* values point at inputs or constants: never freed */
    int last_use;    /* position of the last reader */
} Slot;

typedef struct Run {
    const Graph *g;
    int count;
    Node **order;
    Slot *slots;
} Run;

static int position(const Node *n) { return n->pass_data ? (int)(intptr_t)n->pass_data - 1 : -1; }

static void slot_release(Slot *s, int num_outputs)
{
    if (!s->values)
        return;
    if (!s->borrowed)
        for (int k = 0; k < num_outputs; k++)
            tensor_free(s->values[k]);
    free(s->values);
    s->values = NULL;
}

static void run_free(Run *r)
{
    for (int i = 0; i < r->count; i++) {
        slot_release(&r->slots[i], r->order[i]->num_outputs);
        r->order[i]->pass_data = NULL;
    }
    free(r->slots);
    free(r->order);
}

static FxStatus check_input(const Node *ph, const Tensor *t, Diag *d)
{
    if (type_equal(&t->type, &ph->out_types[0]))
        return FX_OK;
    char want[256], got[256];
    return diag_node_error(d, FX_ERR_SHAPE, ph, "input '%s' expects %s, got %s", ph->target,
                           type_format(&ph->out_types[0], want, sizeof want),
                           type_format(&t->type, got, sizeof got));
}

static FxStatus eval_node(Run *r, int pos, Diag *d)
{
    Node *n = r->order[pos];
    Slot *s = &r->slots[pos];
    if (n->op == &fx_op_getitem) {
        Slot *src = &r->slots[position(n->args[0])];
        s->values[0] = tensor_clone(src->values[n->index], d);
        return s->values[0] ? FX_OK : FX_ERR_NOMEM;
    }
    const Tensor **in = fx_alloc_array((size_t)n->num_args + 1, sizeof *in);
    if (!in)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    for (int i = 0; i < n->num_args; i++)
        if (n->args[i])
            in[i] = r->slots[position(n->args[i])].values[0];
    FxStatus st = node_eval(n, in, s->values, d);
    free(in);
    return st;
}

FxStatus interp_run(const Graph *g, const Tensor *const *inputs, int num_inputs,
                    Tensor **outputs, int num_outputs, InterpObserver observer, void *user,
                    Diag *d)
{
    for (int k = 0; k < num_outputs; k++)
        outputs[k] = NULL;
    Node *out_node = graph_output_node(g);
    if (!out_node)
        return diag_error(d, FX_ERR_INVALID, "graph has no output node");
    if (num_outputs != out_node->num_args)
        return diag_error(d, FX_ERR_INVALID, "graph has %d outputs, caller expects %d",
                          out_node->num_args, num_outputs);
    Run r = {.g = g, .count = g->num_nodes};
    r.order = fx_alloc_array((size_t)r.count + 1, sizeof *r.order);
    r.slots = fx_alloc_array((size_t)r.count + 1, sizeof *r.slots);
    if (!r.order || !r.slots) {
        free(r.order);
        free(r.slots);
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    }
    int pos = 0;
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        r.order[pos] = n;
        n->pass_data = (void *)(intptr_t)(pos + 1);
        r.slots[pos].last_use = pos;
        pos++;
    }
    r.count = pos;
    for (int i = 0; i < r.count; i++)
        for (int a = 0; a < r.order[i]->num_args; a++)
            if (r.order[i]->args[a])
                r.slots[position(r.order[i]->args[a])].last_use = i;

    FxStatus st = FX_OK;
    int next_input = 0;
    for (int i = 0; i < r.count && st == FX_OK; i++) {
        Node *n = r.order[i];
        Slot *s = &r.slots[i];
        if (n->opcode == FX_OPCODE_OUTPUT) {
            for (int k = 0; k < n->num_args; k++) {
                outputs[k] = tensor_clone(r.slots[position(n->args[k])].values[0], d);
                if (!outputs[k]) {
                    for (int j = 0; j < k; j++) {
                        tensor_free(outputs[j]);
                        outputs[j] = NULL;
                    }
                    st = FX_ERR_NOMEM;
                    break;
                }
            }
            continue;
        }
        if (!n->shapes_known) {
            st = diag_node_error(d, FX_ERR_INVALID, n, "shapes were not propagated");
            break;
        }
        s->values = fx_alloc_array((size_t)n->num_outputs, sizeof *s->values);
        if (!s->values) {
            st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
            break;
        }
        if (n->opcode == FX_OPCODE_PLACEHOLDER) {
            const Tensor *t = next_input < num_inputs ? inputs[next_input] : n->value;
            next_input++;
            if (!t) {
                st = diag_node_error(d, FX_ERR_INVALID, n, "no value given for input '%s'",
                                     n->target);
                break;
            }
            if ((st = check_input(n, t, d)) != FX_OK)
                break;
            s->values[0] = (Tensor *)t;
            s->borrowed = true;
        } else if (n->opcode == FX_OPCODE_GET_ATTR) {
            s->values[0] = n->value;
            s->borrowed = true;
        } else {
            st = eval_node(&r, i, d);
        }
        if (st == FX_OK && observer)
            observer(user, n, s->values);
        /* Free the arguments this node read for the last time. */
        for (int a = 0; a < n->num_args && st == FX_OK; a++) {
            if (!n->args[a])
                continue;
            int p = position(n->args[a]);
            if (r.slots[p].last_use == i)
                slot_release(&r.slots[p], n->args[a]->num_outputs);
        }
    }
    if (st == FX_OK && next_input < num_inputs)
        st = diag_error(d, FX_ERR_INVALID, "%d inputs given but the graph takes %d", num_inputs,
                        next_input);
    if (st != FX_OK && out_node->num_args == num_outputs)
        for (int k = 0; k < num_outputs; k++) {
            tensor_free(outputs[k]);
            outputs[k] = NULL;
        }
    run_free(&r);
    return st;
}
