/*
 * test_softmax.c - posenc_softmax (ggml's GGML_OP_SOFT_MAX) on one backend (--backend NAME).
 *
 *  - seeded random cases (x in [-4, 4], masks in [-3, 0] with some -inf keys, sinks in
 *    [-2, 4]) over odd sizes (n = 1, 7, 1000, 70001, 643251: rows much longer than a
 *    work-group), f32 and f16 for x, dst and mask, in place, a mask with more rows than x
 *    (ggml's padded KQ mask), mask broadcast over heads and batches with ggml's modulo
 *    rule (head h reads plane h % mask->ne[2]), max_bias 0 and 8 with head counts that are
 *    not powers of two, sinks, fully -inf-masked rows (NaN without a sink, as ggml; zeros
 *    with one), negative scale, and non-contiguous views (padded, permuted, every other
 *    element) of x, mask and dst. Every case is compared element by element with the CPU
 *    reference context (th.ref) AND with values computed here in double from the stored
 *    inputs, and the bytes of dst's buffer outside the view must be unchanged.
 *  - the same cases on a second context with POSENC_MAX_BINDING=8192, so that src/split.c
 *    cuts them over rows, heads and batches (slopes, sinks and mask planes must follow the
 *    global head).
 *  - CPU only: the fast path on 3 threads with POSENC_CPU_MIN_SPLIT=1 (every case split).
 *  - bad input: NULL x / dst, shapes, dtypes (mask i32, sinks f16), sinks length, params
 *    (reserved, flags, max_bias < 0, scale not finite), overlaps: the exact status, a
 *    message naming the argument, and dst untouched.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tolerances ---------------------------------------------------------------------- */

/*
 * Against the exact (double) softmax of the stored inputs: |got - want| <= rel*|want| + abs.
 * f32 dst: the GPU backends and the CPU fast path form v = scale*x + slope*mask in f32
 * (ggml does too): |v| <= ~20 here, so v and v - m carry up to ~2 * 2^-24 * 20 = 2.4e-6
 * absolute error, which exp turns into the same relative error; Vulkan's exp is only
 * bounded by 3 + 2|x| ulp (|x| <= ~30: 63 ulp = 3.8e-6); the compensated f32 sums add a few
 * ulp. 3e-5 covers that with margin, abs 1e-30 only admits values that underflow anyway.
 * f16 dst: the f32 error plus one rounding to f16 (2^-11 = 4.88e-4 relative for normal
 * values, half the subnormal spacing 2^-25 = 3e-8 absolute below 2^-14).
 */
#define TOL_F32_REL 3e-5
#define TOL_F32_ABS 1e-30
#define TOL_F16_REL (4.883e-4 + 3e-5)
#define TOL_F16_ABS 3e-8
/* Against th.ref (which rounds the double result once): f32 as above (the reference is
 * within 2^-24 of exact, folded into the margin); f16: both round to f16, so they may
 * differ by one f16 ulp (2^-10 = 9.77e-4 relative, 2^-24 = 6e-8 absolute for subnormals)
 * plus the f32 error. */
#define TOL_REF_F16_REL (9.766e-4 + 3e-5)
#define TOL_REF_F16_ABS 6e-8

/* ---- random numbers ------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) /* [0, 1) */
{
    return (double)(rng_next(s) >> 11) * 0x1p-53;
}

/* ---- tensor layouts on the host ------------------------------------------------------ */

enum { LAY_CONTIG = 0, LAY_PADDED = 1, LAY_PERMUTED = 2 };

struct lay {
    posenc_dtype dt;
    int64_t ne[4];
    int64_t st[4];  /* elements */
    int64_t off;    /* elements */
    size_t bytes;   /* of the whole buffer */
};

static struct lay make_lay(posenc_dtype dt, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                           int mode)
{
    struct lay l;
    memset(&l, 0, sizeof l);
    l.dt = dt;
    l.ne[0] = n0;
    l.ne[1] = n1;
    l.ne[2] = n2;
    l.ne[3] = n3;
    if (mode == LAY_CONTIG) {
        l.st[0] = 1;
        l.st[1] = n0;
        l.st[2] = n0 * n1;
        l.st[3] = n0 * n1 * n2;
    } else if (mode == LAY_PADDED) { /* rows and planes padded, view at an odd offset */
        l.off = 3;
        l.st[0] = 1;
        l.st[1] = n0 + 5;
        l.st[2] = l.st[1] * n1 + 7;
        l.st[3] = l.st[2] * n2 + 2;
    } else { /* every other element; dims 1 and 2 swapped in memory */
        l.off = 5;
        l.st[0] = 2;
        l.st[2] = 2 * n0 + 1;
        l.st[1] = l.st[2] * n2 + 3;
        l.st[3] = l.st[1] * n1 + 1;
    }
    int64_t last = l.off;
    for (int k = 0; k < 4; k++)
        last += (l.ne[k] - 1) * l.st[k];
    l.bytes = (size_t)(last + 1) * posenc_dtype_size(dt) + 16; /* 16 guard bytes after */
    return l;
}

