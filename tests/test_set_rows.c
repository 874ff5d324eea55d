/*
 * test_set_rows.c - posenc_set_rows and posenc_rope_set_rows on one backend
 * (--backend NAME).
 *
 * posenc_set_rows (seeded random inputs, odd sizes):
 *  - every dtype pair (f32/f16 -> f32/f16) with i32 and i64 indices, on contiguous, padded
 *    + offset, permuted (dims 1 and 2 swapped in memory) and element-strided views of src,
 *    rows and dst, and index broadcast over dims 2 and 3 (e2, e3 < d2, d3): the whole dst
 *    buffer must equal the expected image bit for bit (tolerance 0: a copy, or one
 *    f32 <-> f16 conversion rounded to nearest even, which posenc_f32_to_f16 /
 *    posenc_f16_to_f32 give -- test_copy checks those against hand-computed values),
 *    rows no index names and padding bytes included; the CPU reference gives the same
 *    bytes;
 *  - indices outside [0, R) (-1, R, and for i64 2^32 + 1, whose low word is in range):
 *    OUT_OF_RANGE naming the element and its value with dst untouched, and with
 *    POSENC_ROWS_UNCHECKED those rows skipped and the others written;
 *  - two source rows naming one destination row: it holds one of them, bit for bit;
 *  - a context with POSENC_MAX_BINDING = 1024 (the op cut into many launches, the
 *    broadcast bases moving with the cuts): the same bytes.
 *
 * posenc_rope_set_rows, every mode (NORMAL, NEOX, MROPE, IMROPE, VISION), a YaRN scaling,
 * partial rotation with n_offs, BACKWARD, f32 / f16 / mixed dtypes, i32 / i64 indices
 * per batch or shared, contiguous and padded views:
 *  - bit for bit equal to posenc_rope into a tensor of dst's dtype and layout followed by
 *    posenc_set_rows, on this backend (the whole dst buffer);
 *  - against values computed here in double from the table posenc_rope_freqs gives
 *    (angle = pos * w in double, the rotation in double): every element within
 *    pc_bound_rope_f32(pc_angle_err32(angle), mscale, |xa| + |xb|) -- the accuracy
 *    contract's sin/cos error, the same at every position up to 2^24, and the rotation's
 *    roundings (src/check/check.c derives it) -- plus one f16 ulp for f16 storage
 *    (pc_bound_to_f16); dims outside the window equal x exactly;
 *  - against the CPU reference context th.ref (double, one rounding) within that bound
 *    plus one ulp of dst's dtype (the reference's own rounding);
 *  - dst rows that no index names keep their bytes; out-of-range indices as above.
 *
 * Bad input for both ops: exact statuses, a message naming the argument, output
 * untouched; the ops that do not take i64 refuse it by name.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1p-53;
}

enum layout { LAY_CONTIG, LAY_PADDED, LAY_PERMUTED, LAY_STRIDED, LAY_COUNT };
static const char *lay_name[] = {"contig", "padded", "permuted", "strided"};

/* A view of dtype dt and shape ne at the start of its own buffer region. */
struct lay {
    posenc_dtype dt;
    size_t off;      /* bytes */
    int64_t ne[4];
    int64_t nb[4];   /* bytes */
    size_t bytes;    /* the buffer size it needs */
};

static struct lay make_lay(posenc_dtype dt, const int64_t ne[4], enum layout kind)
{
    struct lay l;
    memset(&l, 0, sizeof l);
    l.dt = dt;
    const int64_t es = (int64_t)posenc_dtype_size(dt);
    int order[4] = {0, 1, 2, 3};
    int64_t pad = 0, s0 = 1, off = 0;
    if (kind == LAY_PADDED) {
        pad = 3;
        off = 5;
    } else if (kind == LAY_PERMUTED) {
        order[1] = 2;
        order[2] = 1;
        pad = 1;
        off = 2;
    } else if (kind == LAY_STRIDED) {
        s0 = 2;
        off = 1;
    }
    int64_t st = s0;
    for (int k = 0; k < 4; k++) {
        const int d = order[k];
        l.ne[d] = ne[d];
        l.nb[d] = st * es;
        st = st * (ne[d] > 0 ? ne[d] : 1) + (k < 3 ? pad : 0);
    }
    l.off = (size_t)(off * es);
    l.bytes = l.off + (size_t)(st * es) + 16;
    return l;
}

static posenc_tensor tensor_of(posenc_buffer *b, const struct lay *l)
{
    posenc_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = b;
    t.offset = l->off;
    t.dtype = l->dt;
    memcpy(t.ne, l->ne, sizeof t.ne);
    memcpy(t.nb, l->nb, sizeof t.nb);
    return t;
}

static size_t at_of(const struct lay *l, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return l->off + (size_t)(i0 * l->nb[0] + i1 * l->nb[1] + i2 * l->nb[2] + i3 * l->nb[3]);
}

