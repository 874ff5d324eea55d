/*
 * ops_encodings_vk.c - the Vulkan host side of learned positions (shaders/learned.comp,
 * learned_bwd.comp), grid resize (resize.comp) and the attention-logit biases
 * (relbias.comp, relbias_bwd.comp, alibi.comp); the same contract and the same work
 * decomposition as src/opencl/ops_encodings.c.
 *
 * Each op picks a shader variant by the storage types of its tensors (shaders/meson.build),
 * fills its push constants (src/kernel_abi.h), copies its small host tables (segment
 * lists, taps, buckets, slopes) into fresh ranges of the open batch (pe_vk_table) and
 * dispatches a flat grid-stride loop (pe_vk_dispatch_rw, ops_vulkan.c). Every shader here
 * writes binding 0 only (dst, or the gradient table: shaders/encodings_io.glsl); the others
 * are read, so ops that share only inputs need no barrier between them.
 */
#include "vk_internal.h"

#include "kernel_abi.h"

#include <inttypes.h>
#include <string.h>

/* SPIR-V built by shaders/meson.build: <op>_<dst>_<x>[_<table>] storage types. */
static const uint32_t spv_learned_f32_f32_f32[] =
#include "shaders/learned_f32_f32_f32.spv.h"
    ;
static const uint32_t spv_learned_f32_f32_f16[] =
#include "shaders/learned_f32_f32_f16.spv.h"
    ;
static const uint32_t spv_learned_f32_f16_f32[] =
#include "shaders/learned_f32_f16_f32.spv.h"
    ;
static const uint32_t spv_learned_f32_f16_f16[] =
#include "shaders/learned_f32_f16_f16.spv.h"
    ;
static const uint32_t spv_learned_f16_f32_f32[] =
#include "shaders/learned_f16_f32_f32.spv.h"
    ;
static const uint32_t spv_learned_f16_f32_f16[] =
#include "shaders/learned_f16_f32_f16.spv.h"
    ;
static const uint32_t spv_learned_f16_f16_f32[] =
#include "shaders/learned_f16_f16_f32.spv.h"
    ;
static const uint32_t spv_learned_f16_f16_f16[] =
#include "shaders/learned_f16_f16_f16.spv.h"
    ;
static const uint32_t spv_relbias_f32_f32_f32[] =
#include "shaders/relbias_f32_f32_f32.spv.h"
    ;
static const uint32_t spv_relbias_f32_f32_f16[] =
#include "shaders/relbias_f32_f32_f16.spv.h"
    ;
static const uint32_t spv_relbias_f32_f16_f32[] =
#include "shaders/relbias_f32_f16_f32.spv.h"
    ;
static const uint32_t spv_relbias_f32_f16_f16[] =
#include "shaders/relbias_f32_f16_f16.spv.h"
    ;
static const uint32_t spv_relbias_f16_f32_f32[] =
#include "shaders/relbias_f16_f32_f32.spv.h"
    ;
static const uint32_t spv_relbias_f16_f32_f16[] =
#include "shaders/relbias_f16_f32_f16.spv.h"
    ;
static const uint32_t spv_relbias_f16_f16_f32[] =
#include "shaders/relbias_f16_f16_f32.spv.h"
    ;
static const uint32_t spv_relbias_f16_f16_f16[] =
#include "shaders/relbias_f16_f16_f16.spv.h"
    ;
static const uint32_t spv_learned_bwd_f32_f32[] =
#include "shaders/learned_bwd_f32_f32.spv.h"
    ;
static const uint32_t spv_learned_bwd_f32_f16[] =
#include "shaders/learned_bwd_f32_f16.spv.h"
    ;
static const uint32_t spv_learned_bwd_f16_f32[] =
#include "shaders/learned_bwd_f16_f32.spv.h"
    ;
static const uint32_t spv_learned_bwd_f16_f16[] =
#include "shaders/learned_bwd_f16_f16.spv.h"
    ;
static const uint32_t spv_resize_f32_f32[] =
#include "shaders/resize_f32_f32.spv.h"
    ;
static const uint32_t spv_resize_f32_f16[] =
#include "shaders/resize_f32_f16.spv.h"
    ;
