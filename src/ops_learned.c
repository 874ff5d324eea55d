/* ops_learned.c - posenc_learned and posenc_learned_backward: argument checks, the
 * position range check (positions are read back to the host), the deterministic
 * segment lists of the backward pass, dispatch. */
#include "backend.h"
#include "split.h"
#include "enc_checks.h"

#include <stdlib.h>
#include <string.h>

/* Check pos [T, 1 or B, 1, 1] i32 against tokens [d, T, B, 1] (name of that tensor in
 * `tok_name`), fill its view with stride 0 over a shared batch. */
static posenc_status check_pos(posenc_context *ctx, const posenc_tensor *pos,
                               const char *tok_name, const posenc_tensor *tok,
                               struct pe_view *out_view)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "pos", pos, false, out_view));
    if (pos->dtype != POSENC_DTYPE_I32)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "pos->dtype = %s, must be i32",
                        posenc_dtype_name(pos->dtype));
    if (pos->ne[0] != tok->ne[1] || (pos->ne[1] != 1 && pos->ne[1] != tok->ne[2]) ||
        pos->ne[2] != 1 || pos->ne[3] != 1)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "pos->ne = [%lld, %lld, %lld, %lld] does not fit %s->ne = [%lld, %lld, "
                        "%lld, %lld]: need [T, 1 or B, 1, 1] for %s [d, T, B, 1]",
                        (long long)pos->ne[0], (long long)pos->ne[1], (long long)pos->ne[2],
                        (long long)pos->ne[3], tok_name, (long long)tok->ne[0],
                        (long long)tok->ne[1], (long long)tok->ne[2], (long long)tok->ne[3],
                        tok_name);
    out_view->ne[0] = tok->ne[1];
    out_view->ne[1] = tok->ne[2];
    out_view->ne[2] = out_view->ne[3] = 1;
    if (pos->ne[1] == 1)
        out_view->st[1] = 0;
    out_view->st[2] = out_view->st[3] = 0;
    return POSENC_OK;
}

static posenc_status check_table(posenc_context *ctx, const char *name, const posenc_tensor *t,
                                 bool is_output, struct pe_view *out_view)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, name, t, is_output, out_view));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, name, t));
    const int64_t want[4] = {-1, -1, 1, 1};
    return pe_enc_shape(ctx, name, t, want, "[d, rows, 1, 1]");
}

static posenc_status check_tokens(posenc_context *ctx, const char *name, const posenc_tensor *t,
                                  bool is_output, struct pe_view *out_view)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, name, t, is_output, out_view));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, name, t));
    const int64_t want[4] = {-1, -1, -1, 1};
    return pe_enc_shape(ctx, name, t, want, "[d, T, B, 1]");
}

/*
 * Read the positions of T x B tokens back and check each is in [0, rows). On success
 * *out_rows (malloc'd, may be NULL when not wanted) holds the row of token e = t + T*b.
 * The first bad token (in e order) is named in the message.
 */
static posenc_status read_positions(posenc_context *ctx, const posenc_tensor *pos, int64_t T,
                                    int64_t B, int64_t rows, int32_t **out_rows)
{
    unsigned char *img = NULL;
    uint64_t begin = 0;
    PE_RETURN_IF_ERROR(pe_enc_read_back(ctx, "pos", pos, &img, &begin));
    int32_t *r = NULL;
    if (out_rows) {
        r = malloc((size_t)(T * B) * sizeof(int32_t));
        if (!r) {
            free(img);
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "out of host memory for %lld token positions", (long long)(T * B));
        }
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t pb = pos->ne[1] == 1 ? 0 : b;
            size_t at = (size_t)(pos->offset - begin) + (size_t)(t * pos->nb[0] + pb * pos->nb[1]);
            int32_t v;
            memcpy(&v, img + at, 4);
            if (v < 0 || (int64_t)v >= rows) {
                free(img);
                free(r);
                return pe_error(ctx, POSENC_ERR_OUT_OF_RANGE,
                                "pos[%lld, %lld] = %d: token %lld (batch %lld) has position %d, "
                                "outside the table's %lld rows (valid positions 0..%lld)",
                                (long long)t, (long long)pb, (int)v, (long long)t, (long long)b,
                                (int)v, (long long)rows, (long long)rows - 1);
            }
            if (r)
                r[t + T * b] = v;
        }
    free(img);
    if (out_rows)
        *out_rows = r;
    return POSENC_OK;
}