static double get_f(const unsigned char *img, const struct lay *l, size_t at)
{
    if (l->dt == POSENC_DTYPE_F32) {
        float f;
        memcpy(&f, img + at, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, img + at, 2);
    return posenc_f16_to_f32(h);
}

/* A buffer image of l->bytes random bytes, with every element of the view a random value
 * in [-1, 1) of the dtype (no NaN anywhere: padding bytes are random but are compared
 * only as bytes). */
static unsigned char *random_image(const struct lay *l, uint64_t *rng)
{
    unsigned char *img = malloc(l->bytes);
    assert_non_null(img);
    for (size_t k = 0; k < l->bytes; k++)
        img[k] = (unsigned char)(rng_next(rng) >> 56);
    for (int64_t i3 = 0; i3 < l->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < l->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < l->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < l->ne[0]; i0++) {
                    const size_t at = at_of(l, i0, i1, i2, i3);
                    const float v = (float)(2.0 * rng_unit(rng) - 1.0);
                    if (l->dt == POSENC_DTYPE_F32) {
                        memcpy(img + at, &v, 4);
                    } else {
                        const uint16_t h = posenc_f32_to_f16(v);
                        memcpy(img + at, &h, 2);
                    }
                }
    return img;
}

/* Store index value v (i32 or i64) at byte `at`. */
static void put_index(unsigned char *img, posenc_dtype dt, size_t at, int64_t v)
{
    if (dt == POSENC_DTYPE_I64) {
        memcpy(img + at, &v, 8);
    } else {
        const int32_t w = (int32_t)v;
        memcpy(img + at, &w, 4);
    }
}

/* Copy src element (at byte sa of simg, layout sl) to dst element da of dimg (layout dl),
 * converted as posenc does: the same dtype copies the bytes, f32 <-> f16 rounds once. */
static void move_elem(unsigned char *dimg, const struct lay *dl, size_t da,
                      const unsigned char *simg, const struct lay *sl, size_t sa)
{
    if (sl->dt == dl->dt) {
        memcpy(dimg + da, simg + sa, posenc_dtype_size(sl->dt));
    } else if (dl->dt == POSENC_DTYPE_F16) {
        float f;
        memcpy(&f, simg + sa, 4);
        const uint16_t h = posenc_f32_to_f16(f);
        memcpy(dimg + da, &h, 2);
    } else {
        uint16_t h;
        memcpy(&h, simg + sa, 2);
        const float f = posenc_f16_to_f32(h);
        memcpy(dimg + da, &f, 4);
    }
}

/* The message of the last op a run helper made (a later buffer read clears the
 * context's). */
static char g_msg[1024];

static void save_msg(posenc_context *ctx)
{
    snprintf(g_msg, sizeof g_msg, "%s", posenc_context_last_error(ctx));
}

static void expect_msg(const char *msg, posenc_status got, posenc_status want,
                       const char *needle, const char *what)
{
    if (got != want)
        fail_msg("%s: status %s, want %s (message: %s)", what, posenc_status_string(got),
                 posenc_status_string(want), msg);
    if (needle && !strstr(msg, needle))
        fail_msg("%s: message \"%s\" does not mention \"%s\"", what, msg, needle);
}

/* For a call made just before (nothing in between touches ctx). */
static void expect_status(posenc_context *ctx, posenc_status got, posenc_status want,
                          const char *needle, const char *what)
{
    expect_msg(posenc_context_last_error(ctx), got, want, needle, what);
}

static void compare_bytes(const unsigned char *got, const unsigned char *want, size_t n,
                          const char *what)
{
    for (size_t k = 0; k < n; k++)
        if (got[k] != want[k])
            fail_msg("%s: byte %zu is 0x%02x, want 0x%02x", what, k, got[k], want[k]);
}

/* ---- posenc_set_rows -------------------------------------------------------------------- */

struct sr_case {
    posenc_dtype src_dt, dst_dt, idx_dt;
    enum layout src_lay, rows_lay, dst_lay;
    int64_t n, r, d2, d3, e2, e3, R;
    int bad;        /* 0: every index valid and distinct per column; 1: some out of range;
                     * 2: duplicates (two source rows, one destination row) */
    uint64_t seed;
};

struct sr_data {
    struct lay ls, lr, ld;
    unsigned char *src, *rows, *dst0; /* images */
    int64_t *idx;                     /* [r * e2 * e3] the index values */
};

static void sr_make(const struct sr_case *c, struct sr_data *d)
{
    uint64_t rng = c->seed;
    const int64_t ns[4] = {c->n, c->r, c->d2, c->d3};
    const int64_t nr[4] = {c->r, c->e2, c->e3, 1};
    const int64_t nd[4] = {c->n, c->R, c->d2, c->d3};
    d->ls = make_lay(c->src_dt, ns, c->src_lay);
    d->lr = make_lay(c->idx_dt, nr, c->rows_lay);
    d->ld = make_lay(c->dst_dt, nd, c->dst_lay);
    d->src = random_image(&d->ls, &rng);
    d->dst0 = random_image(&d->ld, &rng);
    d->rows = malloc(d->lr.bytes);
    d->idx = malloc((size_t)(c->r * c->e2 * c->e3) * sizeof(int64_t));
    assert_non_null(d->rows);
    assert_non_null(d->idx);
    memset(d->rows, 0x5a, d->lr.bytes);
    int64_t *perm = malloc((size_t)c->R * sizeof(int64_t));
    assert_non_null(perm);
    for (int64_t j3 = 0; j3 < c->e3; j3++)
        for (int64_t j2 = 0; j2 < c->e2; j2++) {
            /* r distinct rows of R for this column: a shuffled prefix */
            for (int64_t k = 0; k < c->R; k++)
                perm[k] = k;
            for (int64_t k = c->R - 1; k > 0; k--) {
                int64_t o = (int64_t)(rng_next(&rng) % (uint64_t)(k + 1)), t = perm[k];
                perm[k] = perm[o];
                perm[o] = t;
            }
            for (int64_t i1 = 0; i1 < c->r; i1++) {
                int64_t v = perm[i1 % c->R];
                if (c->bad == 1 && (i1 + j2 + j3) % 3 == 1) {
                    static const int64_t bad64[] = {-1, 0, (int64_t)1 << 32 | 1};
                    const int64_t k = (i1 + j2) % 3;
                    v = k == 1 ? c->R : (c->idx_dt == POSENC_DTYPE_I64 ? bad64[k] : -1);
                }
                if (c->bad == 2 && i1 == 1)
                    v = d->idx[(j3 * c->e2 + j2) * c->r + 0]; /* the same row as i1 = 0 */
                d->idx[(j3 * c->e2 + j2) * c->r + i1] = v;
                put_index(d->rows, c->idx_dt, at_of(&d->lr, i1, j2, j3, 0), v);
            }
        }
    free(perm);
}

static void sr_free(struct sr_data *d)
{
    free(d->src);
    free(d->rows);
    free(d->dst0);
    free(d->idx);
}

/* The expected dst image (rows with a bad index skipped). For duplicates, *alt gets the
 * image where the other source row landed. */
static unsigned char *sr_expected(const struct sr_case *c, const struct sr_data *d, bool last)
{
    unsigned char *img = malloc(d->ld.bytes);
    assert_non_null(img);
    memcpy(img, d->dst0, d->ld.bytes);
    for (int64_t i3 = 0; i3 < c->d3; i3++)
        for (int64_t i2 = 0; i2 < c->d2; i2++)
            for (int64_t k = 0; k < c->r; k++) {
                /* duplicates: `last` = the later source row lands, else the earlier */
                const int64_t i1 = (c->bad == 2 && !last) ? c->r - 1 - k : k;
                const int64_t v = d->idx[((i3 % c->e3) * c->e2 + (i2 % c->e2)) * c->r + i1];
                if (v < 0 || v >= c->R)
                    continue;
                for (int64_t i0 = 0; i0 < c->n; i0++)
                    move_elem(img, &d->ld, at_of(&d->ld, i0, v, i2, i3), d->src, &d->ls,
                              at_of(&d->ls, i0, i1, i2, i3));
            }
    return img;
}

/* Run case c on ctx; returns the dst image (and the status in *st). */
static unsigned char *sr_run(posenc_context *ctx, const struct sr_case *c, const struct sr_data *d,
                             uint32_t flags, posenc_status *st)
{
    posenc_buffer *bs = th_upload(ctx, d->src, d->ls.bytes);
    posenc_buffer *br = th_upload(ctx, d->rows, d->lr.bytes);
    posenc_buffer *bd = th_upload(ctx, d->dst0, d->ld.bytes);
    const posenc_tensor ts = tensor_of(bs, &d->ls), tr = tensor_of(br, &d->lr),
                        td = tensor_of(bd, &d->ld);
    const struct posenc_set_rows_params p = {.flags = flags};
    *st = posenc_set_rows(ctx, &ts, &tr, &td, &p);
    save_msg(ctx);
    unsigned char *out = th_download(bd);
    posenc_buffer_destroy(&bs);
    posenc_buffer_destroy(&br);
    posenc_buffer_destroy(&bd);
    (void)c;
    return out;
}

static void sr_check(posenc_context *ctx, const struct sr_case *c, const char *name)
{
    struct sr_data d;
    sr_make(c, &d);
    posenc_status st;
    char what[200];
    if (c->bad == 1) {
        /* checked: OUT_OF_RANGE, the element and its value named, dst untouched */
        unsigned char *got = sr_run(ctx, c, &d, 0, &st);
        snprintf(what, sizeof what, "%s (checked)", name);
        expect_msg(g_msg, st, POSENC_ERR_OUT_OF_RANGE, "rows[", what);
        compare_bytes(got, d.dst0, d.ld.bytes, what);
        free(got);
        /* unchecked: bad rows skipped */
        got = sr_run(ctx, c, &d, POSENC_ROWS_UNCHECKED, &st);
        snprintf(what, sizeof what, "%s (unchecked)", name);
        expect_msg(g_msg, st, POSENC_OK, NULL, what);
        unsigned char *want = sr_expected(c, &d, true);
        compare_bytes(got, want, d.ld.bytes, what);
        free(want);
        free(got);
    } else {
        unsigned char *got = sr_run(ctx, c, &d, 0, &st);
        expect_msg(g_msg, st, POSENC_OK, NULL, name);
        unsigned char *want = sr_expected(c, &d, true);
        if (c->bad == 2 && memcmp(got, want, d.ld.bytes) != 0) {
            /* which duplicate lands is unspecified: per destination element, either */
            unsigned char *alt = sr_expected(c, &d, false);
            const size_t es = posenc_dtype_size(c->dst_dt);
            for (size_t k = 0; k < d.ld.bytes; k += es)
                if (memcmp(got + k, want + k, es) != 0 && memcmp(got + k, alt + k, es) != 0)
                    fail_msg("%s: bytes %zu.. hold neither duplicate", name, k);
            free(alt);
        } else {
            compare_bytes(got, want, d.ld.bytes, name);
        }
        free(want);
        free(got);
    }
    sr_free(&d);
}

static const posenc_dtype sr_pairs[4][2] = {{POSENC_DTYPE_F32, POSENC_DTYPE_F32},
                                            {POSENC_DTYPE_F16, POSENC_DTYPE_F16},
                                            {POSENC_DTYPE_F32, POSENC_DTYPE_F16},
                                            {POSENC_DTYPE_F16, POSENC_DTYPE_F32}};
static const posenc_dtype sr_idx[2] = {POSENC_DTYPE_I32, POSENC_DTYPE_I64};

/* One cmocka test per (dtype pair, index dtype): *state = pair * 2 + index dtype. */
static void test_set_rows_cases(void **state)
{
    const int which = (int)(intptr_t)*state;
    const posenc_dtype(*pairs)[2] = sr_pairs;
    const posenc_dtype *idx = sr_idx;
    /* shapes: n, r, d2, d3, e2, e3, R (odd sizes; broadcast over dims 2 and 3) */
    static const int64_t shapes[][7] = {
        {13, 5, 6, 2, 3, 1, 11},
        {1, 7, 2, 3, 1, 3, 7},
        {40, 3, 4, 2, 4, 2, 9},
        {8, 4, 1, 1, 1, 1, 5},
    };
    uint64_t seed = 1000;
    int n_cases = 0;
    for (int pi = which / 2; pi == which / 2; pi++)
        for (int ii = which % 2; ii == which % 2; ii++)
            for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
                for (int bad = 0; bad < 3; bad++) {
                    struct sr_case c;
                    memset(&c, 0, sizeof c);
                    c.src_dt = pairs[pi][0];
                    c.dst_dt = pairs[pi][1];
                    c.idx_dt = idx[ii];
                    c.src_lay = (enum layout)((pi + si) % LAY_COUNT);
                    c.rows_lay = (enum layout)((ii + si + (size_t)bad) % LAY_COUNT);
                    c.dst_lay = (enum layout)((pi + 2 * si + (size_t)bad + 1) % LAY_COUNT);
                    c.n = shapes[si][0];
                    c.r = shapes[si][1];
                    c.d2 = shapes[si][2];
                    c.d3 = shapes[si][3];
                    c.e2 = shapes[si][4];
                    c.e3 = shapes[si][5];
                    c.R = shapes[si][6];
                    c.bad = bad;
                    if (bad == 2 && c.r < 2)
                        continue;
                    c.seed = seed++;
                    char name[160];
                    snprintf(name, sizeof name,
                             "set_rows %s->%s idx %s src %s rows %s dst %s [%lld,%lld,%lld,%lld] "
                             "e=%lldx%lld R=%lld%s",
                             posenc_dtype_name(c.src_dt), posenc_dtype_name(c.dst_dt),
                             posenc_dtype_name(c.idx_dt), lay_name[c.src_lay],
                             lay_name[c.rows_lay], lay_name[c.dst_lay], (long long)c.n,
                             (long long)c.r, (long long)c.d2, (long long)c.d3, (long long)c.e2,
                             (long long)c.e3, (long long)c.R,
                             bad == 1 ? " out-of-range" : bad == 2 ? " duplicates" : "");
                    sr_check(th.dut, &c, name);
                    th_check_warnings();
                    if (bad != 2) /* the reference gives the same bytes */
                        sr_check(th.ref, &c, name);
                    n_cases++;
                }
    assert_true(n_cases == 12);
}

/* The op cut into many launches (POSENC_MAX_BINDING = 1024 bytes): src of ~8 KiB, dst of
 * ~6 KiB (one dst column of 5 rows still fits), indices broadcast with e2 = 3 over d2 = 6
 * and e3 = 2, so slices start inside a period. */
static void test_set_rows_split(void **state)
{
    (void)state;
    posenc_context *ctx = th_limited_ctx(1024);
    for (int k = 0; k < 4; k++) {
        struct sr_case c = {.src_dt = k & 1 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32,
                            .dst_dt = k & 2 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32,
                            .idx_dt = k & 1 ? POSENC_DTYPE_I64 : POSENC_DTYPE_I32,
                            .src_lay = (enum layout)k, .rows_lay = LAY_CONTIG,
                            /* not permuted: there a dst column spans 2.4 KiB */
                            .dst_lay = k == 1 ? LAY_PADDED : k == 2 ? LAY_STRIDED : LAY_CONTIG,
                            /* r <= R: distinct destination rows per column (with
                             * r > R two source rows share one and which lands is
                             * unspecified: the exact comparison below would be a coin
                             * toss on a parallel device) */
                            .n = 24, .r = 5, .d2 = 6, .d3 = 2, .e2 = 3, .e3 = 2, .R = 5,
                            .seed = 77 + (uint64_t)k};
        sr_check(ctx, &c, "set_rows cut by POSENC_MAX_BINDING");
    }
    posenc_context_destroy(&ctx);
    th_check_warnings();
}

/* ---- posenc_rope_set_rows --------------------------------------------------------------- */

struct rr_case {
    const char *name;
    posenc_rope_mode mode;
    int64_t hd, H, T, B, R;
    int32_t n_dims, n_offs;
    int32_t sections[4];
    int yarn, backward;
    posenc_dtype x_dt, dst_dt, idx_dt;
    int rows_per_batch; /* rows [T, B] (else [T, 1]) */
    enum layout x_lay, dst_lay;
    int bad;            /* 1: some indices out of range */
};

static const struct rr_case rr_cases[] = {
    {"normal f32 contig", POSENC_ROPE_NORMAL, 64, 3, 7, 2, 19, 0, 0, {0}, 0, 0,
     POSENC_DTYPE_F32, POSENC_DTYPE_F32, POSENC_DTYPE_I32, 1, LAY_CONTIG, LAY_CONTIG, 0},
    {"normal f16 padded partial", POSENC_ROPE_NORMAL, 20, 3, 5, 2, 11, 12, 2, {0}, 0, 0,
     POSENC_DTYPE_F16, POSENC_DTYPE_F16, POSENC_DTYPE_I64, 0, LAY_PADDED, LAY_PADDED, 0},
    {"neox f32->f16 strided", POSENC_ROPE_NEOX, 24, 2, 6, 2, 13, 16, 0, {0}, 0, 0,
     POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_I32, 1, LAY_CONTIG, LAY_STRIDED, 0},
    {"neox f16->f32 yarn backward", POSENC_ROPE_NEOX, 64, 4, 3, 1, 8, 0, 0, {0}, 1, 1,
     POSENC_DTYPE_F16, POSENC_DTYPE_F32, POSENC_DTYPE_I64, 0, LAY_PADDED, LAY_CONTIG, 0},
    {"neox f32 decode", POSENC_ROPE_NEOX, 128, 8, 1, 2, 33, 0, 0, {0}, 0, 0,
     POSENC_DTYPE_F32, POSENC_DTYPE_F32, POSENC_DTYPE_I32, 1, LAY_CONTIG, LAY_CONTIG, 0},
    {"mrope f32", POSENC_ROPE_MROPE, 32, 3, 7, 2, 17, 0, 0, {4, 6, 6, 0}, 0, 0,
     POSENC_DTYPE_F32, POSENC_DTYPE_F32, POSENC_DTYPE_I64, 1, LAY_PADDED, LAY_CONTIG, 0},
    {"imrope f16", POSENC_ROPE_IMROPE, 32, 2, 5, 2, 9, 0, 0, {6, 5, 5, 0}, 0, 0,
     POSENC_DTYPE_F16, POSENC_DTYPE_F16, POSENC_DTYPE_I32, 0, LAY_CONTIG, LAY_PADDED, 0},
    {"vision f32->f16", POSENC_ROPE_VISION, 32, 3, 6, 1, 10, 0, 0, {8, 8, 0, 0}, 0, 0,
     POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_I64, 0, LAY_STRIDED, LAY_CONTIG, 0},
    {"neox out-of-range i32", POSENC_ROPE_NEOX, 16, 2, 6, 2, 7, 0, 0, {0}, 0, 0,
     POSENC_DTYPE_F32, POSENC_DTYPE_F32, POSENC_DTYPE_I32, 1, LAY_CONTIG, LAY_CONTIG, 1},
    {"normal out-of-range i64", POSENC_ROPE_NORMAL, 64, 2, 6, 2, 7, 0, 0, {0}, 0, 0,
     POSENC_DTYPE_F16, POSENC_DTYPE_F16, POSENC_DTYPE_I64, 1, LAY_CONTIG, LAY_CONTIG, 1},
    /* 144 pairs: OpenCL's pe_rope_vec on CPU devices too (its barriers with skipped
     * tokens), more than pe_rope_tok takes */
    {"neox wide head out-of-range", POSENC_ROPE_NEOX, 288, 2, 4, 2, 6, 0, 0, {0}, 0, 0,
     POSENC_DTYPE_F32, POSENC_DTYPE_F32, POSENC_DTYPE_I32, 1, LAY_CONTIG, LAY_CONTIG, 1},
    {"normal wide head f16", POSENC_ROPE_NORMAL, 288, 3, 3, 1, 5, 0, 0, {0}, 0, 0,
     POSENC_DTYPE_F16, POSENC_DTYPE_F16, POSENC_DTYPE_I64, 0, LAY_CONTIG, LAY_CONTIG, 0},
};

static int n_streams_of(posenc_rope_mode m)
{
    return m == POSENC_ROPE_NORMAL || m == POSENC_ROPE_NEOX ? 1 : m == POSENC_ROPE_VISION ? 2 : 4;
}

static struct posenc_rope_params rr_params(const struct rr_case *c)
{
    struct posenc_rope_params p;
    memset(&p, 0, sizeof p);
    p.mode = c->mode;
    p.n_dims = c->n_dims;
    p.n_offs = c->n_offs;
    memcpy(p.sections, c->sections, sizeof p.sections);
    if (c->yarn) {
        p.scaling.kind = POSENC_ROPE_SCALING_YARN;
        p.scaling.factor = 4.0f;
        p.scaling.original_ctx = 4096;
    }
    if (c->backward)
        p.flags = POSENC_ROPE_BACKWARD;
    return p;
}

struct rr_out {
    unsigned char *fused, *two_step;
    posenc_status st_fused, st_rope, st_set;
    char msg[1024]; /* of the fused call */
};

/* posenc_rope_set_rows on ctx, and (two_step) posenc_rope into mid + posenc_set_rows. */
static void rr_run(posenc_context *ctx, const struct rr_case *c, const struct lay *lx,
                   const struct lay *lp, const struct lay *lr, const struct lay *ld,
                   const struct lay *lm, const unsigned char *x, const unsigned char *pos,
                   const unsigned char *rows, const unsigned char *dst0, uint32_t flags,
                   bool two_step, struct rr_out *o)
{
    const struct posenc_rope_params p = rr_params(c);
    const struct posenc_set_rows_params rp = {.flags = flags};
    posenc_buffer *bx = th_upload(ctx, x, lx->bytes), *bp = th_upload(ctx, pos, lp->bytes),
                  *br = th_upload(ctx, rows, lr->bytes), *bd = th_upload(ctx, dst0, ld->bytes);
    posenc_tensor tx = tensor_of(bx, lx), tp = tensor_of(bp, lp), tr = tensor_of(br, lr),
                  td = tensor_of(bd, ld);
    o->st_fused = posenc_rope_set_rows(ctx, &tx, &tp, &tr, &td, &p, &rp);
    snprintf(o->msg, sizeof o->msg, "%s", posenc_context_last_error(ctx));
    o->fused = th_download(bd);
    if (two_step) {
        posenc_buffer *bm = NULL, *bd2 = th_upload(ctx, dst0, ld->bytes);
        assert_int_equal(posenc_buffer_create(ctx, lm->bytes, &bm), POSENC_OK);
        posenc_tensor tm = tensor_of(bm, lm), td2 = tensor_of(bd2, ld);
        o->st_rope = posenc_rope(ctx, &tx, &tp, &tm, &p);
        /* one posenc_set_rows per head h: src = mid's head h as [hd, T, B, 1], dst = dst's
         * head h as [hd, R, B, 1], and the rows [T, 1 or B, 1, 1] are set_rows' [r, e2, e3,
         * 1] with e2 = 1 (shared, broadcast over the batch) or B */
        posenc_tensor src = tm, dstv = td2, rv = tr;
        o->st_set = POSENC_OK;
        for (int64_t h = 0; h < c->H && o->st_set == POSENC_OK; h++) {
            posenc_tensor s = src, d = dstv;
            s.offset = tm.offset + (size_t)(h * tm.nb[1]);
            s.ne[1] = tm.ne[2];
            s.nb[1] = tm.nb[2];
            s.ne[2] = tm.ne[3];
            s.nb[2] = tm.nb[3];
            s.ne[3] = 1;
            d.offset = td2.offset + (size_t)(h * td2.nb[1]);
            d.ne[1] = td2.ne[2];
            d.nb[1] = td2.nb[2];
            d.ne[2] = td2.ne[3];
            d.nb[2] = td2.nb[3];
            d.ne[3] = 1;
            o->st_set = posenc_set_rows(ctx, &s, &rv, &d, &rp);
        }
        o->two_step = th_download(bd2);
        posenc_buffer_destroy(&bm);
        posenc_buffer_destroy(&bd2);
    }
    posenc_buffer_destroy(&bx);
    posenc_buffer_destroy(&bp);
    posenc_buffer_destroy(&br);
    posenc_buffer_destroy(&bd);
}

static void rr_check(const struct rr_case *c, uint64_t seed)
{
    uint64_t rng = seed;
    const int S = n_streams_of(c->mode);
    const int64_t nx[4] = {c->hd, c->H, c->T, c->B};
    const int64_t nd[4] = {c->hd, c->H, c->R, c->B};
    const int64_t np[4] = {c->T, S, 1, 1};
    const int64_t nr[4] = {c->T, c->rows_per_batch ? c->B : 1, 1, 1};
    const struct lay lx = make_lay(c->x_dt, nx, c->x_lay);
    const struct lay ld = make_lay(c->dst_dt, nd, c->dst_lay);
    const struct lay lm = make_lay(c->dst_dt, nx, c->dst_lay); /* rope's own output */
    const struct lay lp = make_lay(POSENC_DTYPE_I32, np, LAY_CONTIG);
    const struct lay lr = make_lay(c->idx_dt, nr, LAY_CONTIG);
    unsigned char *x = random_image(&lx, &rng), *dst0 = random_image(&ld, &rng);
    unsigned char *pos = calloc(1, lp.bytes), *rows = calloc(1, lr.bytes);
    assert_non_null(pos);
    assert_non_null(rows);
    int32_t *posv = malloc((size_t)(c->T * S) * sizeof(int32_t));
    int64_t *rowv = malloc((size_t)(c->T * c->B) * sizeof(int64_t));
    assert_non_null(posv);
    assert_non_null(rowv);
    for (int64_t t = 0; t < c->T; t++)
        for (int s = 0; s < S; s++) {
            posv[t * S + s] = (int32_t)(rng_next(&rng) % 3000);
            memcpy(pos + at_of(&lp, t, s, 0, 0), &posv[t * S + s], 4);
        }
    /* distinct destination rows per batch (a shuffled prefix of R) */
    for (int64_t b = 0; b < (c->rows_per_batch ? c->B : 1); b++) {
        int64_t perm[64];
        for (int64_t k = 0; k < c->R; k++)
            perm[k] = k;
        for (int64_t k = c->R - 1; k > 0; k--) {
            int64_t o = (int64_t)(rng_next(&rng) % (uint64_t)(k + 1)), tmp = perm[k];
            perm[k] = perm[o];
            perm[o] = tmp;
        }
        for (int64_t t = 0; t < c->T; t++) {
            int64_t v = perm[t];
            if (c->bad && t % 3 == 1)
                v = c->idx_dt == POSENC_DTYPE_I64 && b == 0 ? ((int64_t)1 << 32) | 1
                    : t % 2                              ? c->R
                                                         : -1;
            rowv[t + c->T * b] = v;
            put_index(rows, c->idx_dt, at_of(&lr, t, b, 0, 0), v);
        }
    }
    if (!c->rows_per_batch)
        for (int64_t b = 1; b < c->B; b++)
            for (int64_t t = 0; t < c->T; t++)
                rowv[t + c->T * b] = rowv[t];

    char what[200];
    struct rr_out od, oref;
    memset(&od, 0, sizeof od);
    memset(&oref, 0, sizeof oref);
    if (c->bad) {
        rr_run(th.dut, c, &lx, &lp, &lr, &ld, &lm, x, pos, rows, dst0, 0, false, &od);
        snprintf(what, sizeof what, "rope_set_rows %s (checked)", c->name);
        expect_msg(od.msg, od.st_fused, POSENC_ERR_OUT_OF_RANGE, "rows[", what);
        compare_bytes(od.fused, dst0, ld.bytes, what);
        free(od.fused);
        memset(&od, 0, sizeof od);
    }
    const uint32_t flags = c->bad ? POSENC_ROWS_UNCHECKED : 0;
    rr_run(th.dut, c, &lx, &lp, &lr, &ld, &lm, x, pos, rows, dst0, flags, true, &od);
    th_check_warnings();
    snprintf(what, sizeof what, "rope_set_rows %s", c->name);
    expect_msg(od.msg, od.st_fused, POSENC_OK, NULL, what);
    expect_msg("", od.st_rope, POSENC_OK, NULL, "posenc_rope");
    expect_msg("", od.st_set, POSENC_OK, NULL, "posenc_set_rows");
    /* 1. bit for bit: fused == rope then set_rows, the whole buffer */
    snprintf(what, sizeof what, "rope_set_rows %s: fused vs rope + set_rows", c->name);
    compare_bytes(od.fused, od.two_step, ld.bytes, what);
    rr_run(th.ref, c, &lx, &lp, &lr, &ld, &lm, x, pos, rows, dst0, flags, false, &oref);
    expect_msg(oref.msg, oref.st_fused, POSENC_OK, NULL, "reference");

    /* 2. against double values computed here, and against the reference */
    const struct posenc_rope_params p = rr_params(c);
    double freq[256];
    uint8_t stream[256];
    struct posenc_rope_info info;
    assert_int_equal(posenc_rope_freqs(c->hd, &p, freq, stream, &info), POSENC_OK);
    const int64_t n_pairs = info.n_dims / 2, lo = c->n_offs, hi = lo + info.n_dims;
    const double sign = c->backward ? -1.0 : 1.0, m = info.mscale;
    bool *written = calloc((size_t)(c->R * c->B), sizeof(bool));
    assert_non_null(written);
    int64_t n_checked = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t t = 0; t < c->T; t++) {
            const int64_t row = rowv[t + c->T * b];
            if (row < 0 || row >= c->R)
                continue;
            written[row + c->R * b] = true;
            for (int64_t h = 0; h < c->H; h++) {
                for (int64_t i0 = 0; i0 < c->hd; i0++) {
                    if (i0 >= lo && i0 < hi)
                        continue;
                    /* outside the window: x exactly (converted to dst's dtype once) */
                    const double xv = get_f(x, &lx, at_of(&lx, i0, h, t, b));
                    const double got = get_f(od.fused, &ld, at_of(&ld, i0, h, row, b));
                    const double want = c->dst_dt == POSENC_DTYPE_F16
                                            ? posenc_f16_to_f32(posenc_f32_to_f16((float)xv))
                                            : xv;
                    if (got != want)
                        fail_msg("%s: copied dim %lld of head %lld token %lld: %.9g, want %.9g",
                                 c->name, (long long)i0, (long long)h, (long long)t, got, want);
                }
                for (int64_t j = 0; j < n_pairs; j++) {
                    const int64_t a = c->mode == POSENC_ROPE_NORMAL ? lo + 2 * j : lo + j;
                    const int64_t bb = c->mode == POSENC_ROPE_NORMAL ? a + 1 : a + n_pairs;
                    const double ang = sign * posv[t * S + stream[j]] * freq[j];
                    const double xa = get_f(x, &lx, at_of(&lx, a, h, t, b));
                    const double xb = get_f(x, &lx, at_of(&lx, bb, h, t, b));
                    const double ya = m * (xa * cos(ang) - xb * sin(ang));
                    const double yb = m * (xa * sin(ang) + xb * cos(ang));
                    /* the contract's sin/cos error (the same at every position) and the
                     * rotation roundings: pc_bound_rope_f32 (check.c) */
                    const double b32 = pc_bound_rope_f32(pc_angle_err32(ang), m,
                                                         fabs(xa) + fabs(xb));
                    const int64_t dims[2] = {a, bb};
                    const double ys[2] = {ya, yb};
                    for (int k = 0; k < 2; k++) {
                        const double bound = c->dst_dt == POSENC_DTYPE_F16
                                                 ? pc_bound_to_f16(b32, ys[k])
                                                 : b32;
                        /* the reference rounds the exact value once to dst's dtype */
                        const double ulp_dst = c->dst_dt == POSENC_DTYPE_F16 ? pc_ulp16(ys[k])
                                                                             : pc_ulp32(ys[k]);
                        const size_t at = at_of(&ld, dims[k], h, row, b);
                        const double got = get_f(od.fused, &ld, at);
                        const double ref = get_f(oref.fused, &ld, at);
                        if (!(fabs(got - ys[k]) <= bound))
                            fail_msg("%s: head %lld token %lld dim %lld: %.9g, exact %.9g, "
                                     "bound %.3g",
                                     c->name, (long long)h, (long long)t, (long long)dims[k],
                                     got, ys[k], bound);
                        if (!(fabs(ref - ys[k]) <= ulp_dst))
                            fail_msg("%s: reference dim %lld: %.9g, exact %.9g", c->name,
                                     (long long)dims[k], ref, ys[k]);
                        if (!(fabs(got - ref) <= bound + ulp_dst))
                            fail_msg("%s: dim %lld: %.9g vs reference %.9g", c->name,
                                     (long long)dims[k], got, ref);
                        n_checked++;
                    }
                }
            }
        }
    assert_true(n_checked > 0);
    /* 3. rows no index names keep their bytes */
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t r = 0; r < c->R; r++) {
            if (written[r + c->R * b])
                continue;
            const size_t es = posenc_dtype_size(c->dst_dt);
            for (int64_t h = 0; h < c->H; h++)
                for (int64_t i0 = 0; i0 < c->hd; i0++) {
                    const size_t at = at_of(&ld, i0, h, r, b);
                    if (memcmp(od.fused + at, dst0 + at, es) != 0)
                        fail_msg("%s: row %lld (batch %lld) is named by no index but changed",
                                 c->name, (long long)r, (long long)b);
                }
        }
    free(written);
    free(od.fused);
    free(od.two_step);
    free(oref.fused);
    free(x);
    free(dst0);
    free(pos);
    free(rows);
    free(posv);
    free(rowv);
}

