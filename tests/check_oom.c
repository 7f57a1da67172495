/*
** check_oom.c — fail the 1st, 2nd, ... allocation of each operation until it succeeds: every
** failure must report out-of-memory, leave its inputs as they were and leak nothing (run this
** suite under valgrind or LeakSanitizer to see the last part).
*/
#include "testutil.h"

struct text_ctx {
    char *text;
    size_t len;
    struct bpcc_graph *g;
};

static enum bpcc_status op_parse(void *p, struct bpcc_diag *d)
{
    struct text_ctx *c = p;
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_parse(c->text, c->len, "x.bpcc", &g, d);
    if (!s) bpcc_graph_free(g);
    return s;
}

static enum bpcc_status op_load(void *p, struct bpcc_diag *d)
{
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_load(p, &g, d);
    if (!s) bpcc_graph_free(g);
    return s;
}

static enum bpcc_status op_print(void *p, struct bpcc_diag *d)
{
    struct text_ctx *c = p;
    char *out;
    enum bpcc_status s = bpcc_graph_print(c->g, NULL, &out, NULL, d);
    if (!s) {
        ck_assert_str_eq(out, c->text);
        bpcc_free(out);
    }
    return s;
}

static enum bpcc_status op_json(void *p, struct bpcc_diag *d)
{
    struct text_ctx *c = p;
    char *out;
    enum bpcc_status s = bpcc_graph_to_json(c->g, 2, &out, d);
    if (!s) bpcc_free(out);
    return s;
}

static enum bpcc_status op_verify_sort(void *p, struct bpcc_diag *d)
{
    struct text_ctx *c = p;
    enum bpcc_status s = bpcc_graph_verify(c->g, d);
    if (!s) s = bpcc_graph_topo_sort(c->g, d);
    return s;
}

static enum bpcc_status op_open_st(void *p, struct bpcc_diag *d)
{
    struct bpcc_safetensors *st;
    enum bpcc_status s = bpcc_safetensors_open(p, &st, d);
    if (!s) bpcc_safetensors_close(st);
    return s;
}

/* Graph building through the API: create, set args, replace uses, erase. */
static enum bpcc_status op_build(void *p, struct bpcc_diag *d)
{
    (void)p;
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_new(&g, d);
    if (s) return s;
    struct bpcc_node *x = NULL, *a = NULL, *b = NULL;
    struct bpcc_value args = {.kind = BPCC_VAL_TUPLE};
    if ((s = bpcc_graph_create_node(g, BPCC_NODE_PLACEHOLDER, "x", "x", NULL, NULL, &x, d))) goto out;
    if ((s = bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 2, &args))) { s = bpcc_diag_nomem(d); goto out; }
    args.u.seq.items[0] = args.u.seq.items[1] = bpcc_value_node(x);
    for (int i = 0; i < 20; i++)
        if ((s = bpcc_graph_create_node(g, BPCC_NODE_CALL_FUNCTION, NULL, "operator.add", &args,
                                        NULL, &a, d))) goto out;
    if ((s = bpcc_graph_create_node(g, BPCC_NODE_CALL_FUNCTION, NULL, "torch.relu", &args, NULL, &b, d)))
        goto out;
    if ((s = bpcc_node_replace_all_uses(x, b, NULL, d))) goto out;
    struct bpcc_module *m;
    if ((s = bpcc_graph_add_module(g, "m", "torch.nn.ReLU", &m, d))) goto out;
    struct bpcc_value v = bpcc_value_bool(false);
    if ((s = bpcc_module_set_attr(m, "inplace", &v, d))) goto out;
    struct bpcc_tensor *t;
    int64_t dims[] = {4};
    if ((s = bpcc_tensor_new(g, BPCC_DTYPE_F32, 1, dims, &t, d))) goto out;
    s = bpcc_module_set_tensor(m, "w", BPCC_TENSOR_PARAM, t, d);
out:
    bpcc_graph_free(g);
    return s;
}

START_TEST(parse_print_json_and_passes_survive_oom)
{
    static const char *const names[] = {"literals", "residual"};
    for (size_t i = 0; i < BPCC_ARRAY_LEN(names); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.bpcc", FIXTURES_DIR, names[i]);
        struct text_ctx c = {0};
        c.text = tu_read(path, &c.len);
        ck_assert_int_gt(tu_oom_loop("parse", op_parse, &c), 5);
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        ck_assert_int_eq(bpcc_graph_parse(c.text, c.len, NULL, &c.g, &d), BPCC_OK);
        ck_assert_int_gt(tu_oom_loop("print", op_print, &c), 0);
        ck_assert_int_gt(tu_oom_loop("json", op_json, &c), 10);
        ck_assert_int_gt(tu_oom_loop("verify+topo_sort", op_verify_sort, &c), 0);
        /* nothing changed: the graph still prints as the file */
        ck_assert_int_eq(op_print(&c, &d), BPCC_OK);
        bpcc_graph_free(c.g);
        free(c.text);
        ck_assert_int_gt(tu_oom_loop("load", op_load, path), 10);
        snprintf(path, sizeof path, "%s/%s.safetensors", FIXTURES_DIR, names[i]);
        ck_assert_int_gt(tu_oom_loop("safetensors open", op_open_st, path), 2);
    }
}
END_TEST

START_TEST(long_literals_survive_oom)
{
    /* lists and dicts past the parser's on-stack room (8 items) grow on the heap, twice here */
    char text[4096] = "bpcc-model 1\ngraph\n  %x = placeholder x ()\n  %f = call_function f.g (%x, [";
    size_t n = strlen(text);
    for (int i = 0; i < 20; i++) n += (size_t)snprintf(text + n, sizeof text - n, "%s%d", i ? ", " : "", i);
    n += (size_t)snprintf(text + n, sizeof text - n, "]) {");
    for (int i = 0; i < 20; i++) n += (size_t)snprintf(text + n, sizeof text - n, "%sk%d: %d", i ? ", " : "", i, i);
    snprintf(text + n, sizeof text - n, "}\n  %%output = output output (%%f,)\n");
    struct text_ctx c = {.text = text, .len = strlen(text)};
    ck_assert_int_gt(tu_oom_loop("parse long literals", op_parse, &c), 2);
}
END_TEST

START_TEST(graph_building_survives_oom)
{
    /* the graph, its arena, the string (node names included), numbering and module indexes, the
    ** module table */
    ck_assert_int_gt(tu_oom_loop("build", op_build, NULL), 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("oom");
    TCase *tc = tcase_create("oom");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, parse_print_json_and_passes_survive_oom);
    tcase_add_test(tc, long_literals_survive_oom);
    tcase_add_test(tc, graph_building_survives_oom);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
