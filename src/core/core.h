/*
** core.h — internal foundations shared by every subsystem: allocation, arenas, growable
** buffers, interning and diagnostics. Nothing here is exported from the shared library.
*/
#ifndef BPCC_CORE_H
#define BPCC_CORE_H

#include "bpcc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define BPCC_INTERNAL __attribute__((visibility("hidden")))
#define BPCC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define BPCC_INTERNAL
#define BPCC_PRINTF(f, a)
#endif

#define BPCC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Programmer errors only; user input never reaches an assertion. */
#define BPCC_ASSERT(x)                                                                   \
    do {                                                                                 \
        if (!(x)) bpcc_assert_fail(#x, __FILE__, __LINE__);                              \
    } while (0)
BPCC_INTERNAL void bpcc_assert_fail(const char *expr, const char *file, int line);

/* {==================== allocation (one hook for the whole library) ==================== */

/* A transparent huge page (x86-64, arm64 with 4 KiB pages); blocks of this size and more from
** the default allocator are advised onto huge pages, and a big arena chunk is aligned to it. */
#define BPCC_HUGE_PAGE ((size_t)2 << 20)
#define BPCC_HUGE_ADVICE_MIN BPCC_HUGE_PAGE
/* the advice on or off (at load: off when the environment has BPCC_HUGE_PAGES=0) */
BPCC_INTERNAL void bpcc_huge_pages_set(bool on);
BPCC_INTERNAL void *bpcc_malloc(size_t n);
BPCC_INTERNAL void *bpcc_realloc(void *p, size_t n);
BPCC_INTERNAL void bpcc_xfree(void *p);
/* Free a block of n bytes whose pages the process need not keep: a big one (1 MiB and more) has
** its whole pages given back to the kernel first. For a transient block, such as a model's text
** once parsed, that a heap which keeps its free memory (the bpcc tool's) would otherwise hold as
** resident memory until it happens to be reused. */
BPCC_INTERNAL void bpcc_xfree_pages(void *p, size_t n);
/* The whole pages inside [p, p + n) given back to the kernel (MADV_DONTNEED): read again, an
** anonymous page is zeros, a private file mapping's is the file's bytes. The partial pages at the
** ends are kept. Nothing where there is no such advice. */
BPCC_INTERNAL void bpcc_pages_give_back(const void *p, size_t n);
BPCC_INTERNAL char *bpcc_strdup(const char *s);

/*
** Test hook: make the n-th allocation from now fail (n >= 1), and every allocation after it
** while `sticky`; n == 0 disables. Returns the number of allocations made since the last call.
*/
BPCC_INTERNAL uint64_t bpcc_alloc_fail_at(uint64_t n, bool sticky);
/* How many allocations have failed so far (to tell a library's OOM from its other errors). */
BPCC_INTERNAL uint64_t bpcc_alloc_failures(void);

/* }===================================================================================== */

/* {==================== arena: bump allocation, freed all at once ====================== */

#define BPCC_ARENA_BINS 32 /* blocks given back, by size in 8-byte steps up to 256 bytes */
struct bpcc_arena {
    struct arena_chunk *head;
    size_t used, cap;     /* in head */
    size_t total;         /* bytes obtained from the allocator */
    void *bins[BPCC_ARENA_BINS]; /* bins[k]: blocks of at least 8 (k + 1) bytes (bpcc_arena_give) */
    uint32_t bin_mask;           /* bit k: bins[k] holds a block */
};

BPCC_INTERNAL void bpcc_arena_init(struct bpcc_arena *a);
BPCC_INTERNAL void bpcc_arena_release(struct bpcc_arena *a);
/* Zero-filled, aligned to `align` (a power of two <= 64). NULL on out-of-memory. */
BPCC_INTERNAL void *bpcc_arena_alloc(struct bpcc_arena *a, size_t size, size_t align);
/* the same without zeroing: for buffers the caller writes in full at once (folded weights) */
BPCC_INTERNAL void *bpcc_arena_alloc_uninit(struct bpcc_arena *a, size_t size, size_t align);
/* Where the arena's head stands, and a rewind to it: what was allocated since from the same head
** chunk is given back (true); after a new head chunk nothing is (false; it stays allocated), and a
** chunk of its own made for a large request stays in any case. For throwing away a value just
** built that turned out to exist already: the caller makes sure that nothing allocated since is
** referred to. */
struct bpcc_arena_mark {
    const void *head;
    size_t used;
};
BPCC_INTERNAL struct bpcc_arena_mark bpcc_arena_mark(const struct bpcc_arena *a);
BPCC_INTERNAL bool bpcc_arena_rewind(struct bpcc_arena *a, struct bpcc_arena_mark m);
BPCC_INTERNAL char *bpcc_arena_strndup(struct bpcc_arena *a, const char *s, size_t n);
/* Give back `size` bytes at p, allocated from a, that nothing will use again: a later allocation of
** at most that size (rounded down to 8 bytes, at most 256) and alignment 8 may take them. Blocks
** not aligned to 8 or smaller than 8 bytes are ignored. A rewind forgets every block given back. */
BPCC_INTERNAL void bpcc_arena_give(struct bpcc_arena *a, void *p, size_t size);

#define BPCC_ARENA_NEW(a, T) ((T *)bpcc_arena_alloc((a), sizeof(T), _Alignof(T)))
static inline void *bpcc_arena_alloc_n(struct bpcc_arena *a, size_t n, size_t size, size_t align)
{
    return n > SIZE_MAX / size ? NULL : bpcc_arena_alloc(a, n * size, align);
}
#define BPCC_ARENA_NEWN(a, T, n) ((T *)bpcc_arena_alloc_n((a), (n), sizeof(T), _Alignof(T)))

/* }===================================================================================== */

/* {==================== string index (strmap.c) ======================================== */

/* A map from strings to pointers (open addressing; keys not copied, they must outlive the map).
** Keys are compared by length and bytes, so any byte string serves (a graph's shapes are keyed by
** their dims).
** Lookups take the key's hash (bpcc_str_hash), so a caller that asks several maps hashes once. */
struct bpcc_strmap_slot {
    const char *key; /* NULL: empty */
    void *value;
    uint32_t hash, len;
};
/* the key of the slot whose value field `value` is (as bpcc_intern_slot and bpcc_intern_value
** hand out values) */
static inline const char *bpcc_strmap_value_key(void *const *value)
{
    return ((const struct bpcc_strmap_slot *)(const void *)((const char *)value -
                                                             offsetof(struct bpcc_strmap_slot, value)))->key;
}
struct bpcc_strmap {
    struct bpcc_strmap_slot *slots; /* cap of them, NULL while empty */
    uint32_t cap, n;
    /* moves on whenever slots move (the table grows, a key is removed): a slot pointer taken at
    ** one epoch stays valid while the epoch does */
    uint32_t epoch;
};

BPCC_INTERNAL uint32_t bpcc_str_hash(const char *s, size_t n);
/* the slot holding key s (its value may be read and written), NULL when absent */
BPCC_INTERNAL struct bpcc_strmap_slot *bpcc_strmap_get(const struct bpcc_strmap *m, const char *s, size_t n, uint32_t h);
/* the same for a NUL-terminated key, hashed here */
BPCC_INTERNAL struct bpcc_strmap_slot *bpcc_strmap_get_str(const struct bpcc_strmap *m, const char *s);
/* add a key that is absent; slot pointers taken before are then invalid */
BPCC_INTERNAL enum bpcc_status bpcc_strmap_put(struct bpcc_strmap *m, const char *key, size_t n, uint32_t h, void *value);
/* the slot holding key s, or a new one for it (*added; key s, value NULL) found by the same probe:
** the caller may then put a lasting copy of s in the slot's key. NULL when the map cannot grow.
** Slot pointers taken before are then invalid. */
BPCC_INTERNAL struct bpcc_strmap_slot *bpcc_strmap_get_or_add(struct bpcc_strmap *m, const char *s, size_t n, uint32_t h,
                                                             bool *added);
/* room for n keys in all without growing: a table sized to them, at most three quarters full (slot
** pointers taken before are then invalid) */
BPCC_INTERNAL enum bpcc_status bpcc_strmap_reserve(struct bpcc_strmap *m, uint32_t n);
/* remove the slot's key (other slot pointers are then invalid) */
BPCC_INTERNAL void bpcc_strmap_remove(struct bpcc_strmap *m, struct bpcc_strmap_slot *e);
BPCC_INTERNAL enum bpcc_status bpcc_strmap_copy(struct bpcc_strmap *dst, const struct bpcc_strmap *src);
BPCC_INTERNAL void bpcc_strmap_release(struct bpcc_strmap *m);
#define BPCC_STRMAP_FOREACH(m, e) \
    for (struct bpcc_strmap_slot *e = (m)->slots; (m)->slots && e < (m)->slots + (m)->cap; e++) \
        if (e->key)

/* }===================================================================================== */

/* Hot loops: GCC's -O2 cost model does not vectorize loops that need an epilogue; these get its
** -O3 (clang vectorizes at -O2 already). A loop inlined into a big function may stay scalar even
** so: hot loops live in small functions of their own. */
#if defined(__GNUC__) && !defined(__clang__)
#define BPCC_HOT __attribute__((optimize("O3")))
#else
#define BPCC_HOT
#endif

/* {==================== the CPU (cpu.c) =============================================== */

/* kernels with an AVX2 build beside the baseline one (GCC or clang on x86-64) */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BPCC_AVX2_CLONES 1
#endif

/* true where the AVX2 builds run: the CPU has AVX2 and FMA, and BPCC_ISA is not "baseline" */
BPCC_INTERNAL bool bpcc_cpu_avx2(void);

/* }===================================================================================== */

/* {==================== string interning (per arena) =================================== */

#define BPCC_INTERN_RECENT 64
struct bpcc_intern {
    struct bpcc_strmap table;   /* the arena copies; each slot's value is its owner's (see bpcc_intern_value) */
    struct bpcc_arena *arena;
    /* the answers for recent argument pointers, by pointer: most interning is of the same few
    ** literals and buffers (attribute keys, tensor names, module types), and a table lookup costs
    ** a few cache misses on a big graph. A hit is checked against the string's bytes. */
    struct bpcc_intern_recent {
        const char *arg, *str;
        size_t len;
    } recent[BPCC_INTERN_RECENT];
};

BPCC_INTERNAL void bpcc_intern_init(struct bpcc_intern *in, struct bpcc_arena *a);
BPCC_INTERNAL void bpcc_intern_release(struct bpcc_intern *in);
BPCC_INTERNAL const char *bpcc_intern_n(struct bpcc_intern *in, const char *s, size_t n);
/* the same, with the string's hash (bpcc_str_hash) already known */
BPCC_INTERNAL const char *bpcc_intern_nh(struct bpcc_intern *in, const char *s, size_t n, uint32_t h);
BPCC_INTERNAL const char *bpcc_intern_lookup(const struct bpcc_intern *in, const char *s);
/* the same for n bytes with their hash: the interned copy, NULL when absent */
BPCC_INTERNAL const char *bpcc_intern_find(const struct bpcc_intern *in, const char *s, size_t n, uint32_t h);
/* One pointer per interned string for the table's owner, NULL until the owner sets it (a graph
** keeps there the node of that name: one table instead of a second index of the same strings).
** The place of s's pointer, NULL when s is not interned; valid until the next interning. */
BPCC_INTERNAL void **bpcc_intern_value(const struct bpcc_intern *in, const char *s, size_t n, uint32_t h);
/* s interned (copied when new) into *str, and its slot's value as bpcc_intern_value gives it: one
** probe where asking for the value and then interning took two. *added (when not NULL): s was not
** interned before. NULL when out of memory. The slot pointer lasts until the next string is
** interned. */
BPCC_INTERNAL void **bpcc_intern_slot(struct bpcc_intern *in, const char *s, size_t n, uint32_t h, const char **str,
                                      bool *added);

/* }===================================================================================== */

/* {==================== growable byte buffer =========================================== */

struct bpcc_buf {
    char *data;
    size_t len, cap; /* len < cap once allocated: data[len] is the terminator; cap = len after OOM */
    bool oom;        /* sticky: once an append failed, all later appends are no-ops */
};

BPCC_INTERNAL void bpcc_buf_init(struct bpcc_buf *b);
BPCC_INTERNAL void bpcc_buf_release(struct bpcc_buf *b);
BPCC_INTERNAL void bpcc_buf_add_slow(struct bpcc_buf *b, const void *p, size_t n);
/* Mark b as out of memory (later appends are no-ops, bpcc_buf_take gives NULL). */
BPCC_INTERNAL void bpcc_buf_set_oom(struct bpcc_buf *b);
/* appends that fit are inline: printers make several per node */
static inline void bpcc_buf_add(struct bpcc_buf *b, const void *p, size_t n)
{
    if (n < b->cap - b->len) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = 0;
    } else {
        bpcc_buf_add_slow(b, p, n);
    }
}
static inline void bpcc_buf_adds(struct bpcc_buf *b, const char *s) { bpcc_buf_add(b, s, strlen(s)); }
static inline void bpcc_buf_addc(struct bpcc_buf *b, char c) { bpcc_buf_add(b, &c, 1); }
BPCC_INTERNAL void bpcc_buf_printf(struct bpcc_buf *b, const char *fmt, ...) BPCC_PRINTF(2, 3);
/* Decimal integers without printf (glibc's printf takes a slow path in processes where a library
** registered printf extensions, as libquadmath does under OpenBLAS). format: out needs 21 bytes;
** returns the length, NUL-terminated. */
BPCC_INTERNAL void bpcc_buf_add_i64(struct bpcc_buf *b, int64_t v);
BPCC_INTERNAL size_t bpcc_format_i64(int64_t v, char *out);
/* Names built in fixed buffers, for the same reason: append s (at most n bytes of it) or v to
** out[size] at len, which is the length so far (as returned by the previous call, starting at 0).
** out stays NUL-terminated and is truncated like snprintf's; returns the untruncated length,
** >= size when something did not fit. */
BPCC_INTERNAL size_t bpcc_str_cat(char *out, size_t size, size_t len, const char *s);
BPCC_INTERNAL size_t bpcc_str_catn(char *out, size_t size, size_t len, const char *s, size_t n);
BPCC_INTERNAL size_t bpcc_str_cat_i64(char *out, size_t size, size_t len, int64_t v);
/* Hand the NUL-terminated contents to the caller (free with bpcc_xfree); NULL after OOM. */
BPCC_INTERNAL char *bpcc_buf_take(struct bpcc_buf *b, size_t *len_out);

