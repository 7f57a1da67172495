/*
** check_exec.c — the reference interpreter's kernels against direct formulas on hand-written
** graphs, its error messages, and every allocation failure (the conformance suite compares whole
** models with PyTorch eager).
*/
#include "testutil.h"

#include "exec/exec.h"
#include "calib/observer.h" /* bpcc_div_floor */

#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

struct model {
    struct bpcc_graph *g;
};

static struct bpcc_graph *parse(const char *text)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    ck_assert_msg(bpcc_graph_parse(text, strlen(text), "m.bpcc", &g, &d) == BPCC_OK, "%s", tu_msg(&d));
    return g;
}

/* give module `m` a float32 tensor `name` with values f(i) */
static void set_tensor(struct bpcc_graph *g, const char *m, const char *name, uint32_t ndim, const int64_t *dims,
                       float (*f)(uint64_t))
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_tensor *t;
    ck_assert_int_eq(bpcc_tensor_new(g, BPCC_DTYPE_F32, ndim, dims, &t, &d), BPCC_OK);
    float *p = bpcc_tensor_data(t);
    for (uint64_t i = 0; i < bpcc_tensor_numel(t); i++) p[i] = f(i);
    ck_assert_int_eq(bpcc_module_set_tensor(bpcc_graph_find_module(g, m), name, BPCC_TENSOR_PARAM, t, &d), BPCC_OK);
}

static float ramp(uint64_t i) { return (float)((int64_t)(i * 7919 % 23) - 11) / 8.0f; }
static float ramp2(uint64_t i) { return (float)((int64_t)(i * 104729 % 17) - 8) / 4.0f; }

static struct xtensor *input(uint32_t ndim, const int64_t *dims, float (*f)(uint64_t))
{
    struct xtensor *t = bpcc_xtensor_new(ndim, dims);
    for (uint64_t i = 0; i < t->numel; i++) t->data[i] = f(i);
    return t;
}

/* run g on one input; the output value */
static enum bpcc_status run1(struct bpcc_graph *g, struct xtensor *x, struct xval *out, struct bpcc_diag *d)
{
    struct bpcc_exec *e;
    enum bpcc_status s = bpcc_exec_new(g, 1, &e, d);
    if (s) return s;
    struct xval in = {.k = XV_TENSOR, .u.t = x};
    s = bpcc_exec_run(e, &in, 1, out, d);
    bpcc_exec_free(e);
    return s;
}

/* an interpreter for g, kept over several runs */
static struct bpcc_exec *exec_of(struct bpcc_graph *g)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_exec *e;
    ck_assert_msg(bpcc_exec_new(g, 1, &e, &d) == BPCC_OK, "%s", tu_msg(&d));
    return e;
}

/* one more run of the interpreter e on one input x; the output value */
#define RUN_ON(e, x, out)                                                                      \
    do {                                                                                       \
        struct bpcc_diag d_;                                                                   \
        bpcc_diag_init(&d_);                                                                   \
        struct xval in_ = {.k = XV_TENSOR, .u.t = (x)};                                        \
        ck_assert_msg(bpcc_exec_run(e, &in_, 1, out, &d_) == BPCC_OK, "%s", tu_msg(&d_));      \
    } while (0)

#define RUN(g, x, out)                                                          \
    do {                                                                        \
        struct bpcc_diag d_;                                                    \
        bpcc_diag_init(&d_);                                                    \
        ck_assert_msg(run1(g, x, out, &d_) == BPCC_OK, "%s", tu_msg(&d_));      \
    } while (0)

START_TEST(conv2d_with_stride_padding_dilation_and_groups_matches_the_formula)
{
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule c : torch.nn.Conv2d {in_channels: 4, out_channels: 6, kernel_size: (3, 2), "
                                 "stride: (2, 1), padding: (1, 1), dilation: (1, 2), groups: 2}\n"
                                 "  param weight : f32[6, 2, 3, 2]\n  param bias : f32[6]\n\ngraph\n"
                                 "  %x = placeholder x ()\n  %c = call_module c (%x,)\n  %output = output output (%c,)\n");
    set_tensor(g, "c", "weight", 4, (int64_t[]){6, 2, 3, 2}, ramp);
    set_tensor(g, "c", "bias", 1, (int64_t[]){6}, ramp2);
    struct xtensor *x = input(4, (int64_t[]){2, 4, 7, 6}, ramp2);
    struct xval out;
    RUN(g, x, &out);
    ck_assert_int_eq(out.k, XV_TENSOR);
    const struct xtensor *y = out.u.t;
    /* OH = (7 + 2 - 1*(3-1) - 1)/2 + 1 = 4, OW = (6 + 2 - 2*(2-1) - 1)/1 + 1 = 6 */
    ck_assert_int_eq(y->dims[2], 4);
    ck_assert_int_eq(y->dims[3], 6);
    const float *w = bpcc_module_tensor(bpcc_graph_find_module(g, "c"), "weight")->data;
    const float *b = bpcc_module_tensor(bpcc_graph_find_module(g, "c"), "bias")->data;
    for (int n = 0; n < 2; n++)
        for (int co = 0; co < 6; co++)
            for (int oy = 0; oy < 4; oy++)
                for (int ox = 0; ox < 6; ox++) {
                    double s = b[co];
                    int gidx = co / 3;
                    for (int ci = 0; ci < 2; ci++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 2; kx++) {
                                int iy = oy * 2 - 1 + ky, ix = ox - 1 + kx * 2;
                                if (iy < 0 || iy >= 7 || ix < 0 || ix >= 6) continue;
                                s += (double)w[((co * 2 + ci) * 3 + ky) * 2 + kx] *
                                     x->data[((n * 4 + gidx * 2 + ci) * 7 + iy) * 6 + ix];
                            }
                    float got = y->data[((n * 6 + co) * 4 + oy) * 6 + ox];
                    ck_assert_msg(fabs(got - s) < 1e-5, "conv at %d %d %d %d: %g vs %g", n, co, oy, ox, got, s);
                }
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(a_convolution_unfolded_in_blocks_of_rows_matches_the_formula)
{
    /* K = 64 x 3 x 3 = 576 and 36 output columns: 2^19 / (576 x 36) = 25 rows per block, so the 36
    ** output rows take a block of 25 and a block of 11 */
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule c : torch.nn.Conv2d {in_channels: 64, out_channels: 3, kernel_size: 3, "
                                 "stride: 2, padding: 1}\n  param weight : f32[3, 64, 3, 3]\n  param bias : f32[3]\n\ngraph\n"
                                 "  %x = placeholder x ()\n  %c = call_module c (%x,)\n  %output = output output (%c,)\n");
    set_tensor(g, "c", "weight", 4, (int64_t[]){3, 64, 3, 3}, ramp);
    set_tensor(g, "c", "bias", 1, (int64_t[]){3}, ramp2);
    struct xtensor *x = input(4, (int64_t[]){1, 64, 71, 72}, ramp2);
    struct xval out;
    RUN(g, x, &out);
    const struct xtensor *y = out.u.t;
    ck_assert_int_eq(y->dims[2], 36);
    ck_assert_int_eq(y->dims[3], 36);
    const float *w = bpcc_module_tensor(bpcc_graph_find_module(g, "c"), "weight")->data;
    const float *b = bpcc_module_tensor(bpcc_graph_find_module(g, "c"), "bias")->data;
    for (int co = 0; co < 3; co++)
        for (int oy = 0; oy < 36; oy++)
            for (int ox = 0; ox < 36; ox++) {
                double sum = b[co];
                for (int ci = 0; ci < 64; ci++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                            if (iy < 0 || iy >= 71 || ix < 0 || ix >= 72) continue;
                            sum += (double)w[((co * 64 + ci) * 3 + ky) * 3 + kx] * x->data[(ci * 71 + iy) * 72 + ix];
                        }
                float got = y->data[(co * 36 + oy) * 36 + ox];
                ck_assert_msg(fabs(got - sum) < 1e-4, "conv at %d %d %d: %g vs %g", co, oy, ox, got, sum);
            }
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

/* the input element at (iy, ix) of an H x W plane padded as torch's padding modes do */
static float padded(const float *img, int H, int W, int iy, int ix, const char *mode)
{
    if (!strcmp(mode, "reflect")) {
        iy = iy < 0 ? -iy : iy >= H ? 2 * H - 2 - iy : iy;
        ix = ix < 0 ? -ix : ix >= W ? 2 * W - 2 - ix : ix;
    } else if (!strcmp(mode, "replicate")) {
        iy = iy < 0 ? 0 : iy >= H ? H - 1 : iy;
        ix = ix < 0 ? 0 : ix >= W ? W - 1 : ix;
    } else if (!strcmp(mode, "circular")) {
        iy = (iy + H) % H;
        ix = (ix + W) % W;
    } else if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
        return 0.0f;
    }
    return img[iy * W + ix];
}

START_TEST(depthwise_conv_matches_the_formula_in_every_padding_mode)
{
    /* 3 input channels, multiplier 2; rows of 40 columns: two full 16-column blocks and a tail */
    const char *modes[] = {"zeros", "reflect", "replicate", "circular"};
    for (int mi = 0; mi < 4; mi++)
        for (int sw = 1; sw <= 3; sw++) {
            char text[1024];
            snprintf(text, sizeof text,
                     "bpcc-model 1\n\nmodule c : torch.nn.Conv2d {in_channels: 3, out_channels: 6, kernel_size: (3, 4), "
                     "stride: (2, %d), padding: (2, 3), dilation: (1, 2), groups: 3, padding_mode: \"%s\"}\n"
                     "  param weight : f32[6, 1, 3, 4]\n  param bias : f32[6]\n\ngraph\n"
                     "  %%x = placeholder x ()\n  %%c = call_module c (%%x,)\n  %%output = output output (%%c,)\n",
                     sw, modes[mi]);
            struct bpcc_graph *g = parse(text);
            set_tensor(g, "c", "weight", 4, (int64_t[]){6, 1, 3, 4}, ramp);
            set_tensor(g, "c", "bias", 1, (int64_t[]){6}, ramp2);
            int H = 5, W = 40;
            struct xtensor *x = input(4, (int64_t[]){2, 3, H, W}, ramp2);
            struct xval out;
            RUN(g, x, &out);
            const struct xtensor *y = out.u.t;
            int OH = (H + 4 - 2 - 1) / 2 + 1, OW = (W + 6 - 6 - 1) / sw + 1;
            ck_assert_int_eq(y->dims[2], OH);
            ck_assert_int_eq(y->dims[3], OW);
            const float *w = bpcc_module_tensor(bpcc_graph_find_module(g, "c"), "weight")->data;
            const float *b = bpcc_module_tensor(bpcc_graph_find_module(g, "c"), "bias")->data;
            for (int n = 0; n < 2; n++)
                for (int co = 0; co < 6; co++)
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox++) {
                            double sum = b[co];
                            const float *img = x->data + (n * 3 + co / 2) * H * W;
                            for (int ky = 0; ky < 3; ky++)
                                for (int kx = 0; kx < 4; kx++)
                                    sum += (double)w[(co * 3 + ky) * 4 + kx] *
                                           padded(img, H, W, oy * 2 - 2 + ky, ox * sw - 3 + kx * 2, modes[mi]);
                            float got = y->data[((n * 6 + co) * OH + oy) * OW + ox];
                            ck_assert_msg(fabs(got - sum) < 1e-5, "%s stride %d at %d %d %d %d: %g vs %g", modes[mi], sw, n,
                                          co, oy, ox, got, sum);
                        }
            bpcc_xval_release(&out);
            bpcc_xtensor_free(x);
            bpcc_graph_free(g);
        }
}
END_TEST

/* values with full mantissas (the ramps' eighths would make any order of the sum exact) */
static float noise(uint64_t i) { return (float)((int64_t)(i * 2654435761u % 1999) - 999) / 337.0f; }

/* the direct sum of a 3x3 convolution at stride 1 (groups g, padding ph/pw in `mode`) at one
** output, and the sum of its terms' magnitudes (the scale of any summation order's rounding) */
static double conv3x3_at(const float *x, const float *w, const float *b, int C, int H, int W, int groups, int Cout,
                         int ph, int pw, const char *mode, int n, int co, int oy, int ox, double *mag)
{
    int Cg = C / groups, g = co / (Cout / groups);
    double sum = b ? b[co] : 0.0;
    *mag = fabs(sum);
    for (int ci = 0; ci < Cg; ci++)
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                double t = (double)w[((co * Cg + ci) * 3 + ky) * 3 + kx] *
                           padded(x + ((size_t)n * C + g * Cg + ci) * H * W, H, W, oy - ph + ky, ox - pw + kx, mode);
                sum += t;
                *mag += fabs(t);
            }
    return sum;
}

START_TEST(winograd_3x3_convolution_matches_the_formula)
{
    /* odd and even output sizes (the last tile cut), every padding mode, groups, with and without
    ** bias, two images; reflect padding of H - 1 with odd output sizes (the cut tile reaches past
    ** the padding); an image tall enough to take several blocks of tile rows; and three images whose
    ** tile rows share blocks (32 rows a block, 11 an image: a block starts and ends inside one) */
    struct {
        int N, C, Cout, groups, H, W, ph, pw, mode;
        bool bias;
    } cases[] = {
        {2, 16, 24, 1, 15, 13, 1, 1, 0, true},  {2, 16, 16, 1, 14, 16, 0, 0, 0, false}, {1, 32, 32, 2, 13, 12, 2, 1, 0, true},
        {2, 16, 16, 1, 15, 13, 1, 1, 1, true},  {1, 16, 16, 1, 12, 11, 2, 2, 1, false}, {2, 16, 20, 1, 15, 13, 1, 2, 2, true},
        {1, 16, 16, 1, 13, 15, 3, 3, 2, true},  {2, 16, 16, 1, 15, 13, 1, 1, 3, true},  {1, 32, 48, 2, 11, 14, 2, 3, 3, false},
        {1, 16, 16, 1, 5, 7, 4, 6, 1, true}, {1, 16, 16, 1, 75, 128, 1, 1, 0, true}, {3, 16, 16, 1, 21, 128, 1, 1, 0, true},
    };
    const char *modes[] = {"zeros", "reflect", "replicate", "circular"};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int N = cases[k].N, C = cases[k].C, Cout = cases[k].Cout, groups = cases[k].groups, H = cases[k].H, W = cases[k].W;
        int ph = cases[k].ph, pw = cases[k].pw, OH = H + 2 * ph - 2, OW = W + 2 * pw - 2, Cg = C / groups;
        float *x = malloc(sizeof(float) * N * C * H * W), *w = malloc(sizeof(float) * Cout * Cg * 9), b[64];
        float *y = malloc(sizeof(float) * N * Cout * OH * OW);
        float *U = malloc(sizeof(float) * bpcc_winograd3x3_size(groups, C, Cout));
        for (int i = 0; i < N * C * H * W; i++) x[i] = noise((uint64_t)i);
        for (int i = 0; i < Cout * Cg * 9; i++) w[i] = noise((uint64_t)i * 3 + 1);
        for (int i = 0; i < Cout; i++) b[i] = noise((uint64_t)i + 5);
        struct bpcc_window p = {H, W, 3, 3, OH, OW, 1, 1, ph, pw, 1, 1, cases[k].mode, 0.0f};
        ck_assert(bpcc_winograd3x3_weights(groups, C, Cout, w, U));
        ck_assert(bpcc_winograd3x3(&p, N, groups, C, Cout, x, U, cases[k].bias ? b : NULL, y));
        double worst = 0;
        for (int n = 0; n < N; n++)
            for (int co = 0; co < Cout; co++)
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        double mag, want = conv3x3_at(x, w, cases[k].bias ? b : NULL, C, H, W, groups, Cout, ph, pw,
                                                      modes[cases[k].mode], n, co, oy, ox, &mag);
                        double err = fabs(y[((n * Cout + co) * OH + oy) * OW + ox] - want) / (mag + 1e-30);
                        worst = err > worst ? err : worst;
                        ck_assert_msg(err < 1e-6, "case %zu (%s) at %d %d %d %d: %.9g vs %.9g", k, modes[cases[k].mode], n,
                                      co, oy, ox, y[((n * Cout + co) * OH + oy) * OW + ox], want);
                    }
        ck_assert_msg(worst > 0, "case %zu: exact to the last bit everywhere: the check cannot tell", k);
        free(x);
        free(w);
        free(y);
        free(U);
    }
}
END_TEST

START_TEST(winograd_weights_kept_between_runs_are_each_modules_own)
{
    /* two convolutions of one shape in a row, each taken by Winograd (16 channels, 8 x 8 tiles):
    ** the second run uses the transformed weights kept from the first; each conv must use its own */
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule a : torch.nn.Conv2d {in_channels: 16, out_channels: 16, kernel_size: 3, "
                                 "padding: 1}\n  param weight : f32[16, 16, 3, 3]\n  param bias : f32[16]\n"
                                 "module b : torch.nn.Conv2d {in_channels: 16, out_channels: 16, kernel_size: 3, padding: 1}\n"
                                 "  param weight : f32[16, 16, 3, 3]\n  param bias : f32[16]\n\ngraph\n"
                                 "  %x = placeholder x ()\n  %a = call_module a (%x,)\n  %b = call_module b (%a,)\n"
                                 "  %output = output output ((%a, %b),)\n");
    set_tensor(g, "a", "weight", 4, (int64_t[]){16, 16, 3, 3}, noise);
    set_tensor(g, "a", "bias", 1, (int64_t[]){16}, ramp2);
    set_tensor(g, "b", "weight", 4, (int64_t[]){16, 16, 3, 3}, ramp2);
    set_tensor(g, "b", "bias", 1, (int64_t[]){16}, noise);
    const float *wa = bpcc_module_tensor(bpcc_graph_find_module(g, "a"), "weight")->data;
    const float *ba = bpcc_module_tensor(bpcc_graph_find_module(g, "a"), "bias")->data;
    const float *wb = bpcc_module_tensor(bpcc_graph_find_module(g, "b"), "weight")->data;
    const float *bb = bpcc_module_tensor(bpcc_graph_find_module(g, "b"), "bias")->data;
    struct bpcc_exec *e = exec_of(g);
    for (int run = 0; run < 3; run++) {
        struct xtensor *x = input(4, (int64_t[]){1, 16, 16, 16}, run ? noise : ramp2);
        struct xval out;
        RUN_ON(e, x, &out);
        ck_assert_int_eq(out.k, XV_SEQ);
        const struct xtensor *ya = out.u.seq.items[0].u.t, *yb = out.u.seq.items[1].u.t;
        for (int co = 0; co < 16; co++)
            for (int oy = 0; oy < 16; oy++)
                for (int ox = 0; ox < 16; ox++) {
                    double mag, want = conv3x3_at(x->data, wa, ba, 16, 16, 16, 1, 16, 1, 1, "zeros", 0, co, oy, ox, &mag);
                    ck_assert_msg(fabs(ya->data[(co * 16 + oy) * 16 + ox] - want) < 1e-6 * mag, "run %d a at %d %d %d", run,
                                  co, oy, ox);
                    want = conv3x3_at(ya->data, wb, bb, 16, 16, 16, 1, 16, 1, 1, "zeros", 0, co, oy, ox, &mag);
                    ck_assert_msg(fabs(yb->data[(co * 16 + oy) * 16 + ox] - want) < 1e-6 * mag, "run %d b at %d %d %d", run,
                                  co, oy, ox);
                }
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
    }
    bpcc_exec_free(e);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(infinities_reach_a_winograd_sized_convolution_as_the_direct_sum_has_them)
{
    /* Winograd's transforms would turn an infinite input or weight into NaN (inf - inf) where the
    ** direct sum gives the infinity: such convolutions take the direct path */
    for (int which = 0; which < 2; which++) {
        struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule c : torch.nn.Conv2d {in_channels: 16, out_channels: 16, "
                                     "kernel_size: 3, padding: 1, bias: False}\n  param weight : f32[16, 16, 3, 3]\n\ngraph\n"
                                     "  %x = placeholder x ()\n  %c = call_module c (%x,)\n  %output = output output (%c,)\n");
        set_tensor(g, "c", "weight", 4, (int64_t[]){16, 16, 3, 3}, noise);
        float *w = bpcc_tensor_data(bpcc_module_tensor(bpcc_graph_find_module(g, "c"), "weight"));
        struct xtensor *x = input(4, (int64_t[]){1, 16, 14, 14}, noise);
        if (which) w[4] = INFINITY; /* the centre tap of (0, 0) */
        else x->data[3 * 14 + 5] = INFINITY;
        /* twice: Winograd takes a module from its second run on */
        struct bpcc_exec *e = exec_of(g);
        for (int run = 0; run < 2; run++) {
            struct xval out;
            RUN_ON(e, x, &out);
            int nonfinite = 0;
            for (int co = 0; co < 16; co++)
                for (int oy = 0; oy < 14; oy++)
                    for (int ox = 0; ox < 14; ox++) {
                        double mag, want = conv3x3_at(x->data, w, NULL, 16, 14, 14, 1, 16, 1, 1, "zeros", 0, co, oy, ox, &mag);
                        float got = out.u.t->data[(co * 14 + oy) * 14 + ox];
                        if (!isfinite(want)) {
                            nonfinite++;
                            ck_assert_msg(isnan(want) ? isnan(got) : got == want, "%s run %d at %d %d %d: %g vs %g",
                                          which ? "weight" : "input", run, co, oy, ox, got, want);
                        } else {
                            ck_assert_msg(fabs(got - want) <= 1e-6 * mag, "run %d at %d %d %d", run, co, oy, ox);
                        }
                    }
            ck_assert_int_eq(nonfinite, which ? 14 * 14 : 16 * 9);
            bpcc_xval_release(&out);
        }
        bpcc_exec_free(e);
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
}
END_TEST

START_TEST(a_dying_argument_is_taken_in_place_and_a_living_one_never)
{
    /* %r = relu(%x) takes %x only at its last use; %s = %r + %x reads the living %x; %t = %s + %s
    ** (one value twice) and %u = %t - %r (the first operand dies) run in place or not, with the
    ** same values; the fused conv+relu runs twice on one input, which neither call may change */
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\nmodule f : torch.ao.nn.intrinsic.ConvReLU2d {}\n"
        "module f.0 : torch.nn.Conv2d {in_channels: 2, out_channels: 2, kernel_size: 1, bias: False}\n"
        "  param weight : f32[2, 2, 1, 1]\nmodule f.1 : torch.nn.ReLU {}\n\ngraph\n  %x = placeholder x ()\n"
        "  %c = call_function torch.mul (%x, 1.0)\n  %r = call_function torch.nn.functional.relu (%c,)\n"
        "  %s = call_function operator.add (%r, %c)\n  %t = call_function operator.add (%s, %s)\n"
        "  %u = call_function torch.sub (%t, %r)\n  %a = call_module f (%u,)\n  %b = call_module f (%u,)\n"
        "  %output = output output ((%a, %b, %u),)\n");
    set_tensor(g, "f.0", "weight", 4, (int64_t[]){2, 2, 1, 1}, noise);
    const float *w = bpcc_module_tensor(bpcc_graph_find_module(g, "f.0"), "weight")->data;
    struct bpcc_exec *e = exec_of(g);
    for (int run = 0; run < 2; run++) {
        struct xtensor *x = input(4, (int64_t[]){1, 2, 3, 5}, noise);
        struct xval out;
        RUN_ON(e, x, &out);
        const struct xtensor *ya = out.u.seq.items[0].u.t, *yb = out.u.seq.items[1].u.t, *yu = out.u.seq.items[2].u.t;
        for (int i = 0; i < 30; i++) {
            float c = x->data[i], r = c > 0 ? c : 0, sv = r + c, u = (sv + sv) - r;
            ck_assert_msg(yu->data[i] == u, "run %d u[%d]: %g vs %g", run, i, yu->data[i], u);
        }
        for (int co = 0; co < 2; co++)
            for (int p = 0; p < 15; p++) {
                float v = w[co * 2] * yu->data[p] + w[co * 2 + 1] * yu->data[15 + p];
                v = v > 0 ? v : 0;
                ck_assert_msg(fabsf(ya->data[co * 15 + p] - v) <= 1e-6f * (fabsf(v) + 1), "a at %d %d", co, p);
                ck_assert_msg(yb->data[co * 15 + p] == ya->data[co * 15 + p], "b at %d %d", co, p);
            }
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
    }
    bpcc_exec_free(e);
    bpcc_graph_free(g);
}
END_TEST

/* The onednn config's conv+add fusions: ConvAdd2d(x1, x2) = add(conv(x1), x2) and ConvAddReLU2d
** the same through its ReLU child, with the add the fusion matched in the module's `add`
** attribute; the second addend, used again after, is left as it was. */
START_TEST(a_fused_conv_add_adds_its_second_input)
{
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\nmodule f : torch.ao.nn.intrinsic.ConvAddReLU2d {add: operator.add}\n"
        "module f.0 : torch.nn.Conv2d {in_channels: 2, out_channels: 2, kernel_size: 1, bias: False}\n"
        "  param weight : f32[2, 2, 1, 1]\nmodule f.1 : torch.nn.ReLU {}\n"
        "module h : torch.ao.nn.intrinsic.ConvAdd2d {add: torch.add}\n"
        "module h.0 : torch.nn.Conv2d {in_channels: 2, out_channels: 2, kernel_size: 1, bias: False}\n"
        "  param weight : f32[2, 2, 1, 1]\n\ngraph\n  %x = placeholder x ()\n"
        "  %y = call_function torch.mul (%x, -0.5)\n  %a = call_module f (%x, %y)\n  %b = call_module h (%x, %y)\n"
        "  %output = output output ((%a, %b, %y),)\n");
    set_tensor(g, "f.0", "weight", 4, (int64_t[]){2, 2, 1, 1}, noise);
    set_tensor(g, "h.0", "weight", 4, (int64_t[]){2, 2, 1, 1}, ramp);
    const float *wf = bpcc_module_tensor(bpcc_graph_find_module(g, "f.0"), "weight")->data;
    const float *wh = bpcc_module_tensor(bpcc_graph_find_module(g, "h.0"), "weight")->data;
    struct xtensor *x = input(4, (int64_t[]){1, 2, 3, 5}, noise);
    struct xval out;
    RUN(g, x, &out);
    const struct xtensor *ya = out.u.seq.items[0].u.t, *yb = out.u.seq.items[1].u.t, *yy = out.u.seq.items[2].u.t;
    int n_negative = 0;
    for (int co = 0; co < 2; co++)
        for (int p = 0; p < 15; p++) {
            float y = x->data[co * 15 + p] * -0.5f;
            ck_assert_msg(yy->data[co * 15 + p] == y, "y at %d %d", co, p);
            float cf = wf[co * 2] * x->data[p] + wf[co * 2 + 1] * x->data[15 + p] + y;
            float ch = wh[co * 2] * x->data[p] + wh[co * 2 + 1] * x->data[15 + p] + y;
            n_negative += cf < 0;
            ck_assert_msg(fabsf(ya->data[co * 15 + p] - (cf > 0 ? cf : 0)) <= 1e-6f * (fabsf(cf) + 1), "a at %d %d", co, p);
            ck_assert_msg(fabsf(yb->data[co * 15 + p] - ch) <= 1e-6f * (fabsf(ch) + 1), "b at %d %d", co, p);
        }
    ck_assert_int_gt(n_negative, 0); /* the relu had something to do */
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

/* g (a conv on x [1, 2, 3, 5]) is refused with msg; g is freed */
static void conv_refused(struct bpcc_graph *g, const char *msg)
{
    struct xtensor *x = input(4, (int64_t[]){1, 2, 3, 5}, ramp2);
    struct xval out;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(run1(g, x, &out, &d), BPCC_ERR_GRAPH);
    ck_assert_msg(strstr(tu_msg(&d), msg), "%s", tu_msg(&d));
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}

START_TEST(padding_a_mode_cannot_do_is_refused)
{
    static const struct {
        const char *attrs, *msg;
    } cases[] = {
        {"padding: 3, padding_mode: \"reflect\"", "padding (3, 3) is too large for reflect padding of a 3 x 5 input"},
        {"padding: (4, 1), padding_mode: \"circular\"", "padding (4, 1) is too large for circular padding of a 3 x 5 input"},
        {"padding: 1, padding_mode: \"mirror\"", "unknown padding_mode 'mirror'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule c : torch.nn.Conv2d {in_channels: 2, out_channels: 2, kernel_size: 3, groups: 2, %s}\n"
                 "  param weight : f32[2, 1, 3, 3]\n\ngraph\n  %%x = placeholder x ()\n  %%c = call_module c (%%x,)\n"
                 "  %%output = output output (%%c,)\n",
                 cases[i].attrs);
        struct bpcc_graph *g = parse(text);
        set_tensor(g, "c", "weight", 4, (int64_t[]){2, 1, 3, 3}, ramp);
        conv_refused(g, cases[i].msg);
    }
    /* a weight with a zero-size dimension (found by fuzzing: the unfolding divided by it) */
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule c : torch.nn.Conv2d {in_channels: 2, out_channels: 2, kernel_size: (0, 3)}\n"
                                 "  param weight : f32[2, 2, 0, 3]\n\ngraph\n  %x = placeholder x ()\n  %c = call_module c (%x,)\n"
                                 "  %output = output output (%c,)\n");
    set_tensor(g, "c", "weight", 4, (int64_t[]){2, 2, 0, 3}, ramp);
    conv_refused(g, "the weight has a zero-size dimension (2)");
}
END_TEST

