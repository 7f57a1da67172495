/*
** cmd_qconfig.c — `bpcc qconfig list | check FILE… | dump NAME|FILE`.
*/
#include "cli.h"

#include <string.h>

static const char qconfig_help[] =
    "usage: bpcc qconfig list\n"
    "       bpcc qconfig check [--strict] FILE...\n"
    "       bpcc qconfig dump [--strict] NAME|FILE\n"
    "\n"
    "QConfig mappings: PyTorch's QConfigMapping in YAML (docs/QCONFIG.md). check reports every\n"
    "problem of each file; dump prints the mapping as JSON with each observer as constructed\n"
    "(defaults applied, effective quant_min/quant_max). NAME is a built-in mapping (fbgemm,\n"
    "qnnpack, x86, onednn = PyTorch 1.13's get_default_qconfig_mapping(NAME)).\n";

static int load(const char *spec, bool strict, struct bpcc_qconfig_mapping **out)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config_options o = {.strict = strict};
    enum bpcc_status s = bpcc_qconfig_load(spec, &o, out, &d);
    cli_print_diag(&d);
    return s ? cli_exit_code(s) : EXIT_OK;
}

int cmd_qconfig(int argc, char **argv)
{
    if (argc < 2) return cli_usage_error("qconfig", "missing subcommand (list, check, dump)");
    const char *sub = argv[1];
    bool strict = false;
    const char *args[64];
    int n = 0;
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        fputs(qconfig_help, stdout);
        return EXIT_OK;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--strict")) strict = true;
        else if (!strcmp(argv[i], "--help")) {
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
    return cli_usage_error("qconfig", "unknown subcommand '%s' (list, check, dump)", sub);
}
