/*
 * cpu_attn.c - the CPU backend's one-pass attention (pe_attn_fused_op, internal.h): scores,
 * soft-capping, ALiBi / relative bias, mask, causal mask, online softmax and the weighted
 * sum of V without the logits in memory. The reference loops (backend_cpu.c, in double)
 * stay what posenc_attention runs with `weights` or POSENC_ATTENTION_UNFUSED.
 *
 * Work items: (batch, K/V head(s), heads of their group, block of queries, chunk of
 * keys). The rows of an item (up to PE_ATTN_ROWS query heads x queries reading the same
 * K/V head; for decode, where a head's rows are few, the rows of several K/V heads, each
 * tile of each head in turn so their strided rows are read together) share each tile of
 * PE_ATTN_KT keys: a K / V row is converted from f16 once per tile (F16C where the CPU has
 * it; f32 V rows with stride 1 are read in place) and used by every row while it is in
 * L1. Scores: items of PE_ATTN_ROWS_T rows or more multiply against the K tile transposed
 * (broadcast q, 16 keys per step), fewer rows take dot products against K rows as they
 * are. The next tile's rows are prefetched: on the x86 path a line or two at a time from
 * inside the score and V loops (next_tile_pf; a burst per tile stalled the loops' own
 * loads), an item's first tile at its start; elsewhere a burst per tile. Decode (few items)
 * splits the keys of a row into chunks (split-K) so that every thread has work; each chunk
 * leaves a (max, sum, acc) triple and a second pass merges them in chunk order. Causal
 * items stop at the first tile past their last query, and tiles the mask hides from every
 * row are skipped.
 *
 * On x86-64 with AVX2, FMA and F16C, items of few rows (decode) take cpu_attn_x86.c's
 * scores, softmax step and weighted sum instead: K / V rows read in place (f16 converted in
 * registers), fused multiply-adds (see there for their order); POSENC_CPU_X86=0 turns that
 * off for the process. Everything else below is common to both.
 *
 * Arithmetic, f32 (the bound is in src/check/check_attention.c, "one pass"):
 *  - q is multiplied by scale (f32) when it is loaded; a score is a dot product over D,
 *    in order (transposed tile) or in 8 lanes (i mod 8) added in a fixed order;
 *  - x = softcap * tanhf(s / softcap) (softcap > 0), + bias (ALiBi: -slope * (float)dist,
 *    dist an exact integer; relative bias: the table value), + slope_h * mask;
 *  - per tile: m' = max(m, tile max), alpha = exp(m - m'), p_j = exp(x_j - m'),
 *    l = l alpha + sum p_j, acc = acc alpha + sum p_j v_j; exp is cpu_fast.c's softmax
 *    exp (Cody-Waite + Cephes polynomial, within 2e-7 relative; 0 below -87.3);
 *  - the end: the sink term, then dst = acc / l (0 for a row with every key masked).
 * Items, tiles and chunks are fixed by the shape and the context's thread count (which
 * sets how many key chunks split-K makes), not by which thread runs what: a context gives
 * the same bits every call; contexts with other thread counts may differ in the last
 * bits of decode-shaped calls (another merge order), within the same bound.
 */
#include "cpu_fast.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Keys per tile: a tile of K and of V (d 128) is 16 KiB each in f16, 32 KiB in f32, in L2
 * together (32 keys: decode 5-7% slower; 128: prefill a third slower). */
#define PE_ATTN_KT 64
/* Rows (query heads x queries) per work item: each converted K / V tile serves this many. */
#define PE_ATTN_ROWS 64
/* Decode: split the keys until there are this many items per thread (dynamic split). One
 * long chunk per thread reads longer runs of memory, starts fewer chunks (each with a
 * burst of prefetches) and leaves fewer partials to merge than two: 32|8 heads, 4096
 * keys, f16 K/V, two threads, each call after a 64 MiB copy, alternated call by call,
 * medians of the per-call differences: d 64 -0.011 to -0.021 ms of 0.41-0.52 ms, d 128
 * -0.018 to -0.027 ms of 0.76-0.96 ms; three or four items per thread +0.01 to +0.04. */
#define PE_ATTN_ITEMS_PER_THREAD 1
/* ... but no chunk shorter than this many tiles (a chunk's partial costs Dv + 2 floats). */
#define PE_ATTN_MIN_CHUNK_TILES 8

/* 8 floats as one value (GCC / Clang vector extension): the accumulators of the inner
 * loops stay in registers (arrays of floats were kept in memory, a store per step). The
 * baseline x86-64 clone runs each as two SSE halves. */
typedef float pe_v8 __attribute__((vector_size(32)));
/* the same with the alignment of a float: loads and stores at any float address (GCC lets
 * a vector of floats access floats; the build has -fno-strict-aliasing besides) */
typedef float pe_v8u __attribute__((vector_size(32), aligned(4)));
#define v8_load(p) (*(const pe_v8u *)(const void *)(p))
#define v8_store(p, v) (*(pe_v8u *)(void *)(p) = (v))

/* exp(x) for x <= 0 (and -inf), branch-free so the loops vectorise: cpu_fast.c's
 * softmax_exp (x = n ln2 + r, Cody-Waite; Cephes' degree-6 polynomial; 2^n in the
 * exponent bits). Within 2e-7 relative on [-87.3, 0]; 0 below (the exact value is under
 * 1.2e-38 there); exp(0) = 1 exactly. */
static inline float attn_exp(float x)
{
    return pe_cpu_exp_f32(x);
}

struct attn_job {
    const struct pe_attn_fused_op *op;
    int64_t D, Dv, Hq, Hk, Tq, Tk, B, group;
    int64_t G, n_gh;     /* query heads per item, items per K/V head's group */
    int64_t QB, n_qb;    /* queries per item, query blocks */
    int64_t CK, n_kc;    /* keys per chunk (a multiple of PE_ATTN_KT), chunks per row */
    int64_t NK, n_kvb;   /* K/V heads per item (> 1: every row of their groups fits one
                          * item of few rows, decode), blocks of them */
    bool k_direct, v_direct; /* f32 with stride 1: rows read in place */
    bool x86;            /* items of few rows run cpu_attn_x86.c's loops (rows in place) */
    bool x86_rot;        /* ... and rotate k (has_krot) as they load it */
    size_t k_es, v_es;   /* bytes of an element */
    size_t k_row, v_row; /* bytes of a row (D, Dv elements; stride 1 where prefetched) */
    int64_t k_step, v_step; /* bytes from a key's row to the next key's (st[2]) */
    float *part;         /* n_kc > 1: [row][chunk] (m, l, acc[Dv]), row = h + Hq (q + Tq b) */
    size_t off_q, off_acc, off_m, off_l, off_k, off_kr, off_v, off_x, off_mk, off_o;
};

