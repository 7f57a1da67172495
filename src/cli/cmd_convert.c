/*
** cmd_convert.c — `bpcc convert CALIBRATED -b BACKEND -q QCONFIG -o OUT` and the one-shot
** `bpcc quantize MODEL -b BACKEND -q QCONFIG [--data FILE|DIR...] -o OUT [--plan PLAN.json]`.
*/
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char convert_help[] =
    "usage: bpcc convert CALIBRATED -b BACKEND -q QCONFIG -o OUT [--erase-unused-in-place] [--sync]\n"
    "\n"
    "Turn a calibrated model (bpcc calibrate) into PyTorch's reference quantized model, as\n"
    "convert_to_reference_fx does: observers become quantize/dequantize pairs, weighted modules the\n"
    "backend's reference quantized modules with quantized-weight parameters (docs/CONVERT.md).\n"
    "BACKEND and QCONFIG must be those the model was prepared with; a warning when nothing was\n"
    "quantized. An in-place op whose result nothing reads (x.add_(y) as a statement) is kept, with a\n"
    "warning, where PyTorch 1.13's convert erases it and its model computes other values than the\n"
    "float one; --erase-unused-in-place erases it as PyTorch does (docs/PYTORCH_DIFFERENCES.md).\n"
    "--sync waits for the disk before renaming the output over its target (see bpcc --help).\n";

static const char quantize_help[] =
    "usage: bpcc quantize MODEL -b BACKEND -q QCONFIG [--data FILE|DIR...] -o OUT [--plan PLAN.json]\n"
    "                     [--input-quantized I,J...] [--output-quantized] [--explain] [--threads N]\n"
    "                     [--no-sqnr] [--time] [--erase-unused-in-place] [--sync]\n"
    "\n"
    "fuse -> prepare -> calibrate -> convert in one process: the reference quantized model of MODEL\n"
    "for BACKEND with QCONFIG, calibrated on the batches (see bpcc calibrate --help for the data).\n"
    "Dynamic and weight-only quantization need no batches: without --data, quantize converts them\n"
    "directly and refuses observers that would need calibration.\n"
    "--input-quantized/--output-quantized: as bpcc prepare's (PrepareCustomConfig's quantized\n"
    "indexes): those inputs arrive quantized (quint8) and are dequantized first, the output leaves\n"
    "quantized; the SQNR check feeds the batches as they are and dequantizes the output.\n"
    "Prints a summary: nodes, fused groups, observers, quantize points, reference modules, and the\n"
    "output's SQNR against the float model on the batches; a warning when nothing was quantized\n"
    "(the backend's patterns refuse the qconfig's dtypes everywhere). --explain also prints bpcc explain's\n"
    "per-node report, --plan writes prepare's plan. --no-sqnr skips the SQNR check (two more\n"
    "forward passes per batch). --time also prints how long each step took (wall clock): loading\n"
    "the configs and the model, fuse, prepare, calibrate, convert, the SQNR check, saving; and the\n"
    "process's peak resident memory (its mapped weights files included). --erase-unused-in-place:\n"
    "as bpcc convert's. --sync waits for the disk before renaming the outputs over their targets\n"
    "(see bpcc --help).\n";

struct cargs {
    const char *model, *out, *backend, *qconfig, *plan;
    int threads;
    unsigned write_flags; /* --sync */
    bool explain, no_sqnr, time, erase_in_place;
    struct cli_files data;
    struct cli_quantized_io qio;
};

static int parse(const char *verb, int argc, char **argv, const char *help, struct cargs *a, bool want_data)
{
    memset(a, 0, sizeof *a);
    a->threads = 1;
    bool in_data = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fputs(help, stdout);
            return -1;
        }
        if (cli_sync_option(o, &a->write_flags)) {
            in_data = false;
            continue;
        }
        if (want_data && !strcmp(o, "--data")) {
            in_data = true;
            continue;
        }
        int rc = want_data ? cli_quantized_io_option(verb, argc, argv, &i, &a->qio) : -1;
        if (rc > 0) return rc;
        if (!rc) {
            in_data = false;
            continue;
        }
        if (!strcmp(o, "--erase-unused-in-place")) {
            a->erase_in_place = true;
            in_data = false;
            continue;
        }
        if (want_data && (!strcmp(o, "--explain") || !strcmp(o, "--no-sqnr") || !strcmp(o, "--time"))) {
            if (o[2] == 'e') a->explain = true;
            else if (o[2] == 'n') a->no_sqnr = true;
            else a->time = true;
            in_data = false;
            continue;
        }
        if (!strcmp(o, "-o") || !strcmp(o, "-b") || !strcmp(o, "-q") || (want_data && !strcmp(o, "--plan")) ||
            (want_data && !strcmp(o, "--threads"))) {
            in_data = false;
            if (i + 1 >= argc) return cli_usage_error(verb, "%s needs a value", o);
            const char *v = argv[++i];
            if (!strcmp(o, "-o")) a->out = v;
            else if (!strcmp(o, "-b")) a->backend = v;
            else if (!strcmp(o, "-q")) a->qconfig = v;
            else if (!strcmp(o, "--plan")) a->plan = v;
            else {
                rc = cli_threads(verb, v, &a->threads);
                if (rc) return rc;
            }
            continue;
        }
        if (o[0] == '-' && o[1]) return cli_usage_error(verb, "unknown option '%s'", o);
        if (in_data) {
            rc = cli_add_data(&a->data, o);
            if (rc) return rc;
        } else if (a->model) {
            return cli_usage_error(verb, "more than one MODEL given ('%s')", o);
        } else {
            a->model = o;
        }
    }
    if (!a->model) return cli_usage_error(verb, "missing MODEL");
    if (!a->backend) return cli_usage_error(verb, "missing -b BACKEND");
    if (!a->qconfig) return cli_usage_error(verb, "missing -q QCONFIG");
    if (!a->out) return cli_usage_error(verb, "missing -o OUT");
    return 0;
}

