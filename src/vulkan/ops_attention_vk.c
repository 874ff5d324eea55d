/*
 * ops_attention_vk.c - the Vulkan host side of posenc_attention's three steps (the
 * contract is in internal.h): posenc's own compute shaders, no BLAS.
 *
 *   attn_scores   shaders/attn_scores.comp   logits = scale * Q.K^T, tiled GEMM
 *   attn_softmax  shaders/attn_softmax.comp  row softmax in place, one workgroup per row
 *   attn_output   shaders/attn_output.comp   dst = P.V, tiled GEMM
 *
 * The GEMMs run per (query head h, batch b), reading K/V head h / group (GQA), over
 * output tiles of 64 keys / dims by 16 queries (PE_VK_ATTN_TILE_X, _Y; a 4 x 4 block per
 * invocation, 64 invocations), the reduction staged 16 at a time (PE_VK_ATTN_CHUNK) in
 * shared-memory tiles of both operands; each output is accumulated in f32 in order of the
 * reduction index. (Register blocking matters on CPU implementations too: lavapipe runs
 * every shared / storage access inside a loop one lane at a time, so the 16 products per
 * pair of vec4 shared loads are what keeps it busy.)
 * Every operand is read in place through its own offset and strides (f16 widened by the
 * shaders), so no packing copies or temporaries are needed, and dst / weights are written
 * element by element (no old contents read; f16 as whole words where the layout allows).
 * Push constants: src/kernel_abi.h; the grid is a grid-stride loop over tiles (rows for
 * the softmax), capped on CPU implementations like the other ops.
 */
#include "vk_internal.h"

#include "kernel_abi.h"

#include <inttypes.h>
#include <string.h>

/* SPIR-V built by shaders/meson.build: <shader>_<dtype of operand 1><of operand 2>, 0 = f32,
 * 1 = f16 (scores: q, k; softmax: mask, weights; output: v, dst). */
static const uint32_t spv_attn_scores_00[] =
#include "shaders/attn_scores_00.spv.h"
    ;
static const uint32_t spv_attn_scores_01[] =
#include "shaders/attn_scores_01.spv.h"
    ;
static const uint32_t spv_attn_scores_10[] =
#include "shaders/attn_scores_10.spv.h"
    ;
static const uint32_t spv_attn_scores_11[] =
#include "shaders/attn_scores_11.spv.h"
    ;
static const uint32_t spv_attn_softmax_00[] =
#include "shaders/attn_softmax_00.spv.h"
    ;
static const uint32_t spv_attn_softmax_01[] =
#include "shaders/attn_softmax_01.spv.h"
    ;
static const uint32_t spv_attn_softmax_10[] =
#include "shaders/attn_softmax_10.spv.h"
    ;
static const uint32_t spv_attn_softmax_11[] =
#include "shaders/attn_softmax_11.spv.h"
    ;
static const uint32_t spv_attn_output_00[] =
#include "shaders/attn_output_00.spv.h"
    ;
static const uint32_t spv_attn_output_01[] =
#include "shaders/attn_output_01.spv.h"
    ;
static const uint32_t spv_attn_output_10[] =
#include "shaders/attn_output_10.spv.h"
    ;
static const uint32_t spv_attn_output_11[] =
#include "shaders/attn_output_11.spv.h"
    ;

struct shader {
    const char *name;
    const uint32_t *code;
    size_t size;
};
#define SHADER(n) {#n, spv_##n, sizeof spv_##n}

/* Indexed by f16(first) * 2 + f16(second). */
static const struct shader scores_shaders[4] = {
    SHADER(attn_scores_00), SHADER(attn_scores_01), SHADER(attn_scores_10),
    SHADER(attn_scores_11),
};
static const struct shader softmax_shaders[4] = {
    SHADER(attn_softmax_00), SHADER(attn_softmax_01), SHADER(attn_softmax_10),
    SHADER(attn_softmax_11),
};
static const struct shader output_shaders[4] = {
    SHADER(attn_output_00), SHADER(attn_output_01), SHADER(attn_output_10),
    SHADER(attn_output_11),
};

