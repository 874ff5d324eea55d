/*
 * ops_attention.c - posenc_attention and posenc_attention_decay: argument checks, the
 * encodings composed from the other ops on device temporaries, and dispatch of the three
 * backend steps (attn_scores, attn_softmax, attn_output; see internal.h).
 *
 * Order of work, all queued on the context in call order:
 *   1. check every argument (nothing is written before all checks pass);
 *   2. SINUSOIDAL / LEARNED / ROPE: Q' and K' (and V' with PE_ON_V) into f32 temporaries
 *      through posenc_sinusoidal / posenc_learned / posenc_rope; ROPE for a backend whose
 *      one pass rotates k itself (attn_krot): Q' and the keys' rotation table instead of
 *      K' (krot_table);
 *   3. attn_scores into the f32 logits temporary;
 *   4. ALIBI / RELBIAS: posenc_alibi / posenc_relbias in place on the logits;
 *   5. attn_softmax (mask, causal mask, the optional weights output);
 *   6. attn_output into dst.
 * Without `weights` (and without POSENC_ATTENTION_UNFUSED), on a backend with attn_fused,
 * steps 3-6 are one pass of that kernel instead (pe_attn_fused_op: scores, the ALiBi /
 * relative bias, mask, causal mask, online softmax and the weighted sum of V; no logits
 * temporary), when q, k, v, dst and the mask each fit one binding; otherwise:
 * Steps 3-6 run once per block of queries when the device's binding limit cuts the logits
 * (attn_block). A failing call writes nothing (posenc.h, "Errors"), so before the first
 * launch that writes dst or weights everything that can fail is done: the block size and
 * every block's views checked against the binding limit (a dry pass of attn_block over all
 * blocks), ALiBi's slopes and position checks / RELBIAS' buckets made once for the
 * caller's whole range (ops_bias.h), every device temporary allocated, and then the
 * backend's attn_prepare (backend.h) acquires its own temporaries, scratch and programs
 * for the first block, the largest. The backends keep their per-launch host scratch grown
 * only and upload the whole bias tables once, so later blocks allocate nothing. Steps 2 and 4 write only temporaries, so an error an encoding
 * reports there (its own parameter checks, a learned position past the table) still leaves
 * dst and weights untouched. Temporaries come from the context's scratch (scratch.c) and go
 * back to it at the end: a later call that takes one again is ordered after the queued
 * work that used it, as for any buffer (OpenCL's in-order queue, Vulkan's barriers between
 * a batch's dispatches and between batches, the CPU backend runs synchronously), and what
 * the scratch does not keep is destroyed (posenc_buffer_destroy defers the release past the
 * queued work).
 */
#include "backend.h"
#include "split.h"
#include "enc_checks.h"
#include "ops_bias.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PE_ATTN_MAX_TMP 12
#define PE_ATTN_STREAMS 4 /* implicit positions: one value per token in every stream */

/* Device temporaries of one call, taken from the context's scratch (scratch.c) and given
 * back at the end. */
struct attn_tmp {
    posenc_buffer *buf[PE_ATTN_MAX_TMP];
    int n;
    posenc_buffer *iota; /* implicit_pos's kept iota, once this call has it (one of buf) */
    int64_t iota_rows;
};

static void tmp_free(posenc_context *ctx, struct attn_tmp *t)
{
    pe_scratch_give(ctx, t->buf, t->n);
    t->n = 0;
    t->iota = NULL;
    t->iota_rows = 0;
}

/* A packed tensor of a temporary buffer (its first bytes: the buffer may be larger). */
static posenc_status tmp_tensor(posenc_context *ctx, struct attn_tmp *t, posenc_dtype dt,
                                int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                                posenc_tensor *out)
{
    if (t->n == PE_ATTN_MAX_TMP)
        return pe_error(ctx, POSENC_ERR_INTERNAL, "attention: too many temporaries");
    size_t bytes = posenc_dtype_size(dt);
    const int64_t ne[4] = {n0, n1, n2, n3};
    for (int i = 0; i < 4; i++) {
        if (ne[i] > 0 && bytes > SIZE_MAX / (size_t)ne[i])
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "attention: a temporary of %lld x %lld x %lld x %lld elements does "
                            "not fit size_t",
                            (long long)n0, (long long)n1, (long long)n2, (long long)n3);
        bytes *= (size_t)(ne[i] > 0 ? ne[i] : 1);
    }
    posenc_buffer *b = NULL;
    PE_RETURN_IF_ERROR(pe_scratch_take(ctx, bytes, &b));
    t->buf[t->n++] = b;
    *out = posenc_tensor_contiguous(b, 0, dt, n0, n1, n2, n3);
    return POSENC_OK;
}

/* Prefix the message an inner op left with what it was doing. */
static posenc_status inner(posenc_context *ctx, posenc_status st, const char *what)
{
    if (st == POSENC_OK)
        return st;
    char msg[PE_ERR_MAX];
    pe_strlcpy(msg, posenc_context_last_error(ctx), sizeof(msg));
    return pe_error(ctx, st, "%s: %s", what, msg);
}

static posenc_status shape_error(posenc_context *ctx, const char *name, const posenc_tensor *t,
                                 const char *want)
{
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                    "%s->ne = [%lld, %lld, %lld, %lld], must be %s", name, (long long)t->ne[0],
                    (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], want);
}

static bool is_empty(const posenc_tensor *t)
{
    return pe_tensor_empty(t);
}

/* Outputs may not overlap anything (no in-place use). */
static posenc_status no_overlap(posenc_context *ctx, const char *out_name,
                                const posenc_tensor *out, const char *in_name,
                                const posenc_tensor *in)
{
    if (!out || !in || is_empty(out) || is_empty(in))
        return POSENC_OK;
    return pe_enc_alias(ctx, out_name, out, in_name, in, false);
}

/* Positions [T, S, 1 or B, 1], i32 or f32 (i32 only for LEARNED). */
static posenc_status check_pos(posenc_context *ctx, const char *name, const posenc_tensor *pos,
                               int64_t T, int64_t B, bool i32_only)
{
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, name, pos, false, NULL));
    if (pos->dtype != POSENC_DTYPE_I32 && (i32_only || pos->dtype != POSENC_DTYPE_F32))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->dtype = %s, must be %s", name,
                        posenc_dtype_name(pos->dtype), i32_only ? "i32 (LEARNED)" : "i32 or f32");
    if (pos->ne[0] != T || pos->ne[1] < 1 || (pos->ne[2] != 1 && pos->ne[2] != B) ||
        pos->ne[3] != 1) {
        char want[96];
        snprintf(want, sizeof(want), "[%lld, streams, 1 or %lld, 1]", (long long)T,
                 (long long)B);
        return shape_error(ctx, name, pos, want);
    }
    return POSENC_OK;
}

/* The largest position + 1 in a position tensor (read back: waits for queued work). */
static posenc_status pos_len(posenc_context *ctx, const char *name, const posenc_tensor *pos,
                             int64_t *out_len)
{
    unsigned char *img = NULL;
    uint64_t begin = 0;
    PE_RETURN_IF_ERROR(pe_enc_read_back(ctx, name, pos, &img, &begin));
    double mx = 0.0;
    for (int64_t b = 0; b < pos->ne[2]; b++)
        for (int64_t s = 0; s < pos->ne[1]; s++)
            for (int64_t t = 0; t < pos->ne[0]; t++) {
                size_t at = (size_t)(pos->offset - begin) +
                            (size_t)(t * pos->nb[0] + s * pos->nb[1] + b * pos->nb[2]);
                double v;
                if (pos->dtype == POSENC_DTYPE_I32) {
                    int32_t i;
                    memcpy(&i, img + at, 4);
                    v = i;
                } else {
                    float f;
                    memcpy(&f, img + at, 4);
                    v = f;
                }
                if (v > mx)
                    mx = v;
            }
    free(img);
    double len = floor(mx) + 1.0;
    *out_len = len > (double)INT32_MAX ? INT32_MAX : (int64_t)len;
    return POSENC_OK;
}

