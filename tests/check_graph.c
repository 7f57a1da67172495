/*
** check_graph.c — the graph API: naming, use-def, mutation, ordering, verification, modules.
*/
#include "testutil.h"
#include "ir/ir.h" /* bpcc_node_module */

static struct bpcc_graph *g;
static struct bpcc_diag d;

static void setup(void)
{
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_graph_new(&g, &d), BPCC_OK);
}

static void teardown(void) { bpcc_graph_free(g); }

/* args tuple of node references */
static struct bpcc_value refs(int n, ...)
{
    struct bpcc_value t;
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, (uint32_t)n, &t), BPCC_OK);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) t.u.seq.items[i] = bpcc_value_node(va_arg(ap, struct bpcc_node *));
    va_end(ap);
    return t;
}

static struct bpcc_node *mk(enum bpcc_node_kind k, const char *name, const char *target,
                            struct bpcc_value args)
{
    struct bpcc_node *n;
    ck_assert_int_eq(bpcc_graph_create_node(g, k, name, target, &args, NULL, &n, &d), BPCC_OK);
    return n;
}

static struct bpcc_node *placeholder(const char *name)
{
    struct bpcc_value none = {.kind = BPCC_VAL_TUPLE};
    return mk(BPCC_NODE_PLACEHOLDER, name, name, none);
}

START_TEST(names_are_unique_fx_style)
{
    struct bpcc_node *x = placeholder("x");
    struct bpcc_value a = refs(2, x, x);
    struct bpcc_node *n1 = mk(BPCC_NODE_CALL_FUNCTION, NULL, "operator.add", a);
    struct bpcc_node *n2 = mk(BPCC_NODE_CALL_FUNCTION, NULL, "operator.add", a);
    struct bpcc_node *n3 = mk(BPCC_NODE_CALL_FUNCTION, "add", "operator.add", a);
    struct bpcc_node *n4 = mk(BPCC_NODE_CALL_FUNCTION, "add_1", "operator.add", a);
    struct bpcc_node *m1 = mk(BPCC_NODE_CALL_MODULE, NULL, "layer1.0.conv1", a);
    struct bpcc_node *bad = mk(BPCC_NODE_CALL_FUNCTION, "has space", "f.g", a);
    struct bpcc_node *digit = mk(BPCC_NODE_CALL_METHOD, NULL, "1view", a);
    ck_assert_str_eq(bpcc_node_name(n1), "add");
    ck_assert_str_eq(bpcc_node_name(n2), "add_1");
    ck_assert_str_eq(bpcc_node_name(n3), "add_2");
    ck_assert_str_eq(bpcc_node_name(n4), "add_3");
    ck_assert_str_eq(bpcc_node_name(m1), "layer1_0_conv1");
    ck_assert_str_eq(bpcc_node_name(bad), "has_space");
    ck_assert_str_eq(bpcc_node_name(digit), "_1view");
    ck_assert_ptr_eq(bpcc_graph_find_node(g, "add_2"), n3);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 8);
    /* ids are distinct and stable */
    ck_assert_uint_ne(bpcc_node_id(n1), bpcc_node_id(n2));
}
END_TEST

START_TEST(users_are_distinct_and_in_first_use_order)
{
    struct bpcc_node *x = placeholder("x"), *y = placeholder("y");
    struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "operator.add", refs(2, x, x));
    struct bpcc_node *b = mk(BPCC_NODE_CALL_FUNCTION, "b", "operator.mul", refs(2, y, x));
    ck_assert_uint_eq(bpcc_node_n_users(x), 2);
    ck_assert_ptr_eq(bpcc_node_user(x, 0), a);
    ck_assert_ptr_eq(bpcc_node_user(x, 1), b);
    ck_assert_ptr_null(bpcc_node_user(x, 2));
    ck_assert_uint_eq(bpcc_node_n_users(y), 1);
    /* kwargs count as uses too */
    struct bpcc_value kw;
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_DICT, 1, &kw), BPCC_OK);
    kw.u.seq.keys[0] = bpcc_graph_intern(g, "other");
    kw.u.seq.items[0] = bpcc_value_node(a);
    struct bpcc_value args = refs(1, b);
    struct bpcc_node *c;
    ck_assert_int_eq(bpcc_graph_create_node(g, BPCC_NODE_CALL_FUNCTION, "c", "f.g", &args, &kw, &c, &d),
                     BPCC_OK);
    ck_assert_uint_eq(bpcc_node_n_users(a), 1);
    ck_assert_ptr_eq(bpcc_node_user(a, 0), c);
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, c));
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
}
END_TEST

START_TEST(replace_all_uses_moves_every_use)
{
    struct bpcc_node *x = placeholder("x"), *y = placeholder("y");
    struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "operator.add", refs(2, x, x));
    struct bpcc_node *b = mk(BPCC_NODE_CALL_FUNCTION, "b", "operator.mul", refs(2, a, y));
    struct bpcc_node *o = mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, x));
    uint32_t changed;
    ck_assert_int_eq(bpcc_node_replace_all_uses(x, y, &changed, &d), BPCC_OK);
    ck_assert_uint_eq(changed, 2);
    ck_assert_uint_eq(bpcc_node_n_users(x), 0);
    ck_assert_uint_eq(bpcc_node_n_users(y), 3); /* b, a, output */
    ck_assert_ptr_eq(bpcc_value_item(bpcc_node_args(a), 1)->u.node, y);
    ck_assert_ptr_eq(bpcc_value_item(bpcc_node_args(o), 0)->u.node, y);
    (void)b;
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    /* now x can go */
    ck_assert_int_eq(bpcc_node_erase(x, &d), BPCC_OK);
    ck_assert_ptr_null(bpcc_graph_find_node(g, "x"));
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
}
END_TEST

START_TEST(erase_refuses_nodes_with_users)
{
    struct bpcc_node *x = placeholder("x");
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, x));
    ck_assert_int_eq(bpcc_node_erase(x, &d), BPCC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "still has 1 user"));
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 2);
    /* a name stays reserved after erasing */
    struct bpcc_node *t = placeholder("t");
    ck_assert_int_eq(bpcc_node_erase(t, &d), BPCC_OK);
    ck_assert_str_eq(bpcc_node_name(placeholder("t")), "t_1");
}
END_TEST

/* An erased node's name stays reserved and unfindable through a failed pass, for nodes erased
** before the pass and during it; the nodes the pass erased come back as they were (the same
** pointers). */
START_TEST(erased_names_stay_reserved_through_a_restore)
{
    struct bpcc_node *x = placeholder("x"), *y = placeholder("y");
    placeholder("z");
    ck_assert_int_eq(bpcc_node_erase(x, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_erase(y, &d), BPCC_OK);
    ck_assert_ptr_null(bpcc_graph_find_node(g, "y"));
    ck_assert_str_eq(bpcc_node_name(placeholder("y")), "y_1");
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */
    ck_assert_ptr_null(bpcc_graph_find_node(g, "x"));
    ck_assert_ptr_null(bpcc_graph_find_node(g, "y_1"));
    struct bpcc_node *ry = bpcc_graph_find_node(g, "y");
    ck_assert_ptr_eq(ry, y);
    ck_assert_str_eq(bpcc_node_name(ry), "y");
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 2);
    ck_assert_str_eq(bpcc_node_name(placeholder("x")), "x_1");
    /* y_1 was given during the failed pass: free again */
    ck_assert_str_eq(bpcc_node_name(placeholder("y_1")), "y_1");
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, ry));
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
}
END_TEST

/* A failed pass puts back a long users array as it was, in order (its record is longer than a
** packed undo record holds: 700 users of 16 bytes), and the uses the pass added and removed. */
START_TEST(a_failed_pass_gives_a_node_its_many_users_back_in_order)
{
    struct bpcc_node *x = placeholder("x"), *users[700];
    for (int i = 0; i < 700; i++) users[i] = mk(BPCC_NODE_CALL_FUNCTION, NULL, "torch.relu", refs(1, x));
    struct bpcc_node *y = placeholder("y");
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_erase(users[3], &d), BPCC_OK); /* moves 696 entries down */
    ck_assert_int_eq(bpcc_node_replace_input(users[500], x, y, &d), BPCC_OK);
    mk(BPCC_NODE_CALL_FUNCTION, NULL, "torch.relu", refs(1, x));
    ck_assert_uint_eq(bpcc_node_n_users(x), 699);
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH);
    ck_assert_uint_eq(bpcc_node_n_users(x), 700);
    for (uint32_t i = 0; i < 700; i++) ck_assert_ptr_eq(bpcc_node_user(x, i), users[i]);
    ck_assert_uint_eq(bpcc_node_n_users(y), 0);
    ck_assert_ptr_eq(bpcc_value_item(bpcc_node_args(users[500]), 0)->u.node, x);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 702);
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, users[3]));
    ck_assert_msg(bpcc_graph_verify(g, &d) == BPCC_OK, "%s", tu_msg(&d));
}
END_TEST

