/*
 * test_bias.c - attention-logit biases on one backend (--backend NAME): T5 / clipped
 * relative-position buckets (posenc_relbias_bucket, posenc_relbias,
 * posenc_relbias_backward) and ALiBi (posenc_alibi_slopes, posenc_alibi).
 *
 *  - every shared relbias / relbias_backward / alibi case (src/check) against the CPU
 *    reference;
 *  - the known values: T5 (32 buckets, max distance 128, bidirectional) maps
 *    -5 -> 5, 0 -> 0, 7 -> 23, 200 -> 31; ALiBi slopes for 8 heads 2^-1 .. 2^-8, for 12
 *    heads those then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5;
 *  - HF transformers' T5Attention._relative_position_bucket written out here (its float32
 *    steps), compared over every distance up to 4x max_distance for several settings;
 *  - properties: T5 buckets are monotone in |distance| and saturate from max_distance on;
 *    the ALiBi bias grows linearly with the distance (exactly, for power-of-2 slopes); a
 *    KV-cache step (one query at q_offset) equals the matching row of the full matrix;
 *    the device's bias is table[bucket] for every (k, q, h) with offsets; backward sums
 *    exactly (dyadic values) and gives the same bits twice;
 *  - bad input: exact statuses, a message naming the argument, output untouched.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t bucket(const struct posenc_relbias_params *p, int64_t rel)
{
    int32_t b = -1;
    posenc_status st = posenc_relbias_bucket(p, rel, &b);
    if (st != POSENC_OK)
        fail_msg("posenc_relbias_bucket(%lld): %s", (long long)rel, posenc_status_string(st));
    return b;
}

/* ---- T5 buckets ----------------------------------------------------------------------------- */

/*
 * HF transformers, T5Attention._relative_position_bucket (relative_position = memory -
 * query), step by step in float32 where torch works in float32:
 *   relative_position.float() / max_exact   -> f32 division
 *   torch.log(...)                          -> f32 log
 *   / math.log(max_distance / max_exact)    -> the double constant rounded to f32, f32 div
 *   * (num_buckets - max_exact)             -> f32 multiply
 *   .to(torch.long)                         -> truncation
 */
static int64_t hf_bucket(int64_t rel, int bidirectional, int64_t num_buckets, int64_t max_distance)
{
    int64_t ret = 0;
    if (bidirectional) {
        num_buckets /= 2;
        ret += rel > 0 ? num_buckets : 0;
        rel = rel < 0 ? -rel : rel;
    } else {
        rel = rel < 0 ? -rel : 0; /* -min(rel, 0) */
    }
    int64_t max_exact = num_buckets / 2;
    if (rel < max_exact)
        return ret + rel;
    volatile float x = (float)rel / (float)max_exact;
    volatile float l = logf(x);
    volatile float q = l / (float)log((double)max_distance / (double)max_exact);
    volatile float m = q * (float)(num_buckets - max_exact);
    int64_t large = max_exact + (int64_t)m;
    if (large > num_buckets - 1)
        large = num_buckets - 1;
    return ret + large;
}

static void test_t5_known(void **state)
{
    (void)state;
    struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5}; /* 32, 128, bidirectional */
    assert_int_equal(bucket(&p, -5), 5);
    assert_int_equal(bucket(&p, 0), 0);
    assert_int_equal(bucket(&p, 7), 23);
    assert_int_equal(bucket(&p, 200), 31);
    assert_int_equal(bucket(NULL, 200), 31); /* NULL = the same defaults */
    /* the same through the explicit values */
    struct posenc_relbias_params q = {.kind = POSENC_RELBIAS_T5, .num_buckets = 32,
                                      .max_distance = 128};
    assert_int_equal(bucket(&q, 7), 23);
    /* Shaw's clipping: clip(rel, -4, 4) + 4 */
    struct posenc_relbias_params c = {.kind = POSENC_RELBIAS_CLIPPED, .max_distance = 4};
    assert_int_equal(bucket(&c, -100), 0);
    assert_int_equal(bucket(&c, -3), 1);
    assert_int_equal(bucket(&c, 0), 4);
    assert_int_equal(bucket(&c, 4), 8);
    assert_int_equal(bucket(&c, 99), 8);
}

static void test_t5_vs_hf(void **state)
{
    (void)state;
    const int64_t settings[][3] = {{1, 32, 128}, {0, 32, 128}, {1, 64, 256}, {0, 16, 64},
                                   {1, 8, 20},   {1, 320, 800}, {0, 232, 3776}};
    for (size_t s = 0; s < sizeof(settings) / sizeof(settings[0]); s++) {
        struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5,
                                          .causal = settings[s][0] ? 0 : 1,
                                          .num_buckets = (int32_t)settings[s][1],
                                          .max_distance = (int32_t)settings[s][2]};
        int64_t md = settings[s][2];
        for (int64_t rel = -4 * md; rel <= 4 * md; rel++) {
            int64_t want = hf_bucket(rel, (int)settings[s][0], settings[s][1], md);
            int32_t got = bucket(&p, rel);
            if (got != want)
                fail_msg("setting %zu rel %lld: bucket %d, HF %lld", s, (long long)rel, got,
                         (long long)want);
        }
    }
    /* Where the f32 steps matter: causal, 232 buckets, max distance 3776, rel -682 is
     * bucket 175 in HF's float32 arithmetic; the same formula in double gives 174. (With
     * the defaults, f32 and double agree on every distance.) */
    struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5, .causal = 1,
                                      .num_buckets = 232, .max_distance = 3776};
    assert_int_equal(bucket(&p, -682), 175);
}

/* Monotone in |rel| per direction; from |rel| >= max_distance on, the direction's last
 * bucket (bidirectional: 15 backwards, 31 forwards; causal: 31 backwards, 0 forwards). */
