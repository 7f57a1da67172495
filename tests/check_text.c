/*
** check_text.c — the IR text format: byte-exact round trips on every fixture, canonical
** printing of free-form input, and one test per error class with its exact line:col.
*/
#include "testutil.h"

/* hand-written fixtures, and real FX graphs exported by the PyTorch bridge */
static const char *const fixtures[] = {"conv_bn_relu", "residual", "cat", "linear_head",
                                       "literals", "torch/tiny_resnet", "torch/tiny_functional",
                                       "torch/tiny_resnet_fused", "torch/tiny_blocks"};

START_TEST(fixtures_round_trip_byte_for_byte)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bpcc", FIXTURES_DIR, fixtures[_i]);
    size_t len = 0;
    char *text = tu_read(path, &len);
    ck_assert_ptr_nonnull(text);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    ck_assert_msg(bpcc_graph_parse(text, len, path, &g, &d) == BPCC_OK, "%s", tu_msg(&d));
    char *out;
    size_t out_len;
    ck_assert_int_eq(bpcc_graph_print(g, NULL, &out, &out_len, &d), BPCC_OK);
    ck_assert_uint_eq(out_len, len);
    ck_assert_msg(memcmp(out, text, len) == 0, "printed text differs from %s:\n%s", path, out);
    bpcc_free(out);
    bpcc_graph_free(g);
    free(text);
}
END_TEST

