/*
 * test_attention_fused.c - posenc_attention's one-pass path (no weights) on one backend
 * (--backend NAME), over seeded random inputs and shapes chosen to reach its corners:
 * decode rows of 1 .. 5000 keys (off the kernels' tile sizes), one row of 32768 keys,
 * causal prefill, GQA 32/8 and 4/1, head dims 40, 64, 128, 256 (and Dv != D), f16 / f32
 * per tensor, permuted, padded and misaligned views, ALiBi (and its symmetric form),
 * relative bias, masks broadcast over heads / batches, mask slopes, soft-capping, sinks,
 * rows whose every key is masked.
 *
 * Each case is checked twice:
 *  - against attention computed here in double from the formula of posenc.h (the
 *    inputs as stored: f16 values widened exactly), element by element within the bound
 *    below;
 *  - against the same call with POSENC_ATTENTION_UNFUSED (the multi-pass path of the
 *    same backend), within twice that bound (each is within it of the exact value), when
 *    the case has none of the one-pass-only extras (softcap, mask_slopes, sinks).
 * With --backend cpu, the CPU reference backend's own one-pass path is checked too, within
 * half an ulp of dst's type, on the smaller cases (check_reference_backend). Padding around dst must come back
 * unchanged. A backend without a one-pass kernel must refuse the extras with
 * POSENC_ERR_UNSUPPORTED and leave dst untouched; OpenCL must run them.
 *
 * The bound (u = 2^-24), the one of src/check/check_attention.c (sections 2-4) with the
 * online softmax's extra roundings added. For key k of a row, with S_k = |c| sum_i |q_i
 * k_i| (c the scale), b_k the ALiBi / relative bias, m_k the mask term (slope * mask):
 *   eps_k = (D + 2) 1.01 u S_k + 2.01 u |b_k| + 3 u (S_k + |b_k| + |m_k|)
 *           (+ 16 u softcap with soft-capping: tanh within a few ulp, a division and a
 *           product, each relative to |softcap tanh| <= softcap; its slope is <= 1)
 * is the f32 logit's error (dot product in any order, the scale's and the sums'
 * roundings). The probabilities then have a relative error of at most
 *   R_k = expm1(eps_k + eps_max) + (6 (|ln p_k| + ln Tk) + 2 Tk + 64) u
 * (check_attention.c's exp / sum / division terms, with 2 Tk + 64 instead of Tk + 16: the
 * online softmax multiplies each partial sum and accumulator by exp(m_old - m_new) at most
 * once per key tile and once more per merged chunk, a few u each, and there are fewer
 * tiles and chunks than keys), and the output o_d = sum_k p_k v_kd
 *   |o_d - exact| <= sum_k p_k |v_kd| (R_k + (Tk + 3) 1.01 u) + Tk 2^-125 max |v|
 *                    (+ 2^-11 |o_d| for an f16 dst: one rounding to f16)
 * (2^-125: a device may flush denormal exp results to zero). The worst err / bound of
 * each case is printed, so that a bound that is far too loose shows.
 */
#include "harness.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24

enum { LAY_CONTIG, LAY_PADDED, LAY_PERMUTED, LAY_PADDED_ALIGNED };
enum { MASK_NONE, MASK_FULL, MASK_BCAST_H, MASK_BCAST_HB };
enum { ENC_NONE, ENC_ALIBI, ENC_RELBIAS };

struct fa_case {
    char name[256];
    int64_t D, Dv, Hq, Hk, Tq, Tk, B;
    posenc_dtype qt, kt, vt, ot, mt;
    int mask, enc, causal, q_off, k_off, layout;
    float softcap;
    int mslopes, sinks;
    int dead_rows; /* mask every key of some rows (needs a mask) */
    int alibi_sym; /* ALiBi's symmetric form: -slope |qpos - kpos| */
    uint64_t seed;
};

/* ---- seeded inputs ------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double rng_unit(uint64_t *s) /* [0, 1) */
{
    return (double)(rng_next(s) >> 11) * 0x1p-53;
}

/* The value as stored in dtype dt (f16: rounded to nearest even). */
static double stored(posenc_dtype dt, double x)
{
    if (dt == POSENC_DTYPE_F16)
        return (double)posenc_f16_to_f32(posenc_f32_to_f16((float)x));
    return (double)(float)x;
}

/* A tensor of logical shape ne in its own buffer, laid out by `layout`, holding vals
 * (logical order, innermost first; NULL: only poison). Every byte outside the elements is
 * poison (NaN patterns). */
struct fa_tensor {
    posenc_buffer *buf;
    posenc_tensor t;
    size_t size;
};

