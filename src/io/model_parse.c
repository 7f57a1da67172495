/*
** model_parse.c — the IR text parser (grammar: docs/FORMAT.md). A character-level recursive
** descent over the whole file; every error carries the line and column it was found at.
** The parser stops at the first error: a model file is written by a program, and the first
** problem is the one worth fixing.
*/
#include "../ir/ir.h"

#include <errno.h>
#include <math.h>

#define MAX_NODES (1u << 24)      /* hard limit: 16M nodes */
#define MAX_STRING (1u << 20)     /* longest string literal */

struct parser {
    const char *src, *p, *end;
    const char *line_start;
    uint32_t line;
    const char *file;
    struct bpcc_graph *g;
    struct bpcc_diag *d;
    enum bpcc_status status;
    struct bpcc_buf scratch;
    /* the last few modules given attributes of their own: a module whose attributes equal one's
    ** shares its array (bpcc_module_share_attrs), as the convolutions of one shape do */
    struct bpcc_module *like[8];
    uint32_t next_like;
};

static uint32_t col_of(const struct parser *ps, const char *at)
{
    return (uint32_t)(at - ps->line_start) + 1;
}

BPCC_PRINTF(3, 4)
static enum bpcc_status fail_at(struct parser *ps, const char *at, const char *fmt, ...)
{
    if (ps->status) return ps->status;
    char msg[BPCC_DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ps->status = bpcc_diag_error(ps->d, BPCC_ERR_PARSE, ps->file, ps->line, col_of(ps, at), "%s", msg);
    return ps->status;
}

static enum bpcc_status fail_limit(struct parser *ps, const char *at, const char *what)
{
    if (ps->status) return ps->status;
    ps->status = bpcc_diag_error(ps->d, BPCC_ERR_LIMIT, ps->file, ps->line, col_of(ps, at),
                                 "%s", what);
    return ps->status;
}

static enum bpcc_status nomem(struct parser *ps)
{
    if (ps->status) return ps->status;
    ps->status = bpcc_diag_nomem(ps->d);
    return ps->status;
}

static bool is_word_char(char c);

/* A short rendering of what stands at `at`, for "expected X, found Y": a whole word, or
** one character. */
static const char *found(const struct parser *ps, const char *at, char buf[48])
{
    if (at >= ps->end) return "end of file";
    if (*at == '\n') return "end of line";
    size_t n = 0;
    while (at + n < ps->end && n < 40 && is_word_char(at[n])) n++;
    if (n == 0) {
        unsigned char c = (unsigned char)*at;
        if (c < 0x20 || c >= 0x7f) snprintf(buf, 48, "byte 0x%02x", c);
        else snprintf(buf, 48, "'%c'", c);
        return buf;
    }
    snprintf(buf, 48, "'%.*s'", (int)n, at);
    return buf;
}

/* Skip blanks and comments, not newlines. */
static void skip_space(struct parser *ps)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r') {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n') ps->p++;
        } else {
            break;
        }
    }
}

/* Skip blank lines (and comment lines); leaves p at the first token of a line or at EOF. */
static void skip_lines(struct parser *ps)
{
    for (;;) {
        skip_space(ps);
        if (ps->p < ps->end && *ps->p == '\n') {
            ps->p++;
            ps->line++;
            ps->line_start = ps->p;
        } else {
            return;
        }
    }
}

static bool at_eol(struct parser *ps)
{
    skip_space(ps);
    return ps->p >= ps->end || *ps->p == '\n';
}

static enum bpcc_status expect_eol(struct parser *ps)
{
    if (at_eol(ps)) return BPCC_OK;
    char b[48];
    return fail_at(ps, ps->p, "expected end of line, found %s", found(ps, ps->p, b));
}