posenc_status posenc_learned(posenc_context *ctx, const posenc_tensor *x,
                             const posenc_tensor *pos, const posenc_tensor *table,
                             const posenc_tensor *dst)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_learned_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(check_tokens(ctx, "dst", dst, true, &op.dst));
    PE_RETURN_IF_ERROR(check_table(ctx, "table", table, false, &op.table));
    if (table->ne[0] != dst->ne[0])
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "table->ne[0] = %lld differs from dst->ne[0] = %lld (the embedding "
                        "dimension d)",
                        (long long)table->ne[0], (long long)dst->ne[0]);
    PE_RETURN_IF_ERROR(check_pos(ctx, pos, "dst", dst, &op.pos));
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "table", table, false));
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "pos", pos, false));
    if (x) {
        PE_RETURN_IF_ERROR(check_tokens(ctx, "x", x, false, &op.x));
        if (!pe_same_shape(x, dst))
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "x->ne = [%lld, %lld, %lld, %lld] differs from dst->ne = [%lld, %lld, "
                            "%lld, %lld]",
                            (long long)x->ne[0], (long long)x->ne[1], (long long)x->ne[2],
                            (long long)x->ne[3], (long long)dst->ne[0], (long long)dst->ne[1],
                            (long long)dst->ne[2], (long long)dst->ne[3]);
        PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "x", x, true));
    }
    if (pe_tensor_empty(dst))
        return POSENC_OK;
    /* Positions are checked before anything is queued: OUT_OF_RANGE on every backend
     * (in check-only mode there are no positions to read). */
    if (!ctx->check_only)
        PE_RETURN_IF_ERROR(
            read_positions(ctx, pos, dst->ne[1], dst->ne[2], table->ne[1], NULL));
    if (!ctx->backend->vt->learned)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no learned op",
                        ctx->backend->vt->name);
    return pe_run_learned(ctx, &op);
}

/* One token of the backward pass: its table row and flat index e = t + T*b. */
struct tok {
    int32_t row, e;
};

static int tok_cmp(const void *a, const void *b)
{
    const struct tok *x = a, *y = b;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return (x->e > y->e) - (x->e < y->e);
}

posenc_status posenc_learned_backward(posenc_context *ctx, const posenc_tensor *dy,
                                      const posenc_tensor *pos, const posenc_tensor *dtable)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_learned_bwd_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(check_table(ctx, "dtable", dtable, true, &op.dtable));
    PE_RETURN_IF_ERROR(check_tokens(ctx, "dy", dy, false, &op.dy));
    if (dtable->ne[0] != dy->ne[0])
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dtable->ne[0] = %lld differs from dy->ne[0] = %lld (the embedding "
                        "dimension d)",
                        (long long)dtable->ne[0], (long long)dy->ne[0]);
    struct pe_view pos_view;
    PE_RETURN_IF_ERROR(check_pos(ctx, pos, "dy", dy, &pos_view));
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dtable", dtable, "dy", dy, false));
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dtable", dtable, "pos", pos, false));
    if (pe_tensor_empty(dy))
        return POSENC_OK; /* nothing to add */
    const int64_t T = dy->ne[1], B = dy->ne[2], n = T * B;
    if (n > INT32_MAX)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dy has %lld x %lld tokens; the backward pass takes at most 2^31 - 1",
                        (long long)T, (long long)B);
    int32_t *rows = NULL;
    if (ctx->check_only) /* the rest depends on the positions */
        return ctx->backend->vt->learned_backward
                   ? POSENC_OK
                   : pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                              "backend %s has no learned_backward op", ctx->backend->vt->name);
    PE_RETURN_IF_ERROR(read_positions(ctx, pos, T, B, dtable->ne[1], &rows));
    if (!ctx->backend->vt->learned_backward) {
        free(rows);
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no learned_backward op",
                        ctx->backend->vt->name);
    }

    /* Segments: tokens sorted by (row, e); (row, e) pairs are unique, so the order is
     * fully determined (qsort's instability cannot show). */
    struct tok *toks = malloc((size_t)n * sizeof(*toks));
    int32_t *entries = malloc((size_t)n * sizeof(int32_t));
    int32_t *seg_start = malloc((size_t)(n + 1) * sizeof(int32_t));
    int32_t *seg_row = malloc((size_t)n * sizeof(int32_t));
    posenc_status st = POSENC_OK;
    if (!toks || !entries || !seg_start || !seg_row) {
        st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                      "out of host memory for the segment lists of %lld tokens", (long long)n);
        goto done;
    }
    for (int64_t e = 0; e < n; e++) {
        toks[e].row = rows[e];
        toks[e].e = (int32_t)e;
    }
    qsort(toks, (size_t)n, sizeof(*toks), tok_cmp);
    int64_t n_seg = 0;
    for (int64_t i = 0; i < n; i++) {
        entries[i] = toks[i].e;
        if (i == 0 || toks[i].row != toks[i - 1].row) {
            seg_start[n_seg] = (int32_t)i;
            seg_row[n_seg] = toks[i].row;
            n_seg++;
        }
    }
    seg_start[n_seg] = (int32_t)n;
    op.n_tokens = T;
    op.n_segments = n_seg;
    op.entries = entries;
    op.seg_start = seg_start;
    op.seg_row = seg_row;
    {
        const struct pe_view *views[2] = {&op.dy, &op.dtable};
        const char *names[2] = {"dy", "dtable"};
        st = pe_check_binding(ctx, "learned_backward", 2, views, names);
    }
    if (st == POSENC_OK)
        st = ctx->backend->vt->learned_backward(ctx->backend, &op);
done:
    free(rows);
    free(toks);
    free(entries);
    free(seg_start);
    free(seg_row);
    return st;
}
