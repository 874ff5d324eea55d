/*
 * ops_flash.c - the OpenCL host side of posenc_attention's one-pass path (internal.h,
 * struct pe_attn_fused_op; backend.h, attn_fused): cl/flash.cl's pe_flash, and
 * pe_flash_merge when the keys of a row are split across work-groups; on CPU devices,
 * decode takes cl/flash_cpu.cl's pe_flash_cpu and pe_flash_cpu_merge instead (below).
 *
 * Sizes, from what the device reports (struct pe_cl_backend: info.max_workgroup_size,
 * max_item_size, local_mem, info.compute_units, info.type) and the built kernel's
 * CL_KERNEL_WORK_GROUP_SIZE:
 *   FA_WG   work-group size and key tile: the largest power of two <= PE_FA_WG_MAX within
 *           the device's limits (rebuilt with fewer when the kernel allows fewer);
 *   FA_RG   rows (query x query-head pairs of one K/V head) per head and work-group: the
 *           power of two covering group * Tq, at most PE_FA_R_MAX;
 *   FA_HB   K/V heads per work-group: 1, except decode on CPU devices (rows per head <=
 *           PE_FA_R_MAX / 2), PE_FA_CPU_ROWS / FA_RG of them (at most Hk): the group then
 *           reads whole key rows, contiguous, instead of one head's slices a key stride
 *           apart, which CPU prefetchers miss (PoCL: 3.6x slower at the same bytes);
 *           FA_HB, then FA_RG shrink until the work-group's local memory (q rows, the
 *           score tile, per-row scalars) fits the device's with PE_FA_LOCAL_SLACK to
 *           spare (1/8 on tiny ones), and FA_HB * FA_RG <= FA_WG; then the q rows stay in
 *           global memory (FA_QG) and FA_WG shrinks, if it still does not fit;
 *   FA_KW / FA_VW  the k / v load widths: 16 (CPU devices), 8 or 4 where every row is
 *           unit-stride and aligned to it, else 1;
 *   chunks  the keys of a row are split into chunks (split-K) when the work-groups
 *           (row blocks x head blocks x batches) are fewer than PE_FA_TARGET_PER_CU per
 *           compute unit (at least PE_FA_TARGET_MIN), keeping at least PE_FA_MIN_CHUNK
 *           keys per chunk: decode (one query) fills the device this way. Each chunk's
 *           (max, sum, acc[Dv]) goes to a temporary and pe_flash_merge writes dst.
 *
 * Reliability (posenc.h, "Errors"): both programs are built, the tables uploaded and the
 * partials' temporary allocated before the first launch; the first launch writes only
 * the temporary when there is a merge, so dst is written by the last launch only. The
 * programs are pinned in the program cache meanwhile (pin_gen), so acquiring the second
 * cannot evict the first.
 *
 * Tables: the ALiBi slopes go to the persistent table of posenc_alibi (tab_alibi), the
 * mask slopes to the same table when there is no ALiBi (as posenc_softmax does), else to
 * a per-call upload; the relative-bias bucket list to tab_relbias (as posenc_relbias).
 *
 * Kernel argument order (cl/flash.cl; every "mem, long, long4" triple is a tensor:
 * buffer, offset and strides in its own elements; an absent tensor gets q's triple):
 *
 *   pe_flash  (-DFA_FLAGS (the FA_* bits below) -DFA_FMA -DFA_KW -DFA_VW -DFA_WG -DFA_HB
 *              -DFA_RG -DFA_DQ -DFA_NVG -DFA_LANES -DFA_VGPW -DFA_SC, cl/flash.cl)
 *     0-2   dst [Dv, Hq, Tq, B]         3-5   q [D, Hq, Tq, B]
 *     6-8   k [D, Hk, Tk, B]            9-11  v [Dv, Hk, Tk, B]
 *    12-14  mask (logits' shape, st 0 where broadcast)
 *    15-17  relative-bias table [n_buckets, Hq]
 *    18     mem buckets int32 (bucket_all)  19 mem slopes f32 [Hq]  20 mem mask slopes f32
 *    21-23  sinks f32, long off, long st
 *    24     mem partials f32 [rows][n_chunks][Dv + 2] (dst's buffer without a split)
 *    25     long4 dims (D, Dv, group, Tq)   26 long4 shape (Hq, Tk, B, chunk keys)
 *    27     long4 offs (q_offset, k_offset, causal, rel_min)
 *    28     long4 aoffs (ALiBi q_offset, k_offset, causal, symmetric)
 *    29     float scale   30 float softcap
 *    31-33  the RoPE table of k (pe_attn_fused_op.krot: mem f32, long off, long4 st; q's
 *           buffer and zeros without it)
 *   With RoPE on k (op->has_krot): -DFA_KROT=1 -DFA_KR_OFF -DFA_KR_P -DFA_KR_ADJ (the
 *   pair window, common.cl); FA_KW is 1 unless the window's start, and with NeoX pairs
 *   its half, are multiples of the width.
 *   NDRange (FA_WG * n_chunks, ceil(group*Tq / FA_RG), ceil(Hk / FA_HB) * B), local
 *   (FA_WG, 1, 1).
 *
 *   pe_flash_merge  (-DFA_FLAGS with the FA_O_F16 and FA_SINKS bits only)
 *     0-2   dst   3 mem partials   4-6 sinks, off, st   7 long4 dims (Dv, Hq, Tq, n_chunks)
 *     8     long n_rows (Hq*Tq*B)
 *   NDRange (Dv, Hq*Tq*B, 1).
 *
 * The CPU-shaped decode (cl/flash_cpu.cl; plan_cpu): on CPU devices (pe_cl_is_cpu; a
 * POSENC_DEVICE_PRESET device is a GPU), or anywhere with POSENC_CL_FLASH=cpu
 * (POSENC_CL_FLASH=gpu keeps pe_flash: tests run both kernels on every device), when
 * group * Tq <= PE_FA_CPU_RG_MAX and k, v take 4-, 8- or 16-wide loads. A CPU
 * implementation runs a work-group's work-items in turn on one core (PoCL vectorises
 * across them where it can), so pe_flash's per-key work-items, barriers and local tiles
 * cost passes over memory there; pe_flash_cpu is one work-item per work-group doing what
 * a CPU thread would, over every K/V head's row of each key in memory order:
 *   pe_flash_cpu  (-DFA_FLAGS -DFA_FMA -DFA_KW -DFA_VW -DFA_D -DFA_DV -DFA_HB -DFA_RG
 *                  -DFA_TK -DFA_KB -DFA_MERGE_LAST, and pe_flash's RoPE options)
 *                  pe_flash's arguments 0-30, counts (mem), then the RoPE table (31-33
 *                  of pe_flash); NDRange
 *                  (n_chunks, ceil(Hk / FA_HB), B), local (1, 1, 1); FA_RG = group * Tq
 *                  exactly, FA_HB heads (PE_FA_CPU_WI_ROWS rows in all, within
 *                  PE_FA_CPU_PRIVATE bytes of private arrays), chunks of at least
 *                  PE_FA_CPU_MIN_CHUNK keys until there are PE_FA_CPU_PER_CU work-items per
 *                  compute unit. Split on a CPU device (FA_MERGE_LAST = 1): counts holds
 *                  an int per (head block, batch), zero, and the last work-item of each
 *                  block to finish merges its rows (one launch) and zeroes its int.
 * The partials and the counts are the backend's (fa_part, fa_counts), kept between calls:
 * a decode call allocates nothing once the first has run.
 *   pe_flash_cpu_merge  (-DFA_FLAGS (O_F16, SINKS) -DFA_DV -DFA_VW) pe_flash_merge's
 *                  arguments; NDRange (Hq*Tq*B, 1, 1), local (1, 1, 1): a row per
 *                  work-item (pe_flash_merge's work-item per (d, row) recomputed each
 *                  chunk's exp per d: 0.7 ms of a 4 ms decode on PoCL). Only where
 *                  pe_flash_cpu is forced on a non-CPU device (no coherence promised
 *                  between work-groups there).
 * On PoCL (2 cores, shared) decode 1 x 4096, d 128 ran 2-3x faster than with pe_flash
 * (docs/performance.md).
 */
