/* enc_checks.c - see enc_checks.h. */
#include "enc_checks.h"

#include <stdlib.h>
#include <string.h>

posenc_status pe_enc_float(posenc_context *ctx, const char *name, const posenc_tensor *t)
{
    if (t->dtype != POSENC_DTYPE_F32 && t->dtype != POSENC_DTYPE_F16)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->dtype = %s, must be f32 or f16",
                        name, posenc_dtype_name(t->dtype));
    return POSENC_OK;
}

posenc_status pe_enc_shape(posenc_context *ctx, const char *name, const posenc_tensor *t,
                           const int64_t want[4], const char *layout)
{
    for (int k = 0; k < 4; k++)
        if (want[k] >= 0 && t->ne[k] != want[k])
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "%s->ne = [%lld, %lld, %lld, %lld]: ne[%d] must be %lld (%s is %s)",
                            name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3], k, (long long)want[k], name, layout);
    return POSENC_OK;
}

posenc_status pe_enc_alias(posenc_context *ctx, const char *out_name, const posenc_tensor *out,
                           const char *in_name, const posenc_tensor *in, bool may_be_identical)
{
    if (!pe_tensors_overlap(out, in))
        return POSENC_OK;
    if (may_be_identical && pe_tensors_identical(out, in))
        return POSENC_OK;
    if (may_be_identical)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s partially overlaps %s: it must be exactly %s (in place) or disjoint "
                        "from it",
                        in_name, out_name, out_name);
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s overlaps %s in the same buffer",
                    in_name, out_name);
}

posenc_status pe_enc_reserved(posenc_context *ctx, const uint32_t *reserved, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reserved[i])
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->reserved[%zu] = %u, must be 0", i, reserved[i]);
    return POSENC_OK;
}

posenc_status pe_enc_flag(posenc_context *ctx, const char *name, int32_t value)
{
    if (value != 0 && value != 1)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s = %d, must be 0 or 1", name,
                        (int)value);
    return POSENC_OK;
}

posenc_status pe_enc_read_back(posenc_context *ctx, const char *name, const posenc_tensor *t,
                               unsigned char **out_img, uint64_t *out_begin)
{
    uint64_t b0, b1;
    pe_tensor_byte_range(t, &b0, &b1);
    size_t n = (size_t)(b1 - b0);
    unsigned char *img = malloc(n);
    if (!img)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory reading %zu bytes of %s back", n, name);
    posenc_status st = posenc_buffer_read(t->buffer, (size_t)b0, img, n);
    if (st != POSENC_OK) {
        free(img);
        return st;
    }
    *out_img = img;
    *out_begin = b0;
    return POSENC_OK;
}
