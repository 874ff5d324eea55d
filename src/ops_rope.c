/* ops_rope.c - posenc_rope, posenc_rope_qk, posenc_rope_rerotate: argument checks, the
 * host-side frequency table (rope_freq.c), dispatch. */
#include "backend.h"
#include "rows.h"
#include "split.h"
#include "tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_float_storage(posenc_dtype t)
{
    return t == POSENC_DTYPE_F32 || t == POSENC_DTYPE_F16;
}

static posenc_status check_float(posenc_context *ctx, const char *name, const posenc_tensor *t)
{
    if (!is_float_storage(t->dtype))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->dtype = %s, must be f32 or f16",
                        name, posenc_dtype_name(t->dtype));
    return POSENC_OK;
}

static posenc_status check_same_shape(posenc_context *ctx, const char *a_name,
                                      const posenc_tensor *a, const char *b_name,
                                      const posenc_tensor *b)
{
    if (pe_same_shape(a, b))
        return POSENC_OK;
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                    "%s->ne = [%lld, %lld, %lld, %lld] differs from %s->ne = [%lld, %lld, %lld, "
                    "%lld]",
                    b_name, (long long)b->ne[0], (long long)b->ne[1], (long long)b->ne[2],
                    (long long)b->ne[3], a_name, (long long)a->ne[0], (long long)a->ne[1],
                    (long long)a->ne[2], (long long)a->ne[3]);
}

/* An output may be exactly an input (in place) or share no element with it (views that
 * interleave in one buffer, as q and k in a fused QKV tensor, are disjoint). */
static posenc_status check_alias(posenc_context *ctx, const char *out_name,
                                 const posenc_tensor *out, const char *in_name,
                                 const posenc_tensor *in, bool may_be_identical)
{
    if (!pe_tensors_share_elements(out, in))
        return POSENC_OK;
    if (may_be_identical && pe_tensors_identical(out, in))
        return POSENC_OK;
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                    may_be_identical ? "%s partially overlaps %s: it must be exactly %s (in "
                                       "place) or disjoint from it"
                                     : "%s overlaps %s%.0s",
                    out_name, in_name, in_name);
}

/* Check the positions for x [head_dim, H, T, B]: [T, S, 1|B, 1], i32 or f32. */
static posenc_status check_pos(posenc_context *ctx, const char *name, const posenc_tensor *pos,
                               const posenc_tensor *x, struct pe_view *out_view)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, name, pos, false, out_view));
    if (pos->dtype != POSENC_DTYPE_I32 && pos->dtype != POSENC_DTYPE_F32)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->dtype = %s, must be i32 or f32",
                        name, posenc_dtype_name(pos->dtype));
    if (pos->ne[0] != x->ne[2] || pos->ne[1] < 1 || (pos->ne[2] != 1 && pos->ne[2] != x->ne[3]) ||
        pos->ne[3] != 1)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s->ne = [%lld, %lld, %lld, %lld] does not fit x->ne = [%lld, %lld, %lld, "
                        "%lld]: need [T, streams, 1 or B, 1] for x [head_dim, heads, T, B]",
                        name, (long long)pos->ne[0], (long long)pos->ne[1], (long long)pos->ne[2],
                        (long long)pos->ne[3], (long long)x->ne[0], (long long)x->ne[1],
                        (long long)x->ne[2], (long long)x->ne[3]);
    if (pos->ne[2] == 1)
        out_view->st[2] = 0; /* shared by every batch row */
    return POSENC_OK;
}

/* The largest position + 1 over streams [0, S) (DYNAMIC_NTK / LONGROPE without seq_len):
 * reads the positions back to the host, which waits for queued work. The host work is
 * bounded by the bytes the view spans, not by its element count (a stride-0 or
 * self-overlapping view of 2^40 positions has only a few distinct ones): stride-0
 * dimensions are read once, and a view with more elements than 4-byte words in its span
 * is scanned through the set of words it reaches, built one dimension at a time. */
