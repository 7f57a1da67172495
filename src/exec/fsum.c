/*
** fsum.c — float sums in PyTorch's order, of a contiguous array and of the columns of a row-major
** block, so that mean-like reductions (global average pooling, x.mean(dims), x.sum(dims)) give
** PyTorch's bits, not only its value.
**
** Why the order matters: a quantized model's activations lie on a grid (multiples of a scale), so
** the mean of 16 of them often lies exactly half-way between two steps of the next quantize node,
** and the last ulp of the sum decides which step it rounds to. Summed in another order (or in
** double), efficientnet_v2_s's first squeeze-excitation block flipped a step there, which then
** spread to up to 5 steps at the output.
**
** The order, measured bit-exact against PyTorch 1.13's CPU sum on this machine's AVX2 kernels
** (every length 1..300 and some large ones, and mean over the inner dimensions, adaptive average
** pooling to 1): ATen's cascade sum on 8-lane vectors. An array of n >= 8 is read as n / 8
** vectors and a scalar tail; the vectors are summed lane by lane (below), the tail in order into
** a scalar that then adds the 8 lanes in order. Shorter arrays take the same lane-by-lane sum
** with one lane. The lane-by-lane sum of m items (vectors or scalars) takes them four at a time
** as the rows of a cascade (four running partial sums, one per position in the group), adds
** the m % 4 left over to the first partial, and the other three partials to it in order. The
** cascade sums each of its columns over the rows: rows go into level 0, and every 2^p rows
** (p = max(4, ceil(log2 rows) / 4)) level 0 is carried into level 1, level 1 into level 2 when
** its count of carries is a multiple of 2^p too, and so on over 4 levels; at the end levels
** 1..3 are added to level 0 in order.
**
** A sum over an outer dimension (x.sum(1) of [N, C, H, W]) sums each column of a [rows, cols]
** block: PyTorch takes blocks of 4 vectors of columns, each column by the cascade over the rows,
** then the columns left by the lane-by-lane sum over the rows (with fewer than 8 columns, groups
** of 4 columns by the cascade, the rest by the lane-by-lane sum).
**
** With more threads PyTorch splits a large reduction to one number (32768 elements and more)
** across them, in another order; the conformance test of these sums runs PyTorch on one thread.
*/
#include "exec.h"

#define LANES 8  /* AVX2 floats */
#define GROUP 4  /* items summed side by side */
#define LEVELS 4 /* of the cascade */

static int ceil_log2(uint64_t x) { return x <= 2 ? 1 : 64 - __builtin_clzll(x - 1); }

/* acc[k] += row[k] for the GROUP * LANES floats of a dense row: a constant trip count, which the
** compiler turns into vector adds (lane by lane, so the same bits) */
static inline void add_dense(float *restrict acc, const float *restrict row)
{
    for (int k = 0; k < GROUP * LANES; k++) acc[k] += row[k];
}

/* acc[g * width + l] += row[g * gs + l] for g < ng, l < width: any row */
static inline void add_strided(float *restrict acc, const float *restrict row, uint64_t gs, int ng, int width)
{
    for (int g = 0; g < ng; g++)
        for (int l = 0; l < width; l++) acc[g * width + l] += row[(uint64_t)g * gs + (uint64_t)l];
}

/* out[g * width + l] = the cascade sum over rows r < rows of x[r * rs + g * gs + l], for g < ng and
** l < width (ng * width <= GROUP * LANES) */
BPCC_HOT static void cascade(const float *x, uint64_t rs, uint64_t gs, int ng, int width, uint64_t rows, float *out)
{
    float acc[LEVELS][GROUP * LANES] = {{0}};
    int n = ng * width, p = ceil_log2(rows) / LEVELS;
    bool dense = n == GROUP * LANES && (ng == 1 || gs == (uint64_t)width); /* a row is n floats in a row */
    if (p < 4) p = 4;
    uint64_t step = (uint64_t)1 << p, mask = step - 1, r = 0;
    while (r + step <= rows) {
        if (dense) /* chosen outside the loop, which then vectorizes */
            for (uint64_t j = 0; j < step; j++, r++) add_dense(acc[0], x + r * rs);
        else
            for (uint64_t j = 0; j < step; j++, r++) add_strided(acc[0], x + r * rs, gs, ng, width);
        for (int v = 1; v < LEVELS; v++) {
            for (int k = 0; k < n; k++) {
                acc[v][k] += acc[v - 1][k];
                acc[v - 1][k] = 0;
            }
            if (r & (mask << (v * p))) break;
        }
    }
    for (; r < rows; r++) add_strided(acc[0], x + r * rs, gs, ng, width); /* fewer than 2^p rows */
    for (int v = 1; v < LEVELS; v++)
        for (int k = 0; k < n; k++) acc[0][k] += acc[v][k];
    for (int k = 0; k < n; k++) out[k] = acc[0][k];
}

/* out[l] (l < width) = the lane-by-lane sum of m items of width floats each, item i at x + i * stride */
static void items_sum(const float *x, uint64_t stride, int width, uint64_t m, float *out)
{
    float part[GROUP * LANES]; /* part[g * width + l]: lane l of the partial at group position g */
    uint64_t groups = m / GROUP;
    cascade(x, GROUP * stride, stride, GROUP, width, groups, part);
    for (uint64_t i = groups * GROUP; i < m; i++)
        for (int l = 0; l < width; l++) part[l] += x[i * stride + (uint64_t)l];
    for (int g = 1; g < GROUP; g++)
        for (int l = 0; l < width; l++) part[l] += part[g * width + l];
    for (int l = 0; l < width; l++) out[l] = part[l];
}

float bpcc_fsum(const float *x, uint64_t n)
{
    if (n < LANES) {
        float s;
        items_sum(x, 1, 1, n, &s);
        return s;
    }
    uint64_t nv = n / LANES;
    float lane[LANES], s = 0;
    items_sum(x, LANES, LANES, nv, lane);
    for (uint64_t i = nv * LANES; i < n; i++) s += x[i];
    for (int k = 0; k < LANES; k++) s += lane[k];
    return s;
}

void bpcc_fsum_columns(const float *x, uint64_t rows, uint64_t cols, float *out)
{
    /* at least a vector of columns: blocks of GROUP vectors by the cascade, then single vectors
    ** and the columns left over by the lane-by-lane sum; fewer: groups of GROUP columns by the
    ** cascade, the rest by the lane-by-lane sum */
    uint64_t block = cols >= LANES ? GROUP * LANES : GROUP, k = 0;
    for (; k + block <= cols; k += block) cascade(x + k, cols, 0, 1, (int)block, rows, out + k);
    if (cols >= LANES)
        for (; k + LANES <= cols; k += LANES) items_sum(x + k, cols, LANES, rows, out + k);
    for (; k < cols; k++) items_sum(x + k, cols, 1, rows, out + k);
}
