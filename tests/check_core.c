/*
** check_core.c — arena, interning, buffers, number formatting, diagnostics.
*/
#include "testutil.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

START_TEST(arena_aligns_and_zeroes)
{
    struct bpcc_arena a;
    bpcc_arena_init(&a);
    for (size_t align = 1; align <= 64; align *= 2) {
        unsigned char *p = bpcc_arena_alloc(&a, 13, align);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % align, 0);
        for (int i = 0; i < 13; i++) ck_assert_uint_eq(p[i], 0);
        memset(p, 0xab, 13);
    }
    bpcc_arena_release(&a);
}
END_TEST

START_TEST(arena_keeps_addresses_across_growth)
{
    struct bpcc_arena a;
    bpcc_arena_init(&a);
    int *first = BPCC_ARENA_NEW(&a, int);
    *first = 42;
    for (int i = 0; i < 100000; i++) ck_assert_ptr_nonnull(bpcc_arena_alloc(&a, 24, 8));
    /* a huge one-off request gets its own chunk; the head stays usable */
    void *big = bpcc_arena_alloc(&a, 8u << 20, 64);
    ck_assert_ptr_nonnull(big);
    ck_assert_ptr_nonnull(bpcc_arena_alloc(&a, 16, 8));
    ck_assert_int_eq(*first, 42);
    bpcc_arena_release(&a);
}
END_TEST

/* A block given back serves the next allocation of its size (rounded up to 8 bytes), zeroed,
** alignment 8 at most; not a bigger one, not one aligned to 16; the last given first. A smaller
** allocation, when no block of its size is there, takes the first bytes of the smallest larger one,
** whose rest is given back. Blocks not aligned to 8 or under 8 bytes are ignored, and a rewind
** forgets them all. */
START_TEST(arena_gives_a_block_given_back_to_an_allocation_of_its_size)
{
    struct bpcc_arena a;
    bpcc_arena_init(&a);
    unsigned char *p = bpcc_arena_alloc(&a, 40, 8), *q = bpcc_arena_alloc(&a, 40, 8);
    memset(p, 0xAB, 40);
    bpcc_arena_give(&a, p, 40);
    bpcc_arena_give(&a, q, 40);
    ck_assert_ptr_ne(bpcc_arena_alloc(&a, 48, 8), p); /* bigger */
    ck_assert_ptr_ne(bpcc_arena_alloc(&a, 40, 16), q); /* aligned to 16 */
    ck_assert_ptr_eq(bpcc_arena_alloc(&a, 33, 8), q);  /* rounded up to 40: the last given */
    unsigned char *r = bpcc_arena_alloc(&a, 24, 4);    /* smaller: p's first 24 bytes */
    ck_assert_ptr_eq(r, p);
    for (int i = 0; i < 24; i++) ck_assert_uint_eq(r[i], 0);
    ck_assert_ptr_eq(bpcc_arena_alloc(&a, 16, 8), p + 24); /* and the rest */
    ck_assert_ptr_ne(bpcc_arena_alloc(&a, 8, 8), p + 32);  /* taken: none left */
    bpcc_arena_give(&a, p + 4, 32); /* not aligned to 8 */
    bpcc_arena_give(&a, p + 8, 4);  /* under 8 bytes */
    ck_assert_ptr_ne(bpcc_arena_alloc(&a, 24, 8), p + 4);
    ck_assert_ptr_ne(bpcc_arena_alloc(&a, 4, 4), p + 8);
    unsigned char *big = bpcc_arena_alloc(&a, 1000, 8);
    bpcc_arena_give(&a, big, 1000); /* serves 256 bytes at most */
    ck_assert_ptr_ne(bpcc_arena_alloc(&a, 257, 8), big);
    ck_assert_ptr_eq(bpcc_arena_alloc(&a, 256, 8), big);
    /* the smallest larger block is cut: 8 bytes of the 256 given, then 40 of the 248 left, not of
    ** the 64 given after */
    unsigned char *s64 = bpcc_arena_alloc(&a, 64, 8);
    bpcc_arena_give(&a, big, 256);
    ck_assert_ptr_eq(bpcc_arena_alloc(&a, 8, 8), big);
    bpcc_arena_give(&a, s64, 64);
    ck_assert_ptr_eq(bpcc_arena_alloc(&a, 72, 8), big + 8);
    ck_assert_ptr_eq(bpcc_arena_alloc(&a, 40, 8), s64);
    ck_assert_ptr_eq(bpcc_arena_alloc(&a, 24, 8), s64 + 40);
    /* a block past a mark, given back, then rewound over: the bump pointer hands it out again, so
    ** the bin must not as well */
    struct bpcc_arena_mark m = bpcc_arena_mark(&a);
    unsigned char *t = bpcc_arena_alloc(&a, 16, 8);
    bpcc_arena_give(&a, t, 16);
    ck_assert(bpcc_arena_rewind(&a, m));
    unsigned char *t1 = bpcc_arena_alloc(&a, 16, 8);
    unsigned char *t2 = bpcc_arena_alloc(&a, 16, 8);
    ck_assert_ptr_ne(t1, t2);
    bpcc_arena_release(&a);
}
END_TEST