static bool accept(struct parser *ps, char c)
{
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

static enum bpcc_status expect(struct parser *ps, char c)
{
    if (accept(ps, c)) return BPCC_OK;
    char b[48];
    return fail_at(ps, ps->p, "expected '%c', found %s", c, found(ps, ps->p, b));
}

static bool is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

/* A bare word [A-Za-z0-9_.]+ at p (after blanks); returns its length, 0 if none. */
static size_t peek_word(struct parser *ps)
{
    skip_space(ps);
    size_t n = 0;
    while (ps->p + n < ps->end && is_word_char(ps->p[n])) n++;
    return n;
}

static bool accept_keyword(struct parser *ps, const char *kw)
{
    size_t n = peek_word(ps);
    if (n == strlen(kw) && memcmp(ps->p, kw, n) == 0) {
        ps->p += n;
        return true;
    }
    return false;
}

/* Length of a valid UTF-8 sequence starting at s (at most `avail` bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    if (avail < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A double-quoted string at p; returns an interned copy (NULL after an error). */
static const char *parse_string(struct parser *ps)
{
    skip_space(ps);
    const char *start = ps->p;
    if (ps->p >= ps->end || *ps->p != '"') {
        char b[48];
        fail_at(ps, ps->p, "expected a string, found %s", found(ps, ps->p, b));
        return NULL;
    }
    ps->p++;
    struct bpcc_buf *b = &ps->scratch;
    b->len = 0;
    for (;;) {
        if (ps->p >= ps->end || *ps->p == '\n') {
            fail_at(ps, start, "unterminated string");
            return NULL;
        }
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (b->len >= MAX_STRING) {
            fail_limit(ps, start, "string literal longer than 1 MiB");
            return NULL;
        }
        if (c == '\\') {
            const char *esc = ps->p;
            if (ps->p + 1 >= ps->end) {
                fail_at(ps, start, "unterminated string");
                return NULL;
            }
            char e = ps->p[1];
            ps->p += 2;
            switch (e) {
            case '\\': bpcc_buf_addc(b, '\\'); break;
            case '"': bpcc_buf_addc(b, '"'); break;
            case 'n': bpcc_buf_addc(b, '\n'); break;
            case 't': bpcc_buf_addc(b, '\t'); break;
            case 'r': bpcc_buf_addc(b, '\r'); break;
            case 'x': {
                int h1 = ps->p < ps->end ? hexval(ps->p[0]) : -1;
                int h2 = ps->p + 1 < ps->end ? hexval(ps->p[1]) : -1;
                if (h1 < 0 || h2 < 0) {
                    fail_at(ps, esc, "\\x must be followed by two hex digits");
                    return NULL;
                }
                int v = h1 * 16 + h2;
                if (v == 0 || v >= 0x80) {
                    fail_at(ps, esc, "\\x%02x: only ASCII control characters may be escaped "
                                     "(strings are UTF-8 and may not contain NUL)", v);
                    return NULL;
                }
                bpcc_buf_addc(b, (char)v);
                ps->p += 2;
                break;
            }
            default:
                fail_at(ps, esc, "unknown escape sequence '\\%c'", e);
                return NULL;
            }
            continue;
        }
        if (c < 0x20 || c == 0x7f) {
            fail_at(ps, ps->p, "control character 0x%02x in string (write it as \\x%02x)", c, c);
            return NULL;
        }
        size_t n = utf8_len((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
        if (n == 0) {
            fail_at(ps, ps->p, "invalid UTF-8 in string");
            return NULL;
        }
        bpcc_buf_add(b, ps->p, n);
        ps->p += n;
    }
    if (b->oom) {
        nomem(ps);
        return NULL;
    }
    const char *r = bpcc_intern_n(&ps->g->intern, b->data ? b->data : "", b->len);
    if (!r) nomem(ps);
    return r;
}

/* A name: a bare word or a string. `what` names it in messages ("module name"). */
static const char *parse_name(struct parser *ps, const char *what, const char **at_out)
{
    skip_space(ps);
    if (at_out) *at_out = ps->p;
    if (ps->p < ps->end && *ps->p == '"') return parse_string(ps);
    size_t n = peek_word(ps);
    if (n == 0) {
        char b[48];
        fail_at(ps, ps->p, "expected %s, found %s", what, found(ps, ps->p, b));
        return NULL;
    }
    const char *r = bpcc_intern_n(&ps->g->intern, ps->p, n);
    ps->p += n;
    if (!r) nomem(ps);
    return r;
}

static enum bpcc_status parse_int(struct parser *ps, int64_t *out)
{
    skip_space(ps);
    const char *start = ps->p, *q = ps->p;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end || *q < '0' || *q > '9') {
        char b[48];
        return fail_at(ps, start, "expected an integer, found %s", found(ps, start, b));
    }
    while (q < ps->end && *q >= '0' && *q <= '9') q++;
    char tmp[32];
    size_t n = (size_t)(q - start);
    if (n >= sizeof tmp) return fail_at(ps, start, "integer out of range");
    memcpy(tmp, start, n);
    tmp[n] = 0;
    errno = 0;
    long long v = strtoll(tmp, NULL, 10);
    if (errno == ERANGE) return fail_at(ps, start, "integer out of range (64-bit)");
    ps->p = q;
    *out = v;
    return BPCC_OK;
}

static enum bpcc_status parse_value(struct parser *ps, struct bpcc_value *out, int depth);

/* Items up to `close`, comma separated, trailing comma allowed. Items are collected in the
** scratch value array then copied into the arena. */
static enum bpcc_status parse_items(struct parser *ps, char close, bool dict,
                                    struct bpcc_value *out, enum bpcc_value_kind kind,
                                    int depth, bool *trailing_comma_out)
{
    /* the items gather on the stack while they fit (most argument tuples and attribute dicts
    ** do), on the heap beyond, and are copied into the graph's arena at the end */
    enum { SMALL = 8 };
    struct bpcc_value small_items[SMALL], *items = small_items;
    const char *small_keys[SMALL], **keys = small_keys;
    uint32_t n = 0, cap = SMALL;
    bool trailing = false;
    enum bpcc_status s = BPCC_OK;
    for (;;) {
        if (accept(ps, close)) break;
        if (n == cap) {
            if (cap >= (1u << 24)) {
                s = fail_limit(ps, ps->p, "more than 16M items in one literal");
                goto out;
            }
            cap *= 2;
            struct bpcc_value *ni = bpcc_realloc(items == small_items ? NULL : items, cap * sizeof *ni);
            if (!ni) { s = nomem(ps); goto out; }
            if (items == small_items) memcpy(ni, small_items, n * sizeof *ni);
            items = ni;
            if (dict) {
                const char **nk = bpcc_realloc(keys == small_keys ? NULL : keys, cap * sizeof *nk);
                if (!nk) { s = nomem(ps); goto out; }
                if (keys == small_keys) memcpy(nk, small_keys, n * sizeof *nk);
                keys = nk;
            }
        }
        if (dict) {
            const char *at;
            const char *k = parse_name(ps, "a key", &at);
            if (!k) { s = ps->status; goto out; }
            for (uint32_t i = 0; i < n; i++)
                if (keys[i] == k) {
                    s = fail_at(ps, at, "duplicate key '%s'", k);
                    goto out;
                }
            keys[n] = k;
            if ((s = expect(ps, ':'))) goto out;
        }
        if ((s = parse_value(ps, &items[n], depth + 1))) goto out;
        n++;
        trailing = false;
        if (accept(ps, ',')) {
            trailing = true;
            continue;
        }
        if ((s = expect(ps, close))) goto out;
        break;
    }
    if ((s = bpcc_value_seq_new(ps->g, kind, n, out))) { s = nomem(ps); goto out; }
    if (n) memcpy(out->u.seq.items, items, n * sizeof *items);
    if (dict && n) memcpy(out->u.seq.keys, keys, n * sizeof *keys);
    if (trailing_comma_out) *trailing_comma_out = trailing;
out:
    if (items != small_items) bpcc_xfree(items);
    if (keys != small_keys) bpcc_xfree(keys);
    return s;
}

static enum bpcc_status parse_number(struct parser *ps, struct bpcc_value *out)
{
    const char *start = ps->p, *q = ps->p;
    if (q < ps->end && *q == '-') q++;
    size_t rest = (size_t)(ps->end - q);
    if (rest >= 3 && (memcmp(q, "inf", 3) == 0 || memcmp(q, "nan", 3) == 0) &&
        (rest == 3 || !is_word_char(q[3]))) {
        bool neg = *start == '-';
        double v = q[0] == 'i' ? INFINITY : NAN;
        if (q[0] == 'n' && neg) return fail_at(ps, start, "'-nan' is not a number literal");
        *out = bpcc_value_float(neg ? -v : v);
        ps->p = q + 3;
        return BPCC_OK;
    }
    bool is_float = false;
    while (q < ps->end && *q >= '0' && *q <= '9') q++;
    if (q < ps->end && *q == '.') {
        is_float = true;
        q++;
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        is_float = true;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        const char *digits = q;
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
        if (q == digits) return fail_at(ps, start, "malformed number: exponent has no digits");
    }
    if (q < ps->end && is_word_char(*q)) {
        char b[48];
        return fail_at(ps, start, "malformed number %s", found(ps, start, b));
    }
    if (!is_float) {
        int64_t v;
        if (parse_int(ps, &v)) return ps->status;
        *out = bpcc_value_int(v);
        return BPCC_OK;
    }
    char tmp[64];
    size_t n = (size_t)(q - start);
    if (n >= sizeof tmp) return fail_at(ps, start, "number literal too long");
    memcpy(tmp, start, n);
    tmp[n] = 0;
    errno = 0;
    double v = strtod(tmp, NULL);
    if (errno == ERANGE && isinf(v))
        return fail_at(ps, start, "float literal out of range (write inf for infinity)");
    ps->p = q;
    *out = bpcc_value_float(v);
    return BPCC_OK;
}

static enum bpcc_status parse_value(struct parser *ps, struct bpcc_value *out, int depth)
{
    skip_space(ps);
    const char *at = ps->p;
    if (depth > BPCC_MAX_VALUE_DEPTH)
        return fail_limit(ps, at, "values nest deeper than 64 levels");
    *out = bpcc_value_none();
    if (at >= ps->end) return fail_at(ps, at, "expected a value, found end of file");
    char c = *at;
    if (c == '%') {
        ps->p++;
        const char *name_at = ps->p;
        size_t n = peek_word(ps);
        if (ps->p != name_at || n == 0) return fail_at(ps, at, "expected a node name after '%%'");
        struct bpcc_node *ref = bpcc_graph_find_node_n(ps->g, ps->p, n);
        int len = n > 4096 ? 4096 : (int)n;
        if (!ref) return fail_at(ps, at, "use of undefined node '%%%.*s'", len, ps->p);
        if (ref->kind == BPCC_NODE_OUTPUT)
            return fail_at(ps, at, "the output node '%%%.*s' cannot be used as a value", len, ps->p);
        ps->p += n;
        *out = bpcc_value_node(ref);
        return BPCC_OK;
    }
    if (c == '"') {
        const char *s = parse_string(ps);
        if (!s) return ps->status;
        out->kind = BPCC_VAL_STR;
        out->u.s = s;
        return BPCC_OK;
    }
    if (c == '(') {
        ps->p++;
        bool trailing = false;
        enum bpcc_status s = parse_items(ps, ')', false, out, BPCC_VAL_TUPLE, depth, &trailing);
        if (s) return s;
        if (out->n == 1 && !trailing)
            return fail_at(ps, at, "a one-element tuple is written '(x,)'");
        return BPCC_OK;
    }
    if (c == '[') {
        ps->p++;
        return parse_items(ps, ']', false, out, BPCC_VAL_LIST, depth, NULL);
    }
    if (c == '{') {
        ps->p++;
        return parse_items(ps, '}', true, out, BPCC_VAL_DICT, depth, NULL);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps, out);
    if (c == '.' && ps->end - at >= 3 && memcmp(at, "...", 3) == 0) {
        ps->p += 3;
        out->kind = BPCC_VAL_ELLIPSIS;
        return BPCC_OK;
    }
    size_t n = peek_word(ps);
    if (n == 0) {
        char b[48];
        return fail_at(ps, at, "expected a value, found %s", found(ps, at, b));
    }
#define IS(w) (n == sizeof(w) - 1 && memcmp(at, w, n) == 0)
    if (IS("None")) { ps->p += n; return BPCC_OK; }
    if (IS("True") || IS("False")) {
        ps->p += n;
        *out = bpcc_value_bool(at[0] == 'T');
        return BPCC_OK;
    }
    if (IS("inf") || IS("nan")) return parse_number(ps, out);
    if (IS("slice")) {
        ps->p += n;
        if (!accept(ps, '(')) return fail_at(ps, ps->p, "expected '(' after 'slice'");
        if (parse_items(ps, ')', false, out, BPCC_VAL_TUPLE, depth, NULL)) return ps->status;
        if (out->n != 3)
            return fail_at(ps, at, "slice takes exactly three values: slice(start, stop, step)");
        out->kind = BPCC_VAL_SLICE;
        return BPCC_OK;
    }
    if (IS("device")) {
        ps->p += n;
        if (expect(ps, '(')) return ps->status;
        const char *s = parse_string(ps);
        if (!s || expect(ps, ')')) return ps->status;
        out->kind = BPCC_VAL_DEVICE;
        out->u.s = s;
        return BPCC_OK;
    }
#undef IS
    char *word = bpcc_arena_strndup(&ps->g->arena, at, n);
    if (!word) return nomem(ps);
    if (strncmp(word, "torch.", 6) == 0) {
        enum bpcc_dtype t = bpcc_dtype_from_name(word);
        if (t != BPCC_DTYPE_NONE) {
            ps->p += n;
            *out = bpcc_value_dtype(t);
            return BPCC_OK;
        }
    }
    if (!bpcc_symbol_valid(word))
        return fail_at(ps, at, "unknown word '%s' (values are None, True, False, numbers, "
                               "strings, %%nodes, (tuples), [lists], {dicts}, slice(...), "
                               "device(...), ... or dotted symbols such as torch.float32)", word);
    ps->p += n;
    out->kind = BPCC_VAL_SYMBOL;
    out->u.s = bpcc_intern_n(&ps->g->intern, word, n);
    return out->u.s ? BPCC_OK : nomem(ps);
}

/* f32[1, 3, 224, 224] into *dtype, dims[0 .. *ndim) */
static enum bpcc_status parse_ttype(struct parser *ps, enum bpcc_dtype *dtype, int64_t dims[BPCC_MAX_DIMS],
                                    uint32_t *ndim)
{
    skip_space(ps);
    const char *at = ps->p;
    size_t n = peek_word(ps);
    char word[16];
    if (n == 0 || n >= sizeof word) {
        char b[48];
        return fail_at(ps, at, "expected a tensor type such as f32[1, 3], found %s", found(ps, at, b));
    }
    memcpy(word, at, n);
    word[n] = 0;
    enum bpcc_dtype t = BPCC_DTYPE_NONE;
    for (int k = 1; k < BPCC_DTYPE_COUNT; k++)
        if (strcmp(word, bpcc_dtype_short_name((enum bpcc_dtype)k)) == 0) t = (enum bpcc_dtype)k;
    if (t == BPCC_DTYPE_NONE)
        return fail_at(ps, at, "unknown element type '%s' (f32, f64, f16, bf16, i64, i32, i16, "
                               "i8, u8, bool, qu8, qi8, qi32)", word);
    if (bpcc_dtype_size(t) == 0)
        return fail_at(ps, at, "element type '%s' cannot be stored in a tensor", word);
    ps->p += n;
    if (ps->p >= ps->end || *ps->p != '[')
        return fail_at(ps, ps->p, "expected '[' right after element type '%s'", word);
    ps->p++;
    *dtype = t;
    *ndim = 0;
    if (accept(ps, ']')) return BPCC_OK;
    for (;;) {
        skip_space(ps);
        const char *dim_at = ps->p;
        int64_t v;
        if (parse_int(ps, &v)) return ps->status;
        if (v < 0) return fail_at(ps, dim_at, "dimension %lld is negative", (long long)v);
        if (*ndim >= BPCC_MAX_DIMS)
            return fail_limit(ps, dim_at, "tensor rank exceeds 8 dimensions");
        dims[(*ndim)++] = v;
        if (accept(ps, ',')) continue;
        return expect(ps, ']');
    }
}

static enum bpcc_status parse_meta(struct parser *ps, struct bpcc_value *out, int depth)
{
    skip_space(ps);
    if (depth > BPCC_MAX_VALUE_DEPTH) return fail_limit(ps, ps->p, "metadata nests too deep");
    char open = ps->p < ps->end ? *ps->p : 0;
    if (open == '(' || open == '[') {
        ps->p++;
        char close = open == '(' ? ')' : ']';
        enum bpcc_value_kind kind = open == '(' ? BPCC_VAL_TUPLE : BPCC_VAL_LIST;
        struct bpcc_value items[256];
        uint32_t n = 0;
        bool trailing = false;
        while (!accept(ps, close)) {
            if (n == BPCC_ARRAY_LEN(items)) return fail_limit(ps, ps->p, "more than 256 outputs");
            if (accept_keyword(ps, "None")) items[n] = bpcc_value_none();
            else if (parse_meta(ps, &items[n], depth + 1)) return ps->status;
            n++;
            trailing = accept(ps, ',');
            if (!trailing) {
                if (expect(ps, close)) return ps->status;
                break;
            }
        }
        if (kind == BPCC_VAL_TUPLE && n == 1 && !trailing)
            return fail_at(ps, ps->p, "a one-element tuple is written '(x,)'");
        if (bpcc_value_seq_new(ps->g, kind, n, out)) return nomem(ps);
        if (n) memcpy(out->u.seq.items, items, n * sizeof *items);
        return BPCC_OK;
    }
    enum bpcc_dtype dt;
    int64_t dims[BPCC_MAX_DIMS];
    uint32_t nd;
    if (parse_ttype(ps, &dt, dims, &nd)) return ps->status;
    struct bpcc_value tt = {.kind = BPCC_VAL_TTYPE, .n = nd, .u.ttype = {dt, dims}};
    return bpcc_value_copy(ps->g, out, &tt) ? nomem(ps) : BPCC_OK; /* the dims into the arena */
}

static enum bpcc_status parse_header(struct parser *ps)
{
    skip_lines(ps);
    const char *at = ps->p;
    if (ps->end - ps->p < 10 || memcmp(ps->p, "bpcc-model", 10) != 0 ||
        (ps->end - ps->p > 10 && is_word_char(ps->p[10])))
        return fail_at(ps, at, "not a bpcc model file: expected 'bpcc-model 1' on the first line");
    ps->p += 10;
    skip_space(ps);
    const char *vat = ps->p;
    int64_t v;
    if (parse_int(ps, &v)) return ps->status;
    if (v != 1)
        return fail_at(ps, vat, "unsupported model format version %lld (this bpcc reads 1)",
                       (long long)v);
    if (expect_eol(ps)) return ps->status;
    skip_lines(ps);
    if (accept_keyword(ps, "weights")) {
        skip_space(ps);
        ps->g->weights_line = ps->line;
        ps->g->weights_col = col_of(ps, ps->p);
        const char *w = parse_string(ps);
        if (!w) return ps->status;
        if (!w[0]) return fail_at(ps, ps->p - 2, "empty weights file name");
        ps->g->weights_name = w;
        if (expect_eol(ps)) return ps->status;
    }
    return BPCC_OK;
}

static enum bpcc_status parse_module(struct parser *ps, const char *kw_at)
{
    const char *name_at;
    const char *name = parse_name(ps, "a module name", &name_at);
    if (!name || expect(ps, ':')) return ps->status;
    const char *type = parse_name(ps, "a module type", NULL);
    if (!type) return ps->status;
    struct bpcc_module *prev = bpcc_graph_find_module(ps->g, name);
    if (prev) {
        fail_at(ps, name_at, "duplicate module '%s'", name);
        bpcc_diag_note(ps->d, prev->src_line, prev->src_col, "'%s' was first defined here", name);
        return ps->status;
    }
    struct bpcc_module *m;
    if (bpcc_graph_add_module(ps->g, name, type, &m, NULL)) return nomem(ps);
    m->src_line = ps->line;
    m->src_col = col_of(ps, kw_at);
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == '{') {
        ps->p++;
        struct bpcc_value attrs;
        struct bpcc_graph *g = ps->g;
        struct bpcc_arena_mark mark = bpcc_arena_mark(&g->arena);
        uint32_t n_strings = g->intern.table.n, n_shapes = g->shapes.n;
        if (parse_items(ps, '}', true, &attrs, BPCC_VAL_DICT, 0, NULL)) return ps->status;
        if (bpcc_value_has_nodes(&attrs))
            return fail_at(ps, name_at, "module attributes may not refer to nodes");
        struct bpcc_module *same = NULL;
        for (uint32_t i = 0; i < BPCC_ARRAY_LEN(ps->like) && !same; i++)
            if (ps->like[i] && bpcc_value_equal(&ps->like[i]->attrs, &attrs))
                same = ps->like[i];
        if (same) {
            /* the copy just parsed goes back to the arena when it made no string or shape that
            ** something else now refers to */
            if (g->intern.table.n == n_strings && g->shapes.n == n_shapes) bpcc_arena_rewind(&g->arena, mark);
            bpcc_module_share_attrs(m, same);
        } else {
            m->attrs = attrs;
            m->attrs_cap = attrs.n;
            if (attrs.n) ps->like[ps->next_like++ % BPCC_ARRAY_LEN(ps->like)] = m;
        }
    }
    if (expect_eol(ps)) return ps->status;
    /* tensor lines */
    for (;;) {
        skip_lines(ps);
        enum bpcc_tensor_role role;
        const char *tat = ps->p;
        if (accept_keyword(ps, "param")) role = BPCC_TENSOR_PARAM;
        else if (accept_keyword(ps, "buffer")) role = BPCC_TENSOR_BUFFER;
        else if (accept_keyword(ps, "constant")) role = BPCC_TENSOR_CONSTANT;
        else return BPCC_OK;
        const char *tn_at;
        const char *tn = parse_name(ps, "a tensor name", &tn_at);
        if (!tn) return ps->status;
        if (strchr(tn, '.') || !tn[0])
            return fail_at(ps, tn_at, "tensor name '%s' must be a plain attribute name", tn);
        if (bpcc_module_tensor(m, tn)) return fail_at(ps, tn_at, "duplicate tensor '%s' in module '%s'", tn, name);
        if (expect(ps, ':')) return ps->status;
        enum bpcc_dtype dt;
        int64_t dims[BPCC_MAX_DIMS];
        uint32_t nd;
        if (parse_ttype(ps, &dt, dims, &nd) || expect_eol(ps)) return ps->status;
        struct bpcc_tensor *t = bpcc_tensor_header(&ps->g->arena, nd);
        if (!t) return nomem(ps);
        t->dtype = dt;
        memcpy(t->dims, dims, nd * sizeof *dims);
        t->src_line = ps->line;
        t->src_col = col_of(ps, tat);
        bool overflow;
        bpcc_tensor_expected_bytes(t, &overflow);
        if (overflow) return fail_limit(ps, tat, "tensor size overflows 64 bits");
        if (bpcc_module_set_tensor(m, tn, role, t, NULL)) return nomem(ps);
    }
}

static enum bpcc_status parse_node(struct parser *ps)
{
    const char *at = ps->p;
    ps->p++; /* '%' */
    size_t n = peek_word(ps);
    if (ps->p != at + 1 || n == 0) return fail_at(ps, at, "expected a node name after '%%'");
    /* the name's intern slot, taken once: it names the node at the end, unless the table's slots
    ** moved meanwhile (interning the rest of the line grew it) */
    uint32_t hash = bpcc_str_hash(ps->p, n);
    const char *name;
    void **slot = bpcc_intern_slot(&ps->g->intern, ps->p, n, hash, &name, NULL);
    if (!slot) return nomem(ps);
    uint32_t epoch = ps->g->intern.table.epoch;
    ps->p += n;
    struct bpcc_node *prev = bpcc_graph_slot_node(slot);
    if (prev) {
        fail_at(ps, at, "duplicate node name '%%%s'", name);
        bpcc_diag_note(ps->d, prev->src_line, prev->src_col, "'%%%s' was first defined here", name);
        return ps->status;
    }
    if (expect(ps, '=')) return ps->status;
    skip_space(ps);
    const char *kind_at = ps->p;
    size_t kn = peek_word(ps);
    char kind_word[32];
    bpcc_str_catn(kind_word, sizeof kind_word, 0, ps->p, kn);
    enum bpcc_node_kind kind = kn ? bpcc_node_kind_from_name(kind_word) : BPCC_NODE_KIND_COUNT;
    if (kind == BPCC_NODE_KIND_COUNT) {
        char b[48];
        return fail_at(ps, kind_at, "expected a node kind (placeholder, get_attr, call_module, "
                                    "call_function, call_method, output), found %s",
                       found(ps, kind_at, b));
    }
    ps->p += kn;
    const char *target = parse_name(ps, "a target", NULL);
    if (!target) return ps->status;
    skip_space(ps);
    const char *args_at = ps->p;
    if (ps->p >= ps->end || *ps->p != '(')
        return fail_at(ps, args_at, "expected '(' to open the argument list");
    ps->p++;
    struct bpcc_value args, kwargs = {.kind = BPCC_VAL_DICT};
    bool trailing = false;
    if (parse_items(ps, ')', false, &args, BPCC_VAL_TUPLE, 0, &trailing)) return ps->status;
    if (args.n == 1 && !trailing) return fail_at(ps, args_at, "a one-element tuple is written '(x,)'");
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == '{') {
        ps->p++;
        if (parse_items(ps, '}', true, &kwargs, BPCC_VAL_DICT, 0, NULL)) return ps->status;
    }
    struct bpcc_value meta = bpcc_value_none();
    if (accept(ps, ':') && parse_meta(ps, &meta, 0)) return ps->status;
    const char **scope = NULL;
    if (accept(ps, '@')) {
        const char *sat = NULL;
        if (!(scope = BPCC_ARENA_NEWN(&ps->g->arena, const char *, 2))) return nomem(ps);
        scope[0] = parse_name(ps, "a scope module path", &sat);
        if (!scope[0]) return ps->status;
        if (!*scope[0]) return fail_at(ps, sat, "a scope names a submodule; the root scope is written by leaving '@' out");
        if (expect(ps, ':')) return ps->status;
        scope[1] = parse_name(ps, "the scope's module type", NULL);
        if (!scope[1]) return ps->status;
    }
    if (expect_eol(ps)) return ps->status;
    if (kind == BPCC_NODE_OUTPUT && bpcc_graph_output(ps->g))
        return fail_at(ps, at, "a graph has one output node; '%%%s' is a second",
                       bpcc_graph_output(ps->g)->name);
    if (ps->g->n_nodes >= MAX_NODES) return fail_limit(ps, at, "more than 16M nodes");
    struct bpcc_node *node;
    /* The values are already in the graph's arena: the node adopts them. A name the graph would
    ** not give a node as it is (a leading digit, a dot) goes the general way, which renames it. */
    enum bpcc_status s;
    if (!bpcc_node_name_valid(name)) {
        s = bpcc_graph_node_new(ps->g, kind, name, target, &args, &kwargs, true, &node, NULL);
    } else {
        if (ps->g->intern.table.epoch != epoch)
            slot = bpcc_intern_slot(&ps->g->intern, name, n, hash, &name, NULL);
        if (!slot) return nomem(ps);
        s = bpcc_graph_node_new_named(ps->g, kind, name, slot, target, &args, &kwargs, &node, NULL);
    }
    if (s) return s == BPCC_ERR_NOMEM ? nomem(ps) : fail_at(ps, at, "invalid node");
    if (bpcc_graph_meta(ps->g, &meta, &node->meta)) return nomem(ps);
    node->scope = scope;
    node->src_line = ps->line;
    node->src_col = col_of(ps, at);
    return BPCC_OK;
}

