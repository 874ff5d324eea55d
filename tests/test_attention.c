/*
 * test_attention.c - posenc_attention and posenc_attention_decay on one backend
 * (--backend NAME):
 *
 *  - every shared attention case (src/check) against the CPU reference, except the large
 *    ones (2048 x 2048) that `posenc verify` runs;
 *  - each encoding against attention written out here in double from the formulas
 *    (sinusoidal PE, RoPE rotation, learned rows, ALiBi slopes, clipped relative buckets),
 *    within the per-element bounds of check_attention.c;
 *  - the seeds' claims: without an encoding, permuting the tokens permutes the output
 *    rows and the weights (the "permutation invariance problem"); with each encoding it
 *    does not. Shifting every position by a constant leaves the weights unchanged with
 *    RoPE, ALiBi and relative bias, and changes them with sinusoidal and learned
 *    encodings;
 *  - the decay curve (posenc_attention_decay): the device against the reference, NoPE
 *    flat, ALiBi exactly exponential, RoPE decaying;
 *  - rows whose every key is masked give zeros, not NaN;
 *  - the one-pass path's extras (softcap, mask_slopes, sinks) against the formula in
 *    double, on the device and the reference context; the same call one pass and with
 *    POSENC_ATTENTION_UNFUSED on the same backend (the shared cases without weights run
 *    the one-pass kernel where the backend has one);
 *  - bad input: exact statuses, a message naming the argument, outputs untouched.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24

/* A small f32 case: q [D, Hq, Tq, B], Hk K/V heads, Tk keys. */
static struct pc_case small_case(posenc_attention_encoding e, int64_t D, int64_t Hq, int64_t Hk,
                                 int64_t Tq, int64_t Tk, int64_t B, uint64_t seed)
{
    struct pc_case c = pc_attention_case(e, POSENC_DTYPE_F32, D, Hq, Hk, Tq, Tk, B, seed);
    c.rows = 64;
    c.relbias.kind = POSENC_RELBIAS_CLIPPED;
    c.relbias.max_distance = 3;
    snprintf(c.name, sizeof(c.name), "attention/test/enc=%d", (int)e);
    return c;
}

static void eval(posenc_context *ctx, const struct pc_case *c, const int64_t *perm, int32_t shift,
                 struct pc_attn_result *r)
{
    char msg[320];
    posenc_status st = pc_attn_eval(ctx, c, perm, perm, shift, r, msg, sizeof(msg));
    th_check_warnings();
    if (st != POSENC_OK)
        fail_msg("%s on %s: %s", c->name, posenc_backend_name(th.kind), msg);
}

/* ---- attention in double, from the formulas ------------------------------------------ */

/*
 * The inputs are r's (as the device read them); positions are q + q_offset and
 * k + k_offset. Encodings with their default parameters, written out:
 *   sinusoidal  PE(p, 2i) = sin(p / 10000^(2i/D)), PE(p, 2i+1) = cos(...), added to q, k
 *   learned     table[:, p] added to q, k
 *   rope        (x_2j, x_2j+1) rotated by p * 10000^(-2j/D)
 *   alibi       4 heads: slopes 1/4, 1/16, 1/64, 1/256 (the paper's 2^(-8h/H)), bias
 *               -slope * (qp - kp)
 *   relbias     clipped at 3: bias table[clip(kp - qp, -3, 3) + 3, h]
 */
static void encode_row(const struct pc_case *c, const struct pc_attn_result *r, const double *x,
                       int64_t p, double *out)
{
    const int64_t D = c->ne[0];
    for (int64_t i = 0; i < D; i++)
        out[i] = x[i];
    switch (c->attn.encoding) {
    case POSENC_ATTENTION_SINUSOIDAL:
        for (int64_t i = 0; i < D / 2; i++) {
            double a = (double)p / pow(10000.0, 2.0 * (double)i / (double)D);
            out[2 * i] += sin(a);
            out[2 * i + 1] += cos(a);
        }
        break;
    case POSENC_ATTENTION_LEARNED:
        for (int64_t i = 0; i < D; i++)
            out[i] += r->table[i + D * p];
        break;
    case POSENC_ATTENTION_ROPE:
        for (int64_t j = 0; j < D / 2; j++) {
            double a = (double)p * pow(10000.0, -2.0 * (double)j / (double)D);
            double x0 = x[2 * j], x1 = x[2 * j + 1];
            out[2 * j] = x0 * cos(a) - x1 * sin(a);
            out[2 * j + 1] = x0 * sin(a) + x1 * cos(a);
        }
        break;
    default:
        break;
    }
}

static void exact_attention(const struct pc_case *c, const struct pc_attn_result *r, double *w,
                            double *o)
{
    const int64_t D = c->ne[0], Hq = c->ne[1], Tq = c->ne[2], B = c->ne[3];
    const int64_t Hk = c->attn.hk, Tk = c->attn.tk, Dv = c->attn.dv;
    const double slopes4[4] = {0.25, 0.0625, 0.015625, 0.00390625};
    double *qe = malloc(sizeof(double) * (size_t)D), *ke = malloc(sizeof(double) * (size_t)D);
    double *s = malloc(sizeof(double) * (size_t)Tk);
    assert_non_null(qe);
    assert_non_null(ke);
    assert_non_null(s);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t q = 0; q < Tq; q++) {
                const int64_t qp = q + c->attn.q_offset;
                encode_row(c, r, r->q + D * (h + Hq * (q + Tq * b)), qp, qe);
                double m = -INFINITY;
                for (int64_t k = 0; k < Tk; k++) {
                    const int64_t kp = k + c->attn.k_offset;
                    encode_row(c, r, r->k + D * (h / (Hq / Hk) + Hk * (k + Tk * b)), kp, ke);
                    double dot = 0.0;
                    for (int64_t i = 0; i < D; i++)
                        dot += qe[i] * ke[i];
                    s[k] = dot / sqrt((double)D);
                    if (c->attn.encoding == POSENC_ATTENTION_ALIBI)
                        s[k] -= slopes4[h] * (double)(qp - kp);
                    if (c->attn.encoding == POSENC_ATTENTION_RELBIAS) {
                        int64_t rel = kp - qp;
                        rel = rel < -3 ? -3 : rel > 3 ? 3 : rel;
                        s[k] += r->table[(rel + 3) + 7 * h];
                    }
                    if (c->attn.causal && kp > qp)
                        s[k] = -INFINITY;
                    if (s[k] > m)
                        m = s[k];
                }
                double z = 0.0;
                for (int64_t k = 0; k < Tk; k++)
                    z += m == -INFINITY ? 0.0 : exp(s[k] - m);
                double *wr = w + Tk * (q + Tq * (h + Hq * b));
                for (int64_t k = 0; k < Tk; k++)
                    wr[k] = m == -INFINITY ? 0.0 : exp(s[k] - m) / z;
                for (int64_t i = 0; i < Dv; i++) {
                    double acc = 0.0;
                    for (int64_t k = 0; k < Tk; k++)
                        acc += wr[k] * r->v[i + Dv * (h / (Hq / Hk) + Hk * (k + Tk * b))];
                    o[i + Dv * (h + Hq * (q + Tq * b))] = acc;
                }
            }
    free(qe);
    free(ke);
    free(s);
}

static void check_exact(posenc_attention_encoding e)
{
    /* GQA 4:2, a decoding chunk of 5 queries at positions 4..8 against keys 0..8, causal */
    struct pc_case c = small_case(e, 16, 4, 2, 5, 9, 2, 77 + (uint64_t)e);
    c.attn.q_offset = 4;
    c.attn.causal = 1;
    struct pc_attn_result r;
    eval(th.dut, &c, NULL, 0, &r);
    double *w = malloc(sizeof(double) * (size_t)r.n_w), *o = malloc(sizeof(double) * (size_t)r.n_o);
    assert_non_null(w);
    assert_non_null(o);
    exact_attention(&c, &r, w, o);
    double worst = 0.0;
    for (int64_t i = 0; i < r.n_w; i++) {
        double err = fabs(r.w[i] - w[i]);
        if (!(err <= r.w_bound[i]))
            fail_msg("encoding %d: weight %lld = %.9g, exact %.9g, |err| %.3g > bound %.3g",
                     (int)e, (long long)i, r.w[i], w[i], err, r.w_bound[i]);
        if (r.w_bound[i] > 0 && err / r.w_bound[i] > worst)
            worst = err / r.w_bound[i];
    }
    for (int64_t i = 0; i < r.n_o; i++) {
        double err = fabs(r.o[i] - o[i]);
        if (!(err <= r.o_bound[i]))
            fail_msg("encoding %d: output %lld = %.9g, exact %.9g, |err| %.3g > bound %.3g",
                     (int)e, (long long)i, r.o[i], o[i], err, r.o_bound[i]);
        if (r.o_bound[i] > 0 && err / r.o_bound[i] > worst)
            worst = err / r.o_bound[i];
    }
    print_message("encoding %d: worst |err| / bound against double = %.3g\n", (int)e, worst);
    free(w);
    free(o);
    pc_attn_result_free(&r);
}

