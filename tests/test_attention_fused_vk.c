/*
 * test_attention_fused_vk.c - posenc_attention's one-pass path (no weights: the backend's
 * attn_fused, on Vulkan shaders/flash_attn.comp + flash_merge.comp) on one backend
 * (--backend NAME), over shapes chosen to reach every grid and code path of the Vulkan
 * kernel: decode (split-K with and without the merge, key counts 1 .. 5000 that are and
 * are not multiples of its key blocks / splits), prefill (shared-memory key tiles, causal
 * tiles skipped), GQA 32/8 and 4/1, head dims 40 / 64 / 128 / 256 and Dv != D, f16 and
 * f32 per tensor, contiguous, padded, permuted and element-strided views (the vector and
 * the scalar load paths), ALiBi (plain, symmetric), relative bias (T5, clipped),
 * masks (full, broadcast over heads / batches, f16 / f32, with -inf entries and fully
 * masked rows), mask slopes, softcap, sinks, offsets, and one row of 32773 keys; plus
 * seeded random cases.
 *
 * Each case is checked twice:
 *  - against attention computed here in double from the formulas of internal.h's
 *    pe_attn_fused_op, on the values as stored (f16 inputs exact in double), within a
 *    per-row bound derived next to the check (ref_row);
 *  - without softcap / mask slopes / sinks, against the multi-pass path on the same
 *    backend (POSENC_ATTENTION_UNFUSED), within the sum of the two paths' bounds.
 * On a backend without a one-pass kernel, the cases with softcap / mask slopes / sinks
 * must fail with POSENC_ERR_UNSUPPORTED, a message saying so, and dst untouched; the Vulkan
 * backend must run them.
 */
#include "harness.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24 /* f32 unit roundoff */

enum { MASK_NONE, MASK_FULL, MASK_BH, MASK_BB, MASK_BHB };
enum { ENC_NONE, ENC_ALIBI, ENC_T5, ENC_CLIPPED };

struct fcase {
    char name[200];
    int64_t D, Dv, Hq, Hk, Tq, Tk, B;
    posenc_dtype qt, kt, vt, ot, mt, tt;
    int causal, q_off, k_off;
    int enc, alibi_sym;
    int mask;
    int mask_inf;  /* 1: some -inf entries; 2: also whole rows -inf */
    int mslopes, sinks;
    float softcap, scale;
    int layout;    /* 0 contiguous, 1 padded, 2 permuted (dims 1, 2), 3 element stride 2 */
    int tile;      /* named tile/...: small head dims, many rows (see build_cases) */
    uint64_t seed;
};

/* ---- random numbers ------------------------------------------------------------------- */

static uint64_t rng_s;
static uint64_t rnd(void)
{
    rng_s ^= rng_s << 13;
    rng_s ^= rng_s >> 7;
    rng_s ^= rng_s << 17;
    return rng_s;
}
static double urand(double lo, double hi)
{
    return lo + (hi - lo) * (double)(rnd() >> 11) * 0x1p-53;
}

/* ---- tensors: a device buffer with a layout, and the logical values in double --------- */

struct dt {
    posenc_buffer *buf;
    posenc_tensor t;
    double *h;        /* [ne0 * ne1 * ne2 * ne3], logical order */
    unsigned char *img;
    size_t bytes;
};

static size_t esize(posenc_dtype dt)
{
    return dt == POSENC_DTYPE_F16 ? 2 : 4;
}

/* Round to the dtype and store value x at byte address a of the image. */
static double put_el(unsigned char *img, size_t a, posenc_dtype dt, double x)
{
    if (dt == POSENC_DTYPE_F16) {
        uint16_t b = posenc_f32_to_f16((float)x);
        memcpy(img + a, &b, 2);
        return (double)posenc_f16_to_f32(b);
    }
    float f = (float)x;
    memcpy(img + a, &f, 4);
    return (double)f;
}

static double get_el(const unsigned char *img, size_t a, posenc_dtype dt)
{
    if (dt == POSENC_DTYPE_F16) {
        uint16_t b;
        memcpy(&b, img + a, 2);
        return (double)posenc_f16_to_f32(b);
    }
    float f;
    memcpy(&f, img + a, 4);
    return (double)f;
}