static const uint32_t spv_resize_f16_f32[] =
#include "shaders/resize_f16_f32.spv.h"
    ;
static const uint32_t spv_resize_f16_f16[] =
#include "shaders/resize_f16_f16.spv.h"
    ;
static const uint32_t spv_relbias_bwd_f32_f32[] =
#include "shaders/relbias_bwd_f32_f32.spv.h"
    ;
static const uint32_t spv_relbias_bwd_f32_f16[] =
#include "shaders/relbias_bwd_f32_f16.spv.h"
    ;
static const uint32_t spv_relbias_bwd_f16_f32[] =
#include "shaders/relbias_bwd_f16_f32.spv.h"
    ;
static const uint32_t spv_relbias_bwd_f16_f16[] =
#include "shaders/relbias_bwd_f16_f16.spv.h"
    ;
static const uint32_t spv_alibi_f32_f32[] =
#include "shaders/alibi_f32_f32.spv.h"
    ;
static const uint32_t spv_alibi_f32_f16[] =
#include "shaders/alibi_f32_f16.spv.h"
    ;
static const uint32_t spv_alibi_f16_f32[] =
#include "shaders/alibi_f16_f32.spv.h"
    ;
static const uint32_t spv_alibi_f16_f16[] =
#include "shaders/alibi_f16_f16.spv.h"
    ;

struct shader {
    const char *name;
    const uint32_t *code;
    size_t size;
};
#define SHADER(n) {#n, spv_##n, sizeof spv_##n}

/* Indexed by dst_f16 * 4 + x_f16 * 2 + table_f16. */
static const struct shader learned_shaders[8] = {
    SHADER(learned_f32_f32_f32), SHADER(learned_f32_f32_f16), SHADER(learned_f32_f16_f32),
    SHADER(learned_f32_f16_f16), SHADER(learned_f16_f32_f32), SHADER(learned_f16_f32_f16),
    SHADER(learned_f16_f16_f32), SHADER(learned_f16_f16_f16),
};
static const struct shader relbias_shaders[8] = {
    SHADER(relbias_f32_f32_f32), SHADER(relbias_f32_f32_f16), SHADER(relbias_f32_f16_f32),
    SHADER(relbias_f32_f16_f16), SHADER(relbias_f16_f32_f32), SHADER(relbias_f16_f32_f16),
    SHADER(relbias_f16_f16_f32), SHADER(relbias_f16_f16_f16),
};
/* Indexed by dst_f16 * 2 + x_f16. */
static const struct shader learned_bwd_shaders[4] = {
    SHADER(learned_bwd_f32_f32), SHADER(learned_bwd_f32_f16), SHADER(learned_bwd_f16_f32),
    SHADER(learned_bwd_f16_f16),
};
static const struct shader resize_shaders[4] = {
    SHADER(resize_f32_f32), SHADER(resize_f32_f16), SHADER(resize_f16_f32),
    SHADER(resize_f16_f16),
};
static const struct shader relbias_bwd_shaders[4] = {
    SHADER(relbias_bwd_f32_f32), SHADER(relbias_bwd_f32_f16), SHADER(relbias_bwd_f16_f32),
    SHADER(relbias_bwd_f16_f16),
};
static const struct shader alibi_shaders[4] = {
    SHADER(alibi_f32_f32), SHADER(alibi_f32_f16), SHADER(alibi_f16_f32), SHADER(alibi_f16_f16),
};

/* Workgroups per dispatch on CPU implementations (as the sinusoidal op). */
#define PE_VK_ENC_CPU_GROUPS 64u

static int f16(const struct pe_view *v)
{
    return v->dtype == POSENC_DTYPE_F16;
}

/* n_total = n_units * rows for a flat grid-stride loop, or POSENC_ERR_UNSUPPORTED. */
static posenc_status grid_total(struct pe_vk_backend *be, const char *op, int64_t n_units,
                                int64_t rows, uint32_t *out)
{
    if (rows > INT64_MAX / n_units ||
        !pe_vk_grid_fits(be, (uint64_t)(n_units * rows), PE_VK_ENC_WG))
        return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan %s: %" PRId64 " x %" PRId64
                        " work items is more than this backend handles in one launch",
                        op, n_units, rows);
    *out = (uint32_t)(n_units * rows);
    return POSENC_OK;
}

