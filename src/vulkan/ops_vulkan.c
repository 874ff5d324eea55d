/*
 * ops_vulkan.c - the launch infrastructure of the Vulkan backend (declared in
 * vk_internal.h) and the sinusoidal op.
 *
 * Every shader uses the same descriptor set layout (PE_VK_MAX_BINDINGS storage buffers
 * in set 0) and the same pipeline layout (that set + PE_VK_PUSH_MAX bytes of push
 * constants), so every dispatch gets a fresh set of that layout from its batch's pools
 * (vk_submit.c); a shader declares only the bindings it reads. Pipelines are created on first use through
 * a VkPipelineCache and kept in a table keyed by their SPIR-V array and specialization
 * constants.
 *
 * Buffers are bound whole (descriptor offset 0, VK_WHOLE_SIZE); element offsets and
 * strides travel in push constants (src/kernel_abi.h), so a view may start anywhere.
 * A buffer larger than one binding may address (maxStorageBufferRange: 128 MiB on
 * lavapipe and many mobile GPUs) is bound as a window around each view instead
 * (pe_vk_put_view); src/split.c has already cut the op so that every window fits.
 */
#include "vk_internal.h"

#include "kernel_abi.h"
#include "split.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
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
} sin_shaders[4] = {
    {"sinusoidal_f32_f32", spv_sinusoidal_f32_f32, sizeof spv_sinusoidal_f32_f32},
    {"sinusoidal_f32_f16", spv_sinusoidal_f32_f16, sizeof spv_sinusoidal_f32_f16},
    {"sinusoidal_f16_f32", spv_sinusoidal_f16_f32, sizeof spv_sinusoidal_f16_f32},
    {"sinusoidal_f16_f16", spv_sinusoidal_f16_f16, sizeof spv_sinusoidal_f16_f16},
};

/* Workgroups per dispatch on CPU devices (see pe_vk_groups). */
#define PE_VK_CPU_MAX_GROUPS 64u

_Static_assert(sizeof(struct pe_vk_sinusoidal_push) <= PE_VK_PUSH_MAX, "push constants");

/* ------------------------------------------------------------------------------------ */
/* Layouts, pipelines, tables, dispatch                                                 */
/* ------------------------------------------------------------------------------------ */

