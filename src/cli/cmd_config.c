/*
** cmd_config.c — `bpcc config list | check FILE… | dump NAME|FILE [--json] | diff A B`.
*/
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char config_help[] =
    "usage: bpcc config list\n"
    "       bpcc config check [--strict] FILE...\n"
    "       bpcc config dump [--strict] [--json] NAME|FILE\n"
    "       bpcc config diff [--strict] A B\n"
    "\n"
    "Backend pattern configs in PyTorch's BackendPatternConfig schema (docs/CONFIG.md).\n"
    "NAME is a built-in backend; FILE a YAML path. check reports every problem of each file\n"
    "(exit 1 if any); dump prints the effective config (after extends) as canonical YAML or\n"
    "JSON; diff lists the patterns added, removed and changed from A to B. --strict makes\n"
    "unknown op names errors instead of warnings.\n";

static int load(const char *spec, bool strict, struct bpcc_config **out)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config_options o = {.strict = strict};
    enum bpcc_status s = bpcc_config_load(spec, &o, out, &d);
    cli_print_diag(&d); /* warnings too */
    return s ? cli_exit_code(s) : EXIT_OK;
}

static int put_text(char *text)
{
    fputs(text, stdout);
    bpcc_free(text);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "bpcc: error writing standard output\n");
        return EXIT_INPUT;
    }
    return EXIT_OK;
}

int cmd_config(int argc, char **argv)
{
    if (argc < 2) return cli_usage_error("config", "missing subcommand (list, check, dump, diff)");
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        fputs(config_help, stdout);
        return EXIT_OK;
    }
    bool strict = false, json = false;
    const char *args[64];
    int n = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--strict")) strict = true;
        else if (!strcmp(argv[i], "--json") && !strcmp(sub, "dump")) json = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(config_help, stdout);
            return EXIT_OK;
        } else if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("config", "unknown option '%s' for '%s'", argv[i], sub);
        else if (n < 64) args[n++] = argv[i];
        else return cli_usage_error("config", "too many files");
    }
    if (!strcmp(sub, "list")) {
        if (n) return cli_usage_error("config", "'list' takes no arguments");
        uint32_t count;
        const char *const *names = bpcc_config_builtin_names(&count);
        for (uint32_t i = 0; i < count; i++) {
            struct bpcc_config *c;
            int rc = load(names[i], false, &c);
            if (rc) return rc;
            printf("%-12s %4u patterns\n", names[i], bpcc_config_n_patterns(c));
            bpcc_config_free(c);
        }
        return EXIT_OK;
    }
    if (!strcmp(sub, "check")) {
        if (!n) return cli_usage_error("config", "'check' needs at least one FILE");
        int worst = EXIT_OK;
        for (int i = 0; i < n; i++) {
            struct bpcc_config *c;
            int rc = load(args[i], strict, &c);
            if (rc) {
                if (rc > worst) worst = rc;
                continue;
            }
            printf("%s: ok, backend '%s', %u patterns\n", args[i], bpcc_config_name(c),
                   bpcc_config_n_patterns(c));
            bpcc_config_free(c);
        }
        return worst;
    }
    if (!strcmp(sub, "dump")) {
        if (n != 1) return cli_usage_error("config", "'dump' takes one NAME or FILE");
        struct bpcc_config *c;
        int rc = load(args[0], strict, &c);
        if (rc) return rc;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        char *text;
        enum bpcc_status s = json ? bpcc_config_dump_json(c, 2, &text, &d)
                                  : bpcc_config_dump_yaml(c, &text, &d);
        bpcc_config_free(c);
        if (s) {
            cli_print_diag(&d);
            return cli_exit_code(s);
        }
        if (json) {
            rc = put_text(text);
            if (!rc) putchar('\n');
            return rc;
        }
        return put_text(text);
    }
    if (!strcmp(sub, "diff")) {
        if (n != 2) return cli_usage_error("config", "'diff' takes two configs, A and B");
        struct bpcc_config *a, *b;
        int rc = load(args[0], strict, &a);
        if (rc) return rc;
        rc = load(args[1], strict, &b);
        if (rc) {
            bpcc_config_free(a);
            return rc;
        }
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        char *text;
        enum bpcc_status s = bpcc_config_diff(a, b, &text, NULL, &d);
        bpcc_config_free(a);
        bpcc_config_free(b);
        if (s) {
            cli_print_diag(&d);
            return cli_exit_code(s);
        }
        return put_text(text);
    }
    return cli_usage_error("config", "unknown subcommand '%s' (list, check, dump, diff)", sub);
}