static posenc_status positions_len(posenc_context *ctx, const posenc_tensor *pos,
                                   int32_t *out_len)
{
    uint64_t b0, b1;
    pe_tensor_byte_range(pos, &b0, &b1);
    size_t n = (size_t)(b1 - b0);
    const size_t words = n / 4; /* i32 / f32: offset and strides are multiples of 4 */
    int64_t ne[3], st[3];       /* the dimensions that step (stride > 0), in words */
    int nd = 0;
    uint64_t count = 1;
    for (int k = 0; k < 3; k++)
        if (pos->ne[k] > 1 && pos->nb[k] > 0) {
            ne[nd] = pos->ne[k];
            st[nd] = pos->nb[k] / 4;
            count = count > UINT64_MAX / (uint64_t)ne[nd] ? UINT64_MAX : count * (uint64_t)ne[nd];
            nd++;
        }
    const bool by_words = count > words;
    unsigned char *img = malloc(n);
    unsigned char *reach = by_words ? calloc(words, 1) : NULL;
    int64_t *run = by_words ? malloc(words * sizeof(int64_t)) : NULL;
    if (!img || (by_words && (!reach || !run))) {
        free(img);
        free(reach);
        free(run);
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory reading %zu bytes of "
                        "positions", n);
    }
    posenc_status st_read = posenc_buffer_read(pos->buffer, (size_t)b0, img, n);
    if (st_read != POSENC_OK) {
        free(img);
        free(reach);
        free(run);
        return st_read;
    }
    double mx = 0.0;
#define PE_POS_AT(w)                                                                       \
    do {                                                                                   \
        double v_;                                                                         \
        if (pos->dtype == POSENC_DTYPE_I32) {                                              \
            int32_t i_;                                                                    \
            memcpy(&i_, img + 4 * (size_t)(w), 4);                                         \
            v_ = i_;                                                                       \
        } else {                                                                           \
            float f_;                                                                      \
            memcpy(&f_, img + 4 * (size_t)(w), 4);                                         \
            v_ = f_;                                                                       \
        }                                                                                  \
        if (v_ > mx)                                                                       \
            mx = v_;                                                                       \
    } while (0)
    if (!by_words) {
        for (int k = nd; k < 3; k++)
            ne[k] = 1, st[k] = 0;
        for (int64_t c = 0; c < ne[2]; c++)
            for (int64_t b = 0; b < ne[1]; b++)
                for (int64_t a = 0; a < ne[0]; a++)
                    PE_POS_AT(a * st[0] + b * st[1] + c * st[2]);
    } else {
        /* reach[w]: word w is an element of the view. Adding a dimension (extent e,
         * stride s) reaches w when some i < e has reach[w - i*s]: a running count per
         * residue modulo s. */
        reach[0] = 1;
        for (int k = 0; k < nd; k++) {
            const size_t s = (size_t)st[k], span = (size_t)ne[k] * s;
            for (size_t w = 0; w < words; w++) {
                run[w] = reach[w] + (w >= s ? run[w - s] : 0) - (w >= span ? reach[w - span] : 0);
            }
            for (size_t w = 0; w < words; w++)
                reach[w] = run[w] > 0;
        }
        for (size_t w = 0; w < words; w++)
            if (reach[w])
                PE_POS_AT(w);
    }
#undef PE_POS_AT
    free(img);
    free(reach);
    free(run);
    double len = floor(mx) + 1.0;
    *out_len = len > (double)INT32_MAX ? INT32_MAX : (int32_t)len;
    return POSENC_OK;
}

static bool needs_seq_len(const struct posenc_rope_params *p)
{
    return p && p->scaling.seq_len == 0 &&
           (p->scaling.kind == POSENC_ROPE_SCALING_DYNAMIC_NTK ||
            p->scaling.kind == POSENC_ROPE_SCALING_LONGROPE);
}

static void release_table(struct pe_rope_table *t, bool owned)
{
    if (owned)
        pe_rope_table_free(t);
}

