/*
** report.c — the numeric suite's reports: an aligned table worst-first, JSON in graph order with
** ranks, and a self-contained HTML page (table + SVG bar chart of SQNR along the graph).
*/
#include "../io/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double key_of(const struct bpcc_compare_report *r, const struct bpcc_compare_row *w)
{
    double k = r->kind == BPCC_COMPARE_SHADOW ? w->shadow_sqnr_db : w->sqnr_db;
    return isnan(k) ? INFINITY : k;
}

static _Thread_local const struct bpcc_compare_report *sort_report;

static int worse_first(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    double x = key_of(sort_report, &sort_report->rows[i]), y = key_of(sort_report, &sort_report->rows[j]);
    if (x != y) return x < y ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* row indices, worst first (ties in graph order); rank_out[i] = rank of row i (1 = worst) */
static uint32_t *worst_first(const struct bpcc_compare_report *r, uint32_t **rank_out)
{
    uint32_t *o = bpcc_malloc((r->n_rows ? r->n_rows : 1) * sizeof *o);
    uint32_t *rank = rank_out ? bpcc_malloc((r->n_rows ? r->n_rows : 1) * sizeof *rank) : NULL;
    if (!o || (rank_out && !rank)) {
        bpcc_xfree(o);
        bpcc_xfree(rank);
        return NULL;
    }
    for (uint32_t i = 0; i < r->n_rows; i++) o[i] = i;
    sort_report = r;
    qsort(o, r->n_rows, sizeof *o, worse_first);
    sort_report = NULL;
    if (rank_out) {
        for (uint32_t i = 0; i < r->n_rows; i++) rank[o[i]] = i + 1;
        *rank_out = rank;
    }
    return o;
}

static const char *kind_name(enum bpcc_compare_kind k)
{
    return k == BPCC_COMPARE_WEIGHTS ? "weights" : k == BPCC_COMPARE_OUTPUTS ? "outputs" : "shadow";
}

static void num(struct bpcc_buf *b, int width, double v, const char *fmt)
{
    char t[64];
    if (isinf(v)) snprintf(t, sizeof t, "%s", v > 0 ? "inf" : "-inf");
    else if (isnan(v)) snprintf(t, sizeof t, "-");
    else snprintf(t, sizeof t, fmt, v);
    bpcc_buf_printf(b, "  %*s", width, t);
}

static int max_i(int a, int b) { return a > b ? a : b; }

enum bpcc_status bpcc_compare_report_text(const struct bpcc_compare_report *r, char **out, struct bpcc_diag *d)
{
    *out = NULL;
    uint32_t *o = worst_first(r, NULL);
    if (!o) return bpcc_diag_nomem(d);
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bool w = r->kind == BPCC_COMPARE_WEIGHTS, sh = r->kind == BPCC_COMPARE_SHADOW;
    if (w)
        bpcc_buf_printf(&b, "compare weights: %u quantized weights (SQNR dB = 20 log10(|w| / |w - dequant(quant(w))|))\n",
                        r->n_rows);
    else
        bpcc_buf_printf(&b, "compare %s: %u nodes on %u batch%s (SQNR dB = 20 log10(|float| / |float - quantized|)%s)\n",
                        kind_name(r->kind), r->n_rows, r->n_batches, r->n_batches == 1 ? "" : "es",
                        sh ? "; shadow: the op fed the float model's inputs" : "");
    if (w && r->n_unmatched)
        bpcc_buf_printf(&b, "(%u reference module%s without a float module of the same name and weight shape)\n",
                        r->n_unmatched, r->n_unmatched == 1 ? "" : "s");
    else if (r->n_unmatched)
        bpcc_buf_printf(&b, "(%u node%s of the same name in both models compute%s another op in each, not compared: "
                        "fuse FLOAT for QUANT's backend, -b BACKEND)\n", r->n_unmatched, r->n_unmatched == 1 ? "" : "s",
                        r->n_unmatched == 1 ? "s" : "");
    int wn = 4, ww = 4;
    for (uint32_t i = 0; i < r->n_rows; i++) {
        wn = max_i(wn, (int)strlen(r->rows[i].name));
        ww = max_i(ww, (int)strlen(r->rows[i].what));
    }
    bpcc_buf_printf(&b, "%4s  %-*s  %-*s", "rank", wn, w ? "module" : "node", ww, w ? "type" : "op");
    if (sh) bpcc_buf_printf(&b, "  %11s", "shadow_sqnr");
    bpcc_buf_printf(&b, "  %8s  %9s  %9s  %10s", "sqnr", "l2_error", "cosine", "max_abs");
    if (w) bpcc_buf_printf(&b, "  %15s", "min_ch_sqnr(ch)");
    bpcc_buf_printf(&b, "  %10s\n", "elements");
    for (uint32_t k = 0; k < r->n_rows; k++) {
        const struct bpcc_compare_row *x = &r->rows[o[k]];
        bpcc_buf_printf(&b, "%4u  %-*s  %-*s", k + 1, wn, x->name, ww, x->what);
        if (sh) num(&b, 11, x->shadow_sqnr_db, "%.2f");
        num(&b, 8, x->sqnr_db, "%.2f");
        num(&b, 9, x->l2_error, "%.3g");
        num(&b, 9, x->cosine, "%.6f");
        num(&b, 10, x->max_abs_error, "%.3g");
        if (w) {
            char t[48];
            if (isinf(x->min_channel_sqnr_db)) snprintf(t, sizeof t, "inf");
            else snprintf(t, sizeof t, "%.2f (%u)", x->min_channel_sqnr_db, x->worst_channel);
            bpcc_buf_printf(&b, "  %15s", t);
        }
        bpcc_buf_printf(&b, "  %10llu\n", (unsigned long long)x->numel);
    }
    bpcc_xfree(o);
    char *text = bpcc_buf_take(&b, NULL);
    if (!text) return bpcc_diag_nomem(d);
    *out = text;
    return BPCC_OK;
}

/* a number, or "inf" / "-inf" / "nan" (JSON has no such numbers) */
static json_t *jnum(double v)
{
    if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
    if (isnan(v)) return json_string("nan");
    return json_real(v);
}

enum bpcc_status bpcc_compare_report_json(const struct bpcc_compare_report *r, int indent, char **out,
                                          struct bpcc_diag *d)
{
    *out = NULL;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    uint32_t *rank = NULL, *o = worst_first(r, &rank);
    if (!o) return bpcc_diag_nomem(d);
    json_t *root = json_object(), *rows = json_array();
    bool ok = root && rows && bpcc_json_put(root, "kind", json_string(kind_name(r->kind))) &&
              bpcc_json_put(root, "batches", json_integer(r->n_batches));
    if (ok) ok = bpcc_json_put(root, "unmatched", json_integer(r->n_unmatched));
    for (uint32_t i = 0; ok && i < r->n_rows; i++) {
        const struct bpcc_compare_row *x = &r->rows[i];
        json_t *e = json_object();
        ok = e && !json_array_append_new(rows, e) && bpcc_json_put(e, "rank", json_integer(rank[i])) &&
             bpcc_json_put(e, "name", json_string(x->name)) && bpcc_json_put(e, "what", json_string(x->what)) &&
             bpcc_json_put(e, "elements", json_integer((json_int_t)x->numel)) &&
             bpcc_json_put(e, "sqnr_db", jnum(x->sqnr_db)) && bpcc_json_put(e, "l2_error", jnum(x->l2_error)) &&
             bpcc_json_put(e, "cosine", jnum(x->cosine)) && bpcc_json_put(e, "max_abs_error", jnum(x->max_abs_error));
        if (ok && r->kind == BPCC_COMPARE_WEIGHTS)
            ok = bpcc_json_put(e, "float_module", json_string(x->float_name)) &&
                 bpcc_json_put(e, "channels", json_integer(x->n_channels)) &&
                 bpcc_json_put(e, "min_channel_sqnr_db", jnum(x->min_channel_sqnr_db)) &&
                 bpcc_json_put(e, "worst_channel", json_integer(x->worst_channel));
        if (ok && r->kind == BPCC_COMPARE_SHADOW)
            ok = bpcc_json_put(e, "shadow_sqnr_db", jnum(x->shadow_sqnr_db)) &&
                 bpcc_json_put(e, "shadow_l2_error", jnum(x->shadow_l2_error)) &&
                 bpcc_json_put(e, "shadow_cosine", jnum(x->shadow_cosine)) &&
                 bpcc_json_put(e, "shadow_max_abs_error", jnum(x->shadow_max_abs_error));
    }
    if (ok) {
        ok = bpcc_json_put(root, "rows", rows);
        rows = NULL;
    }
    json_decref(rows);
    bpcc_xfree(o);
    bpcc_xfree(rank);
    return bpcc_json_finish(root, ok, indent, failures, out, d);
}

static void html_text(struct bpcc_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') bpcc_buf_adds(b, "&lt;");
        else if (*s == '>') bpcc_buf_adds(b, "&gt;");
        else if (*s == '&') bpcc_buf_adds(b, "&amp;");
        else if (*s == '"') bpcc_buf_adds(b, "&quot;");
        else bpcc_buf_addc(b, *s);
    }
}

