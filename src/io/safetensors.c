/*
** safetensors.c — reader (mmap, full validation) and writer of the safetensors format:
** 8-byte little-endian header length N, N bytes of JSON header, then the data section.
** The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
** (offsets relative to the data section) plus an optional "__metadata__" string map.
** Errors in a binary file are reported by byte offset.
*/
#include "../ir/ir.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER (100u << 20) /* as the reference implementation: 100 MB */

struct st_entry {
    const char *name;           /* in `names` arena */
    enum bpcc_dtype dtype;
    uint32_t ndim;
    int64_t dims[BPCC_MAX_DIMS];
    uint64_t begin, end;        /* data-section offsets */
    const void *data;
    void *copy;                 /* aligned copy when the mapped data is misaligned */
};

struct bpcc_safetensors {
    void *map;
    size_t map_len;
    struct st_entry *entries;   /* sorted by begin */
    uint32_t n;
    struct bpcc_arena names;
};

static const char *const st_dtypes = "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL";

void bpcc_safetensors_close(struct bpcc_safetensors *st)
{
    if (!st) return;
    for (uint32_t i = 0; i < st->n; i++) bpcc_xfree(st->entries[i].copy);
    bpcc_xfree(st->entries);
    if (st->map && st->map != MAP_FAILED) munmap(st->map, st->map_len);
    bpcc_arena_release(&st->names);
    bpcc_xfree(st);
}

