/*
** bench_passes.c — the graph passes of the quantization flow, timed phase by phase:
**   bench_passes MODEL BATCH [RUNS] [-b BACKEND] [-q QCONFIG] [--no-rollback]
**       per run: load (parse + map the weights), fuse, prepare, one calibration batch (not
**       counted in "passes"), qparams (the end of bpcc_calibrate: observers' statistics to
**       qparams, which PyTorch's convert_fx does; counted), convert, print (the IR text, streamed
**       into a temporary file as bpcc_graph_save writes it); the model's weights are faulted in
**       after the load and before the passes, as PyTorch's model is in memory. Prints one JSON
**       object: medians / min / max in ms per phase, "passes" = fuse + prepare + qparams + convert, node
**       counts, the peak resident memory (also after each phase of the first run:
**       "peak_rss_after_kib"), the first run's page faults and kernel time ("first_run_page_faults",
**       "first_run_sys_ms": mostly the kernel zeroing fresh pages), and "weights_read_ms": one pass
**       reading every weight (the floor for passes that must read them: batch-norm folding, weight
**       observers).
**       --no-rollback: as the bpcc tool runs them: the graph's passes keep no undo log
**       (bpcc_graph_set_rollback) and convert leaves the qparams' get_attr nodes implicit
**       (bpcc_graph_set_implicit_qparams).
**   bench_passes --gen N OUT.bpcc
**       writes a synthetic model of about N nodes: units of conv -> bn -> relu -> conv -> bn ->
**       relu -> add (residual) -> cat -> conv -> relu on [1, 4, 4, 4] activations; convs without
**       bias and batch norms without affine parameters, so that a 1M-node model's weights
**       (700k tensors) fit safetensors' 100 MB header.
*/
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#ifdef __linux__
#include <malloc.h>
#endif
#ifndef RUSAGE_THREAD
#define RUSAGE_THREAD RUSAGE_SELF
#endif


/* the peak resident set of this process image: VmHWM (getrusage's maxrss carries the peak of the
** process before exec, e.g. a Python parent's) */
static long peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kib = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    if (kib < 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        kib = ru.ru_maxrss;
    }
    return kib;
}

/* {==================== the synthetic model ==================== */

struct gen {
    struct bpcc_graph *g;
    struct bpcc_diag *d;
    uint32_t n_modules;
    float seed;
};

static void fill(struct gen *s, struct bpcc_tensor *t, float base, float spread)
{
    float *p = bpcc_tensor_data(t);
    for (uint64_t i = 0; i < bpcc_tensor_numel(t); i++) {
        s->seed = s->seed * 1.618034f + 0.1f;
        s->seed -= (float)(int)s->seed;
        p[i] = base + spread * (s->seed - 0.5f);
    }
}

static struct bpcc_module *module(struct gen *s, const char *type, char *name)
{
    struct bpcc_module *m;
    struct bpcc_value f = bpcc_value_bool(false);
    snprintf(name, 32, "m%u", s->n_modules++);
    if (bpcc_graph_add_module(s->g, name, type, &m, s->d) || bpcc_module_set_attr(m, "training", &f, s->d)) die(s->d);
    return m;
}

static void set_int(struct gen *s, struct bpcc_module *m, const char *k, int64_t v)
{
    struct bpcc_value x = bpcc_value_int(v);
    if (bpcc_module_set_attr(m, k, &x, s->d)) die(s->d);
}

static void tensor(struct gen *s, struct bpcc_module *m, const char *name, enum bpcc_tensor_role role, uint32_t ndim,
                   const int64_t *dims, float base, float spread)
{
    struct bpcc_tensor *t;
    if (bpcc_tensor_new(s->g, BPCC_DTYPE_F32, ndim, dims, &t, s->d) || bpcc_module_set_tensor(m, name, role, t, s->d))
        die(s->d);
    fill(s, t, base, spread);
}

