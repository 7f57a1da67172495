/*
** yaml_tree.c — one YAML document as a tree of scalars, sequences and mappings with their
** positions, built from libyaml's event stream. Anchors and aliases are resolved by sharing
** nodes (with a bound on the expanded size, so "billion laughs" documents are refused), merge
** keys (<<) are applied, and duplicate mapping keys are errors.
*/
#include "config.h"

#include <yaml.h>

struct anchor {
    const char *name;
    struct ynode *node;
    uint64_t weight;
};

struct yp {
    yaml_parser_t parser;
    yaml_event_t ev;
    bool have_ev;
    const char *file;
    const char *text;
    size_t len;
    struct bpcc_arena *arena;
    struct bpcc_diag *d;
    enum bpcc_status status;
    struct anchor *anchors;
    uint32_t n_anchors, cap_anchors;
    uint64_t total; /* expanded node count so far */
};

static enum bpcc_status fail(struct yp *y, uint32_t line, uint32_t col, const char *fmt, ...)
    BPCC_PRINTF(4, 5);
static enum bpcc_status fail(struct yp *y, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (y->status) return y->status;
    char msg[BPCC_DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    y->status = bpcc_diag_error(y->d, BPCC_ERR_PARSE, y->file, line, col, "%s", msg);
    return y->status;
}

static enum bpcc_status nomem(struct yp *y)
{
    if (!y->status) y->status = bpcc_diag_nomem(y->d);
    return y->status;
}

static enum bpcc_status next(struct yp *y)
{
    if (y->have_ev) {
        yaml_event_delete(&y->ev);
        y->have_ev = false;
    }
    if (!yaml_parser_parse(&y->parser, &y->ev)) {
        if (y->parser.error == YAML_MEMORY_ERROR) return nomem(y);
        yaml_mark_t pm = y->parser.problem_mark;
        if (y->parser.error == YAML_READER_ERROR) {
            /* reader errors carry a byte offset, not a mark */
            pm.line = pm.column = 0;
            for (size_t i = 0; i < y->parser.problem_offset && i < y->len; i++) {
                if (y->text[i] == '\n') {
                    pm.line++;
                    pm.column = 0;
                } else {
                    pm.column++;
                }
            }
        }
        fail(y, (uint32_t)pm.line + 1, (uint32_t)pm.column + 1, "YAML syntax: %s",
             y->parser.problem ? y->parser.problem : "malformed document");
        if (y->parser.context)
            bpcc_diag_note(y->d, (uint32_t)y->parser.context_mark.line + 1,
                           (uint32_t)y->parser.context_mark.column + 1, "%s", y->parser.context);
        return y->status;
    }
    y->have_ev = true;
    return BPCC_OK;
}

static uint32_t ev_line(const struct yp *y) { return (uint32_t)y->ev.start_mark.line + 1; }
static uint32_t ev_col(const struct yp *y) { return (uint32_t)y->ev.start_mark.column + 1; }

static enum bpcc_status add_anchor(struct yp *y, const yaml_char_t *name, struct ynode *n,
                                   uint64_t weight)
{
    if (!name) return BPCC_OK;
    if (y->n_anchors == y->cap_anchors) {
        if (y->cap_anchors >= 65536) return fail(y, n->line, n->col, "more than 65536 anchors");
        uint32_t cap = y->cap_anchors ? y->cap_anchors * 2 : 16;
        struct anchor *a = bpcc_realloc(y->anchors, cap * sizeof *a);
        if (!a) return nomem(y);
        y->anchors = a;
        y->cap_anchors = cap;
    }
    const char *s = bpcc_arena_strndup(y->arena, (const char *)name, strlen((const char *)name));
    if (!s) return nomem(y);
    /* a redefined anchor shadows the earlier one from here on */
    y->anchors[y->n_anchors++] = (struct anchor){s, n, weight};
    return BPCC_OK;
}

static const struct anchor *find_anchor(const struct yp *y, const char *name)
{
    for (uint32_t i = y->n_anchors; i-- > 0;)
        if (strcmp(y->anchors[i].name, name) == 0) return &y->anchors[i];
    return NULL;
}

static struct ynode *new_node(struct yp *y, enum ynode_kind kind)
{
    struct ynode *n = BPCC_ARENA_NEW(y->arena, struct ynode);
    if (!n) {
        nomem(y);
        return NULL;
    }
    n->kind = kind;
    n->line = ev_line(y);
    n->col = ev_col(y);
    return n;
}

/* A growable list of node pointers (malloc'd while building, arena copy at the end). */
struct nlist {
    struct ynode **v;
    uint32_t n, cap;
};

static bool nlist_push(struct nlist *l, struct ynode *n)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 8;
        struct ynode **v = bpcc_realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
    return true;
}