/* Workgroups per dispatch on CPU implementations (as the other ops): each one loops over
 * several tiles / rows there. */
#define PE_VK_ATTN_CPU_GROUPS 64u

static int f16(const struct pe_view *v)
{
    return v->dtype == POSENC_DTYPE_F16;
}

/* Magic numbers of a divisor d >= 1; its shift goes to bits `at` of *shifts. */
static void magic(uint32_t d, uint32_t *out_magic, uint32_t *shifts, int at)
{
    uint32_t l;
    pe_vk_magic(d, out_magic, &l);
    *shifts |= l << at;
}

/* A view's offset and four strides into push constants pc.<f>_off, pc.<f>_st0..3 (dims
 * of one element: stride 0), checking that every index fits in uint32. */
#define PUT_VIEW4(be, name, v, pc, f, label, bind)                                           \
    pe_vk_put_view(be, name, v, 4, (v)->ne, &(pc).f##_off,                                   \
                   (uint32_t *const[]){&(pc).f##_st0, &(pc).f##_st1, &(pc).f##_st2,          \
                                       &(pc).f##_st3},                                       \
                   label, bind)

/* Whether an f16 output whose rows are dim 0 (pushed offset `off` and strides st[0..3])
 * can be written two elements to a word: rows contiguous, even in length and starting on
 * even elements. */
static bool pairs_ok(const struct pe_view *v, uint32_t off, const uint32_t st[4])
{
    if (!f16(v) || v->ne[0] < 2 || (v->ne[0] & 1) != 0 || st[0] != 1u || (off & 1u) != 0)
        return false;
    return (st[1] & 1u) == 0 && (st[2] & 1u) == 0 && (st[3] & 1u) == 0;
}

/* write_mask: the bindings the shader writes (pe_vk_dispatch_rw) */
static posenc_status launch(struct pe_vk_backend *be, const struct shader *s,
                            const struct pe_vk_bind bufs[3], uint32_t write_mask,
                            const void *push, uint32_t push_size, uint32_t n_groups)
{
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(pe_vk_pipeline(be, s->name, s->code, s->size, &pipe));
    uint32_t gx = pe_vk_groups(be, n_groups, 1, PE_VK_ATTN_CPU_GROUPS);
    return pe_vk_dispatch_rw(be, pipe, 3, bufs, write_mask, push, push_size, gx, 1, 1);
}

/*
 * The common part of the two GEMMs: extents, tiles and divisors. n_x, n_y: the output
 * tile grid's extents; n_h heads, n_b batches, n_red the reduction length.
 */
static posenc_status gemm_grid(struct pe_vk_backend *be, const char *name, int64_t n_red,
                               int64_t n_x, int64_t n_y, int64_t n_h, int64_t n_b,
                               int64_t group, struct pe_vk_attn_gemm_push *pc)
{
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc->n_red, n_red, "reduction length"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc->n_x, n_x, "tile grid x extent"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc->n_y, n_y, "tile grid y extent"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc->n_h, n_h, "query heads"));
    const int64_t TX = (int64_t)PE_VK_ATTN_TILE_X, TY = (int64_t)PE_VK_ATTN_TILE_Y;
    const int64_t tiles_x = (n_x + TX - 1) / TX, tiles_y = (n_y + TY - 1) / TY;
    /* the shaders form n_red + PE_VK_ATTN_CHUNK (the chunk loop) and indices up to a
     * whole tile past n_x, n_y in uint32: those must not wrap either */
    if (n_red > (int64_t)(UINT32_MAX - PE_VK_ATTN_CHUNK) || n_x > (int64_t)UINT32_MAX - TX ||
        n_y > (int64_t)UINT32_MAX - TY || group < 1 || group > n_h ||
        tiles_x * tiles_y > INT64_MAX / n_h / n_b ||
        !pe_vk_grid_fits(be, (uint64_t)(tiles_x * tiles_y * n_h * n_b), 1))
        return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan %s: %" PRId64 " x %" PRId64 " tiles of %" PRId64
                        " heads x %" PRId64 " batches is more than this backend handles in "
                        "one launch",
                        name, tiles_x, tiles_y, n_h, n_b);
    pc->tiles_x = (uint32_t)tiles_x;
    pc->tiles_y = (uint32_t)tiles_y;
    pc->n_tiles = (uint32_t)(tiles_x * tiles_y * n_h * n_b);
    magic(pc->tiles_x, &pc->tx_magic, &pc->shifts, 0);
    magic(pc->tiles_y, &pc->ty_magic, &pc->shifts, 8);
    magic(pc->n_h, &pc->h_magic, &pc->shifts, 16);
    magic((uint32_t)group, &pc->g_magic, &pc->shifts, 24);
    return POSENC_OK;
}

