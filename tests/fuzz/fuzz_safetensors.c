/* libFuzzer target: the safetensors reader (through a file, as it maps files); then the same file
** as a batch for a model with a float input and one it dequantizes itself (a quantized input: its
** qparams beside it), run and its outputs written, a quantized one among them. */
#include "bpcc.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char model[] = "bpcc-model 1\n\ngraph\n"
                            "  %x = placeholder x () : f32[1, 4]\n"
                            "  %y = placeholder y () : f32[1, 4]\n"
                            "  %dequantize = call_method dequantize (%x,)\n"
                            "  %relu = call_function torch.relu (%y,)\n"
                            "  %q = call_function torch.quantize_per_tensor (%relu, 0.1, 3, torch.quint8)\n"
                            "  %output = output output ((%dequantize, %q),)\n";

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static char path[64], out[64];
    static struct bpcc_graph *g;
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/bpcc-fuzz-%d.safetensors", (int)getpid());
        snprintf(out, sizeof out, "/tmp/bpcc-fuzz-%d-out.safetensors", (int)getpid());
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        if (bpcc_graph_parse(model, sizeof model - 1, "fuzz.bpcc", &g, &d)) abort();
    }
    FILE *fp = fopen(path, "wb");
    if (!fp) return 0;
    fwrite(data, 1, size, fp);
    fclose(fp);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_safetensors *st;
    if (bpcc_safetensors_open(path, &st, &d) == BPCC_OK) {
        uint32_t n = bpcc_safetensors_count(st);
        for (uint32_t i = 0; i < n; i++) {
            const void *p;
            size_t nb;
            bpcc_safetensors_get(st, i, NULL, NULL, NULL, NULL, &p, &nb);
            volatile unsigned char sink = 0;
            for (size_t k = 0; k < nb; k += 4096) sink ^= ((const unsigned char *)p)[k];
            (void)sink;
        }
        bpcc_safetensors_close(st);
        bpcc_diag_init(&d);
        bpcc_run(g, path, out, 1, &d);
    }
    return 0;
}
