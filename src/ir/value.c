/*
** value.c — literal value trees: construction, deep copy into a graph, equality, traversal.
*/
#include "ir.h"

static const char *const kind_names[BPCC_VAL_COUNT] = {
    [BPCC_VAL_NONE] = "none",     [BPCC_VAL_BOOL] = "bool",       [BPCC_VAL_INT] = "int",
    [BPCC_VAL_FLOAT] = "float",   [BPCC_VAL_STR] = "str",         [BPCC_VAL_NODE] = "node",
    [BPCC_VAL_LIST] = "list",     [BPCC_VAL_TUPLE] = "tuple",     [BPCC_VAL_DICT] = "dict",
    [BPCC_VAL_SLICE] = "slice",   [BPCC_VAL_DTYPE] = "dtype",     [BPCC_VAL_ELLIPSIS] = "ellipsis",
    [BPCC_VAL_SYMBOL] = "symbol", [BPCC_VAL_DEVICE] = "device",   [BPCC_VAL_TTYPE] = "tensor type",
    [BPCC_VAL_ATTR] = "get_attr",
};
_Static_assert(BPCC_VAL_COUNT == 16, "kind_names needs the new value kind");

const char *bpcc_value_kind_name(enum bpcc_value_kind k)
{
    return (unsigned)k < BPCC_VAL_COUNT ? kind_names[k] : "?";
}

struct bpcc_value bpcc_value_none(void) { return (struct bpcc_value){.kind = BPCC_VAL_NONE}; }
struct bpcc_value bpcc_value_bool(bool b)
{
    return (struct bpcc_value){.kind = BPCC_VAL_BOOL, .u.b = b};
}
struct bpcc_value bpcc_value_int(int64_t i)
{
    return (struct bpcc_value){.kind = BPCC_VAL_INT, .u.i = i};
}
struct bpcc_value bpcc_value_float(double f)
{
    return (struct bpcc_value){.kind = BPCC_VAL_FLOAT, .u.f = f};
}
struct bpcc_value bpcc_value_node(struct bpcc_node *n)
{
    return (struct bpcc_value){.kind = BPCC_VAL_NODE, .u.node = n};
}
struct bpcc_value bpcc_value_dtype(enum bpcc_dtype t)
{
    return (struct bpcc_value){.kind = BPCC_VAL_DTYPE, .u.dtype = t};
}

static bool is_seq(enum bpcc_value_kind k)
{
    return k == BPCC_VAL_LIST || k == BPCC_VAL_TUPLE || k == BPCC_VAL_DICT || k == BPCC_VAL_SLICE;
}

enum bpcc_status bpcc_value_seq_new(struct bpcc_graph *g, enum bpcc_value_kind kind, uint32_t n,
                                    struct bpcc_value *out)
{
    if (!is_seq(kind) || (kind == BPCC_VAL_SLICE && n != 3)) return BPCC_ERR_INVALID;
    *out = (struct bpcc_value){.kind = kind, .n = n};
    if (n == 0) return BPCC_OK;
    out->u.seq.items = BPCC_ARENA_NEWN(&g->arena, struct bpcc_value, n);
    if (!out->u.seq.items) return BPCC_ERR_NOMEM;
    if (kind == BPCC_VAL_DICT) {
        out->u.seq.keys = BPCC_ARENA_NEWN(&g->arena, const char *, n);
        if (!out->u.seq.keys) return BPCC_ERR_NOMEM;
        for (uint32_t i = 0; i < n; i++) out->u.seq.keys[i] = "";
    }
    return BPCC_OK; /* zeroed items are None */
}

/* [A-Za-z0-9_.] by table (ASCII; the rest are 0): every node made is named through here */
static const unsigned char word_table[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
};

static bool word_char(char c) { return word_table[(unsigned char)c]; }

bool bpcc_node_name_valid(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (!word_char(*s)) return false;
    return true;
}

bool bpcc_symbol_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 3 || !strchr(s, '.') || s[0] == '.' || (s[0] >= '0' && s[0] <= '9') || s[n - 1] == '.')
        return false;
    if (!bpcc_node_name_valid(s)) return false;
    /* torch.<dtype> is a dtype; a dtype's name is short and has no dot, so torch.nn.X or
    ** torch.per_tensor_affine is never one */
    return !(n <= 6 + BPCC_DTYPE_NAME_MAX && strncmp(s, "torch.", 6) == 0 && !strchr(s + 6, '.') &&
             bpcc_dtype_from_name(s) != BPCC_DTYPE_NONE);
}

enum bpcc_status bpcc_value_str_new(struct bpcc_graph *g, enum bpcc_value_kind kind,
                                    const char *s, struct bpcc_value *out)
{
    if (kind != BPCC_VAL_STR && kind != BPCC_VAL_SYMBOL && kind != BPCC_VAL_DEVICE)
        return BPCC_ERR_INVALID;
    if (kind == BPCC_VAL_SYMBOL && !bpcc_symbol_valid(s)) return BPCC_ERR_INVALID;
    const char *c = bpcc_graph_intern(g, s);
    if (!c) return BPCC_ERR_NOMEM;
    *out = (struct bpcc_value){.kind = kind, .u.s = c};
    return BPCC_OK;
}

