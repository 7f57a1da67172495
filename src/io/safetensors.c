/*
** safetensors.c — reader (mmap, full validation) and writer of the safetensors format:
** 8-byte little-endian header length N, N bytes of JSON header, then the data section.
** The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
** (offsets relative to the data section) plus an optional "__metadata__" string map.
** Errors in a binary file are reported by byte offset.
**
** The header is the index of every weight (60 MB for a million-node model), so it is read with
** yajl's event parser straight into the entries, and written with yajl's generator: no document
** is built (jansson's cost ~17k instructions per tensor on reading, the events ~1k).
*/
#include "../ir/ir.h"
#include "ymem.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

#define MAX_HEADER (100u << 20) /* as the reference implementation: 100 MB */

struct st_entry {
    const char *name;           /* in the `mem` arena */
    enum bpcc_dtype dtype;
    uint32_t ndim;
    const int64_t *dims;        /* in the `mem` arena */
    uint64_t begin, end;        /* data-section offsets */
    const void *data;
    void *copy;                 /* aligned copy when the mapped data is misaligned */
    uint32_t pos;               /* index in file order */
};

struct bpcc_safetensors {
    void *map;
    size_t map_len;
    struct st_entry **entries;  /* in file order: sorted by begin */
    uint32_t n, cap;
    /* name -> entry: open addressing (strmap.c), one cache miss a lookup where uthash's chains
    ** took three or four (binding a 1M-node model's tensors: 8 % of its load) */
    struct bpcc_strmap by_name;
    struct bpcc_arena mem;      /* the entries, their names and shapes */
    void **copies;              /* after bpcc_safetensors_keep_data: the entries' aligned copies */
    uint32_t n_copies;
};

static const char *const st_dtypes = "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL";

void bpcc_safetensors_close(struct bpcc_safetensors *st)
{
    if (!st) return;
    for (uint32_t i = 0; i < st->n; i++) bpcc_xfree(st->entries[i]->copy);
    for (uint32_t i = 0; i < st->n_copies; i++) bpcc_xfree(st->copies[i]);
    bpcc_xfree(st->copies);
    bpcc_strmap_release(&st->by_name);
    bpcc_xfree(st->entries);
    if (st->map && st->map != MAP_FAILED) munmap(st->map, st->map_len);
    bpcc_arena_release(&st->mem);
    bpcc_xfree(st);
}

bool bpcc_safetensors_keep_data(struct bpcc_safetensors *st)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < st->n; i++) k += st->entries[i]->copy != NULL;
    if (k && !(st->copies = bpcc_malloc(k * sizeof *st->copies))) return false;
    for (uint32_t i = 0; i < st->n; i++)
        if (st->entries[i]->copy) st->copies[st->n_copies++] = st->entries[i]->copy;
    bpcc_strmap_release(&st->by_name);
    bpcc_xfree(st->entries);
    st->entries = NULL;
    st->n = st->cap = 0;
    bpcc_arena_release(&st->mem);
    return true;
}

bool bpcc_safetensors_holds(const struct bpcc_safetensors *st, const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)(st ? st->map : NULL);
    return st && st->map && a >= lo && n <= st->map_len && a - lo <= st->map_len - n;
}

bool bpcc_safetensors_release(const struct bpcc_safetensors *st, const void *p, size_t n)
{
    if (!bpcc_safetensors_holds(st, p, n)) return false;
    bpcc_pages_give_back(p, n);
    return true;
}