static struct bpcc_node *call(struct gen *s, enum bpcc_node_kind k, const char *target, struct bpcc_node *a,
                              struct bpcc_node *b, bool list)
{
    struct bpcc_value args;
    struct bpcc_node *n;
    if (list) {
        struct bpcc_value l;
        if (bpcc_value_seq_new(s->g, BPCC_VAL_LIST, 2, &l) || bpcc_value_seq_new(s->g, BPCC_VAL_TUPLE, 2, &args)) die(s->d);
        l.u.seq.items[0] = bpcc_value_node(a);
        l.u.seq.items[1] = bpcc_value_node(b);
        args.u.seq.items[0] = l;
        args.u.seq.items[1] = bpcc_value_int(1);
    } else {
        if (bpcc_value_seq_new(s->g, BPCC_VAL_TUPLE, b ? 2 : 1, &args)) die(s->d);
        args.u.seq.items[0] = bpcc_value_node(a);
        if (b) args.u.seq.items[1] = bpcc_value_node(b);
    }
    if (bpcc_graph_create_node(s->g, k, NULL, target, &args, NULL, &n, s->d)) die(s->d);
    return n;
}

static struct bpcc_node *conv(struct gen *s, struct bpcc_node *x, int64_t cin)
{
    char name[32];
    struct bpcc_module *m = module(s, "torch.nn.Conv2d", name);
    set_int(s, m, "in_channels", cin);
    set_int(s, m, "out_channels", 4);
    struct bpcc_value ks;
    if (bpcc_value_seq_new(s->g, BPCC_VAL_TUPLE, 2, &ks)) die(s->d);
    ks.u.seq.items[0] = ks.u.seq.items[1] = bpcc_value_int(1);
    if (bpcc_module_set_attr(m, "kernel_size", &ks, s->d)) die(s->d);
    tensor(s, m, "weight", BPCC_TENSOR_PARAM, 4, (int64_t[]){4, cin, 1, 1}, 0.0f, 1.0f); /* no bias (bn follows) */
    return call(s, BPCC_NODE_CALL_MODULE, name, x, NULL, false);
}

static struct bpcc_node *bn(struct gen *s, struct bpcc_node *x)
{
    char name[32];
    struct bpcc_module *m = module(s, "torch.nn.BatchNorm2d", name);
    set_int(s, m, "num_features", 4);
    struct bpcc_value eps = bpcc_value_float(1e-5);
    if (bpcc_module_set_attr(m, "eps", &eps, s->d)) die(s->d);
    struct bpcc_value f = bpcc_value_bool(false);
    if (bpcc_module_set_attr(m, "affine", &f, s->d)) die(s->d);
    tensor(s, m, "running_mean", BPCC_TENSOR_BUFFER, 1, (int64_t[]){4}, 0.0f, 0.2f);
    tensor(s, m, "running_var", BPCC_TENSOR_BUFFER, 1, (int64_t[]){4}, 1.0f, 0.2f);
    return call(s, BPCC_NODE_CALL_MODULE, name, x, NULL, false);
}

static struct bpcc_node *relu(struct gen *s, struct bpcc_node *x)
{
    char name[32];
    module(s, "torch.nn.ReLU", name);
    return call(s, BPCC_NODE_CALL_MODULE, name, x, NULL, false);
}

static int generate(uint32_t n_nodes, const char *out)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct gen s = {.d = &d, .seed = 0.25f};
    if (bpcc_graph_new(&s.g, &d)) die(&d);
    struct bpcc_value none = {.kind = BPCC_VAL_TUPLE};
    struct bpcc_node *x;
    if (bpcc_graph_create_node(s.g, BPCC_NODE_PLACEHOLDER, "x", "x", &none, NULL, &x, &d)) die(&d);
    for (uint32_t u = 0; 10 * u + 12 <= n_nodes || u == 0; u++) {
        struct bpcc_node *c = relu(&s, bn(&s, conv(&s, x, 4)));
        struct bpcc_node *f = relu(&s, bn(&s, conv(&s, c, 4)));
        struct bpcc_node *a = call(&s, BPCC_NODE_CALL_FUNCTION, "operator.add", f, x, false);
        struct bpcc_node *k = call(&s, BPCC_NODE_CALL_FUNCTION, "torch.cat", a, c, true);
        x = relu(&s, conv(&s, k, 8));
    }
    struct bpcc_value o;
    if (bpcc_value_seq_new(s.g, BPCC_VAL_TUPLE, 1, &o)) die(&d);
    o.u.seq.items[0] = bpcc_value_node(x);
    if (bpcc_graph_create_node(s.g, BPCC_NODE_OUTPUT, "output", "output", &o, NULL, NULL, &d)) die(&d);
    if (bpcc_graph_save(s.g, out, &d)) die(&d);
    printf("%u nodes, %u modules -> %s\n", bpcc_graph_n_nodes(s.g), bpcc_graph_n_modules(s.g), out);
    bpcc_graph_free(s.g);
    return 0;
}

