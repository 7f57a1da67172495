/*
** model_print.c — the canonical IR text printer. Parsing its output and printing again gives
** the same bytes; docs/FORMAT.md describes the layout.
*/
#include "../ir/ir.h"

#include <inttypes.h>

static bool is_bare_name(const char *s)
{
    if (!*s) return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.'))
            return false;
    }
    return true;
}

static void print_string(struct bpcc_buf *b, const char *s)
{
    bpcc_buf_addc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': bpcc_buf_adds(b, "\\\""); break;
        case '\\': bpcc_buf_adds(b, "\\\\"); break;
        case '\n': bpcc_buf_adds(b, "\\n"); break;
        case '\t': bpcc_buf_adds(b, "\\t"); break;
        case '\r': bpcc_buf_adds(b, "\\r"); break;
        default:
            if (*p < 0x20 || *p == 0x7f) bpcc_buf_printf(b, "\\x%02x", *p);
            else bpcc_buf_addc(b, (char)*p);
        }
    }
    bpcc_buf_addc(b, '"');
}

static void print_name(struct bpcc_buf *b, const char *s)
{
    if (is_bare_name(s)) bpcc_buf_adds(b, s);
    else print_string(b, s);
}

static void print_ttype(struct bpcc_buf *b, const struct bpcc_value *v)
{
    bpcc_buf_adds(b, bpcc_dtype_short_name(v->u.ttype.dtype));
    bpcc_buf_addc(b, '[');
    for (uint32_t i = 0; i < v->n; i++) {
        if (i) bpcc_buf_adds(b, ", ");
        bpcc_buf_add_i64(b, v->u.ttype.dims[i]);
    }
    bpcc_buf_addc(b, ']');
}

void bpcc_print_value(struct bpcc_buf *b, const struct bpcc_value *v)
{
    char num[32];
    switch (v->kind) {
    case BPCC_VAL_NONE: bpcc_buf_adds(b, "None"); return;
    case BPCC_VAL_BOOL: bpcc_buf_adds(b, v->u.b ? "True" : "False"); return;
    case BPCC_VAL_INT: bpcc_buf_add_i64(b, v->u.i); return;
    case BPCC_VAL_FLOAT:
        bpcc_format_double(v->u.f, num);
        bpcc_buf_adds(b, num);
        return;
    case BPCC_VAL_STR: print_string(b, v->u.s); return;
    case BPCC_VAL_NODE:
        bpcc_buf_addc(b, '%');
        bpcc_buf_adds(b, v->u.node->name);
        return;
    case BPCC_VAL_ATTR: /* its get_attr line comes before the node's (print_implicit) */
        bpcc_buf_addc(b, '%');
        bpcc_buf_adds(b, v->u.attr.name);
        return;
    case BPCC_VAL_DTYPE:
        bpcc_buf_adds(b, "torch.");
        bpcc_buf_adds(b, bpcc_dtype_name(v->u.dtype));
        return;
    case BPCC_VAL_ELLIPSIS: bpcc_buf_adds(b, "..."); return;
    case BPCC_VAL_SYMBOL: bpcc_buf_adds(b, v->u.s); return;
    case BPCC_VAL_DEVICE:
        bpcc_buf_adds(b, "device(");
        print_string(b, v->u.s);
        bpcc_buf_addc(b, ')');
        return;
    case BPCC_VAL_TTYPE: print_ttype(b, v); return;
    case BPCC_VAL_LIST:
    case BPCC_VAL_TUPLE:
    case BPCC_VAL_SLICE:
    case BPCC_VAL_DICT: {
        const char *open = v->kind == BPCC_VAL_LIST   ? "["
                           : v->kind == BPCC_VAL_DICT ? "{"
                           : v->kind == BPCC_VAL_SLICE ? "slice("
                                                       : "(";
        char close = v->kind == BPCC_VAL_LIST ? ']' : v->kind == BPCC_VAL_DICT ? '}' : ')';
        bpcc_buf_adds(b, open);
        for (uint32_t i = 0; i < v->n; i++) {
            if (i) bpcc_buf_adds(b, ", ");
            if (v->kind == BPCC_VAL_DICT) {
                print_name(b, v->u.seq.keys[i]);
                bpcc_buf_adds(b, ": ");
            }
            bpcc_print_value(b, &v->u.seq.items[i]);
        }
        if (v->kind == BPCC_VAL_TUPLE && v->n == 1) bpcc_buf_addc(b, ',');
        bpcc_buf_addc(b, close);
        return;
    }
    default: bpcc_buf_adds(b, "?"); return;
    }
}

static bool has_tensors(const struct bpcc_graph *g)
{
    for (uint32_t i = 0; i < g->n_modules; i++)
        if (g->modules[i]->n_tensors) return true;
    return false;
}

/* Text is handed to the sink in pieces of about this many bytes (bpcc_graph_save's file): a big
** model's text is never held whole. */
#define SINK_PIECE (1u << 20)