/* ---- scores -------------------------------------------------------------------------- */

posenc_status pe_vk_attn_scores(struct pe_backend *b, const struct pe_attn_scores_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "attention scores";
    const struct pe_view *q = &op->q, *k = &op->k, *l = &op->logits;
    const int64_t D = q->ne[0], Hq = q->ne[1], Tq = q->ne[2], B = q->ne[3], Tk = k->ne[2];
    if (D <= 0 || Hq <= 0 || Tq <= 0 || B <= 0 || Tk <= 0)
        return POSENC_OK;

    struct pe_vk_attn_gemm_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind bufs[3];
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, q, pc, a, "q", &bufs[0]));
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, k, pc, b, "k", &bufs[1]));
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, l, pc, c, "logits", &bufs[2]));
    PE_RETURN_IF_ERROR(gemm_grid(be, name, D, Tk, Tq, Hq, B, op->group, &pc));
    pc.scale = op->scale_f32;

    return launch(be, &scores_shaders[f16(q) * 2 + f16(k)], bufs, 1u << 2 /* logits */, &pc,
                  sizeof pc, pc.n_tiles);
}

/* ---- softmax ------------------------------------------------------------------------- */

posenc_status pe_vk_attn_softmax(struct pe_backend *b, const struct pe_attn_softmax_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "attention softmax";
    const struct pe_view *l = &op->logits;
    const bool has_mask = op->mask.mem != NULL, has_w = op->weights.mem != NULL;
    const struct pe_view *mk = has_mask ? &op->mask : l, *w = has_w ? &op->weights : l;
    const int64_t Tk = l->ne[0], Tq = l->ne[1], Hq = l->ne[2], B = l->ne[3];
    if (Tk <= 0 || Tq <= 0 || Hq <= 0 || B <= 0)
        return POSENC_OK;

    struct pe_vk_attn_softmax_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind bufs[3]; /* logits, mask, weights (the logits when absent) */
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, l, pc, lg, "logits", &bufs[0]));
    bufs[1] = bufs[2] = bufs[0];
    if (has_mask)
        PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, mk, pc, mk, "mask", &bufs[1]));
    if (has_w)
        PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, w, pc, w, "weights", &bufs[2]));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc.n_k, Tk, "keys"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc.n_q, Tq, "queries"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, name, &pc.n_h, Hq, "query heads"));
    /* the shader forms q + q_offset and the key loops' k + PE_VK_ATTN_SOFTMAX_WG in uint32:
     * positions fit int32 (the front end checks it), and so must the key count */
    if (Tk > INT32_MAX || op->q_offset < 0 || op->q_offset + Tq - 1 > INT32_MAX ||
        op->k_offset < 0 || op->k_offset > INT32_MAX || Tq * Hq > INT64_MAX / B ||
        !pe_vk_grid_fits(be, (uint64_t)(Tq * Hq * B), 1))
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan %s: %" PRId64 " keys, %" PRId64 " rows and offsets %" PRId64
                        ", %" PRId64 " do not fit this backend's 32-bit indexing",
                        name, Tk, Tq * Hq * B, op->q_offset, op->k_offset);
    pc.n_rows = (uint32_t)(Tq * Hq * B);
    pc.q_offset = (uint32_t)op->q_offset;
    pc.k_offset = (uint32_t)op->k_offset;
    magic(pc.n_q, &pc.q_magic, &pc.shifts, 0);
    magic(pc.n_h, &pc.h_magic, &pc.shifts, 8);
    pc.flags = (op->causal ? PE_ATTN_FLAG_CAUSAL : 0u) | (has_mask ? PE_ATTN_FLAG_HAS_MASK : 0u) |
               (has_w ? PE_ATTN_FLAG_HAS_W : 0u);
    const uint32_t w_st[4] = {pc.w_st0, pc.w_st1, pc.w_st2, pc.w_st3};
    if (has_w && pairs_ok(w, pc.w_off, w_st))
        pc.flags |= PE_ATTN_FLAG_PAIRS;

    const int v = (has_mask && f16(mk)) * 2 + (has_w && f16(w));
    /* written: the logits (in place) and the weights */
    return launch(be, &softmax_shaders[v], bufs, 1u << 0 | 1u << 2, &pc, sizeof pc, pc.n_rows);
}