/* LEARNED with explicit positions: stream 0 of every batch row must index a row of the
 * table. Checked for q and k before either is encoded, so that a bad position is
 * OUT_OF_RANGE whatever else the call would have met first (a binding limit that refuses
 * the encoding of q, say). */
static posenc_status learned_pos_range(posenc_context *ctx, const char *name, const char *who,
                                       const posenc_tensor *pos, int64_t rows)
{
    if (is_empty(pos))
        return POSENC_OK;
    unsigned char *img = NULL;
    uint64_t begin = 0;
    PE_RETURN_IF_ERROR(pe_enc_read_back(ctx, name, pos, &img, &begin));
    for (int64_t b = 0; b < pos->ne[2]; b++)
        for (int64_t t = 0; t < pos->ne[0]; t++) {
            const size_t at = (size_t)(pos->offset - begin) +
                              (size_t)(t * pos->nb[0] + b * pos->nb[2]);
            int32_t v;
            memcpy(&v, img + at, 4);
            if (v < 0 || (int64_t)v >= rows) {
                free(img);
                return pe_error(ctx, POSENC_ERR_OUT_OF_RANGE,
                                "%s[%lld, 0, %lld] = %d: %s %lld (batch %lld) has position %d, "
                                "outside the %lld rows of params->learned_table (valid "
                                "positions 0..%lld)",
                                name, (long long)t, (long long)b, (int)v, who, (long long)t,
                                (long long)b, (int)v, (long long)rows, (long long)rows - 1);
            }
        }
    free(img);
    return POSENC_OK;
}

/* Rows of the kept iota (implicit_pos): made again, longer, every this many positions, up
 * to PE_IOTA_MAX_ROWS (4 MiB; positions past it take a fill per call: an iota reaching
 * offsets near INT32_MAX would be 8 GiB). */
#define PE_IOTA_ROWS 1024
#define PE_IOTA_MAX_ROWS ((int64_t)1 << 20)

/*
 * The implicit positions offset + t of T tokens, in every stream: i32 [T, 4, 1, 1], made on
 * the device (pe_fill_ramp_i32): a host write would wait for OpenCL's queue on every call
 * and is refused while a Vulkan context records.
 *
 * They are a window of an iota 0, 1, ..., R - 1 (R a multiple of
 * PE_IOTA_ROWS) kept in the context's scratch under its key (pe_scratch_set_key): the view
 * starts at element offset and reads the same row for every stream (nb[1] = 0), and the
 * query's and the keys' positions of a call share it (tmp->iota). A decode loop, whose
 * query moves one position a call, then runs no fill for R calls: lavapipe, RoPE decode d
 * 64 x 512 keys (two fills a call there, K' being encoded), 1153-1190 -> 1054-1078 us a
 * call back to back; PoCL (one fill) within its spread. Not while recording (its
 * temporaries are the recording's), and not past the binding limit or PE_IOTA_MAX_ROWS:
 * the fill for the call then.
 */
static posenc_status implicit_pos(posenc_context *ctx, struct attn_tmp *tmp, int64_t T,
                                  int32_t offset, posenc_tensor *out)
{
    /* offset >= 0: posenc_attention checked q_offset and k_offset */
    static const char key[] = "posenc attention: i32 iota";
    const int64_t need = (int64_t)offset + T; /* rows of the iota the window reads */
    if (!ctx->recording) {
        /* the call's own (the query's, for the keys), else a kept one, else a new one */
        posenc_buffer *b = tmp->iota_rows >= need ? tmp->iota : NULL;
        int64_t rows = tmp->iota_rows;
        if (!b && tmp->n < PE_ATTN_MAX_TMP &&
            pe_scratch_find(ctx, key, sizeof key, need, &b, &rows))
            tmp->buf[tmp->n++] = b;
        if (!b) {
            rows = (need + PE_IOTA_ROWS - 1) / PE_IOTA_ROWS * PE_IOTA_ROWS;
            const uint64_t lim = pe_binding_limit(ctx, NULL);
            if (rows <= PE_IOTA_MAX_ROWS && (!lim || (uint64_t)rows * 4u <= lim)) {
                posenc_tensor all;
                PE_RETURN_IF_ERROR(tmp_tensor(ctx, tmp, POSENC_DTYPE_I32, rows, 1, 1, 1, &all));
                PE_RETURN_IF_ERROR(pe_fill_ramp_i32(ctx, &all, 0, 1));
                pe_scratch_set_key(ctx, all.buffer, key, sizeof key, rows);
                b = all.buffer;
            }
        }
        if (b) {
            tmp->iota = b;
            tmp->iota_rows = rows;
            *out = posenc_tensor_contiguous(b, (size_t)offset * sizeof(int32_t),
                                            POSENC_DTYPE_I32, T, PE_ATTN_STREAMS, 1, 1);
            out->nb[1] = 0; /* every stream the same row */
            out->nb[2] = out->nb[3] = (int64_t)T * (int64_t)sizeof(int32_t);
            return POSENC_OK;
        }
    }
    PE_RETURN_IF_ERROR(tmp_tensor(ctx, tmp, POSENC_DTYPE_I32, T, PE_ATTN_STREAMS, 1, 1, out));
    return pe_fill_ramp_i32(ctx, out, offset, 1);
}

/* Stream 0 of positions [T, S, P, 1] as [T, 1, P, 1]. */
static posenc_tensor stream0(const posenc_tensor *pos)
{
    posenc_tensor t = *pos;
    t.ne[1] = 1;
    return t;
}

/* The one-batch slice b of positions [T, S, 1 or B, 1], stream 0: [T, 1, 1, 1]. */
static posenc_tensor pos_slice(const posenc_tensor *pos, int64_t b)
{
    posenc_tensor t = stream0(pos);
    if (t.ne[2] != 1)
        t.offset += (size_t)(b * t.nb[2]);
    t.ne[2] = 1;
    return t;
}

/* Swap dims 1 and 2 of a view ([D, H, T, B] <-> [D, T, H, B]). */
static posenc_tensor swap12(const posenc_tensor *x)
{
    posenc_tensor t = *x;
    t.ne[1] = x->ne[2];
    t.ne[2] = x->ne[1];
    t.nb[1] = x->nb[2];
    t.nb[2] = x->nb[1];
    return t;
}

/* Apply an additive (SINUSOIDAL / LEARNED) or rotary (ROPE) encoding to x [D, H, T, B]
 * into the f32 temporary *out. `name` is "q", "k" or "v" (messages). */
