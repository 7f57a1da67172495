/*
** window.c — the sliding-window layers that a GEMM serves badly: depthwise convolution (one input
** channel per group, any channel multiplier, stride, dilation and padding mode; the layer of
** MobileNet and EfficientNet blocks) and 2-d max pooling.
**
** A GEMM per channel would be all call overhead, and a loop that adds one tap at a time to the
** output row reads and writes that row KH x KW times. Here each input plane is first copied into
** a padded plane, split by column phase when the stride is more than 1 (plane q holds the padded
** columns q, q + sw, q + 2 sw, ...), so that every tap reads a contiguous run of floats without
** bounds tests. Then each output block of WB columns is reduced over all the taps in registers and
** stored once. Convolution sums in the order bias, then taps by row and column, as PyTorch's
** reference loop does (padded taps add kv x 0); max pooling pads with -inf and lets NaN win, as
** PyTorch does.
**
** The kernels are compiled twice, for the baseline ISA and for AVX2 (chosen at run time); neither
** may fuse the multiply and the add (no FMA in the target), so both give the same bits.
*/
#include "exec.h"

#include <math.h>
#include <string.h>

enum { WB = 16 }; /* output columns per block: two 8-lane vectors */

/* The padded planes of one input plane: row r (padded row, 0..Hp) of phase q at planes + (q Hp + r)
** Wr; Hp, Wp cover every window (ceil_mode pooling may reach past the padding) and Wr leaves room
** for a whole last block to read past the row's end. off[t]: tap t's offset for output (0, 0). */
struct planes {
    int64_t Hp, Wp, Wr;
    float *data;
    int64_t *off;
};

static bool planes_new(const struct bpcc_window *p, struct planes *pl)
{
    int64_t Hp = p->H + 2 * p->ph, Wp = p->W + 2 * p->pw;
    int64_t hn = (p->OH - 1) * p->sh + (p->KH - 1) * p->dh + 1, wn = (p->OW - 1) * p->sw + (p->KW - 1) * p->dw + 1;
    pl->Hp = Hp > hn ? Hp : hn;
    pl->Wp = Wp > wn ? Wp : wn;
    int64_t Wq = (pl->Wp + p->sw - 1) / p->sw, reach = ((p->KW - 1) * p->dw) / p->sw;
    int64_t need = (p->OW + WB - 1) / WB * WB + reach;
    pl->Wr = need > Wq ? need : Wq;
    pl->data = bpcc_malloc((size_t)(p->sw * pl->Hp * pl->Wr) * sizeof(float));
    pl->off = bpcc_malloc((size_t)(p->KH * p->KW) * sizeof *pl->off);
    if (!pl->data || !pl->off) {
        bpcc_xfree(pl->data);
        bpcc_xfree(pl->off);
        return false;
    }
    for (int64_t ky = 0; ky < p->KH; ky++)
        for (int64_t kx = 0; kx < p->KW; kx++) {
            int64_t col = kx * p->dw;
            pl->off[ky * p->KW + kx] = ((col % p->sw) * pl->Hp + ky * p->dh) * pl->Wr + col / p->sw;
        }
    return true;
}

static void planes_free(struct planes *pl)
{
    bpcc_xfree(pl->data);
    bpcc_xfree(pl->off);
}

static void fill_n(float *row, int64_t n, float v)
{
    for (int64_t i = 0; i < n; i++) row[i] = v;
}

/* copy one [H, W] input plane in, padded */
static void planes_fill(const struct bpcc_window *p, const struct planes *pl, const float *img)
{
    int64_t Wr = pl->Wr, sw = p->sw, pw = p->pw;
    for (int64_t q = 0; q < sw; q++) {
        /* the padded columns t sw + q that fall inside the image: t in [lo, hi) */
        int64_t lo = q >= pw ? 0 : (pw - q + sw - 1) / sw;
        int64_t hi = (pw + p->W - q + sw - 1) / sw;
        hi = hi < lo ? lo : hi > Wr ? Wr : hi;
        for (int64_t r = 0; r < pl->Hp; r++) {
            float *row = pl->data + (q * pl->Hp + r) * Wr;
            int64_t iy = r - p->ph;
            if (p->mode == 0 && (iy < 0 || iy >= p->H)) {
                fill_n(row, Wr, p->fill);
            } else if (p->mode == 0) {
                const float *line = img + iy * p->W + (lo * sw + q - pw);
                fill_n(row, lo, p->fill);
                if (sw == 1) memcpy(row + lo, line, (size_t)(hi - lo) * sizeof *row);
                else
                    for (int64_t t = lo; t < hi; t++) row[t] = line[(t - lo) * sw];
                fill_n(row + hi, Wr - hi, p->fill);
            } else {
                for (int64_t t = 0; t < Wr; t++) {
                    int64_t col = t * sw + q;
                    row[t] = col < pl->Wp ? bpcc_pad_at(img, p->H, p->W, iy, col - pw, p->mode) : 0.0f;
                }
            }
        }
    }
}

