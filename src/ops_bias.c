/*
 * ops_bias.c - biases added to attention logits: T5 / clipped relative-position buckets
 * (posenc_relbias_bucket, posenc_relbias, posenc_relbias_backward) and ALiBi
 * (posenc_alibi_slopes, posenc_alibi). Buckets and slopes are computed here, on the host,
 * and handed to the backends as small tables.
 */
#include "ops_bias.h"

#include "backend.h"
#include "split.h"
#include "enc_checks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Logits [K, Q, H, B]: f32 or f16, any shape. */
static posenc_status check_logits(posenc_context *ctx, const char *name, const posenc_tensor *t,
                                  bool is_output, struct pe_view *out_view)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, name, t, is_output, out_view));
    return pe_enc_float(ctx, name, t);
}

static posenc_status check_same_logits(posenc_context *ctx, const char *name,
                                       const posenc_tensor *t, const posenc_tensor *dst)
{
    if (pe_same_shape(t, dst))
        return POSENC_OK;
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                    "%s->ne = [%lld, %lld, %lld, %lld] differs from dst->ne = [%lld, %lld, %lld, "
                    "%lld]",
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], (long long)dst->ne[0], (long long)dst->ne[1],
                    (long long)dst->ne[2], (long long)dst->ne[3]);
}

static posenc_status check_offsets(posenc_context *ctx, int32_t q_offset, int32_t k_offset)
{
    if (q_offset < 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->q_offset = %d, must be >= 0",
                        (int)q_offset);
    if (k_offset < 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->k_offset = %d, must be >= 0",
                        (int)k_offset);
    return POSENC_OK;
}

/* ---- relative-position buckets ------------------------------------------------------- */

/* Check params (NULL = defaults), resolve defaults, give the table's bucket count. */
static posenc_status relbias_resolve(posenc_context *ctx, const struct posenc_relbias_params *in,
                                     struct posenc_relbias_params *out, int64_t *out_n_buckets)
{
    struct posenc_relbias_params p;
    memset(&p, 0, sizeof(p));
    if (in)
        p = *in;
    PE_RETURN_IF_ERROR(pe_enc_reserved(ctx, p.reserved, PE_ARRAY_SIZE(p.reserved)));
    PE_RETURN_IF_ERROR(pe_enc_flag(ctx, "params->causal", p.causal));
    PE_RETURN_IF_ERROR(check_offsets(ctx, p.q_offset, p.k_offset));
    switch (p.kind) {
    case POSENC_RELBIAS_T5: {
        if (p.num_buckets == 0)
            p.num_buckets = 32;
        if (p.max_distance == 0)
            p.max_distance = 128;
        /* HF: half the buckets per direction (bidirectional), half of those exact */
        int32_t min_buckets = p.causal ? 2 : 4;
        if (p.num_buckets < min_buckets)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->num_buckets = %d, must be >= %d (%s: at least one exact "
                            "bucket per direction)",
                            (int)p.num_buckets, (int)min_buckets,
                            p.causal ? "causal" : "bidirectional");
        int32_t max_exact = (p.causal ? p.num_buckets : p.num_buckets / 2) / 2;
        if (p.max_distance <= max_exact)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->max_distance = %d, must be > %d (the exact buckets; the "
                            "logarithmic ones span max_exact .. max_distance)",
                            (int)p.max_distance, (int)max_exact);
        *out_n_buckets = p.num_buckets;
        break;
    }
    case POSENC_RELBIAS_CLIPPED:
        if (p.num_buckets != 0)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->num_buckets = %d, must be 0 for CLIPPED (it is "
                            "2*max_distance + 1)",
                            (int)p.num_buckets);
        if (p.max_distance <= 0 || p.max_distance > (INT32_MAX - 1) / 2)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->max_distance = %d, must be in [1, 2^30) for CLIPPED",
                            (int)p.max_distance);
        if (p.causal)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->causal = 1 is only defined for T5 (CLIPPED covers both "
                            "directions; mask the logits instead)");
        *out_n_buckets = 2 * (int64_t)p.max_distance + 1;
        break;
    default:
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->kind = %d is not a posenc_relbias_kind", (int)p.kind);
    }
    *out = p;
    return POSENC_OK;
}

