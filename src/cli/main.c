/*
** main.c — argv dispatch for the bpcc tool. No compiler logic lives here.
*/
#include "cli.h"

#include <sys/stat.h>

#include <dirent.h>

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include <stdarg.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

static const char usage_text[] =
    "usage: bpcc [--help] [--version] VERB [ARGS]\n"
    "\n"
    "bpcc compiles neural-network graphs through the quantization flow of PyTorch's\n"
    "quantize_fx (fuse -> prepare -> calibrate -> convert), driven by backend pattern configs.\n"
    "\n"
    "verbs:\n"
    "  show MODEL [--json]     print the graph, modules and tensors of a model\n"
    "  fmt MODEL -o OUT        check a model and write it back in canonical form\n"
    "  config list|check|dump|diff   backend pattern configs (bpcc config --help)\n"
    "  fuse MODEL -b BACKEND -o OUT  fuse conv/linear/bn/relu patterns as fuse_fx does\n"
    "  qconfig list|check|dump       qconfig mappings (bpcc qconfig --help)\n"
    "  prepare MODEL -b B -q Q -o O  insert observers as prepare_fx does (--plan, --strict)\n"
    "  explain MODEL -b B -q Q       per node: pattern, qconfig, quantized or why not\n"
    "  calibrate MODEL --data F... -o OUT   run batches through the observers, store qparams\n"
    "  run MODEL --data F -o OUT     run the reference interpreter on one batch\n"
    "  convert CAL -b B -q Q -o OUT  the reference quantized model (convert_to_reference_fx)\n"
    "  quantize MODEL -b B -q Q [--data F...] -o OUT   fuse, prepare, calibrate, convert\n"
    "  compare weights|outputs|shadow FLOAT QUANT [--data F...]   where the accuracy went\n"
    "\n"
    "MODEL is an IR text file (docs/FORMAT.md) naming its safetensors weights. Outputs are written\n"
    "to a temporary file beside the target and renamed over it when complete: a failure leaves no\n"
    "part of one. --sync (fmt, fuse, prepare, calibrate, convert, quantize) also waits for the disk\n"
    "(fsync) before the rename and after it, so that a power failure cannot lose them either.\n"
    "Exit status: 0 ok, 1 bad input, 2 usage error, 3 internal error.\n";

static int add_file(struct cli_files *f, const char *path)
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
int cli_add_data(struct cli_files *f, const char *path)
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
    return add_file(f, path) ? EXIT_INTERNAL : EXIT_OK;
}

void cli_free_files(struct cli_files *f)
{
    for (uint32_t i = 0; i < f->n; i++) free(f->v[i]);
    free(f->v);
    f->v = NULL;
    f->n = f->cap = 0;
}

bool cli_sync_option(const char *o, unsigned *flags)
{
    if (strcmp(o, "--sync")) return false;
    *flags |= BPCC_WRITE_SYNC;
    return true;
}

enum bpcc_status cli_write_text(const char *path, const char *text, unsigned flags, struct bpcc_diag *d)
{
    size_t len = strlen(text);
    char *t = malloc(len + 2);
    if (!t) {
        fprintf(stderr, "bpcc: out of memory\n");
        return BPCC_ERR_NOMEM;
    }
    memcpy(t, text, len);
    t[len] = '\n';
    enum bpcc_status s = bpcc_write_file_ex(path, t, len + 1, flags, d);
    free(t);
    return s;
}

int cli_threads(const char *verb, const char *value, int *out)
{
    return cli_parse_threads(value, out) ? 0 : cli_usage_error(verb, "--threads wants 1..256, not '%s'", value);
}

int cli_quantized_io_option(const char *verb, int argc, char **argv, int *i, struct cli_quantized_io *q)
{
    if (!strcmp(argv[*i], "--output-quantized")) {
        q->output = true;
        return 0;
    }
    if (strcmp(argv[*i], "--input-quantized")) return -1;
    if (*i + 1 >= argc) return cli_usage_error(verb, "--input-quantized needs a value");
    const char *v = argv[++*i];
    q->n_inputs = 0;
    for (const char *s = v;; ) { /* "0,2,3" */
        char *end = NULL;
        unsigned long x = *s >= '0' && *s <= '9' ? strtoul(s, &end, 10) : ULONG_MAX;
        if (x > 1000000 || q->n_inputs == sizeof q->inputs / sizeof q->inputs[0] || (*end && *end != ','))
            return cli_usage_error(verb, "--input-quantized wants input positions like 0 or 0,2, not '%s'", v);
        q->inputs[q->n_inputs++] = (uint32_t)x;
        if (!*end) return 0;
        s = end + 1;
    }
}

void cli_print_diag(const struct bpcc_diag *d)
{
    char buf[2 * BPCC_DIAG_MSG_MAX + 2 * BPCC_DIAG_FILE_MAX + 64];
    for (uint32_t i = 0; i < d->n_entries; i++) {
        bpcc_diag_format(&d->entries[i], buf, sizeof buf);
        fputs(buf, stderr);
    }
    uint32_t total = d->n_errors + d->n_warnings;
    if (total > d->n_entries)
        fprintf(stderr, "bpcc: %u more message(s) not shown\n", total - d->n_entries);
}

int cli_exit_code(enum bpcc_status s)
{
    switch (s) {
    case BPCC_OK: return EXIT_OK;
    case BPCC_ERR_NOMEM:
    case BPCC_ERR_INTERNAL: return EXIT_INTERNAL;
    case BPCC_ERR_INVALID: return EXIT_INTERNAL; /* the CLI misused the library */
    default: return EXIT_INPUT;
    }
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "bpcc%s%s: ", verb ? " " : "", verb ? verb : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'bpcc %s--help' for more information.\n", verb ? "" : "");
    return EXIT_USAGE;
}

struct verb {
    const char *name;
    int (*fn)(int argc, char **argv);
};

static const struct verb verbs[] = {
    {"show", cmd_show},
    {"fmt", cmd_fmt},
    {"config", cmd_config},
    {"fuse", cmd_fuse},
    {"qconfig", cmd_qconfig},
    {"prepare", cmd_prepare},
    {"explain", cmd_explain},
    {"calibrate", cmd_calibrate},
    {"run", cmd_run},
    {"convert", cmd_convert},
    {"quantize", cmd_quantize},
    {"compare", cmd_compare},
};

int main(int argc, char **argv)
{
    cli_process_setup(argc, argv);
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    const char *v = argv[1];
    if (strcmp(v, "--help") == 0 || strcmp(v, "-h") == 0 || strcmp(v, "help") == 0) {
        fputs(usage_text, stdout);
        return EXIT_OK;
    }
    if (strcmp(v, "--version") == 0) {
        printf("bpcc %s\n", bpcc_version());
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strcmp(v, verbs[i].name) == 0) return verbs[i].fn(argc - 1, argv + 1);
    if (v[0] == '-') return cli_usage_error(NULL, "unknown option '%s'", v);
    return cli_usage_error(NULL, "unknown verb '%s'", v);
}