START_TEST(arena_rejects_overflowing_counts)
{
    struct bpcc_arena a;
    bpcc_arena_init(&a);
    ck_assert_ptr_null(BPCC_ARENA_NEWN(&a, double, SIZE_MAX / 4));
    bpcc_arena_release(&a);
}
END_TEST

START_TEST(intern_gives_one_pointer_per_string)
{
    struct bpcc_arena a;
    struct bpcc_intern in;
    bpcc_arena_init(&a);
    bpcc_intern_init(&in, &a);
    char buf[] = "torch.nn.Conv2d";
    const char *x = bpcc_intern_n(&in, buf, strlen(buf));
    buf[0] = 'T';
    const char *y = bpcc_intern_n(&in, "torch.nn.Conv2d", 15);
    ck_assert_ptr_eq(x, y);
    ck_assert_str_eq(x, "torch.nn.Conv2d");
    ck_assert_ptr_ne(bpcc_intern_n(&in, buf, strlen(buf)), x);
    ck_assert_ptr_eq(bpcc_intern_lookup(&in, "torch.nn.Conv2d"), x);
    ck_assert_ptr_null(bpcc_intern_lookup(&in, "missing"));
    /* prefixes are distinct strings */
    ck_assert_ptr_ne(bpcc_intern_n(&in, "torch.nn.Conv2d", 8), x);
    bpcc_intern_release(&in);
    bpcc_arena_release(&a);
}
END_TEST

/* reserve makes room for n keys at once: the keys already there stay found, the next n - present
** additions do not move the slots (the epoch stays), a smaller reserve changes nothing, and the
** table is sized to the n keys (at most three quarters full, a multiple of 64 slots), not to the
** next power of two; adding past it doubles it */
START_TEST(strmap_reserve_makes_room_at_once)
{
    char keys[1000][16];
    struct bpcc_strmap m = {0};
    for (int i = 0; i < 1000; i++) snprintf(keys[i], sizeof keys[i], "k%d", i);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(bpcc_strmap_put(&m, keys[i], strlen(keys[i]), bpcc_str_hash(keys[i], strlen(keys[i])), keys[i]), BPCC_OK);
    ck_assert_int_eq(bpcc_strmap_reserve(&m, 1000), BPCC_OK);
    ck_assert_uint_eq(m.cap, 1344); /* 1000 keys need 1334 slots at three quarters */
    uint32_t epoch = m.epoch;
    ck_assert_int_eq(bpcc_strmap_reserve(&m, 500), BPCC_OK);
    ck_assert_uint_eq(m.epoch, epoch);
    for (int i = 0; i < 1000; i++) {
        size_t n = strlen(keys[i]);
        bool added;
        struct bpcc_strmap_slot *e = bpcc_strmap_get_or_add(&m, keys[i], n, bpcc_str_hash(keys[i], n), &added);
        ck_assert_ptr_nonnull(e);
        ck_assert(added == (i >= 10));
        if (added) e->value = keys[i];
        ck_assert_ptr_eq(e->value, keys[i]);
    }
    ck_assert_uint_eq(m.epoch, epoch);
    ck_assert_uint_eq(m.n, 1000);
    static char more[9][8]; /* 1344 slots hold 1008 keys: the ninth more doubles the table */
    for (int i = 0; i < 9; i++) {
        snprintf(more[i], sizeof more[i], "more%d", i);
        ck_assert_int_eq(bpcc_strmap_put(&m, more[i], strlen(more[i]), bpcc_str_hash(more[i], strlen(more[i])), NULL), BPCC_OK);
        ck_assert_uint_eq(m.cap, i < 8 ? 1344 : 2688);
    }
    ck_assert_uint_ne(m.epoch, epoch);
    for (int i = 0; i < 1000; i++) ck_assert_ptr_nonnull(bpcc_strmap_get_str(&m, keys[i]));
    struct bpcc_strmap empty = {0};
    ck_assert_int_eq(bpcc_strmap_reserve(&empty, 3), BPCC_OK);
    ck_assert_uint_eq(empty.cap, 64); /* never below the smallest table */
    bpcc_strmap_release(&empty);
    bpcc_strmap_release(&m);
}
END_TEST