static size_t addr(const posenc_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return t->offset + (size_t)(i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

/* A tensor of shape ne with `layout`, its other bytes random (junk a wrong read would
 * pick up), values from gen(i) rounded to the dtype (NULL: junk only, for outputs). */
static void make(struct dt *o, posenc_dtype dt, const int64_t ne[4], int layout,
                 double (*gen)(void *, int64_t), void *u)
{
    memset(o, 0, sizeof *o);
    const int64_t es = (int64_t)esize(dt);
    posenc_tensor *t = &o->t;
    t->dtype = dt;
    memcpy(t->ne, ne, sizeof t->ne);
    switch (layout) {
    case 1: /* padded rows and planes, odd element offset */
        t->offset = 5 * (size_t)es;
        t->nb[0] = es;
        t->nb[1] = (ne[0] + 3) * es;
        t->nb[2] = t->nb[1] * (ne[1] + 1);
        t->nb[3] = t->nb[2] * ne[2] + 2 * es;
        break;
    case 2: /* dims 1 and 2 swapped in memory (a [D, T, H] cache read as [D, H, T]) */
        t->nb[0] = es;
        t->nb[2] = ne[0] * es;
        t->nb[1] = t->nb[2] * ne[2];
        t->nb[3] = t->nb[1] * ne[1];
        break;
    case 3: /* every other element */
        t->nb[0] = 2 * es;
        t->nb[1] = 2 * ne[0] * es;
        t->nb[2] = t->nb[1] * ne[1];
        t->nb[3] = t->nb[2] * ne[2];
        break;
    default:
        t->nb[0] = es;
        t->nb[1] = ne[0] * es;
        t->nb[2] = t->nb[1] * ne[1];
        t->nb[3] = t->nb[2] * ne[2];
    }
    size_t last = addr(t, ne[0] - 1, ne[1] - 1, ne[2] - 1, ne[3] - 1) + (size_t)es;
    o->bytes = (last + 3) & ~(size_t)3;
    o->img = malloc(o->bytes);
    assert_non_null(o->img);
    for (size_t i = 0; i < o->bytes; i++)
        o->img[i] = (unsigned char)rnd();
    const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    if (gen) {
        o->h = malloc((size_t)n * sizeof *o->h);
        assert_non_null(o->h);
        int64_t i = 0;
        for (int64_t i3 = 0; i3 < ne[3]; i3++)
            for (int64_t i2 = 0; i2 < ne[2]; i2++)
                for (int64_t i1 = 0; i1 < ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < ne[0]; i0++, i++)
                        o->h[i] = put_el(o->img, addr(t, i0, i1, i2, i3), dt, gen(u, i));
    }
    o->buf = th_upload(th.dut, o->img, o->bytes);
    t->buffer = o->buf;
}

static void drop(struct dt *o)
{
    posenc_buffer_destroy(&o->buf);
    free(o->h);
    free(o->img);
    memset(o, 0, sizeof *o);
}

static double gen_u(void *u, int64_t i)
{
    (void)u;
    (void)i;
    return urand(-1.0, 1.0);
}

/* mask values: mostly small, with -inf entries (mask_inf >= 1) and whole rows of -inf
 * (mask_inf == 2: every element of rows q % 5 == 3) */
struct mask_gen {
    int64_t Tk;
    int inf;
};
static double gen_mask(void *u, int64_t i)
{
    const struct mask_gen *g = u;
    double x = urand(-2.0, 2.0);
    if (g->inf >= 1 && rnd() % 7 == 0)
        x = -INFINITY;
    if (g->inf == 2 && (i / g->Tk) % 5 == 3)
        x = -INFINITY;
    return x;
}

/* ---- attention in double --------------------------------------------------------------- */

struct ref_ctx {
    const struct fcase *c;
    const struct dt *q, *k, *v, *mask, *table, *sinks;
    const double *slopes;   /* ALiBi [Hq] (double; the device uses them rounded to f32) */
    const float *mslopes;   /* [Hq] */
    struct posenc_relbias_params rp;
    double scale;
};

static double at(const struct dt *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const int64_t *ne = t->t.ne;
    return t->h[i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3))];
}

