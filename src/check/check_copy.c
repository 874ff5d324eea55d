/*
 * check_copy.c - posenc_copy cases: every dtype pair (f32/f16 both ways, same-type copies,
 * i32) over contiguous, padded and permuted source and destination layouts, odd shapes,
 * rows longer than one work unit, a broadcast (stride 0) source.
 *
 * A copy is exact: same-type copies keep the bits, f16 -> f32 widens exactly, and f32 ->
 * f16 must give the round-to-nearest-even binary16 that posenc_f32_to_f16() gives (NaN
 * may change its payload, not its NaN-ness). So the bound is 0: every element of the
 * device's and of the reference's output is compared with the value computed here from
 * the source, and every byte outside the output view must keep its poison.
 *
 * Sources mix uniform values with the awkward ones: +-0, +-inf, NaN, the f16 overflow
 * threshold (65504, 65519.99, 65520), f16 subnormals and values that round to 0, exact
 * ties (1 + 2^-11, 1 + 3*2^-11), large f32. f16 sources are random bit patterns (every
 * class: subnormals, infinities, NaNs).
 */
#include "check_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dt_short(posenc_dtype t)
{
    return posenc_dtype_name(t);
}

static void name_copy(struct pc_case *c)
{
    snprintf(c->name, sizeof(c->name), "copy/%s->%s/ne=%lldx%lldx%lldx%lld/src=%s/dst=%s%s",
             dt_short(c->x_dtype), dt_short(c->dtype), (long long)c->ne[0], (long long)c->ne[1],
             (long long)c->ne[2], (long long)c->ne[3], view_name(c->view),
             view_name(c->out_view), c->has_x == 3 ? "/src_broadcast" : "");
}

void pc_copy_cases(struct pc_case **cases, size_t *n, size_t *cap)
{
    static const int64_t shapes[][4] = {
        {1, 1, 1, 1},
        {7, 5, 3, 2},        /* odd everything */
        {64, 93, 1, 1},
        {128, 4, 8, 2},
        {70000, 3, 1, 1},    /* rows longer than one copy segment, several threads */
    };
    static const posenc_dtype pairs[][2] = {
        {POSENC_DTYPE_F32, POSENC_DTYPE_F32}, {POSENC_DTYPE_F32, POSENC_DTYPE_F16},
        {POSENC_DTYPE_F16, POSENC_DTYPE_F32}, {POSENC_DTYPE_F16, POSENC_DTYPE_F16},
        {POSENC_DTYPE_I32, POSENC_DTYPE_I32},
    };
    uint64_t seed = 9100;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++)
            for (int v = 0; v < 3; v++) {
                struct pc_case c;
                memset(&c, 0, sizeof(c));
                c.op = PC_OP_COPY;
                c.x_dtype = pairs[p][0];
                c.dtype = pairs[p][1];
                memcpy(c.ne, shapes[s], sizeof(c.ne));
                c.view = (enum pc_view)v;
                c.out_view = (enum pc_view)((v + (int)s + (int)p) % 3);
                c.seed = seed++;
                name_copy(&c);
                add_case(cases, n, cap, &c);
            }
    /* a broadcast source: stride 0 over dim 1 (one row copied to every row of dst) */
    for (int p = 0; p < 2; p++) {
        struct pc_case c;
        memset(&c, 0, sizeof(c));
        c.op = PC_OP_COPY;
        c.x_dtype = POSENC_DTYPE_F32;
        c.dtype = p ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
        c.ne[0] = 33;
        c.ne[1] = 9;
        c.ne[2] = 2;
        c.ne[3] = 1;
        c.has_x = 3;
        c.out_view = p ? PC_VIEW_PADDED : PC_VIEW_CONTIGUOUS;
        c.seed = seed++;
        name_copy(&c);
        add_case(cases, n, cap, &c);
    }
}

static const float awkward[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
    1e-8f, 5.9604645e-8f, 2.9802322e-8f, 6.1035156e-5f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
    -2.5e-5f, 1e30f, -3.0e-7f,
};

/* The source image of a case: f32 values (uniform in [-4, 4) and every 5th one awkward),
 * f16 and i32 as random bit patterns. */
static void fill_source(unsigned char *img, const struct pc_layout *l, const int64_t ne[4],
                        posenc_dtype dt, uint64_t seed)
{
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 7;
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
        for (int64_t i2 = 0; i2 < ne[2]; i2++)
            for (int64_t i1 = 0; i1 < ne[1]; i1++)
                for (int64_t i0 = 0; i0 < ne[0]; i0++, k++) {
                    size_t at = byte_at(l, i0, i1, i2, i3);
                    uint64_t r = pc_rand_u64(&rng);
                    if (dt == POSENC_DTYPE_F32) {
                        float f = k % 5 == 3
                                      ? awkward[r % (sizeof(awkward) / sizeof(awkward[0]))]
                                      : (float)(8.0 * pc_rand_uniform(&rng) - 4.0);
                        memcpy(img + at, &f, 4);
                    } else if (dt == POSENC_DTYPE_F16) {
                        uint16_t h = (uint16_t)r;
                        memcpy(img + at, &h, 2);
                    } else {
                        uint32_t u = (uint32_t)r;
                        memcpy(img + at, &u, 4);
                    }
                }
}

