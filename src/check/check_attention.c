/*
 * check_attention.c - verification cases for posenc_attention and their runner, plus
 * pc_attn_eval for the property tests (see check.h).
 *
 * A case runs on the device under test and on the CPU reference with the same seeded
 * inputs (q, k, v uniform in [-2, 2]); dst and weights start poisoned inside guard bytes
 * that must come back unchanged. The reference always returns its weights (f32): the
 * bounds below are scaled by them.
 *
 * ---- The bound, element by element ----------------------------------------------------
 *
 * u = 2^-24 (f32 unit roundoff). A device computes in f32 (any summation order: GEMM
 * tiling, work-group reductions); the reference in double with f32 temporaries (the
 * encoded Q'/K', the logits and the probabilities are stored as f32 between its steps).
 *
 * 1. Encoded inputs. For every element x of Q (K, V likewise) the checker knows a bound
 *    X^ >= |x'| on the encoded value and a bound e_x on |device x' - reference x'|:
 *      NONE / ALIBI / RELBIAS   X^ = |x|,            e_x = 0 (read as stored, f16 widened
 *                                                    exactly)
 *      SINUSOIDAL               X^ = |x*s| + 1,      e_x = pc_bound_sincos_f32(|pos w_i|, |x*s|)
 *      LEARNED                  X^ = |x| + |t|,      e_x = one ulp32 of X^ (the f32 add,
 *                                                    rounded on both sides)
 *      ROPE (pair a, b)         X^ = m(|xa| + |xb|), e_x = pc_bound_rope_f32(angle_err32(|pos w_j|),
 *                                                    m, |xa| + |xb|); dims outside the
 *                                                    window: |x|, 0
 *    (the same bounds the sinusoidal, learned and rope checks use, see check.c).
 *
 * 2. Logits s = c * sum_i q'_i k'_i (c the scale) + b (ALiBi / relative bias) + mask.
 *    With S = sum_i Q^_i K^_i and E = sum_i (e_q K^ + Q^ e_k + e_q e_k):
 *      - the f32 dot product of length D, any order: gamma_D S <= 1.01 D u S (Higham,
 *        Lemma 3.1 / the usual GEMM bound; FMA only removes roundings);
 *      - c rounded to f32 and the product c * acc rounded: 2u |c| S;
 *      - the two sides' encoded inputs differ: |c| E;
 *      - the reference rounds its logit to f32: u |s|, |s| <= |c| S + |b| + |mask|;
 *      - ALiBi: the device forms m_f32 * dist (2.01 u |b|) and both sides round the sum
 *        logit + bias (u each); the relative-bias table value is exact, its sum rounds on
 *        both sides; the mask add rounds on the device: u |s| each, 3 u |s| in all.
 *    eps_k = |c| ((D + 2) 1.01 u S + E) + 2.01 u |b| + 3 u (|c| S + |b| + |mask|).
 *
 * 3. Softmax p_k = exp(x_k - m) / sum_j exp(x_j - m) over the unmasked keys (masked keys
 *    and all-masked rows are exactly 0 on both sides). Logit errors |d_k| <= eps_k change
 *    log p_k by d_k - log(sum_j p_j exp(d_j)), and the second term lies in
 *    [min d, max d], so |log p'_k - log p_k| <= eps_k + eps_max (eps_max over the row's
 *    unmasked keys): a relative error expm1(eps_k + eps_max). Evaluating it in f32:
 *      - x_k - m rounds (u |x_k - m|), exp of the rounded argument, or exp2 of
 *        (x - m) log2(e) rounded once more: <= 2 u |x_k - m| relative;
 *      - exp itself: OpenCL allows 3 ulp, Vulkan's GLSL exp (3 + 2|x|) ulp, an ulp
 *        being <= 2u relative: (6 + 4 |x_k - m|) u covers both;
 *      - the sum of Tk positive terms: (Tk - 1) u relative, any order;
 *      - the division: 2.5 ulp (OpenCL and Vulkan), 5 u; the reference's f32 store: u.
 *    |x_k - m| is not stored, but p_k = exp(x_k - m)/Z with Z in [1, Tk] gives
 *    |x_k - m| <= |ln p_k| + ln Tk. In all
 *      R_k = expm1(eps_k + eps_max) + (6 (|ln p_k| + ln Tk) + Tk + 16) u,
 *      |p'_k - p_k| <= p_k (R_k + u)(1 + 4u) + 2^-125
 *    (2^-125: a device may flush denormal results of exp to zero). f16 weights add one
 *    f16 rounding (pc_bound_to_f16).
 *
 * 4. Output o_d = sum_k p_k v'_kd: the probabilities' errors carry over as
 *    sum_k |dp_k| V^_k, the encoded V's as sum_k p_k e_v; the f32 accumulation of Tk
 *    products and the device's and reference's final roundings add
 *    (Tk + 3) 1.01 u sum_k p_k V^_k. f16 dst adds one f16 rounding.
 *
 * 5. One pass (no weights asked: a backend's attn_fused, pe_attn_fused_op). The logits
 *    carry the same roundings as in 2 (dot product, scale, bias and mask adds; a device
 *    may fold the f32 scale into q first: one rounding per product, within the 2u |c| S).
 *    The softmax is online: key k's term exp(x_k - m_1) is formed against the running max
 *    m_1 <= m of its tile, then multiplied by alpha = exp(m_i - m_(i+1)) each time the
 *    running max (or, split-K, the merge's max) rises above it, which takes a key x_j >
 *    x_k. Per rescale: exp of a rounded argument and one product, 6u + u relative (the
 *    arguments' parts, 2u |arg| + 4u |arg| per exp in 3, telescope: their |arg| add up to
 *    m - x_k, so the 6 |x_k - m| u of 3 still covers them). With n_k = #{j != k: x_j >=
 *    x_k} (counted on the reference's p, p_j >= p_k (1 - 2^-10), which can only count
 *    more), key k's term has 7 n_k u more; the sum l (the softmax's denominator) carries
 *    N = sum_j p_j 7 n_j u relative; acc / l replaces the normalisation's division (in 3).
 *    So a one-pass run's R_k gets 1.01 (7 n_k u + N) more; the rest of 3 and 4 is
 *    unchanged. Keys the running max never passes (n_k = 0) add nothing: the exact
 *    exp(0) = 1 and x 1 of a non-rising max are not roundings. A run without weights gets
 *    this bound whether or not the backend has a one-pass kernel (it is the larger).
 *
 * pc_attn_eval uses the same bounds as a bound on |device - exact| (they include the
 * reference's own f32 roundings, so they are larger than that), computed from the run's
 * own weights.
 */
#include "check_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24
#define N_STREAMS 4

static const float alibi_user_slopes[8] = {0.5f, 0.25f, 0.7f, 0.0625f,
                                           0.3f, 1.0f,  0.125f, 0.01f};

/* ---- naming and the case table ------------------------------------------------------- */

static const char *enc_name(posenc_attention_encoding e)
{
    switch (e) {
    case POSENC_ATTENTION_NONE: return "none";
    case POSENC_ATTENTION_SINUSOIDAL: return "sinusoidal";
    case POSENC_ATTENTION_LEARNED: return "learned";
    case POSENC_ATTENTION_ROPE: return "rope";
    case POSENC_ATTENTION_ALIBI: return "alibi";
    case POSENC_ATTENTION_RELBIAS: return "relbias";
    }
    return "?";
}

static int64_t relbias_buckets(const struct posenc_relbias_params *p)
{
    if (p->kind == POSENC_RELBIAS_CLIPPED)
        return 2 * (int64_t)p->max_distance + 1;
    return p->num_buckets ? p->num_buckets : 32;
}