/* get_or_add finds a present key in the slot put gave it and adds an absent one with one probe:
** the added slot takes the caller's key and value, survives growth, and can be removed again */
START_TEST(strmap_get_or_add_adds_once_and_finds_after)
{
    enum { N = 3000 };
    static char keys[N][16], copies[N][16];
    struct bpcc_strmap m = {0};
    bool added;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "g%d", i);
        size_t n = strlen(keys[i]);
        uint32_t h = bpcc_str_hash(keys[i], n);
        if (i % 3 == 0) { /* every third key put the plain way first */
            ck_assert_int_eq(bpcc_strmap_put(&m, keys[i], n, h, &keys[i]), BPCC_OK);
        } else {
            struct bpcc_strmap_slot *e = bpcc_strmap_get_or_add(&m, keys[i], n, h, &added);
            ck_assert(e && added && e->value == NULL);
            ck_assert_ptr_eq(e->key, keys[i]);
            memcpy(copies[i], keys[i], n + 1);
            e->key = copies[i]; /* the caller's lasting copy */
            e->value = &keys[i];
        }
        /* asked again, the same key is found, not added */
        struct bpcc_strmap_slot *f = bpcc_strmap_get_or_add(&m, keys[i], n, h, &added);
        ck_assert(f && !added && f->value == &keys[i]);
        ck_assert_uint_eq(m.n, (uint32_t)i + 1);
    }
    ck_assert_uint_le(4u * m.n, 3u * m.cap);
    for (int i = 0; i < N; i++) {
        size_t n = strlen(keys[i]);
        struct bpcc_strmap_slot *e = bpcc_strmap_get(&m, keys[i], n, bpcc_str_hash(keys[i], n));
        ck_assert(e && e->value == &keys[i]);
        ck_assert_ptr_eq(e->key, i % 3 ? copies[i] : keys[i]);
    }
    /* an added slot removed at once (the caller's copy failed) leaves the map as it was */
    struct bpcc_strmap_slot *e = bpcc_strmap_get_or_add(&m, "fresh", 5, bpcc_str_hash("fresh", 5), &added);
    ck_assert(e && added);
    bpcc_strmap_remove(&m, e);
    ck_assert_uint_eq(m.n, N);
    ck_assert_ptr_null(bpcc_strmap_get(&m, "fresh", 5, bpcc_str_hash("fresh", 5)));
    for (int i = 0; i < N; i++) {
        size_t n = strlen(keys[i]);
        ck_assert_ptr_nonnull(bpcc_strmap_get(&m, keys[i], n, bpcc_str_hash(keys[i], n)));
    }
    bpcc_strmap_release(&m);
}
END_TEST

/* A table grown well past the step at which its old slots' pages go back to the kernel during a
** rehash (65536 slots) keeps every key with its value: the pages are given back only once their
** slots are placed. Growth one key at a time (doubling) and by reserve (to a size that is no power
** of two). */
START_TEST(strmap_keeps_every_key_through_big_growths)
{
    enum { N = 200000 };
    static char keys[N][12];
    for (int way = 0; way < 2; way++) {
        struct bpcc_strmap m = {0};
        for (int i = 0; i < N; i++) {
            snprintf(keys[i], sizeof keys[i], "k%d", i);
            if (way == 1 && i == N / 4) ck_assert_int_eq(bpcc_strmap_reserve(&m, N + 12345), BPCC_OK);
            size_t n = strlen(keys[i]);
            ck_assert_int_eq(bpcc_strmap_put(&m, keys[i], n, bpcc_str_hash(keys[i], n), &keys[i]), BPCC_OK);
        }
        ck_assert_uint_ge(m.cap, 4u * 65536u);
        ck_assert_uint_eq(m.n, N);
        for (int i = 0; i < N; i++) {
            struct bpcc_strmap_slot *e = bpcc_strmap_get_str(&m, keys[i]);
            ck_assert_msg(e && e->value == &keys[i], "%s lost", keys[i]);
        }
        ck_assert_ptr_null(bpcc_strmap_get_str(&m, "k-1"));
        bpcc_strmap_release(&m);
    }
}
END_TEST

