/*
** cmd_compare.c — `bpcc compare weights|outputs|shadow FLOAT QUANT [--data FILE|DIR...]`: the
** numeric suite (docs/NUMERIC.md).
*/
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char compare_help[] =
    "usage: bpcc compare weights FLOAT QUANT [-b BACKEND] [--json] [--html FILE]\n"
    "       bpcc compare outputs FLOAT QUANT --data FILE|DIR... [-b BACKEND] [--threads N] [--json] [--html FILE]\n"
    "       bpcc compare shadow  FLOAT QUANT --data FILE|DIR... [-b BACKEND] [--threads N] [--json] [--html FILE]\n"
    "\n"
    "Where did the accuracy go? FLOAT is the float model (as given to bpcc quantize, or already\n"
    "fused), QUANT its reference quantized model (bpcc quantize / convert). FLOAT is first fused for\n"
    "BACKEND (default native: the same conv/bn/relu fusions as every built-in), so that batch norms\n"
    "are folded on both sides and the figures measure quantization, not folding (onednn fuses\n"
    "conv+add too: give -b onednn for its models; nodes whose op differs are counted, not compared).\n"
    "  weights  each reference module's weight, quantized and dequantized with its qparams, against\n"
    "           the float weight: SQNR, L2 error, cosine, max abs error, worst channel's SQNR\n"
    "  outputs  both models on the batches: each node's value (after its quantize/dequantize)\n"
    "           against the float model's node of the same name, accumulated over the batches\n"
    "  shadow   outputs, plus each op fed the float model's inputs: its own error, next to the\n"
    "           propagated one\n"
    "The table is sorted worst first; --json prints JSON instead (graph order, with ranks),\n"
    "--html FILE also writes a self-contained page with a bar chart of SQNR along the graph.\n";

int cmd_compare(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(compare_help, stdout);
        return EXIT_OK;
    }
    if (argc < 2) return cli_usage_error("compare", "missing weights, outputs or shadow");
    const char *mode = argv[1];
    bool weights = !strcmp(mode, "weights"), shadow = !strcmp(mode, "shadow");
    if (!weights && !shadow && strcmp(mode, "outputs"))
        return cli_usage_error("compare", "unknown comparison '%s' (weights, outputs or shadow)", mode);
    const char *files[2] = {NULL, NULL}, *backend = "native", *html = NULL;
    bool json = false, in_data = false;
    int threads = 1, nf = 0;
    struct cli_files data = {0};
    int rc = 0;
    for (int i = 2; i < argc && !rc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fputs(compare_help, stdout);
            cli_free_files(&data);
            return EXIT_OK;
        } else if (!strcmp(o, "--json")) {
            json = true;
            in_data = false;
        } else if (!weights && !strcmp(o, "--data")) {
            in_data = true;
        } else if (!strcmp(o, "-b") || !strcmp(o, "--html") || (!weights && !strcmp(o, "--threads"))) {
            in_data = false;
            if (i + 1 >= argc) {
                rc = cli_usage_error("compare", "%s needs a value", o);
                break;
            }
            const char *v = argv[++i];
            if (!strcmp(o, "-b")) backend = v;
            else if (!strcmp(o, "--html")) html = v;
            else rc = cli_threads("compare", v, &threads);
        } else if (o[0] == '-' && o[1]) {
            rc = cli_usage_error("compare", "unknown option '%s'", o);
        } else if (in_data) {
            rc = cli_add_data(&data, o);
        } else if (nf < 2) {
            files[nf++] = o;
        } else {
            rc = cli_usage_error("compare", "more than two models given ('%s')", o);
        }
    }
    if (!rc && nf < 2) rc = cli_usage_error("compare", "needs FLOAT and QUANT models");
    if (!rc && !weights && !data.n) rc = cli_usage_error("compare", "missing --data FILE");
    if (rc) {
        cli_free_files(&data);
        return rc;
    }
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c = NULL;
    struct bpcc_graph *fg = NULL, *qg = NULL;
    struct bpcc_compare_report *r = NULL;
    char *text = NULL, *page = NULL;
    enum bpcc_status s = bpcc_config_load(backend, NULL, &c, &d);
    if (!s) s = bpcc_graph_load(files[0], &fg, &d);
    if (!s) bpcc_graph_set_rollback(fg, false); /* a failed fuse ends the command */
    if (!s) s = bpcc_graph_load(files[1], &qg, &d);
    if (!s) s = bpcc_fuse(fg, c, NULL, NULL, &d);
    if (!s) s = weights ? bpcc_compare_weights(fg, qg, &r, &d)
                        : bpcc_compare_outputs(fg, qg, (const char *const *)data.v, data.n, threads, shadow, &r, &d);
    bool nothing = !s && r->n_rows == 0;
    if (!s && !nothing) s = json ? bpcc_compare_report_json(r, 2, &text, &d) : bpcc_compare_report_text(r, &text, &d);
    if (!s && !nothing && html) {
        char title[1024];
        snprintf(title, sizeof title, "%s vs %s", files[0], files[1]);
        s = bpcc_compare_report_html(r, title, &page, &d);
        if (!s) s = bpcc_write_file(html, page, strlen(page), &d);
    }
    if (!s && text) {
        fputs(text, stdout);
        if (json) putchar('\n');
    }
    bpcc_free(text);
    bpcc_free(page);
    bpcc_compare_report_free(r);
    bpcc_graph_free(fg);
    bpcc_graph_free(qg);
    bpcc_config_free(c);
    cli_free_files(&data);
    cli_print_diag(&d);
    if (s) return cli_exit_code(s);
    if (nothing) {
        fprintf(stderr, "bpcc compare: error: %s and %s have no %s in common\n", files[0], files[1],
                weights ? "reference module with a float module of the same name" : "node (by name)");
        return EXIT_INPUT;
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "bpcc: error writing standard output\n");
        return EXIT_INPUT;
    }
    return EXIT_OK;
}