/*
 * Row (q, h, b) in double into out[Dv]; returns the row's error bound (absolute, for
 * every element), derived for any f32 online-softmax implementation of the formula:
 *   - a score error dx_k moves the output by at most 2 max|v| max_k |dx_k| (d out / d x_k
 *     = p_k (v_k - out) / L, and sum_k p_k / L <= 1);
 *   - dx_k: the f32 dot product of D terms, scaled: (D + 2) u scale sum_i |q_i k_i|; the
 *     softcap's tanh (64 u cap, its division and product); ALiBi with the slope rounded
 *     to f32 and one product: 4 u |slope dist|; the bias, mask and mask-slope additions
 *     and products: 4 u (|bias| + |slope mask|) + 2 u |x|;
 *   - exp(x - m) with a relative error (4 + 2 |x - m|) u: at most 2 max|v| (4 u +
 *     0.75 u n) over n keys (|x - m| e^(x - m) <= 1/e per key, and L >= 1);
 *   - the sums of n products p v and p, the rescalings by exp(m_old - m_new) (one per
 *     block of keys, the same factor on both sums) and the final division: (2.5 n + 16) u
 *     max|v|;
 *   - an f16 dst: half an f16 ulp of the result, 2^-11 |out|, plus 2^-24 (subnormals).
 * u = 2^-24. Both the one-pass and the multi-pass path are such implementations, so
 * they differ by at most twice the bound.
 */
static double ref_row(const struct ref_ctx *r, int64_t qi, int64_t h, int64_t b, double *out,
                      double *keys_x)
{
    const struct fcase *c = r->c;
    const int64_t hk = h / (c->Hq / c->Hk);
    const int64_t qp = qi + c->q_off;
    double m = -INFINITY, dx = 0.0, vmax = 0.0;
    for (int64_t k = 0; k < c->Tk; k++) {
        const int64_t kp = k + c->k_off;
        double s = 0.0, a = 0.0;
        for (int64_t i = 0; i < c->D; i++) {
            double p = at(r->q, i, h, qi, b) * at(r->k, i, hk, k, b);
            s += p;
            a += fabs(p);
        }
        s *= r->scale;
        double e = (double)(c->D + 2) * U32 * r->scale * a;
        if (c->softcap > 0.0f) {
            s = c->softcap * tanh(s / c->softcap);
            e += 64.0 * U32 * c->softcap;
        }
        double x = s, bias = 0.0;
        if (c->enc == ENC_ALIBI) {
            int64_t dist = qp - kp;
            if (c->alibi_sym && dist < 0)
                dist = -dist;
            bias = -r->slopes[h] * (double)dist;
            e += 4.0 * U32 * fabs(bias);
            x += bias;
        } else if (c->enc == ENC_T5 || c->enc == ENC_CLIPPED) {
            int32_t bk = 0;
            assert_int_equal(posenc_relbias_bucket(&r->rp, kp - qp, &bk), POSENC_OK);
            bias = at(r->table, bk, h, 0, 0);
            e += 4.0 * U32 * fabs(bias);
            x += bias;
        }
        if (c->mask != MASK_NONE) {
            const int64_t *mne = r->mask->t.ne;
            double mv = at(r->mask, k, qi, mne[2] == 1 ? 0 : h, mne[3] == 1 ? 0 : b);
            double sl = c->mslopes ? (double)r->mslopes[h] : 1.0;
            if (mv == -INFINITY)
                x = -INFINITY;
            else {
                x += sl * mv;
                e += 4.0 * U32 * fabs(sl * mv);
            }
        }
        if (c->causal && kp > qp)
            x = -INFINITY;
        if (x != -INFINITY) {
            e += 2.0 * U32 * fabs(x);
            if (e > dx)
                dx = e;
        }
        keys_x[k] = x;
        if (x > m)
            m = x;
    }
    double sink = -INFINITY;
    if (c->sinks)
        sink = at(r->sinks, h, 0, 0, 0);
    if (sink > m)
        m = sink;
    for (int64_t k = 0; k < c->Tk; k++)
        for (int64_t i = 0; i < c->Dv; i++)
            if (fabs(at(r->v, i, hk, k, b)) > vmax)
                vmax = fabs(at(r->v, i, hk, k, b));
    const double n = (double)c->Tk;
    double bound = vmax * (2.0 * dx + 2.0 * U32 * (4.0 + 0.75 * n) + (2.5 * n + 16.0) * U32);
    for (int64_t i = 0; i < c->Dv; i++)
        out[i] = 0.0;
    if (m == -INFINITY)
        return bound; /* every key masked, no finite sink: zeros */
    double l = c->sinks ? exp(sink - m) : 0.0;
    for (int64_t k = 0; k < c->Tk; k++) {
        if (keys_x[k] == -INFINITY)
            continue;
        double p = exp(keys_x[k] - m);
        l += p;
        for (int64_t i = 0; i < c->Dv; i++)
            out[i] += p * at(r->v, i, hk, k, b);
    }
    for (int64_t i = 0; i < c->Dv; i++)
        out[i] /= l;
    return bound;
}