static void test_exact_none(void **state)
{
    (void)state;
    check_exact(POSENC_ATTENTION_NONE);
}
static void test_exact_sinusoidal(void **state)
{
    (void)state;
    check_exact(POSENC_ATTENTION_SINUSOIDAL);
}
static void test_exact_learned(void **state)
{
    (void)state;
    check_exact(POSENC_ATTENTION_LEARNED);
}
static void test_exact_rope(void **state)
{
    (void)state;
    check_exact(POSENC_ATTENTION_ROPE);
}
static void test_exact_alibi(void **state)
{
    (void)state;
    check_exact(POSENC_ATTENTION_ALIBI);
}
static void test_exact_relbias(void **state)
{
    (void)state;
    check_exact(POSENC_ATTENTION_RELBIAS);
}

/* ---- the seeds' claims: permutation and shift --------------------------------------- */

/* max over elements of |a - b| minus the sum of the two bounds: <= 0 means "equal within
 * rounding"; a clearly positive value means the two differ. *out_diff gets max |a - b|. */
static double excess(const double *a, const double *ab, const double *b, const double *bb,
                     const int64_t *ia, int64_t n, double *out_diff)
{
    double worst = -INFINITY, diff = 0.0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = ia ? ia[i] : i;
        double d = fabs(a[i] - b[j]);
        if (d > diff)
            diff = d;
        double x = d - (ab[i] + bb[j]);
        if (x > worst)
            worst = x;
    }
    *out_diff = diff;
    return worst;
}

enum { PT = 8 };
static const int64_t perm8[PT] = {3, 7, 0, 5, 1, 6, 2, 4};

/* For a run on permuted tokens, the index of the matching element of the original run:
 * weights (k', q', h, b) <- (perm k', perm q', h, b); outputs (i, h, q', b) <- (i, h, perm q'). */
static void perm_maps(const struct pc_case *c, int64_t *wmap, int64_t *omap)
{
    const int64_t Hq = c->ne[1], B = c->ne[3], Dv = c->attn.dv;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t q = 0; q < PT; q++) {
                for (int64_t k = 0; k < PT; k++)
                    wmap[k + PT * (q + PT * (h + Hq * b))] =
                        perm8[k] + PT * (perm8[q] + PT * (h + Hq * b));
                for (int64_t i = 0; i < Dv; i++)
                    omap[i + Dv * (h + Hq * (q + PT * b))] = i + Dv * (h + Hq * (perm8[q] + PT * b));
            }
}

static void test_permutation(void **state)
{
    (void)state;
    for (int e = 0; e <= (int)POSENC_ATTENTION_RELBIAS; e++) {
        struct pc_case c = small_case((posenc_attention_encoding)e, 16, 4, 2, PT, PT, 1,
                                      300 + (uint64_t)e);
        struct pc_attn_result r0, r1;
        eval(th.dut, &c, NULL, 0, &r0);
        eval(th.dut, &c, perm8, 0, &r1);
        int64_t *wmap = malloc(sizeof(int64_t) * (size_t)r0.n_w);
        int64_t *omap = malloc(sizeof(int64_t) * (size_t)r0.n_o);
        assert_non_null(wmap);
        assert_non_null(omap);
        perm_maps(&c, wmap, omap);
        double dw, dout;
        double xw = excess(r1.w, r1.w_bound, r0.w, r0.w_bound, wmap, r0.n_w, &dw);
        double xo = excess(r1.o, r1.o_bound, r0.o, r0.o_bound, omap, r0.n_o, &dout);
        print_message("encoding %d: permuted tokens: max |weight diff| %.3g, max |output diff| "
                      "%.3g\n",
                      e, dw, dout);
        if (e == POSENC_ATTENTION_NONE) {
            if (xw > 0.0 || xo > 0.0)
                fail_msg("NoPE: permuting the tokens did not permute the result (weights off "
                         "by %.3g, outputs by %.3g past the rounding bounds)",
                         xw, xo);
        } else if (!(xo > 1e-3 && xw > 1e-3)) {
            fail_msg("encoding %d: permuting the tokens only permuted the result (weights "
                     "differ by %.3g, outputs by %.3g past the bounds): the encoding is not seen",
                     e, xw, xo);
        }
        free(wmap);
        free(omap);
        pc_attn_result_free(&r0);
        pc_attn_result_free(&r1);
    }
}

static void test_shift(void **state)
{
    (void)state;
    for (int e = 0; e <= (int)POSENC_ATTENTION_RELBIAS; e++) {
        struct pc_case c = small_case((posenc_attention_encoding)e, 16, 4, 2, 6, 10, 2,
                                      400 + (uint64_t)e);
        c.attn.q_offset = 4;
        c.attn.causal = e % 2; /* masks and no masks */
        struct pc_attn_result r0, r1;
        eval(th.dut, &c, NULL, 0, &r0);
        eval(th.dut, &c, NULL, 1000, &r1);
        double dw;
        double xw = excess(r1.w, r1.w_bound, r0.w, r0.w_bound, NULL, r0.n_w, &dw);
        print_message("encoding %d: positions + 1000: max |weight diff| %.3g\n", e, dw);
        const bool invariant = e == POSENC_ATTENTION_NONE || e == POSENC_ATTENTION_ROPE ||
                               e == POSENC_ATTENTION_ALIBI || e == POSENC_ATTENTION_RELBIAS;
        if (invariant && xw > 0.0)
            fail_msg("encoding %d: shifting every position changed the weights by %.3g past "
                     "the rounding bounds (relative encodings must not see it)",
                     e, xw);
        if (!invariant && !(xw > 1e-3))
            fail_msg("encoding %d: shifting every position left the weights unchanged (%.3g): "
                     "an absolute encoding must see it",
                     e, xw);
        pc_attn_result_free(&r0);
        pc_attn_result_free(&r1);
    }
}

/* ---- the decay curve --------------------------------------------------------------------- */

/*
 * Bound on |mean weight (device) - mean weight (reference)| at one distance, for
 * posenc_attention_decay with one head of D dims, n keys, q and k in [0, 1):
 *  - |q_i|, |k_i| < 1, so after RoPE (magnitude 1) every rotated element is below
 *    |x_a| + |x_b| < 2: S = sum |q'_i k'_i| < 4D;
 *  - a rotated element is within pc_bound_rope_f32(pc_angle_err32(n), 1, 2) of exact (angles
 *    p*w_j <= n, w_j <= 1), so E = sum (e_q K^ + Q^ e_k + e_q e_k) <= D (4e + e^2);
 *  - with c = 1/sqrt(D): eps = c ((D + 2) 1.01 u S + E) + 3 u c S (+ the ALiBi bias term
 *    2.01 u |b| + 3 u |b|, |b| = slope * n);
 *  - each weight is then within p (expm1(2 eps) + (6 (|ln p| + ln n) + n + 17) u) of the
 *    exact one on both sides (check_attention.c, section 3); p |ln p| <= 1/e, so the mean
 *    over the draws of two such errors is at most
 *      2 (mean (expm1(2 eps) + (6 ln n + n + 17) u) + 6u/e) + 2^-124.
 */
static double decay_bound(int64_t D, int64_t n, double bias, double mean)
{
    const double c = 1.0 / sqrt((double)D);
    const double e = pc_bound_rope_f32(pc_angle_err32((double)n), 1.0, 2.0);
    const double S = 4.0 * (double)D, E = (double)D * (4.0 * e + e * e);
    const double eps = c * ((double)(D + 2) * 1.01 * U32 * S + E) + 3.0 * U32 * c * S +
                       5.01 * U32 * bias;
    const double R = expm1(2.0 * eps) + (6.0 * log((double)n) + (double)n + 17.0) * U32;
    return 2.0 * (mean * R + 6.0 * U32 / exp(1.0)) + 0x1p-124;
}

static void decay(posenc_context *ctx, int64_t D, int64_t n, int64_t samples,
                  const struct posenc_attention_params *p, double *out)
{
    posenc_status st = posenc_attention_decay(ctx, D, n, samples, 42, p, out);
    th_check_warnings();
    if (st != POSENC_OK)
        fail_msg("posenc_attention_decay on %s: %s: %s", ctx == th.dut ? "dut" : "reference",
                 posenc_status_string(st), posenc_context_last_error(ctx));
}

