/*
** json.h — the JSON encoding of IR values, shared by every --json output.
*/
#ifndef BPCC_JSON_H
#define BPCC_JSON_H

#include "../ir/ir.h"

#include <jansson.h>

/* Encode v (new reference, NULL on OOM). `top`: a TUPLE is an array and a DICT an object. */
BPCC_INTERNAL json_t *bpcc_value_to_json(const struct bpcc_value *v, bool top);

#endif
