/*
** winograd.c — 3x3 convolutions at stride 1 by Winograd's minimal filtering F(2x2, 3x3) (Lavin and
** Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): each 2x2 block of outputs is
** computed from a 4x4 block of inputs with 16 multiplications per input channel instead of 36.
**
** The output is cut into 2x2 tiles. For a block of tile rows, every input channel's 4x4 tiles are
** transformed (V = B^T d B) into 16 matrices V[xi] of [C, tiles]; the weights' 3x3 kernels were
** transformed beforehand (U = G g G^T, bpcc_winograd3x3_weights; the interpreter keeps them per
** module) into 16 matrices U[xi] of [Cout, C]; then 16 GEMMs
** M[xi] = U[xi] V[xi] (OpenBLAS) and the inverse transform (Y = A^T M A) give the outputs. The
** transforms only add, subtract and halve, so they are exact but for rounding; the result differs
** from the direct sum by rounding alone (a few ulp of the largest terms), as any other order of the
** sum does (PyTorch's own oneDNN convolution included).
**
**   G = | 1    0    0  |    B^T = | 1  0 -1  0 |    A^T = | 1  1  1  0 |
**       | 1/2  1/2  1/2|          | 0  1  1  0 |          | 0  1 -1 -1 |
**       | 1/2 -1/2  1/2|          | 0 -1  1  0 |
**       | 0    0    1  |          | 0  1  0 -1 |
*/
#include "exec.h"

#include <cblas.h>
#include <string.h>

/* floats of V and M together per block of tile rows (4 MiB): 256 Ki to 2 Mi floats ran within
** the machine's noise of each other on resnet18 and densenet121, 2 Mi the slowest */
enum { WINO_BLOCK = 1 << 20 };