/* A failed pass frees the names it gave; the ids it handed out are handed out again, and the next
** failed pass must tell the nodes that have them from its own. */
START_TEST(names_come_back_through_two_restores)
{
    struct bpcc_node *x = placeholder("x");
    placeholder("z");
    ck_assert_int_eq(bpcc_node_erase(x, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    placeholder("a"); /* made by a pass that fails */
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */
    ck_assert_ptr_null(bpcc_graph_find_node(g, "a"));
    struct bpcc_node *b = placeholder("b"); /* takes the id `a` had */
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    struct bpcc_node *z = bpcc_graph_find_node(g, "z");
    ck_assert_int_eq(bpcc_node_erase(z, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_erase(b, &d), BPCC_OK);
    placeholder("w");
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */
    ck_assert_ptr_nonnull(bpcc_graph_find_node(g, "z"));
    ck_assert_ptr_nonnull(bpcc_graph_find_node(g, "b"));
    ck_assert_ptr_null(bpcc_graph_find_node(g, "w"));
    ck_assert_ptr_null(bpcc_graph_find_node(g, "x"));
    ck_assert_ptr_null(bpcc_graph_find_node(g, "a"));
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 2);
    ck_assert_str_eq(bpcc_node_name(placeholder("x")), "x_1"); /* still reserved */
    ck_assert_str_eq(bpcc_node_name(placeholder("a")), "a");   /* free */
    ck_assert_str_eq(bpcc_node_name(placeholder("w")), "w");
    ck_assert_str_eq(bpcc_node_name(placeholder("b")), "b_1");
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, bpcc_graph_find_node(g, "z")));
    ck_assert_msg(bpcc_graph_verify(g, &d) == BPCC_OK, "%s", tu_msg(&d));
}
END_TEST

START_TEST(set_args_updates_use_def)
{
    struct bpcc_node *x = placeholder("x"), *y = placeholder("y");
    struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "torch.relu", refs(1, x));
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, a));
    struct bpcc_value na = refs(2, y, y);
    ck_assert_int_eq(bpcc_node_set_args(a, &na, NULL, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_node_n_users(x), 0);
    ck_assert_uint_eq(bpcc_node_n_users(y), 1);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    /* args must be a tuple */
    struct bpcc_value bad = bpcc_value_int(3);
    ck_assert_int_eq(bpcc_node_set_args(a, &bad, NULL, &d), BPCC_ERR_INVALID);
    ck_assert_uint_eq(bpcc_node_n_users(y), 1);
}
END_TEST

/* kwargs, metadata and scope, which most nodes lack (the node holds a pointer, NULL for none): the
** accessors give an empty dict and none, kwargs' nodes are uses like args', setting them empty
** gives the node none again, and a failed pass gives each back. */
START_TEST(kwargs_meta_and_scope_are_kept_only_where_present)
{
    struct bpcc_node *x = placeholder("x"), *y = placeholder("y");
    struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "torch.add", refs(1, x));
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, a));
    ck_assert(bpcc_node_kwargs(a)->kind == BPCC_VAL_DICT && bpcc_node_kwargs(a)->n == 0);
    ck_assert_int_eq(bpcc_node_meta(a)->kind, BPCC_VAL_NONE);
    const char *type = "?";
    ck_assert_ptr_null(bpcc_node_scope(a, &type));
    ck_assert_ptr_null(type);
    ck_assert_ptr_null(a->kwargs);
    /* kwargs {other: y}: a use of y */
    const char *key = "other";
    struct bpcc_value item = bpcc_value_node(y), kw = {.kind = BPCC_VAL_DICT, .n = 1, .u.seq = {&item, &key}};
    ck_assert_int_eq(bpcc_node_set_args(a, NULL, &kw, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_node_n_users(y), 1);
    ck_assert_ptr_eq(bpcc_value_get(bpcc_node_kwargs(a), "other")->u.node, y);
    int64_t dims[] = {2, 3};
    struct bpcc_value tt = {.kind = BPCC_VAL_TTYPE, .n = 2, .u.ttype = {BPCC_DTYPE_F32, dims}};
    ck_assert_int_eq(bpcc_node_set_meta(a, &tt, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_set_scope(a, "blk", "torch.nn.Module", &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    /* a failed pass that empties all three */
    struct bpcc_value empty = {.kind = BPCC_VAL_DICT}, none = bpcc_value_none();
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_set_args(a, NULL, &empty, &d), BPCC_OK);
    ck_assert_ptr_null(a->kwargs);
    ck_assert_uint_eq(bpcc_node_n_users(y), 0);
    ck_assert_int_eq(bpcc_node_set_meta(a, &none, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_set_scope(a, NULL, NULL, &d), BPCC_OK);
    ck_assert_ptr_null(bpcc_node_scope(a, NULL));
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH);
    ck_assert_uint_eq(bpcc_node_n_users(y), 1);
    ck_assert_ptr_eq(bpcc_value_get(bpcc_node_kwargs(a), "other")->u.node, y);
    ck_assert(bpcc_node_meta(a)->kind == BPCC_VAL_TTYPE && bpcc_node_meta(a)->u.ttype.dims[1] == 3);
    ck_assert_str_eq(bpcc_node_scope(a, &type), "blk");
    ck_assert_str_eq(type, "torch.nn.Module");
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    /* emptied for good: none held, the use gone */
    ck_assert_int_eq(bpcc_node_set_args(a, NULL, &empty, &d), BPCC_OK);
    ck_assert_ptr_null(a->kwargs);
    ck_assert_uint_eq(bpcc_node_n_users(y), 0);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
}
END_TEST

/* With rollback off, the nodes a pass erased give their memory to the nodes made after it ends
** (not before: the pass may still hold them), with their users arrays; their names stay reserved
** and find nothing, also once the memory is a node of another name. With rollback on, an erased
** node's memory stays its own. */
START_TEST(erased_nodes_memory_is_used_again_after_the_pass_with_rollback_off)
{
    for (int rollback = 0; rollback < 2; rollback++) {
        struct bpcc_graph *h = g;
        if (rollback) ck_assert_int_eq(bpcc_graph_new(&g, &d), BPCC_OK);
        bpcc_graph_set_rollback(g, rollback);
        struct bpcc_node *x = placeholder("x");
        struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "torch.relu", refs(1, x));
        struct bpcc_node *b = mk(BPCC_NODE_CALL_FUNCTION, "b", "torch.relu", refs(1, a));
        struct bpcc_node *out = mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, b));
        ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_node_replace_all_uses(b, a, NULL, &d), BPCC_OK);
        struct user_entry *b_users = b->users; /* out's entry, moved to a: empty now */
        ck_assert_ptr_nonnull(b_users);
        ck_assert_int_eq(bpcc_node_erase(b, &d), BPCC_OK);
        struct bpcc_node *during = mk(BPCC_NODE_CALL_FUNCTION, "c", "torch.sigmoid", refs(1, a));
        ck_assert_ptr_ne(during, b); /* erased in the pass running: still the pass's */
        bpcc_node_move_before(during, out);
        ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_OK, &d), BPCC_OK);
        if (rollback) { /* erased with rollback on: kept, also through a pass with it off */
            bpcc_graph_set_rollback(g, false);
            ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
            ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_OK, &d), BPCC_OK);
        }
        struct bpcc_node *after = mk(BPCC_NODE_CALL_FUNCTION, "b", "torch.sigmoid", refs(1, during));
        bpcc_node_move_before(after, out);
        if (rollback) {
            ck_assert_ptr_ne(after, b);
            ck_assert_str_eq(bpcc_node_name(b), "b"); /* the erased node is as it was */
        } else {
            ck_assert_ptr_eq(after, b); /* b's memory */
            ck_assert_ptr_eq(after->users, b_users); /* and its users array */
        }
        ck_assert_str_eq(bpcc_node_name(after), "b_1"); /* b stays taken */
        ck_assert_ptr_null(bpcc_graph_find_node(g, "b"));
        ck_assert_ptr_eq(bpcc_graph_find_node(g, "b_1"), after);
        ck_assert_int_eq(bpcc_node_kind(after), BPCC_NODE_CALL_FUNCTION);
        ck_assert_str_eq(bpcc_node_target(after), "torch.sigmoid");
        ck_assert_uint_eq(bpcc_node_n_users(after), 0);
        ck_assert_ptr_null(bpcc_node_scope(after, NULL));
        ck_assert_int_eq(bpcc_node_replace_input(out, a, after, &d), BPCC_OK);
        ck_assert_uint_eq(bpcc_node_n_users(after), 1);
        ck_assert_ptr_eq(bpcc_node_user(after, 0), out);
        ck_assert_ptr_eq(bpcc_node_prev(out), after);
        ck_assert_uint_eq(bpcc_graph_n_nodes(g), 5);
        ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
        if (rollback) {
            bpcc_graph_free(g);
            g = h;
        }
    }
}
END_TEST