START_TEST(strmap_finds_removes_and_copies)
{
    /* 5000 keys removed in a scattered order with lookups after each removal (backward shifts
    ** across the table's end included), against a plain array as the truth; the table grown one
    ** key at a time (_i 0: doubling from 64 slots) or reserved for all first (_i 1: sized to them,
    ** 6720 slots, no power of two, three quarters full at the end) */
    enum { N = 5000 };
    static char keys[N][16];
    static bool present[N];
    struct bpcc_strmap m = {0};
    if (_i) {
        ck_assert_int_eq(bpcc_strmap_reserve(&m, N), BPCC_OK);
        ck_assert_uint_eq(m.cap, 6720); /* 4 N / 3 rounded up to 64 slots */
    }
    uint32_t epoch = m.epoch;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        size_t n = strlen(keys[i]);
        ck_assert_ptr_null(bpcc_strmap_get(&m, keys[i], n, bpcc_str_hash(keys[i], n)));
        ck_assert_int_eq(bpcc_strmap_put(&m, keys[i], n, bpcc_str_hash(keys[i], n), &present[i]), BPCC_OK);
        present[i] = true;
    }
    ck_assert_uint_eq(m.n, N);
    ck_assert_uint_le(4u * m.n, 3u * m.cap); /* at most three quarters full */
    if (_i) ck_assert_uint_eq(m.epoch, epoch); /* reserved: never moved */
    else ck_assert_uint_eq(m.cap, 8192);
    struct bpcc_strmap c;
    ck_assert_int_eq(bpcc_strmap_copy(&c, &m), BPCC_OK);
    for (int r = 0; r < N; r++) {
        int i = (int)((r * 7919L) % N); /* every key once, scattered */
        size_t n = strlen(keys[i]);
        struct bpcc_strmap_slot *e = bpcc_strmap_get(&m, keys[i], n, bpcc_str_hash(keys[i], n));
        ck_assert_ptr_nonnull(e);
        ck_assert_ptr_eq(e->value, &present[i]);
        bpcc_strmap_remove(&m, e);
        present[i] = false;
        if (r % 97 == 0 || r > N - 50)
            for (int j = 0; j < N; j++) {
                size_t nj = strlen(keys[j]);
                struct bpcc_strmap_slot *f = bpcc_strmap_get(&m, keys[j], nj, bpcc_str_hash(keys[j], nj));
                ck_assert_msg(present[j] ? f && f->value == &present[j] : !f, "key %s after %d removals", keys[j], r + 1);
            }
    }
    ck_assert_uint_eq(m.n, 0);
    /* the copy is untouched, and a prefix or a longer key is another key */
    ck_assert_uint_eq(c.n, N);
    ck_assert_ptr_nonnull(bpcc_strmap_get(&c, "k42", 3, bpcc_str_hash("k42", 3)));
    struct bpcc_strmap_slot *k4 = bpcc_strmap_get(&c, "k42", 2, bpcc_str_hash("k42", 2)); /* "k4" */
    ck_assert_ptr_nonnull(k4);
    ck_assert_str_eq(k4->key, "k4");
    ck_assert_ptr_null(bpcc_strmap_get(&c, "k420000", 7, bpcc_str_hash("k420000", 7)));
    uint32_t seen = 0;
    BPCC_STRMAP_FOREACH(&c, e) seen++;
    ck_assert_uint_eq(seen, N);
    bpcc_strmap_release(&c);
    bpcc_strmap_release(&m);
    /* hashes depend on every byte and on the length */
    ck_assert_uint_ne(bpcc_str_hash("conv1.weight", 12), bpcc_str_hash("conv1.weighu", 12));
    ck_assert_uint_ne(bpcc_str_hash("a", 1), bpcc_str_hash("a\0", 2));
}
END_TEST

START_TEST(buf_appends_and_formats)
{
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_buf_adds(&b, "a");
    bpcc_buf_printf(&b, "%d-%s", 12, "x");
    for (int i = 0; i < 1000; i++) bpcc_buf_addc(&b, 'z');
    size_t len;
    char *s = bpcc_buf_take(&b, &len);
    ck_assert_uint_eq(len, 5 + 1000);
    ck_assert(strncmp(s, "a12-x", 5) == 0);
    ck_assert_uint_eq(s[len], 0);
    bpcc_xfree(s);
}
END_TEST