START_TEST(linear_batch_norm_and_activations_match_the_formulas)
{
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule bn : torch.nn.BatchNorm1d {num_features: 3, eps: 0.001}\n"
                                 "  param weight : f32[3]\n  param bias : f32[3]\n  buffer running_mean : f32[3]\n"
                                 "  buffer running_var : f32[3]\nmodule fc : torch.nn.Linear {in_features: 3, out_features: 2}\n"
                                 "  param weight : f32[2, 3]\n  param bias : f32[2]\n\ngraph\n"
                                 "  %x = placeholder x ()\n  %bn = call_module bn (%x,)\n  %fc = call_module fc (%bn,)\n"
                                 "  %h = call_function torch.nn.functional.hardswish (%fc,)\n  %output = output output (%h,)\n");
    set_tensor(g, "bn", "weight", 1, (int64_t[]){3}, ramp);
    set_tensor(g, "bn", "bias", 1, (int64_t[]){3}, ramp2);
    set_tensor(g, "bn", "running_mean", 1, (int64_t[]){3}, ramp2);
    set_tensor(g, "bn", "running_var", 1, (int64_t[]){3}, ramp2);
    float *rv = bpcc_module_tensor(bpcc_graph_find_module(g, "bn"), "running_var")->data;
    for (int i = 0; i < 3; i++) rv[i] = fabsf(rv[i]) + 0.5f;
    set_tensor(g, "fc", "weight", 2, (int64_t[]){2, 3}, ramp);
    set_tensor(g, "fc", "bias", 1, (int64_t[]){2}, ramp);
    struct xtensor *x = input(2, (int64_t[]){4, 3}, ramp2);
    struct xval out;
    RUN(g, x, &out);
    const struct bpcc_module *bn = bpcc_graph_find_module(g, "bn"), *fc = bpcc_graph_find_module(g, "fc");
    const float *gw = bpcc_module_tensor(bn, "weight")->data, *gb = bpcc_module_tensor(bn, "bias")->data;
    const float *rm = bpcc_module_tensor(bn, "running_mean")->data;
    const float *w = bpcc_module_tensor(fc, "weight")->data, *b = bpcc_module_tensor(fc, "bias")->data;
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 2; j++) {
            double s = b[j];
            for (int c = 0; c < 3; c++) {
                double v = (x->data[n * 3 + c] - rm[c]) / sqrt(rv[c] + 0.001) * gw[c] + gb[c];
                s += w[j * 3 + c] * v;
            }
            double h = s * fmin(fmax(s + 3, 0), 6) / 6;
            ck_assert_msg(fabs(out.u.t->data[n * 2 + j] - h) < 1e-5, "%g vs %g", out.u.t->data[n * 2 + j], h);
        }
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(pooling_follows_pytorchs_window_rules)
{
    /* 5x5 input, 2x2 windows, stride 2: ceil_mode adds a partial last window; avg pooling with
    ** padding divides by the padded window unless count_include_pad is false */
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule mp : torch.nn.MaxPool2d {kernel_size: 2, stride: 2, ceil_mode: True}\n"
                                 "module ap : torch.nn.AvgPool2d {kernel_size: 3, stride: 2, padding: 1, count_include_pad: False}\n\n"
                                 "graph\n  %x = placeholder x ()\n  %mp = call_module mp (%x,)\n  %ap = call_module ap (%x,)\n"
                                 "  %aap = call_function torch.nn.functional.adaptive_avg_pool2d (%x, (2, 3))\n"
                                 "  %output = output output ((%mp, %ap, %aap),)\n");
    struct xtensor *x = input(4, (int64_t[]){1, 1, 5, 5}, ramp);
    struct xval out;
    RUN(g, x, &out);
    ck_assert_int_eq(out.k, XV_SEQ);
    const struct xtensor *mp = out.u.seq.items[0].u.t, *ap = out.u.seq.items[1].u.t, *aap = out.u.seq.items[2].u.t;
    ck_assert_int_eq(mp->dims[2], 3);
    ck_assert_int_eq(mp->dims[3], 3);
    ck_assert(mp->data[8] == x->data[24]); /* the last window holds only the corner */
    ck_assert_int_eq(ap->dims[2], 3);
    /* top-left: window rows -1..1, cols -1..1 -> 4 real elements */
    float s = x->data[0] + x->data[1] + x->data[5] + x->data[6];
    ck_assert(fabsf(ap->data[0] - s / 4) < 1e-6);
    /* adaptive 5 -> 2 rows: [0, 3) and [2, 5); 5 -> 3 cols: [0, 2), [1, 4), [3, 5) */
    double t = 0;
    for (int yy = 2; yy < 5; yy++)
        for (int xx = 1; xx < 4; xx++) t += x->data[yy * 5 + xx];
    ck_assert(fabs(aap->data[1 * 3 + 1] - t / 9) < 1e-6);
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

/* max pooling against the window formula: padding, dilation, ceil_mode, strides 1-3, rows wider than
** the kernel's 16-column block; a NaN in a window makes that output NaN */
START_TEST(max_pooling_matches_the_formula)
{
    static const struct {
        int k, s, p, d;
        bool ceil;
    } cases[] = {{3, 2, 1, 1, false}, {3, 2, 1, 1, true}, {2, 3, 1, 2, true}, {3, 1, 1, 2, false}, {4, 3, 2, 1, true}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule mp : torch.nn.MaxPool2d {kernel_size: %d, stride: %d, padding: %d, dilation: %d, "
                 "ceil_mode: %s}\n\ngraph\n  %%x = placeholder x ()\n  %%mp = call_module mp (%%x,)\n"
                 "  %%output = output output (%%mp,)\n",
                 cases[ci].k, cases[ci].s, cases[ci].p, cases[ci].d, cases[ci].ceil ? "True" : "False");
        struct bpcc_graph *g = parse(text);
        int H = 9, W = 53, k = cases[ci].k, st = cases[ci].s, pd = cases[ci].p, dl = cases[ci].d;
        struct xtensor *x = input(4, (int64_t[]){2, 3, H, W}, ramp2);
        x->data[(1 * H + 4) * W + 20] = NAN; /* plane 1 */
        struct xval out;
        RUN(g, x, &out);
        const struct xtensor *y = out.u.t;
        int OH = (int)y->dims[2], OW = (int)y->dims[3];
        for (int c = 0; c < 6; c++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    float m = -INFINITY;
                    bool nan = false;
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) {
                            int iy = oy * st - pd + ky * dl, ix = ox * st - pd + kx * dl;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            float v = x->data[(c * H + iy) * W + ix];
                            nan |= isnan(v);
                            m = v > m ? v : m;
                        }
                    float got = y->data[(c * OH + oy) * OW + ox];
                    ck_assert_msg(nan ? isnan(got) : got == m, "case %zu at %d %d %d: %g vs %g", ci, c, oy, ox, got, m);
                }
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
}
END_TEST

/* Pooling of rank r (1, 2, 3) against a brute-force reference: every input position is tested for
** membership in every output's window, dimension by dimension. */
struct pool_case {
    const char *op; /* module type suffix: MaxPool, AvgPool, AdaptiveAvgPool, AdaptiveMaxPool */
    int r;
    const char *attrs;
    int64_t k[3], s[3], p[3], d[3], out[3]; /* the last r entries are used */
    bool ceil, include_pad;
    int64_t divisor;
};

/* is input index q in output o's window along one dimension of extent n (for max: a tap) */
static bool in_window(const struct pool_case *c, int i, int64_t o, int64_t q, int64_t n, int64_t on)
{
    if (!strncmp(c->op, "Adaptive", 8)) return q >= o * n / on && q < ((o + 1) * n + on - 1) / on;
    int64_t st = o * c->s[i] - c->p[i];
    if (strstr(c->op, "Max")) return q >= st && (q - st) % c->d[i] == 0 && (q - st) / c->d[i] < c->k[i];
    return q >= st && q < st + c->k[i];
}

START_TEST(pooling_of_every_rank_matches_a_brute_force_reference)
{
    static const struct pool_case cases[] = {
        {"MaxPool", 1, "kernel_size: 3, stride: 2, padding: 1", {0, 0, 3}, {0, 0, 2}, {0, 0, 1}, {1, 1, 1}, {0}, false, true, 0},
        {"MaxPool", 1, "kernel_size: (2,), dilation: 3, ceil_mode: True", {0, 0, 2}, {0, 0, 2}, {0}, {1, 1, 3}, {0}, true, true, 0},
        {"AvgPool", 1, "kernel_size: 3, stride: 2, padding: 1, count_include_pad: False", {0, 0, 3}, {0, 0, 2}, {0, 0, 1},
         {1, 1, 1}, {0}, false, false, 0},
        {"AvgPool", 1, "kernel_size: 4, stride: 3, padding: 2, ceil_mode: True", {0, 0, 4}, {0, 0, 3}, {0, 0, 2}, {1, 1, 1},
         {0}, true, true, 0},
        {"AdaptiveAvgPool", 1, "output_size: 3", {0}, {0}, {0}, {1, 1, 1}, {1, 1, 3}, false, true, 0},
        {"AdaptiveMaxPool", 1, "output_size: 4", {0}, {0}, {0}, {1, 1, 1}, {1, 1, 4}, false, true, 0},
        {"MaxPool", 2, "kernel_size: (2, 3), stride: (1, 2), padding: (1, 1)", {0, 2, 3}, {0, 1, 2}, {0, 1, 1}, {1, 1, 1},
         {0}, false, true, 0},
        {"AvgPool", 2, "kernel_size: 3, stride: 2, divisor_override: 5", {0, 3, 3}, {0, 2, 2}, {0}, {1, 1, 1}, {0}, false, true, 5},
        {"AdaptiveMaxPool", 2, "output_size: (None, 2)", {0}, {0}, {0}, {1, 1, 1}, {1, 5, 2}, false, true, 0},
        {"MaxPool", 3, "kernel_size: (2, 3, 2), stride: (1, 2, 2), padding: (1, 1, 0), dilation: (1, 1, 2), ceil_mode: True",
         {2, 3, 2}, {1, 2, 2}, {1, 1, 0}, {1, 1, 2}, {0}, true, true, 0},
        {"AvgPool", 3, "kernel_size: 2, stride: (1, 2, 2), padding: 1, count_include_pad: False", {2, 2, 2}, {1, 2, 2},
         {1, 1, 1}, {1, 1, 1}, {0}, false, false, 0},
        {"AvgPool", 3, "kernel_size: 3, stride: 2, padding: 1", {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {0}, false, true, 0},
        {"AdaptiveAvgPool", 3, "output_size: (2, 3, None)", {0}, {0}, {0}, {1, 1, 1}, {2, 3, 7}, false, true, 0},
        {"AdaptiveMaxPool", 3, "output_size: 1", {0}, {0}, {0}, {1, 1, 1}, {1, 1, 1}, false, true, 0},
    };
    const int64_t ext[3] = {4, 5, 7}; /* the spatial extents, the last r of them */
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct pool_case cc = cases[ci], *c = &cc;
        bool adaptive = !strncmp(c->op, "Adaptive", 8), max = strstr(c->op, "Max");
        for (int i = 0; i < 3 - c->r; i++) c->k[i] = c->s[i] = c->d[i] = c->out[i] = 1, c->p[i] = 0; /* unit windows */
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule p : torch.nn.%s%dd {%s}\n\ngraph\n  %%x = placeholder x ()\n"
                 "  %%p = call_module p (%%x,)\n  %%output = output output (%%p,)\n",
                 c->op, c->r, c->attrs);
        struct bpcc_graph *g = parse(text);
        int64_t dims[5] = {2, 3}, n[3] = {1, 1, 1};
        for (int i = 3 - c->r; i < 3; i++) dims[2 + i - (3 - c->r)] = n[i] = ext[i];
        struct xtensor *x = input((uint32_t)(2 + c->r), dims, ramp2);
        if (max) x->data[(1 * n[0] * n[1] + 0) * n[2] + 3] = NAN; /* plane 1: a max propagates it */
        struct xval out;
        RUN(g, x, &out);
        const struct xtensor *y = out.u.t;
        ck_assert_int_eq(y->ndim, 2 + c->r);
        ck_assert_int_eq(y->dims[0], 2);
        ck_assert_int_eq(y->dims[1], 3); /* the channels are never pooled */
        int64_t on[3] = {1, 1, 1};
        for (int i = 3 - c->r; i < 3; i++) {
            on[i] = y->dims[2 + i - (3 - c->r)];
            if (adaptive) {
                ck_assert_int_eq(on[i], c->out[i]);
                continue;
            }
            /* the output extent: windows inside the padded input; with ceil_mode also one that
            ** overhangs its end by less than a stride, if it starts inside the input */
            int64_t want = 0, eff = c->d[i] * (c->k[i] - 1) + 1;
            for (;; want++) {
                int64_t st = want * c->s[i] - c->p[i];
                if (!(st + eff <= n[i] + c->p[i] || (c->ceil && st + eff <= n[i] + c->p[i] + c->s[i] - 1 && st < n[i]))) break;
            }
            ck_assert_msg(on[i] == want, "case %zu dim %d: %lld vs %lld", ci, i, (long long)on[i], (long long)want);
        }
        uint64_t plane = (uint64_t)(n[0] * n[1] * n[2]), oplane = (uint64_t)(on[0] * on[1] * on[2]);
        for (uint64_t pl = 0; pl < 6; pl++)
            for (uint64_t oi = 0; oi < oplane; oi++) {
                int64_t o[3] = {(int64_t)(oi / (uint64_t)(on[1] * on[2])), (int64_t)(oi / (uint64_t)on[2] % (uint64_t)on[1]),
                                (int64_t)(oi % (uint64_t)on[2])};
                double sum = 0;
                float m = -INFINITY;
                bool nan = false;
                int64_t count = 0, padded = 1;
                for (uint64_t qi = 0; qi < plane; qi++) {
                    int64_t q[3] = {(int64_t)(qi / (uint64_t)(n[1] * n[2])), (int64_t)(qi / (uint64_t)n[2] % (uint64_t)n[1]),
                                    (int64_t)(qi % (uint64_t)n[2])};
                    bool in = true;
                    for (int i = 0; i < 3; i++) in = in && in_window(c, i, o[i], q[i], n[i], on[i]);
                    if (!in) continue;
                    float v = x->data[pl * plane + qi];
                    sum += v;
                    nan |= isnan(v);
                    m = v > m ? v : m;
                    count++;
                }
                for (int i = 0; i < 3 && !adaptive; i++) {
                    int64_t st = o[i] * c->s[i] - c->p[i], en = st + c->k[i];
                    padded *= (en < n[i] + c->p[i] ? en : n[i] + c->p[i]) - st;
                }
                float got = y->data[pl * oplane + oi];
                if (max)
                    ck_assert_msg(nan ? isnan(got) : got == m, "case %zu plane %llu out %llu: %g vs %g", ci,
                                  (unsigned long long)pl, (unsigned long long)oi, got, m);
                else {
                    double div = c->divisor ? (double)c->divisor : adaptive || !c->include_pad ? (double)count : (double)padded;
                    ck_assert_msg(count > 0 && fabs(got - sum / div) < 1e-5, "case %zu plane %llu out %llu: %g vs %g", ci,
                                  (unsigned long long)pl, (unsigned long long)oi, got, sum / div);
                }
            }
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
}
END_TEST

/* the graph in text, run on a ramp of the given dims, fails at node %node's line (column 3) with a
** message holding msg */
static void refused_with(const char *text, const char *node, uint32_t ndim, const int64_t *dims, const char *msg,
                         size_t case_no)
{
    char at[64];
    snprintf(at, sizeof at, "\n  %%%s = ", node);
    const char *def = strstr(text, at);
    ck_assert_ptr_nonnull(def);
    int line = 2; /* the line after the newline found */
    for (const char *c = text; c < def; c++) line += *c == '\n';
    struct bpcc_graph *g = parse(text);
    struct xtensor *x = input(ndim, dims, ramp);
    struct xval out;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_msg(run1(g, x, &out, &d) == BPCC_ERR_GRAPH, "case %zu ran", case_no);
    TU_ASSERT_DIAG(&d, line, 3, msg);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}

/* one case of a table of refusals: `call` becomes node %y, after the placeholder %x and `nodes`
** (lines of other nodes reading it), and is refused with a message holding msg */
struct refusal {
    const char *call, *msg;
};

static void refusals(const char *nodes, const struct refusal *cases, size_t n, uint32_t ndim, const int64_t *dims)
{
    for (size_t i = 0; i < n; i++) {
        char text[1024];
        snprintf(text, sizeof text, "bpcc-model 1\n\ngraph\n  %%x = placeholder x ()\n%s  %%y = %s\n  %%output = output output (%%y,)\n",
                 nodes, cases[i].call);
        refused_with(text, "y", ndim, dims, cases[i].msg, i);
    }
}

/* what pooling refuses: indices it does not compute, an input of the wrong rank, an empty output */
START_TEST(pooling_refuses_indices_and_inputs_of_the_wrong_rank)
{
    static const struct {
        const char *node, *msg;
        uint32_t ndim;
    } cases[] = {
        {"call_module p (%x,)", "return_indices=True is not supported", 4},
        {"call_function torch.nn.functional.max_pool1d (%x, 2) {return_indices: True}", "return_indices=True is not supported", 3},
        {"call_function torch.nn.functional.adaptive_max_pool2d (%x, 1, True)", "return_indices=True is not supported", 4},
        {"call_function torch.nn.functional.avg_pool3d (%x, 2)", "3-d pooling needs a 4-d or 5-d input, not 3-d", 3},
        {"call_function torch.nn.functional.adaptive_avg_pool1d (%x, 1)", "1-d pooling needs a 2-d or 3-d input, not 4-d", 4},
        /* more ints than the window has dimensions (found by fuzzing: they were written past its end) */
        {"call_function torch.nn.functional.max_pool2d (%x, (1, 1, 1, 1, 1, 1, 1, 1))", "argument kernel_size must be 2 ints", 4},
        /* a window longer than the input: (2 - 3) / 2 rounds down to -1, no output (PyTorch: too small) */
        {"call_function torch.nn.functional.max_pool1d (%x, 3, 2)", "the output would be empty", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule p : torch.nn.MaxPool2d {kernel_size: 2, return_indices: True}\n\ngraph\n"
                 "  %%x = placeholder x ()\n  %%p = %s\n  %%output = output output (%%p,)\n",
                 cases[i].node);
        refused_with(text, "p", cases[i].ndim, (int64_t[]){1, 2, 4, 4}, cases[i].msg, i);
    }
}
END_TEST

