/*
 * ops_softmax.c - posenc_softmax: checks and dispatch (ggml's GGML_OP_SOFT_MAX).
 *
 * Everything the user passes is checked here, before anything is written; the per-head
 * ALiBi slopes (ggml's m0 / m1 rule, which is posenc_alibi_slopes' rule) are computed once
 * per call on the host in double. src/split.c cuts the op along rows, heads and batches
 * when a view is larger than one binding of the device.
 */
#include "backend.h"
#include "enc_checks.h"
#include "split.h"
#include "tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static posenc_status softmax_params(posenc_context *ctx, const struct posenc_softmax_params *in,
                                    struct posenc_softmax_params *out)
{
    struct posenc_softmax_params p;
    memset(&p, 0, sizeof(p));
    if (in)
        p = *in;
    PE_RETURN_IF_ERROR(pe_enc_reserved(ctx, p.reserved, PE_ARRAY_SIZE(p.reserved)));
    if (p.flags != 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->flags = 0x%x, must be 0 (no flags are defined)",
                        (unsigned)p.flags);
    if (!isfinite(p.scale))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->scale = %g is not finite",
                        (double)p.scale);
    if (!isfinite(p.max_bias) || p.max_bias < 0.0f)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->max_bias = %g must be finite and >= 0 (0 = no ALiBi slopes)",
                        (double)p.max_bias);
    if (p.scale == 0.0f)
        p.scale = 1.0f;
    *out = p;
    return POSENC_OK;
}

static posenc_status check_mask(posenc_context *ctx, const posenc_tensor *x,
                                const posenc_tensor *mask, struct pe_view *out)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "mask", mask, false, out));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "mask", mask));
    if (mask->ne[0] != x->ne[0])
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "mask->ne[0] = %lld differs from x->ne[0] = %lld (one mask value per "
                        "element of a row)",
                        (long long)mask->ne[0], (long long)x->ne[0]);
    if (mask->ne[1] < x->ne[1])
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "mask->ne[1] = %lld is less than x->ne[1] = %lld (row i of x uses mask "
                        "row i)",
                        (long long)mask->ne[1], (long long)x->ne[1]);
    for (int k = 2; k < 4; k++)
        if (mask->ne[k] < 1 || x->ne[k] % mask->ne[k] != 0)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "mask->ne[%d] = %lld does not divide x->ne[%d] = %lld (the mask is "
                            "broadcast over %s)",
                            k, (long long)mask->ne[k], k, (long long)x->ne[k],
                            k == 2 ? "heads" : "batches");
    return POSENC_OK;
}

static posenc_status check_sinks(posenc_context *ctx, const posenc_tensor *x,
                                 const posenc_tensor *sinks, struct pe_view *out)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "sinks", sinks, false, out));
    if (sinks->dtype != POSENC_DTYPE_F32)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "sinks->dtype = %s, must be f32",
                        posenc_dtype_name(sinks->dtype));
    if (sinks->ne[0] != x->ne[2] || sinks->ne[1] != 1 || sinks->ne[2] != 1 || sinks->ne[3] != 1)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "sinks->ne = [%lld, %lld, %lld, %lld], must be [x->ne[2] = %lld, 1, 1, "
                        "1] (one sink per head)",
                        (long long)sinks->ne[0], (long long)sinks->ne[1],
                        (long long)sinks->ne[2], (long long)sinks->ne[3], (long long)x->ne[2]);
    return POSENC_OK;
}

posenc_status posenc_softmax(posenc_context *ctx, const posenc_tensor *x,
                             const posenc_tensor *mask, const posenc_tensor *sinks,
                             const posenc_tensor *dst, const struct posenc_softmax_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_softmax_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "x", x, false, &op.x));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "x", x));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "dst", dst));
    if (!pe_same_shape(x, dst))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dst->ne = [%lld, %lld, %lld, %lld] differs from x->ne = [%lld, %lld, "
                        "%lld, %lld]",
                        (long long)dst->ne[0], (long long)dst->ne[1], (long long)dst->ne[2],
                        (long long)dst->ne[3], (long long)x->ne[0], (long long)x->ne[1],
                        (long long)x->ne[2], (long long)x->ne[3]);
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "x", x, true));
    if (mask) {
        PE_RETURN_IF_ERROR(check_mask(ctx, x, mask, &op.mask));
        PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "mask", mask, false));
    }
    if (sinks) {
        PE_RETURN_IF_ERROR(check_sinks(ctx, x, sinks, &op.sinks));
        PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "sinks", sinks, false));
    }
    struct posenc_softmax_params p;
    memset(&p, 0, sizeof(p));
    PE_RETURN_IF_ERROR(softmax_params(ctx, params, &p));
    if (pe_tensor_empty(dst))
        return POSENC_OK;
    if (!ctx->backend->vt->softmax)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no softmax op",
                        ctx->backend->vt->name);

    const int64_t H = x->ne[2];
    if (op.mask.mem)
        op.mask.ne[1] = x->ne[1]; /* mask rows past x's are never read */
    op.n_head = H;
    op.scale = p.scale;
    op.scale_f32 = p.scale;
    double *slopes = NULL;
    float *slopes32 = NULL;
    if (op.mask.mem && p.max_bias > 0.0f) {
        slopes = malloc((size_t)H * sizeof(double));
        slopes32 = malloc((size_t)H * sizeof(float));
        if (!slopes || !slopes32) {
            free(slopes);
            free(slopes32);
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for %lld slopes",
                            (long long)H);
        }
        const struct posenc_alibi_params ap = {.max_bias = p.max_bias};
        posenc_status st = posenc_alibi_slopes(H, &ap, slopes);
        if (st != POSENC_OK) { /* cannot happen: max_bias > 0 and finite, H >= 1 */
            free(slopes);
            free(slopes32);
            return pe_error(ctx, POSENC_ERR_INTERNAL, "softmax: ALiBi slopes for %lld heads "
                            "failed", (long long)H);
        }
        for (int64_t h = 0; h < H; h++)
            slopes32[h] = (float)slopes[h];
        op.slopes = slopes;
        op.slopes_f32 = slopes32;
    }
    posenc_status st = pe_run_softmax(ctx, &op);
    free(slopes);
    free(slopes32);
    return st;
}
