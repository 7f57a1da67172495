/*
** json.h — the JSON encoding of IR values, shared by every --json output.
*/
#ifndef BPCC_JSON_H
#define BPCC_JSON_H

#include "../ir/ir.h"

#include <jansson.h>

/* Encode v (new reference, NULL on OOM). `top`: a TUPLE is an array and a DICT an object. */
BPCC_INTERNAL json_t *bpcc_value_to_json(const struct bpcc_value *v, bool top);

/* Set key on o to v (stealing v); false when v is NULL (an earlier step failed) or on failure. */
BPCC_INTERNAL bool bpcc_json_put(json_t *o, const char *key, json_t *v);

/* The text of root (released here): indented by `indent` (0: compact), doubles written exactly.
** `ok` false (an earlier step failed), a failed dump, or any allocation failure since `failures`
** was read (jansson swallows some) give BPCC_ERR_NOMEM. */
BPCC_INTERNAL enum bpcc_status bpcc_json_finish(json_t *root, bool ok, int indent, uint64_t failures,
                                                char **out, struct bpcc_diag *d);

#endif