static void name_case(struct pc_case *c)
{
    const struct pc_attn_case *a = &c->attn;
    char enc[96] = "";
    size_t e = 0;
    switch (a->encoding) {
    case POSENC_ATTENTION_SINUSOIDAL:
        e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/layout=%d", (int)c->sin.layout);
        if (c->sin.x_scale != 0.0f)
            e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/xscale=%g", (double)c->sin.x_scale);
        break;
    case POSENC_ATTENTION_LEARNED:
        e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/rows=%lld/table=%s",
                              (long long)c->rows, posenc_dtype_name(c->table_dtype));
        break;
    case POSENC_ATTENTION_ROPE:
        e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/mode=%d", (int)c->rope.mode);
        if (c->rope.n_dims)
            e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/n_dims=%d", c->rope.n_dims);
        if (c->rope.scaling.kind != POSENC_ROPE_SCALING_NONE)
            e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/scaling=%d/factor=%g",
                                  (int)c->rope.scaling.kind, (double)c->rope.scaling.factor);
        break;
    case POSENC_ATTENTION_ALIBI:
        e += (size_t)snprintf(enc + e, sizeof(enc) - e, "%s%s",
                              c->alibi.symmetric ? "/symmetric" : "",
                              c->alibi.slopes ? "/user_slopes" : "");
        if (c->alibi.max_bias != 0.0f)
            e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/max_bias=%g",
                                  (double)c->alibi.max_bias);
        break;
    case POSENC_ATTENTION_RELBIAS:
        if (c->relbias.kind == POSENC_RELBIAS_T5)
            e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/t5/%s/buckets=%lld",
                                  c->relbias.causal ? "causal" : "bidir",
                                  (long long)relbias_buckets(&c->relbias));
        else
            e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/clipped/max_dist=%d",
                                  c->relbias.max_distance);
        e += (size_t)snprintf(enc + e, sizeof(enc) - e, "/table=%s",
                              posenc_dtype_name(c->table_dtype));
        break;
    default:
        break;
    }
    char extra[96] = "";
    size_t x = 0;
    if (a->causal)
        x += (size_t)snprintf(extra + x, sizeof(extra) - x, "/causal");
    if (a->q_offset || a->k_offset)
        x += (size_t)snprintf(extra + x, sizeof(extra) - x, "/q_off=%d/k_off=%d", a->q_offset,
                              a->k_offset);
    if (a->scale != 0.0f)
        x += (size_t)snprintf(extra + x, sizeof(extra) - x, "/scale=%g", (double)a->scale);
    if (a->mask)
        x += (size_t)snprintf(extra + x, sizeof(extra) - x, "/mask=%s",
                              a->mask == 1 ? "f32xB" : a->mask == 2 ? "f16xH" : "f16causal");
    if (a->explicit_pos)
        x += (size_t)snprintf(extra + x, sizeof(extra) - x, "/pos_tensors");
    if (a->pe_on_v)
        x += (size_t)snprintf(extra + x, sizeof(extra) - x, "/pe_on_v");
    if (a->weights)
        x += (size_t)snprintf(extra + x, sizeof(extra) - x, "/weights=%s",
                              a->weights == 2 ? "f16" : "f32");
    char full[512]; /* every field at its longest fits; c->name takes what fits of it */
    snprintf(full, sizeof(full),
             "attention/%s/q%s.k%s.v%s.o%s/D=%lld/Hq=%lld/Hk=%lld/Tq=%lld/Tk=%lld/B=%lld/Dv=%lld"
             "%s%s/%s",
             enc_name(a->encoding), posenc_dtype_name(c->x_dtype) + 1,
             posenc_dtype_name(a->k_dtype) + 1, posenc_dtype_name(a->v_dtype) + 1,
             posenc_dtype_name(c->dtype) + 1, (long long)c->ne[0], (long long)c->ne[1],
             (long long)a->hk, (long long)c->ne[2], (long long)a->tk, (long long)c->ne[3],
             (long long)a->dv, enc, extra, view_name(c->view));
    size_t len = strlen(full);
    if (len >= sizeof(c->name))
        len = sizeof(c->name) - 1;
    memcpy(c->name, full, len);
    c->name[len] = '\0';
}

struct pc_case pc_attention_case(posenc_attention_encoding e, posenc_dtype dt, int64_t D,
                                 int64_t Hq, int64_t Hk, int64_t Tq, int64_t Tk, int64_t B,
                                 uint64_t seed)
{
    struct pc_case c;
    memset(&c, 0, sizeof(c));
    c.op = PC_OP_ATTENTION;
    c.dtype = c.x_dtype = c.table_dtype = dt;
    c.attn.k_dtype = c.attn.v_dtype = dt;
    c.attn.encoding = e;
    c.ne[0] = D;
    c.ne[1] = Hq;
    c.ne[2] = Tq;
    c.ne[3] = B;
    c.attn.hk = Hk;
    c.attn.tk = Tk;
    c.attn.dv = D;
    c.seed = seed;
    switch (e) {
    case POSENC_ATTENTION_LEARNED: c.rows = 0; break; /* set by finish() */
    case POSENC_ATTENTION_RELBIAS: c.relbias.kind = POSENC_RELBIAS_T5; break;
    default: break;
    }
    return c;
}

/* Learned tables: enough rows for every position the case uses. */
static void finish(struct pc_case *c)
{
    if (c->attn.encoding == POSENC_ATTENTION_LEARNED) {
        int64_t mq = c->attn.q_offset + c->ne[2], mk = c->attn.k_offset + c->attn.tk;
        int64_t m = mq > mk ? mq : mk;
        if (c->attn.explicit_pos)
            m += 8 + 5 * c->ne[3]; /* see make_positions */
        c->rows = m + 3;
    }
    name_case(c);
}

