/*
** cmd_prepare.c — `bpcc prepare MODEL -b BACKEND -q QCONFIG -o OUT [--plan PLAN.json] [--strict]`
** and `bpcc explain MODEL -b BACKEND -q QCONFIG [--json] [--strict]`.
*/
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char prepare_help[] =
    "usage: bpcc prepare MODEL -b BACKEND -q QCONFIG -o OUT [--plan PLAN.json] [--strict]\n"
    "                    [--input-quantized I,J...] [--output-quantized] [--sync]\n"
    "\n"
    "Fuse MODEL with BACKEND's fusion patterns, give every node its qconfig from QCONFIG, and insert\n"
    "observers where PyTorch 1.13's prepare_fx does (docs/PREPARE.md). BACKEND and QCONFIG are\n"
    "built-in names or YAML files. --plan writes the fused groups and observer points as JSON.\n"
    "--strict: a pattern whose qconfig the backend rejects is an error instead of staying float.\n"
    "--input-quantized: these graph inputs (0-based placeholder positions) arrive as quint8;\n"
    "--output-quantized: the output leaves as quint8 (PrepareCustomConfig's quantized indexes).\n"
    "--sync waits for the disk before renaming the outputs over their targets (see bpcc --help).\n";

static const char explain_help[] =
    "usage: bpcc explain MODEL -b BACKEND -q QCONFIG [--json] [--strict]\n"
    "                    [--input-quantized I,J...] [--output-quantized]\n"
    "\n"
    "For every node of the fused model: the backend pattern that matched it (file:line) or none,\n"
    "the qconfig that applies and the mapping rule that chose it, and whether the node will be\n"
    "quantized, and if not, the exact reason (docs/PREPARE.md).\n";

struct prep_args {
    const char *path, *out, *plan, *backend, *qconfig;
    bool strict, json;
    unsigned write_flags; /* --sync */
    struct cli_quantized_io qio;
};

static int parse(const char *verb, int argc, char **argv, struct prep_args *a, const char *help)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int rc = cli_quantized_io_option(verb, argc, argv, &i, &a->qio);
        if (rc > 0) return rc;
        if (!rc) continue;
        if (!strcmp(o, "-o") || !strcmp(o, "-b") || !strcmp(o, "-q") || !strcmp(o, "--plan")) {
            if (i + 1 >= argc) return cli_usage_error(verb, "%s needs a value", o);
            const char *v = argv[++i];
            if (!strcmp(o, "-o")) a->out = v;
            else if (!strcmp(o, "-b")) a->backend = v;
            else if (!strcmp(o, "-q")) a->qconfig = v;
            else a->plan = v;
        } else if (!strcmp(o, "--strict")) a->strict = true;
        else if (strcmp(verb, "explain") && cli_sync_option(o, &a->write_flags)) continue;
        else if (!strcmp(o, "--json")) a->json = true;
        else if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fputs(help, stdout);
            return -1;
        } else if (o[0] == '-' && o[1]) return cli_usage_error(verb, "unknown option '%s'", o);
        else if (a->path) return cli_usage_error(verb, "more than one MODEL given ('%s')", o);
        else a->path = o;
    }
    if (!a->path) return cli_usage_error(verb, "missing MODEL");
    if (!a->backend) return cli_usage_error(verb, "missing -b BACKEND");
    if (!a->qconfig) return cli_usage_error(verb, "missing -q QCONFIG");
    return 0;
}

/* Load, fuse and prepare; then hand the result to `emit`. */
static int run(const struct prep_args *a, bool explain)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c = NULL;
    struct bpcc_qconfig_mapping *m = NULL;
    struct bpcc_graph *g = NULL;
    struct bpcc_prepare_report *r = NULL;
    char *text = NULL;
    struct bpcc_config_options co = {.strict = a->strict};
    enum bpcc_status s = bpcc_config_load(a->backend, &co, &c, &d);
    if (!s) s = bpcc_qconfig_load(a->qconfig, &co, &m, &d);
    if (!s) s = bpcc_graph_load(a->path, &g, &d);
    if (!s) bpcc_graph_set_rollback(g, false); /* a failed pass ends the command: no undo log */
    if (!s) {
        struct bpcc_fuse_options fo = {.is_qat = false};
        s = bpcc_fuse(g, c, &fo, NULL, &d);
    }
    if (!s) {
        struct bpcc_prepare_options po = {.strict = a->strict, .input_quantized = a->qio.inputs,
                                          .n_input_quantized = a->qio.n_inputs, .output_quantized = a->qio.output};
        s = bpcc_prepare(g, c, m, &po, &r, &d);
    }
    if (!s && explain) s = bpcc_prepare_explain(r, a->json, &text, &d);
    if (!s && !explain) {
        if (a->plan) s = bpcc_prepare_plan_json(r, 2, &text, &d);
        if (!s) s = bpcc_graph_save_ex(g, a->out, a->write_flags, &d);
        if (!s && a->plan) s = cli_write_text(a->plan, text, a->write_flags, &d);
    }
    bpcc_prepare_report_free(r);
    bpcc_graph_free(g);
    bpcc_qconfig_free(m);
    bpcc_config_free(c);
    cli_print_diag(&d);
    if (s) {
        bpcc_free(text);
        return cli_exit_code(s);
    }
    if (explain && text) {
        fputs(text, stdout);
        if (a->json) fputc('\n', stdout);
    }
    bpcc_free(text);
    return EXIT_OK;
}

int cmd_prepare(int argc, char **argv)
{
    struct prep_args a;
    int rc = parse("prepare", argc, argv, &a, prepare_help);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    if (!a.out) return cli_usage_error("prepare", "missing -o OUT");
    if (a.json) return cli_usage_error("prepare", "--json is an option of 'explain' (use --plan FILE)");
    return run(&a, false);
}

int cmd_explain(int argc, char **argv)
{
    struct prep_args a;
    int rc = parse("explain", argc, argv, &a, explain_help);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    if (a.out || a.plan) return cli_usage_error("explain", "explain writes to standard output (no -o, --plan)");
    return run(&a, true);
}