/* Magic numbers of a divisor d (pushed already, >= 1); its shift goes to bits `at`. */
static void magic(uint32_t d, uint32_t *out_magic, uint32_t *shifts, int at)
{
    uint32_t l;
    pe_vk_magic(d, out_magic, &l);
    *shifts |= l << at;
}

/* Whether an f16 dst's rows (dim 0 of n0 elements, pushed offset and strides of dims
 * 0..n-1) are contiguous, even in length and start on even elements: then a unit may be
 * two elements written as one word (PE_ENC_FLAG_PAIRS). */
static bool pairs_ok(const struct pe_view *dst, int64_t n0, uint32_t off, const uint32_t *st,
                     int n)
{
    if (!f16(dst) || n0 < 2 || (n0 & 1) != 0 || st[0] != 1 || (off & 1u) != 0)
        return false;
    for (int k = 1; k < n; k++)
        if ((st[k] & 1u) != 0)
            return false;
    return true;
}

/* The bindings the shaders write (pe_vk_dispatch_rw): binding 0 only. */
#define PE_ENC_WRITES (1u << 0)

static posenc_status launch(struct pe_vk_backend *be, const struct shader *s, uint32_t n_bufs,
                            const struct pe_vk_bind *bufs, const void *push, uint32_t push_size,
                            uint32_t n_total)
{
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(pe_vk_pipeline(be, s->name, s->code, s->size, &pipe));
    uint32_t gx = pe_vk_groups(be, n_total, PE_VK_ENC_WG, PE_VK_ENC_CPU_GROUPS);
    return pe_vk_dispatch_rw(be, pipe, n_bufs, bufs, PE_ENC_WRITES, push, push_size, gx, 1, 1);
}

/* The same with specialization constant 0 = spec (the shaders' path choice). */
static posenc_status launch_spec(struct pe_vk_backend *be, const struct shader *s,
                                 uint32_t spec, uint32_t n_bufs, const struct pe_vk_bind *bufs,
                                 const void *push, uint32_t push_size, uint32_t n_total)
{
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(pe_vk_pipeline_spec(be, s->name, s->code, s->size, &spec, 1, &pipe));
    uint32_t gx = pe_vk_groups(be, n_total, PE_VK_ENC_WG, PE_VK_ENC_CPU_GROUPS);
    return pe_vk_dispatch_rw(be, pipe, n_bufs, bufs, PE_ENC_WRITES, push, push_size, gx, 1, 1);
}

/* ---- learned ------------------------------------------------------------------------- */

