/*
** cmd_show.c — `bpcc show MODEL [--json]` and `bpcc fmt MODEL -o OUT`.
*/
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char show_help[] =
    "usage: bpcc show MODEL [--json]\n"
    "\n"
    "Print a model's nodes (name, op, target, output type, users), modules (type, tensors)\n"
    "and totals. --json prints the same as one JSON document (docs/SHOW.md).\n";

static const char fmt_help[] =
    "usage: bpcc fmt MODEL -o OUT [--sync]\n"
    "\n"
    "Load and verify MODEL, then write it in canonical form to OUT (and its weights to\n"
    "OUT's name with the extension .safetensors). Outputs are written atomically; --sync also\n"
    "waits for the disk before renaming them over their targets (see bpcc --help).\n";

static void meta_text(const struct bpcc_value *m, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    if (m->kind == BPCC_VAL_TTYPE) {
        used += (size_t)snprintf(buf, n, "%s[", bpcc_dtype_short_name(m->u.ttype.dtype));
        for (uint32_t i = 0; i < m->n && used < n; i++)
            used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, i ? ", " : "",
                                     m->u.ttype.dims[i]);
        if (used < n) snprintf(buf + used, n - used, "]");
    } else if (m->kind == BPCC_VAL_TUPLE || m->kind == BPCC_VAL_LIST) {
        used += (size_t)snprintf(buf, n, "(");
        for (uint32_t i = 0; i < m->n && used < n; i++) {
            char sub[256];
            meta_text(bpcc_value_item(m, i), sub, sizeof sub);
            used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", sub[0] ? sub : "-");
        }
        if (used < n) snprintf(buf + used, n - used, ")");
    }
}

static int max_int(int a, int b) { return a > b ? a : b; }

/* the qparams column: what the node quantizes with, and the weight qparams of a reference module */
static void qparams_text(const struct bpcc_graph *g, const struct bpcc_node *n, char *buf, size_t size)
{
    struct bpcc_qparams q;
    const struct bpcc_module *wm = bpcc_node_weight_module(g, n);
    buf[0] = 0;
    if (bpcc_node_qparams(g, n, &q)) bpcc_qparams_format(&q, buf, size);
    else if (wm && bpcc_module_weight_qparams(wm, &q)) {
        char w[400];
        bpcc_qparams_format(&q, w, sizeof w);
        snprintf(buf, size, "weight %s", w);
    } else if (bpcc_node_kind(n) == BPCC_NODE_CALL_MODULE && (wm = bpcc_graph_find_module(g, bpcc_node_target(n)))) {
        /* a reference LSTM or cell: each weight's own, "weight_ih_l0 qint8 scale=...; weight_hh_l0 ..." */
        size_t used = 0;
        const char *name;
        for (uint32_t i = 0; used < size && bpcc_module_next_weight_qparams(wm, &i, &name, &q);) {
            char w[400];
            bpcc_qparams_format(&q, w, sizeof w);
            used += (size_t)snprintf(buf + used, size - used, "%s%s %s", used ? "; " : "", name, w);
        }
    }
}

/* The users column, "a,b,c" or "-": its width, and printing it. */
static int users_len(const struct bpcc_node *n)
{
    uint32_t nu = bpcc_node_n_users(n);
    size_t len = nu ? nu - 1 : 1;
    for (uint32_t i = 0; i < nu; i++) len += strlen(bpcc_node_name(bpcc_node_user(n, i)));
    return len > 1000000 ? 1000000 : (int)len;
}

static void print_users(const struct bpcc_node *n, int width)
{
    uint32_t nu = bpcc_node_n_users(n);
    if (!nu) fputs("-", stdout);
    for (uint32_t i = 0; i < nu; i++) printf("%s%s", i ? "," : "", bpcc_node_name(bpcc_node_user(n, i)));
    printf("%*s", width > users_len(n) ? width - users_len(n) : 0, "");
}

