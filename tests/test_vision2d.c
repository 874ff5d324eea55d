/*
 * test_vision2d.c - posenc_sincos_2d and posenc_resize_2d on one backend (--backend NAME).
 *
 *  - every shared sincos_2d / resize_2d case (src/check) against the CPU reference;
 *  - MAE's get_2d_sincos_pos_embed written out here in double (omega = 1/base^(i/(D/2)),
 *    D = d/2, [sin, cos] per axis, the width coordinate first, a zero cls row) and DiT's
 *    scaled grid, against this backend;
 *  - torch's upsample_bilinear2d / upsample_bicubic2d (align_corners=False) written out
 *    here in double in torch's own per-output form (area_pixel_compute_source_index,
 *    upsample_get_value_bounded, cubic_interp1d), and torch's known outputs for
 *    [[1, 2], [3, 4]] resized to 4x4;
 *  - properties: resizing a grid to its own size returns it bit for bit; a constant grid
 *    stays constant; a linear ramp is reproduced by bilinear wherever the source
 *    coordinate is not clamped, and by bicubic (A = -0.75) exactly where the fractional
 *    offset t is 0 or 1/2 and all four taps are inside the grid - and, as torch, not
 *    elsewhere (A = -0.75 reproduces constants only; A = -0.5 would reproduce ramps);
 *  - the cls row in padded f32 and f16 rows over a buffer of 7.0 (its zeros are a fill
 *    on the device): the row is 0, the padding keeps its 7.0 and the other rows are the
 *    contiguous call's, bit for bit;
 *  - bad input: exact statuses, a message naming the argument, output untouched.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24

/* ---- 2-D sin-cos ------------------------------------------------------------------------- */

static float *sincos_dut(int64_t d, int64_t h, int64_t w, const struct posenc_2d_params *p)
{
    int64_t n = h * w + (p && p->cls_token ? 1 : 0);
    posenc_buffer *db = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, (size_t)(d * n) * 4, &db), POSENC_OK);
    posenc_tensor dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, d, n, 1, 1);
    th_expect(posenc_sincos_2d(th.dut, h, w, &dst, p), POSENC_OK, NULL, "sincos_2d");
    float *out = th_download(db);
    posenc_buffer_destroy(&db);
    th_check_warnings();
    return out;
}

/* MAE (facebookresearch/mae util/pos_embed.py), in double:
 *   get_1d(D, pos): omega_i = 1 / base^(i / (D/2)), i < D/2; [sin(pos*omega), cos(pos*omega)]
 *   get_2d(d, grid): [get_1d(d/2, w coordinate), get_1d(d/2, h coordinate)]
 * with DiT's grid positions coordinate / grid_scale (f32 in DiT's numpy; exact here for
 * the scales used). */
static void test_mae_independent(void **state)
{
    (void)state;
    const struct {
        int64_t d, h, w;
        float base, scale;
        int cls;
    } cs[] = {{16, 3, 4, 0.0f, 0.0f, 1}, {32, 5, 2, 100.0f, 2.0f, 0}, {8, 1, 7, 0.0f, 0.5f, 1}};
    for (size_t k = 0; k < sizeof(cs) / sizeof(cs[0]); k++) {
        struct posenc_2d_params p = {.base = cs[k].base, .grid_scale = cs[k].scale,
                                     .cls_token = cs[k].cls};
        int64_t d = cs[k].d, D = d / 2, h = cs[k].h, w = cs[k].w;
        double base = cs[k].base != 0.0f ? cs[k].base : 10000.0;
        double scale = cs[k].scale != 0.0f ? cs[k].scale : 1.0;
        float *out = sincos_dut(d, h, w, &p);
        for (int64_t i = 0; i < d && cs[k].cls; i++)
            if (out[i] != 0.0f)
                fail_msg("case %zu: cls row [%lld] = %g, want 0", k, (long long)i, out[i]);
        for (int64_t r = 0; r < h; r++)
            for (int64_t c = 0; c < w; c++) {
                const float *row = out + d * (cs[k].cls + r * w + c);
                for (int axis = 0; axis < 2; axis++) {
                    double pos = (axis == 0 ? (double)c : (double)r) / scale;
                    for (int64_t i = 0; i < D / 2; i++) {
                        double omega = 1.0 / pow(base, (double)i / (double)(D / 2));
                        double want[2] = {sin(pos * omega), cos(pos * omega)};
                        for (int sc = 0; sc < 2; sc++) {
                            float got = row[axis * D + sc * (D / 2) + i];
                            double b = pc_bound_sincos_f32(fabs(pos * omega), 0.0);
                            if (fabs(got - want[sc]) > b)
                                fail_msg("case %zu cell (%lld, %lld) axis %d %s_%lld: %.9g, MAE "
                                         "%.9g (bound %.3g)",
                                         k, (long long)r, (long long)c, axis, sc ? "cos" : "sin",
                                         (long long)i, got, want[sc], b);
                        }
                    }
                }
            }
        free(out);
    }
}