#include "backend_opencl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PE_FA_WG_MAX 128
#define PE_FA_R_MAX 16
#define PE_FA_CPU_ROWS 32   /* rows per group (all heads) of decode on CPU devices */
#define PE_FA_LOCAL_SLACK 512 /* bytes of local memory left to the implementation */
#define PE_FA_TARGET_PER_CU 8
#define PE_FA_TARGET_MIN 16
#define PE_FA_MIN_CHUNK 512
/* pe_flash_cpu (plan_cpu) */
#define PE_FA_CPU_RG_MAX 8      /* rows per K/V head */
#define PE_FA_CPU_WI_ROWS 32    /* rows per work-item: all heads, whole key rows (16: 30% slower) */
#define PE_FA_CPU_PRIVATE 49152 /* bytes of q rows, accumulators and logits per work-item */
#define PE_FA_CPU_PER_CU 4 /* work-items per compute unit (8: d 64 decode 0.9-1.6 ms, 4: 0.8-0.9) */
#define PE_FA_CPU_MIN_CHUNK 256
#define PE_FA_CPU_TK 64         /* keys per tile (FA_TK) */
#define PE_FA_CPU_KB 4          /* keys per pass of the output sums (FA_KB; with 8, PoCL's d 64
                                 * decode read 4-9 points of the ceiling less) */

/* Bits of FA_FLAGS (cl/flash.cl). */
enum { FA_Q_F16, FA_K_F16, FA_V_F16, FA_M_F16, FA_T_F16, FA_O_F16, FA_ALIBI, FA_RELBIAS,
       FA_MASK, FA_MSLOPE, FA_SOFTCAP, FA_SINKS, FA_SPLIT };

