/*
** observer.c — PyTorch 1.13's observers (torch/ao/quantization/observer.py) at calibration time:
** MinMaxObserver and MovingAverageMinMaxObserver per tensor, PerChannelMinMaxObserver and
** MovingAveragePerChannelMinMaxObserver per channel, FixedQParamsObserver; _calculate_qparams in
** float32 with torch.round's round-half-to-even.
*/
#include "observer.h"

#include "../exec/exec.h"

#include <math.h>
#include <stdio.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

bool bpcc_obs_has_stats(enum obs_class c)
{
    return c == OC_MINMAX || c == OC_MOVING_AVERAGE_MINMAX || c == OC_PER_CHANNEL_MINMAX ||
           c == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX || c == OC_HISTOGRAM;
}

enum bpcc_status bpcc_obs_init(struct obs_state *o, const struct observer_spec *spec)
{
    memset(o, 0, sizeof *o);
    o->spec = *spec;
    o->per_channel = spec->cls == OC_PER_CHANNEL_MINMAX || spec->cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX;
    if (spec->cls == OC_HISTOGRAM) {
        if (spec->bins < 1 || spec->bins > (1 << 20)) return BPCC_ERR_INVALID;
        o->bins = (uint32_t)spec->bins;
        o->hist = bpcc_malloc(o->bins * sizeof *o->hist);
        if (!o->hist) return BPCC_ERR_NOMEM;
        memset(o->hist, 0, o->bins * sizeof *o->hist);
    }
    if (!o->per_channel && bpcc_obs_has_stats(spec->cls)) {
        o->min = bpcc_malloc(sizeof *o->min);
        o->max = bpcc_malloc(sizeof *o->max);
        if (!o->min || !o->max) {
            bpcc_obs_release(o);
            return BPCC_ERR_NOMEM;
        }
        o->n = 1;
        o->min[0] = INFINITY;
        o->max[0] = -INFINITY;
    }
    return BPCC_OK;
}

void bpcc_obs_release(struct obs_state *o)
{
    bpcc_xfree(o->hist);
    o->hist = NULL;
    bpcc_xfree(o->min);
    bpcc_xfree(o->max);
    o->min = o->max = NULL;
    o->n = 0;
}

static bool moving(const struct obs_state *o)
{
    return o->spec.cls == OC_MOVING_AVERAGE_MINMAX || o->spec.cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX;
}

/* min and max of x[0..n) (n > 0); true when some element is NaN (min and max are then
** meaningless). Vectorized where there is SSE2, and with AVX2 where the CPU has it (chosen at run
** time): four independent accumulators each, so that a min or max waits on its own chain only
** (one accumulator made the scan latency-bound: 15 % of mobilenet_v2's calibration). minps/maxps
** agree with the scalar comparison for every non-NaN input, whatever the order, up to the sign of
** a zero (-0 and +0 compare equal, as they do to torch.aminmax, and give the same qparams); NaN is
** detected apart. */
/* The whole blocks of 4 W elements, W-lane vectors V: returns how many elements it took; lo, hi
** and bad take them in. Each loaded vector goes through XF first and is then handed to PUT with its
** offset (the plain scan: neither does anything; the folding scan: a multiply and a store). A
** macro, so that the SSE2 and AVX2 builds of both are one text. */
#define MINMAX_BLOCKS(V, W, LOAD, STORE, MIN, MAX, UNORD, OR, ZERO, MASK, XF, PUT)                         \
    do {                                                                                                 \
        if (n < 4 * W) return 0;                                                                         \
        V l0 = XF(LOAD(x)), l1 = XF(LOAD(x + W)), l2 = XF(LOAD(x + 2 * W)), l3 = XF(LOAD(x + 3 * W));    \
        V h0 = l0, h1 = l1, h2 = l2, h3 = l3, b = ZERO();                                                \
        uint64_t i = 0;                                                                                  \
        for (; i + 4 * W <= n; i += 4 * W) {                                                             \
            V v0 = XF(LOAD(x + i)), v1 = XF(LOAD(x + i + W)), v2 = XF(LOAD(x + i + 2 * W)),              \
              v3 = XF(LOAD(x + i + 3 * W));                                                              \
            PUT(i, v0, v1, v2, v3);                                                                      \
            b = OR(b, OR(UNORD(v0, v1), UNORD(v2, v3)));                                                 \
            l0 = MIN(l0, v0), h0 = MAX(h0, v0);                                                          \
            l1 = MIN(l1, v1), h1 = MAX(h1, v1);                                                          \
            l2 = MIN(l2, v2), h2 = MAX(h2, v2);                                                          \
            l3 = MIN(l3, v3), h3 = MAX(h3, v3);                                                          \
        }                                                                                                \
        float fl[W], fh[W];                                                                              \
        STORE(fl, MIN(MIN(l0, l1), MIN(l2, l3)));                                                        \
        STORE(fh, MAX(MAX(h0, h1), MAX(h2, h3)));                                                        \
        for (int k = 0; k < W; k++) {                                                                    \
            *lo = fl[k] < *lo ? fl[k] : *lo;                                                             \
            *hi = fh[k] > *hi ? fh[k] : *hi;                                                             \
        }                                                                                                \
        *bad |= MASK(b);                                                                                 \
        return i;                                                                                        \
    } while (0)
#define AS_IS(v) (v)
#define NO_PUT(i, v0, v1, v2, v3) ((void)0)

#ifdef __SSE2__
#define SCALED128(v) _mm_mul_ps(v, sv)
#define PUT128(i, v0, v1, v2, v3) \
    (_mm_storeu_ps(dst + (i), v0), _mm_storeu_ps(dst + (i) + 4, v1), _mm_storeu_ps(dst + (i) + 8, v2), \
     _mm_storeu_ps(dst + (i) + 12, v3))
static uint64_t minmax_sse2(const float *x, uint64_t n, float *lo, float *hi, int *bad)
{
    MINMAX_BLOCKS(__m128, 4, _mm_loadu_ps, _mm_storeu_ps, _mm_min_ps, _mm_max_ps, _mm_cmpunord_ps, _mm_or_ps,
                  _mm_setzero_ps, _mm_movemask_ps, AS_IS, NO_PUT);
}

static uint64_t scale_minmax_sse2(const float *x, uint64_t n, float s, float *dst, float *lo, float *hi, int *bad)
{
    __m128 sv = _mm_set1_ps(s);
    MINMAX_BLOCKS(__m128, 4, _mm_loadu_ps, _mm_storeu_ps, _mm_min_ps, _mm_max_ps, _mm_cmpunord_ps, _mm_or_ps,
                  _mm_setzero_ps, _mm_movemask_ps, SCALED128, PUT128);
}
#undef SCALED128
#undef PUT128
#endif