static void make_tensor(posenc_context *ctx, posenc_dtype dt, const int64_t ne[4], int layout,
                        const double *vals, struct fa_tensor *out)
{
    const size_t es = posenc_dtype_size(dt);
    int order[4] = {0, 1, 2, 3};
    if (layout == LAY_PERMUTED) {
        order[1] = 2;
        order[2] = 1;
    }
    const int64_t pad = layout == LAY_PADDED ? 3 : layout == LAY_PADDED_ALIGNED ? 16 : 0;
    const size_t off = layout == LAY_PADDED ? 5 * es : layout == LAY_PADDED_ALIGNED ? 32 * es : 0;
    int64_t nb[4], st = (int64_t)es;
    for (int i = 0; i < 4; i++) {
        nb[order[i]] = st;
        st *= ne[order[i]] + pad;
    }
    /* the last element, then some bytes of padding (not the padded outermost dim: the
     * presets' allocation limits are small) */
    int64_t last = 0;
    for (int i = 0; i < 4; i++)
        last += (ne[i] - 1) * nb[i];
    out->size = off + (size_t)last + es + 7 * es;
    unsigned char *host = malloc(out->size);
    assert_non_null(host);
    for (size_t i = 0; i + 1 < out->size; i += 2) { /* 0x7e7e: a NaN in f16 and in f32 */
        host[i] = 0x7e;
        host[i + 1] = 0x7e;
    }
    if (vals) {
        int64_t n = 0;
        for (int64_t i3 = 0; i3 < ne[3]; i3++)
            for (int64_t i2 = 0; i2 < ne[2]; i2++)
                for (int64_t i1 = 0; i1 < ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < ne[0]; i0++, n++) {
                        unsigned char *p =
                            host + off + i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
                        if (dt == POSENC_DTYPE_F16) {
                            const uint16_t h = posenc_f32_to_f16((float)vals[n]);
                            memcpy(p, &h, 2);
                        } else {
                            const float f = (float)vals[n];
                            memcpy(p, &f, 4);
                        }
                    }
    }
    out->buf = th_upload(ctx, host, out->size);
    free(host);
    out->t.buffer = out->buf;
    out->t.offset = off;
    out->t.dtype = dt;
    for (int i = 0; i < 4; i++) {
        out->t.ne[i] = ne[i];
        out->t.nb[i] = nb[i];
    }
}

/* Element (i0..i3) of a tensor read back into host bytes. */
static double elem(const struct fa_tensor *x, const unsigned char *host, int64_t i0, int64_t i1,
                   int64_t i2, int64_t i3)
{
    const unsigned char *p = host + x->t.offset + i0 * x->t.nb[0] + i1 * x->t.nb[1] +
                             i2 * x->t.nb[2] + i3 * x->t.nb[3];
    if (x->t.dtype == POSENC_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, p, 2);
        return (double)posenc_f16_to_f32(h);
    }
    float f;
    memcpy(&f, p, 4);
    return (double)f;
}

/* ---- the case's inputs and the reference in double ----------------------------------- */

struct fa_inputs {
    double *q, *k, *v, *mask, *table, *sinks; /* logical order, as stored */
    float *slopes, *mslopes;
    float scale;
    int64_t mne[4];
    int32_t max_dist;
};

static void inputs_free(struct fa_inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->mask);
    free(in->table);
    free(in->sinks);
    free(in->slopes);
    free(in->mslopes);
}

static double *rand_array(uint64_t *s, int64_t n, posenc_dtype dt, double lo, double hi)
{
    double *a = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    assert_non_null(a);
    for (int64_t i = 0; i < n; i++)
        a[i] = stored(dt, lo + (hi - lo) * rng_unit(s));
    return a;
}