/* ---- resize: torch in double ------------------------------------------------------------ */

static double t_source_index(double scale, int64_t dst_index, bool cubic)
{
    double src = scale * ((double)dst_index + 0.5) - 0.5;
    return (!cubic && src < 0.0) ? 0.0 : src;
}

static double t_bounded(const double *g, int64_t w, int64_t h, int64_t x, int64_t y)
{
    x = x < 0 ? 0 : x > w - 1 ? w - 1 : x;
    y = y < 0 ? 0 : y > h - 1 ? h - 1 : y;
    return g[y * w + x];
}

static double t_cubic(double x0, double x1, double x2, double x3, double t)
{
    const double A = -0.75;
    double c0 = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
    double c1 = ((A + 2) * t - (A + 3)) * t * t + 1;
    double c2 = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
    double c3 = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
    return x0 * c0 + x1 * c1 + x2 * c2 + x3 * c3;
}

/* One channel, src [sh][sw] -> out [dh][dw]; also S = sum |weight * value| per output
 * (for the bound) when s_abs is not NULL. */
static void torch_resize(const double *src, int64_t sh, int64_t sw, double *out, int64_t dh,
                         int64_t dw, bool bicubic, double *s_abs)
{
    double rh = (double)sh / (double)dh, rw = (double)sw / (double)dw;
    for (int64_t oy = 0; oy < dh; oy++)
        for (int64_t ox = 0; ox < dw; ox++) {
            double v, s = 0.0;
            if (!bicubic) {
                /* upsample_bilinear2d: h1 = (int)h1r, h1p = h1 < ih-1, lambdas */
                double h1r = sh == dh ? (double)oy : t_source_index(rh, oy, false);
                double w1r = sw == dw ? (double)ox : t_source_index(rw, ox, false);
                int64_t h1 = (int64_t)h1r, w1 = (int64_t)w1r;
                int64_t h1p = h1 < sh - 1 ? 1 : 0, w1p = w1 < sw - 1 ? 1 : 0;
                double h1l = h1r - (double)h1, h0l = 1.0 - h1l;
                double w1l = w1r - (double)w1, w0l = 1.0 - w1l;
                const double *p = src + h1 * sw + w1;
                double terms[4] = {h0l * w0l * p[0], h0l * w1l * p[w1p], h1l * w0l * p[h1p * sw],
                                   h1l * w1l * p[h1p * sw + w1p]};
                v = terms[0] + terms[1] + terms[2] + terms[3];
                for (int i = 0; i < 4; i++)
                    s += fabs(terms[i]);
            } else {
                /* upsample_bicubic2d_out_frame: floor, t, 4 rows of cubic_interp1d */
                double ry = t_source_index(rh, oy, true), rx = t_source_index(rw, ox, true);
                int64_t iy = (int64_t)floor(ry), ix = (int64_t)floor(rx);
                double ty = ry - (double)iy, tx = rx - (double)ix;
                double rows[4];
                for (int k = 0; k < 4; k++)
                    rows[k] = t_cubic(t_bounded(src, sw, sh, ix - 1, iy - 1 + k),
                                      t_bounded(src, sw, sh, ix, iy - 1 + k),
                                      t_bounded(src, sw, sh, ix + 1, iy - 1 + k),
                                      t_bounded(src, sw, sh, ix + 2, iy - 1 + k), tx);
                v = t_cubic(rows[0], rows[1], rows[2], rows[3], ty);
                /* S: the same sums over |values| with |coefficients| */
                for (int a = 0; a < 4; a++)
                    for (int b = 0; b < 4; b++) {
                        double ea[4] = {0, 0, 0, 0}, eb[4] = {0, 0, 0, 0};
                        ea[a] = 1.0;
                        eb[b] = 1.0;
                        double wy = t_cubic(ea[0], ea[1], ea[2], ea[3], ty);
                        double wx = t_cubic(eb[0], eb[1], eb[2], eb[3], tx);
                        s += fabs(wy * wx * t_bounded(src, sw, sh, ix - 1 + b, iy - 1 + a));
                    }
            }
            out[oy * dw + ox] = v;
            if (s_abs)
                s_abs[oy * dw + ox] = s;
        }
}

