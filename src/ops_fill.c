/* ops_fill.c - posenc_fill: checks, the value converted once to dst's dtype, dispatch. */
#include "backend.h"
#include "split.h"
#include "tensor.h"

#include <math.h>
#include <string.h>

/* The checked op, run (nothing for an empty dst): posenc_fill's and the ramp's tail. */
static posenc_status fill_run(posenc_context *ctx, const posenc_tensor *dst,
                              const struct pe_fill_op *op)
{
    if (pe_tensor_empty(dst))
        return POSENC_OK;
    if (!ctx->backend->vt->fill)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no fill op",
                        ctx->backend->vt->name);
    return pe_run_fill(ctx, op);
}

posenc_status posenc_fill(posenc_context *ctx, const posenc_tensor *dst, double value)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_fill_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    switch (dst->dtype) {
    case POSENC_DTYPE_F32: {
        const float f = (float)value; /* round to nearest even; NaN / inf stay */
        memcpy(&op.bits, &f, sizeof f);
        break;
    }
    case POSENC_DTYPE_F16:
        op.bits = pe_f16_from_double(value); /* one rounding from the double */
        break;
    case POSENC_DTYPE_I32: {
        if (!(value == floor(value)) || value < (double)INT32_MIN || value > (double)INT32_MAX)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "value = %.17g: an i32 dst needs an integer in [%d, %d]", value,
                            (int)INT32_MIN, (int)INT32_MAX);
        const int32_t i = (int32_t)value;
        memcpy(&op.bits, &i, sizeof i);
        break;
    }
    default:
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dst->dtype = %s, must be f32, f16 or i32", posenc_dtype_name(dst->dtype));
    }
    return fill_run(ctx, dst, &op);
}

posenc_status pe_fill_ramp_i32(posenc_context *ctx, const posenc_tensor *dst, int32_t start,
                               int32_t step)
{
    struct pe_fill_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    if (dst->dtype != POSENC_DTYPE_I32)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "dst->dtype = %s, must be i32",
                        posenc_dtype_name(dst->dtype));
    memcpy(&op.bits, &start, sizeof start);
    memcpy(&op.step, &step, sizeof step);
    return fill_run(ctx, dst, &op);
}