static void test_t5_monotone_saturate(void **state)
{
    (void)state;
    for (int causal = 0; causal < 2; causal++) {
        struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5, .causal = causal};
        int32_t prev_fwd = bucket(&p, 0), prev_back = bucket(&p, 0);
        for (int64_t d = 1; d <= 2000; d++) {
            int32_t f = bucket(&p, d), b = bucket(&p, -d);
            if (f < prev_fwd || b < prev_back)
                fail_msg("causal=%d: not monotone at distance %lld", causal, (long long)d);
            prev_fwd = f;
            prev_back = b;
            if (d >= 128) {
                int32_t last_f = causal ? 0 : 31, last_b = causal ? 31 : 15;
                if (f != last_f || b != last_b)
                    fail_msg("causal=%d distance %lld: buckets %d / %d, want %d / %d", causal,
                             (long long)d, f, b, last_f, last_b);
            }
        }
        /* and the saturated bucket is reached only near max_distance: 127 and 128 may
         * share it, but a distance of 64 is still below it */
        assert_true(bucket(&p, causal ? -64 : 64) < 31);
    }
    /* far past int32 */
    struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5};
    assert_int_equal(bucket(&p, INT64_MAX), 31);
    assert_int_equal(bucket(&p, INT64_MIN), 15);
}

/* ---- relbias on the device ------------------------------------------------------------------ */

/* table[u, h] = u + 64 h (exact in f16), no logits: dst[k, q, h, b] must be exactly
 * bucket((k + k_off) - (q + q_off)) + 64 h, for T5 and clipped, with offsets. */
static void test_relbias_device_buckets(void **state)
{
    (void)state;
    enum { K = 40, Q = 9, H = 3, B = 2 };
    struct posenc_relbias_params ps[3] = {
        {.kind = POSENC_RELBIAS_T5, .q_offset = 31},
        {.kind = POSENC_RELBIAS_T5, .causal = 1, .num_buckets = 16, .max_distance = 24,
         .k_offset = 5},
        {.kind = POSENC_RELBIAS_CLIPPED, .max_distance = 6, .q_offset = 17, .k_offset = 2},
    };
    for (int i = 0; i < 3; i++)
        for (int dt = 0; dt < 2; dt++) {
            const struct posenc_relbias_params *p = &ps[i];
            int64_t nb = p->kind == POSENC_RELBIAS_CLIPPED ? 2 * p->max_distance + 1
                         : p->num_buckets                    ? p->num_buckets
                                                             : 32;
            posenc_dtype t = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
            size_t es = posenc_dtype_size(t);
            unsigned char *tab = malloc((size_t)(nb * H) * es);
            assert_non_null(tab);
            for (int64_t h = 0; h < H; h++)
                for (int64_t u = 0; u < nb; u++) {
                    float v = (float)(u + 64 * h);
                    if (dt) {
                        uint16_t hv = posenc_f32_to_f16(v);
                        memcpy(tab + 2 * (u + nb * h), &hv, 2);
                    } else {
                        memcpy(tab + 4 * (u + nb * h), &v, 4);
                    }
                }
            posenc_buffer *tb = th_upload(th.dut, tab, (size_t)(nb * H) * es);
            posenc_buffer *db = NULL;
            assert_int_equal(posenc_buffer_create(th.dut, K * Q * H * B * 4, &db), POSENC_OK);
            posenc_tensor tt = posenc_tensor_contiguous(tb, 0, t, nb, H, 1, 1);
            posenc_tensor dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, K, Q, H, B);
            th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, p), POSENC_OK, NULL, "relbias");
            float *out = th_download(db);
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t q = 0; q < Q; q++)
                        for (int64_t k = 0; k < K; k++) {
                            int64_t rel = (k + p->k_offset) - (q + p->q_offset);
                            float want = (float)(bucket(p, rel) + 64 * h);
                            float got = out[k + K * (q + Q * (h + H * b))];
                            if (got != want)
                                fail_msg("params %d %s (k %lld, q %lld, h %lld, b %lld): %g, want "
                                         "%g",
                                         i, posenc_dtype_name(t), (long long)k, (long long)q,
                                         (long long)h, (long long)b, got, want);
                        }
            free(out);
            free(tab);
            posenc_buffer_destroy(&tb);
            posenc_buffer_destroy(&db);
        }
    th_check_warnings();
}

static float dyadic(uint64_t *rng)
{
    return (float)((int)(pc_rand_u64(rng) % 65) - 32) / 8.0f;
}

static float *relbias_backward_dut(const float *g, int64_t K, int64_t Q, int64_t H, int64_t B,
                                   const float *dtab0, int64_t nb,
                                   const struct posenc_relbias_params *p)
{
    posenc_buffer *gb = th_upload(th.dut, g, (size_t)(K * Q * H * B) * 4);
    posenc_buffer *tb = th_upload(th.dut, dtab0, (size_t)(nb * H) * 4);
    posenc_tensor gt = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, K, Q, H, B);
    posenc_tensor tt = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, nb, H, 1, 1);
    th_expect(posenc_relbias_backward(th.dut, &gt, &tt, p), POSENC_OK, NULL, "relbias_backward");
    float *out = th_download(tb);
    posenc_buffer_destroy(&gb);
    posenc_buffer_destroy(&tb);
    th_check_warnings();
    return out;
}

/* dtable[u, h] += every dlogits element whose relative position falls in bucket u:
 * dyadic values, so the sums are exact and must match bit for bit; and two runs of a
 * rounding-heavy one agree bit for bit. */
static void test_relbias_backward(void **state)
{
    (void)state;
    enum { K = 50, Q = 7, H = 2, B = 3 };
    struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5, .num_buckets = 16,
                                      .max_distance = 20, .q_offset = 10};
    const int64_t nb = 16;
    float *g = malloc(sizeof(float) * K * Q * H * B), t0[16 * H];
    assert_non_null(g);
    uint64_t rng = 3;
    for (int i = 0; i < K * Q * H * B; i++)
        g[i] = dyadic(&rng);
    for (int i = 0; i < nb * H; i++)
        t0[i] = dyadic(&rng);
    float *out = relbias_backward_dut(g, K, Q, H, B, t0, nb, &p);
    for (int64_t h = 0; h < H; h++)
        for (int64_t u = 0; u < nb; u++) {
            double want = t0[u + nb * h];
            for (int64_t b = 0; b < B; b++)
                for (int64_t q = 0; q < Q; q++)
                    for (int64_t k = 0; k < K; k++)
                        if (bucket(&p, (k + p.k_offset) - (q + p.q_offset)) == u)
                            want += g[k + K * (q + Q * (h + H * b))];
            if (out[u + nb * h] != want)
                fail_msg("dtable[%lld, %lld] = %.9g, want %.9g", (long long)u, (long long)h,
                         out[u + nb * h], want);
        }
    free(out);
    for (int i = 0; i < K * Q * H * B; i++)
        g[i] = (float)(pc_rand_uniform(&rng) - 0.5) * 1e-2f;
    float *a = relbias_backward_dut(g, K, Q, H, B, t0, nb, &p);
    float *b = relbias_backward_dut(g, K, Q, H, B, t0, nb, &p);
    if (memcmp(a, b, sizeof(float) * nb * H) != 0)
        fail_msg("two runs of relbias_backward differ");
    free(a);
    free(b);
    free(g);
}