static posenc_tensor lay_tensor(const struct lay *l, posenc_buffer *b)
{
    const size_t es = posenc_dtype_size(l->dt);
    posenc_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = b;
    t.dtype = l->dt;
    t.offset = (size_t)l->off * es;
    for (int k = 0; k < 4; k++) {
        t.ne[k] = l->ne[k];
        t.nb[k] = l->st[k] * (int64_t)es;
    }
    return t;
}

static int64_t lay_at(const struct lay *l, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return l->off + i0 * l->st[0] + i1 * l->st[1] + i2 * l->st[2] + i3 * l->st[3];
}

static double get_el(const unsigned char *img, posenc_dtype dt, int64_t e)
{
    if (dt == POSENC_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, img + (size_t)e * 2, 2);
        return posenc_f16_to_f32(h);
    }
    float f;
    memcpy(&f, img + (size_t)e * 4, 4);
    return f;
}

static void set_el(unsigned char *img, posenc_dtype dt, int64_t e, double v)
{
    if (dt == POSENC_DTYPE_F16) {
        uint16_t h = posenc_f32_to_f16((float)v);
        memcpy(img + (size_t)e * 2, &h, 2);
    } else {
        float f = (float)v;
        memcpy(img + (size_t)e * 4, &f, 4);
    }
}

/* Byte image of a buffer: a filler pattern everywhere (finite as f32 and f16: 0x3c3c). */
static unsigned char *new_img(size_t bytes)
{
    unsigned char *p = malloc(bytes);
    assert_non_null(p);
    memset(p, 0x3c, bytes);
    return p;
}

/* ---- cases --------------------------------------------------------------------------- */

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16

struct sm_case {
    const char *name;
    int64_t n, rows, H, B;
    posenc_dtype xt, dt;
    int mask;              /* 0 none, 1 f32, 2 f16 */
    int64_t m_extra_rows;  /* mask->ne[1] = rows + this */
    int64_t m2, m3;        /* mask->ne[2], ne[3]; 0 = H, B */
    int sinks;
    float scale, max_bias;
    int inplace;
    int x_lay, m_lay, d_lay;
    int masked_rows;       /* every third row (i1 % 3 == 1) entirely -inf in the mask */
    double inf_frac;       /* fraction of -inf mask values elsewhere */
};

