/*
** buf.c — a growable byte buffer with sticky out-of-memory, for printers and writers.
*/
#include "core.h"

#include <math.h>

void bpcc_buf_init(struct bpcc_buf *b) { memset(b, 0, sizeof *b); }

void bpcc_buf_release(struct bpcc_buf *b)
{
    bpcc_xfree(b->data);
    memset(b, 0, sizeof *b);
}

static bool fail(struct bpcc_buf *b)
{
    b->oom = true;
    b->cap = b->len; /* no room: the inline appends take the slow path, which refuses */
    return false;
}

void bpcc_buf_set_oom(struct bpcc_buf *b) { fail(b); }

static bool reserve(struct bpcc_buf *b, size_t extra)
{
    if (b->oom) return false;
    if (extra > SIZE_MAX - b->len - 1) return fail(b);
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = bpcc_realloc(b->data, cap);
    if (!p) return fail(b);
    b->data = p;
    b->cap = cap;
    return true;
}

void bpcc_buf_add_slow(struct bpcc_buf *b, const void *p, size_t n)
{
    if (!reserve(b, n)) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void bpcc_buf_add_i64(struct bpcc_buf *b, int64_t v)
{
    char t[24];
    bpcc_buf_add(b, t, bpcc_format_i64(v, t));
}

size_t bpcc_format_i64(int64_t v, char *out)
{
    char t[24];
    size_t n = 0, len = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do t[n++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = t[--n];
    out[len] = 0;
    return len;
}

size_t bpcc_str_catn(char *out, size_t size, size_t len, const char *s, size_t n)
{
    if (len < size) {
        size_t room = size - len - 1, k = n < room ? n : room;
        memcpy(out + len, s, k);
        out[len + k] = 0;
    }
    return len + n;
}

size_t bpcc_str_cat(char *out, size_t size, size_t len, const char *s)
{
    return bpcc_str_catn(out, size, len, s, strlen(s));
}

size_t bpcc_str_cat_i64(char *out, size_t size, size_t len, int64_t v)
{
    char t[24];
    return bpcc_str_catn(out, size, len, t, bpcc_format_i64(v, t));
}

void bpcc_buf_printf(struct bpcc_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *bpcc_buf_take(struct bpcc_buf *b, size_t *len_out)
{
    if (!reserve(b, 0)) {
        bpcc_buf_release(b);
        return NULL;
    }
    char *r = b->data;
    if (len_out) *len_out = b->len;
    memset(b, 0, sizeof *b);
    return r;
}

void bpcc_format_double(double v, char out[32])
{
    if (isnan(v)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(v)) {
        strcpy(out, v < 0 ? "-inf" : "inf");
        return;
    }
    /* Python's repr: the shortest digits that read back exactly, printed in fixed notation
    ** when the decimal exponent is in [-4, 16), else in scientific notation. */
    char sci[40];
    int prec = 0;
    for (; prec <= 16; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec, v);
        if (strtod(sci, NULL) == v) break;
    }
    int exp10 = atoi(strchr(sci, 'e') + 1);
    if (exp10 >= -4 && exp10 < 16) {
        int decimals = prec - exp10;
        snprintf(out, 32, "%.*f", decimals > 0 ? decimals : 0, v);
        if (!strchr(out, '.')) strcat(out, ".0");
    } else {
        size_t n = strlen(sci); /* at most 24: "-1.2345678901234567e-308" */
        memcpy(out, sci, n < 31 ? n : 31);
        out[n < 31 ? n : 31] = 0;
    }
}