posenc_status pe_vk_ops_init(struct pe_vk_backend *be)
{
    VkDescriptorSetLayoutBinding bind[PE_VK_MAX_BINDINGS];
    for (uint32_t i = 0; i < PE_VK_MAX_BINDINGS; i++) {
        bind[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    }
    VkDescriptorSetLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = PE_VK_MAX_BINDINGS,
        .pBindings = bind,
    };
    VkResult r = vkCreateDescriptorSetLayout(be->dev, &lci, NULL, &be->set_layout);
    if (r != VK_SUCCESS) {
        be->set_layout = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreateDescriptorSetLayout", r);
    }

    /* 128 bytes is what every Vulkan device guarantees (maxPushConstantsSize); a device
     * (or preset) that reports less cannot take posenc's layout. Each shader's own block
     * is checked against the limit too (pe_vk_check_shader). */
    /* Every shader sees PE_VK_MAX_BINDINGS storage buffers in one set (RoPE reads 7). The
     * specification's minimum is 4 per stage; a device that offers fewer than 8 cannot
     * take the layout. */
    const VkPhysicalDeviceLimits *lim = &be->props.limits;
    if (lim->maxPerStageDescriptorStorageBuffers < PE_VK_MAX_BINDINGS ||
        lim->maxDescriptorSetStorageBuffers < PE_VK_MAX_BINDINGS ||
        lim->maxPerStageResources < PE_VK_MAX_BINDINGS)
        return pe_error(be->base.ctx, POSENC_ERR_UNAVAILABLE,
                        "vulkan: the device reports maxPerStageDescriptorStorageBuffers = %u, "
                        "maxDescriptorSetStorageBuffers = %u, maxPerStageResources = %u; "
                        "posenc's shaders need %d storage buffers",
                        (unsigned)lim->maxPerStageDescriptorStorageBuffers,
                        (unsigned)lim->maxDescriptorSetStorageBuffers,
                        (unsigned)lim->maxPerStageResources, (int)PE_VK_MAX_BINDINGS);
    if (be->props.limits.maxPushConstantsSize < PE_VK_PUSH_MAX)
        return pe_error(be->base.ctx, POSENC_ERR_UNAVAILABLE,
                        "vulkan: the device reports maxPushConstantsSize = %u; posenc needs %d "
                        "(the Vulkan minimum)",
                        (unsigned)be->props.limits.maxPushConstantsSize, (int)PE_VK_PUSH_MAX);
    VkPushConstantRange range = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        .offset = 0,
        .size = PE_VK_PUSH_MAX,
    };
    VkPipelineLayoutCreateInfo plci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &be->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &range,
    };
    r = vkCreatePipelineLayout(be->dev, &plci, NULL, &be->pipe_layout);
    if (r != VK_SUCCESS) {
        be->pipe_layout = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreatePipelineLayout", r);
    }

    /* Descriptor sets come from per-batch pools (pe_vk_descriptor_set, vk_submit.c): a
     * set is never rewritten while a submitted batch may still use it. */
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
    for (uint32_t i = 0; i < be->n_pipes; i++)
        if (be->pipes[i].pipe)
            vkDestroyPipeline(be->dev, be->pipes[i].pipe, NULL);
    free(be->pipes);
    be->pipes = NULL;
    be->n_pipes = be->cap_pipes = 0;
    if (be->pipe_cache)
        vkDestroyPipelineCache(be->dev, be->pipe_cache, NULL);
    if (be->pipe_layout)
        vkDestroyPipelineLayout(be->dev, be->pipe_layout, NULL);
    if (be->set_layout)
        vkDestroyDescriptorSetLayout(be->dev, be->set_layout, NULL);
    be->pipe_cache = VK_NULL_HANDLE;
    be->pipe_layout = VK_NULL_HANDLE;
    be->set_layout = VK_NULL_HANDLE;
}

static posenc_status create_pipeline(struct pe_vk_backend *be, const char *name,
                                     const uint32_t *code, size_t size, const uint32_t *spec,
                                     uint32_t n_spec, VkPipeline *out)
{
    VkSpecializationMapEntry map[PE_VK_MAX_SPEC];
    for (uint32_t i = 0; i < n_spec; i++)
        map[i] = (VkSpecializationMapEntry){
            .constantID = i, .offset = i * (uint32_t)sizeof(uint32_t), .size = sizeof(uint32_t)};
    const VkSpecializationInfo si = {
        .mapEntryCount = n_spec,
        .pMapEntries = map,
        .dataSize = n_spec * sizeof(uint32_t),
        .pData = spec,
    };
    VkShaderModuleCreateInfo smci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = size,
        .pCode = code,
    };
    const int64_t t0 = pe_mono_ns();
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
                .pSpecializationInfo = n_spec ? &si : NULL,
            },
        .layout = be->pipe_layout,
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
    /* the build time and the constants (which variant), for a slow first call: most
     * drivers compile here; lavapipe compiles at the variant's first dispatch instead */
    char sp[PE_VK_MAX_SPEC * 11 + 1] = "";
    for (uint32_t i = 0, n = 0; i < n_spec; i++)
        n += (uint32_t)snprintf(sp + n, sizeof sp - n, " %" PRIu32, spec[i]);
    pe_log(be->base.ctx, POSENC_LOG_DEBUG, "vulkan: built pipeline %s in %.3f s (spec:%s)",
           name, (double)(pe_mono_ns() - t0) * 1e-9, n_spec ? sp : " none");
    return POSENC_OK;
}