static void make_inputs(const struct fa_case *c, struct fa_inputs *in)
{
    memset(in, 0, sizeof(*in));
    uint64_t s = c->seed * 0x9e3779b97f4a7c15ull + 1;
    in->q = rand_array(&s, c->D * c->Hq * c->Tq * c->B, c->qt, -2, 2);
    in->k = rand_array(&s, c->D * c->Hk * c->Tk * c->B, c->kt, -2, 2);
    in->v = rand_array(&s, c->Dv * c->Hk * c->Tk * c->B, c->vt, -2, 2);
    in->scale = (float)(1.0 / sqrt((double)c->D));
    if (c->mask != MASK_NONE) {
        in->mne[0] = c->Tk;
        in->mne[1] = c->Tq;
        in->mne[2] = c->mask == MASK_FULL ? c->Hq : 1;
        in->mne[3] = c->mask == MASK_BCAST_HB ? 1 : c->B;
        const int64_t n = in->mne[0] * in->mne[1] * in->mne[2] * in->mne[3];
        in->mask = rand_array(&s, n, c->mt, -3, 1);
        for (int64_t i = 0; i < n; i++)
            if (rng_unit(&s) < 0.1)
                in->mask[i] = -INFINITY;
        if (c->dead_rows) /* rows 0 and Tq-1 of every mask plane: every key masked */
            for (int64_t p = 0; p < in->mne[2] * in->mne[3]; p++)
                for (int64_t kk = 0; kk < c->Tk; kk++) {
                    in->mask[kk + c->Tk * c->Tq * p] = -INFINITY;
                    in->mask[kk + c->Tk * (c->Tq - 1 + c->Tq * p)] = -INFINITY;
                }
    }
    if (c->enc == ENC_ALIBI) {
        in->slopes = malloc(sizeof(float) * (size_t)c->Hq);
        assert_non_null(in->slopes);
        for (int64_t h = 0; h < c->Hq; h++)
            in->slopes[h] = (float)(0.01 + 0.5 * rng_unit(&s));
    }
    if (c->enc == ENC_RELBIAS) {
        in->max_dist = 1 + (int32_t)(rng_next(&s) % 9);
        in->table = rand_array(&s, (2 * in->max_dist + 1) * c->Hq, POSENC_DTYPE_F16, -2, 2);
    }
    if (c->mslopes) {
        in->mslopes = malloc(sizeof(float) * (size_t)c->Hq);
        assert_non_null(in->mslopes);
        for (int64_t h = 0; h < c->Hq; h++)
            in->mslopes[h] = (float)(0.25 + rng_unit(&s));
    }
    if (c->sinks)
        in->sinks = rand_array(&s, c->Hq, POSENC_DTYPE_F32, -1, 2);
}

/* Attention in double, with the bound of the top of the file: ref and bound [Dv, Hq, Tq, B]. */
static void reference(const struct fa_case *c, const struct fa_inputs *in, double *ref,
                      double *bound)
{
    const int64_t D = c->D, Dv = c->Dv, Hq = c->Hq, Hk = c->Hk, Tq = c->Tq, Tk = c->Tk;
    const int64_t group = Hq / Hk;
    double *x = malloc(sizeof(double) * (size_t)Tk), *eps = malloc(sizeof(double) * (size_t)Tk);
    double *p = malloc(sizeof(double) * (size_t)Tk);
    assert_true(x && eps && p);
    const double sc = (double)in->scale;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t iq = 0; iq < Tq; iq++)
            for (int64_t h = 0; h < Hq; h++) {
                const int64_t kv = h / group;
                const int64_t qp = iq + c->q_off;
                const double *qr = in->q + D * (h + Hq * (iq + Tq * b));
                double eps_max = 0.0, m = -INFINITY;
                for (int64_t kk = 0; kk < Tk; kk++) {
                    const int64_t kp = kk + c->k_off;
                    const double *kr = in->k + D * (kv + Hk * (kk + Tk * b));
                    double dot = 0.0, S = 0.0;
                    for (int64_t i = 0; i < D; i++) {
                        dot += qr[i] * kr[i];
                        S += fabs(qr[i] * kr[i]);
                    }
                    double s = sc * dot;
                    S *= fabs(sc);
                    double e_extra = 0.0;
                    if (c->softcap > 0.0f) {
                        s = (double)c->softcap * tanh(s / (double)c->softcap);
                        e_extra = 16.0 * U32 * (double)c->softcap;
                    }
                    double bias = 0.0, mt = 0.0;
                    bool dead = c->causal && kp > qp;
                    if (c->enc == ENC_ALIBI)
                        bias = -(double)in->slopes[h] *
                               (double)(c->alibi_sym ? llabs(qp - kp) : qp - kp);
                    if (c->enc == ENC_RELBIAS) {
                        int64_t rel = kp - qp;
                        if (rel < -in->max_dist)
                            rel = -in->max_dist;
                        if (rel > in->max_dist)
                            rel = in->max_dist;
                        bias = in->table[(rel + in->max_dist) + (2 * in->max_dist + 1) * h];
                    }
                    if (c->mask != MASK_NONE) {
                        const double mv =
                            in->mask[kk + Tk * (iq + Tq * (h % in->mne[2] +
                                                           in->mne[2] * (b % in->mne[3])))];
                        mt = in->mslopes ? (double)in->mslopes[h] * mv : mv;
                        if (mt == -INFINITY)
                            dead = true;
                    }
                    x[kk] = dead ? -INFINITY : s + bias + mt;
                    eps[kk] = (double)(D + 2) * 1.01 * U32 * S + 2.01 * U32 * fabs(bias) +
                              3.0 * U32 * (S + fabs(bias) + (dead ? 0.0 : fabs(mt))) + e_extra;
                    if (!dead) {
                        m = fmax(m, x[kk]);
                        eps_max = fmax(eps_max, eps[kk]);
                    }
                }
                const double sink = in->sinks ? in->sinks[h] : -INFINITY;
                const double M = fmax(m, sink);
                double Z = 0.0;
                for (int64_t kk = 0; kk < Tk; kk++) {
                    p[kk] = x[kk] == -INFINITY ? 0.0 : exp(x[kk] - M);
                    Z += p[kk];
                }
                if (M != -INFINITY)
                    Z += exp(sink - M);
                else
                    Z = 1.0; /* every p_k is 0 (the row gives 0) */
                /* p_k and its relative bound R_k (eps[k] reused), once per key */
                for (int64_t kk = 0; kk < Tk; kk++) {
                    p[kk] /= Z;
                    if (p[kk] == 0.0) /* masked, or below the smallest double */
                        continue;
                    eps[kk] = expm1(eps[kk] + eps_max) +
                              (6.0 * (fabs(log(p[kk])) + log((double)Tk)) + 2.0 * (double)Tk +
                               64.0) * U32;
                }
                for (int64_t d = 0; d < Dv; d++) {
                    double o = 0.0, pv = 0.0, err = 0.0;
                    for (int64_t kk = 0; kk < Tk; kk++) {
                        if (p[kk] == 0.0)
                            continue;
                        const double pk = p[kk];
                        const double vv = in->v[d + Dv * (kv + Hk * (kk + Tk * b))];
                        o += pk * vv;
                        pv += pk * fabs(vv);
                        err += pk * fabs(vv) * eps[kk];
                    }
                    const int64_t oi = d + Dv * (h + Hq * (iq + Tq * b));
                    ref[oi] = M == -INFINITY ? 0.0 : o;
                    bound[oi] = err + (double)(Tk + 3) * 1.01 * U32 * pv +
                                (double)Tk * 0x1p-125 * 2.0 /* |v| <= 2 */ +
                                (c->ot == POSENC_DTYPE_F16 ? 0x1p-11 * fabs(o) : 0.0);
                }
            }
    free(x);
    free(eps);
    free(p);
}