START_TEST(buf_stays_failed_after_an_allocation_fails)
{
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_buf_adds(&b, "ab"); /* room for 256 now */
    bpcc_alloc_fail_at(1, false);
    char big[300];
    memset(big, 'x', sizeof big);
    bpcc_buf_add(&b, big, sizeof big); /* needs to grow: fails */
    bpcc_alloc_fail_at(0, false);
    ck_assert(b.oom);
    bpcc_buf_addc(&b, 'c'); /* would fit the old room, but the buffer has failed */
    bpcc_buf_adds(&b, "de");
    ck_assert_uint_eq(b.len, 2);
    ck_assert_ptr_null(bpcc_buf_take(&b, NULL));
    bpcc_buf_init(&b);
    bpcc_buf_adds(&b, "ok");
    bpcc_buf_set_oom(&b);
    bpcc_buf_addc(&b, '!');
    ck_assert_uint_eq(b.len, 2);
    ck_assert_ptr_null(bpcc_buf_take(&b, NULL));
}
END_TEST

START_TEST(str_cat_builds_and_truncates_like_snprintf)
{
    char b[8];
    size_t n = bpcc_str_cat_i64(b, sizeof b, bpcc_str_cat(b, sizeof b, 0, "ab"), -305);
    ck_assert_uint_eq(n, 6);
    ck_assert_str_eq(b, "ab-305");
    n = bpcc_str_cat(b, sizeof b, n, "xyz"); /* 9 bytes wanted, 7 fit */
    ck_assert_uint_eq(n, 9);
    ck_assert_str_eq(b, "ab-305x");
    n = bpcc_str_cat(b, sizeof b, n, "more"); /* already full: unchanged, length still counted */
    ck_assert_uint_eq(n, 13);
    ck_assert_str_eq(b, "ab-305x");
    n = bpcc_str_catn(b, sizeof b, 0, "kindly", 4);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(b, "kind");
    char one[1] = {'q'};
    ck_assert_uint_eq(bpcc_str_cat(one, 1, 0, "abc"), 3);
    ck_assert_uint_eq(one[0], 0);
    char e[24];
    bpcc_str_cat_i64(e, sizeof e, 0, INT64_MIN);
    ck_assert_str_eq(e, "-9223372036854775808");
}
END_TEST

START_TEST(format_double_round_trips_and_is_short)
{
    char out[32];
    struct { double v; const char *text; } cases[] = {
        {0.1, "0.1"}, {1e-05, "1e-05"}, {100.0, "100.0"}, {-0.0, "-0.0"}, {0.0, "0.0"},
        {1.5, "1.5"}, {123456.0, "123456.0"}, {1e16, "1e+16"}, {5e-324, "5e-324"},
        {INFINITY, "inf"}, {-INFINITY, "-inf"}, {0.2, "0.2"}, {1.0 / 3, "0.3333333333333333"},
    };
    for (size_t i = 0; i < BPCC_ARRAY_LEN(cases); i++) {
        bpcc_format_double(cases[i].v, out);
        ck_assert_str_eq(out, cases[i].text);
    }
    bpcc_format_double(NAN, out);
    ck_assert_str_eq(out, "nan");
    /* random bit patterns read back exactly */
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v;
        memcpy(&v, &x, sizeof v);
        if (!isfinite(v)) continue;
        bpcc_format_double(v, out);
        ck_assert_msg(strtod(out, NULL) == v, "%s does not read back", out);
        ck_assert(strpbrk(out, ".e") != NULL);
    }
}
END_TEST

START_TEST(diag_keeps_first_counts_rest)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_diag_error(&d, BPCC_ERR_PARSE, "a.yaml", 3, 7, "bad %s", "thing"),
                     BPCC_ERR_PARSE);
    bpcc_diag_note(&d, 1, 3, "while parsing '%s'", "conv");
    for (int i = 0; i < 30; i++) bpcc_diag_error(&d, BPCC_ERR_CONFIG, "a.yaml", 4 + i, 1, "e%d", i);
    ck_assert_uint_eq(d.n_errors, 31);
    ck_assert_uint_eq(d.n_entries, BPCC_DIAG_MAX_ENTRIES);
    ck_assert_int_eq(d.code, BPCC_ERR_PARSE);
    char buf[1024];
    size_t n = bpcc_diag_format(&d.entries[0], buf, sizeof buf);
    ck_assert_str_eq(buf, "a.yaml:3:7: error: bad thing\na.yaml:1:3: note: while parsing 'conv'\n");
    ck_assert_uint_eq(n, strlen(buf));
    /* truncation reports the full length */
    char small[10];
    ck_assert_uint_eq(bpcc_diag_format(&d.entries[0], small, sizeof small), n);
    ck_assert_uint_eq(strlen(small), 9);
}
END_TEST