/* ---- ALiBi ----------------------------------------------------------------------------------- */

static void test_alibi_slopes_known(void **state)
{
    (void)state;
    double s[12];
    assert_int_equal(posenc_alibi_slopes(8, NULL, s), POSENC_OK);
    for (int h = 0; h < 8; h++)
        if (s[h] != ldexp(1.0, -(h + 1)))
            fail_msg("8 heads: slope %d = %.17g, want 2^-%d", h, s[h], h + 1);
    assert_int_equal(posenc_alibi_slopes(12, NULL, s), POSENC_OK);
    const double r = sqrt(0.5); /* 2^-0.5 */
    const double want12[12] = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125,
                               0.00390625, r, r / 2, r / 4, r / 8};
    for (int h = 0; h < 12; h++)
        if (fabs(s[h] - want12[h]) > 2e-16 * want12[h])
            fail_msg("12 heads: slope %d = %.17g, want %.17g", h, s[h], want12[h]);
    /* max_bias: ggml's m0^(h+1) with m0 = 2^(-max_bias/n): 4 heads, max_bias 4 -> 2^-1..2^-4 */
    struct posenc_alibi_params p = {.max_bias = 4.0f};
    assert_int_equal(posenc_alibi_slopes(4, &p, s), POSENC_OK);
    for (int h = 0; h < 4; h++)
        assert_true(s[h] == ldexp(1.0, -(h + 1)));
    /* one head: 2^-8 */
    assert_int_equal(posenc_alibi_slopes(1, NULL, s), POSENC_OK);
    assert_true(s[0] == ldexp(1.0, -8));
    /* user slopes are returned as given */
    const float mine[2] = {0.75f, 0.125f};
    struct posenc_alibi_params u = {.slopes = mine};
    assert_int_equal(posenc_alibi_slopes(2, &u, s), POSENC_OK);
    assert_true(s[0] == 0.75 && s[1] == 0.125);
    assert_int_equal(posenc_alibi_slopes(0, NULL, s), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_alibi_slopes(4, NULL, NULL), POSENC_ERR_INVALID_ARGUMENT);
    struct posenc_alibi_params bad = {.max_bias = -1.0f};
    assert_int_equal(posenc_alibi_slopes(4, &bad, s), POSENC_ERR_INVALID_ARGUMENT);
}

static float *alibi_dut(int64_t K, int64_t Q, int64_t H, const struct posenc_alibi_params *p)
{
    posenc_buffer *db = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, (size_t)(K * Q * H) * 4, &db), POSENC_OK);
    posenc_tensor dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, K, Q, H, 1);
    th_expect(posenc_alibi(th.dut, NULL, &dst, p), POSENC_OK, NULL, "alibi");
    float *out = th_download(db);
    posenc_buffer_destroy(&db);
    th_check_warnings();
    return out;
}

/* The bias grows linearly with the distance: causal, 8 heads (slopes 2^-(h+1), so every
 * product is exact): dst(q, k) = -2^-(h+1) (q - k) exactly, -inf above the diagonal; 12
 * heads: within the f32 bound of check_encodings.c; and a decode step (one query at
 * q_offset = 63 over 64 keys) equals the last row of the full 64x64 matrix bit for bit. */
static void test_alibi_linear(void **state)
{
    (void)state;
    enum { N = 64 };
    struct posenc_alibi_params p = {.causal = 1};
    for (int heads = 8; heads <= 12; heads += 4) {
        double s[12];
        assert_int_equal(posenc_alibi_slopes(heads, NULL, s), POSENC_OK);
        float *full = alibi_dut(N, N, heads, &p);
        for (int h = 0; h < heads; h++)
            for (int q = 0; q < N; q++)
                for (int k = 0; k < N; k++) {
                    float got = full[k + N * (q + N * h)];
                    if (k > q) {
                        if (!(isinf(got) && got < 0))
                            fail_msg("%d heads h %d: (q %d, k %d) = %g, want -inf", heads, h, q,
                                     k, got);
                        continue;
                    }
                    double want = -s[h] * (q - k);
                    /* 2.01 u m|d| + 2 ulp (check_encodings.c, bound_alibi, x = 0) */
                    double b = heads == 8 ? 0.0
                                          : 2.01 * 0x1p-24 * fabs(want) + 2 * pc_ulp32(want);
                    if (fabs(got - want) > b)
                        fail_msg("%d heads h %d: (q %d, k %d) = %.9g, want %.9g", heads, h, q, k,
                                 got, want);
                }
        struct posenc_alibi_params step = {.causal = 1, .q_offset = N - 1};
        float *row = alibi_dut(N, 1, heads, &step);
        for (int h = 0; h < heads; h++)
            if (memcmp(row + N * h, full + N * (N - 1 + N * h), N * sizeof(float)) != 0)
                fail_msg("%d heads h %d: the decode step differs from the full matrix", heads, h);
        free(row);
        free(full);
    }
    /* symmetric: -m |q - k| with keys offset (k_offset = 10): linear both ways */
    struct posenc_alibi_params sym = {.symmetric = 1, .k_offset = 10};
    float *v = alibi_dut(20, 30, 8, &sym);
    for (int q = 0; q < 30; q++)
        for (int k = 0; k < 20; k++)
            if (v[k + 20 * q] != (float)(-0.5 * fabs((double)q - (k + 10))))
                fail_msg("symmetric (q %d, k %d) = %g", q, k, v[k + 20 * q]);
    free(v);
}