/*
 * The bucket of rel = key_pos - query_pos for resolved params. T5 follows HF transformers'
 * T5Attention._relative_position_bucket, including its float32 arithmetic for the
 * logarithmic part, so the boundaries match it:
 *   bidirectional: n = num_buckets/2, base = n if rel > 0, d = |rel|
 *   causal:        n = num_buckets,   base = 0,             d = max(-rel, 0)
 *   max_exact = n/2;  d < max_exact: base + d
 *   else base + min(n - 1, max_exact + (int)(logf((float)d / max_exact)
 *                                 / (float)log(max_distance / max_exact) * (n - max_exact)))
 * (each step an f32 operation: torch divides an f32 tensor by a Python scalar in f32).
 */
static int32_t bucket_of(const struct posenc_relbias_params *p, int64_t rel)
{
    const int64_t lim = (int64_t)1 << 40; /* far past every saturation point */
    if (rel > lim)
        rel = lim;
    if (rel < -lim)
        rel = -lim;
    if (p->kind == POSENC_RELBIAS_CLIPPED) {
        int64_t m = p->max_distance;
        int64_t c = rel < -m ? -m : rel > m ? m : rel;
        return (int32_t)(c + m);
    }
    int64_t n = p->num_buckets, base = 0, dist;
    if (!p->causal) {
        n /= 2;
        if (rel > 0)
            base = n;
        dist = rel < 0 ? -rel : rel;
    } else {
        dist = rel < 0 ? -rel : 0;
    }
    const int64_t max_exact = n / 2;
    if (dist < max_exact)
        return (int32_t)(base + dist);
    float ratio = (float)dist / (float)max_exact;
    float scale = (float)log((double)p->max_distance / (double)max_exact);
    float v = logf(ratio) / scale * (float)(n - max_exact);
    int64_t large = v < (float)n ? max_exact + (int64_t)v : n - 1; /* (int64) truncates */
    if (large > n - 1)
        large = n - 1;
    return (int32_t)(base + large);
}

posenc_status posenc_relbias_bucket(const struct posenc_relbias_params *params, int64_t rel,
                                    int32_t *out_bucket)
{
    struct posenc_relbias_params p = {0};
    int64_t n_buckets;
    PE_RETURN_IF_ERROR(relbias_resolve(NULL, params, &p, &n_buckets));
    if (!out_bucket)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "out_bucket is NULL");
    *out_bucket = bucket_of(&p, rel);
    return POSENC_OK;
}

/* The relative positions k_pos - q_pos of logits [K, Q, ...]: rel_min and count. */
static void rel_range(const struct posenc_relbias_params *p, int64_t K, int64_t Q,
                      int64_t *rel_min, int64_t *n_rel)
{
    *rel_min = (int64_t)p->k_offset - ((int64_t)p->q_offset + Q - 1);
    *n_rel = K + Q - 1;
}

static posenc_status check_table(posenc_context *ctx, const char *name, const posenc_tensor *t,
                                 bool is_output, int64_t n_buckets, int64_t n_head,
                                 struct pe_view *out_view)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, name, t, is_output, out_view));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, name, t));
    if (t->ne[0] != n_buckets)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s->ne[0] = %lld, but the params give %lld buckets", name,
                        (long long)t->ne[0], (long long)n_buckets);
    const int64_t want[4] = {n_buckets, n_head, 1, 1};
    return pe_enc_shape(ctx, name, t, want, "[n_buckets, H, 1, 1] with H = the logits' ne[2]");
}

posenc_status pe_relbias_prepare(posenc_context *ctx, const struct posenc_relbias_params *params,
                                 const posenc_tensor *table, int64_t K, int64_t Q, int64_t H,
                                 struct pe_relbias_op *op)
{
    memset(op, 0, sizeof(*op));
    struct posenc_relbias_params p;
    int64_t n_buckets;
    PE_RETURN_IF_ERROR(relbias_resolve(ctx, params, &p, &n_buckets));
    PE_RETURN_IF_ERROR(check_table(ctx, "table", table, false, n_buckets, H, &op->table));
    int64_t rel_min, n_rel;
    rel_range(&p, K, Q, &rel_min, &n_rel);
    int32_t *bucket = malloc((size_t)(n_rel > 0 ? n_rel : 1) * sizeof(int32_t));
    if (!bucket)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for %lld buckets",
                        (long long)n_rel);
    for (int64_t i = 0; i < n_rel; i++)
        bucket[i] = bucket_of(&p, rel_min + i);
    op->q_offset = p.q_offset;
    op->k_offset = p.k_offset;
    op->rel_min = rel_min;
    op->n_rel = n_rel;
    op->bucket = bucket;
    op->bucket_all = bucket;
    op->rel_min_all = rel_min;
    op->n_rel_all = n_rel;
    return POSENC_OK;
}