/* }===================================================================================== */

/* {==================== diagnostics ===================================================== */

/* Record an error; returns `code` so that callers can `return bpcc_diag_error(...)`. */
BPCC_INTERNAL enum bpcc_status bpcc_diag_error(struct bpcc_diag *d, enum bpcc_status code,
                                               const char *file, uint32_t line, uint32_t col,
                                               const char *fmt, ...) BPCC_PRINTF(6, 7);
BPCC_INTERNAL void bpcc_diag_warning(struct bpcc_diag *d, const char *file, uint32_t line,
                                     uint32_t col, const char *fmt, ...) BPCC_PRINTF(5, 6);
/* An error in a binary file at a byte offset. */
BPCC_INTERNAL enum bpcc_status bpcc_diag_error_at_offset(struct bpcc_diag *d,
                                                         enum bpcc_status code, const char *file,
                                                         uint64_t offset, const char *fmt, ...)
    BPCC_PRINTF(5, 6);
/* Attach a note to the message recorded last (if it was kept). */
BPCC_INTERNAL void bpcc_diag_note(struct bpcc_diag *d, uint32_t line, uint32_t col,
                                  const char *fmt, ...) BPCC_PRINTF(4, 5);
BPCC_INTERNAL enum bpcc_status bpcc_diag_nomem(struct bpcc_diag *d);

