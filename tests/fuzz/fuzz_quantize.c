/* libFuzzer target: the whole quantize path on any graph that parses, with a fixed config (the
** built-in fbgemm backend and mapping, or onednn, or a dynamic mapping, with or without a quantized
** first input and output, by bits of the last byte): small declared tensors get data, then fuse -> prepare ->
** one calibration run on inputs of the traced shapes -> store the qparams -> convert; the result
** must verify and print, run through the interpreter, and go through the numeric suite against
** the fused float graph, and the same flow with rollback off must make the same model. Bad graphs
** may be refused at any step, never crash or leak; a convert that refuses one leaves it as it was
** (the same text). A model that is prepared already (prepare refuses it: observers, or a QAT
** model's fake quantizes) goes to convert as it is, as `bpcc convert` takes one. */
#include "fuzz_util.h"

#include <stdlib.h>

/* the same flow as the bpcc tool runs it, with rollback off (the memory of erased nodes then
** becomes later passes' nodes) and the qparams' get_attr nodes left implicit: it must end in `want`,
** the model made with rollback on and the nodes made, verify, and run */
static bool same_without_rollback(const unsigned char *data, size_t size, const struct bpcc_config *c,
                                  const struct bpcc_qconfig_mapping *q, const struct bpcc_prepare_options *po,
                                  const char *want)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    if (bpcc_graph_parse((const char *)data, size, "fuzz.bpcc", &g, &d) != BPCC_OK) return false;
    bpcc_graph_set_rollback(g, false);
    bpcc_graph_set_implicit_qparams(g, true);
    fuzz_bind_tensors(g);
    struct bpcc_exec *e = NULL;
    char *text = NULL;
    bool same = !bpcc_fuse(g, c, NULL, NULL, &d) && !bpcc_prepare(g, c, q, po, NULL, &d) &&
                !fuzz_run_twice(g, &e, &d) && !bpcc_calibrate_store(g, e, &d) &&
                !bpcc_convert(g, c, q, NULL, NULL, &d) && !bpcc_graph_print(g, "w.safetensors", &text, NULL, &d) &&
                !strcmp(text, want);
    if (same) {
        struct bpcc_diag dv;
        bpcc_diag_init(&dv);
        if (bpcc_graph_verify(g, &dv) != BPCC_OK) abort();
        bpcc_exec_free(e);
        e = NULL;
        fuzz_run_twice(g, NULL, &d);
    }
    bpcc_free(text);
    bpcc_exec_free(e);
    bpcc_graph_free(g);
    return same;
}