/* Resize host f32 src [d, (cls+) sh*sw] on the dut. */
static float *resize_dut(const float *src, int64_t d, int64_t sh, int64_t sw, int64_t dh,
                         int64_t dw, posenc_resize_filter f, int cls)
{
    int64_t ns = sh * sw + cls, nd = dh * dw + cls;
    posenc_buffer *sb = th_upload(th.dut, src, (size_t)(d * ns) * 4);
    posenc_buffer *db = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, (size_t)(d * nd) * 4, &db), POSENC_OK);
    posenc_tensor st = posenc_tensor_contiguous(sb, 0, POSENC_DTYPE_F32, d, ns, 1, 1);
    posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, d, nd, 1, 1);
    struct posenc_resize_params p = {.filter = f, .cls_token = cls};
    th_expect(posenc_resize_2d(th.dut, &st, sh, sw, &dt, dh, dw, &p), POSENC_OK, NULL, "resize_2d");
    float *out = th_download(db);
    posenc_buffer_destroy(&sb);
    posenc_buffer_destroy(&db);
    th_check_warnings();
    return out;
}

/* torch.nn.functional.interpolate([[1, 2], [3, 4]], size=(4, 4), align_corners=False). */
/* sincos_2d with a cls row into padded rows (nb[1] = d + 3 elements) of f32 and f16 over a
 * buffer of 7.0. Tolerance 0: the same op on the same backend as the contiguous call. */
static void test_cls_padded(void **state)
{
    (void)state;
    const int64_t d = 12, h = 3, w = 5, n = h * w + 1, pitch = d + 3;
    struct posenc_2d_params p = {.cls_token = 1};
    const posenc_dtype dts[2] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16};
    for (int k = 0; k < 2; k++) {
        const size_t es = posenc_dtype_size(dts[k]);
        posenc_buffer *b = NULL, *c = NULL;
        assert_int_equal(posenc_buffer_create(th.dut, (size_t)(pitch * n) * es, &b), POSENC_OK);
        assert_int_equal(posenc_buffer_create(th.dut, (size_t)(d * n) * es, &c), POSENC_OK);
        posenc_tensor all = posenc_tensor_contiguous(b, 0, dts[k], pitch * n, 1, 1, 1);
        assert_int_equal(posenc_fill(th.dut, &all, 7.0), POSENC_OK);
        posenc_tensor dst = posenc_tensor_contiguous(b, 0, dts[k], d, n, 1, 1);
        dst.nb[1] = (int64_t)es * pitch;
        dst.nb[2] = dst.nb[3] = dst.nb[1] * n;
        posenc_tensor ref = posenc_tensor_contiguous(c, 0, dts[k], d, n, 1, 1);
        th_expect(posenc_sincos_2d(th.dut, h, w, &dst, &p), POSENC_OK, NULL, "padded");
        th_expect(posenc_sincos_2d(th.dut, h, w, &ref, &p), POSENC_OK, NULL, "contiguous");
        unsigned char *got = th_download(b), *want = th_download(c);
        const uint32_t seven32 = 0x40e00000u; /* 7.0f */
        const uint16_t seven16 = 0x4700u;     /* 7.0 in f16 */
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < pitch; i++) {
                const unsigned char *g = got + (size_t)(t * pitch + i) * es;
                unsigned char z[4] = {0, 0, 0, 0};
                const void *e = i >= d ? (es == 4 ? (const void *)&seven32 : (const void *)&seven16)
                                : t == 0 ? (const void *)z
                                         : (const void *)(want + (size_t)(t * d + i) * es);
                if (memcmp(g, e, es) != 0)
                    fail_msg("%s token %lld element %lld: not the expected bits",
                             posenc_dtype_name(dts[k]), (long long)t, (long long)i);
            }
        free(got);
        free(want);
        posenc_buffer_destroy(&b);
        posenc_buffer_destroy(&c);
    }
    th_check_warnings();
}