static const struct sm_case cases[] = {
    /* name                     n      rows H  B   x    dst  mask xr m2 m3 sk scale  mb   ip lays    mr  inf */
    {"plain f32 7x5x4x3",       7,     5,   4, 3,  F32, F32, 0,   0, 0, 0, 0, 0.0f,  0,   0, 0,0,0,  0,  0},
    {"n=1",                     1,     4,   3, 2,  F32, F32, 0,   0, 0, 0, 0, 1.0f,  0,   0, 0,0,0,  0,  0},
    {"n=1 mask sinks mb8",      1,     4,   3, 2,  F32, F32, 1,   0, 0, 0, 1, 1.0f,  8,   0, 0,0,0,  0,  0},
    {"n=1000 mask f32 s0.1",    1000,  3,   2, 1,  F32, F32, 1,   0, 0, 0, 0, 0.1f,  0,   0, 0,0,0,  0,  0.1},
    {"n=1000 mask f16 mb8 H5",  1000,  3,   5, 1,  F32, F32, 2,   0, 0, 0, 0, 1.0f,  8,   0, 0,0,0,  0,  0.1},
    {"n=70001 f16 mask sinks mb8 H3", 70001, 2, 3, 1, F32, F32, 2, 0, 0, 0, 1, 0.1f, 8,   0, 0,0,0,  0,  0.05},
    {"n=643251 (ggml) rows 3",  643251, 3,  1, 1,  F32, F32, 0,   0, 0, 0, 0, 1.0f,  0,   0, 0,0,0,  0,  0},
    {"f16 x f16 dst mask f16 bcast", 33, 9, 6, 2,  F16, F16, 2,   0, 1, 1, 0, 0.5f,  8,   0, 0,0,0,  0,  0.2},
    {"x f32 dst f16",           129,   4,   2, 2,  F32, F16, 1,   0, 0, 0, 1, 1.0f,  0,   0, 0,0,0,  0,  0.1},
    {"x f16 dst f32",           130,   4,   2, 2,  F16, F32, 2,   0, 0, 0, 1, 1.0f,  0,   0, 0,0,0,  0,  0.1},
    {"mask modulo nr23 {3,1}",  16,    16,  3, 3,  F32, F32, 1,   0, 1, 3, 0, 1.0f,  0,   0, 0,0,0,  0,  0.1},
    {"mask modulo nr23 {2,3}",  15,    15,  2, 3,  F32, F32, 2,   0, 1, 1, 1, 0.1f,  8,   0, 0,0,0,  0,  0.1},
    {"mask planes h%2 of H6",   17,    3,   6, 4,  F32, F32, 1,   0, 2, 2, 1, 1.0f,  8,   0, 0,0,0,  0,  0.1},
    {"mask extra rows (KQ pad)", 31,   5,   4, 1,  F32, F32, 2,   27, 0, 0, 0, 0.125f, 0, 0, 0,0,0,  0,  0.3},
    {"mb8 H12 (m0 and m1)",     64,    2,   12, 1, F32, F32, 1,   0, 1, 1, 1, 1.0f,  8,   0, 0,0,0,  0,  0},
    {"in place f32",            300,   7,   3, 2,  F32, F32, 1,   0, 0, 0, 1, 0.1f,  8,   1, 0,0,0,  0,  0.1},
    {"in place f16",            301,   7,   3, 2,  F16, F16, 2,   0, 1, 1, 1, 1.0f,  0,   1, 0,0,0,  0,  0.1},
    {"in place f16 padded",     64,    3,   2, 2,  F16, F16, 2,   0, 0, 0, 0, 1.0f,  0,   1, 1,0,1,  0,  0.1},
    {"views x perm m pad d pad", 37,   6,   4, 2,  F32, F32, 1,   2, 2, 1, 1, 0.1f,  8,   0, 2,1,1,  0,  0.1},
    {"views f16 x pad m perm d perm", 40, 5, 3, 2, F16, F16, 2,   0, 3, 2, 1, 1.0f,  0,   0, 1,2,2,  0,  0.1},
    {"views long rows perm",    5000,  3,   2, 1,  F32, F16, 2,   1, 1, 1, 0, 1.0f,  8,   0, 2,2,1,  0,  0.1},
    {"masked rows no sinks -> NaN", 50, 6,  3, 1,  F32, F32, 1,   0, 0, 0, 0, 1.0f,  0,   0, 0,0,0,  1,  0.2},
    {"masked rows sinks -> 0",  50,    6,   3, 1,  F32, F16, 2,   0, 1, 1, 1, 1.0f,  8,   0, 0,0,0,  1,  0.2},
    {"masked rows long",        4099,  4,   2, 1,  F16, F32, 1,   0, 1, 1, 0, 1.0f,  0,   0, 0,0,0,  1,  0.5},
    {"negative scale sinks only", 100, 4,   5, 1,  F32, F32, 0,   0, 0, 0, 1, -0.5f, 0,   0, 0,0,0,  0,  0},
    {"ggml inplace 16x2x32 mask f16 sinks", 16, 2, 32, 1, F32, F32, 2, 0, 0, 0, 1, 0.1f, 0, 1, 0,0,0, 0, 0},
    {"ggml 200001-like mb8", 200001, 2, 3, 1, F32, F32, 1,   0, 0, 0, 1, 0.1f,  8,   0, 0,0,0,  0,  0},
};

struct sm_data {
    struct lay xl, ml, dl;
    int64_t n_sinks;
    unsigned char *x_img, *m_img, *d_img; /* inputs and dst's initial bytes */
    float *sinks;
};

static posenc_dtype mask_dt(const struct sm_case *c)
{
    return c->mask == 2 ? F16 : F32;
}