static void test_decay(void **state)
{
    (void)state;
    enum { D = 64, N = 256, S = 16 };
    static double dut[N], ref[N];
    struct posenc_attention_params p;

    /* RoPE: the device against the reference, and the curve decays */
    memset(&p, 0, sizeof(p));
    p.encoding = POSENC_ATTENTION_ROPE;
    decay(th.dut, D, N, S, &p, dut);
    decay(th.ref, D, N, S, &p, ref);
    double sum = 0.0, near = 0.0, far = 0.0;
    for (int r = 0; r < N; r++) {
        double b = decay_bound(D, N, 0.0, ref[r]);
        if (!(fabs(dut[r] - ref[r]) <= b))
            fail_msg("rope decay at distance %d: %.9g, reference %.9g, bound %.3g", r, dut[r],
                     ref[r], b);
        sum += dut[r];
        if (r < 8)
            near += dut[r] / 8.0;
        if (r >= N / 2)
            far += dut[r] / (N / 2);
    }
    if (!(fabs(sum - 1.0) <= 1e-4))
        fail_msg("rope decay: the mean weights sum to %.9g, not 1", sum);
    print_message("rope decay: mean weight at distance 0..7: %.4g, at %d..%d: %.4g\n", near,
                  N / 2, N - 1, far);
    if (!(near > 1.5 * far))
        fail_msg("rope decay: the near keys (%.4g) do not outweigh the far ones (%.4g)", near,
                 far);

    /* NoPE: every key gets 1/N */
    memset(&p, 0, sizeof(p));
    decay(th.dut, D, N, S, &p, dut);
    for (int r = 0; r < N; r++) {
        double b = decay_bound(D, N, 0.0, 1.0 / N);
        if (!(fabs(dut[r] - 1.0 / N) <= b))
            fail_msg("NoPE decay at distance %d: %.9g, want 1/%d (bound %.3g)", r, dut[r], N, b);
    }

    /* ALiBi (one head, slope 1/16): exp(-r/16) / sum_j exp(-j/16), whatever q and k */
    memset(&p, 0, sizeof(p));
    p.encoding = POSENC_ATTENTION_ALIBI;
    p.alibi.max_bias = 4.0f; /* one head: slope 2^-4 */
    decay(th.dut, D, N, S, &p, dut);
    double z = 0.0;
    for (int r = 0; r < N; r++)
        z += exp(-(double)r / 16.0);
    for (int r = 0; r < N; r++) {
        double want = exp(-(double)r / 16.0) / z;
        double b = decay_bound(D, N, (double)N / 16.0, want);
        if (!(fabs(dut[r] - want) <= b))
            fail_msg("ALiBi decay at distance %d: %.9g, want %.9g (bound %.3g)", r, dut[r], want,
                     b);
    }
}

/* ---- all keys masked ------------------------------------------------------------------- */

static void test_all_masked(void **state)
{
    (void)state;
    enum { D = 8, T = 4 };
    float qkv[D * T], mask[T * T];
    for (int i = 0; i < D * T; i++)
        qkv[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < T * T; i++)
        mask[i] = -INFINITY;
    mask[1 + T * 2] = 0.0f; /* query 2 sees key 1 only */
    unsigned char poison[4 * D * T];
    memset(poison, 0xA5, sizeof(poison));
    posenc_buffer *xb = th_upload(th.dut, qkv, sizeof(qkv));
    posenc_buffer *mb = th_upload(th.dut, mask, sizeof(mask));
    posenc_buffer *ob = th_upload(th.dut, poison, sizeof(poison));
    posenc_buffer *wb = th_upload(th.dut, poison, 4 * T * T);
    posenc_tensor x = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, 1, T, 1);
    posenc_tensor m = posenc_tensor_contiguous(mb, 0, POSENC_DTYPE_F32, T, T, 1, 1);
    posenc_tensor o = posenc_tensor_contiguous(ob, 0, POSENC_DTYPE_F32, D, 1, T, 1);
    posenc_tensor w = posenc_tensor_contiguous(wb, 0, POSENC_DTYPE_F32, T, T, 1, 1);
    struct posenc_attention_params p = {.mask = &m};
    posenc_status st = posenc_attention(th.dut, &x, &x, &x, &o, &w, &p);
    if (st != POSENC_OK)
        fail_msg("posenc_attention: %s", posenc_context_last_error(th.dut));
    float *oh = th_download(ob), *wh = th_download(wb);
    for (int q = 0; q < T; q++) {
        for (int k = 0; k < T; k++) {
            float want = (q == 2 && k == 1) ? 1.0f : 0.0f;
            if (wh[k + T * q] != want)
                fail_msg("weight (k %d, q %d) = %g, want %g", k, q, (double)wh[k + T * q],
                         (double)want);
        }
        for (int i = 0; i < D; i++) {
            float want = q == 2 ? qkv[i + D * 1] : 0.0f;
            if (oh[i + D * q] != want)
                fail_msg("output (%d, q %d) = %g, want %g (all-masked rows are zeros)", i, q,
                         (double)oh[i + D * q], (double)want);
        }
    }
    free(oh);
    free(wh);
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&mb);
    posenc_buffer_destroy(&ob);
    posenc_buffer_destroy(&wb);
    th_check_warnings();
}

/* ---- the one-pass path: softcap, mask_slopes, sinks; fused against UNFUSED ------------ */

/*
 * q [D, Hq, Tq, B] f32, k [D, Hk, Tk, B] f16, v [D, Hk, Tk, B] f32 (so both K/V dtypes are
 * read), a mask [Tk, Tq, 1, B] f16 broadcast over heads, a decoding chunk (Tq queries at
 * the end of Tk keys, causal), GQA 4:2, several key tiles. Every input is a multiple of
 * 1/64 in [-2, 2] (exact in f16), a tenth of the mask is -inf, and query 1 of batch 1 sees
 * no key at all (its mask row is all -inf).
 */

enum { XD = 20, XHQ = 4, XHK = 2, XTQ = 5, XTK = 70, XB = 2 };
static const float x_mask_slopes[XHQ] = {0.5f, 0.25f, 0.125f, 2.0f};
static const float x_sinks[XHQ] = {0.3f, -1.0f, 2.0f, -INFINITY};
static const float x_alibi[XHQ] = {0.25f, 0.0625f, 0.5f, 0.01f};

struct x_inputs {
    float q[XD * XHQ * XTQ * XB], v[XD * XHK * XTK * XB];
    uint16_t k[XD * XHK * XTK * XB], mask[XTK * XTQ * XB];
    double kd[XD * XHK * XTK * XB], maskd[XTK * XTQ * XB];
};

static double x_grid(uint64_t *rng)
{
    return (double)((int)(pc_rand_uniform(rng) * 257.0) - 128) / 64.0;
}

static void x_make(struct x_inputs *in)
{
    uint64_t rng = 4242;
    for (int i = 0; i < XD * XHQ * XTQ * XB; i++)
        in->q[i] = (float)x_grid(&rng);
    for (int i = 0; i < XD * XHK * XTK * XB; i++) {
        in->kd[i] = x_grid(&rng);
        in->k[i] = posenc_f32_to_f16((float)in->kd[i]);
        in->v[i] = (float)x_grid(&rng);
    }
    for (int b = 0; b < XB; b++)
        for (int q = 0; q < XTQ; q++)
            for (int k = 0; k < XTK; k++) {
                const int at = k + XTK * (q + XTQ * b);
                double m = pc_rand_uniform(&rng) < 0.1 ? -INFINITY : x_grid(&rng) / 2.0;
                if (b == 1 && q == 1)
                    m = -INFINITY;
                in->maskd[at] = m;
                in->mask[at] = posenc_f32_to_f16((float)m);
            }
}

/* What to run: the extras (softcap, mask_slopes, sinks) or ALiBi with the user slopes
 * above; flags: POSENC_ATTENTION_UNFUSED or 0. */
struct x_setup {
    float softcap;
    int mask_slopes, sinks, alibi;
    uint32_t flags;
};

/* posenc_attention on the device: returns its status, the output in o (its message in
 * x_msg when it fails). */
static char x_msg[512];
static posenc_context *x_ctx; /* th.dut, or th.ref for the reference's double loops */