void pc_attention_cases(struct pc_case **cases, size_t *n, size_t *cap)
{
    uint64_t seed = 9000;
    const posenc_dtype F32 = POSENC_DTYPE_F32, F16 = POSENC_DTYPE_F16;
    /* every encoding in three settings: GQA + causal + batch (f32, contiguous, f32
     * weights); a decoding chunk against a longer K/V (f16, padded, f16 weights); mixed
     * dtypes, one K/V head, permuted views */
    for (int e = 0; e <= (int)POSENC_ATTENTION_RELBIAS; e++) {
        posenc_attention_encoding enc = (posenc_attention_encoding)e;
        struct pc_case c = pc_attention_case(enc, F32, 16, 4, 2, 11, 11, 2, seed++);
        c.attn.causal = 1;
        c.attn.weights = 1;
        finish(&c);
        add_case(cases, n, cap, &c);

        c = pc_attention_case(enc, F16, 32, 2, 2, 5, 13, 1, seed++);
        c.view = PC_VIEW_PADDED;
        c.attn.q_offset = 8;
        c.attn.weights = 2;
        if (enc == POSENC_ATTENTION_RELBIAS) {
            c.relbias.kind = POSENC_RELBIAS_CLIPPED;
            c.relbias.max_distance = 4;
        }
        if (enc == POSENC_ATTENTION_ALIBI)
            c.alibi.symmetric = 1;
        finish(&c);
        add_case(cases, n, cap, &c);

        c = pc_attention_case(enc, F32, 8, 3, 1, 6, 6, 1, seed++);
        c.x_dtype = F16;
        c.attn.v_dtype = F16;
        c.table_dtype = F16;
        c.view = PC_VIEW_PERMUTED;
        c.attn.causal = 1;
        c.attn.k_offset = 2;
        c.attn.q_offset = 2;
        if (enc == POSENC_ATTENTION_RELBIAS)
            c.relbias.causal = 1;
        if (enc == POSENC_ATTENTION_ROPE)
            c.rope.mode = POSENC_ROPE_NEOX;
        if (enc == POSENC_ATTENTION_SINUSOIDAL)
            c.sin.layout = POSENC_SIN_HALF_SPLIT;
        finish(&c);
        add_case(cases, n, cap, &c);
    }

    struct pc_case c;
    /* odd head dims 80 and 96 */
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 80, 2, 1, 33, 33, 2, seed++);
    c.rope.mode = POSENC_ROPE_NEOX;
    c.rope.n_dims = 32;
    c.rope.scaling.kind = POSENC_ROPE_SCALING_YARN;
    c.rope.scaling.factor = 4.0f;
    c.rope.scaling.original_ctx = 16;
    c.attn.explicit_pos = 1;
    c.attn.causal = 1;
    c.attn.weights = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_NONE, F32, 96, 2, 2, 64, 64, 1, seed++);
    c.attn.weights = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_ALIBI, F16, 96, 8, 8, 17, 40, 1, seed++);
    c.attn.q_offset = 23;
    c.attn.causal = 1;
    c.alibi.slopes = alibi_user_slopes;
    c.dtype = F32;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* M-RoPE with 4-stream positions per batch row */
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 64, 2, 1, 9, 9, 2, seed++);
    c.rope.mode = POSENC_ROPE_MROPE;
    c.rope.sections[0] = 16;
    c.rope.sections[1] = 8;
    c.rope.sections[2] = 8;
    c.attn.explicit_pos = 1;
    c.attn.weights = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* masks, an all-masked row, fully masked rows from causality */
    c = pc_attention_case(POSENC_ATTENTION_NONE, F32, 16, 2, 1, 7, 10, 2, seed++);
    c.attn.mask = 1;
    c.attn.weights = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_RELBIAS, F16, 16, 3, 3, 6, 6, 2, seed++);
    c.attn.mask = 2;
    c.attn.causal = 1;
    c.attn.weights = 2;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_NONE, F32, 8, 2, 2, 8, 8, 1, seed++);
    c.attn.causal = 1;
    c.attn.k_offset = 5; /* queries 0..4 see no key */
    c.attn.weights = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* V's head dim differs, explicit scale, PE on V */
    c = pc_attention_case(POSENC_ATTENTION_NONE, F32, 16, 2, 1, 5, 9, 1, seed++);
    c.attn.dv = 24;
    c.attn.scale = 0.3f;
    c.attn.weights = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_SINUSOIDAL, F32, 16, 2, 2, 7, 7, 1, seed++);
    c.attn.pe_on_v = 1;
    c.sin.x_scale = 4.0f;
    c.sin.layout = POSENC_SIN_HALF_SPLIT_COS_FIRST;
    c.attn.explicit_pos = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_LEARNED, F16, 16, 2, 2, 7, 7, 2, seed++);
    c.attn.pe_on_v = 1;
    c.attn.explicit_pos = 1;
    c.dtype = F32;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* decoding: one query against 4096 keys, GQA 8:2, f16 K/V */
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 128, 8, 2, 1, 4096, 1, seed++);
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.q_offset = 4095;
    c.attn.causal = 1;
    c.attn.weights = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_ALIBI, F32, 64, 4, 4, 1, 4096, 1, seed++);
    c.attn.q_offset = 4095;
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* 2048 x 2048 (verify only: the CPU reference takes seconds) */
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 64, 2, 1, 2048, 2048, 1, seed++);
    c.attn.causal = 1;
    c.attn.weights = 1;
    c.attn.big = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_NONE, F16, 80, 1, 1, 2048, 2048, 1, seed++);
    c.attn.big = 1;
    finish(&c);
    add_case(cases, n, cap, &c);

    /* Without weights, so a backend with a one-pass kernel runs it (section 5's bound);
     * seeds of their own, so the cases above keep theirs. Every encoding: GQA 6:2, odd
     * D, several key tiles and query blocks, a decoding chunk at the end of the keys
     * (q_offset), f16 K/V, both mask kinds, padded or permuted views, f32 or f16 dst. */
    seed = 9500;
    for (int e = 0; e <= (int)POSENC_ATTENTION_RELBIAS; e++) {
        posenc_attention_encoding enc = (posenc_attention_encoding)e;
        c = pc_attention_case(enc, F32, 24, 6, 2, 13, 70, 2, seed++);
        c.attn.k_dtype = c.attn.v_dtype = F16;
        c.attn.causal = 1;
        c.attn.q_offset = 57;
        c.attn.mask = 1 + e % 2;
        c.view = e % 2 ? PC_VIEW_PERMUTED : PC_VIEW_PADDED;
        if (e % 3 == 1)
            c.dtype = F16;
        if (enc == POSENC_ATTENTION_RELBIAS)
            c.relbias.causal = 1;
        finish(&c);
        add_case(cases, n, cap, &c);
    }
    /* prefill: causal, GQA 8:2, queries and keys over several blocks / tiles */
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 64, 8, 2, 77, 77, 1, seed++);
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* f16 everywhere, one head per K/V head, keys ahead of the queries (k_offset) */
    c = pc_attention_case(POSENC_ATTENTION_ALIBI, F16, 32, 3, 3, 40, 100, 1, seed++);
    c.view = PC_VIEW_PERMUTED;
    c.attn.k_offset = 3;
    c.attn.dv = 20;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* causality as a mask (ggml's KQ mask): whole key tiles hidden from every row */
    c = pc_attention_case(POSENC_ATTENTION_NONE, F32, 32, 8, 2, 100, 100, 1, seed++);
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.mask = 3;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* decode with 12 K/V heads of 8 query heads each, 2 batches: blocks of K/V heads per
     * work item, the last block short on the CPU */
    c = pc_attention_case(POSENC_ATTENTION_NONE, F32, 8, 96, 12, 1, 100, 2, seed++);
    c.attn.k_dtype = c.attn.v_dtype = F16;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* long rows: one query against 32768 keys (f16 K/V, ALiBi, causal) and 32771 keys
     * (f32, MQA 2:1, odd D) */
    c = pc_attention_case(POSENC_ATTENTION_ALIBI, F32, 64, 2, 2, 1, 32768, 1, seed++);
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.q_offset = 32767;
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_NONE, F32, 40, 2, 1, 1, 32771, 1, seed++);
    finish(&c);
    add_case(cases, n, cap, &c);

    /* RoPE in the one pass (backends that rotate k as they read it, pe_attn_fused_op.krot):
     * every pair layout, a window that starts past dim 0 and ends before the last, mscale
     * != 1 (YaRN), the backward rotation, per-batch and multi-stream positions, decode
     * (few rows: the CPU's x86 loops), prefill (many rows: the transposed tile), f16 and
     * f32 K, padded and permuted views. */
    seed = 9700;
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 40, 8, 2, 1, 300, 2, seed++);
    c.rope.n_offs = 4;
    c.rope.n_dims = 16;
    c.rope.scaling.kind = POSENC_ROPE_SCALING_YARN;
    c.rope.scaling.factor = 4.0f;
    c.rope.scaling.original_ctx = 64;
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.explicit_pos = 1;
    c.attn.q_offset = 299;
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 64, 4, 2, 70, 70, 2, seed++);
    c.rope.mode = POSENC_ROPE_NEOX;
    c.rope.n_offs = 8;
    c.rope.n_dims = 32;
    c.rope.flags = POSENC_ROPE_BACKWARD;
    c.attn.explicit_pos = 1;
    c.attn.causal = 1;
    c.view = PC_VIEW_PADDED;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 64, 6, 2, 3, 130, 2, seed++);
    c.rope.mode = POSENC_ROPE_MROPE;
    c.rope.sections[0] = 12;
    c.rope.sections[1] = 10;
    c.rope.sections[2] = 10;
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.explicit_pos = 1;
    c.attn.q_offset = 127;
    c.attn.causal = 1;
    c.view = PC_VIEW_PERMUTED;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F16, 32, 2, 1, 9, 40, 1, seed++);
    c.rope.mode = POSENC_ROPE_IMROPE;
    c.rope.sections[0] = 4;
    c.rope.sections[1] = 6;
    c.rope.sections[2] = 6;
    c.attn.explicit_pos = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 32, 4, 4, 16, 16, 1, seed++);
    c.rope.mode = POSENC_ROPE_VISION;
    c.rope.sections[0] = 8;
    c.rope.sections[1] = 8;
    c.attn.explicit_pos = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* decode as the benchmark runs it: d 128, GQA 32:8, f16 K/V, 4096 keys */
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 128, 32, 8, 1, 4096, 1, seed++);
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.q_offset = 4095;
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* windows off the kernels' vector widths: NeoX pairs 12 dims apart (not a multiple of
     * 16, 8: OpenCL rotates dim by dim), and adjacent pairs from dim 16 to dim 36 (the
     * window ends inside a vector), in decode and prefill */
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 64, 8, 2, 1, 300, 1, seed++);
    c.rope.mode = POSENC_ROPE_NEOX;
    c.rope.n_dims = 24;
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.q_offset = 299;
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 64, 4, 1, 2, 200, 1, seed++);
    c.rope.n_offs = 16;
    c.rope.n_dims = 20;
    c.attn.q_offset = 198;
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 64, 4, 1, 24, 40, 1, seed++);
    c.rope.n_offs = 16;
    c.rope.n_dims = 20;
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.q_offset = 16;
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    /* decode with head dims that OpenCL's CPU-shaped kernel reads 8 (d 40) and 4 (d 36)
     * wide, adjacent pairs from a multiple of that width to inside a vector: its vector
     * rotation at those widths */
    static const struct {
        int64_t D;
        int32_t n_offs, n_dims;
        bool kv_f16;
    } narrow[] = {{40, 8, 26, true}, {36, 4, 30, false}};
    for (size_t i = 0; i < sizeof(narrow) / sizeof(narrow[0]); i++) {
        c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, narrow[i].D, 8, 2, 1, 150, 1, seed++);
        c.rope.n_offs = narrow[i].n_offs;
        c.rope.n_dims = narrow[i].n_dims;
        if (narrow[i].kv_f16)
            c.attn.k_dtype = c.attn.v_dtype = F16;
        c.attn.q_offset = 149;
        c.attn.causal = 1;
        finish(&c);
        add_case(cases, n, cap, &c);
    }
    /* DYNAMIC_NTK and LONGROPE with seq_len 0: the call takes the length from the
     * positions, past original_ctx, so that the frequencies depend on it. Explicit per-batch
     * positions (read back: the largest + 1, up to 11 past the offsets, make_positions),
     * then the offsets (q_offset + Tq = original_ctx + 1) in decode. The reference context
     * resolves the length in the same front end, so these check the kernels with those
     * frequencies; test_attention's test_rope_seq_len_resolved checks the length itself. */
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 32, 4, 2, 12, 20, 2, seed++);
    c.rope.mode = POSENC_ROPE_NEOX;
    c.rope.scaling.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK;
    c.rope.scaling.factor = 2.0f;
    c.rope.scaling.original_ctx = 16;
    c.attn.explicit_pos = 1;
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
    static const float lr_short[16] = {1.0f,  1.02f, 1.05f, 1.1f,  1.15f, 1.2f,  1.3f,  1.4f,
                                       1.5f,  1.6f,  1.8f,  2.0f,  2.2f,  2.5f,  2.8f,  3.0f};
    static const float lr_long[16] = {1.0f,  1.1f,  1.3f,  1.6f,  2.0f,  2.6f,  3.3f,  4.2f,
                                      5.4f,  7.0f,  9.0f,  11.5f, 14.6f, 18.8f, 24.0f, 30.0f};
    c = pc_attention_case(POSENC_ATTENTION_ROPE, F32, 32, 4, 2, 1, 33, 1, seed++);
    c.rope.scaling.kind = POSENC_ROPE_SCALING_LONGROPE;
    c.rope.scaling.factor = 4.0f;
    c.rope.scaling.original_ctx = 32;
    c.rope.scaling.short_factor = lr_short;
    c.rope.scaling.long_factor = lr_long;
    c.attn.k_dtype = c.attn.v_dtype = F16;
    c.attn.q_offset = 32; /* length 33: the long factors; one less would take the short */
    c.attn.causal = 1;
    finish(&c);
    add_case(cases, n, cap, &c);
}