static void make_data(const struct sm_case *c, uint64_t seed, struct sm_data *d)
{
    memset(d, 0, sizeof *d);
    uint64_t s = seed;
    d->xl = make_lay(c->xt, c->n, c->rows, c->H, c->B, c->x_lay);
    d->x_img = new_img(d->xl.bytes);
    for (int64_t i3 = 0; i3 < c->B; i3++)
        for (int64_t i2 = 0; i2 < c->H; i2++)
            for (int64_t i1 = 0; i1 < c->rows; i1++)
                for (int64_t i0 = 0; i0 < c->n; i0++)
                    set_el(d->x_img, c->xt, lay_at(&d->xl, i0, i1, i2, i3),
                           8.0 * rng_unit(&s) - 4.0);
    if (c->mask) {
        const int64_t m2 = c->m2 ? c->m2 : c->H, m3 = c->m3 ? c->m3 : c->B;
        const int64_t mr = c->rows + c->m_extra_rows;
        d->ml = make_lay(mask_dt(c), c->n, mr, m2, m3, c->m_lay);
        d->m_img = new_img(d->ml.bytes);
        for (int64_t i3 = 0; i3 < m3; i3++)
            for (int64_t i2 = 0; i2 < m2; i2++)
                for (int64_t i1 = 0; i1 < mr; i1++)
                    for (int64_t i0 = 0; i0 < c->n; i0++) {
                        double v = -3.0 * rng_unit(&s);
                        if (rng_unit(&s) < c->inf_frac || (c->masked_rows && i1 % 3 == 1))
                            v = -INFINITY;
                        set_el(d->m_img, mask_dt(c), lay_at(&d->ml, i0, i1, i2, i3), v);
                    }
    }
    if (c->sinks) {
        d->n_sinks = c->H;
        d->sinks = malloc((size_t)c->H * sizeof(float));
        assert_non_null(d->sinks);
        for (int64_t h = 0; h < c->H; h++)
            d->sinks[h] = (float)(6.0 * rng_unit(&s) - 2.0);
    }
    d->dl = c->inplace ? d->xl : make_lay(c->dt, c->n, c->rows, c->H, c->B, c->d_lay);
    d->d_img = new_img(d->dl.bytes);
    if (c->inplace)
        memcpy(d->d_img, d->x_img, d->dl.bytes);
}

static void free_data(struct sm_data *d)
{
    free(d->x_img);
    free(d->m_img);
    free(d->d_img);
    free(d->sinks);
}

/* Run the case on ctx; returns the status and, on success, dst's whole buffer image. */
static posenc_status run_on(posenc_context *ctx, const struct sm_case *c, const struct sm_data *d,
                            unsigned char **out_img)
{
    posenc_buffer *xb = th_upload(ctx, c->inplace ? d->d_img : d->x_img, d->xl.bytes);
    posenc_buffer *mb = c->mask ? th_upload(ctx, d->m_img, d->ml.bytes) : NULL;
    posenc_buffer *sb = c->sinks ? th_upload(ctx, d->sinks, (size_t)d->n_sinks * 4) : NULL;
    posenc_buffer *db = c->inplace ? xb : th_upload(ctx, d->d_img, d->dl.bytes);
    const posenc_tensor xt = lay_tensor(&d->xl, xb);
    const posenc_tensor dt = lay_tensor(&d->dl, db);
    posenc_tensor mt, st;
    if (c->mask)
        mt = lay_tensor(&d->ml, mb);
    if (c->sinks)
        st = posenc_tensor_contiguous(sb, 0, F32, d->n_sinks, 1, 1, 1);
    struct posenc_softmax_params p;
    memset(&p, 0, sizeof p);
    p.scale = c->scale;
    p.max_bias = c->max_bias;
    posenc_status status = posenc_softmax(ctx, &xt, c->mask ? &mt : NULL,
                                          c->sinks ? &st : NULL, &dt, &p);
    *out_img = status == POSENC_OK ? th_download(db) : NULL;
    if (status != POSENC_OK)
        fprintf(stderr, "%s: %s\n", c->name, posenc_context_last_error(ctx));
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&mb);
    posenc_buffer_destroy(&sb);
    if (!c->inplace)
        posenc_buffer_destroy(&db);
    return status;
}

/* The exact softmax of the stored inputs, in double, written independently of the
 * library: want[((i3*H + i2)*rows + i1)*n + i0]. */
static double *expected(const struct sm_case *c, const struct sm_data *d)
{
    const int64_t n = c->n, total = n * c->rows * c->H * c->B;
    double *want = malloc((size_t)total * sizeof(double));
    assert_non_null(want);
    /* ggml's slopes: m0 = 2^(-max_bias/n2), m1 = 2^(-max_bias/2/n2), n2 = 2^floor(log2 H) */
    const double scale = c->scale == 0.0f ? 1.0 : c->scale; /* 0 means 1 */
    int64_t n2 = 1;
    while (n2 * 2 <= c->H)
        n2 *= 2;
    for (int64_t i3 = 0; i3 < c->B; i3++)
        for (int64_t i2 = 0; i2 < c->H; i2++) {
            double slope = 1.0;
            if (c->max_bias > 0.0f)
                slope = i2 < n2 ? pow(pow(2.0, -c->max_bias / (double)n2), (double)(i2 + 1))
                                : pow(pow(2.0, -c->max_bias / 2.0 / (double)n2),
                                      (double)(2 * (i2 - n2) + 1));
            const double sink = c->sinks ? d->sinks[i2] : -INFINITY;
            for (int64_t i1 = 0; i1 < c->rows; i1++) {
                double *w = want + ((i3 * c->H + i2) * c->rows + i1) * n;
                double m = sink;
                for (int64_t k = 0; k < n; k++) {
                    double v = scale * get_el(d->x_img, c->xt, lay_at(&d->xl, k, i1, i2, i3));
                    if (c->mask)
                        v += slope * get_el(d->m_img, mask_dt(c),
                                            lay_at(&d->ml, k, i1, i2 % d->ml.ne[2],
                                                   i3 % d->ml.ne[3]));
                    w[k] = v;
                    m = v > m ? v : m;
                }
                if (m == -INFINITY) { /* ggml: exp(-inf - -inf) = NaN */
                    for (int64_t k = 0; k < n; k++)
                        w[k] = NAN;
                    continue;
                }
                double sum = c->sinks ? exp(sink - m) : 0.0;
                for (int64_t k = 0; k < n; k++)
                    sum += exp(w[k] - m);
                for (int64_t k = 0; k < n; k++)
                    w[k] = exp(w[k] - m) / sum;
            }
        }
    return want;
}