static int cmp_begin(const void *a, const void *b)
{
    const struct st_entry *x = *(const struct st_entry *const *)a, *y = *(const struct st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Byte offset of the key "name" inside the header, for pointing at a bad entry. */
static uint64_t key_offset(const char *hdr, size_t n, const char *name)
{
    size_t k = strlen(name);
    for (size_t i = 0; i + k + 2 <= n; i++)
        if (hdr[i] == '"' && memcmp(hdr + i + 1, name, k) == 0 && hdr[i + 1 + k] == '"')
            return 8 + i;
    return 8;
}

/* {==================== reading the header: yajl's events ==================== */

enum hp_ctx {
    HP_START,      /* before the header's object */
    HP_TOP,        /* in it, between members */
    HP_TOP_VALUE,  /* after a member's key */
    HP_META,       /* in __metadata__, between members */
    HP_META_VALUE,
    HP_ENTRY,      /* in a tensor's object, between members */
    HP_FIELD,      /* after one of its keys */
    HP_SHAPE,      /* in its "shape" array */
    HP_OFFSETS,    /* in its "data_offsets" array */
    HP_END
};
enum hp_field { F_DTYPE, F_SHAPE, F_OFFSETS, F_OTHER };
enum hp_value { V_OTHER, V_NUMBER, V_STRING, V_MAP, V_ARRAY }; /* containers last */

struct hp {
    struct bpcc_safetensors *st;
    struct bpcc_diag *d;
    const char *path, *hdr;
    size_t hlen;
    uint64_t data_len;
    yajl_handle h;
    enum bpcc_status s;    /* the error that stopped the parse */
    enum hp_ctx ctx;
    uint64_t skip;         /* > 0: in a value nobody reads, this many containers deep */
    bool meta, seen_meta;  /* the member being read is __metadata__; it was there */
    char meta_key[128];    /* the current __metadata__ key, for messages */
    /* the tensor being read */
    char *name;
    enum hp_field field;
    unsigned seen;         /* its fields so far, 1 << field */
    bool dtype_ok, shape_ok, offsets_ok;  /* of the JSON type they need */
    bool shape_uint, offsets_uint;        /* every element a non-negative integer */
    char dtype[32];
    uint32_t ndim, n_offsets;             /* elements seen (may be more than kept) */
    int64_t dims[BPCC_MAX_DIMS];
    uint64_t offsets[2];
};

/* stop the parse with an error at header offset `at`; the callbacks return this */
BPCC_PRINTF(3, 4) static int stop(struct hp *p, uint64_t at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->s = bpcc_diag_error_at_offset(p->d, BPCC_ERR_FORMAT, p->path, at, "%s", msg);
    return 0;
}

static int stop_nomem(struct hp *p)
{
    p->s = bpcc_diag_nomem(p->d);
    return 0;
}

#define KEY_AT(name) key_offset(p->hdr, p->hlen, (name))

/* the file offset of the key that ends at header offset `end` (just past its closing quote) */
static uint64_t key_start(const char *hdr, size_t end)
{
    size_t i = end >= 2 ? end - 2 : 0;
    for (; i > 0; i--) {
        if (hdr[i] != '"') continue;
        size_t bs = 0;
        while (bs < i && hdr[i - 1 - bs] == '\\') bs++;
        if (!(bs & 1)) break;
    }
    return 8 + i;
}

static bool parse_uint(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (!n) return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false; /* a sign, a fraction or an exponent */
        unsigned dgt = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - dgt) / 10) return false;
        v = v * 10 + dgt;
    }
    *out = v;
    return true;
}

/* the tensor's entry is not an object, or lacks a field of the right type */
static int stop_needs_fields(struct hp *p)
{
    return stop(p, KEY_AT(p->name), "tensor '%s' needs \"dtype\" (string), \"shape\" (array) and \"data_offsets\" ([begin, end])",
                p->name);
}