/* ---- images -------------------------------------------------------------------------- */

struct att_images {
    struct pc_img q, k, v, dst, w, mask, qpos, kpos, table;
};

static void free_images(struct att_images *im)
{
    struct pc_img *all[] = {&im->q, &im->k, &im->v, &im->dst, &im->w,
                             &im->mask, &im->qpos, &im->kpos, &im->table};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        free(all[i]->img);
    memset(im, 0, sizeof(*im));
}

static bool alloc_img(struct pc_img *t, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                      posenc_dtype dt, enum pc_view v)
{
    const int64_t ne[4] = {n0, n1, n2, n3};
    return pc_img_alloc(t, ne, dt, make_layout(ne, posenc_dtype_size(dt), v));
}

/* Random tokens [n0, H, T, B] in [-2, 2), drawn in generation order, then token t of the
 * image holding the content of token perm[t]. */
static bool fill_tokens(struct pc_img *t, uint64_t *rng, const int64_t *perm)
{
    const int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    double *raw = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!raw)
        return false;
    for (int64_t i = 0; i < n; i++)
        raw[i] = 4.0 * pc_rand_uniform(rng) - 2.0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    int64_t src = perm ? perm[i2] : i2;
                    pc_img_put(t, i0, i1, i2, i3,
                        raw[i0 + t->ne[0] * (i1 + t->ne[1] * (src + t->ne[2] * i3))]);
                }
    free(raw);
    return true;
}

/* Explicit positions [T, 4, B, 1] i32: stream s of token t in batch b is
 * offset + t + 5b + (s t) mod 7 (stream 0 is the plain sequence, shifted per batch). */
static bool make_positions(struct pc_img *t, int64_t T, int64_t B, int64_t offset)
{
    if (!alloc_img(t, T, N_STREAMS, B, 1, POSENC_DTYPE_I32, PC_VIEW_CONTIGUOUS))
        return false;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < N_STREAMS; s++)
            for (int64_t i = 0; i < T; i++)
                pc_img_put(t, i, s, b, 0, (double)(offset + i + 5 * b + (s * i) % 7));
    return true;
}