/* ---- one case ----------------------------------------------------------------------- */

static bool extras(const struct fcase *c)
{
    return c->softcap > 0.0f || c->mslopes || c->sinks;
}

static void run_case(void **state)
{
    const struct fcase *c = *state;
    rng_s = c->seed * 0x9e3779b97f4a7c15ull + 1;
    const int64_t D = c->D, Dv = c->Dv, Hq = c->Hq, Hk = c->Hk, Tq = c->Tq, Tk = c->Tk;
    const int64_t B = c->B;
    struct dt q, k, v, o, mask, table, sinks;
    memset(&mask, 0, sizeof mask);
    memset(&table, 0, sizeof table);
    memset(&sinks, 0, sizeof sinks);
    make(&q, c->qt, (int64_t[4]){D, Hq, Tq, B}, c->layout, gen_u, NULL);
    make(&k, c->kt, (int64_t[4]){D, Hk, Tk, B}, c->layout, gen_u, NULL);
    make(&v, c->vt, (int64_t[4]){Dv, Hk, Tk, B}, c->layout == 2 ? 1 : c->layout, gen_u, NULL);
    make(&o, c->ot, (int64_t[4]){Dv, Hq, Tq, B}, c->layout == 3 ? 1 : c->layout, NULL, NULL);

    struct posenc_attention_params p;
    memset(&p, 0, sizeof p);
    p.causal = c->causal;
    p.q_offset = c->q_off;
    p.k_offset = c->k_off;
    p.scale = c->scale;
    p.softcap = c->softcap;
    struct ref_ctx r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.q = &q;
    r.k = &k;
    r.v = &v;
    r.scale = c->scale != 0.0f ? (double)c->scale : 1.0 / sqrt((double)D);
    double *slopes = calloc((size_t)Hq, sizeof *slopes);
    float *mslopes = calloc((size_t)Hq, sizeof *mslopes);
    assert_non_null(slopes);
    assert_non_null(mslopes);
    if (c->mask != MASK_NONE) {
        int64_t mne[4] = {Tk, Tq, (c->mask == MASK_BH || c->mask == MASK_BHB) ? 1 : Hq,
                          (c->mask == MASK_BB || c->mask == MASK_BHB) ? 1 : B};
        struct mask_gen g = {Tk, c->mask_inf};
        make(&mask, c->mt, mne, c->layout == 1 ? 1 : 0, gen_mask, &g);
        p.mask = &mask.t;
        r.mask = &mask;
    }
    if (c->enc == ENC_ALIBI) {
        p.encoding = POSENC_ATTENTION_ALIBI;
        p.alibi.max_bias = (float)(4 + c->seed % 5);
        p.alibi.symmetric = c->alibi_sym;
        assert_int_equal(posenc_alibi_slopes(Hq, &p.alibi, slopes), POSENC_OK);
        r.slopes = slopes;
    } else if (c->enc == ENC_T5 || c->enc == ENC_CLIPPED) {
        p.encoding = POSENC_ATTENTION_RELBIAS;
        p.relbias.kind = c->enc == ENC_T5 ? POSENC_RELBIAS_T5 : POSENC_RELBIAS_CLIPPED;
        p.relbias.max_distance = c->enc == ENC_T5 ? 64 : 5;
        p.relbias.causal = c->enc == ENC_T5 && c->causal;
        int64_t nb = c->enc == ENC_T5 ? 32 : 11;
        make(&table, c->tt, (int64_t[4]){nb, Hq, 1, 1}, 0, gen_u, NULL);
        p.relbias_table = &table.t;
        r.table = &table;
        r.rp = p.relbias;
        r.rp.q_offset = r.rp.k_offset = 0;
    }
    if (c->mslopes) {
        for (int64_t h = 0; h < Hq; h++)
            mslopes[h] = (float)urand(0.25, 2.0);
        p.mask_slopes = mslopes;
        r.mslopes = mslopes;
    }
    if (c->sinks) {
        make(&sinks, POSENC_DTYPE_F32, (int64_t[4]){Hq, 1, 1, 1}, 0, gen_u, NULL);
        p.sinks = &sinks.t;
        r.sinks = &sinks;
    }

    posenc_status st = posenc_attention(th.dut, &q.t, &k.t, &v.t, &o.t, NULL, &p);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", posenc_context_last_error(th.dut));
    th_check_warnings();
    unsigned char *got = th_download(o.buf);
    if (extras(c) && st == POSENC_ERR_UNSUPPORTED && th.kind != POSENC_BACKEND_VULKAN) {
        /* a backend without a one-pass kernel refuses the extras and writes nothing */
        if (!strstr(msg, "one-pass"))
            fail_msg("%s: unexpected message: %s", c->name, msg);
        if (memcmp(got, o.img, o.bytes) != 0)
            fail_msg("%s: dst written by a refused call", c->name);
        goto done;
    }
    if (st != POSENC_OK)
        fail_msg("%s: %s: %s", c->name, posenc_status_string(st), msg);

    /* the multi-pass path on the same backend (no extras there) */
    unsigned char *unf = NULL;
    if (!extras(c)) {
        struct posenc_attention_params pu = p;
        pu.flags |= POSENC_ATTENTION_UNFUSED;
        struct dt o2;
        make(&o2, c->ot, o.t.ne, 0, NULL, NULL);
        st = posenc_attention(th.dut, &q.t, &k.t, &v.t, &o2.t, NULL, &pu);
        th_check_warnings();
        if (st != POSENC_OK)
            fail_msg("%s (UNFUSED): %s: %s", c->name, posenc_status_string(st),
                     posenc_context_last_error(th.dut));
        unsigned char *u2 = th_download(o2.buf);
        /* into o's layout, for one comparison loop */
        unf = malloc(o.bytes);
        assert_non_null(unf);
        for (int64_t b = 0; b < B; b++)
            for (int64_t qi = 0; qi < Tq; qi++)
                for (int64_t h = 0; h < Hq; h++)
                    for (int64_t i = 0; i < Dv; i++)
                        memcpy(unf + addr(&o.t, i, h, qi, b), u2 + addr(&o2.t, i, h, qi, b),
                               esize(c->ot));
        free(u2);
        drop(&o2);
    }

    double *row = malloc((size_t)Dv * sizeof *row);
    double *kx = malloc((size_t)Tk * sizeof *kx);
    assert_non_null(row);
    assert_non_null(kx);
    int64_t bad = 0;
    double worst = 0.0;
    char first[240] = "";
    for (int64_t b = 0; b < B; b++)
        for (int64_t qi = 0; qi < Tq; qi++)
            for (int64_t h = 0; h < Hq; h++) {
                double bound = ref_row(&r, qi, h, b, row, kx);
                for (int64_t i = 0; i < Dv; i++) {
                    size_t a = addr(&o.t, i, h, qi, b);
                    double y = get_el(got, a, c->ot);
                    /* the bound of ref_row, plus the f16 rounding of dst */
                    double tol = bound;
                    if (c->ot == POSENC_DTYPE_F16)
                        tol += 0x1p-11 * fabs(row[i]) + 0x1p-24;
                    double err = fabs(y - row[i]);
                    bool ok = err <= tol; /* false for NaN */
                    if (unf) {
                        /* both paths within their bound of the double result */
                        double yu = get_el(unf, a, c->ot);
                        ok = ok && fabs(yu - row[i]) <= tol && fabs(y - yu) <= 2.0 * tol;
                    }
                    if (tol > 0.0 && err / tol > worst)
                        worst = err / tol;
                    if (!ok) {
                        if (!bad++)
                            snprintf(first, sizeof first,
                                     "first at d=%lld h=%lld q=%lld b=%lld: got %.9g, "
                                     "multi-pass %.9g, double %.9g, bound %.3g",
                                     (long long)i, (long long)h, (long long)qi, (long long)b, y,
                                     unf ? get_el(unf, a, c->ot) : NAN, row[i], tol);
                    }
                }
            }
    /* bytes of o outside the tensor (padding) untouched */
    {
        unsigned char *mark = calloc(o.bytes, 1);
        assert_non_null(mark);
        for (int64_t b = 0; b < B; b++)
            for (int64_t qi = 0; qi < Tq; qi++)
                for (int64_t h = 0; h < Hq; h++)
                    for (int64_t i = 0; i < Dv; i++)
                        memset(mark + addr(&o.t, i, h, qi, b), 1, esize(c->ot));
        for (size_t i = 0; i < o.bytes; i++)
            if (!mark[i] && got[i] != o.img[i])
                fail_msg("%s: byte %zu outside dst written", c->name, i);
        free(mark);
    }
    free(row);
    free(kx);
    free(unf);
    if (bad)
        fail_msg("%s: %lld of %lld elements out of bounds; %s", c->name, (long long)bad,
                 (long long)(B * Tq * Hq * Dv), first);
    printf("    %s: max error / bound %.3g\n", c->name, worst);
done:
    free(got);
    free(slopes);
    free(mslopes);
    drop(&q);
    drop(&k);
    drop(&v);
    drop(&o);
    drop(&mask);
    drop(&table);
    drop(&sinks);
}