/* U[xi][co][ci] for one group's weights w [Cog, Cg, 3, 3]; tmp holds 16 Cg floats. A row of
** kernels is transformed into tmp first, so that U is written in 16 sequential runs. */
static void weights(const float *w, int64_t Cog, int64_t Cg, float *U, float *tmp)
{
    int64_t plane = Cog * Cg;
    for (int64_t co = 0; co < Cog; co++) {
        for (int64_t ci = 0; ci < Cg; ci++) {
            const float *g = w + (co * Cg + ci) * 9;
            float t[4][3];
            for (int j = 0; j < 3; j++) {
                t[0][j] = g[j];
                t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
                t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
                t[3][j] = g[6 + j];
            }
            float *u = tmp + ci * 16;
            for (int i = 0; i < 4; i++) {
                u[i * 4 + 0] = t[i][0];
                u[i * 4 + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
                u[i * 4 + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
                u[i * 4 + 3] = t[i][2];
            }
        }
        for (int xi = 0; xi < 16; xi++) {
            float *dst = U + xi * plane + co * Cg;
            for (int64_t ci = 0; ci < Cg; ci++) dst[ci] = tmp[ci * 16 + xi];
        }
    }
}

/* one padded input row: padded columns [-pw, -pw + Wr) of image row y (any padding mode). The
** last tile of an odd output size reaches one row or column past the padded image: only the
** output it would give is dropped, so it reads zeros there (reflection would leave the image). */
static void pad_row(const struct bpcc_window *p, const float *img, int64_t y, int64_t Wr, float *row)
{
    bool inside = y >= 0 && y < p->H, past = y >= p->H + p->ph;
    for (int64_t c = 0; c < Wr; c++) {
        int64_t x = c - p->pw;
        if (inside && x >= 0 && x < p->W) {
            int64_t n = p->W - x < Wr - c ? p->W - x : Wr - c;
            memcpy(row + c, img + y * p->W + x, (size_t)n * sizeof(float));
            c += n - 1;
        } else {
            row[c] = past || x >= p->W + p->pw ? 0.0f : bpcc_pad_at(img, p->H, p->W, y, x, p->mode);
        }
    }
}

/* h[j][tx]: a padded row's 4-wide windows at even columns times B (the horizontal half of B^T d B) */
BPCC_HOT static void row_transform(const float *restrict d, int64_t tW, float *restrict h)
{
    float *restrict h0 = h, *restrict h1 = h + tW, *restrict h2 = h + 2 * tW, *restrict h3 = h + 3 * tW;
    for (int64_t tx = 0; tx < tW; tx++) {
        float e0 = d[2 * tx], e1 = d[2 * tx + 1], e2 = d[2 * tx + 2], e3 = d[2 * tx + 3];
        h0[tx] = e0 - e2;
        h1[tx] = e1 + e2;
        h2[tx] = e2 - e1;
        h3[tx] = e1 - e3;
    }
}

/* the vertical half of B^T d B over a tile row: column j of 4 rows' h into V[i * 4 + j] */
BPCC_HOT static void column_transform(const float *restrict a0, const float *restrict a1, const float *restrict a2,
                                      const float *restrict a3, int64_t tW, float *restrict v0, float *restrict v1,
                                      float *restrict v2, float *restrict v3)
{
    for (int64_t tx = 0; tx < tW; tx++) {
        v0[tx] = a0[tx] - a2[tx];
        v1[tx] = a1[tx] + a2[tx];
        v2[tx] = a2[tx] - a1[tx];
        v3[tx] = a1[tx] - a3[tx];
    }
}

/* V[xi][ci][t] of input channel ci for tile rows [tr0, tr0 + nr) (T = nr tW tiles): the padded
** rows 2 tr0 .. 2 (tr0 + nr) + 1 are transformed once each (neighbouring tile rows share two),
** then combined by fours (the vertical half) */
BPCC_HOT static void inputs(const struct bpcc_window *p, const float *img, int64_t tr0, int64_t nr, int64_t tW,
                            float *row, float *h, float *V, int64_t ci, int64_t Cg, int64_t T)
{
    int64_t Wr = 2 * tW + 2;
    for (int64_t k = 0; k < 2 * nr + 2; k++) {
        pad_row(p, img, 2 * tr0 + k - p->ph, Wr, row);
        row_transform(row, tW, h + k * 4 * tW);
    }
    for (int64_t r = 0; r < nr; r++)
        for (int j = 0; j < 4; j++) {
            const float *a0 = h + ((2 * r) * 4 + j) * tW;
            float *v = V + (j * Cg + ci) * T + r * tW;
            column_transform(a0, a0 + 4 * tW, a0 + 8 * tW, a0 + 12 * tW, tW, v, v + 4 * Cg * T, v + 8 * Cg * T,
                             v + 12 * Cg * T);
        }
}

/* one tile row of output channel co: Y = A^T M A plus the bias, into two output rows o0, o1 of 2 tW */
BPCC_HOT static void output_row(const float *const *m, int64_t tW, float bias, float *restrict o0, float *restrict o1)
{
    const float *restrict m0 = m[0], *restrict m1 = m[1], *restrict m2 = m[2], *restrict m3 = m[3], *restrict m4 = m[4],
                          *restrict m5 = m[5], *restrict m6 = m[6], *restrict m7 = m[7], *restrict m8 = m[8],
                          *restrict m9 = m[9], *restrict m10 = m[10], *restrict m11 = m[11], *restrict m12 = m[12],
                          *restrict m13 = m[13], *restrict m14 = m[14], *restrict m15 = m[15];
    for (int64_t tx = 0; tx < tW; tx++) {
        float a0 = m0[tx] + m4[tx] + m8[tx], a1 = m1[tx] + m5[tx] + m9[tx], a2 = m2[tx] + m6[tx] + m10[tx],
              a3 = m3[tx] + m7[tx] + m11[tx];
        float b0 = m4[tx] - m8[tx] - m12[tx], b1 = m5[tx] - m9[tx] - m13[tx], b2 = m6[tx] - m10[tx] - m14[tx],
              b3 = m7[tx] - m11[tx] - m15[tx];
        o0[2 * tx] = bias + (a0 + a1 + a2);
        o0[2 * tx + 1] = bias + (a1 - a2 - a3);
        o1[2 * tx] = bias + (b0 + b1 + b2);
        o1[2 * tx + 1] = bias + (b1 - b2 - b3);
    }
}

/* output channel co for tile rows [tr0, tr0 + nr); o: 4 tW floats of scratch */
static void outputs(const struct bpcc_window *p, const float *M, int64_t co, int64_t Cog, int64_t T, int64_t tr0,
                    int64_t nr, int64_t tW, float bias, float *o, float *yplane)
{
    for (int64_t r = 0; r < nr; r++) {
        const float *m[16];
        for (int xi = 0; xi < 16; xi++) m[xi] = M + (xi * Cog + co) * T + r * tW;
        output_row(m, tW, bias, o, o + 2 * tW);
        int64_t oy = 2 * (tr0 + r);
        memcpy(yplane + oy * p->OW, o, (size_t)p->OW * sizeof(float));
        if (oy + 1 < p->OH) memcpy(yplane + (oy + 1) * p->OW, o + 2 * tW, (size_t)p->OW * sizeof(float));
    }
}

/* the part of a block of tile rows [r0, r0 + nb) (numbered across the batch, tH to an image) that
** starts at row r and lies in one image: that image n, its first tile row *tr, and the row count */
static int64_t segment(int64_t r, int64_t r0, int64_t nb, int64_t tH, int64_t *n, int64_t *tr)
{
    *n = r / tH;
    *tr = r % tH;
    return tH - *tr < r0 + nb - r ? tH - *tr : r0 + nb - r;
}

size_t bpcc_winograd3x3_size(int64_t groups, int64_t C, int64_t Cout) { return (size_t)(16 * Cout * (C / groups)); }

bool bpcc_winograd3x3_weights(int64_t groups, int64_t C, int64_t Cout, const float *w, float *U)
{
    int64_t Cg = C / groups, Cog = Cout / groups;
    float *tmp = bpcc_malloc((size_t)(16 * Cg) * sizeof(float));
    if (!tmp) return false;
    for (int64_t g = 0; g < groups; g++) weights(w + g * Cog * Cg * 9, Cog, Cg, U + g * 16 * Cog * Cg, tmp);
    bpcc_xfree(tmp);
    return true;
}

bool bpcc_winograd3x3(const struct bpcc_window *p, int64_t N, int64_t groups, int64_t C, int64_t Cout, const float *x,
                      const float *U, const float *b, float *y)
{
    int64_t Cg = C / groups, Cog = Cout / groups;
    int64_t tH = (p->OH + 1) / 2, tW = (p->OW + 1) / 2, R = N * tH; /* tile rows of all the images */
    int64_t per_row = 16 * (Cg + Cog) * tW;                            /* floats of V and M per tile row */
    int64_t rows = WINO_BLOCK / per_row;
    rows = rows < 1 ? 1 : rows > R ? R : rows;
    int64_t Tb = rows * tW;
    float *V = bpcc_malloc((size_t)(16 * Cg * Tb) * sizeof(float));
    float *M = bpcc_malloc((size_t)(16 * Cog * Tb) * sizeof(float));
    /* a padded row, then the row transforms of a block's 2 rows + 2 padded rows (the outputs'
    ** two rows reuse the start) */
    float *scratch = bpcc_malloc((size_t)((2 * tW + 2) + (2 * rows + 2) * 4 * tW) * sizeof(float));
    bool ok = V && M && scratch;
    size_t plane = (size_t)(p->H * p->W), oplane = (size_t)(p->OH * p->OW);
    for (int64_t g = 0; ok && g < groups; g++) {
        const float *Ug = U + g * 16 * Cog * Cg;
        /* a block of tile rows may span images (a batch's small images fill the GEMMs together);
        ** each image's part is transformed from and back into that image */
        for (int64_t r0 = 0; r0 < R; r0 += rows) {
            int64_t nb = R - r0 < rows ? R - r0 : rows, T = nb * tW;
            for (int64_t r = r0, n, tr, cnt; r < r0 + nb; r += cnt) {
                cnt = segment(r, r0, nb, tH, &n, &tr);
                const float *in = x + (size_t)(n * C + g * Cg) * plane;
                for (int64_t ci = 0; ci < Cg; ci++)
                    inputs(p, in + ci * plane, tr, cnt, tW, scratch, scratch + 2 * tW + 2, V + (r - r0) * tW, ci, Cg, T);
            }
            for (int xi = 0; xi < 16; xi++)
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Cog, (int)T, (int)Cg, 1.0f, Ug + xi * Cog * Cg,
                            (int)Cg, V + xi * Cg * T, (int)T, 0.0f, M + xi * Cog * T, (int)T);
            for (int64_t r = r0, n, tr, cnt; r < r0 + nb; r += cnt) {
                cnt = segment(r, r0, nb, tH, &n, &tr);
                float *out = y + (size_t)(n * Cout + g * Cog) * oplane;
                for (int64_t co = 0; co < Cog; co++)
                    outputs(p, M + (r - r0) * tW, co, Cog, T, tr, cnt, tW, b ? b[g * Cog + co] : 0.0f, scratch,
                            out + co * oplane);
            }
        }
    }
    bpcc_xfree(V);
    bpcc_xfree(M);
    bpcc_xfree(scratch);
    return ok;
}