void pe_relbias_window(struct pe_relbias_op *op, int64_t q0, int64_t nq, int64_t nk)
{
    op->q_offset += q0;
    const int64_t rel_min = op->k_offset - (op->q_offset + nq - 1);
    op->bucket += rel_min - op->rel_min;
    op->rel_min = rel_min;
    op->n_rel = nk + nq - 1;
}

void pe_relbias_release(struct pe_relbias_op *op, const int32_t *bucket)
{
    free((void *)bucket);
    op->bucket = NULL;
}

/* dst [K, Q, H, B] and the optional logits of posenc_relbias / posenc_alibi: each a valid
 * logits view, the same shape, logits exactly dst (in place) or disjoint from it. *vl is
 * zeroed (mem NULL) when there are no logits. */
static posenc_status check_dst_and_logits(posenc_context *ctx, const posenc_tensor *logits,
                                          const posenc_tensor *dst, struct pe_view *vl,
                                          struct pe_view *vd)
{
    memset(vl, 0, sizeof(*vl));
    PE_RETURN_IF_ERROR(check_logits(ctx, "dst", dst, true, vd));
    if (logits) {
        PE_RETURN_IF_ERROR(check_logits(ctx, "logits", logits, false, vl));
        PE_RETURN_IF_ERROR(check_same_logits(ctx, "logits", logits, dst));
        PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dst", dst, "logits", logits, true));
    }
    return POSENC_OK;
}

posenc_status posenc_relbias(posenc_context *ctx, const posenc_tensor *logits,
                             const posenc_tensor *table, const posenc_tensor *dst,
                             const struct posenc_relbias_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_view vd, vl;
    PE_RETURN_IF_ERROR(check_dst_and_logits(ctx, logits, dst, &vl, &vd));
    if (pe_tensor_empty(dst)) { /* the params and table are still checked */
        struct posenc_relbias_params p;
        int64_t n_buckets;
        PE_RETURN_IF_ERROR(relbias_resolve(ctx, params, &p, &n_buckets));
        PE_RETURN_IF_ERROR(check_table(ctx, "table", table, false, n_buckets, dst->ne[2], NULL));
        return pe_enc_alias(ctx, "dst", dst, "table", table, false);
    }
    struct pe_relbias_op op;
    PE_RETURN_IF_ERROR(pe_relbias_prepare(ctx, params, table, dst->ne[0], dst->ne[1],
                                          dst->ne[2], &op));
    const int32_t *bucket = op.bucket;
    posenc_status st = pe_enc_alias(ctx, "dst", dst, "table", table, false);
    if (st == POSENC_OK && !ctx->backend->vt->relbias)
        st = pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no relbias op",
                      ctx->backend->vt->name);
    if (st == POSENC_OK) {
        op.dst = vd;
        op.logits = vl;
        st = pe_run_relbias(ctx, &op);
    }
    pe_relbias_release(&op, bucket);
    return st;
}