/* ---- the cases ----------------------------------------------------------------------- */

static const char *dn(posenc_dtype t)
{
    return t == POSENC_DTYPE_F16 ? "16" : "32";
}

static void name_case(struct fcase *c)
{
    static const char *enc[] = {"none", "alibi", "t5", "clipped"};
    static const char *mk[] = {"", "/mask", "/mask_bh", "/mask_bb", "/mask_bhb"};
    snprintf(c->name, sizeof c->name,
             "%s/%s/q%s.k%s.v%s.o%s/D=%lld/Dv=%lld/Hq=%lld/Hk=%lld/Tq=%lld/Tk=%lld/B=%lld%s%s%s"
             "%s%s%s/off=%d,%d/layout=%d",
             c->tile ? "tile" : "fused", enc[c->enc], dn(c->qt), dn(c->kt), dn(c->vt), dn(c->ot), (long long)c->D,
             (long long)c->Dv, (long long)c->Hq, (long long)c->Hk, (long long)c->Tq,
             (long long)c->Tk, (long long)c->B, c->causal ? "/causal" : "", mk[c->mask],
             c->mask_inf ? (c->mask_inf == 2 ? "+rows_inf" : "+inf") : "",
             c->mslopes ? "/mslopes" : "", c->sinks ? "/sinks" : "",
             c->softcap > 0.0f ? "/softcap" : "", c->q_off, c->k_off, c->layout);
}