static posenc_status x_run(const struct x_inputs *in, const struct x_setup *xs, float *o)
{
    posenc_buffer *qb = th_upload(x_ctx, in->q, sizeof(in->q));
    posenc_buffer *kb = th_upload(x_ctx, in->k, sizeof(in->k));
    posenc_buffer *vb = th_upload(x_ctx, in->v, sizeof(in->v));
    posenc_buffer *mb = th_upload(x_ctx, in->mask, sizeof(in->mask));
    posenc_buffer *sb = th_upload(x_ctx, x_sinks, sizeof(x_sinks));
    unsigned char poison[4 * XD * XHQ * XTQ * XB];
    memset(poison, 0xA5, sizeof(poison));
    posenc_buffer *ob = th_upload(x_ctx, poison, sizeof(poison));
    posenc_tensor q = posenc_tensor_contiguous(qb, 0, POSENC_DTYPE_F32, XD, XHQ, XTQ, XB);
    posenc_tensor k = posenc_tensor_contiguous(kb, 0, POSENC_DTYPE_F16, XD, XHK, XTK, XB);
    posenc_tensor v = posenc_tensor_contiguous(vb, 0, POSENC_DTYPE_F32, XD, XHK, XTK, XB);
    posenc_tensor m = posenc_tensor_contiguous(mb, 0, POSENC_DTYPE_F16, XTK, XTQ, 1, XB);
    posenc_tensor sk = posenc_tensor_contiguous(sb, 0, POSENC_DTYPE_F32, XHQ, 1, 1, 1);
    posenc_tensor d = posenc_tensor_contiguous(ob, 0, POSENC_DTYPE_F32, XD, XHQ, XTQ, XB);
    struct posenc_attention_params p;
    memset(&p, 0, sizeof(p));
    p.causal = 1;
    p.q_offset = XTK - XTQ;
    p.mask = &m;
    p.flags = xs->flags;
    p.softcap = xs->softcap;
    if (xs->mask_slopes)
        p.mask_slopes = x_mask_slopes;
    if (xs->sinks)
        p.sinks = &sk;
    if (xs->alibi) {
        p.encoding = POSENC_ATTENTION_ALIBI;
        p.alibi.slopes = x_alibi;
    }
    posenc_status st = posenc_attention(x_ctx, &q, &k, &v, &d, NULL, &p);
    if (st == POSENC_OK) {
        float *oh = th_download(ob);
        memcpy(o, oh, sizeof(poison));
        free(oh);
    } else {
        snprintf(x_msg, sizeof(x_msg), "%s", posenc_context_last_error(x_ctx));
        th_expect_untouched(ob, 0xA5, "one pass");
    }
    posenc_buffer_destroy(&qb);
    posenc_buffer_destroy(&kb);
    posenc_buffer_destroy(&vb);
    posenc_buffer_destroy(&mb);
    posenc_buffer_destroy(&sb);
    posenc_buffer_destroy(&ob);
    return st;
}

/*
 * pe_attn_fused_op's formula in double (o) and a bound on |f32 one pass - o| (ob), per
 * output element. With S_k = sum_i |q_i k_i|, c the scale, x_k the logit:
 *   eps_k = |c| (D + 2) 1.01 u S_k   (the f32 dot product and scale, as check_attention.c 2)
 *         + 16 u softcap             (softcap: the division and product round (2u |x|), an
 *                                     f32 tanh within a few ulp of 1 (OpenCL 5 ulp; a
 *                                     GLSL tanh from exp is absolute, near 0): <= 16 u c;
 *                                     the cap's slope is <= 1, so errors in s do not grow)
 *         + 4 u (|x_k| + |slope mask_k| + |bias_k|)   (bias, mask product and two adds)
 * and the softmax (check_attention.c 3 and 5, with every key counted as passed by the
 * running max, n_k <= Tk, and the sink as one more rescale):
 *   R_k = expm1(eps_k + eps_max) + (6 (|ln p_k| + ln(Tk + 1)) + Tk + 16 + 14.2 (Tk + 1)) u
 *   |o' - o| <= sum_k p_k |v_k| (R_k + u) + (Tk + 3) 1.01 u sum_k p_k |v_k|.
 */
static void x_exact(const struct x_inputs *in, const struct x_setup *xs, double *o, double *ob)
{
    const double u = U32, c = 1.0 / sqrt((double)XD);
    double x[XTK], eps[XTK], pk[XTK];
    for (int b = 0; b < XB; b++)
        for (int q = 0; q < XTQ; q++)
            for (int h = 0; h < XHQ; h++) {
                const int kvh = h / (XHQ / XHK), qp = q + XTK - XTQ;
                double m = xs->sinks ? (double)x_sinks[h] : -INFINITY, eps_max = 0.0;
                for (int k = 0; k < XTK; k++) {
                    double dot = 0.0, S = 0.0;
                    for (int i = 0; i < XD; i++) {
                        const double a = (double)in->q[i + XD * (h + XHQ * (q + XTQ * b))];
                        const double kk = in->kd[i + XD * (kvh + XHK * (k + XTK * b))];
                        dot += a * kk;
                        S += fabs(a * kk);
                    }
                    double s = c * dot, bias = 0.0;
                    if (xs->softcap > 0.0f)
                        s = xs->softcap * tanh(s / xs->softcap);
                    if (xs->alibi)
                        bias = -(double)x_alibi[h] * (double)(qp - k);
                    const double mk = (xs->mask_slopes ? (double)x_mask_slopes[h] : 1.0) *
                                      in->maskd[k + XTK * (q + XTQ * b)];
                    x[k] = k > qp ? -INFINITY : s + bias + mk;
                    eps[k] = -1.0;
                    if (x[k] == -INFINITY)
                        continue;
                    eps[k] = c * (XD + 2) * 1.01 * u * S + 16.0 * u * xs->softcap +
                             4.0 * u * (fabs(s) + fabs(bias) + fabs(mk));
                    eps_max = eps[k] > eps_max ? eps[k] : eps_max;
                    m = x[k] > m ? x[k] : m;
                }
                double z = 0.0;
                if (m != -INFINITY) {
                    z = xs->sinks ? exp((double)x_sinks[h] - m) : 0.0;
                    for (int k = 0; k < XTK; k++)
                        z += exp(x[k] - m);
                }
                for (int k = 0; k < XTK; k++)
                    pk[k] = m == -INFINITY ? 0.0 : exp(x[k] - m) / z;
                for (int i = 0; i < XD; i++) {
                    double acc = 0.0, A = 0.0, E = 0.0;
                    for (int k = 0; k < XTK; k++) {
                        const double vv = (double)in->v[i + XD * (kvh + XHK * (k + XTK * b))];
                        acc += pk[k] * vv;
                        if (eps[k] < 0.0)
                            continue;
                        const double lnp = pk[k] > 0.0 ? fabs(log(pk[k])) : 0.0;
                        const double R = expm1(eps[k] + eps_max) +
                                         (6.0 * (lnp + log(XTK + 1.0)) + XTK + 16.0 +
                                          14.2 * (XTK + 1.0)) * u;
                        A += pk[k] * fabs(vv);
                        E += pk[k] * fabs(vv) * (R + u);
                    }
                    const int at = i + XD * (h + XHQ * (q + XTQ * b));
                    o[at] = acc;
                    ob[at] = E + (XTK + 3.0) * 1.01 * u * A + 0x1p-125;
                }
            }
}

static double x_compare(const char *what, const float *got, const double *o, const double *ob)
{
    double worst = 0.0;
    for (int i = 0; i < XD * XHQ * XTQ * XB; i++) {
        const double err = fabs((double)got[i] - o[i]);
        if (!(err <= ob[i]))
            fail_msg("%s: output %d = %.9g, double %.9g, |err| %.3g > bound %.3g", what, i,
                     (double)got[i], o[i], err, ob[i]);
        if (ob[i] > 0.0 && err / ob[i] > worst)
            worst = err / ob[i];
    }
    return worst;
}

/* softcap, mask_slopes and sinks (one pass only: no multi-pass reference to compare with)
 * against x_exact, alone and together. A backend without a one-pass kernel refuses them
 * with POSENC_ERR_UNSUPPORTED and a message naming them, its output untouched. */