/* ---- one case ------------------------------------------------------------------------ */

struct fa_run {
    struct fa_tensor q, k, v, o, mask, table, sinks;
};

static void run_free(struct fa_run *r)
{
    posenc_buffer_destroy(&r->q.buf);
    posenc_buffer_destroy(&r->k.buf);
    posenc_buffer_destroy(&r->v.buf);
    posenc_buffer_destroy(&r->o.buf);
    posenc_buffer_destroy(&r->mask.buf);
    posenc_buffer_destroy(&r->table.buf);
    posenc_buffer_destroy(&r->sinks.buf);
}

/* The message of the last posenc_attention call (later calls clear the context's). */
static char last_msg[512];

/* Run the case on ctx (unfused: with POSENC_ATTENTION_UNFUSED); *out gets dst's buffer
 * bytes (NULL when the call returned a status other than OK, which *st gets). */
static void run_case(posenc_context *ctx, const struct fa_case *c, const struct fa_inputs *in,
                     bool unfused, unsigned char **out, posenc_status *st, struct fa_run *r)
{
    memset(r, 0, sizeof(*r));
    const int64_t qne[4] = {c->D, c->Hq, c->Tq, c->B}, kne[4] = {c->D, c->Hk, c->Tk, c->B};
    const int64_t vne[4] = {c->Dv, c->Hk, c->Tk, c->B}, one[4] = {c->Dv, c->Hq, c->Tq, c->B};
    make_tensor(ctx, c->qt, qne, c->layout, in->q, &r->q);
    make_tensor(ctx, c->kt, kne, c->layout, in->k, &r->k);
    make_tensor(ctx, c->vt, vne, c->layout, in->v, &r->v);
    make_tensor(ctx, c->ot, one, c->layout, NULL, &r->o);
    struct posenc_attention_params p;
    memset(&p, 0, sizeof(p));
    p.scale = in->scale;
    p.causal = c->causal;
    p.q_offset = c->q_off;
    p.k_offset = c->k_off;
    p.softcap = c->softcap;
    if (unfused)
        p.flags |= POSENC_ATTENTION_UNFUSED;
    if (c->mask != MASK_NONE) {
        make_tensor(ctx, c->mt, in->mne, c->layout == LAY_PERMUTED ? LAY_CONTIG : c->layout,
                    in->mask, &r->mask);
        p.mask = &r->mask.t;
        p.mask_slopes = in->mslopes;
    }
    if (c->enc == ENC_ALIBI) {
        p.encoding = POSENC_ATTENTION_ALIBI;
        p.alibi.slopes = in->slopes;
        p.alibi.symmetric = c->alibi_sym;
    }
    if (c->enc == ENC_RELBIAS) {
        p.encoding = POSENC_ATTENTION_RELBIAS;
        p.relbias.kind = POSENC_RELBIAS_CLIPPED;
        p.relbias.max_distance = in->max_dist;
        const int64_t tne[4] = {2 * in->max_dist + 1, c->Hq, 1, 1};
        make_tensor(ctx, POSENC_DTYPE_F16, tne, LAY_PADDED, in->table, &r->table);
        p.relbias_table = &r->table.t;
    }
    if (c->sinks) {
        const int64_t sne[4] = {c->Hq, 1, 1, 1};
        make_tensor(ctx, POSENC_DTYPE_F32, sne, LAY_CONTIG, in->sinks, &r->sinks);
        p.sinks = &r->sinks.t;
    }
    *st = posenc_attention(ctx, &r->q.t, &r->k.t, &r->v.t, &r->o.t, NULL, &p);
    snprintf(last_msg, sizeof(last_msg), "%s", posenc_context_last_error(ctx));
    th_check_warnings();
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    *out = th_download(r->o.buf);
}

