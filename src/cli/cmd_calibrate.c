/*
** cmd_calibrate.c — `bpcc calibrate MODEL --data FILE|DIR... -o OUT [--threads N]` and
** `bpcc run MODEL --data FILE -o OUT.safetensors [--threads N]`.
*/
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char calibrate_help[] =
    "usage: bpcc calibrate MODEL --data FILE|DIR... -o OUT [--threads N] [--sync]\n"
    "\n"
    "Run a prepared model (bpcc prepare) on calibration batches so that its observers see the\n"
    "activations, and write the model with each observer's statistics and qparams (scale,\n"
    "zero_point as PyTorch 1.13 computes them). Each FILE is one batch: a safetensors file with one\n"
    "float32 tensor per graph input, named after it (integers or bools for token ids and masks); a\n"
    "DIR stands for its *.safetensors files in name order. Every batch is checked before any runs. --threads: OpenBLAS threads (default 1).\n"
    "--sync waits for the disk before renaming the outputs over their targets (see bpcc --help).\n";

static const char run_help[] =
    "usage: bpcc run MODEL --data FILE -o OUT.safetensors [--threads N]   (--input is --data)\n"
    "\n"
    "Run a model on one batch with the reference interpreter and write its outputs (\"output\", or\n"
    "\"output.0\", \"output.1\" ... for tuples, \"output.<key>\" for dicts) to a safetensors file.\n"
    "A quantized input or output is its integer values with NAME.scale and NAME.zero_point beside\n"
    "them (docs/FORMAT.md).\n";


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
                 int *threads, unsigned *write_flags, struct cli_files *data)
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
        if (write_flags && cli_sync_option(o, write_flags)) {
            in_data = false;
            continue;
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
                int rc = cli_threads(verb, argv[++i], threads);
                if (rc) return rc;
            }
            continue;
        }
        if (o[0] == '-' && o[1]) return cli_usage_error(verb, "unknown option '%s'", o);
        if (in_data) {
            int rc = cli_add_data(data, o);
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
    unsigned write_flags = 0;
    struct cli_files data = {0};
    int rc = parse("calibrate", argc, argv, calibrate_help, &model, &out, &threads, &write_flags, &data);
    if (rc) {
        cli_free_files(&data);
        return rc < 0 ? EXIT_OK : rc;
    }
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_load(model, &g, &d);
    if (!s) {
        bpcc_graph_set_rollback(g, false); /* a failed pass ends the command: no undo log */
        struct progress p;
        clock_gettime(CLOCK_MONOTONIC, &p.t0);
        struct bpcc_calibrate_options o = {.threads = threads, .progress = isatty(2) ? on_progress : NULL, .progress_ud = &p};
        s = bpcc_calibrate(g, (const char *const *)data.v, data.n, &o, &d);
        if (!s) s = bpcc_graph_save_ex(g, out, write_flags, &d);
        bpcc_graph_free(g);
    }
    cli_free_files(&data);
    cli_print_diag(&d);
    return s ? cli_exit_code(s) : EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
    const char *model, *out;
    int threads;
    struct cli_files data = {0};
    int rc = parse("run", argc, argv, run_help, &model, &out, &threads, NULL, &data);
    if (!rc && data.n != 1) rc = cli_usage_error("run", "run takes one --data FILE");
    if (rc) {
        cli_free_files(&data);
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
    cli_free_files(&data);
    cli_print_diag(&d);
    return s ? cli_exit_code(s) : EXIT_OK;
}