/* F.interpolate / nn.Upsample: PyTorch's source indices (float scale in / out, or 1 / scale_factor;
** the exact shortcuts for 1x and 2x), bilinear weights with and without align_corners, a shape
** sliced from the input to size the output, a dict output read back by key */
START_TEST(interpolation_follows_pytorchs_index_rules)
{
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\nmodule up : torch.nn.Upsample {size: None, scale_factor: 2.0, mode: \"nearest\", align_corners: None, "
        "recompute_scale_factor: None}\n\ngraph\n  %x = placeholder x ()\n  %up = call_module up (%x,)\n"
        "  %n = call_function torch.nn.functional.interpolate (%x, (3, 5))\n"
        "  %ac = call_function torch.nn.functional.interpolate (%x,) {size: (2, 5), mode: \"bilinear\", align_corners: True}\n"
        "  %hc = call_function torch.nn.functional.interpolate (%x,) {scale_factor: 2, mode: \"bilinear\"}\n"
        "  %s = call_function getattr (%up, \"shape\")\n  %hw = call_function operator.getitem (%s, slice(-2, None, None))\n"
        "  %back = call_function torch.nn.functional.interpolate (%n,) {size: %hw, mode: \"nearest-exact\"}\n"
        "  %d = call_function operator.getitem ({a: %n, b: %back}, \"b\")\n"
        "  %sf = call_function torch.nn.functional.interpolate (%x,) {scale_factor: 2.6}\n"
        "  %output = output output ((%up, %n, %ac, %hc, %d, %sf),)\n");
    struct xtensor *x = input(4, (int64_t[]){1, 1, 2, 3}, ramp);
    struct xval out;
    RUN(g, x, &out);
    const float *v = x->data;
    const struct xtensor *up = out.u.seq.items[0].u.t, *n = out.u.seq.items[1].u.t, *ac = out.u.seq.items[2].u.t,
                         *hc = out.u.seq.items[3].u.t, *d = out.u.seq.items[4].u.t;
    /* 2x nearest: every element twice in both directions */
    ck_assert_int_eq(up->dims[2], 4);
    ck_assert_int_eq(up->dims[3], 6);
    for (int i = 0; i < 24; i++) ck_assert(up->data[i] == v[(i / 6 / 2) * 3 + i % 6 / 2]);
    /* 2x3 -> 3x5: rows floor(o * 2/3) = 0 0 1, columns floor(o * 0.6) = 0 0 1 1 2 */
    static const int rows[3] = {0, 0, 1}, cols[5] = {0, 0, 1, 1, 2};
    for (int i = 0; i < 15; i++) ck_assert(n->data[i] == v[rows[i / 5] * 3 + cols[i % 5]]);
    /* align_corners: the corners stay, the middle columns are halfway */
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 5; c++) {
            float want = c % 2 ? 0.5f * v[r * 3 + c / 2] + 0.5f * v[r * 3 + c / 2 + 1] : v[r * 3 + c / 2];
            ck_assert_msg(fabsf(ac->data[r * 5 + c] - want) < 1e-6f, "%d %d: %g vs %g", r, c, ac->data[r * 5 + c], want);
        }
    /* half-pixel centres, 2x: source index (o + 0.5) / 2 - 0.5 clamped at 0; rows 0 .. 3 read
    ** (0), (0.75 r0 + 0.25 r1), (0.25 r0 + 0.75 r1), (r1) */
    static const float wr[4][2] = {{1, 0}, {0.75f, 0.25f}, {0.25f, 0.75f}, {0, 1}};
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++) {
            static const float wc[6][3] = {{1, 0, 0}, {0.75f, 0.25f, 0}, {0.25f, 0.75f, 0}, {0, 0.75f, 0.25f}, {0, 0.25f, 0.75f}, {0, 0, 1}};
            float want = 0;
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++) want += wr[r][i] * wc[c][j] * v[i * 3 + j];
            ck_assert_msg(fabsf(hc->data[r * 6 + c] - want) < 1e-6f, "%d %d: %g vs %g", r, c, hc->data[r * 6 + c], want);
        }
    /* the dict's "b": %n (3x5) resized to %up's last two dimensions (4x6), nearest-exact:
    ** floor((o + 0.5) * in / out) */
    ck_assert_int_eq(d->dims[2], 4);
    ck_assert_int_eq(d->dims[3], 6);
    for (int i = 0; i < 24; i++) {
        int r = (int)floorf((float)((i / 6 + 0.5) * 0.75)), c = (int)floorf((float)((i % 6 + 0.5) * (5.0f / 6.0f)));
        ck_assert(d->data[i] == n->data[r * 5 + c]);
    }
    /* a scale factor given: the source index uses 1 / 2.6, not in / out (3 / 7 would read
    ** column 2 for output column 5) */
    const struct xtensor *sf = out.u.seq.items[5].u.t;
    ck_assert_int_eq(sf->dims[2], 5);
    ck_assert_int_eq(sf->dims[3], 7);
    for (int i = 0; i < 35; i++) {
        int r = (int)floorf((float)(i / 7) * (float)(1.0 / 2.6)), c = (int)floorf((float)(i % 7) * (float)(1.0 / 2.6));
        ck_assert_msg(sf->data[i] == v[r * 3 + c], "%d", i);
    }
    ck_assert(sf->data[5] == v[1]);
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(interpolation_refuses_what_it_cannot_do)
{
    static const struct {
        const char *call, *msg;
    } cases[] = {
        {"(%x, 4) {mode: \"bicubic\", antialias: True}", "antialias=True is not supported"},
        {"(%x, 4) {mode: \"trilinear\"}", "(nearest, nearest-exact, area, bilinear, bicubic)"},
        {"(%x, 4) {mode: \"linear\"}", "mode 'linear' on a 4-d input is not supported"},
        {"(%x, 4) {mode: \"bilinear\", antialias: True}", "antialias=True is not supported"},
        {"(%x, 4) {align_corners: True}", "align_corners can only be set with the interpolating modes"},
        {"(%x, 4, 2.0)", "only one of size and scale_factor may be given"},
        {"(%x,)", "size or scale_factor must be given"},
        {"(%x, (2, 3, 4))", "size has 3 entries for 2 spatial dimensions"},
        {"(%x, (1, 2, 3, 4, 5, 6, 7, 8))", "size has 8 entries for 2 spatial dimensions"}, /* found by fuzzing: a stack overflow */
        {"(%x,) {scale_factor: 0.1}", "input and output sizes must be greater than 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\ngraph\n  %%x = placeholder x ()\n  %%y = call_function torch.nn.functional.interpolate %s\n"
                 "  %%output = output output (%%y,)\n",
                 cases[i].call);
        refused_with(text, "y", 4, (int64_t[]){1, 2, 4, 4}, cases[i].msg, i);
    }
    /* bicubic is 2-d only, as in PyTorch */
    refused_with("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
                 "  %y = call_function torch.nn.functional.interpolate (%x, 4) {mode: \"bicubic\"}\n  %output = output output (%y,)\n",
                 "y", 3, (int64_t[]){1, 2, 4}, "mode 'bicubic' on a 3-d input is not supported (nearest, nearest-exact, area, linear)",
                 99);
}
END_TEST

/* F.pad's modes on a ramp 0 1 2 3 4 (reflect mirrors without repeating the edge, circular wraps,
** replicate repeats the edge, constant crops with negative amounts); chunk and split sizes; pixel
** shuffle's element order and its inverse */
START_TEST(padding_pieces_and_pixel_shuffle_follow_pytorch)
{
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\nmodule ps : torch.nn.PixelShuffle {upscale_factor: 2}\n\ngraph\n  %x = placeholder x ()\n"
        "  %r = call_function torch.nn.functional.pad (%x, [2, 3], \"reflect\")\n"
        "  %c = call_function torch.nn.functional.pad (%x, [1, 2]) {mode: \"circular\"}\n"
        "  %p = call_function torch.nn.functional.pad (%x, [2, 1], \"replicate\")\n"
        "  %k = call_function torch.nn.functional.pad (%x, [-1, 2], \"constant\", 9.0)\n"
        "  %ch = call_method chunk (%x, 2, 2)\n  %sp = call_function torch.split (%x, [1, 3], 1)\n"
        "  %v = call_method view (%x, 1, 4, 1, 5)\n  %u = call_function torch.nn.functional.pixel_unshuffle (%v, 1)\n"
        "  %w = call_method view (%x, 1, 4, 5, 1)\n  %s = call_module ps (%w,)\n"
        "  %back = call_function torch.nn.functional.pixel_unshuffle (%s, 2)\n"
        "  %output = output output ((%r, %c, %p, %k, %ch, %sp, %s, %back, %u),)\n");
    struct xtensor *x = input(3, (int64_t[]){1, 4, 5}, ramp);
    for (int i = 0; i < 20; i++) x->data[i] = (float)i; /* row r: 5r .. 5r + 4 */
    struct xval out;
    RUN(g, x, &out);
    static const int reflect[10] = {2, 1, 0, 1, 2, 3, 4, 3, 2, 1}, circular[8] = {4, 0, 1, 2, 3, 4, 0, 1},
                     replicate[8] = {0, 0, 0, 1, 2, 3, 4, 4}, constant[6] = {1, 2, 3, 4, -1, -1};
    const struct xtensor *t[4] = {out.u.seq.items[0].u.t, out.u.seq.items[1].u.t, out.u.seq.items[2].u.t,
                                  out.u.seq.items[3].u.t};
    const int *want[4] = {reflect, circular, replicate, constant}, len[4] = {10, 8, 8, 6};
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(t[k]->dims[2], len[k]);
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < len[k]; i++)
                ck_assert_msg(t[k]->data[r * len[k] + i] == (want[k][i] < 0 ? 9.0f : (float)(5 * r + want[k][i])), "pad %d row %d at %d",
                              k, r, i);
    }
    /* chunk 5 into 2: 3 and 2; split [1, 3] along the rows */
    const struct xval *ch = &out.u.seq.items[4], *sp = &out.u.seq.items[5];
    ck_assert_int_eq(ch->u.seq.n, 2);
    ck_assert_int_eq(ch->u.seq.items[0].u.t->dims[2], 3);
    ck_assert_int_eq(ch->u.seq.items[1].u.t->dims[2], 2);
    ck_assert(ch->u.seq.items[1].u.t->data[2] == 8.0f); /* row 1, column 3 */
    ck_assert_int_eq(sp->u.seq.n, 2);
    ck_assert_int_eq(sp->u.seq.items[1].u.t->dims[1], 3);
    ck_assert(sp->u.seq.items[1].u.t->data[0] == 5.0f);
    /* [1, 4, 5, 1] shuffled by 2: [1, 1, 10, 2], element (h r + i, w r + j) from channel i r + j */
    const struct xtensor *s = out.u.seq.items[6].u.t, *back = out.u.seq.items[7].u.t, *u = out.u.seq.items[8].u.t;
    ck_assert_int_eq(s->dims[1], 1);
    ck_assert_int_eq(s->dims[2], 10);
    ck_assert_int_eq(s->dims[3], 2);
    for (int h = 0; h < 5; h++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) ck_assert(s->data[(h * 2 + i) * 2 + j] == (float)((i * 2 + j) * 5 + h));
    for (int i = 0; i < 20; i++) ck_assert(back->data[i] == (float)i && u->data[i] == (float)i);
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(ops_refuse_what_pytorch_refuses)
{
    static const struct refusal cases[] = {
        {"call_function torch.nn.functional.pad (%x, [5, 0], \"reflect\")", "reflect padding (5, 0) is too large for a dimension of 5"},
        {"call_function torch.nn.functional.pad (%x, [6, 0], \"circular\")", "circular padding (6, 0) is too large"},
        {"call_function torch.nn.functional.pad (%x, [1, 1, 1, 1, 1, 1], \"reflect\")", "reflect padding of 3 dimensions needs a 4-d or 5-d input"},
        {"call_function torch.nn.functional.pad (%x, [1, 1], \"wrap\")", "padding mode 'wrap' is not one of"},
        {"call_function torch.nn.functional.pad (%x, [1])", "pad has 1 entries"},
        {"call_function torch.nn.functional.pad (%x, [-3, -3])", "the padded size of dimension 2 would be negative"},
        {"call_function torch.split (%x, [1, 2], 1)", "split sections sum to 3, not to the size 4"},
        {"call_function torch.chunk (%x, 0)", "chunks must be a positive int"},
        {"call_function torch.nn.functional.pixel_shuffle (%x, 3)", "not divisible by the square of upscale_factor"},
        {"call_function torch.sum (%x, [1, -2])", "dim 1 appears more than once"},
        {"call_function torch.amax (%e, 2)", "amax / amin of an empty dimension has no identity"},
        {"call_method repeat (%x, 2, 2)", "repeat needs at least as many sizes (2) as the tensor has dimensions (3)"},
        /* parameters read element by element against the input must be as long as it needs: they
        ** were read past their end before */
        {"call_function torch.nn.functional.layer_norm (%x, [5], %w)", "weight has 2 elements; the input needs 5"},
        {"call_function torch.nn.functional.batch_norm (%x, %w, %w)", "running_mean has 2 elements; the input needs 4"},
        {"call_function torch.nn.functional.group_norm (%x, 2, None, %w)", "bias has 2 elements; the input needs 4"},
        {"call_function operator.invert (%x,)", "~ is supported on bool tensors only"},
        {"call_function torch.round (%x,) {decimals: 2}", "round with decimals=2 is not supported"},
        {"call_method masked_fill (%w, %x, 0.0)", "the mask has more dimensions than the input"},
        {"call_method masked_fill (%x, %x, %x)", "masked_fill's value must be a number or a 0-dimensional tensor"},
        {"call_function torch.where (%x, %x)", "where takes a condition, or a condition, an input and an other"},
        {"call_method masked_select (%w, %x)", "the mask has more dimensions than the input"},
        {"call_function torch.masked_select (%x, %w)", "the mask's size 2 cannot be broadcast to the input's 5 in dimension 2"},
        {"call_method narrow (%x, 2, 3, 3)", "narrow [3, +3) is out of range for size 5"},
        {"call_method select (%x, 1, 4)", "index 4 is out of range for size 4"},
        {"call_function torch.movedim (%x, [0, 1], [2, 2])", "movedim repeats a dimension"},
        {"call_function torch.movedim (%x, [0, 1], [2])", "movedim: 2 sources but 1 destinations"},
        {"call_method flip (%x, 1, -2)", "flip repeats dimension 1"},
        {"call_function torch.roll (%x, [1, 2])", "roll without dims takes one shift"},
        {"call_method norm (%x, 3)", "norm with order 3 is not supported"},
        {"call_function torch.linalg.norm (%x, 2, [1, 2])", "matrix norms other than Frobenius are not supported"},
        {"call_method to (%x, torch.float64)", "to(float64) is not supported by the interpreter"},
        {"call_function torch.zeros_like (%x,) {dtype: torch.int8}", "dtype int8 is not supported by the interpreter"},
        {"call_method repeat_interleave (%x, %x)", "repeat_interleave is supported with an int number of repeats"},
        {"call_function torch.nn.functional.glu (%x,)", "glu halves a dimension of even size"},
        {"call_function torch.addmm (%x, %x, %x)", "addmm takes two matrices"},
        {"call_method unflatten (%x, 1, [3, -1])", "sizes multiply to 3, which does not divide the size 4"},
        {"call_method unflatten (%x, 1, [3, 2])", "sizes multiply to 6, not to the size 4"},
        {"call_function operator.getitem (%x, (0, [0, 1]))", "an index list together with int indices is not supported"},
        {"call_function operator.getitem (%x, ([0], [1]))", "more than one index list is not supported"},
        {"call_function operator.getitem (%x, (slice(None, None, None), [0, 9]))", "index 9 is out of bounds for size 4"},
        {"call_function operator.getitem (%x, (slice(None, None, None), [0, 1.5]))", "an index list holds integers"},
        {"call_function operator.getitem (%x, (%x,))", "an index tensor must have 1 dimension"},
        {"call_function torch.einsum (\"ij,jk\", %x, %x)", "einsum operand 0 has 3 dimensions, its subscripts 2"},
        {"call_function torch.einsum (\"abc,abd->ae\", %x, %x)", "einsum's output subscripts are invalid at 'e'"},
        {"call_function torch.einsum (\"ab1\", %x)", "einsum subscript '1' is not supported"},
        {"call_function torch.einsum (\"abc,abc\", %x)", "einsum's equation has more operands than given"},
        {"call_function torch.einsum (\"abc,acb\", %x, %x)", "einsum subscript 'c' has sizes 5 and 4"},
        {"call_function torch.einsum (\"abc\", %x, %x)", "einsum's equation has 1 operands, 2 given"},
        {"call_function torch.nn.functional.embedding (%x, %x)", "the embedding weight must have 2 dimensions"},
        {"call_function torch.matmul (%x, %x)", "matmul: 5 vs 4"},
        {"call_function torch.nn.functional.lp_pool2d (%x, 0.0, 2)", "norm_type must be a positive number"},
        {"call_function torch.nn.functional.local_response_norm (%x, 0)", "local response norm's size must be positive"},
        {"call_function torch.nn.functional.local_response_norm (%w, 2)", "local response norm needs a 3-d input or more"},
        {"call_function torch.matmul (%m, %w)", "matmul: 5 vs 2"},
        {"call_function torch.nn.functional.embedding (%x, %x) {max_norm: 1.0}", "embedding with max_norm changes its weight"},
        {"call_function torch.nn.functional.embedding (%x, %m)", "index -1.375 is out of range for an embedding of 4 rows"},
        {"call_function torch.gather (%x, 2, %x)", "index -1.375 is not an integer (dimension of size 5)"},
        {"call_method gather (%x, 1, %m)", "the index has 2 dimensions, the input 3"},
        {"call_function torch.gather (%e, 1, %x)", "the index's size 5 exceeds the input's 0 in dimension 2"},
        {"call_function torch.index_select (%x, 1, %m)", "index_select takes a 1-d index, not 2-d"},
        {"call_function torch.index_select (%x, 1, %w)", "index -1.375 is not an integer (dimension of size 4)"},
        {"call_method topk (%x, 6)", "k (6) is out of range for a dimension of 5"},
        {"call_method triu (%w,)", "triu needs a tensor of 2 or more dimensions"},
        {"call_function torch.pow (%x,) {exponent: %x}", "pow with a tensor exponent takes both operands by position"},
    };
    refusals("  %e = call_function operator.getitem (%x, (..., slice(0, 0, None)))\n"
             "  %w = call_function operator.getitem (%x, (0, 0, slice(0, 2, None)))\n"
             "  %m = call_function operator.getitem (%x, 0)\n",
             cases, sizeof cases / sizeof cases[0], 3, (int64_t[]){1, 4, 5});
}
END_TEST

/* MultiheadAttention and the transformer encoder modules: what they do not run, and weights or
** parts missing or of the wrong size */
START_TEST(attention_refuses_what_it_cannot_run)
{
    static const struct {
        const char *attrs, *call, *msg;
    } cases[] = {
        {"embed_dim: 5, num_heads: 2", "(%x, %x, %x)", "needs embed_dim divisible by num_heads"},
        {"embed_dim: 5, num_heads: 1, add_zero_attn: True", "(%x, %x, %x)", "add_zero_attn is not supported"},
        {"embed_dim: 5, num_heads: 1, training: True, dropout: 0.1", "(%x, %x, %x)", "training mode"},
        {"embed_dim: 5, num_heads: 1", "(%x, %x, %x)", "has no float32 tensor 'in_proj_weight'"},
        {"embed_dim: 5, num_heads: 1, kdim: 3, vdim: 5", "(%x, %x, %x)", "query, key and value do not fit it"},
        {"embed_dim: 5, num_heads: 1", "(%x, %x, %x) {attn_mask: %x}", "attn_mask must be [4, 4] or [1, 4, 4]"},
        {"embed_dim: 5, num_heads: 1", "(%x, %x, %x) {key_padding_mask: %x}", "key_padding_mask must be [1, 4]"},
        {"embed_dim: 4, num_heads: 1", "(%x, %x, %x)", "query, key and value do not fit it (embed_dim 4"},
        /* sizes that are no integers (a fuzzer's find: converting them was undefined behaviour) */
        {"embed_dim: 1e300, num_heads: 1", "(%x, %x, %x)", "needs embed_dim divisible by num_heads"},
        {"embed_dim: 5, num_heads: 1, kdim: nan", "(%x, %x, %x)", "query, key and value do not fit it (embed_dim 5, kdim -9223372036854775808"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule mha : torch.nn.MultiheadAttention {batch_first: True, %s}\n\ngraph\n"
                 "  %%x = placeholder x ()\n  %%y = call_module mha %s\n  %%output = output output (%%y,)\n",
                 cases[i].attrs, cases[i].call);
        refused_with(text, "y", 3, (int64_t[]){1, 4, 5}, cases[i].msg, i);
    }
    static const struct {
        const char *modules, *msg;
    } encoders[] = {
        {"module y : torch.nn.TransformerEncoder {}\n", "TransformerEncoder has no layers"},
        {"module y : torch.nn.TransformerEncoder {}\nmodule y.layers : torch.nn.ModuleList {}\n"
         "module y.layers.0 : torch.nn.Linear {}\n", "layer y.layers.0 is a torch.nn.Linear, not a TransformerEncoderLayer"},
        {"module y : torch.nn.TransformerEncoderLayer {training: True}\n", "in training mode drops values at random"},
        {"module y : torch.nn.TransformerEncoderLayer {}\n", "torch.nn.TransformerEncoderLayer lacks a submodule it runs"},
        {"module y : torch.nn.LSTM {input_size: 5, hidden_size: 3, proj_size: 3}\n", "proj_size must be 0, or for an LSTM below hidden_size"},
        {"module y : torch.nn.GRU {input_size: 5, hidden_size: 3, proj_size: 2}\n", "proj_size must be 0, or for an LSTM below hidden_size"},
        {"module y : torch.nn.GRU {input_size: 4, hidden_size: 3}\n", "torch.nn.GRU takes [seq, batch, 4]"},
        {"module y : torch.nn.GRU {input_size: 5, hidden_size: 3}\n", "torch.nn.GRU has no float32 tensor 'weight_ih_l0'"},
        {"module y : torch.nn.LSTM {hidden_size: 3}\n", "torch.nn.LSTM needs input_size, hidden_size and num_layers"},
        {"module y : torch.nn.LSTM {input_size: 1e30, hidden_size: 3}\n", "torch.nn.LSTM needs input_size, hidden_size and num_layers"},
        {"module y : torch.nn.GRU {input_size: 5, hidden_size: -inf}\n", "torch.nn.GRU needs input_size, hidden_size and num_layers"},
        {"module y : torch.nn.GRU {input_size: 5, hidden_size: 3, num_layers: 2.5}\n", "torch.nn.GRU needs input_size, hidden_size and num_layers"},
        /* sizes no weights can hold: refused before anything is allocated (they asked for petabytes) */
        {"module y : torch.nn.LSTM {input_size: 5, hidden_size: 22222222222223}\n",
         "torch.nn.LSTM's sizes (input_size 5, hidden_size 22222222222223) are beyond 1 TiB of weights"},
        {"module y : torch.nn.GRU {input_size: 5, hidden_size: 4611686018427387904}\n", "are beyond 1 TiB of weights"},
    };
    for (size_t i = 0; i < sizeof encoders / sizeof encoders[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\n%s\ngraph\n  %%x = placeholder x ()\n  %%y = call_module y (%%x,)\n"
                 "  %%output = output output (%%y,)\n",
                 encoders[i].modules);
        refused_with(text, "y", 3, (int64_t[]){1, 4, 5}, encoders[i].msg, i);
    }
    static const char *const cells[] = {"torch.nn.LSTMCell", "torch.nn.GRUCell", "torch.nn.RNNCell"};
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule y : %s {input_size: 5, hidden_size: 4611686018427387904}\n"
                 "graph\n  %%x = placeholder x ()\n  %%y = call_module y (%%x,)\n  %%output = output output (%%y,)\n",
                 cells[i]);
        refused_with(text, "y", 2, (int64_t[]){4, 5}, "are beyond 1 TiB of weights", i);
    }
}
END_TEST

static float zeros(uint64_t i) { return (float)i * 0.0f; }
static float ones(uint64_t i) { return (float)i * 0.0f + 1.0f; }