static void check_padding(const struct fa_case *c, const struct fa_tensor *o,
                          const unsigned char *host)
{
    /* every byte outside the elements still poison */
    unsigned char *mark = calloc(o->size, 1);
    assert_non_null(mark);
    const size_t es = posenc_dtype_size(o->t.dtype);
    for (int64_t i3 = 0; i3 < c->B; i3++)
        for (int64_t i2 = 0; i2 < c->Tq; i2++)
            for (int64_t i1 = 0; i1 < c->Hq; i1++)
                for (int64_t i0 = 0; i0 < c->Dv; i0++)
                    memset(mark + o->t.offset + i0 * o->t.nb[0] + i1 * o->t.nb[1] +
                               i2 * o->t.nb[2] + i3 * o->t.nb[3],
                           1, es);
    size_t bad = 0;
    for (size_t i = 0; i < o->size; i++)
        if (!mark[i] && host[i] != 0x7e)
            bad++;
    free(mark);
    if (bad)
        fail_msg("%s: %zu bytes of dst's padding were written", c->name, bad);
}

/* The CPU reference backend's one-pass path (POSENC_CONTEXT_CPU_REFERENCE, no weights):
 * the formula in double, each output rounded once, so within half an ulp of dst's type of
 * the exact value here: |err| <= 2^-24 |exact| (f32) or 2^-11 |exact| (f16), plus 2^-40
 * (the two double computations' own roundings in their different orders: Tk terms of
 * at most a few units each, ~2^-53 relative, far below it; and f16's subnormal spacing
 * 2^-24 where |exact| < 2^-14). Run with the cpu suite only (it is the same code whatever
 * backend is under test), on the cases of at most 2^24 multiply-adds (26 of them): under
 * valgrind's memcheck, where the cpu suites also run (scripts/test), checking every case
 * made this suite 3 min 1 s against 1 min 47 s without the check, these 2 min 2 s. */
static void check_reference_backend(const struct fa_case *c, const struct fa_inputs *in,
                                    const double *ref)
{
    struct fa_run rr;
    unsigned char *hr = NULL;
    posenc_status st;
    run_case(th.ref, c, in, false, &hr, &st, &rr);
    if (st != POSENC_OK)
        fail_msg("%s: the CPU reference: posenc_attention: %s", c->name, last_msg);
    const bool f16 = c->ot == POSENC_DTYPE_F16;
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t iq = 0; iq < c->Tq; iq++)
            for (int64_t h = 0; h < c->Hq; h++)
                for (int64_t d = 0; d < c->Dv; d++) {
                    const int64_t i = d + c->Dv * (h + c->Hq * (iq + c->Tq * b));
                    const double r = elem(&rr.o, hr, d, h, iq, b);
                    const double bd = (f16 ? 0x1p-11 : 0x1p-24) * fabs(ref[i]) +
                                      (f16 ? 0x1p-24 : 0x1p-40);
                    const double err = fabs(r - ref[i]);
                    if (!(err <= bd)) {
                        if (bad++ < 5)
                            printf("%s: the CPU reference's dst[%lld, %lld, %lld, %lld] = "
                                   "%.9g, exact %.9g, |err| %.3g > %.3g\n",
                                   c->name, (long long)d, (long long)h, (long long)iq,
                                   (long long)b, r, ref[i], err, bd);
                    } else {
                        worst = fmax(worst, err / bd);
                    }
                }
    check_padding(c, &rr.o, hr);
    free(hr);
    run_free(&rr);
    if (bad)
        fail_msg("%s: the CPU reference: %lld elements beyond the bound",
                 c->name, (long long)bad);
    printf("%s: the CPU reference's one pass: worst |err| / bound %.3g\n", c->name,
           worst);
}