static int close_to(double got, double want, double rel, double abs_tol)
{
    if (isnan(want))
        return isnan(got);
    return fabs(got - want) <= rel * fabs(want) + abs_tol;
}

/* Compare dut's result with the exact values and with the reference's; check the bytes of
 * dst's buffer outside the view against the initial image. */
static void compare(const struct sm_case *c, const struct sm_data *d, const unsigned char *got,
                    const unsigned char *ref, const double *want, const char *label)
{
    const int64_t n = c->n;
    const struct lay *dl = &d->dl;
    const posenc_dtype dt = dl->dt;
    const size_t es = posenc_dtype_size(dt);
    const double rel = dt == F16 ? TOL_F16_REL : TOL_F32_REL;
    const double abs_tol = dt == F16 ? TOL_F16_ABS : TOL_F32_ABS;
    const double ref_rel = dt == F16 ? TOL_REF_F16_REL : TOL_F32_REL;
    const double ref_abs = dt == F16 ? TOL_REF_F16_ABS : TOL_F32_ABS;
    unsigned char *covered = calloc(dl->bytes, 1);
    assert_non_null(covered);
    int64_t bad = 0, n_nan = 0;
    for (int64_t i3 = 0; i3 < c->B; i3++)
        for (int64_t i2 = 0; i2 < c->H; i2++)
            for (int64_t i1 = 0; i1 < c->rows; i1++)
                for (int64_t k = 0; k < n; k++) {
                    const int64_t e = lay_at(dl, k, i1, i2, i3);
                    memset(covered + (size_t)e * es, 1, es);
                    const double w = want[((i3 * c->H + i2) * c->rows + i1) * n + k];
                    const double g = get_el(got, dt, e), r = get_el(ref, dt, e);
                    n_nan += isnan(w);
                    if (!close_to(g, w, rel, abs_tol) || !close_to(g, r, ref_rel, ref_abs) ||
                        isnan(g) != isnan(r)) {
                        if (bad++ < 5)
                            fprintf(stderr,
                                    "%s [%s]: (%lld, %lld, %lld, %lld): got %.9g, exact %.9g, "
                                    "reference %.9g\n",
                                    c->name, label, (long long)k, (long long)i1, (long long)i2,
                                    (long long)i3, g, w, r);
                    }
                }
    if (c->masked_rows && !c->sinks && n_nan == 0)
        fail_msg("%s: no fully masked row was produced", c->name);
    int64_t guard_bad = 0;
    for (size_t i = 0; i < dl->bytes; i++)
        if (!covered[i] && got[i] != d->d_img[i])
            guard_bad++;
    free(covered);
    if (bad || guard_bad)
        fail_msg("%s [%s]: %lld elements out of tolerance, %lld bytes outside dst changed",
                 c->name, label, (long long)bad, (long long)guard_bad);
}

static void run_case_on(posenc_context *ctx, const struct sm_case *c, const char *label)
{
    struct sm_data d;
    make_data(c, 0x5eed0000u + (uint64_t)(c - cases) * 7919u, &d);
    unsigned char *got = NULL, *ref = NULL;
    posenc_status st_ref = run_on(th.ref, c, &d, &ref);
    posenc_status st = run_on(ctx, c, &d, &got);
    th_check_warnings();
    assert_int_equal(st_ref, POSENC_OK);
    if (st != POSENC_OK)
        fail_msg("%s [%s]: %s", c->name, label, posenc_status_string(st));
    double *want = expected(c, &d);
    compare(c, &d, got, ref, want, label);
    free(want);
    free(got);
    free(ref);
    free_data(&d);
}

static void test_case(void **state)
{
    run_case_on(th.dut, *state, "dut");
}

/* ---- forced binding limit: the same cases cut by src/split.c --------------------------- */

#define FORCED_LIMIT 8192
static posenc_context *limited;
static int n_cut;