static void print_text(const char *path, struct bpcc_graph *g)
{
    uint32_t n_tensors = 0;
    uint64_t n_params = 0, bytes = 0;
    for (uint32_t i = 0; i < bpcc_graph_n_modules(g); i++) {
        struct bpcc_module *m = bpcc_graph_module(g, i);
        for (uint32_t k = 0; k < bpcc_module_n_tensors(m); k++) {
            enum bpcc_tensor_role role;
            struct bpcc_tensor *t = bpcc_module_tensor_at(m, k, NULL, &role);
            n_tensors++;
            bytes += bpcc_tensor_nbytes(t);
            if (role == BPCC_TENSOR_PARAM) n_params += bpcc_tensor_numel(t);
        }
    }
    printf("model %s: %u nodes, %u modules, %u tensors, %" PRIu64 " parameters, %" PRIu64
           " bytes\n\n", path, bpcc_graph_n_nodes(g), bpcc_graph_n_modules(g), n_tensors,
           n_params, bytes);

    int wn = 4, wk = 2, wt = 6, wm = 4, wu = 5, ws = 0;
    bool scoped = false, quantized = false;
    for (struct bpcc_node *n = bpcc_graph_first(g); n; n = bpcc_node_next(n)) {
        char meta[512], qp[512];
        meta_text(bpcc_node_meta(n), meta, sizeof meta);
        qparams_text(g, n, qp, sizeof qp);
        quantized = quantized || qp[0];
        wn = max_int(wn, (int)strlen(bpcc_node_name(n)));
        wk = max_int(wk, (int)strlen(bpcc_node_kind_name(bpcc_node_kind(n))));
        wt = max_int(wt, (int)strlen(bpcc_node_target(n)));
        wm = max_int(wm, (int)strlen(meta));
        wu = max_int(wu, users_len(n));
        const char *stype, *spath = bpcc_node_scope(n, &stype);
        if (spath) ws = max_int(ws, (int)(strlen(spath) + strlen(stype) + 3));
        scoped = scoped || spath;
    }
    ws = max_int(ws, 5);
    /* the scope column only for models traced with submodule scopes, qparams only for
    ** prepared-and-calibrated or converted models */
    bool pad_users = scoped || quantized;
    printf("%-*s  %-*s  %-*s  %-*s  %-*s", wn, "node", wk, "op", wt, "target", wm, "type", pad_users ? wu : 0, "users");
    if (scoped) printf("  %-*s", quantized ? ws : 0, "scope");
    printf("%s\n", quantized ? "  qparams" : "");
    for (struct bpcc_node *n = bpcc_graph_first(g); n; n = bpcc_node_next(n)) {
        char meta[512];
        meta_text(bpcc_node_meta(n), meta, sizeof meta);
        printf("%-*s  %-*s  %-*s  %-*s  ", wn, bpcc_node_name(n), wk,
               bpcc_node_kind_name(bpcc_node_kind(n)), wt, bpcc_node_target(n), wm,
               meta[0] ? meta : "-");
        print_users(n, pad_users ? wu : 0);
        const char *stype, *spath = bpcc_node_scope(n, &stype);
        if (scoped) {
            char sc[1024];
            if (spath) snprintf(sc, sizeof sc, "%s (%s)", spath, stype);
            else snprintf(sc, sizeof sc, "-");
            printf("  %-*s", quantized ? ws : 0, sc);
        }
        if (quantized) {
            char qp[512];
            qparams_text(g, n, qp, sizeof qp);
            printf("  %s", qp[0] ? qp : "-");
        }
        putchar('\n');
    }
    if (!bpcc_graph_n_modules(g)) return;
    int wmn = 6, wty = 4;
    for (uint32_t i = 0; i < bpcc_graph_n_modules(g); i++) {
        struct bpcc_module *m = bpcc_graph_module(g, i);
        wmn = max_int(wmn, (int)strlen(bpcc_module_name(m)) + 2);
        wty = max_int(wty, (int)strlen(bpcc_module_type(m)));
    }
    printf("\n%-*s  %-*s  %s\n", wmn, "module", wty, "type", "tensors");
    for (uint32_t i = 0; i < bpcc_graph_n_modules(g); i++) {
        struct bpcc_module *m = bpcc_graph_module(g, i);
        const char *name = bpcc_module_name(m);
        char shown[512];
        snprintf(shown, sizeof shown, "%s", name[0] ? name : "(root)");
        printf("%-*s  %-*s  ", wmn, shown, wty, bpcc_module_type(m));
        uint32_t nt = bpcc_module_n_tensors(m);
        if (!nt) fputs("-", stdout);
        for (uint32_t k = 0; k < nt; k++) {
            const char *tn;
            enum bpcc_tensor_role role;
            struct bpcc_tensor *t = bpcc_module_tensor_at(m, k, &tn, &role);
            struct bpcc_value tt = {.kind = BPCC_VAL_TTYPE, .n = bpcc_tensor_ndim(t)};
            tt.u.ttype.dtype = bpcc_tensor_dtype(t);
            tt.u.ttype.dims = bpcc_tensor_dims(t);
            char ty[256];
            meta_text(&tt, ty, sizeof ty);
            printf("%s%s %s", k ? ", " : "", tn, ty);
        }
        putchar('\n');
    }
}

int cmd_show(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(show_help, stdout);
            return EXIT_OK;
        } else if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("show", "unknown option '%s'", argv[i]);
        else if (path) return cli_usage_error("show", "more than one MODEL given ('%s')", argv[i]);
        else path = argv[i];
    }
    if (!path) return cli_usage_error("show", "missing MODEL");
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_load(path, &g, &d);
    if (s) {
        cli_print_diag(&d);
        return cli_exit_code(s);
    }
    if (json) {
        char *text;
        s = bpcc_graph_to_json(g, 2, &text, &d);
        if (s) {
            cli_print_diag(&d);
            bpcc_graph_free(g);
            return cli_exit_code(s);
        }
        puts(text);
        bpcc_free(text);
    } else {
        print_text(path, g);
    }
    bpcc_graph_free(g);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "bpcc: error writing standard output\n");
        return EXIT_INPUT;
    }
    return EXIT_OK;
}

int cmd_fmt(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    unsigned write_flags = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0) {
            if (++i >= argc) return cli_usage_error("fmt", "-o needs a file name");
            out = argv[i];
        } else if (cli_sync_option(argv[i], &write_flags)) {
            continue;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(fmt_help, stdout);
            return EXIT_OK;
        } else if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("fmt", "unknown option '%s'", argv[i]);
        else if (path) return cli_usage_error("fmt", "more than one MODEL given ('%s')", argv[i]);
        else path = argv[i];
    }
    if (!path) return cli_usage_error("fmt", "missing MODEL");
    if (!out) return cli_usage_error("fmt", "missing -o OUT");
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_load(path, &g, &d);
    if (!s) {
        s = bpcc_graph_save_ex(g, out, write_flags, &d);
        bpcc_graph_free(g);
    }
    if (s) {
        cli_print_diag(&d);
        return cli_exit_code(s);
    }
    return EXIT_OK;
}