/* One cmocka test per case: *state = its index in rr_cases. */
static void test_rope_set_rows_case(void **state)
{
    const size_t i = (size_t)(intptr_t)*state;
    rr_check(&rr_cases[i], 9000 + i);
}

/* rope_set_rows cut into many launches: the same bytes as one launch on the dut. */
static void test_rope_set_rows_split(void **state)
{
    (void)state;
    posenc_context *lim = th_limited_ctx(1024);
    uint64_t rng = 4321;
    const struct rr_case c = {"split", POSENC_ROPE_NEOX, 16, 4, 5, 2, 5, 0, 0, {0}, 0, 0,
                              POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_I64, 1,
                              LAY_PADDED, LAY_CONTIG, 0};
    const int64_t nx[4] = {c.hd, c.H, c.T, c.B}, nd[4] = {c.hd, c.H, c.R, c.B};
    const int64_t np[4] = {c.T, 1, 1, 1}, nr[4] = {c.T, c.B, 1, 1};
    const struct lay lx = make_lay(c.x_dt, nx, c.x_lay), ld = make_lay(c.dst_dt, nd, c.dst_lay);
    const struct lay lp = make_lay(POSENC_DTYPE_I32, np, LAY_CONTIG);
    const struct lay lr = make_lay(c.idx_dt, nr, LAY_CONTIG);
    unsigned char *x = random_image(&lx, &rng), *dst0 = random_image(&ld, &rng);
    unsigned char *pos = calloc(1, lp.bytes), *rows = calloc(1, lr.bytes);
    assert_non_null(pos);
    assert_non_null(rows);
    for (int64_t t = 0; t < c.T; t++) {
        const int32_t v = (int32_t)(t * 37 + 5);
        memcpy(pos + at_of(&lp, t, 0, 0, 0), &v, 4);
        for (int64_t b = 0; b < c.B; b++)
            put_index(rows, c.idx_dt, at_of(&lr, t, b, 0, 0), (t * 2 + b) % c.R); /* distinct */
    }
    struct rr_out o1, o2;
    memset(&o1, 0, sizeof o1);
    memset(&o2, 0, sizeof o2);
    rr_run(th.dut, &c, &lx, &lp, &lr, &ld, &ld, x, pos, rows, dst0, 0, false, &o1);
    rr_run(lim, &c, &lx, &lp, &lr, &ld, &ld, x, pos, rows, dst0, 0, false, &o2);
    expect_msg(o1.msg, o1.st_fused, POSENC_OK, NULL, "one launch");
    expect_msg(o2.msg, o2.st_fused, POSENC_OK, NULL, "cut");
    compare_bytes(o2.fused, o1.fused, ld.bytes, "rope_set_rows cut vs one launch");
    free(o1.fused);
    free(o2.fused);
    free(x);
    free(dst0);
    free(pos);
    free(rows);
    posenc_context_destroy(&lim);
    th_check_warnings();
}

