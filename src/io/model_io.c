/*
** model_io.c — whole model files: load (parse the text, map the weights it names, bind and
** check every tensor, verify) and save (weights and text, each written atomically).
*/
#include "../ir/ir.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

/* The safetensors key of a module tensor: "module.tensor", or "tensor" for the root. */
static char *tensor_key(const struct bpcc_module *m, const char *tname)
{
    size_t a = strlen(m->name), b = strlen(tname);
    char *k = bpcc_malloc(a + b + 2);
    if (!k) return NULL;
    if (a) {
        memcpy(k, m->name, a);
        k[a] = '.';
        memcpy(k + a + 1, tname, b + 1);
    } else {
        memcpy(k, tname, b + 1);
    }
    return k;
}

static void dims_text(char *buf, size_t n, uint32_t ndim, const int64_t *dims)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (uint32_t i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

static enum bpcc_status bind_tensors(struct bpcc_graph *g, const char *wpath, struct bpcc_diag *d)
{
    struct bpcc_safetensors *st = g->weights;
    const char *file = g->source_file;
    uint32_t n = bpcc_safetensors_count(st);
    bool *used = bpcc_malloc(n ? n : 1);
    if (!used) return bpcc_diag_nomem(d);
    memset(used, 0, n);
    enum bpcc_status s = BPCC_OK;
    for (uint32_t mi = 0; mi < g->n_modules; mi++) {
        struct bpcc_module *m = g->modules[mi];
        for (uint32_t k = 0; k < m->n_tensors; k++) {
            struct module_tensor *mt = &m->tensors[k];
            struct bpcc_tensor *t = mt->t;
            char *key = tensor_key(m, mt->name);
            if (!key) {
                s = bpcc_diag_nomem(d);
                goto out;
            }
            uint32_t i = bpcc_safetensors_find(st, key);
            if (i == UINT32_MAX) {
                s = bpcc_diag_error(d, BPCC_ERR_GRAPH, file, t->src_line, t->src_col,
                                    "tensor '%s' is not in the weights file", key);
                bpcc_diag_note(d, g->weights_line, g->weights_col, "weights file: %s", wpath);
                bpcc_xfree(key);
                continue;
            }
            used[i] = true;
            enum bpcc_dtype dt;
            uint32_t ndim;
            const int64_t *dims;
            const void *data;
            size_t nbytes;
            bpcc_safetensors_get(st, i, NULL, &dt, &ndim, &dims, &data, &nbytes);
            if (dt != bpcc_dtype_carrier(t->dtype)) {
                s = bpcc_diag_error(d, BPCC_ERR_GRAPH, file, t->src_line, t->src_col,
                                    "tensor '%s' is declared %s but stored as %s", key,
                                    bpcc_dtype_short_name(t->dtype), bpcc_dtype_short_name(dt));
            } else if (ndim != t->ndim || memcmp(dims, t->dims, ndim * sizeof *dims) != 0) {
                char want[160], have[160];
                dims_text(want, sizeof want, t->ndim, t->dims);
                dims_text(have, sizeof have, ndim, dims);
                s = bpcc_diag_error(d, BPCC_ERR_GRAPH, file, t->src_line, t->src_col,
                                    "tensor '%s' is declared with shape %s but stored with "
                                    "shape %s", key, want, have);
            } else {
                t->data = (void *)data;
                t->nbytes = nbytes;
            }
            bpcc_xfree(key);
        }
    }
    for (uint32_t i = 0; i < n && !s; i++)
        if (!used[i]) {
            const char *key;
            bpcc_safetensors_get(st, i, &key, NULL, NULL, NULL, NULL, NULL);
            s = bpcc_diag_error(d, BPCC_ERR_GRAPH, file, g->weights_line, g->weights_col,
                                "weights file holds tensor '%s', which the model does not "
                                "declare", key);
            bpcc_diag_note(d, g->weights_line, g->weights_col, "weights file: %s", wpath);
        }
out:
    bpcc_xfree(used);
    return s;
}

enum bpcc_status bpcc_graph_load(const char *path, struct bpcc_graph **out, struct bpcc_diag *d)
{
    *out = NULL;
    char *text;
    size_t len;
    enum bpcc_status s = bpcc_file_read(path, &text, &len, d);
    if (s) return s;
    struct bpcc_graph *g;
    s = bpcc_graph_parse(text, len, path, &g, d);
    bpcc_xfree_pages(text, len); /* the graph has copied what it keeps of it */
    if (s) return s;
    bool any = false;
    for (uint32_t i = 0; i < g->n_modules && !any; i++) any = g->modules[i]->n_tensors > 0;
    if (g->weights_name) {
        struct stat wst;
        char *dir = bpcc_path_dirname(path);
        char *wpath = dir ? bpcc_path_join(dir, g->weights_name) : NULL;
        bpcc_xfree(dir);
        if (!wpath) {
            s = bpcc_diag_nomem(d);
        } else if (access(wpath, R_OK) != 0) {
            /* the mistake is in the text file, so point there */
            s = bpcc_diag_error(d, BPCC_ERR_IO, path, g->weights_line, g->weights_col,
                                "cannot read weights file '%s': %s", wpath, strerror(errno));
        } else if (stat(wpath, &wst) != 0 || !S_ISREG(wst.st_mode)) {
            s = bpcc_diag_error(d, BPCC_ERR_IO, path, g->weights_line, g->weights_col,
                                "the weights file '%s' is not a regular file", wpath);
        } else {
            s = bpcc_safetensors_open(wpath, &g->weights, d);
            if (s) bpcc_diag_note(d, 0, 0, "the weights file of %s (line %u)", path, g->weights_line);
            if (!s) s = bind_tensors(g, wpath, d);
            /* the graph needs the data only: names, shapes and the index were for binding */
            if (!s && !bpcc_safetensors_keep_data(g->weights)) s = bpcc_diag_nomem(d);
        }
        bpcc_xfree(wpath);
    } else if (any) {
        s = bpcc_diag_error(d, BPCC_ERR_GRAPH, path, 1, 1,
                            "the model declares tensors but names no weights file "
                            "(add a line: weights \"NAME.safetensors\")");
    }
    if (!s) s = bpcc_graph_verify(g, d);
    if (s) {
        bpcc_graph_free(g);
        return s;
    }
    *out = g;
    return BPCC_OK;
}

enum bpcc_status bpcc_graph_save(const struct bpcc_graph *g, const char *path,
                                 struct bpcc_diag *d)
{
    return bpcc_graph_save_ex(g, path, 0, d);
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The two files a save writes must not clobber what they are not: the text and its weights file
** are one file when the path ends in .safetensors (the text's rename then replaced the weights),
** and the weights file may be the one the graph was loaded from while the text goes elsewhere
** (`-o model.fused` beside model.bpcc writes model.safetensors): the input's text would then name
** weights it no longer has. Writing over the input itself, text and weights, is fine. */
static enum bpcc_status check_outputs(const struct bpcc_graph *g, const char *path, const char *wpath,
                                      struct bpcc_diag *d)
{
    if (!strcmp(path, wpath) || same_file(path, wpath))
        return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0,
                               "cannot write output: the model's text and its weights file would both be '%s' "
                               "(a model NAME.EXT keeps its weights in NAME.safetensors): give the model another name",
                               path);
    if (!g->source_file || !g->weights_name) return BPCC_OK;
    char *dir = bpcc_path_dirname(g->source_file);
    char *src_w = dir ? bpcc_path_join(dir, g->weights_name) : NULL;
    bpcc_xfree(dir);
    if (!src_w) return bpcc_diag_nomem(d);
    enum bpcc_status s = BPCC_OK;
    if (same_file(wpath, src_w) && !same_file(path, g->source_file)) {
        s = bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0,
                            "cannot write output: its weights file '%s' is the weights file of the input model '%s', "
                            "which would then name weights it does not hold",
                            wpath, g->source_file);
        bpcc_diag_note(d, 0, 0, "a model NAME.EXT keeps its weights in NAME.safetensors: give the output another NAME, "
                                "or write over the input model itself");
    }
    bpcc_xfree(src_w);
    return s;
}

enum bpcc_status bpcc_graph_save_ex(const struct bpcc_graph *g, const char *path, unsigned flags,
                                    struct bpcc_diag *d)
{
    enum bpcc_status s = bpcc_graph_verify(g, d);
    if (s) return s;
    /* weights file: <path without its extension>.safetensors */
    const char *base = bpcc_path_basename(path);
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - path) : strlen(path);
    char *wpath = bpcc_malloc(stem + 13);
    if (!wpath) return bpcc_diag_nomem(d);
    memcpy(wpath, path, stem);
    memcpy(wpath + stem, ".safetensors", 13);

    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n_modules; i++) n += g->modules[i]->n_tensors;
    if (n && (s = check_outputs(g, path, wpath, d))) {
        bpcc_xfree(wpath);
        return s;
    }
    char **keys = bpcc_malloc((n ? n : 1) * sizeof *keys);
    const struct bpcc_tensor **ts = bpcc_malloc((n ? n : 1) * sizeof *ts);
    uint32_t k = 0;
    if (!keys || !ts) {
        s = bpcc_diag_nomem(d);
        goto out;
    }
    for (uint32_t i = 0; i < g->n_modules; i++) {
        const struct bpcc_module *m = g->modules[i];
        for (uint32_t j = 0; j < m->n_tensors; j++) {
            keys[k] = tensor_key(m, m->tensors[j].name);
            if (!keys[k]) {
                s = bpcc_diag_nomem(d);
                goto out;
            }
            ts[k++] = m->tensors[j].t;
        }
    }
    /* Both files are written to temporaries first and renamed only when both are complete,
    ** weights before text: a reader never sees text naming weights that are not there. The text
    ** goes to its file as it is made. */
    struct bpcc_atomic_file wf = {0}, tf = {0};
    if (n) {
        if ((s = bpcc_atomic_open(&wf, wpath, flags, d))) goto out;
        if ((s = bpcc_safetensors_write(wf.fp, wpath, (const char *const *)keys, ts, n, d)) ||
            (s = bpcc_atomic_finish(&wf, d))) {
            bpcc_atomic_abort(&wf);
            goto out;
        }
    }
    if ((s = bpcc_atomic_open(&tf, path, flags, d))) {
        bpcc_atomic_abort(&wf);
        goto out;
    }
    if ((s = bpcc_graph_print_to(g, n ? bpcc_path_basename(wpath) : NULL, tf.fp, d)) ||
        (s = bpcc_atomic_finish(&tf, d))) {
        bpcc_atomic_abort(&tf);
        bpcc_atomic_abort(&wf);
        goto out;
    }
    /* the two renames together: a signal between them (the bpcc tool's handler removes what is
    ** being written and stops) would leave the new weights under the old text */
    sigset_t all, was;
    sigfillset(&all);
    bool masked = pthread_sigmask(SIG_BLOCK, &all, &was) == 0;
    if (n && (s = bpcc_atomic_commit(&wf, d))) {
        bpcc_atomic_abort(&tf);
    } else {
        s = bpcc_atomic_commit(&tf, d);
    }
    if (masked) pthread_sigmask(SIG_SETMASK, &was, NULL);
out:
    for (uint32_t i = 0; i < k; i++) bpcc_xfree(keys[i]);
    bpcc_xfree(keys);
    bpcc_xfree(ts);
    bpcc_xfree(wpath);
    return s;
}