static posenc_status build_table(posenc_context *ctx, const posenc_tensor *x,
                                 const posenc_tensor *pos, const struct posenc_rope_params *p,
                                 struct pe_rope_table *t, bool *owned)
{
    int32_t seq_len = 0;
    if (needs_seq_len(p) && !pe_tensor_empty(pos)) {
        if (ctx->check_only)
            seq_len = 1; /* the positions are data: any length checks the rest */
        else
            PE_RETURN_IF_ERROR(positions_len(ctx, pos, &seq_len));
    }
    PE_RETURN_IF_ERROR(pe_rope_table_cached(ctx, x->ne[0], p, seq_len, t, owned));
    if (pos->ne[1] < t->info.n_streams) {
        posenc_status st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                                    "pos->ne[1] = %lld streams, but the pairs use %d",
                                    (long long)pos->ne[1], (int)t->info.n_streams);
        release_table(t, *owned);
        return st;
    }
    return POSENC_OK;
}

static void fill_op(struct pe_rope_op *op, const struct pe_rope_table *t, uint32_t flags)
{
    op->n_offs = t->n_offs;
    op->n_pairs = t->n_pairs;
    op->pairing = t->mode == POSENC_ROPE_NORMAL ? 0 : 1;
    op->sign = (flags & POSENC_ROPE_BACKWARD) ? -1 : 1;
    op->mscale = t->info.mscale;
    op->freq = t->freq;
    op->freq_f32 = t->freq_f32;
    op->stream = t->stream;
}

static posenc_status dispatch(posenc_context *ctx, const struct pe_rope_op *op)
{
    if (!ctx->backend->vt->rope)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no rope op",
                        ctx->backend->vt->name);
    return pe_run_rope(ctx, op);
}

posenc_status posenc_rope(posenc_context *ctx, const posenc_tensor *x, const posenc_tensor *pos,
                          const posenc_tensor *dst, const struct posenc_rope_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_rope_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "x", x, false, &op.x));
    PE_RETURN_IF_ERROR(check_float(ctx, "x", x));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    PE_RETURN_IF_ERROR(check_float(ctx, "dst", dst));
    PE_RETURN_IF_ERROR(check_same_shape(ctx, "x", x, "dst", dst));
    PE_RETURN_IF_ERROR(check_alias(ctx, "dst", dst, "x", x, true));
    PE_RETURN_IF_ERROR(check_pos(ctx, "pos", pos, x, &op.pos));
    PE_RETURN_IF_ERROR(check_alias(ctx, "pos", pos, "dst", dst, false));

    struct pe_rope_table t;
    bool owned;
    PE_RETURN_IF_ERROR(build_table(ctx, x, pos, params, &t, &owned));
    posenc_status st = POSENC_OK;
    if (!pe_tensor_empty(x)) {
        fill_op(&op, &t, params ? params->flags : 0);
        st = dispatch(ctx, &op);
    }
    release_table(&t, owned);
    return st;
}

