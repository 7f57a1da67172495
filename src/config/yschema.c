/*
** yschema.c — reading a YAML document tree against a schema: typed scalars, unknown keys with
** "did you mean", and one reporting path (file:line:col, the caller's note naming the enclosing
** construct, first error counted, warnings that --strict turns into errors). Shared by the
** backend-config and qconfig loaders.
*/
#include "yschema.h"

#include <errno.h>
#include <math.h>

/* dtypes a dtype config may name */
static const struct { const char *name; enum bpcc_dtype t; } dtype_names[] = {
    {"quint8", BPCC_DTYPE_QUINT8}, {"qint8", BPCC_DTYPE_QINT8},     {"qint32", BPCC_DTYPE_QINT32},
    {"quint4x2", BPCC_DTYPE_QUINT4X2}, {"float32", BPCC_DTYPE_F32}, {"float", BPCC_DTYPE_F32},
    {"float16", BPCC_DTYPE_F16},   {"bfloat16", BPCC_DTYPE_BF16},   {"float64", BPCC_DTYPE_F64},
    {"int8", BPCC_DTYPE_I8},       {"uint8", BPCC_DTYPE_U8},        {"int16", BPCC_DTYPE_I16},
    {"int32", BPCC_DTYPE_I32},     {"int64", BPCC_DTYPE_I64},       {"bool", BPCC_DTYPE_BOOL},
};

/* One problem at `at`: an error, or a warning that --strict makes an error. */
static void vreport(struct yschema *Y, const struct ynode *at, bool warning, const char *fmt,
                    va_list ap)
{
    char msg[BPCC_DIAG_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    uint32_t line = at ? at->line : 0, col = at ? at->col : 0;
    if (warning && !Y->strict) {
        bpcc_diag_warning(Y->d, Y->file, line, col, "%s", msg);
    } else {
        Y->errors++;
        bpcc_diag_error(Y->d, BPCC_ERR_CONFIG, Y->file, line, col, "%s", msg);
    }
    if (Y->note) Y->note(Y->note_ud);
}

bool ys_err(struct yschema *Y, const struct ynode *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(Y, at, false, fmt, ap);
    va_end(ap);
    return false;
}

void ys_warn(struct yschema *Y, const struct ynode *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(Y, at, true, fmt, ap);
    va_end(ap);
}

bool ys_oom(struct yschema *Y)
{
    if (!Y->oom) bpcc_diag_nomem(Y->d);
    Y->oom = true;
    Y->errors++;
    return false;
}

/* "a, b or c" of a NULL-terminated list, into buf */
const char *ys_one_of(const char *const *names, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; names[i] && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", names[i]);
    return buf;
}

const char *ys_kind_word(const struct ynode *n)
{
    return n->kind == YNODE_MAP ? "a mapping" : n->kind == YNODE_SEQ ? "a list" : "a scalar";
}

/* }================================================ */

/* {==================== scalars ==================== */

bool ys_want_kind(struct yschema *Y, const struct ynode *n, enum ynode_kind k, const char *what)
{
    if (n->kind == k) return true;
    return ys_err(Y, n, "%s must be %s, not %s", what,
               k == YNODE_MAP ? "a mapping" : k == YNODE_SEQ ? "a list" : "a scalar", ys_kind_word(n));
}

bool ys_string(struct yschema *Y, const struct ynode *n, const char *what, const char **out)
{
    if (!ys_want_kind(Y, n, YNODE_SCALAR, what)) return false;
    if (!n->str[0]) return ys_err(Y, n, "%s must not be empty", what);
    *out = bpcc_intern_n(Y->intern, n->str, strlen(n->str));
    return *out ? true : ys_oom(Y);
}

bool ys_bool(struct yschema *Y, const struct ynode *n, const char *what, bool *out)
{
    if (!ys_want_kind(Y, n, YNODE_SCALAR, what)) return false;
    const char *s = n->str;
    if (n->plain && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))) {
        *out = true;
        return true;
    }
    if (n->plain && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))) {
        *out = false;
        return true;
    }
    return ys_err(Y, n, "%s must be true or false, not '%s'", what, s);
}