static void test_case(void **state)
{
    const struct fa_case *c = *state;
    struct fa_inputs in;
    make_inputs(c, &in);
    const int64_t n = c->Dv * c->Hq * c->Tq * c->B;
    double *ref = malloc(sizeof(double) * (size_t)n), *bound = malloc(sizeof(double) * (size_t)n);
    assert_true(ref && bound);
    reference(c, &in, ref, bound);

    const bool extras = c->softcap > 0.0f || c->mslopes || c->sinks;
    struct fa_run rf, ru;
    unsigned char *hf = NULL, *hu = NULL;
    posenc_status st;
    run_case(th.dut, c, &in, false, &hf, &st, &rf);
    if (st == POSENC_ERR_UNSUPPORTED && extras && th.kind != POSENC_BACKEND_OPENCL) {
        /* no one-pass kernel on this backend: refused, nothing written */
        const char *msg = last_msg;
        assert_non_null(strstr(msg, "one-pass"));
        for (size_t i = 0; i < rf.o.size; i++)
            if (hf[i] != 0x7e)
                fail_msg("%s: refused, but dst was written", c->name);
        printf("%s: refused (%s)\n", c->name, msg);
        goto done;
    }
    if (st != POSENC_OK)
        fail_msg("%s: posenc_attention: %s", c->name, last_msg);
    check_padding(c, &rf.o, hf);
    if (!extras) {
        run_case(th.dut, c, &in, true, &hu, &st, &ru);
        if (st != POSENC_OK)
            fail_msg("%s: posenc_attention (UNFUSED): %s", c->name, last_msg);
    }
    double worst = 0.0, worst_u = 0.0;
    int64_t bad = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t iq = 0; iq < c->Tq; iq++)
            for (int64_t h = 0; h < c->Hq; h++)
                for (int64_t d = 0; d < c->Dv; d++) {
                    const int64_t i = d + c->Dv * (h + c->Hq * (iq + c->Tq * b));
                    const double f = elem(&rf.o, hf, d, h, iq, b);
                    const double err = fabs(f - ref[i]);
                    if (!(err <= bound[i])) { /* NaN fails too */
                        if (bad++ < 5)
                            printf("%s: dst[%lld, %lld, %lld, %lld] = %.9g, exact %.9g, "
                                   "|err| %.3g > bound %.3g\n",
                                   c->name, (long long)d, (long long)h, (long long)iq,
                                   (long long)b, f, ref[i], err, bound[i]);
                    } else if (bound[i] > 0) {
                        worst = fmax(worst, err / bound[i]);
                    }
                    if (hu) {
                        /* both paths are within bound[i] of the exact value */
                        const double u = elem(&ru.o, hu, d, h, iq, b);
                        const double du = fabs(f - u);
                        if (!(du <= 2.0 * bound[i])) {
                            if (bad++ < 5)
                                printf("%s: dst[%lld, %lld, %lld, %lld]: one pass %.9g, "
                                       "UNFUSED %.9g, |diff| %.3g > 2 * bound %.3g\n",
                                       c->name, (long long)d, (long long)h, (long long)iq,
                                       (long long)b, f, u, du, 2.0 * bound[i]);
                        } else if (bound[i] > 0) {
                            worst_u = fmax(worst_u, du / (2.0 * bound[i]));
                        }
                    }
                }
    if (bad)
        fail_msg("%s: %lld elements out of bound", c->name, (long long)bad);
    printf("%s: worst |err| / bound %.3g against double, %.3g against UNFUSED\n", c->name,
           worst, worst_u);
    if (hu)
        run_free(&ru);
    if (th.kind == POSENC_BACKEND_CPU &&
        (double)c->B * c->Tq * c->Tk * c->Hq * (c->D + c->Dv) <= 0x1p24)
        check_reference_backend(c, &in, ref);
done:
    free(hf);
    free(hu);
    run_free(&rf);
    free(ref);
    free(bound);
    inputs_free(&in);
}

/* ---- the cases ------------------------------------------------------------------------ */

#define MAX_CASES 64
static struct fa_case cases[MAX_CASES];
static size_t n_cases;

static const char *dt_name(posenc_dtype dt)
{
    return dt == POSENC_DTYPE_F16 ? "f16" : "f32";
}

static struct fa_case *add(int64_t D, int64_t Dv, int64_t Hq, int64_t Hk, int64_t Tq, int64_t Tk,
                           int64_t B, const char *what)
{
    assert_true(n_cases < MAX_CASES);
    struct fa_case *c = &cases[n_cases++];
    memset(c, 0, sizeof(*c));
    c->D = D;
    c->Dv = Dv;
    c->Hq = Hq;
    c->Hk = Hk;
    c->Tq = Tq;
    c->Tk = Tk;
    c->B = B;
    c->qt = c->kt = c->vt = c->ot = c->mt = POSENC_DTYPE_F32;
    c->seed = n_cases * 7919 + 17;
    snprintf(c->name, sizeof(c->name), "%s", what);
    return c;
}