posenc_status posenc_rope_qk(posenc_context *ctx, const posenc_tensor *q, const posenc_tensor *k,
                             const posenc_tensor *pos, const posenc_tensor *q_out,
                             const posenc_tensor *k_out, const struct posenc_rope_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_rope_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "q", q, false, &op.x));
    PE_RETURN_IF_ERROR(check_float(ctx, "q", q));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "k", k, false, &op.x2));
    PE_RETURN_IF_ERROR(check_float(ctx, "k", k));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "q_out", q_out, true, &op.dst));
    PE_RETURN_IF_ERROR(check_float(ctx, "q_out", q_out));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "k_out", k_out, true, &op.dst2));
    PE_RETURN_IF_ERROR(check_float(ctx, "k_out", k_out));
    if (k->ne[0] != q->ne[0] || k->ne[2] != q->ne[2] || k->ne[3] != q->ne[3])
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "k->ne = [%lld, %lld, %lld, %lld] must match q->ne = [%lld, %lld, %lld, "
                        "%lld] except in ne[1] (heads)",
                        (long long)k->ne[0], (long long)k->ne[1], (long long)k->ne[2],
                        (long long)k->ne[3], (long long)q->ne[0], (long long)q->ne[1],
                        (long long)q->ne[2], (long long)q->ne[3]);
    PE_RETURN_IF_ERROR(check_same_shape(ctx, "q", q, "q_out", q_out));
    PE_RETURN_IF_ERROR(check_same_shape(ctx, "k", k, "k_out", k_out));
    PE_RETURN_IF_ERROR(check_alias(ctx, "q_out", q_out, "q", q, true));
    PE_RETURN_IF_ERROR(check_alias(ctx, "k_out", k_out, "k", k, true));
    PE_RETURN_IF_ERROR(check_alias(ctx, "q_out", q_out, "k", k, false));
    PE_RETURN_IF_ERROR(check_alias(ctx, "k_out", k_out, "q", q, false));
    PE_RETURN_IF_ERROR(check_alias(ctx, "k_out", k_out, "q_out", q_out, false));
    PE_RETURN_IF_ERROR(check_pos(ctx, "pos", pos, q, &op.pos));
    PE_RETURN_IF_ERROR(check_alias(ctx, "pos", pos, "q_out", q_out, false));
    PE_RETURN_IF_ERROR(check_alias(ctx, "pos", pos, "k_out", k_out, false));

    struct pe_rope_table t;
    bool owned;
    PE_RETURN_IF_ERROR(build_table(ctx, q, pos, params, &t, &owned));
    posenc_status st = POSENC_OK;
    if (pe_tensor_empty(q) && pe_tensor_empty(k)) {
        /* nothing to do */
    } else {
        fill_op(&op, &t, params ? params->flags : 0);
        /* an empty half is dropped so backends see only work */
        if (pe_tensor_empty(k)) {
            memset(&op.x2, 0, sizeof(op.x2));
            memset(&op.dst2, 0, sizeof(op.dst2));
        } else if (pe_tensor_empty(q)) {
            op.x = op.x2;
            op.dst = op.dst2;
            memset(&op.x2, 0, sizeof(op.x2));
            memset(&op.dst2, 0, sizeof(op.dst2));
        }
        st = dispatch(ctx, &op);
    }
    release_table(&t, owned);
    return st;
}

posenc_status posenc_rope_rerotate(posenc_context *ctx, const posenc_tensor *k,
                                   const posenc_tensor *pos_from,
                                   const struct posenc_rope_params *from,
                                   const posenc_tensor *pos_to,
                                   const struct posenc_rope_params *to, const posenc_tensor *dst)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_rope_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "k", k, false, &op.x));
    PE_RETURN_IF_ERROR(check_float(ctx, "k", k));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    PE_RETURN_IF_ERROR(check_float(ctx, "dst", dst));
    PE_RETURN_IF_ERROR(check_same_shape(ctx, "k", k, "dst", dst));
    PE_RETURN_IF_ERROR(check_alias(ctx, "dst", dst, "k", k, true));
    PE_RETURN_IF_ERROR(check_pos(ctx, "pos_to", pos_to, k, &op.pos));
    PE_RETURN_IF_ERROR(check_pos(ctx, "pos_from", pos_from, k, &op.pos_from));
    PE_RETURN_IF_ERROR(check_alias(ctx, "pos_to", pos_to, "dst", dst, false));
    PE_RETURN_IF_ERROR(check_alias(ctx, "pos_from", pos_from, "dst", dst, false));
    if ((from && (from->flags & POSENC_ROPE_BACKWARD)) || (to && (to->flags & POSENC_ROPE_BACKWARD)))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "POSENC_ROPE_BACKWARD is not meaningful for posenc_rope_rerotate");

    struct pe_rope_table ta, tb;
    bool owned_a, owned_b;
    PE_RETURN_IF_ERROR(build_table(ctx, k, pos_from, from, &ta, &owned_a));
    posenc_status st = build_table(ctx, k, pos_to, to, &tb, &owned_b);
    if (st != POSENC_OK) {
        release_table(&ta, owned_a);
        return st;
    }
    bool pairing_a = ta.mode == POSENC_ROPE_NORMAL, pairing_b = tb.mode == POSENC_ROPE_NORMAL;
    if (pairing_a != pairing_b || ta.n_dims != tb.n_dims || ta.n_offs != tb.n_offs) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "from and to rotate different dims: pairing %s/%s, n_dims %lld/%lld, "
                      "n_offs %lld/%lld",
                      pairing_a ? "adjacent" : "half", pairing_b ? "adjacent" : "half",
                      (long long)ta.n_dims, (long long)tb.n_dims, (long long)ta.n_offs,
                      (long long)tb.n_offs);
    } else if (!(ta.info.mscale != 0.0 && isfinite(tb.info.mscale / ta.info.mscale))) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "from's mscale = %g cannot be undone", ta.info.mscale);
    } else if (!pe_tensor_empty(k)) {
        fill_op(&op, &tb, 0);
        op.mscale = tb.info.mscale / ta.info.mscale;
        op.freq_from = ta.freq;
        op.freq_from_f32 = ta.freq_f32;
        op.stream_from = ta.stream;
        st = dispatch(ctx, &op);
    }
    release_table(&ta, owned_a);
    release_table(&tb, owned_b);
    return st;
}