static bool make_images(const struct pc_case *c, const int64_t *q_perm, const int64_t *k_perm,
                        int32_t shift, struct att_images *im)
{
    memset(im, 0, sizeof(*im));
    const struct pc_attn_case *a = &c->attn;
    const int64_t D = c->ne[0], Hq = c->ne[1], Tq = c->ne[2], B = c->ne[3];
    uint64_t rng = c->seed * 0x2545f4914f6cdd1dull + 29;
    if (!alloc_img(&im->q, D, Hq, Tq, B, c->x_dtype, c->view) ||
        !alloc_img(&im->k, D, a->hk, a->tk, B, a->k_dtype, c->view) ||
        !alloc_img(&im->v, a->dv, a->hk, a->tk, B, a->v_dtype, c->view) ||
        !alloc_img(&im->dst, a->dv, Hq, Tq, B, c->dtype, c->view))
        return false;
    if (!fill_tokens(&im->q, &rng, q_perm) || !fill_tokens(&im->k, &rng, k_perm) ||
        !fill_tokens(&im->v, &rng, k_perm))
        return false;
    if (a->mask == 1) {
        /* [Tk, Tq, 1, B] f32: uniform in [-1, 1), a fifth -inf, and the last query of
         * batch 0 fully masked */
        if (!alloc_img(&im->mask, a->tk, Tq, 1, B, POSENC_DTYPE_F32, c->view))
            return false;
        for (int64_t b = 0; b < B; b++)
            for (int64_t q = 0; q < Tq; q++)
                for (int64_t k = 0; k < a->tk; k++) {
                    double r = pc_rand_uniform(&rng);
                    double v = r < 0.2 || (b == 0 && q == Tq - 1) ? -INFINITY : 2.0 * r - 1.0;
                    pc_img_put(&im->mask, k, q, 0, b, v);
                }
    } else if (a->mask == 2) {
        /* [Tk, Tq, Hq, 1] f16: -inf where (k + q + h) % 3 == 0, else in [-1, 1) */
        if (!alloc_img(&im->mask, a->tk, Tq, Hq, 1, POSENC_DTYPE_F16, c->view))
            return false;
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t q = 0; q < Tq; q++)
                for (int64_t k = 0; k < a->tk; k++) {
                    double r = pc_rand_uniform(&rng);
                    pc_img_put(&im->mask, k, q, h, 0,
                        (k + q + h) % 3 == 0 ? -INFINITY : 2.0 * r - 1.0);
                }
    }
    else if (a->mask == 3) {
        /* [Tk, Tq, 1, 1] f16, causality as a mask (ggml's KQ mask): -inf where kp > qp,
         * else -(qp - kp) / 16 (distances, as ggml's max_bias ALiBi reads them) */
        if (!alloc_img(&im->mask, a->tk, Tq, 1, 1, POSENC_DTYPE_F16, c->view))
            return false;
        for (int64_t q = 0; q < Tq; q++)
            for (int64_t k = 0; k < a->tk; k++) {
                const int64_t d = (q + a->q_offset) - (k + a->k_offset);
                pc_img_put(&im->mask, k, q, 0, 0, d < 0 ? -INFINITY : -(double)d / 16.0);
            }
    }
    if (a->explicit_pos && (!make_positions(&im->qpos, Tq, B, a->q_offset + shift) ||
                            !make_positions(&im->kpos, a->tk, B, a->k_offset + shift)))
        return false;
    if (a->encoding == POSENC_ATTENTION_LEARNED || a->encoding == POSENC_ATTENTION_RELBIAS) {
        int64_t n0 = a->encoding == POSENC_ATTENTION_LEARNED ? D : relbias_buckets(&c->relbias);
        int64_t n1 = a->encoding == POSENC_ATTENTION_LEARNED ? c->rows + shift : Hq;
        if (!alloc_img(&im->table, n0, n1, 1, 1, c->table_dtype, c->view))
            return false;
        /* the same table whatever the shift: rows past the original count are extra */
        uint64_t trng = c->seed * 0x9e3779b97f4a7c15ull + 3;
        for (int64_t i1 = 0; i1 < n1; i1++)
            for (int64_t i0 = 0; i0 < n0; i0++)
                pc_img_put(&im->table, i0, i1, 0, 0, 4.0 * pc_rand_uniform(&trng) - 2.0);
    }
    return true;
}

/* ---- running ------------------------------------------------------------------------- */

static posenc_tensor tensor_of(posenc_buffer *b, const struct pc_img *t)
{
    return view_of(b, &t->l, t->dt, t->ne);
}

/* Run on ctx. w_dt: weights dtype (F32 or F16) or -1 for none; *w_img receives the
 * weights image (malloc'd, layout w_out->l) when asked. */
static posenc_status run_on(posenc_context *ctx, const struct pc_case *c, int32_t shift,
                            const struct att_images *im, int w_dt, struct pc_img *w_out,
                            unsigned char *dst_img, char *msg, size_t msg_size)
{
    const struct pc_attn_case *a = &c->attn;
    enum { BQ, BK, BV, BD, BW, BM, BQP, BKP, BT, NB };
    posenc_buffer *buf[NB] = {0};
    const struct pc_img *imgs[NB] = {&im->q,    &im->k,    &im->v,    &im->dst,  NULL,
                                      &im->mask, &im->qpos, &im->kpos, &im->table};
    posenc_status st = POSENC_OK;
    if (w_dt >= 0) {
        if (!alloc_img(w_out, a->tk, c->ne[2], c->ne[1], c->ne[3], (posenc_dtype)w_dt,
                       c->view)) {
            snprintf(msg, msg_size, "out of host memory");
            return POSENC_ERR_OUT_OF_MEMORY;
        }
        imgs[BW] = w_out;
    }
    for (int i = 0; i < NB && st == POSENC_OK; i++)
        if (imgs[i] && imgs[i]->img)
            st = upload(ctx, imgs[i]->img, imgs[i]->l.bytes, &buf[i]);
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "setup: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
        goto done;
    }
    posenc_tensor q = tensor_of(buf[BQ], &im->q), k = tensor_of(buf[BK], &im->k);
    posenc_tensor v = tensor_of(buf[BV], &im->v), d = tensor_of(buf[BD], &im->dst);
    posenc_tensor w, mask, qp, kp, table;
    struct posenc_attention_params p;
    memset(&p, 0, sizeof(p));
    p.encoding = a->encoding;
    p.scale = a->scale;
    p.causal = a->causal;
    p.q_offset = a->q_offset + shift;
    p.k_offset = a->k_offset + shift;
    if (buf[BM]) {
        mask = tensor_of(buf[BM], &im->mask);
        p.mask = &mask;
    }
    if (buf[BQP]) {
        qp = tensor_of(buf[BQP], &im->qpos);
        kp = tensor_of(buf[BKP], &im->kpos);
        p.q_pos = &qp;
        p.k_pos = &kp;
    }
    if (buf[BT]) {
        table = tensor_of(buf[BT], &im->table);
        if (a->encoding == POSENC_ATTENTION_LEARNED)
            p.learned_table = &table;
        else
            p.relbias_table = &table;
    }
    p.sinusoidal = c->sin;
    p.rope = c->rope;
    p.alibi = c->alibi;
    p.relbias = c->relbias;
    p.flags = a->pe_on_v ? POSENC_ATTENTION_PE_ON_V : 0;
    if (buf[BW])
        w = tensor_of(buf[BW], w_out);
    st = posenc_attention(ctx, &q, &k, &v, &d, buf[BW] ? &w : NULL, &p);
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "%s: %s", posenc_status_string(st), posenc_context_last_error(ctx));
        goto done;
    }
    st = posenc_buffer_read(buf[BD], 0, dst_img, im->dst.l.bytes);
    if (st == POSENC_OK && buf[BW])
        st = posenc_buffer_read(buf[BW], 0, w_out->img, w_out->l.bytes);
    if (st != POSENC_OK)
        snprintf(msg, msg_size, "read: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
done:
    for (int i = 0; i < NB; i++)
        posenc_buffer_destroy(&buf[i]);
    return st;
}

