/*
** check_safetensors.c — the safetensors reader's validation, one test per error class with
** the byte offset it reports, and reading well-formed files (alignment included).
*/
#include "testutil.h"

#include <unistd.h>

/* 8-byte length + header + data, as a temp file */
static char *make_file(const char *header, const void *data, size_t n_data, bool pad)
{
    size_t hlen = strlen(header), padded = pad ? (hlen + 7) & ~(size_t)7 : hlen;
    size_t total = 8 + padded + n_data;
    unsigned char *buf = malloc(total);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, header, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    if (n_data) memcpy(buf + 8 + padded, data, n_data);
    char *path = tu_write_temp(buf, total, ".safetensors");
    free(buf);
    return path;
}

START_TEST(reads_tensors_in_offset_order)
{
    float f[3] = {1.5f, -2.0f, 3.25f};
    unsigned char data[12 + 2];
    memcpy(data, f, 12);
    data[12] = 7;
    data[13] = 9;
    char *p = make_file("{\"__metadata__\":{\"format\":\"pt\"},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[12,14]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[3,1],\"data_offsets\":[0,12]}}",
                        data, sizeof data, true);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_safetensors *st;
    ck_assert_msg(bpcc_safetensors_open(p, &st, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_uint_eq(bpcc_safetensors_count(st), 2);
    const char *name;
    enum bpcc_dtype dt;
    uint32_t ndim;
    const int64_t *dims;
    const void *ptr;
    size_t nbytes;
    ck_assert_int_eq(bpcc_safetensors_get(st, 0, &name, &dt, &ndim, &dims, &ptr, &nbytes), BPCC_OK);
    ck_assert_str_eq(name, "a");
    ck_assert_int_eq(dt, BPCC_DTYPE_F32);
    ck_assert_uint_eq(ndim, 2);
    ck_assert_int_eq(dims[0], 3);
    ck_assert_uint_eq(nbytes, 12);
    ck_assert_uint_eq((uintptr_t)ptr % 4, 0);
    ck_assert(((const float *)ptr)[2] == 3.25f);
    ck_assert_uint_eq(bpcc_safetensors_find(st, "b"), 1);
    ck_assert_uint_eq(bpcc_safetensors_find(st, "zzz"), UINT32_MAX);
    ck_assert_int_eq(bpcc_safetensors_get(st, 2, NULL, NULL, NULL, NULL, NULL, NULL), BPCC_ERR_INVALID);
    bpcc_safetensors_close(st);
    unlink(p);
    free(p);
}
END_TEST

START_TEST(reads_past_unknown_fields)
{
    /* fields the format does not define, with nested values (and keys that look like the known
    ** ones inside them), are skipped; the metadata may be empty */
    unsigned char data[2] = {5, 6};
    char *p = make_file("{\"__metadata__\":{},\"t\":{\"extra\":{\"shape\":[9,9],\"dtype\":[\"F64\",{}]},"
                        "\"dtype\":\"U8\",\"more\":[[[]],null,true,1.5,\"s\"],\"shape\":[2],\"data_offsets\":[0,2]}}",
                        data, sizeof data, true);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_safetensors *st;
    ck_assert_msg(bpcc_safetensors_open(p, &st, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_uint_eq(bpcc_safetensors_count(st), 1);
    enum bpcc_dtype dt;
    uint32_t ndim;
    const int64_t *dims;
    const void *ptr;
    ck_assert_int_eq(bpcc_safetensors_get(st, 0, NULL, &dt, &ndim, &dims, &ptr, NULL), BPCC_OK);
    ck_assert_int_eq(dt, BPCC_DTYPE_U8);
    ck_assert_uint_eq(ndim, 1);
    ck_assert_int_eq(dims[0], 2);
    ck_assert_int_eq(((const unsigned char *)ptr)[1], 6);
    ck_assert_uint_eq(bpcc_safetensors_find(st, "t"), 0);
    bpcc_safetensors_close(st);
    unlink(p);
    free(p);
}
END_TEST

START_TEST(copies_misaligned_data_into_aligned_memory)
{
    /* header of odd length, not padded: the F32 data starts at an odd offset */
    float f = 0.75f;
    char *p = make_file("{\"x\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", &f, 4, false);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_safetensors *st;
    ck_assert_msg(bpcc_safetensors_open(p, &st, &d) == BPCC_OK, "%s", tu_msg(&d));
    const void *ptr;
    ck_assert_int_eq(bpcc_safetensors_get(st, 0, NULL, NULL, NULL, NULL, &ptr, NULL), BPCC_OK);
    ck_assert_uint_eq((uintptr_t)ptr % 4, 0);
    ck_assert(*(const float *)ptr == 0.75f);
    /* a loaded model keeps the data alone (the copy included), not the names and shapes */
    ck_assert(bpcc_safetensors_keep_data(st));
    ck_assert_uint_eq(bpcc_safetensors_count(st), 0);
    ck_assert_uint_eq(bpcc_safetensors_find(st, "x"), UINT32_MAX);
    ck_assert(*(const float *)ptr == 0.75f);
    bpcc_safetensors_close(st);
    unlink(p);
    free(p);
}
END_TEST

struct bad_st {
    const char *name;
    const char *header;   /* NULL: raw bytes below */
    size_t n_data;
    const char *raw;      /* whole file when header is NULL */
    size_t raw_len;
    enum bpcc_status status;
    uint64_t offset;
    const char *msg;
};

#define T1 "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static const struct bad_st bad[] = {
    {"empty file", NULL, 0, "", 0, BPCC_ERR_FORMAT, 0, "too short"},
    {"truncated length", NULL, 0, "\x10\0\0\0", 4, BPCC_ERR_FORMAT, 0, "too short"},
    {"header past EOF", NULL, 0, "\x40\0\0\0\0\0\0\0{}", 10, BPCC_ERR_FORMAT, 0, "runs past the end"},
    {"huge header length", NULL, 0, "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10, BPCC_ERR_LIMIT, 0, "100 MB limit"},
    {"not json", "{\"t\": nope}", 0, NULL, 0, BPCC_ERR_FORMAT, 15, "not valid JSON"},
    {"truncated json", "{\"t\":{\"dtype\":\"F32\"", 0, NULL, 0, BPCC_ERR_FORMAT, 8 + 19, "not valid JSON: parse error: premature EOF"},
    {"trailing garbage", "{} x", 0, NULL, 0, BPCC_ERR_FORMAT, 12, "not valid JSON: parse error: trailing garbage"},
    {"NUL in a key", "{\"t\\u0000x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "\\u0000 is not allowed"},
    {"NUL in a skipped value", "{\"t\":{\"x\":[{\"y\":\"a\\u0000\"}],\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 24, "\\u0000 is not allowed"},
    {"not an object", "[1, 2]", 0, NULL, 0, BPCC_ERR_FORMAT, 8, "not a JSON object"},
    {"duplicate key", "{" T1 "," T1 "}", 8, NULL, 0, BPCC_ERR_FORMAT, 62, "duplicate key 't' in the header"},
    {"duplicate metadata", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, NULL, 0, BPCC_ERR_FORMAT, 27, "duplicate key '__metadata__'"},
    {"field twice", "{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 28, "tensor 't' has \"dtype\" twice"},
    {"shape not an array", "{\"t\":{\"dtype\":\"F32\",\"shape\":{\"a\":[2]},\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "needs \"dtype\""},
    {"nested shape entry", "{\"t\":{\"dtype\":\"F32\",\"shape\":[[2]],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "non-negative integers"},
    {"offset beyond 64 bits", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551616]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "0 <= begin <= end"},
    {"missing dtype", "{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "needs \"dtype\""},
    {"entry not an object", "{\"t\":5}", 0, NULL, 0, BPCC_ERR_FORMAT, 9, "needs \"dtype\""},
    {"unknown dtype", "{\"t\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, NULL, 0, BPCC_ERR_FORMAT, 9, "dtype 'F8_E4M3'; supported"},
    {"negative dim", "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "non-negative integers"},
    {"float dim", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "non-negative integers"},
    {"too many dims", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, NULL, 0, BPCC_ERR_LIMIT, 9, "at most 8"},
    {"shape overflow", "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "overflows 64 bits"},
    {"offsets reversed", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "0 <= begin <= end"},
    {"offsets wrong arity", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "data_offsets"},
    {"offsets past EOF", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, NULL, 0, BPCC_ERR_FORMAT, 9, "run past the end of the data (4 bytes)"},
    {"size mismatch", "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, NULL, 0, BPCC_ERR_FORMAT, 9, "8 data bytes, but its shape and dtype need 12"},
    {"overlap", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6, NULL, 0, BPCC_ERR_FORMAT, 61, "overlaps tensor 'a'"},
    {"hole", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4, NULL, 0, BPCC_ERR_FORMAT, 9, "hole of 2 bytes"},
    {"trailing bytes", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 5, NULL, 0, BPCC_ERR_FORMAT, 63, "3 bytes after the last tensor"},
    {"metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0, NULL, 0, BPCC_ERR_FORMAT, 9, "is not a string"},
    {"metadata not object", "{\"__metadata__\":[]}", 0, NULL, 0, BPCC_ERR_FORMAT, 9, "must be an object"},
};

START_TEST(malformed_files_report_offsets)
{
    const struct bad_st *c = &bad[_i];
    char *p;
    if (c->header) {
        unsigned char zeros[64] = {0};
        p = make_file(c->header, zeros, c->n_data, false);
    } else {
        p = tu_write_temp(c->raw, c->raw_len, ".safetensors");
    }
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_safetensors *st = (void *)1;
    enum bpcc_status s = bpcc_safetensors_open(p, &st, &d);
    ck_assert_msg(s == c->status, "[%s] status %d want %d (%s)", c->name, s, c->status, tu_msg(&d));
    ck_assert_ptr_null(st);
    ck_assert_msg(d.entries[0].has_offset && d.entries[0].offset == c->offset,
                  "[%s] offset %llu want %llu (%s)", c->name,
                  (unsigned long long)d.entries[0].offset, (unsigned long long)c->offset,
                  tu_msg(&d));
    ck_assert_msg(strstr(tu_msg(&d), c->msg), "[%s] '%s' lacks '%s'", c->name, tu_msg(&d), c->msg);
    ck_assert_str_eq(d.entries[0].file, p);
    unlink(p);
    free(p);
}
END_TEST

START_TEST(missing_file_is_an_io_error)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_safetensors *st;
    ck_assert_int_eq(bpcc_safetensors_open("/nonexistent/x.safetensors", &st, &d), BPCC_ERR_IO);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "cannot open"));
    ck_assert_int_eq(bpcc_safetensors_open("/tmp", &st, &d), BPCC_ERR_IO);
}
END_TEST

#if defined(__linux__)
#include <sys/mman.h>
/* The mapping's page tables are filled when it is opened, before anything reads it: where a
** file system maps on demand 16 pages per fault (tmpfs), reading 16 MiB took 256 faults. */
START_TEST(opened_files_are_mapped_ahead_of_reading)
{
    long pg = sysconf(_SC_PAGESIZE);
    void *probe = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(probe, MAP_FAILED);
#ifdef MADV_POPULATE_READ
    bool kernel_takes_it = madvise(probe, (size_t)pg, MADV_POPULATE_READ) == 0;
#else
    bool kernel_takes_it = false;
#endif
    munmap(probe, (size_t)pg);
    size_t n = (size_t)16 << 20;
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 7);
    char header[128];
    snprintf(header, sizeof header, "{\"w\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", n, n);
    char *p = make_file(header, data, n, true);
    struct bpcc_safetensors *st;
    ck_assert_int_eq(bpcc_safetensors_open(p, &st, NULL), BPCC_OK);
    const void *ptr;
    size_t nbytes;
    ck_assert_int_eq(bpcc_safetensors_get(st, 0, NULL, NULL, NULL, NULL, &ptr, &nbytes), BPCC_OK);
    ck_assert_uint_eq(nbytes, n);
    size_t pages, present = tu_pages_present_of(ptr, n, &pages);
    ck_assert_uint_ge(pages, n / (size_t)pg - 1);
    if (kernel_takes_it && present != SIZE_MAX)
        ck_assert_msg(present == pages, "%zu of %zu pages mapped after open", present, pages);
    ck_assert(!memcmp(ptr, data, n)); /* the same bytes */
    bpcc_safetensors_close(st);
    unlink(p);
    free(p);
    free(data);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_set_timeout(tc, 60); /* Check's default, 4 s, is too short on a loaded machine under ASan */
    tcase_add_test(tc, reads_tensors_in_offset_order);
    tcase_add_test(tc, reads_past_unknown_fields);
    tcase_add_test(tc, copies_misaligned_data_into_aligned_memory);
    tcase_add_loop_test(tc, malformed_files_report_offsets, 0, (int)BPCC_ARRAY_LEN(bad));
    tcase_add_test(tc, missing_file_is_an_io_error);
#if defined(__linux__)
    tcase_add_test(tc, opened_files_are_mapped_ahead_of_reading);
#endif
    suite_add_tcase(s, tc);
    return tu_run(s);
}