posenc_status posenc_rope_set_rows(posenc_context *ctx, const posenc_tensor *x,
                                   const posenc_tensor *pos, const posenc_tensor *rows,
                                   const posenc_tensor *dst, const struct posenc_rope_params *params,
                                   const struct posenc_set_rows_params *rows_params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_rope_op op;
    memset(&op, 0, sizeof(op));
    bool unchecked;
    PE_RETURN_IF_ERROR(pe_rows_params(ctx, "rows_params", rows_params, &unchecked));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "x", x, false, &op.x));
    PE_RETURN_IF_ERROR(check_float(ctx, "x", x));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, &op.dst));
    PE_RETURN_IF_ERROR(check_float(ctx, "dst", dst));
    if (dst->ne[0] != x->ne[0] || dst->ne[1] != x->ne[1] || dst->ne[3] != x->ne[3])
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dst->ne = [%lld, %lld, %lld, %lld] does not fit x->ne = [%lld, %lld, "
                        "%lld, %lld]: need dst [head_dim, H, R, B] for x [head_dim, H, T, B]",
                        (long long)dst->ne[0], (long long)dst->ne[1], (long long)dst->ne[2],
                        (long long)dst->ne[3], (long long)x->ne[0], (long long)x->ne[1],
                        (long long)x->ne[2], (long long)x->ne[3]);
    PE_RETURN_IF_ERROR(check_pos(ctx, "pos", pos, x, &op.pos));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "rows", rows, false, &op.rows));
    PE_RETURN_IF_ERROR(pe_rows_dtype(ctx, rows));
    if (rows->ne[0] != x->ne[2] || (rows->ne[1] != 1 && rows->ne[1] != x->ne[3]) ||
        rows->ne[2] != 1 || rows->ne[3] != 1)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "rows->ne = [%lld, %lld, %lld, %lld] does not fit x->ne = [%lld, %lld, "
                        "%lld, %lld]: need [T, 1 or B, 1, 1] for x [head_dim, H, T, B]",
                        (long long)rows->ne[0], (long long)rows->ne[1], (long long)rows->ne[2],
                        (long long)rows->ne[3], (long long)x->ne[0], (long long)x->ne[1],
                        (long long)x->ne[2], (long long)x->ne[3]);
    if (rows->ne[1] == 1)
        op.rows.st[1] = 0; /* shared by every batch row */
    PE_RETURN_IF_ERROR(check_alias(ctx, "dst", dst, "x", x, false));
    PE_RETURN_IF_ERROR(check_alias(ctx, "dst", dst, "pos", pos, false));
    PE_RETURN_IF_ERROR(check_alias(ctx, "dst", dst, "rows", rows, false));

    struct pe_rope_table t;
    bool owned;
    PE_RETURN_IF_ERROR(build_table(ctx, x, pos, params, &t, &owned));
    posenc_status st = POSENC_OK;
    if (!pe_tensor_empty(x)) {
        /* Every index is checked before anything is queued (unless UNCHECKED). */
        if (!unchecked)
            st = pe_rows_read_check(ctx, rows, dst->ne[2]);
        if (st == POSENC_OK && !pe_tensor_empty(dst)) {
            fill_op(&op, &t, params ? params->flags : 0);
            op.n_rows = dst->ne[2];
            st = dispatch(ctx, &op);
        }
    }
    release_table(&t, owned);
    return st;
}