/* ---- bounds -------------------------------------------------------------------------- */

/* Per element of an encoded input [n0, H, T, B] (packed): X^ and e_x (see the top). */
struct enc_bound {
    double *hat, *err;
};

/* The resolved encoding data the bounds need. */
struct att_host {
    double scale;
    double *freq;       /* sinusoidal [D/2] or rope [n_pairs] */
    uint8_t *stream;    /* rope [n_pairs] */
    int64_t n_pairs, n_offs;
    int pairing;        /* rope: 0 adjacent, 1 half */
    double mscale;
    double *slopes;     /* alibi [Hq] */
};

static void free_host(struct att_host *h)
{
    free(h->freq);
    free(h->stream);
    free(h->slopes);
}

/* Position of token t (batch b, stream s) of q (is_q) or k. */
static double position(const struct pc_case *c, const struct att_images *im, int is_q,
                       int32_t shift, int64_t t, int64_t s, int64_t b)
{
    if (c->attn.explicit_pos)
        return pc_img_val(is_q ? &im->qpos : &im->kpos, t, s, b, 0);
    return (double)((is_q ? c->attn.q_offset : c->attn.k_offset) + shift + t);
}

static int32_t rope_seq_len(const struct pc_case *c, const struct att_images *im, int32_t shift)
{
    if (c->rope.scaling.seq_len)
        return c->rope.scaling.seq_len;
    double mx = 0.0;
    for (int is_q = 0; is_q < 2; is_q++) {
        int64_t T = is_q ? c->ne[2] : c->attn.tk;
        int64_t B = c->attn.explicit_pos ? c->ne[3] : 1;
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < (c->attn.explicit_pos ? N_STREAMS : 1); s++)
                for (int64_t t = 0; t < T; t++) {
                    double p = position(c, im, is_q, shift, t, s, b);
                    if (p > mx)
                        mx = p;
                }
    }
    return (int32_t)floor(mx) + 1;
}

static bool make_host(const struct pc_case *c, const struct att_images *im, int32_t shift,
                      struct att_host *h)
{
    memset(h, 0, sizeof(*h));
    const int64_t D = c->ne[0], Hq = c->ne[1];
    double softmax_scale = 1.0;
    switch (c->attn.encoding) {
    case POSENC_ATTENTION_SINUSOIDAL:
        h->freq = malloc(sizeof(double) * (size_t)(D / 2 + 1));
        if (!h->freq || posenc_sinusoidal_freqs(D, &c->sin, h->freq) != POSENC_OK)
            return false;
        break;
    case POSENC_ATTENTION_ROPE: {
        struct posenc_rope_params rp = c->rope;
        rp.scaling.seq_len = rope_seq_len(c, im, shift);
        if (c->rope.scaling.kind != POSENC_ROPE_SCALING_DYNAMIC_NTK &&
            c->rope.scaling.kind != POSENC_ROPE_SCALING_LONGROPE)
            rp.scaling.seq_len = c->rope.scaling.seq_len;
        struct posenc_rope_info info;
        h->freq = malloc(sizeof(double) * (size_t)(D / 2 + 1));
        h->stream = malloc((size_t)(D / 2 + 1));
        if (!h->freq || !h->stream ||
            posenc_rope_freqs(D, &rp, h->freq, h->stream, &info) != POSENC_OK)
            return false;
        h->n_pairs = info.n_dims / 2;
        h->n_offs = c->rope.n_offs;
        h->pairing = c->rope.mode == POSENC_ROPE_NORMAL ? 0 : 1;
        h->mscale = info.mscale;
        softmax_scale = info.softmax_scale;
        break;
    }
    case POSENC_ATTENTION_ALIBI:
        h->slopes = malloc(sizeof(double) * (size_t)Hq);
        if (!h->slopes || posenc_alibi_slopes(Hq, &c->alibi, h->slopes) != POSENC_OK)
            return false;
        break;
    default:
        break;
    }
    h->scale = c->attn.scale != 0.0f ? (double)c->attn.scale : softmax_scale / sqrt((double)D);
    return true;
}

/* X^ and e_x for every element of x ([n0, H, T, B]); `is_q` picks the positions, and
 * `encoded` whether the encoding applies to this tensor at all. */
static bool enc_bounds(const struct pc_case *c, const struct att_images *im,
                       const struct att_host *h, const struct pc_img *x, int is_q, int encoded,
                       int32_t shift, struct enc_bound *out)
{
    const int64_t n0 = x->ne[0], H = x->ne[1], T = x->ne[2], B = x->ne[3];
    const int64_t n = n0 * H * T * B;
    out->hat = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    out->err = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!out->hat || !out->err)
        return false;
    const posenc_attention_encoding e = encoded ? c->attn.encoding : POSENC_ATTENTION_NONE;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t hh = 0; hh < H; hh++)
                for (int64_t i = 0; i < n0; i++) {
                    const int64_t at = i + n0 * (hh + H * (t + T * b));
                    const double xv = pc_img_val(x, i, hh, t, b);
                    double hat = fabs(xv), err = 0.0;
                    if (e == POSENC_ATTENTION_SINUSOIDAL) {
                        int64_t half = n0 / 2;
                        int64_t pair = c->sin.layout == POSENC_SIN_INTERLEAVED ? i / 2 : i % half;
                        double xs = fabs(xv * (c->sin.x_scale != 0.0f ? c->sin.x_scale : 1.0f));
                        double p = position(c, im, is_q, shift, t, 0, b);
                        hat = xs + 1.0;
                        err = pc_bound_sincos_f32(fabs(p * h->freq[pair]), xs);
                    } else if (e == POSENC_ATTENTION_LEARNED) {
                        int64_t row = (int64_t)position(c, im, is_q, shift, t, 0, b);
                        hat = fabs(xv) + fabs(pc_img_val(&im->table, i, row, 0, 0));
                        err = pc_ulp32(hat);
                    } else if (e == POSENC_ATTENTION_ROPE) {
                        int64_t j = -1, ia = 0, ib = 0, rel = i - h->n_offs;
                        if (rel >= 0 && rel < 2 * h->n_pairs) {
                            j = h->pairing == 0 ? rel / 2 : rel % h->n_pairs;
                            ia = h->n_offs + (h->pairing == 0 ? 2 * j : j);
                            ib = ia + (h->pairing == 0 ? 1 : h->n_pairs);
                        }
                        if (j >= 0) {
                            double xsum = fabs(pc_img_val(x, ia, hh, t, b)) +
                                          fabs(pc_img_val(x, ib, hh, t, b));
                            double p = position(c, im, is_q, shift, t, h->stream[j], b);
                            hat = fabs(h->mscale) * xsum;
                            err = pc_bound_rope_f32(pc_angle_err32(p * h->freq[j]),
                                                    h->mscale, xsum);
                        }
                    }
                    out->hat[at] = hat;
                    out->err[at] = err;
                }
    return true;
}

static void free_enc(struct enc_bound *e)
{
    free(e->hat);
    free(e->err);
    e->hat = e->err = NULL;
}

/*
 * The bounds of section 2-4 (top of the file), for weights p [Tk, Tq, Hq, B] (packed
 * doubles, the reference's or the run's own): w_bound (f32 weights) and o_bound (f32
 * output), packed like p and like the output [Dv, Hq, Tq, B].
 */
static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Section 5's extra relative error of each unmasked key of a row (p: the row's Tk
 * weights, eps[k] < 0 for masked keys): out[k] = 1.01 (7 n_k u + N). sorted: Tk doubles. */