static void free_args(struct cargs *a) { cli_free_files(&a->data); }

/* --time: the steps of a run and the wall clock each took */
enum step { STEP_LOAD, STEP_FUSE, STEP_PREPARE, STEP_CALIBRATE, STEP_CONVERT, STEP_SQNR, STEP_SAVE, STEP_COUNT };
struct step_clock {
    struct timespec last;
    double ms[STEP_COUNT];
};

static void clock_start(struct step_clock *k)
{
    memset(k, 0, sizeof *k);
    clock_gettime(CLOCK_MONOTONIC, &k->last);
}

/* the time since the last lap goes to step */
static void lap(struct step_clock *k, enum step step)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    k->ms[step] += (double)(t.tv_sec - k->last.tv_sec) * 1e3 + (double)(t.tv_nsec - k->last.tv_nsec) / 1e6;
    k->last = t;
}

static void print_times(const struct step_clock *k)
{
    static const char *const names[STEP_COUNT] = {"load", "fuse", "prepare", "calibrate", "convert", "sqnr", "save"};
    double total = 0;
    printf("time:");
    for (int i = 0; i < STEP_COUNT; i++) {
        printf("%s %s %.1f ms", i ? "," : "", names[i], k->ms[i]);
        total += k->ms[i];
    }
    printf("; total %.1f ms", total);
    long peak = cli_peak_rss_kib();
    if (peak >= 0) printf("; peak %.0f MB", (double)peak / 1024.0);
    printf("\n");
}