/* GCC and clang vector types (8 lanes; the baseline ISA splits them into two SSE registers) */
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* (macros: a function returning a 32-byte vector would change the ABI without AVX) */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v))
/* m = v where v > m or v is NaN (PyTorch's max pooling test), else m */
#define MAXNAN8(m, v)                                                   \
    do {                                                                \
        v8i take_ = ((v) > (m)) | ((v) != (v));                         \
        (m) = (v8)(((v8i)(v) & take_) | ((v8i)(m) & ~take_));           \
    } while (0)

/* one output plane: a window reduction over the taps, WB columns at a time. conv: bias + sum of
** k[t] x tap; else the max over the taps. */
static inline __attribute__((always_inline)) void reduce_plane(const struct bpcc_window *p, const struct planes *pl,
                                                               bool conv, const float *k, float bv, float *dst)
{
    int64_t taps = p->KH * p->KW, Wr = pl->Wr;
    for (int64_t oy = 0; oy < p->OH; oy++) {
        const float *base = pl->data + oy * p->sh * Wr;
        float *out = dst + oy * p->OW;
        for (int64_t ox0 = 0; ox0 < p->OW; ox0 += WB) {
            float b0 = conv ? bv : -INFINITY;
            v8 a0 = {b0, b0, b0, b0, b0, b0, b0, b0}, a1 = a0;
            for (int64_t t = 0; t < taps; t++) {
                const float *src = base + pl->off[t] + ox0;
                v8 x0, x1;
                LOAD8(x0, src);
                LOAD8(x1, src + 8);
                if (conv) {
                    float kv = k[t];
                    a0 += kv * x0;
                    a1 += kv * x1;
                } else {
                    MAXNAN8(a0, x0);
                    MAXNAN8(a1, x1);
                }
            }
            int64_t m = p->OW - ox0 < WB ? p->OW - ox0 : WB;
            if (m == WB) {
                memcpy(out + ox0, &a0, sizeof a0);
                memcpy(out + ox0 + 8, &a1, sizeof a1);
            } else {
                float acc[WB];
                memcpy(acc, &a0, sizeof a0);
                memcpy(acc + 8, &a1, sizeof a1);
                memcpy(out + ox0, acc, (size_t)m * sizeof *acc);
            }
        }
    }
}

typedef void (*plane_fn)(const struct bpcc_window *, const struct planes *, const float *, float, float *);

BPCC_HOT static void conv_plane(const struct bpcc_window *p, const struct planes *pl, const float *k, float bv,
                                float *dst)
{
    reduce_plane(p, pl, true, k, bv, dst);
}

BPCC_HOT static void max_plane(const struct bpcc_window *p, const struct planes *pl, const float *k, float bv, float *dst)
{
    reduce_plane(p, pl, false, k, bv, dst);
}

#ifdef BPCC_AVX2_CLONES
BPCC_HOT __attribute__((target("avx2"))) static void conv_plane_avx2(const struct bpcc_window *p,
                                                                    const struct planes *pl, const float *k, float bv,
                                                                    float *dst)
{
    reduce_plane(p, pl, true, k, bv, dst);
}

BPCC_HOT __attribute__((target("avx2"))) static void max_plane_avx2(const struct bpcc_window *p,
                                                                   const struct planes *pl, const float *k, float bv,
                                                                   float *dst)
{
    reduce_plane(p, pl, false, k, bv, dst);
}
#endif

/* the kernel's AVX2 build where the CPU has AVX2, else its baseline build */
static plane_fn choose(bool conv)
{
#ifdef BPCC_AVX2_CLONES
    if (bpcc_cpu_avx2()) return conv ? conv_plane_avx2 : max_plane_avx2;
#endif
    return conv ? conv_plane : max_plane;
}

bool bpcc_dwconv(const struct bpcc_window *p, int64_t N, int64_t C, int64_t Cout, const float *x, const float *w,
                 const float *b, float *y)
{
    struct planes pl;
    if (!planes_new(p, &pl)) return false;
    plane_fn fn = choose(true);
    int64_t mult = Cout / C, taps = p->KH * p->KW, P = p->OH * p->OW;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            planes_fill(p, &pl, x + (n * C + c) * p->H * p->W);
            for (int64_t j = 0; j < mult; j++) {
                int64_t co = c * mult + j;
                fn(p, &pl, w + co * taps, b ? b[co] : 0.0f, y + (n * Cout + co) * P);
            }
        }
    planes_free(&pl);
    return true;
}

bool bpcc_maxpool2d(const struct bpcc_window *p, uint64_t n_planes, const float *x, float *y)
{
    struct planes pl;
    if (!planes_new(p, &pl)) return false;
    plane_fn fn = choose(false);
    for (uint64_t c = 0; c < n_planes; c++) {
        planes_fill(p, &pl, x + c * p->H * p->W);
        fn(p, &pl, NULL, 0.0f, y + c * p->OH * p->OW);
    }
    planes_free(&pl);
    return true;
}