/* ---- output -------------------------------------------------------------------------- */

posenc_status pe_vk_attn_output(struct pe_backend *b, const struct pe_attn_output_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "attention output";
    const struct pe_view *p = &op->p, *v = &op->v, *d = &op->dst;
    const int64_t Dv = d->ne[0], Hq = d->ne[1], Tq = d->ne[2], B = d->ne[3], Tk = p->ne[0];
    if (Dv <= 0 || Hq <= 0 || Tq <= 0 || B <= 0 || Tk <= 0)
        return POSENC_OK;

    struct pe_vk_attn_gemm_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind bufs[3];
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, p, pc, a, "probabilities", &bufs[0]));
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, v, pc, b, "v", &bufs[1]));
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, d, pc, c, "dst", &bufs[2]));
    PE_RETURN_IF_ERROR(gemm_grid(be, name, Tk, Dv, Tq, Hq, B, op->group, &pc));
    const uint32_t d_st[4] = {pc.c_st0, pc.c_st1, pc.c_st2, pc.c_st3};
    if (pairs_ok(d, pc.c_off, d_st))
        pc.flags |= PE_ATTN_FLAG_PAIRS;
    pc.scale = 1.0f;

    return launch(be, &output_shaders[f16(v) * 2 + f16(d)], bufs, 1u << 2 /* dst */, &pc,
                  sizeof pc, pc.n_tiles);
}

/* Before posenc_attention's first launch (backend.h, attn_prepare): the pipelines of its
 * three steps, created now if this is their first use, so that a failed creation cannot
 * come after the softmax has written weights or a query block has written dst. The
 * variants are the ones the steps pick (the same for every block). */
posenc_status pe_vk_attn_prepare(struct pe_backend *b, const struct pe_attn_scores_op *so,
                                 const struct pe_attn_softmax_op *sm,
                                 const struct pe_attn_output_op *oo)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    const bool has_mask = sm->mask.mem != NULL, has_w = sm->weights.mem != NULL;
    const struct shader *use[3] = {
        &scores_shaders[f16(&so->q) * 2 + f16(&so->k)],
        &softmax_shaders[(has_mask && f16(&sm->mask)) * 2 + (has_w && f16(&sm->weights))],
        &output_shaders[f16(&oo->v) * 2 + f16(&oo->dst)],
    };
    for (int i = 0; i < 3; i++) {
        VkPipeline pipe;
        PE_RETURN_IF_ERROR(pe_vk_pipeline(be, use[i]->name, use[i]->code, use[i]->size, &pipe));
    }
    return POSENC_OK;
}