posenc_status pe_vk_pipeline_spec(struct pe_vk_backend *be, const char *name,
                                  const uint32_t *code, size_t size, const uint32_t *spec,
                                  uint32_t n_spec, VkPipeline *out)
{
    *out = VK_NULL_HANDLE;
    if (n_spec > PE_VK_MAX_SPEC)
        return pe_error(be->base.ctx, POSENC_ERR_BACKEND,
                        "vulkan: %" PRIu32 " specialization constants (at most %d)", n_spec,
                        (int)PE_VK_MAX_SPEC);
    for (uint32_t i = 0; i < be->n_pipes; i++) {
        const struct pe_vk_pipe *p = &be->pipes[i];
        if (p->code == code && p->n_spec == n_spec &&
            (n_spec == 0 || memcmp(p->spec, spec, n_spec * sizeof *spec) == 0)) {
            *out = p->pipe;
            return POSENC_OK;
        }
    }
    /* the shader's work-group, shared memory and push constants against the limits the
     * device reports (or POSENC_DEVICE_PRESET's): vk_limits.c */
    PE_RETURN_IF_ERROR(pe_vk_check_shader(be, name, code, size, spec, n_spec));
    if (pe_fault_build())
        return pe_error(be->base.ctx, POSENC_ERR_BACKEND,
                        "vkCreateComputePipelines (%s) failed (injected fault)", name);
    if (be->n_pipes == be->cap_pipes) {
        uint32_t cap = be->cap_pipes ? 2 * be->cap_pipes : 32;
        struct pe_vk_pipe *np = realloc(be->pipes, cap * sizeof *np);
        if (!np)
            return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "out of host memory (pipeline table)");
        be->pipes = np;
        be->cap_pipes = cap;
    }
    VkPipeline pipe;
    PE_RETURN_IF_ERROR(create_pipeline(be, name, code, size, spec, n_spec, &pipe));
    struct pe_vk_pipe *p = &be->pipes[be->n_pipes++];
    memset(p, 0, sizeof *p);
    p->code = code;
    p->n_spec = n_spec;
    if (n_spec)
        memcpy(p->spec, spec, n_spec * sizeof *spec);
    p->pipe = pipe;
    *out = pipe;
    return POSENC_OK;
}

posenc_status pe_vk_pipeline(struct pe_vk_backend *be, const char *name, const uint32_t *code,
                             size_t size, VkPipeline *out)
{
    return pe_vk_pipeline_spec(be, name, code, size, NULL, 0, out);
}

posenc_status pe_vk_table(struct pe_vk_backend *be, int slot, const void *data, size_t size,
                          struct pe_vk_bind *out)
{
    *out = (struct pe_vk_bind){VK_NULL_HANDLE, 0, VK_WHOLE_SIZE};
    if (slot < 0 || slot >= PE_VK_TABLES)
        return pe_error(be->base.ctx, POSENC_ERR_BACKEND, "vulkan: no table slot %d", slot);
    /* A fresh range of the batch the next dispatch goes into: earlier batches may still
     * read theirs, so nothing is overwritten and nothing waits. */
    PE_RETURN_IF_ERROR(pe_vk_begin(be));
    VkDeviceSize n = size < 4 ? 4 : (VkDeviceSize)((size + 3u) & ~(size_t)3u);
    void *map;
    PE_RETURN_IF_ERROR(pe_vk_arena(be, n, &out->buf, &out->off, &map));
    if (size)
        memcpy(map, data, size);
    out->range = n;
    return POSENC_OK;
}

posenc_status pe_vk_dispatch_rw(struct pe_vk_backend *be, VkPipeline pipe, uint32_t n_bufs,
                                const struct pe_vk_bind *binds, uint32_t write_mask,
                                const void *push, uint32_t push_size, uint32_t gx, uint32_t gy,
                                uint32_t gz)
{
    if (n_bufs == 0 || n_bufs > PE_VK_MAX_BINDINGS || push_size > PE_VK_PUSH_MAX ||
        (push_size & 3u) != 0)
        return pe_error(be->base.ctx, POSENC_ERR_BACKEND,
                        "vulkan: bad dispatch (%" PRIu32 " buffers, %" PRIu32
                        " bytes of push constants)",
                        n_bufs, push_size);
    if (gx == 0 || gy == 0 || gz == 0 || be->base.prepare_only)
        return POSENC_OK;
    PE_RETURN_IF_ERROR(pe_vk_begin(be));
    /* A set of the current batch: the sets of batches still in flight are never touched. */
    VkDescriptorSet set;
    PE_RETURN_IF_ERROR(pe_vk_descriptor_set(be, &set));
    VkDescriptorBufferInfo info[PE_VK_MAX_BINDINGS];
    VkWriteDescriptorSet w[PE_VK_MAX_BINDINGS];
    for (uint32_t i = 0; i < PE_VK_MAX_BINDINGS; i++) {
        const struct pe_vk_bind *bd = &binds[i < n_bufs ? i : 0];
        info[i] = (VkDescriptorBufferInfo){bd->buf, bd->off, bd->range};
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &info[i],
        };
    }
    vkUpdateDescriptorSets(be->dev, PE_VK_MAX_BINDINGS, w, 0, NULL);

    /* A barrier only if this dispatch depends on an earlier command of the batch. */
    pe_vk_access(be, n_bufs, binds, write_mask);
    vkCmdBindPipeline(be->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(be->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, be->pipe_layout, 0, 1, &set,
                            0, NULL);
    if (push_size)
        vkCmdPushConstants(be->cmd, be->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size,
                           push);
    vkCmdDispatch(be->cmd, gx, gy, gz);
    /* Not waited for: submitted with its batch (when full, on a flush, or before the next
     * host wait). */
    return pe_vk_recorded(be);
}