START_TEST(diag_formats_offsets_and_plain_errors)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    bpcc_diag_error_at_offset(&d, BPCC_ERR_FORMAT, "w.safetensors", 123, "bad header");
    bpcc_diag_error(&d, BPCC_ERR_IO, "x.bpcc", 0, 0, "cannot open");
    bpcc_diag_error(&d, BPCC_ERR_NOMEM, NULL, 0, 0, "out of memory");
    bpcc_diag_warning(&d, "c.yaml", 2, 1, "unknown op");
    char buf[512];
    bpcc_diag_format(&d.entries[0], buf, sizeof buf);
    ck_assert_str_eq(buf, "w.safetensors: offset 123: error: bad header\n");
    bpcc_diag_format(&d.entries[1], buf, sizeof buf);
    ck_assert_str_eq(buf, "x.bpcc: error: cannot open\n");
    bpcc_diag_format(&d.entries[2], buf, sizeof buf);
    ck_assert_str_eq(buf, "bpcc: error: out of memory\n");
    bpcc_diag_format(&d.entries[3], buf, sizeof buf);
    ck_assert_str_eq(buf, "c.yaml:2:1: warning: unknown op\n");
    ck_assert_uint_eq(d.n_errors, 3);
    ck_assert_uint_eq(d.n_warnings, 1);
    ck_assert_str_eq(bpcc_status_name(BPCC_ERR_FORMAT), "malformed binary file");
    ck_assert_str_eq(bpcc_status_name((enum bpcc_status)999), "unknown status");
}
END_TEST

static int custom_calls;
static void *c_malloc(void *ud, size_t n) { (void)ud; custom_calls++; return malloc(n); }
static void *c_realloc(void *ud, void *p, size_t n) { (void)ud; custom_calls++; return realloc(p, n); }
static void c_free(void *ud, void *p) { (void)ud; free(p); }

START_TEST(allocator_hook_sees_every_allocation)
{
    struct bpcc_allocator a = {c_malloc, c_realloc, c_free, NULL};
    bpcc_set_allocator(&a);
    struct bpcc_graph *g;
    const char *text = "bpcc-model 1\ngraph\n  %o = output output (None,)\n";
    ck_assert_int_eq(bpcc_graph_parse(text, strlen(text), NULL, &g, NULL), BPCC_OK);
    bpcc_graph_free(g);
    bpcc_set_allocator(NULL);
    ck_assert_int_gt(custom_calls, 0);
    /* the fail-at hook makes exactly the n-th allocation fail */
    bpcc_alloc_fail_at(1, false);
    ck_assert_ptr_null(bpcc_malloc(8));
    void *p = bpcc_malloc(8);
    ck_assert_ptr_nonnull(p);
    bpcc_xfree(p);
    bpcc_alloc_fail_at(0, false);
}
END_TEST