posenc_status posenc_relbias_backward(posenc_context *ctx, const posenc_tensor *dlogits,
                                      const posenc_tensor *dtable,
                                      const struct posenc_relbias_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_relbias_bwd_op op;
    memset(&op, 0, sizeof(op));
    PE_RETURN_IF_ERROR(check_logits(ctx, "dlogits", dlogits, false, &op.dlogits));
    struct posenc_relbias_params p;
    int64_t n_buckets;
    PE_RETURN_IF_ERROR(relbias_resolve(ctx, params, &p, &n_buckets));
    PE_RETURN_IF_ERROR(
        check_table(ctx, "dtable", dtable, true, n_buckets, dlogits->ne[2], &op.dtable));
    PE_RETURN_IF_ERROR(pe_enc_alias(ctx, "dtable", dtable, "dlogits", dlogits, false));
    if (pe_tensor_empty(dlogits))
        return POSENC_OK; /* nothing to add */
    int64_t rel_min, n_rel;
    rel_range(&p, dlogits->ne[0], dlogits->ne[1], &rel_min, &n_rel);
    if (n_rel > INT32_MAX)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "dlogits has %lld keys and %lld queries: at most 2^31 - 1 relative "
                        "positions",
                        (long long)dlogits->ne[0], (long long)dlogits->ne[1]);
    if (!ctx->backend->vt->relbias_backward)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no relbias_backward op",
                        ctx->backend->vt->name);

    /* Group the relative positions by bucket (a counting sort: ascending rel within each
     * bucket, so the summation order is fixed). */
    int32_t *bucket = malloc((size_t)n_rel * sizeof(int32_t));
    int32_t *rels = malloc((size_t)n_rel * sizeof(int32_t));
    int32_t *seg_start = calloc((size_t)n_buckets + 1, sizeof(int32_t));
    int32_t *fill = malloc(((size_t)n_buckets + 1) * sizeof(int32_t));
    posenc_status st;
    if (!bucket || !rels || !seg_start || !fill) {
        st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                      "out of host memory grouping %lld relative positions in %lld buckets",
                      (long long)n_rel, (long long)n_buckets);
    } else {
        for (int64_t i = 0; i < n_rel; i++) {
            bucket[i] = bucket_of(&p, rel_min + i);
            seg_start[bucket[i] + 1]++;
        }
        for (int64_t u = 0; u < n_buckets; u++)
            seg_start[u + 1] += seg_start[u];
        memcpy(fill, seg_start, ((size_t)n_buckets + 1) * sizeof(int32_t));
        for (int64_t i = 0; i < n_rel; i++)
            rels[fill[bucket[i]]++] = (int32_t)i;
        op.q_offset = p.q_offset;
        op.k_offset = p.k_offset;
        op.rel_min = rel_min;
        op.n_buckets = n_buckets;
        op.rels = rels;
        op.seg_start = seg_start;
        const struct pe_view *views[2] = {&op.dlogits, &op.dtable};
        const char *names[2] = {"dlogits", "dtable"};
        st = pe_check_binding(ctx, "relbias_backward", 2, views, names);
        if (st == POSENC_OK && !ctx->check_only)
            st = ctx->backend->vt->relbias_backward(ctx->backend, &op);
    }
    free(bucket);
    free(rels);
    free(seg_start);
    free(fill);
    return st;
}

/* ---- ALiBi ----------------------------------------------------------------------------- */

/* The largest position (q or k) whose distances stay exact in f32. */
#define PE_ALIBI_MAX_POS (1 << 24)

static posenc_status alibi_resolve(posenc_context *ctx, const struct posenc_alibi_params *in,
                                   struct posenc_alibi_params *out)
{
    struct posenc_alibi_params p;
    memset(&p, 0, sizeof(p));
    if (in)
        p = *in;
    PE_RETURN_IF_ERROR(pe_enc_reserved(ctx, p.reserved, PE_ARRAY_SIZE(p.reserved)));
    if (p.max_bias == 0.0f)
        p.max_bias = 8.0f;
    if (!isfinite(p.max_bias) || p.max_bias <= 0.0f)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->max_bias = %g must be finite and > 0", (double)p.max_bias);
    PE_RETURN_IF_ERROR(pe_enc_flag(ctx, "params->causal", p.causal));
    PE_RETURN_IF_ERROR(pe_enc_flag(ctx, "params->symmetric", p.symmetric));
    PE_RETURN_IF_ERROR(check_offsets(ctx, p.q_offset, p.k_offset));
    *out = p;
    return POSENC_OK;
}

/* Slopes for n_head heads (resolved params) in double: ggml's rule
 * (ggml_compute_forward_soft_max / ggml_alibi: m0 = 2^(-max_bias/n), m1 = 2^(-max_bias/2/n),
 * slope = m0^(h+1) for h < n, m1^(2(h-n)+1) beyond, n = 2^floor(log2 n_head)), here as one
 * exp2 of the exact exponent; or the user's slopes. Checks user slopes are finite. */