#define RESERVE_AFTER 1024

enum bpcc_status bpcc_graph_parse(const char *text, size_t len, const char *filename,
                                  struct bpcc_graph **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_new(&g, d);
    if (s) return s;
    struct parser ps = {.src = text, .p = text, .end = text + len, .line_start = text, .line = 1,
                        .g = g, .d = d};
    bpcc_buf_init(&ps.scratch);
    if (filename) {
        g->source_file = bpcc_graph_intern(g, filename);
        if (!g->source_file) {
            s = bpcc_diag_nomem(d);
            goto out;
        }
        ps.file = g->source_file;
    }
    if (memchr(text, 0, len)) {
        const char *z = memchr(text, 0, len);
        /* find its line for the message */
        for (const char *q = text; q < z; q++)
            if (*q == '\n') {
                ps.line++;
                ps.line_start = q + 1;
            }
        s = fail_at(&ps, z, "NUL byte in model text (is this a binary file?)");
        goto out;
    }
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) ps.p += 3, ps.line_start = ps.p;
    /* Each node line (its first non-blank character a '%') names a node of its own: once the
    ** text has shown itself a model (RESERVE_AFTER nodes read), the name table is made big enough
    ** for the rest at once, instead of doubling its way there (a 1M-node model: 15 tables, each
    ** zeroed and rehashed, where one does). A lower bound, as module names are often node names
    ** too, and no more than a node line's shortest length allows in the text (17 bytes,
    ** "%a = output o ()"): junk made of '%' lines gets no big table. */
    size_t node_lines = 0;
    for (const char *q = text, *end = text + len; q < end;) {
        while (q < end && (*q == ' ' || *q == '\t')) q++;
        node_lines += q < end && *q == '%';
        if (!(q = memchr(q, '\n', (size_t)(end - q)))) break;
        q++;
    }
    if (node_lines > len / 17) node_lines = len / 17;
    if (node_lines > UINT32_MAX / 2) node_lines = UINT32_MAX / 2;
    if ((s = parse_header(&ps))) goto out;
    for (;;) {
        skip_lines(&ps);
        const char *at = ps.p;
        if (accept_keyword(&ps, "module")) {
            if ((s = parse_module(&ps, at))) goto out;
            continue;
        }
        if (accept_keyword(&ps, "graph")) {
            if ((s = expect_eol(&ps))) goto out;
            break;
        }
        char b[48];
        s = fail_at(&ps, at, "expected 'module' or 'graph', found %s", found(&ps, at, b));
        goto out;
    }
    size_t n_nodes = 0;
    for (;;) {
        skip_lines(&ps);
        if (ps.p >= ps.end) break;
        if (*ps.p != '%') {
            char b[48];
            s = fail_at(&ps, ps.p, "expected a node ('%%name = kind target (args)'), found %s",
                        found(&ps, ps.p, b));
            goto out;
        }
        if ((s = parse_node(&ps))) goto out;
        /* node names are often the names of the modules read before them: the names are at
        ** least as many as the node lines, or as those already read, not the sum */
        if (++n_nodes == RESERVE_AFTER && node_lines > g->intern.table.n)
            (void)bpcc_strmap_reserve(&g->intern.table, (uint32_t)node_lines);
    }
    if (!bpcc_graph_output(g)) {
        s = fail_at(&ps, ps.p, "the graph has no output node");
        goto out;
    }
out:
    bpcc_buf_release(&ps.scratch);
    if (s) {
        bpcc_graph_free(g);
        return s;
    }
    *out = g;
    return BPCC_OK;
}