static posenc_status fa_fail(struct pe_cl_backend *be, const char *call, cl_int err)
{
    return pe_error(be->base.ctx,
                    pe_cl_err_is_oom(err) ? POSENC_ERR_OUT_OF_MEMORY : POSENC_ERR_BACKEND,
                    "%s failed: OpenCL error %d", call, (int)err);
}

/* CL_DEVICE_LOCAL_MEM_SIZE, as stored at device discovery (and lowered by a device
 * preset); read here once if the backend has not stored it. */
static uint64_t local_mem(struct pe_cl_backend *be)
{
    if (!be->local_mem) {
        cl_ulong lm = 0;
        if (clGetDeviceInfo(be->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(lm), &lm, NULL) !=
                CL_SUCCESS ||
            lm == 0)
            lm = 16 * 1024; /* OpenCL's minimum for a GPU-like device is 32 KiB; be safe */
        be->local_mem = lm;
    }
    return be->local_mem;
}

/* The widest of 16 (CPU devices: AVX-512), 8, 4, 1 elements that every row of v (dims 1-3
 * and offset) starts on, with unit stride and n0 a multiple of it: the width of the
 * kernel's loads along dim 0. */
static int load_width(const struct pe_cl_backend *be, const struct pe_view *v)
{
    static const int w[3] = {16, 8, 4};
    for (int i = pe_cl_is_cpu(be) ? 0 : 1; i < 3; i++)
        if (v->ne[0] % w[i] == 0 && pe_cl_rows_aligned(v, w[i]))
            return w[i];
    return 1;
}

struct fa_plan {
    size_t wg;
    int64_t qg, hb, rg, r, dq, kw, vw, nvg, lanes, vgpw, sc;
    int64_t n_blocks, n_chunks, chunk;
    bool cpu; /* pe_flash_cpu (cl/flash_cpu.cl): wg = 1, n_blocks = head blocks */
    bool merge_last; /* cpu, split, on a CPU device: pe_flash_cpu merges (FA_MERGE_LAST) */
};

/* The lanes, groups and score-tile size for wg, hb and rg (cl/flash.cl, above pe_flash). */
static void plan_groups(struct fa_plan *pl, int64_t Dv)
{
    const int64_t wg = (int64_t)pl->wg;
    pl->r = pl->hb * pl->rg;
    pl->nvg = (Dv + pl->vw - 1) / pl->vw;
    const int64_t ng = pl->hb * pl->nvg;
    pl->lanes = ng >= wg ? 1 : wg / ng;
    pl->vgpw = (ng + wg - 1) / wg;
    pl->sc = pl->r * wg;
    if (pl->lanes > 1 && pl->lanes * ng * pl->vw > pl->sc)
        pl->sc = pl->lanes * ng * pl->vw;
}

/* Bytes of local memory pe_flash declares for pl (cl/flash.cl). */
static uint64_t flash_local_bytes(const struct fa_plan *pl)
{
    const int64_t q = pl->qg ? 2 * pl->r : pl->r * pl->dq; /* row_qb (long) or qs (float) */
    return (uint64_t)(4 * (q + pl->sc + 3 * pl->r) + 8 * 2 * pl->r + 4 * pl->r);
}

/* FA_FLAGS for op (split: with partials). */
static unsigned flash_flags(const struct pe_attn_fused_op *op, bool split)
{
    const bool has_mask = op->mask.mem != NULL;
    return
        (unsigned)is_f16(&op->q) << FA_Q_F16 | (unsigned)is_f16(&op->k) << FA_K_F16 |
        (unsigned)is_f16(&op->v) << FA_V_F16 |
        (unsigned)(has_mask && is_f16(&op->mask)) << FA_M_F16 |
        (unsigned)(op->has_relbias && is_f16(&op->relbias.table)) << FA_T_F16 |
        (unsigned)is_f16(&op->dst) << FA_O_F16 | (unsigned)(op->has_alibi != 0) << FA_ALIBI |
        (unsigned)(op->has_relbias != 0) << FA_RELBIAS | (unsigned)has_mask << FA_MASK |
        (unsigned)(has_mask && op->mask_slopes_f32 != NULL) << FA_MSLOPE |
        (unsigned)(op->softcap > 0.0f) << FA_SOFTCAP | (unsigned)(op->sinks.mem != NULL)
        << FA_SINKS | (unsigned)split << FA_SPLIT;
}

/* The options of RoPE on k inside the pass (common.cl, FA_KROT), "" without it. */
static void krot_defines(const struct pe_attn_fused_op *op, char *out, size_t n)
{
    if (!op->has_krot)
        out[0] = '\0';
    else
        snprintf(out, n, " -DFA_KROT=1 -DFA_KR_OFF=%lld -DFA_KR_P=%lld -DFA_KR_ADJ=%d",
                 (long long)op->krot_off, (long long)op->krot_pairs, op->krot_adjacent ? 1 : 0);
}

