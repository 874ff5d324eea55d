/*
 * ops_softmax_vk.c - the Vulkan host side of posenc_softmax (internal.h, struct
 * pe_softmax_op): one dispatch of shaders/softmax.comp, one workgroup of PE_VK_SM_WG
 * invocations per row at a time (grid-stride over rows, capped on CPU implementations as
 * the other ops). Push constants: struct pe_vk_softmax_push (src/kernel_abi.h). The
 * per-head slopes go through a host table (pe_vk_table slot 0); x, dst, mask and sinks
 * are read in place through their own offsets and strides (windows when a buffer is
 * larger than the binding limit; src/split.c has cut the op so that each view fits).
 */
#include "vk_internal.h"

#include "kernel_abi.h"

#include <inttypes.h>
#include <string.h>

/* SPIR-V built by shaders/meson.build: softmax_<x><dst><mask>, 0 = f32, 1 = f16. */
static const uint32_t spv_softmax_000[] =
#include "shaders/softmax_000.spv.h"
    ;
static const uint32_t spv_softmax_001[] =
#include "shaders/softmax_001.spv.h"
    ;
static const uint32_t spv_softmax_010[] =
#include "shaders/softmax_010.spv.h"
    ;
static const uint32_t spv_softmax_011[] =
#include "shaders/softmax_011.spv.h"
    ;
static const uint32_t spv_softmax_100[] =
#include "shaders/softmax_100.spv.h"
    ;
static const uint32_t spv_softmax_101[] =
#include "shaders/softmax_101.spv.h"
    ;
static const uint32_t spv_softmax_110[] =
#include "shaders/softmax_110.spv.h"
    ;
static const uint32_t spv_softmax_111[] =
#include "shaders/softmax_111.spv.h"
    ;

struct shader {
    const char *name;
    const uint32_t *code;
    size_t size;
};
#define SHADER(n) {#n, spv_##n, sizeof spv_##n}

/* Indexed by f16(x) * 4 + f16(dst) * 2 + f16(mask). */
static const struct shader softmax_shaders[8] = {
    SHADER(softmax_000), SHADER(softmax_001), SHADER(softmax_010), SHADER(softmax_011),
    SHADER(softmax_100), SHADER(softmax_101), SHADER(softmax_110), SHADER(softmax_111),
};

/* Workgroups per dispatch on CPU implementations: each loops over several rows there. */
#define PE_VK_SM_CPU_GROUPS 64u

static int f16(const struct pe_view *v)
{
    return v->dtype == POSENC_DTYPE_F16;
}

#define PUT_VIEW4(be, name, v, pc, f, label, bind)                                           \
    pe_vk_put_view(be, name, v, 4, (v)->ne, &(pc).f##_off,                                   \
                   (uint32_t *const[]){&(pc).f##_st0, &(pc).f##_st1, &(pc).f##_st2,          \
                                       &(pc).f##_st3},                                       \
                   label, bind)

posenc_status pe_vk_softmax(struct pe_backend *b, const struct pe_softmax_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    static const char name[] = "softmax";
    const struct pe_view *x = &op->x, *d = &op->dst;
    const bool has_mask = op->mask.mem != NULL, has_sinks = op->sinks.mem != NULL;
    const bool has_slopes = has_mask && op->slopes_f32 != NULL;
    const int64_t n = x->ne[0], R = x->ne[1], H = x->ne[2], B = x->ne[3];
    if (n <= 0 || R <= 0 || H <= 0 || B <= 0)
        return POSENC_OK;

    struct pe_vk_softmax_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind bufs[5]; /* x, dst, mask, sinks, slopes (x where absent) */
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, x, pc, x, "x", &bufs[0]));
    PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, d, pc, d, "dst", &bufs[1]));
    bufs[2] = bufs[3] = bufs[4] = bufs[0];
    if (has_mask)
        PE_RETURN_IF_ERROR(PUT_VIEW4(be, name, &op->mask, pc, m, "mask", &bufs[2]));
    if (has_sinks)
        PE_RETURN_IF_ERROR(pe_vk_put_view(be, name, &op->sinks, 1, op->sinks.ne, &pc.s_off,
                                          (uint32_t *const[]){&pc.s_st0}, "sinks", &bufs[3]));
    /* the shader forms k + PE_VK_SM_WG and h_off + i2, b_off + i3 in uint32 */
    const uint64_t rows = (uint64_t)R * (uint64_t)H * (uint64_t)B;
    if (n > (int64_t)(UINT32_MAX - 2u * PE_VK_SM_WG) || R > (int64_t)UINT32_MAX ||
        H > (int64_t)UINT32_MAX || op->n_head > (int64_t)UINT32_MAX ||
        op->b_off + B > (int64_t)UINT32_MAX || rows > (uint64_t)UINT32_MAX ||
        !pe_vk_grid_fits(be, rows, 1))
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan %s: rows of %" PRId64 " elements, %" PRIu64
                        " rows do not fit this backend's 32-bit indexing",
                        name, n, rows);
    pc.n = (uint32_t)n;
    pc.n_r = (uint32_t)R;
    pc.n_h = (uint32_t)H;
    pc.n_rows = (uint32_t)rows;
    pc.m_ne2 = has_mask ? (uint32_t)op->mask.ne[2] : 1u;
    pc.m_ne3 = has_mask ? (uint32_t)op->mask.ne[3] : 1u;
    pc.h_off = (uint32_t)op->h_off;
    pc.b_off = (uint32_t)op->b_off;
    pc.scale = op->scale_f32;
    pc.flags = (has_mask ? PE_SM_FLAG_MASK : 0u) | (has_sinks ? PE_SM_FLAG_SINKS : 0u) |
               (has_slopes ? PE_SM_FLAG_SLOPES : 0u);
    if (f16(d) && (n & 1) == 0 && pc.d_st0 == 1u &&
        ((pc.d_off | pc.d_st1 | pc.d_st2 | pc.d_st3) & 1u) == 0)
        pc.flags |= PE_SM_FLAG_PAIRS;
    if (has_slopes)
        PE_RETURN_IF_ERROR(
            pe_vk_table(be, 0, op->slopes_f32, (size_t)op->n_head * sizeof(float), &bufs[4]));

    const struct shader *s =
        &softmax_shaders[f16(x) * 4 + f16(d) * 2 + (has_mask && f16(&op->mask))];
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(pe_vk_pipeline(be, s->name, s->code, s->size, &pipe));
    const uint32_t gx = pe_vk_groups(be, rows, 1, PE_VK_SM_CPU_GROUPS);
    return pe_vk_dispatch_rw(be, pipe, 5, bufs, 1u << 1 /* dst */, &pc, sizeof pc, gx, 1, 1);
}