/* torchvision's Swin functions (swin.c): what each refuses, and the case they run; their values are
** PyTorch's (tests/conformance/test_calibrate.py), and one case here is worked out by hand */
START_TEST(swin_functions_refuse_what_they_cannot_run)
{
#define SWA "call_function torchvision.models.swin_transformer.shifted_window_attention"
#define SW "call_function torchvision.models.swin_transformer."
    static const struct refusal cases[] = {
        {SWA " (%x, %w, %x, %x, [2, 2], 3) {shift_size: [1, 1]}", "4 channels do not split into 3 heads"},
        {SWA " (%x, %w, %x, %x, [2, 2], 1) {shift_size: [1, 1], attention_dropout: 0.1}",
         "dropout with p > 0 drops at random here"},
        {SWA " (%x, %w, %x, %x, [2, 2], 1) {shift_size: [1, 1], dropout: 0.5}", "dropout with p > 0"},
        {SWA " (%x, %x, %x, %x, [2, 2], 1) {shift_size: [1, 1]}", "the weights must be [12, 4] and [4, 4] for 4 channels"},
        {SWA " (%x, %w, %x, %w, [2, 2], 1) {shift_size: [1, 1]}",
         "the relative position bias has 48 elements; 1 heads over 2 x 2 windows need 16"},
        {SWA " (%x, %w, %x, %x, [0, 2], 1) {shift_size: [0, 0]}", "window size [0, 2] is out of range"},
        {SWA " (%x, %w, %x, %x, [2, 2000], 1) {shift_size: [0, 0]}", "window size [2, 2000] is out of range"},
        {SWA " (%x, %w, %x, %x, [2, 2], 1) {shift_size: [3, 0]}", "shift size [3, 0] is out of the window's range"},
        {SWA " (%x, %w, %x, %x, [2, 2], 1) {shift_size: [1, 1], qkv_bias: %x}", "qkv_bias has 16 elements where 12 are needed"},
        {SWA " (%x, %w, %x, %x, [2, 2], 1) {shift_size: [1, 1], logit_scale: %x}", "logit_scale has 16 elements where 1 are needed"},
        {SWA " (%x, %w, %x, %x, [2, 2]) {shift_size: [1, 1]}", "argument num_heads is missing"},
        {SWA " (%x, %w, %x, %x, [2, 2], 1)", "argument shift_size is missing"},
        {SWA " (%x, %w, %x, %x, [2, 2], 0) {shift_size: [1, 1]}", "4 channels do not split into 0 heads"},
        {SWA " (%v, %w, %x, %x, [2, 2], 1) {shift_size: [1, 1]}", "the input must be [B, H, W, C], not of 2 dimensions"},
        {SW "_get_relative_position_bias (%x, %x, [2, 2])", "the bias table must have 2 dimensions, not 4"},
        {SW "_get_relative_position_bias (%v, %w, [2, 2])", "the index has 48 elements; a window of 2 x 2 needs 16"},
        {SW "_get_relative_position_bias (%v, %x, [2, 2])", "index -1.375 at 0 is out of the bias table's 4 rows"},
        {SW "_patch_merging_pad (%v,)", "the input must have 3 dimensions or more, not 2"},
    };
    refusals("  %w = call_method repeat (%x, 3, 1, 1, 1)\n  %v = call_method view (%x, 4, 4)\n", cases,
             sizeof cases / sizeof cases[0], 4, (int64_t[]){1, 2, 2, 4});
#undef SWA
#undef SW
}
END_TEST

/* torchvision's MViT functions (mvit.c) and tensor_split: what each refuses; their values are
** PyTorch's (tests/conformance/test_calibrate.py), and the cases below are worked out by hand */
START_TEST(mvit_functions_refuse_what_they_cannot_run)
{
#define MV "call_function torchvision.models.video.mvit."
    static const struct refusal cases[] = {
        {MV "_unsqueeze (%x, 6, 1)", "a tensor of 4 dimensions where 5 or 6 are expected"},
        {MV "_unsqueeze (%v, 3, 7)", "expand_dim 7 is out of range for a tensor of 2 dimensions"},
        {MV "_unsqueeze (%v, 3)", "argument expand_dim is missing"},
        {MV "_squeeze (%v, 3, 5, 2)", "dimension 5 is out of range"},
        {MV "_add_shortcut (%x, %x)", "argument residual_with_cls_embed is missing"},
        {MV "_add_shortcut (%v, %v, False)", "x[:, :, 1:, :] needs 4 dimensions or more (x 2, the shortcut 2)"},
        {MV "_add_shortcut (%x, %v, False)", "x[:, :, 1:, :] needs 4 dimensions or more (x 4, the shortcut 2)"},
        {MV "_add_shortcut (%x, %u, False)", "the shortcut has 5 dimensions, x 4"},
        {MV "_add_shortcut (%v, %x, True)", "the shortcut has 4 dimensions, more than x's 2"},
        {MV "_add_shortcut (%x, %w, True)",
         "the shortcut's extent 3 does not broadcast to x's 5 at dimension 2"},
        {MV "_add_shortcut (%x, %w, False)",
         "the shortcut[:, :, 1:, :]'s extent 2 does not broadcast to x[:, :, 1:, :]'s 4 at dimension 2"},
        {MV "_add_rel_pos (%x, %v, [1, 2, 2], [1, 2, 2], %t, %t, %t)", "q must be [B, heads, tokens, C], not of 2 dimensions"},
        {MV "_add_rel_pos (%x, %x, [1, 2, 3], [1, 2, 2], %t, %t, %t)",
         "q has 5 tokens; q_thw (1, 2, 3) and the class token need 7"},
        {MV "_add_rel_pos (%x, %x, [1, 2, 2], [1, 3, 3], %t, %t, %t)", "attn must be [1, 2, 5, 10] for q and k_thw"},
        {MV "_add_rel_pos (%x, %x, [1, 0, 2], [1, 2, 2], %t, %t, %t)", "must be positive sizes"},
        {MV "_add_rel_pos (%x, %x, [1, 2, 2], [1, 2, 2], %v, %t, %t)",
         "rel_pos_h must be [rows, 5], not of 2 dimensions with another width"},
        {MV "_add_rel_pos (%x, %x, [1, 2, 2], [1, 2, 2], %t, %t, %x)", "rel_pos_t must be [rows, 5], not of 4 dimensions"},
        {MV "_add_rel_pos (%x, %x, [1, 2, 2], [1, 2, 2], %t, %t)", "argument 6 / rel_pos_t"},
        {"call_function torch.tensor_split (%x, 0, 2)", "tensor_split's sections must be positive, not 0"},
        {"call_function torch.tensor_split (%x, [1, 2.5], 2)", "tensor_split's indices must be ints"},
        {"call_function torch.tensor_split (%x, \"a\")", "tensor_split takes a number of sections, a list of indices"},
        {"call_method tensor_split (%x, %x)", "tensor_split takes a number of sections, a list of indices"},
    };
    refusals("  %v = call_method view (%x, 5, 10)\n  %t = call_method view (%x, 10, 5)\n"
             "  %u = call_method unsqueeze (%x, 0)\n  %w = call_function operator.getitem (%x, "
             "(slice(None, None, None), slice(None, None, None), slice(None, 3, None)))\n",
             cases, sizeof cases / sizeof cases[0], 4, (int64_t[]){1, 2, 5, 5});
#undef MV
}
END_TEST

/* _add_rel_pos by hand: one head of one channel, queries at (t, h, w) = (0, 0, 0) and (0, 0, 1)
** (q_thw (1, 1, 2)) and one key (k_thw (1, 1, 1)). Along w, q_w = 2 and k_w = 1: the table needs
** 2 max(2, 1) - 1 = 3 rows, and the distance i * max(1/2, 1) - (j + 1 - 1) * max(2/1, 1) = i picks
** row i for query i; along h and t one row each. So attn[1 + i][1] += q_i (h + w_i + t), and the
** class token's row and column stay. A w table of 5 rows [0, 3, 6, 9, 12] is interpolated to 3
** first: rows at 5/3 (o + 1/2) - 1/2 = 1/3, 2, 11/3, so [1, 6, 11]. _add_shortcut, whose result
** nothing reads, changes its argument for the node that reads it later; _unsqueeze and _squeeze
** give the token sequence a head dimension and take it away. */
static float rel_q(uint64_t i) { return (float)i * 0.0f + (i == 1 ? 2.0f : i == 2 ? 3.0f : 5.0f); }
static float rel_w3(uint64_t i) { return (float)(i == 0 ? 10 : i == 1 ? 100 : 1000); }
static float rel_w5(uint64_t i) { return 3.0f * (float)i; }
static float rel_h(uint64_t i) { return (float)i + 1.0f; }
static float rel_t(uint64_t i) { return (float)i + 10000.0f; }

START_TEST(mvit_functions_add_the_relative_position_bias_and_the_shortcut)
{
    for (int rows = 3; rows <= 5; rows += 2) {
        struct bpcc_graph *g = parse(
            "bpcc-model 1\n\nmodule a : torch.nn.Module {}\n\ngraph\n  %q = placeholder q ()\n"
            "  %a0 = get_attr a.attn ()\n  %h = get_attr a.h ()\n  %w = get_attr a.w ()\n  %t = get_attr a.t ()\n"
            "  %attn = call_function operator.mul (%a0, 1.0)\n"
            "  %r = call_function torchvision.models.video.mvit._add_rel_pos (%attn, %q, (1, 1, 2), (1, 1, 1), %h, %w, %t)\n"
            "  %s = call_function torchvision.models.video.mvit._add_shortcut (%r, %q, False)\n"
            "  %u = call_function torchvision.models.video.mvit._unsqueeze (%r, 4, 1)\n"
            "  %u0 = call_function operator.getitem (%u, 0)\n  %u1 = call_function operator.getitem (%u, 1)\n"
            "  %z = call_function torchvision.models.video.mvit._squeeze (%u0, 4, 1, %u1)\n"
            "  %output = output output ((%r, %u0, %z),)\n");
        set_tensor(g, "a", "attn", 4, (int64_t[]){1, 1, 3, 2}, zeros);
        set_tensor(g, "a", "h", 2, (int64_t[]){1, 1}, rel_h);
        set_tensor(g, "a", "w", 2, (int64_t[]){rows, 1}, rows == 3 ? rel_w3 : rel_w5);
        set_tensor(g, "a", "t", 2, (int64_t[]){1, 1}, rel_t);
        struct xtensor *q = input(4, (int64_t[]){1, 1, 3, 1}, rel_q);
        struct xval out;
        RUN(g, q, &out);
        const struct xtensor *r = out.u.seq.items[0].u.t;
        ck_assert_int_eq(r->ndim, 4);
        ck_assert_int_eq(r->dims[2], 3);
        ck_assert_int_eq(r->dims[3], 2);
        /* the bias (h 1, t 10000, w row i); then the shortcut adds q's rows past the class token to
        ** every column of attn's rows past it (broadcast over the last dimension of 1) */
        float w0 = rows == 3 ? 10.0f : 1.0f, w1 = rows == 3 ? 100.0f : 6.0f;
        float want[6] = {0, 0, 2, 2 * (1 + w0 + 10000) + 2, 3, 3 * (1 + w1 + 10000) + 3};
        for (int i = 0; i < 6; i++)
            ck_assert_msg(fabsf(r->data[i] - want[i]) <= 1e-5f * fabsf(want[i]), "rows %d: attn[%d] %g, not %g", rows, i,
                          (double)r->data[i], (double)want[i]);
        const struct xtensor *u0 = out.u.seq.items[1].u.t, *z = out.u.seq.items[2].u.t;
        ck_assert_int_eq(u0->ndim, 4); /* the target's 4 dimensions already: taken as it is, and kept */
        ck_assert_int_eq(z->ndim, 4);
        bpcc_xval_release(&out);
        bpcc_xtensor_free(q);
        bpcc_graph_free(g);
    }
    /* a 3-d sequence gets its head dimension and loses it again */
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
        "  %u = call_function torchvision.models.video.mvit._unsqueeze (%x, 4, 1)\n"
        "  %u0 = call_function operator.getitem (%u, 0)\n  %u1 = call_function operator.getitem (%u, 1)\n"
        "  %z = call_function torchvision.models.video.mvit._squeeze (%u0, 4, 1, %u1)\n"
        "  %output = output output ((%u0, %u1, %z),)\n");
    struct xtensor *x = input(3, (int64_t[]){2, 5, 4}, ramp);
    struct xval out;
    RUN(g, x, &out);
    const struct xtensor *u0 = out.u.seq.items[0].u.t, *z = out.u.seq.items[2].u.t;
    ck_assert_int_eq(u0->ndim, 4);
    ck_assert_int_eq(u0->dims[1], 1);
    ck_assert_int_eq(out.u.seq.items[1].k, XV_INT);
    ck_assert_int_eq(out.u.seq.items[1].u.i, 3);
    ck_assert_int_eq(z->ndim, 3);
    ck_assert_int_eq(z->dims[1], 5);
    ck_assert(!memcmp(z->data, x->data, x->numel * sizeof *x->data));
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

/* tensor_split: sections (the first size % n pieces one longer) and indices (negative ones from the
** end, clamped, a piece empty where they do not increase) */
START_TEST(tensor_split_cuts_sections_and_at_indices)
{
    struct bpcc_graph *g = parse("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
                                 "  %a = call_function torch.tensor_split (%x, 3)\n"
                                 "  %b = call_method tensor_split (%x, [2, -1, 1, 9])\n"
                                 "  %c = call_function torch.tensor_split (%x,) {indices: (1,), dim: 0}\n"
                                 "  %output = output output ((%a, %b, %c),)\n");
    struct xtensor *x = input(1, (int64_t[]){7}, ramp);
    struct xval out;
    RUN(g, x, &out);
    static const int64_t a[3][2] = {{0, 3}, {3, 2}, {5, 2}}, b[5][2] = {{0, 2}, {2, 4}, {6, 0}, {1, 6}, {7, 0}},
                         c[2][2] = {{0, 1}, {1, 6}};
    const struct {
        const int64_t (*want)[2];
        uint32_t n;
    } parts[3] = {{a, 3}, {b, 5}, {c, 2}};
    for (int k = 0; k < 3; k++) {
        const struct xval *v = &out.u.seq.items[k];
        ck_assert_int_eq(v->k, XV_SEQ);
        ck_assert_uint_eq(v->u.seq.n, parts[k].n);
        for (uint32_t i = 0; i < parts[k].n; i++) {
            const struct xtensor *t = v->u.seq.items[i].u.t;
            ck_assert_msg(t->dims[0] == parts[k].want[i][1], "split %d piece %u: %lld elements", k, i, (long long)t->dims[0]);
            ck_assert(!memcmp(t->data, x->data + parts[k].want[i][0], (size_t)t->dims[0] * sizeof *t->data));
        }
    }
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

/* what the tensor ops users write (the later ones: shape.c's, distance.c's, elementwise.c's) refuse,
** each with its reason; their values are PyTorch's (tests/conformance/test_calibrate.py) */
START_TEST(more_tensor_ops_refuse_what_pytorch_refuses)
{
    static const struct refusal cases[] = {
        {"call_method t (%x,)", "t() expects a tensor of at most 2 dimensions, not 3"},
        {"call_function torch.diagonal (%x, 0, 1, 1)", "diagonal dimensions cannot be identical (1)"},
        {"call_function torch.rot90 (%x, 1, [1, -2])", "rot90's dims must differ"},
        {"call_function torch.outer (%x, %x)", "outer takes two 1-d tensors"},
        {"call_function torch.diff (%x, -1)", "diff's order must be non-negative, not -1"},
        {"call_function torch.diff (%x, 1, -1) {prepend: %v}", "prepend must have the input's shape but along dim"},
        {"call_function torch.take_along_dim (%x, %x, 2)", "index -1.375 is not an integer (dimension of size 5)"},
        {"call_method scatter (%x, 2, %i, %x) {reduce: \"max\"}", "scatter's reduce 'max' is not 'add' or 'multiply'"},
        {"call_method scatter_add (%x, 2, %i, 1.0)", "src must be a tensor"},
        {"call_function torch.nn.functional.one_hot (%x,)", "class values must be non-negative integers, not -1.375"},
        {"call_function torch.nn.functional.one_hot (%i, 3)", "class value 4 is not smaller than num_classes (3)"},
        {"call_function torch.nn.functional.channel_shuffle (%x, 3)", "4 channels do not split into 3 groups"},
        {"call_function torch.nn.functional.unfold (%v, 2)", "unfold takes [N, C, H, W] or [C, H, W], not 2 dimensions"},
        {"call_function torch.nn.functional.unfold (%x, 7)", "the blocks do not fit in the padded 4 x 5 input"},
        {"call_function torch.nn.functional.unfold (%x, 2, 0)", "kernel size, dilation and stride must be positive"},
        {"call_function torch.bucketize (%x, %v)", "the boundaries must be 1-d, not of 2 dimensions"},
        {"call_function torch.kthvalue (%x, 9)", "k (9) is out of range for a dimension of 5"},
        {"call_function torch.cdist (%x, %w)", "x1 and x2 must have the same number of columns (5, 4)"},
        {"call_function torch.cdist (%x, %x, 2.0, \"fast\")", "compute_mode 'fast' is none of PyTorch's three"},
        {"call_function torch.nn.functional.pairwise_distance (%x, %x, -1.0)", "p must be non-negative, not -1"},
        {"call_function torch.nn.functional.cosine_similarity (%x, %w)", "shapes cannot be broadcast (dimension 2: 5 vs 4)"},
        {"call_function torch.heaviside (%x, 0.5)", "argument 1 / values must be a tensor"},
        {"call_function operator.mod (3, 0)", "integer modulo by zero"},
        {"call_function torch.nn.functional.grid_sample (%x, %x) {mode: \"bicubic\"}",
         "grid_sample's mode 'bicubic' is not supported (bilinear, nearest)"},
        {"call_function torch.nn.functional.grid_sample (%x, %x)", "grid_sample takes a 4-d input here, not 3-d"},
        /* div's rounding_mode: read (it was ignored, silently giving true division) */
        {"call_function torch.div (%x, 2.0) {rounding_mode: \"round\"}", "rounding_mode must be None, \"trunc\" or \"floor\""},
        {"call_function torch.nn.functional.threshold (%x, 0.5)", "threshold needs its threshold and value"},
        {"call_function torch.nn.functional.alpha_dropout (%x, 0.5, True)", "alpha dropout in training mode drops at random"},
        /* an in-place op whose result would not fit its input (the input broadcast to more) */
        {"call_method add_ (%x, %s2)", "the in-place result's shape differs from its input's, which PyTorch refuses"},
    };
    refusals("  %v = call_method view (%x, 4, 5)\n  %w = call_method view (%x, 5, 4)\n"
             "  %i = call_method argsort (%x, -1)\n  %s2 = call_function torch.stack ([%v, %v],)\n",
             cases, sizeof cases / sizeof cases[0], 3, (int64_t[]){1, 4, 5});
}
END_TEST

/* what the stacks, index updates and the other ops of the latest sweep refuse, each with its reason;
** their values are PyTorch's (tests/conformance/test_calibrate.py) */
START_TEST(stacks_index_updates_and_more_ops_refuse_what_pytorch_refuses)
{
    static const struct refusal cases[] = {
        {"call_function torch.hstack ([],)", "needs a non-empty list of tensors"},
        {"call_function torch.vstack ([%x, %v],)", "tensors of different rank"},
        {"call_function torch.block_diag (%x, %v)", "block_diag takes tensors of 2 dimensions or fewer; argument 0 has 3"},
        {"call_method index_add (%x, 1, %r2, %x)", "the source must have the input's shape with 2 along dimension 1"},
        {"call_method index_copy (%x, 1, %i, %x)", "the index must be 1-d, not 3-d"},
        {"call_method index_fill (%x, 1, %r, %x)", "index_fill's value must be a number or a 0-dimensional tensor"},
        {"call_method index_fill (%x, 2, %r7, 0.0)", "index 5 is out of bounds for a dimension of size 5"},
        {"call_method masked_scatter (%x, %x, %x)", "masked_scatter's mask must be a bool tensor"},
        {"call_method masked_scatter (%x, %b, %r)", "the source has 4 elements, fewer than the mask selects"},
        {"call_function torch.aminmax (%x, 1)", "aminmax takes dim and keepdim by keyword only"},
        {"call_function torch.isclose (%x, %x, -1.0)", "rtol and atol must be non-negative (-1, 1e-08)"},
        {"call_function torch.cross (%x, %v)", "cross takes two tensors of one shape here"},
        {"call_function torch.linalg.cross (%x, %x)", "dimension 2 has size 5, not 3"},
        {"call_function torch.cross (%v, %v)", "no dimension of size 3 in the input"},
        {"call_function torch.tensordot (%x, %x, 4)", "tensordot's dims 4 is out of range for tensors of 3 and 3 dimensions"},
        {"call_function torch.tensordot (%x, %x, [[0, 1], [0]])", "tensordot's two lists of dims differ in length (2, 1)"},
        {"call_function torch.tensordot (%x, %x, [[0, 1], [0, 0]])", "tensordot pairs dimension 0 of b twice"},
        {"call_function torch.tensordot (%x, %x, [[2], [1]])", "einsum subscript 'c' has sizes 5 and 4"},
        {"call_function torch.logcumsumexp (%x,)", "argument dim is missing"},
        {"call_method cumsum (%x,)", "argument dim is missing"}, /* it took dim 0 until this release */
        {"call_function torch.trapezoid (%x, %v)", "the points x must be 1-d of 5 or of y's shape"},
        {"call_function torch.nn.functional.instance_norm (%v,)", "instance norm takes [N, C, *] with one dimension or more past C"},
        {"call_function torch.nn.functional.instance_norm (%x, %m, %m)",
         "instance norm with use_input_stats updates running_mean and running_var in place"},
        {"call_function torch.nn.functional.instance_norm (%o,)", "instance norm needs more than 1 spatial element"},
    };
    refusals("  %v = call_method view (%x, 4, 5)\n  %i = call_method argsort (%x, 1)\n"
             "  %r = call_function operator.getitem (%i, (0, slice(None, None, None), 0))\n  %r7 = call_function operator.add (%r, 5)\n"
             "  %r2 = call_function operator.getitem (%r, slice(0, 2, None))\n"
             "  %b = call_function operator.gt (%x, -10.0)\n  %m = call_function operator.getitem (%x, (0, 0))\n"
             "  %o = call_function operator.getitem (%x, (slice(None, None, None), slice(None, None, None), slice(0, 1, None)))\n",
             cases, sizeof cases / sizeof cases[0], 3, (int64_t[]){1, 4, 5});
}
END_TEST

/* An in-place op changes its argument for the nodes that read it later (and the nodes it was changed
** in place from); one on a view whose tensor is read later is refused, as the interpreter's views are
** copies: PyTorch would change both */
START_TEST(in_place_ops_change_their_argument_and_views_are_refused)
{
    struct bpcc_graph *g = parse("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n  %a = call_function operator.mul (%x, 2)\n"
                                 "  %s = call_method sigmoid_ (%a,)\n  %b = call_method sub_ (%s, 1)\n"
                                 "  %c = call_function operator.add (%a, 0)\n  %output = output output ((%a, %s, %b, %c),)\n");
    struct xtensor *x = input(1, (int64_t[]){5}, ramp);
    struct xval out;
    RUN(g, x, &out);
    for (int k = 0; k < 4; k++) /* all four read the changed values: sigmoid(2x) - 1 */
        for (int i = 0; i < 5; i++) {
            float want = 1.0f / (1.0f + expf(-2.0f * x->data[i])) - 1.0f;
            ck_assert_msg(fabsf(out.u.seq.items[k].u.t->data[i] - want) < 1e-6f, "output %d [%d]", k, i);
        }
    bpcc_xval_release(&out);
    bpcc_graph_free(g);
    refused_with("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n  %a = call_function operator.mul (%x, 2)\n"
                 "  %v = call_method view (%a, -1)\n  %y = call_method add_ (%v, 1)\n"
                 "  %z = call_function operator.add (%a, %y)\n  %output = output output (%z,)\n",
                 "y", 1, (int64_t[]){5}, "changes 'v', a view of 'a', in place, and 'a' is read later", 0);
    refused_with("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n  %a = call_function operator.mul (%x, 2)\n"
                 "  %v = call_function operator.getitem (%a, slice(1, 3, None))\n  %y = call_method relu_ (%v,)\n"
                 "  %z = call_function operator.add (%a, 1)\n  %output = output output ((%z, %y),)\n",
                 "y", 1, (int64_t[]){5}, "changes 'v', a view of 'a', in place", 1);
    /* a view of a view is a view of the first tensor too (this ran, leaving 'a' unchanged, silently) */
    refused_with("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n  %a = call_function operator.mul (%x, 2)\n"
                 "  %v = call_method view (%a, -1)\n  %g = call_function operator.getitem (%v, slice(1, 3, None))\n"
                 "  %y = call_method mul_ (%g, 10)\n  %z = call_function operator.add (%a, 1)\n  %output = output output (%z,)\n",
                 "y", 1, (int64_t[]){5}, "changes 'g', a view of 'a', in place, and 'a' is read later", 2);
    /* so is a view of a parameter, whose change PyTorch keeps */
    g = parse("bpcc-model 1\n\nmodule m : torch.nn.Module {}\n\ngraph\n  %x = placeholder x ()\n"
              "  %w = get_attr m.w ()\n  %v = call_method view (%w, -1)\n  %y = call_method mul_ (%v, 10)\n"
              "  %z = call_function operator.add (%x, %y)\n  %output = output output (%z,)\n");
    set_tensor(g, "m", "w", 1, (int64_t[]){5}, ramp);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(run1(g, x, &out, &d), BPCC_ERR_GRAPH);
    TU_ASSERT_DIAG(&d, 9, 3, "changes 'v', a view of m.w, in place, which PyTorch keeps for the next batch");
    bpcc_graph_free(g);
    /* indexing by a list copies: no view, nothing refused */
    g = parse("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n  %a = call_function operator.mul (%x, 2)\n"
              "  %v = call_function operator.getitem (%a, [1, 2])\n  %y = call_method relu_ (%v,)\n"
              "  %z = call_function operator.add (%a, 1)\n  %output = output output ((%z, %y),)\n");
    RUN(g, x, &out);
    ck_assert(out.u.seq.items[0].u.t->data[0] == x->data[0] * 2 + 1);
    bpcc_xval_release(&out);
    bpcc_graph_free(g);
    bpcc_xtensor_free(x);
}
END_TEST

/* One 3 x 3 image of one channel, windows of 2 x 2 shifted by 1, a single head whose queries and keys
** are 0 and whose values and projection are the identity: each output pixel is the mean of the
** pixels its window holds in its region (the others weigh e^-100). The map is padded to 4 x 4 and
** rolled by -1: rolled rows 0-1, 2 and 3 are regions 0, 1 and 2 (torchvision's slices [0:-2],
** [-2:-1], [-1:]), likewise the columns, and rolled row or column 3 is the image's row or column 0
** wrapped round. So window 0 holds pixels (1..2, 1..2), one region; window 1 holds (1..2, 0) in one
** region and padding in another; window 2 holds (0, 1..2) likewise; window 3 holds (0, 0) alone. */
START_TEST(shifted_window_attention_averages_each_region_of_a_window)
{
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\nmodule a : torch.nn.Module {}\n\ngraph\n  %x = placeholder x ()\n"
        "  %wqkv = get_attr a.wqkv ()\n  %wp = get_attr a.wp ()\n  %b = get_attr a.b ()\n"
        "  %y = call_function torchvision.models.swin_transformer.shifted_window_attention (%x, %wqkv, %wp, %b, [2, 2], 1) "
        "{shift_size: [1, 1], attention_dropout: 0.0, dropout: 0.0}\n  %output = output output (%y,)\n");
    set_tensor(g, "a", "wqkv", 2, (int64_t[]){3, 1}, zeros);
    float *wq = bpcc_tensor_data((struct bpcc_tensor *)bpcc_module_tensor(bpcc_graph_find_module(g, "a"), "wqkv"));
    wq[2] = 1.0f; /* v = x */
    set_tensor(g, "a", "wp", 2, (int64_t[]){1, 1}, ones);
    set_tensor(g, "a", "b", 4, (int64_t[]){1, 1, 4, 4}, zeros);
    struct xtensor *x = input(4, (int64_t[]){1, 3, 3, 1}, zeros);
    for (int i = 0; i < 9; i++) x->data[i] = (float)(1 << i); /* each pixel its own bit */
    struct xval out;
    RUN(g, x, &out);
    ck_assert_int_eq(out.k, XV_TENSOR);
    const struct xtensor *y = out.u.t;
    ck_assert_int_eq(y->ndim, 4);
    ck_assert_int_eq(y->dims[1], 3);
    ck_assert_int_eq(y->dims[2], 3);
    static const float want_of[9] = {1, 3, 3, 36, 108, 108, 36, 108, 108}; /* (2+4)/2, (8+64)/2, (16+32+128+256)/4 */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            float want = want_of[r * 3 + c];
            ck_assert_msg(fabsf(y->data[r * 3 + c] - want) <= 1e-4f * want, "pixel (%d, %d): %g, not %g", r, c,
                          (double)y->data[r * 3 + c], (double)want);
        }
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST


/* training mode: dropout and batch norm behave otherwise there (random, batch statistics), so the
** interpreter refuses them rather than run them as in eval; an instance norm that tracks running
** statistics normalizes by the input's own in training mode */
START_TEST(training_mode_is_refused_where_it_changes_the_result)
{
    static const struct {
        const char *modules, *call, *msg; /* msg NULL: runs */
    } cases[] = {
        {"module m : torch.nn.BatchNorm1d {training: True, eps: 1e-05}\n",
         "call_module m (%x,)", "batch norm in training mode normalizes by the batch's statistics"},
        {"", "call_function torch.nn.functional.batch_norm (%x, None, None, None, None, True)", "batch norm in training mode"},
        {"", "call_function torch.nn.functional.dropout (%x, 0.5)", "dropout in training mode is random"},
        {"module m : torch.nn.Dropout {training: True, p: 0.1}\n", "call_module m (%x,)", "dropout in training mode is random"},
        {"module m : torch.nn.Dropout {training: True, p: 0.0}\n", "call_module m (%x,)", NULL},
        {"", "call_function torch.nn.functional.dropout (%x, 0.5, False)", NULL},
        {"module m : torch.nn.Dropout2d {training: False, p: 0.5}\n", "call_module m (%x,)", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[768];
        snprintf(text, sizeof text, "bpcc-model 1\n\n%s\ngraph\n  %%x = placeholder x ()\n  %%y = %s\n  %%output = output output (%%y,)\n",
                 cases[i].modules, cases[i].call);
        if (cases[i].msg) { /* refused before its statistics are read */
            refused_with(text, "y", 2, (int64_t[]){3, 4}, cases[i].msg, i);
            continue;
        }
        struct bpcc_graph *g = parse(text);
        struct xtensor *x = input(2, (int64_t[]){3, 4}, ramp);
        struct xval out;
        RUN(g, x, &out);
        ck_assert(!memcmp(out.u.t->data, x->data, 12 * sizeof(float)));
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
    /* InstanceNorm1d tracking statistics (mean 0, variance 1, eps 0): eval normalizes by the running
    ** ones (the identity here), training by the input's own */
    for (int training = 0; training < 2; training++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule m : torch.nn.InstanceNorm1d {training: %s, eps: 0.0, track_running_stats: True}\n"
                 "  buffer running_mean : f32[2]\n  buffer running_var : f32[2]\n\ngraph\n  %%x = placeholder x ()\n"
                 "  %%y = call_module m (%%x,)\n  %%output = output output (%%y,)\n",
                 training ? "True" : "False");
        struct bpcc_graph *g = parse(text);
        set_tensor(g, "m", "running_mean", 1, (int64_t[]){2}, zeros);
        set_tensor(g, "m", "running_var", 1, (int64_t[]){2}, ones);
        struct xtensor *x = input(3, (int64_t[]){1, 2, 4}, ramp);
        for (int k = 0; k < 8; k++) x->data[k] = (float)k; /* channel 0: 0 1 2 3, channel 1: 4 5 6 7 */
        struct xval out;
        RUN(g, x, &out);
        for (int k = 0; k < 8; k++) {
            float want = training ? (float)((k % 4 - 1.5) / sqrt(1.25)) : (float)k;
            ck_assert_msg(fabsf(out.u.t->data[k] - want) < 1e-5f, "training %d at %d: %g vs %g", training, k, out.u.t->data[k], want);
        }
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
}
END_TEST

/* A batch feeds every placeholder wherever it stands (here nine, one after the add that uses the
** first ones), each from its own tensor; one that the file lacks is named. */
/* each op of each kernel file's table is found, and finds its own kernel: an op listed twice (in one
** file or two) would be shadowed by the other entry; the index stays at most half full */
START_TEST(every_op_of_every_kernel_table_finds_its_own_kernel)
{
    const struct xop *const tables[] = {bpcc_elementwise_ops, bpcc_shape_ops,     bpcc_reduce_ops,
                                        bpcc_quantize_ops,    bpcc_einsum_ops,    bpcc_nn_ops,
                                        bpcc_resize_ops,      bpcc_attention_ops, bpcc_recurrent_ops,
                                        bpcc_swin_ops,        bpcc_mvit_ops,      bpcc_distance_ops};
    uint32_t n = 0;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const struct xop *e = tables[t]; e->op; e++, n++) {
            enum bpcc_node_kind k = e->kind == 'm'   ? BPCC_NODE_CALL_MODULE
                                    : e->kind == 'f' ? BPCC_NODE_CALL_FUNCTION
                                                     : BPCC_NODE_CALL_METHOD;
            ck_assert_msg(e->kind == 'm' || e->kind == 'f' || e->kind == 't', "%s: kind %c", e->op, e->kind);
            ck_assert_msg(e->fn && bpcc_exec_kernel(k, e->op) == e->fn, "table %zu: %c %s is shadowed or lost", t,
                          e->kind, e->op);
            ck_assert_int_eq(bpcc_exec_kernel_takes_quantized(e->fn),
                             !strcmp(e->op, "dequantize") || !strcmp(e->op, "torch.dequantize") ||
                                 !strcmp(e->op, "size") || !strcmp(e->op, "getattr"));
        }
    ck_assert_uint_gt(n, 520);
    ck_assert_uint_le(n, 1024);
    ck_assert_ptr_null(bpcc_exec_kernel(BPCC_NODE_CALL_FUNCTION, "torch.nn.ReLU")); /* a module type as a function */
    ck_assert_ptr_null(bpcc_exec_kernel(BPCC_NODE_CALL_METHOD, "no_such_method"));
    ck_assert(!bpcc_exec_kernel_takes_quantized(NULL));
}
END_TEST

/* the n tensors under their names as a batch file at path */
static void write_batch(const char *path, const char *const *names, const struct bpcc_tensor *const *ts, uint32_t n)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_int_eq(bpcc_safetensors_write(fp, path, names, ts, n, &d), BPCC_OK);
    fclose(fp);
}

START_TEST(a_batch_feeds_many_inputs_and_names_a_missing_one)
{
    char text[2048] = "bpcc-model 1\n\ngraph\n  %p0 = placeholder p0 ()\n";
    size_t n = strlen(text);
    for (int i = 1; i < 9; i++) {
        n += (size_t)snprintf(text + n, sizeof text - n, "  %%p%d = placeholder p%d ()\n", i, i);
        n += (size_t)snprintf(text + n, sizeof text - n, "  %%s%d = call_function operator.add (%%%s%d, %%p%d)\n", i,
                              i == 1 ? "p" : "s", i - 1, i);
    }
    snprintf(text + n, sizeof text - n, "  %%output = output output (%%s8,)\n");
    struct bpcc_graph *g = parse(text);
    /* p<i> = i + 1 everywhere: the sum is 45 */
    struct bpcc_graph *h;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_graph_new(&h, &d), BPCC_OK);
    const char *names[9] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"};
    const struct bpcc_tensor *ts[9];
    for (int i = 0; i < 9; i++) {
        struct bpcc_tensor *t;
        ck_assert_int_eq(bpcc_tensor_new(h, BPCC_DTYPE_F32, 1, (int64_t[]){3}, &t, &d), BPCC_OK);
        for (int k = 0; k < 3; k++) ((float *)bpcc_tensor_data(t))[k] = (float)(i + 1);
        ts[i] = t;
    }
    char *batch = tu_write_temp("", 0, ".safetensors"), *out = tu_write_temp("", 0, ".safetensors");
    for (uint32_t have = 9; have >= 8; have--) {
        write_batch(batch, names, ts, have);
        enum bpcc_status s = bpcc_run(g, batch, out, 1, &d);
        if (have == 8) {
            ck_assert_int_eq(s, BPCC_ERR_IO);
            ck_assert_msg(strstr(tu_msg(&d), "no tensor 'p8' for the model input 'p8'"), "%s", tu_msg(&d));
            /* what the file holds, the first five of its tensors */
            ck_assert_msg(d.entries[0].has_note && !strcmp(d.entries[0].note, "the file holds 'p0', 'p1', 'p2', 'p3', 'p4' and 3 more"),
                          "%s", d.entries[0].note);
            break;
        }
        ck_assert_msg(s == BPCC_OK, "%s", tu_msg(&d));
        struct bpcc_safetensors *st;
        ck_assert_int_eq(bpcc_safetensors_open(out, &st, &d), BPCC_OK);
        const void *data;
        ck_assert_int_eq(bpcc_safetensors_get(st, bpcc_safetensors_find(st, "output"), NULL, NULL, NULL, NULL, &data, NULL),
                         BPCC_OK);
        for (int k = 0; k < 3; k++) ck_assert(((const float *)data)[k] == 45.0f);
        bpcc_safetensors_close(st);
    }
    unlink(batch);
    unlink(out);
    free(batch);
    free(out);
    bpcc_graph_free(h);
    bpcc_graph_free(g);
}
END_TEST

/* bpcc run names the output's tensors by their places; where two places give one name (a dict key
** with a dot in it), it refuses at the output node and writes nothing, where it wrote the key twice,
** a file that no safetensors reader takes */
START_TEST(run_refuses_output_names_that_collide)
{
    static const char *const outputs[] = {
        "({a: (%r, %x), \"a.0\": %x},)",         /* a tuple's place against a dotted key */
        "({a: %q, \"a.scale\": %x},)",             /* a quantized tensor's scale against a key */
        "({a: %r, b: (%x, %q), \"b.2\": %r},)",    /* no collision: b.2 is free; b.1 is quantized */
    };
    struct bpcc_graph *h;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_graph_new(&h, &d), BPCC_OK);
    struct bpcc_tensor *t;
    ck_assert_int_eq(bpcc_tensor_new(h, BPCC_DTYPE_F32, 1, (int64_t[]){4}, &t, &d), BPCC_OK);
    for (int i = 0; i < 4; i++) ((float *)bpcc_tensor_data(t))[i] = (float)i - 1.5f;
    char *batch = tu_write_temp("", 0, ".safetensors"), *out = tu_write_temp("", 0, ".safetensors");
    write_batch(batch, (const char *[]){"x"}, (const struct bpcc_tensor *[]){t}, 1);
    for (size_t k = 0; k < sizeof outputs / sizeof outputs[0]; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\ngraph\n  %%x = placeholder x ()\n"
                 "  %%r = call_function torch.nn.functional.relu (%%x,)\n"
                 "  %%q = call_function torch.quantize_per_tensor (%%x, 0.5, 3, torch.quint8)\n"
                 "  %%output = output output %s\n", outputs[k]);
        struct bpcc_graph *g = parse(text);
        unlink(out);
        bpcc_diag_init(&d);
        enum bpcc_status s = bpcc_run(g, batch, out, 1, &d);
        if (k < 2) {
            ck_assert_int_eq(s, BPCC_ERR_GRAPH);
            TU_ASSERT_DIAG(&d, 7, 3, k ? "under one name, 'output.a.scale'" : "under one name, 'output.a.0'");
            ck_assert_msg(d.entries[0].has_note && strstr(d.entries[0].note, "named by their place"), "the note on names");
            ck_assert_int_ne(access(out, F_OK), 0); /* nothing written */
        } else {
            ck_assert_msg(s == BPCC_OK, "%s", tu_msg(&d));
            struct bpcc_safetensors *st;
            ck_assert_int_eq(bpcc_safetensors_open(out, &st, &d), BPCC_OK);
            ck_assert_uint_eq(bpcc_safetensors_count(st), 6); /* a, b.0, b.2, and b.1 with its scale and zero point */
            ck_assert_uint_ne(bpcc_safetensors_find(st, "output.b.2"), UINT32_MAX);
            ck_assert_uint_ne(bpcc_safetensors_find(st, "output.b.1.zero_point"), UINT32_MAX);
            bpcc_safetensors_close(st);
        }
        bpcc_graph_free(g);
    }
    unlink(batch);
    unlink(out);
    free(batch);
    free(out);
    bpcc_graph_free(h);
}
END_TEST

START_TEST(shapes_broadcasting_indexing_and_reductions)
{
    struct bpcc_graph *g = parse("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
                                 "  %size = call_method size (%x, 0)\n"
                                 "  %p = call_method permute (%x, 0, 2, 1)\n"
                                 "  %m = call_method mean (%p, (1,)) {keepdim: True}\n"
                                 "  %add = call_function operator.add (%p, %m)\n"
                                 "  %v = call_method view (%add, %size, -1)\n"
                                 "  %g = call_function operator.getitem (%v, (slice(None, None, None), slice(1, None, 2)))\n"
                                 "  %c = call_function torch.cat ([%g, %g], 1)\n"
                                 "  %s = call_function torch.nn.functional.softmax (%c,) {dim: -1}\n"
                                 "  %output = output output (%s,)\n");
    struct xtensor *x = input(3, (int64_t[]){2, 3, 4}, ramp);
    struct xval out;
    RUN(g, x, &out);
    const struct xtensor *y = out.u.t;
    ck_assert_int_eq(y->ndim, 2);
    ck_assert_int_eq(y->dims[0], 2);
    ck_assert_int_eq(y->dims[1], 12);
    /* recompute: p[n][j][i] = x[n][i][j]; m[n][0][i] = mean_j p; add = p + m; v = [2, 12]; g = odd columns */
    for (int n = 0; n < 2; n++) {
        double gv[6], mx = -1e30, sum = 0;
        for (int k = 0; k < 6; k++) {
            int col = 1 + 2 * k, j = col / 3, i = col % 3;
            double mean = 0;
            for (int jj = 0; jj < 4; jj++) mean += x->data[(n * 3 + i) * 4 + jj];
            gv[k] = x->data[(n * 3 + i) * 4 + j] + mean / 4;
            mx = fmax(mx, gv[k]);
        }
        for (int k = 0; k < 6; k++) sum += 2 * exp(gv[k] - mx);
        for (int k = 0; k < 12; k++)
            ck_assert_msg(fabs(y->data[n * 12 + k] - exp(gv[k % 6] - mx) / sum) < 1e-6, "n %d k %d", n, k);
    }
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

/* Elementwise ops over every kind of broadcast (same shapes, trailing and leading ones, size-1
** dimensions on either side, a per-channel operand over H x W), each element against the formula
** computed here with explicit indices: bit for bit, alpha included. */
START_TEST(binary_ops_broadcast_exactly)
{
    static const struct { uint32_t nx, nz; int64_t dx[4], dz[4]; } cases[] = {
        {3, 3, {2, 3, 4}, {2, 3, 4}}, {3, 2, {2, 3, 4}, {3, 1}}, {3, 3, {2, 1, 4}, {1, 3, 1}},
        {3, 1, {2, 3, 4}, {4}},       {1, 2, {1}, {2, 3}},       {3, 3, {2, 3, 1}, {1, 1, 5}},
        {4, 4, {1, 3, 2, 2}, {1, 3, 1, 1}}, {4, 4, {2, 1, 1, 3}, {2, 4, 2, 1}}, {2, 2, {1, 1}, {1, 1}},
    };
    static const char *const ops[] = {"torch.add", "torch.sub", "operator.mul", "operator.truediv"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int op = 0; op < 4; op++) {
            char text[512];
            snprintf(text, sizeof text,
                     "bpcc-model 1\n\ngraph\n  %%x = placeholder x ()\n  %%z = placeholder z ()\n"
                     "  %%r = call_function %s (%%x, %%z)%s\n  %%output = output output (%%r,)\n",
                     ops[op], op < 2 ? " {alpha: 2.5}" : "");
            struct bpcc_graph *g = parse(text);
            struct xtensor *x = input(cases[c].nx, cases[c].dx, ramp), *z = input(cases[c].nz, cases[c].dz, ramp2);
            for (uint64_t i = 0; i < z->numel; i++)
                if (z->data[i] == 0.0f) z->data[i] = 0.75f; /* no division by zero */
            struct bpcc_exec *e;
            struct bpcc_diag d;
            bpcc_diag_init(&d);
            ck_assert_int_eq(bpcc_exec_new(g, 1, &e, &d), BPCC_OK);
            struct xval in[2] = {{.k = XV_TENSOR, .u.t = x}, {.k = XV_TENSOR, .u.t = z}}, out;
            ck_assert_msg(bpcc_exec_run(e, in, 2, &out, &d) == BPCC_OK, "%s", tu_msg(&d));
            const struct xtensor *y = out.u.t;
            uint32_t nd = cases[c].nx > cases[c].nz ? cases[c].nx : cases[c].nz;
            int64_t dims[4], ex[4], ez[4];
            for (uint32_t k = 0; k < nd; k++) {
                int ix = (int)k - (int)(nd - cases[c].nx), iz = (int)k - (int)(nd - cases[c].nz);
                ex[k] = ix >= 0 ? cases[c].dx[ix] : 1;
                ez[k] = iz >= 0 ? cases[c].dz[iz] : 1;
                dims[k] = ex[k] > ez[k] ? ex[k] : ez[k];
                ck_assert_int_eq(y->dims[k], dims[k]);
            }
            for (uint64_t i = 0; i < y->numel; i++) {
                uint64_t rest = i, fx = 0, fz = 0, mx = 1, mz = 1;
                for (int k = (int)nd - 1; k >= 0; k--) {
                    uint64_t at = rest % (uint64_t)dims[k];
                    rest /= (uint64_t)dims[k];
                    fx += (ex[k] == 1 ? 0 : at) * mx;
                    fz += (ez[k] == 1 ? 0 : at) * mz;
                    mx *= (uint64_t)ex[k];
                    mz *= (uint64_t)ez[k];
                }
                float p = x->data[fx], q = z->data[fz];
                if (op < 2) q *= 2.5f;
                float want = op == 0 ? p + q : op == 1 ? p - q : op == 2 ? p * q : p / q;
                ck_assert_msg(y->data[i] == want, "case %zu op %s element %llu: %g, want %g", c, ops[op],
                              (unsigned long long)i, (double)y->data[i], (double)want);
            }
            bpcc_xval_release(&out);
            bpcc_exec_free(e);
            bpcc_xtensor_free(x);
            bpcc_xtensor_free(z);
            bpcc_graph_free(g);
        }
}
END_TEST

/* HistogramObserver's floor division: the one-division path gives c10's result bit for bit (signed
** zeros included) on random quotients of every size, quotients a few ulps off an integer, the
** observer's own bin edges, and the special values. */
static bool same_float(float x, float y) { return !memcmp(&x, &y, sizeof x) || (isnan(x) && isnan(y)); }

START_TEST(floor_division_agrees_with_c10s_formula)
{
    uint64_t seed = 88172645463325252ull;
#define NEXT() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
    uint64_t n = 0;
    for (int i = 0; i < 600000; i++) {
        uint64_t r = NEXT();
        float a = ldexpf((float)(int32_t)(uint32_t)r / 2147483648.0f, (int)(r >> 40 & 63) - 32);
        float b = ldexpf((float)(int32_t)(uint32_t)(r >> 32) / 2147483648.0f, (int)(r >> 48 & 31) - 16);
        if (i % 4 == 1) { /* a few ulps from an integer multiple of b */
            float k = (float)((int64_t)(r >> 20 & 0xfffff) - 0x80000);
            a = k * b;
            for (int s = (int)(r >> 60 & 7) - 3; s; s += s > 0 ? -1 : 1) a = nextafterf(a, s > 0 ? INFINITY : -INFINITY);
        }
        float fast = bpcc_div_floor(a, b), ref = bpcc_div_floor_exact(a, b);
        ck_assert_msg(same_float(fast, ref), "%a / %a: %a, c10 %a", (double)a, (double)b, (double)fast, (double)ref);
        n++;
    }
    /* the observer's use: bin edges (i - s) * bin_width against dst_bin_width */
    for (int t = 0; t < 200; t++) {
        uint64_t r = NEXT();
        float range = ldexpf(1.0f + (float)(r & 0xffff) / 65536.0f, (int)(r >> 16 & 15) - 8);
        float bw = range / 2048.0f;
        int64_t s = (int64_t)(r >> 24 & 1023), e = s + 1 + (int64_t)(r >> 40 & 1023);
        float dbw = (float)((double)bw * (double)(e - s + 1) / 256.0);
        for (int64_t i = 0; i < 2048; i++) {
            float begin = (float)(i - s) * bw, end = begin + bw;
            ck_assert(same_float(bpcc_div_floor(begin, dbw), bpcc_div_floor_exact(begin, dbw)));
            ck_assert(same_float(bpcc_div_floor(end, dbw), bpcc_div_floor_exact(end, dbw)));
            n += 2;
        }
    }
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 3.0f, 1e-40f, -1e-40f, 1e30f, -1e30f,
                                    INFINITY, -INFINITY, NAN, 4194304.0f, -4194304.5f, 8388608.0f};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        for (size_t j = 0; j < sizeof special / sizeof *special; j++) {
            float a = special[i], b = special[j];
            ck_assert_msg(same_float(bpcc_div_floor(a, b), bpcc_div_floor_exact(a, b)), "%g / %g", (double)a, (double)b);
        }
#undef NEXT
    ck_assert_uint_gt(n, 600000);
}
END_TEST

