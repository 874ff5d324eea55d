/* ops_copy.c - posenc_copy: checks and dispatch (strided copy and f32 <-> f16 convert). */
#include "backend.h"
#include "split.h"
#include "tensor.h"

#include <string.h>

posenc_status posenc_copy(posenc_context *ctx, const posenc_tensor *src, const posenc_tensor *dst)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_copy_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "src", src, false, &op.src));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    if (src->dtype == POSENC_DTYPE_I64 || dst->dtype == POSENC_DTYPE_I64)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s->dtype = i64: posenc_copy takes f32, f16 and i32 (i64 is for row "
                        "indices only)",
                        src->dtype == POSENC_DTYPE_I64 ? "src" : "dst");
    const bool src_float = src->dtype == POSENC_DTYPE_F32 || src->dtype == POSENC_DTYPE_F16;
    const bool dst_float = dst->dtype == POSENC_DTYPE_F32 || dst->dtype == POSENC_DTYPE_F16;
    if (src->dtype != dst->dtype && !(src_float && dst_float))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "src->dtype = %s, dst->dtype = %s: posenc_copy converts only between "
                        "f32 and f16 (i32 copies only to i32)",
                        posenc_dtype_name(src->dtype), posenc_dtype_name(dst->dtype));
    if (!pe_same_shape(src, dst))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dst->ne = [%lld, %lld, %lld, %lld] differs from src->ne = [%lld, %lld, "
                        "%lld, %lld]",
                        (long long)dst->ne[0], (long long)dst->ne[1], (long long)dst->ne[2],
                        (long long)dst->ne[3], (long long)src->ne[0], (long long)src->ne[1],
                        (long long)src->ne[2], (long long)src->ne[3]);
    if (pe_tensor_empty(dst))
        return POSENC_OK;
    if (pe_tensors_overlap(src, dst)) {
        if (pe_tensors_identical(src, dst))
            return POSENC_OK; /* the same elements: nothing to do */
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dst partially overlaps src: it must be exactly src or disjoint from it");
    }
    if (!ctx->backend->vt->copy)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no copy op",
                        ctx->backend->vt->name);
    return pe_run_copy(ctx, &op);
}