/* ---- long rows ------------------------------------------------------------------------- */

/* The logits of the long-row tests: LR_K keys inside rows padded to LR_KP elements (so that
 * every row starts on a multiple of 16 and the GPU backends' vector kernels run: on OpenCL
 * CPU devices one work-item takes 256 keys, so a row is two full spans and a partial one
 * ending in single keys), LR_Q queries, LR_H heads, f32 or f16. */
enum { LR_K = 600, LR_KP = 608, LR_Q = 3, LR_H = 5, LR_N = LR_KP * LR_Q * LR_H };
static const float lr_pad = 777.0f; /* the padding's value, exact in f16 too */

static float lr_decode(const unsigned char *img, size_t i, int f16)
{
    return (float)th_elem(img, i, f16);
}

/* v[0 .. n) uniform in [-4, 4) from *seed (the logits and tables of the row tests). */
static void fill_pm4(float *v, int n, uint64_t *seed)
{
    for (int i = 0; i < n; i++)
        v[i] = (float)(8.0 * pc_rand_uniform(seed) - 4.0);
}

/* The relative-bias table tabv [nb, h] on the device (f16 or f32) and its tensor. */
static posenc_buffer *upload_rb_table(const float *tabv, int nb, int h, int f16,
                                      posenc_tensor *out)
{
    unsigned char *tb = malloc((size_t)nb * h * 4);
    assert_non_null(tb);
    for (int i = 0; i < nb * h; i++)
        th_put_elem(tb, (size_t)i, tabv[i], f16);
    posenc_buffer *b = th_upload(th.dut, tb, (size_t)nb * h * (f16 ? 2 : 4));
    free(tb);
    *out = posenc_tensor_contiguous(b, 0, f16 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32, nb, h, 1,
                                    1);
    return b;
}

/* x: the logits xs[LR_N] with lr_pad in the padding; d: lr_pad everywhere (the output
 * when not in place); tx the padded view of x, ty of d (or tx in place). */
struct lr_bufs {
    posenc_buffer *x, *d;
    posenc_tensor tx, ty;
};

static void lr_setup(struct lr_bufs *b, const float *xs, int f16, int in_place)
{
    const size_t es = f16 ? 2 : 4;
    unsigned char *xi = malloc(LR_N * es), *di = malloc(LR_N * es);
    assert_non_null(xi);
    assert_non_null(di);
    for (size_t i = 0; i < LR_N; i++) {
        th_put_elem(xi, i, i % LR_KP >= LR_K ? lr_pad : xs[i], f16);
        th_put_elem(di, i, lr_pad, f16);
    }
    b->x = th_upload(th.dut, xi, LR_N * es);
    b->d = th_upload(th.dut, di, LR_N * es);
    free(xi);
    free(di);
    b->tx = posenc_tensor_contiguous(b->x, 0, f16 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32, LR_K,
                                     LR_Q, LR_H, 1);
    b->tx.nb[1] = (int64_t)(LR_KP * es);
    b->tx.nb[2] = b->tx.nb[1] * LR_Q;
    b->tx.nb[3] = b->tx.nb[2] * LR_H;
    b->ty = b->tx;
    if (!in_place)
        b->ty.buffer = b->d;
}

static void lr_teardown(struct lr_bufs *b)
{
    posenc_buffer_destroy(&b->x);
    posenc_buffer_destroy(&b->d);
    th_check_warnings();
}

/* ALiBi over the long rows (the causal boundary of q_offset = 300 falls inside a 16-key
 * vector), f32 and f16 (logits of the same dtype), out of place and in place, causal /
 * symmetric / neither, against -m * dist + x in double; the 8 padding elements of every
 * row must stay untouched. */
static void test_alibi_long_rows(void **state)
{
    (void)state;
    double slopes[LR_H];
    assert_int_equal(posenc_alibi_slopes(LR_H, NULL, slopes), POSENC_OK);
    static float xs[LR_N];
    uint64_t seed = 9100;
    fill_pm4(xs, LR_N, &seed);
    for (int dt = 0; dt < 2; dt++)
        for (int mode = 0; mode < 3; mode++)
            for (int in_place = 0; in_place < 2; in_place++) {
                struct lr_bufs lb;
                lr_setup(&lb, xs, dt, in_place);
                struct posenc_alibi_params p = {.causal = mode == 0, .symmetric = mode == 1,
                                                .q_offset = 300};
                th_expect(posenc_alibi(th.dut, &lb.tx, &lb.ty, &p), POSENC_OK, NULL,
                          "alibi long rows");
                unsigned char *got = th_download(in_place ? lb.x : lb.d);
                for (int h = 0; h < LR_H; h++)
                    for (int q = 0; q < LR_Q; q++)
                        for (int k = 0; k < LR_KP; k++) {
                            const size_t i =
                                (size_t)k + LR_KP * ((size_t)q + LR_Q * (size_t)h);
                            const float g = lr_decode(got, i, dt);
                            if (k >= LR_K) {
                                if (g != lr_pad)
                                    fail_msg("dt %d mode %d in place %d: padding (q %d, k %d, "
                                             "h %d) = %g, written", dt, mode, in_place, q, k, h, g);
                                continue;
                            }
                            const long dist = (long)q + 300 - k;
                            if (mode == 0 && dist < 0) {
                                if (!(isinf(g) && g < 0))
                                    fail_msg("dt %d in place %d: (q %d, k %d, h %d) = %g, "
                                             "want -inf", dt, in_place, q, k, h, g);
                                continue;
                            }
                            const double xin = dt ? (double)posenc_f16_to_f32(posenc_f32_to_f16(
                                                        xs[i]))
                                                  : (double)xs[i];
                            const double md = slopes[h] * (double)(mode == 1 ? labs(dist) : dist);
                            const double want = xin - md;
                            /* f32: the slope rounded to f32 (u m|d|), the product and the
                             * sum rounded once each (bound_alibi of check_encodings.c:
                             * 2.01 u m|d| + 2 ulp of the result); f16 output: one more
                             * rounding, half an f16 ulp (2^-11 relative, 2^-25 absolute at
                             * the bottom of the subnormals) */
                            double b = 2.01 * 0x1p-24 * fabs(md) + 2 * pc_ulp32(want);
                            if (dt)
                                b += 0x1p-11 * fabs(want) + 0x1p-25;
                            if (fabs((double)g - want) > b)
                                fail_msg("dt %d mode %d in place %d: (q %d, k %d, h %d) = %.9g, "
                                         "want %.9g (bound %.3g)", dt, mode, in_place, q, k, h,
                                         g, want, b);
                        }
                free(got);
                lr_teardown(&lb);
            }
}