static enum bpcc_status copy_rec(struct bpcc_graph *g, struct bpcc_value *dst,
                                 const struct bpcc_value *src, int depth)
{
    if (depth > BPCC_MAX_VALUE_DEPTH) return BPCC_ERR_LIMIT;
    *dst = *src;
    switch (src->kind) {
    case BPCC_VAL_STR:
    case BPCC_VAL_SYMBOL:
    case BPCC_VAL_DEVICE:
        dst->u.s = bpcc_graph_intern(g, src->u.s);
        return dst->u.s ? BPCC_OK : BPCC_ERR_NOMEM;
    case BPCC_VAL_ATTR:
        dst->u.attr.name = bpcc_graph_intern(g, src->u.attr.name);
        dst->u.attr.target = dst->u.attr.name ? bpcc_graph_intern(g, src->u.attr.target) : NULL;
        return dst->u.attr.target ? BPCC_OK : BPCC_ERR_NOMEM;
    case BPCC_VAL_LIST:
    case BPCC_VAL_TUPLE:
    case BPCC_VAL_DICT:
    case BPCC_VAL_SLICE: {
        enum bpcc_status s = bpcc_value_seq_new(g, src->kind, src->n, dst);
        if (s) return s;
        for (uint32_t i = 0; i < src->n; i++) {
            if ((s = copy_rec(g, &dst->u.seq.items[i], &src->u.seq.items[i], depth + 1))) return s;
            if (src->kind == BPCC_VAL_DICT) {
                dst->u.seq.keys[i] = bpcc_graph_intern(g, src->u.seq.keys[i]);
                if (!dst->u.seq.keys[i]) return BPCC_ERR_NOMEM;
            }
        }
        return BPCC_OK;
    }
    case BPCC_VAL_TTYPE: {
        dst->u.ttype.dims = NULL; /* nothing of src's kept */
        if (!src->n) return BPCC_OK;
        dst->u.ttype.dims = bpcc_graph_intern_dims(g, src->u.ttype.dims, src->n);
        return dst->u.ttype.dims ? BPCC_OK : BPCC_ERR_NOMEM;
    }
    default:
        return BPCC_OK;
    }
}

enum bpcc_status bpcc_value_copy(struct bpcc_graph *g, struct bpcc_value *dst,
                                 const struct bpcc_value *src)
{
    return copy_rec(g, dst, src, 0);
}

void bpcc_value_visit_nodes(struct bpcc_value *v, void (*fn)(struct bpcc_value *ref, void *ud),
                            void *ud)
{
    if (v->kind == BPCC_VAL_NODE) {
        fn(v, ud);
    } else if (is_seq(v->kind)) {
        for (uint32_t i = 0; i < v->n; i++) bpcc_value_visit_nodes(&v->u.seq.items[i], fn, ud);
    }
}

void bpcc_value_visit_attrs(const struct bpcc_value *v, void (*fn)(const struct bpcc_value *attr, void *ud), void *ud)
{
    if (v->kind == BPCC_VAL_ATTR) {
        fn(v, ud);
    } else if (is_seq(v->kind)) {
        for (uint32_t i = 0; i < v->n; i++) bpcc_value_visit_attrs(&v->u.seq.items[i], fn, ud);
    }
}

bool bpcc_value_has_nodes(const struct bpcc_value *v)
{
    if (v->kind == BPCC_VAL_NODE) return true;
    if (is_seq(v->kind))
        for (uint32_t i = 0; i < v->n; i++)
            if (bpcc_value_has_nodes(&v->u.seq.items[i])) return true;
    return false;
}

bool bpcc_value_equal(const struct bpcc_value *a, const struct bpcc_value *b)
{
    if (a->kind != b->kind || a->n != b->n) return false;
    switch (a->kind) {
    case BPCC_VAL_NONE:
    case BPCC_VAL_ELLIPSIS: return true;
    case BPCC_VAL_BOOL: return a->u.b == b->u.b;
    case BPCC_VAL_INT: return a->u.i == b->u.i;
    case BPCC_VAL_FLOAT: return memcmp(&a->u.f, &b->u.f, sizeof(double)) == 0;
    case BPCC_VAL_STR:
    case BPCC_VAL_SYMBOL:
    case BPCC_VAL_DEVICE: return strcmp(a->u.s, b->u.s) == 0;
    case BPCC_VAL_NODE: return a->u.node == b->u.node;
    case BPCC_VAL_ATTR: return !strcmp(a->u.attr.name, b->u.attr.name) && !strcmp(a->u.attr.target, b->u.attr.target);
    case BPCC_VAL_DTYPE: return a->u.dtype == b->u.dtype;
    case BPCC_VAL_TTYPE:
        return a->u.ttype.dtype == b->u.ttype.dtype &&
               memcmp(a->u.ttype.dims, b->u.ttype.dims, a->n * sizeof(int64_t)) == 0;
    case BPCC_VAL_LIST:
    case BPCC_VAL_TUPLE:
    case BPCC_VAL_DICT:
    case BPCC_VAL_SLICE:
        for (uint32_t i = 0; i < a->n; i++) {
            if (a->kind == BPCC_VAL_DICT && strcmp(a->u.seq.keys[i], b->u.seq.keys[i]) != 0)
                return false;
            if (!bpcc_value_equal(&a->u.seq.items[i], &b->u.seq.items[i])) return false;
        }
        return true;
    default: return false;
    }
}

const struct bpcc_value *bpcc_value_item(const struct bpcc_value *v, uint32_t i)
{
    if (!v || !is_seq(v->kind) || i >= v->n) return NULL;
    return &v->u.seq.items[i];
}

const struct bpcc_value *bpcc_value_get(const struct bpcc_value *dict, const char *key)
{
    if (!dict || dict->kind != BPCC_VAL_DICT) return NULL;
    /* the first bytes before a call: attribute lookups are many (an observer's spec reads a dozen
    ** keys from a dozen), and most keys differ at once */
    for (uint32_t i = 0; i < dict->n; i++) {
        const char *k = dict->u.seq.keys[i];
        if (k[0] == key[0] && (!k[0] || strcmp(k + 1, key + 1) == 0)) return &dict->u.seq.items[i];
    }
    return NULL;
}
