/*
 * ops_flash_vk.c - the Vulkan host side of posenc_attention in one pass (vtable
 * attn_fused; the math is internal.h's struct pe_attn_fused_op): shaders/flash_attn.comp
 * and, for split-K, shaders/flash_merge.comp (their layout: shaders/flash_params.glsl).
 *
 * An invocation owns R rows (query, head) of one K/V head and keeps their q and
 * accumulators in registers, so each K / V element it loads serves R rows (GQA: the
 * group's heads share one read). The grid is one of two (see flash_attn.comp):
 *   split-K  few rows (decode): an invocation per (row block, key split); with more than
 *            one split the partial (m, l, acc) rows go to a temporary buffer and a second
 *            dispatch (flash_merge.comp) merges them into dst. Splits of at least
 *            PE_FA_MIN_KEYS keys, enough of them for PE_FA_TARGET invocations.
 *   tile     many rows (prefill): a work-group per WG row blocks of one (K/V head,
 *            batch), key tiles of BK keys staged in shared memory.
 * The work-group size, R, the head dims, BK and every dtype / feature are specialization
 * constants, chosen from the device's limits (maxComputeWorkGroupInvocations,
 * maxComputeWorkGroupSize[0], maxComputeSharedMemorySize): at most 64 invocations, and a
 * tile that fits the shared memory (16 KiB gives 8 keys at d 256, 16 at d 128).
 *
 * RoPE on k (op->has_krot): the keys' table takes binding 4 and the words P_T (a call has
 * RoPE or a relative bias, never both); FA_KROT / FA_KR_ADJ and the window's KR_OFF / KR_P
 * (specialization constants 6, 7) make the shader rotate each key as it loads it.
 *
 * The parameters (seven views' offsets and strides and the sizes) do not fit 128 bytes of
 * push constants: they go with the ALiBi slopes, the mask slopes and the bucket list in
 * a host table (pe_vk_table), uploaded for each of the two dispatches.
 *
 * The partials of a key split: in posenc's own batches one of the backend's two buffers
 * (be->fa_part, taken in turn and grown on demand, so a decode call allocates nothing once
 * they are large enough, and a call's partials need no barrier after the previous call's
 * merge); while recording into the application's command buffer, a posenc buffer made and
 * destroyed by the call (posenc_buffer_destroy is ordered after the recording's use).
 *
 * Reliability (a failing call writes nothing): the pipelines, the first table and the
 * partials are all acquired before the first dispatch; with a merge, the first dispatch
 * writes only the partials, so the merge's table upload may still fail cleanly.
 */
#include "vk_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t spv_flash_attn[] =
#include "shaders/flash_attn.spv.h"
    ;
static const uint32_t spv_flash_merge[] =
#include "shaders/flash_merge.spv.h"
    ;

/* shaders/flash_params.glsl: specialization constant ids, FLAGS bits, parameter words.
 * Change both together. */
enum { FA_SPEC_WG, FA_SPEC_D, FA_SPEC_DV, FA_SPEC_R, FA_SPEC_BK, FA_SPEC_FLAGS, FA_SPEC_KR_OFF,
       FA_SPEC_KR_P, FA_N_SPEC };
enum {
    FA_Q16 = 0x1, FA_K16 = 0x2, FA_V16 = 0x4, FA_O16 = 0x8, FA_M16 = 0x10, FA_T16 = 0x20,
    FA_MASK = 0x40, FA_ALIBI = 0x80, FA_ALIBI_SYM = 0x100, FA_ALIBI_CAUSAL = 0x200,
    FA_RELB = 0x400, FA_SOFTCAP = 0x800, FA_CAUSAL = 0x1000, FA_SINKS = 0x2000,
    FA_MSLOPES = 0x4000, FA_TILE = 0x8000, FA_PARTIAL = 0x10000, FA_PAIRS = 0x20000,
    FA_KVEC = 0x40000, FA_VVEC = 0x80000, FA_KROT = 0x100000, FA_KR_ADJ = 0x200000,
    FA_TVEC = 0x400000,
};
enum {
    P_Q = 0, P_K = 5, P_V = 10, P_O = 15, P_M = 20, P_T = 25, P_S = 28, P_TQ = 30, P_TK = 31,
    P_HK = 32, P_GROUP = 33, P_NF = 34, P_RB = 35, P_NITEMS = 36, P_NS = 37, P_KS = 38,
    P_QOFF = 39, P_KOFF = 40, P_SCALE = 41, P_CAP = 42, P_RELMIN = 43, P_NREL = 44,
    P_SLOPES = 45, P_MSL = 46, P_BUCKET = 47, P_NROWS = 48, P_TILES = 49, P_WORDS = 50,
};
_Static_assert((int)FA_N_SPEC <= (int)PE_VK_MAX_SPEC, "specialization constants");