static bool nlist_finish(struct yp *y, struct nlist *l, struct ynode *n)
{
    n->items = l->n ? BPCC_ARENA_NEWN(y->arena, struct ynode *, l->n) : NULL;
    if (l->n && !n->items) return false;
    if (l->n) memcpy(n->items, l->v, l->n * sizeof *n->items);
    return true;
}

static bool check_tag(struct yp *y, const yaml_char_t *tag, bool *quoted)
{
    if (!tag) return true;
    const char *t = (const char *)tag;
    if (strcmp(t, "tag:yaml.org,2002:str") == 0) {
        *quoted = true;
        return true;
    }
    if (strcmp(t, "tag:yaml.org,2002:map") == 0 || strcmp(t, "tag:yaml.org,2002:seq") == 0)
        return true;
    fail(y, ev_line(y), ev_col(y), "YAML tag '%s' is not supported", t);
    return false;
}

static struct ynode *parse_node(struct yp *y, int depth, uint64_t *weight);

/* Apply a merge key's value (a mapping or a sequence of mappings) to the pairs collected so
** far: keys not already present are added. */
static bool merge_into(struct yp *y, struct nlist *pairs, const struct ynode *src,
                       uint32_t line, uint32_t col)
{
    if (src->kind == YNODE_SEQ) {
        for (uint32_t i = 0; i < src->n; i++)
            if (!merge_into(y, pairs, src->items[i], line, col)) return false;
        return true;
    }
    if (src->kind != YNODE_MAP) {
        fail(y, line, col, "a merge key (<<) takes a mapping or a list of mappings");
        return false;
    }
    for (uint32_t i = 0; i < src->n; i++) {
        const struct ynode *k = src->items[2 * i];
        bool present = false;
        for (uint32_t j = 0; j < pairs->n; j += 2)
            if (strcmp(pairs->v[j]->str, k->str) == 0) present = true;
        if (!present && (!nlist_push(pairs, src->items[2 * i]) ||
                         !nlist_push(pairs, src->items[2 * i + 1]))) {
            nomem(y);
            return false;
        }
    }
    return true;
}

