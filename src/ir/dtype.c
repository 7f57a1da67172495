/*
** dtype.c — element types: torch names, IR short names, safetensors names, sizes.
*/
#include "ir.h"

struct dtype_traits {
    const char *name;        /* torch name, without "torch." */
    const char *short_name;  /* IR text */
    const char *st_name;     /* safetensors dtype of the carrier */
    size_t size;
};

static const struct dtype_traits traits[BPCC_DTYPE_COUNT] = {
    [BPCC_DTYPE_NONE] = {"none", "none", NULL, 0},
    [BPCC_DTYPE_F32] = {"float32", "f32", "F32", 4},
    [BPCC_DTYPE_F64] = {"float64", "f64", "F64", 8},
    [BPCC_DTYPE_F16] = {"float16", "f16", "F16", 2},
    [BPCC_DTYPE_BF16] = {"bfloat16", "bf16", "BF16", 2},
    [BPCC_DTYPE_I64] = {"int64", "i64", "I64", 8},
    [BPCC_DTYPE_I32] = {"int32", "i32", "I32", 4},
    [BPCC_DTYPE_I16] = {"int16", "i16", "I16", 2},
    [BPCC_DTYPE_I8] = {"int8", "i8", "I8", 1},
    [BPCC_DTYPE_U8] = {"uint8", "u8", "U8", 1},
    [BPCC_DTYPE_BOOL] = {"bool", "bool", "BOOL", 1},
    [BPCC_DTYPE_QUINT8] = {"quint8", "qu8", "U8", 1},
    [BPCC_DTYPE_QINT8] = {"qint8", "qi8", "I8", 1},
    [BPCC_DTYPE_QINT32] = {"qint32", "qi32", "I32", 4},
    [BPCC_DTYPE_QUINT4X2] = {"quint4x2", "qu4x2", NULL, 0},
};
_Static_assert(BPCC_DTYPE_COUNT == 15, "dtype traits table needs the new dtype");

/* torch's aliases: torch.float is float32, torch.long is int64 ... */
static const struct { const char *alias; enum bpcc_dtype t; } aliases[] = {
    {"float", BPCC_DTYPE_F32}, {"double", BPCC_DTYPE_F64}, {"half", BPCC_DTYPE_F16},
    {"long", BPCC_DTYPE_I64},  {"int", BPCC_DTYPE_I32},    {"short", BPCC_DTYPE_I16},
};

const char *bpcc_dtype_name(enum bpcc_dtype t)
{
    return (unsigned)t < BPCC_DTYPE_COUNT ? traits[t].name : "?";
}

const char *bpcc_dtype_short_name(enum bpcc_dtype t)
{
    return (unsigned)t < BPCC_DTYPE_COUNT ? traits[t].short_name : "?";
}

size_t bpcc_dtype_size(enum bpcc_dtype t)
{
    return (unsigned)t < BPCC_DTYPE_COUNT ? traits[t].size : 0;
}

enum bpcc_dtype bpcc_dtype_from_name(const char *name)
{
    if (strncmp(name, "torch.", 6) == 0) {
        name += 6;
        for (size_t i = 0; i < BPCC_ARRAY_LEN(aliases); i++)
            if (strcmp(name, aliases[i].alias) == 0) return aliases[i].t;
        for (int t = 1; t < BPCC_DTYPE_COUNT; t++)
            if (strcmp(name, traits[t].name) == 0) return (enum bpcc_dtype)t;
        return BPCC_DTYPE_NONE;
    }
    for (int t = 1; t < BPCC_DTYPE_COUNT; t++)
        if (strcmp(name, traits[t].name) == 0 || strcmp(name, traits[t].short_name) == 0)
            return (enum bpcc_dtype)t;
    for (size_t i = 0; i < BPCC_ARRAY_LEN(aliases); i++)
        if (strcmp(name, aliases[i].alias) == 0) return aliases[i].t;
    return BPCC_DTYPE_NONE;
}

bool bpcc_dtype_is_integral(enum bpcc_dtype t)
{
    _Static_assert(BPCC_DTYPE_I32 == BPCC_DTYPE_I64 + 1 && BPCC_DTYPE_I16 == BPCC_DTYPE_I64 + 2 &&
                       BPCC_DTYPE_I8 == BPCC_DTYPE_I64 + 3 && BPCC_DTYPE_U8 == BPCC_DTYPE_I64 + 4 &&
                       BPCC_DTYPE_BOOL == BPCC_DTYPE_I64 + 5,
                   "the plain integer dtypes and bool are one run");
    return t >= BPCC_DTYPE_I64 && t <= BPCC_DTYPE_BOOL;
}

/* The safetensors name of t's carrier, NULL for NONE. */
const char *bpcc_dtype_st_name(enum bpcc_dtype t)
{
    return (unsigned)t < BPCC_DTYPE_COUNT ? traits[t].st_name : NULL;
}

/* The plain dtype a safetensors name denotes (F32 -> f32, U8 -> u8 ...), NONE if unknown. */
enum bpcc_dtype bpcc_dtype_from_st_name(const char *s)
{
    for (int t = 1; t <= BPCC_DTYPE_BOOL; t++)
        if (strcmp(s, traits[t].st_name) == 0) return (enum bpcc_dtype)t;
    return BPCC_DTYPE_NONE;
}

/* The carrier of a quantized type (qu8 -> u8), or t itself. */
enum bpcc_dtype bpcc_dtype_carrier(enum bpcc_dtype t)
{
    switch (t) {
    case BPCC_DTYPE_QUINT8: return BPCC_DTYPE_U8;
    case BPCC_DTYPE_QINT8: return BPCC_DTYPE_I8;
    case BPCC_DTYPE_QINT32: return BPCC_DTYPE_I32;
    default: return t;
    }
}