enum { PE_FA_KB = 4 };              /* keys per block in the shader */
enum { PE_FA_MAX_WG = 64 };         /* invocations per work-group at most */
enum { PE_FA_MIN_KEYS = 64 };       /* keys per split at least (q loads, partial writes) */
enum { PE_FA_TARGET = 2048 };       /* split-K: invocations to aim for (GPUs; see split_target) */
enum { PE_FA_CPU_GROUPS = 64 };     /* work-groups per dispatch on CPU implementations */
enum { PE_FA_REGS = 1024 };         /* floats of q and accumulators per invocation */

static int f16(const struct pe_view *v)
{
    return v->dtype == POSENC_DTYPE_F16;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static posenc_status too_big(struct pe_vk_backend *be, const char *what, int64_t a, int64_t b)
{
    return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                    "vulkan attention (one pass): %s (%" PRId64 ", %" PRId64
                    ") do not fit this backend's 32-bit indexing",
                    what, a, b);
}

/* A view's offset and strides into words w[0..n] (offset, st0..st(n-1)). */
static posenc_status put(struct pe_vk_backend *be, const struct pe_view *v, int n,
                         const int64_t *ne, uint32_t *w, const char *name,
                         struct pe_vk_bind *bind)
{
    uint32_t *st[4] = {&w[1], &w[2], &w[3], &w[4]};
    return pe_vk_put_view(be, "attention (one pass)", v, n, ne, &w[0], st, name, bind);
}

/* Whether rows (dim 0) of a view with words w (off, st0..st3) can be read as aligned
 * vectors of 8 elements: unit stride, dims a multiple of 8, every row start a multiple of
 * 8 elements (f16: one uvec4) or 4 (f32: two vec4). */
static bool vec_ok(const struct pe_view *v, const uint32_t *w, int64_t n)
{
    const uint32_t a = f16(v) ? 7u : 3u;
    return n % 8 == 0 && (n == 1 || w[1] == 1u) && ((w[0] | w[2] | w[3] | w[4]) & a) == 0;
}

/* Split-K: the invocations to aim for. GPUs: PE_FA_TARGET, enough to fill them. CPU
 * implementations run a work-group on one thread, its invocations in the lanes of SIMD
 * registers (lavapipe): one work-group per host CPU (lavapipe's default thread count),
 * each walking long key ranges, with fewer partials to write and merge. lavapipe, 2 CPUs,
 * 32|8 heads, 4096 f16 keys, ALiBi, each call after a 64 MiB copy, alternated call by
 * call, medians of per-call differences against PE_FA_TARGET (64-key splits): one
 * work-group per CPU (256-key splits) d 64 -0.50 / -0.83 ms of 4.0-5.5 ms, d 128 -1.2 /
 * -2.6 ms of 6.6-10.9 ms; two per CPU +0.46 / +0.49 (d 64) and +0.83 / +0.97 (d 128)
 * against one; fewer work-groups than CPUs +0.9 to +3.6 ms. */
static int64_t split_target(const struct pe_vk_backend *be, uint32_t wg)
{
    if (be->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU)
        return PE_FA_TARGET;
    return (int64_t)wg * (int64_t)pe_host_cpus();
}

/* Whether the pass takes its GPU shape: the FA_TILE grid for many rows (prefill) and k
 * rotated as it is loaded (FA_KROT). On GPUs yes, on CPU implementations (lavapipe) no:
 * the split-K grid for every shape, and RoPE on a rotated copy of K made before the pass
 * (ops_attention.c) unless one invocation takes all of a K/V head's rows (decode; see
 * pe_vk_attn_krot). POSENC_VK_FLASH=gpu|cpu forces either on any device, so that tests
 * run both on one device. Why not on lavapipe, measured there (docs/performance.md,
 * "Vulkan on CPU devices: no tiles, no rotation in the pass"):
 *  - compile time: lavapipe compiles each variant at its first dispatch, with LLVM, as a
 *    coroutine (barriers are its suspend points), and most of it goes to building the
 *    coroutine frame (perf: llvm::coro::buildCoroutineFrame, 45-54%), which grows with
 *    the unrolled code. Tile variants took 9-200 s each with empty caches; rotating k in
 *    the split-K loads added 12-16 s to a d 64 variant's 18-24 s.
 *  - speed: 512 x 512 prefill, 32|8 heads: d 128 333-345 ms split-K against 534-569 ms
 *    tiled, d 64 156-162 against 244-264 ms (a CPU's caches give the reuse the shared
 *    tile is for); decode with RoPE 4-10% slower rotating in the pass than on K' (before
 *    the table was read as vec4s; since then faster, pe_vk_attn_krot). */