static int run(struct cargs *a, bool one_shot)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c = NULL;
    struct bpcc_qconfig_mapping *m = NULL;
    struct bpcc_graph *g = NULL;
    struct bpcc_prepare_report *r = NULL;
    char *plan = NULL, no_data_err[512] = "";
    uint32_t n0 = 0, n_fused = 0, n_obs = 0, nq = 0, nm = 0;
    struct step_clock k;
    clock_start(&k);
    enum bpcc_status s = bpcc_config_load(a->backend, NULL, &c, &d);
    if (!s) s = bpcc_qconfig_load(a->qconfig, NULL, &m, &d);
    if (!s) s = bpcc_graph_load(a->model, &g, &d);
    if (!s) {
        bpcc_graph_set_rollback(g, false); /* a failed pass ends the command: no undo log */
        bpcc_graph_set_erase_unused_in_place(g, a->erase_in_place);
        bpcc_graph_set_implicit_qparams(g, true); /* the converted graph is only run and saved */
    }
    lap(&k, STEP_LOAD);
    if (!s && one_shot) {
        n0 = bpcc_graph_n_nodes(g);
        s = bpcc_fuse(g, c, NULL, NULL, &d);
        if (!s) n_fused = n0 - bpcc_graph_n_nodes(g);
        lap(&k, STEP_FUSE);
        /* the report only where it is shown: it costs ~100 bytes per observer */
        struct bpcc_prepare_options po = {.input_quantized = a->qio.inputs, .n_input_quantized = a->qio.n_inputs,
                                          .output_quantized = a->qio.output};
        if (!s) s = bpcc_prepare(g, c, m, &po, a->plan || a->explain ? &r : NULL, &d);
        if (!s && a->plan) s = bpcc_prepare_plan_json(r, 2, &plan, &d);
        if (!s && a->explain) {
            char *text;
            s = bpcc_prepare_explain(r, false, &text, &d);
            if (!s) fputs(text, stdout);
            bpcc_free(text);
        }
        for (uint32_t i = 0; !s && i < bpcc_graph_n_modules(g); i++)
            n_obs += !strncmp(bpcc_module_type(bpcc_graph_module(g, i)), "torch.ao.quantization.", 22);
        lap(&k, STEP_PREPARE);
        if (!s && a->data.n) {
            struct bpcc_calibrate_options o = {.threads = a->threads};
            s = bpcc_calibrate(g, (const char *const *)a->data.v, a->data.n, &o, &d);
        } else if (!s) {
            /* no batches: fine where no observer needs any (dynamic and weight-only quantization,
            ** whose PlaceholderObservers have no qparams to find); else say which one needs them */
            static const char *const no_data[] = {"PlaceholderObserver", "NoopObserver", "ReuseInputObserver",
                                                  "FixedQParamsObserver"};
            for (uint32_t i = 0; i < bpcc_graph_n_modules(g) && !s; i++) {
                const struct bpcc_module *om = bpcc_graph_module(g, i);
                const char *t = bpcc_module_type(om);
                bool needs = !strncmp(t, "torch.ao.quantization.", 22);
                for (size_t j = 0; needs && j < sizeof no_data / sizeof no_data[0]; j++) needs = strcmp(t + 22, no_data[j]) != 0;
                if (needs) {
                    snprintf(no_data_err, sizeof no_data_err,
                             "%s: error: observer '%s' (%s) needs calibration batches: give --data FILE|DIR (only "
                             "dynamic and weight-only quantization need none)", a->model, bpcc_module_name(om), t);
                    s = BPCC_ERR_GRAPH; /* bad input: exit 1 */
                }
            }
        }
        lap(&k, STEP_CALIBRATE);
    }
    if (!s) s = bpcc_convert(g, c, m, &nq, &nm, &d);
    lap(&k, STEP_CONVERT);
    double db = 0;
    if (!s && one_shot && !a->no_sqnr && a->data.n) { /* the float model, reloaded, against the quantized one on the batches */
        struct bpcc_graph *f;
        s = bpcc_graph_load(a->model, &f, &d);
        if (!s) {
            s = bpcc_sqnr(f, g, (const char *const *)a->data.v, a->data.n, a->threads, &db, &d);
            bpcc_graph_free(f);
        }
    }
    lap(&k, STEP_SQNR);
    if (!s) s = bpcc_graph_save_ex(g, a->out, a->write_flags, &d);
    if (!s && plan) s = cli_write_text(a->plan, plan, a->write_flags, &d);
    lap(&k, STEP_SAVE);
    bpcc_free(plan);
    bpcc_prepare_report_free(r);
    bpcc_graph_free(g);
    bpcc_qconfig_free(m);
    bpcc_config_free(c);
    cli_print_diag(&d);
    if (no_data_err[0]) fprintf(stderr, "%s\n", no_data_err);
    if (s) return cli_exit_code(s);
    if (nq == 0 && nm == 0) {
        /* a success that changed nothing: most often a qconfig whose dtypes the backend's patterns
        ** refuse (quint8 activations against tensorrt's qint8), which PyTorch leaves silent */
        fprintf(stderr, "%s: warning: nothing was quantized (no quantize point, no reference module): the model "
                        "is written as float\n", a->model);
        fprintf(stderr, "%s: note: %s shows, node by node, the pattern and qconfig each got and why it stays "
                        "float\n", a->model, one_shot ? "`bpcc quantize --explain`" : "`bpcc explain` of the float model");
    }
    if (one_shot) {
        char sq[96] = "output SQNR not measured (--no-sqnr)";
        if (!a->data.n) snprintf(sq, sizeof sq, "output SQNR not measured (no --data)");
        else if (!a->no_sqnr) snprintf(sq, sizeof sq, "output SQNR %.1f dB vs float on the calibration data", db);
        char cal[64] = "(none needs calibration)";
        if (a->data.n) snprintf(cal, sizeof cal, "calibrated on %u batch%s", a->data.n, a->data.n == 1 ? "" : "es");
        printf("%s: %u nodes, %u removed by fusion, %u observers %s, %u quantize points, %u reference modules, %s -> %s\n",
               a->model, n0, n_fused, n_obs, cal, nq, nm, sq, a->out);
        if (a->time) print_times(&k);
    }
    return EXIT_OK;
}

int cmd_convert(int argc, char **argv)
{
    struct cargs a;
    int rc = parse("convert", argc, argv, convert_help, &a, false);
    if (!rc) rc = run(&a, false);
    free_args(&a);
    return rc < 0 ? EXIT_OK : rc;
}

int cmd_quantize(int argc, char **argv)
{
    struct cargs a;
    int rc = parse("quantize", argc, argv, quantize_help, &a, true);
    if (!rc) rc = run(&a, true);
    free_args(&a);
    return rc < 0 ? EXIT_OK : rc;
}