static void html_num(struct bpcc_buf *b, double v, const char *fmt)
{
    if (isinf(v)) bpcc_buf_adds(b, v > 0 ? "inf" : "-inf");
    else if (isnan(v)) bpcc_buf_adds(b, "-");
    else bpcc_buf_printf(b, fmt, v);
}

/* the number of rows highlighted as worst */
#define HTML_WORST 5

enum bpcc_status bpcc_compare_report_html(const struct bpcc_compare_report *r, const char *title, char **out,
                                          struct bpcc_diag *d)
{
    *out = NULL;
    uint32_t *rank = NULL, *o = worst_first(r, &rank);
    if (!o) return bpcc_diag_nomem(d);
    bool w = r->kind == BPCC_COMPARE_WEIGHTS, sh = r->kind == BPCC_COMPARE_SHADOW;
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_buf_adds(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>bpcc compare ");
    bpcc_buf_adds(&b, kind_name(r->kind));
    bpcc_buf_adds(&b, "</title>\n<style>\n"
                      "body{font:14px system-ui,sans-serif;margin:2em;color:#222}\n"
                      "table{border-collapse:collapse;margin-top:1em}td,th{padding:2px 10px;text-align:right}\n"
                      "td.n,th.n{text-align:left;font-family:monospace}tr.worst td{background:#fdd}\n"
                      "rect.bar{fill:#4a7ab5}rect.bar.worst{fill:#d33}rect.bar.shadow{fill:#9bc}\n"
                      "svg text{font:11px sans-serif}\n</style></head><body>\n<h1>bpcc compare ");
    bpcc_buf_adds(&b, kind_name(r->kind));
    bpcc_buf_adds(&b, "</h1>\n<p id=\"title\">");
    html_text(&b, title ? title : "");
    bpcc_buf_printf(&b, "</p>\n<p id=\"summary\">%u %s", r->n_rows, w ? "reference modules" : "nodes");
    if (!w) bpcc_buf_printf(&b, " on %u batch%s", r->n_batches, r->n_batches == 1 ? "" : "es");
    bpcc_buf_adds(&b, ". SQNR in dB: 20 log10(|float| / |float &minus; quantized|); higher is better.");
    if (sh) bpcc_buf_adds(&b, " Shadow: each op fed the float model's inputs (light bars), next to the propagated error.");
    bpcc_buf_printf(&b, " The %d worst are in red.</p>\n", HTML_WORST);
    /* the chart: one bar per row in graph order, height = SQNR (finite ones; 0 dB at the bottom) */
    double top = 1;
    for (uint32_t i = 0; i < r->n_rows; i++) {
        double k = sh ? r->rows[i].shadow_sqnr_db : r->rows[i].sqnr_db, p = r->rows[i].sqnr_db;
        if (isfinite(k) && k > top) top = k;
        if (isfinite(p) && p > top) top = p;
    }
    const int H = 240, bw = r->n_rows > 400 ? 2 : r->n_rows > 100 ? 4 : r->n_rows > 40 ? 10 : 24;
    int W = (int)r->n_rows * bw + 60;
    bpcc_buf_printf(&b, "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\">\n", W,
                    H + 30);
    bpcc_buf_printf(&b, "<text x=\"0\" y=\"12\">%.0f dB</text><text x=\"0\" y=\"%d\">0 dB</text>\n", top, H);
    for (uint32_t i = 0; i < r->n_rows; i++) {
        const struct bpcc_compare_row *x = &r->rows[i];
        double v = sh ? x->shadow_sqnr_db : x->sqnr_db;
        double hv = isfinite(v) ? (v < 0 ? 0 : v) : isinf(v) && v > 0 ? top : 0;
        int h = (int)(hv / top * (H - 20));
        bool worst = rank[i] <= HTML_WORST;
        if (sh) {
            double pv = x->sqnr_db, ph = isfinite(pv) ? (pv < 0 ? 0 : pv) : isinf(pv) && pv > 0 ? top : 0;
            int hp = (int)(ph / top * (H - 20));
            bpcc_buf_printf(&b, "<rect class=\"bar shadow\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>", 50 + (int)i * bw,
                            H - hp, bw > 2 ? bw - 1 : bw, hp);
        }
        bpcc_buf_printf(&b, "<rect class=\"bar%s\" data-name=\"", worst ? " worst" : "");
        html_text(&b, x->name);
        bpcc_buf_printf(&b, "\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>", 50 + (int)i * bw + (sh ? bw / 3 : 0),
                        H - h, bw > 2 ? (sh ? bw / 2 : bw - 1) : bw, h);
        html_text(&b, x->name);
        bpcc_buf_adds(&b, ": ");
        html_num(&b, v, "%.2f dB");
        bpcc_buf_adds(&b, "</title></rect>\n");
    }
    bpcc_buf_adds(&b, "</svg>\n<table id=\"rows\"><thead><tr><th>rank</th><th class=\"n\">");
    bpcc_buf_adds(&b, w ? "module</th><th class=\"n\">type" : "node</th><th class=\"n\">op");
    bpcc_buf_adds(&b, "</th>");
    if (sh) bpcc_buf_adds(&b, "<th>shadow SQNR</th>");
    bpcc_buf_adds(&b, "<th>SQNR</th><th>L2 error</th><th>cosine</th><th>max abs</th>");
    if (w) bpcc_buf_adds(&b, "<th>min channel SQNR (channel)</th>");
    bpcc_buf_adds(&b, "<th>elements</th></tr></thead><tbody>\n");
    for (uint32_t k = 0; k < r->n_rows; k++) {
        const struct bpcc_compare_row *x = &r->rows[o[k]];
        bpcc_buf_printf(&b, "<tr%s><td>%u</td><td class=\"n\">", k < HTML_WORST ? " class=\"worst\"" : "", k + 1);
        html_text(&b, x->name);
        bpcc_buf_adds(&b, "</td><td class=\"n\">");
        html_text(&b, x->what);
        bpcc_buf_adds(&b, "</td>");
        if (sh) {
            bpcc_buf_adds(&b, "<td>");
            html_num(&b, x->shadow_sqnr_db, "%.2f");
            bpcc_buf_adds(&b, "</td>");
        }
        bpcc_buf_adds(&b, "<td>");
        html_num(&b, x->sqnr_db, "%.2f");
        bpcc_buf_adds(&b, "</td><td>");
        html_num(&b, x->l2_error, "%.3g");
        bpcc_buf_adds(&b, "</td><td>");
        html_num(&b, x->cosine, "%.6f");
        bpcc_buf_adds(&b, "</td><td>");
        html_num(&b, x->max_abs_error, "%.3g");
        bpcc_buf_adds(&b, "</td>");
        if (w) {
            bpcc_buf_adds(&b, "<td>");
            html_num(&b, x->min_channel_sqnr_db, "%.2f");
            bpcc_buf_printf(&b, " (%u)</td>", x->worst_channel);
        }
        bpcc_buf_printf(&b, "<td>%llu</td></tr>\n", (unsigned long long)x->numel);
    }
    bpcc_buf_adds(&b, "</tbody></table>\n</body></html>\n");
    bpcc_xfree(o);
    bpcc_xfree(rank);
    char *text = bpcc_buf_take(&b, NULL);
    if (!text) return bpcc_diag_nomem(d);
    *out = text;
    return BPCC_OK;
}