/* A node's first users array has one entry (most nodes have one user); with rollback off an array
** outgrown goes back to the arena and is the next allocation of its size, with rollback on it is
** kept (a failed pass puts it back). */
START_TEST(a_users_array_starts_with_one_entry_and_is_given_back_when_outgrown_without_rollback)
{
    for (int rollback = 0; rollback < 2; rollback++) {
        struct bpcc_graph *h = g;
        ck_assert_int_eq(bpcc_graph_new(&g, &d), BPCC_OK);
        bpcc_graph_set_rollback(g, rollback);
        struct bpcc_node *x = placeholder("x"), *y = placeholder("y");
        struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "torch.relu", refs(1, x));
        ck_assert_uint_eq(x->cap_users, 1);
        struct user_entry *first = x->users;
        ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
        struct bpcc_node *b = mk(BPCC_NODE_CALL_FUNCTION, "b", "torch.sigmoid", refs(2, x, x));
        ck_assert_uint_eq(x->cap_users, 2);
        ck_assert_ptr_ne(x->users, first);
        ck_assert_uint_eq(bpcc_node_n_users(x), 2);
        ck_assert_ptr_eq(bpcc_node_user(x, 0), a);
        ck_assert_ptr_eq(bpcc_node_user(x, 1), b);
        ck_assert_uint_eq(x->users[1].count, 2);
        void *next = bpcc_arena_alloc(&g->arena, sizeof *first, _Alignof(struct user_entry));
        if (rollback) ck_assert_ptr_ne(next, first);
        else ck_assert_ptr_eq(next, first);
        /* room for x's two users at once: y's array from none to two entries */
        ck_assert_int_eq(bpcc_node_replace_all_uses(x, y, NULL, &d), BPCC_OK);
        ck_assert_uint_eq(y->cap_users, 2);
        ck_assert_uint_eq(bpcc_node_n_users(x), 0);
        ck_assert_uint_eq(bpcc_node_n_users(y), 2);
        ck_assert_int_eq(bpcc_graph_end_pass(g, rollback ? BPCC_ERR_INVALID : BPCC_OK, &d), rollback ? BPCC_ERR_INVALID : BPCC_OK);
        if (rollback) { /* the pass failed: x's first array and its one user are back */
            ck_assert_ptr_eq(x->users, first);
            ck_assert_uint_eq(bpcc_node_n_users(x), 1);
            ck_assert_ptr_eq(bpcc_node_user(x, 0), a);
            ck_assert_uint_eq(bpcc_node_n_users(y), 0);
        }
        mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, a));
        ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
        bpcc_graph_free(g);
        g = h;
    }
}
END_TEST

/* A node remade in place (convert's dequantize node, in its observer's place) keeps its users and
** its place, takes its new name as a new node would, and leaves its old name reserved without
** answering to it; a failed pass gives the node back as it was. */
START_TEST(a_node_remade_in_place_keeps_its_users_and_reserves_its_old_name)
{
    struct bpcc_module *m;
    ck_assert_int_eq(bpcc_graph_add_module(g, "obs", "torch.nn.Identity", &m, &d), BPCC_OK);
    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *obs = mk(BPCC_NODE_CALL_MODULE, "obs", "obs", refs(1, x));
    struct bpcc_node *u = mk(BPCC_NODE_CALL_FUNCTION, "u", "operator.add", refs(2, obs, obs));
    struct bpcc_node *w = mk(BPCC_NODE_CALL_FUNCTION, "w", "operator.add", refs(2, u, obs));
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, w));
    ck_assert_ptr_eq(bpcc_node_module(obs), m);
    /* every field the remake replaces has a value of its own, to be given back */
    const char *key = "inplace";
    struct bpcc_value flag = {.kind = BPCC_VAL_BOOL, .u.b = true};
    struct bpcc_value kw = {.kind = BPCC_VAL_DICT, .n = 1, .u.seq = {&flag, &key}};
    ck_assert_int_eq(bpcc_node_set_args(obs, NULL, &kw, &d), BPCC_OK);
    int64_t dims[] = {2, 3};
    struct bpcc_value tt = {.kind = BPCC_VAL_TTYPE, .n = 2, .u.ttype = {BPCC_DTYPE_F32, dims}};
    ck_assert_int_eq(bpcc_node_set_meta(obs, &tt, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_set_scope(obs, "blk", "torch.nn.Module", &d), BPCC_OK);
    obs->src_line = 7;
    obs->src_col = 3;
    for (int failed = 1; failed >= 0; failed--) {
        ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
        struct bpcc_node *q = mk(BPCC_NODE_CALL_FUNCTION, NULL, "torch.quantize_per_tensor", refs(1, x));
        bpcc_node_move_before(q, obs);
        struct bpcc_value a = refs(1, q);
        ck_assert_int_eq(bpcc_node_remake(obs, BPCC_NODE_CALL_METHOD, "dequantize", "dequantize", &a, &d), BPCC_OK);
        ck_assert_str_eq(bpcc_node_name(obs), "dequantize");
        ck_assert_int_eq(bpcc_node_kind(obs), BPCC_NODE_CALL_METHOD);
        ck_assert_ptr_null(bpcc_node_module(obs));
        ck_assert_ptr_eq(bpcc_graph_find_node(g, "dequantize"), obs);
        ck_assert_ptr_null(bpcc_graph_find_node(g, "obs"));
        ck_assert_uint_eq(bpcc_node_n_users(obs), 2);
        ck_assert_ptr_eq(bpcc_node_user(obs, 0), u);
        ck_assert_ptr_eq(bpcc_node_user(obs, 1), w);
        ck_assert_uint_eq(bpcc_node_n_users(x), 1);
        ck_assert_ptr_eq(bpcc_node_user(x, 0), q);
        ck_assert_ptr_eq(bpcc_node_prev(obs), q);
        ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
        if (failed) {
            ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH);
            ck_assert_str_eq(bpcc_node_name(obs), "obs");
            ck_assert_int_eq(bpcc_node_kind(obs), BPCC_NODE_CALL_MODULE);
            ck_assert_ptr_eq(bpcc_node_module(obs), m);
            ck_assert_str_eq(bpcc_node_target(obs), "obs");
            ck_assert_uint_eq(bpcc_node_args(obs)->n, 1);
            ck_assert_ptr_eq(bpcc_node_args(obs)->u.seq.items[0].u.node, x);
            ck_assert(bpcc_value_get(bpcc_node_kwargs(obs), "inplace")->u.b);
            ck_assert(bpcc_value_equal(bpcc_node_meta(obs), &tt));
            const char *type;
            ck_assert_str_eq(bpcc_node_scope(obs, &type), "blk");
            ck_assert_str_eq(type, "torch.nn.Module");
            ck_assert_uint_eq(obs->src_line, 7);
            ck_assert_uint_eq(obs->src_col, 3);
            ck_assert(!obs->dead);
            ck_assert_ptr_eq(bpcc_graph_find_node(g, "obs"), obs);
            ck_assert_ptr_null(bpcc_graph_find_node(g, "dequantize"));
            ck_assert_ptr_eq(bpcc_node_user(x, 0), obs);
            ck_assert_uint_eq(bpcc_node_n_users(x), 1);
            ck_assert_ptr_eq(bpcc_node_prev(obs), x);
            ck_assert_uint_eq(bpcc_graph_n_nodes(g), 5);
            ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
        } else {
            ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_OK, &d), BPCC_OK);
        }
    }
    /* the old name stays taken, as an erased node's does */
    ck_assert_str_eq(bpcc_node_name(mk(BPCC_NODE_CALL_FUNCTION, "obs", "torch.relu", refs(1, x))), "obs_1");
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 7);
}
END_TEST

START_TEST(references_to_other_graphs_are_refused)
{
    struct bpcc_graph *other;
    ck_assert_int_eq(bpcc_graph_new(&other, &d), BPCC_OK);
    struct bpcc_value none = {.kind = BPCC_VAL_TUPLE};
    struct bpcc_node *foreign;
    ck_assert_int_eq(bpcc_graph_create_node(other, BPCC_NODE_PLACEHOLDER, "x", "x", &none, NULL,
                                            &foreign, &d), BPCC_OK);
    struct bpcc_value a = refs(1, foreign);
    struct bpcc_node *n;
    ck_assert_int_eq(bpcc_graph_create_node(g, BPCC_NODE_CALL_FUNCTION, NULL, "torch.relu", &a,
                                            NULL, &n, &d), BPCC_ERR_INVALID);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 0);
    bpcc_graph_free(other);
}
END_TEST

START_TEST(move_and_topo_sort_restore_order)
{
    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "torch.relu", refs(1, x));
    struct bpcc_node *b = mk(BPCC_NODE_CALL_FUNCTION, "b", "torch.relu", refs(1, a));
    struct bpcc_node *o = mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, b));
    bpcc_node_move_before(b, x); /* b x a output: b used before a is defined */
    ck_assert_ptr_eq(bpcc_graph_first(g), b);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "uses 'a' before it is defined"));
    bpcc_diag_init(&d);
    bpcc_node_move_after(o, x); /* output not last either */
    ck_assert_int_eq(bpcc_graph_topo_sort(g, &d), BPCC_OK);
    const char *want[] = {"x", "a", "b", "output"};
    int i = 0;
    for (struct bpcc_node *n = bpcc_graph_first(g); n; n = bpcc_node_next(n), i++)
        ck_assert_str_eq(bpcc_node_name(n), want[i]);
    ck_assert_int_eq(i, 4);
    ck_assert_ptr_eq(bpcc_graph_last(g), o);
    ck_assert_ptr_eq(bpcc_node_prev(o), b);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
}
END_TEST

START_TEST(topo_sort_reports_cycles)
{
    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "torch.relu", refs(1, x));
    struct bpcc_node *b = mk(BPCC_NODE_CALL_FUNCTION, "b", "torch.relu", refs(1, a));
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, b));
    struct bpcc_value cyc = refs(1, b);
    ck_assert_int_eq(bpcc_node_set_args(a, &cyc, NULL, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_topo_sort(g, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "cycle"));
    /* order untouched on failure */
    ck_assert_ptr_eq(bpcc_graph_first(g), x);
}
END_TEST

