/*
 * ops_vulkan.c - op launches of the Vulkan backend: the descriptor set layout shared by
 * the shaders, one compute pipeline per shader variant (created on first use, through a
 * VkPipelineCache), and the sinusoidal op.
 *
 * Buffers are bound whole (descriptor offset 0, VK_WHOLE_SIZE); element offsets and
 * strides travel in push constants (src/kernel_abi.h), so a view may start anywhere.
 */
#include "vk_internal.h"

#include "kernel_abi.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* SPIR-V built by shaders/meson.build (glslc -mfmt=c: an initializer list). */
static const uint32_t spv_sinusoidal_f32_f32[] =
#include "shaders/sinusoidal_f32_f32.spv.h"
    ;
static const uint32_t spv_sinusoidal_f32_f16[] =
#include "shaders/sinusoidal_f32_f16.spv.h"
    ;
static const uint32_t spv_sinusoidal_f16_f32[] =
#include "shaders/sinusoidal_f16_f32.spv.h"
    ;
static const uint32_t spv_sinusoidal_f16_f16[] =
#include "shaders/sinusoidal_f16_f16.spv.h"
    ;

/* Indexed by dst_f16 * 2 + x_f16. */
static const struct {
    const char *name;
    const uint32_t *code;
    size_t size;
} sin_shaders[PE_VK_SIN_VARIANTS] = {
    {"sinusoidal_f32_f32", spv_sinusoidal_f32_f32, sizeof spv_sinusoidal_f32_f32},
    {"sinusoidal_f32_f16", spv_sinusoidal_f32_f16, sizeof spv_sinusoidal_f32_f16},
    {"sinusoidal_f16_f32", spv_sinusoidal_f16_f32, sizeof spv_sinusoidal_f16_f32},
    {"sinusoidal_f16_f16", spv_sinusoidal_f16_f16, sizeof spv_sinusoidal_f16_f16},
};

enum { PE_VK_BINDINGS = 4 }; /* dst, x, pos, freq */

/* Workgroups per dispatch on CPU devices (see pe_vk_sinusoidal). */
#define PE_VK_CPU_MAX_GROUPS 64u

posenc_status pe_vk_ops_init(struct pe_vk_backend *be)
{
    VkDescriptorSetLayoutBinding bind[PE_VK_BINDINGS];
    for (uint32_t i = 0; i < PE_VK_BINDINGS; i++) {
        bind[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    }
    VkDescriptorSetLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = PE_VK_BINDINGS,
        .pBindings = bind,
    };
    VkResult r = vkCreateDescriptorSetLayout(be->dev, &lci, NULL, &be->set_layout);
    if (r != VK_SUCCESS) {
        be->set_layout = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreateDescriptorSetLayout", r);
    }

    VkPushConstantRange range = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        .offset = 0,
        .size = sizeof(struct pe_vk_sinusoidal_push),
    };
    VkPipelineLayoutCreateInfo plci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &be->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &range,
    };
    r = vkCreatePipelineLayout(be->dev, &plci, NULL, &be->sin_layout);
    if (r != VK_SUCCESS) {
        be->sin_layout = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreatePipelineLayout", r);
    }

    /* One set, rewritten by every op: at most one submission is in flight and every op
     * waits for it first (vk_internal.h), so the set is never in use when updated. */
    VkDescriptorPoolSize ps = {
        .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        .descriptorCount = PE_VK_BINDINGS,
    };
    VkDescriptorPoolCreateInfo dpci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = 1,
        .poolSizeCount = 1,
        .pPoolSizes = &ps,
    };
    r = vkCreateDescriptorPool(be->dev, &dpci, NULL, &be->desc_pool);
    if (r != VK_SUCCESS) {
        be->desc_pool = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreateDescriptorPool", r);
    }
    VkDescriptorSetAllocateInfo dsai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = be->desc_pool,
        .descriptorSetCount = 1,
        .pSetLayouts = &be->set_layout,
    };
    r = vkAllocateDescriptorSets(be->dev, &dsai, &be->set);
    if (r != VK_SUCCESS) {
        be->set = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkAllocateDescriptorSets", r);
    }

    VkPipelineCacheCreateInfo pcci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    r = vkCreatePipelineCache(be->dev, &pcci, NULL, &be->pipe_cache);
    if (r != VK_SUCCESS) {
        be->pipe_cache = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreatePipelineCache", r);
    }
    return POSENC_OK;
}