/* Whether the output element at `got` is the exact copy of the source element at `src`. */
static bool element_ok(const unsigned char *src, posenc_dtype sdt, const unsigned char *got,
                       posenc_dtype ddt)
{
    if (sdt == ddt)
        return memcmp(src, got, posenc_dtype_size(sdt)) == 0 ||
               (sdt != POSENC_DTYPE_I32 && isnan(get_val(src, 0, sdt)) &&
                isnan(get_val(got, 0, ddt)));
    if (sdt == POSENC_DTYPE_F32) { /* f32 -> f16 */
        float f;
        uint16_t h;
        memcpy(&f, src, 4);
        memcpy(&h, got, 2);
        if (isnan(f))
            return isnan(posenc_f16_to_f32(h));
        return h == posenc_f32_to_f16(f);
    }
    uint16_t h; /* f16 -> f32 */
    float f;
    memcpy(&h, src, 2);
    memcpy(&f, got, 4);
    float want = posenc_f16_to_f32(h);
    if (isnan(want))
        return isnan(f);
    return memcmp(&f, &want, 4) == 0;
}

static posenc_status copy_on(posenc_context *ctx, const struct pc_case *c,
                             const unsigned char *src_img, const struct pc_layout *sl,
                             const int64_t sne[4], const unsigned char *dst0,
                             const struct pc_layout *dl, unsigned char *out, char *msg,
                             size_t msg_size)
{
    posenc_buffer *bs = NULL, *bd = NULL;
    posenc_status st = upload(ctx, src_img, sl->bytes, &bs);
    if (st == POSENC_OK)
        st = upload(ctx, dst0, dl->bytes, &bd);
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "setup: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
        goto done;
    }
    posenc_tensor src = view_of(bs, sl, c->x_dtype, sne);
    if (c->has_x == 3) { /* broadcast: dim 1 of the source has stride 0 */
        src.ne[1] = c->ne[1];
        src.nb[1] = 0;
    }
    posenc_tensor dst = view_of(bd, dl, c->dtype, c->ne);
    st = posenc_copy(ctx, &src, &dst);
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "%s: %s", posenc_status_string(st), posenc_context_last_error(ctx));
        goto done;
    }
    st = posenc_buffer_read(bd, 0, out, dl->bytes);
    if (st != POSENC_OK)
        snprintf(msg, msg_size, "read: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
done:
    posenc_buffer_destroy(&bs);
    posenc_buffer_destroy(&bd);
    return st;
}

/* Compare one output image with the source; counts into r, first failure into r->msg. */
static void compare(const struct pc_case *c, const char *who, const unsigned char *src_img,
                    const struct pc_layout *sl, const unsigned char *dst0,
                    const struct pc_layout *dl, const unsigned char *out, struct pc_result *r)
{
    const size_t des = posenc_dtype_size(c->dtype);
    unsigned char *mask = calloc(1, dl->bytes);
    if (!mask) {
        r->n_bad++;
        snprintf(r->msg, sizeof(r->msg), "out of host memory for the mask");
        return;
    }
    for (int64_t i3 = 0; i3 < c->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < c->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < c->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < c->ne[0]; i0++) {
                    size_t sat = byte_at(sl, i0, c->has_x == 3 ? 0 : i1, i2, i3);
                    size_t dat = byte_at(dl, i0, i1, i2, i3);
                    memset(mask + dat, 1, des);
                    r->n_checked++;
                    if (element_ok(src_img + sat, c->x_dtype, out + dat, c->dtype))
                        continue;
                    if (r->n_bad == 0) {
                        double sv = get_val(src_img, sat, c->x_dtype);
                        double gv = get_val(out, dat, c->dtype);
                        snprintf(r->msg, sizeof(r->msg),
                                 "%s: element (%lld,%lld,%lld,%lld): source %.9g, got %.9g",
                                 who, (long long)i0, (long long)i1, (long long)i2, (long long)i3,
                                 sv, gv);
                        r->max_err = INFINITY;
                    }
                    r->n_bad++;
                }
    for (size_t i = 0; i < dl->bytes; i++)
        if (!mask[i] && out[i] != dst0[i])
            r->guard_bad++;
    free(mask);
}

void pc_run_copy_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                      struct pc_result *r)
{
    memset(r, 0, sizeof(*r));
    int64_t sne[4] = {c->ne[0], c->has_x == 3 ? 1 : c->ne[1], c->ne[2], c->ne[3]};
    struct pc_layout sl = make_layout(sne, posenc_dtype_size(c->x_dtype), c->view);
    struct pc_layout dl = make_layout(c->ne, posenc_dtype_size(c->dtype), c->out_view);
    unsigned char *src_img = calloc(1, sl.bytes), *dst0 = malloc(dl.bytes);
    unsigned char *ref_img = malloc(dl.bytes), *dut_img = malloc(dl.bytes);
    if (!src_img || !dst0 || !ref_img || !dut_img) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "out of host memory building the images");
        goto done;
    }
    fill_source(src_img, &sl, sne, c->x_dtype, c->seed);
    memset(dst0, (int)PC_POISON, dl.bytes);
    char msg[256];
    posenc_status st = copy_on(ref, c, src_img, &sl, sne, dst0, &dl, ref_img, msg, sizeof(msg));
    if (st != POSENC_OK) {
        r->status = st;
        snprintf(r->msg, sizeof(r->msg), "reference failed: %s", msg);
        goto done;
    }
    st = copy_on(dut, c, src_img, &sl, sne, dst0, &dl, dut_img, msg, sizeof(msg));
    r->status = st;
    if (st != POSENC_OK) {
        snprintf(r->msg, sizeof(r->msg), "%s", msg);
        goto done;
    }
    compare(c, "reference", src_img, &sl, dst0, &dl, ref_img, r);
    compare(c, "device", src_img, &sl, dst0, &dl, dut_img, r);
    r->n_checked /= 2;
    if (r->guard_bad && r->n_bad == 0)
        snprintf(r->msg, sizeof(r->msg), "%lld bytes outside the output view were changed",
                 (long long)r->guard_bad);
    r->pass = r->n_bad == 0 && r->guard_bad == 0;
done:
    free(src_img);
    free(dst0);
    free(ref_img);
    free(dut_img);
}
