/*
** cli.h — the bpcc command-line tool: shared helpers for the verbs. The CLI alone prints
** diagnostics and maps statuses to exit codes (0 ok, 1 bad input, 2 usage, 3 internal).
*/
#ifndef BPCC_CLI_H
#define BPCC_CLI_H

#include "bpcc.h"

#include <stdbool.h>
#include <stdio.h>

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_INTERNAL = 3 };

/* Print every kept message of d to stderr (and a count of dropped ones). */
void cli_print_diag(const struct bpcc_diag *d);
/* Exit code for a failed status. */
int cli_exit_code(enum bpcc_status s);
/* "bpcc VERB: msg" + a hint to --help, exit code 2. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --threads VALUE: 1..256 into *out, else a usage error (its exit code returned, 0 on success). */
int cli_threads(const char *verb, const char *value, int *out);
/* the same rule without a message (process.c, which sets OpenBLAS up before the verb parses) */
bool cli_parse_threads(const char *value, int *out);

/* Batch files named on the command line: a file, or a directory's *.safetensors in name order. */
struct cli_files {
    char **v;
    uint32_t n, cap;
};
/* EXIT_OK, EXIT_INPUT (message printed) or EXIT_INTERNAL */
int cli_add_data(struct cli_files *f, const char *path);
void cli_free_files(struct cli_files *f);
/* Write text plus a trailing newline to path atomically (the JSON writers' convention); flags:
** BPCC_WRITE_SYNC or 0. */
enum bpcc_status cli_write_text(const char *path, const char *text, unsigned flags, struct bpcc_diag *d);
/* --sync, which the verbs that write a model take: their outputs reach the disk before they are
** renamed over their targets (BPCC_WRITE_SYNC). true (and *flags set) when o is it. */
bool cli_sync_option(const char *o, unsigned *flags);

/* PrepareCustomConfig's quantized graph inputs and output, as prepare, explain and quantize take
** them: --input-quantized I,J... (placeholder positions) and --output-quantized */
struct cli_quantized_io {
    uint32_t inputs[64];
    uint32_t n_inputs;
    bool output;
};
/* argv[*i] one of those options (its value taken, *i advanced past it): 0; not one: -1; a bad value:
** the usage error's exit code */
int cli_quantized_io_option(const char *verb, int argc, char **argv, int *i, struct cli_quantized_io *q);

/* What the process of a verb that loads a model needs before it works (process.c): a pure
** function of the command line, the environment and whether the CPU has the AVX-512 subsets of
** OpenBLAS's SkylakeX kernels. false (and nothing to do) for other verbs. */
struct cli_process_plan {
    const char *threads; /* set OPENBLAS_NUM_THREADS to this (--threads, else "1"); NULL: the user's stands */
    bool coretype;       /* set OPENBLAS_CORETYPE=SKYLAKEX */
    bool heap;           /* advise the heap onto huge pages as it grows */
    bool preload;        /* the verb runs a model (it has batches): start loading the BLAS at once */
};
bool cli_process_plan(int argc, char *const *argv, char *const *envp, bool avx512, struct cli_process_plan *out);
/* main's first call: malloc's thresholds, then the plan applied to this process */
void cli_process_setup(int argc, char **argv);
/* The process's peak resident memory in KiB (VmHWM of /proc/self/status: this process image's, not
** what the parent had before exec, which getrusage's maxrss keeps); -1 where there is none. */
long cli_peak_rss_kib(void);

int cmd_show(int argc, char **argv);
int cmd_fmt(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_fuse(int argc, char **argv);
int cmd_qconfig(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_compare(int argc, char **argv);

#endif
