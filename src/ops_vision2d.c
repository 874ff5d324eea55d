/*
 * ops_vision2d.c - posenc_sincos_2d (composed from posenc_sinusoidal on two strided views
 * of dst) and posenc_resize_2d (torch's interpolation taps, computed on the host).
 */
#include "backend.h"
#include "split.h"
#include "enc_checks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- 2-D sin-cos ---------------------------------------------------------------------- */

static posenc_status resolve_2d(posenc_context *ctx, const struct posenc_2d_params *in,
                                struct posenc_2d_params *out)
{
    struct posenc_2d_params p;
    memset(&p, 0, sizeof(p));
    if (in)
        p = *in;
    PE_RETURN_IF_ERROR(pe_enc_reserved(ctx, p.reserved, PE_ARRAY_SIZE(p.reserved)));
    if (p.base == 0.0f)
        p.base = 10000.0f;
    if (p.grid_scale == 0.0f)
        p.grid_scale = 1.0f;
    if (!isfinite(p.base) || p.base <= 0.0f)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->base = %g must be finite and > 0", (double)p.base);
    if (!isfinite(p.grid_scale) || p.grid_scale <= 0.0f)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->grid_scale = %g must be finite and > 0", (double)p.grid_scale);
    PE_RETURN_IF_ERROR(pe_enc_flag(ctx, "params->cls_token", p.cls_token));
    *out = p;
    return POSENC_OK;
}

/* Positions c / grid_scale (c = 0..n-1) as f32 in a scratch buffer of ctx (scratch.c): the
 * division is one f32 operation, as DiT's float32 numpy grid. */
static posenc_status make_coords(posenc_context *ctx, int64_t n, float grid_scale,
                                 posenc_buffer **out)
{
    float *v = malloc((size_t)n * sizeof(float));
    if (!v)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for %lld coordinates",
                        (long long)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i / grid_scale;
    posenc_status st = pe_scratch_take(ctx, (size_t)n * sizeof(float), out);
    if (st == POSENC_OK)
        st = posenc_buffer_write(*out, 0, v, (size_t)n * sizeof(float));
    free(v);
    return st;
}

posenc_status posenc_sincos_2d(posenc_context *ctx, int64_t grid_h, int64_t grid_w,
                               const posenc_tensor *dst, const struct posenc_2d_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, NULL));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "dst", dst));
    struct posenc_2d_params p;
    memset(&p, 0, sizeof(p));
    PE_RETURN_IF_ERROR(resolve_2d(ctx, params, &p));
    /* coordinates must stay exact in f32 */
    if (grid_h < 1 || grid_w < 1 || grid_h > (1 << 24) || grid_w > (1 << 24))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "grid_h = %lld, grid_w = %lld: each must be in [1, 2^24]",
                        (long long)grid_h, (long long)grid_w);
    const int64_t d = dst->ne[0], cls = p.cls_token, n_tok = grid_h * grid_w + cls;
    if (d % 4 != 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dst->ne[0] = %lld: d must be a multiple of 4 (a sin and a cos block "
                        "per axis)",
                        (long long)d);
    const int64_t want[4] = {-1, n_tok, 1, 1};
    PE_RETURN_IF_ERROR(pe_enc_shape(ctx, "dst", dst, want, "[d, grid_h*grid_w (+1), 1, 1]"));
    if (pe_tensor_empty(dst))
        return POSENC_OK;
    if (!ctx->backend->vt->sinusoidal)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "backend %s has no sinusoidal op (posenc_sincos_2d is built on it)",
                        ctx->backend->vt->name);

    /* Views of dst: the column half [d/2, w, h] (tokens in row-major grid order) and the
     * row half [d/2, h, w] (the same tokens, dims 1 and 2 swapped), so each half has one
     * position per index of its dim 1, broadcast over dim 2. */
    const int64_t half = d / 2;
    posenc_tensor cols = *dst, rows = *dst;
    cols.offset = dst->offset + (size_t)(cls * dst->nb[1]);
    cols.ne[0] = half;
    cols.ne[1] = grid_w;
    cols.ne[2] = grid_h;
    cols.nb[2] = dst->nb[1] * grid_w;
    cols.nb[3] = 0;
    rows = cols;
    rows.offset = cols.offset + (size_t)(half * dst->nb[0]);
    rows.ne[1] = grid_h;
    rows.ne[2] = grid_w;
    rows.nb[1] = cols.nb[2];
    rows.nb[2] = dst->nb[1];

    /* Each half: HALF_SPLIT over D = d/2 dims with w_i = base^(-i/(D/2)), i < D/2:
     * posenc_sinusoidal's w_i = base^(-i/(half/2 - freq_shift)) with freq_shift 0 -
     * MAE's omega = 1/base^(i/(D/2)), emb = concat[sin(pos*omega), cos(pos*omega)]. */
    struct posenc_sinusoidal_params sp;
    memset(&sp, 0, sizeof(sp));
    sp.base = p.base;
    sp.layout = POSENC_SIN_HALF_SPLIT;

    if (ctx->check_only) /* the rest makes temporaries and runs */
        return POSENC_OK;
    posenc_buffer *pc = NULL, *pr = NULL;
    posenc_status st = make_coords(ctx, grid_w, p.grid_scale, &pc);
    if (st == POSENC_OK)
        st = make_coords(ctx, grid_h, p.grid_scale, &pr);
    if (st == POSENC_OK) {
        posenc_tensor tc = posenc_tensor_contiguous(pc, 0, POSENC_DTYPE_F32, grid_w, 1, 1, 1);
        st = posenc_sinusoidal(ctx, NULL, &tc, &cols, &sp);
    }
    if (st == POSENC_OK) {
        posenc_tensor tr = posenc_tensor_contiguous(pr, 0, POSENC_DTYPE_F32, grid_h, 1, 1, 1);
        st = posenc_sinusoidal(ctx, NULL, &tr, &rows, &sp);
    }
    if (st == POSENC_OK && cls) {
        /* the class token's row: zeros, filled on the device (a host write per element of
         * a strided row was one blocking write each on OpenCL) */
        posenc_tensor row0 = *dst;
        row0.ne[1] = 1;
        st = posenc_fill(ctx, &row0, 0.0);
    }
    /* The temporaries must outlive the queued ops; keep the first error's message. */
    char msg[PE_ERR_MAX];
    pe_strlcpy(msg, ctx->last_error, sizeof(msg));
    posenc_status fst = posenc_context_finish(ctx);
    posenc_buffer *coords[2] = {pc, pr};
    pe_scratch_give(ctx, coords, 2);
    if (st != POSENC_OK) {
        pe_strlcpy(ctx->last_error, msg, sizeof(ctx->last_error));
        return st;
    }
    return fst;
}