static void finish_names(void)
{
    static const char *lay[] = {"contig", "padded", "permuted", "padded16"};
    static const char *msk[] = {"", "/mask", "/mask_bh", "/mask_bhb"};
    static const char *enc[] = {"", "/alibi", "/relbias"};
    for (size_t i = 0; i < n_cases; i++) {
        struct fa_case *c = &cases[i];
        char what[48];
        memcpy(what, c->name, sizeof(what) - 1);
        what[sizeof(what) - 1] = '\0';
        snprintf(c->name, sizeof(c->name),
                 "fused/%s/D=%lld/Dv=%lld/H=%lld:%lld/Tq=%lld/Tk=%lld/B=%lld/q%s.k%s.v%s.o%s/%s%s%s"
                 "%s%s%s%s%s%s",
                 what, (long long)c->D, (long long)c->Dv, (long long)c->Hq, (long long)c->Hk,
                 (long long)c->Tq, (long long)c->Tk, (long long)c->B, dt_name(c->qt),
                 dt_name(c->kt), dt_name(c->vt), dt_name(c->ot), lay[c->layout], msk[c->mask],
                 enc[c->enc], c->alibi_sym ? "_sym" : "", c->causal ? "/causal" : "",
                 c->softcap > 0 ? "/softcap" : "",
                 c->mslopes ? "/mslopes" : "", c->sinks ? "/sinks" : "",
                 c->dead_rows ? "/dead" : "");
    }
}