void pe_vk_ops_destroy(struct pe_vk_backend *be)
{
    for (int i = 0; i < PE_VK_SIN_VARIANTS; i++) {
        if (be->sin_pipes[i])
            vkDestroyPipeline(be->dev, be->sin_pipes[i], NULL);
        be->sin_pipes[i] = VK_NULL_HANDLE;
    }
    if (be->pipe_cache)
        vkDestroyPipelineCache(be->dev, be->pipe_cache, NULL);
    if (be->desc_pool)
        vkDestroyDescriptorPool(be->dev, be->desc_pool, NULL); /* frees be->set */
    if (be->sin_layout)
        vkDestroyPipelineLayout(be->dev, be->sin_layout, NULL);
    if (be->set_layout)
        vkDestroyDescriptorSetLayout(be->dev, be->set_layout, NULL);
    be->pipe_cache = VK_NULL_HANDLE;
    be->desc_pool = VK_NULL_HANDLE;
    be->set = VK_NULL_HANDLE;
    be->sin_layout = VK_NULL_HANDLE;
    be->set_layout = VK_NULL_HANDLE;
}

static posenc_status create_pipeline(struct pe_vk_backend *be, const char *name,
                                     const uint32_t *code, size_t size, VkPipelineLayout layout,
                                     VkPipeline *out)
{
    VkShaderModuleCreateInfo smci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = size,
        .pCode = code,
    };
    VkShaderModule module;
    VkResult r = vkCreateShaderModule(be->dev, &smci, NULL, &module);
    if (r != VK_SUCCESS)
        return pe_error(be->base.ctx, r == VK_ERROR_OUT_OF_HOST_MEMORY ||
                                              r == VK_ERROR_OUT_OF_DEVICE_MEMORY
                                          ? POSENC_ERR_OUT_OF_MEMORY
                                          : POSENC_ERR_BACKEND,
                        "vkCreateShaderModule (%s) failed: %s (%d)", name,
                        pe_vk_result_name(r), (int)r);
    VkComputePipelineCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
            },
        .layout = layout,
    };
    r = vkCreateComputePipelines(be->dev, be->pipe_cache, 1, &cpci, NULL, out);
    vkDestroyShaderModule(be->dev, module, NULL);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return pe_error(be->base.ctx, r == VK_ERROR_OUT_OF_HOST_MEMORY ||
                                              r == VK_ERROR_OUT_OF_DEVICE_MEMORY
                                          ? POSENC_ERR_OUT_OF_MEMORY
                                          : POSENC_ERR_BACKEND,
                        "vkCreateComputePipelines (%s) failed: %s (%d)", name,
                        pe_vk_result_name(r), (int)r);
    }
    pe_log(be->base.ctx, POSENC_LOG_DEBUG, "vulkan: built pipeline %s", name);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* sinusoidal                                                                           */
/* ------------------------------------------------------------------------------------ */

/*
 * Magic number for dividing any uint32 by d (1 <= d < 2^32) with a multiply-high, as
 * pe_udiv in shaders/common.glsl does: l = ceil(log2 d), magic = floor(2^32 (2^l - d) / d)
 * + 1 (the "round-up" method, Hacker's Delight 10-9; checked exhaustively over edge
 * cases and randomly over all d and n).
 */
static void pe_vk_magic(uint32_t d, uint32_t *out_magic, uint32_t *out_l)
{
    uint32_t l = 0;
    while (l < 32 && ((uint64_t)1 << l) < d)
        l++;
    *out_l = l;
    *out_magic = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - d)) / d + 1);
}

/* Store a non-negative int64 into a uint32 push constant, or fail naming it. */
static posenc_status put_u32(struct pe_vk_backend *be, uint32_t *dst, int64_t v, const char *what)
{
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan sinusoidal: %s = %" PRId64 " does not fit in 32 bits", what, v);
    *dst = (uint32_t)v;
    return POSENC_OK;
}

/*
 * Offset and strides of a view (dims 0..n-1) as push constants. A stride whose dimension
 * has one element is never used: it is sent as 0. The largest element index must fit in
 * uint32 too (the shader indexes the whole buffer with uint).
 */