/* Whether pe_flash's kw-wide loads of k can rotate it (fa_krotv): the window's start, and
 * with NeoX pairs its half, on multiples of kw. */
static bool krot_fits_width(const struct pe_attn_fused_op *op, int64_t kw)
{
    return !op->has_krot || kw == 1 ||
           (op->krot_off % kw == 0 && (op->krot_adjacent || op->krot_pairs % kw == 0));
}

/* The -D options of pe_flash for plan pl (split: with partials). */
static void flash_defines(const struct pe_attn_fused_op *op, const struct fa_plan *pl,
                          bool split, int fma, char *out, size_t n)
{
    const unsigned flags = flash_flags(op, split);
    char kr[96];
    krot_defines(op, kr, sizeof(kr));
    snprintf(out, n,
             "-DFA_FLAGS=%u -DFA_FMA=%d -DFA_QG=%d -DFA_KW=%d -DFA_VW=%d -DFA_WG=%zu -DFA_HB=%d -DFA_RG=%d "
             "-DFA_DQ=%lld -DFA_NVG=%lld -DFA_LANES=%lld -DFA_VGPW=%lld -DFA_SC=%lld%s",
             flags, fma, (int)pl->qg, (int)pl->kw, (int)pl->vw, pl->wg, (int)pl->hb, (int)pl->rg, (long long)pl->dq,
             (long long)pl->nvg, (long long)pl->lanes, (long long)pl->vgpw, (long long)pl->sc, kr);
}

/* Whether decode-shaped calls take pe_flash_cpu: on CPU devices, unless
 * POSENC_CL_FLASH says otherwise ("gpu": pe_flash, "cpu": pe_flash_cpu on any device), so
 * that tests run both kernels on one device. */
static bool want_cpu_kernel(struct pe_cl_backend *be)
{
    if (be->fa_kernel == 0) /* once per backend, not on every call */
        be->fa_kernel = pe_cpu_shaped("POSENC_CL_FLASH", pe_cl_is_cpu(be)) ? 1 : 2;
    return be->fa_kernel == 1;
}

/* pe_flash_cpu's plan for op (cl/flash_cpu.cl), false where it does not apply: rows per
 * K/V head (group * Tq) up to PE_FA_CPU_RG_MAX, k and v rows unit-stride and aligned to
 * 4-wide loads at least, and the private arrays (q rows, accumulators, the logit tile) of
 * one head within PE_FA_CPU_PRIVATE bytes. Heads per work-item: PE_FA_CPU_WI_ROWS rows in
 * all, as many as fit PE_FA_CPU_PRIVATE; the keys are then split into chunks until there
 * are PE_FA_CPU_PER_CU work-items per compute unit (the implementation deals them to its
 * threads), keeping at least PE_FA_CPU_MIN_CHUNK keys per chunk. */
static bool plan_cpu(struct pe_cl_backend *be, const struct pe_attn_fused_op *op,
                     struct fa_plan *pl)
{
    const int64_t D = op->q.ne[0], Dv = op->v.ne[0], Tq = op->q.ne[2], B = op->q.ne[3];
    const int64_t Hk = op->k.ne[1], Tk = op->k.ne[2];
    const int64_t rows = op->group * Tq;
    if (!want_cpu_kernel(be) || rows > PE_FA_CPU_RG_MAX)
        return false;
    pl->kw = load_width(be, &op->k);
    pl->vw = load_width(be, &op->v);
    if (pl->kw < 4 || pl->vw < 4)
        return false;
    const int64_t row_bytes = 4 * (D + Dv + PE_FA_CPU_TK);
    if (rows * row_bytes > PE_FA_CPU_PRIVATE)
        return false;
    pl->cpu = true;
    pl->wg = 1;
    pl->rg = rows;
    pl->hb = PE_FA_CPU_WI_ROWS / rows < Hk ? PE_FA_CPU_WI_ROWS / rows : Hk;
    if (pl->hb < 1)
        pl->hb = 1;
    while (pl->hb > 1 && pl->hb * rows * row_bytes > PE_FA_CPU_PRIVATE)
        pl->hb--;
    if (!pe_cl_is_cpu(be)) /* forced on a GPU: the least private memory per work-item */
        pl->hb = 1;
    pl->r = pl->hb * pl->rg;
    pl->dq = D;
    pl->n_blocks = (Hk + pl->hb - 1) / pl->hb;
    const int64_t base = pl->n_blocks * B;
    int64_t target = (int64_t)PE_FA_CPU_PER_CU * (int64_t)be->info.compute_units;
    if (target < PE_FA_CPU_PER_CU)
        target = PE_FA_CPU_PER_CU;
    int64_t nc = (target + base - 1) / base;
    const int64_t most = (Tk + PE_FA_CPU_MIN_CHUNK - 1) / PE_FA_CPU_MIN_CHUNK;
    if (nc > most)
        nc = most;
    if (nc < 1)
        nc = 1;
    int64_t chunk = (Tk + nc - 1) / nc;
    chunk = (chunk + PE_FA_CPU_TK - 1) / PE_FA_CPU_TK * PE_FA_CPU_TK;
    pl->chunk = chunk;
    pl->n_chunks = (Tk + chunk - 1) / chunk;
    return true;
}