bool ys_int(struct yschema *Y, const struct ynode *n, const char *what, int64_t *out)
{
    if (!ys_want_kind(Y, n, YNODE_SCALAR, what)) return false;
    char *end;
    errno = 0;
    long long v = strtoll(n->str, &end, 10);
    if (!n->plain || !n->str[0] || *end || errno == ERANGE)
        return ys_err(Y, n, "%s must be an integer, not '%s'", what, n->str);
    *out = v;
    return true;
}

bool ys_number(struct yschema *Y, const struct ynode *n, const char *what, double *out)
{
    if (!ys_want_kind(Y, n, YNODE_SCALAR, what)) return false;
    const char *s = n->str;
    char *end;
    double v;
    if (!strcmp(s, ".inf") || !strcmp(s, ".Inf") || !strcmp(s, "+.inf")) v = INFINITY;
    else if (!strcmp(s, "-.inf") || !strcmp(s, "-.Inf")) v = -INFINITY;
    else {
        errno = 0;
        v = strtod(s, &end);
        if (!n->plain || !s[0] || *end || isnan(v) || (errno == ERANGE && isinf(v)))
            return ys_err(Y, n, "%s must be a number, not '%s'", what, s);
    }
    *out = v;
    return true;
}

/* Was a numeric scalar written as an integer? (for dumping it back the same way) */
bool ys_written_int(const struct ynode *n)
{
    return n->kind == YNODE_SCALAR && !strpbrk(n->str, ".eEnN");
}

bool ys_is_null(const struct ynode *n)
{
    return n->kind == YNODE_SCALAR && n->plain &&
           (!strcmp(n->str, "null") || !strcmp(n->str, "~") || !strcmp(n->str, "Null") ||
            !strcmp(n->str, "NULL") || !n->str[0]);
}

/* Unknown keys of a mapping, with a suggestion. */
void ys_check_keys(struct yschema *Y, const struct ynode *map, const char *const *allowed,
                       const char *where)
{
    for (uint32_t i = 0; i < map->n; i++) {
        const struct ynode *k = map->items[2 * i];
        bool ok = false;
        for (size_t j = 0; allowed[j]; j++)
            if (!strcmp(allowed[j], k->str)) ok = true;
        if (ok) continue;
        const char *best = NULL;
        unsigned best_d = 4;
        for (size_t j = 0; allowed[j]; j++) {
            unsigned dist = bpcc_edit_distance(k->str, allowed[j], 3);
            if (dist < best_d) {
                best_d = dist;
                best = allowed[j];
            }
        }
        char list[1024];
        if (best)
            ys_err(Y, k, "unknown key '%s' in %s (did you mean '%s'?)", k->str, where, best);
        else
            ys_err(Y, k, "unknown key '%s' in %s (valid keys: %s)", k->str, where,
                ys_one_of(allowed, list, sizeof list));
    }
}

bool ys_dtype(struct yschema *Y, const struct ynode *n, const char *what,
                      enum bpcc_dtype *out)
{
    if (!ys_want_kind(Y, n, YNODE_SCALAR, what)) return false;
    const char *s = n->str;
    if (!strncmp(s, "torch.", 6)) s += 6;
    for (size_t i = 0; i < BPCC_ARRAY_LEN(dtype_names); i++)
        if (!strcmp(s, dtype_names[i].name)) {
            *out = dtype_names[i].t;
            return true;
        }
    return ys_err(Y, n, "unknown dtype '%s' in %s (valid: quint8, qint8, qint32, quint4x2, "
                     "float32, float16, bfloat16, float64, int8, uint8, int16, int32, int64, bool)",
               n->str, what);
}

