/*
** observer.h — observers at calibration time: the statistics each PyTorch 1.13 observer keeps and
** its calculate_qparams, in float32 exactly as torch computes them.
*/
#ifndef BPCC_OBSERVER_H
#define BPCC_OBSERVER_H

#include "../ir/ir.h"
#include "../qconfig/qconfig.h"

struct obs_state {
    struct observer_spec spec;
    bool per_channel;
    uint32_t n;          /* values in min/max: 1 per tensor; per channel 0 until the first batch */
    float *min, *max;    /* per tensor start at +inf / -inf, as PyTorch's buffers */
    uint64_t batches;
    float lo_scratch, hi_scratch;
    float *hist;         /* HistogramObserver: `bins` counts over [min, max] */
    uint32_t bins;
};

BPCC_INTERNAL bool bpcc_obs_has_stats(enum obs_class c);
BPCC_INTERNAL enum bpcc_status bpcc_obs_init(struct obs_state *o, const struct observer_spec *spec);
BPCC_INTERNAL void bpcc_obs_release(struct obs_state *o);
/* Observe one float32 tensor. On a bad input (NaN, a channel count that changed) returns
** BPCC_ERR_GRAPH with the reason in why. */
BPCC_INTERNAL enum bpcc_status bpcc_obs_observe(struct obs_state *o, const float *x, uint32_t ndim,
                                                const int64_t *dims, char *why, size_t n_why);
/* The min and max of n > 0 floats (vector code where the CPU has it); true when one is NaN. */
BPCC_INTERNAL bool bpcc_obs_minmax(const float *x, uint64_t n, float *lo, float *hi);
/* dst[k] = x[k] * s for n > 0 floats, and the min and max of dst as a per-channel
** bpcc_obs_observe finds them for a channel of one run, in one pass (batch-norm folding); false
** when one is NaN. */
BPCC_INTERNAL bool bpcc_obs_scale_minmax(const float *x, uint64_t n, float s, float *dst, float *lo, float *hi);
/* Observe a tensor of dims (ndim >= 1, no NaN) by its range along axis 0 instead of its elements:
** range holds dims[0] minima, then dims[0] maxima, each of a channel's elements as the
** per-channel scan finds them (bpcc_tensor_range). Gives what bpcc_obs_observe gives on the
** tensor (per tensor, a zero's sign may differ in the min or max, which no qparams depend on).
** *used false (and nothing done) where the range does not serve: a HistogramObserver, a channel
** axis other than 0, channels that differ from earlier batches; then bpcc_obs_observe. */
BPCC_INTERNAL enum bpcc_status bpcc_obs_observe_range(struct obs_state *o, const float *range, uint32_t ndim,
                                                      const int64_t *dims, bool *used);
/* calculate_qparams: n values of scale (float32) and zero point (an integer, or a float for
** per_channel_affine_float_qparams), malloc'd. Observers without qparams (Placeholder, Noop,
** ReuseInput) give n = 0. */
BPCC_INTERNAL enum bpcc_status bpcc_obs_qparams(const struct obs_state *o, float **scale, double **zero_point,
                                                uint32_t *n);

/* Python-style floor division of float32 values as c10's div_floor_floating (HistogramObserver's
** error estimate uses it per bin): _exact is c10's formula (fmod and corrections), the other the
** same result through one division where that is provably equal */
BPCC_INTERNAL float bpcc_div_floor_exact(float a, float b);
BPCC_INTERNAL float bpcc_div_floor(float a, float b);

/* HistogramObserver's _combine_histograms: the old histogram of `bins` bins, upsampled `up` times,
** placed at `start` on an axis of bins x down, integrated in double in axis order, sampled every
** `down`-th step; each sampled difference over `up` is added to comb[b] (the new batch's counts).
** The caller has checked 0 <= start and start + bins up <= bins down. */
BPCC_INTERNAL void bpcc_obs_combine(const float *hist, uint32_t bins, int64_t up, int64_t down, int64_t start,
                                    float *comb);
/* acc + v + v + ... (m times, in double, one addition after the other), in one step where that is
** sure to give the same bits */
BPCC_INTERNAL double bpcc_obs_add_repeated(double acc, double v, int64_t m);

/* HistogramObserver's _compute_quantization_error for the bins [s, e] of o's histogram, and its
** _non_linear_param_search: the [min, max] of least error (BPCC_ERR_NOMEM when its scratch
** cannot be had: no other range stands in for it) */
BPCC_INTERNAL double bpcc_obs_quant_error(const struct obs_state *o, int64_t s, int64_t e);
BPCC_INTERNAL enum bpcc_status bpcc_obs_histogram_range(const struct obs_state *o, float *new_min, float *new_max);

/* An observer module of a prepared model (type torch.ao.quantization.<Class>, its constructor
** arguments as attributes): its class, or -1 (also from the type alone); and its spec (false when
** not an observer). */
BPCC_INTERNAL int bpcc_obs_module_class(const struct bpcc_module *m);
/* The fake-quantize modules of a QAT model (FakeQuantize, FusedMovingAvgObsFakeQuantize,
** FixedQParamsFakeQuantize): their observer is their child `activation_post_process`, whose
** class and spec bpcc_obs_module_class and bpcc_obs_spec_of_module give for them (NULL: m is no
** fake quantize, or one without an observer child). */
BPCC_INTERNAL bool bpcc_obs_is_fake_quant_type(const char *type);
BPCC_INTERNAL const struct bpcc_module *bpcc_obs_fake_quant_observer(const struct bpcc_module *m);
/* o (from bpcc_obs_init of m's spec) given the statistics m holds; *found false if none;
** BPCC_ERR_GRAPH with the reason in why when they do not fit the spec */
BPCC_INTERNAL enum bpcc_status bpcc_obs_load(struct obs_state *o, const struct bpcc_module *m, bool *found, char *why,
                                             size_t n_why);
BPCC_INTERNAL int bpcc_obs_type_class(const char *type);
BPCC_INTERNAL bool bpcc_obs_spec_of_module(const struct bpcc_module *m, struct observer_spec *o);
/* The same, remembering the last few specs read by their module's type and attribute array:
** observers made from one spec share one array (bpcc_module_share_attrs), so a walk over a
** graph's observers reads a dozen attributes by name once per distinct spec instead of once per
** observer. For a walk that changes no observer's attributes; start from a zeroed memo. */
struct obs_spec_memo {
    struct {
        const char *type;
        const struct bpcc_value *items;
        uint32_t n;
        bool ok;
        struct observer_spec spec;
    } e[4];
    uint32_t next;
};
BPCC_INTERNAL bool bpcc_obs_spec_of_module_memo(const struct bpcc_module *m, struct obs_spec_memo *memo,
                                                struct observer_spec *o);

#endif