static struct fcase base(int64_t D, int64_t Hq, int64_t Hk, int64_t Tq, int64_t Tk,
                         uint64_t seed)
{
    struct fcase c;
    memset(&c, 0, sizeof c);
    c.D = c.Dv = D;
    c.Hq = Hq;
    c.Hk = Hk;
    c.Tq = Tq;
    c.Tk = Tk;
    c.B = 1;
    c.qt = c.kt = c.vt = c.ot = c.mt = c.tt = POSENC_DTYPE_F32;
    c.seed = seed;
    return c;
}

#define MAX_CASES 96
static struct fcase cases[MAX_CASES];
static size_t n_cases;

static void add(struct fcase c)
{
    assert_true(n_cases < MAX_CASES);
    name_case(&c);
    cases[n_cases++] = c;
}

static void build_cases(void)
{
    const posenc_dtype F16 = POSENC_DTYPE_F16;
    /* decode, the shape (GQA 32/8, d 128, f32 q, f16 K/V, ALiBi, causal at the
     * last position) over key counts around the kernel's blocks (4) and splits (64) */
    const int64_t tks[] = {1, 2, 3, 5, 63, 64, 65, 129, 1000, 4096, 5000};
    for (size_t i = 0; i < sizeof tks / sizeof tks[0]; i++) {
        struct fcase c = base(128, 32, 8, 1, tks[i], 100 + i);
        c.kt = c.vt = F16;
        c.enc = ENC_ALIBI;
        c.causal = 1;
        c.q_off = (int)tks[i] - 1;
        add(c);
    }
    /* decode: 4/1, mask broadcast over heads (f16, -inf entries), mask slopes and sinks */
    {
        struct fcase c = base(64, 4, 1, 1, 777, 201);
        c.mask = MASK_BH;
        c.mt = F16;
        c.mask_inf = 1;
        c.mslopes = c.sinks = 1;
        add(c);
    }
    /* decode: d 256, everything f16, softcap, two batches with a batch-broadcast mask */
    {
        struct fcase c = base(256, 8, 2, 1, 300, 202);
        c.qt = c.kt = c.vt = c.ot = c.mt = F16;
        c.softcap = 5.0f;
        c.scale = 0.2f;
        c.B = 2;
        c.mask = MASK_BB;
        add(c);
    }
    /* decode: d 40, Dv 24, T5 bias, two batches, padded (scalar loads) */
    {
        struct fcase c = base(40, 6, 3, 1, 100, 203);
        c.Dv = 24;
        c.enc = ENC_T5;
        c.B = 2;
        c.layout = 1;
        c.q_off = 120;
        c.k_off = 30;
        add(c);
    }
    /* decode: several queries (a speculative-decoding block), causal, element stride 2 */
    {
        struct fcase c = base(64, 8, 8, 3, 517, 204);
        c.causal = 1;
        c.q_off = 514;
        c.kt = F16;
        c.layout = 3;
        add(c);
    }
    /* prefill: GQA 32/8, d 128, causal, f16 K/V, ALiBi (shared-memory tiles) */
    {
        struct fcase c = base(128, 32, 8, 96, 96, 301);
        c.kt = c.vt = F16;
        c.enc = ENC_ALIBI;
        c.causal = 1;
        add(c);
    }
    /* prefill: 4/1, d 64, full f32 mask with -inf and fully masked rows, causal, offset */
    {
        struct fcase c = base(64, 4, 1, 200, 230, 302);
        c.mask = MASK_FULL;
        c.mask_inf = 2;
        c.causal = 1;
        c.q_off = 30;
        add(c);
    }
    /* prefill: d 256, f16, clipped relative bias (f16 table), 2 batches (contiguous: with
     * permuted views, as the tile/ case of d 24 below has them, lavapipe took 175 s to
     * compile this variant's scalar loads, against 64 s for the vector ones) */
    {
        struct fcase c = base(256, 4, 2, 70, 90, 303);
        c.qt = c.kt = c.vt = c.tt = F16;
        c.enc = ENC_CLIPPED;
        c.B = 2;
        add(c);
    }
    /* prefill: d 40, MHA, softcap and sinks, f16 dst, symmetric ALiBi */
    {
        struct fcase c = base(40, 4, 4, 130, 130, 304);
        c.softcap = 3.0f;
        c.sinks = 1;
        c.ot = F16;
        c.enc = ENC_ALIBI;
        c.alibi_sym = 1;
        add(c);
    }
    /* prefill: d 128, 4/1, causal ALiBi with a key offset, mask broadcast over heads and
     * batches, mask slopes (params->alibi.causal must be 0 in posenc_attention: the
     * kernel's alibi.causal path is reached only through pe_attn_fused_op) */
    {
        struct fcase c = base(128, 4, 1, 160, 160, 305);
        c.vt = F16;
        c.enc = ENC_ALIBI;
        c.causal = 1;
        c.q_off = 7;
        c.k_off = 3;
        c.mask = MASK_BHB;
        c.mslopes = 1;
        add(c);
    }
    /* one long row: 32773 keys, f16 K/V, ALiBi causal, and with a mask and sinks */
    {
        struct fcase c = base(64, 4, 1, 1, 32773, 401);
        c.kt = c.vt = F16;
        c.enc = ENC_ALIBI;
        c.causal = 1;
        c.q_off = 32772;
        add(c);
        c.seed = 402;
        c.enc = ENC_NONE;
        c.mask = MASK_BH;
        c.mask_inf = 1;
        c.sinks = 1;
        add(c);
    }
    /* many rows at small head dims, named tile/...: on GPUs these take the shared-memory
     * tile grid (FA_TILE: R = 4 rows per invocation, work-groups of 64, so at least ~253
     * rows per K/V head), which lavapipe runs only with POSENC_VK_FLASH=gpu (its tile
     * variants take 1-200 s each to compile, growing with the head dims: the larger
     * prefill cases above stay on the split-K grid there); tests/meson.build runs these
     * again that way. Every feature the tile's staging and masks see: causal tiles
     * skipped, full / broadcast masks with -inf rows, mask slopes, both relative biases
     * with f16 / f32 tables, symmetric and causal ALiBi with offsets, softcap, sinks,
     * f16 everywhere, Dv != D, and every layout (vector and scalar loads). */
    {
        struct fcase c = base(40, 8, 2, 70, 100, 601);
        c.kt = c.vt = F16;
        c.enc = ENC_ALIBI;
        c.causal = 1;
        c.q_off = 30;
        c.tile = 1;
        add(c);
        c = base(16, 4, 1, 200, 230, 602);
        c.mask = MASK_FULL;
        c.mask_inf = 2;
        c.causal = 1;
        c.q_off = 30;
        c.tile = 1;
        add(c);
        c = base(24, 4, 2, 130, 90, 603);
        c.qt = c.kt = c.vt = c.ot = c.tt = F16;
        c.enc = ENC_CLIPPED;
        c.B = 2;
        c.layout = 2;
        c.tile = 1;
        add(c);
        c = base(8, 2, 2, 260, 130, 604);
        c.softcap = 3.0f;
        c.sinks = 1;
        c.ot = F16;
        c.enc = ENC_ALIBI;
        c.alibi_sym = 1;
        c.tile = 1;
        add(c);
        c = base(16, 4, 1, 160, 160, 605);
        c.Dv = 8;
        c.vt = F16;
        c.enc = ENC_ALIBI;
        c.causal = 1;
        c.q_off = 7;
        c.k_off = 3;
        c.mask = MASK_BHB;
        c.mslopes = 1;
        c.layout = 1;
        c.tile = 1;
        add(c);
        c = base(8, 4, 1, 70, 50, 606);
        c.Dv = 16;
        c.enc = ENC_T5;
        c.B = 2;
        c.layout = 3;
        c.mask = MASK_BH;
        c.mt = F16;
        c.mask_inf = 1;
        c.q_off = 12;
        c.k_off = 5;
        c.tile = 1;
        add(c);
    }
    /* seeded random shapes. Few of them: on lavapipe each new combination of head dims,
     * dtypes and mask kind is a shader variant that compiles in 30-80 s when Mesa's shader
     * cache is cold (16 shapes took over 10 minutes on a fresh machine's CI run) */
    rng_s = 20261201;
    const int64_t dims[] = {8, 16, 40, 64, 80, 128, 256};
    for (int i = 0; i < 5; i++) {
        int64_t Hk = 1 + (int64_t)(rnd() % 3), g = 1 + (int64_t)(rnd() % 4);
        bool dec = rnd() % 2;
        struct fcase c = base(dims[rnd() % 7], Hk * g, Hk, dec ? 1 + (int64_t)(rnd() % 2)
                                                              : 1 + (int64_t)(rnd() % 150),
                              1 + (int64_t)(rnd() % 600), 500 + (uint64_t)i);
        if (rnd() % 3 == 0)
            c.Dv = dims[rnd() % 7];
        c.B = 1 + (int64_t)(rnd() % 2);
        c.qt = rnd() % 2 ? F16 : POSENC_DTYPE_F32;
        c.kt = rnd() % 2 ? F16 : POSENC_DTYPE_F32;
        c.vt = rnd() % 2 ? F16 : POSENC_DTYPE_F32;
        c.ot = rnd() % 2 ? F16 : POSENC_DTYPE_F32;
        c.causal = rnd() % 2;
        c.q_off = (int)(rnd() % 40);
        c.k_off = (int)(rnd() % 40);
        c.enc = (int)(rnd() % 4);
        c.alibi_sym = c.enc == ENC_ALIBI && !c.causal && rnd() % 2;
        c.mask = (int)(rnd() % 5);
        c.mt = rnd() % 2 ? F16 : POSENC_DTYPE_F32;
        c.tt = rnd() % 2 ? F16 : POSENC_DTYPE_F32;
        c.mask_inf = c.mask ? (int)(rnd() % 3) : 0;
        c.mslopes = c.mask && rnd() % 3 == 0;
        c.sinks = rnd() % 4 == 0;
        c.softcap = rnd() % 4 == 0 ? 4.0f : 0.0f;
        c.layout = (int)(rnd() % 4);
        add(c);
    }
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "attention_fused_vk");
    if (rc >= 0)
        return rc;
    build_cases();
    struct CMUnitTest *tests = calloc(n_cases, sizeof *tests);
    assert_non_null(tests);
    for (size_t i = 0; i < n_cases; i++) {
        tests[i].name = cases[i].name;
        tests[i].test_func = run_case;
        tests[i].initial_state = &cases[i];
    }
    rc = th_run("attention_fused_vk", tests, n_cases);
    free(tests);
    th_fini();
    return rc;
}