START_TEST(free_form_text_prints_canonically)
{
    const char *in =
        "# a comment line\n"
        "\n"
        "bpcc-model   1   # trailing comment\n"
        "\n\n"
        "module  m :torch.nn.ReLU{inplace:False,}\n"
        "graph\n"
        "\t%x=placeholder x()\n"
        "%r = call_module m ( %x , ) : f32[ 1 ,2 ]   # ok\n"
        "  %f = call_function torch.mul (%r, 1.50e0, [1,2,],) {other : 3E-1}\n"
        "  %s = call_method sigmoid (%f,)@ blocks.0  :my.Block\n"
        "  %output = output output ( %s, )\n";
    const char *want =
        "bpcc-model 1\n"
        "\n"
        "module m : torch.nn.ReLU {inplace: False}\n"
        "\n"
        "graph\n"
        "  %x = placeholder x ()\n"
        "  %r = call_module m (%x,) : f32[1, 2]\n"
        "  %f = call_function torch.mul (%r, 1.5, [1, 2]) {other: 0.3}\n"
        "  %s = call_method sigmoid (%f,) @ blocks.0 : my.Block\n"
        "  %output = output output (%s,)\n";
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    ck_assert_msg(bpcc_graph_parse(in, strlen(in), "free.bpcc", &g, &d) == BPCC_OK, "%s:%u:%u",
                  tu_msg(&d), d.entries[0].line, d.entries[0].col);
    char *out;
    ck_assert_int_eq(bpcc_graph_print(g, NULL, &out, NULL, &d), BPCC_OK);
    ck_assert_str_eq(out, want);
    const char *stype = NULL;
    ck_assert_str_eq(bpcc_node_scope(bpcc_graph_find_node(g, "s"), &stype), "blocks.0");
    ck_assert_str_eq(stype, "my.Block");
    ck_assert_ptr_null(bpcc_node_scope(bpcc_graph_find_node(g, "f"), &stype));
    ck_assert_ptr_null(stype);
    bpcc_graph_free(g);
    /* and the canonical text is a fixed point */
    ck_assert_int_eq(bpcc_graph_parse(out, strlen(out), NULL, &g, &d), BPCC_OK);
    char *again;
    ck_assert_int_eq(bpcc_graph_print(g, NULL, &again, NULL, &d), BPCC_OK);
    ck_assert_str_eq(again, out);
    bpcc_free(out);
    bpcc_free(again);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(long_literals_keep_every_item)
{
    /* past the parser's on-stack room for items (8): a 20-item list, a 9-item tuple, 20 kwargs */
    char in[4096] = "bpcc-model 1\ngraph\n  %x = placeholder x ()\n  %f = call_function f.g (%x, [";
    size_t n = strlen(in);
    for (int i = 0; i < 20; i++) n += (size_t)snprintf(in + n, sizeof in - n, "%s%d", i ? ", " : "", i);
    n += (size_t)snprintf(in + n, sizeof in - n, "], (");
    for (int i = 0; i < 9; i++) n += (size_t)snprintf(in + n, sizeof in - n, "%s%d", i ? ", " : "", 100 + i);
    n += (size_t)snprintf(in + n, sizeof in - n, ")) {");
    for (int i = 0; i < 20; i++) n += (size_t)snprintf(in + n, sizeof in - n, "%sk%d: %d", i ? ", " : "", i, -i);
    snprintf(in + n, sizeof in - n, "}\n  %%output = output output (%%f,)\n");
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    ck_assert_msg(bpcc_graph_parse(in, strlen(in), NULL, &g, &d) == BPCC_OK, "%s", tu_msg(&d));
    const struct bpcc_node *f = bpcc_graph_find_node(g, "f");
    const struct bpcc_value *a = bpcc_node_args(f), *k = bpcc_node_kwargs(f);
    ck_assert_uint_eq(a->n, 3);
    ck_assert_uint_eq(a->u.seq.items[1].n, 20);
    for (uint32_t i = 0; i < 20; i++) ck_assert_int_eq(a->u.seq.items[1].u.seq.items[i].u.i, i);
    ck_assert_uint_eq(a->u.seq.items[2].n, 9);
    ck_assert_int_eq(a->u.seq.items[2].u.seq.items[8].u.i, 108);
    ck_assert_uint_eq(k->n, 20);
    ck_assert_str_eq(k->u.seq.keys[19], "k19");
    ck_assert_int_eq(k->u.seq.items[19].u.i, -19);
    ck_assert_int_eq(bpcc_value_get(k, "k9")->u.i, -9);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(parsed_values_have_the_right_kinds)
{
    size_t len = 0;
    char *text = tu_read(FIXTURE("literals.bpcc"), &len);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_parse(text, len, NULL, &g, &d), BPCC_OK);
    free(text);
    struct bpcc_node *gi = bpcc_graph_find_node(g, "getitem");
    const struct bpcc_value *idx = bpcc_value_item(bpcc_node_args(gi), 1);
    ck_assert_int_eq(idx->kind, BPCC_VAL_TUPLE);
    ck_assert_int_eq(bpcc_value_item(idx, 0)->kind, BPCC_VAL_SLICE);
    ck_assert_int_eq(bpcc_value_item(bpcc_value_item(idx, 0), 1)->u.i, 2);
    ck_assert_int_eq(bpcc_value_item(idx, 1)->kind, BPCC_VAL_ELLIPSIS);
    ck_assert_int_eq(bpcc_value_item(idx, 2)->u.i, -1);
    struct bpcc_node *to = bpcc_graph_find_node(g, "to");
    ck_assert_int_eq(bpcc_value_item(bpcc_node_args(to), 1)->kind, BPCC_VAL_DTYPE);
    ck_assert_int_eq(bpcc_value_item(bpcc_node_args(to), 1)->u.dtype, BPCC_DTYPE_F16);
    ck_assert_int_eq(bpcc_value_get(bpcc_node_kwargs(to), "device")->kind, BPCC_VAL_DEVICE);
    ck_assert_str_eq(bpcc_value_get(bpcc_node_kwargs(to), "memory_format")->u.s,
                     "torch.contiguous_format");
    struct bpcc_module *m = bpcc_graph_find_module(g, "odd name/with space");
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(bpcc_module_attr(m, "label")->u.s,
                     "tab\there \"quoted\" back\\slash \x01 caf\xc3\xa9");
    ck_assert_int_eq(bpcc_module_attr(m, "neg")->u.i, INT64_MIN);
    ck_assert(signbit(bpcc_module_attr(m, "scale")->u.f));
    ck_assert_ptr_nonnull(bpcc_value_get(bpcc_module_attrs(m), "key with space"));
    struct bpcc_node *split = bpcc_graph_find_node(g, "split");
    ck_assert_int_eq(bpcc_node_meta(split)->kind, BPCC_VAL_TUPLE);
    ck_assert_uint_eq(bpcc_node_meta(split)->n, 2);
    struct bpcc_node *custom = bpcc_graph_find_node(g, "custom");
    ck_assert_int_eq(bpcc_node_meta(custom)->kind, BPCC_VAL_LIST);
    ck_assert_int_eq(bpcc_value_item(bpcc_node_meta(custom), 1)->kind, BPCC_VAL_NONE);
    ck_assert_uint_eq(bpcc_value_item(bpcc_node_meta(custom), 2)->n, 0);
    /* the kwargs' node references count as uses */
    ck_assert_uint_eq(bpcc_node_n_users(bpcc_graph_find_node(g, "y")), 2);
    bpcc_graph_free(g);
}
END_TEST

struct bad_case {
    const char *name;
    const char *text;
    enum bpcc_status status;
    uint32_t line, col;
    const char *msg;
};

#define HDR "bpcc-model 1\n"
#define GR HDR "graph\n  %x = placeholder x ()\n"
#define OUT "  %output = output output (%x,)\n"

static const struct bad_case bad[] = {
    {"empty file", "", BPCC_ERR_PARSE, 1, 1, "not a bpcc model file"},
    {"wrong magic", "bpcc-modelx 1\n", BPCC_ERR_PARSE, 1, 1, "not a bpcc model file"},
    {"unsupported version", "bpcc-model 2\n", BPCC_ERR_PARSE, 1, 12, "unsupported model format version 2"},
    {"junk after version", "bpcc-model 1 x\n", BPCC_ERR_PARSE, 1, 14, "expected end of line, found 'x'"},
    {"no graph section", HDR, BPCC_ERR_PARSE, 2, 1, "expected 'module' or 'graph', found end of file"},
    {"unknown section", HDR "modules x : y\n", BPCC_ERR_PARSE, 2, 1, "expected 'module' or 'graph'"},
    {"no output node", HDR "graph\n  %x = placeholder x ()\n", BPCC_ERR_PARSE, 4, 1, "no output node"},
    {"unknown node kind", HDR "graph\n  %x = placeholdr x ()\n", BPCC_ERR_PARSE, 3, 8, "expected a node kind"},
    {"undefined node", GR "  %y = call_function torch.relu (%z,)\n" OUT, BPCC_ERR_PARSE, 4, 34, "use of undefined node '%z'"},
    {"duplicate node", GR "  %x = placeholder y ()\n" OUT, BPCC_ERR_PARSE, 4, 3, "duplicate node name '%x'"},
    {"bad token in args", GR "  %y = call_function f.g (%x, @)\n" OUT, BPCC_ERR_PARSE, 4, 31, "expected a value, found '@'"},
    {"unclosed args", GR "  %y = call_function f.g (%x,\n" OUT, BPCC_ERR_PARSE, 4, 30, "expected a value, found end of line"},
    {"unterminated string", GR "  %y = call_function f.g (\"abc)\n" OUT, BPCC_ERR_PARSE, 4, 27, "unterminated string"},
    {"unknown escape", GR "  %y = call_function f.g (\"a\\qb\",)\n" OUT, BPCC_ERR_PARSE, 4, 29, "unknown escape sequence '\\q'"},
    {"escaped NUL", GR "  %y = call_function f.g (\"a\\x00\",)\n" OUT, BPCC_ERR_PARSE, 4, 29, "may not contain NUL"},
    {"bad hex escape", GR "  %y = call_function f.g (\"\\xZ1\",)\n" OUT, BPCC_ERR_PARSE, 4, 28, "two hex digits"},
    {"invalid UTF-8", GR "  %y = call_function f.g (\"a\xc3\x28\",)\n" OUT, BPCC_ERR_PARSE, 4, 29, "invalid UTF-8"},
    {"overlong UTF-8", GR "  %y = call_function f.g (\"\xc0\xaf\",)\n" OUT, BPCC_ERR_PARSE, 4, 28, "invalid UTF-8"},
    {"control char in string", GR "  %y = call_function f.g (\"a\tb\",)\n" OUT, BPCC_ERR_PARSE, 4, 29, "control character 0x09"},
    {"one-tuple without comma", GR "  %y = call_function f.g (%x)\n" OUT, BPCC_ERR_PARSE, 4, 26, "one-element tuple"},
    {"nested one-tuple", GR "  %y = call_function f.g ((1),)\n" OUT, BPCC_ERR_PARSE, 4, 27, "one-element tuple"},
    {"unknown element type", GR "  %y = call_function f.g (%x,) : f33[1]\n" OUT, BPCC_ERR_PARSE, 4, 34, "unknown element type 'f33'"},
    {"negative dimension", GR "  %y = call_function f.g (%x,) : f32[2, -1]\n" OUT, BPCC_ERR_PARSE, 4, 41, "dimension -1 is negative"},
    {"rank above 8", GR "  %y = call_function f.g (%x,) : f32[1,1,1,1,1,1,1,1,1]\n" OUT, BPCC_ERR_LIMIT, 4, 54, "exceeds 8 dimensions"},
    {"integer out of range", GR "  %y = call_function f.g (99999999999999999999,)\n" OUT, BPCC_ERR_PARSE, 4, 27, "integer out of range"},
    {"float out of range", GR "  %y = call_function f.g (1e999,)\n" OUT, BPCC_ERR_PARSE, 4, 27, "float literal out of range"},
    {"malformed exponent", GR "  %y = call_function f.g (1e,)\n" OUT, BPCC_ERR_PARSE, 4, 27, "exponent has no digits"},
    {"malformed number", GR "  %y = call_function f.g (1.2.3,)\n" OUT, BPCC_ERR_PARSE, 4, 27, "malformed number '1.2.3'"},
    {"minus nan", GR "  %y = call_function f.g (-nan,)\n" OUT, BPCC_ERR_PARSE, 4, 27, "'-nan' is not a number"},
    {"duplicate kwarg", GR "  %y = call_function f.g () {a: 1, a: 2}\n" OUT, BPCC_ERR_PARSE, 4, 36, "duplicate key 'a'"},
    {"unknown word", GR "  %y = call_function f.g (Tru,)\n" OUT, BPCC_ERR_PARSE, 4, 27, "unknown word 'Tru'"},
    {"slice arity", GR "  %y = call_function f.g (slice(1, 2),)\n" OUT, BPCC_ERR_PARSE, 4, 27, "slice takes exactly three values"},
    {"deep nesting", GR "  %y = call_function f.g ([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],)\n" OUT,
     BPCC_ERR_LIMIT, 4, 91, "nest deeper than 64"},
    {"second output", GR OUT "  %output2 = output output (%x,)\n", BPCC_ERR_PARSE, 5, 3, "a graph has one output node"},
    {"output used as value", GR OUT "  %y = call_function f.g (%output,)\n", BPCC_ERR_PARSE, 5, 27, "cannot be used as a value"},
    {"missing equals", GR "  %y call_function f.g ()\n" OUT, BPCC_ERR_PARSE, 4, 6, "expected '=', found 'call_function'"},
    {"missing args", GR "  %y = call_function f.g\n" OUT, BPCC_ERR_PARSE, 4, 25, "expected '(' to open the argument list"},
    {"garbage in graph", GR "  x = placeholder x ()\n" OUT, BPCC_ERR_PARSE, 4, 3, "expected a node"},
    {"module without colon", HDR "module m torch.nn.ReLU\ngraph\n", BPCC_ERR_PARSE, 2, 10, "expected ':', found 'torch.nn.ReLU'"},
    {"duplicate module", HDR "module m : a.B\nmodule m : a.C\ngraph\n", BPCC_ERR_PARSE, 3, 8, "duplicate module 'm'"},
    {"duplicate tensor", HDR "weights \"w.st\"\nmodule m : a.B\n  param w : f32[1]\n  buffer w : f32[1]\ngraph\n", BPCC_ERR_PARSE, 5, 10, "duplicate tensor 'w' in module 'm'"},
    {"dotted tensor name", HDR "weights \"w.st\"\nmodule m : a.B\n  param a.b : f32[1]\ngraph\n", BPCC_ERR_PARSE, 4, 9, "must be a plain attribute name"},
    {"tensor type missing", HDR "module m : a.B\n  param w\ngraph\n", BPCC_ERR_PARSE, 3, 10, "expected ':', found end of line"},
    {"module attrs with node", HDR "module m : a.B {x: %q}\ngraph\n", BPCC_ERR_PARSE, 2, 20, "use of undefined node"},
    {"empty weights name", HDR "weights \"\"\ngraph\n", BPCC_ERR_PARSE, 2, 9, "empty weights file name"},
    {"NUL byte", HDR "graph\n  %x = placeh\0lder x ()\n", BPCC_ERR_PARSE, 3, 14, "NUL byte"},
    {"empty scope path", GR "  %y = call_function f.g () @ \"\" : a.B\n" OUT, BPCC_ERR_PARSE, 4, 31, "the root scope is written by leaving '@' out"},
    {"scope without type", GR "  %y = call_function f.g () @ blk\n" OUT, BPCC_ERR_PARSE, 4, 34, "expected ':', found end of line"},
    {"space inside tensor type", GR "  %y = call_function f.g () : f32 [1]\n" OUT, BPCC_ERR_PARSE, 4, 34, "expected '[' right after element type"},
};

START_TEST(malformed_text_reports_line_and_col)
{
    const struct bad_case *c = &bad[_i];
    size_t len = strlen(c->text);
    if (strcmp(c->name, "NUL byte") == 0) len = strlen(HDR "graph\n  %x = placeh") + 1 + strlen("lder x ()\n");
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g = (struct bpcc_graph *)1;
    enum bpcc_status s = bpcc_graph_parse(c->text, len, "bad.bpcc", &g, &d);
    ck_assert_msg(s == c->status, "[%s] status %d, want %d (%s)", c->name, s, c->status, tu_msg(&d));
    ck_assert_ptr_null(g);
    ck_assert_msg(d.n_entries > 0, "[%s] no message", c->name);
    ck_assert_msg(d.entries[0].line == c->line && d.entries[0].col == c->col,
                  "[%s] at %u:%u, want %u:%u (%s)", c->name, d.entries[0].line, d.entries[0].col,
                  c->line, c->col, d.entries[0].msg);
    ck_assert_msg(strstr(d.entries[0].msg, c->msg), "[%s] message '%s' lacks '%s'", c->name,
                  d.entries[0].msg, c->msg);
    ck_assert_str_eq(d.entries[0].file, "bad.bpcc");
}
END_TEST

START_TEST(duplicates_point_back_to_the_first_definition)
{
    const char *t = GR "  %y = call_function f.g ()\n  %y = call_function f.h ()\n" OUT;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_parse(t, strlen(t), "dup.bpcc", &g, &d), BPCC_ERR_PARSE);
    ck_assert(d.entries[0].has_note);
    ck_assert_uint_eq(d.entries[0].note_line, 4);
    ck_assert_uint_eq(d.entries[0].note_col, 3);
    char buf[1024];
    bpcc_diag_format(&d.entries[0], buf, sizeof buf);
    ck_assert_str_eq(buf, "dup.bpcc:5:3: error: duplicate node name '%y'\n"
                          "dup.bpcc:4:3: note: '%y' was first defined here\n");
}
END_TEST