static int cmp_begin(const void *a, const void *b)
{
    const struct st_entry *x = a, *y = b;
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

/* where a key is, for messages only: a scan of the header, so done only when there is an error */
#define KEY_AT(name) key_offset(hdr, (size_t)hlen, (name))

static bool json_uint(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

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
    bpcc_json_init();
    struct bpcc_safetensors *st = bpcc_malloc(sizeof *st);
    if (!st) {
        close(fd);
        return bpcc_diag_nomem(d);
    }
    memset(st, 0, sizeof *st);
    bpcc_arena_init(&st->names);
    enum bpcc_status s = BPCC_OK;
    json_t *root = NULL;
    struct bpcc_arena dom; /* the header's JSON document, dropped as a whole */
    bpcc_arena_init(&dom);
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
    json_error_t jerr;
    uint64_t failures = bpcc_alloc_failures();
    bpcc_json_arena_begin(&dom);
    root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    /* jansson can drop an object member when an allocation fails and still return the rest:
    ** any failed allocation during the call means the result cannot be trusted. */
    if (bpcc_alloc_failures() != failures ||
        (!root && json_error_code(&jerr) == json_error_out_of_memory)) {
        s = bpcc_diag_nomem(d);
        goto fail;
    }
    if (!root) {
        s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, 8 + (uint64_t)jerr.position,
                                      "header is not valid JSON: %s", jerr.text);
        goto fail;
    }
    if (!json_is_object(root)) {
        s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, 8, "header is not a JSON object");
        goto fail;
    }
    uint64_t data_len = size - 8 - hlen;
    size_t n_obj = json_object_size(root);
    st->entries = bpcc_malloc((n_obj ? n_obj : 1) * sizeof *st->entries);
    if (!st->entries) {
        s = bpcc_diag_nomem(d);
        goto fail;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(val)) {
                s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                              "__metadata__ must be an object of strings");
                goto fail;
            }
            json_object_foreach(val, mk, mv) if (!json_is_string(mv)) {
                s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                              "__metadata__ value '%s' is not a string", mk);
                goto fail;
            }
            continue;
        }
        struct st_entry *e = &st->entries[st->n];
        memset(e, 0, sizeof *e);
        e->name = bpcc_arena_strndup(&st->names, key, strlen(key));
        if (!e->name) {
            s = bpcc_diag_nomem(d);
            goto fail;
        }
        json_t *jd = json_object_get(val, "dtype");
        json_t *js = json_object_get(val, "shape");
        json_t *jo = json_object_get(val, "data_offsets");
        if (!json_is_object(val) || !json_is_string(jd) || !json_is_array(js) ||
            !json_is_array(jo) || json_array_size(jo) != 2) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                          "tensor '%s' needs \"dtype\" (string), \"shape\" "
                                          "(array) and \"data_offsets\" ([begin, end])", key);
            goto fail;
        }
        e->dtype = bpcc_dtype_from_st_name(json_string_value(jd));
        if (e->dtype == BPCC_DTYPE_NONE) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                          "tensor '%s' has dtype '%s'; supported: %s", key,
                                          json_string_value(jd), st_dtypes);
            goto fail;
        }
        if (json_array_size(js) > BPCC_MAX_DIMS) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_LIMIT, path, KEY_AT(key),
                                          "tensor '%s' has %zu dimensions; at most %d", key,
                                          json_array_size(js), BPCC_MAX_DIMS);
            goto fail;
        }
        uint64_t nbytes = bpcc_dtype_size(e->dtype);
        bool overflow = false;
        for (size_t i = 0; i < json_array_size(js); i++) {
            uint64_t dim;
            if (!json_uint(json_array_get(js, i), &dim) || dim > INT64_MAX) {
                s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                              "tensor '%s': shape entries must be "
                                              "non-negative integers", key);
                goto fail;
            }
            e->dims[i] = (int64_t)dim;
            if (dim && nbytes > UINT64_MAX / dim) overflow = true;
            else nbytes *= dim;
        }
        e->ndim = (uint32_t)json_array_size(js);
        if (!json_uint(json_array_get(jo, 0), &e->begin) ||
            !json_uint(json_array_get(jo, 1), &e->end) || e->begin > e->end) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                          "tensor '%s': data_offsets must be [begin, end] "
                                          "with 0 <= begin <= end", key);
            goto fail;
        }
        if (overflow) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                          "tensor '%s': shape overflows 64 bits", key);
            goto fail;
        }
        if (e->end > data_len) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                          "tensor '%s': data_offsets [%llu, %llu] run past the "
                                          "end of the data (%llu bytes)", key,
                                          (unsigned long long)e->begin,
                                          (unsigned long long)e->end,
                                          (unsigned long long)data_len);
            goto fail;
        }
        if (e->end - e->begin != nbytes) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(key),
                                          "tensor '%s': %llu data bytes, but its shape and "
                                          "dtype need %llu", key,
                                          (unsigned long long)(e->end - e->begin),
                                          (unsigned long long)nbytes);
            goto fail;
        }
        st->n++;
    }
    qsort(st->entries, st->n, sizeof *st->entries, cmp_begin);
    uint64_t expect = 0;
    for (uint32_t i = 0; i < st->n; i++) {
        struct st_entry *e = &st->entries[i];
        if (e->begin < expect) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(e->name),
                                          "tensor '%s' overlaps tensor '%s'", e->name,
                                          st->entries[i - 1].name);
            goto fail;
        }
        if (e->begin > expect) {
            s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, KEY_AT(e->name),
                                          "the data section has a hole of %llu bytes before "
                                          "tensor '%s'", (unsigned long long)(e->begin - expect),
                                          e->name);
            goto fail;
        }
        expect = e->end;
        const unsigned char *p = base + 8 + hlen + e->begin;
        size_t esz = bpcc_dtype_size(e->dtype);
        if (((uintptr_t)p % esz) != 0) {
            e->copy = bpcc_malloc((size_t)(e->end - e->begin));
            if (!e->copy) {
                s = bpcc_diag_nomem(d);
                goto fail;
            }
            memcpy(e->copy, p, (size_t)(e->end - e->begin));
            e->data = e->copy;
        } else {
            e->data = p;
        }
    }
    if (expect != data_len) {
        s = bpcc_diag_error_at_offset(d, BPCC_ERR_FORMAT, path, 8 + hlen + expect,
                                      "%llu bytes after the last tensor are not indexed by "
                                      "the header", (unsigned long long)(data_len - expect));
        goto fail;
    }
    json_decref(root);
    bpcc_json_arena_end();
    bpcc_arena_release(&dom);
    close(fd);
    *out = st;
    return BPCC_OK;