static void limited_log(posenc_log_level level, const char *msg, void *user)
{
    if (level == POSENC_LOG_DEBUG && strstr(msg, "softmax: ") && strstr(msg, " launches ("))
        n_cut++;
    th_log(level, msg, user);
}

static void test_limited(void **state)
{
    (void)state;
    setenv("POSENC_MAX_BINDING", "8192", 1);
    struct posenc_context_params p;
    memset(&p, 0, sizeof p);
    p.backend = th.kind;
    p.flags = POSENC_CONTEXT_DEBUG;
    p.log_fn = limited_log;
    p.log_level = POSENC_LOG_DEBUG;
    char err[256];
    posenc_status st = posenc_context_create(&p, &limited, err, sizeof err);
    unsetenv("POSENC_MAX_BINDING");
    if (st != POSENC_OK)
        fail_msg("context with POSENC_MAX_BINDING: %s", err);
    /* cases whose rows fit 8 KiB (n * 4 bytes * stride); the others must be refused */
    int ran = 0, refused = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct sm_case *c = &cases[i];
        if (c->n > 1000) { /* one row of x, dst or mask is over the limit */
            struct sm_data d;
            make_data(c, 1, &d);
            unsigned char *got = NULL;
            posenc_status s = run_on(limited, c, &d, &got);
            th_check_warnings();
            if (s != POSENC_ERR_UNSUPPORTED ||
                !strstr(posenc_context_last_error(limited), "single rows"))
                fail_msg("%s: status %s (%s), want UNSUPPORTED naming single rows", c->name,
                         posenc_status_string(s), posenc_context_last_error(limited));
            free(got);
            free_data(&d);
            refused++;
            continue;
        }
        run_case_on(limited, c, "POSENC_MAX_BINDING=8192");
        ran++;
    }
    posenc_context_destroy(&limited);
    th_check_warnings();
    /* CPU has no binding limit of its own, but POSENC_MAX_BINDING applies to every backend */
    if (n_cut < 5)
        fail_msg("only %d softmax calls were cut into several launches (%d ran, %d refused)",
                 n_cut, ran, refused);
}

/* ---- CPU fast path split over threads ------------------------------------------------- */

/* CPU only: a context with 3 threads and POSENC_CPU_MIN_SPLIT=1, so that even small ops are
 * split over every thread in uneven chunks, runs every case against the reference (the
 * default dut context may run small cases on one thread). */
static void test_cpu_threads(void **state)
{
    (void)state;
    if (th.kind != POSENC_BACKEND_CPU)
        skip();
    setenv("POSENC_CPU_MIN_SPLIT", "1", 1);
    struct posenc_context_params p;
    memset(&p, 0, sizeof p);
    p.backend = POSENC_BACKEND_CPU;
    p.n_threads = 3;
    p.log_fn = th_log;
    p.log_level = POSENC_LOG_WARN;
    posenc_context *ctx = NULL;
    char err[256];
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof err);
    unsetenv("POSENC_CPU_MIN_SPLIT");
    if (st != POSENC_OK)
        fail_msg("3-thread CPU context: %s", err);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case_on(ctx, &cases[i], "3 threads, POSENC_CPU_MIN_SPLIT=1");
    posenc_context_destroy(&ctx);
}