static bool gpu_shaped(struct pe_vk_backend *be)
{
    if (be->fa_shape == 0) /* once per backend, not on every call */
        be->fa_shape = pe_cpu_shaped("POSENC_VK_FLASH",
                                     be->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) ? 1 : 2;
    return be->fa_shape == 2;
}

/* Rows (query, head) per invocation for head dims D, Dv and NF rows per K/V head: its
 * registers hold R * (DP + DVP) floats, at most PE_FA_REGS (past that the unrolled code
 * spills and lavapipe's compile time grows steeply: d 256 with R = 4 took minutes.
 * Variants with a mask compile in 30-80 s at d >= 128 whatever R is (halving it did not
 * help): not understood yet). */
static int64_t rows_per_invocation(int64_t D, int64_t Dv, int64_t NF)
{
    const int64_t DP = (D + 7) / 8 * 8, DVP = (Dv + 7) / 8 * 8;
    int64_t R = PE_FA_REGS / (DP + DVP);
    R = R > 4 ? 4 : R < 1 ? 1 : R;
    return R > NF ? NF : R;
}

/* flash_attn.comp rotates k itself (FA_KROT), in the split-K loads and the shared tile:
 * in the GPU shape always; in the CPU shape (lavapipe) when one invocation takes all the
 * rows of a K/V head (decode), so that each key is rotated once per K/V head as in K'.
 * lavapipe, 32|8 heads, 1 x 4096 f16 keys, NORMAL pairs (docs/performance.md, "Later
 * (2026-12-05): RoPE in the pass on lavapipe, for decode"): d 128 7.3-7.4 ms in the pass
 * against 11.9-13.0 with K', d 64 3.9-4.0 against 5.0-5.1. With more rows K' is made once
 * and the pass reads it. */
bool pe_vk_attn_krot(struct pe_backend *b, int64_t D, int64_t Dv, int64_t rows)
{
    return gpu_shaped((struct pe_vk_backend *)b) ||
           (rows > 0 && D > 0 && Dv > 0 && rows <= rows_per_invocation(D, Dv, INT64_MAX));
}