START_TEST(printer_quotes_what_is_not_a_bare_name)
{
    struct bpcc_graph *g;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_graph_new(&g, &d), BPCC_OK);
    struct bpcc_value args;
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 1, &args), BPCC_OK);
    ck_assert_int_eq(bpcc_value_str_new(g, BPCC_VAL_STR, "line\nbreak \x7f", &args.u.seq.items[0]),
                     BPCC_OK);
    struct bpcc_node *x, *o;
    ck_assert_int_eq(bpcc_graph_create_node(g, BPCC_NODE_CALL_FUNCTION, NULL, "<lambda>", &args,
                                            NULL, &x, &d), BPCC_OK);
    struct bpcc_value oa;
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 1, &oa), BPCC_OK);
    oa.u.seq.items[0] = bpcc_value_node(x);
    ck_assert_int_eq(bpcc_graph_create_node(g, BPCC_NODE_OUTPUT, NULL, "output", &oa, NULL, &o, &d),
                     BPCC_OK);
    char *text;
    ck_assert_int_eq(bpcc_graph_print(g, NULL, &text, NULL, &d), BPCC_OK);
    ck_assert_str_eq(text, "bpcc-model 1\n\ngraph\n"
                           "  %_lambda_ = call_function \"<lambda>\" (\"line\\nbreak \\x7f\",)\n"
                           "  %output = output output (%_lambda_,)\n");
    struct bpcc_graph *back;
    ck_assert_int_eq(bpcc_graph_parse(text, strlen(text), NULL, &back, &d), BPCC_OK);
    ck_assert_str_eq(bpcc_node_target(bpcc_graph_first(back)), "<lambda>");
    bpcc_graph_free(back);
    bpcc_free(text);
    bpcc_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("text");
    TCase *tc = tcase_create("text");
    tcase_set_timeout(tc, 60); /* Check's default, 4 s, is too short on a loaded machine under ASan */
    tcase_add_loop_test(tc, fixtures_round_trip_byte_for_byte, 0, (int)BPCC_ARRAY_LEN(fixtures));
    tcase_add_test(tc, free_form_text_prints_canonically);
    tcase_add_test(tc, long_literals_keep_every_item);
    tcase_add_test(tc, parsed_values_have_the_right_kinds);
    tcase_add_loop_test(tc, malformed_text_reports_line_and_col, 0, (int)BPCC_ARRAY_LEN(bad));
    tcase_add_test(tc, duplicates_point_back_to_the_first_definition);
    tcase_add_test(tc, printer_quotes_what_is_not_a_bare_name);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