/* The relative bias over whole contiguous rows whose keys are multiples of 8 and queries
 * of 4 (K 64, Q 12, 3 heads, 2 batches): the rows Vulkan's vector paths (4 keys a row in
 * f32, 8 where dst or the logits are f16) and OpenCL's laid-out biases (CPU devices) take,
 * with logits (out of place and in place) and without, f32 and f16 tables, dst and logits
 * each f32 or f16 (in place: the same), against x + table[bucket, h] in double (buckets
 * from posenc_relbias_bucket; f16 inputs rounded to f16 first): one f32 rounding of the
 * sum, then one f16 rounding for an f16 dst. */
static void test_relbias_whole_rows(void **state)
{
    (void)state;
    enum { K = 64, Q = 12, H = 3, B = 2, NB = 32, N = K * Q * H * B };
    static float xs[N], tabv[NB * H];
    static unsigned char xi[N * 4];
    uint64_t seed = 9300;
    fill_pm4(xs, N, &seed);
    fill_pm4(tabv, NB * H, &seed);
    const struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5, .num_buckets = NB,
                                            .max_distance = 16, .q_offset = 40};
    for (int tdt = 0; tdt < 2; tdt++)
        for (int ddt = 0; ddt < 2; ddt++)     /* dst f32, f16 */
            for (int xdt = 0; xdt < 2; xdt++) /* logits f32, f16 */
                for (int mode = 0; mode < 3; mode++) { /* out of place, in place, none */
                    if ((mode == 1 && xdt != ddt) || (mode == 2 && xdt != 0))
                        continue;
                    const size_t xes = xdt ? 2 : 4, des = ddt ? 2 : 4;
                    for (size_t i = 0; i < N; i++)
                        th_put_elem(xi, i, xs[i], xdt);
                    posenc_buffer *xb = th_upload(th.dut, xi, N * xes);
                    posenc_buffer *db = th_upload(th.dut, xi, N * des); /* overwritten */
                    posenc_tensor tt;
                    posenc_buffer *tbuf = upload_rb_table(tabv, NB, H, tdt, &tt);
                    const posenc_dtype xd = xdt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                    const posenc_dtype dd = ddt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                    posenc_tensor tx = posenc_tensor_contiguous(xb, 0, xd, K, Q, H, B);
                    posenc_tensor ty = posenc_tensor_contiguous(db, 0, dd, K, Q, H, B);
                    if (mode == 1)
                        ty = tx;
                    th_expect(posenc_relbias(th.dut, mode == 2 ? NULL : &tx, &tt, &ty, &p),
                              POSENC_OK, NULL, "relbias whole rows");
                    unsigned char *got = th_download(mode == 1 ? xb : db);
                    for (size_t i = 0; i < N; i++) {
                        const int k = (int)(i % K), q = (int)(i / K % Q),
                                  h = (int)(i / ((size_t)K * Q) % H);
                        int32_t u;
                        assert_int_equal(
                            posenc_relbias_bucket(&p, (int64_t)k - (q + 40), &u), POSENC_OK);
                        const double tv = tdt ? posenc_f16_to_f32(posenc_f32_to_f16(
                                                    tabv[u + NB * h]))
                                              : tabv[u + NB * h];
                        const double xv =
                            xdt ? posenc_f16_to_f32(posenc_f32_to_f16(xs[i])) : xs[i];
                        const double want = (mode == 2 ? 0.0 : xv) + tv;
                        /* one f32 rounding of the sum (none without logits); an f16 dst:
                         * one more, half an f16 ulp (2^-11 relative, 2^-25 absolute) */
                        double bound = mode == 2 ? 0.0 : pc_ulp32(want);
                        if (ddt)
                            bound += 0x1p-11 * fabs(want) + 0x1p-25;
                        const float g = lr_decode(got, i, ddt);
                        if (fabs((double)g - want) > bound)
                            fail_msg("table %s, dst %s, logits %s, %s: (k %d, q %d, h %d, b "
                                     "%d) = %.9g, want %.9g", tdt ? "f16" : "f32",
                                     ddt ? "f16" : "f32", xdt ? "f16" : "f32",
                                     mode == 0 ? "out of place" : mode == 1 ? "in place"
                                                                            : "no logits",
                                     k, q, h, (int)(i / ((size_t)K * Q * H)), (double)g, want);
                    }
                    free(got);
                    posenc_buffer_destroy(&tbuf);
                    posenc_buffer_destroy(&xb);
                    posenc_buffer_destroy(&db);
                    th_check_warnings();
                }
}

/* Outputs of 16 MiB and more out of place: the CPU backend and OpenCL on CPU devices write
 * them with streaming stores, which want aligned rows, so two layouts are checked: K 1024
 * keys from the buffer's start (every row aligned: the streaming path, and OpenCL's
 * 16-wide one) and K 1028 from one element in (no row aligned: the plain-store
 * fallbacks). Q 1024 (f16: 2048) x 4 heads, T5 with 32 buckets, logits and table of
 * dst's dtype, against x + table[bucket, h] in double: one f32 rounding (f16 dst: plus
 * half an f16 ulp); the guard element before a shifted dst, or after an aligned one,
 * untouched. */