/* }===================================================================================== */

/* {==================== files ========================================================== */

/* Read a whole file (free with bpcc_xfree); NUL-terminated for convenience. */
BPCC_INTERNAL enum bpcc_status bpcc_file_read(const char *path, char **data_out,
                                              size_t *len_out, struct bpcc_diag *d);

/*
** Atomic output: open a temporary file beside `path`, write, then commit (fsync + rename) or
** abort (unlink). No partial file is ever visible under `path`.
*/
struct bpcc_atomic_file {
    FILE *fp;         /* NULL once finished */
    bool created;     /* tmp_path exists on disk */
    bool sync;        /* BPCC_WRITE_SYNC: the data reaches the disk before the rename, the rename after */
    char *tmp_path;
    char *path;
    unsigned live;    /* its slot + 1 in the list bpcc_remove_partial_outputs reads, 0 when none */
};
/* flags: BPCC_WRITE_SYNC or 0, else BPCC_ERR_INVALID (nothing created) */
BPCC_INTERNAL enum bpcc_status bpcc_atomic_open(struct bpcc_atomic_file *af, const char *path, unsigned flags,
                                                struct bpcc_diag *d);
/* Flush and close the temporary, fsync'd first with BPCC_WRITE_SYNC (no rename yet); on failure
** it is removed. */
BPCC_INTERNAL enum bpcc_status bpcc_atomic_finish(struct bpcc_atomic_file *af,
                                                  struct bpcc_diag *d);
/* the fsync calls made so far (files and directories), for the tests */
BPCC_INTERNAL unsigned long bpcc_file_sync_count(void);
/* Finish (if not yet) and rename the temporary over the target; with BPCC_WRITE_SYNC the
** directory is fsync'd after, so that the rename is on the disk too. */
BPCC_INTERNAL enum bpcc_status bpcc_atomic_commit(struct bpcc_atomic_file *af,
                                                  struct bpcc_diag *d);
BPCC_INTERNAL void bpcc_atomic_abort(struct bpcc_atomic_file *af);

/* Directory part of a path ("." when none), malloc'd; and joining. NULL on OOM. */
BPCC_INTERNAL char *bpcc_path_dirname(const char *path);
BPCC_INTERNAL char *bpcc_path_join(const char *dir, const char *name);
/* The last component of path (a pointer into it). */
BPCC_INTERNAL const char *bpcc_path_basename(const char *path);

/* }===================================================================================== */

/* Shortest "%.*g" text that reads back as the same double, always with '.', 'e', "inf" or
** "nan" so that it lexes as a float. Writes at most 32 bytes. */
BPCC_INTERNAL void bpcc_format_double(double v, char out[32]);

#endif /* BPCC_CORE_H */