static int finish_entry(struct hp *p)
{
    const char *key = p->name;
    if (!p->dtype_ok || !p->shape_ok || !p->offsets_ok || p->n_offsets != 2) return stop_needs_fields(p);
    enum bpcc_dtype dtype = bpcc_dtype_from_st_name(p->dtype);
    if (dtype == BPCC_DTYPE_NONE)
        return stop(p, KEY_AT(key), "tensor '%s' has dtype '%s'; supported: %s", key, p->dtype, st_dtypes);
    if (p->ndim > BPCC_MAX_DIMS) {
        p->s = bpcc_diag_error_at_offset(p->d, BPCC_ERR_LIMIT, p->path, KEY_AT(key),
                                         "tensor '%s' has %u dimensions; at most %d", key, p->ndim, BPCC_MAX_DIMS);
        return 0;
    }
    if (!p->shape_uint)
        return stop(p, KEY_AT(key), "tensor '%s': shape entries must be non-negative integers", key);
    uint64_t nbytes = bpcc_dtype_size(dtype);
    bool overflow = false;
    for (uint32_t i = 0; i < p->ndim; i++) {
        uint64_t dim = (uint64_t)p->dims[i];
        if (dim && nbytes > UINT64_MAX / dim) overflow = true;
        else nbytes *= dim;
    }
    uint64_t begin = p->offsets[0], end = p->offsets[1];
    if (!p->offsets_uint || begin > end)
        return stop(p, KEY_AT(key), "tensor '%s': data_offsets must be [begin, end] with 0 <= begin <= end", key);
    if (overflow) return stop(p, KEY_AT(key), "tensor '%s': shape overflows 64 bits", key);
    if (end > p->data_len)
        return stop(p, KEY_AT(key), "tensor '%s': data_offsets [%llu, %llu] run past the end of the data (%llu bytes)", key,
                    (unsigned long long)begin, (unsigned long long)end, (unsigned long long)p->data_len);
    if (end - begin != nbytes)
        return stop(p, KEY_AT(key), "tensor '%s': %llu data bytes, but its shape and dtype need %llu", key,
                    (unsigned long long)(end - begin), (unsigned long long)nbytes);
    struct bpcc_safetensors *st = p->st;
    struct st_entry *e = BPCC_ARENA_NEW(&st->mem, struct st_entry);
    int64_t *dims = p->ndim ? BPCC_ARENA_NEWN(&st->mem, int64_t, p->ndim) : NULL;
    if (!e || (p->ndim && !dims)) return stop_nomem(p);
    if (p->ndim) memcpy(dims, p->dims, p->ndim * sizeof *dims);
    static const int64_t no_dims[1];
    *e = (struct st_entry){.name = key, .dtype = dtype, .ndim = p->ndim, .dims = dims ? dims : no_dims, .begin = begin, .end = end};
    if (st->n == st->cap) {
        uint32_t cap = st->cap ? 2 * st->cap : 64;
        struct st_entry **grown = bpcc_realloc(st->entries, (size_t)cap * sizeof *grown);
        if (!grown) return stop_nomem(p);
        st->entries = grown;
        st->cap = cap;
    }
    size_t len = strlen(e->name);
    if (bpcc_strmap_put(&st->by_name, e->name, len, bpcc_str_hash(e->name, len), e)) return stop_nomem(p);
    st->entries[st->n++] = e;
    return 1;
}

/* a value (or a container's start) in the current context */
static int on_value(struct hp *p, enum hp_value k, const char *s, size_t n)
{
    if (p->skip) {
        if (k >= V_MAP) p->skip++;
        return 1;
    }
    switch (p->ctx) {
    case HP_START:
        if (k != V_MAP) return stop(p, 8, "header is not a JSON object");
        p->ctx = HP_TOP;
        return 1;
    case HP_TOP_VALUE:
        if (p->meta) {
            if (k != V_MAP) return stop(p, KEY_AT("__metadata__"), "__metadata__ must be an object of strings");
            p->ctx = HP_META;
            return 1;
        }
        if (k != V_MAP) return stop_needs_fields(p);
        p->ctx = HP_ENTRY;
        return 1;
    case HP_META_VALUE:
        if (k != V_STRING)
            return stop(p, KEY_AT("__metadata__"), "__metadata__ value '%s' is not a string", p->meta_key);
        p->ctx = HP_META;
        return 1;
    case HP_FIELD:
        p->ctx = HP_ENTRY;
        if (p->field == F_DTYPE && k == V_STRING) {
            p->dtype_ok = true;
            size_t m = n < sizeof p->dtype - 1 ? n : sizeof p->dtype - 1;
            memcpy(p->dtype, s, m);
            p->dtype[m] = 0;
        } else if (p->field == F_SHAPE && k == V_ARRAY) {
            p->shape_ok = true;
            p->ctx = HP_SHAPE;
            return 1;
        } else if (p->field == F_OFFSETS && k == V_ARRAY) {
            p->offsets_ok = true;
            p->ctx = HP_OFFSETS;
            return 1;
        }
        if (k >= V_MAP) p->skip = 1; /* a container nobody reads (or of the wrong type) */
        return 1;
    case HP_SHAPE:
    case HP_OFFSETS: {
        uint64_t v = 0;
        bool ok = k == V_NUMBER && parse_uint(s, n, &v) && (p->ctx == HP_OFFSETS || v <= INT64_MAX);
        if (p->ctx == HP_SHAPE) {
            if (!ok) p->shape_uint = false;
            else if (p->ndim < BPCC_MAX_DIMS) p->dims[p->ndim] = (int64_t)v;
            if (p->ndim < UINT32_MAX) p->ndim++;
        } else {
            if (!ok) p->offsets_uint = false;
            else if (p->n_offsets < 2) p->offsets[p->n_offsets] = v;
            if (p->n_offsets < UINT32_MAX) p->n_offsets++;
        }
        if (k >= V_MAP) p->skip = 1;
        return 1;
    }
    default:
        return 1; /* yajl orders keys and values: no other context takes a value */
    }
}

