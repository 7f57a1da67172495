/*
** cmd_fuse.c — `bpcc fuse MODEL -b BACKEND [--qat] [--explain] -o OUT`.
*/
#include "cli.h"

#include <string.h>

static const char fuse_help[] =
    "usage: bpcc fuse MODEL -b BACKEND [--qat] [--explain] [--strict] -o OUT [--sync]\n"
    "\n"
    "Fuse the backend's fusable patterns (those with a fuser_method) as PyTorch's fuse_fx does:\n"
    "conv+bn(+relu), linear+bn, conv+relu, linear+relu, bn+relu ... Batch norms are folded into\n"
    "the weights (eval mode), or kept inside ConvBn* modules with --qat. BACKEND is a built-in\n"
    "name or a YAML file. --explain prints each fused group with its pattern and file:line.\n"
    "--sync waits for the disk before renaming the output over its target (see bpcc --help).\n";

int cmd_fuse(int argc, char **argv)
{
    const char *path = NULL, *out = NULL, *backend = NULL;
    bool qat = false, explain = false, strict = false;
    unsigned write_flags = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "-b")) {
            if (i + 1 >= argc) return cli_usage_error("fuse", "%s needs a value", argv[i]);
            if (argv[i][1] == 'o') out = argv[++i];
            else backend = argv[++i];
        } else if (!strcmp(argv[i], "--qat")) qat = true;
        else if (!strcmp(argv[i], "--explain")) explain = true;
        else if (!strcmp(argv[i], "--strict")) strict = true;
        else if (cli_sync_option(argv[i], &write_flags)) continue;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(fuse_help, stdout);
            return EXIT_OK;
        } else if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("fuse", "unknown option '%s'", argv[i]);
        else if (path) return cli_usage_error("fuse", "more than one MODEL given ('%s')", argv[i]);
        else path = argv[i];
    }
    if (!path) return cli_usage_error("fuse", "missing MODEL");
    if (!backend) return cli_usage_error("fuse", "missing -b BACKEND");
    if (!out && !explain) return cli_usage_error("fuse", "missing -o OUT (or --explain)");
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config_options co = {.strict = strict};
    struct bpcc_config *c;
    enum bpcc_status s = bpcc_config_load(backend, &co, &c, &d);
    if (s) {
        cli_print_diag(&d);
        return cli_exit_code(s);
    }
    struct bpcc_graph *g;
    s = bpcc_graph_load(path, &g, &d);
    char *text = NULL;
    if (!s) {
        bpcc_graph_set_rollback(g, false); /* a failed pass ends the command: no undo log */
        struct bpcc_fuse_options fo = {.is_qat = qat};
        s = bpcc_fuse(g, c, &fo, explain ? &text : NULL, &d);
        if (!s && out) s = bpcc_graph_save_ex(g, out, write_flags, &d);
        bpcc_graph_free(g);
    }
    bpcc_config_free(c);
    cli_print_diag(&d);
    if (s) {
        bpcc_free(text);
        return cli_exit_code(s);
    }
    if (text) fputs(text, stdout);
    bpcc_free(text);
    return EXIT_OK;
}
