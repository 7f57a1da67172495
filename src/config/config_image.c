/*
** config_image.c — a compiled backend config as a compact binary image, and back. The build
** loads each built-in YAML once (tools/gen_builtin_images.c) and embeds its image, so that
** `-b fbgemm` costs a walk over a few kilobytes instead of a YAML parse. The image is produced
** and consumed by the same build of the library; reading it still checks every length.
*/
#include "config.h"

#define IMAGE_MAGIC "BPCI"
#define IMAGE_VERSION 1u
#define NO_STRING 0xffffffffu

/* {==================== writing ==================== */

static void w_u8(struct bpcc_buf *b, uint8_t v) { bpcc_buf_add(b, &v, 1); }
static void w_u32(struct bpcc_buf *b, uint32_t v) { bpcc_buf_add(b, &v, 4); }
static void w_i64(struct bpcc_buf *b, int64_t v) { bpcc_buf_add(b, &v, 8); }
static void w_f64(struct bpcc_buf *b, double v) { bpcc_buf_add(b, &v, 8); }

static void w_str(struct bpcc_buf *b, const char *s)
{
    if (!s) {
        w_u32(b, NO_STRING);
        return;
    }
    uint32_t n = (uint32_t)strlen(s);
    w_u32(b, n);
    bpcc_buf_add(b, s, n);
}

static void w_pattern(struct bpcc_buf *b, const struct pattern *p)
{
    w_str(b, p->op);
    w_u32(b, p->n_args);
    for (uint32_t i = 0; i < p->n_args; i++) w_pattern(b, p->args[i]);
}

static void w_constraint(struct bpcc_buf *b, const struct dtype_constraint *c)
{
    w_u8(b, (uint8_t)c->dtype);
    w_u8(b, (uint8_t)(c->has_qmin | c->has_qmax << 1 | c->has_smin << 2 | c->has_smax << 3 |
                      c->has_scale << 4 | c->has_zp << 5));
    w_u8(b, c->int_mask);
    w_f64(b, c->qmin);
    w_f64(b, c->qmax);
    w_f64(b, c->smin);
    w_f64(b, c->smax);
    w_f64(b, c->scale);
    w_i64(b, c->zp);
}

enum bpcc_status bpcc_config_image(const struct bpcc_config *c, char **out, size_t *len_out,
                                   struct bpcc_diag *d)
{
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_buf_add(&b, IMAGE_MAGIC, 4);
    w_u32(&b, IMAGE_VERSION);
    w_str(&b, c->name);
    w_u32(&b, c->n_entries);
    for (uint32_t i = 0; i < c->n_entries; i++) {
        const struct pattern_entry *e = c->entries[i];
        w_pattern(&b, e->pattern);
        w_u8(&b, e->simple);
        w_u8(&b, (uint8_t)e->obs);
        w_u32(&b, e->n_dtype_configs);
        for (uint32_t k = 0; k < e->n_dtype_configs; k++) {
            const struct dtype_config *dc = &e->dtype_configs[k];
            w_constraint(&b, &dc->input);
            w_constraint(&b, &dc->output);
            w_constraint(&b, &dc->weight);
            w_u8(&b, (uint8_t)dc->bias);
            w_u8(&b, dc->is_dynamic);
            w_u32(&b, dc->line);
            w_u32(&b, dc->col);
        }
        const char *strs[] = {e->root_module, e->qat_module, e->reference_module, e->fused_module,
                              e->fuser_method, e->root_node_getter, e->extra_inputs_getter};
        for (int k = 0; k < 7; k++) w_str(&b, strs[k]);
        for (int k = 0; k < 3; k++) {
            w_u8(&b, e->has_num_tensor_args[k]);
            w_u8(&b, (uint8_t)e->num_tensor_args[k]);
        }
        w_u32(&b, e->n_type_index);
        for (uint32_t k = 0; k < e->n_type_index; k++) {
            w_str(&b, e->type_index_key[k]);
            w_i64(&b, e->type_index_val[k]);
        }
        w_u8(&b, e->fixed.set);
        w_u8(&b, e->fixed.scale_is_int);
        w_f64(&b, e->fixed.scale);
        w_i64(&b, e->fixed.zero_point);
        w_i64(&b, e->fixed.quant_min);
        w_i64(&b, e->fixed.quant_max);
        w_u8(&b, (uint8_t)e->fixed.dtype);
        w_u8(&b, (uint8_t)(e->input_output_observed + 1));
        w_str(&b, e->file);
        w_u32(&b, e->line);
        w_u32(&b, e->col);
        w_u32(&b, e->n_leaves);
    }
    char *text = bpcc_buf_take(&b, len_out);
    if (!text) return bpcc_diag_nomem(d);
    *out = text;
    return BPCC_OK;
}

/* }================================================ */

/* {==================== reading ==================== */

struct reader {
    const unsigned char *p, *end;
    struct bpcc_config *c;
    bool bad, oom;
};

static bool take(struct reader *r, void *dst, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        memset(dst, 0, n);
        return false;
    }
    memcpy(dst, r->p, n);
    r->p += n;
    return true;
}

static uint8_t r_u8(struct reader *r) { uint8_t v; take(r, &v, 1); return v; }
static uint32_t r_u32(struct reader *r) { uint32_t v; take(r, &v, 4); return v; }
static int64_t r_i64(struct reader *r) { int64_t v; take(r, &v, 8); return v; }
static double r_f64(struct reader *r) { double v; take(r, &v, 8); return v; }