static uint32_t max_groups_x(const struct pe_vk_backend *be)
{
    uint32_t m = be->props.limits.maxComputeWorkGroupCount[0];
    return m < 65535u ? m : 65535u;
}

uint32_t pe_vk_groups(const struct pe_vk_backend *be, uint64_t n_items, uint32_t wg,
                      uint32_t cpu_cap)
{
    uint64_t groups = (n_items + wg - 1) / wg;
    uint32_t cap = max_groups_x(be);
    if (be->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && cpu_cap && cap > cpu_cap)
        cap = cpu_cap;
    return groups < cap ? (uint32_t)groups : cap;
}

bool pe_vk_grid_fits(const struct pe_vk_backend *be, uint64_t n_items, uint32_t wg)
{
    return n_items <= (uint64_t)UINT32_MAX - (uint64_t)max_groups_x(be) * wg;
}

/*
 * Magic number for dividing any uint32 by d (1 <= d < 2^32) with a multiply-high, as
 * pe_udiv in shaders/common.glsl does: l = ceil(log2 d), magic = floor(2^32 (2^l - d) / d)
 * + 1 (the "round-up" method, Hacker's Delight 10-9; checked exhaustively over edge
 * cases and randomly over all d and n).
 */
void pe_vk_magic(uint32_t d, uint32_t *out_magic, uint32_t *out_l)
{
    uint32_t l = 0;
    while (l < 32 && ((uint64_t)1 << l) < d)
        l++;
    *out_l = l;
    *out_magic = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - d)) / d + 1);
}

posenc_status pe_vk_put_u32(struct pe_vk_backend *be, const char *op, uint32_t *dst, int64_t v,
                            const char *what)
{
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan %s: %s = %" PRId64 " does not fit in 32 bits", op, what, v);
    *dst = (uint32_t)v;
    return POSENC_OK;
}

/* A non-negative int64 that must fit in uint32; the message names `name` and `what` only
 * when it does not (formatting it on every call cost ~1.5K instructions per view). */
static posenc_status put_u32_named(struct pe_vk_backend *be, const char *op, uint32_t *dst,
                                   int64_t v, const char *name, const char *what, int k)
{
    if (v >= 0 && v <= (int64_t)UINT32_MAX) {
        *dst = (uint32_t)v;
        return POSENC_OK;
    }
    char buf[64];
    if (k >= 0)
        snprintf(buf, sizeof buf, "%s %s %d (elements)", name, what, k);
    else
        snprintf(buf, sizeof buf, "%s %s", name, what);
    return pe_vk_put_u32(be, op, dst, v, buf);
}