/* A model prepare refuses because it is prepared already (observers, or a QAT model's fake
** quantizes and QAT modules, with whatever statistics the fuzz bound): convert takes it as it is.
** A refusal leaves it as it was; a converted model verifies, prints what parses, and runs. */
static void convert_as_is(const unsigned char *data, size_t size, const struct bpcc_config *c,
                          const struct bpcc_qconfig_mapping *q)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    if (bpcc_graph_parse((const char *)data, size, "fuzz.bpcc", &g, &d) != BPCC_OK) return;
    fuzz_bind_tensors(g);
    char *before = NULL, *after = NULL;
    if (bpcc_graph_print(g, "w.safetensors", &before, NULL, &d) == BPCC_OK) {
        if (bpcc_convert(g, c, q, NULL, NULL, &d)) {
            if (bpcc_graph_print(g, "w.safetensors", &after, NULL, &d) == BPCC_OK && strcmp(before, after)) abort();
        } else {
            struct bpcc_diag dv;
            bpcc_diag_init(&dv);
            if (bpcc_graph_verify(g, &dv) != BPCC_OK) abort();
            if (bpcc_graph_print(g, "w.safetensors", &after, NULL, &d) == BPCC_OK) {
                struct bpcc_graph *back;
                if (bpcc_graph_parse(after, strlen(after), "q.bpcc", &back, &dv) != BPCC_OK) abort();
                bpcc_graph_free(back);
            }
            fuzz_run_twice(g, NULL, &d);
        }
    }
    bpcc_free(before);
    bpcc_free(after);
    bpcc_graph_free(g);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static struct bpcc_config *configs[2];
    static struct bpcc_qconfig_mapping *mappings[2];
    /* dynamic quantization (linears, LSTMs and cells: quantize_per_tensor_dynamic, reference
    ** recurrent modules with qparams per weight) and weight-only embeddings (float qparams) */
    static const char dynamic[] =
        "name: dynamic\n"
        "global: {activation: {observer: PlaceholderObserver, dtype: quint8, compute_dtype: quint8}, "
        "weight: {observer: PerChannelMinMaxObserver, dtype: qint8, qscheme: per_channel_symmetric}}\n"
        "object_type:\n"
        "  - {type: torch.nn.Embedding, qconfig: {activation: {observer: PlaceholderObserver}, weight: {observer: "
        "PerChannelMinMaxObserver, dtype: quint8, qscheme: per_channel_affine_float_qparams}}}\n"
        "  - {type: torch.nn.EmbeddingBag, qconfig: {activation: {observer: PlaceholderObserver}, weight: {observer: "
        "PerChannelMinMaxObserver, dtype: quint8, qscheme: per_channel_affine_float_qparams}}}\n";
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    bpcc_exec_max_elements = (uint64_t)1 << 22;
    if (!configs[0] && (bpcc_config_load("fbgemm", NULL, &configs[0], &d) || bpcc_config_load("onednn", NULL, &configs[1], &d) ||
                        bpcc_qconfig_load("fbgemm", NULL, &mappings[0], &d) ||
                        bpcc_qconfig_load_text(dynamic, sizeof dynamic - 1, "dynamic.yaml", NULL, &mappings[1], &d)))
        abort();
    /* onednn (its conv+add fusions: extra inputs, ConvAdd modules run) when bit 2 of the last byte
    ** is set; the dynamic mapping when bit 3 is */
    const struct bpcc_config *c = configs[size && (data[size - 1] & 4u) ? 1 : 0];
    const struct bpcc_qconfig_mapping *q = mappings[size && (data[size - 1] & 8u) ? 1 : 0];
    /* bit 4: the first graph input and the output quantized (PrepareCustomConfig's indexes), which
    ** convert dequantizes and keeps quantized */
    static const uint32_t in0 = 0;
    const struct bpcc_prepare_options qio = {.input_quantized = &in0, .n_input_quantized = 1, .output_quantized = true};
    const struct bpcc_prepare_options *po = size && (data[size - 1] & 16u) ? &qio : NULL;
    struct bpcc_graph *g, *f = NULL;
    if (bpcc_graph_parse((const char *)data, size, "fuzz.bpcc", &g, &d) != BPCC_OK) return 0;
    fuzz_bind_tensors(g);
    struct bpcc_exec *e = NULL;
    char *text = NULL;
    if (bpcc_fuse(g, c, NULL, NULL, &d) || bpcc_graph_print(g, "w.safetensors", &text, NULL, &d) ||
        bpcc_graph_parse(text, strlen(text), "fused.bpcc", &f, &d))
        goto out;
    fuzz_bind_tensors(f);
    if (bpcc_prepare(g, c, q, po, NULL, &d)) {
        if (strstr(d.n_entries ? d.entries[0].msg : "", "is prepared")) convert_as_is(data, size, c, q);
        goto out;
    }
    if (fuzz_run_twice(g, &e, &d) || bpcc_calibrate_store(g, e, &d)) goto out;
    char *before = NULL, *after = NULL;
    if (bpcc_graph_print(g, "w.safetensors", &before, NULL, &d)) goto out;
    if (bpcc_convert(g, c, q, NULL, NULL, &d)) {
        if (bpcc_graph_print(g, "w.safetensors", &after, NULL, &d) == BPCC_OK && strcmp(before, after)) abort();
        bpcc_free(after);
        bpcc_free(before);
        goto out;
    }
    bpcc_free(before);
    struct bpcc_diag dv;
    bpcc_diag_init(&dv);
    if (bpcc_graph_verify(g, &dv) != BPCC_OK) abort(); /* convert must leave a valid graph */
    bpcc_free(text);
    text = NULL;
    if (bpcc_graph_print(g, "w.safetensors", &text, NULL, &d) == BPCC_OK) {
        struct bpcc_graph *back;
        if (bpcc_graph_parse(text, strlen(text), "q.bpcc", &back, &dv) != BPCC_OK) abort(); /* prints what parses */
        bpcc_graph_free(back);
        if (!same_without_rollback(data, size, c, q, po, text)) abort();
    }
    fuzz_run_twice(g, NULL, &d);
    struct bpcc_compare_report *r;
    if (bpcc_compare_weights(f, g, &r, &d) == BPCC_OK) {
        char *t;
        if (bpcc_compare_report_html(r, "fuzz", &t, &d) == BPCC_OK) bpcc_free(t);
        bpcc_compare_report_free(r);
    }
out:
    bpcc_exec_free(e);
    bpcc_free(text);
    bpcc_graph_free(f);
    bpcc_graph_free(g);
    return 0;
}