static void test_relbias_large(void **state)
{
    (void)state;
    enum { H = 4, NB = 32, QOFF = 500 };
    static float tabv[NB * H];
    uint64_t seed = 9400;
    fill_pm4(tabv, NB * H, &seed);
    const struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5, .num_buckets = NB,
                                            .max_distance = 64, .q_offset = QOFF};
    for (int dt = 0; dt < 2; dt++)
        for (int shift = 0; shift < 2; shift++) {
            const int64_t K = shift ? 1028 : 1024, Q = dt ? 2048 : 1024;
            const size_t es = dt ? 2 : 4, n = (size_t)K * (size_t)Q * H;
            const posenc_dtype d = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
            float *xs = malloc(n * sizeof(float));
            unsigned char *xi = malloc(n * es), *di = malloc((n + 1) * es);
            int32_t *bk = malloc((size_t)(K + Q) * sizeof(int32_t)); /* by k - q + Q - 1 */
            assert_non_null(xs);
            assert_non_null(xi);
            assert_non_null(di);
            assert_non_null(bk);
            for (size_t i = 0; i < n; i++) {
                xs[i] = (float)(8.0 * pc_rand_uniform(&seed) - 4.0);
                th_put_elem(xi, i, xs[i], dt);
            }
            for (size_t i = 0; i <= n; i++)
                th_put_elem(di, i, lr_pad, dt);
            for (int64_t r = 0; r < K + Q - 1; r++)
                assert_int_equal(posenc_relbias_bucket(&p, r - (Q - 1) - QOFF, &bk[r]),
                                 POSENC_OK);
            posenc_buffer *xb = th_upload(th.dut, xi, n * es);
            posenc_buffer *db = th_upload(th.dut, di, (n + 1) * es);
            posenc_tensor tt;
            posenc_buffer *tbuf = upload_rb_table(tabv, NB, H, dt, &tt);
            posenc_tensor tx = posenc_tensor_contiguous(xb, 0, d, K, Q, H, 1);
            posenc_tensor ty = posenc_tensor_contiguous(db, (size_t)shift * es, d, K, Q, H, 1);
            th_expect(posenc_relbias(th.dut, &tx, &tt, &ty, &p), POSENC_OK, NULL,
                      "relbias, 16 MiB out of place");
            unsigned char *got = th_download(db);
            for (size_t e = 0; e <= n; e++) {
                const float g = lr_decode(got, e, dt);
                if (e < (size_t)shift || e >= n + (size_t)shift) {
                    if (g != lr_pad)
                        fail_msg("%s shifted %d: the guard element %zu = %g", dt ? "f16" : "f32",
                                 shift, e, (double)g);
                    continue;
                }
                const size_t i = e - (size_t)shift;
                const int64_t k = (int64_t)(i % K), q = (int64_t)(i / K % (size_t)Q),
                              h = (int64_t)(i / ((size_t)K * (size_t)Q));
                const int32_t u = bk[k - q + Q - 1];
                const double tv = dt ? posenc_f16_to_f32(posenc_f32_to_f16(tabv[u + NB * h]))
                                     : tabv[u + NB * h];
                const double xv = dt ? posenc_f16_to_f32(posenc_f32_to_f16(xs[i])) : xs[i];
                const double want = xv + tv;
                double bound = pc_ulp32(want); /* one f32 rounding of the sum */
                if (dt)
                    bound += 0x1p-11 * fabs(want) + 0x1p-25; /* and one to f16 */
                if (fabs((double)g - want) > bound)
                    fail_msg("%s shifted %d: (k %d, q %d, h %d) = %.9g, want %.9g",
                             dt ? "f16" : "f32", shift, (int)k, (int)q, (int)h, (double)g, want);
            }
            free(got);
            free(xs);
            free(xi);
            free(di);
            free(bk);
            posenc_buffer_destroy(&tbuf);
            posenc_buffer_destroy(&xb);
            posenc_buffer_destroy(&db);
            th_check_warnings();
        }
}

/* ALiBi outputs of 16 MiB and more out of place, f32: the CPU backend writes their rows
 * with streaming stores after an element-wise prologue up to a 32-byte boundary, at the
 * row's start and again at the causal / symmetric boundary inside it. K 1027 (rows start
 * at every alignment), Q 1024, 4 heads, q_offset 500 (the boundary moves along the row),
 * causal and symmetric, with logits; against x - m_h |d| in double: two f32 roundings
 * (product and difference), -inf past the query when causal. */
static void test_alibi_large(void **state)
{
    (void)state;
    enum { K = 1027, Q = 1024, H = 4, QOFF = 500 };
    const size_t n = (size_t)K * Q * H;
    uint64_t seed = 9500;
    float *xs = malloc(n * sizeof(float));
    assert_non_null(xs);
    for (size_t i = 0; i < n; i++)
        xs[i] = (float)(8.0 * pc_rand_uniform(&seed) - 4.0);
    double m[H];
    assert_int_equal(posenc_alibi_slopes(H, NULL, m), POSENC_OK);
    posenc_buffer *xb = th_upload(th.dut, xs, n * sizeof(float));
    for (int causal = 0; causal < 2; causal++) {
        posenc_buffer *db = NULL;
        assert_int_equal(posenc_buffer_create(th.dut, n * sizeof(float), &db), POSENC_OK);
        posenc_tensor tx = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, K, Q, H, 1);
        posenc_tensor ty = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, K, Q, H, 1);
        const struct posenc_alibi_params p = {.causal = causal, .symmetric = !causal,
                                              .q_offset = QOFF};
        th_expect(posenc_alibi(th.dut, &tx, &ty, &p), POSENC_OK, NULL,
                  "alibi, 16 MiB out of place");
        float *got = th_download(db);
        for (size_t i = 0; i < n; i++) {
            const int64_t k = (int64_t)(i % K), q = (int64_t)(i / K % Q),
                          h = (int64_t)(i / ((size_t)K * Q));
            const int64_t d = q + QOFF - k;
            if (causal && d < 0) {
                if (!(isinf(got[i]) && got[i] < 0))
                    fail_msg("causal: (k %d, q %d, h %d) = %g, want -inf", (int)k, (int)q,
                             (int)h, (double)got[i]);
                continue;
            }
            const double mf = (float)m[h]; /* the slope as the backends use it, f32 */
            const double bias = mf * (double)(d < 0 ? -d : d);
            const double want = xs[i] - bias;
            const double bound = pc_ulp32(bias) + pc_ulp32(want); /* two f32 roundings */
            if (fabs((double)got[i] - want) > bound)
                fail_msg("%s: (k %d, q %d, h %d) = %.9g, want %.9g", causal ? "causal" : "symmetric",
                         (int)k, (int)q, (int)h, (double)got[i], want);
        }
        free(got);
        posenc_buffer_destroy(&db);
        th_check_warnings();
    }
    posenc_buffer_destroy(&xb);
    free(xs);
}