posenc_status pe_vk_put_view(struct pe_vk_backend *be, const char *op, const struct pe_view *v,
                             int n, const int64_t *ne, uint32_t *off, uint32_t *const st[],
                             const char *name, struct pe_vk_bind *bind)
{
    const struct pe_vk_buffer *vb = v->mem;
    int64_t max = v->offset;
    for (int k = 0; k < n; k++) {
        int64_t s = ne[k] > 1 ? v->st[k] : 0;
        PE_RETURN_IF_ERROR(put_u32_named(be, op, st[k], s, name, "stride", k));
        if (ne[k] > 1) {
            if (s > 0 && ne[k] - 1 > (INT64_MAX - max) / s)
                max = INT64_MAX;
            else
                max += (ne[k] - 1) * s;
        }
    }
    int64_t base = 0; /* elements before the window */
    *bind = (struct pe_vk_bind){vb->buf, 0, VK_WHOLE_SIZE};
    const uint64_t limit = pe_binding_limit(be->base.ctx, NULL);
    if (limit && vb->size > limit && max < INT64_MAX / 8) {
        const VkDeviceSize es = posenc_dtype_size(v->dtype);
        VkDeviceSize align = be->props.limits.minStorageBufferOffsetAlignment;
        if (align < 16)
            align = 16;
        const VkDeviceSize lo = (VkDeviceSize)v->offset * es;
        VkDeviceSize hi = ((VkDeviceSize)(max + 1) * es + 15u) & ~(VkDeviceSize)15u;
        if (hi > vb->size)
            hi = vb->size;
        const VkDeviceSize start = lo / align * align; /* align need not be a power of 2 */
        if (hi - start > be->props.limits.maxStorageBufferRange)
            return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                            "vulkan %s: %s spans %" PRIu64 " bytes from byte %" PRIu64
                            ", more than maxStorageBufferRange (%" PRIu32 " bytes)",
                            op, name, (uint64_t)(hi - start), (uint64_t)start,
                            be->props.limits.maxStorageBufferRange);
        *bind = (struct pe_vk_bind){vb->buf, start, hi - start};
        base = (int64_t)(start / es);
    }
    PE_RETURN_IF_ERROR(put_u32_named(be, op, off, v->offset - base, name, "offset (elements)", -1));
    uint32_t dummy;
    return put_u32_named(be, op, &dummy, max == INT64_MAX ? max : max - base, name,
                         "largest element index", -1);
}

bool pe_vk_same_view(const struct pe_view *a, const struct pe_view *b)
{
    if (a->mem != b->mem || a->dtype != b->dtype || a->offset != b->offset)
        return false;
    for (int k = 0; k < 4; k++)
        if (a->ne[k] != b->ne[k] || (a->ne[k] > 1 && a->st[k] != b->st[k]))
            return false;
    return true;
}

