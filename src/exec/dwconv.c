/*
** dwconv.c — depthwise convolution (one input channel per group, any channel multiplier, stride,
** dilation and padding mode), the layer of MobileNet and EfficientNet blocks.
**
** A GEMM per channel would be all call overhead, and a loop that adds one tap at a time to the
** output row reads and writes that row KH x KW times. Here each input channel is first copied
** into a padded plane, split by column phase when the stride is more than 1 (plane q holds the
** padded columns q, q + sw, q + 2 sw, ...), so that every tap reads a contiguous run of floats
** without bounds tests. Then each output block of DW_B columns is summed over all the taps in
** registers and stored once. The sum runs in the order bias, then taps by row and column, as
** PyTorch's reference loop does; padded taps add kv x 0.
**
** The kernel is compiled twice, for the baseline ISA and for AVX2 (chosen at run time).
*/
#include "exec.h"

#include <string.h>

enum { DW_B = 16 }; /* output columns per block: two 8-lane vectors */

/* the padded, phase-split planes of one input channel: row r (padded row, 0..Hp) of phase q is at
** planes + (q Hp + r) Wr; Wr leaves room for a whole last block to read past the row's end */
static void fill_planes(const struct bpcc_dwconv *p, const float *img, float *planes, int64_t Hp, int64_t Wr)
{
    int64_t Wp = p->W + 2 * p->pw;
    for (int64_t q = 0; q < p->sw; q++) {
        /* the padded columns t sw + q that fall inside the image: t in [lo, hi) */
        int64_t lo = q >= p->pw ? 0 : (p->pw - q + p->sw - 1) / p->sw;
        int64_t hi = (p->pw + p->W - q + p->sw - 1) / p->sw;
        hi = hi < lo ? lo : hi > Wr ? Wr : hi;
        for (int64_t r = 0; r < Hp; r++) {
            float *row = planes + (q * Hp + r) * Wr;
            int64_t iy = r - p->ph;
            if (p->mode == 0 && (iy < 0 || iy >= p->H)) {
                memset(row, 0, (size_t)Wr * sizeof *row);
            } else if (p->mode == 0) {
                const float *line = img + iy * p->W + (lo * p->sw + q - p->pw);
                memset(row, 0, (size_t)lo * sizeof *row);
                if (p->sw == 1) memcpy(row + lo, line, (size_t)(hi - lo) * sizeof *row);
                else
                    for (int64_t t = lo; t < hi; t++) row[t] = line[(t - lo) * p->sw];
                memset(row + hi, 0, (size_t)(Wr - hi) * sizeof *row);
            } else {
                for (int64_t t = 0; t < Wr; t++) {
                    int64_t col = t * p->sw + q;
                    row[t] = col < Wp ? bpcc_pad_at(img, p->H, p->W, iy, col - p->pw, p->mode) : 0.0f;
                }
            }
        }
    }
}

/* GCC and clang vector types (8 lanes; the baseline ISA splits them into two SSE registers) */
typedef float v8 __attribute__((vector_size(32)));

/* (a macro: a function returning a 32-byte vector would change the ABI without AVX) */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v))

/* one output channel: off[t] is tap t's offset into the planes for output (0, 0) */
static inline __attribute__((always_inline)) void dw_channel(const struct bpcc_dwconv *p, const float *planes,
                                                             int64_t Wr, const int64_t *off, const float *k, float bv,
                                                             float *dst)
{
    int64_t taps = p->KH * p->KW;
    for (int64_t oy = 0; oy < p->OH; oy++) {
        const float *base = planes + oy * p->sh * Wr;
        float *out = dst + oy * p->OW;
        for (int64_t ox0 = 0; ox0 < p->OW; ox0 += DW_B) {
            v8 a0 = {bv, bv, bv, bv, bv, bv, bv, bv}, a1 = a0;
            for (int64_t t = 0; t < taps; t++) {
                const float *src = base + off[t] + ox0;
                float kv = k[t];
                v8 x0, x1;
                LOAD8(x0, src);
                LOAD8(x1, src + 8);
                a0 += kv * x0;
                a1 += kv * x1;
            }
            int64_t m = p->OW - ox0 < DW_B ? p->OW - ox0 : DW_B;
            if (m == DW_B) {
                memcpy(out + ox0, &a0, sizeof a0);
                memcpy(out + ox0 + 8, &a1, sizeof a1);
            } else {
                float acc[DW_B];
                memcpy(acc, &a0, sizeof a0);
                memcpy(acc + 8, &a1, sizeof a1);
                memcpy(out + ox0, acc, (size_t)m * sizeof *acc);
            }
        }
    }
}

BPCC_HOT static void dw_channel_base(const struct bpcc_dwconv *p, const float *planes, int64_t Wr, const int64_t *off,
                                     const float *k, float bv, float *dst)
{
    dw_channel(p, planes, Wr, off, k, bv, dst);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DW_HAVE_AVX2 1
BPCC_HOT __attribute__((target("avx2"))) static void dw_channel_avx2(const struct bpcc_dwconv *p, const float *planes,
                                                                    int64_t Wr, const int64_t *off, const float *k,
                                                                    float bv, float *dst)
{
    dw_channel(p, planes, Wr, off, k, bv, dst);
}
#endif

bool bpcc_dwconv(const struct bpcc_dwconv *p, const float *x, const float *w, const float *b, float *y)
{
    int64_t Hp = p->H + 2 * p->ph, Wp = p->W + 2 * p->pw, Wq = (Wp + p->sw - 1) / p->sw;
    int64_t reach = ((p->KW - 1) * p->dw) / p->sw; /* the farthest tap's column offset in its plane */
    int64_t blocks = (p->OW + DW_B - 1) / DW_B;
    int64_t Wr = blocks * DW_B + reach > Wq ? blocks * DW_B + reach : Wq;
    int64_t taps = p->KH * p->KW;
    float *planes = bpcc_malloc((size_t)(p->sw * Hp * Wr) * sizeof(float));
    int64_t *off = bpcc_malloc((size_t)taps * sizeof *off);
    if (!planes || !off) {
        bpcc_xfree(planes);
        bpcc_xfree(off);
        return false;
    }
    for (int64_t ky = 0; ky < p->KH; ky++)
        for (int64_t kx = 0; kx < p->KW; kx++) {
            int64_t col = kx * p->dw;
            off[ky * p->KW + kx] = ((col % p->sw) * Hp + ky * p->dh) * Wr + col / p->sw;
        }
    void (*channel)(const struct bpcc_dwconv *, const float *, int64_t, const int64_t *, const float *, float,
                    float *) = dw_channel_base;
#ifdef DW_HAVE_AVX2
    if (__builtin_cpu_supports("avx2")) channel = dw_channel_avx2;
#endif
    int64_t C = p->C, mult = p->Cout / p->C, P = p->OH * p->OW;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t c = 0; c < C; c++) {
            fill_planes(p, x + (n * C + c) * p->H * p->W, planes, Hp, Wr);
            for (int64_t j = 0; j < mult; j++) {
                int64_t co = c * mult + j;
                channel(p, planes, Wr, off, w + co * taps, b ? b[co] : 0.0f, y + (n * p->Cout + co) * P);
            }
        }
    bpcc_xfree(planes);
    bpcc_xfree(off);
    return true;
}
