/*
** builtin_images_none.c — the first build stage has no precompiled images of the built-in
** configs: it loads them from their YAML, which is how tools/gen_builtin_images.c makes them.
*/
#include "config.h"

const struct builtin_image *bpcc_builtin_images(uint32_t *n)
{
    *n = 0;
    return NULL;
}