/* The relative bias over the long rows, T5 with 32 buckets, f32 and f16 throughout (the
 * table too), out of place and in place, against x + table[bucket, h] in double (buckets
 * from posenc_relbias_bucket), one rounding (f16: plus half an f16 ulp); padding
 * untouched. */
static void test_relbias_long_rows(void **state)
{
    (void)state;
    enum { NB = 32 };
    static float xs[LR_N], tabv[NB * LR_H];
    uint64_t seed = 9200;
    fill_pm4(xs, LR_N, &seed);
    fill_pm4(tabv, NB * LR_H, &seed);
    struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5, .q_offset = 300};
    for (int dt = 0; dt < 2; dt++)
        for (int in_place = 0; in_place < 2; in_place++) {
            struct lr_bufs lb;
            lr_setup(&lb, xs, dt, in_place);
            posenc_tensor t;
            posenc_buffer *tbuf = upload_rb_table(tabv, NB, LR_H, dt, &t);
            th_expect(posenc_relbias(th.dut, &lb.tx, &t, &lb.ty, &p), POSENC_OK, NULL,
                      "relbias long rows");
            unsigned char *got = th_download(in_place ? lb.x : lb.d);
            for (int h = 0; h < LR_H; h++)
                for (int q = 0; q < LR_Q; q++)
                    for (int k = 0; k < LR_KP; k++) {
                        const size_t i = (size_t)k + LR_KP * ((size_t)q + LR_Q * (size_t)h);
                        const float g = lr_decode(got, i, dt);
                        if (k >= LR_K) {
                            if (g != lr_pad)
                                fail_msg("dt %d in place %d: padding (q %d, k %d, h %d) = %g, "
                                         "written", dt, in_place, q, k, h, g);
                            continue;
                        }
                        int32_t u;
                        assert_int_equal(posenc_relbias_bucket(&p, (int64_t)k - (q + 300), &u),
                                         POSENC_OK);
                        const double tv = dt ? posenc_f16_to_f32(posenc_f32_to_f16(
                                                   tabv[u + NB * h]))
                                             : tabv[u + NB * h];
                        const double xv =
                            dt ? posenc_f16_to_f32(posenc_f32_to_f16(xs[i])) : xs[i];
                        const double want = xv + tv;
                        /* one f32 rounding of the sum (1 ulp covers it); f16 output: one
                         * more, half an f16 ulp (2^-11 relative, 2^-25 absolute) */
                        double b = pc_ulp32(want);
                        if (dt)
                            b += 0x1p-11 * fabs(want) + 0x1p-25;
                        if (fabs((double)g - want) > b)
                            fail_msg("dt %d in place %d: (q %d, k %d, h %d) = %.9g, want %.9g "
                                     "(bound %.3g)", dt, in_place, q, k, h, g, want, b);
                    }
            free(got);
            posenc_buffer_destroy(&tbuf);
            lr_teardown(&lb);
        }
}