static void one_pass_terms(const double *p, const double *eps, int64_t Tk, double *sorted,
                           double *out)
{
    int64_t n = 0;
    for (int64_t k = 0; k < Tk; k++)
        if (eps[k] >= 0.0)
            sorted[n++] = p[k];
    qsort(sorted, (size_t)n, sizeof(double), cmp_double);
    double N = 0.0;
    for (int64_t k = 0; k < Tk; k++) {
        out[k] = 0.0;
        if (eps[k] < 0.0)
            continue;
        /* keys with p_j >= p_k (1 - 2^-10), k itself excluded */
        const double lo = p[k] * (1.0 - 0x1p-10);
        int64_t a = 0, b = n;
        while (a < b) {
            int64_t mid = a + (b - a) / 2;
            if (sorted[mid] < lo)
                a = mid + 1;
            else
                b = mid;
        }
        out[k] = 7.0 * (double)(n - a - 1) * U32;
        N += fabs(p[k]) * out[k];
    }
    for (int64_t k = 0; k < Tk; k++)
        if (eps[k] >= 0.0)
            out[k] = 1.01 * (out[k] + N);
}

static bool attn_bounds(const struct pc_case *c, const struct att_images *im, int32_t shift,
                        const double *p, bool one_pass, double *w_bound, double *o_bound)
{
    const struct pc_attn_case *a = &c->attn;
    const int64_t D = c->ne[0], Hq = c->ne[1], Tq = c->ne[2], B = c->ne[3];
    const int64_t Tk = a->tk, Dv = a->dv, Hk = a->hk, group = Hq / Hk;
    struct att_host h;
    struct enc_bound eq = {0}, ek = {0}, ev = {0};
    double *eps = malloc(sizeof(double) * (size_t)Tk);
    double *extra = malloc(sizeof(double) * (size_t)Tk);
    double *sorted = malloc(sizeof(double) * (size_t)Tk);
    bool ok = eps && extra && sorted && make_host(c, im, shift, &h) &&
              enc_bounds(c, im, &h, &im->q, 1, 1, shift, &eq) &&
              enc_bounds(c, im, &h, &im->k, 0, 1, shift, &ek) &&
              enc_bounds(c, im, &h, &im->v, 0, a->pe_on_v, shift, &ev);
    if (!ok)
        goto done;
    const double sc = fabs(h.scale), lnT = log((double)Tk);
    for (int64_t b = 0; b < B; b++)
        for (int64_t hh = 0; hh < Hq; hh++)
            for (int64_t iq = 0; iq < Tq; iq++) {
                const int64_t qp = a->q_offset + shift + iq;
                const int64_t row = Tk * (iq + Tq * (hh + Hq * b));
                const double *qh = eq.hat + D * (hh + Hq * (iq + Tq * b));
                const double *qe = eq.err + D * (hh + Hq * (iq + Tq * b));
                double eps_max = 0.0;
                for (int64_t ik = 0; ik < Tk; ik++) {
                    const int64_t kp = a->k_offset + shift + ik;
                    double mk = 0.0;
                    if (im->mask.img)
                        mk = pc_img_val(&im->mask, ik, iq, im->mask.ne[2] == 1 ? 0 : hh,
                                 im->mask.ne[3] == 1 ? 0 : b);
                    if ((a->causal && kp > qp) || mk == -INFINITY) {
                        eps[ik] = -1.0; /* masked: exactly 0 */
                        continue;
                    }
                    const double *kh = ek.hat + D * (hh / group + Hk * (ik + Tk * b));
                    const double *ke = ek.err + D * (hh / group + Hk * (ik + Tk * b));
                    double S = 0.0, E = 0.0;
                    for (int64_t i = 0; i < D; i++) {
                        S += qh[i] * kh[i];
                        E += qe[i] * kh[i] + qh[i] * ke[i] + qe[i] * ke[i];
                    }
                    double bias = 0.0;
                    if (a->encoding == POSENC_ATTENTION_ALIBI)
                        bias = h.slopes[hh] * fabs((double)(qp - kp));
                    else if (a->encoding == POSENC_ATTENTION_RELBIAS) {
                        int32_t u = 0;
                        posenc_relbias_bucket(&c->relbias, kp - qp, &u);
                        bias = fabs(pc_img_val(&im->table, u, hh, 0, 0));
                    }
                    double ek_ = sc * ((double)(D + 2) * 1.01 * U32 * S + E) + 2.01 * U32 * bias +
                                 3.0 * U32 * (sc * S + bias + fabs(mk));
                    eps[ik] = ek_;
                    if (ek_ > eps_max)
                        eps_max = ek_;
                }
                if (one_pass)
                    one_pass_terms(p + row, eps, Tk, sorted, extra);
                for (int64_t ik = 0; ik < Tk; ik++) {
                    double pk = p[row + ik], b_ = 0.0;
                    if (eps[ik] >= 0.0) {
                        double lnp = pk > 0.0 ? fabs(log(pk)) : 0.0;
                        double R = expm1(eps[ik] + eps_max) +
                                   (6.0 * (lnp + lnT) + (double)Tk + 16.0) * U32 +
                                   (one_pass ? extra[ik] : 0.0);
                        b_ = fabs(pk) * (R + U32) * (1.0 + 4.0 * U32) + 0x1p-125;
                    }
                    w_bound[row + ik] = b_;
                }
                /* the output row (i, hh, iq, b) */
                for (int64_t i = 0; i < Dv; i++) {
                    double A = 0.0, Ep = 0.0, Ev = 0.0;
                    for (int64_t ik = 0; ik < Tk; ik++) {
                        const int64_t vat = i + Dv * (hh / group + Hk * (ik + Tk * b));
                        double pk = fabs(p[row + ik]);
                        A += pk * ev.hat[vat];
                        Ep += w_bound[row + ik] * ev.hat[vat];
                        Ev += pk * ev.err[vat];
                    }
                    o_bound[i + Dv * (hh + Hq * (iq + Tq * b))] =
                        Ep + Ev + (double)(Tk + 3) * 1.01 * U32 * A;
                }
            }
done:
    free(eps);
    free(extra);
    free(sorted);
    free_enc(&eq);
    free_enc(&ek);
    free_enc(&ev);
    if (eps && extra && sorted) /* make_host ran (or failed with everything NULL) */
        free_host(&h);
    return ok;
}

/* ---- the runner ------------------------------------------------------------------------ */


/* Bytes of `img` outside the view (ne, layout) that differ from `orig`. */
static int64_t guard_changes(const struct pc_img *t, const unsigned char *img,
                             const unsigned char *orig)
{
    size_t es = posenc_dtype_size(t->dt);
    unsigned char *mask = calloc(1, t->l.bytes);
    if (!mask)
        return 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                    memset(mask + byte_at(&t->l, i0, i1, i2, i3), 1, es);
    int64_t bad = 0;
    for (size_t i = 0; i < t->l.bytes; i++)
        if (!mask[i] && img[i] != orig[i])
            bad++;
    free(mask);
    return bad;
}

/* An image as packed doubles. */
static double *unpack(const struct pc_img *w)
{
    const int64_t n = w->ne[0] * w->ne[1] * w->ne[2] * w->ne[3];
    double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!p)
        return NULL;
    for (int64_t i3 = 0; i3 < w->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < w->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < w->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < w->ne[0]; i0++)
                    p[i0 + w->ne[0] * (i1 + w->ne[1] * (i2 + w->ne[2] * i3))] =
                        pc_img_val(w, i0, i1, i2, i3);
    return p;
}

