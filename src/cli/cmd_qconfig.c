/*
** cmd_qconfig.c — `bpcc qconfig list | check FILE… | dump NAME|FILE | assign MODEL -q QCONFIG`.
*/
#include "cli.h"

#include <string.h>

static const char qconfig_help[] =
    "usage: bpcc qconfig list\n"
    "       bpcc qconfig check [--strict] FILE...\n"
    "       bpcc qconfig dump [--strict] NAME|FILE\n"
    "       bpcc qconfig assign MODEL -q QCONFIG [-b BACKEND] [--json]\n"
    "\n"
    "QConfig mappings: PyTorch's QConfigMapping in YAML (docs/QCONFIG.md). check reports every\n"
    "problem of each file; dump prints the mapping as JSON with each observer as constructed\n"
    "(defaults applied, effective quant_min/quant_max). NAME is a built-in mapping (fbgemm,\n"
    "qnnpack, x86, onednn = PyTorch 1.13's get_default_qconfig_mapping(NAME)).\n"
    "assign prints the qconfig each node of MODEL gets and the rule that chose it, as prepare_fx\n"
    "decides it; with -b the model is first fused for BACKEND, as prepare_fx does.\n";

static int load(const char *spec, bool strict, struct bpcc_qconfig_mapping **out)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config_options o = {.strict = strict};
    enum bpcc_status s = bpcc_qconfig_load(spec, &o, out, &d);
    cli_print_diag(&d);
    return s ? cli_exit_code(s) : EXIT_OK;
}

static void print_assignment(const struct bpcc_qconfig_assignment *a, const char *qfile)
{
    uint32_t n = bpcc_qconfig_assignment_count(a);
    size_t w = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t l = strlen(bpcc_node_name(bpcc_qconfig_assignment_node(a, i)));
        if (l > w) w = l;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct bpcc_node *node = bpcc_qconfig_assignment_node(a, i);
        uint32_t line;
        enum bpcc_qc_origin o = bpcc_qconfig_assignment_origin(a, i, &line);
        if (o == BPCC_QC_NOT_APPLICABLE) continue;
        printf("%%%-*s  %-9s  %s", (int)w, bpcc_node_name(node),
               bpcc_qconfig_assignment_quantized(a, i) ? "quantized" : "float", bpcc_qc_origin_name(o));
        if (line) printf(" (%s:%u)", qfile, line);
        else if (o == BPCC_QC_DEFAULT) printf(" (no rule and no global qconfig)");
        putchar('\n');
    }
}

static int assign(const char *model, const char *qspec, const char *backend, bool strict, bool json)
{
    struct bpcc_qconfig_mapping *m;
    int rc = load(qspec, strict, &m);
    if (rc) return rc;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g = NULL;
    struct bpcc_config *c = NULL;
    struct bpcc_qconfig_assignment *a = NULL;
    char *text = NULL;
    struct bpcc_config_options co = {.strict = strict};
    enum bpcc_status s = backend ? bpcc_config_load(backend, &co, &c, &d) : BPCC_OK;
    if (!s) s = bpcc_graph_load(model, &g, &d);
    if (!s) bpcc_graph_set_rollback(g, false); /* a failed pass ends the command: no undo log */
    if (!s && c) {
        struct bpcc_fuse_options fo = {.is_qat = false};
        s = bpcc_fuse(g, c, &fo, NULL, &d);
    }
    if (!s) s = bpcc_qconfig_assign(g, m, &a, &d);
    if (!s && json) s = bpcc_qconfig_assignment_json(a, 2, &text, &d);
    cli_print_diag(&d);
    if (!s) {
        if (json) puts(text);
        else print_assignment(a, bpcc_qconfig_file(m));
    }
    bpcc_free(text);
    bpcc_qconfig_assignment_free(a);
    bpcc_graph_free(g);
    bpcc_config_free(c);
    bpcc_qconfig_free(m);
    return s ? cli_exit_code(s) : EXIT_OK;
}


int cmd_qconfig(int argc, char **argv)
{
    if (argc < 2) return cli_usage_error("qconfig", "missing subcommand (list, check, dump, assign)");
    const char *sub = argv[1];
    bool strict = false, json = false;
    const char *args[64], *qspec = NULL, *backend = NULL;
    int n = 0;
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        fputs(qconfig_help, stdout);
        return EXIT_OK;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--strict")) strict = true;
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "-b")) {
            if (i + 1 >= argc) return cli_usage_error("qconfig", "%s needs a value", argv[i]);
            if (argv[i][1] == 'q') qspec = argv[++i];
            else backend = argv[++i];
        } else if (!strcmp(argv[i], "--help")) {
            fputs(qconfig_help, stdout);
            return EXIT_OK;
        } else if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("qconfig", "unknown option '%s'", argv[i]);
        else if (n < 64) args[n++] = argv[i];
        else return cli_usage_error("qconfig", "too many files");
    }
    if (!strcmp(sub, "list")) {
        uint32_t count;
        const char *const *names = bpcc_qconfig_builtin_names(&count);
        for (uint32_t i = 0; i < count; i++) printf("%s\n", names[i]);
        return EXIT_OK;
    }
    if (!strcmp(sub, "check")) {
        if (!n) return cli_usage_error("qconfig", "'check' needs at least one FILE");
        int worst = EXIT_OK;
        for (int i = 0; i < n; i++) {
            struct bpcc_qconfig_mapping *m;
            int rc = load(args[i], strict, &m);
            if (rc) {
                if (rc > worst) worst = rc;
                continue;
            }
            printf("%s: ok\n", args[i]);
            bpcc_qconfig_free(m);
        }
        return worst;
    }
    if (!strcmp(sub, "dump")) {
        if (n != 1) return cli_usage_error("qconfig", "'dump' takes one NAME or FILE");
        struct bpcc_qconfig_mapping *m;
        int rc = load(args[0], strict, &m);
        if (rc) return rc;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        char *text;
        enum bpcc_status s = bpcc_qconfig_dump_json(m, 2, &text, &d);
        bpcc_qconfig_free(m);
        if (s) {
            cli_print_diag(&d);
            return cli_exit_code(s);
        }
        puts(text);
        bpcc_free(text);
        return EXIT_OK;
    }
    if (!strcmp(sub, "assign")) {
        if (n != 1) return cli_usage_error("qconfig", "'assign' takes one MODEL");
        if (!qspec) return cli_usage_error("qconfig", "'assign' needs -q QCONFIG");
        return assign(args[0], qspec, backend, strict, json);
    }
    return cli_usage_error("qconfig", "unknown subcommand '%s' (list, check, dump, assign)", sub);
}