static posenc_status encode(posenc_context *ctx, struct attn_tmp *tmp,
                            const struct posenc_attention_params *p,
                            const struct posenc_rope_params *rope, const char *name,
                            const posenc_tensor *x, const posenc_tensor *pos,
                            posenc_tensor *out)
{
    PE_RETURN_IF_ERROR(
        tmp_tensor(ctx, tmp, POSENC_DTYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], out));
    char what[96];
    posenc_status st = POSENC_OK;
    switch (p->encoding) {
    case POSENC_ATTENTION_SINUSOIDAL: {
        /* tokens are dim 2 of x: the sinusoidal op wants them in dim 1 */
        posenc_tensor xv = swap12(x), dv = swap12(out), pv = stream0(pos);
        snprintf(what, sizeof(what), "params->sinusoidal (posenc_sinusoidal on %s)", name);
        st = inner(ctx, posenc_sinusoidal(ctx, &xv, &pv, &dv, &p->sinusoidal), what);
        break;
    }
    case POSENC_ATTENTION_LEARNED:
        /* per batch row: tokens [D, T, H] (heads as the op's batch), positions [T] */
        snprintf(what, sizeof(what), "params->learned_table (posenc_learned on %s)", name);
        for (int64_t b = 0; b < x->ne[3] && st == POSENC_OK; b++) {
            posenc_tensor xv = swap12(x), dv = swap12(out), pv = pos_slice(pos, b);
            xv.offset += (size_t)(b * x->nb[3]);
            dv.offset += (size_t)(b * out->nb[3]);
            xv.ne[3] = dv.ne[3] = 1;
            st = inner(ctx, posenc_learned(ctx, &xv, &pv, p->learned_table, &dv), what);
        }
        break;
    case POSENC_ATTENTION_ROPE:
        snprintf(what, sizeof(what), "params->rope (posenc_rope on %s)", name);
        st = inner(ctx, posenc_rope(ctx, x, pos, out, rope), what);
        break;
    default:
        st = pe_error(ctx, POSENC_ERR_INTERNAL, "attention: encode() with encoding %d",
                      (int)p->encoding);
        break;
    }
    return st;
}

static bool has_input_encoding(posenc_attention_encoding e)
{
    return e == POSENC_ATTENTION_SINUSOIDAL || e == POSENC_ATTENTION_LEARNED ||
           e == POSENC_ATTENTION_ROPE;
}

/* softcap, mask_slopes, sinks (ggml's flash_attn_ext extras). */
static posenc_status check_extras(posenc_context *ctx, const struct posenc_attention_params *p,
                                  int64_t Hq)
{
    if (!isfinite(p->softcap) || p->softcap < 0.0f)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->softcap = %g, must be finite and >= 0 (0: none)",
                        (double)p->softcap);
    if (p->mask_slopes) {
        if (!p->mask)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->mask_slopes is set but params->mask is NULL (the slopes "
                            "scale the mask)");
        for (int64_t h = 0; h < Hq; h++)
            if (!isfinite(p->mask_slopes[h]))
                return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                                "params->mask_slopes[%lld] = %g is not finite", (long long)h,
                                (double)p->mask_slopes[h]);
    }
    if (p->sinks) {
        const posenc_tensor *t = p->sinks;
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "params->sinks", t, false, NULL));
        if (t->dtype != POSENC_DTYPE_F32)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->sinks has dtype %s, must be f32",
                            posenc_dtype_name(t->dtype));
        if (t->ne[0] != Hq || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->sinks is [%lld, %lld, %lld, %lld], must be [%lld, 1, 1, 1] "
                            "(one per query head)",
                            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3], (long long)Hq);
    }
    return POSENC_OK;
}

static posenc_status check_params(posenc_context *ctx, const struct posenc_attention_params *p,
                                  int64_t D, int64_t Dv)
{
    PE_RETURN_IF_ERROR(pe_enc_reserved(ctx, p->reserved, PE_ARRAY_SIZE(p->reserved)));
    if ((unsigned)p->encoding > (unsigned)POSENC_ATTENTION_RELBIAS)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->encoding = %d is not a posenc_attention_encoding",
                        (int)p->encoding);
    if (!isfinite(p->scale))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->scale = %g is not finite",
                        (double)p->scale);
    PE_RETURN_IF_ERROR(pe_enc_flag(ctx, "params->causal", p->causal));
    if (p->q_offset < 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->q_offset = %d, must be >= 0",
                        (int)p->q_offset);
    if (p->k_offset < 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->k_offset = %d, must be >= 0",
                        (int)p->k_offset);
    if (p->flags & ~(uint32_t)(POSENC_ATTENTION_PE_ON_V | POSENC_ATTENTION_UNFUSED))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->flags = 0x%x has unknown bits", (unsigned)p->flags);
    const bool additive = p->encoding == POSENC_ATTENTION_SINUSOIDAL ||
                          p->encoding == POSENC_ATTENTION_LEARNED;
    if ((p->flags & POSENC_ATTENTION_PE_ON_V) && !additive)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->flags has POSENC_ATTENTION_PE_ON_V, which needs encoding "
                        "SINUSOIDAL or LEARNED (encoding = %d)",
                        (int)p->encoding);
    if ((p->flags & POSENC_ATTENTION_PE_ON_V) && Dv != D)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->flags has POSENC_ATTENTION_PE_ON_V: v->ne[0] = %lld must equal "
                        "q->ne[0] = %lld",
                        (long long)Dv, (long long)D);
    if (p->encoding == POSENC_ATTENTION_SINUSOIDAL && D % 2 != 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "q->ne[0] = %lld: SINUSOIDAL needs an even head_dim", (long long)D);
    if (p->encoding == POSENC_ATTENTION_ALIBI) {
        if (p->alibi.causal)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->alibi.causal = %d, must be 0 (params->causal masks)",
                            (int)p->alibi.causal);
        if (p->alibi.q_offset || p->alibi.k_offset)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->alibi.q_offset = %d, k_offset = %d: must be 0 "
                            "(params->q_offset / k_offset give the positions)",
                            (int)p->alibi.q_offset, (int)p->alibi.k_offset);
    }
    if (p->encoding == POSENC_ATTENTION_RELBIAS) {
        if (p->relbias.q_offset || p->relbias.k_offset)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->relbias.q_offset = %d, k_offset = %d: must be 0 "
                            "(params->q_offset / k_offset give the positions)",
                            (int)p->relbias.q_offset, (int)p->relbias.k_offset);
        if (!p->relbias_table)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->relbias_table is NULL (RELBIAS needs [n_buckets, Hq])");
    }
    if (p->encoding == POSENC_ATTENTION_LEARNED && !p->learned_table)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->learned_table is NULL (LEARNED needs [head_dim, rows])");
    return POSENC_OK;
}

/* One call's steps 3-6 over its query blocks (posenc_attention). */
struct attn_run {
    posenc_context *ctx;
    const struct posenc_attention_params *p;
    const posenc_tensor *qe, *ke, *ve; /* q, k, v after the input encodings */
    const posenc_tensor *dst, *weights, *logits;
    int64_t Tk, Hq, Hk, B;
    double scale;
    bool has_alibi, has_relbias;
    struct pe_alibi_op alibi;     /* prepared for every query; views per block */
    struct pe_relbias_op relbias;
    const int32_t *buckets;       /* relbias' own list (freed at the end) */
    const double *mask_slopes;    /* params->mask_slopes widened (NULL: none) */
    /* RoPE on k inside the one pass (krot_table): k is read as stored */
    bool has_krot;
    posenc_tensor krot;           /* f32 [D, 1, Tk, 1 or B] */
    int64_t krot_off, krot_pairs;
    int krot_adjacent;
};

/* What a table of the keys' rotations for implicit positions depends on (krot_key): the
 * head, the pair window and mode, the flags, mscale and the first key's position, then
 * the n_pairs frequencies (double) and streams that follow it in the key. */
struct krot_key_head {
    int64_t D, n_pairs, n_offs;
    int32_t mode, k_offset;
    uint32_t flags, pad;
    double mscale;
};

/* The key of krot_table's cache (scratch.c, pe_scratch_find) from the call's resolved
 * table t, malloc'd (*out; NULL when out of host memory: the table is then made and not
 * kept). */