static int y_null(void *ctx) { return on_value(ctx, V_OTHER, NULL, 0); }
static int y_bool(void *ctx, int b)
{
    (void)b;
    return on_value(ctx, V_OTHER, NULL, 0);
}
static int y_number(void *ctx, const char *s, size_t n) { return on_value(ctx, V_NUMBER, s, n); }
static int y_start_map(void *ctx) { return on_value(ctx, V_MAP, NULL, 0); }
static int y_start_array(void *ctx) { return on_value(ctx, V_ARRAY, NULL, 0); }

/* JSON can spell a NUL inside a string (\u0000); a C string cannot hold it */
static int nul_in_string(struct hp *p)
{
    return stop(p, key_start(p->hdr, yajl_get_bytes_consumed(p->h)), "header is not valid JSON: \\u0000 is not allowed in a string");
}

static int y_string(void *ctx, const unsigned char *s, size_t n)
{
    struct hp *p = ctx;
    if (memchr(s, 0, n)) return nul_in_string(p);
    return on_value(p, V_STRING, (const char *)s, n);
}

static int y_key(void *ctx, const unsigned char *key, size_t n)
{
    struct hp *p = ctx;
    const char *s = (const char *)key;
    if (memchr(s, 0, n)) return nul_in_string(p);
    if (p->skip) return 1;
    if (p->ctx == HP_TOP) {
        p->ctx = HP_TOP_VALUE;
        p->meta = n == 12 && !memcmp(s, "__metadata__", 12);
        const struct bpcc_strmap_slot *dup = p->meta ? NULL : bpcc_strmap_get(&p->st->by_name, s, n, bpcc_str_hash(s, n));
        if (dup || (p->meta && p->seen_meta))
            return stop(p, key_start(p->hdr, yajl_get_bytes_consumed(p->h)), "duplicate key '%.*s' in the header",
                        n > 200 ? 200 : (int)n, s);
        if (p->meta) {
            p->seen_meta = true;
            return 1;
        }
        if (!(p->name = bpcc_arena_strndup(&p->st->mem, s, n))) return stop_nomem(p);
        p->seen = 0;
        p->dtype_ok = p->shape_ok = p->offsets_ok = false;
        p->shape_uint = p->offsets_uint = true;
        p->ndim = p->n_offsets = 0;
        p->dtype[0] = 0;
        return 1;
    }
    if (p->ctx == HP_META) {
        size_t m = n < sizeof p->meta_key - 1 ? n : sizeof p->meta_key - 1;
        memcpy(p->meta_key, s, m);
        p->meta_key[m] = 0;
        p->ctx = HP_META_VALUE;
        return 1;
    }
    /* HP_ENTRY */
    static const char *const fields[] = {"dtype", "shape", "data_offsets"};
    p->field = F_OTHER;
    for (int f = 0; f < 3; f++)
        if (strlen(fields[f]) == n && !memcmp(s, fields[f], n)) p->field = (enum hp_field)f;
    if (p->field != F_OTHER) {
        if (p->seen & (1u << p->field))
            return stop(p, key_start(p->hdr, yajl_get_bytes_consumed(p->h)), "tensor '%s' has \"%s\" twice", p->name,
                        fields[p->field]);
        p->seen |= 1u << p->field;
    }
    p->ctx = HP_FIELD;
    return 1;
}

static int y_end_map(void *ctx)
{
    struct hp *p = ctx;
    if (p->skip) {
        p->skip--;
        return 1;
    }
    switch (p->ctx) {
    case HP_META: p->ctx = HP_TOP; return 1;
    case HP_ENTRY: p->ctx = HP_TOP; return finish_entry(p);
    default: p->ctx = HP_END; return 1; /* HP_TOP */
    }
}

static int y_end_array(void *ctx)
{
    struct hp *p = ctx;
    if (p->skip) p->skip--;
    else p->ctx = HP_ENTRY; /* the arrays read are a tensor's shape and data_offsets */
    return 1;
}