static void test_torch_known(void **state)
{
    (void)state;
    static const float src[4] = {1, 2, 3, 4};
    static const double bilinear[16] = {1.0,  1.25, 1.75, 2.0,  1.5, 1.75, 2.25, 2.5,
                                         2.5,  2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0};
    static const double bicubic[16] = {
        0.68359375, 1.015625,  1.5625,    1.89453125, 1.34765625, 1.6796875,
        2.2265625,  2.55859375, 2.44140625, 2.7734375, 3.3203125, 3.65234375,
        3.10546875, 3.4375,    3.984375,  4.31640625};
    for (int f = 0; f < 2; f++) {
        const double *want = f ? bilinear : bicubic;
        float *out = resize_dut(src, 1, 2, 2, 4, 4,
                                f ? POSENC_RESIZE_BILINEAR : POSENC_RESIZE_BICUBIC, 0);
        for (int i = 0; i < 16; i++) {
            /* S <= 1.89 * 4 (sum |w| <= 1.375^2 for bicubic, 1 for bilinear) */
            double b = 20.0 * U32 * 8.0 + 0x1p-21;
            if (fabs(out[i] - want[i]) > b)
                fail_msg("%s [%d] = %.9g, torch %.9g", f ? "bilinear" : "bicubic", i, out[i],
                         want[i]);
        }
        free(out);
    }
}

/* The dut against torch's per-output algorithm in double, random grids, up/down/mixed. */
static void test_torch_independent(void **state)
{
    (void)state;
    const int64_t sizes[][4] = {{5, 7, 9, 4}, {4, 4, 2, 2}, {3, 8, 11, 8}, {6, 6, 6, 6}};
    enum { D = 3 };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (int f = 0; f < 2; f++)
            for (int cls = 0; cls < 2; cls++) {
                int64_t sh = sizes[k][0], sw = sizes[k][1], dh = sizes[k][2], dw = sizes[k][3];
                int64_t ns = sh * sw + cls;
                float *src = malloc(sizeof(float) * (size_t)(D * ns));
                double *g = malloc(sizeof(double) * (size_t)(sh * sw));
                double *want = malloc(sizeof(double) * (size_t)(dh * dw));
                double *S = malloc(sizeof(double) * (size_t)(dh * dw));
                assert_true(src && g && want && S);
                uint64_t rng = 1000 + k * 4 + (uint64_t)(f * 2 + cls);
                for (int64_t i = 0; i < D * ns; i++)
                    src[i] = (float)(4.0 * pc_rand_uniform(&rng) - 2.0);
                float *out = resize_dut(src, D, sh, sw, dh, dw,
                                        f ? POSENC_RESIZE_BILINEAR : POSENC_RESIZE_BICUBIC, cls);
                for (int64_t c = 0; c < D; c++) {
                    if (cls && out[c] != src[c])
                        fail_msg("cls channel %lld: %.9g, want %.9g", (long long)c, out[c], src[c]);
                    for (int64_t i = 0; i < sh * sw; i++)
                        g[i] = src[c + D * (cls + i)];
                    torch_resize(g, sh, sw, want, dh, dw, f == 0, S);
                    for (int64_t i = 0; i < dh * dw; i++) {
                        /* 20 u S on the device (see check_encodings.c) plus the output's
                         * rounding (one ulp) */
                        double got = out[c + D * (cls + i)];
                        double b = 20.0 * U32 * S[i] + pc_ulp32(want[i]);
                        if (fabs(got - want[i]) > b)
                            fail_msg("%lldx%lld -> %lldx%lld %s cls=%d ch %lld out %lld: %.9g, "
                                     "torch %.9g (bound %.3g)",
                                     (long long)sh, (long long)sw, (long long)dh, (long long)dw,
                                     f ? "bilinear" : "bicubic", cls, (long long)c, (long long)i,
                                     got, want[i], b);
                    }
                }
                free(out);
                free(src);
                free(g);
                free(want);
                free(S);
            }
}

/* ---- resize: properties ---------------------------------------------------------------- */

/* Same size in and out: the grid comes back bit for bit (every weight is exactly 0 or 1),
 * f32 and f16, with a cls row. */