/* a line is complete: to the sink once a piece has gathered */
static void line_done(struct bpcc_buf *b, FILE *sink)
{
    if (sink && b->len >= SINK_PIECE && !b->oom) {
        fwrite(b->data, 1, b->len, sink); /* write errors: ferror, checked when the file is finished */
        b->len = 0;
        b->data[0] = 0;
    }
}

/* a get_attr node left implicit (BPCC_VAL_ATTR, bpcc_graph_set_implicit_qparams): printed just
** before the node whose argument it is, where convert would have put it */
static void print_implicit(const struct bpcc_value *v, void *b)
{
    bpcc_buf_adds(b, "  %");
    bpcc_buf_adds(b, v->u.attr.name);
    bpcc_buf_adds(b, " = get_attr ");
    print_name(b, v->u.attr.target);
    bpcc_buf_adds(b, " ()\n");
}

/* the text into b, or through b into sink; weights_name as for bpcc_graph_print */
static enum bpcc_status print_graph(const struct bpcc_graph *g, const char *weights_name, struct bpcc_buf *b, FILE *sink,
                                    struct bpcc_diag *d)
{
    const char *w = weights_name ? weights_name : g->weights_name;
    bool tensors = has_tensors(g);
    if (tensors && (!w || !w[0]))
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "the model has tensors but no weights file name");
    bpcc_buf_adds(b, "bpcc-model 1\n");
    if (tensors) {
        bpcc_buf_adds(b, "weights ");
        print_string(b, w);
        bpcc_buf_addc(b, '\n');
    }
    bpcc_buf_addc(b, '\n');
    for (uint32_t i = 0; i < g->n_modules; i++) {
        const struct bpcc_module *m = g->modules[i];
        bpcc_buf_adds(b, "module ");
        print_name(b, m->name);
        bpcc_buf_adds(b, " : ");
        print_name(b, m->type);
        if (m->attrs.n) {
            bpcc_buf_addc(b, ' ');
            bpcc_print_value(b, &m->attrs);
        }
        bpcc_buf_addc(b, '\n');
        line_done(b, sink);
        for (uint32_t k = 0; k < m->n_tensors; k++) {
            const struct module_tensor *mt = &m->tensors[k];
            bpcc_buf_adds(b, "  ");
            bpcc_buf_adds(b, bpcc_tensor_role_name(mt->role));
            bpcc_buf_addc(b, ' ');
            print_name(b, mt->name);
            bpcc_buf_adds(b, " : ");
            struct bpcc_value tt = {.kind = BPCC_VAL_TTYPE, .n = mt->t->ndim};
            tt.u.ttype.dtype = mt->t->dtype;
            tt.u.ttype.dims = mt->t->dims;
            print_ttype(b, &tt);
            bpcc_buf_addc(b, '\n');
            line_done(b, sink);
        }
    }
    if (g->n_modules) bpcc_buf_addc(b, '\n');
    bpcc_buf_adds(b, "graph\n");
    for (const struct bpcc_node *n = g->first; n; n = n->next) {
        bpcc_value_visit_attrs(&n->args, print_implicit, b);
        if (n->kwargs) bpcc_value_visit_attrs(n->kwargs, print_implicit, b);
        bpcc_buf_adds(b, "  %");
        bpcc_buf_adds(b, n->name);
        bpcc_buf_adds(b, " = ");
        bpcc_buf_adds(b, bpcc_node_kind_name(n->kind));
        bpcc_buf_addc(b, ' ');
        print_name(b, n->target);
        bpcc_buf_addc(b, ' ');
        bpcc_print_value(b, &n->args);
        if (n->kwargs) {
            bpcc_buf_addc(b, ' ');
            bpcc_print_value(b, n->kwargs);
        }
        if (n->meta) {
            bpcc_buf_adds(b, " : ");
            bpcc_print_value(b, n->meta);
        }
        if (n->scope) {
            bpcc_buf_adds(b, " @ ");
            print_name(b, n->scope[0]);
            bpcc_buf_adds(b, " : ");
            print_name(b, n->scope[1]);
        }
        bpcc_buf_addc(b, '\n');
        line_done(b, sink);
    }
    if (b->oom) return bpcc_diag_nomem(d);
    if (sink && b->len) fwrite(b->data, 1, b->len, sink);
    return BPCC_OK;
}

enum bpcc_status bpcc_graph_print_to(const struct bpcc_graph *g, const char *weights_name, FILE *fp,
                                     struct bpcc_diag *d)
{
    if (!fp) return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "no file to print the model into");
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    enum bpcc_status s = print_graph(g, weights_name, &b, fp, d);
    bpcc_buf_release(&b);
    return s;
}

enum bpcc_status bpcc_graph_print(const struct bpcc_graph *g, const char *weights_name,
                                  char **text_out, size_t *len_out, struct bpcc_diag *d)
{
    *text_out = NULL;
    if (len_out) *len_out = 0;
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    enum bpcc_status s = print_graph(g, weights_name, &b, NULL, d);
    if (s) {
        bpcc_buf_release(&b);
        return s;
    }
    size_t len;
    char *text = bpcc_buf_take(&b, &len);
    if (!text) return bpcc_diag_nomem(d);
    *text_out = text;
    if (len_out) *len_out = len;
    return BPCC_OK;
}
