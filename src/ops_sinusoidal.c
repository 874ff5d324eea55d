/* ops_sinusoidal.c - posenc_sinusoidal: checks, the frequency table, dispatch. */
#include "backend.h"
#include "split.h"
#include "tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Resolve defaults and check params; d is the model dimension. ctx may be NULL. */
static posenc_status resolve_params(posenc_context *ctx, int64_t d,
                                    const struct posenc_sinusoidal_params *in,
                                    struct posenc_sinusoidal_params *out)
{
    struct posenc_sinusoidal_params p;
    memset(&p, 0, sizeof(p));
    if (in)
        p = *in;
    for (size_t i = 0; i < PE_ARRAY_SIZE(p.reserved); i++)
        if (p.reserved[i])
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->reserved[%zu] = %u, must be 0", i, p.reserved[i]);
    if (p.base == 0.0f)
        p.base = 10000.0f;
    if (p.x_scale == 0.0f)
        p.x_scale = 1.0f;
    if (!isfinite(p.base) || p.base <= 0.0f)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->base = %g must be finite and > 0", (double)p.base);
    if (!isfinite(p.x_scale))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->x_scale = %g is not finite",
                        (double)p.x_scale);
    if ((int)p.layout < 0 || p.layout > POSENC_SIN_HALF_SPLIT_COS_FIRST)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->layout = %d is not a posenc_sin_layout", (int)p.layout);
    if (d < 2 || d % 2 != 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "d = %lld: the encoding dimension must be even and >= 2", (long long)d);
    double half = (double)(d / 2);
    if (!isfinite(p.freq_shift) || (double)p.freq_shift >= half)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->freq_shift = %g must be finite and < d/2 = %g",
                        (double)p.freq_shift, half);
    *out = p;
    return POSENC_OK;
}

static void fill_freqs(int64_t d, const struct posenc_sinusoidal_params *p, double *freq)
{
    int64_t half = d / 2;
    double denom = (double)half - (double)p->freq_shift;
    double lb = log((double)p->base);
    for (int64_t i = 0; i < half; i++)
        freq[i] = exp(-lb * (double)i / denom); /* base^(-i/denom), in double */
}

posenc_status posenc_sinusoidal_freqs(int64_t d, const struct posenc_sinusoidal_params *params,
                                      double *out_freq)
{
    struct posenc_sinusoidal_params p;
    PE_RETURN_IF_ERROR(resolve_params(NULL, d, params, &p));
    if (!out_freq)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "out_freq is NULL");
    fill_freqs(d, &p, out_freq);
    return POSENC_OK;
}

posenc_status posenc_sinusoidal(posenc_context *ctx, const posenc_tensor *x,
                                const posenc_tensor *pos, const posenc_tensor *dst,
                                const struct posenc_sinusoidal_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_sinusoidal_op op;
    memset(&op, 0, sizeof(op));

    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    if (dst->dtype != POSENC_DTYPE_F32 && dst->dtype != POSENC_DTYPE_F16)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "dst->dtype = %s, must be f32 or f16",
                        posenc_dtype_name(dst->dtype));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "pos", pos, false, &op.pos));
    if (pos->dtype != POSENC_DTYPE_I32 && pos->dtype != POSENC_DTYPE_F32)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "pos->dtype = %s, must be i32 or f32",
                        posenc_dtype_name(pos->dtype));
    if (pos->ne[0] != dst->ne[1] || (pos->ne[1] != 1 && pos->ne[1] != dst->ne[2]) ||
        (pos->ne[2] != 1 && pos->ne[2] != dst->ne[3]) || pos->ne[3] != 1)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "pos->ne = [%lld, %lld, %lld, %lld] does not fit dst->ne = [%lld, %lld, "
                        "%lld, %lld]: need [T, 1 or B2, 1 or B3, 1] for dst [d, T, B2, B3]",
                        (long long)pos->ne[0], (long long)pos->ne[1], (long long)pos->ne[2],
                        (long long)pos->ne[3], (long long)dst->ne[0], (long long)dst->ne[1],
                        (long long)dst->ne[2], (long long)dst->ne[3]);
    if (pe_tensors_overlap(pos, dst))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "pos overlaps dst in the same buffer");
    if (x) {
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "x", x, false, &op.x));
        if (x->dtype != POSENC_DTYPE_F32 && x->dtype != POSENC_DTYPE_F16)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "x->dtype = %s, must be f32 or f16",
                            posenc_dtype_name(x->dtype));
        if (!pe_same_shape(x, dst))
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "x->ne = [%lld, %lld, %lld, %lld] differs from dst->ne = [%lld, %lld, "
                            "%lld, %lld]",
                            (long long)x->ne[0], (long long)x->ne[1], (long long)x->ne[2],
                            (long long)x->ne[3], (long long)dst->ne[0], (long long)dst->ne[1],
                            (long long)dst->ne[2], (long long)dst->ne[3]);
        if (pe_tensors_overlap(x, dst) && !pe_tensors_identical(x, dst))
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "x partially overlaps dst: it must be exactly dst (in place) or "
                            "disjoint from it");
    }
    struct posenc_sinusoidal_params p;
    if (dst->ne[0] == 0) /* empty: a valid no-op, but the params must still be valid */
        return resolve_params(ctx, 2, params, &p);
    PE_RETURN_IF_ERROR(resolve_params(ctx, dst->ne[0], params, &p));
    if (pe_tensor_empty(dst))
        return POSENC_OK;
    if (!ctx->backend->vt->sinusoidal)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no sinusoidal op",
                        ctx->backend->vt->name);

    /* broadcast positions: stride 0 over size-1 batch dims */
    op.pos.ne[0] = dst->ne[1];
    op.pos.ne[1] = dst->ne[2];
    op.pos.ne[2] = dst->ne[3];
    op.pos.ne[3] = 1;
    if (pos->ne[1] == 1)
        op.pos.st[1] = 0;
    if (pos->ne[2] == 1)
        op.pos.st[2] = 0;
    op.pos.st[3] = 0;

    op.half = dst->ne[0] / 2;
    op.layout = p.layout;
    op.x_scale = p.x_scale;
    double *freq = malloc((size_t)op.half * sizeof(double));
    float *freq_f32 = malloc(2 * (size_t)op.half * sizeof(float));
    if (!freq || !freq_f32) {
        free(freq);
        free(freq_f32);
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for %lld frequencies",
                        (long long)op.half);
    }
    fill_freqs(dst->ne[0], &p, freq);
    /* hi and lo f32 words (quarter turns) for the GPU kernels; a frequency past the f32
     * range (a base below 1 with a large freq_shift, say) is refused on every backend */
    int64_t bad = 0;
    if (!pe_freq_split(freq, op.half, freq_f32, freq_f32 + op.half, &bad)) {
        posenc_status st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                                    "frequency %lld = %g (params->base = %g, freq_shift = %g) "
                                    "is out of the f32 range",
                                    (long long)bad, freq[bad], (double)p.base,
                                    (double)p.freq_shift);
        free(freq);
        free(freq_f32);
        return st;
    }
    op.freq = freq;
    op.freq_f32 = freq_f32;
    posenc_status st = pe_run_sinusoidal(ctx, &op);
    free(freq);
    free(freq_f32);
    return st;
}