START_TEST(topo_sort_handles_a_long_chain_without_recursion)
{
    struct bpcc_node *prev = placeholder("x");
    struct bpcc_node *first = NULL;
    for (int i = 0; i < 200000; i++) {
        prev = mk(BPCC_NODE_CALL_FUNCTION, NULL, "torch.relu", refs(1, prev));
        if (!first) first = prev;
    }
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, prev));
    /* reverse worst case: put the last op first */
    bpcc_node_move_before(prev, bpcc_graph_first(g));
    ck_assert_int_eq(bpcc_graph_topo_sort(g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_node_next(bpcc_graph_first(g)), first);
}
END_TEST

START_TEST(verify_reports_each_broken_invariant)
{
    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *m = mk(BPCC_NODE_CALL_MODULE, "m", "missing.module", refs(1, x));
    struct bpcc_node *ga = mk(BPCC_NODE_GET_ATTR, "ga", "nowhere.weight", refs(0));
    struct bpcc_node *o1 = mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, m));
    mk(BPCC_NODE_OUTPUT, "output2", "output", refs(1, ga));
    (void)o1;
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_ERR_GRAPH);
    const char *expect[] = {"calls module 'missing.module', which is not defined",
                            "reads attribute 'nowhere.weight'", "must be the last node",
                            "exactly one output node, it has 2"};
    for (size_t i = 0; i < BPCC_ARRAY_LEN(expect); i++) {
        bool found = false;
        for (uint32_t k = 0; k < d.n_entries; k++)
            if (strstr(d.entries[k].msg, expect[i])) found = true;
        ck_assert_msg(found, "no message '%s'", expect[i]);
    }
}
END_TEST

START_TEST(verify_resolves_modules_tensors_and_attributes)
{
    struct bpcc_module *mod, *root;
    ck_assert_int_eq(bpcc_graph_add_module(g, "layer.conv", "torch.nn.Conv2d", &mod, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "", "torch.fx.GraphModule", &root, &d), BPCC_OK);
    struct bpcc_tensor *t;
    int64_t dims[] = {2, 3};
    ck_assert_int_eq(bpcc_tensor_new(g, BPCC_DTYPE_F32, 2, dims, &t, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_tensor_nbytes(t), 24);
    ck_assert_uint_eq(bpcc_tensor_numel(t), 6);
    ck_assert_ptr_nonnull(bpcc_tensor_data(t));
    ck_assert_int_eq(bpcc_module_set_tensor(mod, "weight", BPCC_TENSOR_PARAM, t, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_set_tensor(root, "const0", BPCC_TENSOR_CONSTANT, t, &d), BPCC_OK);
    struct bpcc_value three = bpcc_value_int(3);
    ck_assert_int_eq(bpcc_module_set_attr(mod, "in_channels", &three, &d), BPCC_OK);
    struct bpcc_value four = bpcc_value_int(4);
    ck_assert_int_eq(bpcc_module_set_attr(mod, "in_channels", &four, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_module_attrs(mod)->n, 1);
    ck_assert_int_eq(bpcc_module_attr(mod, "in_channels")->u.i, 4);

    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *c = mk(BPCC_NODE_CALL_MODULE, NULL, "layer.conv", refs(1, x));
    struct bpcc_node *w = mk(BPCC_NODE_GET_ATTR, NULL, "layer.conv.weight", refs(0));
    struct bpcc_node *ic = mk(BPCC_NODE_GET_ATTR, NULL, "layer.conv.in_channels", refs(0));
    struct bpcc_node *k = mk(BPCC_NODE_GET_ATTR, NULL, "const0", refs(0));
    struct bpcc_node *sub = mk(BPCC_NODE_GET_ATTR, NULL, "layer.conv", refs(0));
    struct bpcc_value outs;
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 1, &outs), BPCC_OK);
    outs.u.seq.items[0] = refs(5, c, w, ic, k, sub);
    mk(BPCC_NODE_OUTPUT, "output", "output", outs);
    ck_assert_msg(bpcc_graph_verify(g, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_int_eq(bpcc_graph_add_module(g, "layer.conv", "x.Y", NULL, &d), BPCC_ERR_INVALID);
    ck_assert_int_eq(bpcc_graph_remove_module(g, "layer.conv", &d), BPCC_OK);
    ck_assert_ptr_null(bpcc_graph_find_module(g, "layer.conv"));
    ck_assert_uint_eq(bpcc_graph_n_modules(g), 1);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_ERR_GRAPH);
}
END_TEST

/* A removed module is gone for every lookup (by name, as a get_attr's owner, its submodules too)
** and its name is free again, through a failed pass as well, for modules removed before the pass
** and during it. */
START_TEST(removed_modules_are_gone_through_a_restore)
{
    struct bpcc_module *a, *sub, *b;
    ck_assert_int_eq(bpcc_graph_add_module(g, "a", "torch.nn.Sequential", &a, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "a.0", "torch.nn.ReLU", &sub, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "b", "torch.nn.Tanh", &b, &d), BPCC_OK);
    const char *leaf;
    ck_assert_ptr_eq(bpcc_graph_attr_owner(g, "a.0.weight", &leaf), sub);
    ck_assert_int_eq(bpcc_graph_remove_module(g, "a", &d), BPCC_OK);
    ck_assert_ptr_null(bpcc_graph_find_module(g, "a"));
    ck_assert_ptr_null(bpcc_graph_find_module(g, "a.0"));
    ck_assert_ptr_null(bpcc_graph_attr_owner(g, "a.0.weight", &leaf));
    ck_assert_uint_eq(bpcc_graph_n_modules(g), 1);
    ck_assert_int_eq(bpcc_graph_remove_module(g, "a", &d), BPCC_ERR_INVALID);
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_remove_module(g, "b", &d), BPCC_OK);
    ck_assert_ptr_null(bpcc_graph_find_module(g, "b"));
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */
    ck_assert_ptr_null(bpcc_graph_find_module(g, "a"));
    ck_assert_ptr_null(bpcc_graph_find_module(g, "a.0"));
    struct bpcc_module *rb = bpcc_graph_find_module(g, "b");
    ck_assert_ptr_nonnull(rb);
    ck_assert_str_eq(bpcc_module_type(rb), "torch.nn.Tanh");
    ck_assert_uint_eq(bpcc_graph_n_modules(g), 1);
    /* the names are free: added again, found, and not twice */
    struct bpcc_module *a2, *sub2;
    ck_assert_int_eq(bpcc_graph_add_module(g, "a", "torch.nn.Sequential", &a2, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "a.0", "torch.nn.GELU", &sub2, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "a.0"), sub2);
    ck_assert_ptr_eq(bpcc_graph_attr_owner(g, "a.0.weight", &leaf), sub2);
    ck_assert_ptr_eq(sub2->parent, a2);
    ck_assert_int_eq(bpcc_graph_add_module(g, "a.0", "torch.nn.ReLU", NULL, &d), BPCC_ERR_INVALID);
    ck_assert_int_eq(bpcc_graph_add_module(g, "b", "torch.nn.ReLU", NULL, &d), BPCC_ERR_INVALID);
    ck_assert_uint_eq(bpcc_graph_n_modules(g), 3);
}
END_TEST

/* Node and module names are two namespaces kept in one slot per name: a node and a module of one
** name are found apart, a name one kind has does not number the other's, and a failed pass gives
** each back as it was, also where the pass gave a name its second owner, replaced the module of a
** node's name, or made a module and the node that calls it under a new name (an observer). */
START_TEST(a_name_holds_its_node_and_its_module_apart_through_a_restore)
{
    struct bpcc_module *ma, *mb, *ma2, *mo, *mc;
    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *a = mk(BPCC_NODE_CALL_FUNCTION, "a", "torch.relu", refs(1, x)); /* the node first */
    ck_assert_int_eq(bpcc_graph_add_module(g, "a", "torch.nn.ReLU", &ma, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "b", "torch.nn.Tanh", &mb, &d), BPCC_OK); /* the module first */
    struct bpcc_node *b = mk(BPCC_NODE_CALL_MODULE, "b", "b", refs(1, a));
    ck_assert_str_eq(bpcc_node_name(b), "b");
    ck_assert_int_eq(bpcc_graph_add_module(g, "b_1", "torch.nn.Tanh", NULL, &d), BPCC_OK);
    ck_assert_str_eq(bpcc_node_name(mk(BPCC_NODE_CALL_FUNCTION, "b", "torch.relu", refs(1, x))), "b_1");
    ck_assert_ptr_eq(bpcc_graph_find_node(g, "a"), a);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "a"), ma);
    ck_assert_ptr_eq(bpcc_graph_find_node(g, "b"), b);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "b"), mb);
    ck_assert_ptr_eq(bpcc_node_module(b), mb);
    ck_assert_int_eq(bpcc_graph_add_module(g, "a", "torch.nn.ReLU", NULL, &d), BPCC_ERR_INVALID);
    bpcc_diag_init(&d);

    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_remove_module(g, "a", &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_graph_find_node(g, "a"), a);
    ck_assert_int_eq(bpcc_graph_add_module(g, "a", "torch.nn.GELU", &ma2, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "obs", "torch.nn.Identity", &mo, &d), BPCC_OK);
    struct bpcc_node *o = mk(BPCC_NODE_CALL_MODULE, "obs", "obs", refs(1, b));
    ck_assert_str_eq(bpcc_node_name(o), "obs");
    ck_assert_ptr_eq(bpcc_node_module(o), mo);
    struct bpcc_node *c = mk(BPCC_NODE_CALL_FUNCTION, "c", "torch.relu", refs(1, o)); /* a node, then its name's module */
    ck_assert_int_eq(bpcc_graph_add_module(g, "c", "torch.nn.ReLU", &mc, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_graph_find_node(g, "c"), c);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "a"), ma2);
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */

    ck_assert_ptr_eq(bpcc_graph_find_node(g, "a"), a);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "a"), ma);
    ck_assert_str_eq(bpcc_module_type(ma), "torch.nn.ReLU");
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "b"), mb);
    ck_assert_ptr_eq(bpcc_node_module(b), mb);
    ck_assert_ptr_null(bpcc_graph_find_node(g, "obs"));
    ck_assert_ptr_null(bpcc_graph_find_module(g, "obs"));
    ck_assert_ptr_null(bpcc_graph_find_node(g, "c"));
    ck_assert_ptr_null(bpcc_graph_find_module(g, "c"));
    ck_assert_uint_eq(bpcc_graph_n_modules(g), 3);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 4);
    /* the pass's names are free again, each kind's apart: no obs_1, c_1 */
    ck_assert_str_eq(bpcc_node_name(mk(BPCC_NODE_CALL_MODULE, "obs", "b", refs(1, b))), "obs");
    ck_assert_int_eq(bpcc_graph_add_module(g, "c", "torch.nn.ReLU", &mc, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "c"), mc);
    ck_assert_int_eq(bpcc_graph_add_module(g, "obs", "torch.nn.Identity", &mo, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "obs"), mo);
    ck_assert_ptr_eq(bpcc_node_module(bpcc_graph_find_node(g, "obs")), mb);
    ck_assert_str_eq(bpcc_node_name(mk(BPCC_NODE_CALL_FUNCTION, "c", "torch.relu", refs(1, a))), "c");
    struct bpcc_node *obs = bpcc_graph_find_node(g, "obs");
    mk(BPCC_NODE_OUTPUT, "output", "output", refs(1, obs));
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
}
END_TEST