static inline int64_t at4(const struct pe_view *v, int64_t i1, int64_t i2, int64_t i3)
{
    return v->offset + i1 * v->st[1] + i2 * v->st[2] + i3 * v->st[3];
}

static inline float view_f(const struct pe_view *v, int64_t idx)
{
    float x;
    pe_cpu_load_row(v, idx, 1, &x);
    return x;
}

/* x[r][j] = q_r . k_j for nr rows of q (D floats each) and the PE_ATTN_KT keys of the tile,
 * K transposed (kT[i][j]: the keys side by side): each step i multiplies four rows' q_i
 * (broadcast) with 16 keys' k_i, 8 independent accumulators of 8 keys, no horizontal
 * sums. The sum over i runs in order, one product and one add per term. */
PE_CLONES
static void scores(const float *restrict qs, int64_t nr, int64_t D, const float *restrict kT,
                   float *restrict x)
{
    enum { KT = PE_ATTN_KT };
    for (int64_t half = 0; half < KT; half += 16) {
        int64_t r = 0;
        for (; r + 4 <= nr; r += 4) {
            const float *restrict q0 = qs + r * D;
            pe_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            for (int64_t i = 0; i < D; i++) {
                const pe_v8 k0 = v8_load(kT + i * KT + half), k1 = v8_load(kT + i * KT + half + 8);
                const float b0 = q0[i], b1 = q0[D + i], b2 = q0[2 * D + i], b3 = q0[3 * D + i];
                a0 += b0 * k0;
                c0 += b0 * k1;
                a1 += b1 * k0;
                c1 += b1 * k1;
                a2 += b2 * k0;
                c2 += b2 * k1;
                a3 += b3 * k0;
                c3 += b3 * k1;
            }
            float *xr = x + r * KT + half;
            v8_store(xr, a0);
            v8_store(xr + 8, c0);
            v8_store(xr + KT, a1);
            v8_store(xr + KT + 8, c1);
            v8_store(xr + 2 * KT, a2);
            v8_store(xr + 2 * KT + 8, c2);
            v8_store(xr + 3 * KT, a3);
            v8_store(xr + 3 * KT + 8, c3);
        }
        for (; r < nr; r++) {
            const float *restrict q0 = qs + r * D;
            pe_v8 a0 = {0}, c0 = {0};
            for (int64_t i = 0; i < D; i++) {
                const float b0 = q0[i];
                a0 += b0 * v8_load(kT + i * KT + half);
                c0 += b0 * v8_load(kT + i * KT + half + 8);
            }
            v8_store(x + r * KT + half, a0);
            v8_store(x + r * KT + half + 8, c0);
        }
    }
}

/* The same for items with few rows (decode: the query heads of one K/V head): K rows as
 * they are (krow[j], D floats), a dot product per (row, key) in 8 lanes (i mod 8) added in
 * a fixed order, four rows sharing each load of k; no transposition, which would cost more
 * than the few rows' products. D % 8 != 0: the rest in lane order too. */
PE_CLONES
static void scores_rows(const float *restrict qs, int64_t nr, int64_t D, const float *const *krow,
                        int64_t kt, float *restrict x)
{
    const int64_t D8 = D & ~(int64_t)7;
    for (int64_t j = 0; j < kt; j++) {
        const float *kr = krow[j];
        int64_t r = 0;
        for (; r + 4 <= nr; r += 4) {
            const float *q0 = qs + r * D;
            pe_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int64_t i = 0; i < D8; i += 8) {
                const pe_v8 k8 = v8_load(kr + i);
                a0 += v8_load(q0 + i) * k8;
                a1 += v8_load(q0 + D + i) * k8;
                a2 += v8_load(q0 + 2 * D + i) * k8;
                a3 += v8_load(q0 + 3 * D + i) * k8;
            }
            float t[4][8];
            v8_store(t[0], a0);
            v8_store(t[1], a1);
            v8_store(t[2], a2);
            v8_store(t[3], a3);
            for (int u = 0; u < 4; u++) {
                for (int64_t i = D8; i < D; i++)
                    t[u][i - D8] += q0[u * D + i] * kr[i];
                x[(r + u) * PE_ATTN_KT + j] = ((t[u][0] + t[u][1]) + (t[u][2] + t[u][3])) +
                                              ((t[u][4] + t[u][5]) + (t[u][6] + t[u][7]));
            }
        }
        for (; r < nr; r++) {
            const float *q0 = qs + r * D;
            pe_v8 a0 = {0};
            for (int64_t i = 0; i < D8; i += 8)
                a0 += v8_load(q0 + i) * v8_load(kr + i);
            float t[8];
            v8_store(t, a0);
            for (int64_t i = D8; i < D; i++)
                t[i - D8] += q0[i] * kr[i];
            x[r * PE_ATTN_KT + j] =
                ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
        }
    }
}

/* Items with fewer rows than this take scores_rows, the others the transposed tile. */
#define PE_ATTN_ROWS_T 16

/* Row j of the K tile (D floats) into column j of kT. */
static void k_column(float *restrict kT, const float *restrict row, int64_t D, int64_t j)
{
    for (int64_t i = 0; i < D; i++)
        kT[i * PE_ATTN_KT + j] = row[i];
}

/* x[j] -= slope * (float)(d0 - j): ALiBi's bias for keys k0 + j, d0 = qp - kp of j = 0 (an
 * int32 distance: exact in float below 2^24, as (float) of the int64 distance). */
PE_CLONES
static void alibi_tile(float *restrict x, int64_t kt, float slope, int32_t d0, int symmetric)
{
    for (int32_t j = 0; j < (int32_t)kt; j++) {
        int32_t d = d0 - j;
        if (symmetric)
            d = d < 0 ? -d : d;
        x[j] -= slope * (float)d;
    }
}