/* ---- bad input ----------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    enum { N = 8, R = 3, H = 4, B = 2, NE = N * R * H * B };
    float xv[NE], dv[NE], mv[NE * 2];
    for (int i = 0; i < NE; i++) {
        xv[i] = (float)(i % 13) * 0.25f;
        dv[i] = 1234.5f + (float)i;
    }
    for (int i = 0; i < NE * 2; i++)
        mv[i] = -(float)(i % 5);
    const float skv[H] = {0.5f, -1.0f, 2.0f, 0.0f};
    posenc_buffer *xb = th_upload(th.dut, xv, sizeof xv);
    posenc_buffer *db = th_upload(th.dut, dv, sizeof dv);
    posenc_buffer *mb = th_upload(th.dut, mv, sizeof mv);
    posenc_buffer *sb = th_upload(th.dut, skv, sizeof skv);
    const posenc_tensor x = posenc_tensor_contiguous(xb, 0, F32, N, R, H, B);
    const posenc_tensor d = posenc_tensor_contiguous(db, 0, F32, N, R, H, B);
    const posenc_tensor m = posenc_tensor_contiguous(mb, 0, F32, N, R, H, B);
    const posenc_tensor sk = posenc_tensor_contiguous(sb, 0, F32, H, 1, 1, 1);
    struct posenc_softmax_params p;
    posenc_tensor t;

    th_expect(posenc_softmax(NULL, &x, &m, &sk, &d, NULL), POSENC_ERR_INVALID_ARGUMENT, NULL,
              "NULL ctx");
    th_expect(posenc_softmax(th.dut, NULL, &m, &sk, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "x is NULL", "NULL x");
    th_expect(posenc_softmax(th.dut, &x, &m, &sk, NULL, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "dst is NULL", "NULL dst");
    t = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_I32, N, R, H, B);
    th_expect(posenc_softmax(th.dut, &t, NULL, NULL, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "x->dtype", "x i32");
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_I32, N, R, H, B);
    th_expect(posenc_softmax(th.dut, &x, NULL, NULL, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "dst->dtype", "dst i32");
    t = posenc_tensor_contiguous(db, 0, F32, N, R, H, 1);
    th_expect(posenc_softmax(th.dut, &x, NULL, NULL, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "dst->ne", "dst shape");
    t = posenc_tensor_contiguous(mb, 0, POSENC_DTYPE_I32, N, R, H, B);
    th_expect(posenc_softmax(th.dut, &x, &t, NULL, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "mask->dtype = i32", "mask i32");
    t = posenc_tensor_contiguous(mb, 0, F32, N + 1, R, H, B);
    th_expect(posenc_softmax(th.dut, &x, &t, NULL, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "mask->ne[0] = 9", "mask ne0");
    t = posenc_tensor_contiguous(mb, 0, F32, N, R - 1, H, B);
    th_expect(posenc_softmax(th.dut, &x, &t, NULL, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "mask->ne[1] = 2", "mask ne1 < rows");
    t = posenc_tensor_contiguous(mb, 0, F32, N, R, 3, 1);
    th_expect(posenc_softmax(th.dut, &x, &t, NULL, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "mask->ne[2] = 3 does not divide x->ne[2] = 4", "mask ne2");
    t = posenc_tensor_contiguous(mb, 0, F32, N, R, 1, 3);
    th_expect(posenc_softmax(th.dut, &x, &t, NULL, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "mask->ne[3] = 3 does not divide x->ne[3] = 2", "mask ne3");
    t = posenc_tensor_contiguous(mb, 0, F32, N, R, 0, 1);
    th_expect(posenc_softmax(th.dut, &x, &t, NULL, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "mask->ne[2] = 0", "mask ne2 0");
    t = posenc_tensor_contiguous(sb, 0, F32, H - 1, 1, 1, 1);
    th_expect(posenc_softmax(th.dut, &x, NULL, &t, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "sinks->ne", "sinks length");
    t = posenc_tensor_contiguous(sb, 0, F32, H / 2, 2, 1, 1);
    th_expect(posenc_softmax(th.dut, &x, NULL, &t, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "sinks->ne", "sinks 2-D");
    t = posenc_tensor_contiguous(sb, 0, F16, H, 1, 1, 1);
    th_expect(posenc_softmax(th.dut, &x, NULL, &t, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "sinks->dtype = f16", "sinks f16");
    t = posenc_tensor_contiguous(sb, 0, F32, H * 4, 1, 1, 1); /* runs past its buffer */
    th_expect(posenc_softmax(th.dut, &x, NULL, &t, &d, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "sinks", "sinks past buffer");

    memset(&p, 0, sizeof p);
    p.reserved[2] = 1;
    th_expect(posenc_softmax(th.dut, &x, &m, &sk, &d, &p), POSENC_ERR_INVALID_ARGUMENT,
              "params->reserved[2]", "reserved");
    memset(&p, 0, sizeof p);
    p.flags = 4;
    th_expect(posenc_softmax(th.dut, &x, &m, &sk, &d, &p), POSENC_ERR_INVALID_ARGUMENT,
              "params->flags", "flags");
    memset(&p, 0, sizeof p);
    p.max_bias = -1.0f;
    th_expect(posenc_softmax(th.dut, &x, &m, &sk, &d, &p), POSENC_ERR_INVALID_ARGUMENT,
              "params->max_bias", "max_bias < 0");
    p.max_bias = NAN;
    th_expect(posenc_softmax(th.dut, &x, &m, &sk, &d, &p), POSENC_ERR_INVALID_ARGUMENT,
              "params->max_bias", "max_bias NaN");
    memset(&p, 0, sizeof p);
    p.scale = INFINITY;
    th_expect(posenc_softmax(th.dut, &x, &m, &sk, &d, &p), POSENC_ERR_INVALID_ARGUMENT,
              "params->scale", "scale inf");

    /* overlaps: dst half over x, dst over the mask, dst over the sinks */
    t = posenc_tensor_contiguous(xb, 4 * 4, F32, N, R, H, B - 1);
    posenc_tensor x1 = posenc_tensor_contiguous(xb, 0, F32, N, R, H, B - 1);
    th_expect(posenc_softmax(th.dut, &x1, NULL, NULL, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "overlaps", "dst partly over x");
    t = posenc_tensor_contiguous(mb, 0, F32, N, R, H, B);
    posenc_tensor m2 = posenc_tensor_contiguous(mb, 0, F32, N, R, H, B);
    th_expect(posenc_softmax(th.dut, &x, &m2, NULL, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "mask overlaps dst", "dst over mask");
    t = posenc_tensor_contiguous(sb, 0, F32, H, 1, 1, 1);
    posenc_tensor d1 = posenc_tensor_contiguous(sb, 0, F32, 1, 1, H, 1);
    posenc_tensor x2 = posenc_tensor_contiguous(xb, 0, F32, 1, 1, H, 1);
    th_expect(posenc_softmax(th.dut, &x2, NULL, &t, &d1, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "sinks overlaps dst", "dst over sinks");
    /* a dst that overlaps itself */
    t = d;
    t.nb[1] = 4;
    th_expect(posenc_softmax(th.dut, &x, NULL, NULL, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
              "dst->nb", "dst self-overlap");

    /* dst untouched by every refusal above */
    float *after = th_download(db);
    assert_memory_equal(after, dv, sizeof dv);
    free(after);
    float *sk_after = th_download(sb);
    assert_memory_equal(sk_after, skv, sizeof skv);
    free(sk_after);

    /* the defaults (NULL params) and an empty x are fine; empty writes nothing */
    t = posenc_tensor_contiguous(xb, 0, F32, N, 0, H, B);
    posenc_tensor de = posenc_tensor_contiguous(db, 0, F32, N, 0, H, B);
    th_expect(posenc_softmax(th.dut, &t, &m, &sk, &de, NULL), POSENC_OK, NULL, "empty");
    after = th_download(db);
    assert_memory_equal(after, dv, sizeof dv);
    free(after);
    th_expect(posenc_softmax(th.dut, &x, &m, &sk, &d, NULL), POSENC_OK, NULL, "defaults");
    after = th_download(db);
    double row_sum = 0.0;
    for (int k = 0; k < N; k++)
        row_sum += after[k];
    /* row 0 of head 0 sums to 1 - p(sink), here 0 < sum < 1 */
    if (!(row_sum > 0.0 && row_sum < 1.0))
        fail_msg("defaults: row 0 sums to %g", row_sum);
    free(after);

    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&mb);
    posenc_buffer_destroy(&sb);
    th_check_warnings();
}

/* scale = 0 means 1 (ggml's default): the same bytes as scale = 1. */
static void test_scale_default(void **state)
{
    (void)state;
    enum { N = 19, R = 2 };
    float xv[N * R];
    for (int i = 0; i < N * R; i++)
        xv[i] = sinf((float)i);
    posenc_buffer *xb = th_upload(th.dut, xv, sizeof xv);
    posenc_buffer *a = th_upload(th.dut, xv, sizeof xv);
    posenc_buffer *b = th_upload(th.dut, xv, sizeof xv);
    const posenc_tensor x = posenc_tensor_contiguous(xb, 0, F32, N, R, 1, 1);
    const posenc_tensor ta = posenc_tensor_contiguous(a, 0, F32, N, R, 1, 1);
    const posenc_tensor tb = posenc_tensor_contiguous(b, 0, F32, N, R, 1, 1);
    struct posenc_softmax_params p;
    memset(&p, 0, sizeof p);
    assert_int_equal(posenc_softmax(th.dut, &x, NULL, NULL, &ta, &p), POSENC_OK);
    p.scale = 1.0f;
    assert_int_equal(posenc_softmax(th.dut, &x, NULL, NULL, &tb, &p), POSENC_OK);
    float *ra = th_download(a), *rb = th_download(b);
    assert_memory_equal(ra, rb, sizeof xv);
    free(ra);
    free(rb);
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&a);
    posenc_buffer_destroy(&b);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "softmax");
    if (rc >= 0)
        return rc;
    const size_t n_cases = sizeof cases / sizeof cases[0];
    struct CMUnitTest *tests = calloc(n_cases + 4, sizeof *tests);
    assert_non_null(tests);
    for (size_t i = 0; i < n_cases; i++) {
        tests[i].name = cases[i].name;
        tests[i].test_func = test_case;
        tests[i].initial_state = (void *)&cases[i];
    }
    tests[n_cases] = (struct CMUnitTest)cmocka_unit_test(test_bad_input);
    tests[n_cases + 1] = (struct CMUnitTest)cmocka_unit_test(test_scale_default);
    tests[n_cases + 2] = (struct CMUnitTest)cmocka_unit_test(test_limited);
    tests[n_cases + 3] = (struct CMUnitTest)cmocka_unit_test(test_cpu_threads);
    rc = th_run("softmax", tests, n_cases + 4);
    free(tests);
    th_fini();
    return rc;
}