/* A module renamed leaves its old name and place in the tree for the new ones, a node calling it
** by its old name no longer finds it; a failed pass gives all back; an unlinked module renamed
** comes back to life; a taken name or a module with submodules is refused. */
START_TEST(a_renamed_module_moves_in_the_tree_and_a_failed_pass_moves_it_back)
{
    struct bpcc_module *a, *ab, *ac, *c, *e;
    ck_assert_int_eq(bpcc_graph_add_module(g, "a", "torch.nn.Sequential", &a, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "a.b", "torch.nn.ReLU", &ab, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "a.c", "torch.nn.Tanh", &ac, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "c", "torch.nn.Sequential", &c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "e", "torch.nn.GELU", &e, &d), BPCC_OK);
    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *n = mk(BPCC_NODE_CALL_MODULE, NULL, "a.b", refs(1, x));
    ck_assert_ptr_eq(bpcc_node_module(n), ab);
    ck_assert_int_eq(bpcc_graph_rename_module(g, ab, "c", &d), BPCC_ERR_INVALID); /* taken */
    ck_assert_int_eq(bpcc_graph_rename_module(g, a, "z", &d), BPCC_ERR_INVALID);  /* submodules */
    bpcc_diag_init(&d);
    for (int pass = 0; pass < 2; pass++) {
        ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_graph_rename_module(g, ab, "c.d", &d), BPCC_OK);
        ck_assert_ptr_null(bpcc_graph_find_module(g, "a.b"));
        ck_assert_ptr_eq(bpcc_graph_find_module(g, "c.d"), ab);
        ck_assert_str_eq(bpcc_module_name(ab), "c.d");
        ck_assert_ptr_null(bpcc_node_module(n)); /* its target names nothing now */
        ck_assert_ptr_eq(ab->parent, c);
        ck_assert_ptr_eq(c->first_child, ab);
        ck_assert_ptr_eq(a->first_child, ac);
        ck_assert_ptr_eq(a->last_child, ac);
        bpcc_graph_unlink_module(g, e); /* unlinked, then renamed: alive under its new name */
        ck_assert_int_eq(bpcc_graph_rename_module(g, e, "c.f", &d), BPCC_OK);
        ck_assert_ptr_eq(bpcc_graph_find_module(g, "c.f"), e);
        ck_assert_ptr_null(bpcc_graph_find_module(g, "e"));
        ck_assert_ptr_eq(c->last_child, e);
        ck_assert_ptr_eq(ab->next_sibling, e);
        if (pass == 1) break;
        ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */
        ck_assert_ptr_eq(bpcc_graph_find_module(g, "a.b"), ab);
        ck_assert_ptr_eq(bpcc_graph_find_module(g, "e"), e);
        ck_assert_ptr_null(bpcc_graph_find_module(g, "c.d"));
        ck_assert_ptr_null(bpcc_graph_find_module(g, "c.f"));
        ck_assert_str_eq(bpcc_module_name(ab), "a.b");
        ck_assert_ptr_eq(bpcc_node_module(n), ab);
        ck_assert_ptr_eq(ab->parent, a);
        ck_assert_ptr_eq(a->first_child, ab);
        ck_assert_ptr_eq(ab->next_sibling, ac);
        ck_assert_ptr_null(c->first_child);
        ck_assert(!e->dead);
        ck_assert_uint_eq(bpcc_graph_n_modules(g), 5);
    }
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_OK, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "c.d"), ab);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "c.f"), e);
    /* the old name is free for a new module */
    struct bpcc_module *nb;
    ck_assert_int_eq(bpcc_graph_add_module(g, "a.b", "torch.nn.ReLU", &nb, &d), BPCC_OK);
    ck_assert_ptr_eq(nb->parent, a);
}
END_TEST