static const char *r_str(struct reader *r)
{
    uint32_t n = r_u32(r);
    if (n == NO_STRING || r->bad) return NULL;
    if ((size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const char *s = bpcc_intern_n(&r->c->intern, (const char *)r->p, n);
    if (!s) r->oom = r->bad = true;
    r->p += n;
    return s;
}

static enum bpcc_dtype r_dtype(struct reader *r)
{
    uint8_t v = r_u8(r);
    if (v >= BPCC_DTYPE_COUNT) r->bad = true;
    return (enum bpcc_dtype)(v < BPCC_DTYPE_COUNT ? v : 0);
}

static enum obs_type r_obs(struct reader *r)
{
    uint8_t v = r_u8(r);
    if (v >= OBS_COUNT) r->bad = true;
    return (enum obs_type)(v < OBS_COUNT ? v : 0);
}

static struct pattern *r_pattern(struct reader *r, int depth)
{
    if (depth > 64 || r->bad) {
        r->bad = true;
        return NULL;
    }
    struct pattern *p = BPCC_ARENA_NEW(&r->c->arena, struct pattern);
    if (!p) {
        r->oom = r->bad = true;
        return NULL;
    }
    p->op = r_str(r);
    p->n_args = r_u32(r);
    if (!p->op || p->n_args > 64) {
        r->bad = true;
        return NULL;
    }
    if (p->n_args) {
        p->args = BPCC_ARENA_NEWN(&r->c->arena, struct pattern *, p->n_args);
        if (!p->args) {
            r->oom = r->bad = true;
            return NULL;
        }
        for (uint32_t i = 0; i < p->n_args; i++)
            if (!(p->args[i] = r_pattern(r, depth + 1))) return NULL;
    }
    return p;
}

static void r_constraint(struct reader *r, struct dtype_constraint *c)
{
    c->dtype = r_dtype(r);
    uint8_t f = r_u8(r);
    c->has_qmin = f & 1;
    c->has_qmax = f & 2;
    c->has_smin = f & 4;
    c->has_smax = f & 8;
    c->has_scale = f & 16;
    c->has_zp = f & 32;
    c->int_mask = r_u8(r);
    c->qmin = r_f64(r);
    c->qmax = r_f64(r);
    c->smin = r_f64(r);
    c->smax = r_f64(r);
    c->scale = r_f64(r);
    c->zp = r_i64(r);
}

enum bpcc_status bpcc_config_from_image(struct bpcc_config *c, const void *data, size_t len,
                                        const char **name_out, struct bpcc_diag *d)
{
    struct reader r = {.p = data, .end = (const unsigned char *)data + len, .c = c};
    char magic[4];
    take(&r, magic, 4);
    if (memcmp(magic, IMAGE_MAGIC, 4) != 0 || r_u32(&r) != IMAGE_VERSION)
        return bpcc_diag_error(d, BPCC_ERR_INTERNAL, NULL, 0, 0, "built-in config image is corrupt");
    *name_out = r_str(&r);
    uint32_t n = r_u32(&r);
    /* an image's own patterns are distinct: look for overrides only when extending a base */
    bool override = c->n_entries > 0;
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        struct pattern_entry *e = BPCC_ARENA_NEW(&c->arena, struct pattern_entry);
        if (!e) {
            r.oom = r.bad = true;
            break;
        }
        e->pattern = r_pattern(&r, 0);
        e->simple = r_u8(&r);
        e->obs = r_obs(&r);
        e->n_dtype_configs = r_u32(&r);
        if (e->n_dtype_configs > 1024) r.bad = true;
        if (!r.bad && e->n_dtype_configs) {
            e->dtype_configs = BPCC_ARENA_NEWN(&c->arena, struct dtype_config, e->n_dtype_configs);
            if (!e->dtype_configs) r.oom = r.bad = true;
        }
        for (uint32_t k = 0; k < e->n_dtype_configs && !r.bad; k++) {
            struct dtype_config *dc = &e->dtype_configs[k];
            r_constraint(&r, &dc->input);
            r_constraint(&r, &dc->output);
            r_constraint(&r, &dc->weight);
            dc->bias = r_dtype(&r);
            dc->is_dynamic = r_u8(&r);
            dc->line = r_u32(&r);
            dc->col = r_u32(&r);
        }
        const char **strs[] = {&e->root_module, &e->qat_module, &e->reference_module,
                               &e->fused_module, &e->fuser_method, &e->root_node_getter,
                               &e->extra_inputs_getter};
        for (int k = 0; k < 7; k++) *strs[k] = r_str(&r);
        for (int k = 0; k < 3; k++) {
            e->has_num_tensor_args[k] = r_u8(&r);
            e->num_tensor_args[k] = r_obs(&r);
        }
        e->n_type_index = r_u32(&r);
        if (e->n_type_index > MAX_TYPE_INDEX) r.bad = true;
        for (uint32_t k = 0; k < e->n_type_index && !r.bad; k++) {
            e->type_index_key[k] = r_str(&r);
            e->type_index_val[k] = r_i64(&r);
        }
        e->fixed.set = r_u8(&r);
        e->fixed.scale_is_int = r_u8(&r);
        e->fixed.scale = r_f64(&r);
        e->fixed.zero_point = r_i64(&r);
        e->fixed.quant_min = r_i64(&r);
        e->fixed.quant_max = r_i64(&r);
        e->fixed.dtype = r_dtype(&r);
        e->input_output_observed = (int)r_u8(&r) - 1;
        e->file = r_str(&r);
        e->line = r_u32(&r);
        e->col = r_u32(&r);
        e->n_leaves = r_u32(&r);
        if (!r.bad && bpcc_registry_add(c, e, override, d)) r.oom = r.bad = true;
    }
    if (r.oom) return bpcc_diag_nomem(d);
    if (r.bad || r.p != r.end)
        return bpcc_diag_error(d, BPCC_ERR_INTERNAL, NULL, 0, 0, "built-in config image is corrupt");
    return BPCC_OK;
}

/* }================================================ */