static void test_one_pass_extras(void **state)
{
    (void)state;
    static struct x_inputs in;
    x_make(&in);
    x_ctx = th.dut;
    const struct x_setup setups[] = {
        {2.5f, 0, 0, 0, 0}, {0, 1, 0, 0, 0}, {0, 0, 1, 0, 0}, {1.5f, 1, 1, 1, 0},
    };
    static float o[XD * XHQ * XTQ * XB];
    static double want[XD * XHQ * XTQ * XB], bound[XD * XHQ * XTQ * XB];
    for (size_t i = 0; i < sizeof(setups) / sizeof(setups[0]); i++) {
        posenc_status st = x_run(&in, &setups[i], o);
        th_check_warnings();
        if (st == POSENC_ERR_UNSUPPORTED && strstr(x_msg, "no one-pass attention")) {
            print_message("%s: no one-pass kernel; refused: %s\n", posenc_backend_name(th.kind),
                          x_msg);
            continue;
        }
        if (st != POSENC_OK)
            fail_msg("setup %zu: %s: %s", i, posenc_status_string(st), x_msg);
        x_exact(&in, &setups[i], want, bound);
        char what[64];
        snprintf(what, sizeof(what), "softcap %g mask_slopes %d sinks %d alibi %d",
                 (double)setups[i].softcap, setups[i].mask_slopes, setups[i].sinks,
                 setups[i].alibi);
        print_message("%s: worst |err| / bound = %.3g\n", what, x_compare(what, o, want, bound));
    }
    /* the CPU reference context computes them too (in double, backend_cpu.c) */
    x_ctx = th.ref;
    for (size_t i = 0; i < sizeof(setups) / sizeof(setups[0]); i++) {
        x_make(&in);
        if (x_run(&in, &setups[i], o) != POSENC_OK)
            fail_msg("reference, setup %zu: %s", i, x_msg);
        x_exact(&in, &setups[i], want, bound);
        print_message("reference, setup %zu: worst |err| / bound = %.3g\n", i,
                      x_compare("reference", o, want, bound));
    }
    x_ctx = th.dut;
}

/* The same call (ALiBi, mask, causal, GQA, f16 K) one pass and with
 * POSENC_ATTENTION_UNFUSED on the same backend: each within x_exact's bound of the double
 * result (the multi-pass path's own bound is smaller), so within the sum of the two of
 * each other, which is checked as well. */
static void test_fused_vs_unfused(void **state)
{
    (void)state;
    static struct x_inputs in;
    x_make(&in);
    x_ctx = th.dut;
    static float of[XD * XHQ * XTQ * XB], ou[XD * XHQ * XTQ * XB];
    static double want[XD * XHQ * XTQ * XB], bound[XD * XHQ * XTQ * XB];
    const struct x_setup fused = {0, 0, 0, 1, 0}, unfused = {0, 0, 0, 1, POSENC_ATTENTION_UNFUSED};
    posenc_status st = x_run(&in, &fused, of);
    th_check_warnings();
    if (st != POSENC_OK)
        fail_msg("fused: %s", x_msg);
    st = x_run(&in, &unfused, ou);
    th_check_warnings();
    if (st != POSENC_OK)
        fail_msg("unfused: %s", x_msg);
    x_exact(&in, &fused, want, bound);
    const double wf = x_compare("one pass", of, want, bound);
    const double wu = x_compare("UNFUSED", ou, want, bound);
    double diff = 0.0;
    for (int i = 0; i < XD * XHQ * XTQ * XB; i++) {
        const double d = fabs((double)of[i] - (double)ou[i]);
        if (!(d <= 2.0 * bound[i]))
            fail_msg("output %d: one pass %.9g, UNFUSED %.9g differ by %.3g > %.3g", i,
                     (double)of[i], (double)ou[i], d, 2.0 * bound[i]);
        diff = d > diff ? d : diff;
    }
    print_message("worst |err| / bound: one pass %.3g, UNFUSED %.3g; max |one pass - UNFUSED| "
                  "%.3g\n", wf, wu, diff);
}

/* ---- bad input --------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    enum { D = 8, H = 2, T = 5 };
    const posenc_status INV = POSENC_ERR_INVALID_ARGUMENT;
    float in[3 * D * H * T + 64];
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
        in[i] = (float)(i % 11) * 0.25f - 1.0f;
    unsigned char poison[4 * D * H * T];
    memset(poison, 0xA5, sizeof(poison));
    posenc_buffer *ib = th_upload(th.dut, in, sizeof(in));
    posenc_buffer *ob = th_upload(th.dut, poison, sizeof(poison));
    posenc_buffer *wb = th_upload(th.dut, poison, 4 * T * T * H);
    const size_t kv = 4 * D * H * T;
    posenc_tensor q = posenc_tensor_contiguous(ib, 0, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor k = posenc_tensor_contiguous(ib, kv, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor v = posenc_tensor_contiguous(ib, 2 * kv, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor o = posenc_tensor_contiguous(ob, 0, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor t;
    struct posenc_attention_params p, p0;
    memset(&p0, 0, sizeof(p0));

    assert_int_equal(posenc_attention(NULL, &q, &k, &v, &o, NULL, NULL), INV);
    th_expect(posenc_attention(th.dut, NULL, &k, &v, &o, NULL, NULL), INV, "q is NULL", "q NULL");
    th_expect(posenc_attention(th.dut, &q, &k, &v, NULL, NULL, NULL), INV, "dst is NULL",
              "dst NULL");
    t = q;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_attention(th.dut, &t, &k, &v, &o, NULL, NULL), INV, "q->dtype", "q i32");
    t = posenc_tensor_contiguous(ib, kv, POSENC_DTYPE_F32, D - 2, H, T, 1);
    th_expect(posenc_attention(th.dut, &q, &t, &v, &o, NULL, NULL), INV, "k->ne", "k head dim");
    t = posenc_tensor_contiguous(ib, kv, POSENC_DTYPE_F32, D, 3, 2, 1);
    th_expect(posenc_attention(th.dut, &q, &t, &v, &o, NULL, NULL), INV, "not a multiple",
              "GQA heads");
    t = posenc_tensor_contiguous(ib, 2 * kv, POSENC_DTYPE_F32, D, H, T - 1, 1);
    th_expect(posenc_attention(th.dut, &q, &k, &t, &o, NULL, NULL), INV, "v->ne", "v keys");
    t = posenc_tensor_contiguous(ob, 0, POSENC_DTYPE_F32, D, H, T - 1, 1);
    th_expect(posenc_attention(th.dut, &q, &k, &v, &t, NULL, NULL), INV, "dst->ne", "dst shape");
    t = posenc_tensor_contiguous(wb, 0, POSENC_DTYPE_F32, T, T, 1, 1);
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, &t, NULL), INV, "weights->ne", "w shape");
    t = posenc_tensor_contiguous(ib, 0, POSENC_DTYPE_F32, D, H, T, 1);
    th_expect(posenc_attention(th.dut, &q, &k, &v, &t, NULL, NULL), INV, "q overlaps dst",
              "dst is q");
    t = posenc_tensor_contiguous(ob, 0, POSENC_DTYPE_F32, T, T, H, 1);
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, &t, NULL), INV, "overlaps", "w in dst");

    p = p0;
    p.encoding = (posenc_attention_encoding)9;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->encoding", "enc");
    p = p0;
    p.scale = NAN;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->scale", "scale");
    p = p0;
    p.causal = 2;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->causal", "causal");
    p = p0;
    p.q_offset = -1;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->q_offset", "q_off");
    p = p0;
    p.reserved[3] = 1;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->reserved[3]",
              "res");
    p = p0;
    p.flags = POSENC_ATTENTION_PE_ON_V;
    p.encoding = POSENC_ATTENTION_ROPE;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "PE_ON_V", "pe on v rope");
    p = p0;
    p.flags = 1u << 5;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->flags", "flags");
    p = p0;
    p.encoding = POSENC_ATTENTION_SINUSOIDAL;
    t = posenc_tensor_contiguous(ib, 0, POSENC_DTYPE_F32, D - 1, H, T, 1);
    posenc_tensor t2 = posenc_tensor_contiguous(ib, kv, POSENC_DTYPE_F32, D - 1, H, T, 1);
    th_expect(posenc_attention(th.dut, &t, &t2, &v, &o, NULL, &p), INV, "even head_dim", "odd D");
    p.sinusoidal.base = -1.0f;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->sinusoidal",
              "sin base");
    p = p0;
    p.encoding = POSENC_ATTENTION_ALIBI;
    p.alibi.causal = 1;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->alibi.causal",
              "alibi causal");
    p.alibi.causal = 0;
    p.alibi.max_bias = -2.0f;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "max_bias", "alibi bias");
    p = p0;
    p.encoding = POSENC_ATTENTION_RELBIAS;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->relbias_table",
              "no table");
    p.relbias_table = &q;
    p.relbias.q_offset = 3;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->relbias.q_offset",
              "relbias offset");
    p.relbias.q_offset = 0;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "table->ne[0]",
              "relbias table shape");
    p = p0;
    p.encoding = POSENC_ATTENTION_LEARNED;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->learned_table",
              "no learned table");
    posenc_tensor lt = posenc_tensor_contiguous(ib, 0, POSENC_DTYPE_F32, D, 7, 1, 1);
    p.learned_table = &lt;
    p.k_offset = 3; /* keys at 3..7, the table has 7 rows */
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), POSENC_ERR_OUT_OF_RANGE,
              "reach past the 7 rows", "learned rows");
    p.k_offset = 0;
    int32_t pos[T] = {0, 1, 2, 9, 4};
    posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    p.q_pos = &pt;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), POSENC_ERR_OUT_OF_RANGE, "9",
              "learned explicit position");
    posenc_tensor pt2 = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T - 1, 1, 1, 1);
    p.q_pos = &pt2;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->q_pos->ne",
              "pos shape");
    p = p0;
    p.encoding = POSENC_ATTENTION_ROPE;
    p.rope.n_dims = 3;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->rope",
              "rope n_dims");
    p = p0;
    t = posenc_tensor_contiguous(ib, 0, POSENC_DTYPE_F32, T, T - 1, 1, 1);
    p.mask = &t;
    th_expect(posenc_attention(th.dut, &q, &k, &v, &o, NULL, &p), INV, "params->mask->ne",
              "mask shape");
    /* nothing was written by any failing call */
    th_expect_untouched(ob, 0xA5, "attention dst");
    th_expect_untouched(wb, 0xA5, "attention weights");

    /* empty: a valid no-op */
    t = q;
    t.ne[2] = 0;
    posenc_tensor o0 = o;
    o0.ne[2] = 0;
    th_expect(posenc_attention(th.dut, &t, &k, &v, &o0, NULL, NULL), POSENC_OK, NULL, "empty");
    th_expect_untouched(ob, 0xA5, "attention dst (empty call)");

    /* the decay helper */
    double out[4];
    th_expect(posenc_attention_decay(th.dut, 0, 4, 2, 1, NULL, out), INV, "head_dim", "decay dim");
    th_expect(posenc_attention_decay(th.dut, 8, 0, 2, 1, NULL, out), INV, "n_keys", "decay keys");
    th_expect(posenc_attention_decay(th.dut, 8, 4, 2, 1, NULL, NULL), INV, "out_weight",
              "decay out");
    p = p0;
    p.q_pos = &pt;
    th_expect(posenc_attention_decay(th.dut, 8, 4, 2, 1, &p, out), INV, "q_pos", "decay pos");

    posenc_buffer_destroy(&ib);
    posenc_buffer_destroy(&ob);
    posenc_buffer_destroy(&wb);
    posenc_buffer_destroy(&pb);
    th_check_warnings();
}