/* The work-group size, rows per group and pe_flash's program (built) for op. */
static posenc_status plan_program(struct pe_cl_backend *be, const struct pe_attn_fused_op *op,
                                  struct fa_plan *pl, bool *split, struct pe_cl_program **out)
{
    posenc_context *ctx = be->base.ctx;
    const int64_t D = op->q.ne[0], Dv = op->v.ne[0], Tq = op->q.ne[2], B = op->q.ne[3];
    const int64_t Hk = op->k.ne[1], Tk = op->k.ne[2];
    const int64_t rows = op->group * Tq;
    size_t cap = PE_FA_WG_MAX;
    if (be->info.max_workgroup_size && be->info.max_workgroup_size < cap)
        cap = be->info.max_workgroup_size;
    if (be->max_item_size[0] && be->max_item_size[0] < cap)
        cap = be->max_item_size[0];
    pl->wg = 1;
    while (pl->wg * 2 <= cap)
        pl->wg *= 2;
    /* rows of one head per group: all of them up to PE_FA_R_MAX (a power of two) */
    pl->rg = 1;
    while (pl->rg < rows && pl->rg < PE_FA_R_MAX)
        pl->rg *= 2;
    /* CPU devices with few rows per head (decode): several heads per group, so that the
     * group reads whole key rows (every head's slice, contiguous) */
    pl->hb = 1;
    if (pe_cl_is_cpu(be) && rows <= PE_FA_R_MAX / 2)
        pl->hb = PE_FA_CPU_ROWS / pl->rg < Hk ? PE_FA_CPU_ROWS / pl->rg : Hk;
    if (pl->hb < 1)
        pl->hb = 1;
    pl->dq = D;
    pl->kw = load_width(be, &op->k);
    pl->vw = load_width(be, &op->v);
    if (plan_cpu(be, op, pl)) {
        *split = pl->n_chunks > 1;
        /* one launch: the last work-item of a head block merges (coherent memory only) */
        pl->merge_last = *split && pe_cl_is_cpu(be);
        char defines[PE_CL_OPTS_MAX + 64], kr[96];
        krot_defines(op, kr, sizeof(kr));
        snprintf(defines, sizeof(defines),
                 "-DFA_FLAGS=%u -DFA_FMA=%d -DFA_KW=%d -DFA_VW=%d -DFA_D=%lld -DFA_DV=%lld "
                 "-DFA_HB=%d -DFA_RG=%d -DFA_TK=%d -DFA_KB=%d -DFA_MERGE_LAST=%d%s",
                 flash_flags(op, *split), be->hw_fma, (int)pl->kw, (int)pl->vw, (long long)D,
                 (long long)Dv, (int)pl->hb, (int)pl->rg, PE_FA_CPU_TK, PE_FA_CPU_KB,
                 pl->merge_last ? 1 : 0, kr);
        if (strlen(defines) >= PE_CL_OPTS_MAX)
            return pe_error(ctx, POSENC_ERR_INTERNAL, "attention: build options too long");
        return pe_cl_get_program(be, "flash_cpu.cl", "pe_flash_cpu", defines, out);
    }
    if (!krot_fits_width(op, pl->kw)) /* k a dim at a time (fa_krot1) */
        pl->kw = 1;
    const uint64_t lm = local_mem(be);
    const uint64_t budget = lm > 4 * PE_FA_LOCAL_SLACK ? lm - PE_FA_LOCAL_SLACK : lm - lm / 8;
    plan_groups(pl, Dv);
    while ((pl->hb > 1 || pl->rg > 1) &&
           (flash_local_bytes(pl) > budget || pl->r > (int64_t)pl->wg)) {
        if (pl->hb > 1)
            pl->hb--;
        else
            pl->rg /= 2;
        plan_groups(pl, Dv);
    }
    if (flash_local_bytes(pl) > budget) { /* q rows from global memory (scalar loads) */
        pl->qg = 1;
        pl->kw = 1;
    }
    while (pl->wg > 1 && flash_local_bytes(pl) > budget) {
        pl->wg /= 2;
        plan_groups(pl, Dv);
    }
    if (flash_local_bytes(pl) > budget)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "attention: the one-pass kernel needs %llu bytes of local memory for "
                        "head_dim %lld, more than this device's %llu",
                        (unsigned long long)flash_local_bytes(pl), (long long)D,
                        (unsigned long long)lm);
    for (;;) {
        pl->n_blocks = (rows + pl->rg - 1) / pl->rg;
        /* split-K: enough work-groups for the device */
        const int64_t base = pl->n_blocks * ((Hk + pl->hb - 1) / pl->hb) * B;
        int64_t target = (int64_t)PE_FA_TARGET_PER_CU * (int64_t)be->info.compute_units;
        if (target < PE_FA_TARGET_MIN)
            target = PE_FA_TARGET_MIN;
        int64_t nc = 1;
        if (base < target) {
            nc = (target + base - 1) / base;
            const int64_t most = (Tk + PE_FA_MIN_CHUNK - 1) / PE_FA_MIN_CHUNK;
            if (nc > most)
                nc = most;
            if (nc < 1)
                nc = 1;
        }
        const int64_t wg = (int64_t)pl->wg;
        int64_t chunk = (Tk + nc - 1) / nc;
        chunk = (chunk + wg - 1) / wg * wg;
        pl->chunk = chunk;
        pl->n_chunks = (Tk + chunk - 1) / chunk;
        *split = pl->n_chunks > 1;
        char defines[PE_CL_OPTS_MAX + 64];
        flash_defines(op, pl, *split, be->hw_fma, defines, sizeof(defines));
        if (strlen(defines) >= PE_CL_OPTS_MAX)
            return pe_error(ctx, POSENC_ERR_INTERNAL, "attention: build options too long");
        PE_RETURN_IF_ERROR(pe_cl_get_program(be, "flash.cl", "pe_flash", defines, out));
        if ((*out)->kernel_wg_size >= pl->wg || pl->wg == 1)
            break;
        while (pl->wg > 1 && pl->wg > (*out)->kernel_wg_size) /* the compiler allows fewer */
            pl->wg /= 2;
        while (pl->r > (int64_t)pl->wg && (pl->hb > 1 || pl->rg > 1)) {
            if (pl->hb > 1)
                pl->hb--;
            else
                pl->rg /= 2;
            plan_groups(pl, Dv);
        }
        plan_groups(pl, Dv);
    }
    return POSENC_OK;
}