START_TEST(an_op_it_cannot_run_is_named)
{
    struct bpcc_graph *g = parse("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
                                 "  %f = call_function torch.fft.fft (%x,)\n  %output = output output (%f,)\n");
    struct xtensor *x = input(1, (int64_t[]){4}, ramp);
    struct xval out;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(run1(g, x, &out, &d), BPCC_ERR_GRAPH);
    TU_ASSERT_DIAG(&d, 5, 3, "node 'f' (torch.fft.fft): the interpreter cannot run call_function torch.fft.fft");
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
    g = parse("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
              "  %a = call_function operator.add (%x, %x)\n  %v = call_method view (%a, 3, -1)\n  %output = output output (%v,)\n");
    x = input(1, (int64_t[]){4}, ramp);
    bpcc_diag_init(&d);
    ck_assert_int_eq(run1(g, x, &out, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "node 'v' (view): shape is invalid for input of size 4"));
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(observers_see_what_passes_and_shared_ones_see_every_use)
{
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\nmodule o : torch.ao.quantization.MinMaxObserver {dtype: torch.quint8, qscheme: torch.per_tensor_affine, "
        "quant_min: 0, quant_max: 255, has_customized_qrange: False, reduce_range: False, eps: 1.1920928955078125e-07}\n\n"
        "graph\n  %x = placeholder x ()\n  %o1 = call_module o (%x,)\n  %n = call_function operator.mul (%o1, -3.0)\n"
        "  %o2 = call_module o (%n,)\n  %output = output output (%o2,)\n");
    struct xtensor *x = input(1, (int64_t[]){5}, ramp);
    struct bpcc_exec *e;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_exec_new(g, 1, &e, &d), BPCC_OK);
    struct xval in = {.k = XV_TENSOR, .u.t = x};
    ck_assert_int_eq(bpcc_exec_run(e, &in, 1, NULL, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_exec_n_observers(e), 1);
    const struct obs_state *st;
    bpcc_exec_observer_at(e, 0, &st);
    float lo = 1e9f, hi = -1e9f;
    for (int i = 0; i < 5; i++) {
        float v[2] = {x->data[i], x->data[i] * -3.0f};
        for (int k = 0; k < 2; k++) lo = fminf(lo, v[k]), hi = fmaxf(hi, v[k]);
    }
    ck_assert(st->min[0] == lo && st->max[0] == hi);
    float *sc;
    double *zp;
    uint32_t n;
    ck_assert_int_eq(bpcc_obs_qparams(st, &sc, &zp, &n), BPCC_OK);
    float want = (hi - lo) / 255.0f;
    ck_assert(sc[0] == want);
    ck_assert(zp[0] == (double)(0 - (int64_t)nearbyintf(lo / want)));
    bpcc_xfree(sc);
    bpcc_xfree(zp);
    bpcc_exec_free(e);
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

/* The memo answers by module type and attribute array: modules sharing one array get the spec read
** once; another array, another type or more distinct specs than it holds are read again, and every
** answer is the one bpcc_obs_spec_of_module gives. */
START_TEST(the_observer_spec_memo_keys_on_type_and_attribute_array)
{
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\n"
        "module a : torch.ao.quantization.MinMaxObserver {dtype: torch.quint8, quant_min: 0, quant_max: 255}\n"
        "module b : torch.ao.quantization.MinMaxObserver {dtype: torch.qint8, quant_min: -128, quant_max: 127}\n"
        "module c : torch.ao.quantization.MovingAverageMinMaxObserver {dtype: torch.qint8, quant_min: -8, quant_max: 7}\n"
        "module d : torch.ao.quantization.MinMaxObserver {dtype: torch.quint8, quant_min: 0, quant_max: 15}\n"
        "module e : torch.ao.quantization.MinMaxObserver {dtype: torch.quint8, quant_min: 0, quant_max: 31}\n"
        "module f : torch.ao.quantization.MinMaxObserver {dtype: torch.quint8, quant_min: 0, quant_max: 63}\n"
        "module s : torch.ao.quantization.MinMaxObserver\n"
        "module t : torch.ao.quantization.HistogramObserver\n"
        "module r : torch.nn.ReLU\n\n"
        "graph\n  %x = placeholder x ()\n  %output = output output (%x,)\n");
    struct bpcc_module *s = bpcc_graph_find_module(g, "s"), *t = bpcc_graph_find_module(g, "t");
    bpcc_module_share_attrs(s, bpcc_graph_find_module(g, "b"));
    /* t has b's attributes under another type: HistogramObserver, not MinMaxObserver */
    bpcc_module_share_attrs(t, bpcc_graph_find_module(g, "b"));
    const char *order[] = {"a", "b", "s", "c", "t", "d", "e", "f", "r", "a", "s", "b", "t", "c", "r", "f", "a"};
    struct obs_spec_memo memo = {0};
    for (size_t i = 0; i < BPCC_ARRAY_LEN(order); i++) {
        const struct bpcc_module *m = bpcc_graph_find_module(g, order[i]);
        struct observer_spec want, got;
        memset(&want, 0, sizeof want);
        memset(&got, 0, sizeof got);
        bool ok = bpcc_obs_spec_of_module(m, &want);
        ck_assert_msg(bpcc_obs_spec_of_module_memo(m, &memo, &got) == ok, "%s", order[i]);
        if (!ok) continue;
        ck_assert_msg(got.cls == want.cls && got.dtype == want.dtype && got.quant_min == want.quant_min &&
                          got.quant_max == want.quant_max,
                      "%s", order[i]);
    }
    struct observer_spec o;
    bpcc_obs_spec_of_module_memo(s, &memo, &o);
    ck_assert_int_eq(o.cls, OC_MINMAX);
    ck_assert_int_eq(o.quant_max, 127);
    bpcc_obs_spec_of_module_memo(t, &memo, &o);
    ck_assert_int_eq(o.cls, OC_HISTOGRAM);
    ck_assert_int_eq(o.quant_max, 127);
    ck_assert(!bpcc_obs_spec_of_module_memo(bpcc_graph_find_module(g, "r"), &memo, &o));
    bpcc_graph_free(g);
}
END_TEST

/* a quint8 HistogramObserver with `bins` bins, PyTorch's other defaults */
static void histogram_observer(struct obs_state *o, uint32_t bins)
{
    struct observer_spec spec = {.cls = OC_HISTOGRAM, .dtype = BPCC_DTYPE_QUINT8, .qscheme = QS_PER_TENSOR_AFFINE,
                                 .quant_min = 0, .quant_max = 255, .eps = 1.1920928955078125e-07f, .bins = bins,
                                 .upsample_rate = 128};
    ck_assert_int_eq(bpcc_obs_init(o, &spec), BPCC_OK);
}

START_TEST(histogram_observer_bins_as_pytorch_1_13_does)
{
    /* 1.13 passes int(min_val), int(max_val) to histc: [0.25, 1.5] is binned over [0, 1], and
    ** 1.5 falls outside */
    struct obs_state o;
    histogram_observer(&o, 4);
    float x[4] = {0.25f, 0.5f, 0.75f, 1.5f};
    int64_t dims[1] = {4};
    char why[128];
    ck_assert_int_eq(bpcc_obs_observe(&o, x, 1, dims, why, sizeof why), BPCC_OK);
    ck_assert(o.min[0] == 0.25f && o.max[0] == 1.5f);
    ck_assert(o.hist[0] == 0 && o.hist[1] == 1 && o.hist[2] == 1 && o.hist[3] == 1);
    /* a second batch inside the range adds its counts; the range is kept */
    float y[2] = {0.3f, 1.2f};
    dims[0] = 2;
    ck_assert_int_eq(bpcc_obs_observe(&o, y, 1, dims, why, sizeof why), BPCC_OK);
    ck_assert(o.min[0] == 0.25f && o.max[0] == 1.5f);
    ck_assert(o.hist[1] == 2); /* 0.3 in [0.25, 0.5) of [0, 1]; 1.2 outside again */
    float nanv[1] = {NAN};
    dims[0] = 1;
    ck_assert_int_eq(bpcc_obs_observe(&o, nanv, 1, dims, why, sizeof why), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(why, "NaN"));
    bpcc_obs_release(&o);
}
END_TEST

/* _compute_quantization_error transcribed bin by bin (PyTorch's formula, c10's floor division):
** what the vectorized bpcc_obs_quant_error must equal bit for bit */
static double quant_error_ref(const struct obs_state *o, int64_t s, int64_t e)
{
    double bin_width = ((double)o->max[0] - (double)o->min[0]) / (double)o->bins;
    double dbw = bin_width * (double)(e - s + 1) / 256.0;
    if (dbw == 0.0) return 0.0;
    float bw = (float)bin_width, fdbw = (float)dbw, half = (float)(dbw / 2), nhalf = (float)(-dbw / 2);
    float mid = 1.0f * ((half * half * half - nhalf * nhalf * nhalf) / 3.0f);
    double sum = 0;
    for (uint32_t i = 0; i < o->bins; i++) {
        float begin = (float)((int64_t)i - s) * bw, end = begin + bw;
        float db = bpcc_div_floor_exact(begin, fdbw), de = bpcc_div_floor_exact(end, fdbw);
        db = db < 0 ? 0 : db > 255 ? 255 : db;
        de = de < 0 ? 0 : de > 255 ? 255 : de;
        float density = o->hist[i] / bw, bc = (db + 0.5f) * fdbw, ec = de * fdbw + half;
        float x = begin - bc, y = end - ec, norm = 0.0f;
        norm += density * ((half * half * half - x * x * x) / 3.0f);
        norm += (de - db - 1.0f) * (density * mid);
        norm += density * ((y * y * y - nhalf * nhalf * nhalf) / 3.0f);
        sum += norm;
    }
    return (double)(float)sum;
}

START_TEST(histogram_quantization_error_equals_the_formula_bit_for_bit)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
#define NEXT() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
    static const uint32_t sizes[] = {2048, 2047, 13, 256, 5};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        struct obs_state o;
        histogram_observer(&o, sizes[si]);
        for (int t = 0; t < 20; t++) {
            uint64_t r = NEXT();
            o.min[0] = -ldexpf(1.0f + (float)(r & 0xff) / 256.0f, (int)(r >> 8 & 7) - 4) * (float)(t % 3);
            o.max[0] = o.min[0] + ldexpf(1.0f + (float)(r >> 16 & 0xffff) / 65536.0f, (int)(r >> 32 & 15) - 8);
            for (uint32_t i = 0; i < o.bins; i++) o.hist[i] = (float)(NEXT() % 7 == 0 ? NEXT() % 5000 : 0);
            for (int k = 0; k < 30; k++) {
                int64_t s = (int64_t)(NEXT() % o.bins), e = s + (int64_t)(NEXT() % (o.bins - (uint64_t)s));
                if (k == 0) s = 0, e = o.bins - 1;
                double got = bpcc_obs_quant_error(&o, s, e), want = quant_error_ref(&o, s, e);
                ck_assert_msg(got == want || (isnan(got) && isnan(want)), "bins %u [%lld, %lld]: %.17g vs %.17g", o.bins,
                              (long long)s, (long long)e, got, want);
            }
        }
        bpcc_obs_release(&o);
    }
    /* a range whose bin edges fall just below destination edges (the rounded quotient is an integer,
    ** the exact one is not): c10's floor division and the plain floor differ there, on begin and
    ** end edges alike (about 100 of 2048 bins for [0, 2047]) */
    struct obs_state o;
    histogram_observer(&o, 2048);
    o.min[0] = 0.0f;
    o.max[0] = 0.383f;
    for (uint32_t i = 0; i < 2048; i++) o.hist[i] = (float)(1 + i % 5);
    const int64_t se[3][2] = {{0, 2047}, {28, 1963}, {56, 1879}};
    for (int k = 0; k < 3; k++) {
        double bw = (double)o.max[0] / 2048, dbw = bw * (double)(se[k][1] - se[k][0] + 1) / 256.0;
        int differ = 0;
        for (int64_t i = 0; i < 2048; i++) {
            float begin = (float)(i - se[k][0]) * (float)bw, end = begin + (float)bw;
            differ += bpcc_div_floor(begin, (float)dbw) != floorf(begin / (float)dbw);
            differ += bpcc_div_floor(end, (float)dbw) != floorf(end / (float)dbw);
        }
        ck_assert_int_gt(differ, 0);
        double got = bpcc_obs_quant_error(&o, se[k][0], se[k][1]), want = quant_error_ref(&o, se[k][0], se[k][1]);
        ck_assert_msg(got == want, "[%lld, %lld]: %.17g vs %.17g", (long long)se[k][0], (long long)se[k][1], got, want);
    }
    bpcc_obs_release(&o);
    /* a span whose cubes overflow: the empty bins far outside [s, e] give 0 x inf = NaN, as in
    ** PyTorch, so none may be skipped; the counted bins inside stay finite */
    histogram_observer(&o, 2048);
    o.min[0] = 0.0f;
    o.max[0] = 2e15f;
    for (uint32_t i = 0; i < 2048; i++) o.hist[i] = i >= 1000 && i < 1016 ? 3.0f : 0.0f;
    ck_assert(isnan(quant_error_ref(&o, 1000, 1015)));
    ck_assert(isnan(bpcc_obs_quant_error(&o, 1000, 1015)));
    bpcc_obs_release(&o);
#undef NEXT
}
END_TEST

/* _non_linear_param_search transcribed step by step (every alpha/beta step, edges scanned from
** scratch): what bpcc_obs_histogram_range, which skips the steps that change nothing, must equal */
static void histogram_range_ref(const struct obs_state *o, float *lo, float *hi)
{
    uint32_t bins = o->bins;
    float bin_width = (o->max[0] - o->min[0]) / (float)bins;
    double total = 0, acc = 0;
    for (uint32_t i = 0; i < bins; i++) total += o->hist[i];
    total = (double)(float)total;
    float *csum = malloc(bins * sizeof *csum);
    for (uint32_t i = 0; i < bins; i++) csum[i] = (float)(acc += o->hist[i]);
    double alpha = 0.0, beta = 1.0, norm_min = INFINITY;
    int64_t start = 0, end = bins - 1;
    while (alpha < beta) {
        double na = alpha + 1e-5, nb = beta - 1e-5;
        int64_t l = start, r = end;
        while (l < end && csum[l] < (float)(na * total)) l++;
        while (r > start && csum[r] > (float)(nb * total)) r--;
        int64_t ns = start, ne = end;
        if (l - start > end - r) ns = l, alpha = na;
        else ne = r, beta = nb;
        if (ns == start && ne == end) continue;
        double norm = bpcc_obs_quant_error(o, ns, ne);
        if (norm > norm_min) break;
        norm_min = norm;
        start = ns;
        end = ne;
    }
    free(csum);
    *lo = o->min[0] + bin_width * (float)start;
    *hi = o->min[0] + bin_width * (float)(end + 1);
}

START_TEST(histogram_range_search_equals_the_step_by_step_search)
{
    uint64_t seed = 0x2545f4914f6cdd1dull;
#define NEXT() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
    struct obs_state o;
    histogram_observer(&o, 2048);
    for (int t = 0; t < 60; t++) {
        o.min[0] = -(float)(NEXT() % 100) / 16.0f;
        o.max[0] = o.min[0] + 0.5f + (float)(NEXT() % 1000) / 8.0f;
        /* a peak, a spread and long sparse tails, as activations have */
        uint32_t peak = (uint32_t)(NEXT() % 2048), width = 1 + (uint32_t)(NEXT() % 300);
        for (uint32_t i = 0; i < 2048; i++) {
            uint32_t d = i > peak ? i - peak : peak - i;
            o.hist[i] = d < width ? (float)(1000 + NEXT() % 9000) / (float)(1 + d) : (NEXT() % 53 == 0 ? 1.0f : 0.0f);
        }
        if (t % 10 == 0) memset(o.hist, 0, 2048 * sizeof *o.hist), o.hist[NEXT() % 2048] = 5.0f; /* one value */
        float lo, hi, rlo, rhi;
        ck_assert_int_eq(bpcc_obs_histogram_range(&o, &lo, &hi), BPCC_OK);
        histogram_range_ref(&o, &rlo, &rhi);
        ck_assert_msg(lo == rlo && hi == rhi, "case %d: [%a, %a] vs [%a, %a]", t, (double)lo, (double)hi, (double)rlo,
                      (double)rhi);
    }
    bpcc_obs_release(&o);
#undef NEXT
}
END_TEST

/* A big tensor (counted in integers) bins exactly as float counting one by one does: mostly one
** value (a ReLU's zeros), a spread, values above the binned range [int(min), int(max)], 2048 bins. */
START_TEST(histogram_counts_of_a_big_tensor_equal_one_by_one_counting)
{
    /* three tensors: values past int(max) (counted as integers, 100000 elements); the same kind
    ** in 5000 elements (counted as floats); values within (0, 1), so that int(min) == int(max) and
    ** histc takes the data's own range, over a count that is not a multiple of four */
    struct {
        int n;
        float lo, hi; /* histc's range */
    } cases[] = {{100000, -2.0f, 10.0f}, {5000, -2.0f, 10.0f}, {100003, 0.0f, 0.0f}};
    for (int k = 0; k < 3; k++) {
        struct obs_state o;
        histogram_observer(&o, 2048);
        int N = cases[k].n;
        float *x = malloc(N * sizeof *x);
        for (int i = 0; i < N; i++)
            x[i] = k < 2 ? (i % 3 ? 0.0f : (float)(i % 977) * 0.013f - 2.0f) : 0.1f + (float)(i % 1013) * 0.00079f;
        int64_t dims[1] = {N};
        char why[128];
        ck_assert_int_eq(bpcc_obs_observe(&o, x, 1, dims, why, sizeof why), BPCC_OK);
        /* the reference: histc over [int(min), int(max)], or the data's range when those are equal;
        ** ATen's formula, float counts */
        float lo = cases[k].lo, hi = cases[k].hi;
        if (lo == hi) {
            lo = hi = x[0];
            for (int i = 0; i < N; i++) {
                lo = x[i] < lo ? x[i] : lo;
                hi = x[i] > hi ? x[i] : hi;
            }
        }
        float *want = calloc(2048, sizeof *want);
        for (int i = 0; i < N; i++) {
            if (!(x[i] >= lo && x[i] <= hi)) continue;
            int64_t pos = (int64_t)((x[i] - lo) * 2048.0f / (hi - lo));
            if (pos >= 2048) pos = 2047;
            want[pos] += 1.0f;
        }
        double total = 0;
        for (int b = 0; b < 2048; b++) {
            ck_assert_msg(o.hist[b] == want[b], "case %d bin %d: %g, want %g", k, b, (double)o.hist[b], (double)want[b]);
            total += o.hist[b];
        }
        if (k < 2) {
            ck_assert(total > N * 0.9 && total < N); /* the values above int(max) = 10 fall outside */
            ck_assert(o.hist[(int)(2.0f * 2048.0f / 12.0f)] >= N * 2 / 3); /* the zeros' bin */
        } else {
            ck_assert(total == N && o.hist[0] > 0 && o.hist[2047] > 0); /* min and max at the two ends */
        }
        free(want);
        free(x);
        bpcc_obs_release(&o);
    }
}
END_TEST

/* _combine_histograms as PyTorch runs it, element by element along the upsampled axis */
static void combine_ref(const float *hist, uint32_t bins, int64_t up, int64_t down, int64_t start, float *comb)
{
    double acc = 0;
    float prev = 0.0f;
    int64_t k = 0, ulen = (int64_t)bins * up;
    for (uint32_t b = 0; b < bins; b++) {
        for (int64_t j = 0; j < down; j++, k++) {
            int64_t src = k - start;
            if (src >= 0 && src < ulen) acc += (double)hist[src / up];
        }
        double interp = (acc - (double)prev) / (double)up;
        comb[b] = comb[b] + (float)interp;
        prev = (float)acc;
    }
}

/* The combined histogram adds each old bin's run of copies at once where every partial sum is exact:
** bit for bit the element-by-element sum, with integer counts (all runs at once), with values whose
** sums round (tiny fractions beside big counts: one by one), over aligned and unaligned starts and
** windows shorter or longer than a bin's copies */
START_TEST(histograms_combine_bit_for_bit_as_element_by_element)
{
    uint64_t seed = 0x2545f4914f6cdd1dull;
#define NEXT() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
    enum { bins = 512 };
    struct {
        int64_t up, down, start;
    } cases[] = {{128, 128, 0}, {128, 256, 37}, {128, 300, 1000}, {16, 23, 5}, {128, 129, 512}};
    int rounding = 0; /* cases where adding the runs at once in one product would not give the same bits */
    for (size_t c = 0; c < BPCC_ARRAY_LEN(cases); c++)
        for (int kind = 0; kind < 3; kind++) {
            float hist[bins], got[bins], want[bins];
            for (uint32_t i = 0; i < bins; i++) {
                uint64_t r = NEXT();
                hist[i] = kind == 0   ? (float)(r % 5000)                                   /* counts */
                          : kind == 1 ? (float)(r % 5000) + (float)(r >> 20 & 0xffff) / 65536.0f /* fractions */
                                      : (r & 1 ? 3e7f + (float)(r % 977) : 1e-3f * (float)(r % 13)); /* both */
                got[i] = want[i] = (float)(NEXT() % 100);
            }
            int64_t up = cases[c].up, down = cases[c].down, start = cases[c].start;
            ck_assert(start >= 0 && start + bins * up <= bins * down);
            bpcc_obs_combine(hist, bins, up, down, start, got);
            combine_ref(hist, bins, up, down, start, want);
            ck_assert_msg(!memcmp(got, want, sizeof got), "case %zu kind %d", c, kind);
            /* adding each bin's copies as one product, unchecked, would not give these bits */
            double acc = 0;
            for (uint32_t i = 0; i < bins; i++) {
                double seq = acc;
                for (int64_t j = 0; j < up; j++) seq += (double)hist[i];
                rounding += seq != acc + (double)up * (double)hist[i];
                acc = seq;
            }
        }
    ck_assert_int_gt(rounding, 0);
    /* the shortcut's test at its edges: runs found where a check one bit more permissive (acc's low
    ** bit ignored, the bound 2^54, the low bit one higher) would round otherwise; then random runs */
    static const float edges[][3] = {{0x1.45f1p-17f, 0x1.847cp+2f, 0x1.8414p+34f},
                                     {0x1.17f6p+39f, 0x1.934p+9f, 0x1.b47p+1f},
                                     {0x1.2a04p+13f, 0x1.5ca7p+38f, 0x1.6a1p+0f}};
    for (int t = 0; t < 3 + 200000; t++) {
        float h[3];
        for (int i = 0; i < 3; i++) {
            uint64_t r = NEXT();
            h[i] = t < 3 ? edges[t][i] : (float)ldexp((double)(r % 100000 + 1), (int)(r >> 20 & 63) - 40);
        }
        double seq = 0, got = 0;
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 8; j++) seq += (double)h[i];
            got = bpcc_obs_add_repeated(got, (double)h[i], 8);
        }
        ck_assert_msg(got == seq, "run %d: %a, %a, %a: %a, want %a", t, (double)h[0], (double)h[1], (double)h[2], got,
                      seq);
    }