static void make_cases(void)
{
    /* decode, GQA 32/8, d 128, f16 K/V, ALiBi, causal at the last position: key counts
     * around the tile sizes (powers of two) and up to 5000 */
    static const int64_t tks[] = {1, 127, 129, 1000, 4097, 5000};
    for (size_t i = 0; i < sizeof(tks) / sizeof(tks[0]); i++) {
        struct fa_case *c = add(128, 128, 32, 8, 1, tks[i], 1, "decode");
        c->kt = c->vt = POSENC_DTYPE_F16;
        c->enc = ENC_ALIBI;
        c->causal = 1;
        c->q_off = (int)tks[i] - 1;
    }
    /* seeded random decode rows: Tk in [1, 5000], D in {40, 64, 128, 256} */
    uint64_t s = 12345;
    static const int64_t dims[] = {40, 64, 128, 256};
    for (int i = 0; i < 6; i++) {
        const int64_t D = dims[rng_next(&s) % 4];
        const int64_t Tk = 1 + (int64_t)(rng_next(&s) % 5000);
        struct fa_case *c = add(D, D, i % 2 ? 4 : 32, i % 2 ? 1 : 8, 1 + i % 3, Tk, 1, "decode-rand");
        c->kt = rng_next(&s) % 2 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
        c->vt = rng_next(&s) % 2 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
        c->qt = rng_next(&s) % 2 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
        c->ot = rng_next(&s) % 2 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
        c->enc = (int)(rng_next(&s) % 2) ? ENC_ALIBI : ENC_NONE;
        c->layout = (int)(rng_next(&s) % 4);
        c->k_off = (int)(rng_next(&s) % 3);
        c->q_off = (int)Tk + 2 - 1;
        c->causal = (int)(rng_next(&s) % 2);
        c->seed = rng_next(&s);
    }
    /* prefill, causal, GQA 4/1 and 32/8 */
    struct fa_case *c = add(64, 64, 4, 1, 67, 67, 1, "prefill");
    c->causal = 1;
    c->qt = POSENC_DTYPE_F16;
    c = add(128, 128, 32, 8, 40, 40, 1, "prefill");
    c->causal = 1;
    c->kt = c->vt = POSENC_DTYPE_F16;
    c->enc = ENC_ALIBI;
    c = add(40, 24, 8, 2, 33, 50, 2, "prefill");
    c->causal = 1;
    c->q_off = 17;
    c->layout = LAY_PERMUTED;
    c->mask = MASK_BCAST_H;
    c->mt = POSENC_DTYPE_F16;
    c = add(256, 256, 4, 1, 9, 300, 1, "prefill");
    c->layout = LAY_PADDED;
    c->mask = MASK_FULL;
    c->ot = POSENC_DTYPE_F16;
    c = add(64, 80, 6, 3, 20, 37, 2, "relbias");
    c->enc = ENC_RELBIAS;
    c->mask = MASK_BCAST_HB;
    c->layout = LAY_PADDED_ALIGNED;
    c = add(96, 96, 4, 2, 5, 700, 3, "relbias");
    c->enc = ENC_RELBIAS;
    c->kt = POSENC_DTYPE_F16;
    c->layout = LAY_PERMUTED;
    /* all-masked rows give 0 */
    c = add(64, 64, 4, 2, 6, 150, 1, "dead");
    c->mask = MASK_FULL;
    c->dead_rows = 1;
    c = add(40, 40, 4, 4, 3, 1500, 2, "dead");
    c->mask = MASK_BCAST_HB;
    c->dead_rows = 1;
    c->layout = LAY_PADDED;
    /* ggml's extras: softcap, mask slopes, sinks (with dead rows: the sink alone) */
    c = add(128, 128, 32, 8, 1, 3000, 1, "extras");
    c->kt = c->vt = POSENC_DTYPE_F16;
    c->mask = MASK_BCAST_HB;
    c->mt = POSENC_DTYPE_F16;
    c->mslopes = 1;
    c->sinks = 1;
    c->softcap = 3.0f;
    c = add(64, 64, 4, 1, 11, 90, 2, "extras");
    c->mask = MASK_FULL;
    c->dead_rows = 1;
    c->sinks = 1;
    c->causal = 1;
    c->layout = LAY_PADDED;
    c = add(40, 40, 8, 2, 4, 600, 1, "extras");
    c->softcap = 1.5f;
    c->enc = ENC_ALIBI;
    c->mask = MASK_BCAST_H;
    c->mslopes = 1;
    c->ot = POSENC_DTYPE_F16;
    c->layout = LAY_PERMUTED;
    /* one long row: 32768 keys */
    c = add(64, 64, 2, 1, 1, 32768, 1, "long");
    c->kt = c->vt = POSENC_DTYPE_F16;
    c->enc = ENC_ALIBI;
    c = add(128, 128, 4, 1, 1, 40000, 1, "long");
    c->kt = c->vt = POSENC_DTYPE_F16;
    c->mask = MASK_BCAST_HB;
    c->sinks = 1;
    /* decode shapes of OpenCL's CPU-shaped kernel (pe_flash_cpu: at most 8 rows per K/V
     * head, k / v rows aligned to 4-wide loads; the GPU-shaped pe_flash elsewhere, and
     * for these too with POSENC_CL_FLASH=gpu): GQA 8 with two heads per work-item and
     * relative bias, a full mask, B = 2; a last head block with fewer heads (10 K/V heads,
     * 8 per work-item) with soft-capping and sinks; 8-wide loads (D 40) with three queries
     * per row block, the first and last of them dead; 4-wide loads (D 20, Dv 12), one row
     * per head (MHA), mask slopes, f16 dst; 8 rows per head in 4-row sums, f16 q. */
    c = add(64, 64, 16, 2, 1, 777, 2, "cpu-relbias");
    c->enc = ENC_RELBIAS;
    c->mask = MASK_FULL;
    c->causal = 1;
    c->q_off = 776;
    c = add(32, 32, 40, 10, 1, 300, 1, "cpu-heads");
    c->kt = c->vt = POSENC_DTYPE_F16;
    c->enc = ENC_ALIBI;
    c->softcap = 2.0f;
    c->sinks = 1;
    c = add(40, 40, 8, 4, 3, 200, 1, "cpu-w8");
    c->kt = c->vt = POSENC_DTYPE_F16;
    c->enc = ENC_ALIBI;
    c->causal = 1;
    c->q_off = 150;
    c->mask = MASK_BCAST_HB;
    c->dead_rows = 1;
    c = add(20, 12, 3, 3, 1, 1000, 1, "cpu-w4");
    c->mask = MASK_BCAST_H;
    c->mslopes = 1;
    c->ot = POSENC_DTYPE_F16;
    c = add(64, 64, 4, 1, 2, 130, 1, "cpu-rows8");
    c->qt = POSENC_DTYPE_F16;
    c->causal = 1;
    c->q_off = 128;
    /* ALiBi's symmetric form (encoders), not causal: keys on both sides of each query,
     * prefill and decode */
    static const struct {
        int64_t D, Hq, Hk, Tq, Tk, B;
        int q_off;
    } sym[] = {{64, 8, 2, 12, 50, 2, 20}, {128, 32, 8, 1, 700, 1, 300}};
    for (size_t i = 0; i < sizeof(sym) / sizeof(sym[0]); i++) {
        c = add(sym[i].D, sym[i].D, sym[i].Hq, sym[i].Hk, sym[i].Tq, sym[i].Tk, sym[i].B,
                "alibi-sym");
        c->kt = c->vt = POSENC_DTYPE_F16;
        c->enc = ENC_ALIBI;
        c->alibi_sym = 1;
        c->q_off = sym[i].q_off;
    }
    finish_names();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "attention_fused");
    if (rc >= 0)
        return rc;
    make_cases();
    struct CMUnitTest *tests = calloc(n_cases, sizeof(*tests));
    assert_non_null(tests);
    for (size_t i = 0; i < n_cases; i++) {
        tests[i].name = cases[i].name;
        tests[i].test_func = test_case;
        tests[i].initial_state = &cases[i];
    }
    rc = th_run("attention_fused", tests, n_cases);
    free(tests);
    th_fini();
    return rc;
}