static void krot_key(const struct pe_rope_table *t, uint32_t flags, int64_t D, int32_t k_offset,
                     void **out, size_t *out_len)
{
    struct krot_key_head h;
    memset(&h, 0, sizeof(h));
    h.D = D;
    h.n_pairs = t->n_pairs;
    h.n_offs = t->n_offs;
    h.mode = (int32_t)t->mode;
    h.k_offset = k_offset;
    h.flags = flags;
    h.mscale = t->info.mscale;
    const size_t n = (size_t)t->n_pairs, len = sizeof(h) + n * sizeof(double) + n;
    unsigned char *k = malloc(len);
    *out = k;
    *out_len = k ? len : 0;
    if (!k)
        return;
    memcpy(k, &h, sizeof(h));
    memcpy(k + sizeof(h), t->freq, n * sizeof(double));
    memcpy(k + sizeof(h) + n * sizeof(double), t->stream, n);
}

/*
 * RoPE inside the one pass: instead of K' (an f32 copy of k, rotated: for d 128 with 8 K/V
 * heads and f16 k, 4x k's bytes written and read again), the rotation of every key, shared
 * by its heads: out = posenc_rope of the unit pattern u (u_a = 1, u_b = 0 for every pair
 * (a, b), 0 elsewhere) at the keys' positions, so that out_a = mscale cos(angle_j) and out_b
 * = mscale sin(angle_j) with every mode, scaling and flag of posenc_rope, on the same
 * kernels. The backend then rotates each key row it reads (pe_attn_fused_op.krot):
 * k'_a = k_a out_a - k_b out_b, k'_b = k_a out_b + k_b out_a, the f32 products and sum of
 * the rope kernels' own y = m (x_a cos - x_b sin) with m folded into cos and sin (the bound
 * of check_attention.c already counts that rounding). u is one row read with stride 0 for
 * every key; out is f32 [D, 1, Tk, P], P = k_pos->ne[2] (1 or B).
 *
 * kp: the caller's k_pos, or NULL for implicit positions (key k at k_offset + k), which
 * are then written here only when the table is made.
 *
 * With implicit positions (k_pos NULL: key k at k_offset + k) the table depends only on
 * the params and k_offset (krot_key), and a decode loop asks for it again every call with
 * one key more. It is then made for Tk rounded up to a multiple of PE_KROT_ROWS keys and
 * left in the scratch with its key (pe_scratch_set_key), and a later call with the same
 * key and at most that many keys takes it as it is (pe_scratch_find): no angles computed.
 * Each row is what posenc_rope computes for that position alone (every backend's rope
 * works token by token), so the results are the same bits either way.
 */
#define PE_KROT_ROWS 256
static posenc_status krot_table(posenc_context *ctx, struct attn_tmp *tmp,
                                const struct posenc_rope_params *rope, int64_t D,
                                const struct pe_rope_table *rt, const posenc_tensor *kp,
                                int64_t Tk, int32_t k_offset, struct attn_run *r)
{
    const bool implicit_k = kp == NULL; /* positions k_offset + k, made here if needed */
    const int64_t P = kp ? kp->ne[2] : 1;
    const int64_t off = rt->n_offs, pairs = rt->n_pairs;
    const bool adjacent = rt->mode == POSENC_ROPE_NORMAL;
    r->krot_off = off;
    r->krot_pairs = pairs;
    r->krot_adjacent = adjacent;
    void *key = NULL;
    size_t key_len = 0;
    int64_t rows = Tk; /* the table's keys: Tk, or more for later calls */
    if (implicit_k && P == 1 && !rope->freq_factors_tensor && !ctx->recording &&
        tmp->n < PE_ATTN_MAX_TMP) {
        krot_key(rt, rope->flags, D, k_offset, &key, &key_len);
        posenc_buffer *b = NULL;
        if (key && pe_scratch_find(ctx, key, key_len, Tk, &b, NULL)) {
            tmp->buf[tmp->n++] = b;
            r->krot = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, D, 1, Tk, 1);
            r->has_krot = true;
            free(key);
            return POSENC_OK;
        }
        /* more rows than asked for only where their positions and table rows fit one
         * binding as the caller's would (a small POSENC_MAX_BINDING cuts the rope by rows,
         * and the positions' streams stay in every cut) */
        const int64_t up = (Tk + PE_KROT_ROWS - 1) / PE_KROT_ROWS * PE_KROT_ROWS;
        const uint64_t lim = pe_binding_limit(ctx, NULL);
        const uint64_t row = (uint64_t)(PE_ATTN_STREAMS > D ? PE_ATTN_STREAMS : D) * 4u;
        const uint64_t span = (uint64_t)up * row;
        if (key && (int64_t)k_offset + up <= INT32_MAX && (!lim || span <= lim))
            rows = up;
    }
    posenc_tensor u, ones, pos, table;
    posenc_status st = tmp_tensor(ctx, tmp, POSENC_DTYPE_F32, D, 1, 1, 1, &u);
    if (st == POSENC_OK)
        st = tmp_tensor(ctx, tmp, POSENC_DTYPE_F32, D, 1, rows, P, &table);
    if (st == POSENC_OK && implicit_k)
        st = implicit_pos(ctx, tmp, rows, k_offset, &pos);
    else if (st == POSENC_OK)
        pos = *kp;
    if (st == POSENC_OK)
        st = posenc_fill(ctx, &u, 0.0);
    if (st == POSENC_OK) {
        ones = u;
        ones.offset = (size_t)off * sizeof(float);
        ones.ne[0] = pairs;
        ones.nb[0] = adjacent ? 2 * (int64_t)sizeof(float) : (int64_t)sizeof(float);
        st = posenc_fill(ctx, &ones, 1.0);
    }
    if (st == POSENC_OK) {
        u.ne[2] = rows;
        u.ne[3] = P;
        u.nb[2] = u.nb[3] = 0;
        st = inner(ctx, posenc_rope(ctx, &u, &pos, &table, rope),
                   "params->rope (posenc_rope on k)");
    }
    if (st == POSENC_OK && key)
        pe_scratch_set_key(ctx, table.buffer, key, key_len, rows);
    free(key);
    PE_RETURN_IF_ERROR(st);
    table.ne[2] = Tk;
    r->krot = table;
    r->has_krot = true;
    return POSENC_OK;
}

/* The ops of one block's steps (the first block's go to the backend's attn_prepare). */
struct attn_block_ops {
    struct pe_attn_scores_op so;
    struct pe_attn_softmax_op sm;
    struct pe_attn_output_op oo;
};

/* Queries [q0, q0 + nq): the block's views and ops, checked (views, binding limits); with
 * `launch`, also run; with `keep`, its ops copied there. A dry pass over every block comes
 * first, so that a block that would fail its checks is found before any block has written
 * dst or weights. */
static posenc_status attn_block(const struct attn_run *r, int64_t q0, int64_t nq, bool launch,
                                struct attn_block_ops *keep)
{
    posenc_context *ctx = r->ctx;
    const struct posenc_attention_params *p = r->p;
    const struct pe_backend_vtable *vt = ctx->backend->vt;
    const int64_t q_offset = p->q_offset + q0;
    /* The block's views: queries are dim 2 of q and dst, dim 1 of mask and weights. */
    posenc_tensor qb = *r->qe, db = *r->dst, wb, mb;
    qb.offset += (size_t)q0 * r->qe->nb[2];
    qb.ne[2] = nq;
    db.offset += (size_t)q0 * r->dst->nb[2];
    db.ne[2] = nq;
    if (r->weights) {
        wb = *r->weights;
        wb.offset += (size_t)q0 * r->weights->nb[1];
        wb.ne[1] = nq;
    }
    if (p->mask) {
        mb = *p->mask;
        if (mb.ne[1] > 1) {
            mb.offset += (size_t)q0 * p->mask->nb[1];
            mb.ne[1] = nq;
        }
    }
    posenc_tensor lb =
        posenc_tensor_contiguous(r->logits->buffer, 0, POSENC_DTYPE_F32, r->Tk, nq, r->Hq, r->B);