posenc_status pe_vk_learned(struct pe_backend *b, const struct pe_learned_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "learned";
    const struct pe_view *dst = &op->dst, *tab = &op->table, *pos = &op->pos;
    const bool has_x = op->x.mem != NULL;
    const struct pe_view *x = has_x ? &op->x : dst;
    const int64_t d = dst->ne[0], T = dst->ne[1], B = dst->ne[2];
    if (d <= 0 || T <= 0 || B <= 0)
        return POSENC_OK;

    struct pe_vk_learned_push pc;
    memset(&pc, 0, sizeof pc);
    const int64_t ne[3] = {d, T, B}, pos_ne[2] = {T, B}, tab_ne[2] = {d, tab->ne[1]};
    struct pe_vk_bind bufs[4]; /* dst, x, table, pos */
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, dst, 3, ne, &pc.dst_off,
                                      (uint32_t *const[]){&pc.dst_st0, &pc.dst_st1, &pc.dst_st2},
                                      "dst", &bufs[0]));
    bufs[1] = bufs[0]; /* not read without x */
    if (has_x)
        PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, x, 3, ne, &pc.x_off,
                                          (uint32_t *const[]){&pc.x_st0, &pc.x_st1, &pc.x_st2},
                                          "x", &bufs[1]));
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, tab, 2, tab_ne, &pc.tab_off,
                                      (uint32_t *const[]){&pc.tab_st0, &pc.tab_st1}, "table",
                                      &bufs[2]));
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, pos, 2, pos_ne, &pc.pos_off,
                                      (uint32_t *const[]){&pc.pos_st0, &pc.pos_st1}, "pos",
                                      &bufs[3]));
    const int v = f16(dst) * 4 + (has_x && f16(x)) * 2 + f16(tab);

    /* The vector path (learned.comp): unit strides, rows aligned to G elements and d a
     * multiple of G (G = 4 when every tensor is f32, else 8): one position load and whole
     * vec4 / uvec4 accesses per G elements. */
    const uint32_t g = v == 0 ? 4u : 8u;
    const uint32_t a_dst = pc.dst_off | pc.dst_st1 | pc.dst_st2;
    const uint32_t a_x = has_x ? pc.x_off | pc.x_st1 | pc.x_st2 : 0u;
    const uint32_t a_tab = pc.tab_off | pc.tab_st1;
    if (pc.dst_st0 == 1 && (!has_x || pc.x_st0 == 1) && pc.tab_st0 == 1 &&
        ((a_dst | a_x | a_tab) & (g - 1u)) == 0 && d % (int64_t)g == 0) {
        pc.flags = has_x ? PE_ENC_FLAG_HAS_X : 0u;
        /* positions shared by the batch: a unit covers every batch row (spec 2), the
         * table read once for all of them */
        const bool shared = pc.pos_st1 == 0 || B == 1;
        const int64_t units = d / (int64_t)g;
        PE_RETURN_IF_ERROR(grid_total(be, name, units, shared ? T : T * B, &pc.n_total));
        pc.n_units = (uint32_t)units;
        pc.ne1 = (uint32_t)T;
        pc.ne2 = (uint32_t)B;
        magic(pc.n_units, &pc.units_magic, &pc.shifts, 0);
        magic(pc.ne1, &pc.ne1_magic, &pc.shifts, 8);
        return launch_spec(be, &learned_shaders[v], shared ? 2u : 1u, 4, bufs, &pc, sizeof pc,
                           pc.n_total);
    }

    const uint32_t dst_st[3] = {pc.dst_st0, pc.dst_st1, pc.dst_st2};
    const bool pairs = pairs_ok(dst, d, pc.dst_off, dst_st, 3);
    pc.flags = (has_x ? PE_ENC_FLAG_HAS_X : 0u) | (pairs ? PE_ENC_FLAG_PAIRS : 0u);
    const int64_t units = pairs ? d / 2 : d;
    PE_RETURN_IF_ERROR(grid_total(be, name, units, T * B, &pc.n_total));
    pc.n_units = (uint32_t)units; /* units * T * B fits in uint32 */
    pc.ne1 = (uint32_t)T;
    magic(pc.n_units, &pc.units_magic, &pc.shifts, 0);
    magic(pc.ne1, &pc.ne1_magic, &pc.shifts, 8);
    return launch(be, &learned_shaders[v], 4, bufs, &pc, sizeof pc, pc.n_total);
}