fail:
    if (root) json_decref(root);
    bpcc_json_arena_end();
    bpcc_arena_release(&dom);
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
    const struct st_entry *e = &st->entries[i];
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
    /* Linear; the model loader builds its own index when it needs many look-ups. */
    for (uint32_t i = 0; i < st->n; i++)
        if (strcmp(st->entries[i].name, name) == 0) return i;
    return UINT32_MAX;
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

enum bpcc_status bpcc_safetensors_write(FILE *fp, const char *path, const char *const *keys,
                                        const struct bpcc_tensor *const *tensors, uint32_t n,
                                        struct bpcc_diag *d)
{
    struct wr_item *items = bpcc_malloc((n ? n : 1) * sizeof *items);
    if (!items) return bpcc_diag_nomem(d);
    for (uint32_t i = 0; i < n; i++) items[i] = (struct wr_item){keys[i], tensors[i]};
    qsort(items, n, sizeof *items, cmp_align);
    enum bpcc_status s = BPCC_OK;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    json_t *root = json_object();
    json_t *meta = json_object();
    char *hdr = NULL;
    /* json_object_set_new takes the value's reference even when it fails */
    if (!root || !meta || json_object_set_new(root, "__metadata__", meta)) {
        if (!root) json_decref(meta);
        s = bpcc_diag_nomem(d);
        goto out;
    }
    if (json_object_set_new(meta, "format", json_string("bpcc"))) { /* root owns meta */
        s = bpcc_diag_nomem(d);
        goto out;
    }
    uint64_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct bpcc_tensor *t = items[i].t;
        if (!t->data) {
            s = bpcc_diag_error(d, BPCC_ERR_INVALID, path, 0, 0, "tensor '%s' has no data",
                                items[i].key);
            goto out;
        }
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        bool ok = e && shape && offs;
        for (uint32_t k = 0; ok && k < t->ndim; k++)
            ok = json_array_append_new(shape, json_integer(t->dims[k])) == 0;
        ok = ok && json_array_append_new(offs, json_integer((json_int_t)off)) == 0 &&
             json_array_append_new(offs, json_integer((json_int_t)(off + t->nbytes))) == 0;
        ok = ok && json_object_set_new(e, "dtype", json_string(bpcc_dtype_st_name(t->dtype))) == 0;
        if (ok) { ok = json_object_set_new(e, "shape", shape) == 0; shape = NULL; }
        if (ok) { ok = json_object_set_new(e, "data_offsets", offs) == 0; offs = NULL; }
        if (ok) { ok = json_object_set_new(root, items[i].key, e) == 0; e = NULL; }
        json_decref(e);
        json_decref(shape);
        json_decref(offs);
        if (!ok) {
            s = bpcc_diag_nomem(d);
            goto out;
        }
        off += t->nbytes;
    }
    hdr = json_dumps(root, JSON_COMPACT);
    if (!hdr || bpcc_alloc_failures() != failures) {
        s = bpcc_diag_nomem(d);
        goto out;
    }
    size_t hlen = strlen(hdr), padded = (hlen + 7) & ~(size_t)7;
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    fwrite(lenbuf, 1, 8, fp);
    fwrite(hdr, 1, hlen, fp);
    for (size_t i = hlen; i < padded; i++) fputc(' ', fp);
    for (uint32_t i = 0; i < n; i++)
        if (items[i].t->nbytes) fwrite(items[i].t->data, 1, items[i].t->nbytes, fp);
    /* errors surface through ferror at bpcc_atomic_finish */
out:
    bpcc_xfree(hdr);
    json_decref(root);
    bpcc_xfree(items);
    return s;
}

/* }================================================ */
