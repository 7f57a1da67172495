/*
** diag.c — the caller-owned diagnostic record: the first messages are kept, later ones counted
** (SQLite's rule), and formatting in the "file:line:col: error: msg" convention.
*/
#include "core.h"

#include <inttypes.h>

static const char *const status_names[BPCC_STATUS_COUNT] = {
    [BPCC_OK] = "ok",
    [BPCC_ERR_NOMEM] = "out of memory",
    [BPCC_ERR_IO] = "i/o error",
    [BPCC_ERR_PARSE] = "parse error",
    [BPCC_ERR_FORMAT] = "malformed binary file",
    [BPCC_ERR_GRAPH] = "invalid graph",
    [BPCC_ERR_INVALID] = "invalid argument",
    [BPCC_ERR_CONFIG] = "invalid config",
    [BPCC_ERR_LIMIT] = "limit exceeded",
    [BPCC_ERR_INTERNAL] = "internal error",
};
_Static_assert(BPCC_STATUS_COUNT == 10, "status_names needs the new status");

const char *bpcc_status_name(enum bpcc_status s)
{
    return (unsigned)s < BPCC_STATUS_COUNT ? status_names[s] : "unknown status";
}

void bpcc_diag_init(struct bpcc_diag *d) { memset(d, 0, sizeof *d); }

static struct bpcc_diag_entry *push(struct bpcc_diag *d, enum bpcc_severity sev,
                                    enum bpcc_status code, const char *file, uint32_t line,
                                    uint32_t col, const char *fmt, va_list ap)
{
    if (sev == BPCC_SEV_ERROR) {
        if (d->n_errors++ == 0) d->code = code;
    } else {
        d->n_warnings++;
    }
    if (d->n_entries >= BPCC_DIAG_MAX_ENTRIES) return NULL;
    struct bpcc_diag_entry *e = &d->entries[d->n_entries++];
    memset(e, 0, sizeof *e);
    e->severity = sev;
    e->code = code;
    if (file) snprintf(e->file, sizeof e->file, "%s", file);
    e->line = line;
    e->col = col;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return e;
}

enum bpcc_status bpcc_diag_error(struct bpcc_diag *d, enum bpcc_status code, const char *file,
                                 uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (!d) return code;
    va_list ap;
    va_start(ap, fmt);
    push(d, BPCC_SEV_ERROR, code, file, line, col, fmt, ap);
    va_end(ap);
    return code;
}

void bpcc_diag_warning(struct bpcc_diag *d, const char *file, uint32_t line, uint32_t col,
                       const char *fmt, ...)
{
    if (!d) return;
    va_list ap;
    va_start(ap, fmt);
    push(d, BPCC_SEV_WARNING, BPCC_OK, file, line, col, fmt, ap);
    va_end(ap);
}

enum bpcc_status bpcc_diag_error_at_offset(struct bpcc_diag *d, enum bpcc_status code,
                                           const char *file, uint64_t offset, const char *fmt,
                                           ...)
{
    if (!d) return code;
    va_list ap;
    va_start(ap, fmt);
    struct bpcc_diag_entry *e = push(d, BPCC_SEV_ERROR, code, file, 0, 0, fmt, ap);
    va_end(ap);
    if (e) {
        e->has_offset = true;
        e->offset = offset;
    }
    return code;
}

void bpcc_diag_note(struct bpcc_diag *d, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (!d || d->n_entries == 0) return;
    /* Only attach to the message just pushed; if that one was dropped, drop its note too. */
    if (d->n_errors + d->n_warnings > d->n_entries) return;
    struct bpcc_diag_entry *e = &d->entries[d->n_entries - 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->note, sizeof e->note, fmt, ap);
    va_end(ap);
    e->has_note = true;
    e->note_line = line;
    e->note_col = col;
}

enum bpcc_status bpcc_diag_nomem(struct bpcc_diag *d)
{
    return bpcc_diag_error(d, BPCC_ERR_NOMEM, NULL, 0, 0, "out of memory");
}

static const char *sev_name(enum bpcc_severity s)
{
    return s == BPCC_SEV_ERROR ? "error" : s == BPCC_SEV_WARNING ? "warning" : "note";
}

static int position(char *buf, size_t n, const char *file, bool has_offset, uint64_t offset,
                    uint32_t line, uint32_t col)
{
    if (!file[0]) return snprintf(buf, n, "bpcc: ");
    if (line && col) return snprintf(buf, n, "%s:%" PRIu32 ":%" PRIu32 ": ", file, line, col);
    if (line) return snprintf(buf, n, "%s:%" PRIu32 ": ", file, line);
    if (has_offset) return snprintf(buf, n, "%s: offset %" PRIu64 ": ", file, offset);
    return snprintf(buf, n, "%s: ", file);
}

size_t bpcc_diag_format(const struct bpcc_diag_entry *e, char *buf, size_t n)
{
    char pos[BPCC_DIAG_FILE_MAX + 64], npos[BPCC_DIAG_FILE_MAX + 64];
    position(pos, sizeof pos, e->file, e->has_offset, e->offset, e->line, e->col);
    int len = snprintf(buf, n, "%s%s: %s\n", pos, sev_name(e->severity), e->msg);
    if (len < 0) return 0;
    if (e->has_note) {
        position(npos, sizeof npos, e->file, false, 0, e->note_line, e->note_col);
        size_t used = (size_t)len < n ? (size_t)len : (n ? n - 1 : 0);
        int l2 = snprintf(buf ? buf + used : NULL, n > used ? n - used : 0, "%snote: %s\n", npos,
                          e->note);
        if (l2 > 0) len += l2;
    }
    return (size_t)len;
}