static posenc_status fused(struct pe_cl_backend *be, const struct pe_attn_fused_op *op,
                           cl_mem *owned_ms)
{
    posenc_context *ctx = be->base.ctx;
    const struct pe_view *q = &op->q, *k = &op->k, *v = &op->v, *o = &op->dst;
    const int64_t D = q->ne[0], Hq = q->ne[1], Tq = q->ne[2], B = q->ne[3];
    const int64_t Hk = k->ne[1], Tk = k->ne[2], Dv = v->ne[0];
    const bool has_mask = op->mask.mem != NULL, has_sinks = op->sinks.mem != NULL;
    const bool has_ms = has_mask && op->mask_slopes_f32 != NULL;

    /* ---- programs ---- */
    struct fa_plan pl;
    memset(&pl, 0, sizeof(pl));
    bool split = false;
    struct pe_cl_program *p = NULL, *pm = NULL;
    PE_RETURN_IF_ERROR(plan_program(be, op, &pl, &split, &p));
    const uint64_t n_rows = (uint64_t)Hq * (uint64_t)Tq * (uint64_t)B;
    if (split && !pl.merge_last) {
        char defines[PE_CL_OPTS_MAX];
        snprintf(defines, sizeof(defines), "-DFA_FLAGS=%u -DFA_DV=%lld -DFA_VW=%d",
                 (unsigned)is_f16(o) << FA_O_F16 | (unsigned)has_sinks << FA_SINKS,
                 (long long)Dv, (int)pl.vw);
        PE_RETURN_IF_ERROR(pl.cpu ? pe_cl_get_program(be, "flash_cpu.cl", "pe_flash_cpu_merge",
                                                      defines, &pm)
                                  : pe_cl_get_program(be, "flash.cl", "pe_flash_merge",
                                                      defines, &pm));
    }

    /* ---- tables ---- */
    cl_mem q_mem = (cl_mem)q->mem;
    cl_mem slopes = q_mem, mslopes = q_mem, buckets = q_mem;
    if (op->has_alibi) {
        const struct pe_alibi_op *a = &op->alibi;
        const bool all = a->n_head_all > 0;
        const float *s0 = all ? a->slopes_f32 - a->h_off : a->slopes_f32;
        const int64_t n = all ? a->n_head_all : Hq;
        PE_RETURN_IF_ERROR(pe_cl_table(be, &be->tab_alibi, "alibi slopes", s0,
                                       (size_t)n * sizeof(float), &slopes));
        if (all && a->h_off != 0) /* never for the fused op: it has every head */
            return pe_error(ctx, POSENC_ERR_INTERNAL, "attention: ALiBi slopes cut at head %lld",
                            (long long)a->h_off);
    }
    if (has_ms) {
        if (!op->has_alibi) {
            PE_RETURN_IF_ERROR(pe_cl_table(be, &be->tab_alibi, "mask slopes",
                                           op->mask_slopes_f32, (size_t)Hq * sizeof(float),
                                           &mslopes));
        } else {
            PE_RETURN_IF_ERROR(pe_cl_upload(be, "mask slopes", op->mask_slopes_f32,
                                            (size_t)Hq * sizeof(float), owned_ms));
            mslopes = *owned_ms;
        }
    }
    int64_t rel_min = 0;
    if (op->has_relbias) {
        const struct pe_relbias_op *rb = &op->relbias;
        const int32_t *list = rb->bucket_all ? rb->bucket_all : rb->bucket;
        const int64_t n = rb->bucket_all ? rb->n_rel_all : rb->n_rel;
        rel_min = rb->bucket_all ? rb->rel_min_all : rb->rel_min;
        PE_RETURN_IF_ERROR(pe_cl_table(be, &be->tab_relbias, "relbias buckets", list,
                                       (size_t)n * sizeof(int32_t), &buckets));
    }

    /* ---- the partials and counters (kept by the backend) ---- */
    cl_mem part = (cl_mem)o->mem, counts = (cl_mem)o->mem;
    if (split) {
        const uint64_t n = n_rows * (uint64_t)pl.n_chunks * (uint64_t)(Dv + 2);
        const uint64_t n_cnt = pl.merge_last ? (uint64_t)pl.n_blocks * (uint64_t)B : 0;
        if (n > (uint64_t)SIZE_MAX / sizeof(float) || n_cnt > (uint64_t)SIZE_MAX / sizeof(int) ||
            (be->info.max_buffer_size && (n * sizeof(float) > be->info.max_buffer_size ||
                                          n_cnt * sizeof(int) > be->info.max_buffer_size)))
            return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                            "attention: the one-pass kernel's partials (%llu floats) do not "
                            "fit one buffer of this device",
                            (unsigned long long)n);
        PE_RETURN_IF_ERROR(pe_cl_scratch(be, "attention partials", &be->fa_part, &be->fa_part_bytes,
                                      (size_t)n * sizeof(float), false));
        part = be->fa_part;
        if (n_cnt > 0) { /* zero when made; the kernel leaves them zero */
            PE_RETURN_IF_ERROR(pe_cl_scratch(be, "attention partials' counters", &be->fa_counts,
                                          &be->fa_counts_bytes, (size_t)n_cnt * sizeof(int),
                                          true));
            counts = be->fa_counts;
        }
    }

    /* ---- arguments ---- */
    const struct pe_view *mk = has_mask ? &op->mask : q;
    const struct pe_view *rt = op->has_relbias ? &op->relbias.table : q;
    cl_mem o_mem = (cl_mem)o->mem, k_mem = (cl_mem)k->mem, v_mem = (cl_mem)v->mem;
    cl_mem m_mem = (cl_mem)mk->mem, r_mem = (cl_mem)rt->mem;
    cl_mem s_mem = has_sinks ? (cl_mem)op->sinks.mem : q_mem;
    const cl_long o_off = o->offset, q_off = q->offset, k_off = k->offset, v_off = v->offset;
    const cl_long m_off = mk->offset, r_off = rt->offset;
    const cl_long s_off = has_sinks ? op->sinks.offset : 0;
    const cl_long s_st = has_sinks ? op->sinks.st[0] : 0;
    const cl_long4 o_st = view_st(o), q_st = view_st(q), k_st = view_st(k), v_st = view_st(v);
    const cl_long4 m_st = view_st(mk), r_st = view_st(rt);
    const cl_long4 dims = long4_of(D, Dv, op->group, Tq);
    const cl_long4 shape = long4_of(Hq, Tk, B, pl.chunk);
    const cl_long4 offs = long4_of(op->q_offset, op->k_offset, op->causal ? 1 : 0, rel_min);
    const cl_long4 aoffs =
        op->has_alibi ? long4_of(op->alibi.q_offset, op->alibi.k_offset, op->alibi.causal ? 1 : 0,
                                 op->alibi.symmetric ? 1 : 0)
                      : long4_of(0, 0, 0, 0);
    const cl_float scale = op->scale_f32, softcap = op->softcap;
    cl_mem kr_mem = op->has_krot ? (cl_mem)op->krot.mem : q_mem;
    const cl_long kr_off = op->has_krot ? op->krot.offset : 0;
    const cl_long4 kr_st = op->has_krot ? view_st(&op->krot) : long4_of(0, 0, 0, 0);
    /* pe_flash_cpu takes counts between softcap and the RoPE table; pe_flash does not */
    const struct pe_cl_arg args[] = {
        ARG(o_mem),  ARG(o_off),  ARG(o_st),   ARG(q_mem),   ARG(q_off), ARG(q_st),
        ARG(k_mem),  ARG(k_off),  ARG(k_st),   ARG(v_mem),   ARG(v_off), ARG(v_st),
        ARG(m_mem),  ARG(m_off),  ARG(m_st),   ARG(r_mem),   ARG(r_off), ARG(r_st),
        ARG(buckets), ARG(slopes), ARG(mslopes), ARG(s_mem), ARG(s_off), ARG(s_st),
        ARG(part),   ARG(dims),   ARG(shape),  ARG(offs),    ARG(aoffs), ARG(scale),
        ARG(softcap), ARG(counts), ARG(kr_mem), ARG(kr_off), ARG(kr_st)};
    enum { ARG_COUNTS = 31 }; /* args[ARG_COUNTS] is counts */
    struct pe_cl_arg gargs[PE_ARRAY_SIZE(args) - 1];
    memcpy(gargs, args, ARG_COUNTS * sizeof(args[0]));
    memcpy(gargs + ARG_COUNTS, args + ARG_COUNTS + 1,
           (PE_ARRAY_SIZE(args) - ARG_COUNTS - 1) * sizeof(args[0]));
    const uint64_t g[3] = {(uint64_t)pl.wg * (uint64_t)pl.n_chunks, (uint64_t)pl.n_blocks,
                           pl.cpu ? (uint64_t)B
                                  : (uint64_t)((Hk + pl.hb - 1) / pl.hb) * (uint64_t)B};
    for (int i = 0; i < 3; i++)
        if (g[i] > (uint64_t)SIZE_MAX || (i > 0 && g[i] > (uint64_t)UINT32_MAX))
            return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                            "attention: %llu work-groups in dimension %d do not fit this device",
                            (unsigned long long)g[i], i);
    PE_RETURN_IF_ERROR(pl.cpu ? pe_cl_set_args(be, p, args, PE_ARRAY_SIZE(args))
                              : pe_cl_set_args(be, p, gargs, PE_ARRAY_SIZE(gargs)));
    if (split && !pl.merge_last) {
        const cl_long4 mdims = long4_of(Dv, Hq, Tq, pl.n_chunks);
        const cl_long nr = (cl_long)n_rows;
        const struct pe_cl_arg margs[] = {ARG(o_mem), ARG(o_off), ARG(o_st), ARG(part),
                                          ARG(s_mem), ARG(s_off), ARG(s_st), ARG(mdims),
                                          ARG(nr)};
        /* set now too: a failure here leaves dst untouched */
        PE_RETURN_IF_ERROR(pe_cl_set_args(be, pm, margs, PE_ARRAY_SIZE(margs)));
    }
    if (be->base.prepare_only)
        return POSENC_OK;

    /* ---- launches: the first writes dst only without a split ---- */
    const size_t global[3] = {(size_t)g[0], (size_t)g[1], (size_t)g[2]};
    const size_t local[3] = {pl.wg, 1, 1};
    PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
    cl_event ev = NULL;
    cl_int err =
        clEnqueueNDRangeKernel(be->queue, p->kernel, 3, NULL, global, local, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return fa_fail(be, "clEnqueueNDRangeKernel(pe_flash)", err);
    pe_cl_track(be, ev);
    if (split && pl.merge_last) {
        /* merged by pe_flash_cpu's last work-item of each head block */
    } else if (split && pl.cpu) { /* pe_flash_cpu_merge: a work-item per row */
        const size_t mg[3] = {(size_t)n_rows, 1, 1}, ml[3] = {1, 1, 1};
        PE_RETURN_IF_ERROR(pe_cl_before_enqueue(be));
        ev = NULL;
        err = clEnqueueNDRangeKernel(be->queue, pm->kernel, 1, NULL, mg, ml, 0, NULL, &ev);
        if (err != CL_SUCCESS)
            return fa_fail(be, "clEnqueueNDRangeKernel(pe_flash_cpu_merge)", err);
        pe_cl_track(be, ev);
    } else if (split) {
        const uint64_t n[3] = {(uint64_t)Dv, n_rows, 1};
        const cl_long4 mdims = long4_of(Dv, Hq, Tq, pl.n_chunks);
        const cl_long nr = (cl_long)n_rows;
        const struct pe_cl_arg margs[] = {ARG(o_mem), ARG(o_off), ARG(o_st), ARG(part),
                                          ARG(s_mem), ARG(s_off), ARG(s_st), ARG(mdims),
                                          ARG(nr)};
        PE_RETURN_IF_ERROR(pe_cl_launch(be, pm, margs, PE_ARRAY_SIZE(margs), n));
    }
    return POSENC_OK;
}

/* Both kernels rotate k themselves (FA_KROT): pe_flash_cpu in registers after loading a
 * row, pe_flash as it loads each slice. */
bool pe_cl_attn_krot(struct pe_backend *base, int64_t D, int64_t Dv, int64_t rows)
{
    (void)base;
    (void)D;
    (void)Dv;
    (void)rows;
    return true;
}

posenc_status pe_cl_attn_fused(struct pe_backend *base, const struct pe_attn_fused_op *op)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    /* the programs this call asks for stay in the program cache until it is done */
    const int was_pinning = be->pinning;
    if (!was_pinning) {
        be->pin_gen++;
        be->pinning = 1;
    }
    cl_mem ms = NULL;
    posenc_status st = fused(be, op, &ms);
    /* OpenCL keeps a released buffer until the commands enqueued on it are done */
    if (ms)
        pe_cl_release_mem(be, ms);
    be->pinning = was_pinning;
    return st;
}
