/* ops_set_rows.c - posenc_set_rows (ggml's SET_ROWS): argument checks, the row-index
 * check (read back unless POSENC_ROWS_UNCHECKED), dispatch; and the index helpers that
 * posenc_rope_set_rows (ops_rope.c) shares (rows.h). */
#include "backend.h"
#include "enc_checks.h"
#include "rows.h"
#include "split.h"

#include <stdlib.h>
#include <string.h>

posenc_status pe_rows_params(posenc_context *ctx, const char *name,
                             const struct posenc_set_rows_params *params, bool *out_unchecked)
{
    *out_unchecked = false;
    if (!params)
        return POSENC_OK;
    for (size_t i = 0; i < PE_ARRAY_SIZE(params->reserved); i++)
        if (params->reserved[i])
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->reserved[%zu] = %u, must be 0",
                            name, i, params->reserved[i]);
    if (params->flags & ~(uint32_t)POSENC_ROWS_UNCHECKED)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s->flags = 0x%x has unknown bits (only POSENC_ROWS_UNCHECKED = 0x%x)",
                        name, params->flags, (unsigned)POSENC_ROWS_UNCHECKED);
    *out_unchecked = (params->flags & POSENC_ROWS_UNCHECKED) != 0;
    return POSENC_OK;
}

posenc_status pe_rows_dtype(posenc_context *ctx, const posenc_tensor *rows)
{
    if (rows->dtype != POSENC_DTYPE_I32 && rows->dtype != POSENC_DTYPE_I64)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "rows->dtype = %s, must be i32 or i64",
                        posenc_dtype_name(rows->dtype));
    return POSENC_OK;
}

posenc_status pe_rows_read_check(posenc_context *ctx, const posenc_tensor *rows, int64_t n_rows)
{
    if (ctx->check_only)
        return POSENC_OK; /* the indices are data */
    unsigned char *img = NULL;
    uint64_t begin = 0;
    PE_RETURN_IF_ERROR(pe_enc_read_back(ctx, "rows", rows, &img, &begin));
    const size_t base = (size_t)(rows->offset - begin);
    for (int64_t i2 = 0; i2 < rows->ne[2]; i2++)
        for (int64_t i1 = 0; i1 < rows->ne[1]; i1++)
            for (int64_t i0 = 0; i0 < rows->ne[0]; i0++) {
                const size_t at =
                    base + (size_t)(i0 * rows->nb[0] + i1 * rows->nb[1] + i2 * rows->nb[2]);
                int64_t v;
                if (rows->dtype == POSENC_DTYPE_I64) {
                    memcpy(&v, img + at, 8);
                } else {
                    int32_t w;
                    memcpy(&w, img + at, 4);
                    v = w;
                }
                if (v < 0 || v >= n_rows) {
                    free(img);
                    return pe_error(ctx, POSENC_ERR_OUT_OF_RANGE,
                                    "rows[%lld, %lld, %lld] = %lld is outside the destination's "
                                    "%lld rows (valid indices 0..%lld)",
                                    (long long)i0, (long long)i1, (long long)i2, (long long)v,
                                    (long long)n_rows, (long long)n_rows - 1);
                }
            }
    free(img);
    return POSENC_OK;
}

static posenc_status shape_error(posenc_context *ctx, const char *name, const posenc_tensor *t,
                                 const char *what, const posenc_tensor *src)
{
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                    "%s->ne = [%lld, %lld, %lld, %lld] does not fit src->ne = [%lld, %lld, %lld, "
                    "%lld]: %s",
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], (long long)src->ne[0], (long long)src->ne[1],
                    (long long)src->ne[2], (long long)src->ne[3], what);
}

posenc_status posenc_set_rows(posenc_context *ctx, const posenc_tensor *src,
                              const posenc_tensor *rows, const posenc_tensor *dst,
                              const struct posenc_set_rows_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_set_rows_op op;
    memset(&op, 0, sizeof(op));
    bool unchecked;
    PE_RETURN_IF_ERROR(pe_rows_params(ctx, "params", params, &unchecked));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "src", src, false, &op.src));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "src", src));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "rows", rows, false, &op.rows));
    PE_RETURN_IF_ERROR(pe_rows_dtype(ctx, rows));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "dst", dst));
    if (rows->ne[0] != src->ne[1] || rows->ne[1] < 1 || rows->ne[2] < 1 || rows->ne[3] != 1 ||
        src->ne[2] % rows->ne[1] != 0 || src->ne[3] % rows->ne[2] != 0)
        return shape_error(ctx, "rows", rows,
                           "need rows [r, e2, e3, 1] for src [n, r, d2, d3] with d2 % e2 == 0 "
                           "and d3 % e3 == 0",
                           src);
    if (dst->ne[0] != src->ne[0] || dst->ne[2] != src->ne[2] || dst->ne[3] != src->ne[3])
        return shape_error(ctx, "dst", dst, "need dst [n, R, d2, d3] for src [n, r, d2, d3]",
                           src);
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "src", src, false));
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "rows", rows, false));
    if (pe_tensor_empty(src))
        return POSENC_OK; /* no row to write */
    /* Every index is checked before anything is queued: OUT_OF_RANGE on every backend. */
    if (!unchecked)
        PE_RETURN_IF_ERROR(pe_rows_read_check(ctx, rows, dst->ne[1]));
    if (pe_tensor_empty(dst))
        return POSENC_OK; /* R == 0 and unchecked: every row is skipped */
    if (!ctx->backend->vt->set_rows)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no set_rows op",
                        ctx->backend->vt->name);
    op.n_rows = dst->ne[1];
    return pe_run_set_rows(ctx, &op);
}