static const yajl_callbacks header_events = {
    .yajl_null = y_null, .yajl_boolean = y_bool, .yajl_number = y_number, .yajl_string = y_string,
    .yajl_start_map = y_start_map, .yajl_map_key = y_key, .yajl_end_map = y_end_map,
    .yajl_start_array = y_start_array, .yajl_end_array = y_end_array,
};

/* the header through yajl's events (under bpcc_ymem_run) */
static enum bpcc_status parse_header(struct bpcc_ymem *m, void *ctx)
{
    struct hp *p = ctx;
    p->h = yajl_alloc(&header_events, &m->funcs, p);
    yajl_status ys = yajl_parse(p->h, (const unsigned char *)p->hdr, p->hlen);
    size_t at = yajl_get_bytes_consumed(p->h);
    if (ys == yajl_status_ok) {
        ys = yajl_complete_parse(p->h);
        at = p->hlen;
    }
    enum bpcc_status s = ys == yajl_status_client_canceled ? p->s : BPCC_OK;
    if (ys == yajl_status_error) {
        unsigned char *msg = yajl_get_error(p->h, 0, NULL, 0);
        size_t len = strlen((const char *)msg);
        while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' ' || msg[len - 1] == '.')) len--;
        s = bpcc_diag_error_at_offset(p->d, BPCC_ERR_FORMAT, p->path, 8 + (uint64_t)at, "header is not valid JSON: %.*s",
                                      (int)len, (const char *)msg);
        yajl_free_error(p->h, msg);
    }
    yajl_free(p->h);
    return s;
}

/* }================================================ */

enum bpcc_status bpcc_safetensors_open(const char *path, struct bpcc_safetensors **out,
                                       struct bpcc_diag *d)
{
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "not a regular file");
    }
    struct bpcc_safetensors *st = bpcc_malloc(sizeof *st);
    if (!st) {
        close(fd);
        return bpcc_diag_nomem(d);
    }
    memset(st, 0, sizeof *st);
    bpcc_arena_init(&st->mem);
    enum bpcc_status s = BPCC_OK;
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, 0,
                                      "file is %llu bytes, too short for a safetensors header",
                                      (unsigned long long)size);
        goto fail;
    }
    st->map_len = (size_t)size;
    st->map = mmap(NULL, st->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (st->map == MAP_FAILED) {
        st->map = NULL;
        s = bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "cannot map: %s", strerror(errno));
        goto fail;
    }
#ifdef MADV_POPULATE_READ
    /* Its page tables filled at once, read-only (no copy is made: a page written later is copied
    ** then, as without): what is mapped is read whole (the weights by fusion's folding and the
    ** weight observers, a batch by the interpreter), and filling in one call costs less than a
    ** fault every 16 pages. bpcc quantize of resnet50: fuse 78-81 -> 58-66 ms, the run 254-262 ->
    ** 229-245 ms (docs/PERFORMANCE.md). Advice only: a kernel without it (before 5.14) says EINVAL. */
    (void)madvise(st->map, st->map_len, MADV_POPULATE_READ);
#endif
    const unsigned char *base = st->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | base[i];
    if (hlen > MAX_HEADER) {
        s = bpcc_diag_error_at_offset(d, BPCC_ERR_LIMIT, path, 0,
                                      "header length %llu exceeds the 100 MB limit",
                                      (unsigned long long)hlen);
        goto fail;
    }
    if (hlen > size - 8) {
        s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, 0,
                                      "header length %llu runs past the end of the file "
                                      "(%llu bytes)", (unsigned long long)hlen,
                                      (unsigned long long)size);
        goto fail;
    }
    const char *hdr = (const char *)base + 8;
    if (hlen == 0 || hdr[0] != '{') {
        s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, 8,
                                      "header is not a JSON object");
        goto fail;
    }
    uint64_t data_len = size - 8 - hlen;
    struct hp p = {.st = st, .d = d, .path = path, .hdr = hdr, .hlen = (size_t)hlen, .data_len = data_len};
    struct bpcc_ymem ym;
    if ((s = bpcc_ymem_run(&ym, parse_header, &p, d))) goto fail;
    /* writers put the tensors in header order as a rule: sort only when they did not */
    bool sorted = true;
    for (uint32_t i = 1; i < st->n && sorted; i++) sorted = cmp_begin(&st->entries[i - 1], &st->entries[i]) <= 0;
    if (!sorted) qsort(st->entries, st->n, sizeof *st->entries, cmp_begin);
    uint64_t expect = 0;
    for (uint32_t i = 0; i < st->n; i++) {
        struct st_entry *e = st->entries[i];
        e->pos = i;
        if (e->begin < expect) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, key_offset(hdr, hlen, e->name),
                                          "tensor '%s' overlaps tensor '%s'", e->name,
                                          st->entries[i - 1]->name);
            goto fail;
        }
        if (e->begin > expect) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, key_offset(hdr, hlen, e->name),
                                          "the data section has a hole of %llu bytes before "
                                          "tensor '%s'", (unsigned long long)(e->begin - expect),
                                          e->name);
            goto fail;
        }
        expect = e->end;
        const unsigned char *q = base + 8 + hlen + e->begin;
        size_t esz = bpcc_dtype_size(e->dtype);
        if (((uintptr_t)q % esz) != 0) {
            e->copy = bpcc_malloc((size_t)(e->end - e->begin));
            if (!e->copy) {
                s = bpcc_diag_nomem(d);
                goto fail;
            }
            memcpy(e->copy, q, (size_t)(e->end - e->begin));
            e->data = e->copy;
        } else {
            e->data = q;
        }
    }
    if (expect != data_len) {
        s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, 8 + hlen + expect,
                                      "%llu bytes after the last tensor are not indexed by "
                                      "the header", (unsigned long long)(data_len - expect));
        goto fail;
    }
    close(fd);
    *out = st;
    return BPCC_OK;