static posenc_status put_view(struct pe_vk_backend *be, const struct pe_view *v, int n,
                              const int64_t *ne, uint32_t *off, uint32_t *const st[],
                              const char *name)
{
    char what[48];
    snprintf(what, sizeof what, "%s offset (elements)", name);
    PE_RETURN_IF_ERROR(put_u32(be, off, v->offset, what));
    int64_t max = v->offset;
    for (int k = 0; k < n; k++) {
        int64_t s = ne[k] > 1 ? v->st[k] : 0;
        snprintf(what, sizeof what, "%s stride %d (elements)", name, k);
        PE_RETURN_IF_ERROR(put_u32(be, st[k], s, what));
        if (ne[k] > 1) {
            if (s > 0 && ne[k] - 1 > (INT64_MAX - max) / s)
                max = INT64_MAX;
            else
                max += (ne[k] - 1) * s;
        }
    }
    snprintf(what, sizeof what, "%s largest element index", name);
    uint32_t dummy;
    return put_u32(be, &dummy, max, what);
}

posenc_status pe_vk_sinusoidal(struct pe_backend *b, const struct pe_sinusoidal_op *op)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    const struct pe_view *dst = &op->dst, *x = &op->x, *pos = &op->pos;
    const bool has_x = x->mem != NULL;
    const bool dst_f16 = dst->dtype == POSENC_DTYPE_F16;
    const bool x_f16 = has_x && x->dtype == POSENC_DTYPE_F16;

    int64_t rows = dst->ne[1] * dst->ne[2] * dst->ne[3];
    if (op->half <= 0 || rows <= 0)
        return POSENC_OK;

    struct pe_vk_sinusoidal_push pc;
    memset(&pc, 0, sizeof pc);
    PE_RETURN_IF_ERROR(put_u32(be, &pc.n_half, op->half, "d/2"));
    PE_RETURN_IF_ERROR(put_u32(be, &pc.ne1, dst->ne[1], "dst->ne[1]"));
    PE_RETURN_IF_ERROR(put_u32(be, &pc.ne2, dst->ne[2], "dst->ne[2]"));

    const int64_t dst_ne[4] = {2 * op->half, dst->ne[1], dst->ne[2], dst->ne[3]};
    PE_RETURN_IF_ERROR(put_view(be, dst, 4, dst_ne, &pc.dst_off,
                                (uint32_t *const[]){&pc.dst_st0, &pc.dst_st1, &pc.dst_st2,
                                                    &pc.dst_st3},
                                "dst"));
    if (has_x)
        PE_RETURN_IF_ERROR(put_view(be, x, 4, dst_ne, &pc.x_off,
                                    (uint32_t *const[]){&pc.x_st0, &pc.x_st1, &pc.x_st2,
                                                        &pc.x_st3},
                                    "x"));
    PE_RETURN_IF_ERROR(put_view(be, pos, 3, pos->ne, &pc.pos_off,
                                (uint32_t *const[]){&pc.pos_st0, &pc.pos_st1, &pc.pos_st2},
                                "pos"));

    pc.flags = (uint32_t)op->layout & PE_SIN_FLAG_LAYOUT_MASK;
    if (has_x)
        pc.flags |= PE_SIN_FLAG_HAS_X;
    if (pos->dtype == POSENC_DTYPE_F32)
        pc.flags |= PE_SIN_FLAG_POS_F32;
    /* f16 fast paths: contiguous rows that start on even elements (unused strides are
     * 0 here, so "even" holds for them) let one invocation write whole words with plain
     * stores instead of two atomics per element. */
    const bool words_aligned = dst_f16 && pc.dst_st0 == 1 && (pc.dst_off & 1u) == 0 &&
                               (pc.dst_st1 & 1u) == 0 && (pc.dst_st2 & 1u) == 0 &&
                               (pc.dst_st3 & 1u) == 0;
    pc.n_units = pc.n_half;
    if (words_aligned && op->layout == POSENC_SIN_INTERLEAVED) {
        pc.flags |= PE_SIN_FLAG_DST_WORDS;
    } else if (words_aligned && (pc.n_half & 1u) == 0) { /* the half-split layouts */
        pc.flags |= PE_SIN_FLAG_DST_PAIR2;
        pc.n_units = pc.n_half / 2;
    }
    pc.x_scale = has_x ? op->x_scale : 1.0f;

    /* Grid-stride loop: idx + stride must not wrap around in uint32. */
    const uint32_t max_groups = be->props.limits.maxComputeWorkGroupCount[0] < 65535u
                                    ? be->props.limits.maxComputeWorkGroupCount[0]
                                    : 65535u;
    const int64_t max_stride = (int64_t)max_groups * PE_VK_SIN_WG;
    if (rows > INT64_MAX / pc.n_units ||
        (int64_t)pc.n_units * rows > (int64_t)UINT32_MAX - max_stride)
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan sinusoidal: %" PRId64 " x %" PRId64
                        " (sin, cos) pairs is more than this backend handles in one launch",
                        op->half, rows);
    pc.n_total = (uint32_t)((int64_t)pc.n_units * rows);
    uint32_t l_units, l_ne1, l_ne2;
    pe_vk_magic(pc.n_units, &pc.units_magic, &l_units);
    pe_vk_magic(pc.ne1, &pc.ne1_magic, &l_ne1);
    pe_vk_magic(pc.ne2, &pc.ne2_magic, &l_ne2);
    pc.shifts = l_units | l_ne1 << 8 | l_ne2 << 16;

    /* Pipeline for this variant. */
    const int variant = (dst_f16 ? 2 : 0) + (x_f16 ? 1 : 0);
    if (!be->sin_pipes[variant])
        PE_RETURN_IF_ERROR(create_pipeline(be, sin_shaders[variant].name,
                                           sin_shaders[variant].code,
                                           sin_shaders[variant].size, be->sin_layout,
                                           &be->sin_pipes[variant]));

    /* The previous submission may still read the frequency buffer and descriptor set. */
    PE_RETURN_IF_ERROR(pe_vk_wait(be));
    PE_RETURN_IF_ERROR(pe_vk_host_buffer_reserve(be, &be->freq,
                                                 (VkDeviceSize)op->half * sizeof(float),
                                                 VK_BUFFER_USAGE_STORAGE_BUFFER_BIT));
    memcpy(be->freq.map, op->freq_f32, (size_t)op->half * sizeof(float));

    const struct pe_vk_buffer *dbuf = dst->mem;
    const struct pe_vk_buffer *xbuf = has_x ? x->mem : dst->mem; /* unused without x */
    const struct pe_vk_buffer *pbuf = pos->mem;
    VkDescriptorBufferInfo info[PE_VK_BINDINGS] = {
        {dbuf->buf, 0, VK_WHOLE_SIZE},
        {xbuf->buf, 0, VK_WHOLE_SIZE},
        {pbuf->buf, 0, VK_WHOLE_SIZE},
        {be->freq.buf, 0, VK_WHOLE_SIZE},
    };
    VkWriteDescriptorSet w[PE_VK_BINDINGS];
    for (uint32_t i = 0; i < PE_VK_BINDINGS; i++) {
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = be->set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &info[i],
        };
    }
    vkUpdateDescriptorSets(be->dev, PE_VK_BINDINGS, w, 0, NULL);

    uint64_t groups = ((uint64_t)pc.n_total + PE_VK_SIN_WG - 1) / PE_VK_SIN_WG;
    uint32_t cap = max_groups;
    /* CPU implementations (lavapipe) pay a lot per workgroup (~180 instructions per
     * invocation measured): give each invocation more loop iterations there. */
    if (be->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && cap > PE_VK_CPU_MAX_GROUPS)
        cap = PE_VK_CPU_MAX_GROUPS;
    uint32_t gx = groups < cap ? (uint32_t)groups : cap;

    PE_RETURN_IF_ERROR(pe_vk_begin(be));
    vkCmdBindPipeline(be->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, be->sin_pipes[variant]);
    vkCmdBindDescriptorSets(be->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, be->sin_layout, 0, 1,
                            &be->set, 0, NULL);
    vkCmdPushConstants(be->cmd, be->sin_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
    vkCmdDispatch(be->cmd, gx, 1, 1);
    /* Not waited for here: the next call that needs the results or reuses the
     * frequency buffer / descriptor set waits (pe_vk_wait). */
    return pe_vk_submit(be, false);
}