static struct ynode *parse_node(struct yp *y, int depth, uint64_t *weight)
{
    *weight = 1;
    if (depth > YAML_MAX_DEPTH) {
        y->status = bpcc_diag_error(y->d, BPCC_ERR_LIMIT, y->file, ev_line(y), ev_col(y),
                                    "YAML nests deeper than %d levels", YAML_MAX_DEPTH);
        return NULL;
    }
    switch (y->ev.type) {
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)y->ev.data.alias.anchor;
        const struct anchor *a = find_anchor(y, name);
        if (!a) {
            fail(y, ev_line(y), ev_col(y), "alias '*%s' refers to no anchor defined before it",
                 name);
            return NULL;
        }
        *weight = a->weight;
        y->total += a->weight;
        if (y->total > YAML_MAX_EXPANDED) {
            y->status = bpcc_diag_error(y->d, BPCC_ERR_LIMIT, y->file, ev_line(y), ev_col(y),
                                        "aliases expand the document past %u nodes",
                                        YAML_MAX_EXPANDED);
            return NULL;
        }
        return a->node;
    }
    case YAML_SCALAR_EVENT: {
        bool quoted = y->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (!check_tag(y, y->ev.data.scalar.tag, &quoted)) return NULL;
        struct ynode *n = new_node(y, YNODE_SCALAR);
        if (!n) return NULL;
        n->plain = !quoted;
        n->str = bpcc_arena_strndup(y->arena, (const char *)y->ev.data.scalar.value,
                                    y->ev.data.scalar.length);
        if (!n->str) {
            nomem(y);
            return NULL;
        }
        if (strlen(n->str) != y->ev.data.scalar.length) {
            fail(y, n->line, n->col, "NUL character in a YAML scalar");
            return NULL;
        }
        y->total++;
        if (add_anchor(y, y->ev.data.scalar.anchor, n, 1)) return NULL;
        return n;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool is_map = y->ev.type == YAML_MAPPING_START_EVENT;
        bool dummy;
        if (!check_tag(y, is_map ? y->ev.data.mapping_start.tag : y->ev.data.sequence_start.tag,
                       &dummy))
            return NULL;
        struct ynode *n = new_node(y, is_map ? YNODE_MAP : YNODE_SEQ);
        if (!n) return NULL;
        yaml_char_t *anchor_src = is_map ? y->ev.data.mapping_start.anchor
                                         : y->ev.data.sequence_start.anchor;
        char *anchor = anchor_src ? bpcc_strdup((const char *)anchor_src) : NULL;
        if (anchor_src && !anchor) {
            nomem(y);
            return NULL;
        }
        y->total++;
        struct nlist items = {0};
        struct ynode *result = NULL;
        for (;;) {
            if (next(y)) goto out;
            yaml_event_type_t end = is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
            if (y->ev.type == end) break;
            uint64_t w;
            struct ynode *child = parse_node(y, depth + 1, &w);
            if (!child) goto out;
            *weight += w;
            if (is_map) {
                if (child->kind != YNODE_SCALAR) {
                    fail(y, child->line, child->col, "mapping keys must be scalars");
                    goto out;
                }
                if (next(y)) goto out;
                struct ynode *val = parse_node(y, depth + 1, &w);
                if (!val) goto out;
                *weight += w;
                if (child->plain && strcmp(child->str, "<<") == 0) {
                    if (!merge_into(y, &items, val, child->line, child->col)) goto out;
                    continue;
                }
                for (uint32_t j = 0; j < items.n; j += 2)
                    if (strcmp(items.v[j]->str, child->str) == 0) {
                        fail(y, child->line, child->col, "duplicate key '%s'", child->str);
                        bpcc_diag_note(y->d, items.v[j]->line, items.v[j]->col,
                                       "'%s' was first given here", child->str);
                        goto out;
                    }
                if (items.n / 2 >= YAML_MAX_MAP) {
                    y->status = bpcc_diag_error(y->d, BPCC_ERR_LIMIT, y->file, child->line,
                                                child->col, "mapping with more than %u keys",
                                                YAML_MAX_MAP);
                    goto out;
                }
                if (!nlist_push(&items, child) || !nlist_push(&items, val)) {
                    nomem(y);
                    goto out;
                }
            } else if (!nlist_push(&items, child)) {
                nomem(y);
                goto out;
            }
        }
        n->n = is_map ? items.n / 2 : items.n;
        if (!nlist_finish(y, &items, n)) {
            nomem(y);
            goto out;
        }
        if (anchor && add_anchor(y, (const yaml_char_t *)anchor, n, *weight)) goto out;
        result = n;
    out:
        bpcc_xfree(items.v);
        bpcc_xfree(anchor);
        return result;
    }
    default:
        fail(y, ev_line(y), ev_col(y), "unexpected YAML event");
        return NULL;
    }
}

enum bpcc_status bpcc_yaml_parse(const char *text, size_t len, const char *file,
                                 struct bpcc_arena *a, struct ynode **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct yp y = {.file = file, .text = text, .len = len, .arena = a, .d = d};
    if (!yaml_parser_initialize(&y.parser)) return bpcc_diag_nomem(d);
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)text, len);
    struct ynode *root = NULL;
    if (next(&y) || y.ev.type != YAML_STREAM_START_EVENT) goto done;
    if (next(&y)) goto done;
    if (y.ev.type == YAML_STREAM_END_EVENT) goto done; /* empty */
    if (next(&y)) goto done;                           /* past DOCUMENT-START */
    uint64_t w;
    root = parse_node(&y, 0, &w);
    if (!root) goto done;
    if (next(&y)) goto done; /* DOCUMENT-END */
    if (next(&y)) goto done;
    if (y.ev.type == YAML_DOCUMENT_START_EVENT) {
        fail(&y, ev_line(&y), ev_col(&y), "a config file holds one YAML document, this is a second");
        goto done;
    }
    *out = root;
done:
    if (y.have_ev) yaml_event_delete(&y.ev);
    yaml_parser_delete(&y.parser);
    bpcc_xfree(y.anchors);
    if (y.status) *out = NULL;
    return y.status;
}

struct ynode *bpcc_ynode_get(const struct ynode *map, const char *key)
{
    if (!map || map->kind != YNODE_MAP) return NULL;
    for (uint32_t i = 0; i < map->n; i++)
        if (strcmp(map->items[2 * i]->str, key) == 0) return map->items[2 * i + 1];
    return NULL;
}