/* }================================================ */

/* every weight, once: the pages faulted in (first call) or the bytes read (the floor) */
static double read_weights(struct bpcc_graph *g, uint64_t *bytes_out)
{
    double sum = 0;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < bpcc_graph_n_modules(g); i++) {
        struct bpcc_module *m = bpcc_graph_module(g, i);
        for (uint32_t k = 0; k < bpcc_module_n_tensors(m); k++) {
            struct bpcc_tensor *t = bpcc_module_tensor_at(m, k, NULL, NULL);
            if (bpcc_tensor_dtype(t) != BPCC_DTYPE_F32 || !bpcc_tensor_data(t)) continue;
            const float *p = bpcc_tensor_data(t);
            uint64_t n = bpcc_tensor_numel(t);
            float acc[8] = {0};
            uint64_t j = 0;
            for (; j + 8 <= n; j += 8)
                for (int l = 0; l < 8; l++) acc[l] += p[j + l];
            for (; j < n; j++) acc[0] += p[j];
            for (int l = 0; l < 8; l++) sum += acc[l];
            bytes += n * sizeof(float);
        }
    }
    *bytes_out = bytes;
    return sum;
}

#define N_PHASES 8
static const char *const phase_names[N_PHASES] = {"load",    "fuse",  "prepare", "calibrate", "qparams",
                                                  "convert", "print", "passes"};