posenc_status pe_vk_learned_backward(struct pe_backend *b, const struct pe_learned_bwd_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "learned_backward";
    const struct pe_view *dtab = &op->dtable, *dy = &op->dy;
    const int64_t d = dtab->ne[0], n_seg = op->n_segments, T = op->n_tokens;
    if (d <= 0 || n_seg <= 0 || T <= 0)
        return POSENC_OK;

    struct pe_vk_learned_bwd_push pc;
    memset(&pc, 0, sizeof pc);
    const int64_t tab_ne[2] = {d, dtab->ne[1]}, dy_ne[3] = {d, T, dy->ne[2]};
    struct pe_vk_bind bufs[5]; /* dtable, dy, seg_start, seg_row, entries */
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, dtab, 2, tab_ne, &pc.dtab_off,
                                      (uint32_t *const[]){&pc.dtab_st0, &pc.dtab_st1}, "dtable",
                                      &bufs[0]));
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, dy, 3, dy_ne, &pc.dy_off,
                                      (uint32_t *const[]){&pc.dy_st0, &pc.dy_st1, &pc.dy_st2},
                                      "dy", &bufs[1]));
    PE_RETURN_IF_ERROR(grid_total(be, name, d, n_seg, &pc.n_total));
    pc.n_i0 = (uint32_t)d;
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc.n_tok, T, "T"));
    magic(pc.n_i0, &pc.i0_magic, &pc.shifts, 0);
    magic(pc.n_tok, &pc.tok_magic, &pc.shifts, 8);

    /* The segment lists: seg_start[n_seg + 1], seg_row[n_seg], entries[seg_start[n_seg]]. */
    const size_t ns = (size_t)n_seg, n_ent = (size_t)op->seg_start[n_seg];
    PE_RETURN_IF_ERROR(pe_vk_table(be, 0, op->seg_start, (ns + 1) * sizeof(int32_t), &bufs[2]));
    PE_RETURN_IF_ERROR(pe_vk_table(be, 1, op->seg_row, ns * sizeof(int32_t), &bufs[3]));
    PE_RETURN_IF_ERROR(pe_vk_table(be, 2, op->entries, n_ent * sizeof(int32_t), &bufs[4]));

    const int v = f16(dtab) * 2 + f16(dy);
    return launch(be, &learned_bwd_shaders[v], 5, bufs, &pc, sizeof pc, pc.n_total);
}

/* ---- resize_2d ----------------------------------------------------------------------- */

posenc_status pe_vk_resize_2d(struct pe_backend *b, const struct pe_resize_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "resize_2d";
    const struct pe_view *src = &op->src, *dst = &op->dst;
    const int64_t d = dst->ne[0], cls = op->cls ? 1 : 0;
    const int64_t rows = cls + op->dst_h * op->dst_w;
    if (d <= 0 || rows <= 0)
        return POSENC_OK;

    struct pe_vk_resize_push pc;
    memset(&pc, 0, sizeof pc);
    const int64_t dst_ne[2] = {d, rows}, src_ne[2] = {d, src->ne[1]};
    struct pe_vk_bind bufs[6]; /* dst, src, wx, wy, ix, iy */
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, dst, 2, dst_ne, &pc.dst_off,
                                      (uint32_t *const[]){&pc.dst_st0, &pc.dst_st1}, "dst",
                                      &bufs[0]));
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, src, 2, src_ne, &pc.src_off,
                                      (uint32_t *const[]){&pc.src_st0, &pc.src_st1}, "src",
                                      &bufs[1]));
    const uint32_t dst_st[2] = {pc.dst_st0, pc.dst_st1};
    const bool pairs = pairs_ok(dst, d, pc.dst_off, dst_st, 2);
    pc.flags = pairs ? PE_ENC_FLAG_PAIRS : 0u;
    const int64_t units = pairs ? d / 2 : d;
    PE_RETURN_IF_ERROR(grid_total(be, name, units, rows, &pc.n_total));
    pc.n_units = (uint32_t)units;
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc.dst_w, op->dst_w, "dst_w"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc.src_w, op->src_w, "src_w"));
    pc.cls = (uint32_t)cls;
    magic(pc.n_units, &pc.units_magic, &pc.shifts, 0);
    magic(pc.dst_w ? pc.dst_w : 1u, &pc.dst_w_magic, &pc.shifts, 8);

    /* Taps: wx[4*dst_w], wy[4*dst_h] (f32), ix[4*dst_w], iy[4*dst_h] (int32). */
    const size_t nw = 4 * (size_t)op->dst_w, nh = 4 * (size_t)op->dst_h;
    PE_RETURN_IF_ERROR(pe_vk_table(be, 0, op->wx_f32, nw * sizeof(float), &bufs[2]));
    PE_RETURN_IF_ERROR(pe_vk_table(be, 1, op->wy_f32, nh * sizeof(float), &bufs[3]));
    PE_RETURN_IF_ERROR(pe_vk_table(be, 2, op->ix, nw * sizeof(int32_t), &bufs[4]));
    PE_RETURN_IF_ERROR(pe_vk_table(be, 3, op->iy, nh * sizeof(int32_t), &bufs[5]));

    const int v = f16(dst) * 2 + f16(src);
    return launch(be, &resize_shaders[v], 6, bufs, &pc, sizeof pc, pc.n_total);
}