/* The module a call_module node remembers is only used while it is the table's under the target. */
START_TEST(a_node_finds_the_module_its_target_names_now)
{
    struct bpcc_module *a, *b, *other;
    ck_assert_int_eq(bpcc_graph_add_module(g, "m", "torch.nn.ReLU", &a, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "n", "torch.nn.Identity", &other, &d), BPCC_OK);
    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *c = mk(BPCC_NODE_CALL_MODULE, NULL, "m", refs(1, x));
    ck_assert_ptr_eq(bpcc_node_module(c), a);
    /* removed: no module; another under the same name: that one */
    ck_assert_int_eq(bpcc_graph_remove_module(g, "m", &d), BPCC_OK);
    ck_assert_ptr_null(bpcc_node_module(c));
    ck_assert_int_eq(bpcc_graph_add_module(g, "m", "torch.nn.ReLU6", &b, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_node_module(c), b);
    /* retargeted */
    ck_assert_int_eq(bpcc_node_set_target(c, "n", &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_node_module(c), other);
    /* a node made before its module */
    struct bpcc_node *e = mk(BPCC_NODE_CALL_MODULE, NULL, "later", refs(1, x));
    ck_assert_ptr_null(bpcc_node_module(e));
    struct bpcc_module *later;
    ck_assert_int_eq(bpcc_graph_add_module(g, "later", "torch.nn.Tanh", &later, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_node_module(e), later);
    bpcc_graph_resolve_modules(g);
    ck_assert_ptr_eq(e->module, later);
}
END_TEST

/* A node takes its remembered module's type from itself while nothing has happened to the module:
** unlinking it or changing its type is seen at once by the one node that remembered it and by
** every node when more did, and a resolve makes them trust the module again. */
START_TEST(a_node_knows_when_its_remembered_module_changed)
{
    struct bpcc_module *m, *t, *again;
    ck_assert_int_eq(bpcc_graph_add_module(g, "m", "torch.nn.ReLU", &m, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "t", "torch.nn.Tanh", &t, &d), BPCC_OK);
    struct bpcc_node *x = placeholder("x");
    struct bpcc_node *c1 = mk(BPCC_NODE_CALL_MODULE, NULL, "m", refs(1, x));
    struct bpcc_node *c2 = mk(BPCC_NODE_CALL_MODULE, NULL, "m", refs(1, c1));
    struct bpcc_node *u = mk(BPCC_NODE_CALL_MODULE, NULL, "t", refs(1, c2));
    ck_assert_str_eq(bpcc_node_module_type(c1), "torch.nn.ReLU");
    ck_assert_str_eq(bpcc_node_module_type(c2), "torch.nn.ReLU");
    ck_assert_ptr_nonnull(c2->module_type); /* trusted */
    /* one caller: a new type is seen */
    bpcc_module_set_type(t, bpcc_graph_intern(g, "torch.nn.Hardtanh"));
    ck_assert_str_eq(bpcc_node_module_type(u), "torch.nn.Hardtanh");
    /* two callers: both see the module go, and its successor */
    ck_assert_int_eq(bpcc_graph_remove_module(g, "m", &d), BPCC_OK);
    ck_assert_ptr_null(bpcc_node_module_type(c1));
    ck_assert_ptr_null(bpcc_node_module_type(c2));
    ck_assert_ptr_null(bpcc_node_module(c2));
    ck_assert_int_eq(bpcc_graph_add_module(g, "m", "torch.nn.ReLU6", &again, &d), BPCC_OK);
    ck_assert_str_eq(bpcc_node_module_type(c1), "torch.nn.ReLU6");
    ck_assert_str_eq(bpcc_node_module_type(c2), "torch.nn.ReLU6");
    /* trusted again after a resolve; the type change of a module two nodes call reaches both */
    bpcc_graph_resolve_modules(g);
    ck_assert_ptr_eq(c1->module, again);
    ck_assert_ptr_nonnull(c1->module_type);
    ck_assert_ptr_nonnull(c2->module_type);
    bpcc_module_set_type(again, bpcc_graph_intern(g, "torch.nn.ELU"));
    ck_assert_str_eq(bpcc_node_module_type(c1), "torch.nn.ELU");
    ck_assert_str_eq(bpcc_node_module_type(c2), "torch.nn.ELU");
    /* after a failed pass the nodes find their modules as they were */
    bpcc_graph_resolve_modules(g);
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    bpcc_module_set_type(again, bpcc_graph_intern(g, "torch.nn.SiLU"));
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */
    bpcc_graph_resolve_modules(g);
    struct bpcc_node *r1 = bpcc_graph_find_node(g, bpcc_node_name(c1));
    ck_assert_ptr_eq(bpcc_node_module(r1), bpcc_graph_find_module(g, "m"));
    ck_assert_str_eq(bpcc_node_module_type(r1), "torch.nn.ELU");
}
END_TEST

/* Modules that share an attribute array (clones, observers of one spec) each see only their own
** changes: the array is copied by the first change to either, whichever it is. */
START_TEST(modules_sharing_attributes_keep_their_own_changes)
{
    struct bpcc_module *a, *b, *c;
    ck_assert_int_eq(bpcc_graph_add_module(g, "a", "torch.nn.Conv2d", &a, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "b", "torch.nn.Conv2d", &b, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_add_module(g, "c", "torch.nn.Conv2d", &c, &d), BPCC_OK);
    struct bpcc_value one = bpcc_value_int(1), two = bpcc_value_int(2), yes = bpcc_value_bool(true);
    ck_assert_int_eq(bpcc_module_set_attr(a, "in_channels", &one, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_set_attr(a, "out_channels", &two, &d), BPCC_OK);
    bpcc_module_share_attrs(b, a);
    bpcc_module_share_attrs(c, a);
    ck_assert_ptr_eq(b->attrs.u.seq.items, a->attrs.u.seq.items);
    /* writing the value already there changes nothing and keeps the sharing */
    ck_assert_int_eq(bpcc_module_set_attr(b, "in_channels", &one, &d), BPCC_OK);
    ck_assert_ptr_eq(b->attrs.u.seq.items, a->attrs.u.seq.items);
    /* the source changes an attribute in place: the others keep theirs */
    ck_assert_int_eq(bpcc_module_set_attr(a, "in_channels", &two, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_attr(a, "in_channels")->u.i, 2);
    ck_assert_int_eq(bpcc_module_attr(b, "in_channels")->u.i, 1);
    ck_assert_int_eq(bpcc_module_attr(c, "in_channels")->u.i, 1);
    /* a sharer adds one: the array it shared does not grow under the others */
    ck_assert_int_eq(bpcc_module_set_attr(b, "bias", &yes, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_module_attrs(b)->n, 3);
    ck_assert_uint_eq(bpcc_module_attrs(c)->n, 2);
    ck_assert_ptr_null(bpcc_module_attr(c, "bias"));
    /* the last sharer changes one in place: its own copy */
    ck_assert_int_eq(bpcc_module_set_attr(c, "out_channels", &one, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_attr(c, "out_channels")->u.i, 1);
    ck_assert_int_eq(bpcc_module_attr(b, "out_channels")->u.i, 2);
    ck_assert_int_eq(bpcc_module_attr(a, "out_channels")->u.i, 2);
    ck_assert_int_eq(bpcc_module_attr(b, "in_channels")->u.i, 1);
}
END_TEST

/* The parser gives modules with equal attributes one array (floats compared by their bits, keys
** and order included); each module still changes only its own, and the text prints back the same. */
/* The parser sizes the name table for the rest of the model's node lines once it has read 1024
** nodes: 20000 nodes take seven tables (six while the first 1024 are read, then one) where
** doubling takes ten, and every name is found after */
START_TEST(the_name_table_is_sized_for_the_node_lines_once_a_model_shows)
{
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_buf_adds(&b, "bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n");
    bpcc_buf_adds(&b, "  %n0 = call_function torch.relu (%x,)\n");
    for (int i = 1; i < 20000; i++) bpcc_buf_printf(&b, "  %%n%d = call_function torch.relu (%%n%d,)\n", i, i - 1);
    bpcc_buf_adds(&b, "\t%output = output output (%n19999,)\n"); /* a tab before the '%' counts too */
    char *text = bpcc_buf_take(&b, NULL);
    struct bpcc_graph *pg;
    ck_assert_msg(bpcc_graph_parse(text, strlen(text), "m.bpcc", &pg, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_uint_le(pg->intern.table.epoch, 7);
    ck_assert_uint_ge(pg->intern.table.cap, 20002 * 4 / 3);
    ck_assert_uint_eq(bpcc_graph_n_nodes(pg), 20002);
    ck_assert_ptr_nonnull(bpcc_graph_find_node(pg, "n12345"));
    ck_assert_ptr_nonnull(bpcc_graph_find_node(pg, "output"));
    bpcc_graph_free(pg);
    bpcc_xfree(text);

    /* 3000 modules and 3000 nodes of the same names are 3000 names, not 6000: the table sized
    ** for the node lines holds them without growing again */
    bpcc_buf_init(&b);
    bpcc_buf_adds(&b, "bpcc-model 1\n\n");
    for (int i = 0; i < 3000; i++) bpcc_buf_printf(&b, "module m%d : torch.nn.ReLU {}\n", i);
    bpcc_buf_adds(&b, "\ngraph\n  %x = placeholder x ()\n  %m0 = call_module m0 (%x,)\n");
    for (int i = 1; i < 3000; i++) bpcc_buf_printf(&b, "  %%m%d = call_module m%d (%%m%d,)\n", i, i, i - 1);
    bpcc_buf_adds(&b, "  %output = output output (%m2999,)\n");
    text = bpcc_buf_take(&b, NULL);
    ck_assert_msg(bpcc_graph_parse(text, strlen(text), "m.bpcc", &pg, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_uint_ge(pg->intern.table.cap * 3, pg->intern.table.n * 4);
    ck_assert_uint_le(pg->intern.table.cap, 4096);
    bpcc_graph_free(pg);
    bpcc_xfree(text);
}
END_TEST

static size_t biggest_alloc;
static void *big_malloc(void *ud, size_t n)
{
    (void)ud;
    if (n > biggest_alloc) biggest_alloc = n;
    return malloc(n);
}
static void *big_realloc(void *ud, void *p, size_t n)
{
    (void)ud;
    if (n > biggest_alloc) biggest_alloc = n;
    return realloc(p, n);
}
static void big_free(void *ud, void *p) { (void)ud; free(p); }

/* Junk after a model's first nodes: 2M lines of a lone '%' (4 MB) are refused at the first,
** and the name table was sized for what 4 MB of node lines can hold, not for 2M names */
START_TEST(junk_node_lines_get_no_big_name_table)
{
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_buf_adds(&b, "bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n  %n0 = call_function torch.relu (%x,)\n");
    for (int i = 1; i < 1100; i++) bpcc_buf_printf(&b, "  %%n%d = call_function torch.relu (%%n%d,)\n", i, i - 1);
    for (int i = 0; i < 2000000; i++) bpcc_buf_adds(&b, "%\n");
    size_t len;
    char *text = bpcc_buf_take(&b, &len);
    struct bpcc_allocator a = {big_malloc, big_realloc, big_free, NULL};
    bpcc_set_allocator(&a);
    biggest_alloc = 0;
    struct bpcc_graph *pg = NULL;
    struct bpcc_diag dj;
    bpcc_diag_init(&dj);
    enum bpcc_status s = bpcc_graph_parse(text, len, "junk.bpcc", &pg, &dj);
    bpcc_set_allocator(NULL);
    ck_assert_int_eq(s, BPCC_ERR_PARSE);
    ck_assert_uint_eq(dj.entries[0].line, 1105); /* the first junk line */
    ck_assert_uint_eq(dj.entries[0].col, 1);
    ck_assert_str_eq(dj.entries[0].msg, "expected a node name after '%'");
    /* 4 MB of text: at most 4 MB / 17 names, a table of 512k slots (12 MB); 2M names would take 96 MB */
    ck_assert_msg(biggest_alloc <= ((size_t)16 << 20), "an allocation of %zu bytes", biggest_alloc);
    bpcc_xfree(text);
}
END_TEST

START_TEST(parsed_modules_with_equal_attributes_share_one_array)
{
    const char *text =
        "bpcc-model 1\n\n"
        "module a : torch.nn.Conv2d {in_channels: 4, out_channels: 4, kernel_size: (1, 1), eps: 0.0}\n"
        "module b : torch.nn.ReLU {inplace: False}\n"
        "module c : torch.nn.Conv2d {in_channels: 4, out_channels: 4, kernel_size: (1, 1), eps: 0.0}\n"
        "module d : torch.nn.Conv2d {in_channels: 4, out_channels: 4, kernel_size: (1, 2), eps: 0.0}\n"
        "module e : torch.nn.Conv2d {in_channels: 4, out_channels: 4, kernel_size: (1, 1), eps: -0.0}\n"
        "module f : torch.nn.Conv2d {out_channels: 4, in_channels: 4, kernel_size: (1, 1), eps: 0.0}\n"
        "module h : torch.nn.ReLU {inplace: False}\n"
        "module i : torch.nn.ReLU {}\n\n"
        "graph\n  %x = placeholder x ()\n  %output = output output (%x,)\n";
    struct bpcc_graph *pg;
    ck_assert_msg(bpcc_graph_parse(text, strlen(text), "m.bpcc", &pg, &d) == BPCC_OK, "%s", tu_msg(&d));
    const struct bpcc_module *a = bpcc_graph_find_module(pg, "a"), *b = bpcc_graph_find_module(pg, "b"),
                             *c = bpcc_graph_find_module(pg, "c"), *dm = bpcc_graph_find_module(pg, "d"),
                             *e = bpcc_graph_find_module(pg, "e"), *f = bpcc_graph_find_module(pg, "f"),
                             *h = bpcc_graph_find_module(pg, "h");
    ck_assert_ptr_eq(c->attrs.u.seq.items, a->attrs.u.seq.items);
    ck_assert_ptr_eq(h->attrs.u.seq.items, b->attrs.u.seq.items);
    ck_assert_ptr_ne(dm->attrs.u.seq.items, a->attrs.u.seq.items); /* a tuple item differs */
    ck_assert_ptr_ne(e->attrs.u.seq.items, a->attrs.u.seq.items); /* -0.0 is not 0.0 */
    ck_assert_ptr_ne(f->attrs.u.seq.items, a->attrs.u.seq.items); /* another order of keys */
    ck_assert_uint_eq(bpcc_graph_find_module(pg, "i")->attrs.n, 0);
    /* a change to one is its own */
    struct bpcc_value two = bpcc_value_int(2);
    ck_assert_int_eq(bpcc_module_set_attr(bpcc_graph_find_module(pg, "c"), "in_channels", &two, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_attr(a, "in_channels")->u.i, 4);
    ck_assert_int_eq(bpcc_module_attr(c, "in_channels")->u.i, 2);
    struct bpcc_value four = bpcc_value_int(4);
    ck_assert_int_eq(bpcc_module_set_attr(bpcc_graph_find_module(pg, "c"), "in_channels", &four, &d), BPCC_OK);
    /* and the text prints back as it was written */
    char *out;
    size_t len;
    ck_assert_int_eq(bpcc_graph_print(pg, NULL, &out, &len, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(out, "module e : torch.nn.Conv2d {in_channels: 4, out_channels: 4, kernel_size: (1, 1), eps: -0.0}"));
    ck_assert_ptr_nonnull(strstr(out, "module c : torch.nn.Conv2d {in_channels: 4, out_channels: 4, kernel_size: (1, 1), eps: 0.0}"));
    ck_assert_ptr_nonnull(strstr(out, "module h : torch.nn.ReLU {inplace: False}"));
    bpcc_free(out);
    bpcc_graph_free(pg);
}
END_TEST

/* What a failed pass changed in a module's attributes (in place or by adding) is taken back. */
START_TEST(a_restore_brings_back_the_attributes_as_they_were)
{
    struct bpcc_module *m;
    ck_assert_int_eq(bpcc_graph_add_module(g, "relu", "torch.nn.ReLU", &m, &d), BPCC_OK);
    struct bpcc_value yes = bpcc_value_bool(true), no = bpcc_value_bool(false);
    ck_assert_int_eq(bpcc_module_set_attr(m, "inplace", &yes, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_set_attr(m, "inplace", &no, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_set_attr(m, "training", &no, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_attr(m, "inplace")->u.b, false);
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */
    m = bpcc_graph_find_module(g, "relu");
    ck_assert_uint_eq(bpcc_module_attrs(m)->n, 1);
    ck_assert_int_eq(bpcc_module_attr(m, "inplace")->u.b, true);
    /* and the restored module changes on its own copy again */
    ck_assert_int_eq(bpcc_module_set_attr(m, "inplace", &no, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_attr(m, "inplace")->u.b, false);
}
END_TEST

/* Tensor types of one shape share one dims array in the graph (they are immutable), also across
** a failed pass, and nodes' metadata of one dtype and shape is one value. */
START_TEST(tensor_types_of_one_shape_share_their_dims)
{
    struct bpcc_node *x = placeholder("x"), *y = placeholder("y"), *z = placeholder("z");
    int64_t d14[] = {1, 4}, d41[] = {4, 1}, again[] = {1, 4};
    struct bpcc_value a = {.kind = BPCC_VAL_TTYPE, .n = 2, .u.ttype = {BPCC_DTYPE_F32, d14}};
    struct bpcc_value b = {.kind = BPCC_VAL_TTYPE, .n = 2, .u.ttype = {BPCC_DTYPE_F32, d41}};
    struct bpcc_value c = {.kind = BPCC_VAL_TTYPE, .n = 2, .u.ttype = {BPCC_DTYPE_I64, again}};
    ck_assert_int_eq(bpcc_node_set_meta(x, &a, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_set_meta(y, &b, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_set_meta(z, &c, &d), BPCC_OK);
    const struct bpcc_value *mx = bpcc_node_meta(x), *my = bpcc_node_meta(y), *mz = bpcc_node_meta(z);
    ck_assert_ptr_ne(mx->u.ttype.dims, d14); /* the graph's own copy */
    ck_assert_ptr_eq(mx->u.ttype.dims, mz->u.ttype.dims);
    ck_assert_ptr_ne(mx->u.ttype.dims, my->u.ttype.dims);
    ck_assert_int_eq(mz->u.ttype.dtype, BPCC_DTYPE_I64);
    ck_assert(my->u.ttype.dims[0] == 4 && my->u.ttype.dims[1] == 1);
    /* a failed pass's shapes and the ones before it */
    ck_assert_int_eq(bpcc_graph_begin_pass(g, &d), BPCC_OK);
    int64_t d3[] = {3, 3, 3};
    struct bpcc_value e = {.kind = BPCC_VAL_TTYPE, .n = 3, .u.ttype = {BPCC_DTYPE_F32, d3}};
    ck_assert_int_eq(bpcc_node_set_meta(x, &e, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_end_pass(g, BPCC_ERR_GRAPH, &d), BPCC_ERR_GRAPH); /* a failed pass */
    x = bpcc_graph_find_node(g, "x");
    z = bpcc_graph_find_node(g, "z");
    ck_assert_ptr_eq(bpcc_node_meta(x)->u.ttype.dims, bpcc_node_meta(z)->u.ttype.dims);
    ck_assert(bpcc_node_meta(x)->n == 2 && bpcc_node_meta(x)->u.ttype.dims[1] == 4);
    ck_assert_int_eq(bpcc_node_set_meta(z, &e, &d), BPCC_OK);
    ck_assert(bpcc_node_meta(z)->n == 3 && bpcc_node_meta(z)->u.ttype.dims[2] == 3);
    ck_assert_int_eq(bpcc_node_set_meta(y, &a, &d), BPCC_OK);
    ck_assert_ptr_eq(bpcc_node_meta(y)->u.ttype.dims, bpcc_node_meta(x)->u.ttype.dims);
    ck_assert_ptr_eq(bpcc_node_meta(y), bpcc_node_meta(x));
    ck_assert_ptr_ne(bpcc_node_meta(y), mz); /* the same dims, another dtype */
    ck_assert_int_eq(bpcc_node_meta(z)->u.ttype.dtype, BPCC_DTYPE_F32);
    /* none: a node made without, and one set so */
    struct bpcc_value none = bpcc_value_none();
    ck_assert_int_eq(bpcc_node_meta(placeholder("w"))->kind, BPCC_VAL_NONE);
    ck_assert_int_eq(bpcc_node_set_meta(x, &none, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_node_meta(x)->kind, BPCC_VAL_NONE);
    /* a tuple of them: its own copy, holding the shared dims */
    struct bpcc_value items[2] = {a, e}, tup = {.kind = BPCC_VAL_TUPLE, .n = 2, .u.seq = {items, NULL}};
    ck_assert_int_eq(bpcc_node_set_meta(x, &tup, &d), BPCC_OK);
    const struct bpcc_value *mt = bpcc_node_meta(x);
    ck_assert(mt->kind == BPCC_VAL_TUPLE && mt->n == 2 && mt->u.seq.items != items);
    ck_assert_ptr_eq(mt->u.seq.items[0].u.ttype.dims, bpcc_node_meta(y)->u.ttype.dims);
    ck_assert_ptr_eq(mt->u.seq.items[1].u.ttype.dims, bpcc_node_meta(z)->u.ttype.dims);
}
END_TEST

START_TEST(reserved_tensor_room_takes_puts_without_allocating)
{
    /* a small module (names compared in place) and one past the index threshold (names found by
    ** interned pointer): after bpcc_module_reserve_tensors, puts of new and existing names
    ** allocate nothing, so a pass can store into many modules all or nothing */
    for (int big = 0; big < 2; big++) {
        struct bpcc_module *m;
        ck_assert_int_eq(bpcc_graph_add_module(g, big ? "big" : "small", "torch.nn.Module", &m, &d), BPCC_OK);
        int have = big ? 30 : 4; /* 30: the reserve grows the indexed array (cap 32) and its index */
        char name[32];
        for (int i = 0; i < have; i++) {
            struct bpcc_tensor *t;
            ck_assert_int_eq(bpcc_tensor_new(g, BPCC_DTYPE_F32, 0, NULL, &t, &d), BPCC_OK);
            snprintf(name, sizeof name, "t%d", i);
            ck_assert_int_eq(bpcc_module_set_tensor(m, name, BPCC_TENSOR_BUFFER, t, &d), BPCC_OK);
        }
        struct bpcc_tensor *fresh[8];
        const char *names[8];
        for (int i = 0; i < 8; i++) {
            ck_assert_int_eq(bpcc_tensor_new(g, BPCC_DTYPE_F32, 0, NULL, &fresh[i], &d), BPCC_OK);
            snprintf(name, sizeof name, "t%d", i % 2 ? have + i : i / 2); /* half new, half existing */
            names[i] = bpcc_graph_intern(g, name);
        }
        ck_assert_int_eq(bpcc_module_reserve_tensors(m, 4), BPCC_OK);
        ck_assert_uint_eq(m->cap_tensors, (uint32_t)have + 4); /* the room asked for, not doubled (64) */
        bpcc_alloc_fail_at(1, true); /* every allocation from here fails */
        for (int i = 0; i < 8; i++) bpcc_module_put_tensor(m, names[i], BPCC_TENSOR_CONSTANT, fresh[i]);
        bpcc_alloc_fail_at(0, false);
        ck_assert_uint_eq(bpcc_module_n_tensors(m), (uint32_t)have + 4);
        for (int i = 0; i < 8; i++) {
            ck_assert_ptr_eq(bpcc_module_tensor(m, names[i]), fresh[i]);
            enum bpcc_tensor_role role;
            const char *nm;
            uint32_t at = 0;
            while (bpcc_module_tensor_at(m, at, &nm, &role) != fresh[i]) at++;
            ck_assert_str_eq(nm, names[i]);
            ck_assert_int_eq(role, BPCC_TENSOR_CONSTANT);
        }
        ck_assert_ptr_nonnull(bpcc_module_tensor(m, "t1")); /* the untouched ones stay */
    }
}
END_TEST

START_TEST(module_attributes_may_not_hold_nodes)
{
    struct bpcc_module *mod;
    ck_assert_int_eq(bpcc_graph_add_module(g, "m", "torch.nn.ReLU", &mod, &d), BPCC_OK);
    struct bpcc_node *x = placeholder("x");
    struct bpcc_value v = bpcc_value_node(x);
    ck_assert_int_eq(bpcc_module_set_attr(mod, "bad", &v, &d), BPCC_ERR_INVALID);
}
END_TEST

START_TEST(values_compare_structurally)
{
    struct bpcc_value a, b;
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 2, &a), BPCC_OK);
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 2, &b), BPCC_OK);
    a.u.seq.items[0] = b.u.seq.items[0] = bpcc_value_int(1);
    a.u.seq.items[1] = bpcc_value_float(0.5);
    b.u.seq.items[1] = bpcc_value_float(0.5);
    ck_assert(bpcc_value_equal(&a, &b));
    b.u.seq.items[1] = bpcc_value_float(-0.5);
    ck_assert(!bpcc_value_equal(&a, &b));
    struct bpcc_value s1, s2;
    ck_assert_int_eq(bpcc_value_str_new(g, BPCC_VAL_STR, "abc", &s1), BPCC_OK);
    ck_assert_int_eq(bpcc_value_str_new(g, BPCC_VAL_STR, "abc", &s2), BPCC_OK);
    ck_assert(bpcc_value_equal(&s1, &s2));
    ck_assert_int_eq(bpcc_value_str_new(g, BPCC_VAL_SYMBOL, "not a symbol", &s1), BPCC_ERR_INVALID);
    ck_assert_int_eq(bpcc_value_str_new(g, BPCC_VAL_SYMBOL, "torch.float32", &s1), BPCC_ERR_INVALID);
    ck_assert_int_eq(bpcc_value_str_new(g, BPCC_VAL_SYMBOL, "torch.strided", &s1), BPCC_OK);
    ck_assert_int_eq(bpcc_value_str_new(g, BPCC_VAL_SYMBOL, "torch.per_tensor_affine", &s1), BPCC_OK);
    ck_assert_int_eq(bpcc_value_str_new(g, BPCC_VAL_SYMBOL, "torch.nn.Conv2d", &s1), BPCC_OK);
    /* every dtype is refused as a symbol (the check skips names longer than BPCC_DTYPE_NAME_MAX) */
    for (int t = 1; t < BPCC_DTYPE_COUNT; t++) {
        char sym[64];
        snprintf(sym, sizeof sym, "torch.%s", bpcc_dtype_name((enum bpcc_dtype)t));
        ck_assert_uint_le(strlen(bpcc_dtype_name((enum bpcc_dtype)t)), BPCC_DTYPE_NAME_MAX);
        ck_assert_msg(bpcc_value_str_new(g, BPCC_VAL_SYMBOL, sym, &s1) == BPCC_ERR_INVALID, "%s", sym);
    }
    for (const char *const *a = (const char *const[]){"torch.float", "torch.double", "torch.half", "torch.long",
                                                       "torch.int", "torch.short", NULL};
         *a; a++)
        ck_assert_msg(bpcc_value_str_new(g, BPCC_VAL_SYMBOL, *a, &s1) == BPCC_ERR_INVALID, "%s", *a);
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_SLICE, 2, &a), BPCC_ERR_INVALID);
    ck_assert_ptr_null(bpcc_value_item(&s1, 0));
    ck_assert_str_eq(bpcc_value_kind_name(BPCC_VAL_ELLIPSIS), "ellipsis");
}
END_TEST

START_TEST(dtype_names_resolve)
{
    ck_assert_int_eq(bpcc_dtype_from_name("torch.float"), BPCC_DTYPE_F32);
    ck_assert_int_eq(bpcc_dtype_from_name("float32"), BPCC_DTYPE_F32);
    ck_assert_int_eq(bpcc_dtype_from_name("qu8"), BPCC_DTYPE_QUINT8);
    ck_assert_int_eq(bpcc_dtype_from_name("torch.quint8"), BPCC_DTYPE_QUINT8);
    ck_assert_int_eq(bpcc_dtype_from_name("torch.long"), BPCC_DTYPE_I64);
    ck_assert_int_eq(bpcc_dtype_from_name("torch.f32"), BPCC_DTYPE_NONE);
    ck_assert_int_eq(bpcc_dtype_from_name("float33"), BPCC_DTYPE_NONE);
    ck_assert_uint_eq(bpcc_dtype_size(BPCC_DTYPE_BF16), 2);
    ck_assert_str_eq(bpcc_dtype_name(BPCC_DTYPE_QINT32), "qint32");
    ck_assert_str_eq(bpcc_dtype_short_name(BPCC_DTYPE_BOOL), "bool");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("graph");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, names_are_unique_fx_style);
    tcase_add_test(tc, a_renamed_module_moves_in_the_tree_and_a_failed_pass_moves_it_back);
    tcase_add_test(tc, the_name_table_is_sized_for_the_node_lines_once_a_model_shows);
    tcase_add_test(tc, junk_node_lines_get_no_big_name_table);
    tcase_add_test(tc, users_are_distinct_and_in_first_use_order);
    tcase_add_test(tc, replace_all_uses_moves_every_use);
    tcase_add_test(tc, erase_refuses_nodes_with_users);
    tcase_add_test(tc, erased_names_stay_reserved_through_a_restore);
    tcase_add_test(tc, names_come_back_through_two_restores);
    tcase_add_test(tc, a_failed_pass_gives_a_node_its_many_users_back_in_order);
    tcase_add_test(tc, removed_modules_are_gone_through_a_restore);
    tcase_add_test(tc, a_name_holds_its_node_and_its_module_apart_through_a_restore);
    tcase_add_test(tc, set_args_updates_use_def);
    tcase_add_test(tc, a_node_remade_in_place_keeps_its_users_and_reserves_its_old_name);
    tcase_add_test(tc, erased_nodes_memory_is_used_again_after_the_pass_with_rollback_off);
    tcase_add_test(tc, a_users_array_starts_with_one_entry_and_is_given_back_when_outgrown_without_rollback);
    tcase_add_test(tc, kwargs_meta_and_scope_are_kept_only_where_present);
    tcase_add_test(tc, references_to_other_graphs_are_refused);
    tcase_add_test(tc, move_and_topo_sort_restore_order);
    tcase_add_test(tc, topo_sort_reports_cycles);
    tcase_add_test(tc, topo_sort_handles_a_long_chain_without_recursion);
    tcase_add_test(tc, verify_reports_each_broken_invariant);
    tcase_add_test(tc, verify_resolves_modules_tensors_and_attributes);
    tcase_add_test(tc, a_node_finds_the_module_its_target_names_now);
    tcase_add_test(tc, modules_sharing_attributes_keep_their_own_changes);
    tcase_add_test(tc, parsed_modules_with_equal_attributes_share_one_array);
    tcase_add_test(tc, a_restore_brings_back_the_attributes_as_they_were);
    tcase_add_test(tc, a_node_knows_when_its_remembered_module_changed);
    tcase_add_test(tc, tensor_types_of_one_shape_share_their_dims);
    tcase_add_test(tc, reserved_tensor_room_takes_puts_without_allocating);
    tcase_add_test(tc, module_attributes_may_not_hold_nodes);
    tcase_add_test(tc, values_compare_structurally);
    tcase_add_test(tc, dtype_names_resolve);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
