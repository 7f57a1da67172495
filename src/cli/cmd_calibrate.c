/*
** cmd_calibrate.c — `bpcc calibrate MODEL --data FILE|DIR... -o OUT [--threads N]` and
** `bpcc run MODEL --data FILE -o OUT.safetensors [--threads N]`.
*/
#include "cli.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char calibrate_help[] =
    "usage: bpcc calibrate MODEL --data FILE|DIR... -o OUT [--threads N]\n"
    "\n"
    "Run a prepared model (bpcc prepare) on calibration batches so that its observers see the\n"
    "activations, and write the model with each observer's statistics and qparams (scale,\n"
    "zero_point as PyTorch 1.13 computes them). Each FILE is one batch: a safetensors file with one\n"
    "float32 tensor per graph input, named after it; a DIR stands for its *.safetensors files in\n"
    "name order. Every batch is checked before any runs. --threads: OpenBLAS threads (default 1).\n";

static const char run_help[] =
    "usage: bpcc run MODEL --data FILE -o OUT.safetensors [--threads N]   (--input is --data)\n"
    "\n"
    "Run a model on one batch with the reference interpreter and write its outputs (\"output\", or\n"
    "\"output.0\", \"output.1\" ... for tuples) to a safetensors file.\n";

struct files {
    char **v;
    uint32_t n, cap;
};

static int add_file(struct files *f, const char *path)
{
    if (f->n == f->cap) {
        uint32_t c = f->cap ? f->cap * 2 : 16;
        char **v = realloc(f->v, c * sizeof *v);
        if (!v) return -1;
        f->v = v;
        f->cap = c;
    }
    f->v[f->n] = strdup(path);
    return f->v[f->n++] ? 0 : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* a file, or a directory's *.safetensors in name order */
static int add_data(const char *verb, struct files *f, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *dp = opendir(path);
        if (!dp) {
            fprintf(stderr, "%s: error: cannot read the directory\n", path);
            return EXIT_INPUT;
        }
        uint32_t first = f->n;
        struct dirent *e;
        while ((e = readdir(dp))) {
            size_t len = strlen(e->d_name);
            if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors")) continue;
            char *full = malloc(strlen(path) + len + 2);
            if (!full) break;
            sprintf(full, "%s/%s", path, e->d_name);
            int rc = add_file(f, full);
            free(full);
            if (rc) break;
        }
        closedir(dp);
        if (f->n == first) {
            fprintf(stderr, "%s: error: no .safetensors files in the directory\n", path);
            return EXIT_INPUT;
        }
        qsort(f->v + first, f->n - first, sizeof *f->v, cmp_str);
        return EXIT_OK;
    }
    (void)verb;
    return add_file(f, path) ? EXIT_INTERNAL : EXIT_OK;
}

static void free_files(struct files *f)
{
    for (uint32_t i = 0; i < f->n; i++) free(f->v[i]);
    free(f->v);
}

struct progress {
    struct timespec t0;
};

static void on_progress(uint32_t done, uint32_t total, void *ud)
{
    struct progress *p = ud;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double el = (double)(t.tv_sec - p->t0.tv_sec) + (double)(t.tv_nsec - p->t0.tv_nsec) / 1e9;
    double rate = el > 0 ? done / el : 0;
    double eta = rate > 0 ? (total - done) / rate : 0;
    fprintf(stderr, "\rcalibrate: %u/%u batches, %.1f batches/s, ETA %.0f s   ", done, total, rate, eta);
    if (done == total) fputc('\n', stderr);
}

static int parse(const char *verb, int argc, char **argv, const char *help, const char **model, const char **out,
                 int *threads, struct files *data)
{
    *model = *out = NULL;
    *threads = 1;
    bool in_data = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fputs(help, stdout);
            return -1;
        }
        if (!strcmp(o, "--data") || !strcmp(o, "--input")) {
            in_data = true;
            continue;
        }
        if (!strcmp(o, "-o") || !strcmp(o, "--threads")) {
            in_data = false;
            if (i + 1 >= argc) return cli_usage_error(verb, "%s needs a value", o);
            if (o[1] == 'o') *out = argv[++i];
            else {
                char *end;
                long t = strtol(argv[++i], &end, 10);
                if (*end || t < 1 || t > 256) return cli_usage_error(verb, "--threads wants 1..256, not '%s'", argv[i]);
                *threads = (int)t;
            }
            continue;
        }
        if (o[0] == '-' && o[1]) return cli_usage_error(verb, "unknown option '%s'", o);
        if (in_data) {
            int rc = add_data(verb, data, o);
            if (rc) return rc;
        } else if (*model) {
            return cli_usage_error(verb, "more than one MODEL given ('%s'); data files follow --data", o);
        } else {
            *model = o;
        }
    }
    if (!*model) return cli_usage_error(verb, "missing MODEL");
    if (!data->n) return cli_usage_error(verb, "missing --data FILE");
    if (!*out) return cli_usage_error(verb, "missing -o OUT");
    return 0;
}

int cmd_calibrate(int argc, char **argv)
{
    const char *model, *out;
    int threads;
    struct files data = {0};
    int rc = parse("calibrate", argc, argv, calibrate_help, &model, &out, &threads, &data);
    if (rc) {
        free_files(&data);
        return rc < 0 ? EXIT_OK : rc;
    }
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_load(model, &g, &d);
    if (!s) {
        struct progress p;
        clock_gettime(CLOCK_MONOTONIC, &p.t0);
        struct bpcc_calibrate_options o = {.threads = threads, .progress = isatty(2) ? on_progress : NULL, .progress_ud = &p};
        s = bpcc_calibrate(g, (const char *const *)data.v, data.n, &o, &d);
        if (!s) s = bpcc_graph_save(g, out, &d);
        bpcc_graph_free(g);
    }
    free_files(&data);
    cli_print_diag(&d);
    return s ? cli_exit_code(s) : EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
    const char *model, *out;
    int threads;
    struct files data = {0};
    int rc = parse("run", argc, argv, run_help, &model, &out, &threads, &data);
    if (!rc && data.n != 1) rc = cli_usage_error("run", "run takes one --data FILE");
    if (rc) {
        free_files(&data);
        return rc < 0 ? EXIT_OK : rc;
    }
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_load(model, &g, &d);
    if (!s) {
        s = bpcc_run(g, data.v[0], out, threads, &d);
        bpcc_graph_free(g);
    }
    free_files(&data);
    cli_print_diag(&d);
    return s ? cli_exit_code(s) : EXIT_OK;
}