/* ---- bad input ------------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    enum { K = 6, Q = 5, H = 2, NB = 32 };
    const posenc_status INV = POSENC_ERR_INVALID_ARGUMENT;
    unsigned char poison[NB * H * 4 + 64]; /* room for a table view inside it too */
    memset(poison, 0xA5, sizeof(poison));
    float tab[NB * H] = {0}, lg[K * Q * H] = {0};
    posenc_buffer *db = th_upload(th.dut, poison, sizeof(poison));
    posenc_buffer *gb = th_upload(th.dut, poison, NB * H * 4);
    posenc_buffer *tb = th_upload(th.dut, tab, sizeof(tab));
    posenc_buffer *lb = th_upload(th.dut, lg, sizeof(lg));
    posenc_tensor dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, K, Q, H, 1);
    posenc_tensor dtab = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, NB, H, 1, 1);
    posenc_tensor tt = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, NB, H, 1, 1);
    posenc_tensor lt = posenc_tensor_contiguous(lb, 0, POSENC_DTYPE_F32, K, Q, H, 1);
    posenc_tensor t;
    struct posenc_relbias_params p, r0 = {.kind = POSENC_RELBIAS_T5};

    /* relbias */
    assert_int_equal(posenc_relbias(NULL, NULL, &tt, &dst, NULL), INV);
    th_expect(posenc_relbias(th.dut, NULL, &tt, NULL, NULL), INV, "dst is NULL", "dst NULL");
    th_expect(posenc_relbias(th.dut, NULL, NULL, &dst, NULL), INV, "table is NULL", "table NULL");
    t = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, NB - 1, H, 1, 1);
    th_expect(posenc_relbias(th.dut, NULL, &t, &dst, NULL), INV, "table->ne[0] = 31", "buckets");
    t = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, NB, 1, 1, 1);
    th_expect(posenc_relbias(th.dut, NULL, &t, &dst, NULL), INV, "table->ne", "heads");
    t = tt;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_relbias(th.dut, NULL, &t, &dst, NULL), INV, "table->dtype", "i32 table");
    t = lt;
    t.ne[0] = K - 1;
    th_expect(posenc_relbias(th.dut, &t, &tt, &dst, NULL), INV, "logits->ne", "logits shape");
    t = posenc_tensor_contiguous(db, 4, POSENC_DTYPE_F32, K, Q, H - 1, 1);
    posenc_tensor d1 = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, K, Q, H - 1, 1);
    posenc_tensor t1 = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, NB, H - 1, 1, 1);
    th_expect(posenc_relbias(th.dut, &t, &t1, &d1, NULL), INV, "partially overlaps", "overlap");
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, NB, H, 1, 1);
    th_expect(posenc_relbias(th.dut, NULL, &t, &dst, NULL), INV, "table overlaps dst",
              "table in dst");
    p = r0;
    p.kind = (posenc_relbias_kind)7;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->kind", "kind");
    p = r0;
    p.num_buckets = 3;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->num_buckets", "3 buckets");
    p = r0;
    p.max_distance = 8; /* = max_exact of 32 bidirectional buckets */
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->max_distance", "max dist");
    p = r0;
    p.causal = 2;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->causal", "causal 2");
    p = r0;
    p.q_offset = -1;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->q_offset", "q_offset");
    p = r0;
    p.reserved[1] = 1;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->reserved[1]", "reserved");
    p = r0;
    p.kind = POSENC_RELBIAS_CLIPPED;
    p.max_distance = 4;
    p.num_buckets = 9;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->num_buckets",
              "clipped nb");
    p.num_buckets = 0;
    p.max_distance = 0;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->max_distance",
              "clipped 0");
    p.max_distance = 4;
    p.causal = 1;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "params->causal", "clipped causal");
    p.causal = 0;
    th_expect(posenc_relbias(th.dut, NULL, &tt, &dst, &p), INV, "9 buckets", "clipped table");
    int32_t bk;
    assert_int_equal(posenc_relbias_bucket(&r0, 1, NULL), INV);
    p = r0;
    p.num_buckets = 2;
    assert_int_equal(posenc_relbias_bucket(&p, 1, &bk), INV);

    /* relbias_backward */
    assert_int_equal(posenc_relbias_backward(NULL, &lt, &dtab, NULL), INV);
    th_expect(posenc_relbias_backward(th.dut, NULL, &dtab, NULL), INV, "dlogits is NULL",
              "dl NULL");
    t = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, K, Q, 1, 1);
    posenc_tensor dt1 = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, NB, 1, 1, 1);
    th_expect(posenc_relbias_backward(th.dut, &t, &dt1, NULL), INV, "dlogits overlaps dtable",
              "dl in dtable");
    t = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, NB / 2, H, 1, 1);
    th_expect(posenc_relbias_backward(th.dut, &lt, &t, NULL), INV, "dtable->ne[0]", "dtable nb");

    /* alibi */
    struct posenc_alibi_params a, a0 = {.causal = 1};
    assert_int_equal(posenc_alibi(NULL, NULL, &dst, &a0), INV);
    th_expect(posenc_alibi(th.dut, NULL, NULL, &a0), INV, "dst is NULL", "alibi dst NULL");
    t = dst;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_alibi(th.dut, NULL, &t, &a0), INV, "dst->dtype", "alibi i32");
    t = lt;
    t.ne[2] = 1;
    th_expect(posenc_alibi(th.dut, &t, &dst, &a0), INV, "logits->ne", "alibi logits shape");
    a = a0;
    a.max_bias = NAN;
    th_expect(posenc_alibi(th.dut, NULL, &dst, &a), INV, "params->max_bias", "NaN max_bias");
    a = a0;
    a.max_bias = -8.0f;
    th_expect(posenc_alibi(th.dut, NULL, &dst, &a), INV, "params->max_bias", "negative max_bias");
    a = a0;
    a.causal = 2;
    th_expect(posenc_alibi(th.dut, NULL, &dst, &a), INV, "params->causal", "alibi causal 2");
    a = a0;
    a.symmetric = -1;
    th_expect(posenc_alibi(th.dut, NULL, &dst, &a), INV, "params->symmetric", "symmetric -1");
    a = a0;
    a.k_offset = -3;
    th_expect(posenc_alibi(th.dut, NULL, &dst, &a), INV, "params->k_offset", "k_offset");
    a = a0;
    a.q_offset = 1 << 24; /* positions past 2^24: distances no longer exact in f32 */
    th_expect(posenc_alibi(th.dut, NULL, &dst, &a), INV, "2^24", "huge q_offset");
    const float bad_slopes[H] = {0.5f, NAN};
    a = a0;
    a.slopes = bad_slopes;
    th_expect(posenc_alibi(th.dut, NULL, &dst, &a), INV, "params->slopes[1]", "NaN slope");
    a = a0;
    a.reserved[0] = 5;
    th_expect(posenc_alibi(th.dut, NULL, &dst, &a), INV, "params->reserved[0]", "alibi reserved");

    /* empty: valid no-ops */
    t = dst;
    t.ne[1] = 0;
    th_expect(posenc_alibi(th.dut, NULL, &t, &a0), POSENC_OK, NULL, "empty alibi");
    th_expect(posenc_relbias(th.dut, NULL, &tt, &t, NULL), POSENC_OK, NULL, "empty relbias");
    posenc_tensor l0 = lt;
    l0.ne[3] = 0;
    th_expect(posenc_relbias_backward(th.dut, &l0, &dtab, NULL), POSENC_OK, NULL, "empty backward");

    th_expect_untouched(db, 0xA5, "bias dst");
    th_expect_untouched(gb, 0xA5, "bias dtable");
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&gb);
    posenc_buffer_destroy(&tb);
    posenc_buffer_destroy(&lb);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "bias");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_t5_known),
        cmocka_unit_test(test_t5_vs_hf),
        cmocka_unit_test(test_t5_monotone_saturate),
        cmocka_unit_test(test_relbias_device_buckets),
        cmocka_unit_test(test_relbias_backward),
        cmocka_unit_test(test_alibi_slopes_known),
        cmocka_unit_test(test_alibi_linear),
        cmocka_unit_test(test_alibi_long_rows),
        cmocka_unit_test(test_relbias_long_rows),
        cmocka_unit_test(test_relbias_whole_rows),
        cmocka_unit_test(test_relbias_large),
        cmocka_unit_test(test_alibi_large),
        cmocka_unit_test(test_bad_input),
    };
    static const enum pc_op ops[] = {PC_OP_RELBIAS, PC_OP_RELBIAS_BACKWARD, PC_OP_ALIBI};
    rc = th_run_with_cases("bias", fixed, sizeof(fixed) / sizeof(fixed[0]), ops,
                           sizeof(ops) / sizeof(ops[0]));
    th_fini();
    return rc;
}