/* Implicit against explicit positions: two contexts on the backend under test holding the
 * same q, K and V - ctx[0] the dut, for the calls with implicit positions, ctx[1] its own,
 * so that its temporaries leave ctx[0]'s kept buffers alone, for the explicit ones. */
struct pos_pair {
    posenc_context *ctx[2];
    posenc_buffer *bq[2], *bk[2], *bv[2], *bo[2];
    int64_t D, HQ, HK;
};

static void pos_pair_open(struct pos_pair *f, int64_t D, int64_t HQ, int64_t HK, const float *q,
                          size_t q_bytes, const float *k, const float *v, size_t kv_bytes)
{
    f->D = D;
    f->HQ = HQ;
    f->HK = HK;
    f->ctx[0] = th.dut;
    f->ctx[1] = NULL;
    struct posenc_context_params cp = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                       .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    char err[256];
    if (posenc_context_create(&cp, &f->ctx[1], err, sizeof err) != POSENC_OK)
        fail_msg("a second context: %s", err);
    for (int c = 0; c < 2; c++) {
        f->bq[c] = th_upload(f->ctx[c], q, q_bytes);
        f->bk[c] = th_upload(f->ctx[c], k, kv_bytes);
        f->bv[c] = th_upload(f->ctx[c], v, kv_bytes);
        assert_int_equal(posenc_buffer_create(f->ctx[c], q_bytes, &f->bo[c]), POSENC_OK);
    }
}

static void pos_pair_close(struct pos_pair *f)
{
    for (int c = 0; c < 2; c++) {
        posenc_buffer_destroy(&f->bq[c]);
        posenc_buffer_destroy(&f->bk[c]);
        posenc_buffer_destroy(&f->bv[c]);
        posenc_buffer_destroy(&f->bo[c]);
    }
    posenc_context_destroy(&f->ctx[1]);
}

/* p with tq queries and tk keys (the buffers' first ones) on ctx[0] as given, and on ctx[1]
 * with q_pos / k_pos set to qp / kp (tensors of ctx[1]): fails, naming `what`, unless both
 * calls succeed with the same bits. Returns ctx[0]'s output (malloc'd, D x HQ x tq). */
static float *pos_pair_run(struct pos_pair *f, int64_t tq, int64_t tk,
                           struct posenc_attention_params p, const posenc_tensor *qp,
                           const posenc_tensor *kp, const char *what)
{
    float *out[2];
    for (int c = 0; c < 2; c++) {
        const posenc_tensor q =
            posenc_tensor_contiguous(f->bq[c], 0, POSENC_DTYPE_F32, f->D, f->HQ, tq, 1);
        const posenc_tensor o =
            posenc_tensor_contiguous(f->bo[c], 0, POSENC_DTYPE_F32, f->D, f->HQ, tq, 1);
        const posenc_tensor k =
            posenc_tensor_contiguous(f->bk[c], 0, POSENC_DTYPE_F32, f->D, f->HK, tk, 1);
        const posenc_tensor v =
            posenc_tensor_contiguous(f->bv[c], 0, POSENC_DTYPE_F32, f->D, f->HK, tk, 1);
        if (c == 1) {
            p.q_pos = qp;
            p.k_pos = kp;
        }
        posenc_status st = posenc_attention(f->ctx[c], &q, &k, &v, &o, NULL, &p);
        if (st != POSENC_OK)
            fail_msg("%s, context %d: %s: %s", what, c, posenc_status_string(st),
                     posenc_context_last_error(f->ctx[c]));
        out[c] = th_download(f->bo[c]);
    }
    th_check_warnings();
    if (memcmp(out[0], out[1], (size_t)(f->D * f->HQ * tq) * sizeof(float)) != 0)
        fail_msg("%s: implicit positions give other bits than the same positions given "
                 "explicitly", what);
    free(out[1]);
    return out[0];
}

/*
 * RoPE decode with implicit key positions (k_pos NULL): the keys' rotation table is kept
 * by the context between calls and taken again when the params and k_offset match
 * (ops_attention.c, krot_table). Each call is compared with the same call given the same
 * positions explicitly (q_pos, k_pos: never kept), bit for bit -- a table row is what
 * posenc_rope computes for its position alone -- over a decode loop whose key count grows
 * past the kept rows (256 at a time), then after a change of freq_base, of the scaling, of
 * k_offset, and after a call whose temporaries may take the kept buffer. On backends
 * whose one pass does not rotate k (lavapipe) both calls take K' and agree the same way.
 */