/* The online-softmax step of one row over one tile (x: the tile's kt logits, -inf for
 * masked keys; overwritten with the p_j): updates m and l and returns alpha = exp(m_old -
 * m_new), the factor acc is scaled by before the tile's p_j v_j are added; or -1 when every
 * key so far is masked (x is left as it is and acc must not change). The loops run in 8
 * lanes (j mod 8) so that they vectorise without reassociation: the max and the sum of the
 * p_j by lanes added in a fixed order. */
PE_CLONES
static float row_softmax(float *restrict x, int64_t kt, float *restrict m, float *restrict l)
{
    float mx[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                   -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t j = 0;
    for (; j + 8 <= kt; j += 8)
        for (int q = 0; q < 8; q++)
            mx[q] = x[j + q] > mx[q] ? x[j + q] : mx[q];
    for (; j < kt; j++)
        mx[0] = x[j] > mx[0] ? x[j] : mx[0];
    float mt = *m;
    for (int q = 0; q < 8; q++)
        mt = mx[q] > mt ? mx[q] : mt;
    const float mn = mt;
    if (mn == -INFINITY)
        return -1.0f; /* every key so far masked */
    const float alpha = *m == -INFINITY ? 0.0f : attn_exp(*m - mn);
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (j = 0; j + 8 <= kt; j += 8)
        for (int q = 0; q < 8; q++) {
            const float p = attn_exp(x[j + q] - mn);
            x[j + q] = p;
            s[q] += p;
        }
    for (; j < kt; j++) {
        const float p = attn_exp(x[j] - mn);
        x[j] = p;
        s[0] += p;
    }
    *l = *l * alpha + (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
    *m = mn;
    return alpha;
}

/* acc = acc alpha + sum_j p_j v_j over the tile's keys (p: row_softmax's x), acc in
 * blocks of 8 held in registers across the keys. */
PE_CLONES
static void row_accum(const float *restrict x, int64_t kt, const float *const *vrow, int64_t Dv,
                      float *restrict acc, float alpha)
{
    int64_t i = 0, j;
    for (; i + 32 <= Dv; i += 32) { /* four independent chains of 8, in registers */
        pe_v8 a0 = v8_load(acc + i), a1 = v8_load(acc + i + 8), a2 = v8_load(acc + i + 16),
              a3 = v8_load(acc + i + 24);
        if (alpha != 1.0f) {
            a0 *= alpha;
            a1 *= alpha;
            a2 *= alpha;
            a3 *= alpha;
        }
        for (j = 0; j < kt; j++) {
            const float p = x[j];
            const float *vr = vrow[j] + i;
            a0 += p * v8_load(vr);
            a1 += p * v8_load(vr + 8);
            a2 += p * v8_load(vr + 16);
            a3 += p * v8_load(vr + 24);
        }
        v8_store(acc + i, a0);
        v8_store(acc + i + 8, a1);
        v8_store(acc + i + 16, a2);
        v8_store(acc + i + 24, a3);
    }
    for (; i + 8 <= Dv; i += 8) {
        pe_v8 a0 = v8_load(acc + i);
        if (alpha != 1.0f)
            a0 *= alpha;
        for (j = 0; j < kt; j++)
            a0 += x[j] * v8_load(vrow[j] + i);
        v8_store(acc + i, a0);
    }
    for (; i < Dv; i++) {
        float a = alpha == 1.0f ? acc[i] : acc[i] * alpha;
        for (j = 0; j < kt; j++)
            a += x[j] * vrow[j][i];
        acc[i] = a;
    }
}

/* dst row (h, q, b) from a row's (m, l, acc): the sink term, then acc / l (0 when every key
 * is masked and there is no finite sink). */
static void finish_row(const struct attn_job *aj, int64_t h, int64_t q, int64_t b, float m,
                       float l, float *acc, float *out)
{
    const struct pe_attn_fused_op *op = aj->op;
    const int64_t Dv = aj->Dv;
    if (op->sinks.mem) {
        const float sink = ((const float *)op->sinks.mem)[op->sinks.offset + h * op->sinks.st[0]];
        const float mn = sink > m ? sink : m;
        if (mn != -INFINITY) {
            const float a = m == -INFINITY ? 0.0f : attn_exp(m - mn);
            l = l * a + attn_exp(sink - mn);
            for (int64_t i = 0; i < Dv; i++)
                acc[i] *= a;
            m = mn;
        }
    }
    if (m == -INFINITY) {
        for (int64_t i = 0; i < Dv; i++)
            out[i] = 0.0f;
    } else {
        for (int64_t i = 0; i < Dv; i++)
            out[i] = acc[i] / l;
    }
    pe_cpu_store_row(&op->dst, at4(&op->dst, h, q, b), Dv, out);
}

/* Whether the mask is -inf at keys [k0, k0 + kt) for every row of an item (and every row's
 * mask slope, if any, is > 0). */
static bool mask_hides_tile(const struct pe_attn_fused_op *op, const struct attn_job *aj,
                            int64_t h0, int64_t gn, int64_t q0, int64_t nr, int64_t b, int64_t k0,
                            int64_t kt)
{
    (void)aj;
    const struct pe_view *mk = &op->mask;
    for (int64_t r = 0; r < nr; r++) {
        const int64_t h = h0 + r % gn, q = q0 + r / gn;
        if (op->mask_slopes_f32 && !(op->mask_slopes_f32[h] > 0.0f))
            return false;
        const int64_t mi = at4(mk, q, h, b) + k0 * mk->st[0];
        if (mk->dtype == POSENC_DTYPE_F16) {
            const uint16_t *p = (const uint16_t *)mk->mem + mi;
            for (int64_t j = 0; j < kt; j++)
                if (p[j * mk->st[0]] != 0xfc00u)
                    return false;
        } else {
            const float *p = (const float *)mk->mem + mi;
            for (int64_t j = 0; j < kt; j++)
                if (p[j * mk->st[0]] != -INFINITY)
                    return false;
        }
    }
    return true;
}

#ifdef PE_ATTN_X86
/* The next tile's lines for K/V head kl of an item's nk (from kvh0), keys [k1, k1 + nt);
 * kp, vp: this head's first row of them. Two layouts give ranges of memory to walk forwards:
 *  - the nk heads' rows of those keys make one dense block (heads inside a key, the usual
 *    [D, H, T] layout): head kl takes the kl-th nk-th of the block's lines, in address
 *    order, so that the item, head after head, requests the block from its start to its end;
 *  - the head's rows are adjacent: those rows, in order.
 * Otherwise false (the caller prefetches the rows itself). Measured at d 128, 8 heads, from
 * memory: the rows of one head, 2 KiB apart, prefetched a tile at a time read 13-15 GB/s
 * on two cores; the block walked forwards a line at a time among the work, 19-20 GB/s.
 * From 2026-12-03 to 12-05 the block was walked in 4 parts at once (a line of each in
 * turn), measured then after a 64 MiB copy that left K and V partly in the L3. With K and
 * V from memory and the pool awake (a 640 MiB read sweep, then a 1 MiB copy, as posenc
 * bench times it; the Zen 4 host, 32|8 heads, f16, the two alternated call by call in one
 * process, medians, three runs, 2026-12-05) address order is faster: d 64 1 x 4096
 * 327-333 against 350-361 us, d 128 632-709 against 659-724 us; 1 x 32768 d 64 4.11
 * against 4.46 ms, d 128 4.86 against 5.00; back to back (K and V in the L3) 340 against
 * 351 and 531 against 554 us. */
static bool next_tile_pf(const struct attn_job *aj, const char *kp, const char *vp, int64_t nt,
                         int64_t nk, int64_t kl, int64_t kvh0, int64_t k1, int64_t b,
                         struct pe_attn_x86_pf *pf)
{
    const struct pe_view *kv = &aj->op->k, *vv = &aj->op->v;
    const int64_t kr = (int64_t)aj->k_row, vr = (int64_t)aj->v_row;
    if (aj->k_step == kr && aj->v_step == vr) { /* the lines [kp, kp + nt kr) touches */
        const char *ka = (const char *)((uintptr_t)kp & ~(uintptr_t)63);
        const char *va = (const char *)((uintptr_t)vp & ~(uintptr_t)63);
        pf->k = (struct pe_attn_x86_pf_stream){ka, 0, (kp + nt * kr - ka + 63) / 64};
        pf->v = (struct pe_attn_x86_pf_stream){va, 0, (vp + nt * vr - va + 63) / 64};
        return true;
    }
    if (nk < 2 || kv->st[1] <= 0 || vv->st[1] <= 0 || kv->st[1] >= kv->st[2] ||
        vv->st[1] >= vv->st[2])
        return false;
    const char *k0 = (const char *)kv->mem + (size_t)at4(kv, kvh0, k1, b) * aj->k_es;
    const char *v0 = (const char *)vv->mem + (size_t)at4(vv, kvh0, k1, b) * aj->v_es;
    const char *k_end = (const char *)kv->mem +
                        (size_t)at4(kv, kvh0 + nk - 1, k1 + nt - 1, b) * aj->k_es + kr;
    const char *v_end = (const char *)vv->mem +
                        (size_t)at4(vv, kvh0 + nk - 1, k1 + nt - 1, b) * aj->v_es + vr;
    /* dense: at most twice the bytes the heads' rows hold (no long gaps prefetched) */
    if (k_end - k0 > 2 * nt * nk * kr || v_end - v0 > 2 * nt * nk * vr)
        return false;
    /* whole lines from the line k0 lies in */
    const char *kb = (const char *)((uintptr_t)k0 & ~(uintptr_t)63);
    const char *vb = (const char *)((uintptr_t)v0 & ~(uintptr_t)63);
    const int64_t kn = (k_end - kb + 63) / 64, vn = (v_end - vb + 63) / 64;
    pf->k = (struct pe_attn_x86_pf_stream){kb, kl * kn / nk, (kl + 1) * kn / nk};
    pf->v = (struct pe_attn_x86_pf_stream){vb, kl * vn / nk, (kl + 1) * vn / nk};
    return true;
}
#endif

/* Rows (kv's heads [h0, h0 + gn)) x (queries [q0, q0 + qn)) over keys [k_lo, k_hi). */
/* RoPE inside the pass (pe_attn_fused_op.krot): rotate the f32 row of key t, batch b, in
 * place with the key's (mscale cos, mscale sin) pairs: k'_a = k_a c - k_b s, k'_b = k_a s +
 * k_b c (two products and a sum, each rounded; the same with 8 lanes at a time). */
static void krot_row(const struct pe_attn_fused_op *op, int64_t t, int64_t b, float *restrict row)
{
    const float *tab = (const float *)op->krot.mem + at4(&op->krot, 0, t, b) + op->krot_off;
    float *restrict r = row + op->krot_off;
    const int64_t n = op->krot_pairs;
    int64_t j = 0;
    if (op->krot_adjacent) {
        /* 4 pairs per vector: c and s each duplicated over their pair, the pair swapped */
        const pe_v8 sign = {-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f};
        for (; j + 4 <= n; j += 4) {
            const pe_v8 v = v8_load(r + 2 * j), tv = v8_load(tab + 2 * j);
            const pe_v8 c = __builtin_shufflevector(tv, tv, 0, 0, 2, 2, 4, 4, 6, 6);
            const pe_v8 s = __builtin_shufflevector(tv, tv, 1, 1, 3, 3, 5, 5, 7, 7);
            const pe_v8 sw = __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
            v8_store(r + 2 * j, v * c + sw * (s * sign));
        }
        for (; j < n; j++) {
            const float x = r[2 * j], y = r[2 * j + 1], c = tab[2 * j], s = tab[2 * j + 1];
            r[2 * j] = x * c - y * s;
            r[2 * j + 1] = x * s + y * c;
        }
    } else {
        float *restrict rb = r + n;
        const float *tb = tab + n;
        for (; j + 8 <= n; j += 8) {
            const pe_v8 x = v8_load(r + j), y = v8_load(rb + j);
            const pe_v8 c = v8_load(tab + j), s = v8_load(tb + j);
            v8_store(r + j, x * c - y * s);
            v8_store(rb + j, x * s + y * c);
        }
        for (; j < n; j++) {
            const float x = r[j], y = rb[j], c = tab[j], s = tb[j];
            r[j] = x * c - y * s;
            rb[j] = x * s + y * c;
        }
    }
}

static void attn_item(const struct attn_job *aj, int64_t it, float *scratch)
{
    const struct pe_attn_fused_op *op = aj->op;
    const struct pe_view *qv = &op->q, *kv = &op->k, *vv = &op->v, *mk = &op->mask;
    const int64_t D = aj->D, Dv = aj->Dv;
    int64_t t = it;
    const int64_t kc = t % aj->n_kc;
    t /= aj->n_kc;
    const int64_t qb = t % aj->n_qb;
    t /= aj->n_qb;
    const int64_t gh = t % aj->n_gh;
    t /= aj->n_gh;
    const int64_t kvb = t % aj->n_kvb, b = t / aj->n_kvb;
    const int64_t kvh0 = kvb * aj->NK;
    const int64_t nk = aj->NK < aj->Hk - kvh0 ? aj->NK : aj->Hk - kvh0; /* K/V heads here */
    const int64_t gn = aj->G < aj->group - gh * aj->G ? aj->G : aj->group - gh * aj->G;
    const int64_t q0 = qb * aj->QB;
    const int64_t qn = aj->QB < aj->Tq - q0 ? aj->QB : aj->Tq - q0;
    /* per K/V head kvh0 + kl: rows kl nr + r, query q0 + r / gn, head h0 + r % gn */
    const int64_t nr = gn * qn;
    const int64_t k_lo = kc * aj->CK, k_hi = k_lo + aj->CK < aj->Tk ? k_lo + aj->CK : aj->Tk;

    float *qs = scratch + aj->off_q, *acc = scratch + aj->off_acc, *m = scratch + aj->off_m;
    float *l = scratch + aj->off_l, *kbuf = scratch + aj->off_k, *vbuf = scratch + aj->off_v;
    float *x = scratch + aj->off_x, *mbuf = scratch + aj->off_mk;
    const float scale = op->scale_f32;
    for (int64_t r = 0; r < nk * nr; r++) {
        const int64_t h0 = (kvh0 + r / nr) * aj->group + gh * aj->G;
        float *qr = qs + r * D;
        pe_cpu_load_row(qv, at4(qv, h0 + (r % nr) % gn, q0 + (r % nr) / gn, b), D, qr);
        for (int64_t i = 0; i < D; i++)
            qr[i] *= scale;
        m[r] = -INFINITY;
        l[r] = 0.0f;
        memset(acc + r * Dv, 0, (size_t)Dv * sizeof(float));
    }
    /* the last query's position: causal rows see no key past it */
    const int64_t qp_last = op->q_offset + q0 + qn - 1;
    const int64_t ap_last = op->alibi.q_offset + q0 + qn - 1;
    const float *vrow[PE_ATTN_KT], *krow[PE_ATTN_KT];
    float *krow_tmp = scratch + aj->off_kr;
    const bool transposed = nr >= PE_ATTN_ROWS_T;
    /* items of few rows on x86 with AVX2 + FMA + F16C: rows in place, fused loops */
    const bool x86 = aj->x86 && !transposed;
#ifdef PE_ATTN_X86
    int64_t live[PE_ATTN_ROWS_T];
    float alphas[PE_ATTN_ROWS_T];
    /* the first tile: nothing runs before it to hide its loads behind, but requested in
     * address order at once its lines come in faster than the first head's loads would
     * bring them (a head's rows are strided) */
    if (x86 && k_lo < k_hi) {
        const int64_t nt = PE_ATTN_KT < k_hi - k_lo ? PE_ATTN_KT : k_hi - k_lo;
        for (int64_t kl = 0; kl < nk; kl++) {
            const int64_t kvh = kvh0 + kl;
            struct pe_attn_x86_pf pf;
            if (!next_tile_pf(aj, (const char *)kv->mem + (size_t)at4(kv, kvh, k_lo, b) * aj->k_es,
                              (const char *)vv->mem + (size_t)at4(vv, kvh, k_lo, b) * aj->v_es,
                              nt, nk, kl, kvh0, k_lo, b, &pf))
                break;
            pe_attn_x86_prefetch(&pf.k);
            pe_attn_x86_prefetch(&pf.v);
        }
    }
#endif
    for (int64_t k0 = k_lo; k0 < k_hi; k0 += PE_ATTN_KT) {
        const int64_t kt = PE_ATTN_KT < k_hi - k0 ? PE_ATTN_KT : k_hi - k0;
        if (op->causal && k0 + op->k_offset > qp_last)
            break;
        if (op->has_alibi && op->alibi.causal && k0 + op->alibi.k_offset > ap_last)
            break;
        /* the K/V heads of the item one after the other, each tile of each in turn, so
         * that decode items reading every head read the memory in order */
        for (int64_t kl = 0; kl < nk; kl++) {
            const int64_t kvh = kvh0 + kl, h0 = kvh * aj->group + gh * aj->G;
            float *qsk = qs + kl * nr * D, *acck = acc + kl * nr * Dv, *mkl = m + kl * nr,
                  *lkl = l + kl * nr;
            /* a tile the mask hides from every row (causal masks, padding) is skipped:
             * slope * -inf = -inf for a positive (or no) slope, so every x_j is -inf */
            if (mk->mem && mask_hides_tile(op, aj, h0, gn, q0, nr, b, k0, kt))
                continue;
            /* the next tile's rows, a tile ahead: rows of one K/V head are strided (the other
             * heads lie between them), which the hardware prefetchers follow poorly */
#ifdef PE_ATTN_X86
            struct pe_attn_x86_pf pf = {{NULL, 0, 0}, {NULL, 0, 0}};
#endif
            if (k0 + PE_ATTN_KT < k_hi) {
                const int64_t nt = PE_ATTN_KT < k_hi - k0 - PE_ATTN_KT ? PE_ATTN_KT
                                                                        : k_hi - k0 - PE_ATTN_KT;
                const char *kp = (const char *)kv->mem +
                                 (size_t)at4(kv, kvh, k0 + PE_ATTN_KT, b) * aj->k_es;
                const char *vp = (const char *)vv->mem +
                                 (size_t)at4(vv, kvh, k0 + PE_ATTN_KT, b) * aj->v_es;
                bool spread = false; /* x86: spread over the loops, not issued here */
#ifdef PE_ATTN_X86
                if (x86)
                    spread = next_tile_pf(aj, kp, vp, nt, nk, kl, kvh0, k0 + PE_ATTN_KT, b, &pf);
#endif
                for (int64_t j = 0; !spread && j < nt; j++, kp += aj->k_step, vp += aj->v_step) {
                    for (size_t o = 0; o < aj->k_row; o += 64)
                        __builtin_prefetch(kp + o, 0, 1);
                    for (size_t o = 0; o < aj->v_row; o += 64)
                        __builtin_prefetch(vp + o, 0, 1);
                }
            }
#ifdef PE_ATTN_X86
            const char *kbase = (const char *)kv->mem + (size_t)at4(kv, kvh, k0, b) * aj->k_es;
            const char *vbase = (const char *)vv->mem + (size_t)at4(vv, kvh, k0, b) * aj->v_es;
#endif
            for (int64_t j = 0; j < (x86 ? 0 : kt); j++) { /* x86 reads the rows in place */
                const int64_t ki = at4(kv, kvh, k0 + j, b), vi = at4(vv, kvh, k0 + j, b);
                if (!transposed) {
                    if (aj->k_direct) {
                        krow[j] = (const float *)kv->mem + ki;
                    } else {
                        pe_cpu_load_row(kv, ki, D, kbuf + j * D);
                        if (op->has_krot)
                            krot_row(op, k0 + j, b, kbuf + j * D);
                        krow[j] = kbuf + j * D;
                    }
                } else if (aj->k_direct) {
                    k_column(kbuf, (const float *)kv->mem + ki, D, j);
                } else {
                    pe_cpu_load_row(kv, ki, D, krow_tmp);
                    if (op->has_krot)
                        krot_row(op, k0 + j, b, krow_tmp);
                    k_column(kbuf, krow_tmp, D, j);
                }
                if (aj->v_direct) {
                    vrow[j] = (const float *)vv->mem + vi;
                } else {
                    pe_cpu_load_row(vv, vi, Dv, vbuf + j * Dv);
                    vrow[j] = vbuf + j * Dv;
                }
            }
            if (transposed) {
                for (int64_t j = kt; j < PE_ATTN_KT; j++) /* a short last tile: zero columns */
                    for (int64_t i = 0; i < D; i++)
                        kbuf[i * PE_ATTN_KT + j] = 0.0f;
                scores(qsk, nr, D, kbuf, x);
            } else if (x86 && aj->x86_rot) {
#ifdef PE_ATTN_X86
                /* rotated as the loops load them */
                const struct pe_attn_x86_rot rot = {
                    (const float *)op->krot.mem + at4(&op->krot, 0, k0, b), op->krot.st[2],
                    op->krot_off, op->krot_pairs, op->krot_adjacent};
                pe_attn_x86_scores_rot(qsk, nr, D, kbase, aj->k_step,
                                       kv->dtype == POSENC_DTYPE_F16, kt, x, PE_ATTN_KT, &pf.k,
                                       &rot);
#endif
            } else if (x86 && op->has_krot) {
                /* the rows rotated into kbuf (f32), read there */
                for (int64_t j = 0; j < kt; j++) {
                    pe_cpu_load_row(kv, at4(kv, kvh, k0 + j, b), D, kbuf + j * D);
                    krot_row(op, k0 + j, b, kbuf + j * D);
                }
#ifdef PE_ATTN_X86
                pe_attn_x86_scores(qsk, nr, D, kbuf, D * (int64_t)sizeof(float), false, kt, x,
                                   PE_ATTN_KT, &pf.k);
#endif
            } else if (x86) {
#ifdef PE_ATTN_X86
                pe_attn_x86_scores(qsk, nr, D, kbase, aj->k_step, kv->dtype == POSENC_DTYPE_F16,
                                   kt, x, PE_ATTN_KT, &pf.k);
#endif
            } else {
                scores_rows(qsk, nr, D, krow, kt, x);
            }
#ifdef PE_ATTN_X86
            int64_t n_live = 0; /* x86: the rows with a key seen so far, for one V pass */
#endif
            /* x86: the rows the softmax step takes four at a time get ALiBi's bias in its
             * max pass, where no relative bias or mask comes after it to change the order
             * of the adds and every row's distance to key k0 is an int32 (the rows'
             * queries are q0 .. q0 + qn - 1): rows r < n_defer, each its slope and that
             * distance */
            int64_t n_defer = 0;
            float ab_slope[PE_ATTN_ROWS_T];
            int32_t ab_d0[PE_ATTN_ROWS_T];
#ifdef PE_ATTN_X86
            if (x86 && op->has_alibi && !op->has_relbias && !mk->mem) {
                const int64_t d_lo = (q0 + op->alibi.q_offset) - (k0 + op->alibi.k_offset);
                if (d_lo > -(int64_t)INT32_MAX / 2 && d_lo + qn - 1 < (int64_t)INT32_MAX / 2)
                    n_defer = pe_attn_x86_rows4(nr, kt);
            }
#endif
            for (int64_t r = 0, rg = 0, rq = 0; r < nr; r++) {
                /* row r: head h0 + r % gn, query q0 + r / gn (counted, not divided) */
                const int64_t h = h0 + rg, q = q0 + rq;
                if (++rg == gn) {
                    rg = 0;
                    rq++;
                }
                float *xr = x + r * PE_ATTN_KT;
                if (op->softcap > 0.0f) {
                    const float c = op->softcap;
                    for (int64_t j = 0; j < kt; j++)
                        xr[j] = c * tanhf(xr[j] / c);
                }
                if (op->has_alibi) {
                    const struct pe_alibi_op *a = &op->alibi;
                    const int64_t d0 = (q + a->q_offset) - (k0 + a->k_offset);
                    if (r < n_defer) {
                        /* added by the softmax step, after the -inf below (-inf stays) */
                        ab_slope[r] = a->slopes_f32[h];
                        ab_d0[r] = (int32_t)d0;
                    } else if (d0 > -(int64_t)INT32_MAX / 2 && d0 < (int64_t)INT32_MAX / 2) {
                        alibi_tile(xr, kt, a->slopes_f32[h], (int32_t)d0, a->symmetric);
                    } else {
                        for (int64_t j = 0; j < kt; j++) {
                            int64_t d = d0 - j;
                            if (a->symmetric && d < 0)
                                d = -d;
                            xr[j] -= a->slopes_f32[h] * (float)d;
                        }
                    }
                    if (a->causal)
                        for (int64_t j = d0 + 1 > 0 ? d0 + 1 : 0; j < kt; j++)
                            xr[j] = -INFINITY;
                }
                if (op->has_relbias) {
                    const struct pe_relbias_op *rb = &op->relbias;
                    const int64_t rel0 = (k0 + rb->k_offset) - (q + rb->q_offset) - rb->rel_min;
                    for (int64_t j = 0; j < kt; j++) {
                        const int64_t u = rb->bucket[rel0 + j];
                        xr[j] += view_f(&rb->table, rb->table.offset + u * rb->table.st[0] +
                                                        h * rb->table.st[1]);
                    }
                }
                if (mk->mem) {
                    const int64_t mi = at4(mk, q, h, b) + k0 * mk->st[0];
                    const float *mr;
                    if (mk->dtype == POSENC_DTYPE_F32 && mk->st[0] == 1) {
                        mr = (const float *)mk->mem + mi;
                    } else {
                        pe_cpu_load_row(mk, mi, kt, mbuf);
                        mr = mbuf;
                    }
                    if (op->mask_slopes_f32) {
                        const float s = op->mask_slopes_f32[h];
                        for (int64_t j = 0; j < kt; j++)
                            xr[j] += s * mr[j];
                    } else {
                        for (int64_t j = 0; j < kt; j++)
                            xr[j] += mr[j];
                    }
                }
                if (op->causal) {
                    const int64_t last = (q + op->q_offset) - (k0 + op->k_offset); /* last j seen */
                    for (int64_t j = last + 1 > 0 ? last + 1 : 0; j < kt; j++)
                        xr[j] = -INFINITY;
                }
                if (x86)
                    continue; /* the softmax of every row at once, below */
                const float alpha = row_softmax(xr, kt, mkl + r, lkl + r);
                if (alpha < 0.0f)
                    continue; /* every key so far masked: acc stays 0 */
                row_accum(xr, kt, vrow, Dv, acck + r * Dv, alpha);
            }
#ifdef PE_ATTN_X86
            if (x86) {
                const struct pe_attn_x86_alibi ab = {ab_slope, ab_d0, op->alibi.symmetric};
                n_live = pe_attn_x86_softmax_rows(x, PE_ATTN_KT, nr, kt, mkl, lkl, alphas, live,
                                                  n_defer > 0 ? &ab : NULL);
            }
            if (n_live > 0)
                pe_attn_x86_accum(x, PE_ATTN_KT, live, n_live, alphas, kt, vbase, aj->v_step,
                                  vv->dtype == POSENC_DTYPE_F16, acck, Dv, &pf.v);
#endif
        }
    }
    for (int64_t r = 0; r < nk * nr; r++) {
        const int64_t h = (kvh0 + r / nr) * aj->group + gh * aj->G + (r % nr) % gn;
        const int64_t q = q0 + (r % nr) / gn;
        if (aj->n_kc == 1) {
            finish_row(aj, h, q, b, m[r], l[r], acc + r * Dv, scratch + aj->off_o);
        } else {
            float *p = aj->part + ((h + aj->Hq * (q + aj->Tq * b)) * aj->n_kc + kc) * (Dv + 2);
            p[0] = m[r];
            p[1] = l[r];
            memcpy(p + 2, acc + r * Dv, (size_t)Dv * sizeof(float));
        }
    }
}

static void attn_run(void *arg, int64_t begin, int64_t end, float *scratch)
{
    for (int64_t it = begin; it < end; it++)
        attn_item(arg, it, scratch);
}

/* Split-K: row it's chunks merged in chunk order, m = max m_c, l = sum l_c exp(m_c - m),
 * acc likewise, then finish_row. */
static void merge_run(void *arg, int64_t begin, int64_t end, float *scratch)
{
    const struct attn_job *aj = arg;
    const int64_t Dv = aj->Dv;
    float *acc = scratch + aj->off_acc;
    for (int64_t it = begin; it < end; it++) {
        const int64_t h = it % aj->Hq, q = (it / aj->Hq) % aj->Tq, b = it / (aj->Hq * aj->Tq);
        const float *p = aj->part + it * aj->n_kc * (Dv + 2);
        float m = -INFINITY, l = 0.0f;
        for (int64_t c = 0; c < aj->n_kc; c++)
            m = p[c * (Dv + 2)] > m ? p[c * (Dv + 2)] : m;
        memset(acc, 0, (size_t)Dv * sizeof(float));
        if (m != -INFINITY)
            for (int64_t c = 0; c < aj->n_kc; c++) {
                const float *pc = p + c * (Dv + 2);
                if (pc[0] == -INFINITY)
                    continue;
                const float a = attn_exp(pc[0] - m);
                l += pc[1] * a;
                for (int64_t i = 0; i < Dv; i++)
                    acc[i] += pc[2 + i] * a;
            }
        finish_row(aj, h, q, b, m, l, acc, scratch + aj->off_o);
    }
}

static size_t carve(size_t *used, size_t n)
{
    size_t at = *used;
    *used += (n + 15) & ~(size_t)15;
    return at;
}

posenc_status pe_cpu_fast_attn_fused(struct pe_cpu_fast *f, const struct pe_attn_fused_op *op)
{
    struct attn_job aj;
    memset(&aj, 0, sizeof(aj));
    aj.op = op;
    aj.D = op->q.ne[0];
    aj.Hq = op->q.ne[1];
    aj.Tq = op->q.ne[2];
    aj.B = op->q.ne[3];
    aj.Hk = op->k.ne[1];
    aj.Tk = op->k.ne[2];
    aj.Dv = op->v.ne[0];
    aj.group = op->group;
    aj.G = aj.group < PE_ATTN_ROWS ? aj.group : PE_ATTN_ROWS;
    aj.n_gh = (aj.group + aj.G - 1) / aj.G;
    aj.QB = PE_ATTN_ROWS / aj.G;
    if (aj.QB > aj.Tq)
        aj.QB = aj.Tq;
    if (aj.QB < 1)
        aj.QB = 1;
    aj.n_qb = (aj.Tq + aj.QB - 1) / aj.QB;
    aj.k_direct = op->k.dtype == POSENC_DTYPE_F32 && op->k.st[0] == 1 && !op->has_krot;
    aj.v_direct = op->v.dtype == POSENC_DTYPE_F32 && op->v.st[0] == 1;
    aj.k_es = posenc_dtype_size(op->k.dtype);
    aj.v_es = posenc_dtype_size(op->v.dtype);
    aj.k_row = (size_t)aj.D * aj.k_es;
    aj.v_row = (size_t)aj.Dv * aj.v_es;
    aj.k_step = op->k.st[2] * (int64_t)aj.k_es;
    aj.v_step = op->v.st[2] * (int64_t)aj.v_es;
#ifdef PE_ATTN_X86
    /* rows read in place: f16 or f32 with stride 1, whole vectors of 8 */
    aj.x86 = pe_attn_x86_available() && aj.D % 8 == 0 && aj.Dv % 8 == 0 &&
             (op->k.dtype == POSENC_DTYPE_F16 || op->k.dtype == POSENC_DTYPE_F32) &&
             (op->v.dtype == POSENC_DTYPE_F16 || op->v.dtype == POSENC_DTYPE_F32) &&
             op->k.st[0] == 1 && op->v.st[0] == 1;
    aj.x86_rot = aj.x86 && op->has_krot &&
                 pe_attn_x86_rot_fits(aj.D, op->krot_off, op->krot_pairs, op->krot_adjacent);
#endif
    const int64_t n_rows = aj.B * aj.Hq * aj.Tq;
    if (n_rows == 0)
        return POSENC_OK;

    /* split-K when the items without it leave threads idle */
    /* decode-like shapes (a K/V head's rows are few): an item takes several K/V heads, so
     * that it reads their rows together (rows of one head are strided by the others) */
    aj.NK = 1;
    if (aj.n_gh == 1 && aj.n_qb == 1 && aj.group * aj.Tq < PE_ATTN_ROWS_T) {
        aj.NK = PE_ATTN_ROWS / (aj.group * aj.Tq);
        if (aj.NK > aj.Hk)
            aj.NK = aj.Hk;
    }
    aj.n_kvb = (aj.Hk + aj.NK - 1) / aj.NK;
    const int64_t base = aj.B * aj.n_kvb * aj.n_gh * aj.n_qb;
    const int64_t n_tiles = (aj.Tk + PE_ATTN_KT - 1) / PE_ATTN_KT;
    const int64_t want = (int64_t)pe_cpu_fast_threads(f) * PE_ATTN_ITEMS_PER_THREAD;
    int64_t n_kc = 1;
    if (base < want && n_tiles >= 2 * PE_ATTN_MIN_CHUNK_TILES) {
        n_kc = (want + base - 1) / base;
        if (n_kc > n_tiles / PE_ATTN_MIN_CHUNK_TILES)
            n_kc = n_tiles / PE_ATTN_MIN_CHUNK_TILES;
    }
    const int64_t tiles_per_chunk = (n_tiles + n_kc - 1) / n_kc;
    aj.CK = tiles_per_chunk * PE_ATTN_KT;
    aj.n_kc = n_tiles > 0 ? (aj.Tk + aj.CK - 1) / aj.CK : 1;
    if (aj.n_kc < 1)
        aj.n_kc = 1;

    int64_t R = aj.G * aj.QB;
    if (aj.NK * aj.group * aj.Tq > R)
        R = aj.NK * aj.group * aj.Tq;
    size_t used = 0;
    aj.off_q = carve(&used, (size_t)(R * aj.D));
    aj.off_acc = carve(&used, (size_t)((R > 1 ? R : 1) * aj.Dv));
    aj.off_m = carve(&used, (size_t)R);
    aj.off_l = carve(&used, (size_t)R);
    aj.off_k = carve(&used, (size_t)(PE_ATTN_KT * aj.D));
    aj.off_kr = carve(&used, (size_t)aj.D);
    aj.off_v = carve(&used, (size_t)(PE_ATTN_KT * aj.Dv));
    aj.off_x = carve(&used, (size_t)(R * PE_ATTN_KT));
    aj.off_mk = carve(&used, PE_ATTN_KT);
    aj.off_o = carve(&used, (size_t)aj.Dv);
    PE_RETURN_IF_ERROR(pe_cpu_fast_reserve(f, used));
    if (aj.n_kc > 1) {
        const size_t n = (size_t)n_rows * (size_t)aj.n_kc * (size_t)(aj.Dv + 2);
        aj.part = malloc(n * sizeof(float));
        if (!aj.part)
            return pe_error(pe_cpu_fast_context(f), POSENC_ERR_OUT_OF_MEMORY,
                            "out of host memory for %zu bytes of attention partials",
                            n * sizeof(float));
    }
    /* the work in bytes-equivalent for the thread count: K and V read per item row block,
     * plus 4 bytes per multiply-add */
    const double kv_bytes = (double)aj.Tk * (double)aj.Hk * (double)aj.B *
                            (double)(aj.D * posenc_dtype_size(op->k.dtype) +
                                     aj.Dv * posenc_dtype_size(op->v.dtype));
    const double work = kv_bytes * (double)(aj.n_gh * aj.n_qb) +
                        4.0 * (double)n_rows * (double)aj.Tk * (double)(aj.D + aj.Dv);
    pe_cpu_fast_parallel(f, attn_run, &aj, base * aj.n_kc, work);
    if (aj.n_kc > 1) {
        pe_cpu_fast_parallel(f, merge_run, &aj, n_rows,
                             (double)n_rows * (double)aj.n_kc * (double)(aj.Dv + 2) * 4.0);
        free(aj.part);
    }
    return POSENC_OK;
}