/* ------------------------------------------------------------------------------------ */
/* sinusoidal                                                                           */
/* ------------------------------------------------------------------------------------ */

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
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "sinusoidal", &pc.n_half, op->half, "d/2"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "sinusoidal", &pc.ne1, dst->ne[1], "dst->ne[1]"));
    PE_RETURN_IF_ERROR(pe_vk_put_u32(be, "sinusoidal", &pc.ne2, dst->ne[2], "dst->ne[2]"));

    const int64_t dst_ne[4] = {2 * op->half, dst->ne[1], dst->ne[2], dst->ne[3]};
    struct pe_vk_bind binds[4];
    PE_RETURN_IF_ERROR(pe_vk_put_view(
        be, "sinusoidal", dst, 4, dst_ne, &pc.dst_off,
        (uint32_t *const[]){&pc.dst_st0, &pc.dst_st1, &pc.dst_st2, &pc.dst_st3}, "dst",
        &binds[0]));
    binds[1] = binds[0]; /* not read without x */
    if (has_x)
        PE_RETURN_IF_ERROR(pe_vk_put_view(
            be, "sinusoidal", x, 4, dst_ne, &pc.x_off,
            (uint32_t *const[]){&pc.x_st0, &pc.x_st1, &pc.x_st2, &pc.x_st3}, "x", &binds[1]));
    PE_RETURN_IF_ERROR(pe_vk_put_view(be, "sinusoidal", pos, 3, pos->ne, &pc.pos_off,
                                      (uint32_t *const[]){&pc.pos_st0, &pc.pos_st1, &pc.pos_st2},
                                      "pos", &binds[2]));

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

    /* The vector path (kernel_abi.h): whole vec4 (f32) or uvec4 of 8 halves (f16)
     * accesses and sin/cos shared by the rows of dim 2, units of 4 pairs (f32) or 8 (any
     * f16 tensor). CPU implementations scalarize every buffer access per invocation and
     * component (lavapipe: about 10 instructions each), so this is most of the time. */
    const uint32_t vp = dst_f16 || x_f16 ? 8u : 4u; /* pairs per unit */
    const uint32_t a_dst = pc.dst_off | pc.dst_st1 | pc.dst_st2 | pc.dst_st3;
    const uint32_t a_x = has_x ? pc.x_off | pc.x_st1 | pc.x_st2 | pc.x_st3 : 0u;
    const bool vec = pc.n_half % vp == 0 && pc.dst_st0 == 1 && (!has_x || pc.x_st0 == 1) &&
                     (a_dst & (dst_f16 ? 7u : 3u)) == 0 && (a_x & (x_f16 ? 7u : 3u)) == 0 &&
                     rows / dst->ne[2] <= INT64_MAX / (pc.n_half / vp) &&
                     pe_vk_grid_fits(be, (uint64_t)(pc.n_half / vp) * (uint64_t)(rows / dst->ne[2]),
                                     PE_VK_SIN_WG);
    const int variant = (dst_f16 ? 2 : 0) + (x_f16 ? 1 : 0);
    if (vec) {
        const uint32_t spec = PE_SIN_SPEC_VEC | (has_x ? PE_SIN_SPEC_HAS_X : 0u) |
                              (pc.pos_st1 == 0 ? PE_SIN_SPEC_POS_SHARED : 0u) |
                              ((uint32_t)op->layout & 3u) << PE_SIN_SPEC_LAYOUT_SHIFT;
        pc.n_units = pc.n_half / vp;
        pc.n_total = (uint32_t)((int64_t)pc.n_units * (rows / dst->ne[2]));
        uint32_t l_units, l_ne1;
        pe_vk_magic(pc.n_units, &pc.units_magic, &l_units);
        pe_vk_magic(pc.ne1, &pc.ne1_magic, &l_ne1);
        pc.shifts = l_units | l_ne1 << 8;
        VkPipeline pipe;
        PE_RETURN_IF_ERROR(pe_vk_pipeline_spec(be, sin_shaders[variant].name,
                                               sin_shaders[variant].code,
                                               sin_shaders[variant].size, &spec, 1, &pipe));
        PE_RETURN_IF_ERROR(
            pe_vk_table(be, 0, op->freq_f32, 2 * (size_t)op->half * sizeof(float), &binds[3]));
        const uint32_t gx = pe_vk_groups(be, pc.n_total, PE_VK_SIN_WG, PE_VK_CPU_MAX_GROUPS);
        return pe_vk_dispatch_rw(be, pipe, 4, binds, 1u << 0 /* dst */, &pc, sizeof pc, gx,
                                 1, 1);
    }

    /* Grid-stride loop: idx + stride must not wrap around in uint32. */
    if (rows > INT64_MAX / pc.n_units ||
        !pe_vk_grid_fits(be, (uint64_t)pc.n_units * (uint64_t)rows, PE_VK_SIN_WG))
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
    VkPipeline pipe;
    const uint32_t spec = 0; /* the general path */
    PE_RETURN_IF_ERROR(pe_vk_pipeline_spec(be, sin_shaders[variant].name,
                                           sin_shaders[variant].code, sin_shaders[variant].size,
                                           &spec, 1, &pipe));
    /* the frequencies' hi words, then their lo words (pe_freq_split) */
    PE_RETURN_IF_ERROR(
        pe_vk_table(be, 0, op->freq_f32, 2 * (size_t)op->half * sizeof(float), &binds[3]));
    /* CPU implementations (lavapipe) pay a lot per workgroup (~180 instructions per
     * invocation measured): give each invocation more loop iterations there. */
    const uint32_t gx = pe_vk_groups(be, pc.n_total, PE_VK_SIN_WG, PE_VK_CPU_MAX_GROUPS);
    return pe_vk_dispatch_rw(be, pipe, 4, binds, 1u << 0 /* dst */, &pc, sizeof pc, gx, 1, 1);
}