static posenc_status alibi_fill(posenc_context *ctx, int64_t n_head,
                                const struct posenc_alibi_params *p, double *out)
{
    if (p->slopes) {
        for (int64_t h = 0; h < n_head; h++)
            if (!isfinite(p->slopes[h]))
                return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                                "params->slopes[%lld] = %g is not finite", (long long)h,
                                (double)p->slopes[h]);
        for (int64_t h = 0; h < n_head; h++) /* out untouched on error */
            out[h] = p->slopes[h];
        return POSENC_OK;
    }
    int64_t n = 1;
    while (n * 2 <= n_head)
        n *= 2;
    const double mb = p->max_bias;
    for (int64_t h = 0; h < n_head; h++)
        out[h] = h < n ? exp2(-mb * (double)(h + 1) / (double)n)
                       : exp2(-(mb / 2.0) * (double)(2 * (h - n) + 1) / (double)n);
    return POSENC_OK;
}

posenc_status posenc_alibi_slopes(int64_t n_head, const struct posenc_alibi_params *params,
                                  double *out_slopes)
{
    struct posenc_alibi_params p;
    PE_RETURN_IF_ERROR(alibi_resolve(NULL, params, &p));
    if (n_head < 1)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "n_head = %lld, must be >= 1",
                        (long long)n_head);
    if (!out_slopes)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "out_slopes is NULL");
    return alibi_fill(NULL, n_head, &p, out_slopes);
}

posenc_status pe_alibi_prepare(posenc_context *ctx, const struct posenc_alibi_params *params,
                               int64_t K, int64_t Q, int64_t H, struct pe_alibi_op *op)
{
    memset(op, 0, sizeof(*op));
    struct posenc_alibi_params p;
    PE_RETURN_IF_ERROR(alibi_resolve(ctx, params, &p));
    if ((int64_t)p.k_offset + K - 1 > PE_ALIBI_MAX_POS ||
        (int64_t)p.q_offset + Q - 1 > PE_ALIBI_MAX_POS)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "positions up to k_offset + K - 1 = %lld, q_offset + Q - 1 = %lld: "
                        "must be <= 2^24 so that distances are exact in f32",
                        (long long)p.k_offset + K - 1, (long long)p.q_offset + Q - 1);
    const size_t n = (size_t)(H > 0 ? H : 1);
    double *slopes = malloc(n * sizeof(double));
    float *slopes32 = malloc(n * sizeof(float));
    posenc_status st;
    if (!slopes || !slopes32)
        st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for %lld slopes",
                      (long long)H);
    else
        st = alibi_fill(ctx, H, &p, slopes);
    if (st != POSENC_OK) {
        free(slopes);
        free(slopes32);
        return st;
    }
    for (int64_t h = 0; h < H; h++)
        slopes32[h] = (float)slopes[h];
    op->q_offset = p.q_offset;
    op->k_offset = p.k_offset;
    op->causal = p.causal;
    op->symmetric = p.symmetric;
    op->slopes = slopes;
    op->slopes_f32 = slopes32;
    op->h_off = 0;
    op->n_head_all = H;
    return POSENC_OK;
}

void pe_alibi_release(struct pe_alibi_op *op)
{
    free((void *)op->slopes);
    free((void *)op->slopes_f32);
    op->slopes = NULL;
    op->slopes_f32 = NULL;
}

posenc_status posenc_alibi(posenc_context *ctx, const posenc_tensor *logits,
                           const posenc_tensor *dst, const struct posenc_alibi_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct pe_view vd, vl;
    PE_RETURN_IF_ERROR(check_dst_and_logits(ctx, logits, dst, &vl, &vd));
    /* (an empty dst still has its params, positions and the user's slopes checked) */
    struct pe_alibi_op op;
    PE_RETURN_IF_ERROR(pe_alibi_prepare(ctx, params, dst->ne[0], dst->ne[1], dst->ne[2], &op));
    posenc_status st = POSENC_OK;
    if (!pe_tensor_empty(dst)) {
        if (!ctx->backend->vt->alibi) {
            st = pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no alibi op",
                          ctx->backend->vt->name);
        } else {
            op.dst = vd;
            op.logits = vl;
            st = pe_run_alibi(ctx, &op);
        }
    }
    pe_alibi_release(&op);
    return st;
}