/* ---- bad input -------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    posenc_context *ctx = th.dut;
    float vals[512];
    for (int i = 0; i < 512; i++)
        vals[i] = (float)i;
    /* src [4, 3, 2, 1] f32 at 0, rows [3, 1, 1, 1] i32 at 256 B, dst [4, 5, 2, 1] at 512 B */
    posenc_buffer *b = th_upload(ctx, vals, sizeof vals);
    posenc_tensor src = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 4, 3, 2, 1);
    posenc_tensor rows = posenc_tensor_contiguous(b, 256, POSENC_DTYPE_I32, 3, 1, 1, 1);
    posenc_tensor dst = posenc_tensor_contiguous(b, 512, POSENC_DTYPE_F32, 4, 5, 2, 1);
    const int32_t idx[3] = {0, 2, 4};
    assert_int_equal(posenc_buffer_write(b, 256, idx, sizeof idx), POSENC_OK);
    unsigned char *before = th_download(b);
    posenc_tensor t;
    struct posenc_set_rows_params p = {0};

    expect_status(ctx, posenc_set_rows(NULL, &src, &rows, &dst, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, NULL, "NULL ctx");
    expect_status(ctx, posenc_set_rows(ctx, NULL, &rows, &dst, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "src", "NULL src");
    expect_status(ctx, posenc_set_rows(ctx, &src, NULL, &dst, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "rows", "NULL rows");
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "dst", "NULL dst");
    t = src;
    t.dtype = POSENC_DTYPE_I32;
    expect_status(ctx, posenc_set_rows(ctx, &t, &rows, &dst, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "src->dtype", "i32 src");
    t = rows;
    t.dtype = POSENC_DTYPE_F32;
    expect_status(ctx, posenc_set_rows(ctx, &src, &t, &dst, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "rows->dtype", "f32 rows");
    t = posenc_tensor_contiguous(b, 512, POSENC_DTYPE_I64, 4, 5, 2, 1);
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "dst->dtype", "i64 dst");
    t = rows;
    t.ne[0] = 2;
    expect_status(ctx, posenc_set_rows(ctx, &src, &t, &dst, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "rows->ne", "rows ne[0] != r");
    t = posenc_tensor_contiguous(b, 256, POSENC_DTYPE_I32, 3, 3, 1, 1);
    expect_status(ctx, posenc_set_rows(ctx, &src, &t, &dst, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "rows->ne", "d2 % e2 != 0");
    t = rows;
    t.ne[1] = 0;
    expect_status(ctx, posenc_set_rows(ctx, &src, &t, &dst, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "rows->ne", "e2 = 0");
    t = dst;
    t.ne[0] = 3;
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "dst->ne", "dst ne[0]");
    t = posenc_tensor_contiguous(b, 512, POSENC_DTYPE_F32, 4, 5, 1, 2);
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "dst->ne", "dst ne[2]");
    p.reserved[1] = 1;
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &dst, &p), POSENC_ERR_INVALID_ARGUMENT,
                  "params->reserved[1]", "reserved");
    p.reserved[1] = 0;
    p.flags = 4;
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &dst, &p), POSENC_ERR_INVALID_ARGUMENT,
                  "params->flags", "unknown flag");
    p.flags = 0;
    t = posenc_tensor_contiguous(b, 64, POSENC_DTYPE_F32, 4, 5, 2, 1); /* on src's bytes */
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "src", "dst overlaps src");
    t = posenc_tensor_contiguous(b, 224, POSENC_DTYPE_F32, 4, 5, 2, 1); /* on the rows */
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "rows", "dst overlaps rows");
    t = dst;
    t.nb[1] = 4;
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &t, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "dst->nb", "self-overlapping dst");
    /* an index past dst's rows */
    t = dst;
    t.ne[1] = 4;
    expect_status(ctx, posenc_set_rows(ctx, &src, &rows, &t, NULL), POSENC_ERR_OUT_OF_RANGE,
                  "rows[2, 0, 0] = 4", "index 4 of 4 rows");

    /* rope_set_rows: x [4, 1, 3, 1] at 0, pos [3] at 128 B, rows [3] at 256 B, dst [4, 1, 5, 1]
     * at 512 B */
    posenc_tensor x = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 4, 1, 3, 1);
    posenc_tensor pos = posenc_tensor_contiguous(b, 128, POSENC_DTYPE_I32, 3, 1, 1, 1);
    posenc_tensor rd = posenc_tensor_contiguous(b, 512, POSENC_DTYPE_F32, 4, 1, 5, 1);
    expect_status(ctx, posenc_rope_set_rows(NULL, &x, &pos, &rows, &rd, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, NULL, "NULL ctx");
    expect_status(ctx, posenc_rope_set_rows(ctx, NULL, &pos, &rows, &rd, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "x", "NULL x");
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, NULL, &rows, &rd, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "pos", "NULL pos");
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, NULL, &rd, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "rows", "NULL rows");
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &rows, NULL, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "dst", "NULL dst");
    t = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_I64, 4, 1, 3, 1);
    expect_status(ctx, posenc_rope_set_rows(ctx, &t, &pos, &rows, &rd, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "x->dtype", "i64 x");
    t = rows;
    t.dtype = POSENC_DTYPE_F32;
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &t, &rd, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "rows->dtype", "f32 rows");
    t = posenc_tensor_contiguous(b, 256, POSENC_DTYPE_I32, 3, 2, 1, 1);
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &t, &rd, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "rows->ne", "rows [T, 2] for B = 1");
    t = posenc_tensor_contiguous(b, 512, POSENC_DTYPE_F32, 4, 2, 5, 1);
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &rows, &t, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "dst->ne", "dst heads");
    t = posenc_tensor_contiguous(b, 128, POSENC_DTYPE_I64, 3, 1, 1, 1);
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &t, &rows, &rd, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "pos->dtype", "i64 pos");
    p.reserved[0] = 7;
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &rows, &rd, NULL, &p),
                  POSENC_ERR_INVALID_ARGUMENT, "rows_params->reserved[0]", "reserved");
    p.reserved[0] = 0;
    struct posenc_rope_params rp = {0};
    rp.reserved[2] = 1;
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &rows, &rd, &rp, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "reserved", "rope params reserved");
    t = posenc_tensor_contiguous(b, 32, POSENC_DTYPE_F32, 4, 1, 5, 1);
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &rows, &t, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "x", "dst overlaps x");
    t = posenc_tensor_contiguous(b, 240, POSENC_DTYPE_F32, 4, 1, 5, 1);
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &rows, &t, NULL, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "rows", "dst overlaps rows");
    t = rd;
    t.ne[2] = 4;
    expect_status(ctx, posenc_rope_set_rows(ctx, &x, &pos, &rows, &t, NULL, NULL),
                  POSENC_ERR_OUT_OF_RANGE, "rows[2, 0, 0] = 4", "index 4 of 4 rows");

    /* i64 is a dtype of its own; the ops that do not take it refuse it by name */
    assert_int_equal(posenc_dtype_size(POSENC_DTYPE_I64), 8);
    assert_string_equal(posenc_dtype_name(POSENC_DTYPE_I64), "i64");
    t = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_I64, 4, 3, 1, 1);
    posenc_tensor t2 = posenc_tensor_contiguous(b, 1024, POSENC_DTYPE_I64, 4, 3, 1, 1);
    expect_status(ctx, posenc_copy(ctx, &t, &t2), POSENC_ERR_INVALID_ARGUMENT, "i64", "copy i64");
    expect_status(ctx, posenc_rope(ctx, &t, &pos, &rd, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "x->dtype", "rope i64 x");
    posenc_tensor lp = posenc_tensor_contiguous(b, 128, POSENC_DTYPE_I64, 3, 1, 1, 1);
    posenc_tensor ltab = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 4, 8, 1, 1);
    posenc_tensor ldst = posenc_tensor_contiguous(b, 1024, POSENC_DTYPE_F32, 4, 3, 1, 1);
    expect_status(ctx, posenc_learned(ctx, NULL, &lp, &ltab, &ldst), POSENC_ERR_INVALID_ARGUMENT,
                  "pos->dtype", "learned i64 pos");
    expect_status(ctx, posenc_sinusoidal(ctx, NULL, &lp, &ldst, NULL),
                  POSENC_ERR_INVALID_ARGUMENT, "pos->dtype", "sinusoidal i64 pos");
    posenc_tensor al = posenc_tensor_contiguous(b, 1024, POSENC_DTYPE_I64, 4, 3, 1, 1);
    expect_status(ctx, posenc_alibi(ctx, NULL, &al, NULL), POSENC_ERR_INVALID_ARGUMENT,
                  "dst->dtype", "alibi i64 dst");

    unsigned char *after = th_download(b);
    compare_bytes(after, before, sizeof vals, "buffer after failed calls");
    free(after);

    /* empty tensors are no-ops */
    t = src;
    t.ne[2] = 0;
    posenc_tensor e = dst;
    e.ne[2] = 0;
    posenc_tensor er = rows;
    expect_status(ctx, posenc_set_rows(ctx, &t, &er, &e, NULL), POSENC_OK, NULL, "empty");
    after = th_download(b);
    compare_bytes(after, before, sizeof vals, "buffer after empty calls");
    free(after);
    free(before);
    posenc_buffer_destroy(&b);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "set_rows");
    if (rc >= 0)
        return rc;
    enum { N_SR = 8, N_RR = sizeof(rr_cases) / sizeof(rr_cases[0]) };
    static char names[N_SR + N_RR][96];
    struct CMUnitTest tests[N_SR + N_RR + 3];
    memset(tests, 0, sizeof tests);
    size_t n = 0;
    for (int k = 0; k < N_SR; k++) {
        snprintf(names[k], sizeof names[k], "set_rows %s->%s %s", posenc_dtype_name(sr_pairs[k / 2][0]),
                 posenc_dtype_name(sr_pairs[k / 2][1]), posenc_dtype_name(sr_idx[k % 2]));
        tests[n].name = names[k];
        tests[n].test_func = test_set_rows_cases;
        tests[n].initial_state = (void *)(intptr_t)k;
        n++;
    }
    for (int k = 0; k < N_RR; k++) {
        snprintf(names[N_SR + k], sizeof names[N_SR + k], "rope_set_rows %s", rr_cases[k].name);
        tests[n].name = names[N_SR + k];
        tests[n].test_func = test_rope_set_rows_case;
        tests[n].initial_state = (void *)(intptr_t)k;
        n++;
    }
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_set_rows_split),
        cmocka_unit_test(test_rope_set_rows_split),
        cmocka_unit_test(test_bad_input),
    };
    memcpy(tests + n, fixed, sizeof fixed);
    n += sizeof(fixed) / sizeof(fixed[0]);
    rc = th_run("set_rows", tests, n);
    th_fini();
    return rc;
}