/* ---- relbias / alibi: the logits grid [K, Q, H, B] ------------------------------------ */

/* dst, logits (optional) and the flat grid of a bias op (two keys per unit where the
 * dst allows). */
static posenc_status bias_grid(struct pe_vk_backend *be, const char *name,
                               const struct pe_view *dst, const struct pe_view *lg,
                               struct pe_vk_bias_push *pc, struct pe_vk_bind bind[2])
{
    const int64_t *ne = dst->ne;
    PE_RETURN_IF_ERROR(pe_vk_put_view(
        be, name, dst, 4, ne, &pc->dst_off,
        (uint32_t *const[]){&pc->dst_st0, &pc->dst_st1, &pc->dst_st2, &pc->dst_st3}, "dst",
        &bind[0]));
    bind[1] = bind[0]; /* not read without logits */
    if (lg) {
        PE_RETURN_IF_ERROR(pe_vk_put_view(
            be, name, lg, 4, ne, &pc->lg_off,
            (uint32_t *const[]){&pc->lg_st0, &pc->lg_st1, &pc->lg_st2, &pc->lg_st3}, "logits",
            &bind[1]));
        pc->flags |= PE_ENC_FLAG_HAS_X;
    }
    const uint32_t dst_st[4] = {pc->dst_st0, pc->dst_st1, pc->dst_st2, pc->dst_st3};
    const bool pairs = pairs_ok(dst, ne[0], pc->dst_off, dst_st, 4);
    if (pairs)
        pc->flags |= PE_ENC_FLAG_PAIRS;
    const int64_t units = pairs ? ne[0] / 2 : ne[0];
    PE_RETURN_IF_ERROR(grid_total(be, name, units, ne[1] * ne[2] * ne[3], &pc->n_total));
    pc->n_units = (uint32_t)units; /* the product fits in uint32 */
    pc->ne1 = (uint32_t)ne[1];
    pc->ne2 = (uint32_t)ne[2];
    magic(pc->n_units, &pc->units_magic, &pc->shifts, 0);
    magic(pc->ne1, &pc->ne1_magic, &pc->shifts, 8);
    magic(pc->ne2, &pc->ne2_magic, &pc->shifts, 16);
    return POSENC_OK;
}

/* The vector paths of alibi.comp and relbias.comp (kernel_abi.h): when dst's and the
 * logits' (lg, NULL without them) rows are contiguous and start on multiples of 4 elements
 * (f32 views) or 8 (f16 views), K is a multiple of `vk` and Q of `vq`, regrid pc (filled
 * by bias_grid) to units of vk keys of vq queries and return true; else leave it. The
 * vector grid is no larger than the general one, so it fits where that one did. */
static bool bias_vec_grid(struct pe_vk_bias_push *pc, const struct pe_view *dst,
                          const struct pe_view *lg, int64_t vk, uint32_t vq)
{
    const uint32_t a_dst = pc->dst_off | pc->dst_st1 | pc->dst_st2 | pc->dst_st3;
    const uint32_t a_lg = lg ? pc->lg_off | pc->lg_st1 | pc->lg_st2 | pc->lg_st3 : 0u;
    if (pc->dst_st0 != 1 || (lg && pc->lg_st0 != 1) || (a_dst & (f16(dst) ? 7u : 3u)) != 0 ||
        (lg && (a_lg & (f16(lg) ? 7u : 3u)) != 0) || dst->ne[0] % vk != 0 ||
        dst->ne[1] % (int64_t)vq != 0)
        return false;
    pc->n_units = (uint32_t)(dst->ne[0] / vk);
    pc->ne1 = (uint32_t)(dst->ne[1] / vq);
    /* K/vk * Q/vq * H * B: fits, the general grid (K or K/2 per row) did */
    pc->n_total = (uint32_t)((int64_t)pc->n_units * pc->ne1 * dst->ne[2] * dst->ne[3]);
    pc->shifts &= ~0xffffu;
    magic(pc->n_units, &pc->units_magic, &pc->shifts, 0);
    magic(pc->ne1, &pc->ne1_magic, &pc->shifts, 8);
    return true;
}