fail:
    close(fd);
    bpcc_safetensors_close(st);
    return s;
}

uint32_t bpcc_safetensors_count(const struct bpcc_safetensors *st) { return st->n; }

enum bpcc_status bpcc_safetensors_get(const struct bpcc_safetensors *st, uint32_t i,
                                      const char **name_out, enum bpcc_dtype *dtype_out,
                                      uint32_t *ndim_out, const int64_t **dims_out,
                                      const void **data_out, size_t *nbytes_out)
{
    if (i >= st->n) return BPCC_ERR_INVALID;
    const struct st_entry *e = st->entries[i];
    if (name_out) *name_out = e->name;
    if (dtype_out) *dtype_out = e->dtype;
    if (ndim_out) *ndim_out = e->ndim;
    if (dims_out) *dims_out = e->dims;
    if (data_out) *data_out = e->data;
    if (nbytes_out) *nbytes_out = (size_t)(e->end - e->begin);
    return BPCC_OK;
}

uint32_t bpcc_safetensors_find(const struct bpcc_safetensors *st, const char *name)
{
    const struct bpcc_strmap_slot *e = bpcc_strmap_get_str(&st->by_name, name);
    return e ? ((const struct st_entry *)e->value)->pos : UINT32_MAX;
}

/* {==================== writer ==================== */

struct wr_item {
    const char *key;
    const struct bpcc_tensor *t;
};

static int cmp_align(const void *a, const void *b)
{
    /* Larger elements first keeps every tensor aligned to its element size; stable by key. */
    const struct wr_item *x = a, *y = b;
    size_t sx = bpcc_dtype_size(x->t->dtype), sy = bpcc_dtype_size(y->t->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->key, y->key);
}

static bool gen_str(yajl_gen g, const char *s) { return yajl_gen_string(g, (const unsigned char *)s, strlen(s)) == yajl_gen_status_ok; }

struct wr_header {
    FILE *fp;
    const char *path;
    const struct wr_item *items; /* sorted */
    uint32_t n;
    struct bpcc_diag *d;
};

/* the JSON made so far to fp, counted into *len (a megabyte at a time: a header of millions of
** tensors is never held whole) */
static bool flush_gen(yajl_gen g, FILE *fp, size_t *len, size_t at_least)
{
    const unsigned char *buf;
    size_t n;
    if (yajl_gen_get_buf(g, &buf, &n) != yajl_gen_status_ok) return false;
    if (n >= at_least) {
        if (n) fwrite(buf, 1, n, fp); /* write errors: ferror, at bpcc_atomic_finish */
        *len += n;
        yajl_gen_clear(g);
    }
    return true;
}