/* ---- resize ---------------------------------------------------------------------------- */

/* torch's cubic convolution, A = -0.75 (aten/src/ATen/native/UpSample.h). */
static double cubic1(double x, double a)
{
    return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0; /* |x| <= 1 */
}

static double cubic2(double x, double a)
{
    return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a; /* 1 < |x| < 2 */
}

/*
 * The 4 taps of each of `out` outputs along one axis of `in` inputs, for
 * torch.nn.functional.interpolate(size=..., align_corners=False) without antialiasing,
 * in double (torch computes them in the input's opmath type, float for f32):
 *   scale = in / out, real = scale*(i + 0.5) - 0.5   (area_pixel_compute_source_index)
 *   bilinear: real clamped at 0; i0 = min(floor(real), in-1), l1 = clamp(real - i0, 0, 1),
 *             i1 = i0 + (i0 < in-1); taps i0 (weight 1 - l1) and i1 (weight l1), the
 *             other two i0 with weight 0 (compute_source_index_and_lambda; in == out
 *             copies);
 *   bicubic:  real unclamped; i0 = min(floor(real), in-1), t = clamp(real - i0, 0, 1)
 *             (guard_index_and_lambda); taps i0-1 .. i0+2 clamped to [0, in-1]
 *             (upsample_get_value_bounded) with get_cubic_upsample_coefficients(t).
 */
static void taps_1d(int64_t in, int64_t out, posenc_resize_filter filter, int32_t *idx,
                    double *w)
{
    const double scale = (double)in / (double)out;
    for (int64_t i = 0; i < out; i++) {
        int32_t *ix = idx + 4 * i;
        double *wx = w + 4 * i;
        if (filter == POSENC_RESIZE_BILINEAR) {
            int64_t i0, i1;
            double l1;
            if (in == out) {
                i0 = i1 = i;
                l1 = 0.0;
            } else {
                double real = scale * ((double)i + 0.5) - 0.5;
                if (real < 0.0)
                    real = 0.0;
                i0 = (int64_t)floor(real);
                if (i0 > in - 1)
                    i0 = in - 1;
                l1 = fmin(fmax(real - (double)i0, 0.0), 1.0);
                i1 = i0 + (i0 < in - 1 ? 1 : 0);
            }
            ix[0] = (int32_t)i0;
            ix[1] = (int32_t)i1;
            ix[2] = ix[3] = (int32_t)i0;
            wx[0] = 1.0 - l1;
            wx[1] = l1;
            wx[2] = wx[3] = 0.0;
        } else {
            const double a = -0.75;
            double real = scale * ((double)i + 0.5) - 0.5;
            int64_t i0 = (int64_t)floor(real);
            if (i0 > in - 1)
                i0 = in - 1;
            double t = fmin(fmax(real - (double)i0, 0.0), 1.0);
            wx[0] = cubic2(t + 1.0, a);
            wx[1] = cubic1(t, a);
            wx[2] = cubic1(1.0 - t, a);
            wx[3] = cubic2(2.0 - t, a);
            for (int j = 0; j < 4; j++) {
                int64_t k = i0 - 1 + j;
                ix[j] = (int32_t)(k < 0 ? 0 : k > in - 1 ? in - 1 : k);
            }
        }
    }
}

