/* libFuzzer target: the backend-config YAML loader; a loaded config must dump, reload and dump
** the same bytes. */
#include "bpcc.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c;
    /* no filename: relative `extends` cannot reach the file system */
    if (bpcc_config_load_text((const char *)data, size, NULL, NULL, &c, &d) != BPCC_OK) return 0;
    char *a, *b;
    if (bpcc_config_dump_yaml(c, &a, &d) == BPCC_OK) {
        struct bpcc_config *c2;
        if (bpcc_config_load_text(a, strlen(a), NULL, NULL, &c2, &d) != BPCC_OK) abort();
        if (bpcc_config_dump_yaml(c2, &b, &d) != BPCC_OK) abort();
        if (strcmp(a, b) != 0) abort();
        bpcc_free(b);
        bpcc_config_free(c2);
        bpcc_free(a);
    }
    bpcc_config_free(c);
    return 0;
}