void pc_run_attention_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                           struct pc_result *r)
{
    memset(r, 0, sizeof(*r));
    const struct pc_attn_case *a = &c->attn;
    const int64_t Hq = c->ne[1], Tq = c->ne[2], B = c->ne[3], Tk = a->tk, Dv = a->dv;
    struct att_images im;
    struct pc_img ref_w, dut_w;
    memset(&ref_w, 0, sizeof(ref_w));
    memset(&dut_w, 0, sizeof(dut_w));
    unsigned char *ref_dst = NULL, *dut_dst = NULL;
    double *p = NULL, *w_bound = NULL, *o_bound = NULL;
    char msg[256];
    if (!make_images(c, NULL, NULL, 0, &im)) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "out of host memory building the inputs");
        goto done;
    }
    ref_dst = malloc(im.dst.l.bytes);
    dut_dst = malloc(im.dst.l.bytes);
    w_bound = malloc(sizeof(double) * (size_t)(Tk * Tq * Hq * B));
    o_bound = malloc(sizeof(double) * (size_t)(Dv * Hq * Tq * B));
    if (!ref_dst || !dut_dst || !w_bound || !o_bound) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "out of host memory for the outputs");
        goto done;
    }
    posenc_status st =
        run_on(ref, c, 0, &im, POSENC_DTYPE_F32, &ref_w, ref_dst, msg, sizeof(msg));
    if (st != POSENC_OK) {
        r->status = st;
        snprintf(r->msg, sizeof(r->msg), "reference failed: %s", msg);
        goto done;
    }
    st = run_on(dut, c, 0, &im,
                a->weights ? (a->weights == 2 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32) : -1,
                &dut_w, dut_dst, msg, sizeof(msg));
    r->status = st;
    if (st != POSENC_OK) {
        snprintf(r->msg, sizeof(r->msg), "%s", msg);
        goto done;
    }
    p = unpack(&ref_w);
    /* without weights the device may have run its one-pass kernel: section 5's bound */
    if (!p || !attn_bounds(c, &im, 0, p, !a->weights, w_bound, o_bound)) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "computing the bounds failed");
        goto done;
    }
    const struct pc_img *o = &im.dst;
    for (int64_t b = 0; b < B; b++)
        for (int64_t iq = 0; iq < Tq; iq++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < Dv; i++) {
                    size_t at = byte_at(&o->l, i, h, iq, b);
                    double rv = get_val(ref_dst, at, o->dt), dv = get_val(dut_dst, at, o->dt);
                    double bound = o_bound[i + Dv * (h + Hq * (iq + Tq * b))];
                    if (o->dt == POSENC_DTYPE_F16)
                        bound = pc_bound_to_f16(bound, rv);
                    pc_compare(r, "dst", i, h, iq, b, dv, rv, bound);
                }
    if (a->weights)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t iq = 0; iq < Tq; iq++)
                    for (int64_t ik = 0; ik < Tk; ik++) {
                        int64_t at = ik + Tk * (iq + Tq * (h + Hq * b));
                        double rv = p[at], dv = pc_img_val(&dut_w, ik, iq, h, b);
                        double bound = w_bound[at];
                        if (dut_w.dt == POSENC_DTYPE_F16)
                            bound = pc_bound_to_f16(bound, rv);
                        pc_compare(r, "weights", ik, iq, h, b, dv, rv, bound);
                    }
    r->guard_bad = guard_changes(o, ref_dst, o->img) + guard_changes(o, dut_dst, o->img);
    if (a->weights) {
        /* the weights image started as poison: alloc_img's */
        unsigned char *poison = malloc(dut_w.l.bytes);
        if (poison) {
            memset(poison, (int)PC_POISON, dut_w.l.bytes);
            r->guard_bad += guard_changes(&dut_w, dut_w.img, poison);
            free(poison);
        }
    }
    if (r->guard_bad && r->n_bad == 0)
        snprintf(r->msg, sizeof(r->msg), "%lld bytes outside the output views were changed",
                 (long long)r->guard_bad);
    r->pass = r->n_bad == 0 && r->guard_bad == 0;
done:
    free(ref_dst);
    free(dut_dst);
    free(p);
    free(w_bound);
    free(o_bound);
    free(ref_w.img);
    free(dut_w.img);
    free_images(&im);
}

/* ---- pc_attn_eval ---------------------------------------------------------------------- */

void pc_attn_result_free(struct pc_attn_result *r)
{
    free(r->w);
    free(r->w_bound);
    free(r->o);
    free(r->o_bound);
    free(r->q);
    free(r->k);
    free(r->v);
    free(r->table);
    memset(r, 0, sizeof(*r));
}

posenc_status pc_attn_eval(posenc_context *ctx, const struct pc_case *c, const int64_t *q_perm,
                           const int64_t *k_perm, int32_t shift, struct pc_attn_result *out,
                           char *msg, size_t msg_size)
{
    memset(out, 0, sizeof(*out));
    const struct pc_attn_case *a = &c->attn;
    const int64_t Hq = c->ne[1], Tq = c->ne[2], B = c->ne[3], Tk = a->tk, Dv = a->dv;
    struct att_images im;
    struct pc_img w;
    memset(&w, 0, sizeof(w));
    unsigned char *dst = NULL;
    posenc_status st = POSENC_ERR_OUT_OF_MEMORY;
    snprintf(msg, msg_size, "out of host memory");
    out->n_w = Tk * Tq * Hq * B;
    out->n_o = Dv * Hq * Tq * B;
    if (!make_images(c, q_perm, k_perm, shift, &im))
        goto done;
    dst = malloc(im.dst.l.bytes);
    out->w_bound = malloc(sizeof(double) * (size_t)out->n_w);
    out->o = malloc(sizeof(double) * (size_t)out->n_o);
    out->o_bound = malloc(sizeof(double) * (size_t)out->n_o);
    if (!dst || !out->w_bound || !out->o || !out->o_bound)
        goto done;
    st = run_on(ctx, c, shift, &im, POSENC_DTYPE_F32, &w, dst, msg, msg_size);
    if (st != POSENC_OK)
        goto done;
    st = POSENC_ERR_OUT_OF_MEMORY;
    out->w = unpack(&w);
    if (!out->w || !attn_bounds(c, &im, shift, out->w, false, out->w_bound, out->o_bound))
        goto done;
    for (int64_t b = 0; b < B; b++)
        for (int64_t iq = 0; iq < Tq; iq++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < Dv; i++) {
                    int64_t at = i + Dv * (h + Hq * (iq + Tq * b));
                    double v = get_val(dst, byte_at(&im.dst.l, i, h, iq, b), im.dst.dt);
                    out->o[at] = v;
                    if (im.dst.dt == POSENC_DTYPE_F16)
                        out->o_bound[at] = pc_bound_to_f16(out->o_bound[at], v);
                }
    if (w.dt == POSENC_DTYPE_F16)
        for (int64_t i = 0; i < out->n_w; i++)
            out->w_bound[i] = pc_bound_to_f16(out->w_bound[i], out->w[i]);
    out->q = unpack(&im.q);
    out->k = unpack(&im.k);
    out->v = unpack(&im.v);
    if (im.table.img)
        out->table = unpack(&im.table);
    if (!out->q || !out->k || !out->v || (im.table.img && !out->table))
        goto done;
    st = POSENC_OK;
    msg[0] = '\0';
done:
    if (st != POSENC_OK) {
        pc_attn_result_free(out);
    }
    free(dst);
    free(w.img);
    free_images(&im);
    return st;
}