    /* ---- 3. scores ---------------------------------------------------------------------- */
    struct pe_attn_scores_op so;
    memset(&so, 0, sizeof(so));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "q", &qb, false, &so.q));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "k", r->ke, false, &so.k));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "logits", &lb, true, &so.logits));
    so.group = r->Hq / r->Hk;
    so.scale = r->scale;
    so.scale_f32 = (float)r->scale;
    const struct pe_view *sv[3] = {&so.q, &so.k, &so.logits};
    const char *sn[3] = {"q", "k", "logits"};
    PE_RETURN_IF_ERROR(pe_check_binding(ctx, "attention", 3, sv, sn));

    /* ---- 4. logit biases: in place on the block's logits, which fit one binding ---------- */
    struct pe_alibi_op ao;
    struct pe_relbias_op ro;
    struct pe_view lv;
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "logits", &lb, true, &lv));
    if (r->has_alibi) {
        ao = r->alibi;
        ao.q_offset = q_offset;
        ao.logits = ao.dst = lv;
    }
    if (r->has_relbias) {
        ro = r->relbias;
        pe_relbias_window(&ro, q0, nq, r->Tk);
        ro.logits = ro.dst = lv;
    }

    /* ---- 5. softmax ---------------------------------------------------------------------- */
    struct pe_attn_softmax_op sm;
    memset(&sm, 0, sizeof(sm));
    sm.logits = lv;
    if (p->mask) {
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "params->mask", &mb, false, &sm.mask));
        for (int i = 0; i < 4; i++) {
            if (mb.ne[i] == 1)
                sm.mask.st[i] = 0; /* broadcast */
            sm.mask.ne[i] = sm.logits.ne[i];
        }
    }
    if (r->weights)
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "weights", &wb, true, &sm.weights));
    sm.causal = p->causal;
    sm.q_offset = q_offset;
    sm.k_offset = p->k_offset;
    const struct pe_view *mv[2] = {&sm.mask, &sm.weights};
    const char *mn[2] = {"params->mask", "weights"};
    PE_RETURN_IF_ERROR(pe_check_binding(ctx, "attention", 2, mv, mn));

    /* ---- 6. output ----------------------------------------------------------------------- */
    struct pe_attn_output_op oo;
    memset(&oo, 0, sizeof(oo));
    oo.p = lv;
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "v", r->ve, false, &oo.v));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", &db, true, &oo.dst));
    oo.group = r->Hq / r->Hk;
    const struct pe_view *ov[2] = {&oo.v, &oo.dst};
    const char *on[2] = {"v", "dst"};
    PE_RETURN_IF_ERROR(pe_check_binding(ctx, "attention", 2, ov, on));

    if (keep) {
        keep->so = so;
        keep->sm = sm;
        keep->oo = oo;
    }
    if (!launch)
        return POSENC_OK;
    PE_RETURN_IF_ERROR(vt->attn_scores(ctx->backend, &so));
    if (r->has_alibi)
        PE_RETURN_IF_ERROR(inner(ctx, pe_run_alibi(ctx, &ao), "params->alibi (posenc_alibi)"));
    if (r->has_relbias)
        PE_RETURN_IF_ERROR(
            inner(ctx, pe_run_relbias(ctx, &ro), "params->relbias (posenc_relbias)"));
    PE_RETURN_IF_ERROR(vt->attn_softmax(ctx->backend, &sm));
    return vt->attn_output(ctx->backend, &oo);
}

/* Steps 3-6 as the backend's one-pass kernel (pe_attn_fused_op), when every view fits one
 * binding: *ran says whether it ran (false: the caller takes the multi-pass path, which
 * cuts the queries into blocks and reports its own limits). */
static posenc_status attn_fused_op(const struct attn_run *r, bool *ran)
{
    posenc_context *ctx = r->ctx;
    const struct posenc_attention_params *p = r->p;
    struct pe_attn_fused_op op;
    memset(&op, 0, sizeof(op));
    *ran = false;
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "q", r->qe, false, &op.q));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "k", r->ke, false, &op.k));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "v", r->ve, false, &op.v));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", r->dst, true, &op.dst));
    if (p->mask) {
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "params->mask", p->mask, false, &op.mask));
        /* the mask view gets the logits' shape, broadcast dims with stride 0 */
        const int64_t lne[4] = {r->Tk, r->qe->ne[2], r->Hq, r->B};
        for (int i = 0; i < 4; i++) {
            if (p->mask->ne[i] == 1)
                op.mask.st[i] = 0;
            op.mask.ne[i] = lne[i];
        }
    }
    const uint64_t limit = pe_binding_limit(ctx, NULL);
    const struct pe_view *views[] = {&op.q, &op.k, &op.v, &op.dst, &op.mask};
    const char *names[] = {"q", "k", "v", "dst", "params->mask"};
    const bool extras = p->softcap > 0.0f || p->mask_slopes || p->sinks;
    for (size_t i = 0; i < PE_ARRAY_SIZE(views); i++)
        if (limit && pe_view_span_bytes(views[i]) > limit) {
            if (extras) /* the multi-pass path cannot take them */
                return pe_check_binding(ctx, "attention", 1, &views[i], &names[i]);
            return POSENC_OK; /* not fused: the multi-pass path cuts and checks */
        }
    if (p->sinks)
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "params->sinks", p->sinks, false, &op.sinks));
    op.group = r->Hq / r->Hk;
    op.scale = r->scale;
    op.softcap = p->softcap;
    op.mask_slopes_f32 = p->mask_slopes;
    op.mask_slopes = r->mask_slopes;
    op.scale_f32 = (float)r->scale;
    op.causal = p->causal;
    op.q_offset = p->q_offset;
    op.k_offset = p->k_offset;
    if (r->has_alibi) {
        op.has_alibi = 1;
        op.alibi = r->alibi;
        memset(&op.alibi.logits, 0, sizeof(op.alibi.logits));
        memset(&op.alibi.dst, 0, sizeof(op.alibi.dst));
    }
    if (r->has_relbias) {
        op.has_relbias = 1;
        op.relbias = r->relbias;
        memset(&op.relbias.logits, 0, sizeof(op.relbias.logits));
        memset(&op.relbias.dst, 0, sizeof(op.relbias.dst));
    }
    if (r->has_krot) {
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "k's RoPE table", &r->krot, false, &op.krot));
        if (op.krot.ne[3] == 1) /* positions shared by the batch */
            op.krot.st[3] = 0;
        op.krot.ne[3] = r->B;
        op.has_krot = 1;
        op.krot_off = r->krot_off;
        op.krot_pairs = r->krot_pairs;
        op.krot_adjacent = r->krot_adjacent;
    }
    *ran = true;
    return ctx->backend->vt->attn_fused(ctx->backend, &op);
}

