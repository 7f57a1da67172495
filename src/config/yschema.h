/*
** yschema.h — schema helpers over the YAML tree (yschema.c).
*/
#ifndef BPCC_YSCHEMA_H
#define BPCC_YSCHEMA_H

#include "config.h"

struct yschema {
    const char *file;           /* interned, for messages */
    struct bpcc_diag *d;
    struct bpcc_intern *intern; /* where strings go */
    bool strict;                /* warnings are errors */
    uint32_t errors;            /* errors reported so far */
    bool oom;
    void (*note)(void *ud);     /* attaches a note naming the enclosing construct (may be NULL) */
    void *note_ud;
};

/* Report an error (returns false) or a warning at `at` (may be NULL). */
BPCC_INTERNAL bool ys_err(struct yschema *Y, const struct ynode *at, const char *fmt, ...)
    BPCC_PRINTF(3, 4);
BPCC_INTERNAL void ys_warn(struct yschema *Y, const struct ynode *at, const char *fmt, ...)
    BPCC_PRINTF(3, 4);
BPCC_INTERNAL bool ys_oom(struct yschema *Y);
/* "a, b, c" of a NULL-terminated list */
BPCC_INTERNAL const char *ys_one_of(const char *const *names, char *buf, size_t n);
BPCC_INTERNAL const char *ys_kind_word(const struct ynode *n);
BPCC_INTERNAL bool ys_want_kind(struct yschema *Y, const struct ynode *n, enum ynode_kind k,
                                const char *what);
/* typed scalars; each reports its own error */
BPCC_INTERNAL bool ys_string(struct yschema *Y, const struct ynode *n, const char *what,
                             const char **out);
BPCC_INTERNAL bool ys_bool(struct yschema *Y, const struct ynode *n, const char *what, bool *out);
BPCC_INTERNAL bool ys_int(struct yschema *Y, const struct ynode *n, const char *what, int64_t *out);
BPCC_INTERNAL bool ys_number(struct yschema *Y, const struct ynode *n, const char *what,
                             double *out);
BPCC_INTERNAL bool ys_written_int(const struct ynode *n);
BPCC_INTERNAL bool ys_is_null(const struct ynode *n);
/* unknown keys of a mapping, each an error with the closest valid key */
BPCC_INTERNAL void ys_check_keys(struct yschema *Y, const struct ynode *map,
                                 const char *const *allowed, const char *where);
/* a dtype name (quint8, qint8, float32 ..., optionally "torch."-prefixed) */
BPCC_INTERNAL bool ys_dtype(struct yschema *Y, const struct ynode *n, const char *what,
                            enum bpcc_dtype *out);

#endif