#ifdef BPCC_AVX2_CLONES
#include <immintrin.h>
#define UNORD256(a, b) _mm256_cmp_ps(a, b, _CMP_UNORD_Q)
#define SCALED256(v) _mm256_mul_ps(v, sv)
#define PUT256(i, v0, v1, v2, v3) \
    (_mm256_storeu_ps(dst + (i), v0), _mm256_storeu_ps(dst + (i) + 8, v1), _mm256_storeu_ps(dst + (i) + 16, v2), \
     _mm256_storeu_ps(dst + (i) + 24, v3))
__attribute__((target("avx2"))) static uint64_t minmax_avx2(const float *x, uint64_t n, float *lo, float *hi, int *bad)
{
    MINMAX_BLOCKS(__m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_min_ps, _mm256_max_ps, UNORD256,
                  _mm256_or_ps, _mm256_setzero_ps, _mm256_movemask_ps, AS_IS, NO_PUT);
}

__attribute__((target("avx2"))) static uint64_t scale_minmax_avx2(const float *x, uint64_t n, float s, float *dst,
                                                                  float *lo, float *hi, int *bad)
{
    __m256 sv = _mm256_set1_ps(s);
    MINMAX_BLOCKS(__m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_min_ps, _mm256_max_ps, UNORD256,
                  _mm256_or_ps, _mm256_setzero_ps, _mm256_movemask_ps, SCALED256, PUT256);
}
#undef UNORD256
#undef SCALED256
#undef PUT256
#endif
#undef MINMAX_BLOCKS
#undef AS_IS
#undef NO_PUT