#undef NEXT
}
END_TEST

/* A MinMaxObserver's scan finds the extremes and a NaN wherever they sit: in each lane of each of
** the vectorized scan's accumulators (blocks of 32 with AVX2, then of 16), in the scalar tail, in
** tensors shorter than a block. Per-channel rows take the same scan, and so does batch-norm
** folding's, which writes the scaled weights as it goes. */
START_TEST(minmax_observers_find_the_extremes_and_nan_anywhere)
{
    const int sizes[] = {1, 3, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 1027};
    struct observer_spec spec = {.cls = OC_MINMAX, .dtype = BPCC_DTYPE_QUINT8, .qscheme = QS_PER_TENSOR_AFFINE,
                                 .quant_min = 0, .quant_max = 255, .eps = 1.1920928955078125e-07f};
    char why[128];
    for (size_t k = 0; k < BPCC_ARRAY_LEN(sizes); k++) {
        int n = sizes[k];
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        int64_t dims[1] = {n};
        for (int p = 0; p < n; p++) {
            for (int i = 0; i < n; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
            int q = (p * 7 + 3) % n;
            x[p] = -5.0f - (float)p;
            if (q != p) x[q] = 7.0f + (float)q;
            float lo = x[0], hi = x[0]; /* element by element */
            for (int i = 1; i < n; i++) {
                lo = x[i] < lo ? x[i] : lo;
                hi = x[i] > hi ? x[i] : hi;
            }
            ck_assert(lo == x[p] && (q == p || hi == x[q]));
            struct obs_state o;
            ck_assert_int_eq(bpcc_obs_init(&o, &spec), BPCC_OK);
            ck_assert_int_eq(bpcc_obs_observe(&o, x, 1, dims, why, sizeof why), BPCC_OK);
            ck_assert_msg(o.min[0] == lo && o.max[0] == hi, "n %d, min at %d, max at %d: %g, %g; want %g, %g", n, p,
                          q, (double)o.min[0], (double)o.max[0], (double)lo, (double)hi);
            bpcc_obs_release(&o);
            /* batch-norm folding's scan: every product written, and the range of the products */
            float sl, sh;
            ck_assert(bpcc_obs_scale_minmax(x, (uint64_t)n, -0.75f, y, &sl, &sh));
            for (int i = 0; i < n; i++) ck_assert_msg(y[i] == x[i] * -0.75f, "n %d: product %d", n, i);
            ck_assert_msg(sl == hi * -0.75f && sh == lo * -0.75f, "n %d, min at %d, max at %d: scaled %g, %g", n, p,
                          q, (double)sl, (double)sh);
            /* a NaN there instead is refused and named */
            x[p] = NAN;
            ck_assert(!bpcc_obs_scale_minmax(x, (uint64_t)n, 2.0f, y, &sl, &sh));
            ck_assert_int_eq(bpcc_obs_init(&o, &spec), BPCC_OK);
            ck_assert_int_eq(bpcc_obs_observe(&o, x, 1, dims, why, sizeof why), BPCC_ERR_GRAPH);
            char at[48];
            snprintf(at, sizeof at, "(element %d)", p);
            ck_assert_msg(strstr(why, at), "n %d, NaN at %d: %s", n, p, why);
            bpcc_obs_release(&o);
        }
        free(x);
        free(y);
    }
}
END_TEST

static enum bpcc_status run_small(void *ctx, struct bpcc_diag *d)
{
    struct bpcc_graph *g = ctx;
    struct xtensor *x = bpcc_xtensor_new(4, (int64_t[]){1, 2, 4, 4});
    if (!x) return bpcc_diag_nomem(d);
    for (uint64_t i = 0; i < x->numel; i++) x->data[i] = ramp(i);
    struct xval out = {0};
    enum bpcc_status s = run1(g, x, &out, d);
    bpcc_xval_release(&out);
    bpcc_xtensor_free(x);
    return s;
}

/* a Winograd-sized convolution run twice by one exec (the second run takes the kept weights) */
static enum bpcc_status run_winograd_twice(void *ctx, struct bpcc_diag *d)
{
    struct bpcc_graph *g = ctx;
    struct bpcc_exec *e;
    enum bpcc_status s = bpcc_exec_new(g, 1, &e, d);
    for (int run = 0; run < 2 && !s; run++) {
        struct xtensor *x = bpcc_xtensor_new(4, (int64_t[]){1, 16, 14, 14});
        if (!x) {
            s = bpcc_diag_nomem(d);
            break;
        }
        for (uint64_t i = 0; i < x->numel; i++) x->data[i] = ramp(i);
        struct xval in = {.k = XV_TENSOR, .u.t = x}, out = {0};
        s = bpcc_exec_run(e, &in, 1, &out, d);
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
    }
    bpcc_exec_free(e);
    return s;
}

/* a value on a grid of 1/4: what a weight quantized with scale 0.25 keeps */
static float quarter(uint64_t i) { return (float)((int64_t)(i * 7919 % 9) - 4) / 4.0f; }
/* a value off that grid, rounding to quarter(i) (ties away from the grid's middle points) */
static float near_quarter(uint64_t i) { return quarter(i) + ((i % 3) - 1.0f) * 0.05f; }

/* one step of a cell is one step of its layer: LSTMCell and GRUCell against LSTM and GRU on a
** sequence of one, from the same state; RNNCell against its formula (tanh and relu); and the
** reference quantized cells and LSTM of dynamic quantization run their weights quantized with
** each weight's own qparams: weights off the grid give what the float modules give on it */
START_TEST(cells_take_one_step_of_their_layers_and_reference_ones_quantize_each_weight)
{
    static const char *const kinds[2][2] = {{"LSTMCell", "LSTM"}, {"GRUCell", "GRU"}};
    for (int k = 0; k < 2; k++) {
        int G = k ? 3 : 4;
        char text[1600];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule \"\" : torch.fx.GraphModule {}\n  param h : f32[2, 3]\n"
                 "module cell : torch.nn.%s {input_size: 4, hidden_size: 3}\n"
                 "module layer : torch.nn.%s {input_size: 4, hidden_size: 3}\n"
                 "module rc : torch.ao.nn.quantized.reference.%s {input_size: 4, hidden_size: 3, weight_ih_qscheme: "
                 "torch.per_tensor_affine, weight_ih_dtype: torch.qint8, weight_hh_qscheme: torch.per_channel_affine, "
                 "weight_hh_dtype: torch.qint8}\n\ngraph\n"
                 "  %%x = placeholder x ()\n  %%h = get_attr h ()\n"
                 "  %%u = call_method unsqueeze (%%x, 0)\n  %%h0 = call_method unsqueeze (%%h, 0)\n"
                 "  %%cell = call_module cell (%%x, %s)\n  %%layer = call_module layer (%%u, %s)\n"
                 "  %%rc = call_module rc (%%x, %s)\n"
                 "  %%output = output output ((%%cell, %%layer, %%rc),)\n",
                 kinds[k][0], kinds[k][1], kinds[k][0], k ? "%h" : "(%h, %h)", k ? "%h0" : "(%h0, %h0)",
                 k ? "%h" : "(%h, %h)");
        struct bpcc_graph *g = parse(text);
        set_tensor(g, "", "h", 2, (int64_t[]){2, 3}, ramp2);
        const char *mods[3] = {"cell", "layer", "rc"};
        const char *w[3][4] = {{"weight_ih", "weight_hh", "bias_ih", "bias_hh"},
                               {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"},
                               {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}};
        for (int m = 0; m < 3; m++) {
            float (*f)(uint64_t) = m == 2 ? near_quarter : quarter;
            set_tensor(g, mods[m], w[m][0], 2, (int64_t[]){G * 3, 4}, f);
            set_tensor(g, mods[m], w[m][1], 2, (int64_t[]){G * 3, 3}, f);
            set_tensor(g, mods[m], w[m][2], 1, (int64_t[]){G * 3}, ramp);
            set_tensor(g, mods[m], w[m][3], 1, (int64_t[]){G * 3}, ramp2);
        }
        /* weight_ih per tensor (scale 0.25, zero point 0), weight_hh per channel (all 0.25) */
        tu_set_values(g, "rc", "weight_ih_scale", BPCC_TENSOR_BUFFER, BPCC_DTYPE_F32, 1, (int64_t[]){1}, (double[]){0.25});
        tu_set_values(g, "rc", "weight_ih_zero_point", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I64, 1, (int64_t[]){1}, (double[]){0});
        tu_set_values(g, "rc", "weight_ih_axis", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I32, 0, NULL, (double[]){0});
        double hs[12], hz[12];
        for (int i = 0; i < G * 3; i++) hs[i] = 0.25, hz[i] = 0;
        tu_set_values(g, "rc", "weight_hh_scale", BPCC_TENSOR_BUFFER, BPCC_DTYPE_F32, 1, (int64_t[]){G * 3}, hs);
        tu_set_values(g, "rc", "weight_hh_zero_point", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I32, 1, (int64_t[]){G * 3}, hz);
        tu_set_values(g, "rc", "weight_hh_axis", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I32, 0, NULL, (double[]){0});
        struct xtensor *x = input(2, (int64_t[]){2, 4}, ramp);
        struct xval out;
        RUN(g, x, &out);
        const struct xval *cell = &out.u.seq.items[0], *layer = &out.u.seq.items[1], *rc = &out.u.seq.items[2];
        /* LSTMCell: (h', c'); LSTM: (output [1, 2, 3], (h_n, c_n)); GRUCell: h'; GRU: (output, h_n) */
        const struct xtensor *hc = k ? cell->u.t : cell->u.seq.items[0].u.t;
        const struct xtensor *hl = layer->u.seq.items[0].u.t, *hr = k ? rc->u.t : rc->u.seq.items[0].u.t;
        ck_assert_int_eq(hc->ndim, 2);
        for (int i = 0; i < 6; i++) {
            ck_assert_msg(hc->data[i] == hl->data[i], "%s %d: %g vs %s %g", kinds[k][0], i, hc->data[i], kinds[k][1], hl->data[i]);
            ck_assert_msg(hr->data[i] == hc->data[i], "reference %s %d: %g vs %g", kinds[k][0], i, hr->data[i], hc->data[i]);
        }
        if (!k) {
            const struct xtensor *cc = cell->u.seq.items[1].u.t, *cl = layer->u.seq.items[1].u.seq.items[1].u.t;
            for (int i = 0; i < 6; i++) ck_assert(cc->data[i] == cl->data[i]);
        }
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
    /* a reference cell whose weight has a qscheme but no qparams buffers: refused, as PyTorch's
    ** quantize fails on the missing scale (not run in float) */
    {
        struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule rc : torch.ao.nn.quantized.reference.RNNCell {input_size: 4, "
                                     "hidden_size: 3, weight_ih_qscheme: torch.per_tensor_affine, weight_ih_dtype: torch.qint8}\n\n"
                                     "graph\n  %x = placeholder x ()\n  %rc = call_module rc (%x,)\n  %output = output output (%rc,)\n");
        set_tensor(g, "rc", "weight_ih", 2, (int64_t[]){3, 4}, quarter);
        set_tensor(g, "rc", "weight_hh", 2, (int64_t[]){3, 3}, quarter);
        struct xtensor *x = input(1, (int64_t[]){4}, ramp);
        struct xval out;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        ck_assert_int_eq(run1(g, x, &out, &d), BPCC_ERR_GRAPH);
        TU_ASSERT_DIAG(&d, 7, 3, "rc needs weight_ih_scale and weight_ih_zero_point buffers with a value per tensor");
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
    /* RNNCell, unbatched, no state: h' = act(x W_ih^T + b_ih + b_hh) */
    for (int relu = 0; relu < 2; relu++) {
        char text[512];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule r : torch.nn.RNNCell {input_size: 4, hidden_size: 3, nonlinearity: \"%s\"}\n\n"
                 "graph\n  %%x = placeholder x ()\n  %%r = call_module r (%%x,)\n  %%output = output output (%%r,)\n",
                 relu ? "relu" : "tanh");
        struct bpcc_graph *g = parse(text);
        set_tensor(g, "r", "weight_ih", 2, (int64_t[]){3, 4}, quarter);
        set_tensor(g, "r", "weight_hh", 2, (int64_t[]){3, 3}, quarter);
        set_tensor(g, "r", "bias_ih", 1, (int64_t[]){3}, ramp);
        set_tensor(g, "r", "bias_hh", 1, (int64_t[]){3}, ramp2);
        struct xtensor *x = input(1, (int64_t[]){4}, ramp);
        struct xval out;
        RUN(g, x, &out);
        ck_assert_int_eq(out.u.t->ndim, 1);
        for (int j = 0; j < 3; j++) {
            float v = 0;
            for (int i = 0; i < 4; i++) v += x->data[i] * quarter((uint64_t)(j * 4 + i));
            v = (v + ramp((uint64_t)j)) + ramp2((uint64_t)j);
            float want = relu ? (v > 0 ? v : 0) : tanhf(v);
            ck_assert_msg(fabsf(out.u.t->data[j] - want) < 1e-6f, "%s %d: %g vs %g", relu ? "relu" : "tanh", j, out.u.t->data[j], want);
        }
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
}
END_TEST

static float row_ids(uint64_t i) { return (float)(i % 4); }

/* EmbeddingBag by hand: bags cut at offsets (one empty), sums, means and maxima, a padding index
** left out; and what it refuses: offsets that are not whole, rising from 0 and within the input
** (NaN among them), per-sample weights outside sum, an unknown mode, offsets with a 2-d input */
START_TEST(embedding_bags_follow_their_offsets_and_refuse_bad_ones)
{
    static const struct {
        const char *mode;
        double offs[3];
        const char *msg; /* NULL: runs */
    } cases[] = {
        {"sum", {0, 2, 2}, NULL},
        {"mean", {0, 2, 2}, NULL},
        {"max", {0, 2, 2}, NULL},
        {"sum", {1, 2, 3}, "offsets must rise from 0"},
        {"sum", {0, 3, 2}, "offsets must rise from 0"},
        {"sum", {0, 2, 9}, "offsets must rise from 0"},
        {"sum", {0, 1.5, 2}, "offsets must rise from 0"},
        {"sum", {0, NAN, 2}, "offsets must rise from 0"},
        {"median", {0, 2, 2}, "mode must be 'sum', 'mean' or 'max', not 'median'"},
    };
    for (size_t k = 0; k < BPCC_ARRAY_LEN(cases); k++) {
        char text[640];
        snprintf(text, sizeof text,
                 "bpcc-model 1\n\nmodule \"\" : torch.fx.GraphModule {}\n"
                 "module e : torch.nn.EmbeddingBag {num_embeddings: 4, embedding_dim: 2, mode: \"%s\", padding_idx: 3}\n\n"
                 "graph\n  %%x = placeholder x ()\n  %%o = get_attr o ()\n  %%e = call_module e (%%x, %%o)\n"
                 "  %%output = output output (%%e,)\n",
                 cases[k].mode);
        struct bpcc_graph *g = parse(text);
        set_tensor(g, "e", "weight", 2, (int64_t[]){4, 2}, ramp);
        tu_set_values(g, "", "o", BPCC_TENSOR_BUFFER, BPCC_DTYPE_F32, 1, (int64_t[]){3}, cases[k].offs);
        struct xtensor *x = input(1, (int64_t[]){6}, row_ids); /* ids 0 1 2 3 0 1: bags [0 1] [] [2 3 0 1] */
        struct xval out;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        enum bpcc_status st = run1(g, x, &out, &d);
        if (cases[k].msg) {
            ck_assert_msg(st == BPCC_ERR_GRAPH, "case %zu ran", k);
            ck_assert_msg(strstr(tu_msg(&d), cases[k].msg), "case %zu: %s", k, tu_msg(&d));
        } else {
            ck_assert_msg(st == BPCC_OK, "case %zu: %s", k, tu_msg(&d));
            ck_assert(out.u.t->ndim == 2 && out.u.t->dims[0] == 3 && out.u.t->dims[1] == 2);
            for (int j = 0; j < 2; j++) {
                float r0 = ramp((uint64_t)j), r1 = ramp((uint64_t)(2 + j)), r2 = ramp((uint64_t)(4 + j)); /* rows 0, 1, 2; row 3 pads */
                float b0, b2;
                if (k == 0) b0 = r0 + r1, b2 = r2 + r0 + r1;
                else if (k == 1) b0 = (r0 + r1) / 2, b2 = (r2 + r0 + r1) / 3;
                else b0 = fmaxf(r0, r1), b2 = fmaxf(r2, fmaxf(r0, r1));
                ck_assert_msg(fabsf(out.u.t->data[j] - b0) < 1e-6f && out.u.t->data[2 + j] == 0.0f &&
                                  fabsf(out.u.t->data[4 + j] - b2) < 1e-6f,
                              "case %zu, column %d", k, j);
            }
            bpcc_xval_release(&out);
        }
        bpcc_xtensor_free(x);
        bpcc_graph_free(g);
    }
    /* an index past the weight's rows */
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule e : torch.nn.EmbeddingBag {num_embeddings: 3, embedding_dim: 2}\n\n"
                                 "graph\n  %x = placeholder x ()\n  %e = call_module e (%x,)\n  %output = output output (%e,)\n");
    set_tensor(g, "e", "weight", 2, (int64_t[]){3, 2}, ramp);
    struct xtensor *x = input(2, (int64_t[]){2, 3}, row_ids); /* ids 0 1 2 / 3 0 1 */
    struct xval out;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(run1(g, x, &out, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "index 3 is out of range for an embedding of 3 rows"));
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
}
END_TEST

/* values PyTorch 1.13 gives (torch.quantize_per_tensor_dynamic(x, dtype, reduce_range).dequantize())
** for three ranges: an ordinary one, one of positive values whose scale would be below 6.1e-5, and
** one across zero that small (the range stretched); and float16's rounding at its edges */
START_TEST(dynamic_quantization_chooses_qparams_as_aten)
{
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule \"\" : torch.fx.GraphModule {}\n\ngraph\n  %x = placeholder x ()\n"
                                 "  %a = call_function torch.quantize_per_tensor_dynamic (%x, torch.quint8, False)\n"
                                 "  %b = call_function torch.quantize_per_tensor_dynamic (%x, torch.quint8, True)\n"
                                 "  %c = call_function torch.quantize_per_tensor_dynamic (%x, torch.qint8, False)\n"
                                 "  %da = call_method dequantize (%a,)\n  %db = call_method dequantize (%b,)\n"
                                 "  %dc = call_method dequantize (%c,)\n  %output = output output ((%da, %db, %dc),)\n");
    static const float in[3][5] = {{-1.0f, 0.5f, 3.0f, 2.0f, 0.0123f},
                                   {0.0f, 1e-3f, 5e-4f, 2e-4f, 7e-4f},
                                   {-2e-3f, 1e-3f, -5e-4f, 0.0f, 3e-4f}};
    static const float want[3][3][5] = {
        {{-0x1.010102p+0f, 0x1.010102p-1f, 0x1.7f7f8p+1f, 0x1.fdfep+0f, 0x1.010102p-6f},
         {-0x1.020408p+0f, 0x1.020408p-1f, 0x1.7efdfcp+1f, 0x1.020408p+1f, 0.0f},
         {-0x1.010102p+0f, 0x1.010102p-1f, 0x1.7f7f8p+1f, 0x1.fdfep+0f, 0x1.010102p-6f}},
        {{0.0f, 0x1.ffb48p-11f, 0x1.ffb48p-12f, 0x1.7fc76p-13f, 0x1.5fcc18p-11f},
         {0.0f, 0x1.ffb48p-11f, 0x1.ffb48p-12f, 0x1.7fc76p-13f, 0x1.5fcc18p-11f},
         {0.0f, 0x1.ffb48p-11f, 0x1.ffb48p-12f, 0x1.7fc76p-13f, 0x1.5fcc18p-11f}},
        {{-0x1.07d912p-9f, 0x1.ffb48p-11f, -0x1.ffb48p-12f, 0.0f, 0x1.3fd0dp-12f},
         {-0x1.07d912p-9f, 0x1.ffb48p-11f, -0x1.ffb48p-12f, 0.0f, 0x1.3fd0dp-12f},
         {-0x1.07d912p-9f, 0x1.ffb48p-11f, -0x1.ffb48p-12f, 0.0f, 0x1.3fd0dp-12f}}};
    static const int64_t zps[3][3] = {{64, 32, -64}, {0, 0, -128}, {170, 85, 42}};
    for (int r = 0; r < 3; r++) {
        struct xtensor *x = bpcc_xtensor_new(1, (int64_t[]){5});
        memcpy(x->data, in[r], sizeof in[r]);
        struct xval out;
        RUN(g, x, &out);
        ck_assert_int_eq(out.k, XV_SEQ);
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 5; i++)
                ck_assert_msg(out.u.seq.items[k].u.t->data[i] == want[r][k][i], "range %d, output %d, value %d: %a, PyTorch %a", r,
                              k, i, (double)out.u.seq.items[k].u.t->data[i], (double)want[r][k][i]);
        bpcc_xval_release(&out);
        bpcc_xtensor_free(x);
        /* the zero points PyTorch chose */
        for (int k = 0; k < 3; k++) {
            float sc;
            int64_t zp;
            float lo = in[r][0], hi = in[r][0];
            for (int i = 1; i < 5; i++) lo = in[r][i] < lo ? in[r][i] : lo, hi = in[r][i] > hi ? in[r][i] : hi;
            bpcc_choose_qparams(lo, hi, k == 2 ? -128 : 0, k == 2 ? 127 : 255, k == 1, &sc, &zp);
            ck_assert_int_eq(zp, zps[r][k]);
        }
    }
    bpcc_graph_free(g);
    /* float16: the largest finite value, overflow from 65520 on, below the smallest subnormal,
    ** subnormal steps with ties to even, 11 significant bits with ties to even */
    static const float h[][2] = {{65519.0f, 65504.0f}, {65520.0f, INFINITY}, {-70000.0f, -INFINITY}, {1e-8f, 0.0f},
                                 {3e-8f, 0x1p-24f}, {0.1f, 0x1.998p-4f}, {2049.0f, 2048.0f}, {2051.0f, 2052.0f},
                                 {0x1.8p-24f, 0x1p-23f}, {-0.0f, -0.0f}};
    for (size_t i = 0; i < BPCC_ARRAY_LEN(h); i++)
        ck_assert_msg(bpcc_round_to_half(h[i][0]) == h[i][1], "%a -> %a, PyTorch %a", (double)h[i][0],
                      (double)bpcc_round_to_half(h[i][0]), (double)h[i][1]);
    ck_assert(isnan(bpcc_round_to_half(NAN)));
}
END_TEST

START_TEST(qparams_are_read_from_quantize_nodes_observers_and_reference_modules)
{
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\nmodule \"\" : torch.fx.GraphModule {}\n"
        "module obs : torch.ao.quantization.MinMaxObserver {dtype: torch.quint8, qscheme: torch.per_tensor_affine}\n"
        "module raw : torch.ao.quantization.MinMaxObserver {dtype: torch.quint8, qscheme: torch.per_tensor_affine}\n"
        "module fused : torch.ao.nn.intrinsic.LinearReLU {}\n"
        "module fused.0 : torch.ao.nn.quantized.reference.Linear {in_features: 2, out_features: 3, "
        "weight_qscheme: torch.per_channel_affine, weight_dtype: torch.qint8}\n"
        "module fused.1 : torch.nn.ReLU {}\n\ngraph\n"
        "  %x = placeholder x ()\n"
        "  %s = get_attr s ()\n  %z = get_attr z ()\n  %cs = get_attr cs ()\n  %cz = get_attr cz ()\n"
        "  %q0 = call_function torch.quantize_per_tensor (%x, %s, %z, torch.quint8)\n"
        "  %q1 = call_function torch.quantize_per_tensor (%x, 0.25, 3, torch.qint8)\n"
        "  %q2 = call_function torch.quantize_per_channel (%x, %cs, %cz, 1, torch.qint8)\n"
        "  %q3 = call_function torch.quantize_per_tensor_dynamic (%x, torch.quint8, True)\n"
        "  %q4 = call_method to (%x, torch.float16)\n"
        "  %q5 = call_function torch.quantize_per_channel (%x, %cs, %z, 1, torch.qint8)\n"
        "  %o = call_module obs (%x,)\n  %r = call_module raw (%x,)\n  %f = call_module fused (%x,)\n"
        "  %output = output output ((%q0, %q1, %q2, %q3, %q4, %q5, %o, %r, %f),)\n");
    tu_set_values(g, "", "s", BPCC_TENSOR_BUFFER, BPCC_DTYPE_F32, 0, NULL, (double[]){0.5});
    tu_set_values(g, "", "z", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I64, 0, NULL, (double[]){7});
    tu_set_values(g, "", "cs", BPCC_TENSOR_BUFFER, BPCC_DTYPE_F32, 1, (int64_t[]){3}, (double[]){0.125, 0.25, 0.0625});
    tu_set_values(g, "", "cz", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I32, 1, (int64_t[]){3}, (double[]){0, -1, 2});
    tu_set_values(g, "obs", "scale", BPCC_TENSOR_BUFFER, BPCC_DTYPE_F32, 1, (int64_t[]){1}, (double[]){0.03125});
    tu_set_values(g, "obs", "zero_point", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I64, 1, (int64_t[]){1}, (double[]){128});
    tu_set_values(g, "fused.0", "weight_scale", BPCC_TENSOR_BUFFER, BPCC_DTYPE_F32, 1, (int64_t[]){3}, (double[]){0.5, 0.25, 1});
    tu_set_values(g, "fused.0", "weight_zero_point", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I32, 1, (int64_t[]){3}, (double[]){0, 1, -1});
    tu_set_values(g, "fused.0", "weight_axis", BPCC_TENSOR_BUFFER, BPCC_DTYPE_I32, 0, NULL, (double[]){0});
    struct bpcc_qparams q;
    char text[256];
    const struct bpcc_node *n = bpcc_graph_find_node(g, "q0");
    ck_assert(bpcc_node_qparams(g, n, &q));
    ck_assert_int_eq(q.kind, BPCC_QPARAMS_PER_TENSOR);
    ck_assert_int_eq(q.dtype, BPCC_DTYPE_QUINT8);
    ck_assert(bpcc_qparams_scale(&q, 0) == 0.5 && bpcc_qparams_zero_point(&q, 0) == 7);
    bpcc_qparams_format(&q, text, sizeof text);
    ck_assert_str_eq(text, "quint8 scale=0.5 zp=7");
    ck_assert(bpcc_node_qparams(g, bpcc_graph_find_node(g, "q1"), &q));
    ck_assert(q.kind == BPCC_QPARAMS_PER_TENSOR && q.dtype == BPCC_DTYPE_QINT8 && !q.scale);
    ck_assert(bpcc_qparams_scale(&q, 0) == 0.25 && bpcc_qparams_zero_point(&q, 0) == 3);
    ck_assert(bpcc_node_qparams(g, bpcc_graph_find_node(g, "q2"), &q));
    ck_assert(q.kind == BPCC_QPARAMS_PER_CHANNEL && q.axis == 1 && q.n == 3);
    ck_assert(bpcc_qparams_scale(&q, 2) == 0.0625 && bpcc_qparams_zero_point(&q, 1) == -1);
    ck_assert(bpcc_qparams_scale(&q, 3) == 0); /* out of range */
    bpcc_qparams_format(&q, text, sizeof text);
    ck_assert_str_eq(text, "qint8 axis=1 x3 scale=0.0625..0.25 zp=-1..2");
    ck_assert(bpcc_node_qparams(g, bpcc_graph_find_node(g, "q3"), &q));
    ck_assert(q.kind == BPCC_QPARAMS_DYNAMIC && q.dtype == BPCC_DTYPE_QUINT8 && q.n == 0);
    ck_assert(bpcc_node_qparams(g, bpcc_graph_find_node(g, "q4"), &q));
    ck_assert_int_eq(q.kind, BPCC_QPARAMS_FLOAT16);
    /* three scales but one zero point: not a valid set */
    ck_assert(!bpcc_node_qparams(g, bpcc_graph_find_node(g, "q5"), &q));
    ck_assert_int_eq(q.kind, BPCC_QPARAMS_NONE);
    ck_assert(bpcc_node_qparams(g, bpcc_graph_find_node(g, "o"), &q));
    ck_assert(q.kind == BPCC_QPARAMS_PER_TENSOR && bpcc_qparams_scale(&q, 0) == 0.03125 && bpcc_qparams_zero_point(&q, 0) == 128);
    ck_assert(!bpcc_node_qparams(g, bpcc_graph_find_node(g, "r"), &q)); /* not calibrated */
    ck_assert(!bpcc_node_qparams(g, bpcc_graph_find_node(g, "x"), &q));
    /* the weight of the fused container is its reference child's */
    const struct bpcc_module *wm = bpcc_node_weight_module(g, bpcc_graph_find_node(g, "f"));
    ck_assert_ptr_nonnull(wm);
    ck_assert_str_eq(bpcc_module_name(wm), "fused.0");
    ck_assert(bpcc_module_weight_qparams(wm, &q));
    ck_assert(q.kind == BPCC_QPARAMS_PER_CHANNEL && q.axis == 0 && q.n == 3 && q.dtype == BPCC_DTYPE_QINT8);
    ck_assert_ptr_null(bpcc_node_weight_module(g, bpcc_graph_find_node(g, "o")));
    /* fake quantization of a weight with those qparams, by hand: round(w / s) + z, clamped, back */
    set_tensor(g, "fused.0", "weight", 2, (int64_t[]){3, 2}, ramp);
    const struct bpcc_tensor *w = bpcc_module_tensor(wm, "weight");
    const float *wd = bpcc_tensor_data((struct bpcc_tensor *)w);
    float fq[6];
    ck_assert(bpcc_fake_quantize_weight(w, &q, fq));
    const double sc[3] = {0.5, 0.25, 1}, zp[3] = {0, 1, -1};
    for (int i = 0; i < 6; i++) {
        double v = nearbyint(wd[i] / sc[i / 2]) + zp[i / 2];
        v = v < -128 ? -128 : v > 127 ? 127 : v;
        ck_assert_msg(fq[i] == (float)((v - zp[i / 2]) * sc[i / 2]), "%d: %g for %g", i, fq[i], wd[i]);
    }
    q.axis = 5; /* no such dimension */
    ck_assert(!bpcc_fake_quantize_weight(w, &q, fq));
    bpcc_graph_free(g);
}
END_TEST