static void test_rope_implicit_keys_kept(void **state)
{
    (void)state;
    enum { D = 32, HQ = 4, HK = 2, TMAX = 300, KOFF = 3 };
    static float q[D * HQ], kv[2][D * HK * TMAX];
    static int32_t pos[TMAX + 64];
    uint64_t rng = 0xa77e2026u;
    th_fill_unit(q, D * HQ, &rng);
    th_fill_unit(kv[0], D * HK * TMAX, &rng);
    th_fill_unit(kv[1], D * HK * TMAX, &rng);
    struct pos_pair f;
    pos_pair_open(&f, D, HQ, HK, q, sizeof q, kv[0], kv[1], sizeof kv[0]);
    posenc_buffer *bp = NULL;
    /* (keys, k_offset, freq_base, YaRN (1) or attn_factor 1.5 (2)): the loop, then what
     * must not find the kept table;
     * keys -1: a NoPE call on ctx[0] over every key (temporaries of other sizes) */
    static const struct { int tk, koff; float base; int yarn; } steps[] = {
        {250, KOFF, 0, 0},  {251, KOFF, 0, 0},  {256, KOFF, 0, 0}, {257, KOFF, 0, 0},
        {258, KOFF, 0, 0},  {300, KOFF, 0, 0},  {255, KOFF, 0, 0}, {258, KOFF, 0, 2},
        {258, KOFF, 0, 0},  {258, KOFF, 5e5f, 0}, {258, KOFF, 0, 1}, {258, KOFF + 7, 0, 0},
        {258, KOFF, 0, 0},  {-1, KOFF, 0, 0},   {259, KOFF, 0, 0},
    };
    float prev[D * HQ];
    memset(prev, 0, sizeof prev);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (steps[i].tk < 0) {
            const posenc_tensor tq =
                posenc_tensor_contiguous(f.bq[0], 0, POSENC_DTYPE_F32, D, HQ, 1, 1);
            const posenc_tensor to =
                posenc_tensor_contiguous(f.bo[0], 0, POSENC_DTYPE_F32, D, HQ, 1, 1);
            const posenc_tensor k =
                posenc_tensor_contiguous(f.bk[0], 0, POSENC_DTYPE_F32, D, HK, TMAX, 1);
            const posenc_tensor v =
                posenc_tensor_contiguous(f.bv[0], 0, POSENC_DTYPE_F32, D, HK, TMAX, 1);
            assert_int_equal(posenc_attention(f.ctx[0], &tq, &k, &v, &to, NULL, NULL),
                             POSENC_OK);
            continue;
        }
        const int tk = steps[i].tk, koff = steps[i].koff;
        for (int t = 0; t < tk; t++)
            pos[t] = koff + t;
        posenc_buffer_destroy(&bp);
        bp = th_upload(f.ctx[1], pos, sizeof pos);
        const posenc_tensor kp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, tk, 1, 1, 1);
        const posenc_tensor qp =
            posenc_tensor_contiguous(bp, (size_t)(tk - 1) * 4, POSENC_DTYPE_I32, 1, 1, 1, 1);
        struct posenc_attention_params p = {.encoding = POSENC_ATTENTION_ROPE, .causal = 1,
                                            .q_offset = koff + tk - 1, .k_offset = koff};
        p.rope.mode = POSENC_ROPE_NEOX;
        p.rope.freq_base = steps[i].base;
        if (steps[i].yarn == 1)
            p.rope.scaling = (struct posenc_rope_scaling){.kind = POSENC_ROPE_SCALING_YARN,
                                                          .factor = 4.0f, .original_ctx = 64};
        if (steps[i].yarn == 2)
            p.rope.attn_factor = 1.5f; /* the magnitude alone */
        char what[128];
        snprintf(what, sizeof what, "step %zu (%d keys from %d, base %g, YaRN %d)", i, tk, koff,
                 (double)steps[i].base, steps[i].yarn);
        float *out = pos_pair_run(&f, 1, tk, p, &qp, &kp, what);
        if (memcmp(out, prev, sizeof q) == 0) /* every step asks something else */
            fail_msg("step %zu: the output did not change from the step before", i);
        memcpy(prev, out, sizeof q);
        free(out);
    }
    posenc_buffer_destroy(&bp);
    pos_pair_close(&f);
}

/* Implicit positions (q_pos / k_pos NULL) come from an iota kept in the context's scratch,
 * a window of it per call, made again longer every 1024 positions, up to 2^20 rows
 * (ops_attention.c, implicit_pos); later offsets take a fill per call instead. A sequence
 * of RoPE (NeoX), SINUSOIDAL and M-RoPE (every stream reads the iota's row) calls on the
 * dut with implicit positions - decode steps across 1024 and 2048, prefill blocks, offsets
 * past 2^20 and near INT32_MAX (the fill, not a 2^31-row iota: the first version made one,
 * 8 GiB, and ThreadSanitizer's run of this suite ran out of memory) - against the same
 * calls with the positions given explicitly on a second context: the same bits. */
static void test_implicit_positions_iota(void **state)
{
    (void)state;
    enum { D = 32, HQ = 4, HK = 2, TQ = 5, TK = 40 };
    static float q[D * HQ * TQ], kv[2][D * HK * TK];
    uint64_t rng = 0x107a2026u;
    th_fill_unit(q, D * HQ * TQ, &rng);
    th_fill_unit(kv[0], D * HK * TK, &rng);
    th_fill_unit(kv[1], D * HK * TK, &rng);
    struct pos_pair f;
    pos_pair_open(&f, D, HQ, HK, q, sizeof q, kv[0], kv[1], sizeof kv[0]);
    /* (queries, keys, q_offset, k_offset, causal) */
    static const struct { int tq, tk; int32_t qo, ko; int causal; } steps[] = {
        {1, TK, 1020, 981, 1},  {1, TK, 1023, 984, 1},  {1, TK, 1024, 985, 1},
        {1, TK, 1025, 986, 1},  {1, 30, 1030, 1001, 1}, {TQ, 9, 2000, 1996, 1},
        {1, TK, 2047, 2008, 1}, {1, TK, 2048, 2009, 1}, {3, 12, 5, 1, 0},
        {1, TK, 0, 0, 0},       {2, 7, INT32_MAX - 20, INT32_MAX - 30, 1},
        {1, TK, (1 << 20) + 5, (1 << 20) - 34, 1}, {1, TK, 1026, 987, 1},
    };
    int32_t qpos[4 * TQ], kpos[4 * TK]; /* 4 streams (M-RoPE), stream s at s * T */
    for (int e = 0; e < 3; e++) /* RoPE (NeoX), SINUSOIDAL, M-RoPE (every stream t) */
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
            const int tq = steps[i].tq, tk = steps[i].tk;
            for (int st = 0; st < 4; st++) {
                for (int t = 0; t < tq; t++)
                    qpos[st * tq + t] = (int32_t)((int64_t)steps[i].qo + t);
                for (int t = 0; t < tk; t++)
                    kpos[st * tk + t] = (int32_t)((int64_t)steps[i].ko + t);
            }
            const int ns = e == 2 ? 4 : 1;
            posenc_buffer *bqp = th_upload(f.ctx[1], qpos, sizeof qpos);
            posenc_buffer *bkp = th_upload(f.ctx[1], kpos, sizeof kpos);
            const posenc_tensor tqp =
                posenc_tensor_contiguous(bqp, 0, POSENC_DTYPE_I32, tq, ns, 1, 1);
            const posenc_tensor tkp =
                posenc_tensor_contiguous(bkp, 0, POSENC_DTYPE_I32, tk, ns, 1, 1);
            struct posenc_attention_params p = {
                .encoding = e == 1 ? POSENC_ATTENTION_SINUSOIDAL : POSENC_ATTENTION_ROPE,
                .causal = steps[i].causal, .q_offset = steps[i].qo, .k_offset = steps[i].ko};
            p.rope.mode = e == 2 ? POSENC_ROPE_MROPE : POSENC_ROPE_NEOX;
            if (e == 2) { /* 16 pairs: sections of 8, 4 and 4 */
                p.rope.sections[0] = 8;
                p.rope.sections[1] = 4;
                p.rope.sections[2] = 4;
            }
            char what[128];
            snprintf(what, sizeof what, "%s step %zu (%d queries from %d, %d keys from %d)",
                     e == 1 ? "sinusoidal" : e ? "mrope" : "rope", i, tq, (int)steps[i].qo,
                     tk, (int)steps[i].ko);
            free(pos_pair_run(&f, tq, tk, p, &tqp, &tkp, what));
            posenc_buffer_destroy(&bqp);
            posenc_buffer_destroy(&bkp);
        }
    pos_pair_close(&f);
}

/* RoPE where the one pass declines (dst past POSENC_MAX_BINDING = 4096 bytes, so the
 * multi-pass path cuts the queries into blocks and takes K' after all): with implicit
 * key positions, which the call then writes only for K', the same bits as with the same
 * positions given explicitly. */
static void test_rope_one_pass_declined(void **state)
{
    (void)state;
    enum { D = 8, HQ = 4, HK = 2, TQ = 64, TK = 64 };
    static float q[D * HQ * TQ], kv[2][D * HK * TK];
    static int32_t pos[TK];
    uint64_t rng = 0xdec11e5u;
    th_fill_unit(q, D * HQ * TQ, &rng);
    th_fill_unit(kv[0], D * HK * TK, &rng);
    th_fill_unit(kv[1], D * HK * TK, &rng);
    for (int i = 0; i < TK; i++)
        pos[i] = i;
    struct posenc_context_params cp = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                       .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    char err[256];
    setenv("POSENC_MAX_BINDING", "4096", 1);
    posenc_status st = posenc_context_create(&cp, &ctx, err, sizeof err);
    unsetenv("POSENC_MAX_BINDING");
    if (st != POSENC_OK)
        fail_msg("a context with POSENC_MAX_BINDING=4096: %s", err);
    posenc_buffer *bq = th_upload(ctx, q, sizeof q), *bk = th_upload(ctx, kv[0], sizeof kv[0]);
    posenc_buffer *bv = th_upload(ctx, kv[1], sizeof kv[1]), *bp = th_upload(ctx, pos, sizeof pos);
    posenc_buffer *bo[2];
    const posenc_tensor tq = posenc_tensor_contiguous(bq, 0, POSENC_DTYPE_F32, D, HQ, TQ, 1);
    const posenc_tensor tk = posenc_tensor_contiguous(bk, 0, POSENC_DTYPE_F32, D, HK, TK, 1);
    const posenc_tensor tv = posenc_tensor_contiguous(bv, 0, POSENC_DTYPE_F32, D, HK, TK, 1);
    const posenc_tensor tp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, TK, 1, 1, 1);
    float *out[2];
    for (int c = 0; c < 2; c++) {
        assert_int_equal(posenc_buffer_create(ctx, sizeof q, &bo[c]), POSENC_OK);
        const posenc_tensor to = posenc_tensor_contiguous(bo[c], 0, POSENC_DTYPE_F32, D, HQ, TQ, 1);
        struct posenc_attention_params p = {.encoding = POSENC_ATTENTION_ROPE, .causal = 1};
        if (c == 1) {
            p.q_pos = &tp;
            p.k_pos = &tp;
        }
        st = posenc_attention(ctx, &tq, &tk, &tv, &to, NULL, &p);
        if (st != POSENC_OK)
            fail_msg("%s positions: %s: %s", c ? "explicit" : "implicit",
                     posenc_status_string(st), posenc_context_last_error(ctx));
        out[c] = th_download(bo[c]);
    }
    th_check_warnings();
    assert_memory_equal(out[0], out[1], sizeof q);
    free(out[0]);
    free(out[1]);
    posenc_buffer_destroy(&bq);
    posenc_buffer_destroy(&bk);
    posenc_buffer_destroy(&bv);
    posenc_buffer_destroy(&bp);
    posenc_buffer_destroy(&bo[0]);
    posenc_buffer_destroy(&bo[1]);
    posenc_context_destroy(&ctx);
}