static void test_resize_identity(void **state)
{
    (void)state;
    enum { D = 5, H = 6, W = 7, N = H * W + 1 };
    for (int dt = 0; dt < 2; dt++)
        for (int f = 0; f < 2; f++) {
            posenc_dtype t = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
            size_t es = posenc_dtype_size(t);
            unsigned char img[D * N * 4];
            uint64_t rng = 5 + (uint64_t)(dt * 2 + f);
            for (int i = 0; i < D * N; i++) {
                float v = (float)(4.0 * pc_rand_uniform(&rng) - 2.0);
                if (dt) {
                    uint16_t h = posenc_f32_to_f16(v);
                    memcpy(img + 2 * i, &h, 2);
                } else {
                    memcpy(img + 4 * i, &v, 4);
                }
            }
            posenc_buffer *sb = th_upload(th.dut, img, D * N * es);
            posenc_buffer *db = NULL;
            assert_int_equal(posenc_buffer_create(th.dut, D * N * es, &db), POSENC_OK);
            posenc_tensor st = posenc_tensor_contiguous(sb, 0, t, D, N, 1, 1);
            posenc_tensor dtn = posenc_tensor_contiguous(db, 0, t, D, N, 1, 1);
            struct posenc_resize_params p = {
                .filter = f ? POSENC_RESIZE_BILINEAR : POSENC_RESIZE_BICUBIC, .cls_token = 1};
            th_expect(posenc_resize_2d(th.dut, &st, H, W, &dtn, H, W, &p), POSENC_OK, NULL,
                      "identity");
            unsigned char *out = th_download(db);
            if (memcmp(out, img, D * N * es) != 0)
                fail_msg("%s %s: resizing to the same size changed the grid",
                         posenc_dtype_name(t), f ? "bilinear" : "bicubic");
            free(out);
            posenc_buffer_destroy(&sb);
            posenc_buffer_destroy(&db);
        }
    th_check_warnings();
}

/* A grid f(r, c) = a + b c + e r (one channel) resized; returns the dut's output. */
static float *ramp_dut(int64_t sh, int64_t sw, int64_t dh, int64_t dw, posenc_resize_filter f,
                       double a, double b, double e)
{
    float *src = malloc(sizeof(float) * (size_t)(sh * sw));
    assert_non_null(src);
    for (int64_t r = 0; r < sh; r++)
        for (int64_t c = 0; c < sw; c++)
            src[r * sw + c] = (float)(a + b * (double)c + e * (double)r);
    float *out = resize_dut(src, 1, sh, sw, dh, dw, f, 0);
    free(src);
    return out;
}

/* The source coordinate of output i (torch's, unclamped) and its offset t from floor. */
static double src_coord(int64_t in, int64_t out, int64_t i)
{
    return (double)in / (double)out * ((double)i + 0.5) - 0.5;
}