posenc_status posenc_attention(posenc_context *ctx, const posenc_tensor *q,
                               const posenc_tensor *k, const posenc_tensor *v,
                               const posenc_tensor *dst, const posenc_tensor *weights,
                               const struct posenc_attention_params *params)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    struct posenc_attention_params p;
    memset(&p, 0, sizeof(p));
    if (params)
        p = *params;

    /* ---- tensors -------------------------------------------------------------------- */
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "q", q, false, NULL));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "q", q));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "k", k, false, NULL));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "k", k));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "v", v, false, NULL));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "v", v));
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "dst", dst, true, NULL));
    PE_RETURN_IF_ERROR(pe_enc_float(ctx, "dst", dst));
    if (weights) {
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "weights", weights, true, NULL));
        PE_RETURN_IF_ERROR(pe_enc_float(ctx, "weights", weights));
    }
    const int64_t D = q->ne[0], Hq = q->ne[1], Tq = q->ne[2], B = q->ne[3];
    const int64_t Hk = k->ne[1], Tk = k->ne[2], Dv = v->ne[0];
    char want[160];
    if (k->ne[0] != D || k->ne[3] != B) {
        snprintf(want, sizeof(want), "[%lld, Hk, Tk, %lld] (head_dim and batch of q)",
                 (long long)D, (long long)B);
        return shape_error(ctx, "k", k, want);
    }
    if (Hk == 0 ? Hq != 0 : Hq % Hk != 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "q->ne[1] = %lld query heads is not a multiple of k->ne[1] = %lld K/V "
                        "heads",
                        (long long)Hq, (long long)Hk);
    if (v->ne[1] != Hk || v->ne[2] != Tk || v->ne[3] != B) {
        snprintf(want, sizeof(want), "[Dv, %lld, %lld, %lld] (heads, keys and batch of k)",
                 (long long)Hk, (long long)Tk, (long long)B);
        return shape_error(ctx, "v", v, want);
    }
    if (dst->ne[0] != Dv || dst->ne[1] != Hq || dst->ne[2] != Tq || dst->ne[3] != B) {
        snprintf(want, sizeof(want), "[%lld, %lld, %lld, %lld] ([Dv, Hq, Tq, B])", (long long)Dv,
                 (long long)Hq, (long long)Tq, (long long)B);
        return shape_error(ctx, "dst", dst, want);
    }
    if (weights && (weights->ne[0] != Tk || weights->ne[1] != Tq || weights->ne[2] != Hq ||
                    weights->ne[3] != B)) {
        snprintf(want, sizeof(want), "[%lld, %lld, %lld, %lld] ([Tk, Tq, Hq, B])", (long long)Tk,
                 (long long)Tq, (long long)Hq, (long long)B);
        return shape_error(ctx, "weights", weights, want);
    }
    PE_RETURN_IF_ERROR(check_params(ctx, &p, D, Dv));
    PE_RETURN_IF_ERROR(check_extras(ctx, &p, Hq));
    const bool extras = p.softcap > 0.0f || p.mask_slopes || p.sinks;
    if (extras && weights)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "params->softcap / mask_slopes / sinks are computed by the one-pass "
                        "path only, which does not return weights (pass weights = NULL)");
    if (extras && (p.flags & POSENC_ATTENTION_UNFUSED))
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "params->softcap / mask_slopes / sinks are computed by the one-pass "
                        "path only, and params->flags has POSENC_ATTENTION_UNFUSED");
    if (p.mask) {
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "params->mask", p.mask, false, NULL));
        PE_RETURN_IF_ERROR(pe_enc_float(ctx, "params->mask", p.mask));
        const posenc_tensor *m = p.mask;
        if (m->ne[0] != Tk || m->ne[1] != Tq || (m->ne[2] != 1 && m->ne[2] != Hq) ||
            (m->ne[3] != 1 && m->ne[3] != B)) {
            snprintf(want, sizeof(want), "[%lld, %lld, 1 or %lld, 1 or %lld] ([Tk, Tq, ...])",
                     (long long)Tk, (long long)Tq, (long long)Hq, (long long)B);
            return shape_error(ctx, "params->mask", m, want);
        }
    }
    const bool input_enc = has_input_encoding(p.encoding);
    const posenc_tensor *q_pos = input_enc ? p.q_pos : NULL;
    const posenc_tensor *k_pos = input_enc ? p.k_pos : NULL;
    const bool learned = p.encoding == POSENC_ATTENTION_LEARNED;
    if (q_pos)
        PE_RETURN_IF_ERROR(check_pos(ctx, "params->q_pos", q_pos, Tq, B, learned));
    if (k_pos)
        PE_RETURN_IF_ERROR(check_pos(ctx, "params->k_pos", k_pos, Tk, B, learned));
    if ((int64_t)p.q_offset + Tq - 1 > INT32_MAX || (int64_t)p.k_offset + Tk - 1 > INT32_MAX)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "positions up to q_offset + Tq - 1 = %lld, k_offset + Tk - 1 = %lld "
                        "do not fit int32",
                        (long long)p.q_offset + Tq - 1, (long long)p.k_offset + Tk - 1);
    const posenc_tensor *table = NULL;
    if (learned) {
        table = p.learned_table;
        PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "params->learned_table", table, false, NULL));
        PE_RETURN_IF_ERROR(pe_enc_float(ctx, "params->learned_table", table));
        if (table->ne[0] != D || table->ne[2] != 1 || table->ne[3] != 1) {
            snprintf(want, sizeof(want), "[%lld, rows, 1, 1] (head_dim = q->ne[0])",
                     (long long)D);
            return shape_error(ctx, "params->learned_table", table, want);
        }
        /* implicit positions are known here: a row past the table is caught now (explicit
         * positions are read back and checked before the encodings run) */
        int64_t rows = table->ne[1];
        if (!q_pos && Tq > 0 && (int64_t)p.q_offset + Tq - 1 >= rows)
            return pe_error(ctx, POSENC_ERR_OUT_OF_RANGE,
                            "query positions q_offset .. q_offset + Tq - 1 = %d .. %lld reach "
                            "past the %lld rows of params->learned_table",
                            (int)p.q_offset, (long long)p.q_offset + Tq - 1, (long long)rows);
        if (!k_pos && Tk > 0 && (int64_t)p.k_offset + Tk - 1 >= rows)
            return pe_error(ctx, POSENC_ERR_OUT_OF_RANGE,
                            "key positions k_offset .. k_offset + Tk - 1 = %d .. %lld reach "
                            "past the %lld rows of params->learned_table",
                            (int)p.k_offset, (long long)p.k_offset + Tk - 1, (long long)rows);
    }
    if (p.encoding == POSENC_ATTENTION_RELBIAS)
        PE_RETURN_IF_ERROR(
            pe_check_tensor(ctx, "params->relbias_table", p.relbias_table, false, NULL));

    /* outputs overlap nothing */
    const posenc_tensor *ins[] = {q, k, v, p.mask, q_pos, k_pos, table,
                                  p.encoding == POSENC_ATTENTION_RELBIAS ? p.relbias_table
                                                                         : NULL,
                                  p.sinks};
    const char *in_names[] = {"q", "k", "v", "params->mask", "params->q_pos", "params->k_pos",
                              "params->learned_table", "params->relbias_table", "params->sinks"};
    for (size_t i = 0; i < PE_ARRAY_SIZE(ins); i++) {
        PE_RETURN_IF_ERROR(no_overlap(ctx, "dst", dst, in_names[i], ins[i]));
        PE_RETURN_IF_ERROR(no_overlap(ctx, "weights", weights, in_names[i], ins[i]));
    }
    PE_RETURN_IF_ERROR(no_overlap(ctx, "dst", dst, "weights", weights));

    /* RoPE: resolve seq_len over both position sets (so Q and K get one table), check the
     * params and find the softmax scale factor */
    struct posenc_rope_params rope = p.rope;
    double softmax_scale = 1.0;
    /* RoPE: the resolved table, kept to the end of the call for krot_table (its pair window
     * and the key of a kept rotation table); freed on every return below */
    struct pe_rope_table rt_k;
    memset(&rt_k, 0, sizeof(rt_k));
    if (p.encoding == POSENC_ATTENTION_ROPE) {
        if ((rope.scaling.kind == POSENC_ROPE_SCALING_DYNAMIC_NTK ||
             rope.scaling.kind == POSENC_ROPE_SCALING_LONGROPE) &&
            rope.scaling.seq_len == 0) {
            int64_t lq = (int64_t)p.q_offset + Tq, lk = (int64_t)p.k_offset + Tk;
            if (q_pos && !is_empty(q_pos))
                PE_RETURN_IF_ERROR(pos_len(ctx, "params->q_pos", q_pos, &lq));
            if (k_pos && !is_empty(k_pos))
                PE_RETURN_IF_ERROR(pos_len(ctx, "params->k_pos", k_pos, &lk));
            int64_t len = lq > lk ? lq : lk;
            rope.scaling.seq_len = (int32_t)(len < 1 ? 1 : len > INT32_MAX ? INT32_MAX : len);
        }
        PE_RETURN_IF_ERROR(
            inner(ctx, pe_rope_table_build(ctx, D, &rope, 0, &rt_k), "params->rope"));
        softmax_scale = rt_k.info.softmax_scale;
        const int32_t n_streams = rt_k.info.n_streams;
        if ((q_pos && q_pos->ne[1] < n_streams) || (k_pos && k_pos->ne[1] < n_streams)) {
            pe_rope_table_free(&rt_k);
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "params->q_pos / k_pos have %lld / %lld streams, but the RoPE "
                            "pairs use %d",
                            (long long)(q_pos ? q_pos->ne[1] : 0),
                            (long long)(k_pos ? k_pos->ne[1] : 0), (int)n_streams);
        }
    }

    const struct pe_backend_vtable *vt = ctx->backend->vt;
    if (is_empty(q) || is_empty(k) || is_empty(v) || is_empty(dst)) {
        pe_rope_table_free(&rt_k);
        return POSENC_OK;
    }
    if (extras && !vt->attn_fused) {
        pe_rope_table_free(&rt_k);
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "backend %s has no one-pass attention, which params->softcap / "
                        "mask_slopes / sinks need", vt->name);
    }
    if (!vt->attn_scores || !vt->attn_softmax || !vt->attn_output ||
        (p.encoding == POSENC_ATTENTION_ALIBI && !vt->alibi) ||
        (p.encoding == POSENC_ATTENTION_RELBIAS && !vt->relbias)) {
        pe_rope_table_free(&rt_k);
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no attention op%s", vt->name,
                        vt->attn_scores && vt->attn_softmax && vt->attn_output
                            ? " with this encoding"
                            : "");
    }

    const double scale =
        p.scale != 0.0f ? (double)p.scale : softmax_scale / sqrt((double)D);

    /* Check-only: the rest makes temporaries and runs; its own limits are checked again
     * when the call runs. */
    if (ctx->check_only) {
        pe_rope_table_free(&rt_k);
        return POSENC_OK;
    }
    /* (LEARNED: rt_k is empty) */
    if (learned && q_pos)
        PE_RETURN_IF_ERROR(learned_pos_range(ctx, "params->q_pos", "query", q_pos, table->ne[1]));
    if (learned && k_pos)
        PE_RETURN_IF_ERROR(learned_pos_range(ctx, "params->k_pos", "key", k_pos, table->ne[1]));

    /* ---- 2. input encodings ------------------------------------------------------------ */
    struct attn_tmp tmp;
    memset(&tmp, 0, sizeof(tmp));
    posenc_status st = POSENC_OK;
    posenc_tensor qe = *q, ke = *k, ve = *v, qp, kp, logits;
    struct attn_run run = {.ctx = ctx, .p = &p, .qe = &qe, .ke = &ke, .ve = &ve, .dst = dst,
                           .weights = weights, .Tk = Tk, .Hq = Hq, .Hk = Hk, .B = B,
                           .scale = scale};
    /* RoPE on k inside the one pass where the backend's kernel takes it (krot_table); when
     * the one pass declines after all (a view past the binding limit), K' is made then */
    const bool krot = p.encoding == POSENC_ATTENTION_ROPE && !weights && vt->attn_fused &&
                      vt->attn_krot &&
                      vt->attn_krot(ctx->backend, D, Dv, Hk > 0 ? Hq / Hk * Tq : 0) &&
                      !(p.flags & (POSENC_ATTENTION_UNFUSED | POSENC_ATTENTION_PE_ON_V));
    bool kp_made = k_pos != NULL;
    if (k_pos)
        kp = *k_pos;
    if (input_enc) {
        if (q_pos)
            qp = *q_pos;
        else
            st = implicit_pos(ctx, &tmp, Tq, p.q_offset, &qp);
        /* implicit key positions: made where they are read (krot_table makes its own,
         * and none when it finds its table kept: a decode loop then writes no positions
         * for the keys; OpenCL's write waits for the queue) */
        if (st == POSENC_OK && !kp_made && !krot) {
            st = implicit_pos(ctx, &tmp, Tk, p.k_offset, &kp);
            kp_made = true;
        }
        if (st == POSENC_OK)
            st = encode(ctx, &tmp, &p, &rope, "q", q, &qp, &qe);
        if (st == POSENC_OK && krot)
            st = krot_table(ctx, &tmp, &rope, D, &rt_k, k_pos ? &kp : NULL, Tk, p.k_offset,
                            &run);
        else if (st == POSENC_OK)
            st = encode(ctx, &tmp, &p, &rope, "k", k, &kp, &ke);
        if (st == POSENC_OK && (p.flags & POSENC_ATTENTION_PE_ON_V))
            st = encode(ctx, &tmp, &p, &rope, "v", v, &kp, &ve);
    }

    /* the logit bias of every block, its checks and host tables made once */
    if (st == POSENC_OK && p.encoding == POSENC_ATTENTION_ALIBI) {
        struct posenc_alibi_params ap = p.alibi;
        ap.q_offset = p.q_offset;
        ap.k_offset = p.k_offset;
        st = inner(ctx, pe_alibi_prepare(ctx, &ap, Tk, Tq, Hq, &run.alibi),
                   "params->alibi (posenc_alibi)");
        run.has_alibi = st == POSENC_OK;
    } else if (st == POSENC_OK && p.encoding == POSENC_ATTENTION_RELBIAS) {
        struct posenc_relbias_params rp = p.relbias;
        rp.q_offset = p.q_offset;
        rp.k_offset = p.k_offset;
        st = inner(ctx, pe_relbias_prepare(ctx, &rp, p.relbias_table, Tk, Tq, Hq, &run.relbias),
                   "params->relbias (posenc_relbias)");
        run.has_relbias = st == POSENC_OK;
        run.buckets = run.relbias.bucket;
    }

    double *mask_slopes = NULL;
    if (st == POSENC_OK && p.mask_slopes) {
        mask_slopes = malloc((size_t)Hq * sizeof(double));
        if (!mask_slopes)
            st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "attention: %lld mask slopes",
                          (long long)Hq);
        for (int64_t h = 0; st == POSENC_OK && h < Hq; h++)
            mask_slopes[h] = (double)p.mask_slopes[h];
        run.mask_slopes = mask_slopes;
    }

    /* ---- 3-6 in one pass: no weights asked for and the backend has a fused kernel ------ */
    bool fused = false;
    if (st == POSENC_OK && !weights && vt->attn_fused && !(p.flags & POSENC_ATTENTION_UNFUSED))
        st = attn_fused_op(&run, &fused);
    if (st == POSENC_OK && !fused && run.has_krot) {
        run.has_krot = false;
        if (!kp_made)
            st = implicit_pos(ctx, &tmp, Tk, p.k_offset, &kp);
        if (st == POSENC_OK)
            st = encode(ctx, &tmp, &p, &rope, "k", k, &kp, &ke);
    }

    /* Otherwise steps 3-6 run over blocks of queries whose logits fit one binding of the
     * device (all of them at once when there is no limit): the logits temporary holds one
     * block, [Tk, tq, Hq, B], and each block's queries see their own q_offset. */
    int64_t tq = Tq;
    const char *limit_what;
    const uint64_t limit = pe_binding_limit(ctx, &limit_what);
    if (st == POSENC_OK && !fused && limit) {
        const uint64_t row = (uint64_t)Tk * (uint64_t)Hq * (uint64_t)B * 4u;
        /* One query row of the block-packed logits spans (Tk*tq*(Hq*B - 1) + Tk) floats;
         * bound it by Tk*Hq*B*tq floats, which is what the buffer holds. */
        if (row > limit)
            st = pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                          "attention: the logits of one query, %lld keys x %lld heads x %lld "
                          "batches in f32 (%llu bytes), are over the %llu bytes one binding "
                          "may span (%s)",
                          (long long)Tk, (long long)Hq, (long long)B, (unsigned long long)row,
                          (unsigned long long)limit, limit_what);
        else if ((uint64_t)Tq * row > limit)
            tq = (int64_t)(limit / row);
    }
    if (st == POSENC_OK && !fused)
        st = tmp_tensor(ctx, &tmp, POSENC_DTYPE_F32, Tk, tq, Hq, B, &logits);
    run.logits = &logits;
    if (st == POSENC_OK && !fused && tq < Tq)
        pe_log(ctx, POSENC_LOG_DEBUG, "attention: %lld queries in blocks of %lld (binding "
               "limit %llu bytes, %s)", (long long)Tq, (long long)tq,
               (unsigned long long)limit, limit_what);
    /* every block checked (views, binding limits) before the first one runs */
    struct attn_block_ops first;
    for (int64_t q0 = 0; q0 < Tq && st == POSENC_OK && !fused; q0 += tq)
        st = attn_block(&run, q0, Tq - q0 < tq ? Tq - q0 : tq, false, q0 == 0 ? &first : NULL);
    /* the backend's own temporaries, scratch and programs for every block (the first is the
     * largest), before the first launch */
    bool prepared = false;
    if (st == POSENC_OK && !fused && vt->attn_prepare) {
        prepared = true;
        st = vt->attn_prepare(ctx->backend, &first.so, &first.sm, &first.oo);
    }
    for (int64_t q0 = 0; q0 < Tq && st == POSENC_OK && !fused; q0 += tq)
        st = attn_block(&run, q0, Tq - q0 < tq ? Tq - q0 : tq, true, NULL);
    if (prepared && vt->attn_end)
        vt->attn_end(ctx->backend);

    free(mask_slopes);
    if (run.has_alibi)
        pe_alibi_release(&run.alibi);
    if (run.has_relbias)
        pe_relbias_release(&run.relbias, run.buckets);
    tmp_free(ctx, &tmp);
    pe_rope_table_free(&rt_k);
    return st;
}