/* the header into fp (under bpcc_ymem_run): its length comes first, so a placeholder goes first
** and the length over it once the JSON is written (fp is a file: the writers' temporaries) */
static enum bpcc_status write_header(struct bpcc_ymem *m, void *ctx)
{
    const struct wr_header *w = ctx;
    yajl_gen g = yajl_gen_alloc(&m->funcs);
    yajl_gen_config(g, yajl_gen_validate_utf8, 1);
    enum bpcc_status s = BPCC_OK;
    long at = ftell(w->fp);
    unsigned char lenbuf[8] = {0};
    size_t hlen = 0;
    fwrite(lenbuf, 1, 8, w->fp);
    bool ok = yajl_gen_map_open(g) == yajl_gen_status_ok && gen_str(g, "__metadata__") &&
              yajl_gen_map_open(g) == yajl_gen_status_ok && gen_str(g, "format") && gen_str(g, "bpcc") &&
              yajl_gen_map_close(g) == yajl_gen_status_ok;
    uint64_t off = 0;
    for (uint32_t i = 0; ok && i < w->n; i++) {
        const struct bpcc_tensor *t = w->items[i].t;
        if (!t->data) {
            s = bpcc_diag_error(w->d, BPCC_ERR_INVALID, w->path, 0, 0, "tensor '%s' has no data", w->items[i].key);
            goto done;
        }
        if (!gen_str(g, w->items[i].key)) {
            s = bpcc_diag_error(w->d, BPCC_ERR_INVALID, w->path, 0, 0, "tensor name '%s' is not valid UTF-8", w->items[i].key);
            goto done;
        }
        ok = yajl_gen_map_open(g) == yajl_gen_status_ok && gen_str(g, "dtype") && gen_str(g, bpcc_dtype_st_name(t->dtype)) &&
             gen_str(g, "shape") && yajl_gen_array_open(g) == yajl_gen_status_ok;
        for (uint32_t k = 0; ok && k < t->ndim; k++) ok = yajl_gen_integer(g, t->dims[k]) == yajl_gen_status_ok;
        ok = ok && yajl_gen_array_close(g) == yajl_gen_status_ok && gen_str(g, "data_offsets") &&
             yajl_gen_array_open(g) == yajl_gen_status_ok && yajl_gen_integer(g, (long long)off) == yajl_gen_status_ok &&
             yajl_gen_integer(g, (long long)(off + t->nbytes)) == yajl_gen_status_ok &&
             yajl_gen_array_close(g) == yajl_gen_status_ok && yajl_gen_map_close(g) == yajl_gen_status_ok;
        off += t->nbytes;
        ok = ok && flush_gen(g, w->fp, &hlen, 1u << 20);
    }
    ok = ok && yajl_gen_map_close(g) == yajl_gen_status_ok && flush_gen(g, w->fp, &hlen, 0);
    if (!ok) {
        s = bpcc_diag_error(w->d, BPCC_ERR_INTERNAL, w->path, 0, 0, "cannot write the safetensors header");
        goto done;
    }
    size_t padded = (hlen + 7) & ~(size_t)7;
    for (size_t i = hlen; i < padded; i++) fputc(' ', w->fp);
    for (int i = 0; i < 8; i++) lenbuf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    if (at < 0 || fseek(w->fp, at, SEEK_SET) || fwrite(lenbuf, 1, 8, w->fp) != 8 || fseek(w->fp, 0, SEEK_END)) {
        s = bpcc_diag_error(w->d, BPCC_ERR_IO, w->path, 0, 0, "cannot write the safetensors header: %s", strerror(errno));
        goto done;
    }
done:
    yajl_gen_free(g);
    return s;
}

enum bpcc_status bpcc_safetensors_write(FILE *fp, const char *path, const char *const *keys,
                                        const struct bpcc_tensor *const *tensors, uint32_t n,
                                        struct bpcc_diag *d)
{
    struct wr_item *items = bpcc_malloc((n ? n : 1) * sizeof *items);
    if (!items) return bpcc_diag_nomem(d);
    for (uint32_t i = 0; i < n; i++) items[i] = (struct wr_item){keys[i], tensors[i]};
    qsort(items, n, sizeof *items, cmp_align);
    struct bpcc_ymem ym;
    struct wr_header w = {fp, path, items, n, d};
    enum bpcc_status s = bpcc_ymem_run(&ym, write_header, &w, d);
    for (uint32_t i = 0; i < n && !s; i++)
        if (items[i].t->nbytes) fwrite(items[i].t->data, 1, items[i].t->nbytes, fp);
    /* errors surface through ferror at bpcc_atomic_finish */
    bpcc_xfree(items);
    return s;
}

/* }================================================ */