START_TEST(the_interpreter_survives_every_allocation_failure)
{
    struct bpcc_graph *g = parse(
        "bpcc-model 1\n\nmodule c : torch.nn.Conv2d {in_channels: 2, out_channels: 2, kernel_size: 3, padding: 1}\n"
        "  param weight : f32[2, 2, 3, 3]\nmodule dw : torch.nn.Conv2d {in_channels: 2, out_channels: 2, kernel_size: 3, groups: 2}\n"
        "  param weight : f32[2, 1, 3, 3]\nmodule o : torch.ao.quantization.PerChannelMinMaxObserver {dtype: torch.quint8, "
        "qscheme: torch.per_channel_affine, quant_min: 0, quant_max: 255, ch_axis: 1}\n\ngraph\n  %x = placeholder x ()\n"
        "  %c0 = call_module c (%x,)\n  %dw = call_module dw (%c0,)\n  %c = call_function torch.sigmoid (%dw,)\n"
        "  %o = call_module o (%c,)\n  %s = call_method size (%o,)\n"
        "  %p = call_function torch.nn.functional.max_pool2d (%o, 2)\n  %f = call_function torch.flatten (%p, 1)\n"
        "  %cat = call_function torch.cat ([%f, %f], 1)\n  %output = output output ((%cat, %s),)\n");
    set_tensor(g, "c", "weight", 4, (int64_t[]){2, 2, 3, 3}, ramp);
    set_tensor(g, "dw", "weight", 4, (int64_t[]){2, 1, 3, 3}, ramp2);
    ck_assert_int_gt(tu_oom_loop("exec", run_small, g), 10);
    bpcc_graph_free(g);
    g = parse("bpcc-model 1\n\nmodule c : torch.nn.Conv2d {in_channels: 16, out_channels: 16, kernel_size: 3, padding: 1}\n"
              "  param weight : f32[16, 16, 3, 3]\n  param bias : f32[16]\n\ngraph\n  %x = placeholder x ()\n"
              "  %c = call_module c (%x,)\n  %output = output output (%c,)\n");
    set_tensor(g, "c", "weight", 4, (int64_t[]){16, 16, 3, 3}, ramp);
    set_tensor(g, "c", "bias", 1, (int64_t[]){16}, ramp2);
    ck_assert_int_gt(tu_oom_loop("exec winograd", run_winograd_twice, g), 5);
    bpcc_graph_free(g);
    /* resizing to a shape sliced from a tensor's, 3-d pooling, a dict value and its lookup, padding,
    ** chunks, group norm, std, repeat */
    g = parse("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
              "  %u = call_function torch.nn.functional.interpolate (%x,) {scale_factor: 2.0, mode: \"bilinear\"}\n"
              "  %s = call_function getattr (%u, \"shape\")\n  %hw = call_function operator.getitem (%s, slice(-2, None, None))\n"
              "  %n = call_function torch.nn.functional.interpolate (%x, %hw)\n"
              "  %p = call_function torch.nn.functional.max_pool3d (%n, 2)\n"
              "  %d = call_function operator.getitem ({a: %u, b: (%n, %p)}, \"b\")\n"
              "  %pd = call_function torch.nn.functional.pad (%x, [1, 2, 2, 1], \"reflect\")\n"
              "  %ch = call_method chunk (%pd, 3, -1)\n  %g = call_function torch.nn.functional.group_norm (%x, 2)\n"
              "  %v = call_method std (%g, [1, 3])\n  %r = call_method repeat (%v, 2, 1, 2)\n"
              "  %output = output output ({out: %d, hw: %hw, ch: %ch, r: %r},)\n");
    ck_assert_int_gt(tu_oom_loop("exec resize", run_small, g), 10);
    bpcc_graph_free(g);
    /* sorting, gathering, topk, bicubic resizing, triangles, any, a power of tensors, bool-mask
    ** selections */
    g = parse("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n  %i = call_method argsort (%x, -1)\n"
              "  %g = call_function torch.gather (%x, 3, %i)\n  %t = call_method topk (%g, 2)\n"
              "  %v = call_function getattr (%t, \"values\")\n  %so = call_function torch.sort (%x, 1)\n"
              "  %b = call_function torch.nn.functional.interpolate (%x,) {scale_factor: 1.5, mode: \"bicubic\"}\n"
              "  %tr = call_method triu (%b, 1)\n  %a = call_method any (%tr, 1)\n  %p = call_function operator.pow (%x, %x)\n"
              "  %gt = call_function operator.gt (%x, 0.5)\n  %mi = call_function operator.getitem (%x, %gt)\n"
              "  %nz = call_function torch.where (%gt,)\n  %ms = call_method masked_select (%x, %gt)\n"
              "  %output = output output ((%v, %so, %a, %p, %mi, %nz, %ms),)\n");
    ck_assert_int_gt(tu_oom_loop("exec order", run_small, g), 10);
    bpcc_graph_free(g);
}
END_TEST

/* bpcc_fsum and bpcc_fsum_columns: every element counted once through each branch (the scalar
** tail, the groups of four vectors, the cascade's carries over its levels, blocks of columns:
** integers sum exactly in any order), and
** PyTorch 1.13's bits where its order gives other bits than a sum in order (x[i] = 1 / (i + 1);
** the expected values are torch.sum's on one thread, AVX2 kernels) */
START_TEST(fsum_counts_every_element_once_and_gives_pytorchs_bits)
{
    enum { MAXN = 240000 };
    float *x = malloc(MAXN * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (uint64_t n = 0; n < MAXN; n = n < 300 ? n + 1 : n * 3 + 7) {
        for (uint64_t i = 0; i < n; i++) x[i] = (float)(i % 31);
        double want = 0;
        for (uint64_t i = 0; i < n; i++) want += x[i];
        ck_assert_msg(bpcc_fsum(x, n) == (float)want, "n = %llu: %g, want %g", (unsigned long long)n,
                      bpcc_fsum(x, n), want);
    }
    /* columns: the cascade's blocks of 32 or 4 columns, single vectors, scalar columns; each
    ** column's rows through the cascade's levels or the groups of four */
    const uint64_t shapes[][2] = {{1, 1}, {5, 3}, {7, 6}, {17, 8}, {300, 13}, {600, 40}, {600, 100}, {2, 71}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        uint64_t rows = shapes[k][0], cols = shapes[k][1];
        float out[100];
        for (uint64_t i = 0; i < rows * cols; i++) x[i] = (float)((i * 7) % 29);
        bpcc_fsum_columns(x, rows, cols, out);
        for (uint64_t c = 0; c < cols; c++) {
            double want = 0;
            for (uint64_t r = 0; r < rows; r++) want += x[r * cols + c];
            ck_assert_msg(out[c] == (float)want, "[%llu, %llu] column %llu: %g, want %g", (unsigned long long)rows,
                          (unsigned long long)cols, (unsigned long long)c, out[c], want);
        }
    }
    static const struct {
        uint64_t n;
        uint32_t bits; /* torch.sum's */
        float in_order; /* a sum in order, which differs */
    } cases[] = {{7, 1076228447u, 0x1.4be2cp+1f}, {37, 1082553189u, 0x1.0ce6ccp+2f}, {9216, 1092307876u, 0x1.369756p+3f}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        float seq = 0;
        for (uint64_t i = 0; i < cases[k].n; i++) seq += (x[i] = 1.0f / (float)(i + 1));
        float got = bpcc_fsum(x, cases[k].n);
        uint32_t bits;
        memcpy(&bits, &got, sizeof bits);
        ck_assert_msg(seq == cases[k].in_order, "n = %llu: the sum in order changed", (unsigned long long)cases[k].n);
        ck_assert_msg(bits == cases[k].bits, "n = %llu: %a, PyTorch's bits %u", (unsigned long long)cases[k].n, got,
                      cases[k].bits);
    }
    free(x);
}
END_TEST

/* a model checking its input as torchvision's vision transformer does: the height from the shape
** and the rank from dim() against constants, and a one-element tensor's truth, by torch._assert */
static enum bpcc_status run_asserts(int64_t height, const char *truth, struct bpcc_diag *d)
{
    char text[1400];
    snprintf(text, sizeof text,
             "bpcc-model 1\n\ngraph\n  %%x = placeholder x ()\n"
             "  %%s = call_function getattr (%%x, \"shape\")\n  %%h = call_function operator.getitem (%%s, 2)\n"
             "  %%eq = call_function operator.eq (%%h, %lld)\n"
             "  %%_assert = call_function torch._assert (%%eq, \"Wrong image height!\")\n"
             "  %%dim = call_method dim (%%x,)\n  %%eq_1 = call_function operator.eq (%%dim, 4)\n"
             "  %%_assert_1 = call_function torch._assert (%%eq_1, \"four dimensions\")\n"
             "  %%sum = call_method sum (%%x,)\n  %%t = call_function operator.%s\n"
             "  %%_assert_2 = call_function torch._assert (%%t, \"the sum's truth\")\n"
             "  %%output = output output (%%x,)\n",
             (long long)height, truth);
    struct bpcc_graph *g = parse(text);
    struct xval out = {0};
    struct xtensor *x = input(4, (int64_t[]){1, 2, 8, 3}, ramp);
    enum bpcc_status s = run1(g, x, &out, d);
    if (!s) {
        ck_assert(out.k == XV_TENSOR && out.u.t->numel == 48 && out.u.t->data[5] == ramp(5));
        bpcc_xval_release(&out);
    }
    bpcc_xtensor_free(x);
    bpcc_graph_free(g);
    return s;
}

START_TEST(assert_checks_its_condition_as_python_does)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    /* the ramp's 48 values sum to -21.25: "gt (%sum, -100)" holds, "gt (%sum, 0)" does not */
    ck_assert_msg(run_asserts(8, "gt (%sum, -100)", &d) == BPCC_OK, "%s", tu_msg(&d));
    bpcc_diag_init(&d);
    ck_assert_int_eq(run_asserts(7, "gt (%sum, -100)", &d), BPCC_ERR_GRAPH);
    ck_assert_msg(strstr(tu_msg(&d), "assertion failed: Wrong image height!") && strstr(tu_msg(&d), "_assert"), "%s",
                  tu_msg(&d));
    bpcc_diag_init(&d);
    ck_assert_int_eq(run_asserts(8, "gt (%sum, 0)", &d), BPCC_ERR_GRAPH);
    ck_assert_msg(strstr(tu_msg(&d), "assertion failed: the sum's truth"), "%s", tu_msg(&d));
    /* a tensor of more than one element has no truth, as in PyTorch */
    bpcc_diag_init(&d);
    ck_assert_int_eq(run_asserts(8, "gt (%x, -100)", &d), BPCC_ERR_GRAPH);
    ck_assert_msg(strstr(tu_msg(&d), "the truth of a tensor of 48 elements is ambiguous"), "%s", tu_msg(&d));
}
END_TEST

/* whether a library whose path holds `name` is mapped in this process */
static bool library_mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

/* the exit status of a child that ran fn (a process of its own: the BLAS loads once per process) */
static int in_child(int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) _exit(fn());
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* With Check forking each test (not CK_FORK=no, as under valgrind), nothing in this process has
** loaded the BLAS before the test */
static bool fresh_process(void)
{
    const char *f = getenv("CK_FORK");
    return !(f && !strcmp(f, "no"));
}

static int preload_child(void)
{
    if (fresh_process() && library_mapped("libopenblas")) return 10;
    bpcc_blas_preload();
    bpcc_blas_preload(); /* a second call does nothing */
    /* mapped with no run asked: by the preload's thread */
    bool mapped = false;
    for (int i = 0; i < 2000 && !(mapped = library_mapped("libopenblas")); i++) usleep(10000);
    if (!mapped) return 11;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    enum bpcc_status s = bpcc_blas_load(&d);
    if (s != BPCC_OK) return 12;
    /* and it multiplies: [1 2; 3 4] [5 6; 7 8] (row-major, no transposes: CBLAS's 101 and 111) */
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4] = {0};
    bpcc_sgemm(101, 111, 111, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    return c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50 ? 0 : 13;
}

static int preload_missing_child(void)
{
    if (!fresh_process()) return 0; /* an earlier test of this process loaded it: nothing left to load */
    setenv("BPCC_BLAS", "/nonexistent/libnoblas.so", 1);
    bpcc_blas_preload();
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    /* the run's load waits for the preload's and reports what it found */
    enum bpcc_status s = bpcc_blas_load(&d);
    int code = s == BPCC_ERR_IO && strstr(tu_msg(&d), "cannot load the BLAS library /nonexistent/libnoblas.so: ") ? 0 : 20;
    return code;
}

START_TEST(preloading_loads_the_blas_before_any_run)
{
    ck_assert_int_eq(in_child(preload_child), 0);
    ck_assert_int_eq(in_child(preload_missing_child), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("exec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, conv2d_with_stride_padding_dilation_and_groups_matches_the_formula);
    tcase_add_test(tc, preloading_loads_the_blas_before_any_run);
    tcase_add_test(tc, assert_checks_its_condition_as_python_does);
    tcase_add_test(tc, fsum_counts_every_element_once_and_gives_pytorchs_bits);
    tcase_add_test(tc, a_convolution_unfolded_in_blocks_of_rows_matches_the_formula);
    tcase_add_test(tc, depthwise_conv_matches_the_formula_in_every_padding_mode);
    tcase_add_test(tc, winograd_3x3_convolution_matches_the_formula);
    tcase_add_test(tc, winograd_weights_kept_between_runs_are_each_modules_own);
    tcase_add_test(tc, infinities_reach_a_winograd_sized_convolution_as_the_direct_sum_has_them);
    tcase_add_test(tc, a_dying_argument_is_taken_in_place_and_a_living_one_never);
    tcase_add_test(tc, a_fused_conv_add_adds_its_second_input);
    tcase_add_test(tc, max_pooling_matches_the_formula);
    tcase_add_test(tc, histogram_quantization_error_equals_the_formula_bit_for_bit);
    tcase_add_test(tc, histogram_range_search_equals_the_step_by_step_search);
    tcase_add_test(tc, padding_a_mode_cannot_do_is_refused);
    tcase_add_test(tc, linear_batch_norm_and_activations_match_the_formulas);
    tcase_add_test(tc, pooling_follows_pytorchs_window_rules);
    tcase_add_test(tc, pooling_of_every_rank_matches_a_brute_force_reference);
    tcase_add_test(tc, pooling_refuses_indices_and_inputs_of_the_wrong_rank);
    tcase_add_test(tc, interpolation_follows_pytorchs_index_rules);
    tcase_add_test(tc, interpolation_refuses_what_it_cannot_do);
    tcase_add_test(tc, padding_pieces_and_pixel_shuffle_follow_pytorch);
    tcase_add_test(tc, ops_refuse_what_pytorch_refuses);
    tcase_add_test(tc, attention_refuses_what_it_cannot_run);
    tcase_add_test(tc, swin_functions_refuse_what_they_cannot_run);
    tcase_add_test(tc, mvit_functions_refuse_what_they_cannot_run);
    tcase_add_test(tc, mvit_functions_add_the_relative_position_bias_and_the_shortcut);
    tcase_add_test(tc, tensor_split_cuts_sections_and_at_indices);
    tcase_add_test(tc, stacks_index_updates_and_more_ops_refuse_what_pytorch_refuses);
    tcase_add_test(tc, more_tensor_ops_refuse_what_pytorch_refuses);
    tcase_add_test(tc, in_place_ops_change_their_argument_and_views_are_refused);
    tcase_add_test(tc, shifted_window_attention_averages_each_region_of_a_window);
    tcase_add_test(tc, training_mode_is_refused_where_it_changes_the_result);
    tcase_add_test(tc, shapes_broadcasting_indexing_and_reductions);
    tcase_add_test(tc, binary_ops_broadcast_exactly);
    tcase_add_test(tc, floor_division_agrees_with_c10s_formula);
    tcase_add_test(tc, an_op_it_cannot_run_is_named);
    tcase_add_test(tc, observers_see_what_passes_and_shared_ones_see_every_use);
    tcase_add_test(tc, the_observer_spec_memo_keys_on_type_and_attribute_array);
    tcase_add_test(tc, histogram_observer_bins_as_pytorch_1_13_does);
    tcase_add_test(tc, histogram_counts_of_a_big_tensor_equal_one_by_one_counting);
    tcase_add_test(tc, minmax_observers_find_the_extremes_and_nan_anywhere);
    tcase_add_test(tc, histograms_combine_bit_for_bit_as_element_by_element);
    tcase_add_test(tc, qparams_are_read_from_quantize_nodes_observers_and_reference_modules);
    tcase_add_test(tc, dynamic_quantization_chooses_qparams_as_aten);
    tcase_add_test(tc, embedding_bags_follow_their_offsets_and_refuse_bad_ones);
    tcase_add_test(tc, cells_take_one_step_of_their_layers_and_reference_ones_quantize_each_weight);
    tcase_add_test(tc, the_interpreter_survives_every_allocation_failure);
    tcase_add_test(tc, a_batch_feeds_many_inputs_and_names_a_missing_one);
    tcase_add_test(tc, run_refuses_output_names_that_collide);
    tcase_add_test(tc, every_op_of_every_kernel_table_finds_its_own_kernel);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