/* ---- the decay curve ----------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

posenc_status posenc_attention_decay(posenc_context *ctx, int64_t head_dim, int64_t n_keys,
                                     int64_t n_samples, uint64_t seed,
                                     const struct posenc_attention_params *params,
                                     double *out_weight)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    if (head_dim < 1 || head_dim > (1 << 20))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "head_dim = %lld, must be in [1, 2^20]", (long long)head_dim);
    if (n_keys < 1 || n_keys > INT32_MAX)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "n_keys = %lld, must be in [1, 2^31)",
                        (long long)n_keys);
    if (n_samples < 1 || n_samples > (1 << 24))
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "n_samples = %lld, must be in [1, 2^24]", (long long)n_samples);
    if (!out_weight)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "out_weight is NULL");
    if ((uint64_t)n_keys * (uint64_t)n_samples > ((uint64_t)1 << 40) / 4)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "n_keys * n_samples = %lld weights is too many",
                        (long long)(n_keys * n_samples));
    struct posenc_attention_params p;
    memset(&p, 0, sizeof(p));
    if (params)
        p = *params;
    if (p.q_pos || p.k_pos)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->q_pos / k_pos must be NULL for posenc_attention_decay (the "
                        "positions are k_offset + 0 .. n_keys - 1)");
    if (p.k_offset < 0 || (int64_t)p.k_offset + n_keys - 1 > INT32_MAX)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "params->k_offset = %d with %lld keys: positions must be in [0, 2^31)",
                        (int)p.k_offset, (long long)n_keys);
    p.q_offset = (int32_t)(p.k_offset + n_keys - 1);

    const int64_t D = head_dim, S = n_samples;
    float *host = malloc(sizeof(float) * (size_t)(2 * D * S));
    float *w = malloc(sizeof(float) * (size_t)(n_keys * S));
    posenc_buffer *qb = NULL, *kb = NULL, *vb = NULL, *ob = NULL, *wb = NULL;
    posenc_status st = POSENC_OK;
    if (!host || !w) {
        st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for %lld weights",
                      (long long)(n_keys * S));
        goto done;
    }
    uint64_t rng = seed;
    for (int64_t i = 0; i < 2 * D * S; i++)
        host[i] = (float)((double)(splitmix64(&rng) >> 40) * 0x1p-24); /* [0, 1), exact */
    const float zero = 0.0f;
    if (ctx->check_only) /* the rest makes temporaries and runs */
        goto done;
    if ((st = posenc_buffer_create(ctx, sizeof(float) * (size_t)(D * S), &qb)) != POSENC_OK ||
        (st = posenc_buffer_create(ctx, sizeof(float) * (size_t)(D * S), &kb)) != POSENC_OK ||
        (st = posenc_buffer_create(ctx, sizeof(float), &vb)) != POSENC_OK ||
        (st = posenc_buffer_create(ctx, sizeof(float) * (size_t)S, &ob)) != POSENC_OK ||
        (st = posenc_buffer_create(ctx, sizeof(float) * (size_t)(n_keys * S), &wb)) != POSENC_OK)
        goto done;
    if ((st = posenc_buffer_write(qb, 0, host, sizeof(float) * (size_t)(D * S))) != POSENC_OK ||
        (st = posenc_buffer_write(kb, 0, host + D * S, sizeof(float) * (size_t)(D * S))) !=
            POSENC_OK ||
        (st = posenc_buffer_write(vb, 0, &zero, sizeof(float))) != POSENC_OK)
        goto done;
    /* the draws are the batch; the same key at every position (stride 0 over keys); V is
     * one zero shared by every key (the output is not wanted) */
    posenc_tensor qt = posenc_tensor_contiguous(qb, 0, POSENC_DTYPE_F32, D, 1, 1, S);
    posenc_tensor kt = posenc_tensor_contiguous(kb, 0, POSENC_DTYPE_F32, D, 1, n_keys, S);
    kt.nb[2] = 0;
    kt.nb[3] = 4 * D;
    posenc_tensor vt = posenc_tensor_contiguous(vb, 0, POSENC_DTYPE_F32, 1, 1, n_keys, S);
    vt.nb[0] = vt.nb[1] = vt.nb[2] = vt.nb[3] = 0;
    posenc_tensor ot = posenc_tensor_contiguous(ob, 0, POSENC_DTYPE_F32, 1, 1, 1, S);
    posenc_tensor wt = posenc_tensor_contiguous(wb, 0, POSENC_DTYPE_F32, n_keys, 1, 1, S);
    st = posenc_attention(ctx, &qt, &kt, &vt, &ot, &wt, &p);
    if (st == POSENC_OK)
        st = posenc_buffer_read(wb, 0, w, sizeof(float) * (size_t)(n_keys * S));
    if (st == POSENC_OK)
        for (int64_t r = 0; r < n_keys; r++) {
            double acc = 0.0;
            for (int64_t s = 0; s < S; s++)
                acc += w[(n_keys - 1 - r) + n_keys * s];
            out_weight[r] = acc / (double)S;
        }
done:
    posenc_buffer_destroy(&qb);
    posenc_buffer_destroy(&kb);
    posenc_buffer_destroy(&vb);
    posenc_buffer_destroy(&ob);
    posenc_buffer_destroy(&wb);
    free(host);
    free(w);
    return st;
}