/* bpcc_calibrate's progress callback: the time its last batch finished. What follows until it
** returns is the qparams step (each observer's statistics to scale and zero_point, stored on the
** observer), which PyTorch runs inside convert_fx: the passes count it. */
static void batch_done(uint32_t done, uint32_t total, void *ud)
{
    if (done == total) *(double *)ud = now_ms();
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "--gen")) return generate((uint32_t)strtoul(argv[2], NULL, 10), argv[3]);
    const char *backend = "native", *qconfig = "fbgemm", *pos[3] = {NULL, NULL, NULL};
    int np = 0;
    bool rollback = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-rollback")) rollback = false;
        else if (!strcmp(argv[i], "-b") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "-q") && i + 1 < argc) qconfig = argv[++i];
        else if (np < 3) pos[np++] = argv[i];
    }
    if (np < 2) {
        fprintf(stderr, "usage: bench_passes MODEL BATCH [RUNS] [-b BACKEND] [-q QCONFIG] [--no-rollback] | --gen N OUT.bpcc\n");
        return 2;
    }
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 1 << 30); /* as the bpcc CLI does */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    int runs = pos[2] ? atoi(pos[2]) : 10;
    if (runs < 1) runs = 1;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c;
    struct bpcc_qconfig_mapping *qm;
    if (bpcc_config_load(backend, NULL, &c, &d) || bpcc_qconfig_load(qconfig, NULL, &qm, &d)) die(&d);
    long rss0 = peak_rss_kib();
    struct rusage ru0, ru1 = {0}; /* page faults and kernel time of the first run, this thread's */
    getrusage(RUSAGE_THREAD, &ru0);
    long hwm[N_PHASES - 1] = {0}; /* the peak after each phase of the first run */
    double *t = calloc((size_t)runs * N_PHASES, sizeof *t), wread = 0;
    uint32_t n_in = 0, n_fused = 0, n_out = 0;
    uint64_t wbytes = 0;
    volatile double sink = 0;
    for (int r = 0; r < runs; r++) {
        double *p = t + (size_t)r * N_PHASES, t0 = now_ms();
        struct bpcc_graph *g;
        if (bpcc_graph_load(pos[0], &g, &d)) die(&d);
        p[0] = now_ms() - t0;
        if (!r) hwm[0] = peak_rss_kib();
        bpcc_graph_set_rollback(g, rollback);
        bpcc_graph_set_implicit_qparams(g, !rollback);
        sink += read_weights(g, &wbytes); /* faulted in */
        t0 = now_ms();
        sink += read_weights(g, &wbytes);
        double w = now_ms() - t0;
        if (!r || w < wread) wread = w;
        n_in = bpcc_graph_n_nodes(g);
        t0 = now_ms();
        if (bpcc_fuse(g, c, NULL, NULL, &d)) die(&d);
        p[1] = now_ms() - t0;
        if (!r) hwm[1] = peak_rss_kib();
        n_fused = bpcc_graph_n_nodes(g);
        t0 = now_ms();
        if (bpcc_prepare(g, c, qm, NULL, NULL, &d)) die(&d);
        p[2] = now_ms() - t0;
        if (!r) hwm[2] = peak_rss_kib();
        double last_batch = 0;
        struct bpcc_calibrate_options o = {.threads = 1, .progress = batch_done, .progress_ud = &last_batch};
        t0 = now_ms();
        if (bpcc_calibrate(g, &pos[1], 1, &o, &d)) die(&d);
        double t1 = now_ms();
        p[3] = last_batch - t0;
        p[4] = t1 - last_batch;
        if (!r) hwm[3] = hwm[4] = peak_rss_kib();
        t0 = now_ms();
        if (bpcc_convert(g, c, qm, NULL, NULL, &d)) die(&d);
        p[5] = now_ms() - t0;
        if (!r) hwm[5] = peak_rss_kib();
        n_out = bpcc_graph_n_nodes(g);
        FILE *out = tmpfile();
        if (!out) {
            perror("tmpfile");
            return 1;
        }
        t0 = now_ms();
        if (bpcc_graph_print_to(g, "w.safetensors", out, &d)) die(&d);
        if (fflush(out) || ferror(out)) {
            perror("print");
            return 1;
        }
        p[6] = now_ms() - t0;
        if (!r) hwm[6] = peak_rss_kib();
        fclose(out);
        p[7] = p[1] + p[2] + p[4] + p[5];
        bpcc_graph_free(g);
        if (!r) getrusage(RUSAGE_THREAD, &ru1);
    }
    long rss = peak_rss_kib();
    printf("{\"model\": \"%s\", \"backend\": \"%s\", \"qconfig\": \"%s\", \"rollback\": %s, \"runs\": %d, \"nodes\": %u, "
           "\"nodes_fused\": %u, \"nodes_converted\": %u, \"weight_bytes\": %llu, \"weights_read_ms\": %.4f, "
           "\"peak_rss_kib\": %ld, \"rss_before_kib\": %ld, \"first_run_page_faults\": %ld, \"first_run_sys_ms\": %.1f",
           pos[0], backend, qconfig, rollback ? "true" : "false", runs, n_in, n_fused, n_out, (unsigned long long)wbytes, wread, rss, rss0,
           ru1.ru_minflt - ru0.ru_minflt,
           (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e3 + (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e3);
    double *col = calloc((size_t)runs, sizeof *col);
    for (int k = 0; k < N_PHASES; k++) {
        for (int r = 0; r < runs; r++) col[r] = t[(size_t)r * N_PHASES + k];
        qsort(col, (size_t)runs, sizeof *col, cmp);
        printf(", \"%s\": [%.4f, %.4f, %.4f]", phase_names[k], col[runs / 2], col[0], col[runs - 1]);
    }
    printf(", \"peak_rss_after_kib\": {");
    for (int k = 0; k < N_PHASES - 1; k++) printf("%s\"%s\": %ld", k ? ", " : "", phase_names[k], hwm[k]);
    printf("}}\n");
    free(col);
    free(t);
    bpcc_qconfig_free(qm);
    bpcc_config_free(c);
    return sink == 0.123456789 ? 3 : 0;
}
