/* libFuzzer target: the safetensors reader (through a file, as it maps files). */
#include "bpcc.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/bpcc-fuzz-%d.safetensors", (int)getpid());
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
    }
    return 0;
}