/* A regular file is read into one block of its size: one allocation, whatever the size (a
** doubling buffer took two blocks for every doubling, and left its earlier copies in the heap). A
** file whose size the file system does not know (/proc's, reported as 0) still reads whole. */
START_TEST(file_read_takes_one_block_and_reads_files_of_unknown_size)
{
    size_t n = 300001;
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (char)('a' + i % 26);
    char *path = tu_write_temp(data, n, ".txt");
    struct bpcc_allocator a = {c_malloc, c_realloc, c_free, NULL};
    bpcc_set_allocator(&a);
    custom_calls = 0;
    char *text;
    size_t len;
    enum bpcc_status s = bpcc_file_read(path, &text, &len, NULL);
    int calls = custom_calls;
    bpcc_set_allocator(NULL);
    ck_assert_int_eq(s, BPCC_OK);
    ck_assert_int_eq(calls, 1);
    ck_assert_uint_eq(len, n);
    ck_assert(!memcmp(text, data, n));
    ck_assert_int_eq(text[n], 0);
    bpcc_xfree(text);
    unlink(path);
    free(path);

    path = tu_write_temp("", 0, ".txt");
    ck_assert_int_eq(bpcc_file_read(path, &text, &len, NULL), BPCC_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(text[0], 0);
    bpcc_xfree(text);
    unlink(path);
    free(path);

#if defined(__linux__)
    /* /proc/self/maps: a regular file of size 0 longer than the first block's growth steps */
    struct stat st;
    ck_assert_int_eq(stat("/proc/self/maps", &st), 0);
    ck_assert_int_eq(st.st_size, 0);
    ck_assert_int_eq(bpcc_file_read("/proc/self/maps", &text, &len, NULL), BPCC_OK);
    ck_assert_uint_gt(len, 100);
    ck_assert_uint_eq(strlen(text), len);
    ck_assert_ptr_nonnull(strstr(text, "[stack]"));
    ck_assert_int_eq(text[len - 1], '\n');
    bpcc_xfree(text);
#endif
    /* every allocation of a growing read failing in turn: an error, nothing leaked (ASan) */
    for (uint64_t k = 1;; k++) {
        bpcc_alloc_fail_at(k, false);
        s = bpcc_file_read("/proc/self/maps", &text, &len, NULL);
        uint64_t made = bpcc_alloc_fail_at(0, false);
        if (!s) {
            bpcc_xfree(text);
            ck_assert_uint_lt(made, k);
            break;
        }
        ck_assert_int_eq(s, BPCC_ERR_NOMEM);
        ck_assert_ptr_null(text);
    }
    free(data);
}
END_TEST

#if defined(__linux__)
#include <sys/mman.h>

static bool advised_huge(const void *addr)
{
    char flags[256];
    tu_vm_flags(addr, flags, sizeof flags);
    ck_assert_msg(flags[0], "no mapping holds %p", addr);
    return strstr(flags, " hg") != NULL;
}

/* the first huge-page boundary at or after p */
static unsigned char *huge_up(const void *p)
{
    return (unsigned char *)(((uintptr_t)p + BPCC_HUGE_PAGE - 1) & ~(uintptr_t)(BPCC_HUGE_PAGE - 1));
}

static void *mmap_malloc(void *ud, size_t n)
{
    (void)ud;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
static void *no_realloc(void *ud, void *p, size_t n) { (void)ud, (void)p, (void)n; return NULL; }
static void no_free(void *ud, void *p) { (void)ud, (void)p; }

START_TEST(big_blocks_are_advised_onto_huge_pages)
{
    /* can this kernel take the advice at all? (not without transparent huge pages built in) */
    size_t two = BPCC_HUGE_PAGE;
    unsigned char *probe = mmap(NULL, 2 * two, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(probe, MAP_FAILED);
    bool kernel_takes_it = madvise(huge_up(probe), two, MADV_HUGEPAGE) == 0;
    munmap(probe, 2 * two);

    bpcc_huge_pages_set(true); /* whatever BPCC_HUGE_PAGES says */

    /* an arena's big chunk starts on a 2 MiB boundary, so all of it can be backed by huge pages */
    struct bpcc_arena a;
    bpcc_arena_init(&a);
    ck_assert_ptr_nonnull(bpcc_arena_alloc(&a, 100, 8));
    unsigned char *big = bpcc_arena_alloc(&a, BPCC_HUGE_ADVICE_MIN, 8);
    ck_assert_ptr_nonnull(big);
    ck_assert_uint_eq((uintptr_t)big % two, 0);
    big[0] = 1, big[BPCC_HUGE_ADVICE_MIN - 1] = 2;
    if (kernel_takes_it) {
        ck_assert(advised_huge(big));
        ck_assert(advised_huge(big + BPCC_HUGE_ADVICE_MIN - 1));
    }
    bpcc_arena_release(&a);

    /* a big block from the default allocator is advised (its aligned interior), also when it
    ** grows into being big */
    unsigned char *p = bpcc_malloc(2 * BPCC_HUGE_ADVICE_MIN);
    ck_assert_ptr_nonnull(p);
    unsigned char *mid = huge_up(p);
    if (kernel_takes_it) ck_assert(advised_huge(mid));
    bpcc_xfree(p);
    p = bpcc_malloc(64);
    ck_assert_ptr_nonnull(p);
    p = bpcc_realloc(p, 3 * BPCC_HUGE_ADVICE_MIN);
    ck_assert_ptr_nonnull(p);
    mid = huge_up(p);
    if (kernel_takes_it) ck_assert(advised_huge(mid + two));
    bpcc_xfree(p);

    /* switched off (BPCC_HUGE_PAGES=0 at load), the default allocator gives none: a block above
    ** glibc's largest mmap threshold (32 MiB), so that it is a mapping of its own, never one an
    ** advised block had */
    bpcc_huge_pages_set(false);
    p = bpcc_malloc((size_t)40 << 20);
    bpcc_huge_pages_set(true);
    ck_assert_ptr_nonnull(p);
    ck_assert(!advised_huge(p + ((size_t)20 << 20)));
    bpcc_xfree(p);

    /* a caller's own allocator gets no advice */
    struct bpcc_allocator mine = {mmap_malloc, no_realloc, no_free, NULL};
    bpcc_set_allocator(&mine);
    p = bpcc_malloc(3 * BPCC_HUGE_ADVICE_MIN);
    bpcc_set_allocator(NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert(!advised_huge(p + two));
    munmap(p, 3 * BPCC_HUGE_ADVICE_MIN);
}
END_TEST

/* bpcc_xfree_pages gives a big block's whole pages back before freeing it (so they no longer count
** as resident), keeps the partial pages at its ends, and leaves a small block as bpcc_xfree does */
static unsigned resident_pages(const unsigned char *p, size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char vec[4096];
    ck_assert_uint_le(n / pg, sizeof vec);
    ck_assert_int_eq(mincore((void *)p, n, vec), 0);
    unsigned r = 0;
    for (size_t i = 0; i < n / pg; i++) r += vec[i] & 1;
    return r;
}

START_TEST(xfree_pages_gives_a_big_blocks_pages_back)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (size_t)4 << 20;
    struct bpcc_allocator mine = {mmap_malloc, no_realloc, no_free, NULL}; /* the mapping outlives the free */
    bpcc_set_allocator(&mine);
    unsigned char *p = bpcc_malloc(n);
    bpcc_set_allocator(NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(madvise(p, n, MADV_NOHUGEPAGE), 0); /* page by page, whatever THP's mode */
    memset(p, 1, n);
    ck_assert_uint_eq(resident_pages(p, n), n / pg);
    bpcc_set_allocator(&mine);
    bpcc_xfree_pages(p + 100, n - 200); /* the block: all but 100 bytes at each end */
    bpcc_set_allocator(NULL);
    ck_assert_uint_eq(resident_pages(p, n), 2); /* the first and last pages, part of the block only */
    ck_assert_int_eq(p[99], 1);
    ck_assert_int_eq(p[n - 100], 1);
    ck_assert_int_eq(p[pg], 0); /* a page given back reads as zeros */
    /* a small block keeps its pages */
    memset(p, 1, n);
    bpcc_set_allocator(&mine);
    bpcc_xfree_pages(p, ((size_t)1 << 20) - 1);
    bpcc_set_allocator(NULL);
    ck_assert_uint_eq(resident_pages(p, n), n / pg);
    munmap(p, n);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60); /* Check's default, 4 s, is too short on a loaded machine under ASan */
    tcase_add_test(tc, arena_aligns_and_zeroes);
    tcase_add_test(tc, arena_keeps_addresses_across_growth);
    tcase_add_test(tc, arena_rejects_overflowing_counts);
    tcase_add_test(tc, arena_gives_a_block_given_back_to_an_allocation_of_its_size);
    tcase_add_test(tc, intern_gives_one_pointer_per_string);
    tcase_add_loop_test(tc, strmap_finds_removes_and_copies, 0, 2);
    tcase_add_test(tc, strmap_reserve_makes_room_at_once);
    tcase_add_test(tc, strmap_get_or_add_adds_once_and_finds_after);
    tcase_add_test(tc, strmap_keeps_every_key_through_big_growths);
    tcase_add_test(tc, buf_appends_and_formats);
    tcase_add_test(tc, buf_stays_failed_after_an_allocation_fails);
    tcase_add_test(tc, str_cat_builds_and_truncates_like_snprintf);
    tcase_add_test(tc, format_double_round_trips_and_is_short);
    tcase_add_test(tc, diag_keeps_first_counts_rest);
    tcase_add_test(tc, diag_formats_offsets_and_plain_errors);
    tcase_add_test(tc, allocator_hook_sees_every_allocation);
    tcase_add_test(tc, file_read_takes_one_block_and_reads_files_of_unknown_size);
#if defined(__linux__)
    tcase_add_test(tc, big_blocks_are_advised_onto_huge_pages);
    tcase_add_test(tc, xfree_pages_gives_a_big_blocks_pages_back);
#endif
    suite_add_tcase(s, tc);
    return tu_run(s);
}