BPCC_HOT bool bpcc_obs_minmax(const float *x, uint64_t n, float *lo_out, float *hi_out)
{
    float lo = x[0], hi = x[0];
    uint64_t i = 0;
    int bad = 0;
#ifdef BPCC_AVX2_CLONES
    if (bpcc_cpu_avx2()) i = minmax_avx2(x, n, &lo, &hi, &bad);
#endif
#ifdef __SSE2__
    i += minmax_sse2(x + i, n - i, &lo, &hi, &bad);
#endif
    for (; i < n; i++) {
        float v = x[i];
        bad |= v != v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    *lo_out = lo;
    *hi_out = hi;
    return bad != 0;
}

bool bpcc_obs_scale_minmax(const float *x, uint64_t n, float s, float *dst, float *lo_out, float *hi_out)
{
    float lo = x[0] * s, hi = lo;
    uint64_t i = 0;
    int bad = 0;
#ifdef BPCC_AVX2_CLONES
    if (bpcc_cpu_avx2()) i = scale_minmax_avx2(x, n, s, dst, &lo, &hi, &bad);
#endif
#ifdef __SSE2__
    i += scale_minmax_sse2(x + i, n - i, s, dst + i, &lo, &hi, &bad);
#endif
    for (; i < n; i++) {
        float v = x[i] * s;
        dst[i] = v;
        bad |= v != v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    /* as the per-channel scan combines a channel's runs, from its first element on (a zero's sign) */
    *lo_out = lo < dst[0] ? lo : dst[0];
    *hi_out = hi > dst[0] ? hi : dst[0];
    return !bad;
}

/* {==================== HistogramObserver ==================== */

/* torch.histc's bin of each of m values: (x - lo) * bins / (hi - lo), truncated, hi itself in the
** last bin; NaN and values outside [lo, hi] in bin `out` (= bins). Selects are masks, so that the
** loop has no branch and is vectorized. Built for the baseline ISA and for AVX2 (chosen at run
** time; the same IEEE operations, so the same bits). */
static inline __attribute__((always_inline)) void positions(const float *restrict xs, uint64_t m, float lo, float hi,
                                                            float fb, float width, int32_t last, int32_t out,
                                                            int32_t *restrict idx)
{
    for (uint64_t k = 0; k < m; k++) {
        float v = xs[k], t = (v - lo) * fb / width;
        /* in range, 0 <= t <= bins (rounding is monotonic); else t is zeroed through its bits (a
        ** float outside int32's range may not be converted) */
        uint32_t in = -(uint32_t)((v >= lo) & (v <= hi)), tb;
        memcpy(&tb, &t, sizeof tb);
        tb &= in;
        memcpy(&t, &tb, sizeof t);
        int32_t p = (int32_t)t;
        p -= (p > last) & (p - last); /* min(p, last) */
        idx[k] = (int32_t)(((uint32_t)p & in) | ((uint32_t)out & ~in));
    }
}

typedef void (*positions_fn)(const float *, uint64_t, float, float, float, float, int32_t, int32_t, int32_t *);

BPCC_HOT static void positions_base(const float *restrict xs, uint64_t m, float lo, float hi, float fb, float width,
                                    int32_t last, int32_t out, int32_t *restrict idx)
{
    positions(xs, m, lo, hi, fb, width, last, out, idx);
}

#ifdef BPCC_AVX2_CLONES
BPCC_HOT __attribute__((target("avx2"))) static void positions_avx2(const float *restrict xs, uint64_t m, float lo,
                                                                   float hi, float fb, float width, int32_t last,
                                                                   int32_t out, int32_t *restrict idx)
{
    positions(xs, m, lo, hi, fb, width, last, out, idx);
}
#endif

static positions_fn choose_positions(void)
{
#ifdef BPCC_AVX2_CLONES
    if (bpcc_cpu_avx2()) return positions_avx2;
#endif
    return positions_base;
}

/* torch.histc(x, bins, min=lo, max=hi) on float32 (ATen's LINEAR_INTERPOLATION kernel): equal
** bounds take the data's range (dmin, dmax: the observer has scanned it, NaN refused), then widen
** by one; elements outside [lo, hi] and NaN are skipped; the last bin holds its right edge. Counts
** are added to h, which holds zeros. ATen counts in float, one by one; while fewer than 2^24
** elements are counted those floats are exact integers, so they may be counted as integers, four
** interleaved counters per bin: consecutive elements often fall in one bin (a ReLU's zeros), and a
** single counter makes them wait on each other. */
#define HIST_FAST_BINS 2048
BPCC_HOT static void histc_add(const float *x, uint64_t n, uint32_t bins, double lo_d, double hi_d, float dmin, float dmax,
                               float *h)
{
    float lo = (float)lo_d, hi = (float)hi_d;
    if (lo == hi && n) { /* torch.histc takes the data's own range then (the observer scanned it) */
        lo = dmin;
        hi = dmax;
    }
    if (lo == hi) {
        lo -= 1.0f;
        hi += 1.0f;
    }
    float width = hi - lo, fb = (float)bins;
    bool ints = n >= 8192 && n < ((uint64_t)1 << 24) && bins <= HIST_FAST_BINS;
    uint32_t c[4][HIST_FAST_BINS + 1]; /* + 1: the values outside [lo, hi] count in bin `bins` */
    if (ints) memset(c, 0, sizeof c);
    /* the bins of a chunk first, in a loop the compiler vectorizes, then the counts */
    enum { CHUNK = 256 };
    int32_t idx[CHUNK];
    int32_t last = (int32_t)bins - 1, out = (int32_t)bins;
    positions_fn positions_of = choose_positions();
    for (uint64_t i0 = 0; i0 < n; i0 += CHUNK) {
        uint64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        const float *xs = x + i0;
        positions_of(xs, m, lo, hi, fb, width, last, out, idx);
        if (ints) {
            /* four at a time, each to its own counters: four independent increments */
            uint64_t k = 0;
            for (; k + 4 <= m; k += 4) {
                int32_t i0k = idx[k], i1 = idx[k + 1], i2 = idx[k + 2], i3 = idx[k + 3];
                c[0][i0k]++;
                c[1][i1]++;
                c[2][i2]++;
                c[3][i3]++;
            }
            for (; k < m; k++) c[0][idx[k]]++;
        } else
            for (uint64_t k = 0; k < m; k++)
                if (idx[k] < out) h[idx[k]] += 1.0f;
    }
    if (ints)
        for (uint32_t b = 0; b < bins; b++) h[b] += (float)(c[0][b] + c[1][b] + c[2][b] + c[3][b]);
}

/* the exponent of x's lowest set bit (x a nonzero finite double) */
static int low_bit(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int e = (int)(b >> 52 & 0x7ff);
    uint64_t m = b & ((UINT64_C(1) << 52) - 1);
    if (e) m |= UINT64_C(1) << 52;
    return (e ? e : 1) - 1075 + __builtin_ctzll(m);
}

/* acc with v added m times one after the other, in double: in one step where every partial sum is
** exact (then any order, and a product, give the same sum), else one by one. The partial sums
** acc + j v are multiples of 2^t (t: the lower of acc's and v's lowest set bits) no larger than
** |acc| + m |v|; below 2^(53 + t) each is a double. */
double bpcc_obs_add_repeated(double acc, double v, int64_t m)
{
    if (v == 0.0 || m <= 0) return acc;
    int t = low_bit(v), ta = acc != 0.0 ? low_bit(acc) : t;
    t = ta < t ? ta : t;
    double bound = fabs(acc) + (double)m * fabs(v); /* rounded, so compared with margin */
    if (m < (INT64_C(1) << 28) && bound < ldexp(1.0, 53 + t) * 0.999) return acc + (double)m * v;
    for (int64_t j = 0; j < m; j++) acc += v;
    return acc;
}

void bpcc_obs_combine(const float *hist, uint32_t bins, int64_t up, int64_t down, int64_t start, float *comb)
{
    /* PyTorch adds the upsampled histogram element by element (torch.cumsum in double): here each
    ** run of one old bin's copies inside one sampling window is added at once, to the same bits */
    int64_t ulen = (int64_t)bins * up;
    double acc = 0;
    float prev = 0.0f; /* the shifted integral, stored as float32 as PyTorch's zeros() is */
    for (uint32_t b = 0; b < bins; b++) {
        /* the upsampled elements in window b: src in [b down - start, (b + 1) down - start) */
        int64_t s0 = (int64_t)b * down - start, s1 = s0 + down;
        s0 = s0 < 0 ? 0 : s0;
        s1 = s1 > ulen ? ulen : s1;
        while (s0 < s1) {
            int64_t i = s0 / up, run_end = (i + 1) * up < s1 ? (i + 1) * up : s1;
            acc = bpcc_obs_add_repeated(acc, (double)hist[i], run_end - s0);
            s0 = run_end;
        }
        double interp = (acc - (double)prev) / (double)up;
        comb[b] = comb[b] + (float)interp;
        prev = (float)acc;
    }
}

/* Python's int() of a float: truncation (the observer passes int(min_val) to histc) */
static bool py_int(float v, double *out)
{
    if (!isfinite(v)) return false;
    *out = trunc((double)v);
    return true;
}

static enum bpcc_status histogram_observe(struct obs_state *o, const float *x, uint64_t numel, char *why, size_t n_why)
{
    uint32_t bins = o->bins;
    float lo = o->lo_scratch, hi = o->hi_scratch;
    float *mn = &o->min[0], *mx = &o->max[0];
    bool uninit = *mn == INFINITY && *mx == -INFINITY, same = *mn == *mx;
    double ilo, ihi;
    if (uninit || same) {
        *mn = lo;
        *mx = hi;
        if (!py_int(lo, &ilo) || !py_int(hi, &ihi)) {
            snprintf(why, n_why, "HistogramObserver cannot bin a tensor holding infinity");
            return BPCC_ERR_GRAPH;
        }
        memset(o->hist, 0, bins * sizeof *o->hist);
        histc_add(x, numel, bins, ilo, ihi, lo, hi, o->hist);
        o->batches++;
        return BPCC_OK;
    }
    float cmin = lo < *mn ? lo : *mn, cmax = hi > *mx ? hi : *mx;
    /* _adjust_min_max, float32 as the tensors are */
    int64_t up = o->spec.upsample_rate;
    float hbw = (*mx - *mn) / (float)((int64_t)bins * up);
    float span = (float)bins * hbw;
    float q = ceilf((cmax - cmin) / span);
    if (!isfinite(q) || q < 1 || q > 1e9) {
        snprintf(why, n_why, "HistogramObserver: the range cannot be combined (downsample rate %g)", (double)q);
        return BPCC_ERR_GRAPH;
    }
    int64_t down = (int64_t)q;
    float e = (float)down * span - (cmax - cmin);
    cmax = cmax + e;
    int64_t start = (int64_t)nearbyintf((*mn - cmin) / hbw);
    if (!py_int(cmin, &ilo) || !py_int(cmax, &ihi)) {
        snprintf(why, n_why, "HistogramObserver cannot bin a tensor holding infinity");
        return BPCC_ERR_GRAPH;
    }
    float *comb = bpcc_malloc(bins * sizeof *comb);
    if (!comb) return BPCC_ERR_NOMEM;
    memset(comb, 0, bins * sizeof *comb);
    histc_add(x, numel, bins, ilo, ihi, lo, hi, comb);
    if (cmin == *mn && cmax == *mx) {
        for (uint32_t i = 0; i < bins; i++) comb[i] += o->hist[i];
    } else {
        /* _combine_histograms: upsample the old histogram, place it at start, integrate in
        ** double, sample every `down`-th partial sum, difference, divide by the upsample rate */
        int64_t len = (int64_t)bins * down, ulen = (int64_t)bins * up;
        if (start < 0 || start + ulen > len) {
            bpcc_xfree(comb);
            snprintf(why, n_why, "HistogramObserver: the old histogram does not fit the combined range");
            return BPCC_ERR_GRAPH;
        }
        bpcc_obs_combine(o->hist, bins, up, down, start, comb);
    }
    memcpy(o->hist, comb, bins * sizeof *comb);
    bpcc_xfree(comb);
    *mn = cmin;
    *mx = cmax;
    o->batches++;
    return BPCC_OK;
}

/* Python-style floor division of float32 values (c10's div_floor_floating) */
float bpcc_div_floor_exact(float a, float b)
{
    if (b == 0.0f) return a / b;
    float mod = fmodf(a, b);
    float div = (a - mod) / b;
    if (mod != 0.0f && ((b < 0) != (mod < 0))) div -= 1.0f;
    float fl;
    if (div != 0.0f) {
        fl = floorf(div);
        if (div - fl > 0.5f) fl += 1.0f;
    } else {
        fl = copysignf(0.0f, a / b);
    }
    return fl;
}

/* The same through one division where that is sure to agree. For quotients of moderate size c10's
** result is the exact quotient's floor (fmod is exact, and its rounded (a - mod) / b lies within
** 1/2 of the integer it snaps to). Rounding is monotonic and integers of this size are floats, so
** when the rounded quotient q = a / b is not an integer, n < q < n + 1 for n = floor(q) puts the
** exact quotient strictly between n and n + 1 too: n is its floor. When q is a nonzero integer the
** exact quotient may lie just below it: a - q b, whose sign tells, is computed in double, where
** q b is exact (two 24-bit significands) and the sign of a rounded difference is the exact one's.
** Zero, huge quotients, NaN and b = 0 take c10's path. */
float bpcc_div_floor(float a, float b)
{
    float q = a / b, f = floorf(q);
    if (fabsf(q) < 4194304.0f && q != 0.0f) { /* 2^22; false for NaN */
        if (q != f) return f;
        double r = (double)a - (double)q * (double)b;
        return r != 0.0 && (r < 0.0) != (b < 0.0f) ? q - 1.0f : q;
    }
    return bpcc_div_floor_exact(a, b);
}

static float get_norm(float db, float de, float density) { return density * ((de * de * de - db * db * db) / 3.0f); }

/* _compute_quantization_error (bin_width as a Python double of the float32 range, the vectors in
** float32; the final sum in double, where PyTorch sums float32 in its own order).
** W bins at a time in GCC/clang vector types: 4 lanes (16 bytes) in the baseline build, where every
** operation, comparisons included, is one SSE2 instruction (32-byte types get their comparisons
** split lane by lane there), and 8 lanes in the AVX2 build (bpcc_cpu_avx2 chooses). The floor
** divisions take bpcc_div_floor's one-division path (its floor by truncation, exact below 2^22)
** and the bins where that path does not apply take c10's path one by one; each bin's norm is the
** same float operations in the same order as the scalar formula in every lane of either width (no
** FMA in either target), and the sum runs in bin order: both builds give the same bits. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

struct qe_params {
    float bw, fdbw, half, nhalf, top, mid;
    int32_t s;
};

/* one bin's norm, given its floor divisions */
static float qe_norm(const struct qe_params *q, float begin, float db, float de, float hist)
{
    float end = begin + q->bw;
    db = db < 0 ? 0 : db > q->top ? q->top : db;
    de = de < 0 ? 0 : de > q->top ? q->top : de;
    float bcenter = (db + 0.5f) * q->fdbw;
    float density = hist / q->bw;
    float norm = 0.0f;
    norm += get_norm(begin - bcenter, q->half, density);
    norm += (de - db - 1.0f) * (density * q->mid);
    float ecenter = de * q->fdbw + q->half;
    norm += get_norm(q->nhalf, end - ecenter, density);
    return norm;
}

/* The norms of bins i0 .. i0 + W - 1 into out, in vectors VF of W floats (VI: W int32); a macro
** so that the two widths are one text. SEL(m, a, b) is m ? a : b lanewise. */
#define QE_NORMS(VF, VI, W)                                                                                    \
    do {                                                                                                       \
        VI idx;                                                                                                \
        for (int k = 0; k < W; k++) idx[k] = (int32_t)i0 - q->s + k;                                          \
        VF begin = __builtin_convertvector(idx, VF) * q->bw;                                                   \
        VF end = begin + q->bw;                                                                                \
        VF qb = begin / q->fdbw, qe = end / q->fdbw;                                                           \
        const VI absmask = (VI){0} + 0x7fffffff;                                                               \
        const VF zero = {0}, one = zero + 1.0f, big = zero + 4194304.0f; /* 2^22 */                            \
        VI okb = (VF)((VI)qb & absmask) < big, oke = (VF)((VI)qe & absmask) < big; /* false for NaN */         \
        VF cb = SEL(okb, qb, zero), ce = SEL(oke, qe, zero);                                                   \
        VF db = __builtin_convertvector(__builtin_convertvector(cb, VI), VF); /* truncation */                \
        VF de = __builtin_convertvector(__builtin_convertvector(ce, VI), VF);                                  \
        db -= SEL(db > cb, one, zero); /* floor */                                                             \
        de -= SEL(de > ce, one, zero);                                                                         \
        /* bpcc_div_floor one by one where the quotient is integral (a bin edge on a destination edge: \
        ** every few bins), huge or NaN */                                                                     \
        VI slowb = ~(okb & (qb != db)), slowe = ~(oke & (qe != de));                                           \
        VI slow = slowb | slowe;                                                                               \
        int any = 0;                                                                                           \
        for (int k = 0; k < W; k++) any |= slow[k];                                                            \
        if (any)                                                                                               \
            for (int k = 0; k < W; k++) {                                                                      \
                if (slowb[k]) db[k] = bpcc_div_floor(begin[k], q->fdbw);                                       \
                if (slowe[k]) de[k] = bpcc_div_floor(end[k], q->fdbw);                                         \
            }                                                                                                  \
        VF top = zero + q->top;                                                                                \
        db = SEL(db < zero, zero, db);                                                                         \
        db = SEL(db > top, top, db);                                                                           \
        de = SEL(de < zero, zero, de);                                                                         \
        de = SEL(de > top, top, de);                                                                           \
        VF h;                                                                                                  \
        memcpy(&h, hist + i0, sizeof h);                                                                       \
        VF bcenter = (db + 0.5f) * q->fdbw;                                                                    \
        VF density = h / q->bw;                                                                                \
        VF norm = zero;                                                                                        \
        VF x = begin - bcenter;                                                                                \
        norm += density * ((q->half * q->half * q->half - x * x * x) / 3.0f);                                  \
        norm += (de - db - 1.0f) * (density * q->mid);                                                         \
        VF ecenter = de * q->fdbw + q->half;                                                                   \
        VF y = end - ecenter;                                                                                  \
        norm += density * ((y * y * y - q->nhalf * q->nhalf * q->nhalf) / 3.0f);                              \
        memcpy(out, &norm, sizeof norm);                                                                       \
    } while (0)

static inline __attribute__((always_inline)) void qe_norms4(const struct qe_params *q, uint32_t i0, const float *hist,
                                                            float *out)
{
#define SEL(m, a, b) ((v4f)(((v4i)(a) & (m)) | ((v4i)(b) & ~(m))))
    QE_NORMS(v4f, v4i, 4);
#undef SEL
}

static inline __attribute__((always_inline)) void qe_norms8(const struct qe_params *q, uint32_t i0, const float *hist,
                                                            float *out)
{
#define SEL(m, a, b) ((v8f)(((v8i)(a) & (m)) | ((v8i)(b) & ~(m))))
    QE_NORMS(v8f, v8i, 8);
#undef SEL
}
#undef QE_NORMS

/* the sum over the bins, W at a time (W = 4 or 8: one of the norm functions above) */
static inline __attribute__((always_inline)) double qe_sum(const struct qe_params *q, const float *hist, uint32_t bins,
                                                           bool skip_empty, int W)
{
    double sum = 0;
    uint32_t i = 0;
    for (; i + W <= bins; i += W) {
        const float *h = hist + i;
        bool empty = skip_empty;
        for (int k = 0; empty && k < W; k++) empty = h[k] == 0.0f;
        if (empty) continue;
        float norm[8];
        if (W == 8) qe_norms8(q, i, hist, norm);
        else qe_norms4(q, i, hist, norm);
        for (int k = 0; k < W; k++) sum += norm[k];
    }
    for (; i < bins; i++) {
        float begin = (float)((int32_t)i - q->s) * q->bw;
        sum += qe_norm(q, begin, bpcc_div_floor(begin, q->fdbw), bpcc_div_floor(begin + q->bw, q->fdbw), hist[i]);
    }
    return sum;
}

BPCC_HOT static double qe_sum_base(const struct qe_params *q, const float *hist, uint32_t bins, bool skip_empty)
{
    return qe_sum(q, hist, bins, skip_empty, 4);
}

#ifdef BPCC_AVX2_CLONES
BPCC_HOT __attribute__((target("avx2"))) static double qe_sum_avx2(const struct qe_params *q, const float *hist,
                                                                  uint32_t bins, bool skip_empty)
{
    return qe_sum(q, hist, bins, skip_empty, 8);
}
#endif

double bpcc_obs_quant_error(const struct obs_state *o, int64_t s, int64_t e)
{
    uint32_t bins = o->bins;
    double bin_width = ((double)o->max[0] - (double)o->min[0]) / (double)bins;
    double dst_nbins = ldexp(1.0, 8 * (int)(o->spec.dtype == BPCC_DTYPE_QINT32 ? 4 : 1));
    double dbw = bin_width * (double)(e - s + 1) / dst_nbins;
    if (dbw == 0.0) return 0.0;
    struct qe_params q = {.bw = (float)bin_width, .fdbw = (float)dbw, .half = (float)(dbw / 2),
                          .nhalf = (float)(-dbw / 2), .top = (float)(dst_nbins - 1), .s = (int32_t)s}; /* bins <= 2^20 */
    q.mid = get_norm(q.nhalf, q.half, 1.0f); /* times density below, elementwise */
    /* An empty bin's norm is +0 (density 0 times finite terms; the norm starts at +0), which leaves
    ** the sum as it is, unless a cube overflows to inf (0 x inf = NaN): every |x|, |y| below is
    ** under 3 x the histogram's span (begin, end and the destination centers all are), so where
    ** that span cubed is finite, a vector's worth of empty bins in a row is skipped. */
    double span = 3.0 * (double)bins * (double)q.bw;
    bool skip_empty = span * span * span < 1e37;
#ifdef BPCC_AVX2_CLONES
    if (bpcc_cpu_avx2()) return (double)(float)qe_sum_avx2(&q, o->hist, bins, skip_empty);
#endif
    return (double)(float)qe_sum_base(&q, o->hist, bins, skip_empty);
}

/* _non_linear_param_search: the [min, max] that minimizes the L2 quantization error */
enum bpcc_status bpcc_obs_histogram_range(const struct obs_state *o, float *new_min, float *new_max)
{
    uint32_t bins = o->bins;
    float bin_width = (o->max[0] - o->min[0]) / (float)bins;
    double total = 0;
    for (uint32_t i = 0; i < bins; i++) total += o->hist[i];
    total = (double)(float)total;
    float *csum = bpcc_malloc(bins * sizeof *csum);
    if (!csum) return BPCC_ERR_NOMEM;
    double acc = 0;
    for (uint32_t i = 0; i < bins; i++) csum[i] = (float)(acc += o->hist[i]);
    const double step = 1e-5;
    double alpha = 0.0, beta = 1.0, norm_min = INFINITY;
    int64_t start = 0, end = bins - 1;
    while (alpha < beta) {
        double na = alpha + step;
        float ta = (float)(na * total);
        if (!(start < end && csum[start] < ta)) {
            /* the left edge stays while alpha does: step beta on alone (each step the same double
            ** subtraction as a full iteration's) until the right edge would move */
            while (alpha < beta) {
                double nb = beta - step;
                if (end > start && csum[end] > (float)(nb * total)) break;
                beta = nb;
            }
            if (!(alpha < beta)) break;
        }
        double nb = beta - step;
        int64_t l = start, r = end;
        float tb = (float)(nb * total);
        while (l < end && csum[l] < ta) l++;
        while (r > start && csum[r] > tb) r--;
        int64_t ns = start, ne = end;
        if (l - start > end - r) {
            ns = l;
            alpha = na;
        } else {
            ne = r;
            beta = nb;
        }
        if (ns == start && ne == end) continue;
        double norm = bpcc_obs_quant_error(o, ns, ne);
        if (norm > norm_min) break;
        norm_min = norm;
        start = ns;
        end = ne;
    }
    bpcc_xfree(csum);
    *new_min = o->min[0] + bin_width * (float)start;
    *new_max = o->min[0] + bin_width * (float)(end + 1);
    return BPCC_OK;
}

/* }================================================ */

/* one batch's range of a per-tensor observer */
static void take_tensor(struct obs_state *o, float lo, float hi)
{
    float c = (float)o->spec.averaging_constant;
    if (moving(o) && !(o->min[0] == INFINITY && o->max[0] == -INFINITY)) {
        o->min[0] = o->min[0] + c * (lo - o->min[0]);
        o->max[0] = o->max[0] + c * (hi - o->max[0]);
    } else if (moving(o)) {
        o->min[0] = lo;
        o->max[0] = hi;
    } else {
        o->min[0] = lo < o->min[0] ? lo : o->min[0];
        o->max[0] = hi > o->max[0] ? hi : o->max[0];
    }
    o->batches++;
}

/* one batch's per-channel ranges (C of them, malloc'd: kept by the first batch, freed after) */
static void take_channels(struct obs_state *o, float *lo, float *hi, uint64_t C)
{
    float c = (float)o->spec.averaging_constant;
    if (!o->n) {
        o->min = lo;
        o->max = hi;
        o->n = (uint32_t)C;
    } else {
        for (uint64_t ch = 0; ch < C; ch++) {
            if (moving(o)) {
                o->min[ch] = o->min[ch] + c * (lo[ch] - o->min[ch]);
                o->max[ch] = o->max[ch] + c * (hi[ch] - o->max[ch]);
            } else {
                o->min[ch] = lo[ch] < o->min[ch] ? lo[ch] : o->min[ch];
                o->max[ch] = hi[ch] > o->max[ch] ? hi[ch] : o->max[ch];
            }
        }
        bpcc_xfree(lo);
        bpcc_xfree(hi);
    }
    o->batches++;
}

static bool channel_axis(const struct obs_state *o, uint32_t ndim, int64_t *axis, char *why, size_t n_why)
{
    *axis = o->spec.ch_axis < 0 ? o->spec.ch_axis + ndim : o->spec.ch_axis;
    if (*axis >= 0 && *axis < (int64_t)ndim) return true;
    snprintf(why, n_why, "ch_axis %lld is out of range for a %u-dimensional tensor", (long long)o->spec.ch_axis, ndim);
    return false;
}

static bool same_channels(const struct obs_state *o, uint64_t C, int64_t axis, char *why, size_t n_why)
{
    if (!o->n || o->n == C) return true;
    snprintf(why, n_why, "the observed tensor has %llu channels on axis %lld, earlier batches had %u",
             (unsigned long long)C, (long long)axis, o->n);
    return false;
}

BPCC_HOT enum bpcc_status bpcc_obs_observe(struct obs_state *o, const float *x, uint32_t ndim, const int64_t *dims, char *why,
                                  size_t n_why)
{
    if (!bpcc_obs_has_stats(o->spec.cls)) return BPCC_OK;
    uint64_t numel = 1;
    for (uint32_t i = 0; i < ndim; i++) numel *= (uint64_t)dims[i];
    if (!numel) return BPCC_OK; /* forward() returns early on an empty tensor */
    /* one pass: min, max, and whether any element is NaN (per channel: row by row, below) */
    bool nan = false;
    if (!o->per_channel) {
        float lo0, hi0;
        nan = bpcc_obs_minmax(x, numel, &lo0, &hi0);
        if (!nan) {
            o->lo_scratch = lo0;
            o->hi_scratch = hi0;
        }
    }
    if (nan) {
        uint64_t i = 0;
        while (i < numel && !isnan(x[i])) i++;
        snprintf(why, n_why, "the observed tensor holds NaN (element %llu)", (unsigned long long)i);
        return BPCC_ERR_GRAPH;
    }
    if (o->spec.cls == OC_HISTOGRAM) return histogram_observe(o, x, numel, why, n_why);
    if (!o->per_channel) {
        take_tensor(o, o->lo_scratch, o->hi_scratch);
        return BPCC_OK;
    }
    /* per channel: the channel axis first, the rest flattened */
    int64_t axis;
    if (!channel_axis(o, ndim, &axis, why, n_why)) return BPCC_ERR_GRAPH;
    uint64_t C = (uint64_t)dims[axis], inner = 1, outer = 1;
    for (uint32_t i = (uint32_t)axis + 1; i < ndim; i++) inner *= (uint64_t)dims[i];
    for (uint32_t i = 0; i < (uint32_t)axis; i++) outer *= (uint64_t)dims[i];
    if (!same_channels(o, C, axis, why, n_why)) return BPCC_ERR_GRAPH;
    float *lo = bpcc_malloc(C * sizeof *lo), *hi = bpcc_malloc(C * sizeof *hi);
    if (!lo || !hi) {
        bpcc_xfree(lo);
        bpcc_xfree(hi);
        return BPCC_ERR_NOMEM;
    }
    for (uint64_t ch = 0; ch < C; ch++) {
        float a = x[ch * inner], b = a;
        for (uint64_t p = 0; p < outer && inner; p++) {
            float ra, rb;
            nan |= bpcc_obs_minmax(x + (p * C + ch) * inner, inner, &ra, &rb);
            a = ra < a ? ra : a;
            b = rb > b ? rb : b;
        }
        lo[ch] = a;
        hi[ch] = b;
    }
    if (nan) {
        bpcc_xfree(lo);
        bpcc_xfree(hi);
        uint64_t i = 0;
        while (i < numel && !isnan(x[i])) i++;
        snprintf(why, n_why, "the observed tensor holds NaN (element %llu)", (unsigned long long)i);
        return BPCC_ERR_GRAPH;
    }
    take_channels(o, lo, hi, C);
    return BPCC_OK;
}

enum bpcc_status bpcc_obs_observe_range(struct obs_state *o, const float *range, uint32_t ndim, const int64_t *dims,
                                        bool *used)
{
    *used = false;
    if (!bpcc_obs_has_stats(o->spec.cls) || o->spec.cls == OC_HISTOGRAM || !ndim) return BPCC_OK;
    uint64_t C = (uint64_t)dims[0], numel = 1;
    for (uint32_t i = 0; i < ndim; i++) numel *= (uint64_t)dims[i];
    if (!numel) return BPCC_OK;
    if (!o->per_channel) {
        /* the tensor's range is its channels' (min and max do not depend on the order) */
        float lo = range[0], hi = range[C];
        for (uint64_t ch = 1; ch < C; ch++) {
            lo = range[ch] < lo ? range[ch] : lo;
            hi = range[C + ch] > hi ? range[C + ch] : hi;
        }
        take_tensor(o, lo, hi);
        *used = true;
        return BPCC_OK;
    }
    int64_t axis = o->spec.ch_axis < 0 ? o->spec.ch_axis + ndim : o->spec.ch_axis;
    if (axis != 0 || (o->n && o->n != C)) return BPCC_OK; /* observe() scans (or says what is wrong) */
    float *lo = bpcc_malloc(C * sizeof *lo), *hi = bpcc_malloc(C * sizeof *hi);
    if (!lo || !hi) {
        bpcc_xfree(lo);
        bpcc_xfree(hi);
        return BPCC_ERR_NOMEM;
    }
    memcpy(lo, range, C * sizeof *lo);
    memcpy(hi, range + C, C * sizeof *hi);
    take_channels(o, lo, hi, C);
    *used = true;
    return BPCC_OK;
}

/* _calculate_qparams for one (min, max) pair, float32 throughout */
static void qparams_one(const struct observer_spec *s, float min_val, float max_val, float *scale_out, double *zp_out)
{
    int64_t qmin = s->quant_min, qmax = s->quant_max;
    float eps = s->eps;
    float min_neg = min_val < 0.0f ? min_val : 0.0f;
    float max_pos = max_val > 0.0f ? max_val : 0.0f;
    float scale;
    double zp = 0;
    if (s->qscheme == QS_PER_TENSOR_SYMMETRIC || s->qscheme == QS_PER_CHANNEL_SYMMETRIC) {
        max_pos = -min_neg > max_pos ? -min_neg : max_pos;
        scale = max_pos / (float)((double)(qmax - qmin) / 2.0);
        scale = scale > eps ? scale : eps;
        if (s->dtype == BPCC_DTYPE_QUINT8) {
            int64_t sum = qmin + qmax, mid = sum / 2;
            if (sum % 2 && sum < 0) mid--; /* Python's // floors */
            zp = s->has_customized_qrange ? (double)mid : 128;
        }
    } else if (s->qscheme == QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
        scale = (max_val - min_val) / (float)(qmax - qmin);
        if (!(scale > eps)) scale = 1.0f;
        zp = (double)(-1.0f * min_val / scale);
    } else {
        scale = (max_pos - min_neg) / (float)(qmax - qmin);
        scale = scale > eps ? scale : eps;
        float r = nearbyintf(min_neg / scale);
        double z = (double)qmin - (double)r;
        zp = z < (double)qmin ? (double)qmin : z > (double)qmax ? (double)qmax : z;
    }
    *scale_out = scale;
    *zp_out = zp;
}

enum bpcc_status bpcc_obs_qparams(const struct obs_state *o, float **scale, double **zero_point, uint32_t *n)
{
    *scale = NULL;
    *zero_point = NULL;
    *n = 0;
    const struct observer_spec *s = &o->spec;
    if (s->cls == OC_PLACEHOLDER || s->cls == OC_NOOP || s->cls == OC_REUSE_INPUT) return BPCC_OK;
    uint32_t k = s->cls == OC_FIXED_QPARAMS || !o->n ? 1 : o->n;
    float *sc = bpcc_malloc(k * sizeof *sc);
    double *zp = bpcc_malloc(k * sizeof *zp);
    if (!sc || !zp) goto nomem;
    if (s->cls == OC_FIXED_QPARAMS) {
        sc[0] = (float)s->scale;
        zp[0] = (double)s->zero_point;
    } else if (!o->n || (o->n == 1 && !o->per_channel && o->min[0] == INFINITY && o->max[0] == -INFINITY)) {
        sc[0] = 1.0f; /* check_min_max_valid: never observed -> PyTorch's defaults */
        zp[0] = 0;
    } else if (s->cls == OC_HISTOGRAM) {
        float lo, hi;
        if (bpcc_obs_histogram_range(o, &lo, &hi)) goto nomem;
        qparams_one(s, lo, hi, &sc[0], &zp[0]);
    } else {
        for (uint32_t i = 0; i < k; i++) qparams_one(s, o->min[i], o->max[i], &sc[i], &zp[i]);
    }
    *scale = sc;
    *zero_point = zp;
    *n = k;
    return BPCC_OK;
nomem:
    bpcc_xfree(sc);
    bpcc_xfree(zp);
    return BPCC_ERR_NOMEM;
}

/* The statistics a module holds (min_val, max_val; a histogram's counts), as PyTorch's observers
** keep them in their buffers and bpcc calibrate stores them, taken into o (made by bpcc_obs_init
** from the module's spec): *found false when the module holds none (o then as made). Per tensor
** one value each (0-d or [1]); per channel C each, or none yet ([0]). */
enum bpcc_status bpcc_obs_load(struct obs_state *o, const struct bpcc_module *m, bool *found, char *why, size_t n_why)
{
    *found = false;
    const struct bpcc_tensor *lo = bpcc_module_tensor(m, "min_val"), *hi = bpcc_module_tensor(m, "max_val");
    if (!lo || !hi || !bpcc_obs_has_stats(o->spec.cls)) return BPCC_OK;
    uint64_t n = bpcc_tensor_numel(lo);
    if (lo->dtype != BPCC_DTYPE_F32 || hi->dtype != BPCC_DTYPE_F32 || (n && (!lo->data || !hi->data)) ||
        bpcc_tensor_numel(hi) != n || n > UINT32_MAX || (!o->per_channel && n != 1)) {
        snprintf(why, n_why, "its min_val and max_val are not %s float32 tensors of one size",
                 o->per_channel ? "per-channel" : "one-element");
        return BPCC_ERR_GRAPH;
    }
    if (o->per_channel && n) {
        float *a = bpcc_malloc(n * sizeof *a), *b = bpcc_malloc(n * sizeof *b);
        if (!a || !b) {
            bpcc_xfree(a);
            bpcc_xfree(b);
            return BPCC_ERR_NOMEM;
        }
        bpcc_xfree(o->min);
        bpcc_xfree(o->max);
        o->min = a;
        o->max = b;
        o->n = (uint32_t)n;
    }
    if (n) {
        memcpy(o->min, lo->data, n * sizeof(float));
        memcpy(o->max, hi->data, n * sizeof(float));
    }
    if (o->hist) {
        const struct bpcc_tensor *h = bpcc_module_tensor(m, "histogram");
        if (!h || h->dtype != BPCC_DTYPE_F32 || !h->data || bpcc_tensor_numel(h) != o->bins) {
            snprintf(why, n_why, "its histogram is not %u float32 counts", o->bins);
            return BPCC_ERR_GRAPH;
        }
        memcpy(o->hist, h->data, o->bins * sizeof(float));
    }
    *found = true;
    return BPCC_OK;
}

/* {==================== observer modules ==================== */

static const struct bpcc_value *attr_of(const struct bpcc_module *m, const char *k, enum bpcc_value_kind kind)
{
    const struct bpcc_value *v = bpcc_module_attr(m, k);
    return v && v->kind == kind ? v : NULL;
}

int bpcc_obs_type_class(const char *type)
{
    static const char prefix[] = "torch.ao.quantization.";
    if (strncmp(type, prefix, sizeof prefix - 1)) return -1;
    for (int c = 0; c < OC_COUNT; c++)
        if (!strcmp(type + sizeof prefix - 1, bpcc_obs_class_name((enum obs_class)c))) return c;
    return -1;
}

bool bpcc_obs_is_fake_quant_type(const char *type)
{
    static const char prefix[] = "torch.ao.quantization.";
    static const char *const names[] = {"FakeQuantize", "FusedMovingAvgObsFakeQuantize", "FixedQParamsFakeQuantize"};
    if (strncmp(type, prefix, sizeof prefix - 1)) return false;
    type += sizeof prefix - 1;
    for (size_t i = 0; *type == 'F' && i < BPCC_ARRAY_LEN(names); i++) /* of the observers, FixedQParams* only */
        if (!strcmp(type, names[i])) return true;
    return false;
}

const struct bpcc_module *bpcc_obs_fake_quant_observer(const struct bpcc_module *m)
{
    if (!m->first_child || !bpcc_obs_is_fake_quant_type(m->type)) return NULL; /* most modules: no children */
    const struct bpcc_module *c = bpcc_module_child(m, "activation_post_process");
    return c && bpcc_obs_type_class(c->type) >= 0 ? c : NULL;
}

int bpcc_obs_module_class(const struct bpcc_module *m)
{
    int c = bpcc_obs_type_class(m->type);
    if (c >= 0) return c;
    const struct bpcc_module *o = bpcc_obs_fake_quant_observer(m);
    return o ? bpcc_obs_type_class(o->type) : -1;
}

bool bpcc_obs_spec_of_module(const struct bpcc_module *m, struct observer_spec *o)
{
    const struct bpcc_module *inner = bpcc_obs_fake_quant_observer(m);
    if (inner) m = inner; /* a fake quantize's qparams are its observer's (calculate_qparams) */
    int cls = bpcc_obs_module_class(m);
    if (cls < 0) return false;
    memset(o, 0, sizeof *o);
    o->cls = (enum obs_class)cls;
    const struct bpcc_value *v;
    o->dtype = (v = attr_of(m, "dtype", BPCC_VAL_DTYPE)) ? v->u.dtype : BPCC_DTYPE_QUINT8;
    o->qscheme = QS_PER_TENSOR_AFFINE;
    if ((v = attr_of(m, "qscheme", BPCC_VAL_SYMBOL))) {
        const char *q = !strncmp(v->u.s, "torch.", 6) ? v->u.s + 6 : v->u.s;
        for (int i = 0; i < QS_COUNT; i++)
            if (!strcmp(q, bpcc_qscheme_name((enum qscheme)i))) o->qscheme = (enum qscheme)i;
    }
    o->quant_min = (v = attr_of(m, "quant_min", BPCC_VAL_INT)) ? v->u.i : 0;
    o->quant_max = (v = attr_of(m, "quant_max", BPCC_VAL_INT)) ? v->u.i : 255;
    o->has_customized_qrange = (v = attr_of(m, "has_customized_qrange", BPCC_VAL_BOOL)) ? v->u.b : false;
    o->reduce_range = (v = attr_of(m, "reduce_range", BPCC_VAL_BOOL)) ? v->u.b : false;
    o->eps = (v = attr_of(m, "eps", BPCC_VAL_FLOAT)) ? (float)v->u.f : 1.1920928955078125e-07f;
    const struct bpcc_tensor *eps = bpcc_module_tensor(m, "eps"); /* PyTorch's observers keep it as a buffer */
    if (!v && eps && eps->dtype == BPCC_DTYPE_F32 && eps->data && bpcc_tensor_numel(eps) == 1) o->eps = *(const float *)eps->data;
    o->averaging_constant = (v = attr_of(m, "averaging_constant", BPCC_VAL_FLOAT)) ? v->u.f : 0.01;
    o->ch_axis = (v = attr_of(m, "ch_axis", BPCC_VAL_INT)) ? v->u.i : 0;
    o->bins = (v = attr_of(m, "bins", BPCC_VAL_INT)) ? v->u.i : 2048;
    o->upsample_rate = (v = attr_of(m, "upsample_rate", BPCC_VAL_INT)) ? v->u.i : 128;
    const struct bpcc_value *vs = attr_of(m, "scale", BPCC_VAL_FLOAT), *vz = attr_of(m, "zero_point", BPCC_VAL_INT);
    o->scale = vs ? vs->u.f : 1.0;
    o->zero_point = vz ? vz->u.i : 0;
    if (o->cls == OC_FIXED_QPARAMS) { /* PyTorch's FixedQParamsObserver keeps them as buffers */
        const struct bpcc_tensor *ts = bpcc_module_tensor(m, "scale"), *tz = bpcc_module_tensor(m, "zero_point");
        if (!vs && ts && ts->data && ts->dtype == BPCC_DTYPE_F32 && bpcc_tensor_numel(ts) == 1) o->scale = *(const float *)ts->data;
        if (!vz && tz && tz->data && bpcc_tensor_numel(tz) == 1) {
            if (tz->dtype == BPCC_DTYPE_I64) o->zero_point = *(const int64_t *)tz->data;
            else if (tz->dtype == BPCC_DTYPE_I32) o->zero_point = *(const int32_t *)tz->data;
        }
    }
    o->compute_dtype = (v = attr_of(m, "compute_dtype", BPCC_VAL_DTYPE)) ? v->u.dtype : BPCC_DTYPE_NONE;
    o->custom_op_name = "";
    return true;
}

bool bpcc_obs_spec_of_module_memo(const struct bpcc_module *m, struct obs_spec_memo *memo, struct observer_spec *o)
{
    const struct bpcc_value *items = m->attrs.n ? m->attrs.u.seq.items : NULL;
    for (uint32_t i = 0; i < BPCC_ARRAY_LEN(memo->e); i++) {
        if (memo->e[i].type == m->type && memo->e[i].items == items && memo->e[i].n == m->attrs.n) {
            *o = memo->e[i].spec;
            return memo->e[i].ok;
        }
    }
    /* a fake quantize's spec is its child observer's, which its own attributes do not tell: never
    ** remembered (so that no remembered entry is one) */
    if (bpcc_obs_is_fake_quant_type(m->type)) return bpcc_obs_spec_of_module(m, o);
    uint32_t k = memo->next++ % BPCC_ARRAY_LEN(memo->e);
    memo->e[k].ok = bpcc_obs_spec_of_module(m, &memo->e[k].spec);
    memo->e[k].type = m->type;
    memo->e[k].items = items;
    memo->e[k].n = m->attrs.n;
    *o = memo->e[k].spec;
    return memo->e[k].ok;
}

/* }================================================ */
