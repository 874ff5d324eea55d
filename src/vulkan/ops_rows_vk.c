/*
 * ops_rows_vk.c - the Vulkan host side of posenc_fill (shaders/fill.comp) and
 * posenc_set_rows (shaders/set_rows.comp): push constants and grids as laid out in
 * src/kernel_abi.h, one dispatch each.
 */
#include "vk_internal.h"

#include "kernel_abi.h"

#include <inttypes.h>
#include <string.h>

/* SPIR-V built by shaders/meson.build: fill_<f32|f16>, set_rows_<src><dst>. */
static const uint32_t spv_fill_f32[] =
#include "shaders/fill_f32.spv.h"
    ;
static const uint32_t spv_fill_f16[] =
#include "shaders/fill_f16.spv.h"
    ;
static const uint32_t spv_set_rows_00[] =
#include "shaders/set_rows_00.spv.h"
    ;
static const uint32_t spv_set_rows_01[] =
#include "shaders/set_rows_01.spv.h"
    ;
static const uint32_t spv_set_rows_10[] =
#include "shaders/set_rows_10.spv.h"
    ;
static const uint32_t spv_set_rows_11[] =
#include "shaders/set_rows_11.spv.h"
    ;

static const struct {
    const char *name;
    const uint32_t *code;
    size_t size;
} set_rows_shaders[4] = {
    /* indexed by src_f16 << 1 | dst_f16 */
    {"set_rows_00", spv_set_rows_00, sizeof spv_set_rows_00},
    {"set_rows_01", spv_set_rows_01, sizeof spv_set_rows_01},
    {"set_rows_10", spv_set_rows_10, sizeof spv_set_rows_10},
    {"set_rows_11", spv_set_rows_11, sizeof spv_set_rows_11},
};

/* Workgroups per dispatch on CPU devices (lavapipe pays per workgroup). */
#define PE_VK_ROWS_CPU_GROUPS 64u

/* n_total = product of ne, as a uint32 with room for the grid-stride loop. */
static posenc_status put_total(struct pe_vk_backend *be, const char *op, const int64_t ne[4],
                               uint32_t *out)
{
    uint64_t n = 1;
    for (int k = 0; k < 4; k++) {
        if ((uint64_t)ne[k] > UINT32_MAX || n * (uint64_t)ne[k] > UINT32_MAX) {
            n = UINT64_MAX;
            break;
        }
        n *= (uint64_t)ne[k];
    }
    if (n == UINT64_MAX || !pe_vk_grid_fits(be, n, PE_VK_ROWS_WG))
        return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan %s: %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64
                        " elements is more than this backend handles in one launch",
                        op, ne[0], ne[1], ne[2], ne[3]);
    *out = (uint32_t)n;
    return POSENC_OK;
}

posenc_status pe_vk_fill(struct pe_backend *b, const struct pe_fill_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    const struct pe_view *d = &op->dst;
    struct pe_vk_fill_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind bind;
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, "fill", d, 4, d->ne, &pc.off,
                                      (uint32_t *const[]){&pc.st0, &pc.st1, &pc.st2, &pc.st3},
                                      "dst", &bind));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "fill", &pc.ne0, d->ne[0], "ne[0]"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "fill", &pc.ne1, d->ne[1], "ne[1]"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "fill", &pc.ne2, d->ne[2], "ne[2]"));
    PE_RETURN_IF_ERROR(put_total(be, "fill", d->ne, &pc.n_total));
    pc.bits = op->bits;
    pc.step = op->step;
    const bool f16 = d->dtype == POSENC_DTYPE_F16;
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(pe_vk_pipeline(be, f16 ? "fill_f16" : "fill_f32",
                                      f16 ? spv_fill_f16 : spv_fill_f32,
                                      f16 ? sizeof spv_fill_f16 : sizeof spv_fill_f32, &pipe));
    const uint32_t gx = pe_vk_groups(be, pc.n_total, PE_VK_ROWS_WG, PE_VK_ROWS_CPU_GROUPS);
    return pe_vk_dispatch_rw(be, pipe, 1, &bind, 1u << 0 /* dst */, &pc, sizeof pc, gx, 1, 1);
}

posenc_status pe_vk_set_rows(struct pe_backend *b, const struct pe_set_rows_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    const struct pe_view *s = &op->src, *d = &op->dst, *r = &op->rows;
    struct pe_vk_set_rows_push pc;
    memset(&pc, 0, sizeof pc);
    struct pe_vk_bind binds[3];
    PE_RETURN_IF_ERROR(pe_vk_put_view(
        be, "set_rows", s, 4, s->ne, &pc.src_off,
        (uint32_t *const[]){&pc.src_st0, &pc.src_st1, &pc.src_st2, &pc.src_st3}, "src",
        &binds[0]));
    PE_RETURN_IF_ERROR(pe_vk_put_view(
        be, "set_rows", d, 4, d->ne, &pc.dst_off,
        (uint32_t *const[]){&pc.dst_st0, &pc.dst_st1, &pc.dst_st2, &pc.dst_st3}, "dst",
        &binds[1]));
    uint32_t roff, rst[3];
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, "set_rows", r, 3, r->ne, &roff,
                                      (uint32_t *const[]){&rst[0], &rst[1], &rst[2]}, "rows",
                                      &binds[2]));
    /* the shader reads 32-bit words: i64 offsets and strides double */
    const int64_t w = r->dtype == POSENC_DTYPE_I64 ? 2 : 1;
    const int64_t last = ((int64_t)roff + (r->ne[0] - 1) * rst[0] + (r->ne[1] - 1) * rst[1] +
                          (r->ne[2] - 1) * rst[2]) * w + (w - 1);
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.rows_off, last, "last index word"));
    pc.rows_off = (uint32_t)(roff * w);
    pc.rows_st0 = (uint32_t)(rst[0] * w);
    pc.rows_st1 = (uint32_t)(rst[1] * w);
    pc.rows_st2 = (uint32_t)(rst[2] * w);
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.ne0, s->ne[0], "ne[0]"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.ne1, s->ne[1], "ne[1]"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.ne2, s->ne[2], "ne[2]"));
    PE_RETURN_IF_ERROR(put_total(be, "set_rows", s->ne, &pc.n_total));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.e2, r->ne[1], "rows->ne[1]"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.e3, r->ne[2], "rows->ne[2]"));
    /* (i2 + base2) must not wrap: base2 < d2 of the whole op, i2 < this slice's d2 */
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.base2, op->base2 % r->ne[1], "base2"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.base3, op->base3 % r->ne[2], "base3"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "set_rows", &pc.n_rows, op->n_rows, "dst rows"));
    if (s->ne[2] + (int64_t)pc.base2 > (int64_t)UINT32_MAX ||
        s->ne[3] + (int64_t)pc.base3 > (int64_t)UINT32_MAX)
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED, "vulkan set_rows: dims 2 / 3 too large");
    const int variant = (s->dtype == POSENC_DTYPE_F16) << 1 | (d->dtype == POSENC_DTYPE_F16);
    const uint32_t spec = r->dtype == POSENC_DTYPE_I64;
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(pe_vk_pipeline_spec(be, set_rows_shaders[variant].name,
                                           set_rows_shaders[variant].code,
                                           set_rows_shaders[variant].size, &spec, 1, &pipe));
    const uint32_t gx = pe_vk_groups(be, pc.n_total, PE_VK_ROWS_WG, PE_VK_ROWS_CPU_GROUPS);
    return pe_vk_dispatch_rw(be, pipe, 3, binds, 1u << 1 /* dst */, &pc, sizeof pc, gx, 1, 1);
}