static bool bias_empty(const struct pe_view *dst)
{
    return dst->ne[0] <= 0 || dst->ne[1] <= 0 || dst->ne[2] <= 0 || dst->ne[3] <= 0;
}

posenc_status pe_vk_relbias(struct pe_backend *b, const struct pe_relbias_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "relbias";
    const struct pe_view *dst = &op->dst, *tab = &op->table;
    const bool has_x = op->logits.mem != NULL;
    const struct pe_view *lg = has_x ? &op->logits : dst;
    if (bias_empty(dst))
        return POSENC_OK;

    struct pe_vk_bias_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind bufs[4]; /* dst, logits, table, buckets */
    PE_RETURN_IF_ERROR(bias_grid(be, name, dst, has_x ? lg : NULL, &pc, bufs));
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, tab, 2, tab->ne, &pc.tab_off,
                                      (uint32_t *const[]){&pc.tab_st0, &pc.tab_st1}, "table",
                                      &bufs[2]));
    /* rel - rel_min = k - q + base, in [0, n_rel) for every (k, q): uint32 arithmetic in
     * the shader wraps to it exactly. */
    const int64_t base = op->k_offset - op->q_offset - op->rel_min;
    uint32_t ubase;
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &ubase, base, "k_offset - q_offset - rel_min"));
    memcpy(&pc.base, &ubase, sizeof ubase);

    PE_RETURN_IF_ERROR(
        pe_vk_table(be, 0, op->bucket, (size_t)op->n_rel * sizeof(int32_t), &bufs[3]));
    const int v = f16(dst) * 4 + (has_x && f16(lg)) * 2 + f16(tab);

    /* The vector path (kernel_abi.h, as alibi's): 4 keys of PE_RELBIAS_VEC_Q queries a
     * unit in the f32 variant, 8 (one uvec4 of halves per row) where dst or the logits are
     * f16; whole vector logits and dst accesses, three divisions per unit instead of per
     * element. Same grid size or smaller than the general one, so it fits where that one
     * did. */
    const int64_t vk = f16(dst) || (has_x && f16(lg)) ? 8 : 4; /* keys per unit */
    const uint32_t spec = PE_RELBIAS_SPEC_VEC | (has_x ? PE_RELBIAS_SPEC_HAS_X : 0u);
    if (bias_vec_grid(&pc, dst, has_x ? lg : NULL, vk, PE_RELBIAS_VEC_Q))
        return launch_spec(be, &relbias_shaders[v], spec, 4, bufs, &pc, sizeof pc, pc.n_total);
    return launch_spec(be, &relbias_shaders[v], 0, 4, bufs, &pc, sizeof pc, pc.n_total);
}