static void test_resize_ramp(void **state)
{
    (void)state;
    const double a = 0.5, b = 0.25, e = -0.375; /* dyadic: every value exact */
    /* Constant grids stay constant everywhere, edges included (the weights sum to 1). */
    for (int f = 0; f < 2; f++) {
        float *out = ramp_dut(5, 6, 9, 4, (posenc_resize_filter)f, 1.5, 0.0, 0.0);
        for (int i = 0; i < 36; i++)
            if (fabs(out[i] - 1.5) > 20.0 * U32 * 1.89 * 1.5 + pc_ulp32(1.5))
                fail_msg("constant, filter %d, out %d = %.9g", f, i, out[i]);
        free(out);
    }
    /* Bilinear: exact wherever the source coordinate lies in [0, in - 1] on both axes (no
     * clamp at 0 and no repeated last sample): 5x6 -> 9x11. */
    {
        const int64_t sh = 5, sw = 6, dh = 9, dw = 11;
        float *out = ramp_dut(sh, sw, dh, dw, POSENC_RESIZE_BILINEAR, a, b, e);
        int exact = 0;
        for (int64_t r = 0; r < dh; r++)
            for (int64_t c = 0; c < dw; c++) {
                double y = src_coord(sh, dh, r), x = src_coord(sw, dw, c);
                if (y < 0 || y > sh - 1 || x < 0 || x > sw - 1)
                    continue;
                double want = a + b * x + e * y;
                double bound =
                    20.0 * U32 * (fabs(a) + fabs(b) * sw + fabs(e) * sh) + pc_ulp32(want);
                if (fabs(out[r * dw + c] - want) > bound)
                    fail_msg("bilinear ramp (%lld, %lld): %.9g, want %.9g", (long long)r,
                             (long long)c, out[r * dw + c], want);
                exact++;
            }
        assert_true(exact >= 5 * 7); /* the interior was checked */
        free(out);
    }
    /* Bicubic, A = -0.75: exact where t is 0 or 1/2 and the taps floor-1 .. floor+2 are all
     * inside the grid. 12x15 -> 6x5: rows real = 2r + 0.5 (t = 1/2, taps 2r-1 .. 2r+2:
     * inside for r = 1..4), columns real = 3c + 1 (t = 0: only the centre tap has weight,
     * exact for every c). */
    {
        const int64_t sh = 12, sw = 15, dh = 6, dw = 5;
        float *out = ramp_dut(sh, sw, dh, dw, POSENC_RESIZE_BICUBIC, a, b, e);
        for (int64_t r = 1; r <= 4; r++)
            for (int64_t c = 0; c < dw; c++) {
                double want = a + b * src_coord(sw, dw, c) + e * src_coord(sh, dh, r);
                double bound = 20.0 * U32 * 1.89 * (fabs(a) + fabs(b) * sw + fabs(e) * sh) +
                               pc_ulp32(want);
                if (fabs(out[r * dw + c] - want) > bound)
                    fail_msg("bicubic ramp (%lld, %lld): %.9g, want %.9g", (long long)r,
                             (long long)c, out[r * dw + c], want);
            }
        /* r = 0 reads the clamped tap -1: the ramp is not reproduced there */
        double edge = a + b * src_coord(sw, dw, 0) + e * src_coord(sh, dh, 0);
        assert_true(fabs(out[0] - edge) > 1e-3);
        free(out);
    }
    /* Elsewhere bicubic with A = -0.75 is off a ramp by slope * (sum_j w_j j - t): at
     * t = 1/4 (12 -> 24 columns: real = c/2 - 1/4, t = 3/4 or 1/4) the taps give 0.296875
     * instead of 0.25 - as torch does. Column 5: real = 2.25, t = 1/4, taps 1..4 inside. */
    {
        float *out = ramp_dut(1, 12, 1, 24, POSENC_RESIZE_BICUBIC, 0.0, 1.0, 0.0);
        double want_torch = 2.0 + 0.296875;
        if (fabs(out[5] - want_torch) > 20.0 * U32 * 1.375 * 12 + pc_ulp32(want_torch))
            fail_msg("bicubic at t = 1/4: %.9g, torch %.9g", out[5], want_torch);
        free(out);
    }
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    enum { D = 8, H = 3, W = 4, N = H * W + 1 };
    const posenc_status INV = POSENC_ERR_INVALID_ARGUMENT;
    unsigned char poison[D * N * 4];
    memset(poison, 0xA5, sizeof(poison));
    float src[D * N] = {0};
    posenc_buffer *db = th_upload(th.dut, poison, sizeof(poison));
    posenc_buffer *sb = th_upload(th.dut, src, sizeof(src));
    posenc_tensor dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, N, 1, 1);
    posenc_tensor s = posenc_tensor_contiguous(sb, 0, POSENC_DTYPE_F32, D, N, 1, 1);
    posenc_tensor t;
    struct posenc_2d_params p = {.cls_token = 1};
    struct posenc_2d_params q;

    assert_int_equal(posenc_sincos_2d(NULL, H, W, &dst, &p), INV);
    th_expect(posenc_sincos_2d(th.dut, H, W, NULL, &p), INV, "dst is NULL", "dst NULL");
    th_expect(posenc_sincos_2d(th.dut, H, W, &dst, NULL), INV, "dst->ne", "no cls row");
    th_expect(posenc_sincos_2d(th.dut, 0, W, &dst, &p), INV, "grid_h = 0", "zero grid");
    th_expect(posenc_sincos_2d(th.dut, H, W + 1, &dst, &p), INV, "dst->ne", "grid mismatch");
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, 6, N, 1, 1);
    th_expect(posenc_sincos_2d(th.dut, H, W, &t, &p), INV, "multiple of 4", "d = 6");
    t = dst;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_sincos_2d(th.dut, H, W, &t, &p), INV, "dst->dtype", "i32 dst");
    q = p;
    q.base = -1.0f;
    th_expect(posenc_sincos_2d(th.dut, H, W, &dst, &q), INV, "params->base", "negative base");
    q = p;
    q.grid_scale = NAN;
    th_expect(posenc_sincos_2d(th.dut, H, W, &dst, &q), INV, "params->grid_scale", "NaN scale");
    q = p;
    q.cls_token = 2;
    th_expect(posenc_sincos_2d(th.dut, H, W, &dst, &q), INV, "params->cls_token", "cls 2");
    q = p;
    q.reserved[3] = 1;
    th_expect(posenc_sincos_2d(th.dut, H, W, &dst, &q), INV, "params->reserved[3]", "reserved");

    struct posenc_resize_params rp = {.filter = POSENC_RESIZE_BILINEAR, .cls_token = 1};
    struct posenc_resize_params rq;
    assert_int_equal(posenc_resize_2d(NULL, &s, H, W, &dst, H, W, &rp), INV);
    th_expect(posenc_resize_2d(th.dut, NULL, H, W, &dst, H, W, &rp), INV, "src is NULL",
              "src NULL");
    th_expect(posenc_resize_2d(th.dut, &s, H, W, NULL, H, W, &rp), INV, "dst is NULL", "dst NULL");
    th_expect(posenc_resize_2d(th.dut, &s, W, H + 1, &dst, H, W, &rp), INV, "src->ne", "src grid");
    th_expect(posenc_resize_2d(th.dut, &s, H, W, &dst, 2, 5, &rp), INV, "dst->ne", "dst grid");
    th_expect(posenc_resize_2d(th.dut, &s, H, W, &dst, H, 0, &rp), INV, "dst_w = 0", "zero size");
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D / 2, N, 1, 1);
    th_expect(posenc_resize_2d(th.dut, &s, H, W, &t, H, W, &rp), INV, "dst->ne", "d mismatch");
    t = posenc_tensor_contiguous(db, 4, POSENC_DTYPE_F32, D, N - 1, 1, 1);
    posenc_tensor s2 = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, N - 1, 1, 1);
    th_expect(posenc_resize_2d(th.dut, &s2, H, W, &t, H, W, NULL), INV, "src overlaps dst",
              "overlap");
    rq = rp;
    rq.filter = (posenc_resize_filter)5;
    th_expect(posenc_resize_2d(th.dut, &s, H, W, &dst, H, W, &rq), INV, "params->filter", "filter");
    rq = rp;
    rq.cls_token = -1;
    th_expect(posenc_resize_2d(th.dut, &s, H, W, &dst, H, W, &rq), INV, "params->cls_token", "cls");
    rq = rp;
    rq.reserved[0] = 9;
    th_expect(posenc_resize_2d(th.dut, &s, H, W, &dst, H, W, &rq), INV, "params->reserved[0]",
              "reserved");
    t = s;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_resize_2d(th.dut, &t, H, W, &dst, H, W, &rp), INV, "src->dtype", "i32 src");

    /* empty (d = 0): a valid no-op */
    t = dst;
    t.ne[0] = 0;
    posenc_tensor s0 = s;
    s0.ne[0] = 0;
    th_expect(posenc_resize_2d(th.dut, &s0, H, W, &t, H, W, &rp), POSENC_OK, NULL, "empty resize");
    th_expect(posenc_sincos_2d(th.dut, H, W, &t, &p), POSENC_OK, NULL, "empty sincos");

    th_expect_untouched(db, 0xA5, "vision2d");
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&sb);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "vision2d");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_mae_independent),  cmocka_unit_test(test_cls_padded),
        cmocka_unit_test(test_torch_known),
        cmocka_unit_test(test_torch_independent), cmocka_unit_test(test_resize_identity),
        cmocka_unit_test(test_resize_ramp),      cmocka_unit_test(test_bad_input),
    };
    static const enum pc_op ops[] = {PC_OP_SINCOS_2D, PC_OP_RESIZE_2D};
    rc = th_run_with_cases("vision2d", fixed, sizeof(fixed) / sizeof(fixed[0]), ops,
                           sizeof(ops) / sizeof(ops[0]));
    th_fini();
    return rc;
}
