/*
** vocab.c — bpcc's op vocabulary: the module classes, functions and Tensor methods of PyTorch
** that can appear in patterns, generated from torch (vocab.inc), with aliases resolved to one
** canonical public name, abbreviations expanded, and "did you mean" suggestions.
*/
#include "config.h"

struct vocab_entry {
    const char *name;
    char kind;
    const char *canonical; /* NULL: name itself */
};

#define V(n, k, c) {n, k, c},
static const struct vocab_entry vocab[] = {
#include "vocab.inc"
};
#undef V

/* Abbreviations in PyTorch's documentation style, and names that moved between versions. */
static const struct { const char *from, *to; } prefixes[] = {
    {"nn.", "torch.nn."},
    {"F.", "torch.nn.functional."},
    {"nni.", "torch.ao.nn.intrinsic."},
    {"nniqat.", "torch.nn.intrinsic.qat."},
    {"nnqat.", "torch.ao.nn.qat."},
    {"nnqr.", "torch.ao.nn.quantized.reference."},
    {"nnq.", "torch.ao.nn.quantized."},
    {"nnqd.", "torch.ao.nn.quantized.dynamic."},
    {"torch.ao.nn.intrinsic.qat.", "torch.nn.intrinsic.qat."},
};

static const struct vocab_entry *find(const char *name)
{
    size_t lo = 0, hi = BPCC_ARRAY_LEN(vocab);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(vocab[mid].name, name);
        if (c == 0) return &vocab[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *bpcc_vocab_canonical(const char *name, char *kind_out)
{
    if (kind_out) *kind_out = 0;
    const struct vocab_entry *e = find(name);
    char buf[512];
    for (size_t i = 0; !e && i < BPCC_ARRAY_LEN(prefixes); i++) {
        size_t n = strlen(prefixes[i].from);
        if (strncmp(name, prefixes[i].from, n) == 0 &&
            (size_t)snprintf(buf, sizeof buf, "%s%s", prefixes[i].to, name + n) < sizeof buf)
            e = find(buf);
    }
    if (!e) return NULL;
    if (kind_out) *kind_out = e->kind;
    return e->canonical ? e->canonical : e->name;
}

/* Optimal-string-alignment distance (Levenshtein plus adjacent transpositions), capped: a
** result above `cap` is reported as cap + 1. */
unsigned bpcc_edit_distance(const char *a, const char *b, unsigned cap)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 255 || lb > 255) return cap + 1;
    if ((la > lb ? la - lb : lb - la) > cap) return cap + 1;
    unsigned rows[3][256];
    unsigned *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++) prev[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (unsigned)i;
        unsigned best = cur[0];
        for (size_t j = 1; j <= lb; j++) {
            unsigned v = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < v)
                v = prev2[j - 2] + 1;
            cur[j] = v;
            if (v < best) best = v;
        }
        if (best > cap) return cap + 1;
        unsigned *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb] > cap ? cap + 1 : prev[lb];
}

bool bpcc_vocab_is_name(const char *s)
{
    bool start = true;
    if (!*s) return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (c == '.') {
            if (start) return false;
            start = true;
        } else if (alpha || (!start && c >= '0' && c <= '9')) {
            start = false;
        } else {
            return false;
        }
    }
    return !start;
}

const char *bpcc_vocab_suggest(const char *name)
{
    size_t len = strlen(name);
    unsigned cap = len < 10 ? 2 : (unsigned)(len / 5);
    const char *best = NULL;
    unsigned best_d = cap + 1;
    for (size_t i = 0; i < BPCC_ARRAY_LEN(vocab); i++) {
        if (vocab[i].canonical) continue;
        unsigned dist = bpcc_edit_distance(name, vocab[i].name, best_d - 1 < cap ? best_d - 1 : cap);
        if (dist < best_d) {
            best_d = dist;
            best = vocab[i].name;
        }
    }
    return best;
}