posenc_status pe_vk_relbias_backward(struct pe_backend *b, const struct pe_relbias_bwd_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "relbias_backward";
    const struct pe_view *dtab = &op->dtable, *dl = &op->dlogits;
    const int64_t nb = op->n_buckets, K = dl->ne[0], Q = dl->ne[1], H = dl->ne[2],
                  B = dl->ne[3];
    if (nb <= 0 || bias_empty(dl))
        return POSENC_OK;

    struct pe_vk_relbias_bwd_push pc;
    memset(&pc, 0, sizeof pc);
    const int64_t tab_ne[2] = {nb, H};
    struct pe_vk_bind bufs[4]; /* dtable, dlogits, seg_start, rels */
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, dtab, 2, tab_ne, &pc.dtab_off,
                                      (uint32_t *const[]){&pc.dtab_st0, &pc.dtab_st1}, "dtable",
                                      &bufs[0]));
    PE_RETURN_IF_ERROR(pe_vk_put_view(
        be, name, dl, 4, dl->ne, &pc.dl_off,
        (uint32_t *const[]){&pc.dl_st0, &pc.dl_st1, &pc.dl_st2, &pc.dl_st3}, "dlogits",
        &bufs[1]));
    /* The shader forms k = q + rels[i] + rel_delta and the bounds K - delta in int32. */
    const int64_t delta = op->rel_min + op->q_offset - op->k_offset;
    const int64_t n_rel = op->seg_start[nb];
    const int64_t mag = (delta < 0 ? -delta : delta) + n_rel + K + Q;
    if (mag > INT32_MAX)
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan %s: %" PRId64 " keys, %" PRId64 " queries and offsets "
                        "%" PRId64 ", %" PRId64 " do not fit 32-bit positions",
                        name, K, Q, op->q_offset, op->k_offset);
    pc.rel_delta = (int32_t)delta;
    pc.ne0 = (uint32_t)K;
    pc.ne1 = (uint32_t)Q;
    pc.ne3 = (uint32_t)B;
    PE_RETURN_IF_ERROR(grid_total(be, name, nb, H, &pc.n_total));
    pc.n_buckets = (uint32_t)nb;
    magic(pc.n_buckets, &pc.nb_magic, &pc.shifts, 0);

    PE_RETURN_IF_ERROR(
        pe_vk_table(be, 0, op->seg_start, ((size_t)nb + 1) * sizeof(int32_t), &bufs[2]));
    PE_RETURN_IF_ERROR(pe_vk_table(be, 1, op->rels, (size_t)n_rel * sizeof(int32_t), &bufs[3]));
    const int v = f16(dtab) * 2 + f16(dl);
    return launch(be, &relbias_bwd_shaders[v], 4, bufs, &pc, sizeof pc, pc.n_total);
}

posenc_status pe_vk_alibi(struct pe_backend *b, const struct pe_alibi_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "alibi";
    const struct pe_view *dst = &op->dst;
    const bool has_x = op->logits.mem != NULL;
    const struct pe_view *lg = has_x ? &op->logits : dst;
    if (bias_empty(dst))
        return POSENC_OK;

    struct pe_vk_bias_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind bufs[3]; /* dst, logits, slopes */
    PE_RETURN_IF_ERROR(bias_grid(be, name, dst, has_x ? lg : NULL, &pc, bufs));
    /* dist = q - k + base in int32: the front end keeps positions <= 2^24. */
    const int64_t base = op->q_offset - op->k_offset;
    if (base < INT32_MIN / 2 || base > INT32_MAX / 2 || dst->ne[0] > INT32_MAX / 4 ||
        dst->ne[1] > INT32_MAX / 4)
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan %s: positions do not fit in 32 bits", name);
    pc.base = (int32_t)base;
    if (op->causal)
        pc.flags |= PE_ENC_FLAG_CAUSAL;
    if (op->symmetric)
        pc.flags |= PE_ENC_FLAG_SYMMETRIC;

    PE_RETURN_IF_ERROR(
        pe_vk_table(be, 0, op->slopes_f32, (size_t)dst->ne[2] * sizeof(float), &bufs[2]));
    const int v = f16(dst) * 2 + (has_x && f16(lg));

    /* The vector path (kernel_abi.h): CPU implementations scalarize every buffer access
     * per invocation and component, so one slope load per 16 or 32 elements and whole
     * vec4 / uvec4 accesses are most of the speed there: 4 keys per row in f32, 8 (one
     * uvec4 of halves) in the variants with an f16 tensor, whose views must then start
     * their rows on multiples of 8 elements (f32 views: 4). Same grid size or smaller than
     * the general one, so it fits where that one did. */
    const int64_t vk = v != 0 ? 8 : 4; /* keys per unit */
    const uint32_t spec = PE_ALIBI_SPEC_VEC | (has_x ? PE_ALIBI_SPEC_HAS_X : 0u) |
                          (op->causal ? PE_ALIBI_SPEC_CAUSAL : 0u) |
                          (op->symmetric ? PE_ALIBI_SPEC_SYMMETRIC : 0u);
    if (bias_vec_grid(&pc, dst, has_x ? lg : NULL, vk, PE_ALIBI_VEC_Q))
        return launch_spec(be, &alibi_shaders[v], spec, 3, bufs, &pc, sizeof pc, pc.n_total);
    return launch_spec(be, &alibi_shaders[v], 0, 3, bufs, &pc, sizeof pc, pc.n_total);
}