posenc_status posenc_resize_2d(posenc_context *ctx, const posenc_tensor *src, int64_t src_h,
                               int64_t src_w, const posenc_tensor *dst, int64_t dst_h,
                               int64_t dst_w, const struct posenc_resize_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_resize_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "dst", dst));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "src", src, false, &op.src));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "src", src));
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "src", src, false));

    struct posenc_resize_params p;
    memset(&p, 0, sizeof(p));
    if (params)
        p = *params;
    PE_RETURN_IF_ERROR(pe_enc_reserved(ctx, p.reserved, PE_ARRAY_SIZE(p.reserved)));
    if (p.filter != POSENC_RESIZE_BICUBIC && p.filter != POSENC_RESIZE_BILINEAR)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->filter = %d is not a posenc_resize_filter", (int)p.filter);
    PE_RETURN_IF_ERROR(pe_enc_flag(ctx, "params->cls_token", p.cls_token));
    const int64_t sizes[4] = {src_h, src_w, dst_h, dst_w};
    static const char *const size_names[4] = {"src_h", "src_w", "dst_h", "dst_w"};
    for (int k = 0; k < 4; k++)
        if (sizes[k] < 1 || sizes[k] > INT32_MAX)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s = %lld, must be in [1, 2^31)",
                            size_names[k], (long long)sizes[k]);
    const int64_t cls = p.cls_token;
    if (src_h > INT64_MAX / src_w || dst_h > INT64_MAX / dst_w)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "grid size overflows int64");
    const int64_t want_src[4] = {-1, src_h * src_w + cls, 1, 1};
    const int64_t want_dst[4] = {src->ne[0], dst_h * dst_w + cls, 1, 1};
    PE_RETURN_IF_ERROR(pe_enc_shape(ctx, "src", src, want_src, "[d, src_h*src_w (+1), 1, 1]"));
    PE_RETURN_IF_ERROR(pe_enc_shape(ctx, "dst", dst, want_dst, "[d, dst_h*dst_w (+1), 1, 1]"));
    if (pe_tensor_empty(dst))
        return POSENC_OK;
    if (!ctx->backend->vt->resize_2d)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no resize_2d op",
                        ctx->backend->vt->name);

    int32_t *ix = malloc((size_t)(4 * dst_w) * sizeof(int32_t));
    int32_t *iy = malloc((size_t)(4 * dst_h) * sizeof(int32_t));
    double *wx = malloc((size_t)(4 * dst_w) * sizeof(double));
    double *wy = malloc((size_t)(4 * dst_h) * sizeof(double));
    float *wx32 = malloc((size_t)(4 * dst_w) * sizeof(float));
    float *wy32 = malloc((size_t)(4 * dst_h) * sizeof(float));
    posenc_status st;
    if (!ix || !iy || !wx || !wy || !wx32 || !wy32) {
        st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for %lld + %lld taps",
                      (long long)(4 * dst_w), (long long)(4 * dst_h));
    } else {
        taps_1d(src_w, dst_w, p.filter, ix, wx);
        taps_1d(src_h, dst_h, p.filter, iy, wy);
        for (int64_t i = 0; i < 4 * dst_w; i++)
            wx32[i] = (float)wx[i];
        for (int64_t i = 0; i < 4 * dst_h; i++)
            wy32[i] = (float)wy[i];
        op.src_w = src_w;
        op.dst_h = dst_h;
        op.dst_w = dst_w;
        op.cls = (int)cls;
        op.ix = ix;
        op.iy = iy;
        op.wx = wx;
        op.wy = wy;
        op.wx_f32 = wx32;
        op.wy_f32 = wy32;
        const struct pe_view *views[2] = {&op.src, &op.dst};
        const char *names[2] = {"src", "dst"};
        st = pe_check_binding(ctx, "resize_2d", 2, views, names);
        if (st == POSENC_OK && !ctx->check_only)
            st = ctx->backend->vt->resize_2d(ctx->backend, &op);
    }
    free(ix);
    free(iy);
    free(wx);
    free(wy);
    free(wx32);
    free(wy32);
    return st;
}