/* RoPE's DYNAMIC_NTK and LONGROPE with seq_len = 0 take the length from the call: the
 * largest explicit position + 1 over q_pos and k_pos (read back), else the larger of
 * q_offset + Tq and k_offset + Tk. The shared cases cannot see that resolution (their
 * reference runs through the same front end), so here: the same call with the length
 * the test works out itself passed as seq_len gives the same bits, and with one less it
 * does not (DYNAMIC_NTK's base moves with every length past original_ctx; LONGROPE's
 * length is original_ctx + 1, where one less takes the short factors). */
static void test_rope_seq_len_resolved(void **state)
{
    (void)state;
    enum { D = 32, HQ = 4, HK = 2, TQ = 3, TK = 20 };
    static float q[D * HQ * TQ], kv[2][D * HK * TK];
    static const float lr_short[D / 2] = {1.0f, 1.1f, 1.2f, 1.3f, 1.4f, 1.5f, 1.6f, 1.7f,
                                          1.8f, 1.9f, 2.0f, 2.1f, 2.2f, 2.3f, 2.4f, 2.5f};
    static const float lr_long[D / 2] = {1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 8.0f,
                                         10.0f, 12.0f, 14.0f, 16.0f, 18.0f, 20.0f, 24.0f, 28.0f};
    uint64_t rng = 0x5e01e2u;
    th_fill_unit(q, D * HQ * TQ, &rng);
    th_fill_unit(kv[0], D * HK * TK, &rng);
    th_fill_unit(kv[1], D * HK * TK, &rng);
    /* explicit positions, the largest (32) neither last nor in q: length 33 */
    int32_t qpos[TQ] = {21, 5, 17}, kpos[TK];
    for (int t = 0; t < TK; t++)
        kpos[t] = t;
    kpos[7] = 32;
    struct posenc_context_params cp = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                       .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    char err[256];
    if (posenc_context_create(&cp, &ctx, err, sizeof err) != POSENC_OK)
        fail_msg("context: %s", err);
    posenc_buffer *bq = th_upload(ctx, q, sizeof q), *bk = th_upload(ctx, kv[0], sizeof kv[0]);
    posenc_buffer *bv = th_upload(ctx, kv[1], sizeof kv[1]);
    posenc_buffer *bqp = th_upload(ctx, qpos, sizeof qpos);
    posenc_buffer *bkp = th_upload(ctx, kpos, sizeof kpos);
    posenc_buffer *bo = NULL;
    assert_int_equal(posenc_buffer_create(ctx, sizeof q, &bo), POSENC_OK);
    const posenc_tensor tq = posenc_tensor_contiguous(bq, 0, POSENC_DTYPE_F32, D, HQ, TQ, 1);
    const posenc_tensor tk = posenc_tensor_contiguous(bk, 0, POSENC_DTYPE_F32, D, HK, TK, 1);
    const posenc_tensor tv = posenc_tensor_contiguous(bv, 0, POSENC_DTYPE_F32, D, HK, TK, 1);
    const posenc_tensor tqp = posenc_tensor_contiguous(bqp, 0, POSENC_DTYPE_I32, TQ, 1, 1, 1);
    const posenc_tensor tkp = posenc_tensor_contiguous(bkp, 0, POSENC_DTYPE_I32, TK, 1, 1, 1);
    const posenc_tensor to = posenc_tensor_contiguous(bo, 0, POSENC_DTYPE_F32, D, HQ, TQ, 1);
    for (int kind = 0; kind < 2; kind++) /* DYNAMIC_NTK, LONGROPE */
        for (int explicit_pos = 0; explicit_pos < 2; explicit_pos++) {
            struct posenc_attention_params p = {.encoding = POSENC_ATTENTION_ROPE};
            p.rope.mode = POSENC_ROPE_NEOX;
            if (kind == 0) {
                p.rope.scaling.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK;
                p.rope.scaling.factor = 2.0f;
                p.rope.scaling.original_ctx = 16;
            } else {
                p.rope.scaling.kind = POSENC_ROPE_SCALING_LONGROPE;
                p.rope.scaling.factor = 4.0f;
                p.rope.scaling.original_ctx = 32;
                p.rope.scaling.short_factor = lr_short;
                p.rope.scaling.long_factor = lr_long;
            }
            int32_t len = 33; /* explicit: 32 + 1 */
            if (explicit_pos) {
                p.q_pos = &tqp;
                p.k_pos = &tkp;
            } else { /* q_offset + Tq = 33 against k_offset + Tk = 24 */
                p.q_offset = 30;
                p.k_offset = 4;
            }
            const char *kn = kind ? "LONGROPE" : "DYNAMIC_NTK";
            const char *pn = explicit_pos ? "explicit" : "implicit";
            float *out[3];
            const int32_t seq[3] = {0, len, len - 1};
            for (int r = 0; r < 3; r++) {
                p.rope.scaling.seq_len = seq[r];
                const posenc_status st = posenc_attention(ctx, &tq, &tk, &tv, &to, NULL, &p);
                if (st != POSENC_OK)
                    fail_msg("%s, %s positions, seq_len %d: %s: %s", kn, pn, (int)seq[r],
                             posenc_status_string(st), posenc_context_last_error(ctx));
                out[r] = th_download(bo);
            }
            if (memcmp(out[0], out[1], sizeof q) != 0)
                fail_msg("%s, %s positions: seq_len 0 differs from seq_len %d", kn, pn,
                         (int)len);
            if (memcmp(out[0], out[2], sizeof q) == 0)
                fail_msg("%s, %s positions: seq_len %d gives the bits of %d (the test cannot "
                         "tell the lengths apart)",
                         kn, pn, (int)len - 1, (int)len);
            for (int r = 0; r < 3; r++)
                free(out[r]);
        }
    th_check_warnings();
    posenc_buffer_destroy(&bq);
    posenc_buffer_destroy(&bk);
    posenc_buffer_destroy(&bv);
    posenc_buffer_destroy(&bqp);
    posenc_buffer_destroy(&bkp);
    posenc_buffer_destroy(&bo);
    posenc_context_destroy(&ctx);
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "attention");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_exact_none),     cmocka_unit_test(test_exact_sinusoidal),
        cmocka_unit_test(test_exact_learned),  cmocka_unit_test(test_exact_rope),
        cmocka_unit_test(test_exact_alibi),    cmocka_unit_test(test_exact_relbias),
        cmocka_unit_test(test_permutation),    cmocka_unit_test(test_shift),
        cmocka_unit_test(test_decay),          cmocka_unit_test(test_all_masked),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_one_pass_extras), cmocka_unit_test(test_fused_vs_unfused),
        cmocka_unit_test(test_rope_implicit_keys_kept),
        cmocka_unit_test(test_implicit_positions_iota),
        cmocka_unit_test(test_rope_one_pass_declined),
        cmocka_unit_test(test_rope_seq_len_resolved),
    };
    static const enum pc_op ops[] = {PC_OP_ATTENTION};
    rc = th_run_with_cases("attention", fixed, sizeof(fixed) / sizeof(fixed[0]), ops,
                           sizeof(ops) / sizeof(ops[0]));
    th_fini();
    return rc;
}