posenc_status pe_vk_attn_fused(struct pe_backend *b, const struct pe_attn_fused_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    const struct pe_view *q = &op->q, *k = &op->k, *v = &op->v, *d = &op->dst;
    const int64_t D = q->ne[0], Hq = q->ne[1], Tq = q->ne[2], B = q->ne[3];
    const int64_t Hk = k->ne[1], Tk = k->ne[2], Dv = v->ne[0];
    if (D <= 0 || Hq <= 0 || Tq <= 0 || B <= 0 || Tk <= 0 || Dv <= 0)
        return POSENC_OK;
    const bool has_mask = op->mask.mem != NULL, has_sinks = op->sinks.mem != NULL;
    const VkPhysicalDeviceLimits *lim = &be->props.limits;

    /* ---- the grid ------------------------------------------------------------------- */
    uint32_t wg = PE_FA_MAX_WG;
    if (lim->maxComputeWorkGroupInvocations < wg)
        wg = lim->maxComputeWorkGroupInvocations;
    if (lim->maxComputeWorkGroupSize[0] < wg)
        wg = lim->maxComputeWorkGroupSize[0];
    const int64_t group = op->group, NF = group * Tq;
    const int64_t DP = (D + 7) / 8 * 8, DVP = (Dv + 7) / 8 * 8;
    const int64_t R = rows_per_invocation(D, Dv, NF);
    const int64_t RB = (NF + R - 1) / R;
    if (NF > INT64_MAX / Hk / B || D > 65536 || Dv > 65536 || Tk > INT32_MAX ||
        Hq * Tq > INT64_MAX / B)
        return too_big(be, "rows and keys", NF * Hk, Tk);
    const int64_t NROWS = NF * Hk * B;
    /* tile: a shared K/V tile of BK keys (a multiple of the shader's key block) */
    int64_t BK = (int64_t)(lim->maxComputeSharedMemorySize / (4u * (uint64_t)(DP + DVP)));
    BK = BK / PE_FA_KB * PE_FA_KB;
    if (BK > 64)
        BK = 64;
    const bool tile = gpu_shaped(be) && RB >= (int64_t)wg && BK >= PE_FA_KB;
    int64_t NS = 1, KS = Tk, n_items, tiles = 0;
    if (tile) {
        tiles = (RB + wg - 1) / wg;
        n_items = tiles * Hk * B;
    } else {
        const int64_t nrb = RB * Hk * B;
        KS = Tk * nrb / split_target(be, wg);
        if (KS < PE_FA_MIN_KEYS)
            KS = PE_FA_MIN_KEYS;
        KS = (KS + PE_FA_KB - 1) / PE_FA_KB * PE_FA_KB;
        if (KS >= Tk)
            KS = Tk;
        NS = (Tk + KS - 1) / KS;
        if (nrb > INT64_MAX / NS)
            return too_big(be, "row blocks and key splits", nrb, NS);
        n_items = nrb * NS;
        BK = 1; /* no shared tile */
    }
    const int64_t PREC = 4 + DVP;
    const bool partial = NS > 1;
    /* the shaders form row indices up to a tile past NROWS, and n_items + a grid stride,
     * in uint32 */
    if (NROWS > (int64_t)UINT32_MAX - (int64_t)wg * R ||
        n_items > (int64_t)UINT32_MAX || !pe_vk_grid_fits(be, (uint64_t)n_items, wg) ||
        !pe_vk_grid_fits(be, (uint64_t)(NROWS * (DVP / 8)), wg) ||
        (partial && (NS * NROWS > (int64_t)UINT32_MAX / PREC ||
                     (uint64_t)(NS * NROWS * PREC * 4) > lim->maxStorageBufferRange)) ||
        Tq + op->q_offset > INT32_MAX || Tk + op->k_offset > INT32_MAX)
        return too_big(be, "work items and key splits", n_items, NS);

    /* ---- the parameter table: the block, slopes, mask slopes, buckets ----------------- */
    const int32_t *bucket = NULL;
    int64_t rel_min = 0, n_rel = 0;
    if (op->has_relbias) {
        const struct pe_relbias_op *rb = &op->relbias;
        bucket = rb->bucket_all ? rb->bucket_all : rb->bucket;
        rel_min = rb->bucket_all ? rb->rel_min_all : rb->rel_min;
        n_rel = rb->bucket_all ? rb->n_rel_all : rb->n_rel;
        if (n_rel < 1 || n_rel > INT32_MAX || rel_min < INT32_MIN || rel_min > INT32_MAX)
            return too_big(be, "relative positions", rel_min, n_rel);
    }
    const size_t n_words = P_WORDS + 2 * (size_t)Hq + (size_t)n_rel;
    uint32_t *w = calloc(n_words, sizeof *w);
    if (!w)
        return pe_error(b->ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "attention (one pass): out of host memory (%zu-word table)", n_words);
    posenc_status st = POSENC_OK;
    struct pe_vk_bind binds[PE_VK_MAX_BINDINGS];
    uint32_t flags = (f16(q) ? FA_Q16 : 0) | (f16(k) ? FA_K16 : 0) | (f16(v) ? FA_V16 : 0) |
                     (f16(d) ? FA_O16 : 0);
    st = put(be, q, 4, q->ne, &w[P_Q], "q", &binds[0]);
    if (st == POSENC_OK)
        st = put(be, k, 4, k->ne, &w[P_K], "k", &binds[1]);
    if (st == POSENC_OK)
        st = put(be, v, 4, v->ne, &w[P_V], "v", &binds[2]);
    if (st == POSENC_OK)
        st = put(be, d, 4, d->ne, &w[P_O], "dst", &binds[7]);
    binds[3] = binds[4] = binds[5] = binds[0]; /* not read without mask / table / sinks */
    if (st == POSENC_OK && has_mask) {
        st = put(be, &op->mask, 4, op->mask.ne, &w[P_M], "params->mask", &binds[3]);
        flags |= FA_MASK | (f16(&op->mask) ? FA_M16 : 0);
    }
    if (st == POSENC_OK && op->has_relbias) {
        const struct pe_view *t = &op->relbias.table;
        uint32_t tw[5] = {0};
        st = put(be, t, 2, t->ne, tw, "params->relbias_table", &binds[4]);
        memcpy(&w[P_T], tw, 3 * sizeof *tw);
        flags |= FA_RELB | (f16(t) ? FA_T16 : 0);
    }
    if (st == POSENC_OK && op->has_krot) {
        /* binding 4 and the words P_T: a call has RoPE or a relative bias, not both */
        if (op->has_relbias)
            st = pe_error(b->ctx, POSENC_ERR_INTERNAL, "attention: RoPE and relative bias");
        uint32_t tw[5] = {0};
        if (st == POSENC_OK)
            st = put(be, &op->krot, 4, op->krot.ne, tw, "k's RoPE table", &binds[4]);
        w[P_T] = tw[0];     /* offset */
        w[P_T + 1] = tw[3]; /* per key */
        w[P_T + 2] = tw[4]; /* per batch (0: shared) */
        flags |= FA_KROT | (op->krot_adjacent ? FA_KR_ADJ : 0);
        /* rows of vec4s: unit stride, every row start a multiple of 4 floats */
        if (tw[1] == 1u && ((tw[0] | tw[3] | tw[4]) & 3u) == 0u)
            flags |= FA_TVEC;
    }
    if (st == POSENC_OK && has_sinks) {
        uint32_t sw[5] = {0};
        st = put(be, &op->sinks, 1, op->sinks.ne, sw, "params->sinks", &binds[5]);
        memcpy(&w[P_S], sw, 2 * sizeof *sw);
        flags |= FA_SINKS;
    }
    if (st != POSENC_OK) {
        free(w);
        return st;
    }
    w[P_TQ] = (uint32_t)Tq;
    w[P_TK] = (uint32_t)Tk;
    w[P_HK] = (uint32_t)Hk;
    w[P_GROUP] = (uint32_t)group;
    w[P_NF] = (uint32_t)NF;
    w[P_RB] = (uint32_t)RB;
    w[P_NITEMS] = (uint32_t)n_items;
    w[P_NS] = (uint32_t)NS;
    w[P_KS] = (uint32_t)KS;
    w[P_QOFF] = (uint32_t)op->q_offset;
    w[P_KOFF] = (uint32_t)op->k_offset;
    w[P_SCALE] = fbits(op->scale_f32);
    w[P_CAP] = fbits(op->softcap);
    w[P_RELMIN] = (uint32_t)(int32_t)rel_min;
    w[P_NREL] = (uint32_t)n_rel;
    w[P_SLOPES] = P_WORDS;
    w[P_MSL] = P_WORDS + (uint32_t)Hq;
    w[P_BUCKET] = P_WORDS + 2u * (uint32_t)Hq;
    w[P_NROWS] = (uint32_t)NROWS;
    w[P_TILES] = (uint32_t)tiles;
    if (op->has_alibi) {
        memcpy(&w[P_WORDS], op->alibi.slopes_f32, (size_t)Hq * sizeof(float));
        flags |= FA_ALIBI | (op->alibi.symmetric ? FA_ALIBI_SYM : 0) |
                 (op->alibi.causal ? FA_ALIBI_CAUSAL : 0);
    }
    if (op->mask_slopes_f32 && has_mask) {
        memcpy(&w[P_WORDS + Hq], op->mask_slopes_f32, (size_t)Hq * sizeof(float));
        flags |= FA_MSLOPES;
    }
    if (op->has_relbias)
        memcpy(&w[P_WORDS + 2 * Hq], bucket, (size_t)n_rel * sizeof(int32_t));
    if (op->softcap > 0.0f)
        flags |= FA_SOFTCAP;
    if (op->causal)
        flags |= FA_CAUSAL;
    if (tile)
        flags |= FA_TILE;
    if (vec_ok(k, &w[P_K], D))
        flags |= FA_KVEC;
    if (vec_ok(v, &w[P_V], Dv))
        flags |= FA_VVEC;
    if (f16(d) && Dv % 2 == 0 && (Dv == 1 || w[P_O + 1] == 1u) &&
        ((w[P_O] | w[P_O + 2] | w[P_O + 3] | w[P_O + 4]) & 1u) == 0)
        flags |= FA_PAIRS;

    /* ---- everything that can fail, before the first dispatch ------------------------- */
    uint32_t spec[FA_N_SPEC];
    spec[FA_SPEC_WG] = wg;
    spec[FA_SPEC_D] = (uint32_t)D;
    spec[FA_SPEC_DV] = (uint32_t)Dv;
    spec[FA_SPEC_R] = (uint32_t)R;
    spec[FA_SPEC_BK] = (uint32_t)BK;
    spec[FA_SPEC_FLAGS] = flags | (partial ? FA_PARTIAL : 0);
    spec[FA_SPEC_KR_OFF] = op->has_krot ? (uint32_t)op->krot_off : 0u;
    spec[FA_SPEC_KR_P] = op->has_krot ? (uint32_t)op->krot_pairs : 0u;
    /* the merge: only the sizes and the flags it reads */
    uint32_t mspec[FA_N_SPEC] = {wg, 1, (uint32_t)Dv, 1, 1,
                                 flags & (FA_O16 | FA_SINKS | FA_PAIRS), 0, 0};
    VkPipeline pipe = VK_NULL_HANDLE, mpipe = VK_NULL_HANDLE;
    st = pe_vk_pipeline_spec(be, "flash_attn", spv_flash_attn, sizeof spv_flash_attn, spec,
                             FA_N_SPEC, &pipe);
    if (st == POSENC_OK && partial)
        st = pe_vk_pipeline_spec(be, "flash_merge", spv_flash_merge, sizeof spv_flash_merge,
                                 mspec, FA_N_SPEC, &mpipe);
    if (st == POSENC_OK)
        st = pe_vk_table(be, 0, w, n_words * sizeof *w, &binds[6]);
    /* the partials: in posenc's own batches one of the backend's two buffers (taken in
     * turn, grown on demand: no allocation per call once they are large enough); while
     * recording into the application's buffer a buffer of the recording, freed with it */
    posenc_buffer *tmp = NULL;
    const VkDeviceSize part_bytes = (VkDeviceSize)(NS * NROWS * PREC) * sizeof(float);
    struct pe_vk_bind part = {VK_NULL_HANDLE, 0, part_bytes};
    if (st == POSENC_OK && partial && be->rec) {
        st = posenc_buffer_create(b->ctx, (size_t)part_bytes, &tmp);
        if (st == POSENC_OK)
            part.buf = ((const struct pe_vk_buffer *)tmp->mem)->buf;
    } else if (st == POSENC_OK && partial) {
        struct pe_vk_buffer *pb = &be->fa_part[be->fa_next];
        st = pe_vk_buffer_reserve(be, pb, part_bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, false);
        if (st == POSENC_OK) {
            part.buf = pb->buf;
            be->fa_next ^= 1u;
        }
    }
    if (st != POSENC_OK) {
        free(w);
        return st;
    }

    /* ---- the dispatches -------------------------------------------------------------- */
    const struct pe_vk_bind dst_bind = binds[7];
    if (partial)
        binds[7] = part;
    const uint32_t gx = tile ? pe_vk_groups(be, (uint64_t)n_items, 1, PE_FA_CPU_GROUPS)
                             : pe_vk_groups(be, (uint64_t)n_items, wg, PE_FA_CPU_GROUPS);
    /* written: dst or the temporary (binding 7) only */
    st = pe_vk_dispatch_rw(be, pipe, PE_VK_MAX_BINDINGS, binds, 1u << 7, NULL, 0, gx, 1, 1);
    if (st == POSENC_OK && partial) {
        /* 0 dst, 5 sinks, 6 the table, 7 the partials (the rest unused) */
        struct pe_vk_bind mb[PE_VK_MAX_BINDINGS];
        for (int i = 0; i < PE_VK_MAX_BINDINGS; i++)
            mb[i] = dst_bind;
        mb[5] = binds[5];
        mb[7] = binds[7];
        /* the table again: a table binding is only promised to the next dispatch (a
         * submission model may give each dispatch its own). A failure here leaves dst
         * untouched: the first dispatch wrote only the temporary. */
        st = pe_vk_table(be, 1, w, n_words * sizeof *w, &mb[6]);
        const uint64_t n_m = (uint64_t)NROWS * (uint64_t)(DVP / 8);
        if (st == POSENC_OK)
            st = pe_vk_dispatch_rw(be, mpipe, PE_VK_MAX_BINDINGS, mb, 1u << 0 /* dst */, NULL,
                                   0, pe_vk_groups(be, n_m, wg, PE_FA_CPU_GROUPS), 1, 1);
    }
    free(w);
    if (tmp)
        posenc_buffer_destroy(&tmp);
    return st;
}
